//! `hetraid iostat`'s report (zpool iostat -v, iostat -x): per array and
//! per member, operations and megabytes a second, the mean time an
//! operation took, and the mean number in flight, over an interval.

use super::{say, Report};
use hetraid_engine::iostat::IoStats;
use serde::Serialize;

/// Rates over an interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Rates {
    pub read_ops_per_s: f64,
    pub write_ops_per_s: f64,
    pub read_mb_per_s: f64,
    pub write_mb_per_s: f64,
    /// Mean time an operation took (iostat's r_await, w_await), ms.
    pub read_await_ms: f64,
    pub write_await_ms: f64,
    /// Mean operations in flight (iostat's aqu-sz: time in operations over
    /// the interval).
    pub queue_depth: f64,
}

impl Rates {
    /// The rates of `d`, counted over `seconds`.
    pub fn of(d: &IoStats, seconds: f64) -> Rates {
        let s = seconds.max(1e-9);
        let ms = |ns: u64, ops: u64| match ops {
            0 => 0.0,
            n => ns as f64 / n as f64 / 1e6,
        };
        Rates {
            read_ops_per_s: d.read_ops as f64 / s,
            write_ops_per_s: d.write_ops as f64 / s,
            read_mb_per_s: d.read_bytes as f64 / s / 1e6,
            write_mb_per_s: d.write_bytes as f64 / s / 1e6,
            read_await_ms: ms(d.read_ns, d.read_ops),
            write_await_ms: ms(d.write_ns, d.write_ops),
            queue_depth: (d.read_ns + d.write_ns) as f64 / 1e9 / s,
        }
    }
}

/// One member's line.
#[derive(Debug, Clone, Serialize)]
pub struct MemberRates {
    pub slot: usize,
    pub path: String,
    pub state: String,
    #[serde(flatten)]
    pub rates: Rates,
}

/// One array's lines.
#[derive(Debug, Clone, Serialize)]
pub struct ArrayRates {
    pub name: String,
    pub uuid: String,
    pub state: String,
    /// The users' requests (the server's; none when a command holds it).
    #[serde(flatten)]
    pub rates: Rates,
    pub members: Vec<MemberRates>,
    /// A rebuild, scrub or change running: `status`'s line for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress: Option<String>,
}

/// One report: every array over one interval.
#[derive(Debug, Clone, Serialize)]
pub struct IostatReport {
    pub time_unix_ms: u64,
    /// The interval the rates are over (the first report: since the
    /// counting began).
    pub interval_s: f64,
    pub arrays: Vec<ArrayRates>,
}

/// Columns the label has before the numbers.
const LABEL_WIDTH: usize = 28;

fn line(out: &mut String, label: &str, r: &Rates) {
    // A long path on a line of its own, the numbers under it, aligned.
    let label = if label.chars().count() > LABEL_WIDTH {
        say!(out, "{label}");
        ""
    } else {
        label
    };
    say!(
        out,
        "{label:<28} {:>8.0} {:>8.0} {:>9.1} {:>9.1} {:>8.2} {:>8.2} {:>6.2}",
        r.read_ops_per_s,
        r.write_ops_per_s,
        r.read_mb_per_s,
        r.write_mb_per_s,
        r.read_await_ms,
        r.write_await_ms,
        r.queue_depth
    );
}

impl Report for IostatReport {
    fn text(&self) -> String {
        let mut out = String::new();
        say!(
            out,
            "{:<28} {:>17} {:>19} {:>17} {:>6}",
            format!("over {:.1} s", self.interval_s),
            "ops/s",
            "MB/s",
            "await ms",
            ""
        );
        say!(
            out,
            "{:<28} {:>8} {:>8} {:>9} {:>9} {:>8} {:>8} {:>6}",
            "array / member",
            "read",
            "write",
            "read",
            "write",
            "read",
            "write",
            "aqu-sz"
        );
        for a in &self.arrays {
            let label = match a.name.as_str() {
                "" => format!("{} ({})", &a.uuid[..8], a.state),
                n => format!("{n} ({})", a.state),
            };
            line(&mut out, &label, &a.rates);
            for m in &a.members {
                let path = if m.state == "active" {
                    format!("  {}", m.path)
                } else {
                    format!("  {} ({})", m.path, m.state)
                };
                line(&mut out, &path, &m.rates);
            }
            if let Some(p) = &a.progress {
                say!(out, "  {p}");
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_per_second_and_latency_per_operation() {
        let d = IoStats {
            read_ops: 200,
            write_ops: 100,
            read_bytes: 200 * 4096,
            write_bytes: 100 * 65536,
            read_ns: 200 * 500_000,
            write_ns: 100 * 2_000_000,
        };
        let r = Rates::of(&d, 2.0);
        assert_eq!(r.read_ops_per_s, 100.0);
        assert_eq!(r.write_ops_per_s, 50.0);
        assert!((r.read_mb_per_s - 0.4096).abs() < 1e-9);
        assert!((r.write_mb_per_s - 3.2768).abs() < 1e-9);
        assert!((r.read_await_ms - 0.5).abs() < 1e-9);
        assert!((r.write_await_ms - 2.0).abs() < 1e-9);
        // 0.1 s + 0.2 s of operations over 2 s: 0.15 in flight on average.
        assert!((r.queue_depth - 0.15).abs() < 1e-9);
        assert_eq!(Rates::of(&IoStats::default(), 1.0).read_await_ms, 0.0);
    }
}
