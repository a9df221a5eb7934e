//! A paced change: a grow, shrink or restripe run batch by batch, each batch
//! made durable before the next, with MD's two speed limits and the one
//! "users are active" rule between batches.
//!
//! The batches themselves are the change's own (a restripe's windows of
//! rows, a RAIDX change's moves up to `limits::CHANGE_BATCH_MOVES_MAX`):
//! the executor runs the one the superblock says is next and reports the
//! change's progress in its units (rows, moves). The job decides when the
//! next batch may go and when the change is over. The engine's served
//! array (`ArrayCell`, between two assemblies) and the simulator's grow
//! (with user requests held) drive it alike.

use crate::pace::{self, PaceLimits};

/// What a change covers and how it is paced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChangeSpec {
    /// The change's units (rows, moves) in all, and those done before this
    /// run (a change resumed after a stop).
    pub units_total: u64,
    pub units_done_before: u64,
    /// Bytes one unit counts for the speed limits (a chunk: MD counts per
    /// device).
    pub unit_bytes: u64,
    pub limits: PaceLimits,
}

/// What the executor does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Run the change's next batch, then call [`PacedChange::done`].
    Batch,
    /// The pacer says wait: ask again after this many nanoseconds.
    Wait(u64),
    /// The change is over.
    Finished,
}

/// A change in progress.
#[derive(Debug, Clone)]
pub struct PacedChange {
    spec: ChangeSpec,
    units_done: u64,
    batches: u64,
    running: bool,
    finished: bool,
}

impl PacedChange {
    pub fn new(spec: ChangeSpec) -> Self {
        Self {
            units_done: spec.units_done_before,
            spec,
            batches: 0,
            running: false,
            finished: false,
        }
    }

    /// What to do at `now_ns` (since this run started), with users active
    /// or not (`pace::users_active`). The pacer is asked before every
    /// batch but the first; the last batch ends the change at once.
    pub fn next(&mut self, now_ns: u64, users_active: bool) -> Step {
        assert!(!self.running, "a change runs one batch at a time");
        if self.finished {
            return Step::Finished;
        }
        let wait = pace::wait_ns(self.spec.limits, self.bytes(), now_ns, users_active);
        if wait > 0 {
            return Step::Wait(wait);
        }
        self.running = true;
        Step::Batch
    }

    /// The batch ended with `units_done` of the change's units done in all
    /// (what the superblock records); `last` when the change is over.
    pub fn done(&mut self, units_done: u64, last: bool) {
        assert!(self.running, "a batch done that was not started");
        self.running = false;
        self.units_done = units_done;
        self.batches += 1;
        self.finished = last;
    }

    /// Bytes this run moved, as the limits count them.
    pub fn bytes(&self) -> u64 {
        self.units_done.saturating_sub(self.spec.units_done_before) * self.spec.unit_bytes
    }

    pub fn units_done(&self) -> u64 {
        self.units_done
    }

    pub fn batches(&self) -> u64 {
        self.batches
    }

    /// Batches a run can take at most: every batch moves at least one unit
    /// or ends the change, and one may finish it without moving any (a
    /// RAIDX change's tables): the executors' loop bound.
    pub fn batches_max(&self) -> u64 {
        self.spec
            .units_total
            .saturating_sub(self.spec.units_done_before)
            + 2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: u64 = 1_000_000;
    const S: u64 = 1_000_000_000;

    fn change(min: u64, max: u64) -> PacedChange {
        PacedChange::new(ChangeSpec {
            units_total: 10,
            units_done_before: 2,
            unit_bytes: MB,
            limits: PaceLimits {
                min_bps: min,
                max_bps: max,
            },
        })
    }

    #[test]
    fn the_first_batch_goes_at_once_and_the_limit_paces_the_rest() {
        let mut c = change(MB, 2 * MB);
        assert_eq!(c.next(0, false), Step::Batch);
        c.done(4, false);
        // 2 units (2 MB) done at 2 MB/s: due at 1 s.
        assert_eq!(c.next(S / 4, false), Step::Wait(3 * S / 4));
        assert_eq!(c.next(S, false), Step::Batch);
        c.done(10, true);
        assert_eq!(c.next(S, false), Step::Finished);
        assert_eq!((c.batches(), c.units_done(), c.bytes()), (2, 10, 8 * MB));
    }

    #[test]
    fn users_active_hold_it_to_the_minimum_in_waits_of_half_a_second_at_most() {
        let mut c = change(MB, 0);
        assert_eq!(c.next(0, true), Step::Batch);
        c.done(6, false);
        // 4 MB at 1 MB/s: due at 4 s; asked at 1 s, waits the most the
        // rule allows, and again until the time is reached.
        assert_eq!(c.next(S, true), Step::Wait(pace::USER_WAIT_NS_MAX));
        assert_eq!(c.next(4 * S - 1, true), Step::Wait(1));
        assert_eq!(c.next(4 * S, true), Step::Batch);
        // Nobody active and no maximum: no wait.
        c.done(8, false);
        assert_eq!(c.next(4 * S, false), Step::Batch);
    }

    #[test]
    fn the_loop_bound_covers_every_unit_and_a_last_empty_batch() {
        assert_eq!(change(0, 0).batches_max(), 10);
        let mut c = change(0, 0);
        for u in 3..=10 {
            assert_eq!(c.next(0, false), Step::Batch);
            c.done(u, false);
        }
        assert_eq!(c.next(0, false), Step::Batch);
        c.done(10, true);
        assert!(c.batches() <= change(0, 0).batches_max());
        assert_eq!(c.next(0, false), Step::Finished);
    }
}
