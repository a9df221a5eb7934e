//! A device described by what was measured on it (`hetraid probe`): time
//! per random operation and sequential rate, for reads and writes, and how
//! many operations it serves at once. No mechanics, no flash: the numbers
//! are the model. Each operation goes to the server that frees first.

use super::{Counters, DevIo, Device, Started};
use crate::kernel::Ns;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MeasuredParams {
    /// Mean time of a random 4 KiB read / write at one outstanding, ms.
    pub read_ms: f64,
    pub write_ms: f64,
    /// Sequential rates, MB/s (10^6 bytes).
    pub read_mbps: f64,
    pub write_mbps: f64,
    /// Operations served at once (random-read IOPS at queue depth 8 over
    /// those at 1, rounded; 1 for a disk).
    #[serde(default = "one")]
    pub parallelism: u32,
}

fn one() -> u32 {
    1
}

impl MeasuredParams {
    pub fn validate(&self) -> Result<(), String> {
        for (v, what) in [
            (self.read_ms, "read_ms"),
            (self.write_ms, "write_ms"),
            (self.read_mbps, "read_mbps"),
            (self.write_mbps, "write_mbps"),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(format!("measured {what} must be a positive number"));
            }
        }
        if !(1..=1024).contains(&self.parallelism) {
            return Err("measured parallelism must be between 1 and 1024".into());
        }
        Ok(())
    }
}

pub struct Measured {
    p: MeasuredParams,
    capacity: u64,
    /// When each server is free.
    free_at: Vec<Ns>,
    counters: Counters,
}

/// The 4 KiB the random times were measured with: the rest of an
/// operation's bytes move at the sequential rate.
const PROBE_BYTES: u64 = 4096;

impl Measured {
    pub fn new(p: MeasuredParams, capacity: u64) -> Self {
        Self {
            free_at: vec![0; p.parallelism as usize],
            p,
            capacity,
            counters: Counters::default(),
        }
    }

    fn service_ns(&self, write: bool, len: u64) -> Ns {
        let (ms, mbps) = if write {
            (self.p.write_ms, self.p.write_mbps)
        } else {
            (self.p.read_ms, self.p.read_mbps)
        };
        let extra = len.saturating_sub(PROBE_BYTES) as f64 * 1e3 / mbps;
        (ms * 1e6 + extra) as Ns
    }
}

impl Device for Measured {
    fn submit(&mut self, now: Ns, io: DevIo, started: &mut Started) {
        self.counters.count(&io);
        let (k, _) = self
            .free_at
            .iter()
            .enumerate()
            .min_by_key(|(_, t)| **t)
            .expect("at least one server");
        let start = now.max(self.free_at[k]);
        let end = start + self.service_ns(io.write, io.len);
        self.free_at[k] = end;
        self.counters.busy(start, end, io.write);
        started.push((io.tag, end));
    }
    fn complete(&mut self, _now: Ns, _started: &mut Started) {}
    fn capacity(&self) -> u64 {
        self.capacity
    }
    fn counters(&self) -> &Counters {
        &self.counters
    }
    fn counters_mut(&mut self) -> &mut Counters {
        &mut self.counters
    }
    fn service_model(&self) -> hetraid_core::ServiceModel {
        hetraid_core::ServiceModel {
            position_ns: (self.p.read_ms * 1e6) as Ns,
            bytes_per_s: (self.p.read_mbps * 1e6) as u64,
        }
    }
}
