//! `sweep`'s options (clap only): the verb is `crate::ops::sweep`.

use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct SweepCmd {
    /// The sweep (see experiments/*.toml).
    pub config: String,
    /// Output directory: results.csv, runs/*.json, *.svg, summary.md.
    #[arg(long)]
    pub out: PathBuf,
    /// Override a [base] key for every run, e.g. --set total=16M (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Runs in parallel (default: the CPUs available).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}
