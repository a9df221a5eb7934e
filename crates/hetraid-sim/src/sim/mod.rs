//! The RAID controller in simulated time. It asks the core what every request becomes
//! on the members (`Planner::request_io`: the engine's own dispatch), locks stripes
//! with the engine's semantics (planned requests lock, direct paths do not), issues
//! the reads, spends the parity arithmetic time, issues the writes, and rebuilds with
//! the core's schedule under MD-style speed limits. It decides nothing itself.

mod background;
mod copyback;
mod grow;
mod jobs;
mod log;
mod rebuild;
mod report;
mod scrub;
mod sitout;
mod user;

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
    /// Ask the scrub's sweep for its next stripes.
    ScrubWake,
    /// The log's reclaimers look (core `control::reclaimer`).
    ReclaimLook,
    /// Ask the grow's job (core `control::change`) what to do next.
    GrowWake,
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
        /// buffer draining it to the members (its drain ticket).
        buffered: Option<u64>,
    },
    Rebuild {
        stream: usize,
        batch: Vec<u64>,
    },
    /// One batch of a copy-back: its reads from spare homes, then its
    /// writes onto the replacement.
    CopyBack {
        bytes: u64,
        /// A dirty batch copied again.
        again: bool,
    },
    /// One stripe of a scrub: its reads and the check.
    Scrub,
    /// One step of a grow: its reads, then the new rows written.
    Grow,
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
    /// Per stream, the spare slot it writes into (rebuild into spare space).
    redirect: Vec<Option<(usize, usize)>>,
    /// The procedure: batches, lanes, pacing (core `control::sweep`, the
    /// engine's too).
    sweep: hetraid_core::control::sweep::Sweep,
    /// Streams not yet done, and when each wrote its last batch.
    active: usize,
    stream_done: Vec<Option<Ns>>,
    finished_at: Option<Ns>,
    /// The stripes a whole rebuild would sweep (the sweep's own, unless
    /// the run rebuilds a sample).
    full_stripes: u64,
}

struct Runner<'a> {
    s: &'a Setup,
    planner: Planner<'a>,
    /// Emptied member-operation vectors of finished jobs, for new plans.
    io_pool: Vec<RequestIo>,
    /// The layout's plain map for single-chunk requests (classic layouts):
    /// where a replay's coming requests land, to warm the members' models.
    direct: Option<hetraid_core::layout::DirectMap>,
    /// Where coming records land (record, member, offset), by record
    /// modulo the slots.
    ahead: [Option<(usize, usize, u64)>; user::AHEAD_SLOTS],
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
    // Metrics: user response times by direction (the run's own summary
    // takes both together: `report::summarize_merged`).
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
    scrub: Option<scrub::ScrubRun>,
    grow: Option<grow::GrowRun>,
    /// User requests arriving now wait (a grow's step, a copy-back's last
    /// round), and those waiting with their arrival.
    hold_gate: bool,
    held: VecDeque<(Request, Ns)>,
    rebuild: Option<RebuildRun>,
    copy_back: Option<copyback::CopyBackRun>,
    /// The replacement could not be built (reported at the next wake-up).
    copy_back_error: Option<String>,
    resp_copy_back: Vec<Ns>,
    service: Vec<hetraid_core::ServiceModel>,
    log: Option<LogRun>,
    /// HPDA: the monitor (None: another layout), and the reclaimer's look
    /// in progress.
    hpda: Option<hetraid_core::hpda::Monitor>,
    hpda_look: Option<hetraid_core::control::reclaimer::HpdaLook>,
    /// HPDA: user writes sent to the log, and to the RAID4.
    hpda_routed: [u64; 2],
    /// Per device: operations in flight, and where the last one submitted
    /// ends (what reads balance on).
    dev_pending: Vec<u32>,
    dev_head: Vec<u64>,
    /// The write buffer (capacity 0: none): what it holds and what drains
    /// next (core `wbuf::DrainQueue`, the engine's too); and the writes
    /// waiting for room (request, arrival).
    wbuf: hetraid_core::wbuf::DrainQueue<(Request, Ns)>,
    wbuf_waiting: VecDeque<(Request, Ns)>,
    /// The write-back log's idle reclaimer, whether a user request came
    /// since the last look, and how many times it reclaimed.
    wb_idle: hetraid_core::control::reclaimer::WriteBackIdle,
    user_seen: bool,
    log_idle_reclaims: u64,
    /// HPDA: RAID4 writes waiting for the log to be emptied (a copy lost).
    after_reclaim: VecDeque<(Request, Ns)>,
    /// Slow-member sit-out (None: off, or no redundancy).
    sit_out: Option<sitout::SitOutRun>,
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

/// The rebuild a run asks for (`rebuild`), onto a fresh device of the
/// failed one's model or into spare space; the failed members marked in
/// `state` either way.
fn rebuild_run(
    s: &Setup,
    state: &mut ArrayState,
    devices: &mut [Box<dyn Device>],
) -> Result<Option<RebuildRun>, String> {
    let mut rebuild = None;
    if let Some(failed) = &s.cfg.failed {
        for &m in &failed.0 {
            state.members[m] = MemberState::Failed;
        }
        let f = failed.first();
        if let (true, Some((sched, _))) = (s.cfg.rebuild, &s.spare) {
            // Into spare space: no new device; the member stays failed until the
            // relocated layout takes over at the end (as the engine commits it).
            let lists: Vec<Vec<u64>> = sched.streams.iter().map(|st| st.stripes.clone()).collect();
            rebuild = Some(RebuildRun {
                target: f,
                active: sched.streams.len(),
                redirect: sched.streams.iter().map(|st| st.target).collect(),
                full_stripes: lists.iter().map(|l| l.len() as u64).sum(),
                sweep: rebuild_sweep(s, lists),
                stream_done: vec![None; sched.streams.len()],
                finished_at: None,
            });
        } else if s.cfg.rebuild {
            let sched = hetraid_core::rebuild::schedule(s.layout.as_ref(), state, &[f], false)
                .map_err(|e| e.to_string())?;
            let stripes = s.layout.stripe_count() as usize;
            state.members[f] = MemberState::Rebuilding {
                valid_below_stripe: 0,
                done: Some(Arc::new(vec![0u64; stripes.div_ceil(64)])),
            };
            // The failed device is replaced by a fresh one of the same model.
            // A new device, with the run's overrides, fresh (not preconditioned).
            devices[f] = build_device(s, &s.specs[f], false)?;
            let lists: Vec<Vec<u64>> = sched.streams.into_iter().map(|st| st.stripes).collect();
            rebuild = Some(RebuildRun {
                target: f,
                active: lists.len(),
                redirect: vec![None; lists.len()],
                stream_done: vec![None; lists.len()],
                full_stripes: lists.iter().map(|l| l.len() as u64).sum(),
                sweep: rebuild_sweep(s, lists),
                finished_at: None,
            });
        }
    }
    Ok(rebuild)
}

/// The rebuild's sweep over `streams`: the engine's batch size, lanes and
/// chunk accounting, the run's speed limits.
fn rebuild_sweep(s: &Setup, streams: Vec<Vec<u64>>) -> hetraid_core::control::sweep::Sweep {
    use hetraid_core::control::sweep::{Stripes, Sweep, SweepSpec};
    let keep = |l: Vec<u64>| match &s.rebuild_sample {
        Some(sample) => sample.of(l),
        None => l,
    };
    Sweep::new(SweepSpec {
        streams: streams
            .into_iter()
            .map(|l| Stripes::List(keep(l)))
            .collect(),
        batch_stripes: hetraid_core::rebuild::batch_stripes(s.layout.as_ref(), s.cfg.max_speed.0),
        lanes: hetraid_core::rebuild::batches_in_flight(s.layout.as_ref()),
        stripe_bytes: s.layout.chunk_bytes(),
        limits: hetraid_core::pace::PaceLimits {
            min_bps: s.cfg.min_speed.0,
            max_bps: s.cfg.max_speed.0,
        },
        scope: s.pace,
        stop_after: None,
    })
}

pub fn run_setup(s: &Setup) -> Result<Report, String> {
    let mut devices: Vec<Box<dyn Device>> = s
        .specs
        .iter()
        .zip(&s.slow_reads)
        .map(|(spec, &slow)| {
            let d = build_device(s, spec, s.cfg.precondition)?;
            Ok::<_, String>(match slow > 1.0 {
                true => Box::new(crate::device::slow::SlowReads::new(d, slow)) as Box<dyn Device>,
                false => d,
            })
        })
        .collect::<Result<_, _>>()?;
    let service = if s.policy == WritePolicy::Cost {
        devices.iter().map(|d| d.service_model()).collect()
    } else {
        Vec::new()
    };
    let n = devices.len();
    let mut state = ArrayState::healthy(n);
    let rebuild = rebuild_run(s, &mut state, &mut devices)?;
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
    let hpda = (!s.layout.log_regions().is_empty()).then(|| {
        hetraid_core::hpda::Monitor::new(hetraid_core::hpda::MonitorConfig {
            idle_ns: s.reclaim_idle_ns(),
            ..Default::default()
        })
    });
    let sit_out = sitout::SitOutRun::new(s, &devices, s.specs.len());
    let r = Runner {
        sit_out,
        log,
        hpda,
        hpda_look: None,
        hpda_routed: [0; 2],
        dev_pending: vec![0; n_devices],
        // Heads start at the outer edge (offset 0).
        dev_head: vec![0; n_devices],
        wbuf: hetraid_core::wbuf::DrainQueue::new(
            s.cfg.write_buffer.map_or(0, |b| b.0),
            hetraid_core::wbuf::DRAINERS,
        ),
        wbuf_waiting: VecDeque::new(),
        after_reclaim: VecDeque::new(),
        wb_idle: hetraid_core::control::reclaimer::WriteBackIdle::new(s.reclaim_idle_ns(), 0),
        user_seen: false,
        log_idle_reclaims: 0,
        planner: Planner::new(s.layout.as_ref(), s.policy, service.clone()),
        io_pool: Vec::new(),
        // Looked ahead only when some member's model uses the hints.
        direct: s
            .layout
            .direct_map()
            .filter(|_| devices.iter().any(|d| d.prefetches())),
        ahead: [None; user::AHEAD_SLOTS],
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
        scrub: s.cfg.scrub.then(|| scrub::ScrubRun::new(s)),
        grow: grow::GrowRun::new(s),
        hold_gate: false,
        held: VecDeque::new(),
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
        if self.scrub.is_some() {
            self.k.at(0, Ev::ScrubWake);
        }
        if self.grow.is_some() {
            self.k.at(0, Ev::GrowWake);
        }
        if self.log.as_ref().is_some_and(|l| l.write_back) {
            self.k
                .at(hetraid_core::control::reclaimer::LOOK_NS, Ev::ReclaimLook);
        }
        if let Some(rb) = &self.rebuild {
            let streams = rb.sweep.spec().streams.len();
            for st in 0..streams {
                self.k.at(0, Ev::RebuildWake { stream: st as u32 });
            }
            if streams == 0 {
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
                    if tag != INTERNAL
                        && tag != LOG_TAG
                        && self.jobs[tag as usize]
                            .as_ref()
                            .is_some_and(|j| j.phase == Phase::Reads)
                    {
                        self.read_finished(dev as usize, now);
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
                Ev::ScrubWake => self.scrub_next()?,
                Ev::ReclaimLook => self.reclaim_look()?,
                Ev::GrowWake => self.grow_next()?,
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
        if self.grow.as_ref().is_some_and(|g| g.finished_at.is_none()) {
            return Err(format!(
                "the grow did not finish; this is a hetraid bug: please report it with the config and seed {}",
                self.s.cfg.seed
            ));
        }
        if self.scrub.as_ref().is_some_and(|r| r.finished_at.is_none()) {
            return Err(format!(
                "the scrub did not finish; this is a hetraid bug: please report it with the config and seed {}",
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
}
