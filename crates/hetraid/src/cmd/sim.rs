//! `hetraid sim`: one simulated run, from a TOML config, flags, or both (flags win).

use clap::Args;
use hetraid_sim::{Report, RunConfig, Size};

#[derive(Debug, Args)]
pub struct SimCmd {
    /// A run config (TOML; keys are the flag names with '_' for '-').
    pub config: Option<String>,
    /// Layout (as `hetraid create`), e.g. raid5, raid4s, raidh, s2raid5.
    #[arg(long)]
    pub layout: Option<String>,
    /// Devices in member order: preset names or .toml files, `*n` repeats
    /// (e.g. caviar-black-640*4,x25e-64).
    #[arg(long)]
    pub members: Option<String>,
    /// Chunk (stripe unit), a multiple of 4K (default 64K).
    #[arg(long)]
    pub chunk: Option<Size>,
    /// md, modthresh, modthresh-stripe (the threshold decided per stripe), rmw-always, cost.
    #[arg(long)]
    pub policy: Option<String>,
    /// random-write, random-read, seq-write, seq-read, mixed, trace.
    #[arg(long)]
    pub workload: Option<String>,
    /// Share of reads for the mixed workload (0 to 1).
    #[arg(long)]
    pub read_fraction: Option<f64>,
    /// Request size.
    #[arg(long)]
    pub size: Option<Size>,
    /// Random offsets are multiples of this (default 4K).
    #[arg(long)]
    pub align: Option<Size>,
    /// Random offsets are multiples of the request size (fio's default).
    #[arg(long)]
    pub align_to_size: bool,
    /// Outstanding requests.
    #[arg(long)]
    pub qd: Option<u32>,
    /// Bytes to issue (default 256M).
    #[arg(long)]
    pub total: Option<Size>,
    /// Or: issue for this much simulated time (seconds, or 500ms, 10s, 2m, 1h).
    #[arg(long, value_parser = hetraid_sim::config::parse_duration_s)]
    pub duration: Option<f64>,
    /// Address only the first SPAN bytes of the array.
    #[arg(long)]
    pub span: Option<Size>,
    /// Use only this many bytes of each member.
    #[arg(long)]
    pub member_size: Option<Size>,
    /// Trace file for the trace workload.
    #[arg(long)]
    pub trace: Option<String>,
    /// spc, msr, blkparse, disksim (default: from the file name, else its first record).
    #[arg(long)]
    pub trace_format: Option<String>,
    /// timed (recorded arrival times) or afap (as fast as possible at --qd).
    #[arg(long)]
    pub replay: Option<String>,
    /// Multiply recorded inter-arrival times by this.
    #[arg(long)]
    pub time_scale: Option<f64>,
    /// Replay at most N trace records.
    #[arg(long, value_name = "N")]
    pub trace_limit: Option<usize>,
    /// Replay the trace N times back to back (fio's loops).
    #[arg(long, value_name = "N")]
    pub trace_loops: Option<u32>,
    /// Members failed from the start (e.g. 2, or 1,3 for RAID6); --rebuild replaces
    /// the first.
    #[arg(long)]
    pub failed: Option<hetraid_sim::config::FailedSet>,
    /// Replace the failed member at time 0 and rebuild it under the load.
    #[arg(long)]
    pub rebuild: bool,
    /// Scrub the whole array under the load (every stripe read and checked,
    /// paced by --min-speed/--max-speed as hetraid scrub is).
    #[arg(long)]
    pub scrub: bool,
    /// Grow the array under the load: the last member is the one added and
    /// the data is restriped onto all (raid5, raid6; paced by --min-speed/
    /// --max-speed as a served hetraid grow --add).
    #[arg(long)]
    pub grow: bool,
    /// Reclaim a write-back log (or HPDA's) once the array has been quiet
    /// this many seconds, as hetraid serve --reclaim-idle.
    #[arg(long, value_name = "SECONDS")]
    pub reclaim_idle: Option<f64>,
    /// Rebuild into spare space on the other members (s2raid5 or s2raid10 with
    /// --spare-partitions 1).
    #[arg(long)]
    pub to_spare: bool,
    /// After the rebuild into spare space, copy the member back onto a
    /// fresh device in its slot (declustered; hetraid rebalance).
    #[arg(long)]
    pub copy_back: bool,
    /// MD speed_limit_min / speed_limit_max (bytes per second, e.g. 1M, 200M).
    #[arg(long)]
    pub min_speed: Option<Size>,
    #[arg(long)]
    pub max_speed: Option<Size>,
    /// What the speed limits hold during a rebuild: array (the whole rebuild,
    /// as MD on one device; default) or stream (each parallel stream, as one
    /// md device per S2-RAID subRAID).
    #[arg(long, value_name = "SCOPE")]
    pub pace: Option<String>,
    #[arg(long)]
    pub seed: Option<u64>,
    /// Parity arithmetic rate in MB/s (0 = free).
    #[arg(long)]
    pub xor_mbps: Option<f64>,
    /// Disk queue scheduler for every HDD: fifo, sstf, clook, sptf.
    #[arg(long)]
    pub scheduler: Option<String>,
    /// Commands every HDD's scheduler chooses among (its tagged queue; the
    /// others wait in order). Default: the preset's, else all.
    #[arg(long, value_name = "N")]
    pub disk_queue: Option<u32>,
    /// Turn every HDD's write-back cache on or off.
    #[arg(long)]
    pub write_cache: Option<bool>,
    /// Fill every SSD once before the run (steady state).
    #[arg(long)]
    pub precondition: bool,
    /// Layouts with copies: how reads choose one: first, md (default),
    /// raidx1, raidx2, raidx3, raidx4.
    #[arg(long)]
    pub read_policy: Option<String>,
    /// A write buffer of SIZE in front of the members: writes are
    /// acknowledged once buffered and drained meanwhile.
    #[arg(long, value_name = "SIZE")]
    pub write_buffer: Option<Size>,
    /// Random request sizes from --size to SIZE (512-byte steps).
    #[arg(long, value_name = "SIZE")]
    pub size_max: Option<Size>,
    /// Closed-loop workloads: this share of requests (0 to below 1) are
    /// trims of --trim-size at random places (fio's trim mix); whole stripes
    /// they cover are discarded on the members.
    #[arg(long, value_name = "F")]
    pub trim_fraction: Option<f64>,
    /// The size of each trim (default: --size).
    #[arg(long, value_name = "SIZE")]
    pub trim_size: Option<Size>,
    /// A write log on its own device(s), e.g. x25e-64 or x25e-64*2 (mirrored).
    #[arg(long)]
    pub log: Option<String>,
    /// How the log is used: journal.
    #[arg(long)]
    pub log_mode: Option<String>,
    /// Size of each log device (default 64M).
    #[arg(long)]
    pub log_size: Option<Size>,
    #[command(flatten)]
    pub params: crate::args::LayoutParamArgs,
    /// One JSON document on stdout (the contract shape, plus additions).
    #[arg(long)]
    pub json: bool,
}

impl SimCmd {
    pub fn config(&self) -> Result<RunConfig, String> {
        let mut c = match &self.config {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("cannot read {path}: {e}"))?;
                RunConfig::parse(&text, path)?
            }
            None => {
                let layout = self
                    .layout
                    .as_deref()
                    .ok_or("give a CONFIG.toml or --layout L --members SPEC")?;
                let members = self
                    .members
                    .as_deref()
                    .ok_or("give --members, e.g. caviar-black-640*4,x25e-64")?;
                RunConfig::new(layout, members)
            }
        };
        macro_rules! set {
            ($($f:ident => $t:ident),* $(,)?) => {$(
                if let Some(v) = &self.$f { c.$t = v.clone().into(); }
            )*};
        }
        set!(layout => layout, members => members, chunk => chunk, policy => policy,
             workload => workload, size => size, qd => qd, replay => replay,
             time_scale => time_scale, min_speed => min_speed, max_speed => max_speed,
             seed => seed, xor_mbps => xor_mbps);
        macro_rules! opt {
            ($($f:ident => $t:ident),* $(,)?) => {$(
                if self.$f.is_some() { c.$t = self.$f.clone(); }
            )*};
        }
        opt!(read_fraction => read_fraction, align => align, total => total,
             duration => duration_s, span => span, member_size => member_size, trace => trace,
             trace_format => trace_format, failed => failed, scheduler => scheduler,
             disk_queue => disk_queue,
             write_cache => write_cache, log => log, log_mode => log_mode, log_size => log_size,
             read_policy => read_policy, write_buffer => write_buffer, size_max => size_max,
             trim_fraction => trim_fraction, trim_size => trim_size,
             trace_limit => trace_limit, trace_loops => trace_loops, pace => pace,
             reclaim_idle => reclaim_idle);
        self.params.apply_to(&mut c);
        c.rebuild |= self.rebuild;
        c.scrub |= self.scrub;
        c.grow |= self.grow;
        c.to_spare |= self.to_spare;
        c.copy_back |= self.copy_back;
        c.align_to_size |= self.align_to_size;
        c.precondition |= self.precondition;
        Ok(c)
    }

    pub fn run(&self) -> Result<(), String> {
        let cfg = self.config()?;
        if cfg.weights == Some(hetraid_sim::config::Weights::Auto) {
            let plan = hetraid_sim::setup::auto_weights(&cfg)?;
            eprintln!(
                "hetraid: weights auto: {} for this workload",
                plan.summary()
            );
        }
        let r = hetraid_sim::run(&cfg)?;
        if self.json {
            println!(
                "{}",
                serde_json::to_string_pretty(&r).map_err(|e| e.to_string())?
            );
        } else {
            print_human(&cfg, &r);
        }
        Ok(())
    }
}

fn print_human(c: &RunConfig, r: &Report) {
    let what = match &c.trace {
        Some(t) if c.workload == "trace" => format!("trace {t} ({})", c.replay),
        _ => format!(
            "{} {}",
            c.workload,
            hetraid_core::units::format_size(c.size.0)
        ),
    };
    println!(
        "{what} on {} (chunk {}, policy {}), seed {}",
        c.layout,
        hetraid_core::units::format_size(c.chunk.0),
        r.policy,
        r.seed
    );
    let user_s = if r.iops > 0.0 {
        r.requests as f64 / r.iops
    } else {
        0.0
    };
    println!(
        "  {} requests in {:.3} s simulated: {:.2} MB/s, {:.0} IOPS, response mean {:.2} ms, p99 {:.2} ms",
        r.requests, user_s, r.throughput_mbps, r.iops, r.mean_response_ms, r.p99_response_ms
    );
    for (what, d) in [("reads", &r.read), ("writes", &r.write)] {
        if d.requests > 0 {
            println!(
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
        println!(
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
            println!(
                "  hpda: {} writes to the log, {} to the RAID4",
                l.hpda_log_writes, l.hpda_raid4_writes
            );
        }
    }
    print_background(r);
    println!(
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
        println!(
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
            println!(
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
}

/// The background jobs' lines of a human report: rebuild, scrub, grow and
/// copy-back.
fn print_background(r: &Report) {
    if let Some(rb) = &r.rebuild {
        println!(
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
        println!(
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
        println!(
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
    if let Some(c) = &r.copy_back {
        println!(
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
