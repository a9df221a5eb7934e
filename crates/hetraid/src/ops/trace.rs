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
                let report = crate::render::trace::TraceStatsReport {
                    stats: trace::stats(&recs),
                    file: file.clone(),
                };
                crate::render::emit_in_order(&report, *json)
            }
        }
    }
}
