//! One budget for the bytes every connection holds at once: write payloads
//! as they arrive, read replies as they are built, and the buffers kept for
//! reuse (`serve --memory-limit`). A request that finds no room waits (its
//! client waits with it); the server never grows past the limit. Holders
//! end on their own — a reply is sent or its client dropped at the stall
//! timeout, a payload arrives or its client is dropped — so a wait ends.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// The smallest limit: one largest read reply (32 MiB, aligned, with its
/// header) and one write piece must fit together.
pub const MEMORY_LIMIT_MIN: u64 = 64 << 20;

/// The default limit: an eighth of the machine's memory, 64 MiB..4 GiB.
pub fn default_memory_limit() -> u64 {
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kib| kib.parse::<u64>().ok())
        })
        .map_or(2 << 30, |kib| kib << 10);
    (total / 8).clamp(MEMORY_LIMIT_MIN, 4 << 30)
}

#[derive(Debug, Default)]
struct State {
    used: u64,
}

/// The bytes held by every connection together, bounded by `limit`.
#[derive(Debug)]
pub struct MemoryBudget {
    limit: u64,
    state: Mutex<State>,
    freed: Condvar,
    /// Requests waiting for room: read without the lock by every request
    /// that keeps a buffer (`pressed`).
    waiting: std::sync::atomic::AtomicUsize,
}

impl MemoryBudget {
    pub fn new(limit: u64) -> Arc<Self> {
        Arc::new(Self {
            limit,
            state: Mutex::new(State::default()),
            freed: Condvar::new(),
            waiting: Default::default(),
        })
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Bytes held now.
    pub fn used(&self) -> u64 {
        self.state.lock().unwrap().used
    }

    /// Take `n` bytes if they are free now.
    pub fn try_take(&self, n: u64) -> bool {
        let mut s = self.state.lock().unwrap();
        if s.used + n <= self.limit {
            s.used += n;
            true
        } else {
            false
        }
    }

    /// Take `n` bytes, waiting while they are not free. `give_up` is asked
    /// every 100 ms (the connection ended): then nothing is taken and the
    /// answer is false. `n` above the limit can never be taken; callers
    /// keep every request within it (`MEMORY_LIMIT_MIN`).
    pub fn take(&self, n: u64, give_up: impl Fn() -> bool) -> bool {
        assert!(
            n <= self.limit,
            "{n} bytes asked of a {} budget",
            self.limit
        );
        use std::sync::atomic::Ordering::Relaxed;
        let mut s = self.state.lock().unwrap();
        self.waiting.fetch_add(1, Relaxed);
        // Bounded: holders give back when their reply is sent, their payload
        // arrives, or their client is dropped (stall timeout); `give_up`
        // ends the wait of a connection that ended.
        while s.used + n > self.limit {
            if give_up() {
                self.waiting.fetch_sub(1, Relaxed);
                return false;
            }
            s = self
                .freed
                .wait_timeout(s, Duration::from_millis(100))
                .unwrap()
                .0;
        }
        self.waiting.fetch_sub(1, Relaxed);
        s.used += n;
        true
    }

    pub fn give(&self, n: u64) {
        let mut s = self.state.lock().unwrap();
        assert!(n <= s.used, "{n} bytes given back of {} held", s.used);
        s.used -= n;
        drop(s);
        self.freed.notify_all();
    }

    /// Someone waits for room: buffers are given back, not kept for reuse.
    pub fn pressed(&self) -> bool {
        self.waiting.load(std::sync::atomic::Ordering::Relaxed) > 0
    }
}

/// A buffer whose capacity is held in a `MemoryBudget` (given back when it
/// is dropped, whatever path drops it).
#[derive(Debug)]
pub struct ChargedBuf {
    pub buf: Vec<u8>,
    charged: u64,
    budget: Arc<MemoryBudget>,
}

impl ChargedBuf {
    pub fn new(budget: &Arc<MemoryBudget>) -> Self {
        Self {
            buf: Vec::new(),
            charged: 0,
            budget: budget.clone(),
        }
    }

    /// Make room for `cap` bytes in all, taking what is missing from the
    /// budget first (waiting as `MemoryBudget::take` does). False: the
    /// connection gave up, nothing changed.
    pub fn reserve_total(&mut self, cap: usize, give_up: impl Fn() -> bool) -> bool {
        if self.buf.capacity() >= cap {
            return true;
        }
        let more = cap as u64 - self.charged;
        if !self.budget.take(more, give_up) {
            return false;
        }
        self.charged += more;
        self.buf.reserve_exact(cap - self.buf.len());
        self.settle();
        true
    }

    /// Charge what the buffer holds now: after it was swapped or shrunk
    /// (an error reply in place of a read's data), or grew past a
    /// reservation (the allocator's rounding).
    pub fn settle(&mut self) {
        let cap = self.buf.capacity() as u64;
        if cap < self.charged {
            self.budget.give(self.charged - cap);
        } else if cap > self.charged {
            // Rounding only: a few bytes, taken without waiting.
            self.budget.state.lock().unwrap().used += cap - self.charged;
        }
        self.charged = cap;
    }

    pub fn charged(&self) -> u64 {
        self.charged
    }
}

impl Drop for ChargedBuf {
    fn drop(&mut self) {
        if self.charged > 0 {
            self.budget.give(self.charged);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_gives_back_what_it_was_charged() {
        let b = MemoryBudget::new(MEMORY_LIMIT_MIN);
        let mut c = ChargedBuf::new(&b);
        assert!(c.reserve_total(1 << 20, || false));
        assert!(b.used() >= 1 << 20);
        c.buf.resize(1 << 20, 7);
        assert!(c.reserve_total(3 << 20, || false));
        assert_eq!(b.used(), c.charged());
        c.buf = vec![0; 16];
        c.settle();
        assert_eq!(b.used(), c.charged());
        drop(c);
        assert_eq!(b.used(), 0);
    }

    #[test]
    fn a_full_budget_makes_the_next_one_wait_until_room_is_given_back() {
        let b = MemoryBudget::new(MEMORY_LIMIT_MIN);
        let mut first = ChargedBuf::new(&b);
        assert!(first.reserve_total(MEMORY_LIMIT_MIN as usize, || false));
        // Gives up while nothing is freed: nothing taken.
        let mut second = ChargedBuf::new(&b);
        let tries = std::sync::atomic::AtomicUsize::new(0);
        assert!(!second.reserve_total(1 << 20, || {
            tries.fetch_add(1, std::sync::atomic::Ordering::Relaxed) >= 2
        }));
        assert_eq!(second.charged(), 0);
        assert!(!b.pressed());
        // Another thread waits (the budget is pressed) until room is given
        // back; then the wait ends with the bytes taken.
        let b2 = b.clone();
        let t = std::thread::spawn(move || {
            let mut c = ChargedBuf::new(&b2);
            let ok = c.reserve_total(1 << 20, || false);
            (ok, c)
        });
        let waited = std::time::Instant::now();
        while !b.pressed() && waited.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(b.pressed());
        drop(first);
        let (ok, c) = t.join().unwrap();
        assert!(ok);
        assert_eq!(b.used(), c.charged());
        assert!(b.used() <= b.limit());
        drop((second, c));
        assert_eq!(b.used(), 0);
    }
}
