//! How reports print: status, members, spares, progress, rebuilds, HPDA.

#[allow(unused_imports)]
use super::*;

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
/// command that runs it.
pub(crate) fn awaiting_rebuild(st: &hetraid_engine::Status) -> Option<String> {
    let waiting: Vec<String> = st
        .member_states
        .iter()
        .filter(|m| m.state == "rebuilding")
        .map(|m| {
            format!(
                "slot {} ({}) at {:.1} %",
                m.device,
                m.path.as_deref().unwrap_or("?"),
                m.rebuild_checkpoint.unwrap_or(0) as f64 * 100.0 / st.stripe_count.max(1) as f64
            )
        })
        .collect();
    if waiting.is_empty() {
        return None;
    }
    Some(format!(
        "rebuild: awaiting rebuild, {}; nothing is running it: {}",
        waiting.join(", "),
        rebuild_command(st)
    ))
}

/// `hetraid rebuild` with the array's member paths (the devices in their
/// slots, spares included).
pub(crate) fn rebuild_command(st: &hetraid_engine::Status) -> String {
    let mut paths: Vec<String> = st
        .member_states
        .iter()
        .filter_map(|m| m.path.clone())
        .collect();
    if let Ok(v) = serde_json::to_value(st) {
        paths.extend(
            v["spares"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| s["path"].as_str().map(String::from)),
        );
    }
    format!("hetraid rebuild {}", paths.join(" "))
}

pub fn print_status(st: &hetraid_engine::Status) {
    println!(
        "array {}{}  {}  state {}{}",
        if st.name.is_empty() {
            String::new()
        } else {
            format!("{} ", st.name)
        },
        st.uuid,
        match (st.parity_order, st.partitions) {
            (Some(o), _) => format!("{} {o}", st.layout),
            (None, Some(k)) => format!(
                "{} ({k} partitions + {} spare per member)",
                st.layout,
                st.spare_partitions.unwrap_or(0)
            ),
            (None, None) => st.layout.clone(),
        },
        st.state,
        if st.clean { "" } else { " (dirty)" }
    );
    println!(
        "capacity {} ({} bytes), chunk {}, {} stripes, policy {}{}, events {}",
        format_size(st.capacity_bytes),
        st.capacity_bytes,
        format_size(st.chunk_bytes),
        st.stripe_count,
        st.policy,
        st.read_policy
            .map_or_else(String::new, |p| format!(", reads {p}")),
        st.events
    );
    match &st.last_scrub {
        Some(r) => println!(
            "scan: scrub finished {} in {:.1} s: {} stripes, {} mismatched, {} repaired",
            utc(r.finished_unix_s),
            r.duration_ms as f64 / 1000.0,
            r.stripes_checked,
            r.mismatched_stripes,
            r.repaired_stripes
        ),
        None => println!("scan: none requested"),
    }
    if st.checksums {
        println!("checksums: crc32c per 4 KiB block, verified on every read");
    }
    match (&st.log, st.consistency) {
        (Some(l), _) => println!(
            "consistency: {} (write log {}, {} of {} in use, {} records since the last checkpoint{})",
            l.mode,
            l.state,
            format_size(l.used_bytes),
            format_size(l.ring_bytes),
            l.records,
            if l.mode == "write-back" {
                format!(", {} not yet on the members", format_size(l.unreclaimed_bytes))
            } else {
                String::new()
            }
        ),
        (None, "journal") => println!("consistency: journal (log device not given)"),
        (None, "bitmap") => println!("consistency: write-intent bitmap (resync after a crash)"),
        (None, c) => println!("consistency: {c}"),
    }
    if let Ok(v) = serde_json::to_value(st) {
        print_hpda(&v);
    }
    if let Some(t) = st.bundle_table_bytes {
        let data: u64 = st.member_states.iter().map(|m| m.data_bytes).sum();
        println!(
            "bundle table: on every member, {} in all ({:.3} % of the data areas)",
            format_size(t),
            t as f64 * 100.0 / data.max(1) as f64
        );
    }
    if let Some(p) = serde_json::to_value(st)
        .ok()
        .as_ref()
        .and_then(progress_line)
    {
        println!("{p}");
    } else if let Some(a) = awaiting_rebuild(st) {
        println!("{a}");
    }
    if let Some(c) = change_line(&serde_json::to_value(st).unwrap_or_default()) {
        println!("{c}");
    }
    print_members(&serde_json::to_value(st).unwrap_or_default());
    print_spares(&serde_json::to_value(st).unwrap_or_default());
    if let Some(l) = &st.log {
        for d in &l.devices {
            println!(
                "{:>6}  {:<10}  {:<5}  {:>10}  {:>10}  {:>8}  {:>6}  {:>5}  {:>5}  {}",
                format!("log{}", d.copy),
                d.state,
                d.kind,
                format_size(l.ring_bytes),
                "-",
                "-",
                "-",
                "-",
                "-",
                d.path
            );
        }
    }
}

/// The member lines of `status` (local or served: from the status JSON):
/// per member its state, kind, data area, what the layout uses of it (and
/// leaves unused when members differ in size), its share of parity or
/// copies, errors since assembly, path (or where it was last seen) and a
/// rebuild's progress.
pub(crate) fn print_members(v: &serde_json::Value) {
    // mdadm --detail's counts: slots by state, spares waiting.
    let states: Vec<&str> = v["member_states"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| m["state"].as_str().unwrap_or("?"))
        .collect();
    let count = |s: &[&str]| states.iter().filter(|x| s.contains(x)).count();
    let spares = v["spares"].as_array().map_or(0, |a| a.len());
    println!(
        "devices: {} slots: {} active, {} rebuilding, {} failed or missing, {} removed; {spares} spare{}",
        states.len(),
        count(&["active"]),
        count(&["rebuilding"]),
        count(&["faulty", "missing"]),
        count(&["removed"]),
        if spares == 1 { "" } else { "s" }
    );
    println!(
        "{:>6}  {:<10}  {:<5}  {:>10}  {:>10}  {:>8}  {:>6}  {:>5}  {:>5}  path",
        "member", "state", "kind", "data", "used", "unused", "parity", "read", "cksum"
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
        println!(
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
pub(crate) fn print_spares(v: &serde_json::Value) {
    for sp in v["spares"].as_array().into_iter().flatten() {
        let fits: Vec<String> = sp["fits_slots"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|x| x.to_string())
            .collect();
        println!(
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
        println!(
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
        println!("{missing} spare(s) the array lists were not given: give them with the members");
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

pub(crate) fn print_rebuilt(r: &hetraid_engine::RebuildReport) -> Result<(), String> {
    {
        if r.members.is_empty() {
            println!("nothing to rebuild: no member is in the rebuilding state (use hetraid replace first, or --to-spare)");
        } else {
            let named: Vec<String> = r
                .members
                .iter()
                .enumerate()
                .map(|(k, m)| match r.paths.get(k).filter(|p| !p.is_empty()) {
                    Some(p) => format!("{m} ({p})"),
                    None => m.to_string(),
                })
                .collect();
            println!(
                "rebuilt member(s) [{}]: {} stripes, {} in {:.2} s ({} parallel stream{}), {:.1} MB/s",
                named.join(", "),
                r.stripes,
                format_size(r.bytes),
                r.seconds,
                r.streams,
                if r.streams == 1 { "" } else { "s" },
                r.bytes as f64 / r.seconds.max(1e-9) / 1e6
            );
        }
        Ok(())
    }
}

/// HPDA's lines of `status` (local or served: from the status JSON).
pub(crate) fn print_hpda(v: &serde_json::Value) {
    let Some(h) = v.get("hpda").filter(|h| !h.is_null()) else {
        return;
    };
    let n = |x: &serde_json::Value| x.as_u64().unwrap_or(0);
    println!(
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
        println!(
            "hpda log: {} entries, {} waiting for the RAID4, {} reclaimed since assembly",
            n(&l["entries"]),
            format_size(n(&l["unreclaimed_bytes"])),
            format_size(n(&l["reclaimed_bytes"]))
        );
    }
    println!(
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
