//! Device models behind one trait. A device takes operations, reports when each
//! finishes, and counts what it did (requests, bytes, 4 KiB pages, erases, busy
//! time by kind) so the run can report utilisation and energy.

pub mod hdd;
pub mod measured;
pub mod ram;
pub mod slow;
pub mod ssd;

use crate::kernel::{Ns, NS_PER_S};
use hetraid_core::plan::pages_touched;
use serde::Serialize;

/// One member operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DevIo {
    /// The controller's identifier, handed back on completion.
    pub tag: u64,
    pub write: bool,
    pub offset: u64,
    pub len: u64,
}

/// Tag of work a device does on its own (write-back destage): nobody waits for it.
pub const INTERNAL: u64 = u64::MAX;

/// Operations that started, with their finish times.
pub type Started = Vec<(u64, Ns)>;

pub trait Device {
    /// Accept `io` at `now`. Operations that start now (this one, or internal work)
    /// are pushed to `started` with their finish times; the others wait in the
    /// device's queue.
    fn submit(&mut self, now: Ns, io: DevIo, started: &mut Started);
    /// An operation finished at `now`: start whatever the device's scheduler picks
    /// next.
    fn complete(&mut self, now: Ns, started: &mut Started);
    /// Bytes the device exports.
    fn capacity(&self) -> u64;
    fn counters(&self) -> &Counters;
    /// Mean service time of one `bytes` random operation (the `cost` write policy).
    fn service_model(&self) -> hetraid_core::ServiceModel;
    /// Device-specific wear figures (SSD) for reports.
    fn wear(&self) -> Option<Wear> {
        None
    }
    /// Where a disk's media time went (HDD), for reports.
    fn mechanics(&self) -> Option<Mechanics> {
        None
    }
    /// A discard (TRIM) of `[offset, offset + len)`: counted, and an SSD
    /// forgets the pages it covers whole (garbage collection then has fewer
    /// valid pages to copy). Takes no device time: a mapping update, which
    /// the study's SSD model does not time either.
    fn discard(&mut self, offset: u64, len: u64) {
        let _ = offset;
        self.counters_mut().count_discard(len);
    }
    fn counters_mut(&mut self) -> &mut Counters;
    /// A hint that an operation at `offset` comes soon: a model whose
    /// state is large (an SSD's page map) fetches what it will touch into
    /// the cache, in `stage`s: stage 0 the first level (the map entry),
    /// stage 1, given a few requests later, what that entry points to.
    /// Changes nothing the model computes.
    fn prefetch(&self, offset: u64, stage: u32) {
        let _ = (offset, stage);
    }
    /// Whether [`Device::prefetch`] does anything (the runner looks ahead
    /// only for models that use it).
    fn prefetches(&self) -> bool {
        false
    }
}

/// A disk's media operations and the time they spent in each phase, as
/// DiskSim breaks a response down: command overhead, seek, rotational
/// wait, media transfer. Operations the cache served (read-ahead or
/// segment hits) are counted apart and spend none of the three.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Mechanics {
    pub media_ops: u64,
    pub cache_hits: u64,
    pub overhead_ns: Ns,
    pub seek_ns: Ns,
    pub rotation_ns: Ns,
    pub transfer_ns: Ns,
}

/// Flash wear after a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Wear {
    pub erases: u64,
    pub erase_max: u64,
    /// Flash pages programmed / host pages written.
    pub write_amplification: f64,
    pub gc_page_copies: u64,
    /// Page writes that read the page first: the host wrote part of it.
    pub sub_page_rmw: u64,
    /// Mapped pages a discard unmapped (never copied by GC afterwards).
    pub discarded_pages: u64,
}

/// What a device did. Busy time is the union of the intervals in which it had work.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    pub reads: u64,
    pub writes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub read_pages: u64,
    pub write_pages: u64,
    pub erases: u64,
    /// Discards (TRIM) and their bytes.
    pub discards: u64,
    pub discard_bytes: u64,
    pub busy_ns: Ns,
    /// Busy time attributed to reads and to writes (energy by power state).
    pub read_busy_ns: Ns,
    pub write_busy_ns: Ns,
    busy_until: Ns,
}

impl Counters {
    pub fn count_discard(&mut self, len: u64) {
        self.discards += 1;
        self.discard_bytes += len;
    }

    /// Count an accepted operation.
    pub fn count(&mut self, io: &DevIo) {
        let pages = pages_touched(io.offset, io.len);
        if io.write {
            self.writes += 1;
            self.write_bytes += io.len;
            self.write_pages += pages;
        } else {
            self.reads += 1;
            self.read_bytes += io.len;
            self.read_pages += pages;
        }
    }

    /// The device worked from `start` to `end` (calls come in start order, so the
    /// union of intervals is kept exactly with one watermark).
    pub fn busy(&mut self, start: Ns, end: Ns, write: bool) {
        let from = start.max(self.busy_until);
        if end > from {
            let d = end - from;
            self.busy_ns += d;
            if write {
                self.write_busy_ns += d;
            } else {
                self.read_busy_ns += d;
            }
            self.busy_until = end;
        }
    }
}

/// Power by state, in watts.
#[derive(Debug, Clone, Copy, PartialEq, serde::Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Power {
    pub read_w: f64,
    pub write_w: f64,
    pub idle_w: f64,
    #[serde(default)]
    pub standby_w: f64,
}

impl Power {
    /// Joules over `total` ns given the busy split (no spin-down policy is modelled,
    /// so standby is never entered during a run).
    pub fn energy_j(&self, c: &Counters, total: Ns) -> f64 {
        let [r, w, i] = self.energy_by_state_j(c, total);
        r + w + i
    }

    /// Joules reading, writing and idle.
    pub fn energy_by_state_j(&self, c: &Counters, total: Ns) -> [f64; 3] {
        let s = |ns: Ns| ns as f64 / NS_PER_S as f64;
        let idle = total.saturating_sub(c.busy_ns);
        [
            self.read_w * s(c.read_busy_ns),
            self.write_w * s(c.write_busy_ns),
            self.idle_w * s(idle),
        ]
    }
}
