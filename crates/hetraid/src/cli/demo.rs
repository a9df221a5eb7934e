//! `demo`'s options (clap only): the verb is `crate::ops::demo`.

use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct DemoCmd {
    /// Directory for the member files (default: a new temporary directory, removed after).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Size of each member file.
    #[arg(long, default_value = "48M", value_parser = crate::args::size)]
    pub size: u64,
    /// Run at file speed instead of emulating disk and SSD service times.
    #[arg(long)]
    pub no_emulation: bool,
    /// Seed of the data written.
    #[arg(long, default_value_t = 2026)]
    pub seed: u64,
}
