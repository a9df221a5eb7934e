//! `layout`'s options (clap only): the verb is `crate::ops::layout`.

use crate::args::LayoutArgs;
use clap::Args;

#[derive(Debug, Args)]
pub struct LayoutCmd {
    #[command(flatten)]
    pub layout: LayoutArgs,
    /// List at most this many stripes (0: none). Default: all with --json, 32 in tables.
    #[arg(long)]
    pub stripes: Option<u64>,
    /// One JSON document on stdout.
    #[arg(long)]
    pub json: bool,
}
