//! What a sweep writes: `results.csv`, `runs/*.json`, the plots and
//! `summary.md`.

use super::*;

/// Write `results.csv`, `runs/*.json`, the plots and `summary.md` into `dir`.
pub fn write_outputs(
    c: &SweepConfig,
    out: &[Outcome],
    dir: &Path,
) -> Result<Vec<HeadlineResult>, String> {
    check_metrics(c, out)?;
    write_results(c, out, dir)?;
    // One line chart per grid combination, and load bars.
    let combos: Vec<Vec<(String, Value)>> = {
        let mut v: Vec<Vec<(String, Value)>> = Vec::new();
        for o in out {
            if !v.contains(&o.point.grid) {
                v.push(o.point.grid.clone());
            }
        }
        v
    };
    let plots = write_plots(c, out, dir, &combos)?;
    write_summary(c, out, dir, &combos, &plots)
}

/// The series' names, in the file's order.
pub(super) fn series_names(c: &SweepConfig) -> Vec<String> {
    c.series
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_string())
        .collect()
}

/// A metric no run reports is a typo, not an empty plot: refused before
/// anything is written.
pub(super) fn check_metrics(c: &SweepConfig, out: &[Outcome]) -> Result<(), String> {
    let names =
        std::iter::once(&c.metric).chain(c.headline.iter().filter_map(|h| h.metric.as_ref()));
    for name in names {
        if !out.iter().any(|o| metric(&o.report, name).is_some()) {
            let fields: Vec<String> = out
                .first()
                .and_then(|o| serde_json::to_value(&o.report).ok())
                .and_then(|v| v.as_object().cloned())
                .map(|m| {
                    m.iter()
                        .filter(|(_, v)| v.is_number())
                        .map(|(k, _)| k.clone())
                        .collect()
                })
                .unwrap_or_default();
            return Err(format!(
                "metric '{name}' is not in the runs' reports; use one of {}, mN_FIELD for member N, a dotted path (read.p99_ms), or A / B",
                fields.join(", ")
            ));
        }
    }
    Ok(())
}

/// `results.csv` (every run, per-member counters) and `runs/*.json`.
pub(super) fn write_results(c: &SweepConfig, out: &[Outcome], dir: &Path) -> Result<(), String> {
    let err = |e: std::io::Error| format!("cannot write into {}: {e}", dir.display());
    std::fs::create_dir_all(dir.join("runs")).map_err(err)?;
    // CSV.
    let grid_keys: Vec<&String> = c.grid.keys().collect();
    let members = out
        .iter()
        .map(|o| o.report.members.len())
        .max()
        .unwrap_or(0);
    let mut csv = String::new();
    let _ = write!(csv, "series,{}", c.x);
    for k in &grid_keys {
        let _ = write!(csv, ",{k}");
    }
    csv.push_str(",throughput_mbps,iops,mean_response_ms,p99_response_ms,sim_time_s,busy_throughput_mbps,requests,energy_j,rebuild_time_s,rebuild_mbps");
    for m in 0..members {
        let _ = write!(
            csv,
            ",m{m}_reads,m{m}_writes,m{m}_read_pages,m{m}_write_pages,m{m}_erases,m{m}_utilization"
        );
    }
    csv.push('\n');
    for (i, o) in out.iter().enumerate() {
        let r = &o.report;
        let _ = write!(csv, "{},{}", o.point.series, value_label(&o.point.x));
        for (_, v) in &o.point.grid {
            let _ = write!(csv, ",{}", value_label(v));
        }
        let _ = write!(
            csv,
            ",{:.4},{:.2},{:.4},{:.4},{:.6},{:.4},{},{:.3}",
            r.throughput_mbps,
            r.iops,
            r.mean_response_ms,
            r.p99_response_ms,
            r.sim_time_s,
            r.busy_throughput_mbps,
            r.requests,
            r.energy_j
        );
        match &r.rebuild {
            Some(rb) => {
                let _ = write!(csv, ",{:.4},{:.3}", rb.rebuild_time_s, rb.rebuild_mbps);
            }
            None => csv.push_str(",,"),
        }
        for m in &r.members {
            let _ = write!(
                csv,
                ",{},{},{},{},{},{:.4}",
                m.reads, m.writes, m.read_pages, m.write_pages, m.erases, m.utilization
            );
        }
        // Runs with fewer members than the widest leave its columns empty:
        // every row has the header's columns.
        for _ in r.members.len()..members {
            csv.push_str(",,,,,,");
        }
        csv.push('\n');
        let run = serde_json::json!({
            "series": o.point.series,
            "x": value_label(&o.point.x),
            "grid": o.point.grid.iter().map(|(k, v)| (k.clone(), value_label(v))).collect::<std::collections::BTreeMap<_, _>>(),
            "config": o.point.config,
            "result": r,
            "provenance": crate::provenance(),
        });
        std::fs::write(
            dir.join("runs").join(format!("{i:04}.json")),
            serde_json::to_string_pretty(&run).unwrap(),
        )
        .map_err(err)?;
    }
    std::fs::write(dir.join("results.csv"), csv).map_err(err)?;
    Ok(())
}

/// The plots: per grid combination, the metric by x per series, and load
/// bars. Returns the files written.
pub(super) fn write_plots(
    c: &SweepConfig,
    out: &[Outcome],
    dir: &Path,
    combos: &[Vec<(String, Value)>],
) -> Result<Vec<String>, String> {
    let err = |e: std::io::Error| format!("cannot write into {}: {e}", dir.display());
    let series = series_names(c);
    let mut plots = Vec::new();
    for (gi, g) in combos.iter().enumerate() {
        let suffix = if combos.len() > 1 {
            format!("-{gi}")
        } else {
            String::new()
        };
        let lines: Vec<(String, Vec<Option<f64>>)> = series
            .iter()
            .map(|s| {
                let ys = c
                    .x_values
                    .iter()
                    .map(|x| {
                        out.iter()
                            .find(|o| &o.point.series == s && &o.point.x == x && &o.point.grid == g)
                            .and_then(|o| metric(&o.report, &c.metric))
                    })
                    .collect();
                (s.clone(), ys)
            })
            .collect();
        let labels: Vec<String> = match &c.x_labels {
            Some(l) => l.clone(),
            None => c.x_values.iter().map(value_label).collect(),
        };
        let chart = if c.categorical() {
            crate::plot::category_chart
        } else {
            crate::plot::line_chart
        };
        let title = if g.is_empty() {
            c.title.clone()
        } else {
            format!("{} ({})", c.title, grid_label(g))
        };
        let name = format!("{}{suffix}.svg", c.metric);
        std::fs::write(
            dir.join(&name),
            chart(
                &title,
                &crate::plot::readable(&c.x),
                &crate::plot::readable(&c.metric),
                &labels,
                &lines,
                c.log_y,
            ),
        )
        .map_err(err)?;
        plots.push(name);
        // Where a headline is a ratio against a baseline series, the same
        // plot normalized to that series (the thesis's figures are
        // normalized to RAID5).
        let baseline = c
            .headline
            .iter()
            .filter(|h| h.metric.as_ref().is_none_or(|m| *m == c.metric))
            .find_map(|h| h.denominator.clone())
            .filter(|d| series.contains(d));
        if let Some(base) = baseline {
            let bi = series.iter().position(|s| *s == base).unwrap_or(0);
            let norm: Vec<(String, Vec<Option<f64>>)> = lines
                .iter()
                .map(|(n, ys)| {
                    let v = ys
                        .iter()
                        .zip(&lines[bi].1)
                        .map(|(y, b)| match (y, b) {
                            (Some(y), Some(b)) if *b != 0.0 => Some(y / b),
                            _ => None,
                        })
                        .collect();
                    (n.clone(), v)
                })
                .collect();
            let name = format!("{}-vs-{}{suffix}.svg", c.metric, slug(&base));
            std::fs::write(
                dir.join(&name),
                chart(
                    &format!("{title}, relative to {base}"),
                    &crate::plot::readable(&c.x),
                    &format!("{} / {base}'s", crate::plot::readable(&c.metric)),
                    &labels,
                    &norm,
                    // Ratios spanning more than a decade read better on a log axis.
                    {
                        let v: Vec<f64> = norm
                            .iter()
                            .flat_map(|l| l.1.iter().flatten().copied())
                            .filter(|v| *v > 0.0)
                            .collect();
                        let (lo, hi) = v
                            .iter()
                            .fold((f64::MAX, 0f64), |(a, b), &x| (a.min(x), b.max(x)));
                        hi / lo.max(1e-12) > 10.0
                    },
                ),
            )
            .map_err(err)?;
            plots.push(name);
        }
        plots.push(load_bars(c, out, dir, g, &suffix)?);
    }
    Ok(plots)
}

/// The load bars of grid combination `g`: each series' member utilization
/// at the load point, each bar marked with its member's kind. Returns the
/// file written.
fn load_bars(
    c: &SweepConfig,
    out: &[Outcome],
    dir: &Path,
    g: &[(String, Value)],
    suffix: &str,
) -> Result<String, String> {
    let err = |e: std::io::Error| format!("cannot write into {}: {e}", dir.display());
    let series = series_names(c);
    let at = c.load_at.clone().unwrap_or_else(|| c.x_values[0].clone());
    let bars: Vec<(String, Vec<f64>)> = series
        .iter()
        .filter_map(|s| {
            let o = out
                .iter()
                .find(|o| &o.point.series == s && o.point.x == at && o.point.grid == g)?;
            Some((
                s.clone(),
                o.report
                    .members
                    .iter()
                    .map(|m| m.utilization * 100.0)
                    .collect(),
            ))
        })
        .collect();
    // Each bar marked with its member's kind (where the load goes is
    // the point of a heterogeneous layout).
    let kinds: Vec<Vec<String>> = bars
        .iter()
        .map(|(s, _)| {
            out.iter()
                .find(|o| &o.point.series == s && o.point.x == at && o.point.grid == g)
                .map(|o| o.report.members.iter().map(|m| m.kind.clone()).collect())
                .unwrap_or_default()
        })
        .collect();
    let name = format!("load{suffix}.svg");
    std::fs::write(
        dir.join(&name),
        crate::plot::bar_chart(
            &format!(
                "Member utilization at {} = {}",
                crate::plot::readable(&c.x),
                value_label(&at)
            ),
            &bars,
            &kinds,
        ),
    )
    .map_err(err)?;
    Ok(name)
}

/// `summary.md`: the headline numbers beside the published ones, a table
/// per grid combination, and what the run was (enough to run it again).
pub(super) fn write_summary(
    c: &SweepConfig,
    out: &[Outcome],
    dir: &Path,
    combos: &[Vec<(String, Value)>],
    plots: &[String],
) -> Result<Vec<HeadlineResult>, String> {
    let err = |e: std::io::Error| format!("cannot write into {}: {e}", dir.display());
    let series = series_names(c);
    let heads: Vec<HeadlineResult> = c
        .headline
        .iter()
        .filter_map(|h| headline(c, h, out))
        .collect();
    let mut md = String::new();
    let _ = writeln!(md, "# {}\n", c.title);
    if let Some(s) = &c.source {
        let _ = writeln!(md, "Published source: {s}\n");
    }
    departures_md(c, &mut md);
    if let Some(d) = &c.description {
        let _ = writeln!(md, "{}\n", d.trim());
    }
    if !c.headline.is_empty() {
        let _ = writeln!(
            md,
            "## Headline numbers\n\n| what | ours | where | published |\n| --- | --- | --- | --- |"
        );
        for h in &heads {
            let _ = writeln!(
                md,
                "| {} | {:.2} | {} | {} |",
                h.what, h.ours, h.at, h.published
            );
        }
        md.push('\n');
        for (h, r) in c
            .headline
            .iter()
            .zip(c.headline.iter().map(|h| headline(c, h, out)))
        {
            if let Some(n) = &h.note {
                let metric = h.metric.as_deref().unwrap_or(&c.metric);
                let text = render_note(c, out, r.as_ref(), metric, n.trim())
                    .map_err(|e| format!("headline '{}': note: {e}", h.what))?;
                let _ = writeln!(md, "- **{}**: {}", h.what, text);
            }
        }
        md.push('\n');
    }
    for g in combos {
        let _ = writeln!(
            md,
            "## {}{}\n",
            c.metric,
            if g.is_empty() {
                String::new()
            } else {
                format!(" ({})", grid_label(g))
            }
        );
        let _ = write!(md, "| {} |", c.x);
        for s in &series {
            let _ = write!(md, " {s} |");
        }
        let _ = write!(md, "\n| --- |");
        for _ in &series {
            md.push_str(" --- |");
        }
        md.push('\n');
        let mut marked = false;
        for x in &c.x_values {
            let _ = write!(md, "| {} |", value_label(x));
            for s in &series {
                let o = out
                    .iter()
                    .find(|o| &o.point.series == s && &o.point.x == x && &o.point.grid == g);
                // A rebuild figure of a rebuild the run did not finish is
                // marked: it is the run's end, not the rebuild's.
                let unfinished = c.metric.starts_with("rebuild.")
                    && o.is_some_and(|o| o.report.rebuild.as_ref().is_some_and(|r| !r.completed));
                marked |= unfinished;
                match o.and_then(|o| metric(&o.report, &c.metric)) {
                    Some(v) => {
                        let _ = write!(md, " {v:.2}{} |", if unfinished { " †" } else { "" });
                    }
                    None => md.push_str(" - |"),
                }
            }
            md.push('\n');
        }
        if marked {
            md.push_str("\n† the rebuild had not finished when the run ended: the figure is the run's end.\n");
        }
        md.push('\n');
    }
    // What this run was: enough to run it again and get the same bytes.
    let _ = writeln!(
        md,
        "## Run
"
    );
    let _ = writeln!(
        md,
        "- {} ({} runs); simulation is deterministic: the same file, settings and seeds print the same numbers",
        crate::provenance(),
        out.len()
    );
    let mut seeds: Vec<u64> = out.iter().map(|o| o.report.seed).collect();
    seeds.sort_unstable();
    seeds.dedup();
    let _ = writeln!(md, "- seeds: {seeds:?}");
    let requests: u64 = out.iter().map(|o| o.report.requests).sum();
    let simulated: f64 = out.iter().map(|o| o.report.sim_time_s).sum();
    let _ = writeln!(
        md,
        "- {requests} requests in all, {simulated:.1} s simulated"
    );
    if !c.base.is_empty() {
        let settings: Vec<String> = c.base.iter().map(|(k, v)| format!("`{k} = {v}`")).collect();
        let _ = writeln!(
            md,
            "- settings for every run (the file's, and `--set` overrides): {}",
            settings.join(", ")
        );
    }
    md.push('\n');
    let _ = writeln!(
        md,
        "Files: `results.csv` (every run, per-member counters), `runs/*.json` (config and full result of each run), {}.",
        plots.iter().map(|p| format!("`{p}`")).collect::<Vec<_>>().join(", ")
    );
    std::fs::write(dir.join("summary.md"), md).map_err(err)?;
    Ok(heads)
}

/// The settings this run changed from the file (`--set`), first thing in
/// the summary.
fn departures_md(c: &SweepConfig, md: &mut String) {
    // What this run changed from the file: its numbers are not the
    // experiment's as written (nor, where the file follows a paper, the
    // paper's setup).
    if c.departures.is_empty() {
        return;
    }
    {
        let _ = writeln!(
            *md,
            "**This run departs from the experiment file** (`--set`); compare its numbers with the published ones with that in mind:\n"
        );
        for (k, old, new) in &c.departures {
            let was = match old {
                Some(v) => format!("the file says {v}"),
                None => "the file leaves the default".to_string(),
            };
            let shadowed = c.series.iter().any(|s| s.contains_key(k)) || c.grid.contains_key(k);
            let _ = writeln!(
                *md,
                "- `{k}` = {new} ({was}){}",
                if shadowed {
                    "; series or grid entries that set it keep their own"
                } else {
                    ""
                }
            );
        }
        md.push('\n');
    }
}
