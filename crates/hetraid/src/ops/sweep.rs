//! `hetraid sweep`: a grid of simulations from a TOML file, written to a directory.

pub use crate::cli::sweep::*;
use hetraid_sim::sweep::{run_points, write_outputs, SweepConfig};
use indicatif::{ProgressBar, ProgressStyle};

impl SweepCmd {
    pub fn run(&self) -> Result<(), String> {
        let text = std::fs::read_to_string(&self.config)
            .map_err(|e| format!("cannot read {}: {e}", self.config))?;
        let mut cfg = SweepConfig::parse(&text, &self.config)?;
        for s in &self.set {
            let (k, v) = s
                .split_once('=')
                .ok_or_else(|| format!("--set '{s}' is not KEY=VALUE"))?;
            // A TOML value if it parses as one (numbers, booleans), else a string.
            let value = toml::from_str::<toml::Table>(&format!("v = {v}"))
                .ok()
                .and_then(|mut t| t.remove("v"))
                .unwrap_or_else(|| toml::Value::String(v.to_string()));
            cfg.set(k.trim(), value);
        }
        for (k, old, new) in &cfg.departures {
            let was = old
                .as_ref()
                .map_or("the default".to_string(), |v| v.to_string());
            eprintln!("hetraid: this run departs from {}: {k} = {new} (the file: {was}); summary.md says so", self.config);
        }
        let points = cfg.points()?;
        let bar = if self.quiet {
            ProgressBar::hidden()
        } else {
            ProgressBar::new(points.len() as u64)
        };
        bar.set_style(
            ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} runs, {elapsed} elapsed")
                .unwrap()
                .progress_chars("=> "),
        );
        bar.set_message(cfg.title.clone());
        let jobs = self
            .jobs
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        let t0 = std::time::Instant::now();
        let out = run_points(points, jobs, &|| bar.inc(1))?;
        bar.finish_and_clear();
        let heads = write_outputs(&cfg, &out, &self.out)?;
        println!(
            "{}: {} runs in {:.1} s -> {}",
            cfg.title,
            out.len(),
            t0.elapsed().as_secs_f64(),
            self.out.display()
        );
        for h in heads {
            println!(
                "  {}: ours {:.2} ({}), published {}",
                h.what, h.ours, h.at, h.published
            );
        }
        Ok(())
    }
}
