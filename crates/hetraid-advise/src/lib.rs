//! `hetraid advise`: from the devices you own and your workload to the
//! layout to build.
//!
//! 1. Members: presets, device files, or real files and block devices, which
//!    are measured first (`probe`, read-only).
//! 2. Candidates: every layout that fits the members — classic levels, the
//!    thesis's placements with the members put in the order each wants, RAIDH
//!    with automatic weights, weighted RAID6, S²-RAID5/10 (with and without
//!    spare space), RAIDX, HPDA when the kinds fit — times each write policy
//!    and chunk size from 4 KiB to 1 MiB.
//! 3. Analytic pruning: layouts that do not fit or survive fewer failures
//!    than `--redundancy` are dropped before anything runs.
//! 4. Simulation in parallel within `--budget-s`: throughput, p99, energy;
//!    then, per distinct placement, an offline rebuild (the one estimator,
//!    `hetraid_sim::estimate`: a sample of the stripes on the real geometry)
//!    that gives the rebuild time and, as the repair time, the MTTDL.
//! 5. Ranking by `--objective`, one row per distinct result, the Pareto front
//!    over every metric every row has, the `create` line for the winner, and
//!    optionally an SVG of the front.

use hetraid_core::MemberKind;
use hetraid_sim::config::Weights;
use hetraid_sim::{RunConfig, Size};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

pub mod mttdl;
pub mod probe;
mod shapes;
use shapes::Shape;

/// The objectives: name, what it measures, higher is better.
pub const OBJECTIVES: &[(&str, &str, bool)] = &[
    ("throughput", "MB/s", true),
    ("p99", "p99 response, ms", false),
    ("capacity", "usable bytes", true),
    ("energy", "J per GB moved", false),
    ("watts", "mean power, W", false),
    ("mttdl", "mean time to data loss", true),
    ("rebuild", "offline rebuild of the slowest member", false),
    ("cost-per-gb", "$ per usable GB", false),
    ("cost-per-iops", "$ per IOPS", false),
];

/// The load map prunes candidates predicted this many times as busy (the
/// busiest member per write) as the best.
pub const LOAD_PRUNE: f64 = 2.5;

/// Candidates not simulated, by the analytic check that dropped them.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct Pruned {
    pub fit: usize,
    pub capacity: usize,
    pub mttdl: usize,
    pub load_map: usize,
}

/// The advisor's report: what was tried, what was pruned, and the ranking.
#[derive(Debug, Clone)]
pub struct Advice {
    /// The objective ranked by and what it measures.
    pub objective: &'static str,
    pub objective_what: &'static str,
    /// The members as simulated (real devices replaced by their probes).
    pub members: String,
    /// The members one device each, comma-separated, as given.
    pub given: String,
    /// One line per device probed.
    pub probed: Vec<String>,
    /// Candidates enumerated (simulated or pruned).
    pub candidates: usize,
    pub pruned: Pruned,
    /// Candidates simulated within the budget.
    pub simulated: usize,
    /// The metrics the Pareto front is over.
    pub pareto_over: Vec<&'static str>,
    pub seconds: f64,
    /// One row per distinct result, best first (never empty).
    pub ranked: Vec<Candidate>,
}

/// The load map of one write of `size` bytes at every chunk of a placement
/// cycle (core `plan`, healthy): the busiest member's operations per write
/// times its service time, ns. None for layouts whose cycle is too long to
/// enumerate (S²-RAID, RAIDX: their cycle is the whole array).
fn predicted_write_ns(setup: &hetraid_sim::setup::Setup, policy: &str, size: u64) -> Option<f64> {
    use hetraid_core::plan::{ArrayState, Planner, Request};
    const STARTS_MAX: u64 = 4096;
    let l = setup.layout.as_ref();
    let starts = l.parity_cycle() * l.data_per_stripe() as u64;
    let chunk = l.chunk_bytes();
    let cap = l.capacity_bytes();
    if starts == 0 || starts > STARTS_MAX || cap < size {
        return None;
    }
    let policy = hetraid_core::WritePolicy::parse(policy).ok()?;
    let models: Vec<hetraid_core::ServiceModel> = setup
        .specs
        .iter()
        .map(|s| s.build().service_model())
        .collect();
    let planner = Planner::new(l, policy, models.clone());
    let n = l.members();
    let state = ArrayState::healthy(n);
    let mut ops = vec![0u64; n];
    for s in 0..starts {
        let off = (s * chunk).min(cap - size);
        let plan = planner.plan(&Request::write(off, size), &state).ok()?;
        for io in plan.member_io(n) {
            ops[io.device] += io.read_ops + io.write_ops;
        }
    }
    (0..n)
        .map(|d| ops[d] as f64 / starts as f64 * models[d].service_ns(size.min(chunk)) as f64)
        .max_by(|a, b| a.total_cmp(b))
}

/// The smallest chunk tried for RAIDX.
const RAIDX_CHUNK_MIN: u64 = 256 << 10;

use mttdl::HOURS_PER_YEAR;

/// What the advisor is asked: the devices, the workload and the
/// constraints (`hetraid advise`'s options).
#[derive(Debug, Clone)]
pub struct Request {
    /// The devices you have: presets, device files (probe's too), or real
    /// files and block devices (measured read-only first, --probe-seconds
    /// each), as for sim: 'caviar-black-640*4,x25e-64'.
    pub members: String,
    /// random-write (default), random-read, mixed, seq-write, seq-read;
    /// with --trace the trace is the workload.
    pub workload: Option<String>,
    /// Share of reads for the mixed workload.
    pub read_fraction: Option<f64>,
    /// Request size.
    pub size: u64,
    /// Outstanding requests.
    pub qd: u32,
    /// A trace to replay (SPC, MSR, blkparse or DiskSim ASCII) instead of a
    /// synthetic workload.
    pub trace: Option<String>,
    /// What ranks the candidates: throughput (MB/s), p99 (response),
    /// capacity (usable bytes), energy (J per GB moved), watts, mttdl,
    /// rebuild (offline, the slowest member), cost-per-gb, cost-per-iops
    /// (the last two need every device's price). Default: throughput, or p99
    /// with --trace (a trace replayed at its own times moves the same bytes
    /// on every layout; how fast they are answered is what differs).
    pub objective: Option<String>,
    /// Chunk sizes to try.
    pub chunks: Vec<u64>,
    /// Member failures the array must survive: 1 or 2.
    pub redundancy: usize,
    /// Wall-clock seconds for the simulations (candidates not reached are
    /// listed as not run); None: no limit, so the advice depends on the
    /// request alone, not on how fast or busy this machine is.
    pub budget_s: Option<f64>,
    /// Simulate at most this many candidates, the most promising first (by
    /// the load map); the rest are listed as not run. Deterministic.
    pub candidates_max: Option<usize>,
    /// Bytes simulated per candidate (synthetic workloads).
    pub total: u64,
    /// Prune, before simulating, layouts holding less than this.
    pub capacity_min: Option<u64>,
    /// Prune, before simulating, layouts whose MTTDL (analytic, a 24 h
    /// repair as `analyze mttdl` assumes) is below this many years.
    pub mttdl_min_years: Option<f64>,
    /// Seconds per measurement when a member is a real file or device.
    pub probe_seconds: f64,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Candidate {
    pub layout: String,
    pub members: String,
    pub weights: Option<Vec<u64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spare_partitions: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunks_per_bundle: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raidx_level: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub width: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parity: Option<usize>,
    pub policy: String,
    pub chunk: u64,
    pub capacity_bytes: u64,
    pub throughput_mbps: Option<f64>,
    pub iops: Option<f64>,
    pub p99_ms: Option<f64>,
    pub energy_j_per_gb: Option<f64>,
    pub watts: Option<f64>,
    /// Offline rebuild of the slowest member (one of each kind tried),
    /// seconds (`hetraid_sim::estimate`).
    pub rebuild_s: Option<f64>,
    /// With the rebuild time as the repair time (a hot spare or spare
    /// space) and `analyze mttdl`'s device figures.
    pub mttdl_h: Option<f64>,
    pub price_usd: Option<f64>,
    pub usd_per_gb: Option<f64>,
    pub usd_per_iops: Option<f64>,
    /// RAIDH with automatic weights: the model's gain over RAID5 and the
    /// simulated one (same policy and chunk).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_gain: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub simulated_gain: Option<f64>,
    pub pareto: bool,
    pub create: String,
    /// Candidates with the very same figures (the same placement under
    /// another name or policy): layout/policy.
    pub equivalent: Vec<String>,
    /// Each member's kind, in `members`' order (what `create` is told).
    #[serde(skip)]
    pub kinds: Vec<String>,
}

impl Candidate {
    /// The value of objective `name` (None when not measured).
    pub fn metric(&self, name: &str) -> Option<f64> {
        match name {
            "throughput" => self.throughput_mbps,
            "p99" => self.p99_ms,
            "capacity" => Some(self.capacity_bytes as f64),
            "energy" => self.energy_j_per_gb,
            "watts" => self.watts,
            "mttdl" => self.mttdl_h,
            "rebuild" => self.rebuild_s,
            "cost-per-gb" => self.usd_per_gb,
            "cost-per-iops" => self.usd_per_iops,
            _ => None,
        }
    }

    /// Layout parameters as `hetraid create` flags.
    fn layout_flags(&self) -> String {
        let mut f = String::new();
        if let Some(g) = self.group {
            f += &format!(" --group {g}");
        }
        if let Some(s) = self.spare_partitions.filter(|s| *s > 0) {
            f += &format!(" --spare-partitions {s}");
        }
        if let Some(c) = self.chunks_per_bundle {
            f += &format!(" --chunks-per-bundle {c}");
        }
        if let Some(l) = &self.raidx_level {
            f += &format!(" --raidx-level {l}");
        }
        if let (Some(w), Some(p)) = (self.width, self.parity) {
            f += &format!(" --width {w} --parity {p} --spares 1");
        }
        if let Some(w) = &self.weights {
            f += &format!(" --weights {}", join(w));
        }
        f
    }

    /// The layout's short name with its parameters (`s2raid5 G3+spare`).
    pub fn name(&self) -> String {
        let mut n = self.layout.clone();
        if let Some(g) = self.group {
            n += &format!(" G{g}");
        }
        if self.spare_partitions.is_some_and(|s| s > 0) {
            n += "+spare";
        }
        match (self.chunks_per_bundle, &self.raidx_level) {
            (Some(c), Some(l)) => n += &format!(" c{c} L{l}"),
            // Widths chosen per bundle (to the capacity bound).
            (None, Some(l)) => n += &format!(" bound L{l}"),
            _ => {}
        }
        if let (Some(w), Some(p)) = (self.width, self.parity) {
            n = format!("decl G{w}P{p}");
        }
        n
    }
}

/// Weights as `hetraid create` takes them (`0,0,1`).
pub fn join(w: &[u64]) -> String {
    w.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// The members' entries one device each (`x*2,y` -> x, x, y).
pub fn expand(members: &str) -> Vec<String> {
    let mut out = Vec::new();
    for part in members.split(',').map(str::trim) {
        match part.rsplit_once('*') {
            Some((name, n)) => {
                let n: usize = n.trim().parse().unwrap_or(1);
                out.extend(std::iter::repeat_n(name.trim().to_string(), n));
            }
            None => out.push(part.to_string()),
        }
    }
    out
}

impl Request {
    /// The workload: the trace, or the synthetic one named (random-write
    /// by default).
    pub fn workload(&self) -> Result<String, String> {
        match (&self.trace, self.workload.as_deref()) {
            (Some(_), None | Some("trace")) => Ok("trace".into()),
            (Some(_), Some(w)) => Err(format!(
                "--workload {w} does not apply with --trace: the trace is the workload; leave out one of them"
            )),
            (None, Some("trace")) => {
                Err("--workload trace needs --trace FILE (or leave out --workload)".into())
            }
            (None, w) => Ok(w.unwrap_or("random-write").into()),
        }
    }

    fn base(&self, shape: &Shape) -> Result<RunConfig, String> {
        let mut c = RunConfig::new(&shape.layout, &shape.members);
        c.workload = self.workload()?;
        c.read_fraction = self.read_fraction;
        c.size = Size(self.size);
        c.qd = self.qd;
        c.trace = self.trace.clone();
        if self.trace.is_none() {
            c.total = Some(Size(self.total));
        }
        c.weights = shape.weights.clone();
        c.group = shape.group;
        c.spare_partitions = shape.spare_partitions;
        c.chunks_per_bundle = shape.chunks_per_bundle;
        c.raidx_level = shape.raidx_level.clone();
        if shape.layout == "declustered" {
            c.width = shape.width;
            c.parity = shape.parity;
            c.spares = Some(1);
        }
        Ok(c)
    }

    /// The objective asked for (p99 for a trace, else throughput).
    pub fn objective(&self) -> &str {
        match (&self.objective, &self.trace) {
            (Some(o), _) => o,
            (None, Some(_)) => "p99",
            (None, None) => "throughput",
        }
    }

    /// Enumerate the candidates, prune, simulate within the budget, and
    /// rank: the advice (the command line renders it).
    pub fn advise(&self) -> Result<Advice, String> {
        let t0 = Instant::now();
        let (objective, objective_what, higher) = self.check_args()?;
        self.workload()?;
        let probe_dir =
            tempfile::tempdir().map_err(|e| format!("a directory for probed devices: {e}"))?;
        let (members, probe_notes, probed) = self.resolve_members(probe_dir.path())?;
        for n in &probe_notes {
            eprintln!("hetraid: probed {n}");
        }
        let specs = hetraid_sim::preset::parse_members(&members)?;
        let kinds: Vec<MemberKind> = specs.iter().map(|s| s.kind).collect();
        let tokens = expand(&members);
        let given = tokens.join(",");
        // The workload must be valid before anything is enumerated.
        hetraid_sim::setup::Setup::new(&self.base(&Shape::new("raid0", &members))?)?;
        let prices: Option<f64> = specs.iter().map(|s| s.price_usd).sum();
        let (mut cands, mut pruned) = self.enumerate(&tokens, &kinds, &specs, prices)?;
        for c in cands.iter_mut() {
            with_user_paths(&mut c.2, &probed);
        }
        // The load map: a candidate whose busiest member is predicted
        // LOAD_PRUNE times as busy per write as the best candidate's is not
        // simulated (and the rest are simulated best first, so a short
        // budget goes to the promising ones).
        if let Some(best) = cands
            .iter()
            .filter_map(|c| c.3)
            .min_by(|a, b| a.total_cmp(b))
        {
            let before = cands.len();
            cands.retain(|c| c.3.is_none_or(|t| t <= best * LOAD_PRUNE));
            pruned.load_map = before - cands.len();
            cands.sort_by(|a, b| {
                a.3.unwrap_or(f64::INFINITY)
                    .total_cmp(&b.3.unwrap_or(f64::INFINITY))
            });
        }
        let cands: Vec<(RunConfig, Shape, Candidate)> =
            cands.into_iter().map(|(c, s, d, _)| (c, s, d)).collect();
        let total = cands.len() + pruned.fit + pruned.capacity + pruned.mttdl + pruned.load_map;
        let deadline = self
            .budget_s
            .map(|s| t0 + std::time::Duration::from_secs_f64(s));
        let cands = self.measure(cands, deadline);
        let (rows, dims, simulated) = self.rank(
            cands.into_iter().map(|(_, _, c)| c).collect(),
            objective,
            higher,
            &specs,
        )?;
        Ok(Advice {
            objective,
            objective_what,
            members,
            given,
            probed: probe_notes,
            candidates: total,
            pruned,
            simulated,
            pareto_over: dims.iter().map(|d| d.0).collect(),
            seconds: t0.elapsed().as_secs_f64(),
            ranked: rows,
        })
    }

    /// The options checked before anything is probed or simulated: the
    /// objective (its description, and whether higher is better) and every
    /// range.
    fn check_args(&self) -> Result<(&'static str, &'static str, bool), String> {
        let objective: &str = self.objective();
        let Some(&(_, objective_what, higher)) =
            OBJECTIVES.iter().find(|(n, _, _)| *n == objective)
        else {
            return Err(format!(
                "--objective {objective} is unknown; use one of {}",
                OBJECTIVES
                    .iter()
                    .map(|o| o.0)
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        };
        if !(1..=2).contains(&self.redundancy) {
            return Err(format!("--redundancy {} must be 1 or 2", self.redundancy));
        }
        if self.budget_s.is_some_and(|b| !(b > 0.0 && b.is_finite())) {
            return Err("--budget-s must be a positive number of seconds".into());
        }
        if self.chunks.is_empty() || !self.chunks.iter().all(|&c| hetraid_core::spec::chunk_ok(c)) {
            return Err("--chunks must list powers of two between 4K and 1G, e.g. 16K,64K".into());
        }
        if !(self.probe_seconds > 0.0 && self.probe_seconds <= 60.0) {
            return Err(format!(
                "--probe-seconds {} must be above 0 and at most 60",
                self.probe_seconds
            ));
        }
        let name = OBJECTIVES
            .iter()
            .find(|(n, _, _)| *n == objective)
            .map_or("", |o| o.0);
        Ok((name, objective_what, higher))
    }

    /// Every candidate (shape, policy, chunk) that fits the members and the
    /// redundancy, capacity and MTTDL asked for, with the load map's
    /// prediction of its busiest member's time per write; and what was
    /// pruned.
    #[allow(clippy::type_complexity)]
    fn enumerate(
        &self,
        tokens: &[String],
        kinds: &[MemberKind],
        specs: &[hetraid_sim::preset::DeviceSpec],
        prices: Option<f64>,
    ) -> Result<(Vec<(RunConfig, Shape, Candidate, Option<f64>)>, Pruned), String> {
        let mut cands: Vec<(RunConfig, Shape, Candidate, Option<f64>)> = Vec::new();
        let mut pruned = Pruned::default();
        // The load map's share of writes (None: the mix is not known).
        let write_share = match (self.trace.is_some(), self.workload()?.as_str()) {
            (true, _) => None,
            (_, "random-write" | "seq-write") => Some(1.0),
            (_, "mixed") => Some(1.0 - self.read_fraction.unwrap_or(0.5)),
            _ => Some(0.0),
        };
        let mixed = specs.iter().any(|s| s.capacity() != specs[0].capacity());
        for shape in self.shapes(tokens, kinds, mixed) {
            // modthresh first: never worse than md in the thesis, so it is
            // named on a tie.
            for policy in ["modthresh", "modthresh-stripe", "md", "cost", "rmw-always"] {
                if shape.mirrored() && policy != "md" {
                    continue;
                }
                for &chunk in &self.chunks {
                    // RAIDX keeps a table entry per chunk: at small chunks on
                    // large members that is gigabytes; its paper used 512K.
                    if shape.layout == "raidx" && chunk < RAIDX_CHUNK_MIN {
                        continue;
                    }
                    let mut c = self.base(&shape)?;
                    c.policy = policy.into();
                    c.chunk = Size(chunk);
                    // Layouts that do not fit (too few members, too small,
                    // the wrong kinds) or miss the redundancy are pruned here.
                    let Ok(setup) = hetraid_sim::setup::Setup::new(&c) else {
                        pruned.fit += 1;
                        continue;
                    };
                    if setup.layout.redundancy().tolerance() < self.redundancy {
                        pruned.fit += 1;
                        continue;
                    }
                    if self
                        .capacity_min
                        .is_some_and(|m| setup.layout.capacity_bytes() < m)
                    {
                        pruned.capacity += 1;
                        continue;
                    }
                    if let Some(min_y) = self.mttdl_min_years {
                        let h = mttdl::default_mttdl_h(&setup, 24.0)?;
                        if h / HOURS_PER_YEAR < min_y {
                            pruned.mttdl += 1;
                            continue;
                        }
                    }
                    let load = write_share
                        .filter(|w| *w > 0.0)
                        .and_then(|_| predicted_write_ns(&setup, policy, self.size));
                    let resolved = hetraid_sim::setup::resolved_weights(&c).ok().flatten();
                    let model_gain = matches!(shape.weights, Some(Weights::Auto))
                        .then(|| hetraid_sim::setup::auto_weights(&c).ok())
                        .flatten()
                        .map(|p| p.predicted_gain);
                    let kinds_arg: Vec<&str> = hetraid_sim::preset::parse_members(&shape.members)
                        .map(|s| s.iter().map(|d| d.kind.as_str()).collect())
                        .unwrap_or_default();
                    let capacity = setup.layout.capacity_bytes();
                    let mut cand = Candidate {
                        layout: shape.layout.clone(),
                        members: shape.members.clone(),
                        weights: resolved,
                        group: shape.group,
                        spare_partitions: (shape.layout.starts_with("s2raid"))
                            .then_some(shape.spare_partitions),
                        chunks_per_bundle: shape.chunks_per_bundle,
                        raidx_level: shape.raidx_level.clone(),
                        width: shape.width,
                        parity: shape.parity,
                        policy: policy.into(),
                        chunk,
                        capacity_bytes: capacity,
                        throughput_mbps: None,
                        iops: None,
                        p99_ms: None,
                        energy_j_per_gb: None,
                        watts: None,
                        rebuild_s: None,
                        mttdl_h: None,
                        price_usd: prices,
                        usd_per_gb: prices.map(|p| p / (capacity.max(1) as f64 / 1e9)),
                        usd_per_iops: None,
                        model_gain,
                        simulated_gain: None,
                        pareto: false,
                        create: String::new(),
                        equivalent: vec![],
                        kinds: kinds_arg.iter().map(|k| k.to_string()).collect(),
                    };
                    cand.create = format!(
                        "hetraid create --layout {}{} --policy {policy} --chunk {} --kinds {} MEMBER...  # members in this order: {}",
                        cand.layout,
                        cand.layout_flags(),
                        hetraid_core::units::format_size(chunk),
                        kinds_arg.join(","),
                        cand.members
                    );
                    cands.push((c, shape.clone(), cand, load));
                }
            }
        }
        if cands.is_empty() {
            return Err(format!(
                "no layout fits {} members with redundancy {}{}",
                kinds.len(),
                self.redundancy,
                if pruned.capacity + pruned.mttdl > 0 {
                    " and the --capacity-min / --mttdl-min-years asked for"
                } else {
                    ""
                }
            ));
        }
        Ok((cands, pruned))
    }

    /// Simulate the candidates until `deadline`: performance for each, then
    /// rebuild time and MTTDL per distinct placement, and RAIDH's simulated
    /// gain over RAID5.
    fn measure(
        &self,
        mut cands: Vec<(RunConfig, Shape, Candidate)>,
        deadline: Option<Instant>,
    ) -> Vec<(RunConfig, Shape, Candidate)> {
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
        // Performance: every candidate (the first `candidates_max`, best
        // first), in parallel, until the budget is spent.
        let n = cands.len().min(self.candidates_max.unwrap_or(usize::MAX));
        let reports = parallel(n, threads, deadline, |i| hetraid_sim::run(&cands[i].0).ok());
        for ((_, _, cand), r) in cands.iter_mut().zip(&reports) {
            if let Some(r) = r {
                cand.throughput_mbps = Some(r.throughput_mbps);
                cand.iops = Some(r.iops);
                cand.p99_ms = Some(r.p99_response_ms);
                cand.energy_j_per_gb = Some(r.energy_j / (r.bytes.max(1) as f64 / 1e9));
                cand.watts = Some(r.energy_j / r.sim_time_s.max(1e-9));
                cand.usd_per_iops = cand.price_usd.map(|p| p / r.iops.max(1e-9));
            }
        }
        // Reliability: per distinct placement (the write policy does not
        // change a rebuild), with what remains of the budget.
        let mut placements: Vec<(Shape, u64)> = Vec::new();
        for (c, shape, cand) in &cands {
            if cand.throughput_mbps.is_some()
                && !placements
                    .iter()
                    .any(|(s, ch)| s == shape && *ch == c.chunk.0)
            {
                placements.push((shape.clone(), c.chunk.0));
            }
        }
        let reliability = parallel(placements.len(), threads, deadline, |i| {
            let (shape, chunk) = &placements[i];
            self.rebuild_and_mttdl(shape, *chunk).ok()
        });
        for (c, shape, cand) in cands.iter_mut() {
            if let Some(Some((rebuild_s, mttdl_h))) = placements
                .iter()
                .zip(&reliability)
                .find_map(|((s, ch), r)| (s == shape && *ch == c.chunk.0).then_some(*r))
            {
                cand.rebuild_s = Some(rebuild_s);
                cand.mttdl_h = Some(mttdl_h);
            }
        }
        // RAIDH: the simulated gain beside the model's.
        let raid5: Vec<(String, u64, f64)> = cands
            .iter()
            .filter(|(_, _, c)| c.layout == "raid5")
            .filter_map(|(_, _, c)| Some((c.policy.clone(), c.chunk, c.throughput_mbps?)))
            .collect();
        for (_, _, cand) in cands.iter_mut() {
            if cand.model_gain.is_some() {
                cand.simulated_gain = raid5
                    .iter()
                    .find(|(p, ch, _)| *p == cand.policy && *ch == cand.chunk)
                    .and_then(|(_, _, t)| Some(cand.throughput_mbps? / t));
            }
        }
        cands
    }

    /// Rank the measured rows by the objective: the Pareto front over every
    /// metric each simulated row has, ties by throughput, one row per
    /// distinct result. Returns the rows, the front's dimensions and how
    /// many were simulated.
    #[allow(clippy::type_complexity)]
    fn rank(
        &self,
        mut rows: Vec<Candidate>,
        objective: &str,
        higher: bool,
        specs: &[hetraid_sim::preset::DeviceSpec],
    ) -> Result<(Vec<Candidate>, Vec<(&'static str, bool)>, usize), String> {
        let simulated = rows.iter().filter(|r| r.throughput_mbps.is_some()).count();
        if simulated == 0 {
            return Err(format!(
                "no candidate was simulated within --budget-s {}; give more time (or none: no --budget-s), or a smaller --total",
                self.budget_s.unwrap_or(0.0)
            ));
        }
        // The Pareto front over every metric every simulated row has.
        let dims: Vec<(&'static str, bool)> = OBJECTIVES
            .iter()
            .filter(|(n, _, _)| *n != "energy")
            .filter(|(n, _, _)| {
                rows.iter()
                    .filter(|r| r.throughput_mbps.is_some())
                    .all(|r| r.metric(n).is_some())
            })
            .map(|(n, _, h)| (*n, *h))
            .collect();
        let better_or_equal = |a: f64, b: f64, higher: bool| if higher { b >= a } else { b <= a };
        let dominated = |a: &Candidate, b: &Candidate| -> bool {
            if b.throughput_mbps.is_none() {
                return false;
            }
            let mut strictly = false;
            for &(d, h) in &dims {
                let (x, y) = (
                    a.metric(d).unwrap_or(f64::NAN),
                    b.metric(d).unwrap_or(f64::NAN),
                );
                if !better_or_equal(x, y, h) {
                    return false;
                }
                strictly |= x != y;
            }
            strictly
        };
        let front: Vec<bool> = rows
            .iter()
            .map(|a| a.throughput_mbps.is_some() && !rows.iter().any(|b| dominated(a, b)))
            .collect();
        for (r, f) in rows.iter_mut().zip(front) {
            r.pareto = f;
        }
        if rows
            .iter()
            .filter(|r| r.throughput_mbps.is_some())
            .all(|r| r.metric(objective).is_none())
        {
            return Err(match objective {
                "cost-per-gb" | "cost-per-iops" => format!(
                    "--objective {} needs every device's price; {} has none (give device files with price_usd)",
                    objective,
                    specs
                        .iter()
                        .find(|s| s.price_usd.is_none())
                        .map_or("a device", |s| s.name.as_str())
                ),
                _ => format!(
                    "--objective {}: no candidate was measured for it within --budget-s {}; give more time (or none: no --budget-s)",
                    objective, self.budget_s.unwrap_or(0.0)
                ),
            });
        }
        let key = |c: &Candidate| -> f64 {
            match c.metric(objective) {
                Some(v) if higher => -v,
                Some(v) => v,
                None => f64::INFINITY,
            }
        };
        rows.sort_by(|a, b| {
            // Not simulated last; ties by throughput.
            (
                a.throughput_mbps.is_none(),
                key(a),
                -a.throughput_mbps.unwrap_or(0.0),
            )
                .partial_cmp(&(
                    b.throughput_mbps.is_none(),
                    key(b),
                    -b.throughput_mbps.unwrap_or(0.0),
                ))
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        // One row per distinct result: the same figures at the same chunk
        // are the same placement (raid4 with the SSD last is raid4s).
        let same = |a: &Candidate, b: &Candidate| {
            a.chunk == b.chunk
                && a.capacity_bytes == b.capacity_bytes
                && a.throughput_mbps.is_some()
                && a.throughput_mbps == b.throughput_mbps
                && a.p99_ms == b.p99_ms
                && a.energy_j_per_gb == b.energy_j_per_gb
                && a.rebuild_s == b.rebuild_s
        };
        let mut kept: Vec<Candidate> = Vec::with_capacity(rows.len());
        for r in rows {
            match kept.iter_mut().find(|k| same(k, &r)) {
                Some(k) => {
                    k.equivalent
                        .push(format!("{}/{}", r.name().replace(' ', ":"), r.policy))
                }
                None => kept.push(r),
            }
        }
        Ok((kept, dims, simulated))
    }

    /// Offline rebuild time (seconds) of the slowest member, one of each
    /// kind failed in turn, by the one estimator (`hetraid_sim::estimate`,
    /// as `analyze` rebuilds), as fast as the members go; and the MTTDL
    /// (hours) with that repair time.
    fn rebuild_and_mttdl(&self, shape: &Shape, chunk: u64) -> Result<(f64, f64), String> {
        let mut c = self.base(shape)?;
        c.chunk = Size(chunk);
        c.policy = "md".into();
        c.min_speed = Size(1 << 40);
        c.max_speed = Size(1 << 40);
        let full = hetraid_sim::setup::Setup::new(&c)?;
        let mut worst: f64 = 0.0;
        let mut seen: Vec<MemberKind> = Vec::new();
        for (i, s) in full.specs.iter().enumerate() {
            if seen.contains(&s.kind) {
                continue;
            }
            seen.push(s.kind);
            worst = worst.max(hetraid_sim::estimate::offline_rebuild(&c, i)?.seconds);
        }
        let mttdl = mttdl::default_mttdl_h(&full, worst / 3600.0)?;
        Ok((worst, mttdl))
    }
}

/// Run `f(0..n)` on `threads` threads until done or `deadline`; results by
/// index (None: not reached or failed).
/// A candidate over real files or devices (probed into device files)
/// names them as the user gave them: its members in order, and a `create`
/// line to run as it is (`PATH:kind` each, in the layout's order).
fn with_user_paths(c: &mut Candidate, probed: &[(String, String)]) {
    let user: Option<Vec<&str>> = c
        .members
        .split(',')
        .map(|t| probed.iter().find(|(_, f)| f == t).map(|(p, _)| p.as_str()))
        .collect();
    let Some(user) = user else {
        return;
    };
    if c.kinds.len() != user.len() {
        return;
    }
    let args: Vec<String> = user
        .iter()
        .zip(&c.kinds)
        .map(|(p, k)| format!("{p}:{k}"))
        .collect();
    c.create = format!(
        "hetraid create --layout {}{} --policy {} --chunk {} {}",
        c.layout,
        c.layout_flags(),
        c.policy,
        hetraid_core::units::format_size(c.chunk),
        args.join(" ")
    );
    c.members = user.join(",");
}

fn parallel<T: Send>(
    n: usize,
    threads: usize,
    deadline: Option<Instant>,
    f: impl Fn(usize) -> Option<T> + Sync,
) -> Vec<Option<T>> {
    let next = AtomicUsize::new(0);
    let out: Mutex<Vec<Option<T>>> = Mutex::new((0..n).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..threads.min(n) {
            s.spawn(|| loop {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    break;
                }
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                let r = f(i);
                out.lock().unwrap()[i] = r;
            });
        }
    });
    out.into_inner().unwrap()
}
