//! I/O statistics (iostat, `/proc/diskstats`): operations, bytes and the
//! time they took, per member slot and for the array's users, counted only
//! while measuring is on (`Array::measure_io`: a served array, or a command
//! holding one) so the engine's own hot path pays one predicted branch
//! otherwise.

use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};

/// Counters one slot (or the array's users) adds to.
#[derive(Debug, Default)]
pub struct IoCounters {
    read_ops: AtomicU64,
    write_ops: AtomicU64,
    read_bytes: AtomicU64,
    write_bytes: AtomicU64,
    read_ns: AtomicU64,
    write_ns: AtomicU64,
}

impl IoCounters {
    /// One operation of `bytes` that took `ns`.
    #[inline]
    pub fn add(&self, write: bool, bytes: u64, ns: u64) {
        let (ops, b, t) = match write {
            true => (&self.write_ops, &self.write_bytes, &self.write_ns),
            false => (&self.read_ops, &self.read_bytes, &self.read_ns),
        };
        ops.fetch_add(1, Ordering::Relaxed);
        b.fetch_add(bytes, Ordering::Relaxed);
        t.fetch_add(ns, Ordering::Relaxed);
    }

    /// Time `op` and count it.
    #[inline]
    pub fn timed<T>(&self, write: bool, bytes: u64, op: impl FnOnce() -> T) -> T {
        let t0 = std::time::Instant::now();
        let r = op();
        self.add(write, bytes, t0.elapsed().as_nanos() as u64);
        r
    }

    pub fn snapshot(&self) -> IoStats {
        IoStats {
            read_ops: self.read_ops.load(Ordering::Relaxed),
            write_ops: self.write_ops.load(Ordering::Relaxed),
            read_bytes: self.read_bytes.load(Ordering::Relaxed),
            write_bytes: self.write_bytes.load(Ordering::Relaxed),
            read_ns: self.read_ns.load(Ordering::Relaxed),
            write_ns: self.write_ns.load(Ordering::Relaxed),
        }
    }
}

/// What [`IoCounters`] counted, since measuring started: `status --json`'s
/// `io` (per member and for the array), what `iostat` and the metrics read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoStats {
    pub read_ops: u64,
    pub write_ops: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// Time the operations took, added up (their mean latency is
    /// `read_ns / read_ops`; over an interval, the mean queue depth is the
    /// time added divided by the interval, as iostat's aqu-sz).
    pub read_ns: u64,
    pub write_ns: u64,
}

impl IoStats {
    /// What happened between `earlier` and `self` (counters that went back,
    /// reset by a new assembly, give what was counted since).
    pub fn since(&self, earlier: &IoStats) -> IoStats {
        if self.read_ops < earlier.read_ops || self.write_ops < earlier.write_ops {
            return *self;
        }
        IoStats {
            read_ops: self.read_ops - earlier.read_ops,
            write_ops: self.write_ops - earlier.write_ops,
            read_bytes: self.read_bytes.saturating_sub(earlier.read_bytes),
            write_bytes: self.write_bytes.saturating_sub(earlier.write_bytes),
            read_ns: self.read_ns.saturating_sub(earlier.read_ns),
            write_ns: self.write_ns.saturating_sub(earlier.write_ns),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_add_up_and_differences_survive_a_reset() {
        let c = IoCounters::default();
        c.add(false, 4096, 1000);
        c.add(true, 65536, 5000);
        c.add(true, 4096, 3000);
        let a = c.snapshot();
        assert_eq!((a.read_ops, a.write_ops), (1, 2));
        assert_eq!((a.read_bytes, a.write_bytes), (4096, 69632));
        assert_eq!((a.read_ns, a.write_ns), (1000, 8000));
        c.add(false, 4096, 500);
        let b = c.snapshot();
        let d = b.since(&a);
        assert_eq!((d.read_ops, d.write_ops, d.read_ns), (1, 0, 500));
        // A reset (a new assembly): what was counted since.
        let fresh = IoCounters::default();
        fresh.add(false, 512, 7);
        assert_eq!(fresh.snapshot().since(&b), fresh.snapshot());
    }
}
