//! The write buffer's rules (the RAIDX paper's buffer, [Fekete, Varki]): admission,
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

/// A buffered write waiting or draining: its ticket (order of arrival),
/// where it goes, and what the executor keeps with it (the bytes in the
/// engine, the request in the simulator).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Buffered<T> {
    pub ticket: u64,
    pub offset: u64,
    pub len: u64,
    pub item: T,
}

/// The write buffer's procedure as one state machine, driven by the engine's
/// drainer threads and by the simulator's events alike: writes taken in
/// while they fit ([`admits`]), drained at most `drainers` at once in the
/// order [`next_to_drain`] gives, their room given back when each is done.
/// The executors keep only what they must: the engine its condition
/// variable, index and errors; the simulator the requests waiting for room.
#[derive(Debug)]
pub struct DrainQueue<T> {
    capacity: u64,
    drainers: usize,
    used: u64,
    next_ticket: u64,
    queued: std::collections::VecDeque<Buffered<T>>,
    /// Draining: (ticket, start, end).
    running: Vec<(u64, u64, u64)>,
}

impl<T> DrainQueue<T> {
    /// A buffer of `capacity` bytes drained by at most `drainers` writes at
    /// once.
    pub fn new(capacity: u64, drainers: usize) -> Self {
        assert!(
            drainers > 0,
            "a write buffer drains through one drainer or more"
        );
        Self {
            capacity,
            drainers,
            used: 0,
            next_ticket: 0,
            queued: Default::default(),
            running: Vec::new(),
        }
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Bytes buffered (queued or draining).
    pub fn used(&self) -> u64 {
        self.used
    }

    /// Writes waiting to drain.
    pub fn queued(&self) -> usize {
        self.queued.len()
    }

    /// May a write of `len` bytes come in now?
    pub fn admits(&self, len: u64) -> bool {
        admits(self.used, len, self.capacity)
    }

    /// Take a write in (the caller asked [`Self::admits`]): its ticket.
    pub fn push(&mut self, offset: u64, len: u64, item: T) -> u64 {
        debug_assert!(self.admits(len), "a write taken in without room");
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.used += len;
        self.queued.push_back(Buffered {
            ticket,
            offset,
            len,
            item,
        });
        ticket
    }

    /// The write to drain next, now draining; None while `drainers` drain
    /// or every queued write overlaps one draining or queued before it.
    pub fn start_next(&mut self) -> Option<Buffered<T>> {
        if self.running.len() >= self.drainers {
            return None;
        }
        let queued: Vec<(u64, u64)> = self
            .queued
            .iter()
            .map(|b| (b.offset, b.offset + b.len))
            .collect();
        let running: Vec<(u64, u64)> = self.running.iter().map(|&(_, s, e)| (s, e)).collect();
        let i = next_to_drain(&queued, &running)?;
        let b = self.queued.remove(i).expect("picked");
        self.running.push((b.ticket, b.offset, b.offset + b.len));
        Some(b)
    }

    /// Write `ticket` is on the members: its room is free.
    pub fn done(&mut self, ticket: u64) {
        let k = self
            .running
            .iter()
            .position(|r| r.0 == ticket)
            .expect("a draining write is done once");
        let (_, s, e) = self.running.swap_remove(k);
        self.used -= e - s;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_queue_drains_in_order_within_its_drainers_and_frees_room() {
        let mut q = DrainQueue::new(100, 2);
        assert!(q.admits(60));
        let a = q.push(0, 60, 'a');
        assert!(!q.admits(50), "60 + 50 > 100");
        let b = q.push(60, 40, 'b');
        assert_eq!((q.used(), q.queued()), (100, 2));
        // Both drain at once (apart); a third waits for a drainer.
        assert_eq!(q.start_next().map(|w| (w.ticket, w.item)), Some((a, 'a')));
        assert_eq!(q.start_next().map(|w| (w.ticket, w.item)), Some((b, 'b')));
        q.done(a);
        assert_eq!(q.used(), 40);
        let c = q.push(0, 10, 'c');
        let d = q.push(5, 10, 'd');
        let e = q.push(80, 10, 'e');
        // c is clear; d overlaps c (queued before it); e overlaps b
        // (draining). One drainer is free: c.
        assert_eq!(q.start_next().map(|w| w.ticket), Some(c));
        assert!(q.start_next().is_none(), "both drainers busy");
        q.done(b);
        // d still waits behind c; e is clear now.
        assert_eq!(q.start_next().map(|w| w.ticket), Some(e));
        q.done(c);
        assert_eq!(q.start_next().map(|w| w.ticket), Some(d));
        q.done(e);
        q.done(d);
        assert_eq!((q.used(), q.queued()), (0, 0));
        // A write larger than the buffer goes alone, into an empty buffer.
        assert!(q.admits(1000));
    }

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
