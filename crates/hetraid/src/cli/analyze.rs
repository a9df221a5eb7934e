//! `analyze`'s options (clap only): the verb is `crate::ops::analyze`.

use clap::{Args, Subcommand};
use hetraid_sim::Size;

#[derive(Debug, Args)]
pub struct AnalyzeCmd {
    #[command(subcommand)]
    pub what: Analysis,
}

#[derive(Debug, Subcommand)]
pub enum Analysis {
    /// Mean time to data loss (continuous-time Markov chain over the failure sets
    /// the layout survives).
    Mttdl(MttdlCmd),
    /// Price, $/GB usable and $/IOPS (IOPS from two short simulator runs).
    Cost(CostCmd),
    /// Idle and active watts, W/TB, and energy per operation (simulator runs).
    Power(PowerCmd),
    /// RAIDH's small-random-write model: one device faster by an extra factor F.
    RaidhModel(RaidhModelCmd),
}

/// The configuration analysed: a layout on preset devices.
#[derive(Debug, Args)]
pub struct ArrayArgs {
    /// Layout (as `hetraid create`), e.g. raid5, raid4s, raidh, s2raid5.
    #[arg(long)]
    pub layout: String,
    /// Devices in member order: preset names or .toml files, `*n` repeats
    /// (e.g. caviar-black-640*4,x25e-64).
    #[arg(long)]
    pub members: String,
    /// Chunk (stripe unit), a multiple of 4K.
    #[arg(long, default_value = "64K")]
    pub chunk: Size,
    /// Use only this many bytes of each member (default: the whole device).
    #[arg(long)]
    pub member_size: Option<Size>,
    #[command(flatten)]
    pub params: crate::args::LayoutParamArgs,
    /// One JSON document on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct MttdlCmd {
    #[command(flatten)]
    pub array: ArrayArgs,
    /// Mean time between failures of an HDD, hours ([Mao 2010]: λ = 1/50,000 h).
    #[arg(long, default_value_t = 50_000.0)]
    pub hdd_mtbf_h: f64,
    /// Mean time between failures of an SSD, hours ([Mao 2010]: φ = 1/200,000 h).
    #[arg(long, default_value_t = 200_000.0)]
    pub ssd_mtbf_h: f64,
    /// Mean time between failures of an NVRAM device, hours (default: as an SSD).
    #[arg(long)]
    pub nvram_mtbf_h: Option<f64>,
    /// Failure-rate factor for SSDs that hold parity ([Mao 2010]: doubled by parity
    /// wear); 1 turns it off.
    #[arg(long, default_value_t = 2.0)]
    pub ssd_parity_wear: f64,
    /// Mean time to repair one member (replacement and rebuild), hours; μ = 1/MTTR.
    #[arg(long, default_value_t = 24.0)]
    pub mttr_h: f64,
    /// Take each member's repair time from the simulator instead: --replace-h plus
    /// the simulated offline rebuild of that member (into spare space when the
    /// layout has some), at MD's default speed limits. Whole members are
    /// simulated: about a minute for nine 640 GB disks on two cores.
    #[arg(long)]
    pub mttr_from_sim: bool,
    /// With --mttr-from-sim: hours before the rebuild starts (getting a
    /// replacement in; 0 for a hot spare or spare space).
    #[arg(long, default_value_t = 0.0)]
    pub replace_h: f64,
}

/// The workload behind the per-IOPS and per-operation numbers.
#[derive(Debug, Args)]
pub struct MeasureArgs {
    /// Request size of the random read and random write runs.
    #[arg(long, default_value = "4K")]
    pub size: Size,
    /// Outstanding requests.
    #[arg(long, default_value_t = 16)]
    pub qd: u32,
    /// Bytes issued by each run.
    #[arg(long, default_value = "16M")]
    pub total: Size,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

#[derive(Debug, Args)]
pub struct CostCmd {
    #[command(flatten)]
    pub array: ArrayArgs,
    /// Prices for presets without one: NAME=USD, comma-separated
    /// (e.g. caviar-black-640=89.99).
    #[arg(long, value_delimiter = ',')]
    pub price: Vec<String>,
    #[command(flatten)]
    pub measure: MeasureArgs,
}

#[derive(Debug, Args)]
pub struct PowerCmd {
    #[command(flatten)]
    pub array: ArrayArgs,
    #[command(flatten)]
    pub measure: MeasureArgs,
}

#[derive(Debug, Args)]
pub struct RaidhModelCmd {
    /// Devices in the array (N).
    #[arg(long)]
    pub devices: usize,
    /// Extra speed factor of the one faster device (its speed is 1 + F).
    #[arg(long)]
    pub faster: f64,
    #[arg(long)]
    pub json: bool,
}
