//! RAM / NVRAM: fixed latency plus bandwidth, one operation at a time.

use super::{Counters, DevIo, Device, Started};
use crate::kernel::Ns;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RamParams {
    pub latency_us: f64,
    pub mbps: f64,
}

impl RamParams {
    pub fn validate(&self) -> Result<(), String> {
        if !(self.latency_us >= 0.0 && self.mbps > 0.0 && self.mbps.is_finite()) {
            return Err("ram latency_us must be >= 0 and mbps positive".into());
        }
        Ok(())
    }
}

pub struct Ram {
    latency_ns: Ns,
    bps: f64,
    capacity: u64,
    free_at: Ns,
    counters: Counters,
}

impl Ram {
    pub fn new(p: RamParams, capacity: u64) -> Self {
        Self {
            latency_ns: (p.latency_us * 1e3) as Ns,
            bps: p.mbps * 1e6,
            capacity,
            free_at: 0,
            counters: Counters::default(),
        }
    }
}

impl Device for Ram {
    fn submit(&mut self, now: Ns, io: DevIo, started: &mut Started) {
        self.counters.count(&io);
        let start = now.max(self.free_at);
        let end = start + self.latency_ns + (io.len as f64 * 1e9 / self.bps) as Ns;
        self.free_at = end;
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
            position_ns: self.latency_ns,
            bytes_per_s: self.bps as u64,
        }
    }
}
