//! The write log in simulated time, deciding as the engine does: every rule
//! (records of whole stripe updates, ring placement with pads, checkpoints
//! to the oldest record still needed, write-back data records and the room
//! kept for the reclaimer (`journal::Reserve`), the memory bound, the
//! reclaimer's trigger, batches and runs) is a function of
//! `hetraid_core::journal`. One log step runs at a time — an
//! append, written to every copy at once, or a checkpoint's header writes —
//! as the engine's appends hold the log's lock.
//!
//! Journal: a user write's stripe updates are logged after its reads and
//! parity arithmetic, then its member writes go out. Write-back: a user
//! write is done once its data records are logged; the reclaimer writes the
//! oldest logged data as journaled writes of its own (jobs that go through
//! the ordinary path), then checkpoints; it runs when a write finds the log
//! more than half used, or no room for its data.

use super::{JobKind, Runner};
use hetraid_core::journal::{self, LogIndex, Placement, Ring, PAGE, RING_OFFSET};
use hetraid_core::plan::{Op, Request};
use std::collections::VecDeque;

/// Device operations tagged as the write log's.
pub(super) const LOG_TAG: u64 = crate::device::INTERNAL - 1;

/// Which queue a job logging stripe records (or HPDA intents) came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum From {
    /// A journaled user write.
    User,
    /// A reclaimer's write.
    Reclaim,
    /// HPDA: a user write the director sent to the RAID4.
    Direct,
}

/// What the log's current sequence of device operations is for.
#[derive(Debug, Clone)]
enum LogStep {
    Checkpoint,
    Stripes {
        job: u32,
        bytes: u64,
        placement: Placement,
        from: From,
    },
    /// A group of write-back data records: (job, at, len, seq, bytes).
    Data {
        parts: Vec<(u32, u64, u64, u64, u64, u64, u64)>,
    },
}

/// A queued write-back write's data records still to log.
struct WbWrite {
    parts: VecDeque<(u64, u64)>,
}

/// A reclaim down to `target` bytes (0: everything), as `Array::reclaim_to`.
struct Reclaim {
    target: u64,
    rounds: usize,
    batch: Vec<journal::Piece<()>>,
    writes: VecDeque<(u64, u64)>,
    job_running: bool,
    checkpoint_due: bool,
    /// HPDA's background reclaimer: one batch, then the policy is asked again.
    one_batch: bool,
}

pub(super) struct LogRun {
    pub(super) ring: Ring,
    generation: u64,
    /// Device indices of the copies (after the members in `devices`, or
    /// HPDA's HDDs), and where each copy starts on its device.
    pub(super) devs: Vec<usize>,
    bases: Vec<u64>,
    /// Array members (the stripe updates' width).
    members: usize,
    /// HPDA: user writes the director sent to the RAID4, waiting for their
    /// intent records.
    pub(super) direct_queue: VecDeque<u32>,
    /// HPDA: stripes named by intent records since the last checkpoint.
    announced: hetraid_core::hpda::Announced,

    pub(super) write_back: bool,
    /// Jobs waiting to log, in order (journal: stripe updates; write-back:
    /// user writes' data).
    pub(super) queue: VecDeque<u32>,
    /// Reclaim jobs waiting to log their stripe updates (served first).
    reclaim_queue: VecDeque<u32>,
    /// The head stripe job's records still to write (bytes each).
    records: VecDeque<u64>,
    /// A stripe record could not be placed right after a checkpoint.
    stripes_checkpointed: bool,
    /// The step's device writes in rounds: one round goes to every copy at
    /// once (as the engine writes the copies in parallel), the next waits
    /// for all of it.
    ops: VecDeque<Vec<(usize, u64, u64)>>,
    /// Writes of the current round not yet done.
    outstanding: usize,
    busy: Option<LogStep>,
    /// Jobs whose stripe records are logged and whose member writes are not
    /// done (a checkpoint waits for them, as the engine's for in-flight records).
    pub(super) applying: u32,
    index: LogIndex<()>,
    /// Write-back: the room kept for the reclaimer (core `journal::Reserve`).
    reserve: journal::Reserve,
    wb: std::collections::HashMap<u32, WbWrite>,
    /// No room for the group: a checkpoint was tried, then reclaims.
    wb_checkpointed: bool,
    wb_attempts: u32,
    /// Ring writes of records (a group of data records is one).
    pub(super) record_writes: u64,
    reclaim: Option<Reclaim>,
    pub(super) records_written: u64,
    pub(super) record_bytes: u64,
    pub(super) pads: u64,
    pub(super) checkpoints: u64,
    pub(super) reclaimed_bytes: u64,
}

impl LogRun {
    /// A freshly created log: the first record at ring offset 0, sequence 1.
    pub(super) fn new(
        ring_bytes: u64,
        devs: Vec<usize>,
        bases: Vec<u64>,
        members: usize,
        write_back: bool,
        redundancy: hetraid_core::layout::Redundancy,
    ) -> Self {
        assert_eq!(devs.len(), bases.len());
        Self {
            ring: Ring::empty(ring_bytes, 0, 1),
            generation: 1,
            devs,
            bases,
            members,
            direct_queue: VecDeque::new(),
            announced: Default::default(),
            write_back,
            queue: VecDeque::new(),
            reclaim_queue: VecDeque::new(),
            records: VecDeque::new(),
            stripes_checkpointed: false,
            ops: VecDeque::new(),
            outstanding: 0,
            busy: None,
            applying: 0,
            index: LogIndex::default(),
            reserve: if write_back {
                journal::Reserve::new(members, redundancy)
            } else {
                journal::Reserve::none(members)
            },
            wb: Default::default(),
            wb_checkpointed: false,
            wb_attempts: 0,
            record_writes: 0,
            reclaim: None,
            records_written: 0,
            record_bytes: 0,
            pads: 0,
            checkpoints: 0,
            reclaimed_bytes: 0,
        }
    }

    /// Does the log hold all of `[start, end)`? (A read needs no member.)
    pub(super) fn covers(&self, start: u64, end: u64) -> bool {
        journal::covers(&self.index.overlapping(start, end), start, end)
    }

    pub(super) fn idle(&self) -> bool {
        self.queue.is_empty()
            && self.reclaim_queue.is_empty()
            && self.direct_queue.is_empty()
            && self.busy.is_none()
            && self.reclaim.is_none()
    }

    /// Queue the device operations of a record (a pad first when it wraps).
    fn push_record(&mut self, p: &Placement, bytes: u64) {
        let round = |off: u64, len: u64| -> Vec<(usize, u64, u64)> {
            self.devs
                .iter()
                .zip(&self.bases)
                .map(|(&d, &b)| (d, b + off, len))
                .collect()
        };
        if let Some((at, _)) = p.pad {
            let r = round(RING_OFFSET + at, PAGE);
            self.ops.push_back(r);
            self.pads += 1;
        }
        let r = round(RING_OFFSET + p.offset, bytes);
        self.ops.push_back(r);
    }

    /// Queue a checkpoint's header writes (the next slot on every copy).
    fn push_checkpoint(&mut self) {
        let slot = (self.generation + 1) % 2;
        let r = self
            .devs
            .iter()
            .zip(&self.bases)
            .map(|(&d, &b)| (d, b + slot * PAGE, PAGE))
            .collect();
        self.ops.push_back(r);
        self.busy = Some(LogStep::Checkpoint);
    }

    pub(super) fn start_reclaim(&mut self, target: u64) {
        self.start_reclaim_batches(target, usize::MAX);
    }

    /// A reclaim of at most `batches_max` batches (`Array::reclaim_batches`).
    pub(super) fn start_reclaim_batches(&mut self, target: u64, batches_max: usize) {
        self.reclaim = Some(Reclaim {
            target,
            rounds: (self.index.pieces().len() + 1).min(batches_max),
            batch: Vec::new(),
            writes: VecDeque::new(),
            job_running: false,
            checkpoint_due: false,
            one_batch: batches_max == 1,
        });
    }

    /// A log copy on member `dev` (at `base`) is in use again.
    pub(super) fn readd_copy(&mut self, dev: usize, base: u64) {
        if !self.devs.contains(&dev) {
            self.devs.push(dev);
            self.bases.push(base);
        }
    }

    /// HPDA: the reclaimer's view of the log (core `hpda::reclaim_step`).
    pub(super) fn fill(&self, copy_lost: bool) -> hetraid_core::hpda::LogFill {
        hetraid_core::hpda::LogFill {
            used_bytes: self.ring.used,
            ring_bytes: self.ring.len,
            holds_data: !self.index.is_empty(),
            copy_lost,
        }
    }

    /// Does the log hold a newer copy of any byte of `[start, end)`?
    pub(super) fn overlaps(&self, start: u64, end: u64) -> bool {
        !self.index.overlapping(start, end).is_empty()
    }

    pub(super) fn reclaiming(&self) -> bool {
        self.reclaim.is_some()
    }
}

impl LogRun {
    fn pop(&mut self, from: From) {
        match from {
            From::User => self.queue.pop_front(),
            From::Reclaim => self.reclaim_queue.pop_front(),
            From::Direct => self.direct_queue.pop_front(),
        };
    }
}

impl Runner<'_> {
    /// The write phase, through the log when there is one (user writes in
    /// journal mode, the reclaimer's writes).
    pub(super) fn before_writes(&mut self, j: u32) -> Result<(), String> {
        let kind = match self.jobs[j as usize].as_ref().unwrap().kind {
            JobKind::User { req, .. } if req.op == Op::Write => 1,
            JobKind::Reclaim { .. } => 2,
            _ => 0,
        };
        match self.log.as_mut() {
            // Write-back logs no user write here but HPDA's in-place ones.
            Some(log) if kind == 1 && log.write_back => {
                log.direct_queue.push_back(j);
                self.log_pump()
            }
            Some(log) if kind == 1 => {
                log.queue.push_back(j);
                self.log_pump()
            }
            Some(log) if kind == 2 => {
                log.reclaim_queue.push_back(j);
                self.log_pump()
            }
            _ => {
                self.issue_writes(j);
                Ok(())
            }
        }
    }

    pub(super) fn reclaim_job_done(&mut self) {
        if let Some(r) = self.log.as_mut().and_then(|l| l.reclaim.as_mut()) {
            r.job_running = false;
        }
    }

    /// Start the log's next step if it is idle.
    pub(super) fn log_pump(&mut self) -> Result<(), String> {
        // Bounded: each pass starts a step, finishes a job or a reclaim
        // round, or returns to wait for a completion.
        for _ in 0..1_000_000 {
            let Some(log) = self.log.as_mut() else {
                return Ok(());
            };
            if log.busy.is_some() {
                return Ok(());
            }
            // 1. A reclaim in progress comes first.
            if log.reclaim.is_some() {
                match self.reclaim_step()? {
                    Pump::Again => continue,
                    Pump::Wait => return Ok(()),
                }
            }
            // 2. HPDA's in-place writes, then the head of the queue.
            if let Some(&j) = log.direct_queue.front() {
                return self.log_stripes(j, From::Direct);
            }
            let Some(&j) = log.queue.front() else {
                return Ok(());
            };
            if !log.write_back {
                return self.log_stripes(j, From::User);
            }
            match self.write_back_step()? {
                Pump::Again => continue,
                Pump::Wait => return Ok(()),
            }
        }
        Err("the simulated write log made no progress; this is a hetraid bug".into())
    }

    /// One step of a reclaim in progress: log a reclaimer's write, run the
    /// next of its member writes, checkpoint after a batch, or take the
    /// next batch (or end).
    fn reclaim_step(&mut self) -> Result<Pump, String> {
        let log = self.log.as_mut().unwrap();
        if let Some(&j) = log.reclaim_queue.front() {
            return self.log_stripes(j, From::Reclaim).map(|()| Pump::Wait);
        }
        let members = log.members;
        let r = log.reclaim.as_mut().unwrap();
        if r.job_running {
            return Ok(Pump::Wait);
        }
        if r.checkpoint_due {
            if log.applying > 0 {
                return Ok(Pump::Wait);
            }
            r.checkpoint_due = false;
            log.push_checkpoint();
            self.log_issue_next();
            return Ok(Pump::Wait);
        }
        if let Some((at, len)) = r.writes.pop_front() {
            r.job_running = true;
            return self.start_reclaim_job(at, len).map(|()| Pump::Wait);
        }
        if !r.batch.is_empty() {
            // The batch is on the members: drop what was not replaced.
            for p in std::mem::take(&mut r.batch) {
                log.index.remove_reclaimed(&p);
            }
            log.reclaim.as_mut().unwrap().checkpoint_due = true;
            return Ok(Pump::Again);
        }
        let more = r.rounds > 0
            && journal::reclaim_more(
                &log.ring,
                log.index.reserved(),
                log.index.is_empty(),
                r.target,
            );
        if !more {
            let one = r.one_batch;
            log.reclaim = None;
            if one {
                // HPDA: ask the policy again (the look may go on).
                self.hpda_step()?;
            }
            // RAID4 writes that wait for the log to empty go once it
            // is (a reclaim of one batch was running: another of
            // everything follows, as the engine's `reclaim_to(0)`).
            if !self.after_reclaim.is_empty() {
                let log = self.log.as_mut().unwrap();
                if log.fill(true).holds_data {
                    log.start_reclaim(0);
                    return Ok(Pump::Again);
                }
                while let Some((req, arrived)) = self.after_reclaim.pop_front() {
                    self.launch(req, arrived, false, None)?;
                }
            }
            return Ok(Pump::Again);
        }
        let max = journal::write_back_record_max(&log.ring, members);
        let (batch, runs) = journal::reclaim_batch(&log.index.pieces(), max);
        let r = log.reclaim.as_mut().unwrap();
        r.rounds -= 1;
        r.batch = batch;
        for (start, end, _) in runs {
            r.writes.extend(journal::split_run(start, end, max));
            log.reclaimed_bytes += end - start;
        }
        Ok(Pump::Again)
    }

    /// Write-back: every queued write's next data record, logged together
    /// (group commit, core `journal::place_group`), as the engine logs the
    /// writes waiting when its leader starts; a full log reclaims (at most
    /// `LOG_FULL_RECLAIMS_MAX` times in a row).
    fn write_back_step(&mut self) -> Result<Pump, String> {
        let log = self.log.as_mut().unwrap();
        // Write-back: every queued write's next data record, logged
        // together (group commit, core `journal::place_group`), as the
        // engine logs the writes waiting when its leader starts.
        let queued: Vec<u32> = log.queue.iter().copied().collect();
        let mut fresh = None;
        for &q in &queued {
            if let std::collections::hash_map::Entry::Vacant(e) = log.wb.entry(q) {
                let JobKind::User { req, .. } = self.jobs[q as usize].as_ref().unwrap().kind else {
                    unreachable!("only user writes queue in write-back mode")
                };
                let max = journal::write_back_record_max(&log.ring, log.members);
                e.insert(WbWrite {
                    parts: journal::split_run(req.offset, req.offset + req.len, max).into(),
                });
                fresh.get_or_insert(q);
            }
        }
        // A write past the high-water mark reclaims first (each write
        // checks once, as it enters the engine's write path).
        if fresh.is_some() {
            if let Some(t) = journal::reclaim_before_write(&log.ring, log.index.reserved()) {
                log.start_reclaim(t);
                return Ok(Pump::Again);
            }
        }
        let writes: Vec<(u64, u64)> = queued
            .iter()
            .map(|q| log.wb[q].parts.front().copied().unwrap_or((0, 0)))
            .collect();
        debug_assert!(writes.iter().all(|&(_, l)| l > 0));
        let (placed, groups) =
            journal::place_group(&mut log.ring, &log.reserve, &log.index, &writes);
        if placed.is_empty() {
            if !log.wb_checkpointed {
                if log.applying > 0 {
                    return Ok(Pump::Wait);
                }
                log.wb_checkpointed = true;
                log.push_checkpoint();
                self.log_issue_next();
                return Ok(Pump::Wait);
            }
            log.wb_attempts += 1;
            log.wb_checkpointed = false;
            if log.wb_attempts > journal::LOG_FULL_RECLAIMS_MAX {
                return Err("the simulated write log stays full although its data was reclaimed; use a larger log_size".into());
            }
            log.start_reclaim(0);
            return Ok(Pump::Again);
        }
        log.wb_checkpointed = false;
        log.wb_attempts = 0;
        for g in &groups {
            let first = placed[g.start].0;
            let bytes: u64 = placed[g.clone()].iter().map(|x| x.1).sum();
            log.push_record(&first, bytes);
            log.record_writes += 1;
        }
        let parts = placed
            .iter()
            .zip(&queued)
            .map(|((p, bytes, cost), &q)| {
                let (at, len) = *log.wb[&q].parts.front().unwrap();
                (q, at, len, p.seq, *bytes, *cost, p.offset)
            })
            .collect();
        log.busy = Some(LogStep::Data { parts });
        self.log_issue_next();
        Ok(Pump::Wait)
    }

    /// Log the stripe updates of job `j` (a journaled user write, or a
    /// reclaimer's write), one record at a time.
    fn log_stripes(&mut self, j: u32, from: From) -> Result<(), String> {
        let log = self.log.as_mut().unwrap();
        if log.records.is_empty() {
            let req = match self.jobs[j as usize].as_ref().unwrap().kind {
                JobKind::User { req, .. } | JobKind::Reclaim { req } => req,
                JobKind::Rebuild { .. }
                | JobKind::CopyBack { .. }
                | JobKind::Scrub
                | JobKind::Grow => {
                    unreachable!("rebuild, copy-back, scrub and grow writes are not logged")
                }
            };
            let plan = self
                .planner
                .plan(&req, &self.state)
                .map_err(|e| e.to_string())?;
            let intents = self.hpda.is_some()
                && hetraid_core::hpda::raid4_guard(self.raid4_whole())
                    == hetraid_core::hpda::Raid4Guard::Intent;
            let log = self.log.as_mut().unwrap();
            let max = log.ring.record_bytes_max() - PAGE;
            // HPDA with the RAID4 whole: one intent page per record (core
            // `raid4_guard`, `intent_records`); otherwise the stripe updates.
            let stripe_count = self.s.layout.stripe_count();
            let sizes = if intents {
                let n = log
                    .announced
                    .intents_for(plan.stripes.iter().map(|p| p.stripe), stripe_count)
                    .len();
                if n == 0 {
                    // Named already: the member writes go out at once, and a
                    // checkpoint waits for them (the engine's in-flight count).
                    log.pop(from);
                    log.applying += 1;
                    self.job(j).logged = true;
                    self.issue_writes(j);
                    return self.log_pump();
                }
                vec![PAGE; n]
            } else {
                journal::record_bytes(&plan.stripes, max)
                    .map_err(|e| format!("the log is too small for this array: {e:?}"))?
            };
            if sizes.is_empty() {
                log.pop(from);
                self.issue_writes(j);
                return self.log_pump();
            }
            log.records = sizes.into();
        }
        let log = self.log.as_mut().unwrap();
        let bytes = *log.records.front().unwrap();
        let slack = log.reserve.slack(log.ring.len);
        let reclaimer = matches!(from, From::Reclaim);
        match journal::place_record(&log.ring, bytes, reclaimer, log.index.reserved(), slack) {
            Some(p) => {
                log.stripes_checkpointed = false;
                log.push_record(&p, bytes);
                log.record_writes += 1;
                log.busy = Some(LogStep::Stripes {
                    job: j,
                    bytes,
                    placement: p,
                    from,
                });
            }
            None if log.applying > 0 => return Ok(()),
            // Not the reclaimer's: the room left is kept for it, so the log
            // is reclaimed first (the engine's writer does the same).
            None if log.stripes_checkpointed && !reclaimer && log.reclaim.is_none() && !log.index.is_empty() => {
                // Its records are computed again after the reclaim; the
                // stripes it named are forgotten (naming again is safe,
                // a name without its record is not), as the engine does.
                log.stripes_checkpointed = false;
                log.records.clear();
                log.announced.clear();
                log.start_reclaim(0);
                return self.log_pump();
            }
            None if log.stripes_checkpointed => {
                return Err(
                    "the simulated write log is full of writes not yet reclaimed; use a larger log_size"
                        .into(),
                )
            }
            None => {
                log.stripes_checkpointed = true;
                log.push_checkpoint();
            }
        }
        self.log_issue_next();
        Ok(())
    }

    fn start_reclaim_job(&mut self, at: u64, len: u64) -> Result<(), String> {
        let req = Request::write(at, len);
        let io = self
            .planner
            .request_io_logged(&req, &self.state)
            .map_err(|e| e.to_string())?;
        self.start_job(JobKind::Reclaim { req }, io)
    }

    fn log_issue_next(&mut self) {
        let now = self.k.now();
        let log = self.log.as_mut().unwrap();
        let round = log.ops.pop_front().expect("a step has operations");
        assert!(!round.is_empty(), "a log write round goes to some copy");
        log.outstanding = round.len();
        for (d, offset, len) in round {
            self.dev_pending[d] += 1;
            let mut started = std::mem::take(&mut self.started);
            self.devices[d].submit(
                now,
                crate::device::DevIo {
                    tag: LOG_TAG,
                    write: true,
                    offset,
                    len,
                },
                &mut started,
            );
            self.schedule_started(d as u32, &mut started);
            self.started = started;
            self.member_ops += 1;
        }
    }

    pub(super) fn log_op_done(&mut self) -> Result<(), String> {
        let log = self.log.as_mut().unwrap();
        log.outstanding -= 1;
        if log.outstanding > 0 {
            return Ok(());
        }
        if !log.ops.is_empty() {
            self.log_issue_next();
            return Ok(());
        }
        match log.busy.take().expect("a log step in progress") {
            LogStep::Checkpoint => {
                // To the oldest record still needed, or past everything; no
                // stripe stays named (every write so far is on the members).
                log.ring.checkpoint_keeping(log.index.oldest_needed());
                log.announced.clear();
                log.generation += 1;
                log.checkpoints += 1;
            }
            LogStep::Stripes {
                job,
                bytes,
                placement,
                from,
            } => {
                log.ring.commit(&placement, bytes);
                log.records.pop_front();
                log.records_written += 1;
                log.record_bytes += bytes;
                if log.records.is_empty() {
                    log.pop(from);
                    log.applying += 1;
                    self.job(job).logged = true;
                    self.issue_writes(job);
                }
            }
            LogStep::Data { parts } => {
                // Indexed in sequence order, as the engine does under its lock.
                let mut finished = Vec::new();
                for (job, at, len, seq, bytes, cost, offset) in parts {
                    log.records_written += 1;
                    log.record_bytes += bytes;
                    log.index.insert(at, len, seq, (), cost, offset);
                    let wb = log.wb.get_mut(&job).expect("a queued write-back write");
                    wb.parts.pop_front();
                    if wb.parts.is_empty() {
                        log.wb.remove(&job);
                        finished.push(job);
                    }
                }
                log.queue.retain(|j| !finished.contains(j));
                for j in finished {
                    self.finish(j)?;
                }
            }
        }
        self.log_pump()
    }
}

/// What the log's pump does after a step: take another, or wait for a
/// completion.
enum Pump {
    Again,
    Wait,
}
