//! HPDA ([Mao 2010]) on real members: the core's monitor and director decide
//! where each write goes; this module executes. Random writes are appended
//! to the mirrored write-back log (on HDD-1 past the parity, and on HDD-2);
//! sequential writes go to the RAID4 in place, each guarded by an intent
//! record in the log (or, while the RAID4 is degraded, journaled). Reads
//! overlay what the log holds on the RAID4 (the write-back read path).

use super::io::UserBuf;
#[allow(unused_imports)]
use super::*;
use hetraid_core::hpda::{self, Condition, Monitor, MonitorConfig, Raid4Guard, Route};
use std::sync::atomic::AtomicU64;

/// HPDA's run-time state beside the array.
pub(crate) struct HpdaRuntime {
    monitor: Mutex<Monitor>,
    /// Time zero of the monitor's clock.
    epoch: std::time::Instant,
    /// RAID4 writes of the director hold it shared; the reclaimer holds it
    /// exclusively, so a reclaim never writes an older logged copy over a
    /// direct write of the same bytes.
    pub(crate) direct: RwLock<()>,
    pub(crate) counters: HpdaCounters,
}

/// What the director did since assembly.
#[derive(Default)]
pub(crate) struct HpdaCounters {
    pub(crate) log_writes: AtomicU64,
    pub(crate) log_bytes: AtomicU64,
    pub(crate) raid4_writes: AtomicU64,
    pub(crate) raid4_bytes: AtomicU64,
    pub(crate) intent_records: AtomicU64,
    pub(crate) journaled_raid4_writes: AtomicU64,
}

/// `status`: HPDA's director and monitor.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct HpdaStatus {
    /// Writes the director sent to the log, and their bytes.
    pub log_writes: u64,
    pub log_bytes: u64,
    /// Writes sent to the RAID4 in place, and their bytes.
    pub raid4_writes: u64,
    pub raid4_bytes: u64,
    /// Intent records written for RAID4 writes (the director's and the
    /// reclaimer's; a record names a run of stripes ahead, so a stream
    /// writes one per run), and RAID4 writes journaled (RAID4 degraded).
    pub intent_records: u64,
    pub journaled_raid4_writes: u64,
    /// The monitor: streams tracked, requests in the last second, idle.
    pub streams: usize,
    pub intensity: u64,
    pub idle: bool,
    /// Where writes go now: "random to the log, sequential to the RAID4",
    /// "all to the log (RAID4 degraded)", "all to the RAID4 (log copy lost)".
    pub routing: crate::Word,
}

impl HpdaRuntime {
    pub(crate) fn new() -> Self {
        Self {
            monitor: Mutex::new(Monitor::new(MonitorConfig::default())),
            epoch: std::time::Instant::now(),
            direct: RwLock::new(()),
            counters: HpdaCounters::default(),
        }
    }

    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Note a read (intensity).
    pub(crate) fn read(&self) {
        let now = self.now_ns();
        self.monitor.lock().unwrap().read(now);
    }

    pub(crate) fn idle(&self) -> bool {
        self.monitor.lock().unwrap().idle(self.now_ns())
    }
}

/// HPDA's log region: its bytes (core `hpda::log_bytes`) and the two
/// slots holding it (HDD-1, HDD-2).
pub(crate) fn log_region(layout: &dyn Layout, requested: Option<u64>) -> Result<(u64, Vec<usize>)> {
    let (bytes, regions) = hpda::log_region(layout, requested)
        .map_err(|e| EngineError::Refused(format!("--log-size: {e}")))?;
    Ok((bytes, regions.iter().map(|r| r.0).collect()))
}

impl Array {
    /// Every RAID4 member (SSDs and HDD-1) in sync.
    pub(crate) fn raid4_whole(&self) -> bool {
        self.out_members(true) == 0
    }

    fn hpda_condition(&self, log: &crate::log::Log, start: u64, end: u64) -> Condition {
        Condition {
            raid4_whole: self.raid4_whole(),
            log_copies_live: log.live_mask().count_ones() as usize,
            log_copies: log.copy_count(),
            overlaps_log: !log.overlapping(start, end).is_empty(),
        }
    }

    /// An HPDA write: the director (core) decides, this executes.
    pub(crate) fn hpda_write(
        &self,
        h: &HpdaRuntime,
        log: &crate::log::Log,
        offset: u64,
        data: &[u8],
        alone: bool,
    ) -> Result<()> {
        let len = data.len() as u64;
        let kind = {
            let now = h.now_ns();
            h.monitor.lock().unwrap().write(offset, len, now)
        };
        let end = offset.saturating_add(len);
        let cond = self.hpda_condition(log, offset, end);
        let c = &h.counters;
        match hpda::route_write(kind, &cond) {
            Route::Log => {
                c.log_writes.fetch_add(1, Ordering::Relaxed);
                c.log_bytes.fetch_add(len, Ordering::Relaxed);
                self.write_back(log, offset, data, alone)
            }
            Route::Raid4 => {
                // A lost copy with the RAID4 whole (HDD-2 failed): the log
                // is emptied onto the RAID4 first, so nothing stays on one
                // copy (core `reclaim_step`).
                if cond.log_copies_live < cond.log_copies && log.unreclaimed_bytes() > 0 {
                    self.reclaim_to(0)?;
                }
                let _shared = h.direct.read().unwrap();
                // A write-back write may have logged some of these bytes
                // since the director looked: then they go to the log too
                // (the newest copy of a byte is in one place).
                if !log.overlapping(offset, end).is_empty() && log.live_mask() != 0 {
                    c.log_writes.fetch_add(1, Ordering::Relaxed);
                    c.log_bytes.fetch_add(len, Ordering::Relaxed);
                    drop(_shared);
                    return self.write_back(log, offset, data, alone);
                }
                c.raid4_writes.fetch_add(1, Ordering::Relaxed);
                c.raid4_bytes.fetch_add(len, Ordering::Relaxed);
                self.run(Request::write(offset, len), UserBuf::Write(data))
            }
        }
    }

    /// The guard of a RAID4 write now (core `raid4_guard`).
    pub(crate) fn hpda_guard(&self) -> Option<Raid4Guard> {
        let h = self.hpda.as_ref()?;
        let g = hpda::raid4_guard(self.raid4_whole());
        if g == Raid4Guard::Journal {
            h.counters
                .journaled_raid4_writes
                .fetch_add(1, Ordering::Relaxed);
        }
        Some(g)
    }

    /// A RAID4 write guarded by intent records: the stripes not named
    /// since the last checkpoint are named in the log (durable) before the
    /// members are written; after a crash their parity is recomputed from
    /// the data.
    pub(crate) fn write_intent(
        &self,
        log: &crate::log::Log,
        plans: &[StripePlan],
        bufs: &mut [StripeBufs],
        user: &[u8],
    ) -> Result<()> {
        let records = log.guard_intent(
            plans.iter().map(|p| p.stripe),
            self.layout.stripe_count(),
            &|| self.flush_members(),
        )?;
        if let Some(h) = &self.hpda {
            h.counters
                .intent_records
                .fetch_add(records as u64, Ordering::Relaxed);
        }
        let r = self.write_plans(plans, bufs, user);
        log.done();
        r
    }

    /// HPDA's state for `status`.
    pub fn hpda_status(&self) -> Option<HpdaStatus> {
        let h = self.hpda.as_ref()?;
        let c = &h.counters;
        let now = h.now_ns();
        let (streams, intensity, idle) = {
            let m = h.monitor.lock().unwrap();
            (m.streams(), m.intensity(now), m.idle(now))
        };
        let whole = self.raid4_whole();
        let (live, copies) = self.log.as_ref().map_or((0, 0), |l| {
            (l.live_mask().count_ones() as usize, l.copy_count())
        });
        let routing = if live == 0 {
            "all to the RAID4 (no log copy left)"
        } else if !whole {
            "all to the log (RAID4 degraded)"
        } else if live < copies {
            "all to the RAID4 (a log copy is lost)"
        } else {
            "random to the log, sequential to the RAID4"
        };
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Some(HpdaStatus {
            log_writes: g(&c.log_writes),
            log_bytes: g(&c.log_bytes),
            raid4_writes: g(&c.raid4_writes),
            raid4_bytes: g(&c.raid4_bytes),
            intent_records: g(&c.intent_records),
            journaled_raid4_writes: g(&c.journaled_raid4_writes),
            streams,
            intensity,
            idle,
            routing: routing.into(),
        })
    }

    /// HPDA: the monitor calls the array idle after `secs` without I/O.
    pub fn set_hpda_idle(&self, secs: f64) {
        if let Some(h) = &self.hpda {
            h.monitor.lock().unwrap().set_idle_ns((secs * 1e9) as u64);
        }
    }

    /// One batch of HPDA's background reclaimer when the policy says so
    /// (a look of one batch); the bytes written, 0: nothing to do now.
    pub fn hpda_reclaim_step(&self) -> Result<u64> {
        let mut look = hetraid_core::control::reclaimer::HpdaLook::default();
        match self.hpda_next(&mut look) {
            None => Ok(0),
            Some(target) => self.reclaim_batches(target, 1),
        }
    }

    /// HPDA: the next batch's target of a reclaimer's look (the core's
    /// `HpdaLook`, its policy asked with the monitor and the log as they
    /// are now), or None: the look is over.
    pub(crate) fn hpda_next(
        &self,
        look: &mut hetraid_core::control::reclaimer::HpdaLook,
    ) -> Option<u64> {
        let (Some(h), Some(log)) = (self.hpda.as_ref(), self.live_log()) else {
            return None;
        };
        let (ring, used, _) = log.usage();
        let fill = hpda::LogFill {
            used_bytes: used,
            ring_bytes: ring,
            holds_data: log.unreclaimed_bytes() > 0,
            copy_lost: self.raid4_whole()
                && (log.live_mask().count_ones() as usize) < log.copy_count(),
        };
        look.next(h.idle(), &fill)
    }
}
