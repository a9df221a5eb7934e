//! One simulation run, as a TOML table or command-line flags.

use hetraid_core::units::parse_size;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A byte count written as `65536` or `"64K"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size(pub u64);

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(u64),
            Str(String),
        }
        match Raw::deserialize(d)? {
            Raw::Int(v) => Ok(Size(v)),
            Raw::Str(s) => parse_size(&s).map(Size).map_err(serde::de::Error::custom),
        }
    }
}

impl Serialize for Size {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.0)
    }
}

impl std::str::FromStr for Size {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        parse_size(s).map(Size)
    }
}

/// A duration in seconds: a number, or a number with a unit (`500ms`,
/// `10s`, `2m`, `1h`).
pub fn parse_duration_s(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num.trim().parse().map_err(|_| {
        format!("duration '{s}' is not a number with an optional unit (ms, s, m, h)")
    })?;
    let scale = match unit.trim() {
        "" | "s" => 1.0,
        "ms" => 1e-3,
        "us" | "µs" => 1e-6,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        u => {
            return Err(format!(
                "duration '{s}': unit '{u}' is unknown; use ms, s, m or h"
            ))
        }
    };
    let secs = v * scale;
    if !(secs.is_finite() && secs > 0.0) {
        return Err(format!("duration '{s}' must be above zero"));
    }
    Ok(secs)
}

fn de_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Num(f64),
        Str(String),
    }
    match Option::<Raw>::deserialize(d)? {
        None => Ok(None),
        Some(Raw::Num(v)) => Ok(Some(v)),
        Some(Raw::Str(s)) => parse_duration_s(&s)
            .map(Some)
            .map_err(serde::de::Error::custom),
    }
}

/// Failed members: `2`, or `[1, 2]` in TOML and `1,2` on the command line. The
/// first is the one `rebuild` replaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedSet(pub Vec<usize>);

impl FailedSet {
    pub fn first(&self) -> usize {
        self.0[0]
    }
}

impl From<usize> for FailedSet {
    fn from(m: usize) -> Self {
        FailedSet(vec![m])
    }
}

impl<'de> Deserialize<'de> for FailedSet {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            One(usize),
            Many(Vec<usize>),
        }
        match Raw::deserialize(d)? {
            Raw::One(m) => Ok(FailedSet(vec![m])),
            Raw::Many(v) if !v.is_empty() => Ok(FailedSet(v)),
            Raw::Many(_) => Err(serde::de::Error::custom("failed lists no member")),
        }
    }
}

impl Serialize for FailedSet {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0.as_slice() {
            [one] => s.serialize_u64(*one as u64),
            many => many.serialize(s),
        }
    }
}

impl std::str::FromStr for FailedSet {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let v: Result<Vec<usize>, _> = s.split(',').map(|x| x.trim().parse::<usize>()).collect();
        match v {
            Ok(v) if !v.is_empty() => Ok(FailedSet(v)),
            _ => Err(format!(
                "'{s}' is not a member list; write it like 2 or 1,3"
            )),
        }
    }
}

/// Parity weights as given: a list, or `auto`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Weights {
    List(Vec<u64>),
    Auto,
}

impl std::str::FromStr for Weights {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s.trim() == "auto" {
            return Ok(Weights::Auto);
        }
        s.split(',')
            .map(|x| x.trim().parse::<u64>())
            .collect::<Result<Vec<u64>, _>>()
            .map(Weights::List)
            .map_err(|_| {
                format!(
                    "'{s}' is not a weight list; write it like 1,1,1,3,3 (one per member) or auto"
                )
            })
    }
}

impl<'de> Deserialize<'de> for Weights {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            List(Vec<u64>),
            Word(String),
        }
        match Raw::deserialize(d)? {
            Raw::List(v) => Ok(Weights::List(v)),
            Raw::Word(w) => w.parse().map_err(serde::de::Error::custom),
        }
    }
}

impl Serialize for Weights {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Weights::List(v) => v.serialize(s),
            Weights::Auto => s.serialize_str("auto"),
        }
    }
}

/// Everything one run needs. Field names are the TOML keys and, with `-` for `_`,
/// the `hetraid sim` flags.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RunConfig {
    /// Layout name (as `hetraid create --layout`).
    pub layout: String,
    /// Devices in member order: `caviar-black-640*4,x25e-64`.
    pub members: String,
    #[serde(default = "d_chunk")]
    pub chunk: Size,
    /// Parity weights (RAIDH, RAIDX5/6): a list, one per member, or
    /// "auto" (from the devices' service rates and the workload's read
    /// share, core `weights::auto_weights`).
    #[serde(default)]
    pub weights: Option<Weights>,
    #[serde(default)]
    pub parity_order: Option<String>,
    #[serde(default)]
    pub copies: Option<usize>,
    #[serde(default)]
    pub group: Option<usize>,
    #[serde(default)]
    pub partitions: Option<usize>,
    #[serde(default)]
    pub spare_partitions: usize,
    #[serde(default)]
    pub chunks_per_bundle: Option<usize>,
    #[serde(default)]
    pub raidx_level: Option<String>,
    /// Declustered: members per redundancy group (parity included).
    #[serde(default)]
    pub width: Option<usize>,
    /// Declustered: parity chunks per group, 1 or 2 (default 1).
    #[serde(default)]
    pub parity: Option<usize>,
    /// Declustered: spare chunks per row (default 1).
    #[serde(default)]
    pub spares: Option<usize>,
    /// md, modthresh, modthresh-stripe (the threshold decided per stripe), rmw-always, cost.
    #[serde(default = "d_policy")]
    pub policy: String,
    /// random-write, random-read, seq-write, seq-read, mixed, trace.
    #[serde(default = "d_workload")]
    pub workload: String,
    /// Share of reads for `mixed` (0..1).
    #[serde(default)]
    pub read_fraction: Option<f64>,
    /// Request size.
    #[serde(default = "d_size")]
    pub size: Size,
    /// Offsets of random requests are multiples of this (default 4K, or the size
    /// when it is smaller).
    #[serde(default)]
    pub align: Option<Size>,
    /// Or: random offsets are multiples of the request size (fio's default,
    /// `blockalign` = `bs`), so a request no larger than a chunk never
    /// crosses a chunk boundary.
    #[serde(default)]
    pub align_to_size: bool,
    /// Outstanding requests (closed loop; trace replay "afap").
    #[serde(default = "d_qd")]
    pub qd: u32,
    /// Bytes to issue (closed loop). Default 256M, the thesis's per-point amount.
    #[serde(default)]
    pub total: Option<Size>,
    /// Or: stop issuing after this much simulated time (seconds, or with a
    /// unit: `10s`, `500ms`, `2m`; the TOML key `duration` too).
    #[serde(default, alias = "duration", deserialize_with = "de_duration")]
    pub duration_s: Option<f64>,
    /// Addressed bytes from the start of the array (default: all of it).
    #[serde(default)]
    pub span: Option<Size>,
    /// Use only this many bytes of each member (like mdadm --size).
    #[serde(default)]
    pub member_size: Option<Size>,
    /// Trace file and its format: spc, msr, blkparse, disksim.
    #[serde(default)]
    pub trace: Option<String>,
    #[serde(default)]
    pub trace_format: Option<String>,
    /// timed (issue at recorded times) or afap (as fast as possible, qd outstanding).
    #[serde(default = "d_replay")]
    pub replay: String,
    /// Recorded inter-arrival times are multiplied by this in timed replay.
    #[serde(default = "d_one")]
    pub time_scale: f64,
    /// Replay at most this many trace records.
    #[serde(default)]
    pub trace_limit: Option<usize>,
    /// Replay the trace this many times back to back (fio's `loops`): each
    /// pass starts one mean inter-arrival gap after the last one's end.
    #[serde(default)]
    pub trace_loops: Option<u32>,
    /// A member that is failed from the start (degraded mode).
    #[serde(default)]
    pub failed: Option<FailedSet>,
    /// Replace `failed` by a fresh device at time 0 and rebuild it under the load.
    #[serde(default)]
    pub rebuild: bool,
    /// Scrub the array at time 0 under the load: read every stripe and
    /// check it, paced by min_speed/max_speed as the engine's scrub is.
    #[serde(default)]
    pub scrub: bool,
    /// Grow the array at time 0 under the load: the last member is the one
    /// added, and the data is restriped onto all of them window by window
    /// (RAID5, RAID6), paced by min_speed/max_speed, as `hetraid grow --add`
    /// runs it on a served array.
    #[serde(default)]
    pub grow: bool,
    /// A write-back log (or HPDA's) is reclaimed once the array has been
    /// quiet this many seconds (`hetraid serve --reclaim-idle`; default 5,
    /// HPDA's monitor 0.5).
    #[serde(default)]
    pub reclaim_idle: Option<f64>,
    /// Rebuild into spare space on the other members (S2-RAID with spare
    /// partitions) instead of onto a replacement device.
    #[serde(default)]
    pub to_spare: bool,
    /// After the rebuild into distributed spare space, put a fresh device
    /// in the failed member's slot and copy its chunks back onto it
    /// (`hetraid rebalance`, dRAID's rebalance): declustered layouts.
    #[serde(default)]
    pub copy_back: bool,
    /// MD's speed_limit_min / speed_limit_max, bytes per second.
    #[serde(default = "d_min_speed")]
    pub min_speed: Size,
    #[serde(default = "d_max_speed")]
    pub max_speed: Size,
    /// What the two limits hold during a rebuild: `array` (the whole rebuild,
    /// MD on one device; the default) or `stream` (each parallel stream, as
    /// one md device per S2-RAID subRAID in the paper's prototype).
    #[serde(default)]
    pub pace: Option<String>,
    #[serde(default = "d_seed")]
    pub seed: u64,
    /// Parity arithmetic rate, MB/s (0 = free).
    #[serde(default = "d_xor")]
    pub xor_mbps: f64,
    /// Override every disk's queue scheduler: fifo, sstf, clook, sptf.
    #[serde(default)]
    pub scheduler: Option<String>,
    /// Override every disk's command queue depth (what its scheduler sees).
    #[serde(default)]
    pub disk_queue: Option<u32>,
    /// Override every disk's write-back cache.
    #[serde(default)]
    pub write_cache: Option<bool>,
    /// Layouts with copies: how reads choose one (first, md, raidx1..raidx4;
    /// default md).
    #[serde(default)]
    pub read_policy: Option<String>,
    /// A write buffer of this many bytes in front of the members (the
    /// RAIDX paper's): a write is acknowledged once buffered and drained to
    /// the members meanwhile, so bursts keep every member busy.
    #[serde(default)]
    pub write_buffer: Option<Size>,
    /// Random request sizes: each request `size` to `size_max` bytes,
    /// uniform in 512-byte steps (fio's bsrange).
    #[serde(default)]
    pub size_max: Option<Size>,
    /// Closed-loop workloads: this share of requests are trims (0 to below 1).
    #[serde(default)]
    pub trim_fraction: Option<f64>,
    /// Size of each trim (default: `size`).
    #[serde(default)]
    pub trim_size: Option<Size>,
    /// Fill every SSD once before the run (steady state).
    #[serde(default)]
    pub precondition: bool,
    /// A write log on its own device(s): a preset or `preset*2` (mirrored),
    /// as `hetraid create --log`.
    #[serde(default)]
    pub log: Option<String>,
    /// journal (write-write through the log, as the engine's journal mode).
    #[serde(default)]
    pub log_mode: Option<String>,
    /// Size of each log device (as `--log-size`; default 64M): the ring is
    /// this less 64 KiB of headers.
    #[serde(default)]
    pub log_size: Option<Size>,
    /// Members slow for reads, as a failing disk is: `"2:10"` makes member
    /// 2's reads take 10 times as long (several comma-separated).
    #[serde(default)]
    pub slow: Option<String>,
    /// Slow-member sit-out (core `sitout`, the engine's rule): reads leave
    /// out a member whose reads are outliers (default on where the layout
    /// has redundancy; `true` on one without is an error).
    #[serde(default)]
    pub sit_out: Option<bool>,
}

fn d_chunk() -> Size {
    Size(64 << 10)
}
fn d_policy() -> String {
    "md".into()
}
fn d_workload() -> String {
    "random-write".into()
}
fn d_size() -> Size {
    Size(4 << 10)
}
fn d_qd() -> u32 {
    1
}
fn d_replay() -> String {
    "timed".into()
}
fn d_one() -> f64 {
    1.0
}
fn d_min_speed() -> Size {
    Size(hetraid_core::pace::MD_DEFAULT.min_bps)
}
fn d_max_speed() -> Size {
    Size(hetraid_core::pace::MD_DEFAULT.max_bps)
}
fn d_seed() -> u64 {
    1
}
fn d_xor() -> f64 {
    2000.0
}

impl RunConfig {
    /// A config with every default and the given layout and members.
    pub fn new(layout: &str, members: &str) -> Self {
        toml::from_str(&format!("layout = {layout:?}\nmembers = {members:?}\n"))
            .expect("defaults parse")
    }

    /// Parse a TOML run config.
    pub fn parse(text: &str, origin: &str) -> Result<Self, String> {
        toml::from_str(text).map_err(|e| format!("{origin}: {}", e.message().trim()))
    }

    pub const DEFAULT_TOTAL: u64 = 256 << 20;
}
