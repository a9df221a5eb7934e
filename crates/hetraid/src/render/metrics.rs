//! The Prometheus text exposition of an array's status (`serve --metrics`):
//! its state, per member state, I/O and error counters, a rebuild's, scrub's
//! or change's progress — what node_exporter's md collector and the ZFS
//! exporters give for their arrays.

use hetraid_engine::iostat::IoStats;
use hetraid_engine::Status;
use std::fmt::Write as _;

/// The states an array or a member may be in (one gauge per state, 1 for
/// the one it is in, as node_exporter's `node_md_state`).
const ARRAY_STATES: [&str; 5] = ["optimal", "degraded", "rebuilding", "incomplete", "failed"];
const MEMBER_STATES: [&str; 5] = ["active", "rebuilding", "faulty", "removed", "missing"];

/// A label value, escaped as the format wants (backslash, quote, newline).
fn esc(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Metric families: HELP and TYPE once, then their samples.
struct Families {
    out: String,
}

impl Families {
    fn family(&mut self, name: &str, kind: &str, help: &str, samples: &[(String, f64)]) {
        let _ = writeln!(self.out, "# HELP {name} {help}");
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
        for (labels, v) in samples {
            let _ = writeln!(self.out, "{name}{{{labels}}} {v}");
        }
    }
}

/// The exposition of `st` (one array).
pub fn prometheus(st: &Status) -> String {
    let mut f = Families { out: String::new() };
    let array = format!(
        "array=\"{}\",uuid=\"{}\"",
        esc(if st.name.is_empty() {
            &st.uuid
        } else {
            &st.name
        }),
        esc(&st.uuid)
    );
    let member = |i: usize| {
        let m = &st.member_states[i];
        let path = m.path.as_deref().or(m.last_path.as_deref()).unwrap_or("");
        format!("{array},slot=\"{i}\",path=\"{}\"", esc(path))
    };
    let states: Vec<(String, f64)> = ARRAY_STATES
        .iter()
        .map(|s| (format!("{array},state=\"{s}\""), f64::from(st.state == *s)))
        .collect();
    f.family(
        "hetraid_array_state",
        "gauge",
        "1 for the state the array is in, 0 for the others.",
        &states,
    );
    f.family(
        "hetraid_array_capacity_bytes",
        "gauge",
        "Bytes the array holds.",
        &[(array.clone(), st.capacity_bytes as f64)],
    );
    f.family(
        "hetraid_array_members",
        "gauge",
        "Member slots of the array.",
        &[(array.clone(), st.member_states.len() as f64)],
    );
    f.family(
        "hetraid_array_spares",
        "gauge",
        "Hot spares given with the members.",
        &[(array.clone(), st.spares.len() as f64)],
    );
    let mut mstates = Vec::new();
    for (i, m) in st.member_states.iter().enumerate() {
        for s in MEMBER_STATES {
            mstates.push((
                format!("{},state=\"{s}\"", member(i)),
                f64::from(m.state == s),
            ));
        }
    }
    f.family(
        "hetraid_member_state",
        "gauge",
        "1 for the state the member slot is in, 0 for the others.",
        &mstates,
    );
    let errors: Vec<(String, f64)> = st
        .member_states
        .iter()
        .enumerate()
        .flat_map(|(i, m)| {
            [
                ("read", m.read_errors),
                ("write", m.write_errors),
                ("checksum", m.checksum_errors),
            ]
            .map(|(t, n)| (format!("{},type=\"{t}\"", member(i)), f64::from(n)))
        })
        .collect();
    f.family(
        "hetraid_member_errors_total",
        "counter",
        "I/O errors of the member since the last hetraid clear (kept on the members).",
        &errors,
    );
    io_families(&mut f, st, &array, &member);
    progress_families(&mut f, st, &array);
    f.out
}

/// The I/O counters: the users' (array) and each member's.
fn io_families(f: &mut Families, st: &Status, array: &str, member: &dyn Fn(usize) -> String) {
    let io: Vec<(String, &IoStats)> = st
        .io
        .iter()
        .map(|s| (array.to_string(), s))
        .chain(
            st.member_states
                .iter()
                .enumerate()
                .filter_map(|(i, m)| m.io.as_ref().map(|s| (member(i), s))),
        )
        .collect();
    let (arr, mem): (Vec<_>, Vec<_>) = io.iter().partition(|(l, _)| !l.contains(",slot="));
    for (scope, rows, who) in [
        ("array", arr, "the array's users (NBD requests)"),
        ("member", mem, "the member"),
    ] {
        type Field = fn(&IoStats) -> f64;
        let fields: [(&str, &str, Field); 6] = [
            ("read_ops_total", "Reads", |s| s.read_ops as f64),
            ("write_ops_total", "Writes", |s| s.write_ops as f64),
            ("read_bytes_total", "Bytes read", |s| s.read_bytes as f64),
            ("written_bytes_total", "Bytes written", |s| {
                s.write_bytes as f64
            }),
            ("read_seconds_total", "Seconds spent in reads", |s| {
                s.read_ns as f64 / 1e9
            }),
            ("write_seconds_total", "Seconds spent in writes", |s| {
                s.write_ns as f64 / 1e9
            }),
        ];
        for (name, help, get) in fields {
            let samples: Vec<(String, f64)> =
                rows.iter().map(|(l, s)| (l.clone(), get(s))).collect();
            if !samples.is_empty() {
                f.family(
                    &format!("hetraid_{scope}_{name}"),
                    "counter",
                    &format!("{help} by {who}, since the server started counting."),
                    &samples,
                );
            }
        }
    }
}

/// A rebuild's, scrub's or change's progress and time left.
fn progress_families(f: &mut Families, st: &Status, array: &str) {
    let (op, ratio, eta) = match (&st.progress, &st.change) {
        (Some(p), _) => (p.op.to_string(), p.percent / 100.0, p.eta_s),
        (None, Some(c)) => (
            c.change.clone(),
            c.moves_done as f64 / c.moves.max(1) as f64,
            c.rate.and_then(|r| r.eta_s),
        ),
        (None, None) => (String::new(), 0.0, None),
    };
    let running: Vec<(String, f64)> = ["rebuild", "scrub", "grow", "shrink", "restripe"]
        .iter()
        .map(|o| {
            let v = if *o == op { ratio } else { 0.0 };
            (format!("{array},operation=\"{o}\""), v)
        })
        .collect();
    f.family(
        "hetraid_operation_progress_ratio",
        "gauge",
        "Share done of the rebuild, scrub or change running (0 when none).",
        &running,
    );
    if let Some(eta) = eta {
        f.family(
            "hetraid_operation_eta_seconds",
            "gauge",
            "Seconds left of the operation running, at its rate so far.",
            &[(format!("{array},operation=\"{}\"", esc(&op)), eta)],
        );
    }
    f.family(
        "hetraid_array_events_total",
        "counter",
        "The superblock's event counter (every recorded change of the array).",
        &[(array.to_string(), st.events as f64)],
    );
}
