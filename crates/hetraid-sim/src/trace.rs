//! Trace readers (SPC, MSR Cambridge, blkparse text) and a synthetic trace writer.
//!
//! A malformed line is an error naming the file, the line and the field: a trace
//! that silently loses records would skew every number computed from it.

use crate::kernel::{Ns, Rng, NS_PER_S};
use hetraid_core::plan::Op;
use std::fmt::Write as _;

/// One traced request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceRecord {
    /// Issue time from the start of the trace.
    pub at_ns: Ns,
    pub op: Op,
    pub offset: u64,
    pub len: u64,
}

/// Most records a looped replay may hold (about 2 GiB of records): a
/// bound, so a mistyped loop count is an error instead of exhausted memory.
pub const LOOPED_RECORDS_MAX: u64 = 64 << 20;

/// `recs` replayed `loops` times back to back, as fio's `loops` does: each
/// pass starts one mean inter-arrival gap after the previous pass's last
/// request, so the arrival rate stays the trace's own.
pub fn looped(recs: Vec<TraceRecord>, loops: u32) -> Result<Vec<TraceRecord>, String> {
    if loops == 0 {
        return Err("trace_loops must be at least 1 (1 = the trace once)".into());
    }
    let n = recs.len() as u64;
    if n.saturating_mul(loops as u64) > LOOPED_RECORDS_MAX {
        return Err(format!(
            "trace_loops {loops} makes {} records, more than the {LOOPED_RECORDS_MAX} a run holds; use fewer loops or --duration",
            n.saturating_mul(loops as u64)
        ));
    }
    let last = recs.last().map_or(0, |r| r.at_ns);
    let first = recs.first().map_or(0, |r| r.at_ns);
    // One pass lasts from its first arrival to one mean gap after its last.
    let period = (last - first) + (last - first) / n.max(2).saturating_sub(1).max(1);
    let mut out = Vec::with_capacity((n * loops as u64) as usize);
    for k in 0..loops as u64 {
        out.extend(recs.iter().map(|r| TraceRecord {
            at_ns: r.at_ns + k * period.max(1),
            ..*r
        }));
    }
    Ok(out)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceFormat {
    /// UMass SPC: `ASU,LBA,size,opcode,timestamp` (LBA in 512-byte sectors, size in
    /// bytes, opcode r/w, timestamp in seconds).
    Spc,
    /// MSR Cambridge: `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`
    /// (timestamp in Windows 100 ns ticks, Type Read/Write, offset and size in bytes).
    Msr,
    /// `blkparse` default text output; `Q` (queued) events are the requests.
    Blkparse,
    /// DiskSim's ASCII input: `arrival_ms device block size flags`, blocks and
    /// sizes in 512-byte sectors, flags bit 0 set for a read (DiskSim 4.0's
    /// `disksim_trace_ascii`). One device (0): the array is the device.
    Disksim,
}

impl TraceFormat {
    pub fn parse(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "spc" | "umass" => Ok(Self::Spc),
            "msr" | "msr-cambridge" => Ok(Self::Msr),
            "blkparse" | "blktrace" => Ok(Self::Blkparse),
            "disksim" | "ascii" => Ok(Self::Disksim),
            _ => Err(format!(
                "trace format '{s}' is unknown; use spc, msr, blkparse or disksim"
            )),
        }
    }

    /// Guess from a file name: `.spc`, `.msr`/`.csv`, `.blkparse`/`.txt`.
    pub fn guess(path: &str) -> Option<Self> {
        let p = path.to_ascii_lowercase();
        if p.ends_with(".spc") {
            Some(Self::Spc)
        } else if p.ends_with(".msr") || p.ends_with(".csv") {
            Some(Self::Msr)
        } else if p.ends_with(".blkparse") || p.ends_with(".txt") {
            Some(Self::Blkparse)
        } else if p.ends_with(".disksim") {
            Some(Self::Disksim)
        } else {
            None
        }
    }

    /// Tell the format from the first record when the name does not: five
    /// numbers separated by blanks are DiskSim's; five comma fields with r/w
    /// fourth are SPC; seven with Read/Write fourth are MSR; a `MAJ,MIN`
    /// first field among blanks is blkparse.
    pub fn sniff(text: &str) -> Option<Self> {
        let l = text
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with('#'))?;
        let blanks: Vec<&str> = l.split_whitespace().collect();
        let commas: Vec<&str> = l.split(',').map(str::trim).collect();
        if blanks.len() == 5 && blanks.iter().all(|f| f.parse::<f64>().is_ok()) {
            Some(Self::Disksim)
        } else if commas.len() == 5 && matches!(commas[3].to_ascii_lowercase().as_str(), "r" | "w")
        {
            Some(Self::Spc)
        } else if commas.len() == 7
            && matches!(commas[3].to_ascii_lowercase().as_str(), "read" | "write")
        {
            Some(Self::Msr)
        } else if blanks.len() >= 6 && blanks[0].contains(',') {
            Some(Self::Blkparse)
        } else {
            None
        }
    }
}

fn field<'a>(
    fields: &[&'a str],
    i: usize,
    name: &str,
    file: &str,
    line: usize,
) -> Result<&'a str, String> {
    fields
        .get(i)
        .map(|s| s.trim_ascii())
        .ok_or_else(|| format!("{file}:{line}: field {} ({name}) is missing", i + 1))
}

fn num<T: std::str::FromStr>(s: &str, name: &str, file: &str, line: usize) -> Result<T, String> {
    s.parse()
        .map_err(|_| format!("{file}:{line}: field {name} '{s}' is not a valid number"))
}

fn seconds(s: &str, name: &str, file: &str, line: usize) -> Result<Ns, String> {
    let v: f64 = num(s, name, file, line)?;
    if !(v.is_finite() && v >= 0.0) {
        return Err(format!(
            "{file}:{line}: field {name} '{s}' must be a time >= 0"
        ));
    }
    Ok((v * NS_PER_S as f64).round() as Ns)
}

/// Read the trace file at `path` in `format` (default: guessed from the name;
/// `flag` names the option that sets it, for the error).
pub fn read_file(path: &str, format: Option<&str>, flag: &str) -> Result<Vec<TraceRecord>, String> {
    let (reader, format) = open(path, format, flag)?;
    parse_reader(reader, format, path)
}

/// The trace file at `path`, buffered, and its format (given, else guessed
/// from the name, else from the first record). Read a line at a time: the
/// text of a 5M-request trace alone is 140 MB.
fn open(
    path: &str,
    format: Option<&str>,
    flag: &str,
) -> Result<(std::io::BufReader<std::fs::File>, TraceFormat), String> {
    use std::io::BufRead;
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read trace {path}: {e}"))?;
    let mut reader = std::io::BufReader::with_capacity(1 << 20, file);
    let format = match format {
        Some(f) => TraceFormat::parse(f)?,
        None => match TraceFormat::guess(path) {
            Some(f) => f,
            None => {
                let head = reader
                    .fill_buf()
                    .map_err(|e| format!("cannot read trace {path}: {e}"))?;
                TraceFormat::sniff(&String::from_utf8_lossy(head)).ok_or_else(|| {
                    format!(
                        "cannot tell the format of trace {path} from its name or first record; give {flag} spc|msr|blkparse|disksim"
                    )
                })?
            }
        },
    };
    Ok((reader, format))
}

/// Read a whole trace. Blank lines and `#` comments are skipped; records are
/// returned sorted by time, times relative to the first record.
pub fn parse(text: &str, format: TraceFormat, file: &str) -> Result<Vec<TraceRecord>, String> {
    parse_reader(text.as_bytes(), format, file)
}

/// [`parse`], reading `r` a line at a time.
pub fn parse_reader(
    mut r: impl std::io::BufRead,
    format: TraceFormat,
    file: &str,
) -> Result<Vec<TraceRecord>, String> {
    let mut out = Vec::new();
    let mut raw = String::new();
    // Bounded by the input: every round consumes a line or ends.
    for line in 1.. {
        if !read_line(&mut r, &mut raw, file, line)? {
            break;
        }
        if let Some(rec) = parse_line(raw.trim_ascii(), format, file, line)? {
            out.push(rec);
        }
    }
    // Most traces come in time order: then no sort (a stable sort's buffer
    // is half the records again: 80 MB for 5M).
    if !out.is_sorted_by_key(|r| r.at_ns) {
        out.sort_by_key(|r| r.at_ns);
    }
    if let Some(t0) = out.first().map(|r| r.at_ns) {
        out.iter_mut().for_each(|r| r.at_ns -= t0);
    }
    Ok(out)
}

/// Line `line` of the trace into `raw`, trimmed of nothing; false at the
/// end. (Trimmed and split as ASCII by [`parse_line`]: traces are ASCII, and
/// the Unicode trims and splits took a seventh of a 5M-request replay.)
fn read_line(
    r: &mut impl std::io::BufRead,
    raw: &mut String,
    file: &str,
    line: usize,
) -> Result<bool, String> {
    raw.clear();
    match r.read_line(raw) {
        Ok(0) => Ok(false),
        Ok(_) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
            Err(format!("{file}:{line}: the line is not UTF-8 text"))
        }
        Err(e) => Err(format!("cannot read trace {file}: {e}")),
    }
}

/// Up to 16 fields of a line, without allocating (later ones are dropped:
/// no format reads past its tenth).
fn split_fields<'a>(it: impl Iterator<Item = &'a str>, buf: &mut [&'a str; 16]) -> usize {
    let mut n = 0;
    for (slot, f) in buf.iter_mut().zip(it) {
        *slot = f;
        n += 1;
    }
    n
}

/// One line of a trace (trimmed): its record, or None for a line that
/// holds none (blank, a comment, a blkparse action other than a queue).
fn parse_line(
    l: &str,
    format: TraceFormat,
    file: &str,
    line: usize,
) -> Result<Option<TraceRecord>, String> {
    if l.is_empty() || l.starts_with('#') {
        return Ok(None);
    }
    let mut buf = [""; 16];
    {
        let rec = match format {
            TraceFormat::Spc => {
                let n = split_fields(l.split(','), &mut buf);
                let f = &buf[..n];
                let _asu: u64 = num(field(f, 0, "ASU", file, line)?, "ASU", file, line)?;
                let lba: u64 = num(field(f, 1, "LBA", file, line)?, "LBA", file, line)?;
                let size: u64 = num(field(f, 2, "size", file, line)?, "size", file, line)?;
                let op = match field(f, 3, "opcode", file, line)?
                    .to_ascii_lowercase()
                    .as_str()
                {
                    "r" => Op::Read,
                    "w" => Op::Write,
                    o => return Err(format!("{file}:{line}: field opcode '{o}' must be r or w")),
                };
                let at = seconds(
                    field(f, 4, "timestamp", file, line)?,
                    "timestamp",
                    file,
                    line,
                )?;
                TraceRecord {
                    at_ns: at,
                    op,
                    offset: lba
                        .checked_mul(512)
                        .ok_or_else(|| format!("{file}:{line}: field LBA is too large"))?,
                    len: size,
                }
            }
            TraceFormat::Msr => {
                let n = split_fields(l.split(','), &mut buf);
                let f = &buf[..n];
                let ticks: u64 = num(
                    field(f, 0, "Timestamp", file, line)?,
                    "Timestamp",
                    file,
                    line,
                )?;
                let op = match field(f, 3, "Type", file, line)?
                    .to_ascii_lowercase()
                    .as_str()
                {
                    "read" => Op::Read,
                    "write" => Op::Write,
                    o => {
                        return Err(format!(
                            "{file}:{line}: field Type '{o}' must be Read or Write"
                        ))
                    }
                };
                let offset: u64 = num(field(f, 4, "Offset", file, line)?, "Offset", file, line)?;
                let size: u64 = num(field(f, 5, "Size", file, line)?, "Size", file, line)?;
                TraceRecord {
                    at_ns: ticks.saturating_mul(100),
                    op,
                    offset,
                    len: size,
                }
            }
            TraceFormat::Blkparse => {
                // "8,0  3  1  0.000000000  4156  Q  W 223490 + 8 [proc]"
                let n = split_fields(l.split_ascii_whitespace(), &mut buf);
                let f = &buf[..n];
                if f.len() < 6 || !f[0].contains(',') {
                    // blkparse's trailing summary ("CPU0 (8,0):", "Total ...").
                    return Ok(None);
                }
                if field(f, 5, "action", file, line)? != "Q" {
                    return Ok(None);
                }
                let rwbs = field(f, 6, "RWBS", file, line)?;
                // D: a discard (replayed as a trim); W, R; flushes are left out.
                let op = if rwbs.contains('D') {
                    Op::Trim
                } else if rwbs.contains('W') {
                    Op::Write
                } else if rwbs.contains('R') {
                    Op::Read
                } else {
                    return Ok(None);
                };
                let at = seconds(field(f, 3, "time", file, line)?, "time", file, line)?;
                let sector: u64 = num(field(f, 7, "sector", file, line)?, "sector", file, line)?;
                if field(f, 8, "'+'", file, line)? != "+" {
                    return Err(format!(
                        "{file}:{line}: field 9 must be '+' between sector and count"
                    ));
                }
                let n: u64 = num(field(f, 9, "sectors", file, line)?, "sectors", file, line)?;
                TraceRecord {
                    at_ns: at,
                    op,
                    offset: sector.saturating_mul(512),
                    len: n.saturating_mul(512),
                }
            }
            TraceFormat::Disksim => {
                let n = split_fields(l.split_ascii_whitespace(), &mut buf);
                let f = &buf[..n];
                let ms: f64 = num(field(f, 0, "arrival", file, line)?, "arrival", file, line)?;
                if !(ms.is_finite() && ms >= 0.0) {
                    return Err(format!(
                        "{file}:{line}: field arrival '{}' must be a time >= 0 (ms)",
                        f[0]
                    ));
                }
                let dev: u64 = num(field(f, 1, "device", file, line)?, "device", file, line)?;
                if dev != 0 {
                    return Err(format!(
                        "{file}:{line}: device {dev}: the trace is replayed against one array (device 0); split a trace of several devices first"
                    ));
                }
                let block: u64 = num(field(f, 2, "block", file, line)?, "block", file, line)?;
                let size: u64 = num(field(f, 3, "size", file, line)?, "size", file, line)?;
                let flags: u64 = num(field(f, 4, "flags", file, line)?, "flags", file, line)?;
                TraceRecord {
                    at_ns: (ms * 1e6).round() as Ns,
                    op: if flags & 1 == 1 { Op::Read } else { Op::Write },
                    offset: block
                        .checked_mul(512)
                        .ok_or_else(|| format!("{file}:{line}: field block is too large"))?,
                    len: size.saturating_mul(512),
                }
            }
        };
        if rec.len == 0 {
            return Err(format!(
                "{file}:{line}: field size is 0; every request must move bytes"
            ));
        }
        Ok(Some(rec))
    }
}

/// Statistics of a trace (to check synthetic ones against the published figures).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct TraceStats {
    pub requests: usize,
    pub write_fraction: f64,
    pub mean_size_kib: f64,
    pub duration_s: f64,
    /// Discards (blkparse `D`), among `requests`.
    pub trims: usize,
}

pub fn stats(t: &[TraceRecord]) -> TraceStats {
    let n = t.len().max(1) as f64;
    TraceStats {
        requests: t.len(),
        write_fraction: t.iter().filter(|r| r.op == Op::Write).count() as f64 / n,
        mean_size_kib: t.iter().map(|r| r.len as f64).sum::<f64>() / n / 1024.0,
        duration_s: t.last().map_or(0.0, |r| r.at_ns as f64 / NS_PER_S as f64),
        trims: t.iter().filter(|r| r.op == Op::Trim).count(),
    }
}

/// A published workload profile (traces/README.md says whose).
#[derive(Debug, Clone, Copy)]
pub struct Profile {
    pub name: &'static str,
    pub write_fraction: f64,
    pub mean_kib: f64,
    /// Requests per second (UMass traces: Financial1 ~122, Financial2 ~90,
    /// WebSearch ~335).
    pub iops: f64,
    /// Addressed bytes.
    pub span: u64,
}

pub const PROFILES: &[Profile] = &[
    Profile {
        name: "financial1",
        write_fraction: 0.768,
        mean_kib: 3.4,
        iops: 122.0,
        span: 16 << 30,
    },
    Profile {
        name: "financial2",
        write_fraction: 0.177,
        mean_kib: 2.4,
        iops: 90.0,
        span: 16 << 30,
    },
    // The HPDA paper's Financial1 and Financial2 runs, as it quotes them
    // ([Mao 2010], issue 13): 32.8 % and 82.4 % reads, 6.2 KB and 2.2 KB, 69
    // and 125 IOPS; its arrays are 30 GB volumes.
    Profile {
        name: "hpda-financial1",
        write_fraction: 0.672,
        mean_kib: 6.2,
        iops: 69.0,
        span: 16 << 30,
    },
    Profile {
        name: "hpda-financial2",
        write_fraction: 0.176,
        mean_kib: 2.2,
        iops: 125.0,
        span: 16 << 30,
    },
    Profile {
        name: "websearch",
        write_fraction: 0.0,
        mean_kib: 15.1,
        iops: 335.0,
        span: 16 << 30,
    },
];

/// Write `n` synthetic records following `p`, in `format`. Sizes are multiples of
/// 512 bytes, drawn so that their mean is the profile's (a mix of 512 B..64 KiB
/// around it); arrivals are Poisson; 40 % of requests go to a hot 5 % of the span.
pub fn synthesize(p: &Profile, format: TraceFormat, n: usize, seed: u64) -> String {
    let mut rng = Rng::new(seed);
    let mut out = String::new();
    let mut t = 0.0f64;
    let mean_sectors = p.mean_kib * 2.0;
    for i in 0..n {
        t += rng.exp(1.0 / p.iops);
        // Geometric-like sizes around the mean: 1 + exponential, rounded to sectors.
        let sectors = (1.0 + rng.exp(mean_sectors - 1.0))
            .round()
            .clamp(1.0, 128.0) as u64;
        let len = sectors * 512;
        let hot = rng.unit() < 0.4;
        let range = if hot { p.span / 20 } else { p.span };
        let offset = rng.below(range / 512 - 128) * 512;
        let write = rng.unit() < p.write_fraction;
        match format {
            TraceFormat::Spc => {
                let _ = writeln!(
                    out,
                    "0,{},{},{},{:.6}",
                    offset / 512,
                    len,
                    if write { "w" } else { "r" },
                    t
                );
            }
            TraceFormat::Msr => {
                let _ = writeln!(
                    out,
                    "{},hetraid,0,{},{},{},{}",
                    128_166_372_000_000_000u64 + (t * 1e7) as u64,
                    if write { "Write" } else { "Read" },
                    offset,
                    len,
                    5000
                );
            }
            TraceFormat::Blkparse => {
                let _ = writeln!(
                    out,
                    "  8,0    0 {:>8} {:>14.9} {:>5}  Q {:>3} {} + {} [synth]",
                    i + 1,
                    t,
                    4242,
                    if write { "WS" } else { "R" },
                    offset / 512,
                    sectors
                );
            }
            TraceFormat::Disksim => {
                let _ = writeln!(
                    out,
                    "{:.6} 0 {} {} {}",
                    t * 1e3,
                    offset / 512,
                    sectors,
                    if write { 0 } else { 1 }
                );
            }
        }
    }
    out
}

/// Records a stream may hold back to put them in time order: traces whose
/// requests come out of order by no more than this many (several CPUs'
/// blkparse records interleaved) replay as if sorted.
pub const REORDER_WINDOW: usize = 1 << 16;
/// How far ahead of the record taken the replay asks for the next lines of
/// a batch (two records a line: eight lines ahead).
pub(crate) const PREFETCH_RECORDS_AHEAD: usize = 16;

/// Records per batch handed from the reading thread, and batches in flight:
/// memory stays at about (window + 8 batches) records whatever the trace's
/// length.
const BATCH: usize = 8192;
const BATCHES_IN_FLIGHT: usize = 8;

/// A trace file read on a thread of its own, a batch at a time, in time
/// order (within [`REORDER_WINDOW`]) and with times relative to the first
/// record, at most `limit` records: what [`read_file`] gives, without the
/// whole trace in memory (a 5M-request trace was 160 MB of records) and
/// with its parsing beside the simulation rather than before it.
pub struct Stream {
    rx: std::sync::mpsc::Receiver<Result<Vec<TraceRecord>, String>>,
    batch: std::vec::IntoIter<TraceRecord>,
    ended: bool,
}

/// A record in the reorder window: by time, then by place in the file (so
/// equal times keep their order, as the stable sort of [`parse`] does).
struct Held(Ns, u64, TraceRecord);
impl PartialEq for Held {
    fn eq(&self, o: &Self) -> bool {
        (self.0, self.1) == (o.0, o.1)
    }
}
impl Eq for Held {}
impl PartialOrd for Held {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Held {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        // Reversed: BinaryHeap is a max-heap and the earliest goes first.
        (o.0, o.1).cmp(&(self.0, self.1))
    }
}

impl Stream {
    /// Start reading `path` (`format` as [`read_file`] takes it).
    pub fn open(
        path: &str,
        format: Option<&str>,
        flag: &str,
        limit: Option<usize>,
    ) -> Result<Stream, String> {
        let (reader, format) = open(path, format, flag)?;
        let (tx, rx) = std::sync::mpsc::sync_channel(BATCHES_IN_FLIGHT);
        let path = path.to_string();
        std::thread::Builder::new()
            .name("trace-reader".into())
            .spawn(move || {
                if let Err(e) = produce(reader, format, &path, limit.unwrap_or(usize::MAX), &tx) {
                    let _ = tx.send(Err(e));
                }
            })
            .map_err(|e| format!("cannot start reading trace: {e}"))?;
        Ok(Stream {
            rx,
            batch: Vec::new().into_iter(),
            ended: false,
        })
    }

    /// The next record, None at the end; an error (a malformed line, a record
    /// out of order by more than the window) ends the stream.
    pub fn next_record(&mut self) -> Result<Option<TraceRecord>, String> {
        // Bounded: each round takes a batch from the reader or ends.
        loop {
            if let Some(r) = self.batch.next() {
                // The batch was written by the reading thread, on another
                // core: each first touch of a line missed (a tenth of a
                // replay's time). Ask for the line a few records on.
                if let Some(ahead) = self.batch.as_slice().get(PREFETCH_RECORDS_AHEAD) {
                    crate::memory::prefetch_line(ahead);
                }
                return Ok(Some(r));
            }
            if self.ended {
                return Ok(None);
            }
            match self.rx.recv() {
                Ok(Ok(b)) => self.batch = b.into_iter(),
                Ok(Err(e)) => {
                    self.ended = true;
                    return Err(e);
                }
                // The reader finished and hung up.
                Err(_) => self.ended = true,
            }
        }
    }

    /// The records not yet taken, a batch at a time (the rest of the
    /// current one first); None at the end, an error as `next_record`.
    pub fn next_batch(&mut self) -> Result<Option<Vec<TraceRecord>>, String> {
        let rest: Vec<TraceRecord> =
            std::mem::replace(&mut self.batch, Vec::new().into_iter()).collect();
        if !rest.is_empty() {
            return Ok(Some(rest));
        }
        // Bounded: each round takes a batch from the reader or ends.
        while !self.ended {
            match self.rx.recv() {
                Ok(Ok(b)) if b.is_empty() => {}
                Ok(Ok(b)) => return Ok(Some(b)),
                Ok(Err(e)) => {
                    self.ended = true;
                    return Err(e);
                }
                Err(_) => self.ended = true,
            }
        }
        Ok(None)
    }
}

/// The reorder window: records in file order while they come in time order
/// (the earliest is the first: no heap to keep, which took a seventh of a
/// replay's CPU), a heap from the first one that comes earlier than the one
/// before it.
enum Window {
    InOrder(std::collections::VecDeque<Held>),
    Heap(std::collections::BinaryHeap<Held>),
}

impl Window {
    fn push(&mut self, h: Held) {
        match self {
            Window::InOrder(q) if q.back().is_none_or(|b| b.0 <= h.0) => q.push_back(h),
            Window::InOrder(q) => {
                let mut heap: std::collections::BinaryHeap<Held> =
                    Vec::from(std::mem::take(q)).into();
                heap.push(h);
                *self = Window::Heap(heap);
            }
            Window::Heap(heap) => heap.push(h),
        }
    }

    /// The earliest record (by time, then place in the file).
    fn pop(&mut self) -> Option<Held> {
        match self {
            Window::InOrder(q) => q.pop_front(),
            Window::Heap(heap) => heap.pop(),
        }
    }

    fn len(&self) -> usize {
        match self {
            Window::InOrder(q) => q.len(),
            Window::Heap(heap) => heap.len(),
        }
    }
}

/// The reading thread: parse, reorder within the window, shift times to the
/// first record, send in batches. Ends early (Ok) when the receiver is gone.
fn produce(
    mut r: impl std::io::BufRead,
    format: TraceFormat,
    file: &str,
    limit: usize,
    tx: &std::sync::mpsc::SyncSender<Result<Vec<TraceRecord>, String>>,
) -> Result<(), String> {
    let mut heap = Window::InOrder(std::collections::VecDeque::with_capacity(
        REORDER_WINDOW + 1,
    ));
    let mut out: Vec<TraceRecord> = Vec::with_capacity(BATCH);
    let (mut sent, mut last, mut t0) = (0usize, 0 as Ns, None::<Ns>);
    let mut raw = String::new();
    // Emit the earliest held record; false once the limit is reached or the
    // receiver is gone.
    let mut emit = |h: Held, out: &mut Vec<TraceRecord>| -> Result<bool, String> {
        if sent >= limit {
            return Ok(false);
        }
        if h.0 < last {
            return Err(format!(
                "{file}:{}: this record is out of time order by more than {REORDER_WINDOW} records; sort the trace by time first",
                h.1
            ));
        }
        last = h.0;
        let base = *t0.get_or_insert(h.0);
        let mut rec = h.2;
        rec.at_ns -= base;
        out.push(rec);
        sent += 1;
        if out.len() == BATCH && tx.send(Ok(std::mem::take(out))).is_err() {
            return Ok(false);
        }
        Ok(true)
    };
    let mut line = 0usize;
    // Bounded by the input: every round consumes a line or ends.
    loop {
        line += 1;
        if !read_line(&mut r, &mut raw, file, line)? {
            break;
        }
        if let Some(rec) = parse_line(raw.trim_ascii(), format, file, line)? {
            heap.push(Held(rec.at_ns, line as u64, rec));
            if heap.len() > REORDER_WINDOW {
                let h = heap.pop().expect("the window is full");
                if !emit(h, &mut out)? {
                    break;
                }
            }
        }
    }
    // The rest of the window (unless the limit or the receiver ended it).
    while let Some(h) = heap.pop() {
        if !emit(h, &mut out)? {
            break;
        }
    }
    if !out.is_empty() {
        let _ = tx.send(Ok(out));
    }
    Ok(())
}

#[cfg(test)]
mod stream_tests {
    use super::*;

    fn file(lines: &[String]) -> tempfile::NamedTempFile {
        let mut f = tempfile::Builder::new()
            .suffix(".disksim")
            .tempfile()
            .unwrap();
        use std::io::Write;
        for l in lines {
            writeln!(f, "{l}").unwrap();
        }
        f.flush().unwrap();
        f
    }

    fn all(path: &str, limit: Option<usize>) -> Result<Vec<TraceRecord>, String> {
        let mut s = Stream::open(path, None, "--trace-format", limit)?;
        let mut out = Vec::new();
        while let Some(r) = s.next_record()? {
            out.push(r);
        }
        Ok(out)
    }

    /// A stream gives what reading the whole file gives: time order (equal
    /// times in file order), times from the first record, the limit, for a
    /// trace longer than a batch and out of order within the window.
    #[test]
    fn a_stream_gives_what_read_file_gives() {
        let mut x: u64 = 7;
        let lines: Vec<String> = (0..30_000u64)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // Times drift backwards now and then (by up to 500 records'
                // worth) and repeat; blocks and sizes vary.
                let t = 1000.0 + i as f64 * 0.25 - (x % 500) as f64 * 0.25 * ((x >> 9) % 2) as f64;
                format!(
                    "{t:.3} 0 {} {} {}",
                    (x >> 20) % 100_000 * 8,
                    8 * (1 + x % 4),
                    x % 2
                )
            })
            .collect();
        // Out of order (the heap), then the same records sorted by time
        // with ties (kept in order, no heap).
        let mut sorted = lines.clone();
        sorted.sort_by(|a, b| {
            let t = |l: &String| l.split(' ').next().unwrap().parse::<f64>().unwrap();
            t(a).total_cmp(&t(b))
        });
        for lines in [lines, sorted] {
            let f = file(&lines);
            let p = f.path().to_str().unwrap();
            let whole = read_file(p, None, "--trace-format").unwrap();
            assert_eq!(all(p, None).unwrap(), whole);
            assert_eq!(all(p, Some(12_345)).unwrap(), whole[..12_345]);
            assert_eq!(whole[0].at_ns, 0);
        }
    }

    /// A record earlier than one already given (out of order by more than
    /// the window) and a malformed line past the first batch end the stream
    /// with an error naming the file and line.
    #[test]
    fn disorder_past_the_window_and_bad_lines_are_errors() {
        let mut lines: Vec<String> = (0..REORDER_WINDOW as u64 + 10)
            .map(|i| format!("{}.0 0 {} 8 0", 100 + i, i * 8))
            .collect();
        lines.push("1.0 0 8 8 0".into());
        let f = file(&lines);
        let e = all(f.path().to_str().unwrap(), None).unwrap_err();
        assert!(
            e.contains("out of time order") && e.contains(":65547:"),
            "{e}"
        );
        let mut lines: Vec<String> = (0..20_000u64)
            .map(|i| format!("{i}.0 0 {} 8 0", i * 8))
            .collect();
        lines[15_000] = "15000.0 0 x 8 0".into();
        let f = file(&lines);
        let e = all(f.path().to_str().unwrap(), None).unwrap_err();
        assert!(e.contains(":15001:") && e.contains("block"), "{e}");
    }
}
