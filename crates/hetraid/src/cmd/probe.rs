//! `hetraid probe`: measure a real file or block device and write a device
//! file the simulator (and `--weights auto`) accept: random 4 KiB reads at
//! one outstanding and at eight, sequential 1 MiB reads, and — only with
//! `--destructive`, since they overwrite the member — the same for writes
//! (O_DSYNC: a write counts once durable). O_DIRECT where the file system
//! has it, so the page cache does not answer for the device.

use clap::Args;
use hetraid_core::MemberKind;
use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(Debug, Args)]
pub struct ProbeCmd {
    /// Files or block devices to measure.
    #[arg(required = true)]
    pub members: Vec<String>,
    /// Also measure writes: random and sequential writes overwrite the
    /// member's contents.
    #[arg(long)]
    pub destructive: bool,
    /// Seconds per measurement (five measurements; three without
    /// --destructive).
    #[arg(long, default_value = "2")]
    pub seconds: f64,
    /// Directory for the device files (probe-NAME.toml).
    #[arg(long, default_value = ".")]
    pub out: PathBuf,
    /// The kind to record (default: hdd when a random read takes over 1 ms,
    /// else ssd).
    #[arg(long, value_parser = MemberKind::parse)]
    pub kind: Option<MemberKind>,
    /// --destructive: overwrite a device that holds a hetraid member or
    /// other data in its first MiB.
    #[arg(long)]
    pub force: bool,
}

/// `--destructive` overwrites the device: refused, as `add` and `replace`
/// refuse, when it holds a hetraid superblock or anything but zeros in its
/// first MiB (a partition table, a filesystem, another RAID's metadata).
fn refuse_holding_data(path: &Path) -> Result<(), String> {
    use std::io::Read;
    let m = path.display();
    if let Ok((sb, annex)) = hetraid_engine::annex::read_member(path) {
        let name = annex.map(|a| a.name).filter(|n| !n.is_empty());
        return Err(format!(
            "{m} is slot {} of hetraid array {}{}: --destructive would destroy it; give another device, or say --force",
            sb.member,
            sb.uuid_string(),
            name.map(|n| format!(" ({n})")).unwrap_or_default()
        ));
    }
    let mut head = Vec::with_capacity(LARGE);
    std::fs::File::open(path)
        .and_then(|f| f.take(LARGE as u64).read_to_end(&mut head))
        .map_err(|e| format!("{m}: {e}"))?;
    if let Some(at) = head.iter().position(|&b| b != 0) {
        return Err(format!(
            "{m} holds data in its first MiB (a byte that is not zero at offset {at}): --destructive would overwrite it; give an empty device, or say --force"
        ));
    }
    Ok(())
}

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

impl ProbeCmd {
    pub fn run(&self) -> Result<(), String> {
        if !(self.seconds > 0.0 && self.seconds <= 600.0) {
            return Err(format!(
                "--seconds {} must be above 0 and at most 600",
                self.seconds
            ));
        }
        if !self.out.is_dir() {
            return Err(format!(
                "--out {} is not a directory; create it or name another",
                self.out.display()
            ));
        }
        // Every member checked before any is measured (nothing is written
        // for a bad command line).
        let mut plan = Vec::new();
        for m in &self.members {
            let path = Path::new(m);
            let meta = std::fs::metadata(path).map_err(|e| format!("{m}: {e}"))?;
            if meta.is_dir() {
                return Err(format!("{m} is a directory; give a file or a block device"));
            }
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "device".into());
            if self.force && !self.destructive {
                return Err(
                    "--force applies to --destructive (a read-only probe overwrites nothing)"
                        .into(),
                );
            }
            if self.destructive && !self.force {
                refuse_holding_data(path)?;
            }
            let out = self.out.join(format!("probe-{name}.toml"));
            if out.exists() {
                return Err(format!(
                    "{} exists; remove it or give another --out",
                    out.display()
                ));
            }
            plan.push((m.clone(), name, out));
        }
        for (m, name, out) in plan {
            let (text, summary) =
                probe_member(&m, &name, self.seconds, self.destructive, self.kind)?;
            // The file must be one the simulator takes.
            hetraid_sim::preset::DeviceSpec::parse(&text, &out.display().to_string())?;
            // create_new: never through a symlink or over a file made since
            // the check above (O_CREAT | O_EXCL).
            {
                use std::io::Write;
                std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&out)
                    .and_then(|mut f| f.write_all(text.as_bytes()))
                    .map_err(|e| {
                        format!("{}: {e}; remove it or give another --out", out.display())
                    })?;
            }
            println!("{summary} -> {}", out.display());
        }
        Ok(())
    }
}

/// Measure member `m` (a file or block device): the device file's text and
/// a one-line summary of what was measured.
pub(crate) fn probe_member(
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
