//! The controller's copy-back (dRAID's rebalance) under the load: the
//! core's procedure (`control::copyback`) as the engine's served array runs
//! it. The moves go as a paced sweep (the core's batches, two in flight)
//! while users go on against the relocated layout; a user write on the
//! spare home of a move already started makes it dirty (`CopyWatch`), and
//! dirty moves are copied again, a batch at a time, in rounds; the last
//! round runs with user requests held, then the replacement takes the slot.

use super::*;
use hetraid_core::control::copyback::{CopyWatch, RECOPY_ROUNDS_UNHELD_MAX};
use hetraid_core::control::sweep::{Step, Sweep};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Every move, as the sweep says.
    Sweep,
    /// Dirty moves again, users going on.
    Again,
    /// The last round, user requests held.
    Held,
}

/// A copy-back in progress.
pub(super) struct CopyBackRun {
    pub member: usize,
    sweep: Sweep,
    watch: CopyWatch,
    phase: Phase,
    /// Dirty moves to copy again, a batch each, and jobs in flight.
    again: VecDeque<Vec<usize>>,
    inflight: usize,
    rounds: usize,
    /// The held round took the last dirty moves.
    last_taken: bool,
    pub started_at: Ns,
    pub finished_at: Option<Ns>,
    pub recopied: u64,
}

impl CopyBackRun {
    pub fn new(s: &Setup, plan: &hetraid_core::rebuild::CopyBack, now: Ns) -> Self {
        let limits = hetraid_core::pace::PaceLimits {
            min_bps: s.cfg.min_speed.0,
            max_bps: s.cfg.max_speed.0,
        };
        Self {
            member: plan.member,
            sweep: hetraid_core::control::copyback::sweep(plan, limits),
            watch: CopyWatch::new(plan),
            phase: Phase::Sweep,
            again: VecDeque::new(),
            inflight: 0,
            rounds: 0,
            last_taken: false,
            started_at: now,
            finished_at: None,
            recopied: 0,
        }
    }
}

impl CopyBackRun {
    /// Chunks copied (once each; copies again are `recopied`), and their
    /// bytes: the sweep's.
    pub fn chunks(&self) -> u64 {
        self.sweep.stripes_done()
    }

    pub fn bytes(&self) -> u64 {
        self.sweep.bytes()
    }
}

impl Runner<'_> {
    fn copy_back_plan(&self) -> &hetraid_core::rebuild::CopyBack {
        self.s
            .copy_back
            .as_ref()
            .expect("a copy-back run has a plan")
    }

    /// Start the job copying moves `which` (indices into the plan).
    fn copy_back_job(&mut self, which: Vec<usize>, again: bool) -> Result<(), String> {
        let plan = self.copy_back_plan();
        let moves: Vec<_> = which.iter().map(|&i| plan.moves[i]).collect();
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
            // Users plan against the relocated layout, which the copy does
            // not change: no stripe lock (the watch keeps the copy right).
            stripes: Vec::new(),
        };
        let bytes = moves.iter().map(|m| m.len).sum();
        self.copy_back.as_mut().unwrap().inflight += 1;
        self.start_job(JobKind::CopyBack { bytes, again }, io)
    }

    /// Go on with the copy-back as its phase says.
    pub(super) fn copy_back_next(&mut self) -> Result<(), String> {
        if let Some(e) = self.copy_back_error.take() {
            return Err(e);
        }
        let now = self.k.now();
        // Bounded: each round starts a batch, or returns, or moves to a
        // later phase (three of them).
        loop {
            let busy = self.users_active();
            let run = self.copy_back.as_mut().unwrap();
            match run.phase {
                Phase::Sweep => match run.sweep.next(0, now - run.started_at, busy) {
                    Step::Batch { first, len } => {
                        run.watch.start(first, len);
                        self.copy_back_job((first..first + len).collect(), false)?;
                    }
                    Step::Wait(ns) => {
                        self.k.at(now + ns, Ev::CopyBackWake);
                        return Ok(());
                    }
                    Step::Busy => return Ok(()),
                    Step::Finished => {
                        if !run.sweep.stream_idle_and_empty(0) {
                            return Ok(());
                        }
                        run.phase = Phase::Again;
                    }
                },
                Phase::Again => {
                    if run.inflight > 0 {
                        return Ok(());
                    }
                    if let Some(b) = run.again.pop_front() {
                        return self.copy_back_job(b, true);
                    }
                    if run.watch.dirty_len() == 0 || run.rounds == RECOPY_ROUNDS_UNHELD_MAX {
                        run.phase = Phase::Held;
                        self.hold_requests();
                        return self.copy_back_held();
                    }
                    let dirty = run.watch.take_dirty();
                    run.rounds += 1;
                    let per = self.copy_back_plan().batch_moves();
                    let run = self.copy_back.as_mut().unwrap();
                    run.again = dirty.chunks(per).map(|c| c.to_vec()).collect();
                }
                Phase::Held => return self.copy_back_held(),
            }
        }
    }

    /// The last round, once no user request is on the members: the dirty
    /// moves copied a batch at a time, then the replacement takes the slot
    /// (the restored layout) and the held requests go.
    pub(super) fn copy_back_held(&mut self) -> Result<(), String> {
        let on_members = self.users_on_members();
        let Some(run) = self.copy_back.as_mut() else {
            return Ok(());
        };
        if run.phase != Phase::Held || run.finished_at.is_some() || on_members || run.inflight > 0 {
            return Ok(());
        }
        if !run.last_taken {
            run.last_taken = true;
            let dirty = run.watch.take_dirty();
            let per = self.copy_back_plan().batch_moves();
            let run = self.copy_back.as_mut().unwrap();
            run.again = dirty.chunks(per).map(|c| c.to_vec()).collect();
        }
        let run = self.copy_back.as_mut().unwrap();
        if let Some(b) = run.again.pop_front() {
            return self.copy_back_job(b, true);
        }
        // Every chunk is home: the original layout again, the member in sync.
        let now = self.k.now();
        run.finished_at = Some(now);
        let f = run.member;
        self.planner = Planner::new(self.s.layout.as_ref(), self.s.policy, self.service.clone());
        self.state.members[f] = MemberState::InSync;
        self.state_version += 1;
        self.end = self.end.max(now);
        self.release_requests()?;
        Ok(())
    }

    pub(super) fn copy_back_batch_done(&mut self, bytes: u64, again: bool, now: Ns) {
        let chunk = self.s.layout.chunk_bytes().max(1);
        let run = self.copy_back.as_mut().unwrap();
        run.inflight -= 1;
        if again {
            run.recopied += bytes / chunk;
        } else {
            run.sweep.done(0, (bytes / chunk) as usize);
        }
        self.k.at(now, Ev::CopyBackWake);
    }

    /// User writes (or discards) landed on the members: a copy-back running
    /// watches the spare homes they touch.
    pub(super) fn copy_back_written(&mut self, ops: &[(usize, u64, u64)]) {
        if let Some(run) = self.copy_back.as_mut().filter(|r| r.finished_at.is_none()) {
            for &(m, off, len) in ops {
                run.watch.written(m, off, len);
            }
        }
    }
}
