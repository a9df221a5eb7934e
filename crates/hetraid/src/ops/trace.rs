//! `hetraid trace`: write synthetic traces with published statistics, and check a
//! trace's statistics.

pub use crate::cli::trace::*;
use hetraid_sim::trace::{self, TraceFormat, PROFILES};

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
