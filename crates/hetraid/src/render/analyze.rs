//! `hetraid analyze`'s reports: MTTDL, cost, power (the RAIDH model's is the
//! model's own `RaidhGain`). Their JSON is their serde form.

use super::{say, Report};
use hetraid_advise::mttdl::HOURS_PER_YEAR;
use hetraid_model::RaidhGain;
use serde::Serialize;

/// One member in the MTTDL chain.
#[derive(Debug, Clone, Serialize)]
pub struct MttdlMember {
    pub device: usize,
    pub preset: String,
    pub kind: &'static str,
    pub holds_parity: bool,
    pub mtbf_h: f64,
    pub mttr_h: f64,
    /// The simulated offline rebuild, with `--mttr-from-sim`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rebuild_s: Option<f64>,
}

/// `hetraid analyze mttdl`.
#[derive(Debug, Clone, Serialize)]
pub struct MttdlReport {
    pub layout: String,
    pub members: Vec<MttdlMember>,
    /// The members' mean repair time.
    pub mttr_h: f64,
    pub mttr_from_sim: bool,
    pub mttdl_h: f64,
    pub mttdl_years: f64,
    pub states: usize,
    pub max_survivable_failures: usize,
    pub stripes_scanned: u64,
    pub stripes_complete: bool,
    pub stripe_shapes: usize,
    /// The textbook RAID5 form or HPDA's paper form, where one applies.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub closed_form_h: Option<f64>,
    /// Which of the two closed forms `closed_form_h` is.
    #[serde(skip)]
    pub closed_form_is_hpda: bool,
}

impl Report for MttdlReport {
    fn text(&self) -> String {
        let mut out = String::new();
        say!(
            out,
            "{} on {} members: MTTDL {:.4e} h ({:.1} years)",
            self.layout,
            self.members.len(),
            self.mttdl_h,
            self.mttdl_h / HOURS_PER_YEAR
        );
        say!(
            out,
            "  chain: {} states, survives up to {} failed member(s) at once",
            self.states,
            self.max_survivable_failures
        );
        for (i, s) in self.members.iter().enumerate() {
            let rebuild = match s.rebuild_s {
                Some(t) => format!(" (simulated rebuild {t:.0} s)"),
                None => String::new(),
            };
            say!(
                out,
                "  member {i}: {:<18} {:<5} MTBF {:>9.0} h, MTTR {:.3} h{rebuild}{}",
                s.preset,
                s.kind,
                s.mtbf_h,
                s.mttr_h,
                if s.holds_parity {
                    "  (holds parity)"
                } else {
                    ""
                }
            );
        }
        match (self.closed_form_h, self.closed_form_is_hpda) {
            (Some(c), false) => say!(out, "  closed form ((2n-1)λ+μ)/(n(n-1)λ²): {c:.4e} h"),
            (Some(c), true) => say!(
                out,
                "  HPDA paper's closed form (3 SSDs φ, HDD-1 λ; HDD-2 holds no data): {c:.4e} h"
            ),
            (None, _) => {}
        }
        if !self.stripes_complete {
            say!(
                out,
                "  note: failure sets from the first {} stripes",
                self.stripes_scanned
            );
        }
        out
    }
}

/// One priced member.
#[derive(Debug, Clone, Serialize)]
pub struct PricedMember {
    pub device: usize,
    pub preset: String,
    pub kind: &'static str,
    pub capacity_gb: f64,
    pub price_usd: f64,
}

/// `hetraid analyze cost`.
#[derive(Debug, Clone, Serialize)]
pub struct CostReport {
    pub layout: String,
    pub members: Vec<PricedMember>,
    pub price_usd: f64,
    pub raw_gb: f64,
    pub usable_gb: f64,
    pub usd_per_usable_gb: f64,
    pub request_bytes: u64,
    pub write_iops: f64,
    pub read_iops: f64,
    pub usd_per_write_iops: f64,
    pub usd_per_read_iops: f64,
    /// The members as given (`--members`), and the simulated queue depth.
    #[serde(skip)]
    pub members_given: String,
    #[serde(skip)]
    pub qd: u32,
}

impl Report for CostReport {
    fn text(&self) -> String {
        let mut out = String::new();
        say!(
            out,
            "{} on {}: ${:.2}, {:.1} GB usable of {:.1} GB raw, ${:.3}/GB usable",
            self.layout,
            self.members_given,
            self.price_usd,
            self.usable_gb,
            self.raw_gb,
            self.usd_per_usable_gb
        );
        say!(
            out,
            "  random {} B writes: {:.0} IOPS, ${:.3}/IOPS; reads: {:.0} IOPS, ${:.3}/IOPS (simulated, qd {})",
            self.request_bytes,
            self.write_iops,
            self.usd_per_write_iops,
            self.read_iops,
            self.usd_per_read_iops,
            self.qd
        );
        out
    }
}

/// `hetraid analyze power`.
#[derive(Debug, Clone, Serialize)]
pub struct PowerReport {
    pub layout: String,
    pub idle_w: f64,
    pub active_w: f64,
    pub usable_tb: f64,
    pub idle_w_per_usable_tb: f64,
    pub request_bytes: u64,
    pub write_mj_per_op: f64,
    pub read_mj_per_op: f64,
    pub write_mean_w: f64,
    pub read_mean_w: f64,
    pub write_iops_per_w: f64,
    pub read_iops_per_w: f64,
    #[serde(skip)]
    pub members_given: String,
}

impl Report for PowerReport {
    fn text(&self) -> String {
        let mut out = String::new();
        say!(
            out,
            "{} on {}: idle {:.2} W, all active {:.2} W, {:.2} W idle per usable TB",
            self.layout,
            self.members_given,
            self.idle_w,
            self.active_w,
            self.idle_w_per_usable_tb
        );
        say!(
            out,
            "  random {} B writes: {:.2} mJ/op at {:.2} W ({:.1} IOPS/W); reads: {:.2} mJ/op at {:.2} W ({:.1} IOPS/W)",
            self.request_bytes,
            self.write_mj_per_op,
            self.write_mean_w,
            self.write_iops_per_w,
            self.read_mj_per_op,
            self.read_mean_w,
            self.read_iops_per_w
        );
        out
    }
}

impl Report for RaidhGain {
    fn text(&self) -> String {
        let mut out = String::new();
        say!(
            out,
            "RAIDH model, N = {} devices, one faster by F = {}: per-device work -{:.1} % (z = 1 - N/(N+F)), throughput +{:.1} % over RAID5",
            self.devices,
            self.faster,
            self.work_reduction * 100.0,
            self.throughput_gain * 100.0
        );
        out
    }
}
