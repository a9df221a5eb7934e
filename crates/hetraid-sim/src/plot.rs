//! SVG line and bar charts.
//!
//! Hand-written rather than `plotters`: two chart kinds of fixed shape are ~150
//! lines of SVG text, while plotters' SVG backend brings font handling and a
//! dependency tree this crate does not otherwise need.

use std::fmt::Write as _;

const W: f64 = 760.0;
const H: f64 = 440.0;
const L: f64 = 70.0;
const R: f64 = 170.0;
const T: f64 = 40.0;
const B: f64 = 60.0;
const COLORS: &[&str] = &[
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];

/// Dash patterns and marker shapes by series, so series are told apart
/// without colour (print, colour blindness).
const DASHES: &[&str] = &["", "7,4", "2,3", "9,3,2,3", "4,4", "12,4"];
const MARKERS: usize = 4;

/// A metric or parameter name as an axis label with its unit:
/// `throughput_mbps` -> `throughput (MB/s)`, `p99_response_ms` -> `p99
/// response (ms)`, `m4_write_pages` -> `member 4 write pages`, `qd` ->
/// `queue depth`; a ratio `a / b` labels both sides.
pub fn readable(name: &str) -> String {
    if let Some((a, b)) = name.split_once('/') {
        return format!("{} / {}", readable(a.trim()), readable(b.trim()));
    }
    let name = name.rsplit('.').next().unwrap_or(name);
    let special = match name {
        "iops" => Some("IOPS"),
        "qd" => Some("queue depth"),
        "size" => Some("request size"),
        "chunk" => Some("chunk size"),
        "read_fraction" => Some("read fraction"),
        "write_amplification" => Some("write amplification"),
        "utilization" => Some("utilization (fraction busy)"),
        _ => None,
    };
    if let Some(s) = special {
        return s.into();
    }
    let (stem, unit) = [
        ("_mbps", "MB/s"),
        ("_ms", "ms"),
        ("_s", "s"),
        ("_j", "J"),
        ("_bytes", "bytes"),
        ("_w", "W"),
    ]
    .iter()
    .find_map(|(suf, u)| name.strip_suffix(suf).map(|st| (st, Some(*u))))
    .unwrap_or((name, None));
    let stem = match stem.strip_prefix('m').and_then(|r| r.split_once('_')) {
        Some((n, rest)) if n.parse::<usize>().is_ok() => format!("member {n} {rest}"),
        _ => stem.to_string(),
    };
    let words = stem.replace('_', " ");
    match unit {
        Some(u) => format!("{words} ({u})"),
        None => words,
    }
}

/// A marker of shape `k` (circle, square, triangle, diamond) at (x, y).
fn marker(svg: &mut String, k: usize, x: f64, y: f64, c: &str) {
    let _ = match k % MARKERS {
        0 => write!(
            svg,
            r#"<circle cx="{x:.1}" cy="{y:.1}" r="3.5" fill="{c}"/>"#
        ),
        1 => write!(
            svg,
            r#"<rect x="{:.1}" y="{:.1}" width="7" height="7" fill="{c}"/>"#,
            x - 3.5,
            y - 3.5
        ),
        2 => write!(
            svg,
            r#"<polygon points="{x:.1},{:.1} {:.1},{:.1} {:.1},{:.1}" fill="{c}"/>"#,
            y - 4.5,
            x - 4.5,
            y + 3.5,
            x + 4.5,
            y + 3.5
        ),
        _ => write!(
            svg,
            r#"<polygon points="{x:.1},{:.1} {:.1},{y:.1} {x:.1},{:.1} {:.1},{y:.1}" fill="{c}"/>"#,
            y - 4.5,
            x + 4.5,
            y + 4.5,
            x - 4.5
        ),
    };
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A "nice" upper bound and tick step for `max`.
fn nice(max: f64) -> (f64, f64) {
    if max.is_nan() || max <= 0.0 || !max.is_finite() {
        return (1.0, 0.2);
    }
    let mag = 10f64.powf(max.log10().floor());
    let step = [0.1, 0.2, 0.25, 0.5, 1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|s| s * mag)
        .find(|s| max / s <= 6.0)
        .unwrap_or(mag * 10.0);
    ((max / step).ceil() * step, step)
}

/// The y axis: linear from 0, or logarithmic over whole decades.
#[derive(Debug, Clone, Copy)]
enum Scale {
    Linear { max: f64, step: f64 },
    Log { lo: i32, hi: i32 },
}

impl Scale {
    fn for_values(values: impl Iterator<Item = f64>, log: bool) -> Self {
        let v: Vec<f64> = values.filter(|v| v.is_finite()).collect();
        let max = v.iter().copied().fold(0.0f64, f64::max);
        let min_pos = v
            .iter()
            .copied()
            .filter(|&x| x > 0.0)
            .fold(f64::INFINITY, f64::min);
        if log && min_pos.is_finite() {
            let lo = min_pos.log10().floor() as i32;
            let hi = (max.log10().ceil() as i32).max(lo + 1);
            Scale::Log { lo, hi }
        } else {
            let (max, step) = nice(max);
            Scale::Linear { max, step }
        }
    }

    /// Pixel row of value `y` (values at or below zero sit on the axis in log scale).
    fn py(&self, y: f64) -> f64 {
        let ph = H - T - B;
        let f = match *self {
            Scale::Linear { max, .. } => y / max,
            Scale::Log { lo, hi } if y > 0.0 => (y.log10() - lo as f64) / (hi - lo) as f64,
            Scale::Log { .. } => 0.0,
        };
        H - B - f.clamp(0.0, 1.0) * ph
    }

    fn ticks(&self) -> Vec<(f64, String)> {
        match *self {
            Scale::Linear { max, step } => {
                let mut v = Vec::new();
                let mut y = 0.0;
                while y <= max + step / 2.0 {
                    let label = if step < 1.0 {
                        format!("{y:.2}")
                    } else {
                        format!("{y:.0}")
                    };
                    v.push((y, label));
                    y += step;
                }
                v
            }
            Scale::Log { lo, hi } => (lo..=hi)
                .map(|e| {
                    let y = 10f64.powi(e);
                    let label = if e < 0 {
                        format!("{y}")
                    } else {
                        format!("{y:.0}")
                    };
                    (y, label)
                })
                .collect(),
        }
    }
}

fn frame(svg: &mut String, title: &str, ylabel: &str, scale: Scale) {
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12"><rect width="100%" height="100%" fill="white"/>"#
    );
    // A long title (a grid label makes titles long) is set smaller, then on
    // two lines, so it stays inside the picture: sans-serif glyphs average
    // about 0.55 em.
    let fits = |size: f64, text: &str| text.chars().count() as f64 * 0.55 * size <= W - 20.0;
    let size = [15.0, 13.0, 11.0]
        .into_iter()
        .find(|&f| fits(f, title))
        .unwrap_or(11.0);
    let lines: Vec<String> = if fits(size, title) {
        vec![title.to_string()]
    } else {
        // Break at the space nearest the middle.
        let mid = title.len() / 2;
        let cut = title
            .char_indices()
            .filter(|&(_, c)| c == ' ')
            .map(|(i, _)| i)
            .min_by_key(|&i| i.abs_diff(mid))
            .unwrap_or(mid);
        vec![title[..cut].to_string(), title[cut..].trim().to_string()]
    };
    let first_y = if lines.len() == 1 { 22.0 } else { 14.0 };
    for (i, l) in lines.iter().enumerate() {
        let _ = write!(
            svg,
            r#"<text x="{}" y="{}" text-anchor="middle" font-size="{size}">{}</text>"#,
            W / 2.0,
            first_y + i as f64 * (size + 2.0),
            esc(l)
        );
    }
    let ph = H - T - B;
    for (y, label) in scale.ticks() {
        let py = scale.py(y);
        let _ = write!(
            svg,
            r##"<line x1="{L}" y1="{py:.1}" x2="{}" y2="{py:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{label}</text>"##,
            W - R,
            L - 6.0,
            py + 4.0,
        );
    }
    let _ = write!(
        svg,
        r#"<text transform="translate(16,{}) rotate(-90)" text-anchor="middle">{}</text><line x1="{L}" y1="{}" x2="{}" y2="{}" stroke="black"/><line x1="{L}" y1="{T}" x2="{L}" y2="{}" stroke="black"/>"#,
        T + ph / 2.0,
        esc(ylabel),
        H - B,
        W - R,
        H - B,
        H - B
    );
}

fn legend(svg: &mut String, names: &[&str]) {
    for (i, n) in names.iter().enumerate() {
        let y = T + 10.0 + i as f64 * 18.0;
        let _ = write!(
            svg,
            r#"<rect x="{}" y="{}" width="12" height="12" fill="{}"/><text x="{}" y="{}">{}</text>"#,
            W - R + 15.0,
            y - 10.0,
            COLORS[i % COLORS.len()],
            W - R + 32.0,
            y,
            esc(n)
        );
    }
}

/// A line chart's legend: each series' colour, dash and marker.
fn line_legend(svg: &mut String, names: &[&str]) {
    for (i, n) in names.iter().enumerate() {
        let y = T + 10.0 + i as f64 * 18.0;
        let c = COLORS[i % COLORS.len()];
        let (x0, x1) = (W - R + 8.0, W - R + 34.0);
        let _ = write!(
            svg,
            r#"<line x1="{x0}" y1="{:.1}" x2="{x1}" y2="{:.1}" stroke="{c}" stroke-width="2" stroke-dasharray="{}"/>"#,
            y - 4.0,
            y - 4.0,
            DASHES[i % DASHES.len()]
        );
        marker(svg, i, (x0 + x1) / 2.0, y - 4.0, c);
        let _ = write!(svg, r#"<text x="{}" y="{}">{}</text>"#, x1 + 6.0, y, esc(n));
    }
}

/// The picture, title and y axis of a chart of `lines` (a log axis says so
/// in its label).
fn chart_frame(
    title: &str,
    ylabel: &str,
    lines: &[(String, Vec<Option<f64>>)],
    log_y: bool,
) -> (String, Scale) {
    let scale = Scale::for_values(
        lines.iter().flat_map(|l| l.1.iter().flatten().copied()),
        log_y,
    );
    let mut svg = String::new();
    let ylabel = if log_y {
        format!("{ylabel} (log scale)")
    } else {
        ylabel.to_string()
    };
    frame(&mut svg, title, &ylabel, scale);
    (svg, scale)
}

/// An x value's label under the axis at `x`.
fn x_tick(svg: &mut String, x: f64, label: &str) {
    let _ = write!(
        svg,
        r#"<text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"#,
        H - B + 16.0,
        esc(label)
    );
}

/// The x axis's title, centred under the plot.
fn x_title(svg: &mut String, xlabel: &str) {
    let _ = write!(
        svg,
        r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
        L + (W - L - R) / 2.0,
        H - 18.0,
        esc(xlabel)
    );
}

/// `lines`: (series name, y per x label; None = missing).
pub fn line_chart(
    title: &str,
    xlabel: &str,
    ylabel: &str,
    labels: &[String],
    lines: &[(String, Vec<Option<f64>>)],
    log_y: bool,
) -> String {
    let (mut svg, scale) = chart_frame(title, ylabel, lines, log_y);
    let pw = W - L - R;
    let n = labels.len().max(1);
    let px = |i: usize| L + (i as f64 + 0.5) * pw / n as f64;
    let every = n.div_ceil(12);
    for (i, l) in labels.iter().enumerate() {
        if i % every == 0 {
            x_tick(&mut svg, px(i), l);
        }
    }
    x_title(&mut svg, xlabel);
    for (si, (_, ys)) in lines.iter().enumerate() {
        let c = COLORS[si % COLORS.len()];
        let pts: Vec<(f64, f64)> = ys
            .iter()
            .enumerate()
            .filter_map(|(i, y)| y.map(|y| (px(i), scale.py(y))))
            .collect();
        let joined: Vec<String> = pts.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
        let _ = write!(
            svg,
            r#"<polyline fill="none" stroke="{c}" stroke-width="2" stroke-dasharray="{}" points="{}"/>"#,
            DASHES[si % DASHES.len()],
            joined.join(" ")
        );
        for &(x, y) in &pts {
            marker(&mut svg, si, x, y, c);
        }
    }
    line_legend(
        &mut svg,
        &lines.iter().map(|l| l.0.as_str()).collect::<Vec<_>>(),
    );
    svg.push_str("</svg>\n");
    svg
}

/// Categorical x values (regimes, traces, options): one group of bars per x
/// label, one bar per series in the series' colour, with the series' marker
/// on top so a grey print still tells them apart. Lines between categories
/// would suggest values in between that do not exist.
pub fn category_chart(
    title: &str,
    xlabel: &str,
    ylabel: &str,
    labels: &[String],
    lines: &[(String, Vec<Option<f64>>)],
    log_y: bool,
) -> String {
    let (mut svg, scale) = chart_frame(title, ylabel, lines, log_y);
    let pw = W - L - R;
    let groups = labels.len().max(1);
    let gw = pw / groups as f64;
    let bw = gw * 0.8 / lines.len().max(1) as f64;
    for (gi, l) in labels.iter().enumerate() {
        let x0 = L + gi as f64 * gw + gw * 0.1;
        for (si, (name, ys)) in lines.iter().enumerate() {
            let Some(v) = ys.get(gi).copied().flatten() else {
                continue;
            };
            let c = COLORS[si % COLORS.len()];
            let top = scale.py(v);
            let x = x0 + si as f64 * bw;
            let _ = write!(
                svg,
                r#"<rect x="{x:.1}" y="{top:.1}" width="{:.1}" height="{:.1}" fill="{c}" fill-opacity="0.75"><title>{} at {}: {v:.3}</title></rect>"#,
                bw * 0.9,
                (H - B - top).max(0.0),
                esc(name),
                esc(l)
            );
            marker(&mut svg, si, x + bw * 0.45, top - 6.0, c);
        }
        x_tick(&mut svg, x0 + gw * 0.4, l);
    }
    x_title(&mut svg, xlabel);
    for (i, (n, _)) in lines.iter().enumerate() {
        let y = T + 10.0 + i as f64 * 18.0;
        let c = COLORS[i % COLORS.len()];
        let _ = write!(
            svg,
            r#"<rect x="{}" y="{}" width="14" height="12" fill="{c}" fill-opacity="0.75"/><text x="{}" y="{}">{}</text>"#,
            W - R + 10.0,
            y - 10.0,
            W - R + 34.0,
            y,
            esc(n)
        );
        marker(&mut svg, i, W - R + 17.0, y - 4.0, c);
    }
    svg.push_str("</svg>\n");
    svg
}

/// Grouped bars: per series, one bar per member; `kinds[g][m]`, when
/// given, is written over member m's bar of group g (`S` ssd, `H` hdd, `N`
/// nvram: where the load goes is what a heterogeneous layout decides).
pub fn bar_chart(title: &str, groups: &[(String, Vec<f64>)], kinds: &[Vec<String>]) -> String {
    let scale = Scale::for_values(groups.iter().flat_map(|g| g.1.iter().copied()), false);
    let mut svg = String::new();
    frame(&mut svg, title, "busy (% of the run)", scale);
    let pw = W - L - R;
    let members = groups.iter().map(|g| g.1.len()).max().unwrap_or(1).max(1);
    let gw = pw / groups.len().max(1) as f64;
    let bw = gw * 0.8 / members as f64;
    for (gi, (name, vals)) in groups.iter().enumerate() {
        let x0 = L + gi as f64 * gw + gw * 0.1;
        for (m, v) in vals.iter().enumerate() {
            let h = H - B - scale.py(*v);
            let _ = write!(
                svg,
                r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>{} member {m}: {v:.1}</title></rect>"#,
                x0 + m as f64 * bw,
                H - B - h,
                bw * 0.9,
                h,
                COLORS[m % COLORS.len()],
                esc(name)
            );
            if let Some(k) = kinds.get(gi).and_then(|k| k.get(m)) {
                let _ = write!(
                    svg,
                    r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="10">{}</text>"#,
                    x0 + m as f64 * bw + bw * 0.45,
                    H - B - h - 3.0,
                    esc(&k
                        .chars()
                        .next()
                        .unwrap_or('?')
                        .to_ascii_uppercase()
                        .to_string())
                );
            }
        }
        let _ = write!(
            svg,
            r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
            x0 + gw * 0.4,
            H - B + 16.0,
            esc(name)
        );
    }
    let names: Vec<String> = (0..members).map(|m| format!("member {m}")).collect();
    if !kinds.is_empty() {
        let _ = write!(
            svg,
            r#"<text x="{}" y="{}" font-size="11">over a bar: S ssd, H hdd</text>"#,
            W - R + 15.0,
            T + 10.0 + members as f64 * 18.0 + 8.0
        );
    }
    legend(
        &mut svg,
        &names.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_titles_stay_inside_the_picture() {
        let short = line_chart("Short", "x", "y", &[], &[], false);
        assert!(short.contains(r#"font-size="15">Short</text>"#));
        let long = "Random writes: RAID4S vs RAID4, RAID5, RAID5S, RAIDF5, RAID0 (align_to_size=true), relative to RAID5, with many more words to make it long";
        let svg = line_chart(long, "x", "y", &[], &[], false);
        let titles: Vec<&str> = svg
            .split("<text")
            .filter(|t| t.contains(r#"font-size="11""#))
            .collect();
        assert_eq!(titles.len(), 2, "two lines: {svg}");
        for t in titles {
            let text = t.split('>').nth(1).unwrap().split('<').next().unwrap();
            assert!(
                text.chars().count() as f64 * 0.55 * 11.0 <= W - 20.0,
                "{text}"
            );
        }
    }

    #[test]
    fn categories_are_bars_not_lines() {
        let lines = vec![
            ("A".to_string(), vec![Some(2.0), Some(4.0)]),
            ("B".to_string(), vec![None, Some(1.0)]),
        ];
        let labels = vec!["offline".to_string(), "online".to_string()];
        let svg = category_chart("t", "load", "rebuild time (s)", &labels, &lines, false);
        assert!(!svg.contains("<polyline"), "no line joins categories");
        // One bar per value present (B has none offline).
        assert_eq!(svg.matches("fill-opacity=\"0.75\"><title>").count(), 3);
        assert!(svg.contains(">offline</text>") && svg.contains(">online</text>"));
        assert!(svg.contains("A at online: 4.000"));
    }

    #[test]
    fn axis_labels_carry_units() {
        assert_eq!(readable("throughput_mbps"), "throughput (MB/s)");
        assert_eq!(readable("p99_response_ms"), "p99 response (ms)");
        assert_eq!(readable("rebuild.rebuild_time_s"), "rebuild time (s)");
        assert_eq!(
            readable("m4_write_pages / m0_write_pages"),
            "member 4 write pages / member 0 write pages"
        );
        assert_eq!(readable("qd"), "queue depth");
        assert_eq!(readable("iops"), "IOPS");
    }

    #[test]
    fn series_differ_by_dash_and_marker_as_well_as_colour() {
        let lines: Vec<(String, Vec<Option<f64>>)> = (0..4)
            .map(|i| (format!("s{i}"), vec![Some(i as f64 + 1.0), Some(2.0)]))
            .collect();
        let svg = line_chart(
            "t",
            "queue depth",
            "IOPS",
            &["1".into(), "2".into()],
            &lines,
            false,
        );
        for d in &DASHES[1..4] {
            assert!(svg.contains(&format!("stroke-dasharray=\"{d}\"")), "{d}");
        }
        assert!(svg.contains("<circle") && svg.contains("<rect x=") && svg.contains("<polygon"));
    }
}

/// One point of a [`scatter_chart`].
#[derive(Debug, Clone)]
pub struct ScatterPoint {
    pub label: String,
    pub x: f64,
    pub y: f64,
    /// Drawn in colour, numbered and listed (a Pareto front); the rest grey.
    pub marked: bool,
}

/// Points on a linear x axis and a linear y axis, both from 0. Marked points
/// are numbered by their place in `points` (give them ranked) and listed by
/// number beside the plot (the first `LABELS_MAX`); the others are grey dots
/// behind them.
pub fn scatter_chart(title: &str, xlabel: &str, ylabel: &str, points: &[ScatterPoint]) -> String {
    const LABELS_MAX: usize = 20;
    // The legend column holds about this many characters at 10 px.
    const LABEL_CHARS_MAX: usize = 27;
    let scale = Scale::for_values(points.iter().map(|p| p.y), false);
    let mut svg = String::new();
    frame(&mut svg, title, ylabel, scale);
    let (xmax, xstep) = nice(
        points
            .iter()
            .map(|p| p.x)
            .filter(|x| x.is_finite())
            .fold(0.0, f64::max),
    );
    let pw = W - L - R;
    let px = |x: f64| L + (x / xmax).clamp(0.0, 1.0) * pw;
    let mut t = 0.0;
    // Bounded: nice() gives at most about seven steps.
    while t <= xmax + xstep / 2.0 {
        let label = if xstep < 1.0 {
            format!("{t:.2}")
        } else {
            format!("{t:.0}")
        };
        x_tick(&mut svg, px(t), &label);
        t += xstep;
    }
    x_title(&mut svg, xlabel);
    for p in points.iter().filter(|p| !p.marked) {
        let _ = write!(
            svg,
            r##"<circle cx="{:.1}" cy="{:.1}" r="2.5" fill="#bbb"/>"##,
            px(p.x),
            scale.py(p.y)
        );
    }
    let c = COLORS[0];
    let mut listed = 0;
    for (i, p) in points.iter().enumerate().filter(|(_, p)| p.marked) {
        let (x, y) = (px(p.x), scale.py(p.y));
        let _ = write!(
            svg,
            r#"<circle cx="{x:.1}" cy="{y:.1}" r="3.5" fill="{c}"/><text x="{:.1}" y="{:.1}" font-size="9" fill="{c}">{}</text>"#,
            x + 4.0,
            y - 4.0,
            i + 1
        );
        if listed < LABELS_MAX {
            let mut label: String = p.label.chars().take(LABEL_CHARS_MAX).collect();
            if p.label.chars().count() > LABEL_CHARS_MAX {
                label.push('…');
            }
            let _ = write!(
                svg,
                r#"<text x="{}" y="{}" font-size="10">{:>2} {}</text>"#,
                W - R + 8.0,
                T + 8.0 + listed as f64 * 15.0,
                i + 1,
                esc(&label)
            );
        }
        listed += 1;
    }
    if listed > LABELS_MAX {
        let _ = write!(
            svg,
            r#"<text x="{}" y="{}" font-size="10">... {} more</text>"#,
            W - R + 8.0,
            T + 8.0 + LABELS_MAX as f64 * 15.0,
            listed - LABELS_MAX
        );
    }
    svg.push_str("</svg>\n");
    svg
}
