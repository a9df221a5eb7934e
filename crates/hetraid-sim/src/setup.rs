//! Everything a run fixes before the clock starts: devices, layout, policy, the
//! addressed span, the trace, and (for a rebuild into spare space) the schedule and
//! the relocated layout. Every input is validated here, with one sentence per error.

use crate::config::RunConfig;
use crate::kernel::{Ns, Rng, NS_PER_S};
use crate::preset::{parse_members, DeviceSpec};
use crate::trace;
use crate::workload::{Closed, Pattern, Records, Replay, Source, StreamCursor, TraceFile};
use hetraid_core::layout::{build, Layout, LayoutSpec};
use hetraid_core::logconfig::{self, LogChoice, LogPlace};
use hetraid_core::plan::{ArrayState, Request};
use hetraid_core::spec::{ArraySpec, SIM as SIM_SPEC};
use hetraid_core::WritePolicy;

/// The parity weights a run gives: its list, or for `auto` the core's
/// weights from the devices' models (a random operation of the run's
/// request size on each) and the workload's read share.
pub fn resolved_weights(cfg: &RunConfig) -> Result<Option<Vec<u64>>, String> {
    Ok(match &cfg.weights {
        None => None,
        Some(crate::config::Weights::List(v)) => Some(v.clone()),
        Some(crate::config::Weights::Auto) => Some(auto_weights(cfg)?.weights),
    })
}

/// Automatic weights model one parity per stripe: RAIDH's.
pub fn auto_applies(layout: &str) -> Result<(), String> {
    if layout != "raidh" {
        return Err(format!(
            "weights auto models one parity chunk per stripe: it applies to raidh, not to {layout}; give its weights (e.g. 0,0,0,1,1)"
        ));
    }
    Ok(())
}

/// `weights = "auto"`: the core's plan for this run's devices and workload.
pub fn auto_weights(cfg: &RunConfig) -> Result<hetraid_core::weights::WeightPlan, String> {
    auto_applies(&cfg.layout)?;
    let specs = parse_members(&cfg.members)?;
    let service: Vec<f64> = specs
        .iter()
        .map(|s| s.build().service_model().service_ns(cfg.size.0) as f64)
        .collect();
    let reads = match cfg.workload.as_str() {
        "random-read" | "seq-read" => 1.0,
        "mixed" => cfg.read_fraction.unwrap_or(0.5),
        _ => 0.0,
    };
    hetraid_core::weights::auto_weights(&service, reads).map_err(|e| format!("weights auto: {e}"))
}

/// The layout options a run names (weights resolved).
pub fn layout_options(cfg: &RunConfig) -> Result<hetraid_core::layout::LayoutOptions, String> {
    Ok(hetraid_core::layout::LayoutOptions {
        name: cfg.layout.clone(),
        weights: resolved_weights(cfg)?,
        parity_order: cfg.parity_order.clone(),
        copies: cfg.copies,
        group: cfg.group,
        partitions: cfg.partitions,
        spare_partitions: cfg.spare_partitions,
        chunks_per_bundle: cfg.chunks_per_bundle,
        raidx_level: cfg.raidx_level.clone(),
        declustered: hetraid_core::layout::DeclusterParams {
            width: cfg.width,
            parity: cfg.parity,
            spares: cfg.spares,
        },
    })
}

/// The array a run simulates, as core's `ArraySpec` (the one home of the
/// configuration rules `hetraid create` follows too), on members of `kinds`
/// with `log_devices` log devices.
pub fn array_spec(
    cfg: &RunConfig,
    kinds: Vec<hetraid_core::MemberKind>,
    log_devices: usize,
) -> Result<ArraySpec, String> {
    Ok(ArraySpec {
        layout: layout_options(cfg)?,
        chunk_bytes: cfg.chunk.0,
        kinds,
        log: logconfig::LogOptions {
            devices: log_devices,
            region: None,
            size: cfg.log_size.map(|s| s.0),
            mode: cfg.log_mode.clone(),
        },
        checksums: false,
        // A buffer of 0 bytes is none (a sweep's grid may say so).
        write_buffer: cfg.write_buffer.is_some_and(|b| b.0 > 0),
        read_policy: cfg
            .read_policy
            .as_deref()
            .map(hetraid_core::readbalance::ReadPolicy::parse)
            .transpose()?,
    })
}

/// The layout a run names, with its parameters and the defaults an array
/// of its members stores (S2-RAID's partitions, RAIDX5/6 weights from the
/// kinds).
pub fn layout_kind(cfg: &RunConfig) -> Result<hetraid_core::layout::LayoutKind, String> {
    let kinds = parse_members(&cfg.members)?
        .iter()
        .map(|s| s.kind)
        .collect();
    let spec = array_spec(cfg, kinds, 0)?;
    spec.kind(&spec.kinds).map_err(|e| e.sentence(&SIM_SPEC))
}

/// Everything fixed before the clock starts.
pub struct Setup {
    pub cfg: RunConfig,
    pub specs: Vec<DeviceSpec>,
    pub layout: Box<dyn Layout>,
    pub policy: WritePolicy,
    pub span: u64,
    /// The trace workload's records: a looped trace read whole (shared with
    /// each replay made from it), any other streamed by the replay.
    pub trace: Option<TraceInput>,
    /// Rebuild into spare space: the schedule (one target per stream) and the layout
    /// with the lost extents relocated, used once the rebuild is done.
    pub spare: Option<(hetraid_core::rebuild::RebuildSchedule, Box<dyn Layout>)>,
    /// The copy-back onto a replacement that follows the rebuild into
    /// spare space (`copy_back`): the core's moves, from the relocated layout.
    pub copy_back: Option<hetraid_core::rebuild::CopyBack>,
    /// The write log: its devices (one per copy) and ring size.
    pub log: Option<LogSetup>,
    /// How reads choose a copy (layouts with copies).
    pub read_policy: hetraid_core::readbalance::ReadPolicy,
    /// What the rebuild's speed limits hold.
    pub pace: hetraid_core::pace::PaceScope,
    /// A grow (`grow`): the restripe's steps (the core's, as the engine's);
    /// `layout` is then the reshaping one, its mark at 0.
    pub grow: Option<Vec<hetraid_core::layout::reshape::Step>>,
    /// Rebuild only windows of each stream's stripes (`estimate`: the
    /// rebuild time of a large member from a sample on its real geometry).
    pub rebuild_sample: Option<RebuildSample>,
    /// Read slowdown by member (1: none), from `slow`.
    pub slow_reads: Vec<f64>,
}

/// `slow = "2:10,3:4"`: member 2's reads 10 times slower, member 3's 4.
fn parse_slow(text: &str, members: usize) -> Result<Vec<f64>, String> {
    let mut out = vec![1.0; members];
    for part in text.split(',').map(str::trim) {
        let parsed = part.split_once(':').and_then(|(m, f)| {
            Some((
                m.trim().parse::<usize>().ok()?,
                f.trim().parse::<f64>().ok()?,
            ))
        });
        match parsed {
            Some((m, f)) if m < members && (1.0..=1e6).contains(&f) => out[m] = f,
            Some((m, _)) if m >= members => {
                return Err(format!(
                    "slow '{part}' names member {m}; members are 0 to {}",
                    members - 1
                ))
            }
            _ => {
                return Err(format!(
                    "slow '{part}' is not MEMBER:FACTOR with a factor from 1 to 1000000; write it like slow = \"2:10\""
                ))
            }
        }
    }
    Ok(out)
}

/// A systematic sample of a rebuild: `windows` runs of `window_stripes`
/// consecutive stripes of each stream, evenly spaced over it (zones and
/// seek lengths as the whole rebuild meets them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RebuildSample {
    pub windows: usize,
    pub window_stripes: usize,
}

impl RebuildSample {
    /// The stripes of `list` the sample keeps (all of them when the list is
    /// no longer than the sample).
    pub fn of(&self, list: Vec<u64>) -> Vec<u64> {
        let want = self.windows * self.window_stripes;
        if list.len() <= want || self.windows == 0 {
            return list;
        }
        let gap = list.len() / self.windows;
        (0..self.windows)
            .flat_map(|w| {
                let at = w * gap;
                list[at..(at + self.window_stripes).min(list.len())].to_vec()
            })
            .collect()
    }
}

/// A simulated write log (journal mode), as `hetraid create --log` makes it.
#[derive(Debug, Clone)]
pub struct LogSetup {
    pub specs: Vec<DeviceSpec>,
    pub ring_bytes: u64,
    /// Write-back (else journal).
    pub write_back: bool,
    /// HPDA: the copies are regions of members (member, offset) instead of
    /// devices of their own (`specs` is then empty).
    pub on_members: Vec<(usize, u64)>,
}

impl Setup {
    pub fn new(cfg: &RunConfig) -> Result<Self, String> {
        let specs = parse_members(&cfg.members)?;
        let mut sizes: Vec<u64> = specs.iter().map(|s| s.capacity()).collect();
        if let Some(ms) = cfg.member_size {
            if let Some((i, s)) = sizes.iter().enumerate().find(|(_, s)| **s < ms.0) {
                return Err(format!(
                    "member_size {} is larger than member {i} ({} bytes); use a smaller member_size",
                    ms.0, s
                ));
            }
            sizes.iter_mut().for_each(|s| *s = ms.0);
        }
        let member_kinds: Vec<hetraid_core::MemberKind> = specs.iter().map(|s| s.kind).collect();
        let log_specs = match &cfg.log {
            Some(l) => parse_members(l)?,
            None => Vec::new(),
        };
        // The array by the core's rules (as `hetraid create`'s).
        let array = array_spec(cfg, member_kinds, log_specs.len())?;
        let sentence = |e: hetraid_core::spec::SpecError| e.sentence(&SIM_SPEC);
        let hpda =
            array.kind(&array.kinds).map_err(sentence)? == hetraid_core::layout::LayoutKind::Hpda;
        if hpda {
            // member_size is each SSD's data: HDD-1 holds as much parity and
            // the log past it, HDD-2 the log (as an engine array created on
            // members sized so).
            if let Some(ms) = cfg.member_size {
                let log = cfg
                    .log_size
                    .map_or(hetraid_core::hpda::LOG_BYTES_DEFAULT, |s| s.0)
                    .div_ceil(cfg.chunk.0)
                    * cfg.chunk.0;
                let hdds: Vec<usize> = (0..specs.len())
                    .filter(|&i| specs[i].kind == hetraid_core::MemberKind::Hdd)
                    .collect();
                if let [h1, h2] = hdds[..] {
                    sizes[h1] = specs[h1].capacity().min(ms.0 + log);
                    sizes[h2] = specs[h2].capacity().min(log);
                }
            }
        }
        let valid = array.validate(&sizes).map_err(sentence)?;
        let (layout, log_choice) = (valid.layout, valid.log);
        let spec = LayoutSpec {
            kind: valid.kind,
            chunk_bytes: cfg.chunk.0,
            sizes,
            kinds: valid.kinds,
        };
        let (layout, grow) = grow_layout(cfg, layout, &spec)?;
        if let Some(f) = &cfg.failed {
            let tol = layout.redundancy().tolerance();
            if f.0.len() > tol {
                return Err(format!(
                    "{} survives {tol} failed member(s), but --failed lists {}; fail fewer members or use a layout with more redundancy",
                    cfg.layout,
                    f.0.len()
                ));
            }
        }
        let policy = WritePolicy::parse(&cfg.policy)?;
        let cap = layout.capacity_bytes();
        let span = match cfg.span {
            Some(s) if s.0 == 0 || s.0 > cap => {
                return Err(format!(
                    "span {} must be between 1 byte and the array's capacity {cap}",
                    s.0
                ))
            }
            Some(s) => s.0,
            None => cap,
        };
        for &f in cfg.failed.iter().flat_map(|f| f.0.iter()) {
            if f >= specs.len() {
                return Err(format!(
                    "--failed {f} is not a member; members are 0 to {}",
                    specs.len() - 1
                ));
            }
        }
        check_run_options(cfg)?;
        let pace = match &cfg.pace {
            Some(_) if !cfg.rebuild => {
                return Err(
                    "pace (--pace) applies to a rebuild; add --rebuild, or leave it out".into(),
                )
            }
            Some(p) => hetraid_core::pace::PaceScope::parse(p)?,
            None => hetraid_core::pace::PaceScope::Array,
        };
        let trace = read_trace(cfg)?;
        let (spare, copy_back) = spare_plan(cfg, layout.as_ref(), &spec, specs.len())?;
        let log = log_setup(log_choice, layout.as_ref(), log_specs)?;
        check_reclaim_idle(cfg, log.as_ref())?;
        let read_policy = array.read_policy.unwrap_or_default();
        if cfg.sit_out == Some(true) && layout.redundancy().tolerance() == 0 {
            return Err(format!(
                "sit_out (--sit-out) applies to layouts with redundancy (reads around a member need it); {} has none: leave it out",
                layout.name()
            ));
        }
        let slow_reads = match &cfg.slow {
            Some(t) => parse_slow(t, specs.len())?,
            None => vec![1.0; specs.len()],
        };
        let setup = Self {
            slow_reads,
            read_policy,
            pace,
            grow,
            rebuild_sample: None,
            cfg: cfg.clone(),
            specs,
            layout,
            policy,
            span,
            trace,
            spare,
            copy_back,
            log,
        };
        setup.source()?;
        Ok(setup)
    }

    /// The configured load.
    pub(crate) fn source(&self) -> Result<Source, String> {
        let c = &self.cfg;
        if let Some(t) = &self.trace {
            if c.trim_fraction.is_some() || c.trim_size.is_some() {
                return Err("trim_fraction and trim_size apply to closed-loop workloads; a trace brings its own discards (blkparse D records)".into());
            }
            return Ok(Source::Replay(Replay {
                records: match t {
                    TraceInput::Loaded(v) => Records::Loaded(v.clone()),
                    TraceInput::File(f) => {
                        Records::Streamed(Box::new(StreamCursor::new(f.clone())))
                    }
                },
                next: 0,
                timed: c.replay == "timed",
                time_scale: c.time_scale,
                qd: c.qd.max(1),
                span: self.span,
            }));
        }
        let (pattern, rf) = match c.workload.as_str() {
            "random-write" => (Pattern::Random, 0.0),
            "random-read" => (Pattern::Random, 1.0),
            "seq-write" => (Pattern::Sequential, 0.0),
            "seq-read" => (Pattern::Sequential, 1.0),
            "mixed" => (
                Pattern::Random,
                c.read_fraction
                    .ok_or("the mixed workload needs --read-fraction F (0 to 1)")?,
            ),
            w => {
                return Err(format!(
                "workload '{w}' is unknown; use random-write, random-read, seq-write, seq-read, mixed or trace"
            ))
            }
        };
        if !(0.0..=1.0).contains(&rf) {
            return Err(format!("read fraction {rf} must be between 0 and 1"));
        }
        if c.read_fraction.is_some() && c.workload != "mixed" {
            return Err("--read-fraction applies to the mixed workload only".into());
        }
        let size = c.size.0;
        if size == 0 || size > self.span {
            return Err(format!(
                "request size {size} must be between 1 byte and the addressed span {}",
                self.span
            ));
        }
        let align = match (c.align, c.align_to_size) {
            (Some(_), true) => return Err(
                "give align or align_to_size, not both (align_to_size aligns to the request size)"
                    .into(),
            ),
            (Some(a), false) => a.0,
            (None, true) => size,
            (None, false) => size.min(4096),
        };
        if align == 0 || align > self.span {
            return Err("align must be between 1 byte and the addressed span".into());
        }
        if c.qd == 0 || c.qd > 4096 {
            return Err(format!("qd {} must be between 1 and 4096", c.qd));
        }
        let total = match (c.total, c.duration_s) {
            (Some(t), _) if t.0 == 0 => return Err("total must be above zero".into()),
            (Some(t), _) => Some(t.0),
            (None, Some(_)) => None,
            (None, None) => Some(RunConfig::DEFAULT_TOTAL),
        };
        let until = match c.duration_s {
            Some(d) if !(d > 0.0 && d.is_finite()) => {
                return Err("duration_s must be a positive number of seconds".into())
            }
            Some(d) => Some((d * NS_PER_S as f64) as Ns),
            None => None,
        };
        let mut closed = Closed::new(pattern, rf, size, align, self.span, c.qd, total, until);
        if let Some(max) = c.size_max {
            if max.0 < size || max.0 > self.span {
                return Err(format!(
                    "size_max {} must be between the request size {size} and the addressed span {}",
                    max.0, self.span
                ));
            }
            closed.size_max = Some(max.0);
        }
        if let Some(f) = c.trim_fraction {
            if !(0.0..1.0).contains(&f) {
                return Err(format!(
                    "trim_fraction {f} must be at least 0 and below 1 (trims move no data: a load of only trims never ends)"
                ));
            }
            closed.trim_fraction = f;
        }
        if let Some(t) = c.trim_size {
            if c.trim_fraction.is_none() {
                return Err("trim_size applies with trim_fraction only".into());
            }
            if t.0 == 0 || t.0 > self.span {
                return Err(format!(
                    "trim_size {} must be between 1 byte and the addressed span {}",
                    t.0, self.span
                ));
            }
            closed.trim_size = t.0;
        } else {
            closed.trim_size = size;
        }
        Ok(Source::Closed(closed))
    }
}

/// The requests a closed-loop or trace run issues, in issue order, without timing:
/// what an engine run must execute to be compared with the simulation (the order
/// of a closed loop's requests does not depend on their completion times).
pub fn request_stream(cfg: &RunConfig) -> Result<Vec<Request>, String> {
    let setup = Setup::new(cfg)?;
    let mut rng = Rng::new(cfg.seed);
    match setup.source()? {
        Source::Closed(mut c) => {
            if c.total_bytes.is_none() {
                return Err("a request stream needs --total, not --duration".into());
            }
            Ok(std::iter::from_fn(|| c.next(0, &mut rng)).collect())
        }
        Source::Replay(mut r) => {
            let mut out = Vec::new();
            // Bounded by the trace: each round takes a record or ends.
            while let Some(req) = r.request(out.len())? {
                out.push(req);
            }
            Ok(out)
        }
    }
}

/// `reclaim_idle` applies to a write-back log (HPDA's too) and is a
/// number of seconds in range, as `serve --reclaim-idle`.
fn check_reclaim_idle(cfg: &RunConfig, log: Option<&LogSetup>) -> Result<(), String> {
    let Some(s) = cfg.reclaim_idle else {
        return Ok(());
    };
    if !log.is_some_and(|l| l.write_back) {
        return Err(
            "reclaim_idle (--reclaim-idle) applies to a write-back log (or hpda); this run has none"
                .into(),
        );
    }
    if !(s.is_finite() && s > 0.0 && s <= 86_400.0) {
        return Err(format!(
            "reclaim_idle {s} is not a number of seconds between 0 and 86400"
        ));
    }
    Ok(())
}

impl Setup {
    /// The quiet time after which a write-back log is reclaimed (HPDA: its
    /// monitor's idle time), as `serve` takes it.
    pub fn reclaim_idle_ns(&self) -> u64 {
        let hpda = !self.layout.log_regions().is_empty();
        match self.cfg.reclaim_idle {
            Some(s) => (s * 1e9) as u64,
            None if hpda => hetraid_core::hpda::MonitorConfig::default().idle_ns,
            None => hetraid_core::journal::RECLAIM_IDLE_NS_DEFAULT,
        }
    }
}

/// A grow's layouts and steps: the array before is every member but the
/// last (the one added), of the same kind; the run starts on the reshaping
/// layout with nothing moved, and the steps are the core's with the
/// engine's window (`limits::restripe_window_rows`).
#[allow(clippy::type_complexity)]
fn grow_layout(
    cfg: &RunConfig,
    new: Box<dyn hetraid_core::layout::Layout>,
    spec: &LayoutSpec,
) -> Result<
    (
        Box<dyn hetraid_core::layout::Layout>,
        Option<Vec<hetraid_core::layout::reshape::Step>>,
    ),
    String,
> {
    use hetraid_core::layout::reshape::{reshape_steps, Reshaping};
    use hetraid_core::layout::LayoutKind;
    if !cfg.grow {
        return Ok((new, None));
    }
    if !matches!(spec.kind, LayoutKind::Raid5 { .. } | LayoutKind::Raid6) {
        return Err(format!(
            "grow applies to raid5 and raid6 (a member added and the data restriped); {} is not restriped this way",
            cfg.layout
        ));
    }
    for (given, what) in [
        (cfg.failed.is_some(), "failed"),
        (cfg.scrub, "scrub"),
        (cfg.log.is_some(), "log"),
        (cfg.write_buffer.is_some_and(|b| b.0 > 0), "write_buffer"),
    ] {
        if given {
            return Err(format!(
                "grow runs on a whole array without a write log or a write buffer; leave out {what} (--{})",
                what.replace('_', "-")
            ));
        }
    }
    let n = spec.sizes.len();
    let old_spec = LayoutSpec {
        sizes: spec.sizes[..n - 1].to_vec(),
        kinds: spec.kinds.iter().take(n - 1).copied().collect(),
        ..spec.clone()
    };
    let old = build(&old_spec).map_err(|e| {
        format!("grow: the array before the grow (every member but the last, the one added) is not a {}: {e}", cfg.layout)
    })?;
    let window = hetraid_core::limits::restripe_window_rows(spec.chunk_bytes, n);
    let steps = reshape_steps(old.as_ref(), new.as_ref(), window);
    Ok((Box::new(Reshaping::new(old, new, 0)), Some(steps)))
}

/// The run's options that need nothing else to be checked: what applies
/// to a rebuild, a scrub or a trace only, and the ranges.
fn check_run_options(cfg: &RunConfig) -> Result<(), String> {
    if cfg.scrub && cfg.failed.is_some() {
        return Err("scrub checks a whole array: leave out failed (a degraded array has nothing to check its stripes against), or run a rebuild".into());
    }
    if cfg.rebuild && cfg.failed.is_none() {
        return Err("rebuild needs --failed i: the member to replace and rebuild".into());
    }
    if cfg.to_spare && !cfg.rebuild {
        return Err("--to-spare applies to a rebuild; add --rebuild".into());
    }
    if cfg.min_speed.0 == 0 || cfg.max_speed.0 < cfg.min_speed.0 {
        return Err("min_speed must be above zero and at most max_speed".into());
    }
    if !(cfg.xor_mbps >= 0.0 && cfg.xor_mbps.is_finite()) {
        return Err("xor_mbps must be zero (free) or a positive rate".into());
    }
    if let Some(s) = &cfg.scheduler {
        crate::device::hdd::Scheduler::parse(s)?;
    }
    if cfg.disk_queue == Some(0) {
        return Err("disk_queue must be at least 1".into());
    }
    // Trace options without the trace workload are a mistake, not a
    // different run.
    if cfg.workload != "trace" {
        for (given, what) in [
            (cfg.trace.is_some(), "trace"),
            (cfg.trace_format.is_some(), "trace_format"),
            (cfg.trace_limit.is_some(), "trace_limit"),
            (cfg.trace_loops.is_some(), "trace_loops"),
        ] {
            if given {
                return Err(format!(
                    "{what} (--{}) applies to the trace workload; add --workload trace (workload = \"trace\"), or leave it out",
                    what.replace('_', "-")
                ));
            }
        }
    }
    if cfg.workload == "trace" && (cfg.align.is_some() || cfg.align_to_size) {
        return Err("align and align_to_size apply to the synthetic workloads; a trace's offsets are its own".into());
    }
    Ok(())
}

/// A trace workload's records: read whole, or a file the replay streams.
pub enum TraceInput {
    Loaded(std::sync::Arc<Vec<trace::TraceRecord>>),
    File(TraceFile),
}

/// The trace workload's requests, read, cut and looped as the options say.
/// A looped trace is read whole (each pass needs the trace's length); any
/// other is streamed by the replay, its format and first record checked
/// here so that a trace that cannot be replayed is refused before the run.
fn read_trace(cfg: &RunConfig) -> Result<Option<TraceInput>, String> {
    if cfg.workload != "trace" {
        return Ok(None);
    }
    let path = cfg
        .trace
        .as_deref()
        .ok_or("the trace workload needs --trace FILE")?;
    if !matches!(cfg.replay.as_str(), "timed" | "afap") {
        return Err(format!(
            "replay '{}' is unknown; use timed or afap",
            cfg.replay
        ));
    }
    if !(cfg.time_scale > 0.0 && cfg.time_scale.is_finite()) {
        return Err("time_scale must be a positive number".into());
    }
    let no_requests = || format!("trace {path} has no requests");
    if let Some(loops) = cfg.trace_loops {
        let mut recs = trace::read_file(path, cfg.trace_format.as_deref(), "--trace-format")?;
        if let Some(l) = cfg.trace_limit {
            recs.truncate(l);
        }
        if recs.is_empty() {
            return Err(no_requests());
        }
        let recs = trace::looped(recs, loops)?;
        return Ok(Some(TraceInput::Loaded(std::sync::Arc::new(recs))));
    }
    let file = TraceFile {
        path: path.to_string(),
        format: cfg.trace_format.clone(),
        limit: cfg.trace_limit,
    };
    let mut first =
        trace::Stream::open(path, cfg.trace_format.as_deref(), "--trace-format", Some(1))?;
    if first.next_record()?.is_none() {
        return Err(no_requests());
    }
    Ok(Some(TraceInput::File(file)))
}

/// A rebuild into spare space (`to_spare`): its schedule and the layout
/// relocated by it; and the copy-back that follows (`copy_back`).
#[allow(clippy::type_complexity)]
fn spare_plan(
    cfg: &RunConfig,
    layout: &dyn Layout,
    spec: &LayoutSpec,
    n: usize,
) -> Result<
    (
        Option<(hetraid_core::rebuild::RebuildSchedule, Box<dyn Layout>)>,
        Option<hetraid_core::rebuild::CopyBack>,
    ),
    String,
> {
    let spare = match (cfg.to_spare, cfg.failed.as_ref().map(|f| f.first())) {
        (true, Some(f)) => {
            if layout.spare_slots() == 0 {
                return Err(format!(
                    "layout {} reserves no spare space; use s2raid5 with --spare-partitions 1, declustered with --spares 1, or rebuild without --to-spare",
                    cfg.layout
                ));
            }
            let state = ArrayState::with_failed(n, &cfg.failed.as_ref().unwrap().0);
            let sched = hetraid_core::rebuild::schedule(layout, &state, &[f], true)
                .map_err(|e| e.to_string())?;
            let after: Box<dyn Layout> = match layout.relocated(&[f]) {
                // Distributed spare: the layout relocates by rule.
                Some(l) => l,
                None => {
                    let moves = hetraid_core::rebuild::spare_moves(layout, &sched, &[f])
                        .map_err(|e| e.to_string())?;
                    let inner = build(spec).map_err(|e| e.to_string())?;
                    Box::new(hetraid_core::layout::Remapped::new(inner, moves))
                }
            };
            Some((sched, after))
        }
        _ => None,
    };
    let copy_back = match (&spare, cfg.copy_back) {
        (_, false) => None,
        (None, true) => {
            return Err("copy_back (--copy-back) follows a rebuild into spare space; add --rebuild --to-spare".into())
        }
        (Some((_, after)), true) => Some(
            hetraid_core::rebuild::copy_back_moves(after.as_ref()).map_err(|_| {
                format!(
                    "layout {} relocates into spare space without a copy-back (only declustered does); leave out --copy-back",
                    cfg.layout
                )
            })?,
        ),
    };
    Ok((spare, copy_back))
}

/// The simulated write log the checked options ask for: HPDA's on its
/// HDDs, or log devices of the size given.
fn log_setup(
    choice: Option<LogChoice>,
    layout: &dyn Layout,
    log_specs: Vec<DeviceSpec>,
) -> Result<Option<LogSetup>, String> {
    Ok(match choice {
        None => None,
        Some(LogChoice {
            place: LogPlace::Hpda { requested },
            ..
        }) => {
            let (size, on_members) = hetraid_core::hpda::log_region(layout, requested)
                .map_err(|e| format!("log_size: {e}"))?;
            Some(LogSetup {
                specs: vec![],
                ring_bytes: hetraid_core::journal::ring_bytes(size),
                write_back: true,
                on_members,
            })
        }
        Some(LogChoice {
            mode,
            place: LogPlace::Devices { size_bytes, .. },
        }) => {
            logconfig::check_size(layout, mode, logconfig::Sized::SizeOption, size_bytes)
                .map_err(|e| e.sentence(&logconfig::SIM))?;
            if let Some(small) = log_specs.iter().find(|d| d.capacity() < size_bytes) {
                return Err(format!(
                    "log device {} holds {} bytes, less than log_size {size_bytes}",
                    small.name,
                    small.capacity()
                ));
            }
            Some(LogSetup {
                specs: log_specs,
                ring_bytes: hetraid_core::journal::ring_bytes(size_bytes),
                write_back: mode == logconfig::LogMode::WriteBack,
                on_members: vec![],
            })
        }
        Some(LogChoice {
            place: LogPlace::Region { .. },
            ..
        }) => return Err("the simulator has no log region; give log DEVICE".into()),
    })
}
