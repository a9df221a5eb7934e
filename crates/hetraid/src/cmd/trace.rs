//! `hetraid trace`: write synthetic traces with published statistics, and check a
//! trace's statistics.

use clap::{Args, Subcommand};
use hetraid_sim::trace::{self, TraceFormat, PROFILES};

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

impl TraceCmd {
    pub fn run(&self) -> Result<(), String> {
        match &self.what {
            TraceWhat::Synth {
                profile,
                format,
                requests,
                seed,
            } => {
                let p = PROFILES.iter().find(|p| p.name == profile).ok_or_else(|| {
                    format!(
                        "profile '{profile}' is unknown; use {}",
                        PROFILES
                            .iter()
                            .map(|p| p.name)
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                })?;
                if *requests == 0 {
                    return Err("--requests must be at least 1".into());
                }
                let f = TraceFormat::parse(format)?;
                print!("{}", trace::synthesize(p, f, *requests, *seed));
                Ok(())
            }
            TraceWhat::Stats { file, format, json } => {
                let recs = trace::read_file(file, format.as_deref(), "--format")?;
                let s = trace::stats(&recs);
                if *json {
                    println!(
                        "{}",
                        serde_json::to_string_pretty(&s).map_err(|e| e.to_string())?
                    );
                } else {
                    println!(
                        "{file}: {} requests over {:.1} s, {:.1} % writes, mean size {:.2} KiB",
                        s.requests,
                        s.duration_s,
                        s.write_fraction * 100.0,
                        s.mean_size_kib
                    );
                }
                Ok(())
            }
        }
    }
}
