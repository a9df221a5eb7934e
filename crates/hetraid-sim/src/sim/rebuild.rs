//! The controller's rebuild: streams from the core's schedule, batches of the
//! engine's size, MD's speed limits, in place or into spare space.

use super::{build_device, Ev, JobKind, Runner};
use hetraid_core::control::sweep::Step;
use hetraid_core::plan::{MemberState, Op, Planner};

impl Runner<'_> {
    /// Is user I/O active for the pacer (the engine's rule, core
    /// `pace::users_active`): requests in flight, or one finished in the
    /// last half second.
    pub(super) fn users_active(&self) -> bool {
        let now = self.k.now();
        hetraid_core::pace::users_active(
            self.inflight > 0,
            (self.reads + self.writes > 0).then(|| now.saturating_sub(self.last_user_done)),
        )
    }

    /// Start batches of `stream` as the core's sweep says (`control::sweep`,
    /// the engine's lanes ask it the same): until its lanes are busy, the
    /// pacer says wait (a wake-up then), or none are left (the stream ends
    /// once its last batch is done).
    pub(super) fn rebuild_next(&mut self, stream: usize) -> Result<(), String> {
        // Bounded: each round starts a batch or returns.
        loop {
            let now = self.k.now();
            let busy = self.users_active();
            let rb = self.rebuild.as_mut().unwrap();
            if rb.finished_at.is_some() || rb.stream_done[stream].is_some() {
                return Ok(());
            }
            let (first, len) = match rb.sweep.next(stream, now, busy) {
                Step::Batch { first, len } => (first, len),
                Step::Wait(ns) => {
                    self.k.at(
                        now + ns,
                        Ev::RebuildWake {
                            stream: stream as u32,
                        },
                    );
                    return Ok(());
                }
                Step::Busy => return Ok(()),
                Step::Finished => {
                    // The stream ends when its last batch is done (a wake
                    // follows each batch, so this runs once it is).
                    if rb.sweep.stream_idle_and_empty(stream) {
                        rb.stream_done[stream] = Some(now);
                        rb.active -= 1;
                        self.finish_rebuild_if_done();
                    }
                    return Ok(());
                }
            };
            let batch: Vec<u64> = rb.sweep.stripes(stream, first, len);
            let target = rb.target;
            let redirect = rb.redirect[stream];
            // The batch's plans are made against the state without the target.
            let mut plans = Vec::with_capacity(batch.len());
            for &s in &batch {
                if let Some(p) = self
                    .planner
                    .rebuild_stripe(s, &self.state, &[target], redirect)
                    .map_err(|e| e.to_string())?
                {
                    plans.push(p);
                }
            }
            let mut io = Planner::plan_io(&plans, Op::Write);
            io.stripes = batch.clone();
            self.start_job(JobKind::Rebuild { stream, batch }, io)?;
        }
    }

    pub(super) fn finish_rebuild_if_done(&mut self) {
        let now = self.k.now();
        let rb = self.rebuild.as_mut().unwrap();
        if rb.active == 0 && rb.finished_at.is_none() {
            rb.finished_at = Some(now);
            match &self.s.spare {
                // The lost extents now live in spare space: plan with the
                // relocated layout; the failed member holds nothing.
                Some((_, after)) => {
                    self.planner = Planner::new(after.as_ref(), self.s.policy, self.service.clone())
                }
                None => self.state.members[rb.target] = MemberState::InSync,
            }
            if let Some(cb) = &self.s.copy_back {
                // The replacement arrives: a fresh device of the failed
                // one's model, in its slot.
                let f = cb.member;
                match build_device(self.s, &self.s.specs[f], false) {
                    Ok(d) => self.devices[f] = d,
                    Err(e) => self.copy_back_error = Some(e),
                }
                self.copy_back = Some(super::copyback::CopyBackRun::new(self.s, cb, now));
                self.k.at(now, Ev::CopyBackWake);
            }
            // A log region on the rebuilt member (HPDA's HDDs): its copy is
            // in use again, as the engine's replace re-mirrors it. (The copy
            // of the live records onto it is not simulated.)
            let target = rb.target;
            if let (Some(log), Some(l)) = (self.log.as_mut(), self.s.log.as_ref()) {
                if let Some(&(m, base)) = l.on_members.iter().find(|(m, _)| *m == target) {
                    log.readd_copy(m, base);
                }
            }
            self.state_version += 1;
            self.end = self.end.max(now);
        }
    }
}
