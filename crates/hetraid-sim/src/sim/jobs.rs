//! Jobs on the members: a request's or a background batch's member I/O, its
//! stripe locks (the engine's semantics), reads, parity time, writes and end.

use super::*;

/// Finished jobs' member-operation vectors kept for the next plans.
const IO_POOL_MAX: usize = 256;

impl Runner<'_> {
    /// A new job of `kind` doing `io`, planned now, started (or queued for
    /// its stripes).
    pub(super) fn start_job(&mut self, kind: JobKind, io: RequestIo) -> Result<(), String> {
        let j = self.alloc(Job {
            logged: false,
            kind,
            io,
            pending: 0,
            phase: Phase::Reads,
            locked: false,
            planned_version: self.state_version,
        });
        self.try_lock(j)
    }

    pub(super) fn alloc(&mut self, job: Job) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.jobs[i as usize] = Some(job);
                i
            }
            None => {
                self.jobs.push(Some(job));
                (self.jobs.len() - 1) as u32
            }
        }
    }

    pub(super) fn job(&mut self, j: u32) -> &mut Job {
        self.jobs[j as usize].as_mut().expect("live job")
    }

    /// Plan and start a user request's job.
    pub(super) fn launch(
        &mut self,
        req: Request,
        arrived: Ns,
        to_log: bool,
        buffered: Option<u64>,
    ) -> Result<(), String> {
        let io = self.plan(&req)?;
        let j = self.alloc(Job {
            logged: false,
            kind: JobKind::User {
                req,
                arrived,
                buffered,
            },
            io,
            pending: 0,
            phase: Phase::Reads,
            locked: false,
            planned_version: self.state_version,
        });
        if to_log && req.op == Op::Write {
            // Write-back: the write is done once it is in the log.
            self.job(j).io = RequestIo::default();
            self.log.as_mut().unwrap().queue.push_back(j);
            return self.log_pump();
        }
        if self.job(j).io.stripes.is_empty() {
            self.issue_reads(j);
            Ok(())
        } else {
            self.try_lock(j)
        }
    }

    pub(super) fn lockable(&self, j: u32) -> bool {
        let job = self.jobs[j as usize].as_ref().unwrap();
        job.io.stripes.iter().all(|s| !self.locked.contains(s))
    }

    /// Do jobs `a` and `b` want a common stripe?
    pub(super) fn conflict(&self, a: u32, b: u32) -> bool {
        let sa = &self.jobs[a as usize].as_ref().unwrap().io.stripes;
        let sb = &self.jobs[b as usize].as_ref().unwrap().io.stripes;
        sa.iter().any(|s| sb.contains(s))
    }

    /// May job `j` take its stripes now, with `ahead` still waiting before it? Like
    /// the engine's per-stripe locks: requests on other stripes never wait for it,
    /// and it never overtakes a waiter it shares a stripe with.
    pub(super) fn may_lock(&self, j: u32, ahead: &VecDeque<u32>) -> bool {
        self.lockable(j) && ahead.iter().all(|&w| !self.conflict(w, j))
    }

    /// Take every stripe of job `j` and start it, or queue it until they are free.
    pub(super) fn try_lock(&mut self, j: u32) -> Result<(), String> {
        if !self.may_lock(j, &self.waiting) {
            self.waiting.push_back(j);
            return Ok(());
        }
        self.lock(j)?;
        self.issue_reads(j);
        Ok(())
    }

    /// Mark job `j`'s stripes locked and plan it again if the state moved on.
    pub(super) fn lock(&mut self, j: u32) -> Result<(), String> {
        let version = self.state_version;
        let job = self.jobs[j as usize].as_mut().unwrap();
        self.locked.extend_from_slice(&job.io.stripes);
        job.locked = true;
        // Planned under the lock, like the engine: a rebuild may have finished a
        // stripe since.
        if job.planned_version != version {
            if let JobKind::User { req, .. } | JobKind::Reclaim { req } = job.kind {
                let io = if self.log.is_some() {
                    self.planner.request_io_logged(&req, &self.state)
                } else {
                    self.planner.request_io(&req, &self.state)
                }
                .map_err(|e| e.to_string())?;
                let job = self.jobs[j as usize].as_mut().unwrap();
                // The stripe set only depends on the request, not the state.
                job.io = RequestIo {
                    stripes: std::mem::take(&mut job.io.stripes),
                    ..io
                };
                job.planned_version = version;
            }
        }
        Ok(())
    }

    pub(super) fn unlock(&mut self, j: u32) -> Result<(), String> {
        let job = self.jobs[j as usize].as_mut().unwrap();
        if !job.locked {
            return Ok(());
        }
        job.locked = false;
        let stripes = std::mem::take(&mut job.io.stripes);
        self.locked.retain(|s| !stripes.contains(s));
        // Waiters in order: each takes all its stripes or stays. The ones that go
        // are started after the queue is settled (starting one can finish it and
        // come back here).
        let mut still = VecDeque::with_capacity(self.waiting.len());
        let mut go = Vec::new();
        let waiting = std::mem::take(&mut self.waiting);
        for w in waiting {
            if self.may_lock(w, &still) {
                self.lock(w)?;
                go.push(w);
            } else {
                still.push_back(w);
            }
        }
        self.waiting = still;
        for w in go {
            self.issue_reads(w);
        }
        Ok(())
    }

    pub(super) fn submit_all(&mut self, j: u32, write: bool) -> u32 {
        let now = self.k.now();
        let tag = j as u64;
        let job = self.jobs[j as usize].as_ref().unwrap();
        let ops = if write { &job.io.writes } else { &job.io.reads };
        let n = ops.len() as u32;
        let mut started = std::mem::take(&mut self.started);
        for i in 0..ops.len() {
            let (m, offset, len) = self.jobs[j as usize].as_ref().unwrap().io_op(write, i);
            self.dev_pending[m] += 1;
            self.dev_head[m] = offset + len;
            if !write {
                self.read_started(m, now);
            }
            self.devices[m].submit(
                now,
                crate::device::DevIo {
                    tag,
                    write,
                    offset,
                    len,
                },
                &mut started,
            );
            self.schedule_started(m as u32, &mut started);
        }
        self.started = started;
        self.member_ops += n as u64;
        n
    }

    pub(super) fn issue_reads(&mut self, j: u32) {
        let n = self.submit_all(j, false);
        let job = self.job(j);
        job.phase = Phase::Reads;
        job.pending = n;
        if n == 0 {
            self.after_reads(j);
        }
    }

    pub(super) fn after_reads(&mut self, j: u32) {
        let xor = self.xor_ns_per_byte;
        let job = self.job(j);
        if job.io.writes.is_empty() {
            job.phase = Phase::Writes;
            job.pending = 0;
            let _ = self.finish(j);
            return;
        }
        let t = (job.io.xor_bytes as f64 * xor) as Ns;
        if t > 0 {
            let at = self.k.now() + t;
            self.k.at(at, Ev::Xor { job: j });
        } else {
            let _ = self.before_writes(j);
        }
    }

    pub(super) fn issue_writes(&mut self, j: u32) {
        let n = self.submit_all(j, true);
        let job = self.job(j);
        job.phase = Phase::Writes;
        job.pending = n;
        if n == 0 {
            let _ = self.finish(j);
        }
    }

    pub(super) fn op_done(&mut self, tag: u32) -> Result<(), String> {
        let job = self.job(tag);
        job.pending -= 1;
        if job.pending > 0 {
            return Ok(());
        }
        match job.phase {
            Phase::Reads => {
                self.after_reads(tag);
                Ok(())
            }
            Phase::Writes => self.finish(tag),
        }
    }

    pub(super) fn finish(&mut self, j: u32) -> Result<(), String> {
        self.unlock(j)?;
        let mut job = self.jobs[j as usize].take().unwrap();
        self.free.push(j);
        if matches!(job.kind, JobKind::User { .. } | JobKind::Reclaim { .. }) {
            self.copy_back_written(&job.io.writes);
        }
        if self.io_pool.len() < IO_POOL_MAX {
            self.io_pool.push(std::mem::take(&mut job.io));
        }
        if job.logged {
            self.log.as_mut().unwrap().applying -= 1;
        }
        if let JobKind::Reclaim { .. } = job.kind {
            self.reclaim_job_done();
        }
        if job.logged || matches!(job.kind, JobKind::Reclaim { .. }) {
            self.log_pump()?;
        }
        let now = self.k.now();
        self.end = self.end.max(now);
        match job.kind {
            JobKind::User {
                buffered: Some(ticket),
                ..
            } => {
                // Drained: room for the writes waiting, in order. The load
                // is not over until its writes are on the members (as a
                // final flush waits): throughput counts the drain.
                self.wbuf.done(ticket);
                self.wbuf_drain()?;
                self.last_user_done = self.last_user_done.max(now);
                // Bounded by the writes waiting.
                while let Some(&(w, at)) = self.wbuf_waiting.front() {
                    if !self.wbuf.admits(w.len) {
                        break;
                    }
                    self.wbuf_waiting.pop_front();
                    self.buffer_write(w, at)?;
                }
            }
            JobKind::User { req, arrived, .. } => self.user_done(req, arrived, now)?,
            JobKind::Reclaim { .. } => {}
            JobKind::CopyBack { bytes, again } => self.copy_back_batch_done(bytes, again, now),
            JobKind::Scrub => self.scrub_stripe_done(now),
            JobKind::Grow => self.grow_step_done(now)?,
            JobKind::Rebuild { stream, batch } => {
                let rb = self.rebuild.as_mut().unwrap();
                rb.sweep.done(stream, batch.len());
                if let MemberState::Rebuilding {
                    done: Some(bits), ..
                } = &mut self.state.members[rb.target]
                {
                    let bits = Arc::make_mut(bits);
                    for s in batch {
                        bits[(s / 64) as usize] |= 1 << (s % 64);
                    }
                }
                self.state_version += 1;
                self.k.at(
                    now,
                    Ev::RebuildWake {
                        stream: stream as u32,
                    },
                );
            }
        }
        Ok(())
    }
}

impl Job {
    fn io_op(&self, write: bool, i: usize) -> (usize, u64, u64) {
        if write {
            self.io.writes[i]
        } else {
            self.io.reads[i]
        }
    }
}
