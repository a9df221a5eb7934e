//! `hetraid advise`: the command line of the advisor (`hetraid-advise`, a
//! library), and its renderers: the ranking as a table or one JSON
//! document, and the front as SVG.

pub use crate::cli::advise::*;
use hetraid_advise::mttdl::HOURS_PER_YEAR;
use hetraid_advise::{join, Advice, Request, LOAD_PRUNE};

impl AdviseCmd {
    /// The advisor's request (everything but how to render it).
    fn request(&self) -> Request {
        Request {
            members: self.members.clone(),
            workload: self.workload.clone(),
            read_fraction: self.read_fraction,
            size: self.size,
            qd: self.qd,
            trace: self.trace.clone(),
            objective: self.objective.clone(),
            chunks: self.chunks.clone(),
            redundancy: self.redundancy,
            budget_s: self.budget_s,
            total: self.total,
            capacity_min: self.capacity_min,
            mttdl_min_years: self.mttdl_min_years,
            probe_seconds: self.probe_seconds,
        }
    }

    pub fn run(&self) -> Result<(), String> {
        if let Some(p) = &self.svg {
            if p.is_dir() {
                return Err(format!("--svg {} is a directory; name a file", p.display()));
            }
        }
        let req = self.request();
        let advice = req.advise()?;
        if let Some(path) = &self.svg {
            std::fs::write(path, self.front_svg(&req, &advice))
                .map_err(|e| format!("--svg {}: {e}", path.display()))?;
        }
        match self.json {
            true => self.print_json(&advice),
            false => self.print_table(&req, &advice),
        }
    }

    /// The advice as one JSON document (the contract: names only added to).
    fn print_json(&self, a: &Advice) -> Result<(), String> {
        let v = serde_json::json!({
            "objective": a.objective,
            "redundancy": self.redundancy,
            "members": a.members,
            "probed": a.probed,
            "candidates": a.candidates,
            "pruned": a.pruned,
            "distinct": a.ranked.len(),
            "simulated": a.simulated,
            "pareto_over": a.pareto_over,
            "seconds": a.seconds,
            "ranked": a.ranked,
            "winner": a.ranked[0],
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?
        );
        Ok(())
    }

    /// The ranking as a table (the text renderer; `--json` prints the rows).
    fn print_table(&self, req: &Request, a: &Advice) -> Result<(), String> {
        let Advice {
            candidates: total,
            objective,
            objective_what,
            simulated,
            seconds: secs,
            ref pruned,
            pareto_over: ref front_dims,
            ref given,
            ranked: ref rows,
            ..
        } = *a;
        let workload = match &self.trace {
            Some(t) => format!("trace {t}, replayed at its times"),
            None => format!(
                "{} {}, QD {}",
                req.workload()?,
                hetraid_core::units::format_size(self.size),
                self.qd
            ),
        };
        println!(
            "{total} candidates for {} ({workload}), redundancy {}, by {} ({objective_what}): {simulated} simulated in {secs:.1} s, {} distinct results; pareto over {}",
            self.members,
            self.redundancy,
            objective,
            rows.len(),
            front_dims.join(", ")
        );
        println!(
            "pruned before simulating: {} that do not fit or survive fewer failures, {} by --capacity-min, {} by --mttdl-min-years, {} by the load map (busiest member over {LOAD_PRUNE}x the best's per write)",
            pruned.fit, pruned.capacity, pruned.mttdl, pruned.load_map
        );
        let money = rows.iter().any(|r| r.usd_per_gb.is_some());
        println!(
            "{:>4} {:<15} {:<17} {:>5} {:>8} {:>7} {:>7} {:>6} {:>6} {:>8} {:>9}{}  pareto  notes",
            "rank",
            "layout",
            "policy",
            "chunk",
            "MB/s",
            "p99 ms",
            "GB",
            "J/GB",
            "W",
            "rebuild",
            "MTTDL y",
            if money { "     $/GB   $/IOPS" } else { "" }
        );
        for (i, r) in rows.iter().enumerate().take(20) {
            let mut notes = Vec::new();
            if let Some(w) = &r.weights {
                notes.push(format!("weights {}", join(w)));
            }
            if let (Some(m), Some(s)) = (r.model_gain, r.simulated_gain) {
                notes.push(format!("RAID5 x{m:.2} by the model, x{s:.2} simulated"));
            }
            if r.members != *given {
                notes.push(format!("members {}", r.members));
            }
            if !r.equivalent.is_empty() {
                notes.push(format!("= {}", r.equivalent.join(" ")));
            }
            let f = |v: Option<f64>, d: usize| v.map_or("-".into(), |v| format!("{v:.d$}"));
            println!(
                "{:>4} {:<15} {:<17} {:>5} {:>8} {:>7} {:>7} {:>6} {:>6} {:>8} {:>9}{}  {:<6}  {}",
                i + 1,
                r.name(),
                r.policy,
                hetraid_core::units::format_size(r.chunk),
                f(r.throughput_mbps, 2),
                f(r.p99_ms, 1),
                format!("{:.1}", r.capacity_bytes as f64 / 1e9),
                f(r.energy_j_per_gb, 0),
                f(r.watts, 1),
                r.rebuild_s
                    .map_or("-".into(), |s| format!("{:.1} h", s / 3600.0)),
                r.mttdl_h
                    .map_or("-".into(), |h| format!("{:.3e}", h / HOURS_PER_YEAR)),
                if money {
                    format!(" {:>8} {:>8}", f(r.usd_per_gb, 3), f(r.usd_per_iops, 3))
                } else {
                    String::new()
                },
                if r.pareto { "*" } else { "" },
                notes.join("; ")
            );
        }
        if rows.len() > 20 {
            println!("  ... {} more (--json lists every one)", rows.len() - 20);
        }
        if let Some(p) = &self.svg {
            println!("front: {}", p.display());
        }
        println!("build the winner: {}", rows[0].create);
        Ok(())
    }

    /// The candidates as a scatter: throughput (x) against the objective
    /// (p99 when the objective is throughput), the front marked.
    fn front_svg(&self, req: &Request, a: &Advice) -> String {
        let rows = &a.ranked;
        let y_name = match req.objective() {
            "throughput" => "p99",
            o => o,
        };
        let (scale, unit) = match y_name {
            "capacity" => (1e-9, "GB"),
            "mttdl" => (1.0 / HOURS_PER_YEAR, "years"),
            "rebuild" => (1.0 / 3600.0, "h"),
            "p99" => (1.0, "ms"),
            "energy" => (1.0, "J/GB"),
            "watts" => (1.0, "W"),
            "cost-per-gb" => (1.0, "$/GB"),
            _ => (1.0, "$/IOPS"),
        };
        let points: Vec<hetraid_sim::plot::ScatterPoint> = rows
            .iter()
            .filter_map(|r| {
                Some(hetraid_sim::plot::ScatterPoint {
                    label: format!(
                        "{} {} {}",
                        r.name(),
                        r.policy,
                        hetraid_core::units::format_size(r.chunk)
                    ),
                    x: r.throughput_mbps?,
                    y: r.metric(y_name)? * scale,
                    marked: r.pareto,
                })
            })
            .collect();
        hetraid_sim::plot::scatter_chart(
            &format!(
                "hetraid advise: {} ({} candidates, Pareto front in colour)",
                self.members,
                points.len()
            ),
            "throughput (MB/s)",
            &format!("{y_name} ({unit})"),
            &points,
        )
    }
}
