//! The controller's scrub: every stripe read and checked, a stripe at a
//! time, paced by MD's limits — the core's sweep (`control::sweep`), as the
//! engine's scrub runs it.

use super::{Ev, JobKind, Runner, Setup};
use crate::kernel::Ns;
use hetraid_core::control::sweep::{Step, Stripes, Sweep, SweepSpec};
use hetraid_core::plan::{Op, Planner};

/// A scrub in progress.
pub(super) struct ScrubRun {
    pub sweep: Sweep,
    pub finished_at: Option<Ns>,
}

impl ScrubRun {
    /// The engine's scrub of the whole array: one stream of every stripe, one
    /// stripe a batch, one lane, a chunk per stripe for the limits.
    pub fn new(s: &Setup) -> Self {
        Self {
            sweep: Sweep::new(SweepSpec {
                streams: vec![Stripes::Range(0..s.layout.stripe_count())],
                batch_stripes: 1,
                lanes: 1,
                stripe_bytes: s.layout.chunk_bytes(),
                limits: hetraid_core::pace::PaceLimits {
                    min_bps: s.cfg.min_speed.0,
                    max_bps: s.cfg.max_speed.0,
                },
                scope: hetraid_core::pace::PaceScope::Array,
                stop_after: None,
            }),
            finished_at: None,
        }
    }
}

impl Runner<'_> {
    /// Start the scrub's next stripe as its sweep says, or wait as the pacer
    /// says, or end.
    pub(super) fn scrub_next(&mut self) -> Result<(), String> {
        let now = self.k.now();
        let busy = self.users_active();
        let run = self.scrub.as_mut().unwrap();
        if run.finished_at.is_some() {
            return Ok(());
        }
        let stripe = match run.sweep.next(0, now, busy) {
            Step::Batch { first, len } => run.sweep.stripes(0, first, len)[0],
            Step::Wait(ns) => {
                self.k.at(now + ns, Ev::ScrubWake);
                return Ok(());
            }
            // One lane: its stripe ends first, and wakes the scrub.
            Step::Busy => return Ok(()),
            Step::Finished => {
                if run.sweep.stream_idle_and_empty(0) {
                    run.finished_at = Some(now);
                    self.end = self.end.max(now);
                }
                return Ok(());
            }
        };
        let plans: Vec<_> = self
            .planner
            .scrub_stripe(stripe, &self.state, false)
            .into_iter()
            .collect();
        let mut io = Planner::plan_io(&plans, Op::Write);
        // Checked under the stripe's lock, as the engine does.
        io.stripes = vec![stripe];
        self.start_job(JobKind::Scrub, io)
    }

    /// A stripe of the scrub is checked: the next one may go.
    pub(super) fn scrub_stripe_done(&mut self, now: Ns) {
        self.scrub.as_mut().unwrap().sweep.done(0, 1);
        self.k.at(now, Ev::ScrubWake);
    }
}
