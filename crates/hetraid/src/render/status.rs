//! The status report's text: from the engine's `Status`, the same for an
//! array read here and one a server or another command holds (its answer
//! is the same `Status`, with who holds it). Members, spares, progress and
//! HPDA's lines.

use super::{say, Report};
use hetraid_core::units::human_size;
use hetraid_engine::array::MemberStatus;
use hetraid_engine::array::{ChangeProgress, ChangeRate, OpProgress};
use hetraid_engine::Status;
use hetraid_nbd::control::HeldStatus;

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
fn awaiting_rebuild(st: &Status) -> Option<String> {
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

/// What to do, with the exact command, for every state that needs it (zpool
/// status's `action:`): the members' paths filled in (they reach a server
/// too). `held`: a server or a command holds the array (it rebuilds onto
/// spares itself; a rebuild it runs is shown as progress).
fn actions(v: &Status, held: bool) -> Vec<String> {
    let given = given_paths(v);
    let out: Vec<&MemberStatus> = v
        .member_states
        .iter()
        .filter(|m| matches!(m.state.as_ref(), "faulty" | "missing" | "removed"))
        .collect();
    let last = |m: &MemberStatus| {
        m.last_path
            .clone()
            .or_else(|| m.path.clone())
            .unwrap_or_else(|| format!("slot {}", m.device))
    };
    let mut todo = Vec::new();
    match v.state.as_ref() {
        "incomplete" => {
            let all: Vec<String> = v.member_states.iter().map(last).collect();
            todo.push(format!(
                "give every member (or the array's name): hetraid status {}",
                all.join(" ")
            ));
        }
        "failed" => todo.push(match out.first() {
            Some(m) => format!(
                "the array cannot be read: bring back a member that left intact (hetraid add {given} --with {}), or restore from a backup",
                last(m)
            ),
            None => "the array cannot be read: restore from a backup".into(),
        }),
        "degraded" if !v.spares.is_empty() && !held => todo.push(format!(
            "a spare takes the failed slot when rebuilt: hetraid rebuild {given}"
        )),
        "degraded" if !v.spares.is_empty() => {}
        "degraded" => {
            if let Some(m) = out.first() {
                todo.push(format!(
                    "replace member {} ({}) and rebuild: hetraid replace {given} --member {} --with NEW_DEVICE, then hetraid rebuild with NEW_DEVICE in its place (or add a spare: hetraid add {given} --with SPARE)",
                    m.device,
                    last(m),
                    m.device
                ));
            }
        }
        "rebuilding" if v.progress.is_none() && !held => {
            todo.push(format!("run the rebuild: hetraid rebuild {given}"));
        }
        _ => {}
    }
    for m in &v.member_states {
        if m.sat_out_ms_left.is_some() {
            todo.push(format!(
                "member {} ({}) is sat out for reads (its reads are far slower than the others'; they are read around it): check the device (smartctl -a, iostat)",
                m.device,
                last(m)
            ));
        }
        if m.read_errors + m.write_errors + m.checksum_errors > 0 {
            todo.push(format!(
                "member {} ({}) saw {} read, {} write and {} checksum errors: check the device (smartctl -a), hetraid scrub {given}, then hetraid clear {given} --member {}",
                m.device,
                last(m),
                m.read_errors,
                m.write_errors,
                m.checksum_errors,
                m.device
            ));
        }
    }
    todo
}

/// `hetraid rebuild` with the array's member paths (the devices in their
/// slots, spares included).
pub fn rebuild_command(st: &Status) -> String {
    format!("hetraid rebuild {}", given_paths(st))
}

/// The paths a command on this array is given: the devices in their slots,
/// then the spares.
fn given_paths(st: &Status) -> String {
    let paths: Vec<&str> = st
        .member_states
        .iter()
        .filter_map(|m| m.path.as_deref())
        .chain(st.spares.iter().map(|s| s.path.as_str()))
        .collect();
    paths.join(" ")
}

/// `status` as `hetraid status` shows it: the array's status, and who
/// holds it when another process does (a server, or a command running).
impl Report for HeldStatus {
    fn text(&self) -> String {
        let held_by = self.process.as_deref().map(|p| match p {
            "serve" => "served".to_string(),
            p => format!(
                "hetraid {p} running, pid {}",
                self.pid.map_or_else(|| "?".into(), |p| p.to_string())
            ),
        });
        status_text(&self.status, held_by.as_deref())
    }
}

/// `status` of an array: the same for an array read here and one a server
/// or another command holds (`held_by` then naming it). The one status
/// renderer.
pub fn status_text(v: &Status, held_by: Option<&str>) -> String {
    let mut out = String::new();
    let out = &mut out;
    let layout = match (&v.parity_order, v.partitions) {
        (Some(o), _) => format!("{} {o}", v.layout),
        (None, Some(k)) => format!(
            "{} ({k} partitions + {} spare per member)",
            v.layout,
            v.spare_partitions.unwrap_or(0)
        ),
        (None, None) => v.layout.clone(),
    };
    // A held array is in use: dirty says nothing then.
    let how = match held_by {
        Some(h) => format!(" ({h})"),
        None if !v.clean => " (dirty)".into(),
        None => String::new(),
    };
    say!(
        out,
        "array {}{}  {layout}  state {}{how}",
        match v.name.as_str() {
            "" => String::new(),
            x => format!("{x} "),
        },
        v.uuid,
        v.state,
    );
    say!(
        out,
        "capacity {} ({} bytes), chunk {}, {} stripes, policy {}{}, events {}",
        human_size(v.capacity_bytes),
        v.capacity_bytes,
        human_size(v.chunk_bytes),
        v.stripe_count,
        v.policy,
        v.read_policy
            .as_ref()
            .map_or_else(String::new, |p| format!(", reads {p}")),
        v.events
    );
    if v.state == "incomplete" {
        let absent: Vec<String> = v
            .member_states
            .iter()
            .filter(|m| m.state == "missing")
            .map(|m| {
                m.last_path
                    .clone()
                    .unwrap_or_else(|| format!("slot {}", m.device))
            })
            .collect();
        say!(
            out,
            "incomplete: {} of {} members not given (last seen: {}); give every member, or the array's name, to read it",
            absent.len(),
            v.member_states.len(),
            absent.join(", ")
        );
    }
    for a in actions(v, held_by.is_some()) {
        say!(out, "action: {a}");
    }
    match &v.last_scrub {
        Some(r) => say!(
            out,
            "scan: scrub finished {} in {:.1} s: {} stripes, {} mismatched, {} repaired",
            utc(r.finished_unix_s),
            r.duration_ms as f64 / 1000.0,
            r.stripes_checked,
            r.mismatched_stripes,
            r.repaired_stripes
        ),
        None => say!(out, "scan: none requested"),
    }
    if v.checksums {
        say!(
            out,
            "checksums: crc32c per 4 KiB block, verified on every read"
        );
    }
    consistency(out, v);
    hpda(out, v);
    if let Some(t) = v.bundle_table_bytes {
        let data: u64 = v.member_states.iter().map(|m| m.data_bytes).sum();
        say!(
            out,
            "bundle table: on every member, {} in all ({:.3} % of the data areas)",
            human_size(t),
            t as f64 * 100.0 / data.max(1) as f64
        );
    }
    if let (Some(b), Some(words)) = (v.capacity_bound_bytes, &v.capacity_bound) {
        say!(
            out,
            "capacity bound: {} ({words}); the array holds {:.2} of it",
            human_size(b),
            v.capacity_bytes as f64 / b.max(1) as f64
        );
    }
    if let Some(p) = &v.progress {
        say!(out, "{}", progress_line(p));
    } else if let Some(a) = awaiting_rebuild(v).filter(|_| held_by.is_none()) {
        say!(out, "{a}");
    }
    if let Some(c) = &v.change {
        say!(out, "{}", change_line(c));
    }
    members(out, v);
    spares(out, v);
    if let Some(l) = &v.log {
        for d in &l.devices {
            side_row(
                out,
                &format!("log{}", d.copy),
                &d.state,
                &d.kind,
                &human_size(l.ring_bytes),
                &d.path,
            );
        }
    }
    std::mem::take(out)
}

/// The `consistency:` line: the write log's state and use, or the bitmap.
fn consistency(out: &mut String, v: &Status) {
    if let Some(l) = &v.log {
        say!(out,
            "consistency: {} (write log {}, {} of {} in use, {} records since the last checkpoint{})",
            l.mode,
            l.state,
            human_size(l.used_bytes),
            human_size(l.ring_bytes),
            l.records,
            if l.mode == "write-back" {
                format!(
                    ", {} not yet on the members",
                    human_size(l.unreclaimed_bytes)
                )
            } else {
                String::new()
            }
        );
        return;
    }
    match v.consistency.as_ref() {
        "journal" => say!(out, "consistency: journal (log device not given)"),
        "bitmap" => say!(
            out,
            "consistency: write-intent bitmap (resync after a crash)"
        ),
        c => say!(out, "consistency: {c}"),
    }
}

/// The member lines of `status`: per member its state, kind, data area,
/// what the layout uses of it (and leaves unused when members differ in
/// size), its share of parity or copies, errors since assembly, path (or
/// where it was last seen) and a rebuild's progress.
fn members(out: &mut String, v: &Status) {
    // mdadm --detail's counts: slots by state, spares waiting.
    let count = |s: &[&str]| {
        v.member_states
            .iter()
            .filter(|m| s.contains(&m.state.as_ref()))
            .count()
    };
    let spares = v.spares.len();
    say!(out,
        "devices: {} slots: {} active, {} rebuilding, {} failed or missing, {} removed; {spares} spare{}",
        v.member_states.len(),
        count(&["active"]),
        count(&["rebuilding"]),
        count(&["faulty", "missing"]),
        count(&["removed"]),
        if spares == 1 { "" } else { "s" }
    );
    say!(
        out,
        "{:>6}  {:<10}  {:<5}  {:>10}  {:>10}  {:>8}  {:>6}  {:>5}  {:>5}  {:>5}  path",
        "member",
        "state",
        "kind",
        "data",
        "used",
        "unused",
        "parity",
        "read",
        "write",
        "cksum"
    );
    let stripes = v.stripe_count;
    for m in &v.member_states {
        let path = match (&m.path, &m.last_path) {
            (Some(p), _) => p.to_string(),
            (None, Some(p)) => format!("{p} (last seen)"),
            (None, None) => "-".into(),
        };
        // A rebuild's checkpoint as a share of the stripes (and the stripe).
        let progress = match m.rebuild_checkpoint {
            Some(c) => format!(
                "  ({}rebuilt {:.1} %: stripe {c} of {stripes})",
                if m.readd { "re-added, " } else { "" },
                c as f64 * 100.0 / stripes.max(1) as f64
            ),
            None => String::new(),
        };
        let progress = match m.sat_out_ms_left {
            Some(ms) => format!(
                "{progress}  (sat out for reads, {} s left{})",
                ms.div_ceil(1000),
                m.read_latency_us
                    .map(|u| format!(": reads took {:.2} ms", u as f64 / 1000.0))
                    .unwrap_or_default()
            ),
            None => progress,
        };
        say!(
            out,
            "{:>6}  {:<10}  {:<5}  {:>10}  {:>10}  {:>8}  {:>5.0}%  {:>5}  {:>5}  {:>5}  {path}{progress}",
            m.device.to_string(),
            m.state,
            m.kind,
            human_size(m.data_bytes),
            human_size(m.used_bytes),
            human_size(m.unused_bytes),
            m.redundancy_share * 100.0,
            m.read_errors,
            m.write_errors,
            m.checksum_errors,
        );
    }
}

/// The spare lines of `status`, and the devices that failed out of a slot.
fn spares(out: &mut String, v: &Status) {
    for sp in &v.spares {
        let fits: Vec<String> = sp.fits_slots.iter().map(|x| x.to_string()).collect();
        let tail = format!(
            "{}  (can take slot{} {})",
            sp.path,
            if fits.len() == 1 { "" } else { "s" },
            fits.join(", ")
        );
        side_row(
            out,
            "spare",
            "spare",
            &sp.kind,
            &human_size(sp.size_bytes),
            &tail,
        );
    }
    for d in &v.departed {
        let tail = format!(
            "{}  (failed out of slot {}, event {}; another device holds it now)",
            d.path, d.slot, d.event_seq
        );
        side_row(out, "gone", "faulty", "-", "-", &tail);
    }
    if v.spares_missing > 0 {
        say!(
            out,
            "{} spare(s) the array lists were not given: give them with the members",
            v.spares_missing
        );
    }
}

/// A line under the members' table for a device in no member slot (a log
/// copy, a spare, a device gone): its first columns, dashes for the rest.
fn side_row(out: &mut String, label: &str, state: &str, kind: &str, size: &str, tail: &str) {
    say!(
        out,
        "{:>6}  {:<10}  {:<5}  {:>10}  {:>10}  {:>8}  {:>6}  {:>5}  {:>5}  {:>5}  {}",
        label,
        state,
        kind,
        size,
        "-",
        "-",
        "-",
        "-",
        "-",
        "-",
        tail
    );
}

/// The status line of a rebuild or scrub running, e.g.
/// `rebuild: 29.0 % (stripe 144 of 496), 52.1 MB/s, 3 s left`.
pub fn progress_line(p: &OpProgress) -> String {
    format!("{}: {}", p.op, p.text())
}

/// HPDA's lines of `status`.
fn hpda(out: &mut String, v: &Status) {
    let Some(h) = &v.hpda else {
        return;
    };
    say!(
        out,
        "hpda: {}; {} writes ({}) to the log, {} ({}) in place ({} intent records, {} journaled)",
        h.routing,
        h.log_writes,
        human_size(h.log_bytes),
        h.raid4_writes,
        human_size(h.raid4_bytes),
        h.intent_records,
        h.journaled_raid4_writes
    );
    if let Some(l) = &v.log {
        say!(
            out,
            "hpda log: {} entries, {} waiting for the RAID4, {} reclaimed since assembly",
            l.entries,
            human_size(l.unreclaimed_bytes),
            human_size(l.reclaimed_bytes)
        );
    }
    say!(
        out,
        "hpda monitor: {} streams tracked, {} requests in the last second, {}",
        h.streams,
        h.intensity,
        if h.idle { "idle" } else { "busy" }
    );
}

/// The `change:` line of `status` (a grow, shrink or restripe in progress),
/// with its rate and time left when a process is running it.
pub fn change_line(c: &ChangeProgress) -> String {
    let what = if c.change == "restripe" {
        "new-layout rows written"
    } else {
        "chunk moves done"
    };
    let (done, total) = (c.moves_done, c.moves);
    let pace = match c.rate {
        Some(ChangeRate {
            moves_per_s: r,
            eta_s: Some(eta),
        }) => format!(", {r:.0} moves a second, {:.0} s left", eta.ceil()),
        Some(ChangeRate { moves_per_s: r, .. }) => format!(", {r:.0} moves a second"),
        None => "; hetraid assemble, serve or grow with the same members finishes it".into(),
    };
    format!(
        "change: {} of slot {} in progress, {done} of {total} {what} ({:.1} %){pace}",
        c.change,
        c.slot,
        done as f64 * 100.0 / total.max(1) as f64
    )
}
