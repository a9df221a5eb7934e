//! The write buffer's admission rule (the RAIDX paper's buffer, SPEC §10):
//! one rule for the engine's buffer and the simulator's.

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
    fn fits_or_waits_for_an_empty_buffer() {
        assert!(admits(0, 10, 100));
        assert!(admits(90, 10, 100));
        assert!(!admits(91, 10, 100));
        assert!(admits(0, 1000, 100), "a large write goes alone");
        assert!(!admits(1, 1000, 100));
    }
}
