//! `loadmap`'s options (clap only): the verb is `crate::ops::loadmap`.

use crate::args::LayoutArgs;
use clap::Args;

#[derive(Debug, Args)]
pub struct LoadmapCmd {
    #[command(flatten)]
    pub layout: LayoutArgs,
    /// Write size in chunks.
    #[arg(long)]
    pub write_chunks: u64,
    /// Write selection: md, modthresh, modthresh-stripe (the threshold decided per stripe), rmw-always, cost.
    #[arg(long, default_value = "md")]
    pub policy: String,
    /// Failed members (comma-separated indices).
    #[arg(long, value_delimiter = ',')]
    pub failed: Vec<usize>,
    #[arg(long)]
    pub json: bool,
}
