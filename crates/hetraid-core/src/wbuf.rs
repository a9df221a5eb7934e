//! The write buffer's rules (the RAIDX paper's buffer, SPEC §10): admission,
//! how many drain it at once, and which write drains next — one set for the
//! engine's buffer and the simulator's.

/// Writes drained at once (`serve --write-buffer`'s drainers).
pub const DRAINERS: usize = 16;

/// Which queued write drains next: the first (oldest) one that overlaps no
/// running write and no write queued before it, so the members end with the
/// newest bytes of every overlap and writes that do not overlap go out in
/// parallel. `queued` and `running` are [start, end) ranges, `queued` oldest
/// first.
pub fn next_to_drain(queued: &[(u64, u64)], running: &[(u64, u64)]) -> Option<usize> {
    let apart = |a: (u64, u64), b: (u64, u64)| a.1 <= b.0 || b.1 <= a.0;
    queued.iter().enumerate().position(|(i, &q)| {
        running.iter().all(|&r| apart(q, r)) && queued[..i].iter().all(|&b| apart(q, b))
    })
}

/// May a write of `len` bytes enter a buffer of `capacity` holding `used`?
/// When it fits; and always into an empty buffer (a write larger than the
/// buffer waits for it to empty, then goes through alone, so it is never
/// refused).
pub fn admits(used: u64, len: u64, capacity: u64) -> bool {
    used == 0 || used.saturating_add(len) <= capacity
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_write_clear_of_running_and_earlier_ones_drains_next() {
        assert_eq!(next_to_drain(&[(0, 10), (20, 30)], &[]), Some(0));
        assert_eq!(next_to_drain(&[(0, 10), (20, 30)], &[(5, 6)]), Some(1));
        // (5, 25) overlaps the write before it: it waits behind it.
        assert_eq!(next_to_drain(&[(5, 25)], &[(0, 10)]), None);
        assert_eq!(
            next_to_drain(&[(0, 10), (5, 25), (40, 50)], &[(0, 10)]),
            Some(2)
        );
        assert_eq!(next_to_drain(&[], &[]), None);
    }

    #[test]
    fn fits_or_waits_for_an_empty_buffer() {
        assert!(admits(0, 10, 100));
        assert!(admits(90, 10, 100));
        assert!(!admits(91, 10, 100));
        assert!(admits(0, 1000, 100), "a large write goes alone");
        assert!(!admits(1, 1000, 100));
    }
}
