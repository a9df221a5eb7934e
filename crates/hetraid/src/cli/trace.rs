//! `trace`'s options (clap only): the verb is `crate::ops::trace`.

use clap::{Args, Subcommand};

#[derive(Debug, Args)]
pub struct TraceCmd {
    #[command(subcommand)]
    pub what: TraceWhat,
}

#[derive(Debug, Subcommand)]
pub enum TraceWhat {
    /// Print a synthetic trace following a published profile (financial1,
    /// financial2, websearch) to standard output.
    Synth {
        #[arg(long)]
        profile: String,
        /// spc, msr, blkparse, disksim.
        #[arg(long, default_value = "spc")]
        format: String,
        #[arg(long, default_value_t = 10_000)]
        requests: usize,
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Read a trace and print its statistics (requests, write fraction, mean size).
    Stats {
        file: String,
        /// spc, msr, blkparse, disksim (default: from the file name, else its first record).
        #[arg(long)]
        format: Option<String>,
        #[arg(long)]
        json: bool,
    },
}
