//! `hetraid sim`: one simulated run, from a TOML config, flags, or both (flags win).

pub use crate::cli::sim::*;
use hetraid_sim::RunConfig;

/// A report with where it came from (`sim --json`'s object).
#[derive(serde::Serialize)]
pub struct Provenanced<'a, R: serde::Serialize> {
    #[serde(flatten)]
    pub report: &'a R,
    pub provenance: RunProvenance<'a>,
}

/// The build and the whole configuration a run used.
#[derive(serde::Serialize)]
pub struct RunProvenance<'a> {
    #[serde(flatten)]
    pub build: hetraid_sim::Provenance,
    pub config: &'a RunConfig,
}

impl SimCmd {
    pub fn config(&self) -> Result<RunConfig, String> {
        let mut c = match &self.config {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("cannot read {path}: {e}"))?;
                RunConfig::parse(&text, path)?
            }
            None => {
                let layout = self
                    .layout
                    .as_deref()
                    .ok_or("give a CONFIG.toml or --layout L --members SPEC")?;
                let members = self
                    .members
                    .as_deref()
                    .ok_or("give --members, e.g. caviar-black-640*4,x25e-64")?;
                RunConfig::new(layout, members)
            }
        };
        macro_rules! set {
            ($($f:ident => $t:ident),* $(,)?) => {$(
                if let Some(v) = &self.$f { c.$t = v.clone().into(); }
            )*};
        }
        set!(layout => layout, members => members, chunk => chunk, policy => policy,
             workload => workload, size => size, qd => qd, replay => replay,
             time_scale => time_scale, min_speed => min_speed, max_speed => max_speed,
             seed => seed, xor_mbps => xor_mbps);
        macro_rules! opt {
            ($($f:ident => $t:ident),* $(,)?) => {$(
                if self.$f.is_some() { c.$t = self.$f.clone(); }
            )*};
        }
        opt!(read_fraction => read_fraction, align => align, total => total,
             duration => duration_s, span => span, member_size => member_size, trace => trace,
             trace_format => trace_format, failed => failed, scheduler => scheduler,
             disk_queue => disk_queue,
             write_cache => write_cache, log => log, log_mode => log_mode, log_size => log_size,
             read_policy => read_policy, write_buffer => write_buffer, size_max => size_max,
             trim_fraction => trim_fraction, trim_size => trim_size,
             trace_limit => trace_limit, trace_loops => trace_loops, pace => pace,
             reclaim_idle => reclaim_idle, slow => slow);
        if self.sit_out.is_some() {
            c.sit_out = self.sit_out;
        }
        self.params.apply_to(&mut c);
        c.rebuild |= self.rebuild;
        c.scrub |= self.scrub;
        c.grow |= self.grow;
        c.to_spare |= self.to_spare;
        c.copy_back |= self.copy_back;
        c.align_to_size |= self.align_to_size;
        c.precondition |= self.precondition;
        Ok(c)
    }

    pub fn run(&self) -> Result<(), String> {
        let cfg = self.config()?;
        if cfg.weights == Some(hetraid_sim::config::Weights::Auto) {
            let plan = hetraid_sim::setup::auto_weights(&cfg)?;
            eprintln!(
                "hetraid: weights auto: {} for this workload",
                plan.summary()
            );
        }
        let r = hetraid_sim::run(&cfg)?;
        match self.json {
            // The report's own field order (the JSON contract's).
            true => {
                // The report's fields in their order, then where it came
                // from: the build and the whole configuration the run used.
                let v = Provenanced {
                    report: &r,
                    provenance: RunProvenance {
                        build: hetraid_sim::provenance(),
                        config: &cfg,
                    },
                };
                println!(
                    "{}",
                    serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?
                );
                Ok(())
            }
            false => {
                print!("{}", crate::render::sim::sim_text(&cfg, &r));
                Ok(())
            }
        }
    }
}
