//! The advisor's report (`hetraid-advise`'s `Advice`): the ranking as a
//! table, as one JSON document (the contract: names only added to), and the
//! Pareto front as SVG.

use super::say;
use hetraid_advise::mttdl::HOURS_PER_YEAR;
use hetraid_advise::{join, Advice, Request, LOAD_PRUNE};
use std::path::Path;

/// The advice as one JSON document (the contract: names only added to).
pub fn advice_json(req: &Request, a: &Advice) -> serde_json::Value {
    let v = serde_json::json!({
        "objective": a.objective,
        "redundancy": req.redundancy,
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
        "budget_s": req.budget_s,
        "candidates_max": req.candidates_max,
        "provenance": hetraid_sim::provenance(),
    });
    v
}

/// The ranking as a table (the text renderer; `--json` prints the rows).
pub fn advice_text(req: &Request, a: &Advice, svg: Option<&Path>) -> Result<String, String> {
    let mut out = String::new();
    let out = &mut out;
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
    let workload = match &req.trace {
        Some(t) => format!("trace {t}, replayed at its times"),
        None => format!(
            "{} {}, QD {}",
            req.workload()?,
            hetraid_core::units::format_size(req.size),
            req.qd
        ),
    };
    say!(out,
        "{total} candidates for {} ({workload}), redundancy {}, by {} ({objective_what}): {simulated} simulated in {secs:.1} s, {} distinct results; pareto over {}",
        req.members,
        req.redundancy,
        objective,
        rows.len(),
        front_dims.join(", ")
    );
    say!(out,
        "pruned before simulating: {} that do not fit or survive fewer failures, {} by --capacity-min, {} by --mttdl-min-years, {} by the load map (busiest member over {LOAD_PRUNE}x the best's per write)",
        pruned.fit, pruned.capacity, pruned.mttdl, pruned.load_map
    );
    let budget = match (req.budget_s, req.candidates_max) {
        (None, None) => {
            "no time limit: the same request gives the same advice on any machine".to_string()
        }
        (None, Some(n)) => {
            format!("at most {n} candidates simulated (--candidates): deterministic")
        }
        (Some(s), _) => format!(
            "--budget-s {s}: how many are simulated depends on this machine's speed and load"
        ),
    };
    say!(out, "budget: {budget}");
    let money = rows.iter().any(|r| r.usd_per_gb.is_some());
    say!(
        out,
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
        say!(
            out,
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
        say!(
            out,
            "  ... {} more (--json lists every one)",
            rows.len() - 20
        );
    }
    if let Some(p) = svg {
        say!(out, "front: {}", p.display());
    }
    say!(out, "build the winner: {}", rows[0].create);
    say!(out, "{}", hetraid_sim::provenance());
    Ok(std::mem::take(out))
}

/// The candidates as a scatter: throughput (x) against the objective
/// (p99 when the objective is throughput), the front marked.
pub fn front_svg(req: &Request, a: &Advice) -> String {
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
            req.members,
            points.len()
        ),
        "throughput (MB/s)",
        &format!("{y_name} ({unit})"),
        &points,
    )
}
