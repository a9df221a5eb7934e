//! `hetraid analyze`: reliability, cost, power and the RAIDH model of a
//! configuration (DESIGN: `hetraid analyze mttdl|cost|power|raidh-model`).
//!
//! The numbers come from `hetraid-model` (MTTDL, RAIDH gain), the device presets
//! (prices, power states) and, for IOPS and energy per operation, two short runs of
//! the simulator on the same configuration.

pub use crate::cli::analyze::*;
use crate::render::analyze::{CostReport, MttdlMember, MttdlReport, PowerReport, PricedMember};
use hetraid_advise::mttdl::{failure_sets, member_mtbf_h, HOURS_PER_YEAR};
use hetraid_model::{hpda_closed_form_h, mttdl_per_member, raid5_closed_form_h, raidh_gain};
use hetraid_sim::setup::Setup;
use hetraid_sim::{Report, RunConfig};

impl AnalyzeCmd {
    pub fn run(&self) -> Result<(), String> {
        match &self.what {
            Analysis::Mttdl(c) => c.run(),
            Analysis::Cost(c) => c.run(),
            Analysis::Power(c) => c.run(),
            Analysis::RaidhModel(c) => c.run(),
        }
    }
}

impl ArrayArgs {
    fn config(&self) -> RunConfig {
        let mut c = RunConfig::new(&self.layout, &self.members);
        c.chunk = self.chunk;
        c.member_size = self.member_size;
        self.params.apply_to(&mut c);
        c
    }
}

/// Simulated offline rebuild time of each member, seconds (members in
/// parallel), by the one estimator (`hetraid_sim::estimate`: a sample on the
/// real geometry, as `advise` rebuilds).
fn rebuild_times_s(array: &ArrayArgs, setup: &Setup) -> Result<Vec<f64>, String> {
    let cfg = array.config();
    let one = |i: usize| -> Result<f64, String> {
        Ok(hetraid_sim::estimate::offline_rebuild(&cfg, i)?.seconds)
    };
    let n = setup.specs.len();
    let threads = std::thread::available_parallelism()
        .map_or(1, |p| p.get())
        .min(n);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let out: std::sync::Mutex<Vec<Option<Result<f64, String>>>> =
        std::sync::Mutex::new(vec![None; n]);
    std::thread::scope(|sc| {
        for _ in 0..threads {
            sc.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= n {
                    return;
                }
                let r = one(i);
                out.lock().unwrap()[i] = Some(r);
            });
        }
    });
    out.into_inner()
        .unwrap()
        .into_iter()
        .map(|r| r.expect("every member simulated"))
        .collect()
}

impl MttdlCmd {
    pub fn run(&self) -> Result<(), String> {
        let setup = Setup::new(&self.array.config())?;
        let positive = |name: &str, v: f64| {
            if v.is_finite() && v > 0.0 {
                Ok(v)
            } else {
                Err(format!("--{name} {v} must be a positive number of hours"))
            }
        };
        let hdd = positive("hdd-mtbf-h", self.hdd_mtbf_h)?;
        let ssd = positive("ssd-mtbf-h", self.ssd_mtbf_h)?;
        let nvram = positive("nvram-mtbf-h", self.nvram_mtbf_h.unwrap_or(ssd))?;
        let mttr = positive("mttr-h", self.mttr_h)?;
        if !(self.replace_h.is_finite() && self.replace_h >= 0.0) {
            return Err(format!(
                "--replace-h {} must be zero or a positive number of hours",
                self.replace_h
            ));
        }
        if !(self.ssd_parity_wear.is_finite() && self.ssd_parity_wear >= 1.0) {
            return Err(format!(
                "--ssd-parity-wear {} must be 1 (off) or more",
                self.ssd_parity_wear
            ));
        }
        let layout = setup.layout.as_ref();
        let sets = failure_sets(&setup)?;
        let parity = sets.parity_members();
        let mtbf = member_mtbf_h(&setup, &sets, (hdd, ssd, nvram), self.ssd_parity_wear);
        let rates: Vec<f64> = mtbf.iter().map(|h| 1.0 / h).collect();
        let rebuild_s = if self.mttr_from_sim {
            Some(rebuild_times_s(&self.array, &setup)?)
        } else {
            None
        };
        let mttr_h: Vec<f64> = match &rebuild_s {
            Some(t) => t.iter().map(|s| self.replace_h + s / 3600.0).collect(),
            None => vec![mttr; rates.len()],
        };
        let repair: Vec<f64> = mttr_h.iter().map(|h| 1.0 / h).collect();
        let m = mttdl_per_member(&sets, &rates, &repair).map_err(|e| e.to_string())?;
        // The textbook formula, where it applies: one parity over every member and
        // equal failure rates.
        let closed = (layout.redundancy() == hetraid_core::Redundancy::Parity { count: 1 }
            && sets.every_stripe_spans_all()
            && rates.iter().all(|&r| r == rates[0])
            && repair.iter().all(|&r| (r / repair[0] - 1.0).abs() < 1e-6))
        .then(|| raid5_closed_form_h(rates.len(), rates[0], repair[0]));
        // HPDA's paper form: 3 SSDs (φ), HDD-1 (λ), HDD-2 out of the chain.
        let holding = sets.holding_members();
        let raid4: Vec<usize> = (0..rates.len())
            .filter(|&i| holding >> i & 1 == 1)
            .collect();
        let ssds: Vec<usize> = raid4
            .iter()
            .copied()
            .filter(|&i| setup.specs[i].kind != hetraid_core::MemberKind::Hdd)
            .collect();
        let hpda_closed = (layout.name() == "hpda"
            && raid4.len() == 4
            && ssds.len() == 3
            && ssds.iter().all(|&i| rates[i] == rates[ssds[0]])
            && repair.iter().all(|&r| (r / repair[0] - 1.0).abs() < 1e-6))
        .then(|| {
            let hdd1 = *raid4.iter().find(|i| !ssds.contains(i)).unwrap();
            hpda_closed_form_h(rates[ssds[0]], rates[hdd1], repair[0])
        });
        let members = setup
            .specs
            .iter()
            .enumerate()
            .map(|(i, s)| MttdlMember {
                device: i,
                preset: s.name.clone(),
                kind: s.kind.as_str(),
                holds_parity: parity >> i & 1 == 1,
                mtbf_h: mtbf[i],
                mttr_h: mttr_h[i],
                rebuild_s: rebuild_s.as_ref().map(|t| t[i]),
            })
            .collect();
        let report = MttdlReport {
            layout: layout.name(),
            members,
            mttr_h: mttr_h.iter().sum::<f64>() / mttr_h.len() as f64,
            mttr_from_sim: self.mttr_from_sim,
            mttdl_h: m.hours,
            mttdl_years: m.hours / HOURS_PER_YEAR,
            states: m.states,
            max_survivable_failures: m.max_survivable_failures,
            stripes_scanned: sets.stripes_scanned,
            stripes_complete: sets.complete,
            stripe_shapes: sets.shapes(),
            closed_form_h: closed.or(hpda_closed),
            closed_form_is_hpda: closed.is_none() && hpda_closed.is_some(),
        };
        crate::render::emit(&report, self.array.json)
    }
}

/// Random writes then random reads on the configuration.
fn measure(array: &ArrayArgs, m: &MeasureArgs) -> Result<(Setup, Report, Report), String> {
    let mut c = array.config();
    c.size = m.size;
    c.qd = m.qd;
    c.total = Some(m.total);
    c.seed = m.seed;
    let setup = Setup::new(&c)?;
    c.workload = "random-write".into();
    let w = hetraid_sim::run(&c)?;
    c.workload = "random-read".into();
    let r = hetraid_sim::run(&c)?;
    Ok((setup, w, r))
}

impl CostCmd {
    pub fn run(&self) -> Result<(), String> {
        let mut given = std::collections::HashMap::new();
        for p in &self.price {
            let (name, usd) = p.split_once('=').ok_or_else(|| {
                format!("--price '{p}' must be NAME=USD, e.g. caviar-black-640=89.99")
            })?;
            let usd: f64 = usd
                .trim()
                .parse()
                .ok()
                .filter(|u: &f64| u.is_finite() && *u > 0.0)
                .ok_or_else(|| {
                    format!("--price '{p}': {usd} is not a positive number of dollars")
                })?;
            given.insert(name.trim().to_string(), usd);
        }
        // Prices first: a missing one is an error before any simulation runs.
        let setup = Setup::new(&self.array.config())?;
        let prices: Vec<f64> = setup
            .specs
            .iter()
            .map(|s| {
                given.get(&s.name).copied().or(s.price_usd).ok_or_else(|| {
                    format!(
                        "device '{}' has no price; pass --price {}=USD",
                        s.name, s.name
                    )
                })
            })
            .collect::<Result<_, _>>()?;
        let (setup, w, r) = measure(&self.array, &self.measure)?;
        let total: f64 = prices.iter().sum();
        let raw_gb: f64 = setup.specs.iter().map(|s| s.capacity() as f64 / 1e9).sum();
        let usable_gb = setup.layout.capacity_bytes() as f64 / 1e9;
        let report = CostReport {
            layout: setup.layout.name(),
            members: setup
                .specs
                .iter()
                .zip(&prices)
                .enumerate()
                .map(|(i, (s, p))| PricedMember {
                    device: i,
                    preset: s.name.clone(),
                    kind: s.kind.as_str(),
                    capacity_gb: s.capacity() as f64 / 1e9,
                    price_usd: *p,
                })
                .collect(),
            price_usd: total,
            raw_gb,
            usable_gb,
            usd_per_usable_gb: total / usable_gb,
            request_bytes: self.measure.size.0,
            write_iops: w.iops,
            read_iops: r.iops,
            usd_per_write_iops: total / w.iops,
            usd_per_read_iops: total / r.iops,
            members_given: self.array.members.clone(),
            qd: self.measure.qd,
        };
        crate::render::emit(&report, self.array.json)
    }
}

impl PowerCmd {
    pub fn run(&self) -> Result<(), String> {
        let (setup, w, r) = measure(&self.array, &self.measure)?;
        let idle_w: f64 = setup.specs.iter().map(|s| s.power.idle_w).sum();
        let active_w: f64 = setup
            .specs
            .iter()
            .map(|s| s.power.read_w.max(s.power.write_w))
            .sum();
        let usable_tb = setup.layout.capacity_bytes() as f64 / 1e12;
        let per_op_mj = |r: &Report| r.energy_j * 1e3 / r.requests.max(1) as f64;
        let mean_w = |r: &Report| r.energy_j / r.sim_time_s.max(f64::MIN_POSITIVE);
        let report = PowerReport {
            layout: setup.layout.name(),
            idle_w,
            active_w,
            usable_tb,
            idle_w_per_usable_tb: idle_w / usable_tb,
            request_bytes: self.measure.size.0,
            write_mj_per_op: per_op_mj(&w),
            read_mj_per_op: per_op_mj(&r),
            write_mean_w: mean_w(&w),
            read_mean_w: mean_w(&r),
            write_iops_per_w: w.iops / mean_w(&w),
            read_iops_per_w: r.iops / mean_w(&r),
            members_given: self.array.members.clone(),
        };
        crate::render::emit(&report, self.array.json)
    }
}

impl RaidhModelCmd {
    pub fn run(&self) -> Result<(), String> {
        let g = raidh_gain(self.devices, self.faster).map_err(|e| e.to_string())?;
        crate::render::emit(&g, self.json)
    }
}
