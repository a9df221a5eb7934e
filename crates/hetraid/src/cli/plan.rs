//! `plan`'s options (clap only): the verb is `crate::ops::plan`.

use crate::args::LayoutArgs;
use clap::Args;

#[derive(Debug, Args)]
pub struct PlanCmd {
    #[command(flatten)]
    pub layout: LayoutArgs,
    /// Write selection: md, modthresh, modthresh-stripe (the threshold decided per stripe), rmw-always, cost.
    #[arg(long, default_value = "md")]
    pub policy: String,
    /// Failed members (comma-separated indices).
    #[arg(long, value_delimiter = ',')]
    pub failed: Vec<usize>,
    /// Plan a write of OFFSET+LENGTH (e.g. 0+128K).
    #[arg(long, conflicts_with = "read", required_unless_present = "read")]
    pub write: Option<String>,
    /// Plan a read of OFFSET+LENGTH.
    #[arg(long)]
    pub read: Option<String>,
    #[arg(long)]
    pub json: bool,
}
