//! The RAID controller in simulated time. It asks the core what every request becomes
//! on the members (`Planner::request_io`: the engine's own dispatch), locks stripes
//! with the engine's semantics (planned requests lock, direct paths do not), issues
//! the reads, spends the parity arithmetic time, issues the writes, and rebuilds with
//! the core's schedule under MD-style speed limits. It decides nothing itself.

mod log;
mod rebuild;

use log::{LogRun, LOG_TAG};

pub use crate::setup::{request_stream, Setup};

use crate::config::RunConfig;
use crate::device::{Device, Started, INTERNAL};
use crate::kernel::{Kernel, Ns, Rng, NS_PER_S};
use crate::report::{summarize, LogReport, MemberReport, RebuildReport, Report};
use crate::workload::Source;
use hetraid_core::iomap::RequestIo;
use hetraid_core::plan::{ArrayState, MemberState, Op, Planner, Request};
use hetraid_core::{MemberKind, WritePolicy};
use std::collections::VecDeque;
use std::sync::Arc;

#[derive(Debug, Clone, Copy)]
enum Ev {
    Dev {
        dev: u32,
        tag: u64,
    },
    Xor {
        job: u32,
    },
    Arrive {
        index: u32,
    },
    RebuildWake {
        stream: u32,
    },
    /// Start copy-back batches (up to the core's number in flight).
    CopyBackWake,
    /// HPDA: ask the reclaimer's policy (core `hpda::reclaim_step`).
    HpdaWake,
    /// A write-back log's idle reclaimer looks (core `idle_reclaim_due`).
    LogIdle,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Reads,
    Writes,
}

enum JobKind {
    User {
        req: Request,
        arrived: Ns,
        /// Acknowledged when it entered the write buffer; the job is the
        /// buffer draining it to the members.
        buffered: bool,
    },
    Rebuild {
        stream: usize,
        batch: Vec<u64>,
    },
    /// One batch of a copy-back: its reads from spare homes, then its
    /// writes onto the replacement.
    CopyBack {
        bytes: u64,
    },
    /// A write-back reclaimer's write (journaled like a user write).
    Reclaim {
        req: Request,
    },
}

struct Job {
    kind: JobKind,
    /// Its stripe updates went through the write log (member writes pending
    /// or done).
    logged: bool,
    io: RequestIo,
    pending: u32,
    phase: Phase,
    locked: bool,
    planned_version: u64,
}

struct RebuildRun {
    target: usize,
    streams: Vec<Vec<u64>>,
    /// Per stream, the spare slot it writes into (rebuild into spare space).
    redirect: Vec<Option<(usize, usize)>>,
    pos: Vec<usize>,
    /// Per stream, batches in flight (at most `lanes`).
    inflight: Vec<usize>,
    active: usize,
    batch: usize,
    /// Batches kept in flight per stream (core `batches_in_flight`).
    lanes: usize,
    bytes: u64,
    /// Per stream, bytes rebuilt (what per-stream limits hold) and when it
    /// wrote its last batch.
    stream_bytes: Vec<u64>,
    stream_done: Vec<Option<Ns>>,
    /// What the speed limits hold: the whole rebuild or each stream.
    pace: hetraid_core::pace::PaceScope,
    finished_at: Option<Ns>,
}

struct Runner<'a> {
    s: &'a Setup,
    planner: Planner<'a>,
    devices: Vec<Box<dyn Device>>,
    state: ArrayState,
    state_version: u64,
    k: Kernel<Ev>,
    rng: Rng,
    source: Source,
    jobs: Vec<Option<Job>>,
    free: Vec<u32>,
    locked: Vec<u64>,
    waiting: VecDeque<u32>,
    started: Started,
    xor_ns_per_byte: f64,
    // Metrics.
    resp: Vec<Ns>,
    /// The same, by direction.
    resp_read: Vec<Ns>,
    resp_write: Vec<Ns>,
    resp_rebuild: Vec<Ns>,
    bytes: u64,
    reads: u64,
    writes: u64,
    /// Trims: how many, the bytes they named, the bytes discarded.
    trims: u64,
    trim_bytes: u64,
    trim_discarded_bytes: u64,
    inflight: u32,
    busy_since: Ns,
    array_busy_ns: Ns,
    last_user_done: Ns,
    end: Ns,
    member_ops: u64,
    rebuild: Option<RebuildRun>,
    copy_back: Option<rebuild::CopyBackRun>,
    /// The replacement could not be built (reported at the next wake-up).
    copy_back_error: Option<String>,
    resp_copy_back: Vec<Ns>,
    service: Vec<hetraid_core::ServiceModel>,
    log: Option<LogRun>,
    /// HPDA: the monitor (None: another layout), and whether a wake-up of
    /// the reclaimer is scheduled.
    hpda: Option<hetraid_core::hpda::Monitor>,
    hpda_wake_at: Option<Ns>,
    /// HPDA: user writes sent to the log, and to the RAID4.
    hpda_routed: [u64; 2],
    /// Per device: operations in flight, and where the last one submitted
    /// ends (what reads balance on).
    dev_pending: Vec<u32>,
    dev_head: Vec<u64>,
    /// The write buffer: its size (0: none), bytes in it, and the writes
    /// waiting for room (request, arrival).
    wbuf_cap: u64,
    wbuf_used: u64,
    wbuf_waiting: VecDeque<(Request, Ns)>,
    /// Buffered writes not yet draining (oldest first), and the ranges of
    /// those draining.
    wbuf_queue: VecDeque<(Request, Ns)>,
    wbuf_running: Vec<(u64, u64)>,
    /// The write-back log's idle reclaimer: when it looks next, when the
    /// last user request arrived, and how many times it reclaimed.
    log_idle_at: Option<Ns>,
    last_user_arrival: Ns,
    log_idle_reclaims: u64,
    /// HPDA: RAID4 writes waiting for the log to be emptied (a copy lost).
    after_reclaim: VecDeque<(Request, Ns)>,
}

/// Run one simulation.
pub fn run(cfg: &RunConfig) -> Result<Report, String> {
    let setup = Setup::new(cfg)?;
    run_setup(&setup)
}

/// A device model for `spec` with the run's overrides (disk scheduler, write
/// cache); `precondition` fills an SSD first.
fn build_device(
    s: &Setup,
    spec: &crate::preset::DeviceSpec,
    precondition: bool,
) -> Result<Box<dyn Device>, String> {
    let mut spec = spec.clone();
    if let Some(h) = spec.hdd.as_mut() {
        if let Some(sch) = &s.cfg.scheduler {
            h.scheduler = crate::device::hdd::Scheduler::parse(sch)?;
        }
        if let Some(wc) = s.cfg.write_cache {
            h.write_cache = wc;
        }
        if let Some(q) = s.cfg.disk_queue {
            h.queue_depth = Some(q);
        }
    }
    Ok(match (&spec.ssd, precondition) {
        (Some(p), true) if spec.kind == MemberKind::Ssd => {
            let mut ssd = crate::device::ssd::Ssd::new(p.clone());
            ssd.precondition();
            Box::new(ssd)
        }
        _ => spec.build(),
    })
}

pub fn run_setup(s: &Setup) -> Result<Report, String> {
    let mut devices: Vec<Box<dyn Device>> = s
        .specs
        .iter()
        .map(|spec| build_device(s, spec, s.cfg.precondition))
        .collect::<Result<_, _>>()?;
    let service = if s.policy == WritePolicy::Cost {
        devices.iter().map(|d| d.service_model()).collect()
    } else {
        Vec::new()
    };
    let n = devices.len();
    let mut state = ArrayState::healthy(n);
    let mut rebuild = None;
    if let Some(failed) = &s.cfg.failed {
        for &m in &failed.0 {
            state.members[m] = MemberState::Failed;
        }
        let f = failed.first();
        if let (true, Some((sched, _))) = (s.cfg.rebuild, &s.spare) {
            // Into spare space: no new device; the member stays failed until the
            // relocated layout takes over at the end (as the engine commits it).
            rebuild = Some(RebuildRun {
                target: f,
                active: sched.streams.len(),
                pos: vec![0; sched.streams.len()],
                inflight: vec![0; sched.streams.len()],
                redirect: sched.streams.iter().map(|st| st.target).collect(),
                streams: sched.streams.iter().map(|st| st.stripes.clone()).collect(),
                batch: hetraid_core::rebuild::batch_stripes(s.layout.as_ref(), s.cfg.max_speed.0),
                lanes: hetraid_core::rebuild::batches_in_flight(s.layout.as_ref()),
                bytes: 0,
                stream_bytes: vec![0; sched.streams.len()],
                stream_done: vec![None; sched.streams.len()],
                pace: s.pace,
                finished_at: None,
            });
        } else if s.cfg.rebuild {
            let sched = hetraid_core::rebuild::schedule(s.layout.as_ref(), &state, &[f], false)
                .map_err(|e| e.to_string())?;
            let stripes = s.layout.stripe_count() as usize;
            state.members[f] = MemberState::Rebuilding {
                valid_below_stripe: 0,
                done: Some(Arc::new(vec![0u64; stripes.div_ceil(64)])),
            };
            // The failed device is replaced by a fresh one of the same model.
            // A new device, with the run's overrides, fresh (not preconditioned).
            devices[f] = build_device(s, &s.specs[f], false)?;
            rebuild = Some(RebuildRun {
                target: f,
                active: sched.streams.len(),
                pos: vec![0; sched.streams.len()],
                inflight: vec![0; sched.streams.len()],
                redirect: vec![None; sched.streams.len()],
                stream_bytes: vec![0; sched.streams.len()],
                stream_done: vec![None; sched.streams.len()],
                streams: sched.streams.into_iter().map(|st| st.stripes).collect(),
                batch: hetraid_core::rebuild::batch_stripes(s.layout.as_ref(), s.cfg.max_speed.0),
                lanes: hetraid_core::rebuild::batches_in_flight(s.layout.as_ref()),
                bytes: 0,
                pace: s.pace,
                finished_at: None,
            });
        }
    }
    let log = match &s.log {
        Some(l) => {
            let first = devices.len();
            for spec in &l.specs {
                devices.push(build_device(s, spec, s.cfg.precondition)?);
            }
            if l.on_members.is_empty() {
                Some(LogRun::new(
                    l.ring_bytes,
                    (first..first + l.specs.len()).collect(),
                    vec![0; l.specs.len()],
                    first,
                    l.write_back,
                    s.layout.redundancy(),
                ))
            } else {
                // HPDA: a failed HDD takes its copy with it.
                let live: Vec<(usize, u64)> = l
                    .on_members
                    .iter()
                    .copied()
                    .filter(|&(m, _)| state.members[m] == MemberState::InSync)
                    .collect();
                Some(LogRun::new(
                    l.ring_bytes,
                    live.iter().map(|x| x.0).collect(),
                    live.iter().map(|x| x.1).collect(),
                    first,
                    l.write_back,
                    s.layout.redundancy(),
                ))
            }
        }
        None => None,
    };
    let n_devices = devices.len();
    let hpda = (!s.layout.log_regions().is_empty())
        .then(|| hetraid_core::hpda::Monitor::new(hetraid_core::hpda::MonitorConfig::default()));
    let r = Runner {
        log,
        hpda,
        hpda_wake_at: None,
        hpda_routed: [0; 2],
        dev_pending: vec![0; n_devices],
        // Heads start at the outer edge (offset 0).
        dev_head: vec![0; n_devices],
        wbuf_cap: s.cfg.write_buffer.map_or(0, |b| b.0),
        wbuf_used: 0,
        wbuf_waiting: VecDeque::new(),
        after_reclaim: VecDeque::new(),
        log_idle_at: None,
        last_user_arrival: 0,
        log_idle_reclaims: 0,
        wbuf_queue: VecDeque::new(),
        wbuf_running: Vec::new(),
        planner: Planner::new(s.layout.as_ref(), s.policy, service.clone()),
        service,
        s,
        devices,
        state,
        state_version: 0,
        k: Kernel::default(),
        rng: Rng::new(s.cfg.seed),
        source: s.source()?,
        jobs: Vec::new(),
        free: Vec::new(),
        locked: Vec::new(),
        waiting: VecDeque::new(),
        started: Vec::with_capacity(8),
        xor_ns_per_byte: if s.cfg.xor_mbps > 0.0 {
            1e3 / s.cfg.xor_mbps
        } else {
            0.0
        },
        resp: Vec::new(),
        resp_read: Vec::new(),
        resp_write: Vec::new(),
        resp_rebuild: Vec::new(),
        bytes: 0,
        reads: 0,
        writes: 0,
        trims: 0,
        trim_bytes: 0,
        trim_discarded_bytes: 0,
        inflight: 0,
        busy_since: 0,
        array_busy_ns: 0,
        last_user_done: 0,
        end: 0,
        member_ops: 0,
        rebuild,
        copy_back: None,
        copy_back_error: None,
        resp_copy_back: Vec::new(),
    };
    r.run()
}

impl Runner<'_> {
    fn run(mut self) -> Result<Report, String> {
        self.start_load()?;
        if let Some(rb) = &self.rebuild {
            for st in 0..rb.streams.len() {
                self.k.at(0, Ev::RebuildWake { stream: st as u32 });
            }
            if rb.streams.is_empty() {
                self.finish_rebuild_if_done();
            }
        }
        while let Some(ev) = self.k.pop() {
            match ev {
                Ev::Dev { dev, tag } => {
                    let now = self.k.now();
                    let mut started = std::mem::take(&mut self.started);
                    self.devices[dev as usize].complete(now, &mut started);
                    self.schedule_started(dev, &mut started);
                    self.started = started;
                    if tag != INTERNAL {
                        self.dev_pending[dev as usize] -= 1;
                    }
                    if tag == LOG_TAG {
                        self.log_op_done()?;
                    } else if tag != INTERNAL {
                        self.op_done(tag as u32)?;
                    }
                }
                Ev::Xor { job } => self.before_writes(job)?,
                Ev::Arrive { index } => self.arrive(index as usize)?,
                Ev::RebuildWake { stream } => self.rebuild_next(stream as usize)?,
                Ev::CopyBackWake => self.copy_back_next()?,
                Ev::HpdaWake => self.hpda_wake()?,
                Ev::LogIdle => self.log_idle()?,
            }
        }
        // Invariants at the end: every request finished, nothing holds or waits for
        // a stripe, and a rebuild that was started completed.
        let left = self.jobs.iter().filter(|j| j.is_some()).count();
        let log_left = self.log.as_ref().is_some_and(|l| !l.idle());
        if left > 0
            || log_left
            || self.inflight > 0
            || !self.locked.is_empty()
            || !self.waiting.is_empty()
        {
            return Err(format!(
                "the simulation stopped with {left} operations unfinished ({} waiting for stripes); this is a hetraid bug: please report it with the config and seed {}",
                self.waiting.len(),
                self.s.cfg.seed
            ));
        }
        if self
            .rebuild
            .as_ref()
            .is_some_and(|r| r.finished_at.is_none())
        {
            return Err(format!(
                "the rebuild did not finish; this is a hetraid bug: please report it with the config and seed {}",
                self.s.cfg.seed
            ));
        }
        if self.s.copy_back.is_some()
            && self
                .copy_back
                .as_ref()
                .and_then(|c| c.finished_at)
                .is_none()
        {
            return Err(format!(
                "the copy-back did not finish; this is a hetraid bug: please report it with the config and seed {}",
                self.s.cfg.seed
            ));
        }
        Ok(self.report())
    }

    fn schedule_started(&mut self, dev: u32, started: &mut Started) {
        for (tag, at) in started.drain(..) {
            self.k.at(at, Ev::Dev { dev, tag });
        }
    }

    fn start_load(&mut self) -> Result<(), String> {
        match &self.source {
            Source::Closed(c) => {
                for _ in 0..c.qd {
                    if !self.next_closed()? {
                        break;
                    }
                }
            }
            Source::Replay(r) => {
                if r.timed {
                    let at = r.arrival_ns(0);
                    self.k.at(at, Ev::Arrive { index: 0 });
                } else {
                    for _ in 0..r.qd {
                        if !self.next_replay()? {
                            break;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    fn next_closed(&mut self) -> Result<bool, String> {
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

    fn next_replay(&mut self) -> Result<bool, String> {
        let Source::Replay(r) = &mut self.source else {
            return Ok(false);
        };
        if r.next >= r.records.len() {
            return Ok(false);
        }
        let req = r.request(r.next);
        r.next += 1;
        self.start_user(req)?;
        Ok(true)
    }

    fn arrive(&mut self, i: usize) -> Result<(), String> {
        let Source::Replay(r) = &mut self.source else {
            return Ok(());
        };
        let req = r.request(i);
        r.next = i + 1;
        if i + 1 < r.records.len() {
            let at = r.arrival_ns(i + 1).max(self.k.now());
            self.k.at(
                at,
                Ev::Arrive {
                    index: (i + 1) as u32,
                },
            );
        }
        self.start_user(req)
    }

    /// A new job of `kind` doing `io`, planned now, started (or queued for
    /// its stripes).
    fn start_job(&mut self, kind: JobKind, io: RequestIo) -> Result<(), String> {
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

    fn alloc(&mut self, job: Job) -> u32 {
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

    fn job(&mut self, j: u32) -> &mut Job {
        self.jobs[j as usize].as_mut().expect("live job")
    }

    /// The members' state as the read policy sees it.
    fn member_loads(&self) -> Vec<hetraid_core::readbalance::MemberLoad> {
        (0..self.s.specs.len())
            .map(|d| hetraid_core::readbalance::MemberLoad {
                pending: self.dev_pending[d],
                head: self.dev_head[d],
                rotational: self.s.specs[d].kind == MemberKind::Hdd,
                bytes_per_s: self.devices[d].service_model().bytes_per_s,
            })
            .collect()
    }

    fn plan(&mut self, req: &Request) -> Result<RequestIo, String> {
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
            self.planner.request_io(req, &self.state)
        };
        io.map_err(|e| format!("request {:?} at {}+{}: {e}", req.op, req.offset, req.len))
    }

    fn start_user(&mut self, req: Request) -> Result<(), String> {
        let now = self.k.now();
        if self.inflight == 0 {
            self.busy_since = now;
        }
        self.inflight += 1;
        self.log_idle_later(now);
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
                self.trim_discarded_bytes += req.len - plan.kept_bytes;
            }
            return self.user_done(req, now, now);
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
                        self.hpda_wake_later(now);
                        self.after_reclaim.push_back((req, now));
                        return self.log_pump();
                    }
                }
            }
            self.hpda_wake_later(now);
        }
        // The write buffer: a write is acknowledged once it is in the
        // buffer (when it has room; otherwise it waits for room), and the
        // buffer drains it to the members meanwhile.
        if req.op == Op::Write && self.wbuf_cap > 0 {
            if !hetraid_core::wbuf::admits(self.wbuf_used, req.len, self.wbuf_cap) {
                self.wbuf_waiting.push_back((req, now));
                return Ok(());
            }
            return self.buffer_write(req, now);
        }
        self.launch(req, now, to_log, false)
    }

    /// A user request is done (for a buffered write: acknowledged): its
    /// response time, the counters, and the next request of the load.
    fn user_done(&mut self, req: Request, arrived: Ns, now: Ns) -> Result<(), String> {
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
    fn user_counted(&mut self, req: Request, rt: Ns) {
        self.resp.push(rt);
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
        self.bytes += req.len;
        match req.op {
            Op::Read => self.reads += 1,
            _ => self.writes += 1,
        }
    }

    /// A write enters the buffer: acknowledged now (after `arrived`), drained
    /// by a job of its own.
    fn buffer_write(&mut self, req: Request, arrived: Ns) -> Result<(), String> {
        self.wbuf_used += req.len;
        self.wbuf_queue.push_back((req, arrived));
        self.wbuf_drain()?;
        let now = self.k.now();
        self.user_done(req, arrived, now)
    }

    /// Start buffered writes as the engine's drainers take them: at most
    /// `wbuf::DRAINERS` at once, the oldest one clear of running and
    /// earlier writes first (core `wbuf::next_to_drain`).
    fn wbuf_drain(&mut self) -> Result<(), String> {
        // Bounded: each round starts a queued write or returns.
        while self.wbuf_running.len() < hetraid_core::wbuf::DRAINERS {
            let queued: Vec<(u64, u64)> = self
                .wbuf_queue
                .iter()
                .map(|(r, _)| (r.offset, r.offset + r.len))
                .collect();
            let Some(i) = hetraid_core::wbuf::next_to_drain(&queued, &self.wbuf_running) else {
                return Ok(());
            };
            let (req, arrived) = self.wbuf_queue.remove(i).expect("picked");
            self.wbuf_running.push((req.offset, req.offset + req.len));
            self.launch(req, arrived, false, true)?;
        }
        Ok(())
    }

    /// Plan and start a user request's job.
    fn launch(
        &mut self,
        req: Request,
        arrived: Ns,
        to_log: bool,
        buffered: bool,
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

    /// Every RAID4 member (HPDA: the SSDs and HDD-1) in sync.
    fn raid4_whole(&self) -> bool {
        self.s
            .layout
            .stripe(0)
            .all()
            .all(|c| self.state.members[c.member] == MemberState::InSync)
    }

    /// HPDA: ask the reclaimer's policy once the monitor would call the
    /// array idle (a request arriving meanwhile moves the moment on).
    fn hpda_wake_later(&mut self, now: Ns) {
        let at = now + hetraid_core::hpda::MonitorConfig::default().idle_ns;
        if self.hpda_wake_at.is_none_or(|t| t < at) {
            if self.hpda_wake_at.is_none() {
                self.k.at(at, Ev::HpdaWake);
            }
            self.hpda_wake_at = Some(at);
        }
    }

    /// HPDA: a reclaim batch ended; ask the policy again now.
    pub(super) fn hpda_wake_now(&mut self) {
        let now = self.k.now();
        if self.hpda_wake_at.is_none() {
            self.k.at(now, Ev::HpdaWake);
        }
        self.hpda_wake_at = Some(self.hpda_wake_at.map_or(now, |t| t.min(now)));
    }

    /// HPDA: the reclaimer's policy (core `hpda::reclaim_step`), one batch
    /// at a time as the engine's background reclaimer runs it. Nothing
    /// after the last request (the run is over).
    fn hpda_wake(&mut self) -> Result<(), String> {
        let now = self.k.now();
        let Some(at) = self.hpda_wake_at else {
            return Ok(());
        };
        if at > now {
            // Moved on by a later request: wait until then.
            self.k.at(at, Ev::HpdaWake);
            return Ok(());
        }
        self.hpda_wake_at = None;
        let more_to_come = match &self.source {
            Source::Closed(_) => self.inflight > 0,
            Source::Replay(r) => r.next < r.records.len() || self.inflight > 0,
        };
        let whole = self.raid4_whole();
        let (Some(m), Some(log)) = (self.hpda.as_ref(), self.log.as_mut()) else {
            return Ok(());
        };
        if !more_to_come || log.reclaiming() {
            return Ok(());
        }
        let copies = self.s.log.as_ref().map_or(2, |l| l.on_members.len());
        let lost = whole && log.devs.len() < copies;
        if let Some(target) = hetraid_core::hpda::reclaim_step(m.idle(now), &log.fill(lost)) {
            log.start_reclaim_batches(target, 1);
            self.log_pump()?;
        }
        Ok(())
    }

    /// A user request arrived: the idle reclaimer of a write-back log looks
    /// again once the array has been quiet for the core's idle time.
    fn log_idle_later(&mut self, now: Ns) {
        self.last_user_arrival = now;
        if self.hpda.is_some() || !self.log.as_ref().is_some_and(|l| l.write_back) {
            return;
        }
        let at = now + hetraid_core::journal::RECLAIM_IDLE_NS_DEFAULT;
        if self.log_idle_at.is_none() {
            self.k.at(at, Ev::LogIdle);
        }
        self.log_idle_at = Some(at);
    }

    /// The idle reclaimer, as the engine's (`Array::run_idle_reclaimer`):
    /// quiet for the idle time with writes in the log, it writes them all to
    /// the members. Nothing after the last request (the run is over).
    fn log_idle(&mut self) -> Result<(), String> {
        let now = self.k.now();
        let Some(at) = self.log_idle_at else {
            return Ok(());
        };
        if at > now {
            // Moved on by a later request: wait until then.
            self.k.at(at, Ev::LogIdle);
            return Ok(());
        }
        self.log_idle_at = None;
        let more_to_come = match &self.source {
            Source::Closed(_) => self.inflight > 0,
            Source::Replay(r) => r.next < r.records.len() || self.inflight > 0,
        };
        let quiet = now.saturating_sub(self.last_user_arrival);
        let Some(log) = self.log.as_mut() else {
            return Ok(());
        };
        let pending = log.fill(false).holds_data;
        if more_to_come
            && !log.reclaiming()
            && hetraid_core::journal::idle_reclaim_due(
                quiet,
                hetraid_core::journal::RECLAIM_IDLE_NS_DEFAULT,
                pending,
            )
        {
            log.start_reclaim(0);
            self.log_idle_reclaims += 1;
            self.log_pump()?;
        }
        Ok(())
    }

    fn lockable(&self, j: u32) -> bool {
        let job = self.jobs[j as usize].as_ref().unwrap();
        job.io.stripes.iter().all(|s| !self.locked.contains(s))
    }

    /// Do jobs `a` and `b` want a common stripe?
    fn conflict(&self, a: u32, b: u32) -> bool {
        let sa = &self.jobs[a as usize].as_ref().unwrap().io.stripes;
        let sb = &self.jobs[b as usize].as_ref().unwrap().io.stripes;
        sa.iter().any(|s| sb.contains(s))
    }

    /// May job `j` take its stripes now, with `ahead` still waiting before it? Like
    /// the engine's per-stripe locks: requests on other stripes never wait for it,
    /// and it never overtakes a waiter it shares a stripe with.
    fn may_lock(&self, j: u32, ahead: &VecDeque<u32>) -> bool {
        self.lockable(j) && ahead.iter().all(|&w| !self.conflict(w, j))
    }

    /// Take every stripe of job `j` and start it, or queue it until they are free.
    fn try_lock(&mut self, j: u32) -> Result<(), String> {
        if !self.may_lock(j, &self.waiting) {
            self.waiting.push_back(j);
            return Ok(());
        }
        self.lock(j)?;
        self.issue_reads(j);
        Ok(())
    }

    /// Mark job `j`'s stripes locked and plan it again if the state moved on.
    fn lock(&mut self, j: u32) -> Result<(), String> {
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

    fn unlock(&mut self, j: u32) -> Result<(), String> {
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

    fn submit_all(&mut self, j: u32, write: bool) -> u32 {
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

    fn issue_reads(&mut self, j: u32) {
        let n = self.submit_all(j, false);
        let job = self.job(j);
        job.phase = Phase::Reads;
        job.pending = n;
        if n == 0 {
            self.after_reads(j);
        }
    }

    fn after_reads(&mut self, j: u32) {
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

    fn issue_writes(&mut self, j: u32) {
        let n = self.submit_all(j, true);
        let job = self.job(j);
        job.phase = Phase::Writes;
        job.pending = n;
        if n == 0 {
            let _ = self.finish(j);
        }
    }

    fn op_done(&mut self, tag: u32) -> Result<(), String> {
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

    fn finish(&mut self, j: u32) -> Result<(), String> {
        self.unlock(j)?;
        let job = self.jobs[j as usize].take().unwrap();
        self.free.push(j);
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
                req,
                buffered: true,
                ..
            } => {
                // Drained: room for the writes waiting, in order. The load
                // is not over until its writes are on the members (as a
                // final flush waits): throughput counts the drain.
                self.wbuf_used -= req.len;
                let range = (req.offset, req.offset + req.len);
                if let Some(k) = self.wbuf_running.iter().position(|&r| r == range) {
                    self.wbuf_running.swap_remove(k);
                }
                self.wbuf_drain()?;
                self.last_user_done = self.last_user_done.max(now);
                // Bounded by the writes waiting.
                while let Some(&(w, at)) = self.wbuf_waiting.front() {
                    if !hetraid_core::wbuf::admits(self.wbuf_used, w.len, self.wbuf_cap) {
                        break;
                    }
                    self.wbuf_waiting.pop_front();
                    self.buffer_write(w, at)?;
                }
            }
            JobKind::User { req, arrived, .. } => self.user_done(req, arrived, now)?,
            JobKind::Reclaim { .. } => {}
            JobKind::CopyBack { bytes } => self.copy_back_batch_done(bytes, now),
            JobKind::Rebuild { stream, batch } => {
                let rb = self.rebuild.as_mut().unwrap();
                rb.inflight[stream] -= 1;
                let written = job.io.writes.iter().map(|w| w.2).sum::<u64>();
                rb.bytes += written;
                rb.stream_bytes[stream] += written;
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

    fn report(mut self) -> Report {
        let end = self.end.max(1);
        let secs = |ns: Ns| ns as f64 / NS_PER_S as f64;
        let (mean, p50, p99, max) = summarize(&mut self.resp);
        let members: Vec<MemberReport> = self
            .devices
            .iter()
            .zip(&self.s.specs)
            .enumerate()
            .map(|(i, (d, spec))| member_report(i, d.as_ref(), spec, end))
            .collect();
        let log = self.log.as_ref().map(|l| {
            let specs = &self.s.log.as_ref().unwrap().specs;
            LogReport {
                mode: if l.write_back {
                    "write-back"
                } else {
                    "journal"
                }
                .into(),
                reclaimed_bytes: l.reclaimed_bytes,
                idle_reclaims: self.log_idle_reclaims,
                hpda_log_writes: self.hpda_routed[0],
                hpda_raid4_writes: self.hpda_routed[1],
                on_members: self
                    .s
                    .log
                    .as_ref()
                    .map_or(vec![], |x| x.on_members.iter().map(|m| m.0).collect()),
                ring_bytes: l.ring.len,
                records: l.records_written,
                record_writes: l.record_writes,
                record_bytes: l.record_bytes,
                pads: l.pads,
                checkpoints: l.checkpoints,
                devices: l
                    .devs
                    .iter()
                    .zip(specs)
                    .enumerate()
                    .map(|(i, (&d, spec))| member_report(i, self.devices[d].as_ref(), spec, end))
                    .collect(),
            }
        });
        let rebuild = self.rebuild.as_ref().map(|rb| {
            let (m, _, p, _) = summarize(&mut self.resp_rebuild);
            RebuildReport {
                member: rb.target,
                rebuild_time_s: secs(rb.finished_at.unwrap_or(end)),
                rebuilt_bytes: rb.bytes,
                rebuild_mbps: rb.bytes as f64 / secs(rb.finished_at.unwrap_or(end).max(1)) / 1e6,
                streams: rb.streams.len(),
                requests_during: self.resp_rebuild.len() as u64,
                mean_response_during_ms: m,
                p99_response_during_ms: p,
                stream_time_s: rb
                    .stream_done
                    .iter()
                    .map(|t| secs(t.unwrap_or(end)))
                    .collect(),
                stream_bytes: rb.stream_bytes.clone(),
                completed: rb.finished_at.is_some(),
            }
        });
        let copy_back = self.copy_back.as_ref().map(|c| {
            let (m, _, p, _) = summarize(&mut self.resp_copy_back);
            let took = c.finished_at.unwrap_or(end) - c.started_at;
            crate::report::CopyBackReport {
                member: c.member,
                start_s: secs(c.started_at),
                copy_back_time_s: secs(took),
                chunks: c.chunks,
                copied_bytes: c.bytes,
                copy_back_mbps: c.bytes as f64 / secs(took.max(1)) / 1e6,
                requests_during: self.resp_copy_back.len() as u64,
                mean_response_during_ms: m,
                p99_response_during_ms: p,
                completed: c.finished_at.is_some(),
            }
        });
        let requests = self.reads + self.writes;
        // User throughput over the time the user load ran (a rebuild may go on).
        let user_end = self.last_user_done.max(1);
        Report {
            throughput_mbps: self.bytes as f64 / secs(user_end) / 1e6,
            iops: requests as f64 / secs(user_end),
            mean_response_ms: mean,
            p99_response_ms: p99,
            sim_time_s: secs(end),
            energy_j: members.iter().map(|m| m.energy_j).sum(),
            members,
            layout: self.s.cfg.layout.clone(),
            policy: self.s.policy.as_str().into(),
            workload: self.s.cfg.workload.clone(),
            seed: self.s.cfg.seed,
            requests,
            bytes: self.bytes,
            reads: self.reads,
            writes: self.writes,
            p50_response_ms: p50,
            max_response_ms: max,
            busy_throughput_mbps: self.bytes as f64 / secs(self.array_busy_ns.max(1)) / 1e6,
            member_ops: self.member_ops,
            rebuild,
            copy_back,
            read: crate::report::DirectionStats::of(&mut self.resp_read),
            write: crate::report::DirectionStats::of(&mut self.resp_write),
            log,
            trims: self.trims,
            trim_bytes: self.trim_bytes,
            trim_discarded_bytes: self.trim_discarded_bytes,
        }
    }
}

/// A device's counters as a report row.
fn member_report(
    i: usize,
    d: &dyn Device,
    spec: &crate::preset::DeviceSpec,
    end: Ns,
) -> MemberReport {
    let secs = |ns: Ns| ns as f64 / NS_PER_S as f64;
    let c = d.counters();
    let wear = d.wear();
    let [er, ew, ei] = spec.power.energy_by_state_j(c, end);
    MemberReport {
        device: i,
        preset: spec.name.clone(),
        reads: c.reads,
        writes: c.writes,
        read_pages: c.read_pages,
        write_pages: c.write_pages,
        erases: c.erases,
        busy_s: secs(c.busy_ns.min(end)),
        idle_s: secs(end.saturating_sub(c.busy_ns)),
        energy_j: spec.power.energy_j(c, end),
        kind: spec.kind.as_str().into(),
        read_bytes: c.read_bytes,
        write_bytes: c.write_bytes,
        utilization: c.busy_ns.min(end) as f64 / end as f64,
        energy_read_j: er,
        energy_write_j: ew,
        energy_idle_j: ei,
        write_amplification: wear.map(|w| w.write_amplification),
        erase_max: wear.map(|w| w.erase_max),
        gc_page_copies: wear.map(|w| w.gc_page_copies),
        sub_page_rmw: wear.map(|w| w.sub_page_rmw),
        discards: c.discards,
        discard_bytes: c.discard_bytes,
        discarded_pages: wear.map(|w| w.discarded_pages),
        mechanics: d
            .mechanics()
            .map(|m| crate::report::MechanicsReport::of(&m)),
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
