//! `sim`'s options (clap only): the verb is `crate::ops::sim`.

use clap::Args;
use hetraid_sim::Size;

#[derive(Debug, Args)]
pub struct SimCmd {
    /// A run config (TOML; keys are the flag names with '_' for '-').
    pub config: Option<String>,
    /// Layout (as `hetraid create`), e.g. raid5, raid4s, raidh, s2raid5.
    #[arg(long)]
    pub layout: Option<String>,
    /// Devices in member order: preset names or .toml files, `*n` repeats
    /// (e.g. caviar-black-640*4,x25e-64).
    #[arg(long)]
    pub members: Option<String>,
    /// Chunk (stripe unit), a multiple of 4K (default 64K).
    #[arg(long)]
    pub chunk: Option<Size>,
    /// md, modthresh, modthresh-stripe (the threshold decided per stripe), rmw-always, cost.
    #[arg(long)]
    pub policy: Option<String>,
    /// random-write, random-read, seq-write, seq-read, mixed, trace.
    #[arg(long)]
    pub workload: Option<String>,
    /// Share of reads for the mixed workload (0 to 1).
    #[arg(long)]
    pub read_fraction: Option<f64>,
    /// Request size.
    #[arg(long)]
    pub size: Option<Size>,
    /// Random offsets are multiples of this (default 4K).
    #[arg(long)]
    pub align: Option<Size>,
    /// Random offsets are multiples of the request size (fio's default).
    #[arg(long)]
    pub align_to_size: bool,
    /// Outstanding requests.
    #[arg(long)]
    pub qd: Option<u32>,
    /// Bytes to issue (default 256M).
    #[arg(long)]
    pub total: Option<Size>,
    /// Or: issue for this much simulated time (seconds, or 500ms, 10s, 2m, 1h).
    #[arg(long, value_parser = hetraid_sim::config::parse_duration_s)]
    pub duration: Option<f64>,
    /// Address only the first SPAN bytes of the array.
    #[arg(long)]
    pub span: Option<Size>,
    /// Use only this many bytes of each member.
    #[arg(long)]
    pub member_size: Option<Size>,
    /// Trace file for the trace workload.
    #[arg(long)]
    pub trace: Option<String>,
    /// spc, msr, blkparse, disksim (default: from the file name, else its first record).
    #[arg(long)]
    pub trace_format: Option<String>,
    /// timed (recorded arrival times) or afap (as fast as possible at --qd).
    #[arg(long)]
    pub replay: Option<String>,
    /// Multiply recorded inter-arrival times by this.
    #[arg(long)]
    pub time_scale: Option<f64>,
    /// Replay at most N trace records.
    #[arg(long, value_name = "N")]
    pub trace_limit: Option<usize>,
    /// Replay the trace N times back to back (fio's loops).
    #[arg(long, value_name = "N")]
    pub trace_loops: Option<u32>,
    /// Members failed from the start (e.g. 2, or 1,3 for RAID6); --rebuild replaces
    /// the first.
    #[arg(long)]
    pub failed: Option<hetraid_sim::config::FailedSet>,
    /// Replace the failed member at time 0 and rebuild it under the load.
    #[arg(long)]
    pub rebuild: bool,
    /// Scrub the whole array under the load (every stripe read and checked,
    /// paced by --min-speed/--max-speed as hetraid scrub is).
    #[arg(long)]
    pub scrub: bool,
    /// Grow the array under the load: the last member is the one added and
    /// the data is restriped onto all (raid5, raid6; paced by --min-speed/
    /// --max-speed as a served hetraid grow --add).
    #[arg(long)]
    pub grow: bool,
    /// Reclaim a write-back log (or HPDA's) once the array has been quiet
    /// this many seconds, as hetraid serve --reclaim-idle.
    #[arg(long, value_name = "SECONDS")]
    pub reclaim_idle: Option<f64>,
    /// Rebuild into spare space on the other members (s2raid5 or s2raid10 with
    /// --spare-partitions 1).
    #[arg(long)]
    pub to_spare: bool,
    /// After the rebuild into spare space, copy the member back onto a
    /// fresh device in its slot (declustered; hetraid rebalance).
    #[arg(long)]
    pub copy_back: bool,
    /// MD speed_limit_min / speed_limit_max (bytes per second, e.g. 1M, 200M).
    #[arg(long)]
    pub min_speed: Option<Size>,
    #[arg(long)]
    pub max_speed: Option<Size>,
    /// What the speed limits hold during a rebuild: array (the whole rebuild,
    /// as MD on one device; default) or stream (each parallel stream, as one
    /// md device per S2-RAID subRAID).
    #[arg(long, value_name = "SCOPE")]
    pub pace: Option<String>,
    #[arg(long)]
    pub seed: Option<u64>,
    /// Parity arithmetic rate in MB/s (0 = free).
    #[arg(long)]
    pub xor_mbps: Option<f64>,
    /// Disk queue scheduler for every HDD: fifo, sstf, clook, sptf.
    #[arg(long)]
    pub scheduler: Option<String>,
    /// Commands every HDD's scheduler chooses among (its tagged queue; the
    /// others wait in order). Default: the preset's, else all.
    #[arg(long, value_name = "N")]
    pub disk_queue: Option<u32>,
    /// Turn every HDD's write-back cache on or off.
    #[arg(long)]
    pub write_cache: Option<bool>,
    /// Fill every SSD once before the run (steady state).
    #[arg(long)]
    pub precondition: bool,
    /// Layouts with copies: how reads choose one: first, md (default),
    /// raidx1, raidx2, raidx3, raidx4.
    #[arg(long)]
    pub read_policy: Option<String>,
    /// A write buffer of SIZE in front of the members: writes are
    /// acknowledged once buffered and drained meanwhile.
    #[arg(long, value_name = "SIZE")]
    pub write_buffer: Option<Size>,
    /// Random request sizes from --size to SIZE (512-byte steps).
    #[arg(long, value_name = "SIZE")]
    pub size_max: Option<Size>,
    /// Closed-loop workloads: this share of requests (0 to below 1) are
    /// trims of --trim-size at random places (fio's trim mix); whole stripes
    /// they cover are discarded on the members.
    #[arg(long, value_name = "F")]
    pub trim_fraction: Option<f64>,
    /// The size of each trim (default: --size).
    #[arg(long, value_name = "SIZE")]
    pub trim_size: Option<Size>,
    /// A write log on its own device(s), e.g. x25e-64 or x25e-64*2 (mirrored).
    #[arg(long)]
    pub log: Option<String>,
    /// How the log is used: journal.
    #[arg(long)]
    pub log_mode: Option<String>,
    /// Size of each log device (default 64M).
    #[arg(long)]
    pub log_size: Option<Size>,
    /// Members slow for reads, as a failing disk is: 2:10 makes member 2's
    /// reads take 10 times as long (several comma-separated).
    #[arg(long, value_name = "MEMBER:FACTOR")]
    pub slow: Option<String>,
    /// Slow-member sit-out: reads leave out a member whose reads are
    /// outliers and rebuild its chunks from the others (default true).
    #[arg(long, value_name = "BOOL")]
    pub sit_out: Option<bool>,
    #[command(flatten)]
    pub params: crate::args::LayoutParamArgs,
    /// One JSON document on stdout (the contract shape, plus additions).
    #[arg(long)]
    pub json: bool,
}
