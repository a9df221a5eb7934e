//! The planner's reports: `hetraid plan` (one request's member I/O and the
//! stripes' modes) and `hetraid loadmap` (each member's share of a cycle of
//! writes). Their JSON is their serde form.

use super::{say, Report};
use hetraid_core::loadmap::LoadMap;
use hetraid_core::plan::{MemberIo, Mode, Op};
use serde::Serialize;

/// Rows the text lists; `--json` lists all.
const PLAN_ROWS_SHOWN: usize = 32;

/// One request's plan, as `hetraid plan` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct PlanReport {
    pub layout: String,
    pub policy: &'static str,
    pub op: Op,
    pub offset: u64,
    pub length: u64,
    pub failed: Vec<usize>,
    pub members: Vec<MemberIo>,
    pub rows: Vec<PlanRow>,
    /// The request as the user typed it (`0+64K`), for the text's title.
    #[serde(skip)]
    pub request: String,
}

/// Consecutive pages of one stripe planned in one mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PlanRow {
    pub stripe: u64,
    pub mode: Mode,
    pub first_page: u32,
    pub pages: u32,
}

fn mode_name(m: Mode) -> String {
    serde_json::to_value(m)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

impl Report for PlanReport {
    fn text(&self) -> String {
        let mut out = String::new();
        say!(
            out,
            "{} {} on {} ({} policy{})",
            match self.op {
                Op::Write => "write",
                _ => "read",
            },
            self.request,
            self.layout,
            self.policy,
            if self.failed.is_empty() {
                String::new()
            } else {
                format!(", failed {:?}", self.failed)
            }
        );
        say!(
            out,
            "{:>6} {:>12} {:>12} {:>10} {:>11} {:>8} {:>9}",
            "member",
            "read_bytes",
            "write_bytes",
            "read_pages",
            "write_pages",
            "read_ops",
            "write_ops"
        );
        for m in &self.members {
            say!(
                out,
                "{:>6} {:>12} {:>12} {:>10} {:>11} {:>8} {:>9}",
                m.device,
                m.read_bytes,
                m.write_bytes,
                m.read_pages,
                m.write_pages,
                m.read_ops,
                m.write_ops
            );
        }
        say!(out, "{:>8} {:>9} {:>6}", "stripe", "mode", "pages");
        for r in self.rows.iter().take(PLAN_ROWS_SHOWN) {
            let pages = match r.pages {
                0 => "-".to_string(),
                n => format!("{}..{}", r.first_page, r.first_page + n),
            };
            say!(out, "{:>8} {:>9} {:>6}", r.stripe, mode_name(r.mode), pages);
        }
        if self.rows.len() > PLAN_ROWS_SHOWN {
            say!(
                out,
                "({} more rows; --json lists all)",
                self.rows.len() - PLAN_ROWS_SHOWN
            );
        }
        out
    }
}

/// Each member's share of a cycle of writes, as `hetraid loadmap` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct LoadmapReport {
    pub layout: String,
    pub policy: &'static str,
    #[serde(flatten)]
    pub map: LoadMap,
}

impl Report for LoadmapReport {
    fn text(&self) -> String {
        let mut out = String::new();
        say!(
            out,
            "{}: writes of {} chunks from each of {} start positions ({} policy)",
            self.layout,
            self.map.write_chunks,
            self.map.starts,
            self.policy
        );
        say!(
            out,
            "{:>6} {:>10} {:>11}  reads",
            "member",
            "read_share",
            "write_share"
        );
        for m in &self.map.members {
            say!(
                out,
                "{:>6} {:>10.4} {:>11.4}  {}",
                m.device,
                m.read_share,
                m.write_share,
                "#".repeat((m.read_share * 60.0).round() as usize)
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_text_folds_rows_past_the_shown_count() {
        let row = |s| PlanRow {
            stripe: s,
            mode: Mode::Full,
            first_page: 0,
            pages: 16,
        };
        let r = PlanReport {
            layout: "raid5".into(),
            policy: "md",
            op: Op::Write,
            offset: 0,
            length: 1 << 20,
            failed: vec![2],
            members: vec![],
            rows: (0..40).map(row).collect(),
            request: "0+1M".into(),
        };
        let text = r.text();
        assert!(text.starts_with("write 0+1M on raid5 (md policy, failed [2])\n"));
        assert!(text.contains("      31      full  0..16\n"), "{text}");
        assert!(!text.contains("      32      full"), "{text}");
        assert!(
            text.ends_with("(8 more rows; --json lists all)\n"),
            "{text}"
        );
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["rows"].as_array().unwrap().len(), 40);
        assert!(v.get("request").is_none());
    }
}
