//! User requests in the simulated controller: the load (closed loop or a
//! replayed trace), each request's plan from the core, its start and end, and
//! the write buffer's admission and drain.

use super::*;

/// How far ahead a replay warms the members' models, per prefetch stage:
/// enough requests' time between stages to hide a miss to memory (about
/// 100 ns; a request takes a few hundred).
/// The farthest first.
pub(super) const LOOK_AHEAD_RECORDS: [usize; 3] = [6, 4, 2];
/// Records whose landing place is kept (more than the farthest look).
pub(super) const AHEAD_SLOTS: usize = 16;

impl Runner<'_> {
    pub(super) fn start_load(&mut self) -> Result<(), String> {
        // Closed loops and as-fast-as-possible replays start `qd` requests;
        // a timed replay schedules its first arrival.
        type Next<'a> = fn(&mut Runner<'a>) -> Result<bool, String>;
        let (starts, next): (u32, Next<'_>) = match &mut self.source {
            Source::Closed(c) => (c.qd, Self::next_closed),
            Source::Replay(r) if r.timed => {
                if let Some(at) = r.arrival_ns(0)? {
                    self.k.at(at, Ev::Arrive { index: 0 });
                }
                return Ok(());
            }
            Source::Replay(r) => (r.qd, Self::next_replay),
        };
        for _ in 0..starts {
            if !next(self)? {
                break;
            }
        }
        Ok(())
    }

    pub(super) fn next_closed(&mut self) -> Result<bool, String> {
        let now = self.k.now();
        let Source::Closed(c) = &mut self.source else {
            return Ok(false);
        };
        match c.next(now, &mut self.rng) {
            Some(req) => {
                self.start_user(req)?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    pub(super) fn next_replay(&mut self) -> Result<bool, String> {
        let Source::Replay(r) = &mut self.source else {
            return Ok(false);
        };
        let Some(req) = r.request(r.next)? else {
            return Ok(false);
        };
        let i = r.next;
        r.next += 1;
        self.warm(i);
        self.start_user(req)?;
        Ok(true)
    }

    /// As record `i` is issued, warm the members' models for the records
    /// a few turns ahead: each stage of a model's prefetch
    /// (`Device::prefetch`) some records before the next.
    fn warm(&mut self, i: usize) {
        let (Some(map), Source::Replay(r)) = (self.direct, &mut self.source) else {
            return;
        };
        // Where the farthest lands is found once and kept for the later
        // stages (records are issued in order).
        let far = i + LOOK_AHEAD_RECORDS[0];
        let at = r
            .upcoming(far)
            .and_then(|q| map.locate(q.offset, q.len.min(512)));
        self.ahead[far % AHEAD_SLOTS] = at.map(|(m, off)| (far, m, off));
        for (stage, ahead) in LOOK_AHEAD_RECORDS.iter().enumerate() {
            let j = i + ahead;
            if let Some((_, m, off)) = self.ahead[j % AHEAD_SLOTS].filter(|a| a.0 == j) {
                self.devices[m].prefetch(off, stage as u32);
            }
        }
    }

    pub(super) fn arrive(&mut self, i: usize) -> Result<(), String> {
        let Source::Replay(r) = &mut self.source else {
            return Ok(());
        };
        let req = r
            .request(i)?
            .expect("an arrival is scheduled for a record the trace has");
        r.next = i + 1;
        self.warm(i);
        let Source::Replay(r) = &mut self.source else {
            return Ok(());
        };
        if let Some(at) = r.arrival_ns(i + 1)? {
            let at = at.max(self.k.now());
            self.k.at(
                at,
                Ev::Arrive {
                    index: (i + 1) as u32,
                },
            );
        }
        self.start_user(req)
    }

    /// The members' state as the read policy sees it.
    pub(super) fn member_loads(&self) -> Vec<hetraid_core::readbalance::MemberLoad> {
        (0..self.s.specs.len())
            .map(|d| hetraid_core::readbalance::MemberLoad {
                pending: self.dev_pending[d],
                head: self.dev_head[d],
                rotational: self.s.specs[d].kind == MemberKind::Hdd,
                bytes_per_s: self.devices[d].service_model().bytes_per_s,
            })
            .collect()
    }

    pub(super) fn plan(&mut self, req: &Request) -> Result<RequestIo, String> {
        if req.op == Op::Read {
            self.sit_out_look();
        }
        if req.op == Op::Read
            && self.s.read_policy != hetraid_core::readbalance::ReadPolicy::First
            && hetraid_core::readbalance::keeps_copies(self.s.layout.as_ref())
        {
            let loads = self.member_loads();
            self.planner.reads = Some(hetraid_core::plan::ReadBalance {
                policy: self.s.read_policy,
                loads,
            });
        }
        // Write-back: a read the log holds entirely needs no member.
        if let Some(log) = self.log.as_ref().filter(|l| l.write_back) {
            if req.op == Op::Read && log.covers(req.offset, req.offset + req.len) {
                return Ok(RequestIo::default());
            }
        }
        let io = if self.log.is_some() {
            // With a log, writes take the planned path (the engine's dispatch).
            self.planner.request_io_logged(req, &self.state)
        } else {
            // Vectors of finished jobs reused: no allocation per request.
            let mut io = self.io_pool.pop().unwrap_or_default();
            self.planner
                .request_io_into(req, &self.state, &mut io)
                .map(|()| io)
        };
        io.map_err(|e| format!("request {:?} at {}+{}: {e}", req.op, req.offset, req.len))
    }

    pub(super) fn start_user(&mut self, req: Request) -> Result<(), String> {
        let now = self.k.now();
        if self.inflight == 0 {
            self.busy_since = now;
        }
        self.inflight += 1;
        self.user_seen = true;
        if self.hold_gate {
            // A grow's step or a copy-back's last round runs.
            self.held.push_back((req, now));
            return Ok(());
        }
        self.dispatch(req, now)
    }

    /// Hold user requests that arrive from now on (a grow's step or a
    /// copy-back's last round runs alone, as the engine's run with the
    /// array's lock held for writing).
    pub(super) fn hold_requests(&mut self) {
        self.hold_gate = true;
    }

    /// Are user requests on the members (not held)?
    pub(super) fn users_on_members(&self) -> bool {
        self.inflight as usize > self.held.len()
    }

    /// Let the held requests go, in order; how many there were.
    pub(super) fn release_requests(&mut self) -> Result<u64, String> {
        self.hold_gate = false;
        let held = std::mem::take(&mut self.held);
        let n = held.len() as u64;
        for (req, arrived) in held {
            self.dispatch(req, arrived)?;
        }
        Ok(n)
    }

    /// Start a user request that arrived at `arrived` (counted in flight).
    pub(super) fn dispatch(&mut self, req: Request, arrived: Ns) -> Result<(), String> {
        let now = self.k.now();
        if req.op == Op::Trim {
            // A mapping update at the devices: done at once, as the
            // engine's (whole stripes by the core's rule, none with a log).
            if hetraid_core::trim::trims_discard(self.log.is_some()) {
                let plan = hetraid_core::trim::plan_trim(
                    self.planner.layout,
                    &self.state,
                    req.offset,
                    req.len,
                )
                .map_err(|e| format!("trim at {}+{}: {e}", req.offset, req.len))?;
                for &(m, off, len) in &plan.extents {
                    self.devices[m].discard(off, len);
                }
                self.copy_back_written(&plan.extents);
                self.trim_discarded_bytes += req.len - plan.kept_bytes;
            }
            return self.user_done(req, arrived, now);
        }
        // HPDA: the monitor sees every request; the director (core) sends
        // a write to the log or to the RAID4.
        let mut to_log = self.log.as_ref().is_some_and(|l| l.write_back);
        if let Some(m) = self.hpda.as_mut() {
            match req.op {
                Op::Read | Op::Trim => m.read(now),
                Op::Write => {
                    let kind = m.write(req.offset, req.len, now);
                    let log = self.log.as_ref().expect("hpda has a log");
                    let cond = hetraid_core::hpda::Condition {
                        raid4_whole: self.raid4_whole(),
                        log_copies_live: log.devs.len(),
                        log_copies: self.s.log.as_ref().map_or(2, |l| l.on_members.len()),
                        overlaps_log: log.overlaps(req.offset, req.offset + req.len),
                    };
                    to_log = hetraid_core::hpda::route_write(kind, &cond)
                        == hetraid_core::hpda::Route::Log;
                    self.hpda_routed[usize::from(!to_log)] += 1;
                    if !to_log
                        && cond.log_copies_live < cond.log_copies
                        && (log.reclaiming() || log.fill(true).holds_data)
                    {
                        // A lost copy: the log is emptied onto the RAID4
                        // first, and the write waits for it (as the
                        // engine's does: nothing stays on one copy, and
                        // the write reads the RAID4 the reclaim wrote).
                        let log = self.log.as_mut().unwrap();
                        if !log.reclaiming() {
                            log.start_reclaim(0);
                        }
                        self.after_reclaim.push_back((req, arrived));
                        return self.log_pump();
                    }
                }
            }
        }
        // The write buffer: a write is acknowledged once it is in the
        // buffer (when it has room; otherwise it waits for room), and the
        // buffer drains it to the members meanwhile.
        if req.op == Op::Write && self.wbuf.capacity() > 0 {
            if !self.wbuf.admits(req.len) {
                self.wbuf_waiting.push_back((req, arrived));
                return Ok(());
            }
            return self.buffer_write(req, arrived);
        }
        self.launch(req, arrived, to_log, None)
    }

    /// A user request is done (for a buffered write: acknowledged): its
    /// response time, the counters, and the next request of the load.
    pub(super) fn user_done(&mut self, req: Request, arrived: Ns, now: Ns) -> Result<(), String> {
        if req.op == Op::Trim {
            self.trims += 1;
            self.trim_bytes += req.len;
        } else {
            self.user_counted(req, now - arrived);
        }
        self.inflight -= 1;
        if self.inflight == 0 {
            self.array_busy_ns += now - self.busy_since;
        }
        self.last_user_done = now;
        // A grow's step or a copy-back's last round waits for the requests
        // on the members.
        if self.hold_gate && !self.users_on_members() {
            self.grow_try_step()?;
            self.copy_back_held()?;
        }
        match &self.source {
            Source::Closed(_) => {
                self.next_closed()?;
            }
            Source::Replay(r) if !r.timed => {
                self.next_replay()?;
            }
            Source::Replay(_) => {}
        }
        Ok(())
    }

    /// A read or write done in `rt`: its response time and the counters.
    pub(super) fn user_counted(&mut self, req: Request, rt: Ns) {
        match req.op {
            Op::Read => self.resp_read.push(rt),
            _ => self.resp_write.push(rt),
        }
        if self
            .rebuild
            .as_ref()
            .is_some_and(|r| r.finished_at.is_none())
        {
            self.resp_rebuild.push(rt);
        }
        if self
            .copy_back
            .as_ref()
            .is_some_and(|c| c.finished_at.is_none())
        {
            self.resp_copy_back.push(rt);
        }
        if let Some(g) = self.grow.as_mut().filter(|g| g.finished_at.is_none()) {
            g.resp.push(rt);
        }
        self.bytes += req.len;
        match req.op {
            Op::Read => self.reads += 1,
            _ => self.writes += 1,
        }
    }

    /// A write enters the buffer: acknowledged now (after `arrived`), drained
    /// by a job of its own.
    pub(super) fn buffer_write(&mut self, req: Request, arrived: Ns) -> Result<(), String> {
        self.wbuf.push(req.offset, req.len, (req, arrived));
        self.wbuf_drain()?;
        let now = self.k.now();
        self.user_done(req, arrived, now)
    }

    /// Start buffered writes as the engine's drainers take them (core
    /// `wbuf::DrainQueue`: at most `wbuf::DRAINERS` at once, the oldest one
    /// clear of draining and earlier writes first).
    pub(super) fn wbuf_drain(&mut self) -> Result<(), String> {
        // Bounded: each round starts a queued write or returns.
        while let Some(w) = self.wbuf.start_next() {
            let (req, arrived) = w.item;
            self.launch(req, arrived, false, Some(w.ticket))?;
        }
        Ok(())
    }
}
