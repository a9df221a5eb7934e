//! The discrete-event kernel: integer-nanosecond time, an event heap ordered by
//! (time, sequence) so simultaneous events pop in the order they were scheduled, and
//! a seeded random number generator.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// Simulated time in nanoseconds.
pub type Ns = u64;

pub const NS_PER_S: u64 = 1_000_000_000;

struct Entry<E> {
    at: Ns,
    seq: u64,
    event: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<E> Ord for Entry<E> {
    fn cmp(&self, o: &Self) -> Ordering {
        // Reversed: BinaryHeap is a max-heap and we pop the earliest.
        (o.at, o.seq).cmp(&(self.at, self.seq))
    }
}

/// The event queue and the clock.
pub struct Kernel<E> {
    heap: BinaryHeap<Entry<E>>,
    seq: u64,
    now: Ns,
}

impl<E> Default for Kernel<E> {
    fn default() -> Self {
        Self {
            heap: BinaryHeap::new(),
            seq: 0,
            now: 0,
        }
    }
}

impl<E> Kernel<E> {
    pub fn now(&self) -> Ns {
        self.now
    }

    /// Schedule `event` at `at` (never in the past).
    pub fn at(&mut self, at: Ns, event: E) {
        debug_assert!(at >= self.now, "event scheduled in the past");
        self.seq += 1;
        self.heap.push(Entry {
            at: at.max(self.now),
            seq: self.seq,
            event,
        });
    }

    /// The next event; advances the clock to it.
    pub fn pop(&mut self) -> Option<E> {
        let e = self.heap.pop()?;
        self.now = e.at;
        Some(e.event)
    }

    pub fn pending(&self) -> usize {
        self.heap.len()
    }
}

/// xoshiro256** seeded through SplitMix64.
///
/// Written here rather than taken from `rand`: a seed must replay the same run in
/// every future build, and `rand` documents that its small generators may change
/// between versions. These 30 lines are the published reference algorithm.
#[derive(Debug, Clone)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    pub fn new(seed: u64) -> Self {
        let mut x = seed;
        let mut next = || {
            x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        Self {
            s: [next(), next(), next(), next()],
        }
    }

    pub fn next_u64(&mut self) -> u64 {
        let r = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        r
    }

    /// Uniform in `0..n` (n > 0), by Lemire's multiply-shift (bias below 2^-64 n).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Exponentially distributed with the given mean.
    pub fn exp(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.unit()).ln()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_pop_in_time_then_schedule_order() {
        let mut k = Kernel::default();
        k.at(10, 'a');
        k.at(5, 'b');
        k.at(10, 'c');
        k.at(5, 'd');
        let order: Vec<char> = std::iter::from_fn(|| k.pop()).collect();
        assert_eq!(order, vec!['b', 'd', 'a', 'c']);
        assert_eq!(k.now(), 10);
    }

    #[test]
    fn rng_is_reproducible_and_uniform_enough() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        let mut hist = [0u32; 10];
        for _ in 0..100_000 {
            let x = a.below(10);
            assert_eq!(x, b.below(10));
            hist[x as usize] += 1;
        }
        for h in hist {
            assert!((9_000..11_000).contains(&h), "{hist:?}");
        }
        assert_ne!(Rng::new(1).next_u64(), Rng::new(2).next_u64());
    }
}
