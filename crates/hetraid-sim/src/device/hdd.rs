//! A disk: seek curve, rotation, media transfer, per-command overhead, a queue
//! scheduler, read-ahead segments and an optional write-back cache.
//!
//! Positioning is geometric rather than drawn at random: the head has a cylinder,
//! the platter an angle (a function of simulated time), and an operation waits for
//! its first sector to come round. Random operations then average half a rotation,
//! and sequential ones that arrive in time pay none.

use super::{Counters, DevIo, Device, Mechanics, Started, INTERNAL};
use crate::kernel::{Ns, NS_PER_S};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Scheduler {
    #[default]
    Fifo,
    Sstf,
    Clook,
    /// Shortest positioning time first: seek and rotation to each queued
    /// command from where the head is now (DiskSim's default).
    Sptf,
}

impl Scheduler {
    pub fn parse(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().replace('_', "-").as_str() {
            "fifo" | "fcfs" => Ok(Self::Fifo),
            "sstf" => Ok(Self::Sstf),
            "clook" | "c-look" => Ok(Self::Clook),
            "sptf" => Ok(Self::Sptf),
            _ => Err(format!(
                "disk scheduler '{s}' is unknown; use fifo, sstf, clook or sptf"
            )),
        }
    }
}

/// Disk parameters (preset `[hdd]` tables).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct HddParams {
    pub rpm: u32,
    /// Seek times for a one-cylinder move, an average random seek, a full stroke.
    pub seek_single_ms: f64,
    pub seek_avg_ms: f64,
    pub seek_full_ms: f64,
    /// Sustained media rate, MB/s (10^6 bytes); with zones, at the outer edge.
    pub media_mbps: f64,
    /// Zoned recording: the media rate at the inner edge (it falls linearly from
    /// `media_mbps` at offset 0). Default: one rate everywhere.
    #[serde(default)]
    pub media_mbps_inner: Option<f64>,
    /// And at the middle of the capacity (the rate falls faster toward the
    /// inner edge on most drives); needs `media_mbps_inner`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_mbps_middle: Option<f64>,
    /// Media rate of writes where it differs from reads' (old drives that
    /// verify or remap as they write), MB/s at the same place.
    #[serde(default)]
    pub write_media_mbps: Option<f64>,
    /// Host interface rate for cache hits and write-back, MB/s.
    #[serde(default = "default_interface")]
    pub interface_mbps: f64,
    /// Recording surfaces (tracks per cylinder).
    #[serde(default = "default_heads")]
    pub heads: u32,
    /// Command processing time when a command reaches an idle disk, ms.
    #[serde(default)]
    pub overhead_ms: f64,
    #[serde(default)]
    pub scheduler: Scheduler,
    /// Commands the disk holds for its scheduler to choose from (its tagged
    /// queue); later ones wait in order behind them. Default: all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_depth: Option<u32>,
    /// Read-ahead cache segments (0 = no read cache).
    #[serde(default)]
    pub cache_segments: u32,
    /// Bytes read ahead past each read into its segment.
    #[serde(default)]
    pub readahead_bytes: u64,
    /// Write-back "immediate report": writes complete once in the cache.
    #[serde(default)]
    pub write_cache: bool,
    /// Write-back cache size in bytes.
    #[serde(default = "default_cache_bytes")]
    pub cache_bytes: u64,
    /// A measured seek profile (CSV: distance in cylinders, seek ms[, stddev]):
    /// a file shipped in `presets/`, or a path beside the device file.
    /// Interpolated linearly; the three-point fit above is for drives
    /// without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seek_table: Option<String>,
    /// The table's points (loaded with the device file).
    #[serde(skip)]
    pub seek_points: Vec<(u64, f64)>,
    /// Cylinders, where the drive's geometry is known (DiskSim models give
    /// it); otherwise derived from the capacity and the media rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cylinders: Option<u64>,
    /// Command processing per command type, as DiskSim's validated models
    /// have it; replaces `overhead_ms` (which applies only to commands that
    /// reach an idle disk).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overheads: Option<CommandOverheads>,
}

/// Controller overhead of a command by its type, whether the cache serves
/// it (a read hit, a write taken by the write-back cache) and the type of
/// the command before it, ms.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CommandOverheads {
    pub read_hit_after_read_ms: f64,
    pub read_hit_after_write_ms: f64,
    pub read_miss_after_read_ms: f64,
    pub read_miss_after_write_ms: f64,
    pub write_hit_after_read_ms: f64,
    pub write_hit_after_write_ms: f64,
    pub write_miss_after_read_ms: f64,
    pub write_miss_after_write_ms: f64,
}

impl CommandOverheads {
    fn all(&self) -> [f64; 8] {
        [
            self.read_hit_after_read_ms,
            self.read_hit_after_write_ms,
            self.read_miss_after_read_ms,
            self.read_miss_after_write_ms,
            self.write_hit_after_read_ms,
            self.write_hit_after_write_ms,
            self.write_miss_after_read_ms,
            self.write_miss_after_write_ms,
        ]
    }

    /// The overhead in ns of a command.
    fn ns(&self, write: bool, hit: bool, after_write: bool) -> Ns {
        let i = (write as usize) * 4 + (!hit as usize) * 2 + after_write as usize;
        (self.all()[i] * 1e6) as Ns
    }
}

/// Parse a seek table: `distance,ms[,stddev]` rows (a header row and `#`
/// comments allowed), distances increasing from 1, times positive.
pub fn parse_seek_table(text: &str, origin: &str) -> Result<Vec<(u64, f64)>, String> {
    let mut pts: Vec<(u64, f64)> = Vec::new();
    for (i, l) in text.lines().enumerate() {
        let l = l.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let f: Vec<&str> = l.split(',').map(str::trim).collect();
        let (Ok(d), Ok(t)) = (f[0].parse::<u64>(), f.get(1).unwrap_or(&"").parse::<f64>()) else {
            if pts.is_empty() && f[0].parse::<f64>().is_err() {
                continue; // the header
            }
            return Err(format!(
                "seek table {origin}:{}: expected 'distance,ms', got '{l}'",
                i + 1
            ));
        };
        // Measured times need not rise monotonically (the Cheetah's dip
        // by 3 µs around 10 cylinders); distances must.
        if d == 0 || pts.last().is_some_and(|&(pd, _)| d <= pd) || !(t > 0.0 && t.is_finite()) {
            return Err(format!(
                "seek table {origin}:{}: distances must increase from 1 and times be positive",
                i + 1
            ));
        }
        pts.push((d, t));
    }
    if pts.len() < 2 {
        return Err(format!("seek table {origin} has fewer than two points"));
    }
    Ok(pts)
}

fn default_interface() -> f64 {
    300.0
}
fn default_heads() -> u32 {
    4
}
fn default_cache_bytes() -> u64 {
    16 << 20
}

impl HddParams {
    pub fn validate(&self) -> Result<(), String> {
        let pos = |v: f64, what: &str| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(format!("hdd {what} must be a positive number"))
            }
        };
        pos(self.rpm as f64, "rpm")?;
        pos(self.seek_single_ms, "seek_single_ms")?;
        pos(self.media_mbps, "media_mbps")?;
        pos(self.interface_mbps, "interface_mbps")?;
        pos(self.heads as f64, "heads")?;
        if !(self.seek_single_ms <= self.seek_avg_ms && self.seek_avg_ms <= self.seek_full_ms) {
            return Err(
                "hdd seek times must satisfy seek_single_ms <= seek_avg_ms <= seek_full_ms".into(),
            );
        }
        if let Some(w) = self.write_media_mbps {
            if !(w > 0.0 && w.is_finite()) {
                return Err("hdd write_media_mbps must be a positive rate".into());
            }
        }
        if let Some(inner) = self.media_mbps_inner {
            if !(inner > 0.0 && inner <= self.media_mbps) {
                return Err("hdd media_mbps_inner must be positive and at most media_mbps".into());
            }
        }
        match (self.media_mbps_middle, self.media_mbps_inner) {
            (Some(_), None) => {
                return Err(
                    "hdd media_mbps_middle needs media_mbps_inner (the rate at the inner edge)"
                        .into(),
                )
            }
            (Some(m), Some(inner)) if !(m >= inner && m <= self.media_mbps) => {
                return Err(
                    "hdd media_mbps_middle must lie between media_mbps_inner and media_mbps".into(),
                )
            }
            _ => {}
        }
        if !(self.overhead_ms >= 0.0 && self.overhead_ms.is_finite()) {
            return Err("hdd overhead_ms must be zero or positive".into());
        }
        if let Some(o) = &self.overheads {
            if o.all().iter().any(|v| !(*v >= 0.0 && v.is_finite())) {
                return Err("hdd overheads must be zero or positive numbers of ms".into());
            }
        }
        if self.cylinders == Some(0) {
            return Err("hdd cylinders must be at least 1".into());
        }
        Ok(())
    }
}

/// Seek time t(d) = a + b·sqrt(d) + c·d for d ≥ 1 cylinders, fitted so that t(1) is
/// the single-track seek, t(C) the full stroke, and the *mean over random seeks*
/// (distance density 2(C−d)/C², E[sqrt D] = 8/15·sqrt C, E[D] = C/3) the datasheet's
/// average — datasheets define the average that way, not as t(C/3).
#[derive(Debug, Clone)]
pub enum SeekCurve {
    Fit {
        a: f64,
        b: f64,
        c: f64,
    },
    /// Measured points (distance, ns), interpolated linearly; beyond the
    /// last point, extended along the last segment.
    Table(Vec<(f64, f64)>),
}

impl SeekCurve {
    pub fn table(points: &[(u64, f64)]) -> Self {
        Self::Table(points.iter().map(|&(d, ms)| (d as f64, ms * 1e6)).collect())
    }

    pub fn fit(single_ns: f64, avg_ns: f64, full_ns: f64, cylinders: u64) -> Self {
        let cyl = cylinders.max(2) as f64;
        let sq = cyl.sqrt();
        // Rows: [1, sqrt d, d] at d = 1, the random mean, d = C.
        let m = [
            [1.0, 1.0, 1.0],
            [1.0, 8.0 / 15.0 * sq, cyl / 3.0],
            [1.0, sq, cyl],
        ];
        let v = [single_ns, avg_ns, full_ns];
        let det = |m: [[f64; 3]; 3]| {
            m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
                - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
                + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
        };
        let d = det(m);
        let col = |k: usize| {
            let mut mm = m;
            for r in 0..3 {
                mm[r][k] = v[r];
            }
            det(mm) / d
        };
        Self::Fit {
            a: col(0),
            b: col(1),
            c: col(2),
        }
    }

    pub fn seek_ns(&self, distance: u64) -> Ns {
        if distance == 0 {
            return 0;
        }
        let d = distance as f64;
        match self {
            Self::Fit { a, b, c } => (a + b * d.sqrt() + c * d).max(0.0) as Ns,
            Self::Table(p) => {
                let i = p.partition_point(|&(x, _)| x < d);
                let (lo, hi) = match i {
                    0 => return p[0].1 as Ns,
                    i if i == p.len() => (p[i - 2], p[i - 1]),
                    i => (p[i - 1], p[i]),
                };
                let t = lo.1 + (hi.1 - lo.1) * (d - lo.0) / (hi.0 - lo.0);
                t.max(0.0) as Ns
            }
        }
    }
}

/// Read-ahead as drives do it: after a read the head keeps streaming the
/// following sectors into the cache at the media rate, staying up to
/// `readahead_bytes` ahead of what the host has taken; a command that needs the head
/// elsewhere ends the stream.
#[derive(Debug, Clone, Copy)]
struct Stream {
    /// The head was at byte `origin_pos` at time `origin_ns`, moving at the media rate.
    origin_ns: Ns,
    origin_pos: u64,
    /// End of the data the host has read from this stream.
    consumed: u64,
    /// Media rate where the stream began (zones change slowly).
    ns_per_byte: f64,
}

/// Zoned recording: the media rate (and with it the bytes per track, the
/// platter turning at one speed) given at evenly spaced fractions of the
/// capacity — outer edge, [middle,] inner edge — and linear in the cylinder
/// between them. A segment holding 1/k of the bytes takes cylinders in
/// inverse proportion to its mean rate, so a middle rate measured at the
/// middle LBA lands there (outer cylinders hold more).
#[derive(Debug, Clone)]
struct Zones {
    segs: Vec<ZoneSeg>,
    /// Surfaces times `track_scale`: bytes per cylinder over (rate x turn).
    heads: f64,
    /// Bytes a track holds per byte its media rate moves in a turn: 1, or
    /// what a known cylinder count makes it (the sustained rate counts head
    /// and track switches the track's capacity does not).
    track_scale: f64,
    rev_s: f64,
    cylinders: u64,
}

/// Cylinders `c0 .. c0 + len`: rate `r0 + slope * (c - c0)` bytes/s, `b0`
/// bytes before them.
#[derive(Debug, Clone, Copy)]
struct ZoneSeg {
    c0: f64,
    len: f64,
    r0: f64,
    slope: f64,
    b0: f64,
}

impl Zones {
    /// `rates_bps`: at least two rates, outer edge first.
    fn new(
        rates_bps: &[f64],
        heads: u32,
        rev_ns: Ns,
        capacity: u64,
        cylinders: Option<u64>,
    ) -> Self {
        assert!(rates_bps.len() >= 2 && rates_bps.iter().all(|r| *r > 0.0));
        let rev_s = rev_ns as f64 / 1e9;
        let k = (rates_bps.len() - 1) as f64;
        let h = heads as f64 * rev_s;
        // Cylinders per segment at one track per rate-turn: each holds 1/k
        // of the bytes at its mean rate.
        let natural: Vec<f64> = rates_bps
            .windows(2)
            .map(|w| 2.0 * capacity as f64 / (k * h * (w[0] + w[1])))
            .collect();
        let total: f64 = natural.iter().sum();
        let (cylinders, scale) = match cylinders {
            Some(c) => (c.max(2), total / c.max(2) as f64),
            None => ((total.ceil() as u64).max(2), 1.0),
        };
        let stretch = cylinders as f64 / total;
        let hs = h * scale;
        let mut segs = Vec::with_capacity(natural.len());
        let (mut c0, mut b0) = (0.0, 0.0);
        for (w, n) in rates_bps.windows(2).zip(&natural) {
            let len = n * stretch;
            let slope = (w[1] - w[0]) / len;
            segs.push(ZoneSeg {
                c0,
                len,
                r0: w[0],
                slope,
                b0,
            });
            b0 += hs * (w[0] * len + slope * len * len / 2.0);
            c0 += len;
        }
        Self {
            segs,
            heads: heads as f64 * scale,
            track_scale: scale,
            rev_s,
            cylinders,
        }
    }

    fn seg_at_cylinder(&self, c: f64) -> &ZoneSeg {
        self.segs
            .iter()
            .rev()
            .find(|s| s.c0 <= c)
            .unwrap_or(&self.segs[0])
    }

    /// Media rate (bytes/s) on cylinder `c`.
    fn rate(&self, c: u64) -> f64 {
        let s = self.seg_at_cylinder(c as f64);
        (s.r0 + s.slope * (c as f64 - s.c0).min(s.len)).max(1.0)
    }

    /// Bytes before cylinder `c`: the sum of heads x track bytes over the cylinders
    /// before it (continuous form).
    fn bytes_before(&self, c: f64) -> f64 {
        let s = self.seg_at_cylinder(c);
        let x = (c - s.c0).min(s.len);
        s.b0 + self.heads * self.rev_s * (s.r0 * x + s.slope * x * x / 2.0)
    }

    fn cylinder_of(&self, off: u64) -> u64 {
        let y = off as f64;
        let s = self
            .segs
            .iter()
            .rev()
            .find(|s| s.b0 <= y)
            .unwrap_or(&self.segs[0]);
        let y = (y - s.b0) / (self.heads * self.rev_s);
        let x = if s.slope.abs() < 1e-9 {
            y / s.r0
        } else {
            // The root of r0·x + slope·x²/2 = y inside the segment.
            let d = (s.r0 * s.r0 + 2.0 * s.slope * y).max(0.0);
            (d.sqrt() - s.r0) / s.slope
        };
        ((s.c0 + x).max(0.0) as u64).min(self.cylinders - 1)
    }

    /// Where `off` sits along its cylinder's tracks, as a fraction of a turn.
    fn angle(&self, off: u64) -> f64 {
        let c = self.cylinder_of(off);
        let track = self.rate(c) * self.rev_s * self.track_scale;
        let rem = (off as f64 - self.bytes_before(c as f64)).max(0.0);
        (rem % track) / track
    }
}

pub struct Hdd {
    p: HddParams,
    zones: Option<Zones>,
    capacity: u64,
    rev_ns: Ns,
    track_bytes: u64,
    cylinders: u64,
    seek: SeekCurve,
    /// Bytes per cylinder (tracks x heads) and transfer cost per byte.
    cylinder_bytes: u64,
    media_ns_per_byte: f64,
    interface_ns_per_byte: f64,
    overhead_ns: Ns,
    cyl: u64,
    busy: bool,
    queue: VecDeque<DevIo>,
    /// Recently read extents, most recent last: [start, end) (re-reads hit).
    segments: VecDeque<(u64, u64)>,
    /// The read-ahead stream after the last read from the media, if the head is
    /// still on it.
    stream: Option<Stream>,
    /// Bytes accepted by the write-back cache and not yet on the media.
    dirty_bytes: u64,
    /// Their media writes, waiting for the disk (host commands go first
    /// unless the cache is too full to take the next write).
    destage: VecDeque<(DevIo, Ns)>,
    /// When the controller is free to take the next write into the cache
    /// (it works beside the media: a write is taken while a destage runs).
    ctrl_free: Ns,
    /// Where the last write the cache took ends.
    accepted_end: u64,
    /// When the media operation in service ends.
    busy_until: Ns,
    /// The last host command was a write (command overheads depend on it).
    last_write: bool,
    counters: Counters,
    mechanics: Mechanics,
}

impl Hdd {
    pub fn new(p: HddParams, capacity: u64) -> Self {
        let rev_ns = 60 * NS_PER_S / p.rpm as u64;
        let media_bps = p.media_mbps * 1e6;
        let track_bytes = ((media_bps * rev_ns as f64 / 1e9) as u64 / 512).max(1) * 512;
        let zones = p
            .media_mbps_inner
            .filter(|&inner| inner < p.media_mbps || p.media_mbps_middle.is_some())
            .map(|inner| {
                let rates: Vec<f64> = std::iter::once(p.media_mbps)
                    .chain(p.media_mbps_middle)
                    .chain(std::iter::once(inner))
                    .map(|r| r * 1e6)
                    .collect();
                Zones::new(&rates, p.heads, rev_ns, capacity, p.cylinders)
            });
        // Without zones, a known cylinder count sets the track size.
        let track_bytes = match (p.cylinders, &zones) {
            (Some(c), None) => (capacity.div_ceil(c.max(2) * p.heads as u64) / 512).max(1) * 512,
            _ => track_bytes,
        };
        let cylinders = match &zones {
            Some(z) => z.cylinders,
            None => capacity.div_ceil(track_bytes * p.heads as u64).max(2),
        };
        let ms = |v: f64| v * 1e6;
        let seek = if p.seek_points.is_empty() {
            SeekCurve::fit(
                ms(p.seek_single_ms),
                ms(p.seek_avg_ms),
                ms(p.seek_full_ms),
                cylinders,
            )
        } else {
            SeekCurve::table(&p.seek_points)
        };
        Self {
            zones,
            overhead_ns: ms(p.overhead_ms) as Ns,
            cylinder_bytes: track_bytes * p.heads as u64,
            interface_ns_per_byte: 1e9 / (p.interface_mbps * 1e6),
            p,
            capacity,
            rev_ns,
            track_bytes,
            cylinders,
            seek,
            media_ns_per_byte: 1e9 / media_bps,
            cyl: 0,
            busy: false,
            queue: VecDeque::new(),
            segments: VecDeque::new(),
            stream: None,
            dirty_bytes: 0,
            destage: VecDeque::new(),
            ctrl_free: 0,
            accepted_end: u64::MAX,
            busy_until: 0,
            last_write: false,
            counters: Counters::default(),
            mechanics: Mechanics::default(),
        }
    }

    pub fn cylinders(&self) -> u64 {
        self.cylinders
    }
    pub fn rotation_ns(&self) -> Ns {
        self.rev_ns
    }
    pub fn seek_curve(&self) -> SeekCurve {
        self.seek.clone()
    }

    fn cylinder_of(&self, off: u64) -> u64 {
        match &self.zones {
            Some(z) => z.cylinder_of(off),
            None => (off / self.cylinder_bytes).min(self.cylinders - 1),
        }
    }

    /// Rotational position of `off`, in ns after the track's index.
    fn angle_ns(&self, off: u64) -> Ns {
        match &self.zones {
            Some(z) => (z.angle(off) * self.rev_ns as f64) as Ns,
            None => (off % self.track_bytes) * self.rev_ns / self.track_bytes,
        }
    }

    /// Media transfer cost per byte at `off`.
    /// A write's media time per byte at `off`: the read rate's, scaled by
    /// `write_media_mbps` where given.
    fn write_ns_per_byte_at(&self, off: u64) -> f64 {
        let r = self.media_ns_per_byte_at(off);
        match self.p.write_media_mbps {
            Some(w) => r * self.p.media_mbps / w,
            None => r,
        }
    }

    fn media_ns_per_byte_at(&self, off: u64) -> f64 {
        match &self.zones {
            Some(z) => 1e9 / z.rate(z.cylinder_of(off)),
            None => self.media_ns_per_byte,
        }
    }

    fn transfer_ns(&self, len: u64, ns_per_byte: f64) -> Ns {
        (len as f64 * ns_per_byte) as Ns
    }

    fn cache_hit(&self, io: &DevIo) -> bool {
        !io.write
            && self
                .segments
                .iter()
                .any(|&(s, e)| s <= io.offset && io.offset + io.len <= e)
    }

    /// Cache what a read brought in; a write makes overlapping data stale.
    fn remember(&mut self, io: &DevIo) {
        if self.p.cache_segments == 0 {
            return;
        }
        let (s, e) = (io.offset, io.offset + io.len);
        if io.write {
            // Most writes overlap nothing cached: look before rebuilding the queue.
            if self.segments.iter().any(|&(a, b)| a < e && s < b) {
                self.segments.retain(|&(a, b)| b <= s || e <= a);
            }
            return;
        }
        if self.segments.len() == self.p.cache_segments as usize {
            self.segments.pop_front();
        }
        self.segments.push_back((s, e));
    }

    /// When the stream has (or will have) read up to byte `pos`, if it can: the
    /// stream pauses once it is `readahead_bytes` past what the host consumed, and
    /// bytes before its origin were never in it.
    fn stream_ready(&self, st: &Stream, start: u64, pos: u64, now: Ns) -> Option<Ns> {
        if start < st.origin_pos || start > st.consumed {
            return None;
        }
        let cap = st.consumed + self.p.readahead_bytes;
        let paused_at = st.origin_ns + ((cap - st.origin_pos) as f64 * st.ns_per_byte) as Ns;
        if pos > cap && now > paused_at {
            // The buffer filled and the head stopped: resuming costs a rotation.
            return None;
        }
        Some(st.origin_ns + ((pos - st.origin_pos) as f64 * st.ns_per_byte) as Ns)
    }

    /// Does the write-back cache take this write (rather than the media)?
    fn cached_write(&self, io: &DevIo) -> bool {
        io.write && io.tag != INTERNAL && self.p.write_cache && io.len <= self.p.cache_bytes
    }

    /// The controller takes queued writes into the write-back cache while it
    /// has room (DiskSim's "immediate report"), each after its processing
    /// and interface transfer, beside whatever the media does: in queue
    /// order up to the first command that needs the media (FCFS, SSTF,
    /// C-LOOK), or every such write among the commands it holds (SPTF, a
    /// tagged queue). Each is reported done then; its media write joins the
    /// destages.
    fn take_writes(&mut self, now: Ns, started: &mut Started) {
        let window = self
            .queue
            .len()
            .min(self.p.queue_depth.map_or(usize::MAX, |d| d.max(1) as usize));
        let mut i = 0;
        // A random write is taken only while the media is free, and then
        // one (its media write follows before the next command, as on
        // DiskSim's disk); a write that continues the last one taken (a
        // sequential stream) is taken while the media works.
        let mut random_taken = self.busy;
        // Bounded: each round takes a command or moves past one.
        while i < window.min(self.queue.len()) {
            let io = self.queue[i];
            let sequential = io.offset == self.accepted_end;
            let room =
                self.dirty_bytes + io.len <= self.p.cache_bytes && (sequential || !random_taken);
            if !self.cached_write(&io) || !room {
                if self.p.scheduler == Scheduler::Sptf && !self.cached_write(&io) {
                    i += 1;
                    continue;
                }
                break;
            }
            self.queue.remove(i);
            let overhead = match &self.p.overheads {
                Some(o) => o.ns(true, true, std::mem::replace(&mut self.last_write, true)),
                None => self.overhead_ns,
            };
            let end = now.max(self.ctrl_free)
                + overhead
                + self.transfer_ns(io.len, self.interface_ns_per_byte);
            self.ctrl_free = end;
            random_taken |= !sequential;
            self.accepted_end = io.offset + io.len;
            self.dirty_bytes += io.len;
            self.remember(&io);
            self.destage.push_back((
                DevIo {
                    tag: INTERNAL,
                    ..io
                },
                end,
            ));
            started.push((io.tag, end));
        }
    }

    /// Start the media's next operation, if it is free and has one.
    fn start_media(&mut self, now: Ns, started: &mut Started, fresh: bool) {
        if self.busy {
            return;
        }
        if let Some((io, ready)) = self.pick(now) {
            self.busy = true;
            let end = self.serve(now.max(ready), &io, fresh);
            self.busy_until = end;
            started.push((io.tag, end));
        }
    }

    /// Serve `io` starting at `now`; returns its finish time. `fresh` = it reached
    /// an idle disk, so the command overhead is not hidden behind earlier work.
    fn serve(&mut self, now: Ns, io: &DevIo, fresh: bool) -> Ns {
        let xfer = self.transfer_ns(io.len, self.interface_ns_per_byte);
        let streamed = match (&self.stream, io.write, self.p.cache_segments > 0) {
            (Some(st), false, true) => self.stream_ready(st, io.offset, io.offset + io.len, now),
            _ => None,
        };
        // The controller's processing: per command type where the model
        // gives it (a destage is the disk's own work and pays none), else
        // the flat overhead of a command reaching an idle disk.
        let overhead = match &self.p.overheads {
            Some(o) if io.tag != INTERNAL => {
                let hit = streamed.is_some() || self.cache_hit(io);
                let ns = o.ns(io.write, hit, self.last_write);
                self.last_write = io.write;
                ns
            }
            Some(_) => 0,
            None if fresh => self.overhead_ns,
            None => 0,
        };
        let start = now + overhead;
        self.mechanics.overhead_ns += overhead;
        let end = if let Some(ready) = streamed {
            // Sequential: the data is (or soon will be) in the read-ahead.
            let st = self.stream.as_mut().expect("stream");
            st.consumed = st.consumed.max(io.offset + io.len);
            self.mechanics.cache_hits += 1;
            (start + xfer).max(ready)
        } else if self.cache_hit(io) {
            self.mechanics.cache_hits += 1;
            start + xfer
        } else {
            let target = self.cylinder_of(io.offset);
            let seek = self.seek.seek_ns(target.abs_diff(self.cyl));
            let at = start + seek;
            let angle = self.angle_ns(io.offset);
            let wait = (angle + self.rev_ns - at % self.rev_ns) % self.rev_ns;
            self.cyl = self.cylinder_of(io.offset + io.len.max(1) - 1);
            let on_media = at + wait;
            // A read from the media starts a stream; anything else ends it.
            let ns_per_byte = if io.write {
                self.write_ns_per_byte_at(io.offset)
            } else {
                self.media_ns_per_byte_at(io.offset)
            };
            self.stream = (!io.write).then_some(Stream {
                origin_ns: on_media,
                origin_pos: io.offset,
                consumed: io.offset + io.len,
                ns_per_byte,
            });
            self.remember(io);
            let media = self.transfer_ns(io.len, ns_per_byte);
            let m = &mut self.mechanics;
            m.media_ops += 1;
            m.seek_ns += seek;
            m.rotation_ns += wait;
            m.transfer_ns += media;
            on_media + media
        };
        if io.tag == INTERNAL {
            self.dirty_bytes -= io.len;
        }
        self.counters.busy(now, end, io.write);
        end
    }

    /// Positioning time to `io` from where the head is at `now`: the
    /// command's overhead, the seek and the wait for its first sector (0 for
    /// what the cache serves).
    fn positioning_ns(&self, now: Ns, io: &DevIo) -> Ns {
        // A write for the write-back cache is placed by where its media
        // write goes: the disk writes it once it is taken.
        if self.cache_hit(io) {
            return 0;
        }
        let overhead = match &self.p.overheads {
            Some(o) => o.ns(io.write, false, self.last_write),
            None => 0,
        };
        let seek = self
            .seek
            .seek_ns(self.cylinder_of(io.offset).abs_diff(self.cyl));
        let at = now + overhead + seek;
        let wait = (self.angle_ns(io.offset) + self.rev_ns - at % self.rev_ns) % self.rev_ns;
        overhead + seek + wait
    }

    /// The media's next operation (and when it may start): a destage of a
    /// write the cache took (at once under FCFS, SSTF and C-LOOK; by
    /// positioning time among the queued commands under SPTF), else a host
    /// command by the scheduler among the first `queue_depth`. Writes the
    /// cache will take are the controller's, not the media's.
    fn pick(&mut self, now: Ns) -> Option<(DevIo, Ns)> {
        let depth = self.p.queue_depth.map_or(usize::MAX, |d| d.max(1) as usize);
        let window: Vec<usize> = (0..self.queue.len().min(depth))
            .filter(|&i| !self.cached_write(&self.queue[i]))
            .collect();
        if !self.destage.is_empty() {
            if self.p.scheduler != Scheduler::Sptf || window.is_empty() {
                // The media write follows its acceptance at once, as a FCFS
                // disk of DiskSim's does.
                return self.destage.pop_front();
            }
            let host = window
                .iter()
                .map(|&i| (self.positioning_ns(now, &self.queue[i]), i))
                .min();
            let (dt, di) = (0..self.destage.len())
                .map(|i| {
                    (
                        self.positioning_ns(now.max(self.destage[i].1), &self.destage[i].0),
                        i,
                    )
                })
                .min()
                .expect("a destage");
            return match host {
                Some((ht, hi)) if ht <= dt => self.queue.remove(hi).map(|io| (io, now)),
                _ => self.destage.remove(di),
            };
        }
        let cur = self.cyl;
        let i = match self.p.scheduler {
            Scheduler::Fifo => *window.first()?,
            Scheduler::Sstf => *window
                .iter()
                .min_by_key(|&&i| self.cylinder_of(self.queue[i].offset).abs_diff(cur))?,
            Scheduler::Clook => *window.iter().min_by_key(|&&i| {
                let c = self.cylinder_of(self.queue[i].offset);
                // Ahead of the head first (ascending), then wrap to the lowest.
                (c < cur, c)
            })?,
            Scheduler::Sptf => *window
                .iter()
                .min_by_key(|&&i| (self.positioning_ns(now, &self.queue[i]), i))?,
        };
        self.queue.remove(i).map(|io| (io, now))
    }
}

impl Device for Hdd {
    fn submit(&mut self, now: Ns, io: DevIo, started: &mut Started) {
        self.counters.count(&io);
        // A write for the write-back cache waits in the queue like any
        // command: the cache takes it when the controller reaches it.
        let fresh = !self.busy;
        self.queue.push_back(io);
        self.take_writes(now, started);
        self.start_media(now, started, fresh);
    }

    fn complete(&mut self, now: Ns, started: &mut Started) {
        // Only the end of the media operation in service frees the media.
        if self.busy && now < self.busy_until {
            return;
        }
        self.busy = false;
        // A destage done makes room: the controller may take more writes.
        self.take_writes(now, started);
        self.start_media(now, started, false);
    }

    fn capacity(&self) -> u64 {
        self.capacity
    }
    fn counters(&self) -> &Counters {
        &self.counters
    }
    fn counters_mut(&mut self) -> &mut Counters {
        &mut self.counters
    }
    fn mechanics(&self) -> Option<Mechanics> {
        Some(self.mechanics)
    }
    fn service_model(&self) -> hetraid_core::ServiceModel {
        hetraid_core::ServiceModel {
            position_ns: (self.p.seek_avg_ms * 1e6) as u64 + self.rev_ns / 2 + self.overhead_ns,
            bytes_per_s: (self.p.media_mbps * 1e6) as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Zoned geometry: cylinders grow with the offset, the disk's bytes fill its
    /// cylinders, and every byte has an angle within one turn.
    #[test]
    fn zones_map_every_byte_inside_the_disk() {
        let cap = 640_000_000_000u64;
        for rates in [&[120e6, 60e6][..], &[120e6, 105e6, 60e6][..]] {
            for cyl in [None, Some(300_000)] {
                check_zones(&Zones::new(rates, 4, 60 * NS_PER_S / 7200, cap, cyl), cap);
            }
        }
    }

    /// A middle rate given at the middle of the capacity is the rate there.
    #[test]
    fn a_middle_rate_lands_at_the_middle_lba() {
        let cap = 146_944_000_000u64;
        let z = Zones::new(
            &[137e6, 115e6, 65e6],
            4,
            60 * NS_PER_S / 15020,
            cap,
            Some(72_170),
        );
        let mid = z.rate(z.cylinder_of(cap / 2)) / 1e6;
        assert!((mid - 115.0).abs() < 0.1, "{mid} MB/s at the middle");
        assert!((z.rate(0) / 1e6 - 137.0).abs() < 0.01);
        assert!((z.rate(z.cylinder_of(cap - 1)) / 1e6 - 65.0).abs() < 0.1);
    }

    fn check_zones(z: &Zones, cap: u64) {
        let mut last = 0;
        let mut x = 12345u64;
        let mut offs: Vec<u64> = (0..10_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x % cap
            })
            .collect();
        offs.extend([0, 1, cap - 1]);
        offs.sort_unstable();
        for off in offs {
            let c = z.cylinder_of(off);
            assert!(c >= last && c < z.cylinders, "offset {off}: cylinder {c}");
            last = c;
            let a = z.angle(off);
            assert!((0.0..1.0).contains(&a), "offset {off}: angle {a}");
        }
        // The last byte is on (or next to) the innermost cylinder.
        assert!(z.cylinders - 1 - z.cylinder_of(cap - 1) <= 1);
        let total = z.bytes_before(z.cylinders as f64);
        assert!(
            (total - cap as f64).abs() < z.heads * z.rev_s * z.segs[0].r0,
            "{total}"
        );
    }
}
