//! `advise`'s options (clap only): the verb is `crate::ops::advise`.

use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct AdviseCmd {
    /// The devices you have: presets, device files (probe's too), or real
    /// files and block devices (measured read-only first, --probe-seconds
    /// each), as for sim: 'caviar-black-640*4,x25e-64'.
    #[arg(long)]
    pub members: String,
    /// random-write (default), random-read, mixed, seq-write, seq-read;
    /// with --trace the trace is the workload.
    #[arg(long)]
    pub workload: Option<String>,
    /// Share of reads for the mixed workload.
    #[arg(long)]
    pub read_fraction: Option<f64>,
    /// Request size.
    #[arg(long, default_value = "4K", value_parser = crate::args::size)]
    pub size: u64,
    /// Outstanding requests.
    #[arg(long, default_value = "10")]
    pub qd: u32,
    /// A trace to replay (SPC, MSR, blkparse or DiskSim ASCII) instead of a
    /// synthetic workload.
    #[arg(long)]
    pub trace: Option<String>,
    /// What ranks the candidates: throughput (MB/s), p99 (response),
    /// capacity (usable bytes), energy (J per GB moved), watts, mttdl,
    /// rebuild (offline, the slowest member), cost-per-gb, cost-per-iops
    /// (the last two need every device's price). Default: throughput, or p99
    /// with --trace (a trace replayed at its own times moves the same bytes
    /// on every layout; how fast they are answered is what differs).
    #[arg(long)]
    pub objective: Option<String>,
    /// Chunk sizes to try.
    #[arg(long, value_delimiter = ',', value_parser = crate::args::size, default_value = "4K,16K,64K,256K,1M")]
    pub chunks: Vec<u64>,
    /// Member failures the array must survive: 1 or 2.
    #[arg(long, default_value = "1")]
    pub redundancy: usize,
    /// Wall-clock seconds for the simulations (candidates not reached are
    /// listed as not run). Without it there is no time limit and the advice
    /// depends on the request alone, not on this machine's speed or load.
    #[arg(long)]
    pub budget_s: Option<f64>,
    /// Simulate at most N candidates, the most promising first (by the load
    /// map); the rest are listed as not run. Deterministic, unlike --budget-s.
    #[arg(long, value_name = "N")]
    pub candidates: Option<usize>,
    /// Bytes simulated per candidate (synthetic workloads).
    #[arg(long, default_value = "32M", value_parser = crate::args::size)]
    pub total: u64,
    /// Prune, before simulating, layouts holding less than this.
    #[arg(long, value_parser = crate::args::size)]
    pub capacity_min: Option<u64>,
    /// Prune, before simulating, layouts whose MTTDL (analytic, a 24 h
    /// repair as `analyze mttdl` assumes) is below this many years.
    #[arg(long)]
    pub mttdl_min_years: Option<f64>,
    /// Seconds per measurement when a member is a real file or device.
    #[arg(long, default_value = "1")]
    pub probe_seconds: f64,
    /// Write the front as an SVG scatter: throughput against the objective
    /// (against p99 when the objective is throughput).
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// One JSON document instead of the table.
    #[arg(long)]
    pub json: bool,
}
