//! `hetraid advise`: from the devices you own and your workload to the
//! layout to build. Enumerates the layouts that fit the members (classic
//! levels, the thesis's placements with the members put in the order each
//! wants, RAIDH with automatic weights, weighted RAID6), each write policy
//! and chunk size; keeps those with the redundancy asked for; simulates them
//! in parallel within the time budget; ranks them by the objective and marks
//! the Pareto front over throughput, p99 response and usable capacity.

use clap::Args;
use hetraid_core::MemberKind;
use hetraid_sim::config::Weights;
use hetraid_sim::{RunConfig, Size};
use std::time::Instant;

#[derive(Debug, Args)]
pub struct AdviseCmd {
    /// The devices you have: presets or device files (probe's too), as for
    /// sim: 'caviar-black-640*4,x25e-64'.
    #[arg(long)]
    pub members: String,
    /// random-write, random-read, mixed, seq-write, seq-read, or trace.
    #[arg(long, default_value = "random-write")]
    pub workload: String,
    /// Share of reads for the mixed workload.
    #[arg(long)]
    pub read_fraction: Option<f64>,
    /// Request size.
    #[arg(long, default_value = "4K", value_parser = crate::args::size)]
    pub size: u64,
    /// Outstanding requests.
    #[arg(long, default_value = "10")]
    pub qd: u32,
    /// A trace to replay (with --workload trace).
    #[arg(long)]
    pub trace: Option<String>,
    /// What ranks the candidates: throughput (MB/s, higher first), p99
    /// (response, lower first), capacity (usable bytes), energy (J per GB
    /// moved, lower first).
    #[arg(long, default_value = "throughput")]
    pub objective: String,
    /// Member failures the array must survive: 1 or 2.
    #[arg(long, default_value = "1")]
    pub redundancy: usize,
    /// Wall-clock seconds for the simulations (candidates not reached are
    /// listed as not run).
    #[arg(long, default_value = "60")]
    pub budget_s: f64,
    /// Bytes simulated per candidate.
    #[arg(long, default_value = "32M", value_parser = crate::args::size)]
    pub total: u64,
    /// One JSON document instead of the table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, serde::Serialize)]
struct Candidate {
    layout: String,
    members: String,
    weights: Option<Vec<u64>>,
    policy: String,
    chunk: u64,
    capacity_bytes: u64,
    throughput_mbps: Option<f64>,
    p99_ms: Option<f64>,
    energy_j_per_gb: Option<f64>,
    pareto: bool,
    create: String,
    /// Candidates with the very same figures (the same placement under
    /// another name or policy): layout/policy.
    equivalent: Vec<String>,
}

/// The members' entries one device each (`x*2,y` -> x, x, y).
fn expand(members: &str) -> Vec<String> {
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

impl AdviseCmd {
    fn base(&self, layout: &str, members: &str) -> RunConfig {
        let mut c = RunConfig::new(layout, members);
        c.workload = self.workload.clone();
        c.read_fraction = self.read_fraction;
        c.size = Size(self.size);
        c.qd = self.qd;
        c.trace = self.trace.clone();
        if self.trace.is_none() {
            c.total = Some(Size(self.total));
        }
        c
    }

    /// Every layout that fits the members, with its members in the order it
    /// wants: (layout, members, weights).
    fn layouts(
        &self,
        tokens: &[String],
        kinds: &[MemberKind],
    ) -> Vec<(String, String, Option<Weights>)> {
        let n = tokens.len();
        let same = tokens.join(",");
        let ssds = kinds.iter().filter(|k| **k != MemberKind::Hdd).count();
        let mut out: Vec<(String, String, Option<Weights>)> = Vec::new();
        if self.redundancy == 1 {
            // Heterogeneous placements first: on a tie the one built for
            // the hardware is named (the sort is stable).
            // The thesis's placements: members reordered to the preset's
            // canonical kinds when the counts match.
            for p in ["raid4s", "raid5s", "raidf5", "raide", "raid4n", "raid5nss"] {
                let Some(preset) = hetraid_core::layout::Preset::parse(p) else {
                    continue;
                };
                let want = preset.default_kinds(n);
                let mut pool: Vec<(MemberKind, String)> =
                    kinds.iter().copied().zip(tokens.iter().cloned()).collect();
                let mut order = Vec::new();
                for k in &want {
                    match pool.iter().position(|(pk, _)| pk == k) {
                        Some(i) => order.push(pool.remove(i).1),
                        None => break,
                    }
                }
                if order.len() == n && preset.check_kinds(&want).is_ok() {
                    out.push((p.into(), order.join(","), None));
                }
            }
            if ssds > 0 && ssds < n {
                out.push(("raidh".into(), same.clone(), Some(Weights::Auto)));
            }
            out.push(("raid5".into(), same.clone(), None));
            out.push(("raid4".into(), same.clone(), None));
            if n.is_multiple_of(2) {
                out.push(("raid10".into(), same.clone(), None));
            }
        } else {
            out.push(("raid6".into(), same.clone(), None));
            if ssds >= 2 && 2 * ssds <= n + ssds {
                let w: Vec<u64> = kinds
                    .iter()
                    .map(|k| u64::from(*k != MemberKind::Hdd))
                    .collect();
                out.push(("raidh6".into(), same.clone(), Some(Weights::List(w))));
            }
        }
        out
    }

    pub fn run(&self) -> Result<(), String> {
        let t0 = Instant::now();
        if !matches!(
            self.objective.as_str(),
            "throughput" | "p99" | "capacity" | "energy"
        ) {
            return Err(format!(
                "--objective {} is unknown; use throughput, p99, capacity or energy",
                self.objective
            ));
        }
        if !(1..=2).contains(&self.redundancy) {
            return Err(format!("--redundancy {} must be 1 or 2", self.redundancy));
        }
        if !(self.budget_s > 0.0 && self.budget_s.is_finite()) {
            return Err("--budget-s must be a positive number of seconds".into());
        }
        let specs = hetraid_sim::preset::parse_members(&self.members)?;
        let kinds: Vec<MemberKind> = specs.iter().map(|s| s.kind).collect();
        let tokens = expand(&self.members);
        // The workload must be valid before anything is enumerated.
        hetraid_sim::setup::Setup::new(&self.base("raid0", &self.members))?;
        let given = tokens.join(",");
        let mut cands: Vec<(RunConfig, Candidate)> = Vec::new();
        for (layout, members, weights) in self.layouts(&tokens, &kinds) {
            // modthresh first: never worse than md in the thesis, so it is
            // named on a tie.
            for policy in ["modthresh", "modthresh-stripe", "md", "cost", "rmw-always"] {
                if layout == "raid10" && policy != "md" {
                    continue;
                }
                for chunk in [4u64 << 10, 16 << 10, 64 << 10, 256 << 10] {
                    let mut c = self.base(&layout, &members);
                    c.weights = weights.clone();
                    c.policy = policy.into();
                    c.chunk = Size(chunk);
                    // Layouts that do not fit (too few members, too small)
                    // or miss the redundancy are pruned here.
                    let Ok(setup) = hetraid_sim::setup::Setup::new(&c) else {
                        continue;
                    };
                    if setup.layout.redundancy().tolerance() < self.redundancy {
                        continue;
                    }
                    let resolved = hetraid_sim::setup::resolved_weights(&c).ok().flatten();
                    let kinds_arg: Vec<&str> = hetraid_sim::preset::parse_members(&members)
                        .map(|s| s.iter().map(|d| d.kind.as_str()).collect())
                        .unwrap_or_default();
                    let create = format!(
                        "hetraid create --layout {layout}{} --policy {policy} --chunk {} --kinds {} MEMBER...  # members in this order: {members}",
                        resolved
                            .as_ref()
                            .map(|w| format!(" --weights {}", w.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(",")))
                            .unwrap_or_default(),
                        hetraid_core::units::format_size(chunk),
                        kinds_arg.join(",")
                    );
                    cands.push((
                        c,
                        Candidate {
                            layout: layout.clone(),
                            members: members.clone(),
                            weights: resolved,
                            policy: policy.into(),
                            chunk,
                            capacity_bytes: setup.layout.capacity_bytes(),
                            throughput_mbps: None,
                            p99_ms: None,
                            energy_j_per_gb: None,
                            pareto: false,
                            create,
                            equivalent: vec![],
                        },
                    ));
                }
            }
        }
        if cands.is_empty() {
            return Err(format!(
                "no layout fits {} members with redundancy {}",
                kinds.len(),
                self.redundancy
            ));
        }
        // Simulate in parallel until the budget is spent.
        let deadline = t0 + std::time::Duration::from_secs_f64(self.budget_s);
        let next = std::sync::atomic::AtomicUsize::new(0);
        let results: std::sync::Mutex<Vec<Option<hetraid_sim::Report>>> =
            std::sync::Mutex::new(vec![None; cands.len()]);
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
        std::thread::scope(|s| {
            for _ in 0..threads.min(cands.len()) {
                s.spawn(|| loop {
                    if Instant::now() >= deadline {
                        break;
                    }
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some((c, _)) = cands.get(i) else { break };
                    if let Ok(r) = hetraid_sim::run(c) {
                        results.lock().unwrap()[i] = Some(r);
                    }
                });
            }
        });
        let results = results.into_inner().unwrap();
        let total = cands.len();
        let mut rows: Vec<Candidate> = cands
            .into_iter()
            .zip(results)
            .map(|((_, mut cand), r)| {
                if let Some(r) = r {
                    cand.throughput_mbps = Some(r.throughput_mbps);
                    cand.p99_ms = Some(r.p99_response_ms);
                    cand.energy_j_per_gb = Some(r.energy_j / (r.bytes.max(1) as f64 / 1e9));
                }
                cand
            })
            .collect();
        // Pareto front over throughput (up), p99 (down), capacity (up).
        let dominated = |a: &Candidate, b: &Candidate| -> bool {
            match (a.throughput_mbps, a.p99_ms, b.throughput_mbps, b.p99_ms) {
                (Some(ta), Some(pa), Some(tb), Some(pb)) => {
                    tb >= ta
                        && pb <= pa
                        && b.capacity_bytes >= a.capacity_bytes
                        && (tb > ta || pb < pa || b.capacity_bytes > a.capacity_bytes)
                }
                _ => false,
            }
        };
        let front: Vec<bool> = rows
            .iter()
            .map(|a| a.throughput_mbps.is_some() && !rows.iter().any(|b| dominated(a, b)))
            .collect();
        for (r, f) in rows.iter_mut().zip(front) {
            r.pareto = f;
        }
        let key = |c: &Candidate| -> f64 {
            match self.objective.as_str() {
                "throughput" => -c.throughput_mbps.unwrap_or(f64::NEG_INFINITY),
                "p99" => c.p99_ms.unwrap_or(f64::INFINITY),
                "capacity" => -(c.capacity_bytes as f64) - c.throughput_mbps.unwrap_or(0.0) * 1e-9,
                _ => c.energy_j_per_gb.unwrap_or(f64::INFINITY),
            }
        };
        rows.sort_by(|a, b| {
            // Not simulated last.
            (a.throughput_mbps.is_none(), key(a))
                .partial_cmp(&(b.throughput_mbps.is_none(), key(b)))
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        let simulated = rows.iter().filter(|r| r.throughput_mbps.is_some()).count();
        // One row per distinct result: the same figures at the same chunk
        // are the same placement (raid4 with the SSD last is raid4s).
        let same = |a: &Candidate, b: &Candidate| {
            a.chunk == b.chunk
                && a.capacity_bytes == b.capacity_bytes
                && a.throughput_mbps.is_some()
                && a.throughput_mbps == b.throughput_mbps
                && a.p99_ms == b.p99_ms
                && a.energy_j_per_gb == b.energy_j_per_gb
        };
        let mut kept: Vec<Candidate> = Vec::with_capacity(rows.len());
        for r in rows {
            match kept.iter_mut().find(|k| same(k, &r)) {
                Some(k) => k.equivalent.push(format!("{}/{}", r.layout, r.policy)),
                None => kept.push(r),
            }
        }
        let rows = kept;
        let secs = t0.elapsed().as_secs_f64();
        if simulated == 0 {
            return Err(format!(
                "no candidate was simulated within --budget-s {}; give more time or a smaller --total",
                self.budget_s
            ));
        }
        if self.json {
            let v = serde_json::json!({
                "objective": self.objective,
                "redundancy": self.redundancy,
                "distinct": rows.len(),
                "simulated": simulated,
                "seconds": secs,
                "ranked": rows,
                "winner": rows[0],
            });
            println!(
                "{}",
                serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?
            );
            return Ok(());
        }
        println!(
            "{total} candidates for {} ({} {}, QD {}), redundancy {}, by {}: {simulated} simulated in {secs:.1} s, {} distinct results",
            self.members,
            self.workload,
            hetraid_core::units::format_size(self.size),
            self.qd,
            self.redundancy,
            self.objective,
            rows.len()
        );
        println!(
            "{:>4} {:<8} {:<17} {:>6} {:>9} {:>9} {:>9} {:>8}  pareto  weights, order, same results",
            "rank", "layout", "policy", "chunk", "MB/s", "p99 ms", "GB", "J/GB"
        );
        for (i, r) in rows.iter().enumerate().take(20) {
            let mut notes = Vec::new();
            if let Some(w) = &r.weights {
                notes.push(format!(
                    "weights {}",
                    w.iter()
                        .map(|x| x.to_string())
                        .collect::<Vec<_>>()
                        .join(",")
                ));
            }
            if r.members != given {
                notes.push(format!("members {}", r.members));
            }
            if !r.equivalent.is_empty() {
                notes.push(format!("= {}", r.equivalent.join(" ")));
            }
            println!(
                "{:>4} {:<8} {:<17} {:>6} {:>9} {:>9} {:>9} {:>8}  {:<6}  {}",
                i + 1,
                r.layout,
                r.policy,
                hetraid_core::units::format_size(r.chunk),
                r.throughput_mbps.map_or("-".into(), |v| format!("{v:.2}")),
                r.p99_ms.map_or("-".into(), |v| format!("{v:.1}")),
                format!("{:.1}", r.capacity_bytes as f64 / 1e9),
                r.energy_j_per_gb.map_or("-".into(), |v| format!("{v:.0}")),
                if r.pareto { "*" } else { "" },
                notes.join("; ")
            );
        }
        if rows.len() > 20 {
            println!("  ... {} more (--json lists every one)", rows.len() - 20);
        }
        println!("build the winner: {}", rows[0].create);
        Ok(())
    }
}
