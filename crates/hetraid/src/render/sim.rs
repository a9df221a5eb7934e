//! The simulator's report as text (its JSON is the report's serde form).

use super::say;
use hetraid_sim::{Report, RunConfig};

/// A run's report as text: what ran, the user's view (throughput,
/// latency), each member's load, and the background work (rebuild, scrub,
/// grow, copy-back, the log).
pub fn sim_text(c: &RunConfig, r: &Report) -> String {
    let mut out = String::new();
    let out = &mut out;
    let what = match &c.trace {
        Some(t) if c.workload == "trace" => format!("trace {t} ({})", c.replay),
        _ => format!(
            "{} {}",
            c.workload,
            hetraid_core::units::format_size(c.size.0)
        ),
    };
    say!(
        out,
        "{what} on {} (chunk {}, policy {}), seed {}",
        c.layout,
        hetraid_core::units::format_size(c.chunk.0),
        r.policy,
        r.seed
    );
    // The rest of what the run was (a paper's setup line).
    let amount = match (&c.total, c.duration_s) {
        (Some(t), _) => format!("total {}", hetraid_core::units::format_size(t.0)),
        (None, Some(d)) => format!("{d} s"),
        (None, None) => "the whole trace".into(),
    };
    let failed = match &c.failed {
        Some(f) if !f.0.is_empty() => format!("failed {:?}", f.0),
        _ => "no member failed".into(),
    };
    say!(
        out,
        "  members {}; qd {}; {amount}; {failed}",
        c.members,
        c.qd
    );
    let user_s = if r.iops > 0.0 {
        r.requests as f64 / r.iops
    } else {
        0.0
    };
    say!(out,
        "  {} requests in {:.3} s simulated: {:.2} MB/s, {:.0} IOPS, response mean {:.2} ms, p99 {:.2} ms",
        r.requests, user_s, r.throughput_mbps, r.iops, r.mean_response_ms, r.p99_response_ms
    );
    for (what, d) in [("reads", &r.read), ("writes", &r.write)] {
        if d.requests > 0 {
            say!(out,
                "  {what}: {} requests, mean {:.3} ms, p50 {:.2}, p95 {:.2}, p99 {:.2}, p99.9 {:.2}, max {:.2} ms",
                d.requests, d.mean_ms, d.p50_ms, d.p95_ms, d.p99_ms, d.p999_ms, d.max_ms
            );
        }
    }
    if let Some(l) = &r.log {
        let devs: Vec<String> = if l.on_members.is_empty() {
            l.devices.iter().map(|d| d.preset.clone()).collect()
        } else {
            l.on_members
                .iter()
                .map(|m| format!("member {m} (region)"))
                .collect()
        };
        say!(out,
            "  write log ({}) on {}: {} records ({} MB), {} pads, {} checkpoints, {} MB reclaimed to the members",
            l.mode,
            devs.join(", "),
            l.records,
            l.record_bytes / 1_000_000,
            l.pads,
            l.checkpoints,
            l.reclaimed_bytes / 1_000_000
        );
        if !l.on_members.is_empty() {
            say!(
                out,
                "  hpda: {} writes to the log, {} to the RAID4",
                l.hpda_log_writes,
                l.hpda_raid4_writes
            );
        }
    }
    background(out, r);
    say!(
        out,
        "  {:>3} {:<18} {:>9} {:>9} {:>11} {:>11} {:>7} {:>6} {:>9}",
        "dev",
        "preset",
        "reads",
        "writes",
        "read pages",
        "write pages",
        "erases",
        "util",
        "energy J"
    );
    for m in &r.members {
        say!(
            out,
            "  {:>3} {:<18} {:>9} {:>9} {:>11} {:>11} {:>7} {:>5.1}% {:>9.1}",
            m.device,
            m.preset,
            m.reads,
            m.writes,
            m.read_pages,
            m.write_pages,
            m.erases,
            m.utilization * 100.0,
            m.energy_j
        );
    }
    // DiskSim's breakdown of a disk's media time, one line per disk.
    for m in &r.members {
        if let Some(k) = m
            .mechanics
            .as_ref()
            .filter(|k| k.media_ops + k.cache_hits > 0)
        {
            say!(out,
                "  dev {}: {} media ops, {} cache hits; mean overhead {:.3} ms, seek {:.3} ms, rotation {:.3} ms, transfer {:.3} ms",
                m.device,
                k.media_ops,
                k.cache_hits,
                k.overhead_ms_mean,
                k.seek_ms_mean,
                k.rotation_ms_mean,
                k.transfer_ms_mean
            );
        }
    }
    say!(
        out,
        "  {}; the whole configuration: --json (provenance.config)",
        hetraid_sim::provenance()
    );
    std::mem::take(out)
}

/// The background jobs' lines of a human report: rebuild, scrub, grow and
/// copy-back.
fn background(out: &mut String, r: &Report) {
    if let Some(rb) = &r.rebuild {
        say!(out,
            "  rebuild of member {}: {:.2} s{}, {} streams, {} MB; user response during it {:.2} ms",
            rb.member,
            rb.rebuild_time_s,
            if rb.completed { "" } else { " (not finished when the run ended)" },
            rb.streams,
            rb.rebuilt_bytes / 1_000_000,
            rb.mean_response_during_ms
        );
    }
    if let Some(s) = &r.scrub {
        say!(
            out,
            "  scrub: {:.2} s{}, {} stripes, {} MB checked ({:.1} MB/s)",
            s.scrub_time_s,
            if s.completed {
                ""
            } else {
                " (not finished when the run ended)"
            },
            s.stripes,
            s.checked_bytes / 1_000_000,
            s.scrub_mbps
        );
    }
    if let Some(g) = &r.grow {
        say!(out,
            "  grow: {:.2} s{}, {} steps ({} backed up), {} rows, {} MB moved ({:.1} MB/s), capacity {} -> {} MB; user response during it {:.2} ms, {} requests held",
            g.grow_time_s,
            if g.completed { "" } else { " (not finished when the run ended)" },
            g.steps,
            g.backup_steps,
            g.rows,
            g.moved_bytes / 1_000_000,
            g.grow_mbps,
            g.capacity_before / 1_000_000,
            g.capacity_after / 1_000_000,
            g.mean_response_during_ms,
            g.requests_held
        );
    }
    if let Some(so) = &r.sit_out {
        if so.events.is_empty() {
            say!(out, "  sit-out: no member sat out");
        }
        for e in &so.events {
            say!(
                out,
                "  sit-out: member {} out at {:.2} s (reads {:.2} ms against {:.2} ms), {}",
                e.member,
                e.out_at_s,
                e.latency_ms,
                e.reference_ms,
                match e.back_at_s {
                    Some(b) => format!("back at {b:.2} s"),
                    None => "out to the end".into(),
                }
            );
        }
    }
    if let Some(c) = &r.copy_back {
        say!(out,
            "  copy-back of member {} onto a replacement: {:.2} s from {:.2} s{}, {} chunks, {} MB ({:.1} MB/s); user response during it {:.2} ms",
            c.member,
            c.copy_back_time_s,
            c.start_s,
            if c.completed { "" } else { " (not finished when the run ended)" },
            c.chunks,
            c.copied_bytes / 1_000_000,
            c.copy_back_mbps,
            c.mean_response_during_ms
        );
    }
}
