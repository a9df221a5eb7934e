//! The status report's text: from the status JSON (`Status` serialized),
//! the same for an array read here and one a server or another command
//! holds. Members, spares, progress and HPDA's lines.

use super::say;
use hetraid_core::units::format_size;

/// Seconds since the Unix epoch as `YYYY-MM-DD HH:MM:SS UTC` (the civil-from-
/// days algorithm; a date crate for one line of output is not worth it).
pub fn utc(secs: u64) -> String {
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + (m <= 2) as i64;
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Members waiting in the rebuilding state with nothing rebuilding them
/// (after an offline `replace` or `add`, or a rebuild stopped), and the
/// command that runs it; from the status JSON.
fn awaiting_rebuild(v: &serde_json::Value) -> Option<String> {
    let stripes = v["stripe_count"].as_u64().unwrap_or(0);
    let waiting: Vec<String> = v["member_states"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["state"] == "rebuilding")
        .map(|m| {
            format!(
                "slot {} ({}) at {:.1} %",
                m["device"],
                m["path"].as_str().unwrap_or("?"),
                m["rebuild_checkpoint"].as_u64().unwrap_or(0) as f64 * 100.0
                    / stripes.max(1) as f64
            )
        })
        .collect();
    if waiting.is_empty() {
        return None;
    }
    Some(format!(
        "rebuild: awaiting rebuild, {}; nothing is running it: {}",
        waiting.join(", "),
        rebuild_command_of(v)
    ))
}

/// `hetraid rebuild` with the array's member paths (the devices in their
/// slots, spares included).
pub fn rebuild_command(st: &hetraid_engine::Status) -> String {
    rebuild_command_of(&serde_json::to_value(st).unwrap_or_default())
}

fn rebuild_command_of(v: &serde_json::Value) -> String {
    let paths: Vec<&str> = v["member_states"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["path"].as_str())
        .chain(
            v["spares"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| s["path"].as_str()),
        )
        .collect();
    format!("hetraid rebuild {}", paths.join(" "))
}

/// `status` of an array, from its status JSON (`Status` serialized: the
/// same for an array read here and one a server or another command holds,
/// `held_by` then naming it). The one status renderer.
pub fn status_text(v: &serde_json::Value, held_by: Option<&str>) -> String {
    let mut out = String::new();
    let out = &mut out;
    let s = |x: &serde_json::Value| x.as_str().unwrap_or("?").to_string();
    let n = |x: &serde_json::Value| x.as_u64().unwrap_or(0);
    let layout = match (v["parity_order"].as_str(), v["partitions"].as_u64()) {
        (Some(o), _) => format!("{} {o}", s(&v["layout"])),
        (None, Some(k)) => format!(
            "{} ({k} partitions + {} spare per member)",
            s(&v["layout"]),
            n(&v["spare_partitions"])
        ),
        (None, None) => s(&v["layout"]),
    };
    // A held array is in use: dirty says nothing then.
    let how = match held_by {
        Some(h) => format!(" ({h})"),
        None if v["clean"] == false => " (dirty)".into(),
        None => String::new(),
    };
    say!(
        out,
        "array {}{}  {layout}  state {}{how}",
        v["name"]
            .as_str()
            .filter(|x| !x.is_empty())
            .map_or_else(String::new, |x| format!("{x} ")),
        s(&v["uuid"]),
        s(&v["state"]),
    );
    say!(
        out,
        "capacity {} ({} bytes), chunk {}, {} stripes, policy {}{}, events {}",
        format_size(n(&v["capacity_bytes"])),
        n(&v["capacity_bytes"]),
        format_size(n(&v["chunk_bytes"])),
        n(&v["stripe_count"]),
        s(&v["policy"]),
        v["read_policy"]
            .as_str()
            .map_or_else(String::new, |p| format!(", reads {p}")),
        n(&v["events"])
    );
    match v.get("last_scrub").filter(|r| !r.is_null()) {
        Some(r) => say!(
            out,
            "scan: scrub finished {} in {:.1} s: {} stripes, {} mismatched, {} repaired",
            utc(n(&r["finished_unix_s"])),
            n(&r["duration_ms"]) as f64 / 1000.0,
            r["stripes_checked"],
            r["mismatched_stripes"],
            r["repaired_stripes"]
        ),
        None => say!(out, "scan: none requested"),
    }
    if v["checksums"] == true {
        say!(
            out,
            "checksums: crc32c per 4 KiB block, verified on every read"
        );
    }
    consistency(out, v);
    hpda(out, v);
    if let Some(t) = v["bundle_table_bytes"].as_u64() {
        let data: u64 = v["member_states"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|m| n(&m["data_bytes"]))
            .sum();
        say!(
            out,
            "bundle table: on every member, {} in all ({:.3} % of the data areas)",
            format_size(t),
            t as f64 * 100.0 / data.max(1) as f64
        );
    }
    if let Some(p) = progress_line(v) {
        say!(out, "{p}");
    } else if let Some(a) = awaiting_rebuild(v).filter(|_| held_by.is_none()) {
        say!(out, "{a}");
    }
    if let Some(c) = change_line(v) {
        say!(out, "{c}");
    }
    members(out, v);
    spares(out, v);
    for d in v["log"]["devices"].as_array().into_iter().flatten() {
        say!(
            out,
            "{:>6}  {:<10}  {:<5}  {:>10}  {:>10}  {:>8}  {:>6}  {:>5}  {:>5}  {}",
            format!("log{}", d["copy"]),
            s(&d["state"]),
            s(&d["kind"]),
            format_size(n(&v["log"]["ring_bytes"])),
            "-",
            "-",
            "-",
            "-",
            "-",
            d["path"].as_str().unwrap_or("-")
        );
    }
    std::mem::take(out)
}

/// `status` of an array printed (`status_text`).
pub fn print_status(v: &serde_json::Value, held_by: Option<&str>) {
    print!("{}", status_text(v, held_by));
}

/// The `consistency:` line: the write log's state and use, or the bitmap.
fn consistency(out: &mut String, v: &serde_json::Value) {
    let l = &v["log"];
    if l.is_object() {
        let n = |x: &serde_json::Value| x.as_u64().unwrap_or(0);
        let mode = l["mode"].as_str().unwrap_or("?");
        say!(out,
            "consistency: {mode} (write log {}, {} of {} in use, {} records since the last checkpoint{})",
            l["state"].as_str().unwrap_or("?"),
            format_size(n(&l["used_bytes"])),
            format_size(n(&l["ring_bytes"])),
            n(&l["records"]),
            if mode == "write-back" {
                format!(
                    ", {} not yet on the members",
                    format_size(n(&l["unreclaimed_bytes"]))
                )
            } else {
                String::new()
            }
        );
        return;
    }
    match v["consistency"].as_str().unwrap_or("?") {
        "journal" => say!(out, "consistency: journal (log device not given)"),
        "bitmap" => say!(
            out,
            "consistency: write-intent bitmap (resync after a crash)"
        ),
        c => say!(out, "consistency: {c}"),
    }
}

/// The member lines of `status` (local or served: from the status JSON):
/// per member its state, kind, data area, what the layout uses of it (and
/// leaves unused when members differ in size), its share of parity or
/// copies, errors since assembly, path (or where it was last seen) and a
/// rebuild's progress.
pub(crate) fn members(out: &mut String, v: &serde_json::Value) {
    // mdadm --detail's counts: slots by state, spares waiting.
    let states: Vec<&str> = v["member_states"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| m["state"].as_str().unwrap_or("?"))
        .collect();
    let count = |s: &[&str]| states.iter().filter(|x| s.contains(x)).count();
    let spares = v["spares"].as_array().map_or(0, |a| a.len());
    say!(out,
        "devices: {} slots: {} active, {} rebuilding, {} failed or missing, {} removed; {spares} spare{}",
        states.len(),
        count(&["active"]),
        count(&["rebuilding"]),
        count(&["faulty", "missing"]),
        count(&["removed"]),
        if spares == 1 { "" } else { "s" }
    );
    say!(
        out,
        "{:>6}  {:<10}  {:<5}  {:>10}  {:>10}  {:>8}  {:>6}  {:>5}  {:>5}  path",
        "member",
        "state",
        "kind",
        "data",
        "used",
        "unused",
        "parity",
        "read",
        "cksum"
    );
    let n = |x: &serde_json::Value| x.as_u64().unwrap_or(0);
    let stripes = n(&v["stripe_count"]);
    for m in v["member_states"].as_array().into_iter().flatten() {
        let path = match (m["path"].as_str(), m["last_path"].as_str()) {
            (Some(p), _) => p.to_string(),
            (None, Some(p)) => format!("{p} (last seen)"),
            (None, None) => "-".into(),
        };
        // A rebuild's checkpoint as a share of the stripes (and the stripe).
        let progress = match m["rebuild_checkpoint"].as_u64() {
            Some(c) => format!(
                "  ({}rebuilt {:.1} %: stripe {c} of {stripes})",
                if m["readd"] == true { "re-added, " } else { "" },
                c as f64 * 100.0 / stripes.max(1) as f64
            ),
            None => String::new(),
        };
        say!(
            out,
            "{:>6}  {:<10}  {:<5}  {:>10}  {:>10}  {:>8}  {:>5.0}%  {:>5}  {:>5}  {path}{progress}",
            m["device"].to_string(),
            m["state"].as_str().unwrap_or("?"),
            m["kind"].as_str().unwrap_or("?"),
            format_size(n(&m["data_bytes"])),
            format_size(n(&m["used_bytes"])),
            format_size(n(&m["unused_bytes"])),
            m["redundancy_share"].as_f64().unwrap_or(0.0) * 100.0,
            n(&m["read_errors"]),
            n(&m["checksum_errors"]),
        );
    }
}

/// The spare lines of `status` (local or served: from the status JSON).
pub(crate) fn spares(out: &mut String, v: &serde_json::Value) {
    for sp in v["spares"].as_array().into_iter().flatten() {
        let fits: Vec<String> = sp["fits_slots"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|x| x.to_string())
            .collect();
        say!(out,
            "{:>6}  {:<10}  {:<5}  {:>10}  {:>10}  {:>8}  {:>6}  {:>5}  {:>5}  {}  (can take slot{} {})",
            "spare",
            "spare",
            sp["kind"].as_str().unwrap_or("?"),
            format_size(sp["size_bytes"].as_u64().unwrap_or(0)),
            "-",
            "-",
            "-",
            "-",
            "-",
            sp["path"].as_str().unwrap_or("?"),
            if fits.len() == 1 { "" } else { "s" },
            fits.join(", ")
        );
    }
    for d in v["departed"].as_array().into_iter().flatten() {
        say!(out,
            "{:>6}  {:<10}  {:<5}  {:>10}  {:>10}  {:>8}  {:>6}  {:>5}  {:>5}  {}  (failed out of slot {}, event {}; another device holds it now)",
            "gone",
            "faulty",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            d["path"].as_str().unwrap_or("?"),
            d["slot"],
            d["event_seq"]
        );
    }
    let missing = v["spares_missing"].as_u64().unwrap_or(0);
    if missing > 0 {
        say!(
            out,
            "{missing} spare(s) the array lists were not given: give them with the members"
        );
    }
}

/// The status line of a rebuild or scrub running (status JSON's
/// `progress`), e.g. `rebuild: 29.0 % (stripe 144 of 496), 52.1 MB/s, 3 s left`.
pub fn progress_line(v: &serde_json::Value) -> Option<String> {
    let p = v.get("progress").filter(|p| !p.is_null())?;
    let eta = match p["eta_s"].as_f64() {
        Some(s) if s < 3600.0 => format!("{:.0} s left", s.ceil()),
        Some(s) => format!("{:.1} h left", s / 3600.0),
        None => "time left unknown yet".into(),
    };
    Some(format!(
        "{}: {:.1} % (stripe {} of {}), {:.1} MB/s, {eta}",
        p["op"].as_str().unwrap_or("?"),
        p["percent"].as_f64().unwrap_or(0.0),
        p["stripes_done"],
        p["stripes_total"],
        p["rate_bytes_per_s"].as_f64().unwrap_or(0.0) / 1e6
    ))
}

/// HPDA's lines of `status` (local or served: from the status JSON).
pub(crate) fn hpda(out: &mut String, v: &serde_json::Value) {
    let Some(h) = v.get("hpda").filter(|h| !h.is_null()) else {
        return;
    };
    let n = |x: &serde_json::Value| x.as_u64().unwrap_or(0);
    say!(
        out,
        "hpda: {}; {} writes ({}) to the log, {} ({}) in place ({} intent records, {} journaled)",
        h["routing"].as_str().unwrap_or("?"),
        n(&h["log_writes"]),
        format_size(n(&h["log_bytes"])),
        n(&h["raid4_writes"]),
        format_size(n(&h["raid4_bytes"])),
        n(&h["intent_records"]),
        n(&h["journaled_raid4_writes"])
    );
    if let Some(l) = v.get("log").filter(|l| !l.is_null()) {
        say!(
            out,
            "hpda log: {} entries, {} waiting for the RAID4, {} reclaimed since assembly",
            n(&l["entries"]),
            format_size(n(&l["unreclaimed_bytes"])),
            format_size(n(&l["reclaimed_bytes"]))
        );
    }
    say!(
        out,
        "hpda monitor: {} streams tracked, {} requests in the last second, {}",
        n(&h["streams"]),
        n(&h["intensity"]),
        if h["idle"].as_bool().unwrap_or(false) {
            "idle"
        } else {
            "busy"
        }
    );
}

/// The `change:` line of `status` (a grow, shrink or restripe in progress),
/// with its rate and time left when a process is running it.
pub fn change_line(v: &serde_json::Value) -> Option<String> {
    let c = v.get("change").filter(|c| c.is_object())?;
    let n = |k: &str| c[k].as_u64().unwrap_or(0);
    let what = if c["change"] == "restripe" {
        "new-layout rows written"
    } else {
        "chunk moves done"
    };
    let (done, total) = (n("moves_done"), n("moves"));
    let pace = match (c["moves_per_s"].as_f64(), c["eta_s"].as_f64()) {
        (Some(r), Some(eta)) => format!(", {r:.0} moves a second, {:.0} s left", eta.ceil()),
        (Some(r), None) => format!(", {r:.0} moves a second"),
        _ => "; hetraid assemble, serve or grow with the same members finishes it".into(),
    };
    Some(format!(
        "change: {} of slot {} in progress, {done} of {total} {what} ({:.1} %){pace}",
        c["change"].as_str().unwrap_or("?"),
        n("slot"),
        done as f64 * 100.0 / total.max(1) as f64
    ))
}
