//! A member that has turned slow for reads (a disk retrying marginal
//! sectors, an SSD in read-retry): every read first passes a recovery stage
//! — one at a time, in arrival order — that takes `factor - 1` times the
//! device's own mean service time for a read of its size, and only then
//! reaches the device. Its reads take `factor` times as long on average and
//! it serves them `factor` times slower once they queue; writes pass
//! straight through. Configured with the run's `slow = "MEMBER:FACTOR"`.
//!
//! The stage wakes itself with [`INTERNAL`] completions (the runner calls
//! [`Device::complete`] at their time and waits for none of them); the
//! wrapper tells its own wake-ups from the device's completions by the
//! finish times the device reported.

use super::{Counters, DevIo, Device, Mechanics, Started, Wear, INTERNAL};
use crate::kernel::Ns;
use std::collections::{BTreeMap, VecDeque};

pub struct SlowReads {
    inner: Box<dyn Device>,
    factor: f64,
    model: hetraid_core::ServiceModel,
    /// When the recovery stage is free.
    stage_free: Ns,
    /// Reads in the stage, with when each leaves it (in order).
    stage: VecDeque<(Ns, DevIo)>,
    /// Finish times the device reported and has not completed (a multiset).
    device_due: BTreeMap<Ns, u32>,
}

/// Take one `at` from the multiset; whether there was one.
fn take(set: &mut BTreeMap<Ns, u32>, at: Ns) -> bool {
    match set.get_mut(&at) {
        Some(n) if *n > 1 => {
            *n -= 1;
            true
        }
        Some(_) => {
            set.remove(&at);
            true
        }
        None => false,
    }
}

impl SlowReads {
    /// `inner` with reads `factor` (>= 1) times slower.
    pub fn new(inner: Box<dyn Device>, factor: f64) -> Self {
        assert!(factor >= 1.0, "a slowdown is at least 1");
        let model = inner.service_model();
        Self {
            inner,
            factor,
            model,
            stage_free: 0,
            stage: VecDeque::new(),
            device_due: BTreeMap::new(),
        }
    }

    /// Hand `io` to the device, noting the finish times it reports.
    fn pass_on(&mut self, now: Ns, io: DevIo, started: &mut Started) {
        let mark = started.len();
        self.inner.submit(now, io, started);
        self.note(mark, started);
    }

    fn note(&mut self, mark: usize, started: &Started) {
        for &(_, at) in &started[mark..] {
            *self.device_due.entry(at).or_default() += 1;
        }
    }
}

impl Device for SlowReads {
    fn submit(&mut self, now: Ns, io: DevIo, started: &mut Started) {
        if io.write {
            return self.pass_on(now, io, started);
        }
        let extra = ((self.factor - 1.0) * self.model.service_ns(io.len) as f64) as Ns;
        let ready = now.max(self.stage_free) + extra;
        self.stage_free = ready;
        self.stage.push_back((ready, io));
        // Woken at `ready` (a completion nobody waits for).
        started.push((INTERNAL, ready));
    }

    fn complete(&mut self, now: Ns, started: &mut Started) {
        if take(&mut self.device_due, now) {
            let mark = started.len();
            self.inner.complete(now, started);
            self.note(mark, started);
        }
        while self.stage.front().is_some_and(|(at, _)| *at <= now) {
            let (_, io) = self.stage.pop_front().expect("a staged read");
            self.pass_on(now, io, started);
        }
    }

    fn capacity(&self) -> u64 {
        self.inner.capacity()
    }
    fn counters(&self) -> &Counters {
        self.inner.counters()
    }
    fn counters_mut(&mut self) -> &mut Counters {
        self.inner.counters_mut()
    }
    fn service_model(&self) -> hetraid_core::ServiceModel {
        self.model
    }
    fn wear(&self) -> Option<Wear> {
        self.inner.wear()
    }
    fn mechanics(&self) -> Option<Mechanics> {
        self.inner.mechanics()
    }
    fn discard(&mut self, offset: u64, len: u64) {
        self.inner.discard(offset, len)
    }
    fn prefetch(&self, offset: u64, stage: u32) {
        self.inner.prefetch(offset, stage)
    }
    fn prefetches(&self) -> bool {
        self.inner.prefetches()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::ram::Ram;

    /// Drive a device alone: submit `ios` at 0, run its events in time
    /// order; the finish time of each tagged op.
    fn drive(d: &mut dyn Device, ios: &[DevIo]) -> BTreeMap<u64, Ns> {
        let mut events: std::collections::BinaryHeap<std::cmp::Reverse<(Ns, u64)>> =
            Default::default();
        let mut started = Started::new();
        for io in ios {
            d.submit(0, *io, &mut started);
        }
        let mut done = BTreeMap::new();
        loop {
            for (tag, at) in started.drain(..) {
                events.push(std::cmp::Reverse((at, tag)));
            }
            let Some(std::cmp::Reverse((at, tag))) = events.pop() else {
                break;
            };
            d.complete(at, &mut started);
            if tag != INTERNAL {
                done.insert(tag, at);
            }
        }
        done
    }

    #[test]
    fn reads_take_factor_times_as_long_and_writes_do_not() {
        let params = crate::device::ram::RamParams {
            latency_us: 10.0,
            mbps: 1000.0,
        };
        let ram = || Box::new(Ram::new(params.clone(), 1 << 30)) as Box<dyn Device>;
        let service = ram().service_model().service_ns(65536);
        let ios: Vec<DevIo> = (0..10)
            .map(|i| DevIo {
                tag: i,
                write: i % 2 == 1,
                offset: i * 65536,
                len: 65536,
            })
            .collect();
        let plain = drive(ram().as_mut(), &ios);
        let slow = drive(&mut SlowReads::new(ram(), 10.0), &ios);
        assert_eq!(plain.len(), 10);
        assert_eq!(slow.len(), 10, "every op completes");
        let last = |m: &BTreeMap<u64, Ns>, w: u64| {
            m.iter()
                .filter(|(t, _)| *t % 2 == w)
                .map(|x| *x.1)
                .max()
                .unwrap()
        };
        let (r0, r1) = (last(&plain, 0), last(&slow, 0));
        // Five reads, each 9 services in the stage, one after the other.
        assert!(r1 >= 5 * 9 * service, "reads: {r0} ns plain, {r1} ns slow");
        assert!(r0 < 10 * service);
        assert!(
            last(&slow, 1) <= last(&plain, 1) + r0,
            "writes are not slowed"
        );
    }
}
