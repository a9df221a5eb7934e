//! The device probe (`hetraid probe`, and `advise` for real files and
//! block devices): random 4 KiB reads at one outstanding and at eight,
//! sequential 1 MiB reads, and — only when the caller says the device may be
//! overwritten — the same for writes (O_DSYNC: a write counts once durable).
//! O_DIRECT where the file system has it, so the page cache does not answer
//! for the device. The result is a device file the simulator takes.

use hetraid_core::MemberKind;
use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

/// Bytes of the random and sequential operations.
const SMALL: usize = 4096;
const LARGE: usize = 1 << 20;

/// A 4 KiB-aligned buffer (O_DIRECT needs aligned memory).
struct Aligned {
    ptr: *mut u8,
    layout: std::alloc::Layout,
}

impl Aligned {
    fn new(len: usize) -> Self {
        let layout = std::alloc::Layout::from_size_align(len, 4096).expect("a valid layout");
        // SAFETY: a non-zero size; checked for null below.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        assert!(!ptr.is_null(), "out of memory");
        Self { ptr, layout }
    }
    fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: `ptr` holds `layout.size()` initialised bytes we own.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.layout.size()) }
    }
}

impl Drop for Aligned {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout in `new`.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) }
    }
}

/// Open `path` for the probe: O_DIRECT when the file system has it
/// (returns whether it does).
/// `PATH` or `PATH:kind`. A suffix that looks like a kind but is none is an
/// error (a file named `m0.img:nvme` is never created by mistake), unless a
/// file of that whole name exists.
pub fn split_member(arg: &str) -> Result<(std::path::PathBuf, Option<MemberKind>), String> {
    if let Some((p, k)) = arg.rsplit_once(':') {
        if let Ok(kind) = MemberKind::parse(k) {
            return Ok((std::path::PathBuf::from(p), Some(kind)));
        }
        let looks_like_kind =
            !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
        if looks_like_kind && !Path::new(arg).exists() {
            return Err(format!(
                "member {arg}: '{k}' is not a member kind; write PATH:hdd, PATH:ssd or PATH:nvram"
            ));
        }
    }
    Ok((std::path::PathBuf::from(arg), None))
}

fn open(path: &Path, write: bool) -> Result<(File, bool), String> {
    let sync = if write { libc::O_DSYNC } else { 0 };
    let mut o = OpenOptions::new();
    o.read(true).write(write);
    match o.clone().custom_flags(libc::O_DIRECT | sync).open(path) {
        Ok(f) => Ok((f, true)),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => o
            .custom_flags(sync)
            .open(path)
            .map(|f| (f, false))
            .map_err(|e| format!("{}: {e}", path.display())),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

struct XorShift(u64);
impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Random `SMALL` operations on `threads` threads for `secs`: operations
/// per second and the mean time of one.
fn random_ops(
    f: &File,
    size: u64,
    write: bool,
    threads: usize,
    secs: f64,
) -> Result<(f64, f64), String> {
    let blocks = size / SMALL as u64;
    let stop = Instant::now() + Duration::from_secs_f64(secs);
    let t0 = Instant::now();
    let results: Vec<Result<(u64, Duration), String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    let mut buf = Aligned::new(SMALL);
                    let mut x = XorShift(0x9e37_79b9_7f4a_7c15 ^ ((t as u64 + 1) * 7919));
                    let (mut n, mut busy) = (0u64, Duration::ZERO);
                    // Bounded by the deadline.
                    while Instant::now() < stop {
                        let off = x.next() % blocks * SMALL as u64;
                        let a = Instant::now();
                        let r = if write {
                            f.write_all_at(buf.bytes(), off)
                        } else {
                            f.read_exact_at(buf.bytes(), off)
                        };
                        r.map_err(|e| e.to_string())?;
                        busy += a.elapsed();
                        n += 1;
                    }
                    Ok((n, busy))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let (mut n, mut busy) = (0u64, Duration::ZERO);
    for r in results {
        let (a, b) = r?;
        n += a;
        busy += b;
    }
    let n = n.max(1);
    Ok((
        n as f64 / t0.elapsed().as_secs_f64(),
        busy.as_secs_f64() * 1e3 / n as f64,
    ))
}

/// Sequential `LARGE` operations from the start (wrapping) for `secs`: MB/s.
fn sequential(f: &File, size: u64, write: bool, secs: f64) -> Result<f64, String> {
    let mut buf = Aligned::new(LARGE);
    let span = (size / LARGE as u64).max(1) * LARGE as u64;
    let t0 = Instant::now();
    let (mut off, mut bytes) = (0u64, 0u64);
    // Bounded by the deadline.
    while t0.elapsed().as_secs_f64() < secs {
        let len = LARGE.min((size - off) as usize) / SMALL * SMALL;
        let b = &mut buf.bytes()[..len];
        if write {
            f.write_all_at(b, off).map_err(|e| e.to_string())?;
        } else {
            f.read_exact_at(b, off).map_err(|e| e.to_string())?;
        }
        bytes += len as u64;
        off = (off + LARGE as u64) % span;
    }
    Ok(bytes as f64 / t0.elapsed().as_secs_f64() / 1e6)
}

/// Measure member `m` (a file or block device): the device file's text and
/// a one-line summary of what was measured.
pub fn probe_member(
    m: &str,
    name: &str,
    seconds: f64,
    destructive: bool,
    kind: Option<MemberKind>,
) -> Result<(String, String), String> {
    let (f, direct) = open(Path::new(m), destructive)?;
    let size = (&f)
        .seek(SeekFrom::End(0))
        .map_err(|e| format!("{m}: {e}"))?;
    if size < LARGE as u64 {
        return Err(format!(
            "{m} holds {size} bytes; a probe needs at least 1 MiB"
        ));
    }
    let s = seconds;
    let (iops1, read_ms) = random_ops(&f, size, false, 1, s)?;
    let (iops8, _) = random_ops(&f, size, false, 8, s)?;
    let read_mbps = sequential(&f, size, false, s)?;
    let (write_ms, write_mbps) = if destructive {
        let (_, w) = random_ops(&f, size, true, 1, s)?;
        (w, sequential(&f, size, true, s)?)
    } else {
        (read_ms, read_mbps)
    };
    let parallelism = (iops8 / iops1.max(1e-9)).round().clamp(1.0, 64.0) as u32;
    let kind = kind.unwrap_or(if read_ms > 1.0 {
        MemberKind::Hdd
    } else {
        MemberKind::Ssd
    });
    let (rw, ww, iw) = match kind {
        MemberKind::Hdd => (8.0, 8.0, 5.0),
        MemberKind::Ssd => (2.0, 3.0, 0.5),
        MemberKind::Nvram => (1.0, 1.0, 0.5),
    };
    let text = format!(
        "# Measured by hetraid probe on {m} ({when}){how}.\n\
         # Power is not measured: typical figures for the kind.\n\
         name = \"probe-{name}\"\n\
         kind = \"{kind}\"\n\
         capacity = \"{size}\"\n\n\
         [measured]\n\
         read_ms = {read_ms:.6}\n\
         write_ms = {write_ms:.6}\n\
         read_mbps = {read_mbps:.1}\n\
         write_mbps = {write_mbps:.1}\n\
         parallelism = {parallelism}\n\n\
         [power]\n\
         read_w = {rw}\n\
         write_w = {ww}\n\
         idle_w = {iw}\n\
         standby_w = 0.0\n",
        when = if direct {
            "O_DIRECT"
        } else {
            "buffered: the file system has no O_DIRECT, the page cache answers"
        },
        how = if destructive {
            ""
        } else {
            "; read-only, so the write figures repeat the read ones (--destructive measures writes)"
        },
        kind = kind.as_str(),
    );
    let summary = format!(
        "{m}: random 4K reads {read_ms:.3} ms ({iops1:.0}/s at 1, {iops8:.0}/s at 8: {parallelism} at once), sequential reads {read_mbps:.0} MB/s{}; {} (kind {})",
        if destructive {
            format!(", random 4K writes {write_ms:.3} ms, sequential writes {write_mbps:.0} MB/s")
        } else {
            ", writes not measured (read-only; --destructive measures them)".into()
        },
        if direct { "O_DIRECT" } else { "buffered (no O_DIRECT here)" },
        kind.as_str()
    );
    Ok((text, summary))
}
