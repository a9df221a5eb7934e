//! `rebuild`, `rebalance`, `scrub`, `reclaim`.

use super::*;
pub use crate::cli::array::repair::*;
#[allow(unused_imports)]
use crate::render::reports::{ClearReport, ReclaimReport, ScrubView};
use hetraid_engine::error::IntoFailure;

impl RebuildCmd {
    pub fn run(&self) -> Result<(), hetraid_core::Failure> {
        if let Some(r) = remote_with_bar(
            &self.members,
            Request::Rebuild {
                to_spare: self.to_spare,
                pace: Some(self.pace.as_str().into()),
                speed: Speed {
                    min_speed: Some(self.min_speed),
                    max_speed: Some(self.max_speed),
                },
            },
            "rebuild",
        ) {
            let r: hetraid_engine::RebuildReport = serde_json::from_value(r?)
                .map_err(|e| format!("the server's rebuild report: {e}"))?;
            return crate::render::emit(&r, self.json).map_err(Into::into);
        }
        let bar = progress_bar("rebuild");
        let opts = RebuildOptions {
            min_speed: self.min_speed,
            max_speed: self.max_speed,
            stop_after: None,
            pace: self.pace,
        };
        if !self.to_spare {
            let held = Held::open(&self.members, "rebuild", self.degraded)?;
            // No replacement given: hot spares take the failed slots.
            let taken = held.cell.get().activate_spares().map_err(|e| e.to_string());
            for (slot, path) in taken.as_deref().unwrap_or_default() {
                eprintln!("hetraid: spare {path} takes the place of member {slot}");
            }
            taken?;
            let r = {
                let a = held.cell.get();
                let show = shown_on(&bar, a.layout().chunk_bytes());
                a.rebuild(opts, &show).map_err(|e| e.to_string())
            };
            bar.finish_and_clear();
            held.close()?;
            return crate::render::emit(&r?, self.json).map_err(Into::into);
        }
        let a = assemble(&self.members, self.degraded)?;
        let chunk = a.layout().chunk_bytes();
        let show = |p: hetraid_engine::RebuildProgress| {
            bar.set_length(p.stripes_total * chunk);
            bar.set_position(p.bytes_done);
        };
        let (a, r) = if self.to_spare {
            a.rebuild_to_spare(opts, &show)
                .map_err(IntoFailure::failure)?
        } else {
            let r = a.rebuild(opts, &show).map_err(IntoFailure::failure)?;
            (a, r)
        };
        bar.finish_and_clear();
        a.close().map_err(IntoFailure::failure)?;
        crate::render::emit(&r, self.json).map_err(Into::into)
    }
}

impl RebalanceCmd {
    pub fn run(&self) -> Result<(), hetraid_core::Failure> {
        let (p, _kind) = split_member(&self.with)?;
        if !p.exists() {
            return Err(
                format!("replacement {} does not exist; check the path", p.display()).into(),
            );
        }
        let abs = std::path::absolute(&p).map_err(IntoFailure::failure)?;
        // Served: the server copies while clients go on (the spare homes
        // stay the array's copy until the replacement takes the slot).
        let req = Request::Rebalance {
            with: abs.display().to_string(),
            force: self.force,
            speed: self.speed.request(),
        };
        let bar = StatusBar::start(&self.members, "copy-back");
        let served = super::remote_passing(&self.members, req, Some(&abs));
        drop(bar);
        if let Some(r) = served {
            if self.degraded {
                return Err("--degraded applies to an array that is not served: the server's array is assembled already".into());
            }
            let r: hetraid_engine::CopyBackReport =
                serde_json::from_value(r?).map_err(|e| format!("the server's reply: {e}"))?;
            return crate::render::emit(&r, self.json).map_err(Into::into);
        }
        // The replacement given among the members, blank: a rebalance cut
        // short before it attached the device (it writes the device first).
        if let Some((new, rest, _)) = one_blank_member(&self.members)? {
            return Err(format!(
                "{new} carries no hetraid superblock: a rebalance cut short before it attached the device leaves it so; give it with --with, not among the members: hetraid rebalance {} --with {new}",
                rest.join(" ")
            ).into());
        }
        let a = assemble(&self.members, self.degraded)?;
        let new = open_member(&p)?;
        let bar = progress_bar("copy-back");
        let chunk = a.layout().chunk_bytes();
        let show = |pr: hetraid_engine::RebuildProgress| {
            bar.set_length(pr.stripes_total * chunk);
            bar.set_position(pr.bytes_done);
        };
        let o = self.speed.offline_options();
        let limits = hetraid_core::pace::PaceLimits {
            min_bps: o.min_speed,
            max_bps: o.max_speed,
        };
        let r = a.copy_back_paced(new, self.force, limits, &show);
        bar.finish_and_clear();
        let (a, r) = r.map_err(IntoFailure::failure)?;
        a.close().map_err(IntoFailure::failure)?;
        crate::render::emit(&r, self.json).map_err(Into::into)
    }
}

impl ReclaimCmd {
    pub fn run(&self) -> Result<(), Failure> {
        let started = std::time::Instant::now();
        let v = if let Some(r) = remote(&self.members, Request::Reclaim) {
            r?
        } else {
            let held = Held::open(&self.members, "reclaim", self.degraded)?;
            let r = {
                let a = held.cell.get();
                if !a.has_write_back_log() {
                    Err(Failure::from("reclaim applies to arrays with a write-back log (hpda, --log-mode write-back); this array has none"))
                } else {
                    a.reclaim().map_err(IntoFailure::failure)
                }
            };
            held.close()?;
            serde_json::json!({"reclaimed_bytes": r?})
        };
        let report = ReclaimReport {
            reclaimed_bytes: v["reclaimed_bytes"].as_u64().unwrap_or(0),
            seconds: started.elapsed().as_secs_f64(),
        };
        crate::render::emit(&report, self.json).map_err(Into::into)
    }
}

impl ClearCmd {
    pub fn run(&self) -> Result<(), Failure> {
        let member = self
            .member
            .as_deref()
            .map(|m| slot_of(m, &self.members))
            .transpose()?;
        let counts = if let Some(r) = remote(&self.members, Request::Clear { member }) {
            serde_json::from_value(r?).map_err(|e| format!("the server's answer: {e}"))?
        } else {
            let held = Held::open(&self.members, "clear", self.degraded)?;
            let r = held.cell.get().clear_errors(member);
            held.close()?;
            r.map_err(IntoFailure::failure)?
        };
        crate::render::emit(&ClearReport { member, counts }, self.json).map_err(Into::into)
    }
}

impl ScrubCmd {
    pub fn run(&self) -> Result<(), hetraid_core::Failure> {
        let trust_member = self
            .trust_member
            .as_deref()
            .map(|m| slot_of(m, &self.members))
            .transpose()?;
        let v = if let Some(r) = remote_with_bar(
            &self.members,
            Request::Scrub {
                repair: self.repair,
                trust_data: self.trust_data,
                trust_member,
                speed: Speed {
                    min_speed: Some(self.min_speed),
                    max_speed: Some(self.max_speed),
                },
            },
            "scrub",
        ) {
            r?
        } else {
            let held = Held::open(&self.members, "scrub", self.degraded)?;
            let bar = progress_bar("scrub");
            let r = {
                let a = held.cell.get();
                let show = shown_on(&bar, a.layout().chunk_bytes());
                let opts = hetraid_engine::ScrubOptions {
                    min_speed: self.min_speed,
                    max_speed: self.max_speed,
                };
                a.scrub_trust(self.repair, self.trust_data, trust_member)
                    .and_then(|trust| a.scrub_with(trust, opts, &show))
                    .map_err(|e| e.to_string())
            };
            bar.finish_and_clear();
            held.close()?;
            serde_json::to_value(r?).map_err(|e| e.to_string())?
        };
        let report: hetraid_engine::ScrubReport =
            serde_json::from_value(v).map_err(|e| format!("the server's scrub report: {e}"))?;
        // Mismatches left as they are: exit 1 (what was repaired is fine).
        let left = report.mismatches > report.repaired;
        let view = ScrubView {
            report,
            repair: self.repair,
            trusting: self.trust_data || self.trust_member.is_some(),
        };
        crate::render::emit(&view, self.json)?;
        exit_with(i32::from(left)).map_err(Into::into)
    }
}

/// A rebuild's or scrub's progress shown on `bar` (stripes of `chunk`
/// bytes per member).
fn shown_on(
    bar: &indicatif::ProgressBar,
    chunk: u64,
) -> impl Fn(hetraid_engine::RebuildProgress) + '_ {
    move |p| {
        bar.set_length(p.stripes_total * chunk);
        bar.set_position(p.bytes_done);
    }
}
