//! The controller's rebuild: streams from the core's schedule, batches of the
//! engine's size, MD's speed limits, in place or into spare space.

use super::{build_device, Ev, JobKind, Runner};
use crate::kernel::Ns;
use hetraid_core::control::sweep::Step;
use hetraid_core::iomap::RequestIo;
use hetraid_core::plan::{MemberState, Op, Planner};

impl Runner<'_> {
    /// Is user I/O active for the pacer (the engine's rule, core
    /// `pace::users_active`): requests in flight, or one finished in the
    /// last half second.
    pub(super) fn users_active(&self) -> bool {
        let now = self.k.now();
        hetraid_core::pace::users_active(
            self.inflight > 0,
            (!self.resp.is_empty()).then(|| now.saturating_sub(self.last_user_done)),
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
                self.copy_back = Some(CopyBackRun {
                    member: f,
                    batches: cb.batches().map(|b| b.len()).collect(),
                    next: 0,
                    first_move: 0,
                    inflight: 0,
                    started_at: now,
                    finished_at: None,
                    chunks: 0,
                    bytes: 0,
                });
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

/// A copy-back in progress: the core's batches (their lengths in moves),
/// the next to start, and how many are in flight.
pub(super) struct CopyBackRun {
    pub member: usize,
    batches: Vec<usize>,
    next: usize,
    /// Index of the next batch's first move.
    first_move: usize,
    inflight: usize,
    pub started_at: Ns,
    pub finished_at: Option<Ns>,
    pub chunks: u64,
    pub bytes: u64,
}

impl Runner<'_> {
    /// Start copy-back batches until the core's number is in flight or none
    /// are left; the last one done switches to the restored layout.
    pub(super) fn copy_back_next(&mut self) -> Result<(), String> {
        if let Some(e) = self.copy_back_error.take() {
            return Err(e);
        }
        let cb = self.s.copy_back.as_ref().unwrap();
        // Bounded: each round starts a batch or returns.
        loop {
            let run = self.copy_back.as_mut().unwrap();
            if run.inflight >= hetraid_core::rebuild::COPY_BACK_BATCHES_IN_FLIGHT
                || run.next >= run.batches.len()
            {
                break;
            }
            let moves = &cb.moves[run.first_move..run.first_move + run.batches[run.next]];
            run.first_move += moves.len();
            run.next += 1;
            run.inflight += 1;
            let io = RequestIo {
                reads: moves
                    .iter()
                    .map(|m| (m.from.member, m.from.offset, m.len))
                    .collect(),
                writes: moves
                    .iter()
                    .map(|m| (m.to.member, m.to.offset, m.len))
                    .collect(),
                xor_bytes: 0,
                // Offline in the engine; here a user load plans against
                // the relocated layout, which the copy does not change.
                stripes: Vec::new(),
            };
            let bytes = moves.iter().map(|m| m.len).sum();
            self.start_job(JobKind::CopyBack { bytes }, io)?;
        }
        let run = self.copy_back.as_mut().unwrap();
        if run.inflight == 0 && run.next >= run.batches.len() && run.finished_at.is_none() {
            // Every chunk is home: the original layout again, the member in sync.
            let now = self.k.now();
            run.finished_at = Some(now);
            let f = run.member;
            self.planner =
                Planner::new(self.s.layout.as_ref(), self.s.policy, self.service.clone());
            self.state.members[f] = MemberState::InSync;
            self.state_version += 1;
            self.end = self.end.max(now);
        }
        Ok(())
    }

    pub(super) fn copy_back_batch_done(&mut self, bytes: u64, now: Ns) {
        let run = self.copy_back.as_mut().unwrap();
        run.inflight -= 1;
        run.bytes += bytes;
        run.chunks += bytes / self.s.layout.chunk_bytes().max(1);
        self.k.at(now, Ev::CopyBackWake);
    }
}
