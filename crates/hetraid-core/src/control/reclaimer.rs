//! The write log's background reclaimers, as a procedure both executors
//! run: a *look* every [`LOOK_NS`], and at each look what the rules say.
//!
//! - A write-back log ([`WriteBackIdle`]): quiet measured from the last look
//!   that saw a user request; once quiet for the idle time with writes in
//!   the log (`journal::idle_reclaim_due`), everything is written to the
//!   members, and the quiet starts over.
//! - HPDA ([`HpdaLook`]): the policy (`hpda::reclaim_step`: a copy lost,
//!   past the high-water mark, or idle per the monitor) is asked before
//!   each batch, one batch at a time, up to [`HPDA_BATCHES_PER_LOOK_MAX`]
//!   batches a look; a request arriving between batches ends the idle
//!   reason, so user I/O keeps priority.
//!
//! The engine's reclaimer threads look on a timer; the simulator schedules
//! a look event every `LOOK_NS` while the load runs. Neither has its own
//! loop, period or bound.

/// How often the reclaimers look, nanoseconds.
pub const LOOK_NS: u64 = 50_000_000;

/// Batches an HPDA look runs at most (each one empties some of the log).
pub const HPDA_BATCHES_PER_LOOK_MAX: u64 = 100_000;

/// The idle reclaimer of a write-back log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteBackIdle {
    idle_ns: u64,
    /// The last look that saw a user request (or the start, or the last
    /// reclaim).
    quiet_since_ns: u64,
}

impl WriteBackIdle {
    pub fn new(idle_ns: u64, now_ns: u64) -> Self {
        Self {
            idle_ns,
            quiet_since_ns: now_ns,
        }
    }

    /// A look at `now_ns`: `activity` when a user request came since the
    /// last look, `pending` when the log holds writes not on the members.
    /// True: reclaim everything now.
    pub fn look(&mut self, now_ns: u64, activity: bool, pending: bool) -> bool {
        if activity {
            self.quiet_since_ns = now_ns;
        }
        let quiet = now_ns.saturating_sub(self.quiet_since_ns);
        let due = crate::journal::idle_reclaim_due(quiet, self.idle_ns, pending);
        if due {
            self.quiet_since_ns = now_ns;
        }
        due
    }
}

/// One HPDA look in progress: batches while the policy says so.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HpdaLook {
    batches: u64,
}

impl HpdaLook {
    /// The next batch's target (the ring usage to reclaim down to), or None:
    /// the look is over. `idle` per the monitor now, `fill` the log now.
    pub fn next(&mut self, idle: bool, fill: &crate::hpda::LogFill) -> Option<u64> {
        if self.batches >= HPDA_BATCHES_PER_LOOK_MAX {
            return None;
        }
        let t = crate::hpda::reclaim_step(idle, fill)?;
        self.batches += 1;
        Some(t)
    }

    pub fn batches(&self) -> u64 {
        self.batches
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hpda::LogFill;

    const S: u64 = 1_000_000_000;

    #[test]
    fn a_write_back_log_is_reclaimed_once_quiet_for_the_idle_time() {
        let mut w = WriteBackIdle::new(S, 0);
        // Requests keep it busy; nothing pending before the first write.
        assert!(!w.look(LOOK_NS, true, false));
        assert!(!w.look(2 * LOOK_NS, true, true));
        // Quiet from the last look with a request: due one second later.
        assert!(!w.look(2 * LOOK_NS + S - 1, false, true));
        assert!(w.look(2 * LOOK_NS + S, false, true));
        // Reclaimed: the quiet starts over; nothing pending, nothing due.
        assert!(!w.look(2 * LOOK_NS + S + LOOK_NS, false, true));
        assert!(!w.look(10 * S, false, false));
        assert!(w.look(10 * S, false, true));
    }

    #[test]
    fn an_hpda_look_runs_batches_while_the_policy_says_so() {
        let fill = |used, lost| LogFill {
            used_bytes: used,
            ring_bytes: 100,
            holds_data: used > 0,
            copy_lost: lost,
        };
        let mut l = HpdaLook::default();
        // Past the high-water mark: down to a quarter, even when busy.
        assert_eq!(l.next(false, &fill(60, false)), Some(25));
        // Below it and busy: the look ends.
        assert_eq!(l.next(false, &fill(30, false)), None);
        // Idle: everything, until empty.
        let mut l = HpdaLook::default();
        assert_eq!(l.next(true, &fill(30, false)), Some(0));
        assert_eq!(l.next(true, &fill(0, false)), None);
        assert_eq!(l.batches(), 1);
        // Bounded.
        let mut l = HpdaLook {
            batches: HPDA_BATCHES_PER_LOOK_MAX,
        };
        assert_eq!(l.next(true, &fill(30, true)), None);
    }
}
