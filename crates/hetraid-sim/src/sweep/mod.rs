//! Sweeps: a grid of runs from one TOML file, written out as JSON per run, one CSV,
//! SVG plots and a `summary.md` that sets headline numbers beside published ones.
//!
//! ```toml
//! title = "..."
//! x = "size"                       # the swept RunConfig key (plot x axis)
//! x_values = ["4K", "8K", "16K"]
//! metric = "throughput_mbps"       # what the plot and the table show
//! [base]                           # RunConfig keys shared by every run
//! workload = "random-write"
//! [grid]                           # optional: more keys, every combination
//! chunk = ["4K", "64K"]
//! [[series]]                       # one line per series
//! name = "RAID5"
//! layout = "raid5"
//! members = "caviar-black-640*5"
//! [[headline]]                     # a number to compare with a paper
//! what = "RAID4S / RAID5"
//! numerator = "RAID4S"
//! denominator = "RAID5"
//! reduce = "max"                   # max, min, mean
//! x_max = "64K"                    # optional filter on x (also x_min)
//! published = "up to 1.6x"
//! published_value = 1.6
//! note = "why ours differs"
//! ```

use crate::config::RunConfig;
use crate::report::Report;
use hetraid_core::units::parse_size;
use serde::Deserialize;
use std::fmt::Write as _;
use std::path::Path;
use toml::{Table, Value};

mod outputs;
pub use outputs::write_outputs;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepConfig {
    pub title: String,
    #[serde(default)]
    pub source: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    pub x: String,
    pub x_values: Vec<Value>,
    /// Draw the x values as categories (grouped bars) instead of points on
    /// an axis. Default: categories when a value is not a number or a size
    /// (traces, option names).
    #[serde(default)]
    pub x_categorical: Option<bool>,
    /// How the plots label the x values (one per value; the tables and
    /// notes keep the values themselves).
    #[serde(default)]
    pub x_labels: Option<Vec<String>>,
    #[serde(default = "d_metric")]
    pub metric: String,
    /// Plot the metric on a logarithmic axis (for series that differ by decades).
    #[serde(default)]
    pub log_y: bool,
    /// x value whose per-member load is drawn as bars (default: the first).
    #[serde(default)]
    pub load_at: Option<Value>,
    #[serde(default)]
    pub base: Table,
    #[serde(default)]
    pub grid: Table,
    pub series: Vec<Table>,
    #[serde(default)]
    pub headline: Vec<Headline>,
    /// The sweep file's directory: relative trace paths are resolved against it.
    #[serde(skip)]
    pub dir: Option<std::path::PathBuf>,
    /// Settings this run changed from the file (`--set`): the key, the
    /// file's value (None: the file left the default) and the one used.
    /// The summary says each, first thing.
    #[serde(skip)]
    pub departures: Vec<(String, Option<Value>, Value)>,
}

impl SweepConfig {
    /// Set `key` to `value` for every run (`--set`), remembering what the
    /// file said so the summary can flag the departure.
    pub fn set(&mut self, key: &str, value: Value) {
        let old = self.base.get(key).cloned();
        if old.as_ref() != Some(&value) {
            self.departures.push((key.to_string(), old, value.clone()));
        }
        self.base.insert(key.to_string(), value);
    }
}

fn d_metric() -> String {
    "throughput_mbps".into()
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Headline {
    pub what: String,
    pub numerator: String,
    #[serde(default)]
    pub denominator: Option<String>,
    #[serde(default)]
    pub metric: Option<String>,
    #[serde(default = "d_reduce")]
    pub reduce: String,
    /// Compare two x values instead of two series at the same x: the numerator
    /// series at `x_num` over the denominator series (default: the same one) at
    /// `x_den`.
    #[serde(default)]
    pub x_num: Option<Value>,
    #[serde(default)]
    pub x_den: Option<Value>,
    #[serde(default)]
    pub x_min: Option<Value>,
    #[serde(default)]
    pub x_max: Option<Value>,
    /// Only grid combinations whose values match these.
    #[serde(default)]
    pub grid: Table,
    pub published: String,
    #[serde(default)]
    pub published_value: Option<f64>,
    #[serde(default)]
    pub note: Option<String>,
}

fn d_reduce() -> String {
    "max".into()
}

/// One run of the grid.
#[derive(Debug, Clone)]
pub struct Point {
    pub series: String,
    pub x: Value,
    pub grid: Vec<(String, Value)>,
    pub config: RunConfig,
}

#[derive(Debug, Clone)]
pub struct Outcome {
    pub point: Point,
    pub report: Report,
}

/// A value as a number for filters and sorting: sizes like "64K" become bytes.
impl SweepConfig {
    /// Whether the plots draw x as categories: as the file says, else when
    /// some x value is not a number or a size.
    pub fn categorical(&self) -> bool {
        self.x_categorical
            .unwrap_or_else(|| self.x_values.iter().any(|v| value_num(v).is_none()))
    }
}

pub fn value_num(v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Float(f) => Some(*f),
        Value::String(s) => parse_size(s).ok().map(|b| b as f64),
        _ => None,
    }
}

pub fn value_label(v: &Value) -> String {
    match v {
        // Paths (traces, device files) are labelled by their file name.
        Value::String(s) if s.contains('/') => Path::new(s)
            .file_name()
            .map_or_else(|| s.clone(), |f| f.to_string_lossy().into_owned()),
        Value::String(s) => s.clone(),
        Value::Float(f) => format!("{f}"),
        other => other.to_string(),
    }
}

impl SweepConfig {
    pub fn parse(text: &str, origin: &str) -> Result<Self, String> {
        let mut c: Self =
            toml::from_str(text).map_err(|e| format!("{origin}: {}", e.message().trim()))?;
        c.dir = Path::new(origin).parent().map(Path::to_path_buf);
        if c.series.is_empty() || c.x_values.is_empty() {
            return Err(format!(
                "{origin}: a sweep needs at least one [[series]] and one x value"
            ));
        }
        if let Some(l) = &c.x_labels {
            if l.len() != c.x_values.len() {
                return Err(format!(
                    "{origin}: x_labels has {} labels for {} x values; give one per value",
                    l.len(),
                    c.x_values.len()
                ));
            }
        }
        for (i, s) in c.series.iter().enumerate() {
            if !matches!(s.get("name"), Some(Value::String(_))) {
                return Err(format!("{origin}: series {} needs name = \"...\"", i + 1));
            }
            // A series may vary another key in step with x (a baseline whose
            // own parameter differs: RAID5 of G members where x is the
            // declustered width G).
            match (s.get("x_key"), s.get("x_values")) {
                (None, None) => {}
                (Some(Value::String(_)), Some(Value::Array(v))) if v.len() == c.x_values.len() => {}
                _ => {
                    return Err(format!(
                        "{origin}: series {} gives x_key and x_values together, x_values with one value per sweep x value ({})",
                        i + 1,
                        c.x_values.len()
                    ))
                }
            }
        }
        for h in &c.headline {
            for name in std::iter::once(&h.numerator).chain(h.denominator.iter()) {
                if !c
                    .series
                    .iter()
                    .any(|s| s.get("name").and_then(Value::as_str) == Some(name))
                {
                    return Err(format!(
                        "{origin}: headline '{}' names series '{name}', which is not defined",
                        h.what
                    ));
                }
            }
            if h.x_num.is_some() != h.x_den.is_some() {
                return Err(format!(
                    "{origin}: headline '{}' gives one of x_num and x_den; give both or neither",
                    h.what
                ));
            }
            if !matches!(h.reduce.as_str(), "max" | "min" | "mean") {
                return Err(format!(
                    "{origin}: headline reduce '{}' must be max, min or mean",
                    h.reduce
                ));
            }
        }
        c.points()?;
        Ok(c)
    }

    /// Every run, in a fixed order: grid combination, series, x.
    pub fn points(&self) -> Result<Vec<Point>, String> {
        let mut combos: Vec<Vec<(String, Value)>> = vec![vec![]];
        for (k, v) in &self.grid {
            let vals = v
                .as_array()
                .ok_or_else(|| format!("grid key '{k}' must be a list of values"))?;
            combos = combos
                .into_iter()
                .flat_map(|c| {
                    vals.iter().map(move |x| {
                        let mut c = c.clone();
                        c.push((k.clone(), x.clone()));
                        c
                    })
                })
                .collect();
        }
        let mut out = Vec::new();
        for combo in &combos {
            for s in &self.series {
                let name = s["name"].as_str().unwrap().to_string();
                for (xi, x) in self.x_values.iter().enumerate() {
                    let mut t = self.base.clone();
                    for (k, v) in s
                        .iter()
                        .filter(|(k, _)| !matches!(k.as_str(), "name" | "x_key" | "x_values"))
                    {
                        t.insert(k.clone(), v.clone());
                    }
                    for (k, v) in combo {
                        t.insert(k.clone(), v.clone());
                    }
                    match (s.get("x_key").and_then(Value::as_str), s.get("x_values")) {
                        (Some(k), Some(Value::Array(v))) => {
                            t.insert(k.to_string(), v[xi].clone());
                        }
                        _ => {
                            t.insert(self.x.clone(), x.clone());
                        }
                    }
                    let mut config: RunConfig =
                        Value::Table(t).try_into().map_err(|e: toml::de::Error| {
                            format!(
                                "series '{name}' at {} = {}: {}",
                                self.x,
                                value_label(x),
                                e.message().trim()
                            )
                        })?;
                    if let Some(dir) = &self.dir {
                        // Trace and device files are named relative to the sweep file.
                        if let Some(tr) = config
                            .trace
                            .as_deref()
                            .filter(|t| Path::new(t).is_relative())
                        {
                            config.trace = Some(dir.join(tr).to_string_lossy().into_owned());
                        }
                        config.members = config
                            .members
                            .split(',')
                            .map(|m| {
                                let (name, rep) = m
                                    .trim()
                                    .split_once('*')
                                    .map_or((m.trim(), None), |(a, b)| (a, Some(b)));
                                let name =
                                    if name.ends_with(".toml") && Path::new(name).is_relative() {
                                        dir.join(name).to_string_lossy().into_owned()
                                    } else {
                                        name.to_string()
                                    };
                                match rep {
                                    Some(r) => format!("{name}*{r}"),
                                    None => name,
                                }
                            })
                            .collect::<Vec<_>>()
                            .join(",");
                    }
                    out.push(Point {
                        series: name.clone(),
                        x: x.clone(),
                        grid: combo.clone(),
                        config,
                    });
                }
            }
        }
        Ok(out)
    }
}

/// Run every point on `threads` threads; `progress` is called after each run.
/// Results come back in point order, so the output does not depend on threads.
pub fn run_points(
    points: Vec<Point>,
    threads: usize,
    progress: &(dyn Fn() + Sync),
) -> Result<Vec<Outcome>, String> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: std::sync::Mutex<Vec<Option<Result<Report, String>>>> =
        std::sync::Mutex::new(vec![None; points.len()]);
    std::thread::scope(|s| {
        for _ in 0..threads.max(1).min(points.len()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(p) = points.get(i) else { break };
                let r = crate::run(&p.config)
                    .map_err(|e| format!("series '{}' at {}: {e}", p.series, value_label(&p.x)));
                results.lock().unwrap()[i] = Some(r);
                progress();
            });
        }
    });
    let results = results.into_inner().unwrap();
    points
        .into_iter()
        .zip(results)
        .map(|(point, r)| {
            Ok(Outcome {
                point,
                report: r.expect("every point ran")?,
            })
        })
        .collect()
}

/// A metric of a run: a report field, `mN_field` for member N's field, a dotted
/// path (`rebuild.rebuild_time_s`, with list indices: `rebuild.stream_time_s.0`), or the ratio of two of these (`m4_write_pages /
/// m0_write_pages`).
pub fn metric(r: &Report, name: &str) -> Option<f64> {
    if let Some((a, b)) = name.split_once('/') {
        return Some(metric(r, a.trim())? / metric(r, b.trim())?);
    }
    let v = serde_json::to_value(r).ok()?;
    if name.contains('.') {
        return name
            .split('.')
            .try_fold(&v, |v, k| match k.parse::<usize>() {
                Ok(i) => v.get(i),
                Err(_) => v.get(k),
            })?
            .as_f64();
    }
    if let Some(rest) = name.strip_prefix('m') {
        if let Some((n, field)) = rest.split_once('_') {
            if let Ok(n) = n.parse::<usize>() {
                return v["members"].get(n)?.get(field)?.as_f64();
            }
        }
    }
    v.get(name)?.as_f64()
}

/// A headline note with its numbers computed from the run, so the prose
/// never disagrees with the table. `{...}` holds an expression and a format:
/// - `{ours}` — the headline's own value; `{at}` — where it was taken;
/// - `{SERIES@X}` — the headline's metric (its own, else the sweep's) for SERIES at x value X (as labelled:
///   `4K`, `0.7`), `{SERIES@X:METRIC}` another metric, `{SERIES@X#K=V,K2=V2}`
///   at a grid point;
/// - `{A@X / B@Y}` — a ratio; `{A/B@X}` is short for `{A@X / B@X}`;
/// - after `|`: `x` (`1.56x`), `gain` (`18 %`: (v − 1) × 100), `loss`
///   (`43 %`: (1 − v) × 100), `pct` (`9 %`: v × 100), or a number of
///   decimals (default 2).
///
/// An expression that names nothing the run has is an error.
/// The label `x_labels` gives x value `v`, if any (notes may name an x
/// value by it: `{RAID5@10x}` where the value is `2:10`).
fn x_label<'a>(c: &'a SweepConfig, v: &Value) -> Option<&'a str> {
    let i = c.x_values.iter().position(|x| x == v)?;
    c.x_labels.as_ref()?.get(i).map(String::as_str)
}

pub fn render_note(
    c: &SweepConfig,
    out: &[Outcome],
    ours: Option<&HeadlineResult>,
    metric_default: &str,
    note: &str,
) -> Result<String, String> {
    let term = |t: &str| -> Result<f64, String> {
        let t = t.trim();
        if t == "ours" {
            return ours
                .map(|h| h.ours)
                .ok_or("the headline has no value".to_string());
        }
        let (series, rest) = t
            .split_once('@')
            .ok_or_else(|| format!("'{t}' is not SERIES@X"))?;
        let (rest, grid) = match rest.split_once('#') {
            Some((r, g)) => (r, Some(g)),
            None => (rest, None),
        };
        let (x, metric_name) = match rest.split_once(':') {
            Some((x, m)) => (x.trim(), m.trim()),
            None => (rest.trim(), metric_default),
        };
        let grid: Vec<(&str, &str)> = grid
            .map(|g| {
                g.split(',')
                    .map(|kv| {
                        kv.split_once('=')
                            .map(|(k, v)| (k.trim(), v.trim()))
                            .ok_or(format!("grid '{g}' is not KEY=VALUE[,KEY=VALUE]"))
                    })
                    .collect::<Result<Vec<_>, _>>()
            })
            .transpose()?
            .unwrap_or_default();
        let o = out
            .iter()
            .find(|o| {
                o.point.series == series.trim()
                    && (value_label(&o.point.x) == x || x_label(c, &o.point.x) == Some(x))
                    && grid.iter().all(|(k, v)| {
                        o.point
                            .grid
                            .iter()
                            .any(|(gk, gv)| gk == k && value_label(gv) == *v)
                    })
            })
            .ok_or_else(|| format!("no run of series '{}' at {} = {x}", series.trim(), c.x))?;
        metric(&o.report, metric_name)
            .ok_or_else(|| format!("metric '{metric_name}' is not in the run's report"))
    };
    let mut outs = String::new();
    let mut rest = note;
    // Bounded: each round consumes one `{...}`.
    while let Some(open) = rest.find('{') {
        outs.push_str(&rest[..open]);
        let close = rest[open..].find('}').ok_or("a '{' without its '}'")? + open;
        let inner = &rest[open + 1..close];
        rest = &rest[close + 1..];
        if inner.trim() == "at" {
            outs.push_str(&ours.ok_or("the headline has no value")?.at);
            continue;
        }
        let (expr, fmt) = match inner.split_once('|') {
            Some((e, f)) => (e.trim(), f.trim()),
            None => (inner.trim(), "2"),
        };
        // `A/B@X` is `A@X / B@X`.
        let value = match expr.split_once(" / ") {
            Some((a, b)) => term(a)? / term(b)?,
            None => match expr.split_once('/') {
                Some((a, b)) if b.contains('@') && !a.contains('@') => {
                    let (b, at) = b.split_once('@').unwrap();
                    term(&format!("{a}@{at}"))? / term(&format!("{b}@{at}"))?
                }
                _ => term(expr)?,
            },
        };
        let text = match fmt {
            "x" => format!("{value:.2}x"),
            "gain" => format!("{:.0} %", (value - 1.0) * 100.0),
            "loss" => format!("{:.0} %", (1.0 - value) * 100.0),
            "pct" => format!("{:.0} %", value * 100.0),
            d => {
                let d: usize = d.parse().map_err(|_| {
                    format!("format '{d}' is unknown; use x, gain, loss, pct or decimals")
                })?;
                format!("{value:.d$}")
            }
        };
        outs.push_str(&text);
    }
    outs.push_str(rest);
    Ok(outs)
}

/// A series name as a file-name part.
fn slug(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect::<String>()
        .split('-')
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("-")
}

fn grid_label(g: &[(String, Value)]) -> String {
    g.iter()
        .map(|(k, v)| format!("{k}={}", value_label(v)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One headline's result.
#[derive(Debug, Clone, serde::Serialize)]
pub struct HeadlineResult {
    pub what: String,
    pub ours: f64,
    pub at: String,
    pub published: String,
    pub published_value: Option<f64>,
}

pub fn headline(c: &SweepConfig, h: &Headline, out: &[Outcome]) -> Option<HeadlineResult> {
    let metric_name = h.metric.clone().unwrap_or_else(|| c.metric.clone());
    let inside = |x: &Value| {
        let v = value_num(x);
        h.x_min
            .as_ref()
            .and_then(value_num)
            .is_none_or(|m| v.is_some_and(|v| v >= m))
            && h.x_max
                .as_ref()
                .and_then(value_num)
                .is_none_or(|m| v.is_some_and(|v| v <= m))
    };
    let grid_ok = |g: &[(String, Value)]| {
        h.grid
            .iter()
            .all(|(k, v)| g.iter().any(|(gk, gv)| gk == k && gv == v))
    };
    let find = |series: &str, x: &Value, g: &[(String, Value)]| {
        out.iter()
            .find(|o| o.point.series == series && &o.point.x == x && o.point.grid == g)
            .and_then(|o| metric(&o.report, &metric_name))
    };
    let mut vals: Vec<(f64, String)> = Vec::new();
    if let (Some(xn), Some(xd)) = (&h.x_num, &h.x_den) {
        let den_series = h.denominator.as_deref().unwrap_or(&h.numerator);
        for g in out.iter().map(|o| &o.point.grid) {
            if !grid_ok(g) || vals.iter().any(|v| v.1.ends_with(&grid_label(g))) {
                continue;
            }
            let v = find(&h.numerator, xn, g)? / find(den_series, xd, g)?;
            let mut at = format!("{} = {} vs {}", c.x, value_label(xn), value_label(xd));
            if !g.is_empty() {
                at = format!("{at}, {}", grid_label(g));
            }
            vals.push((v, at));
        }
    }
    for o in out
        .iter()
        .filter(|o| o.point.series == h.numerator && h.x_num.is_none())
    {
        if !inside(&o.point.x) || !grid_ok(&o.point.grid) {
            continue;
        }
        let num = metric(&o.report, &metric_name)?;
        let v = match &h.denominator {
            Some(d) => num / find(d, &o.point.x, &o.point.grid)?,
            None => num,
        };
        let mut at = format!("{} = {}", c.x, value_label(&o.point.x));
        if !o.point.grid.is_empty() {
            at = format!("{at}, {}", grid_label(&o.point.grid));
        }
        vals.push((v, at));
    }
    if vals.is_empty() {
        return None;
    }
    let (ours, at) = match h.reduce.as_str() {
        "min" => vals.iter().cloned().min_by(|a, b| a.0.total_cmp(&b.0))?,
        "mean" => (
            vals.iter().map(|v| v.0).sum::<f64>() / vals.len() as f64,
            "mean over the points".into(),
        ),
        _ => vals.iter().cloned().max_by(|a, b| a.0.total_cmp(&b.0))?,
    };
    Some(HeadlineResult {
        what: h.what.clone(),
        ours,
        at,
        published: h.published.clone(),
        published_value: h.published_value,
    })
}

#[cfg(test)]
mod note_tests {
    use super::*;

    #[test]
    fn a_note_expression_that_names_nothing_is_an_error() {
        let c = SweepConfig::parse(
            "title = \"t\"\nx = \"size\"\nx_values = [\"4K\"]\n[[series]]\nname = \"A\"\nlayout = \"raid0\"\nmembers = \"x25e-64*2\"\n",
            "t.toml",
        )
        .unwrap();
        assert!(render_note(&c, &[], None, "m", "plain text").unwrap() == "plain text");
        let e = render_note(&c, &[], None, "m", "{A@4K}").unwrap_err();
        assert!(e.contains("no run of series 'A'"), "{e}");
        assert!(render_note(&c, &[], None, "m", "{ours}").is_err());
        assert!(render_note(&c, &[], None, "m", "{A@4K").is_err());
    }
}
