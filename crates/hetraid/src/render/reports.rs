//! The text of the engine's reports of a change, a rebuild, a copy-back, a
//! scrub and a reclaim (their JSON is their serde form).

use super::{say, Report};
use hetraid_core::units::format_size;
use hetraid_engine::{ChangeReport, CopyBackReport, RebuildReport, ScrubReport};
use serde::Serialize;

impl Report for ChangeReport {
    fn text(&self) -> String {
        let r = self;
        let mut out = String::new();
        let capacity = format!(
            "capacity {} -> {} ({} -> {} bytes)",
            format_size(r.capacity_before),
            format_size(r.capacity_after),
            r.capacity_before,
            r.capacity_after
        );
        if r.change == "restripe" {
            say!(
                out,
                "restriped onto {} members: {} rows written in {:.2} s; stripes {} -> {}; {capacity}",
                r.slot + 1,
                r.moves,
                r.seconds,
                r.bundles_before,
                r.bundles_after,
            );
            return out;
        }
        let verb = match r.change.as_str() {
            "grow" => "added",
            "enlarge" => "grown to its whole member",
            _ => "removed",
        };
        if let Some(s) = &r.shrink {
            say!(
                out,
                "slot {} {verb}: {} chunks evacuated past the new end, {} bundles narrowed (parity computed again), {} dropped, {} chunk moves in {:.2} s; bundles {} -> {}; {capacity}",
                r.slot,
                s.evacuated,
                s.narrowed,
                s.dropped,
                s.moved,
                r.seconds,
                r.bundles_before,
                r.bundles_after,
            );
            return out;
        }
        say!(
            out,
            "slot {} {verb}: {} chunk moves ({} rebuilt from their bundles) in {:.2} s; bundles {} -> {}; {capacity}",
            r.slot,
            r.moves,
            r.rebuilt,
            r.seconds,
            r.bundles_before,
            r.bundles_after,
        );
        out
    }
}

impl Report for RebuildReport {
    fn text(&self) -> String {
        let r = self;
        let mut out = String::new();
        if r.members.is_empty() {
            say!(
                out,
                "nothing to rebuild: no member is in the rebuilding state (use hetraid replace first, or --to-spare)"
            );
            return out;
        }
        let named: Vec<String> = r
            .members
            .iter()
            .enumerate()
            .map(|(k, m)| match r.paths.get(k).filter(|p| !p.is_empty()) {
                Some(p) => format!("{m} ({p})"),
                None => m.to_string(),
            })
            .collect();
        say!(
            out,
            "rebuilt member(s) [{}]: {} stripes, {} in {:.2} s ({} parallel stream{}), {:.1} MB/s",
            named.join(", "),
            r.stripes,
            format_size(r.bytes),
            r.seconds,
            r.streams,
            if r.streams == 1 { "" } else { "s" },
            r.bytes as f64 / r.seconds.max(1e-9) / 1e6
        );
        out
    }
}

impl Report for CopyBackReport {
    fn text(&self) -> String {
        let r = self;
        let mut out = String::new();
        say!(
            out,
            "copied back member {} onto {} (in place of {}): {} chunks, {} in {:.2} s, {:.1} MB/s{}; its spare chunks are free again",
            r.member,
            r.path,
            if r.old_path.is_empty() {
                "the failed device"
            } else {
                &r.old_path
            },
            r.chunks,
            format_size(r.bytes),
            r.seconds,
            r.bytes as f64 / r.seconds.max(1e-9) / 1e6,
            if r.recopied > 0 {
                format!(", {} chunks copied again (written meanwhile)", r.recopied)
            } else {
                String::new()
            }
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The text and the JSON of one report say the same numbers.
    #[test]
    fn each_report_has_text_and_json_that_agree() {
        let c = ChangeReport {
            change: "grow".into(),
            slot: 4,
            moves: 1234,
            rebuilt: 0,
            seconds: 2.5,
            bundles_before: 10,
            bundles_after: 13,
            capacity_before: 3 << 30,
            capacity_after: 4 << 30,
            shrink: None,
        };
        let t = c.text();
        assert!(t.starts_with("slot 4 added: 1234 chunk moves"), "{t}");
        assert!(t.contains("capacity 3G -> 4G"), "{t}");
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(v["moves"], 1234);
        assert_eq!(v["capacity_after"], 4u64 << 30);
        let mut r = RebuildReport {
            members: vec![1],
            paths: vec!["d1.img".into()],
            streams: 2,
            stripes: 512,
            bytes: 64 << 20,
            seconds: 0.5,
            completed: true,
            stream_seconds: vec![],
        };
        let t = r.text();
        assert!(t.starts_with("rebuilt member(s) [1 (d1.img)]: 512 stripes, 64M in 0.50 s (2 parallel streams), 134.2 MB/s"), "{t}");
        assert_eq!(serde_json::to_value(&r).unwrap()["stripes"], 512);
        r.members.clear();
        assert!(r.text().starts_with("nothing to rebuild"));
    }
}

/// What `hetraid reclaim` did.
#[derive(Debug, Clone, Serialize)]
pub struct ReclaimReport {
    pub reclaimed_bytes: u64,
    /// Wall time, for the text (the JSON is the engine's answer).
    #[serde(skip)]
    pub seconds: f64,
}

impl Report for ReclaimReport {
    fn text(&self) -> String {
        let mut out = String::new();
        say!(
            out,
            "reclaim: {} bytes of the write log written to the members in {:.2} s; the log holds no write now",
            self.reclaimed_bytes,
            self.seconds
        );
        out
    }
}

/// Details a scrub's text lists; `--json` lists all the engine kept.
const SCRUB_DETAILS_SHOWN: usize = 20;

/// A scrub's report as `hetraid scrub` shows it: with what was asked
/// (`--repair`, a side trusted), which decides the text's advice.
#[derive(Debug, Clone, Serialize)]
pub struct ScrubView {
    #[serde(flatten)]
    pub report: ScrubReport,
    #[serde(skip)]
    pub repair: bool,
    #[serde(skip)]
    pub trusting: bool,
}

impl Report for ScrubView {
    fn text(&self) -> String {
        let r = &self.report;
        let mut out = String::new();
        let mut head = format!(
            "scrub: {} stripes checked, {} mismatched ({} pages)",
            r.stripes_checked, r.mismatches, r.mismatched_pages
        );
        if self.repair {
            head += &format!(", {} repaired ({} pages)", r.repaired, r.repaired_pages);
        }
        say!(out, "{head}");
        for d in r.details.iter().take(SCRUB_DETAILS_SHOWN) {
            let what = match d.member {
                Some(m) => format!(
                    "member {m} ({}) is wrong: {}",
                    d.path.as_deref().unwrap_or("-"),
                    d.action
                ),
                None => d.action.to_string(),
            };
            say!(
                out,
                "  stripe {} pages {}-{}: {what}",
                d.stripe,
                d.page_first,
                d.page_last
            );
        }
        if r.unlocated_pages > 0 && !self.trusting {
            say!(
                out,
                "{} pages mismatch where this layout cannot tell which member is wrong; nothing was written there. To rewrite them, say which side to trust: --repair --trust-data (parity from data) or --repair --trust-member I (mirrors)",
                r.unlocated_pages
            );
        }
        out
    }
}

/// What `hetraid clear` set back to zero.
#[derive(Debug, Clone, Serialize)]
pub struct ClearReport {
    /// The member cleared; None: every member.
    pub member: Option<usize>,
    /// The counts cleared, added up.
    #[serde(flatten)]
    pub counts: hetraid_engine::annex::ErrorCounts,
}

impl Report for ClearReport {
    fn text(&self) -> String {
        let mut out = String::new();
        let c = &self.counts;
        say!(
            out,
            "error counts of {} cleared: {} read, {} write, {} checksum",
            match self.member {
                Some(m) => format!("member {m}"),
                None => "every member".into(),
            },
            c.read,
            c.write,
            c.checksum
        );
        out
    }
}
