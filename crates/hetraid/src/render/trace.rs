//! `hetraid trace stats`: a trace's statistics.

use super::{say, Report};
use hetraid_sim::trace::TraceStats;
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct TraceStatsReport {
    #[serde(flatten)]
    pub stats: TraceStats,
    /// The trace's path, as given.
    #[serde(skip)]
    pub file: String,
}

impl Report for TraceStatsReport {
    fn text(&self) -> String {
        let s = &self.stats;
        let mut out = String::new();
        say!(
            out,
            "{}: {} requests over {:.1} s, {:.1} % writes, mean size {:.2} KiB",
            self.file,
            s.requests,
            s.duration_s,
            s.write_fraction * 100.0,
            s.mean_size_kib
        );
        out
    }
}
