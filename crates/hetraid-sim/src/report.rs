//! The result of one run. The first fields are a contract (`hetraid sim --json`);
//! later fields are additions.

use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemberReport {
    pub device: usize,
    pub preset: String,
    pub reads: u64,
    pub writes: u64,
    pub read_pages: u64,
    pub write_pages: u64,
    pub erases: u64,
    pub busy_s: f64,
    pub idle_s: f64,
    pub energy_j: f64,
    // Additions.
    pub kind: String,
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// Busy share of the run.
    pub utilization: f64,
    /// energy_j by power state: reading, writing, idle.
    pub energy_read_j: f64,
    pub energy_write_j: f64,
    pub energy_idle_j: f64,
    /// SSDs: flash pages programmed / host pages written, and the most-erased block.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub write_amplification: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub erase_max: Option<u64>,
    /// SSDs: pages garbage collection copied, and page writes that read the
    /// page first (the host wrote part of a page).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gc_page_copies: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sub_page_rmw: Option<u64>,
    /// Discards (TRIM) the member received, and their bytes.
    pub discards: u64,
    pub discard_bytes: u64,
    /// SSDs: mapped pages the discards unmapped (garbage collection never
    /// copies them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub discarded_pages: Option<u64>,
    /// HDDs: where media time went, per operation (DiskSim's breakdown).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mechanics: Option<MechanicsReport>,
}

/// A disk's operations split as DiskSim reports them: means in ms of the
/// command overhead (over every operation), and of seek, rotational wait and
/// media transfer (over the operations that went to the media).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MechanicsReport {
    pub media_ops: u64,
    pub cache_hits: u64,
    pub overhead_ms_mean: f64,
    pub seek_ms_mean: f64,
    pub rotation_ms_mean: f64,
    pub transfer_ms_mean: f64,
}

impl MechanicsReport {
    pub fn of(m: &crate::device::Mechanics) -> Self {
        let mean = |ns: u64, n: u64| {
            if n == 0 {
                0.0
            } else {
                ns as f64 / n as f64 / 1e6
            }
        };
        Self {
            media_ops: m.media_ops,
            cache_hits: m.cache_hits,
            overhead_ms_mean: mean(m.overhead_ns, m.media_ops + m.cache_hits),
            seek_ms_mean: mean(m.seek_ns, m.media_ops),
            rotation_ms_mean: mean(m.rotation_ns, m.media_ops),
            transfer_ms_mean: mean(m.transfer_ns, m.media_ops),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RebuildReport {
    pub member: usize,
    /// From the start of the run to the last rebuilt stripe (to the end of
    /// the run when the rebuild did not finish: see `completed`).
    pub rebuild_time_s: f64,
    pub rebuilt_bytes: u64,
    /// rebuilt_bytes / rebuild_time_s, MB/s.
    pub rebuild_mbps: f64,
    pub streams: usize,
    /// User requests that completed while the rebuild ran.
    pub requests_during: u64,
    pub mean_response_during_ms: f64,
    pub p99_response_during_ms: f64,
    /// Per rebuild stream (in schedule order): when it wrote its last batch,
    /// and the bytes it rebuilt.
    pub stream_time_s: Vec<f64>,
    pub stream_bytes: Vec<u64>,
    /// The rebuild finished before the run ended (a rebuild held to a low
    /// speed under a load may not).
    pub completed: bool,
    /// A sample of the rebuild ran (`estimate`): the share of the stripes
    /// it swept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sampled_fraction: Option<f64>,
}

/// A scrub of the whole array under the load (`scrub`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScrubReport {
    /// From the start of the run to the last stripe checked.
    pub scrub_time_s: f64,
    pub stripes: u64,
    /// Bytes the speed limits count (a chunk per stripe, as MD per device).
    pub checked_bytes: u64,
    /// checked_bytes / scrub_time_s, MB/s.
    pub scrub_mbps: f64,
    pub completed: bool,
}

/// A copy-back onto a replacement after a rebuild into distributed spare
/// space (`copy_back`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CopyBackReport {
    pub member: usize,
    /// When it started (the rebuild into spare space ended).
    pub start_s: f64,
    /// From its start to its last write (to the end of the run when it did
    /// not finish: see `completed`).
    pub copy_back_time_s: f64,
    pub chunks: u64,
    pub copied_bytes: u64,
    /// copied_bytes / copy_back_time_s, MB/s.
    pub copy_back_mbps: f64,
    /// Chunks copied again: users wrote their spare homes after their
    /// copy started (as the engine's served rebalance).
    pub recopied: u64,
    /// User requests that completed while it ran.
    pub requests_during: u64,
    pub mean_response_during_ms: f64,
    pub p99_response_during_ms: f64,
    pub completed: bool,
}

/// A grow under the load (`grow`): the last member added and the data
/// restriped onto every member.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GrowReport {
    /// From the start of the run to the last step's end (to the end of the
    /// run when it did not finish: see `completed`).
    pub grow_time_s: f64,
    /// Restripe steps run, and those that backed up a row first (MD's
    /// critical section).
    pub steps: u64,
    pub backup_steps: u64,
    /// New-layout rows written.
    pub rows: u64,
    /// Bytes the speed limits count (a chunk per row, as MD per device).
    pub moved_bytes: u64,
    /// moved_bytes / grow_time_s, MB/s.
    pub grow_mbps: f64,
    /// Capacity before and after, bytes.
    pub capacity_before: u64,
    pub capacity_after: u64,
    /// User requests that completed while it ran, the ones a step held,
    /// and the response of the former.
    pub requests_during: u64,
    pub requests_held: u64,
    pub mean_response_during_ms: f64,
    pub p99_response_during_ms: f64,
    pub completed: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub throughput_mbps: f64,
    pub iops: f64,
    pub mean_response_ms: f64,
    pub p99_response_ms: f64,
    pub sim_time_s: f64,
    pub members: Vec<MemberReport>,
    // Additions.
    pub layout: String,
    pub policy: String,
    pub workload: String,
    pub seed: u64,
    pub requests: u64,
    pub bytes: u64,
    pub reads: u64,
    pub writes: u64,
    pub p50_response_ms: f64,
    pub max_response_ms: f64,
    /// Bytes / (simulated time − time with no request outstanding), the stripe-unit
    /// study's definition ([Rajaei Salmasi 2013]).
    pub busy_throughput_mbps: f64,
    /// Member operations simulated (the simulator's speed unit).
    pub member_ops: u64,
    pub energy_j: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rebuild: Option<RebuildReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub copy_back: Option<CopyBackReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scrub: Option<ScrubReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grow: Option<GrowReport>,
    /// Response times of reads and of writes apart, as fio reports them.
    pub read: DirectionStats,
    pub write: DirectionStats,
    /// The write log, when the run has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log: Option<LogReport>,
    /// Trims issued (not in requests, bytes or the response times), the
    /// bytes they named, and the array bytes whole stripes they discarded.
    pub trims: u64,
    pub trim_bytes: u64,
    pub trim_discarded_bytes: u64,
    /// Slow-member sit-out, when a member was slowed (`slow`) or sat out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sit_out: Option<SitOutReport>,
}

/// What the sit-out rule did in a run: the rule, and each sit-out.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SitOutReport {
    pub rule: hetraid_core::sitout::SitOutRule,
    pub events: Vec<SitOutEvent>,
}

/// One member sat out: when, why (its mean read latency against the
/// slowest other member's), and when it came back (None: still out at
/// the end).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SitOutEvent {
    pub member: usize,
    pub out_at_s: f64,
    pub back_at_s: Option<f64>,
    pub latency_ms: f64,
    pub reference_ms: f64,
}

/// What the simulated write log did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogReport {
    pub mode: String,
    /// HPDA: the members holding the log's copies (regions past HDD-1's
    /// parity and on HDD-2); empty when the log has devices of its own.
    pub on_members: Vec<usize>,
    /// HPDA: user writes the director sent to the log, and to the RAID4.
    pub hpda_log_writes: u64,
    pub hpda_raid4_writes: u64,
    pub ring_bytes: u64,
    /// Stripe-update records written (each to every copy), pads, checkpoints.
    pub records: u64,
    pub record_bytes: u64,
    /// Ring writes of records: write-back data records logged together
    /// (group commit) are one.
    pub record_writes: u64,
    pub pads: u64,
    pub checkpoints: u64,
    /// Write-back: bytes the reclaimer wrote to the members.
    pub reclaimed_bytes: u64,
    /// Write-back: times the idle reclaimer emptied the log (the array quiet
    /// for core `journal::RECLAIM_IDLE_NS_DEFAULT` with writes in the log).
    pub idle_reclaims: u64,
    /// One per copy, as for members.
    pub devices: Vec<MemberReport>,
}

/// Response times of one direction (reads or writes), in ms, like fio's
/// clat: mean, percentiles by nearest rank, and a histogram.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct DirectionStats {
    pub requests: u64,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
    /// Requests by response time: bucket i holds [2^(i-1), 2^i) µs (bucket
    /// 0: under 1 µs), up to the last non-empty bucket.
    pub histogram_us_log2: Vec<u64>,
}

impl DirectionStats {
    /// From response times in ns (sorted in place).
    pub fn of(v: &mut [u64]) -> Self {
        if v.is_empty() {
            return Self::default();
        }
        v.sort_unstable();
        let ms = |ns: u64| ns as f64 / 1e6;
        let rank = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
        let mut hist = vec![0u64; 64];
        for &x in v.iter() {
            let us = x / 1000;
            let b = if us == 0 {
                0
            } else {
                64 - us.leading_zeros() as usize
            };
            hist[b.min(63)] += 1;
        }
        let last = hist.iter().rposition(|&c| c > 0).unwrap_or(0);
        hist.truncate(last + 1);
        Self {
            requests: v.len() as u64,
            mean_ms: v.iter().map(|&x| x as f64).sum::<f64>() / v.len() as f64 / 1e6,
            p50_ms: ms(rank(0.5)),
            p95_ms: ms(rank(0.95)),
            p99_ms: ms(rank(0.99)),
            p999_ms: ms(rank(0.999)),
            max_ms: ms(*v.last().unwrap()),
            histogram_us_log2: hist,
        }
    }
}

/// Mean and the q-quantile (nearest rank) of response times, in ms.
pub fn summarize(v: &mut [u64]) -> (f64, f64, f64, f64) {
    if v.is_empty() {
        return (0.0, 0.0, 0.0, 0.0);
    }
    let ms = |ns: u64| ns as f64 / 1e6;
    let mean = v.iter().map(|&x| x as f64).sum::<f64>() / v.len() as f64 / 1e6;
    v.sort_unstable();
    let rank = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
    (mean, ms(rank(0.5)), ms(rank(0.99)), ms(*v.last().unwrap()))
}

/// [`summarize`] of the two lists taken together, without joining them (a
/// run keeps reads' and writes' response times apart; a joined copy was 40 MB
/// for 5M requests). Sorts both in place.
pub fn summarize_merged(a: &mut [u64], b: &mut [u64]) -> (f64, f64, f64, f64) {
    let n = a.len() + b.len();
    if n == 0 {
        return (0.0, 0.0, 0.0, 0.0);
    }
    let ms = |ns: u64| ns as f64 / 1e6;
    // Integers below 2^53 add exactly in f64, in any order: the same mean
    // as one list's.
    let mean = a.iter().chain(b.iter()).map(|&x| x as f64).sum::<f64>() / n as f64 / 1e6;
    a.sort_unstable();
    b.sort_unstable();
    // The k-th smallest (1-based) of the two sorted lists.
    let kth = |k: usize| -> u64 {
        let (mut i, mut j) = (0, 0);
        let mut last = 0;
        // Bounded by k <= n steps.
        for _ in 0..k {
            if j >= b.len() || (i < a.len() && a[i] <= b[j]) {
                last = a[i];
                i += 1;
            } else {
                last = b[j];
                j += 1;
            }
        }
        last
    };
    let rank = |q: f64| kth(((q * n as f64).ceil() as usize).clamp(1, n));
    let max = a.last().copied().max(b.last().copied()).unwrap_or(0);
    (mean, ms(rank(0.5)), ms(rank(0.99)), ms(max))
}

#[cfg(test)]
mod merged_tests {
    use super::*;

    /// Two lists summarized together give what their concatenation gives:
    /// mean, median, p99 and maximum, for empty, one-sided and mixed lists.
    #[test]
    fn summarize_merged_equals_summarize_of_the_concatenation() {
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % 10_000_000
        };
        for (na, nb) in [
            (0, 0),
            (0, 1),
            (1, 0),
            (1, 1),
            (7, 0),
            (0, 9),
            (100, 3),
            (57, 1000),
        ] {
            let mut a: Vec<u64> = (0..na).map(|_| next()).collect();
            let mut b: Vec<u64> = (0..nb).map(|_| next()).collect();
            let mut joined: Vec<u64> = a.iter().chain(b.iter()).copied().collect();
            assert_eq!(
                summarize_merged(&mut a, &mut b),
                summarize(&mut joined),
                "{na} + {nb}"
            );
        }
    }
}
