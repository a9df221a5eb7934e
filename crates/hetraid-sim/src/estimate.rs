//! How long an offline rebuild of a member takes: the one estimator behind
//! `hetraid analyze`'s MTTR and `hetraid advise`'s rebuild column.
//!
//! The simulator rebuilds the member alone (one small request at the start)
//! on the array as configured — its real member sizes, so seeks between a
//! member's data and its spare space have their real length and an HDD's
//! zones their real speeds. A member larger than [`SAMPLE_BYTES`] is
//! rebuilt in [`SAMPLE_WINDOWS`] windows of consecutive stripes evenly spaced
//! over each stream (`setup::RebuildSample`), and the time is scaled by the
//! share swept. A scaled-down array (`member_size` of a sample) is what this
//! replaces: its spare partitions sit closer to the data, and a 4 GiB sample
//! of 640 GB disks came out 11 % fast.

use crate::config::{RunConfig, Size};
use crate::setup::{RebuildSample, Setup};

/// Member bytes a sampled rebuild sweeps (in all its windows): 4 GiB keeps
/// the rebuild's start (the first seeks, the lanes filling), which the sample
/// scales up with the rest, under 0.5 % of a 640 GB disk's rebuild (1 GiB:
/// 1.8 %).
pub const SAMPLE_BYTES: u64 = 4 << 30;

/// Windows of a sampled rebuild.
pub const SAMPLE_WINDOWS: usize = 16;

/// An offline rebuild's estimate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RebuildEstimate {
    pub member: usize,
    /// Seconds for the whole member.
    pub seconds: f64,
    /// The share of the stripes simulated (1: the whole member).
    pub sampled_fraction: f64,
}

/// The offline rebuild of member `member` of `cfg`'s array (into spare
/// space where the layout has it), at `cfg`'s speed limits.
pub fn offline_rebuild(cfg: &RunConfig, member: usize) -> Result<RebuildEstimate, String> {
    let mut c = cfg.clone();
    c.failed = Some(member.into());
    c.rebuild = true;
    c.trace = None;
    c.trace_format = None;
    c.trace_limit = None;
    c.trace_loops = None;
    c.workload = "random-write".into();
    c.read_fraction = None;
    c.duration_s = None;
    c.total = Some(Size(4096));
    c.scrub = false;
    c.grow = false;
    c.copy_back = false;
    // Offline: no users, so the rebuild goes at the maximum from the start
    // (the one request that starts the run would otherwise hold it to the
    // minimum for the pacer's half second, which a sample scales up).
    c.min_speed = c.max_speed;
    let probe = Setup::new(&c)?;
    c.to_spare = probe.layout.spare_slots() > 0;
    let mut setup = Setup::new(&c)?;
    let chunk = setup.layout.chunk_bytes().max(1);
    let window_stripes = (SAMPLE_BYTES / chunk / SAMPLE_WINDOWS as u64).max(1) as usize;
    setup.rebuild_sample = Some(RebuildSample {
        windows: SAMPLE_WINDOWS,
        window_stripes,
    });
    let rb = crate::sim::run_setup(&setup)?
        .rebuild
        .ok_or_else(|| format!("the simulator reported no rebuild of member {member}"))?;
    if !rb.completed {
        return Err(format!(
            "the rebuild of member {member} did not finish in the simulation; this is a hetraid bug"
        ));
    }
    let fraction = rb.sampled_fraction.unwrap_or(1.0);
    Ok(RebuildEstimate {
        member,
        seconds: rb.rebuild_time_s / fraction,
        sampled_fraction: fraction,
    })
}
