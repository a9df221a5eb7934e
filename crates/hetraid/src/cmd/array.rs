//! Lifecycle and data verbs on real members (mdadm-like).

use crate::args::{size, LayoutOpts};
use clap::Args;
use hetraid_core::units::format_size;
use hetraid_core::{MemberKind, WritePolicy};
use hetraid_engine::member::{FileMember, Member};
use hetraid_engine::{Access, Array, AssembleOptions, CreateOptions, RebuildOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// `PATH` or `PATH:kind`. A suffix that looks like a kind but is none is an
/// error (a file named `m0.img:nvme` is never created by mistake), unless a
/// file of that whole name exists.
pub fn split_member(arg: &str) -> Result<(PathBuf, Option<MemberKind>), String> {
    if let Some((p, k)) = arg.rsplit_once(':') {
        if let Ok(kind) = MemberKind::parse(k) {
            return Ok((PathBuf::from(p), Some(kind)));
        }
        let looks_like_kind =
            !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
        if looks_like_kind && !Path::new(arg).exists() {
            return Err(format!(
                "member {arg}: '{k}' is not a member kind; write PATH:hdd, PATH:ssd or PATH:nvram"
            ));
        }
    }
    Ok((PathBuf::from(arg), None))
}

/// `--log` and `--log-mode` as given: paths, kinds, mode.
type LogArgs = (
    Vec<PathBuf>,
    Vec<MemberKind>,
    hetraid_engine::format::LogMode,
);

/// Do two paths name one file (or, when one does not exist yet, are they equal)?
fn same_path(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

/// What a device already is, if it is part of an array or a log.
fn belongs_to(m: &dyn Member) -> Option<String> {
    if let Ok(Some(h)) = hetraid_engine::log::read_header(m) {
        return Some(format!("holds the write log of array {}", h.uuid_string()));
    }
    let mut b = hetraid_engine::member::AlignedBuf::zeroed(4096);
    if m.len() >= 4096 && m.read_at(&mut b, 0).is_ok() {
        if let Ok(sb) = hetraid_engine::format::Superblock::decode(&b) {
            return Some(format!(
                "belongs to array {} (slot {})",
                sb.uuid_string(),
                sb.member
            ));
        }
    }
    None
}

pub fn open_member(path: &Path) -> Result<Arc<dyn Member>, String> {
    open_member_for(path, true)
}

fn open_member_for(path: &Path, writable: bool) -> Result<Arc<dyn Member>, String> {
    if !path.exists() {
        return Err(format!(
            "member {} does not exist; check the path",
            path.display()
        ));
    }
    let m = if writable {
        FileMember::open(path)
    } else {
        FileMember::open_read_only(path)
    };
    m.map(|m| Arc::new(m) as Arc<dyn Member>)
        .map_err(|e| format!("cannot open member {}: {e}", path.display()))
}

/// The member paths, each checked to exist and to be listed once (a file
/// given twice, or once through a link, is the same member).
pub fn member_paths(paths: &[String]) -> Result<Vec<PathBuf>, String> {
    use std::os::unix::fs::MetadataExt;
    let mut seen: Vec<((u64, u64), String)> = Vec::new();
    let mut out = Vec::new();
    for p in paths {
        let path = split_member(p)?.0;
        let meta = std::fs::metadata(&path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                format!("member {} does not exist; check the path", path.display())
            }
            _ => format!("member {}: {e}", path.display()),
        })?;
        let id = (meta.dev(), meta.ino());
        if let Some((_, first)) = seen.iter().find(|(i, _)| *i == id) {
            return Err(format!(
                "members {first} and {} are the same file (listed twice, or through a link); give each member once",
                path.display()
            ));
        }
        seen.push((id, path.display().to_string()));
        out.push(path);
    }
    Ok(out)
}

/// Assemble for writing; members not given are refused unless `degraded`.
pub fn assemble(paths: &[String], degraded: bool) -> Result<Array, String> {
    assemble_with(
        paths,
        AssembleOptions {
            degraded,
            ..AssembleOptions::default()
        },
    )
}

pub fn assemble_with(paths: &[String], opts: AssembleOptions) -> Result<Array, String> {
    if paths.is_empty() {
        return Err("give the array's member files".into());
    }
    let writable = opts.access == Access::ReadWrite;
    let mut members = Vec::new();
    for p in member_paths(paths)? {
        members.push(open_member_for(&p, writable)?);
    }
    Array::assemble_with(members, opts).map_err(|e| e.to_string())
}

fn print_warnings(a: &Array) {
    for w in a.warnings() {
        eprintln!("hetraid: warning: {w}");
    }
}

#[derive(Debug, Args)]
pub struct CreateCmd {
    #[command(flatten)]
    pub layout: LayoutOpts,
    /// Write selection: md, modthresh, modthresh-stripe (the threshold decided per stripe), rmw-always, cost.
    #[arg(long, default_value = "md")]
    pub policy: String,
    /// Create member files of this size (they must not exist yet).
    #[arg(long, value_parser = size)]
    pub size: Option<u64>,
    /// Overwrite members that belong to another array.
    #[arg(long)]
    pub force: bool,
    /// Block checksums: `crc32c` keeps a checksum per 4 KiB block of every
    /// member and verifies every read (bad blocks are rebuilt from the
    /// redundancy and rewritten); `none` does not.
    #[arg(long, default_value = "none", value_name = "crc32c|none")]
    pub checksums: String,
    /// Layouts with copies (raid1, raid10, s2raid10, raidx1/10): how reads
    /// choose a copy: md (MD's read_balance, default), first, or the RAIDX
    /// paper's raidx1..raidx4. Stored in the superblock.
    #[arg(long, value_name = "POLICY")]
    pub read_policy: Option<String>,
    /// A write log on its own device(s): PATH, or two mirrored PATH,PATH
    /// (each optionally PATH:kind; default ssd). Created with --log-size when
    /// the file does not exist. List the log devices with the members in
    /// every later command.
    #[arg(long, value_delimiter = ',', value_name = "PATH[:kind]")]
    pub log: Option<Vec<String>>,
    /// How the log is used: journal (write-through: every stripe update is
    /// durable in the log before the members are written, which closes the
    /// RAID5 write hole) or write-back (a write is acknowledged once in the
    /// log; a reclaimer writes it to the members later, always at close).
    #[arg(long, value_name = "journal|write-back")]
    pub log_mode: Option<String>,
    /// Size of log files this command creates (default 64M).
    #[arg(long, value_parser = size)]
    pub log_size: Option<u64>,
    /// Or: keep the write log on the members, SIZE bytes past the data area
    /// of the two fastest (two copies; the members need that much room).
    #[arg(long, value_parser = size, value_name = "SIZE")]
    pub log_region: Option<u64>,
    /// A name for the array (at most 64 bytes), kept on every member:
    /// status shows it, `assemble --scan` and `events` name the array by it.
    #[arg(long)]
    pub name: Option<String>,
    /// Member files or block devices, optionally PATH:kind (hdd, ssd, nvram).
    #[arg(required = true)]
    pub members: Vec<String>,
}

impl CreateCmd {
    /// The log's paths, kinds and mode, checked (None: no log).
    fn log_args(&self) -> Result<Option<LogArgs>, String> {
        if self.layout.layout.eq_ignore_ascii_case("hpda") {
            // HPDA's log is part of the layout: past the parity on HDD-1,
            // mirrored at the start of HDD-2, write-back.
            if self.log.is_some() || self.log_region.is_some() {
                return Err("hpda keeps its write log on HDD-1 (past the parity) and HDD-2 (the mirror): leave out --log and --log-region (--log-size SIZE sets how much of that room it uses; default 256M)".into());
            }
            if self.log_mode.as_deref().is_some_and(|m| m != "write-back") {
                return Err("hpda's log is write-back (random writes are acknowledged from it): --log-mode journal does not apply".into());
            }
            return Ok(Some((
                vec![],
                vec![],
                hetraid_engine::format::LogMode::WriteBack,
            )));
        }
        if self.log.is_some() && self.log_region.is_some() {
            return Err("give --log PATH or --log-region SIZE, not both".into());
        }
        if self.log_region.is_some() && self.log_size.is_some() {
            return Err(
                "--log-size sizes --log files; --log-region SIZE sets the region's size".into(),
            );
        }
        let Some(list) = &self.log else {
            if self.log_region.is_some() {
                return Ok(Some((vec![], vec![], self.log_mode()?)));
            }
            if self.log_mode.is_some() {
                return Err(
                    "--log-mode needs --log PATH (the log device) or --log-region SIZE".into(),
                );
            }
            if self.log_size.is_some() {
                return Err("--log-size needs --log PATH (the log device)".into());
            }
            return Ok(None);
        };
        let mode = self.log_mode()?;
        if list.is_empty() || list.len() > 2 {
            return Err(format!(
                "--log takes one device or two (mirrored), not {}",
                list.len()
            ));
        }
        let mut paths = Vec::new();
        let mut kinds = Vec::new();
        for l in list {
            let (p, k) = split_member(l)?;
            paths.push(p);
            kinds.push(k.unwrap_or(MemberKind::Ssd));
        }
        Ok(Some((paths, kinds, mode)))
    }

    fn log_mode(&self) -> Result<hetraid_engine::format::LogMode, String> {
        Ok(match self.log_mode.as_deref().unwrap_or("journal") {
            "journal" => hetraid_engine::format::LogMode::Journal,
            "write-back" => hetraid_engine::format::LogMode::WriteBack,
            other => {
                return Err(format!(
                    "--log-mode {other} is not known; use journal or write-back"
                ))
            }
        })
    }

    fn checksums(&self) -> Result<bool, String> {
        match self.checksums.as_str() {
            "crc32c" => Ok(true),
            "none" => Ok(false),
            other => Err(format!(
                "--checksums {other} is not known; use crc32c or none"
            )),
        }
    }

    pub fn run(&self) -> Result<(), String> {
        let policy = WritePolicy::parse(&self.policy)?;
        let chunk = self.layout.chunk;
        if !hetraid_engine::format::chunk_ok(chunk) {
            return Err(format!(
                "--chunk {chunk} is not a power of two between 4K and 1G"
            ));
        }
        let record = self.layout.record()?;
        record.kind()?;
        if let Some(n) = &self.name {
            if n.is_empty()
                || n.len() > hetraid_engine::annex::NAME_MAX
                || n.chars().any(|c| c.is_control())
            {
                return Err(format!(
                    "--name {n:?} is not usable: give 1 to {} bytes without control characters",
                    hetraid_engine::annex::NAME_MAX
                ));
            }
        }
        let mut paths = Vec::new();
        let mut kinds = Vec::new();
        for m in &self.members {
            let (p, k) = split_member(m)?;
            paths.push(p);
            kinds.push(k);
        }
        let explicit_kinds = kinds.iter().any(|k| k.is_some());
        let kinds: Vec<MemberKind> = match (&self.layout.kinds, kinds.iter().any(|k| k.is_some())) {
            (Some(_), true) => {
                return Err(
                    "give member kinds either with --kinds or as PATH:kind, not both".into(),
                )
            }
            (Some(k), false) => k.clone(),
            (None, true) => kinds.iter().map(|k| k.unwrap_or(MemberKind::Hdd)).collect(),
            (None, false) => {
                match hetraid_core::layout::Preset::parse(&self.layout.layout.to_ascii_lowercase())
                {
                    Some(p) if paths.len() >= 2 => {
                        let k = p.default_kinds(paths.len());
                        // Said, not silent: which members the preset takes as SSDs.
                        let ssds: Vec<String> = k
                            .iter()
                            .zip(&paths)
                            .filter(|(k, _)| **k != MemberKind::Hdd)
                            .map(|(_, p)| p.display().to_string())
                            .collect();
                        eprintln!(
                            "hetraid: warning: no member kinds given: {} takes {} as its SSD{} (parity goes there) and the others as disks; say which with --kinds or PATH:ssd",
                            self.layout.layout,
                            ssds.join(", "),
                            if ssds.len() == 1 { "" } else { "s" }
                        );
                        k
                    }
                    _ => vec![],
                }
            }
        };
        // Kinds given that contradict the preset are an error, not a
        // silent re-ordering.
        if self.layout.kinds.is_some() || explicit_kinds {
            hetraid_core::layout::check_given_kinds(&record.kind()?, &kinds)?;
        }
        // Validate everything before writing anything.
        let mut created = Vec::new();
        for p in &paths {
            match self.size {
                Some(_) if p.exists() && !self.force => {
                    return Err(format!("member {} already exists; --size creates new files only (use --force to overwrite)", p.display()))
                }
                None if !p.exists() => return Err(format!("member {} does not exist; give --size to create member files", p.display())),
                _ => {}
            }
            if let Some(parent) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
                if !parent.is_dir() {
                    return Err(format!(
                        "directory {} does not exist for member {}",
                        parent.display(),
                        p.display()
                    ));
                }
            }
        }
        if self.size.is_none() {
            member_paths(&self.members)?;
        } else {
            let mut names: Vec<&PathBuf> = paths.iter().collect();
            names.sort();
            if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
                return Err(format!("member {} is listed twice", w[0].display()));
            }
        }
        let log = self.log_args()?;
        let log_size = self.log_size.unwrap_or(64 << 20);
        if let Some(r) = self.log_region {
            let need = Array::log_bytes_min_any(paths.len(), chunk);
            if r < need {
                return Err(format!(
                    "--log-region {r} is too small: with {} members of {chunk}-byte chunks the log needs at least {need}",
                    paths.len()
                ));
            }
        }
        if let Some((lp, _, _)) = &log {
            for p in lp {
                if paths.iter().any(|m| same_path(m, p)) {
                    return Err(format!(
                        "{} is given both as a member and as the log",
                        p.display()
                    ));
                }
            }
            if lp.len() == 2 && same_path(&lp[0], &lp[1]) {
                return Err(format!("log device {} is listed twice", lp[0].display()));
            }
            let need = Array::log_bytes_min_any(paths.len(), chunk);
            for p in lp {
                let len = if p.exists() {
                    let m = open_member_for(p, false)?;
                    if !self.force {
                        if let Some(owner) = belongs_to(m.as_ref()) {
                            return Err(format!(
                                "log device {} already {owner}; use --force to overwrite it",
                                p.display()
                            ));
                        }
                    }
                    m.len()
                } else {
                    if let Some(parent) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
                        if !parent.is_dir() {
                            return Err(format!(
                                "directory {} does not exist for log {}",
                                parent.display(),
                                p.display()
                            ));
                        }
                    }
                    log_size
                };
                if len < need {
                    return Err(format!(
                        "log device {} would be {len} bytes; with {} members of {chunk}-byte chunks it needs at least {need} (--log-size)",
                        p.display(),
                        paths.len()
                    ));
                }
            }
        }
        let opts = CreateOptions {
            layout: record,
            chunk_bytes: self.layout.chunk,
            policy,
            kinds,
            assume_clean: self.size.is_some(),
            force: self.force,
            checksums: self.checksums()?,
            read_policy: self
                .read_policy
                .as_deref()
                .map(hetraid_core::readbalance::ReadPolicy::parse)
                .transpose()?,
            log: None,
        };
        // The layout, sizes and kinds are checked before any file is touched.
        let lens: Vec<u64> = match self.size {
            Some(sz) => vec![sz; paths.len()],
            None => paths
                .iter()
                .map(|p| open_member_for(p, false).map(|m| m.len()))
                .collect::<Result<_, _>>()?,
        };
        Array::check_create(&lens, &opts).map_err(|e| e.to_string())?;
        let mut members: Vec<Arc<dyn Member>> = Vec::new();
        // Only files this command created are removed when it fails later.
        let cleanup =
            |created: &[PathBuf]| created.iter().for_each(|p| drop(std::fs::remove_file(p)));
        for p in &paths {
            let m = match self.size {
                Some(sz) => {
                    let existed = p.exists();
                    let r = FileMember::create(p, sz);
                    if r.is_ok() && !existed {
                        created.push(p.clone());
                    }
                    r
                }
                None => FileMember::open(p),
            };
            match m {
                Ok(m) => members.push(Arc::new(m)),
                Err(e) => {
                    cleanup(&created);
                    return Err(format!("cannot open member {}: {e}", p.display()));
                }
            }
        }
        let mut opts = opts;
        if self.layout.layout.eq_ignore_ascii_case("hpda") {
            opts.log = Some(hetraid_engine::LogSpec {
                devices: vec![],
                kinds: vec![],
                mode: hetraid_engine::format::LogMode::WriteBack,
                region: self.log_size,
            });
        } else if let (Some(r), Some((_, _, mode))) = (self.log_region, &log) {
            opts.log = Some(hetraid_engine::LogSpec {
                devices: vec![],
                kinds: vec![],
                mode: *mode,
                region: Some(r),
            });
        } else if let Some((lp, kinds, mode)) = &log {
            let mut devices: Vec<Arc<dyn Member>> = Vec::new();
            for p in lp {
                let m = if p.exists() {
                    FileMember::open(p)
                } else {
                    let r = FileMember::create(p, log_size);
                    if r.is_ok() {
                        created.push(p.clone());
                    }
                    r
                };
                match m {
                    Ok(m) => devices.push(Arc::new(m)),
                    Err(e) => {
                        cleanup(&created);
                        return Err(format!("cannot open log device {}: {e}", p.display()));
                    }
                }
            }
            opts.log = Some(hetraid_engine::LogSpec {
                devices,
                kinds: kinds.clone(),
                mode: *mode,
                region: None,
            });
        }
        let array = match Array::create(members, &opts) {
            Ok(a) => a,
            Err(e) => {
                cleanup(&created);
                return Err(e.to_string());
            }
        };
        if let Some(n) = &self.name {
            array.set_name(n).map_err(|e| e.to_string())?;
        }
        array.close().map_err(|e| e.to_string())?;
        let st = array.status();
        // Members of different sizes under a layout that uses each as the
        // smallest: say how much is left unused, and what would use it.
        if matches!(
            st.layout.as_str(),
            "raid0" | "raid1" | "raid4" | "raid5" | "raid6" | "raidh" | "raidh6"
        ) {
            let used = st.stripe_count * st.chunk_bytes;
            let waste: u64 = st
                .member_states
                .iter()
                .map(|m| m.data_bytes.saturating_sub(used))
                .sum();
            let total: u64 = st.member_states.iter().map(|m| m.data_bytes).sum();
            // Equal members, a log region on two of them: the others keep
            // as much unused (they do not differ in size).
            let region = self.log_region.unwrap_or(0);
            let holds_copy = |path: &Option<String>| {
                let region_path = path.as_ref().map(|p| format!("{p} (log region)"));
                st.log.as_ref().is_some_and(|l| {
                    l.devices
                        .iter()
                        .any(|d| Some(&d.path) == region_path.as_ref())
                })
            };
            let physical: std::collections::BTreeSet<u64> = st
                .member_states
                .iter()
                .map(|m| m.data_bytes + if holds_copy(&m.path) { region } else { 0 })
                .collect();
            let region_only = region > 0 && physical.len() == 1;
            if region_only && waste > 0 {
                eprintln!(
                    "hetraid: note: the log region takes {} of each member holding a copy; the other members keep {} in all unused ({} uses {} of each member)",
                    format_size(self.log_region.unwrap_or(0)),
                    format_size(waste),
                    st.layout,
                    format_size(used)
                );
            } else if waste > total / 100 {
                eprintln!(
                    "hetraid: warning: the members differ in size: {} of them ({:.0} %) is not used, as {} uses {} of each member (the smallest's); raidx uses members of any size (hetraid layout --layout raidx --sizes ... shows what it would hold)",
                    format_size(waste),
                    waste as f64 * 100.0 / total.max(1) as f64,
                    st.layout,
                    format_size(used)
                );
            }
        }
        // Spare space that a rebuild must share (S²-RAID with K = G): say
        // what it costs and what avoids it.
        if let Some(t) = hetraid_core::rebuild::shared_spare_target(array.layout(), 0) {
            let name = |i: usize| {
                st.member_states
                    .get(i)
                    .and_then(|m| m.path.clone())
                    .unwrap_or_else(|| format!("member {i}"))
            };
            eprintln!(
                "hetraid: note: a rebuild into spare space will have one disk ({} when {} fails) written by one stream while another reads it, so it takes about twice as long as its streams apart: with as many partitions as the group size, a failed disk's streams need more disks than survive; leave out --partitions (with spare partitions it defaults to one fewer than the group) to avoid it, at the cost of capacity",
                name(t),
                name(0)
            );
        }
        println!(
            "created {} array {}{} on {} members: capacity {} ({} bytes), chunk {}, policy {}",
            st.layout,
            self.name
                .as_ref()
                .map_or_else(String::new, |n| format!("{n} ")),
            st.uuid,
            st.members,
            format_size(st.capacity_bytes),
            st.capacity_bytes,
            format_size(st.chunk_bytes),
            st.policy
        );
        if let Some(l) = &st.log {
            let devs: Vec<&str> = l.devices.iter().map(|d| d.path.as_str()).collect();
            println!(
                "write log: {} on {} ({} of log){}",
                l.mode,
                devs.join(", "),
                format_size(l.ring_bytes),
                if self.log_region.is_some() || st.hpda.is_some() {
                    ""
                } else {
                    "; list it with the members in every command"
                }
            );
            let bound = hetraid_core::journal::INDEX_BYTES_MAX;
            if l.mode == "write-back" && l.ring_bytes > 4 * bound {
                println!(
                    "note: at most {} of writes wait in a write-back log (its memory bound; serve --log-memory sets it): a log larger than {} keeps room it will not use",
                    format_size(bound),
                    format_size(4 * bound)
                );
            }
        }
        Ok(())
    }
}

#[derive(Debug, Args)]
pub struct MembersCmd {
    /// The array's member files, in any order.
    #[arg(required = true)]
    pub members: Vec<String>,
    /// Run without the array's members that are not given: they are
    /// recorded missing (mdadm's --run). Without it a command given only
    /// some of a healthy array's members refuses and changes nothing.
    #[arg(long)]
    pub degraded: bool,
    /// assemble: start even if some members are stale (the freshest are
    /// brought back: writes made after they left are lost on them) or the array
    /// is dirty and degraded (data in the regions being written may be wrong).
    #[arg(long)]
    pub force: bool,
    #[arg(long)]
    pub json: bool,
    /// status: exit with the array's health, as `mdadm --detail --test`:
    /// 0 optimal, 1 degraded or rebuilding, 2 failed, 4 when it cannot be
    /// read.
    #[arg(long)]
    pub test: bool,
    /// assemble: the paths are directories (their files and block devices
    /// are read) or devices; the members of each array found are grouped
    /// by UUID and each array is assembled (mdadm --assemble --scan).
    #[arg(long)]
    pub scan: bool,
    /// assemble --scan: only the array of this name (`create --name`).
    #[arg(long, requires = "scan")]
    pub name: Option<String>,
}

/// Devices under `paths` (directories read one level: regular files and
/// block devices), each with the UUID of the array it belongs to.
/// Among `members`, exactly one that carries no hetraid superblock (a new
/// device a kill left blank): it, the others, and the freshest superblock
/// among them. None otherwise.
fn one_blank_member(
    members: &[String],
) -> Result<Option<(String, Vec<String>, hetraid_engine::format::Superblock)>, String> {
    let mut blank = Vec::new();
    let mut sbs = Vec::new();
    for m in members {
        let p = split_member(m)?.0;
        match hetraid_engine::annex::read_member(&p) {
            Ok((sb, _)) => sbs.push(sb),
            // A log device has no superblock either: it is not blank.
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData && !is_log_file(&p) => {
                blank.push(m.clone())
            }
            Err(_) => {}
        }
    }
    let Some(fresh) = sbs.into_iter().max_by_key(|s| s.events) else {
        return Ok(None);
    };
    let [new] = blank.as_slice() else {
        return Ok(None);
    };
    let rest = members.iter().filter(|m| *m != new).cloned().collect();
    Ok(Some((new.clone(), rest, fresh)))
}

/// Does the file at `p` carry a write log's header magic (either slot)?
fn is_log_file(p: &Path) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(p) else {
        return false;
    };
    [0u64, 4096].iter().any(|&at| {
        let mut b = [0u8; 8];
        f.seek(SeekFrom::Start(at)).is_ok()
            && f.read_exact(&mut b).is_ok()
            && &b == hetraid_engine::log::LOG_MAGIC
    })
}

/// What `annex::read_member` says of a device: its superblock and annex.
type MemberRead = (
    hetraid_engine::format::Superblock,
    Option<hetraid_engine::annex::Annex>,
);

fn scan_devices(paths: &[String]) -> Result<Vec<(String, PathBuf)>, String> {
    use std::os::unix::fs::FileTypeExt;
    let mut found = Vec::new();
    for p in paths {
        let p = PathBuf::from(p);
        let meta = std::fs::metadata(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        let mut candidates = Vec::new();
        if meta.is_dir() {
            let mut entries: Vec<PathBuf> = std::fs::read_dir(&p)
                .map_err(|e| format!("{}: {e}", p.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .collect();
            entries.sort();
            candidates.extend(entries.into_iter().filter(|e| {
                std::fs::metadata(e).is_ok_and(|m| m.is_file() || m.file_type().is_block_device())
            }));
        } else {
            candidates.push(p);
        }
        for c in candidates {
            if let Some(u) = hetraid_nbd::control::array_uuid(&c) {
                if !found
                    .iter()
                    .any(|(_, q): &(String, PathBuf)| same_path(q, &c))
                {
                    found.push((u, c));
                }
            }
        }
    }
    Ok(found)
}

/// The exit code of `status --test` for an array in `state`.
pub fn health_code(state: &str) -> i32 {
    match state {
        "optimal" => 0,
        "degraded" | "rebuilding" => 1,
        _ => 2,
    }
}

/// Exit now with `code` when it is not 0 (what was printed is flushed).
pub fn exit_with(code: i32) -> Result<(), String> {
    use std::io::Write;
    if code != 0 {
        let _ = std::io::stdout().flush();
        std::process::exit(code);
    }
    Ok(())
}

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
fn awaiting_rebuild(st: &hetraid_engine::Status) -> Option<String> {
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
fn rebuild_command(st: &hetraid_engine::Status) -> String {
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

/// `--member SLOT|PATH`: a slot number, or the path of a member of the
/// array `members` belong to (its superblock says its slot; read without
/// taking its lock, so it works on a served array too).
pub fn slot_of(arg: &str, members: &[String]) -> Result<usize, String> {
    if let Ok(n) = arg.parse::<usize>() {
        return Ok(n);
    }
    let path = split_member(arg)?.0;
    let first = members
        .first()
        .map(|m| split_member(m).map(|x| x.0))
        .transpose()?
        .ok_or("give the array's members")?;
    let want = hetraid_nbd::control::array_uuid(&first);
    let mut b = hetraid_engine::member::AlignedBuf::zeroed(4096);
    let sb = std::fs::File::open(&path)
        .and_then(|f| {
            use std::os::unix::fs::FileExt;
            f.read_exact_at(&mut b, 0)
        })
        .ok()
        .and_then(|_| hetraid_engine::format::Superblock::decode(&b).ok())
        .ok_or_else(|| {
            format!(
                "--member {arg}: {} has no hetraid superblock; give the member's slot number instead",
                path.display()
            )
        })?;
    if Some(sb.uuid_string()) != want {
        return Err(format!(
            "--member {arg}: {} belongs to array {}, not to the array of {}",
            path.display(),
            sb.uuid_string(),
            first.display()
        ));
    }
    Ok(sb.member as usize)
}

/// When the array of `members` is being served, run `request` in the server.
pub fn remote(
    members: &[String],
    request: serde_json::Value,
) -> Option<Result<serde_json::Value, String>> {
    remote_passing(members, request, None)
}

/// [`remote`], passing the server the new member at `new` as this user
/// opens it (read-write, locked, exclusively for a block device): the
/// server never opens a path on the caller's behalf.
pub fn remote_passing(
    members: &[String],
    request: serde_json::Value,
    new: Option<&Path>,
) -> Option<Result<serde_json::Value, String>> {
    let first = split_member(members.first()?).ok()?.0;
    let uuid = hetraid_nbd::control::array_uuid(&first)?;
    match hetraid_nbd::control::is_served(&uuid) {
        Ok(false) => return None,
        Ok(true) => {}
        Err(e) => return Some(Err(e)),
    }
    // Every path given must be a member of the served array, each once: a
    // verb never acts on the served array because of the first path alone.
    let check = || -> Result<(), String> {
        for p in member_paths(members)? {
            match hetraid_nbd::control::array_uuid(&p) {
                Some(u) if u == uuid => {}
                Some(u) => {
                    return Err(format!(
                        "member {} belongs to array {u}, not to the served array {uuid}",
                        p.display()
                    ))
                }
                None => {
                    return Err(format!(
                    "{} has no hetraid superblock: it is not a member of the served array {uuid}",
                    p.display()
                ))
                }
            }
        }
        Ok(())
    };
    if let Err(e) = check() {
        return Some(Err(e));
    }
    let opened = match new.map(|p| {
        hetraid_engine::member::FileMember::open(p)
            .map_err(|e| format!("cannot open new member {}: {e}", p.display()))
    }) {
        Some(Err(e)) => return Some(Err(e)),
        Some(Ok(m)) => Some(m),
        None => None,
    };
    hetraid_nbd::control::remote(&first, &request, opened.as_ref().map(|m| m.file()))
}

impl MembersCmd {
    pub fn status(&self) -> Result<(), String> {
        if !self.test {
            return self.status_printed().map(|_| ());
        }
        match self.status_printed() {
            Ok(state) => exit_with(health_code(&state)),
            Err(e) => {
                eprintln!("hetraid: {e}");
                exit_with(4)
            }
        }
    }

    /// Print the status; the array's state.
    fn status_printed(&self) -> Result<String, String> {
        if self.scan {
            return Err("--scan applies to assemble".into());
        }
        if self.degraded {
            return Err("--degraded applies to commands that write; status writes nothing and shows any array".into());
        }
        if self.force {
            return Err(
                "--force applies to assemble, not to status (status never changes the array)"
                    .into(),
            );
        }
        if let Some(r) = remote(&self.members, serde_json::json!({"verb": "status"})) {
            let v = r?;
            let state = v["state"].as_str().unwrap_or("?").to_string();
            if self.json {
                return super::print_json(&v).map(|_| state);
            }
            let held_by = match v["process"].as_str() {
                None | Some("serve") => "served".to_string(),
                Some(p) => format!("hetraid {p} running, pid {}", v["pid"]),
            };
            println!(
                "array {}{}  {}  state {} ({held_by})\ncapacity {} ({} bytes), chunk {}, {} stripes, policy {}{}, events {}",
                v["name"].as_str().filter(|n| !n.is_empty()).map_or_else(String::new, |n| format!("{n} ")),
                v["uuid"].as_str().unwrap_or("?"),
                match v["parity_order"].as_str() {
                    Some(o) => format!("{} {o}", v["layout"].as_str().unwrap_or("?")),
                    None => v["layout"].as_str().unwrap_or("?").to_string(),
                },
                v["state"].as_str().unwrap_or("?"),
                format_size(v["capacity_bytes"].as_u64().unwrap_or(0)),
                v["capacity_bytes"],
                format_size(v["chunk_bytes"].as_u64().unwrap_or(0)),
                v["stripe_count"],
                v["policy"].as_str().unwrap_or("?"),
                v["read_policy"]
                    .as_str()
                    .map_or_else(String::new, |p| format!(", reads {p}")),
                v["events"]
            );
            // The lines offline status prints from the same fields.
            match v.get("last_scrub").filter(|r| !r.is_null()) {
                Some(r) => println!(
                    "scan: scrub finished {} in {:.1} s: {} stripes, {} mismatched, {} repaired",
                    utc(r["finished_unix_s"].as_u64().unwrap_or(0)),
                    r["duration_ms"].as_u64().unwrap_or(0) as f64 / 1000.0,
                    r["stripes_checked"],
                    r["mismatched_stripes"],
                    r["repaired_stripes"]
                ),
                None => println!("scan: none requested"),
            }
            if v["checksums"] == true {
                println!("checksums: crc32c per 4 KiB block, verified on every read");
            }
            match v.get("log").filter(|l| !l.is_null()) {
                Some(l) => println!(
                    "consistency: {} (write log {}, {} of {} bytes in use, {} records since the last checkpoint, {} bytes not yet on the members)",
                    l["mode"].as_str().unwrap_or("?"),
                    l["state"].as_str().unwrap_or("?"),
                    l["used_bytes"],
                    l["ring_bytes"],
                    l["records"],
                    l["unreclaimed_bytes"]
                ),
                None => println!("consistency: {}", v["consistency"].as_str().unwrap_or("?")),
            }
            print_hpda(&v);
            if let Some(p) = progress_line(&v) {
                println!("{p}");
            }
            if let Some(c) = change_line(&v) {
                println!("{c}");
            }
            print_members(&v);
            print_spares(&v);
            for d in v["log"]["devices"].as_array().into_iter().flatten() {
                println!(
                    "{:>6}  {:<10}  {:<5}  {}",
                    format!("log{}", d["copy"]),
                    d["state"].as_str().unwrap_or("?"),
                    d["kind"].as_str().unwrap_or("?"),
                    d["path"].as_str().unwrap_or("-")
                );
            }
            return Ok(state);
        }
        let a = assemble_with(
            &self.members,
            AssembleOptions {
                force: false,
                access: Access::Inspect,
                degraded: true,
            },
        )?;
        let st = a.status();
        if self.json {
            return super::print_json(&serde_json::to_value(&st).map_err(|e| e.to_string())?)
                .map(|_| st.state.to_string());
        }
        print_status(&st);
        print_warnings(&a);
        Ok(st.state.to_string())
    }

    /// `assemble --scan`: every array found under the paths, by UUID.
    fn assemble_scan(&self) -> Result<(), String> {
        let found = scan_devices(&self.members)?;
        let mut uuids: Vec<String> = found.iter().map(|(u, _)| u.clone()).collect();
        uuids.sort();
        uuids.dedup();
        if uuids.is_empty() {
            return Err(format!(
                "no hetraid member found in {}; give the directories or devices that hold the members",
                self.members.join(", ")
            ));
        }
        // Per array: its members of the freshest incarnation (a member
        // retired from an earlier one, whose member table has another size,
        // is left out with a warning, as assembly leaves out stale ones),
        // and its name.
        let mut arrays: Vec<(String, Vec<String>, String)> = Vec::new();
        for u in &uuids {
            let read: Vec<(String, Option<MemberRead>)> = found
                .iter()
                .filter(|(x, _)| x == u)
                .map(|(_, p)| {
                    (
                        p.display().to_string(),
                        hetraid_engine::annex::read_member(p).ok(),
                    )
                })
                .collect();
            let fresh = read
                .iter()
                .filter_map(|(_, r)| r.as_ref())
                .max_by_key(|(sb, _)| sb.events)
                .map(|(sb, a)| (sb.roles.len(), a.as_ref().map(|a| a.name.clone())));
            let (n, name) = match fresh {
                Some((n, name)) => (Some(n), name.unwrap_or_default()),
                None => (None, String::new()),
            };
            let mut paths = Vec::new();
            for (p, r) in &read {
                match (r, n) {
                    (Some((sb, _)), Some(n)) if sb.roles.len() != n => eprintln!(
                        "hetraid: warning: {p} is left out: it belongs to an earlier incarnation of array {u} ({} slots, now {n})",
                        sb.roles.len()
                    ),
                    // Two copies of one slot's device (a copy kept beside
                    // it): the newer is taken, the other left out.
                    (Some((sb, _)), _)
                        if read.iter().any(|(q, r2)| {
                            r2.as_ref().is_some_and(|(o, _)| {
                                q != p
                                    && o.member == sb.member
                                    && (o.events, o.generation, q.as_str())
                                        > (sb.events, sb.generation, p.as_str())
                            })
                        }) =>
                    {
                        eprintln!(
                            "hetraid: warning: {p} is left out: a newer copy of the device of slot {} is beside it",
                            sb.member
                        )
                    }
                    _ => paths.push(p.clone()),
                }
            }
            arrays.push((u.clone(), paths, name));
        }
        if let Some(n) = &self.name {
            let named: Vec<&String> = arrays
                .iter()
                .filter(|(_, _, x)| x == n)
                .map(|(u, _, _)| u)
                .collect();
            if named.len() > 1 {
                return Err(format!(
                    "{} arrays are named {n} ({}): assemble one by its members, or rename one (hetraid create --name names a new array only)",
                    named.len(),
                    named.iter().map(|u| u.as_str()).collect::<Vec<_>>().join(", ")
                ));
            }
        }
        let mut assembled = 0;
        let mut failed = 0;
        for (u, paths, name) in &arrays {
            let (u, name) = (u.clone(), name.clone());
            if self.name.as_ref().is_some_and(|n| *n != name) {
                continue;
            }
            let label = if name.is_empty() {
                u.clone()
            } else {
                format!("{name} ({u})")
            };
            let sub = MembersCmd {
                members: paths.clone(),
                force: self.force,
                degraded: self.degraded,
                json: false,
                test: false,
                scan: false,
                name: None,
            };
            match sub.assemble_quiet() {
                Ok(st) => {
                    assembled += 1;
                    println!(
                        "assembled {label}: {} {}, {} members{} from {}",
                        st.layout,
                        st.state,
                        st.members,
                        match st.spares.len() {
                            0 => String::new(),
                            1 => " and a spare".into(),
                            k => format!(" and {k} spares"),
                        },
                        paths.join(" ")
                    );
                }
                Err(e) => {
                    failed += 1;
                    eprintln!("hetraid: array {label} ({}): {e}", paths.join(" "));
                }
            }
        }
        if assembled + failed == 0 {
            return Err(format!(
                "no array named {} found in {}",
                self.name.as_deref().unwrap_or(""),
                self.members.join(", ")
            ));
        }
        if failed > 0 {
            return Err(format!(
                "{failed} of {} arrays could not be assembled",
                assembled + failed
            ));
        }
        Ok(())
    }

    /// Assemble for writing and close, finishing a grow, restripe or
    /// shrink cut short first (as MD resumes a reshape when the array
    /// starts): the array, and the change's report when one finished.
    fn assemble_finishing(&self) -> Result<(Array, Option<hetraid_engine::ChangeReport>), String> {
        let open = || -> Result<Array, String> {
            let a = assemble_with(
                &self.members,
                AssembleOptions {
                    force: self.force,
                    access: Access::ReadWrite,
                    degraded: self.degraded,
                },
            )?;
            // `assemble` starts the array as decided (absent members
            // recorded missing with --degraded, a stale table made fresh).
            a.commit().map_err(|e| e.to_string())?;
            a.close().map_err(|e| e.to_string())?;
            Ok(a)
        };
        let mut a = open()?;
        let mut finished = None;
        if let Some(p) = a.change_progress() {
            drop(a);
            match Array::resume_change(open_all(&self.members)?, None) {
                Ok(r) => finished = r,
                Err(e) => eprintln!(
                    "hetraid: warning: the {} in progress ({} of {} done) cannot continue: {e}",
                    p.change, p.moves_done, p.moves
                ),
            }
            a = open()?;
        }
        Ok((a, finished))
    }

    /// [`Self::assemble_finishing`] for `--scan`: warnings printed, the status.
    fn assemble_quiet(&self) -> Result<hetraid_engine::Status, String> {
        let (a, _) = self.assemble_finishing()?;
        print_warnings(&a);
        Ok(a.status())
    }

    pub fn assemble(&self) -> Result<(), String> {
        if self.test {
            return Err("--test applies to status (it exits with the array's health)".into());
        }
        if self.scan {
            return self.assemble_scan();
        }
        let (a, finished) = self.assemble_finishing()?;
        let st = a.status();
        if self.json {
            return super::print_json(&serde_json::to_value(&st).map_err(|e| e.to_string())?);
        }
        print_warnings(&a);
        if let Some(r) = &finished {
            print_change(r, false)?;
        }
        println!(
            "assembled {} array {}: {} ({} members)",
            st.layout, st.uuid, st.state, st.members
        );
        Ok(())
    }
}

#[derive(Debug, Args)]
pub struct MemberOpCmd {
    /// The array's member files.
    #[arg(required = true)]
    pub members: Vec<String>,
    /// Run without the array's members that are not given: they are
    /// recorded missing (mdadm's --run). Without it a command given only
    /// some of a healthy array's members refuses and changes nothing.
    #[arg(long)]
    pub degraded: bool,
    /// The member: its slot (0-based) or its path (a member of this array).
    #[arg(long, value_name = "SLOT|PATH")]
    pub member: Option<String>,
    /// replace: the write log's copy (0 or 1) instead of a member; the new
    /// device receives the log's live records at once.
    #[arg(long, value_name = "I")]
    pub log_copy: Option<usize>,
    /// The new member file (replace).
    #[arg(long)]
    pub with: Option<String>,
    /// fail: even beyond the redundancy (data becomes unreadable); replace:
    /// overwrite a device that holds data or another array's member.
    #[arg(long)]
    pub force: bool,
}

impl MemberOpCmd {
    /// The member slot, for verbs that need one (no --log-copy).
    fn slot(&self, verb: &str) -> Result<usize, String> {
        if self.log_copy.is_some() {
            return Err(format!(
                "--log-copy applies to replace only; {verb} takes --member SLOT|PATH"
            ));
        }
        let m = self.member.as_deref().ok_or_else(|| {
            format!("{verb} needs --member SLOT|PATH (the member's slot or path)")
        })?;
        slot_of(m, &self.members)
    }

    /// "SLOT (PATH)" for messages: the path given, or the given member
    /// whose superblock holds the slot.
    fn named(&self, slot: usize) -> String {
        let path = match self.member.as_deref() {
            Some(m) if m.parse::<usize>().is_err() => Some(m.to_string()),
            _ => self
                .members
                .iter()
                .find(|p| slot_of(p, &self.members) == Ok(slot))
                .cloned(),
        };
        match path {
            Some(p) => format!(
                "{slot} ({})",
                split_member(&p).map_or(p.clone(), |x| x.0.display().to_string())
            ),
            None => slot.to_string(),
        }
    }

    pub fn fail(&self) -> Result<(), String> {
        let member = self.slot("fail")?;
        let name = self.named(member);
        if let Some(r) = remote(
            &self.members,
            serde_json::json!({"verb": "fail", "member": member, "force": self.force}),
        ) {
            let v = r?;
            println!(
                "member {} marked faulty; array is {}",
                name,
                v["state"].as_str().unwrap_or("?")
            );
            return Ok(());
        }
        let a = assemble(&self.members, self.degraded)?;
        a.fail_with(member, self.force).map_err(|e| e.to_string())?;
        match a.close() {
            // Forced beyond the redundancy, the array is failed: that is what
            // was asked for, not an error of this command.
            Err(_) if self.force => {}
            r => r.map_err(|e| e.to_string())?,
        }
        println!(
            "member {} marked faulty; array is {}",
            name,
            a.status().state
        );
        Ok(())
    }

    /// mdadm's --remove: detach a faulty or missing member. Its slot stays
    /// empty (degraded) until `add` or `replace` fills it.
    pub fn remove(&self) -> Result<(), String> {
        if self.force || self.with.is_some() {
            return Err(
                "remove takes no --force or --with; it detaches a faulty or missing member".into(),
            );
        }
        // A hot spare named by its path is taken off the array.
        if let Some(path) = self
            .member
            .as_deref()
            .filter(|m| m.parse::<usize>().is_err())
        {
            let p = split_member(path)?.0;
            if let Ok((sb, _)) = hetraid_engine::annex::read_member(&p) {
                if sb.member as usize >= sb.roles.len() {
                    let abs = std::path::absolute(&p).map_err(|e| e.to_string())?;
                    if let Some(r) = remote(
                        &self.members,
                        serde_json::json!({"verb": "remove_spare", "with": abs}),
                    ) {
                        r?;
                    } else {
                        let mut all = self.members.clone();
                        if !self
                            .members
                            .iter()
                            .any(|m| split_member(m).is_ok_and(|x| same_path(&x.0, &p)))
                        {
                            all.push(path.to_string());
                        }
                        let a = assemble(&all, self.degraded)?;
                        a.remove_spare(&p.display().to_string())
                            .map_err(|e| e.to_string())?;
                        a.close().map_err(|e| e.to_string())?;
                    }
                    println!(
                        "spare {} removed from the array (its superblock cleared)",
                        p.display()
                    );
                    return Ok(());
                }
            }
        }
        let member = self.slot("remove")?;
        let name = self.named(member);
        if let Some(r) = remote(
            &self.members,
            serde_json::json!({"verb": "remove", "member": member}),
        ) {
            r?;
        } else {
            let a = assemble(&self.members, self.degraded)?;
            a.remove(member).map_err(|e| e.to_string())?;
            a.close().map_err(|e| e.to_string())?;
        }
        println!(
            "member {} removed; its slot is empty until hetraid add or replace fills it",
            name
        );
        Ok(())
    }

    pub fn replace(&self) -> Result<(), String> {
        let with = self
            .with
            .as_deref()
            .ok_or("replace needs --with NEW_MEMBER")?;
        let abs = std::path::absolute(split_member(with)?.0).map_err(|e| e.to_string())?;
        let member = match (self.member.as_deref(), self.log_copy) {
            (Some(_), Some(_)) => {
                return Err("give --member SLOT|PATH or --log-copy I, not both".into())
            }
            (None, None) => return Err("replace needs --member SLOT|PATH or --log-copy I".into()),
            (None, Some(c)) => return self.replace_log_copy(c, with),
            (Some(m), None) => slot_of(m, &self.members)?,
        };
        if let Some(r) = remote_passing(
            &self.members,
            serde_json::json!({"verb": "replace", "member": member, "with": abs, "force": self.force}),
            Some(&abs),
        ) {
            r?;
            println!("member {} attached to the served array from {}; run hetraid rebuild with the same members", member, abs.display());
            return Ok(());
        }
        let (p, _) = split_member(with)?;
        // A former member coming back counts as given; the slot named by
        // --member does not (a forgotten path must not make an active
        // member replaceable: a dead disk is replaced with --degraded).
        let members = without(&self.members, &p);
        check_given_with(&members, Some(&p), None, self.degraded)?;
        let a = assemble(&members, true)?;
        let new = open_member(&p)?;
        a.replace(member, new, self.force)
            .map_err(|e| e.to_string())?;
        a.close().map_err(|e| e.to_string())?;
        println!(
            "member {} will be rebuilt onto {}; it waits for: {}",
            member,
            p.display(),
            rebuild_command(&a.status())
        );
        Ok(())
    }

    /// Replace a failed or missing copy of the write log: the live records
    /// are copied to the new device at once (nothing to rebuild after).
    fn replace_log_copy(&self, copy: usize, with: &str) -> Result<(), String> {
        let (p, kind) = split_member(with)?;
        if kind.is_some() {
            return Err(format!(
                "{with}: a log copy keeps the kind given at create; give the path alone"
            ));
        }
        let abs = std::path::absolute(&p).map_err(|e| e.to_string())?;
        // Served: the server copies the live records while clients write.
        if let Some(r) = remote_passing(
            &self.members,
            serde_json::json!({"verb": "replace", "log_copy": copy, "with": abs, "force": self.force}),
            Some(&abs),
        ) {
            r?;
            println!(
                "log copy {copy} of the served array is now {}, with the log's live records; list it with the members from now on",
                abs.display()
            );
            return Ok(());
        }
        let a = assemble(&self.members, self.degraded)?;
        let new = open_member(&p)?;
        a.replace_log_copy(copy, new, self.force)
            .map_err(|e| e.to_string())?;
        a.close().map_err(|e| e.to_string())?;
        println!(
            "log copy {copy} is now {}, with the log's live records; list it with the members from now on",
            p.display()
        );
        Ok(())
    }
}

#[derive(Debug, Args)]
pub struct AddCmd {
    /// The array's member files.
    #[arg(required = true)]
    pub members: Vec<String>,
    /// Run without the array's members that are not given: they are
    /// recorded missing (mdadm's --run). Without it a command given only
    /// some of a healthy array's members refuses and changes nothing.
    #[arg(long)]
    pub degraded: bool,
    /// The new device (PATH[:hdd|ssd|nvram]): put in the first failed,
    /// missing or removed slot (then rebuild), or, when no slot wants one,
    /// added as a hot spare.
    #[arg(long, value_name = "PATH[:kind]")]
    pub with: String,
    /// Add it as a hot spare even when a slot is failed (it then waits;
    /// served, it takes the slot at once).
    #[arg(long)]
    pub spare: bool,
    /// Overwrite a device that holds data or another array's member.
    #[arg(long)]
    pub force: bool,
}

impl AddCmd {
    pub fn run(&self) -> Result<(), String> {
        let free = |state: &str| matches!(state, "faulty" | "removed" | "missing");
        let (p, kind) = split_member(&self.with)?;
        let kind = kind.unwrap_or(MemberKind::Hdd);
        // A served array: find the slot in its status, attach through it.
        if let Some(r) = remote(&self.members, serde_json::json!({"verb": "status"})) {
            let v = r?;
            let slot = v["member_states"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|m| free(m["state"].as_str().unwrap_or("")))
                .and_then(|m| m["device"].as_u64())
                .filter(|_| !self.spare);
            let abs = std::path::absolute(&p).map_err(|e| e.to_string())?;
            let Some(slot) = slot else {
                remote_passing(
                    &self.members,
                    serde_json::json!({"verb": "add_spare", "with": abs, "kind": kind.as_str(), "force": self.force}),
                    Some(&abs),
                )
                .ok_or("the server went away")??;
                println!(
                    "{} added to the served array as a hot spare: it takes the slot of the next member to fail, and the rebuild starts by itself",
                    p.display()
                );
                return Ok(());
            };
            remote_passing(
                &self.members,
                serde_json::json!({"verb": "replace", "member": slot, "with": abs, "force": self.force}),
                Some(&abs),
            )
            .ok_or("the server went away")??;
            println!(
                "{} added to the served array in slot {slot}; run hetraid rebuild with the same members",
                p.display()
            );
            return Ok(());
        }
        // A former member coming back counts as given for its slot.
        let members = without(&self.members, &p);
        check_given_with(&members, Some(&p), None, self.degraded)?;
        let a = assemble(&members, true)?;
        let st = a.status();
        // A device that left this array goes back into its own slot (a
        // re-add: only what was written since it left is resynced).
        let own = hetraid_engine::annex::read_member(&p)
            .ok()
            .filter(|(sb, _)| sb.uuid_string() == st.uuid)
            .map(|(sb, _)| sb.member as usize)
            .filter(|&k| st.member_states.get(k).is_some_and(|m| free(m.state)));
        let slot = own
            .or_else(|| {
                st.member_states
                    .iter()
                    .find(|m| free(m.state))
                    .map(|m| m.device)
            })
            .filter(|_| !self.spare);
        let Some(slot) = slot else {
            let new = open_member(&p)?;
            a.add_spare(new, kind, self.force)
                .map_err(|e| e.to_string())?;
            a.close().map_err(|e| e.to_string())?;
            println!(
                "{} added as a hot spare: list it with the members; a served array rebuilds onto it when a member fails, an offline hetraid rebuild uses it for a failed slot",
                p.display()
            );
            return Ok(());
        };
        a.replace(slot, open_member(&p)?, self.force)
            .map_err(|e| e.to_string())?;
        let st = a.status();
        a.close().map_err(|e| e.to_string())?;
        if st.member_states[slot].readd {
            println!(
                "{} re-added in slot {slot}: it left intact, so only the {} regions written since are resynced; it waits for: {}",
                p.display(),
                st.dirty_regions,
                rebuild_command(&st)
            );
        } else {
            println!(
                "{} added in slot {slot}; it waits for: {}",
                p.display(),
                rebuild_command(&st)
            );
        }
        Ok(())
    }
}

#[derive(Debug, Args)]
pub struct GrowCmd {
    /// The array's member files.
    #[arg(required = true)]
    pub members: Vec<String>,
    /// Run without the array's members that are not given: they are
    /// recorded missing (mdadm's --run). Without it a command given only
    /// some of a healthy array's members refuses and changes nothing.
    #[arg(long)]
    pub degraded: bool,
    /// The new member (PATH[:hdd|ssd|nvram]): RAIDX moves chunks onto it so
    /// the array holds the most bundles the members allow. Without --add,
    /// a grow or shrink cut short (a crash) is finished.
    #[arg(long, value_name = "NEW")]
    pub add: Option<String>,
    /// RAIDH: the parity weights after the grow, one per member (a member
    /// added included): the array restripes to them. Also how a member
    /// replaced by a faster one gets a larger share of parity.
    #[arg(long, value_delimiter = ',')]
    pub weights: Option<Vec<u64>>,
    /// Overwrite a new member that holds another array's member.
    #[arg(long)]
    pub force: bool,
    /// `max`: RAIDX members with room for more chunk slots than they use
    /// (replaced by larger ones) get them, chunks moving onto them.
    #[arg(long, value_name = "max")]
    pub size: Option<String>,
    /// Stop after N batches, the change left recorded (tests of resuming:
    /// `assemble`, `serve` or `grow` finish it).
    #[arg(long, hide = true)]
    pub batches: Option<u64>,
    #[command(flatten)]
    pub speed: ChangeSpeed,
    #[arg(long)]
    pub json: bool,
}

/// MD's two speed limits for a change on a served array.
#[derive(Debug, Args)]
pub struct ChangeSpeed {
    /// Bytes a second of chunk moves (per member) kept while clients do
    /// I/O (MD's speed_limit_min; a served array's requests run between
    /// batches). Default MD's 1000K served.
    #[arg(long, value_parser = size)]
    pub min_speed: Option<u64>,
    /// Bytes a second at most when idle (MD's speed_limit_max); 0 =
    /// unlimited. Default MD's 200000K served, unlimited offline.
    #[arg(long, value_parser = size)]
    pub max_speed: Option<u64>,
}

impl ChangeSpeed {
    /// Into a control request.
    fn put(&self, req: &mut serde_json::Value) {
        let md = hetraid_core::pace::MD_DEFAULT;
        req["min_speed"] = self.min_speed.unwrap_or(md.min_bps).into();
        req["max_speed"] = self.max_speed.unwrap_or(md.max_bps).into();
    }

    /// Offline, the limits do not apply to the hidden `--batches` path:
    /// an error when given.
    fn offline(&self) -> Result<(), String> {
        if self.min_speed.is_some() || self.max_speed.is_some() {
            return Err("--min-speed and --max-speed do not go with --batches".into());
        }
        Ok(())
    }

    /// Offline: no client I/O to yield to, so unlimited unless a limit is
    /// given.
    /// Batches per assembly offline: one when a limit is given (the pacer
    /// runs between assemblies), more otherwise.
    fn batches_per_swap(&self) -> u64 {
        if self.min_speed.is_some() || self.max_speed.is_some() {
            hetraid_core::limits::SERVED_BATCHES_PER_SWAP
        } else {
            hetraid_core::limits::OFFLINE_BATCHES_PER_SWAP
        }
    }

    fn offline_options(&self) -> hetraid_engine::ChangeOptions {
        hetraid_engine::ChangeOptions {
            min_speed: self.min_speed.unwrap_or(0),
            max_speed: self.max_speed.unwrap_or(0),
        }
    }
}

/// A change report from the server's JSON.
fn remote_change(v: serde_json::Value) -> Result<hetraid_engine::ChangeReport, String> {
    let n = |k: &str| v[k].as_u64().unwrap_or(0);
    Ok(hetraid_engine::ChangeReport {
        change: v["change"].as_str().unwrap_or("?").into(),
        slot: n("slot") as usize,
        moves: n("moves"),
        rebuilt: n("rebuilt"),
        bundles_before: n("bundles_before"),
        bundles_after: n("bundles_after"),
        capacity_before: n("capacity_before"),
        capacity_after: n("capacity_after"),
        seconds: v["seconds"].as_f64().unwrap_or(0.0),
    })
}

fn print_change(r: &hetraid_engine::ChangeReport, json: bool) -> Result<(), String> {
    if json {
        return super::print_json(&serde_json::to_value(r).map_err(|e| e.to_string())?);
    }
    if r.change == "restripe" {
        println!(
            "restriped onto {} members: {} rows written in {:.2} s; stripes {} -> {}; capacity {} -> {} ({} -> {} bytes)",
            r.slot + 1,
            r.moves,
            r.seconds,
            r.bundles_before,
            r.bundles_after,
            format_size(r.capacity_before),
            format_size(r.capacity_after),
            r.capacity_before,
            r.capacity_after
        );
        return Ok(());
    }
    let verb = match r.change.as_str() {
        "grow" => "added",
        "enlarge" => "grown to its whole member",
        _ => "removed",
    };
    println!(
        "slot {} {verb}: {} chunk moves ({} rebuilt from their bundles) in {:.2} s; bundles {} -> {}; capacity {} -> {} ({} -> {} bytes)",
        r.slot,
        r.moves,
        r.rebuilt,
        r.seconds,
        r.bundles_before,
        r.bundles_after,
        format_size(r.capacity_before),
        format_size(r.capacity_after),
        r.capacity_before,
        r.capacity_after
    );
    Ok(())
}

/// The given paths opened as members (each once).
pub fn open_all(paths: &[String]) -> Result<Vec<Arc<dyn Member>>, String> {
    member_paths(paths)?
        .iter()
        .map(|p| open_member(p))
        .collect()
}

fn open_all_read_only(paths: &[String]) -> Result<Vec<Arc<dyn Member>>, String> {
    member_paths(paths)?
        .iter()
        .map(|p| open_member_for(p, false))
        .collect()
}

/// `paths` without `p` (a device named by --with is not one of the members
/// the command opens, even when listed among them).
fn without(paths: &[String], p: &Path) -> Vec<String> {
    paths
        .iter()
        .filter(|m| !split_member(m).is_ok_and(|x| same_path(&x.0, p)))
        .cloned()
        .collect()
}

/// Refuse, writing nothing, when members of the array are not among
/// `paths` and `degraded` was not said; `with` (a device that was a member
/// of this array, coming back) and `slot` (named by --member) count as
/// given.
fn check_given_with(
    paths: &[String],
    with: Option<&Path>,
    slot: Option<usize>,
    degraded: bool,
) -> Result<(), String> {
    if degraded {
        return Ok(());
    }
    let given = open_all_read_only(paths)?;
    let a = Array::assemble_with(
        given.clone(),
        AssembleOptions {
            access: Access::Inspect,
            degraded: true,
            force: false,
        },
    )
    .map_err(|e| e.to_string())?;
    let uuid = a.superblock().uuid;
    // The slot a device named by --with held in this array, read from its
    // own superblock (it is not assembled: it may have run apart).
    let returning = with
        .and_then(|p| hetraid_engine::annex::read_member(p).ok())
        .filter(|(sb, _)| sb.uuid == uuid)
        .map(|(sb, _)| sb.member as usize);
    if a.not_given()
        .iter()
        .all(|&s| Some(s) == slot || Some(s) == returning)
    {
        return Ok(());
    }
    Array::check_given(&given, false).map_err(|e| e.to_string())
}

/// [`open_all`] for a command that hands the members to a procedure that
/// assembles them itself: refused, writing nothing, when members of the
/// array were not given and `degraded` was not said.
pub fn open_given(paths: &[String], degraded: bool) -> Result<Vec<Arc<dyn Member>>, String> {
    let members = open_all(paths)?;
    Array::check_given(&members, degraded).map_err(|e| e.to_string())?;
    Ok(members)
}

impl GrowCmd {
    /// The resume of a grow (`grow MEMBERS...`) given the new device that
    /// a kill left without a superblock (before the grow began): the exact
    /// command that starts it again.
    fn new_member_without_superblock(&self) -> Result<(), String> {
        let Some((new, rest, fresh)) = one_blank_member(&self.members)? else {
            return Ok(());
        };
        // A grow writes the new device first, then records itself on the
        // others: a blank device beside members with nothing recorded is a
        // grow killed before it began.
        let changing = fresh.reshape.is_some()
            || fresh
                .raidx_history
                .as_ref()
                .is_some_and(|h| h.pending.is_some());
        if changing {
            return Ok(());
        }
        Err(format!(
            "{new} carries no hetraid superblock, and no grow is recorded on the other members: a grow adding it was cut short before it began; start it again with: hetraid grow {} --add {new}",
            rest.join(" ")
        ))
    }

    pub fn run(&self) -> Result<(), String> {
        if let Some(add) = &self.add {
            let (p, _) = split_member(add)?;
            if self
                .members
                .iter()
                .any(|m| split_member(m).is_ok_and(|(q, _)| same_path(&q, &p)))
            {
                return Err(format!(
                    "{} is already listed as a member; --add takes a new device",
                    p.display()
                ));
            }
        }
        if self.force && self.add.is_none() {
            return Err("--force applies with --add only".into());
        }
        if self.add.is_none() && self.weights.is_none() && self.size.is_none() {
            self.new_member_without_superblock()?;
        }
        if let Some(sz) = &self.size {
            if sz != "max" {
                return Err(format!(
                    "--size {sz}: grow takes --size max (every member used whole)"
                ));
            }
            if self.add.is_some() || self.weights.is_some() || self.batches.is_some() {
                return Err(
                    "--size max goes alone: give --add or --weights in a grow of their own".into(),
                );
            }
            let mut req = serde_json::json!({"verb": "grow", "size": "max"});
            self.speed.put(&mut req);
            let rs: Vec<hetraid_engine::ChangeReport> = match remote(&self.members, req) {
                Some(r) => match r? {
                    serde_json::Value::Array(v) => {
                        v.into_iter().map(remote_change).collect::<Result<_, _>>()?
                    }
                    other => return Err(format!("unexpected reply from the server: {other}")),
                },
                None => {
                    let held = Held::open(&self.members, "grow", self.degraded)?;
                    held.cell
                        .set_batches_per_swap(self.speed.batches_per_swap());
                    let r = held
                        .cell
                        .enlarge(self.speed.offline_options())
                        .map_err(|e| e.to_string());
                    held.close()?;
                    r?
                }
            };
            if rs.is_empty() {
                println!("every member is used whole already: nothing to grow");
            }
            if self.json {
                return super::print_json(&serde_json::to_value(&rs).map_err(|e| e.to_string())?);
            }
            for r in &rs {
                print_change(r, false)?;
            }
            return Ok(());
        }
        if self.batches.is_some()
            && remote(&self.members, serde_json::json!({"verb": "status"})).is_some()
        {
            return Err("--batches applies to an array that is not served".into());
        }
        let mut req = serde_json::json!({"verb": "grow", "force": self.force});
        self.speed.put(&mut req);
        if let Some(add) = &self.add {
            let (p, kind) = split_member(add)?;
            if !p.exists() {
                return Err(format!(
                    "new member {} does not exist; check the path",
                    p.display()
                ));
            }
            req["add"] = std::path::absolute(&p)
                .map_err(|e| e.to_string())?
                .display()
                .to_string()
                .into();
            req["kind"] = kind.unwrap_or(MemberKind::Hdd).as_str().into();
        }
        if let Some(w) = &self.weights {
            req["weights"] = w.clone().into();
        }
        let new_path = match &self.add {
            Some(add) => {
                Some(std::path::absolute(split_member(add)?.0).map_err(|e| e.to_string())?)
            }
            None => None,
        };
        let bar = StatusBar::start(&self.members, "change");
        let served = remote_passing(&self.members, req, new_path.as_deref());
        drop(bar);
        if let Some(r) = served {
            return print_change(&remote_change(r?)?, self.json);
        }
        if self.batches.is_none() {
            // Held with a control socket, run by the served path's code (a
            // few batches per assembly): status from another shell sees it.
            let held = Held::open(&self.members, "grow", self.degraded)?;
            held.cell
                .set_batches_per_swap(self.speed.batches_per_swap());
            let opts = self.speed.offline_options();
            let bar = StatusBar::start(&self.members, "change");
            let r = match (&self.add, &self.weights) {
                (None, None) => held
                    .cell
                    .resume(opts)
                    .map_err(|e| e.to_string())
                    .and_then(|r| {
                        r.ok_or_else(|| {
                            "no grow or shrink is in progress: give --add NEW to add a member"
                                .into()
                        })
                    }),
                (add, weights) => {
                    let new = match add {
                        Some(add) => {
                            let (p, kind) = split_member(add)?;
                            Some((open_member(&p)?, kind.unwrap_or(MemberKind::Hdd)))
                        }
                        None => None,
                    };
                    held.cell
                        .grow(new, weights.clone(), self.force, opts)
                        .map_err(|e| e.to_string())
                }
            };
            drop(bar);
            held.close()?;
            return print_change(&r?, self.json);
        }
        self.speed.offline()?;
        let given = open_given(&self.members, self.degraded)?;
        let all = match (&self.add, &self.weights) {
            (None, None) => given,
            (add, weights) => {
                let new = match add {
                    Some(add) => {
                        let (p, kind) = split_member(add)?;
                        Some((open_member(&p)?, kind.unwrap_or(MemberKind::Hdd)))
                    }
                    None => None,
                };
                Array::prepare_grow(given, new, weights.clone(), self.force)
                    .map_err(|e| e.to_string())?
            }
        };
        let r = match Array::resume_change(all, self.batches).map_err(|e| e.to_string())? {
            Some(r) => r,
            None if self.batches.is_some() => {
                println!(
                    "stopped after {} batches; the change stays recorded",
                    self.batches.unwrap_or(0)
                );
                return Ok(());
            }
            None => {
                return Err(
                    "no grow or shrink is in progress: give --add NEW to add a member".into(),
                )
            }
        };
        print_change(&r, self.json)
    }
}

#[derive(Debug, Args)]
pub struct ShrinkCmd {
    /// The array's member files (the member being removed may be left out
    /// when it is gone).
    #[arg(required = true)]
    pub members: Vec<String>,
    /// Run without the array's members that are not given: they are
    /// recorded missing (mdadm's --run). Without it a command given only
    /// some of a healthy array's members refuses and changes nothing.
    #[arg(long)]
    pub degraded: bool,
    /// The slot whose chunks are re-placed on the other members: a member
    /// failed or missing (its chunks are rebuilt), or one leaving (copied).
    #[arg(long, value_name = "SLOT|PATH")]
    pub member: String,
    /// The array's new size, after what sits on it (a filesystem) has been
    /// shrunk to fit: a whole number of bundles the other members hold.
    #[arg(long, value_parser = size)]
    pub size: u64,
    /// Shrink even past data written on the array, or by more than half.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub speed: ChangeSpeed,
    #[arg(long)]
    pub json: bool,
}

impl ShrinkCmd {
    pub fn run(&self) -> Result<(), String> {
        let mut req = serde_json::json!({"verb": "shrink", "member": slot_of(&self.member, &self.members)?, "size": self.size, "force": self.force});
        self.speed.put(&mut req);
        let bar = StatusBar::start(&self.members, "change");
        let served = remote(&self.members, req);
        drop(bar);
        if let Some(r) = served {
            return print_change(&remote_change(r?)?, self.json);
        }
        let slot = slot_of(&self.member, &self.members)?;
        let held = Held::open(&self.members, "shrink", self.degraded)?;
        held.cell
            .set_batches_per_swap(self.speed.batches_per_swap());
        let bar = StatusBar::start(&self.members, "change");
        let r = held
            .cell
            .shrink_remove(slot, self.size, self.force, self.speed.offline_options())
            .map_err(|e| e.to_string());
        drop(bar);
        held.close()?;
        print_change(&r?, self.json)
    }
}

/// A progress bar with rate and ETA (per member bytes), on stderr.
fn progress_bar(what: &str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template(&format!(
            "{what} [{{bar:30}}] {{percent:>3}}% {{binary_bytes}}/{{binary_total_bytes}} {{binary_bytes_per_sec}} eta {{eta}}"
        ))
        .unwrap()
        .progress_chars("=> "),
    );
    bar
}

/// An array held by this command for a long operation, with a control
/// socket open meanwhile: `status` (progress, rate, ETA), `fail`,
/// `replace`... from another shell reach this process as they reach a
/// served array.
pub struct Held {
    pub cell: Arc<hetraid_engine::ArrayCell>,
    stop: Arc<hetraid_nbd::Stop>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Held {
    pub fn open(paths: &[String], role: &'static str, degraded: bool) -> Result<Self, String> {
        let members = open_given(paths, degraded)?;
        let a = Array::assemble(members.clone()).map_err(|e| e.to_string())?;
        let uuid = a.status().uuid;
        let cell = Arc::new(hetraid_engine::ArrayCell::new(
            Arc::new(a),
            members,
            Box::new(|_| Ok(())),
        ));
        let stop =
            hetraid_nbd::Stop::new().map_err(|e| format!("cannot make a stop signal: {e}"))?;
        let thread = {
            let (cell, stop) = (cell.clone(), stop.clone());
            std::thread::spawn(move || {
                if let Err(e) = hetraid_nbd::control::serve_control_for(cell, &uuid, stop, role) {
                    eprintln!("hetraid: warning: no control socket ({e}): status from another shell cannot see this {role}");
                }
            })
        };
        Ok(Self {
            cell,
            stop,
            thread: Some(thread),
        })
    }

    /// Close the control socket, then the array.
    pub fn close(mut self) -> Result<Arc<Array>, String> {
        self.stop.stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.cell.stop();
        let a = self.cell.current();
        a.close().map_err(|e| e.to_string())?;
        Ok(a)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.stop.stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Run a long `request` on a served array; on a terminal, draw a progress
/// bar from the server's status meanwhile (another control connection,
/// once a second).
fn remote_with_bar(
    members: &[String],
    request: serde_json::Value,
    what: &'static str,
) -> Option<Result<serde_json::Value, String>> {
    let first = split_member(members.first()?).ok()?.0;
    let uuid = hetraid_nbd::control::array_uuid(&first)?;
    if !matches!(hetraid_nbd::control::is_served(&uuid), Ok(true)) {
        return remote(members, request);
    }
    let bar = StatusBar::start(members, what);
    let r = remote(members, request);
    drop(bar);
    r
}

/// A progress bar on a terminal for a long operation another thread or
/// process runs: it polls the array's control socket (a server, or this
/// command's own `Held`) once a second. `what`: "rebuild", "scrub", or
/// "change" (a grow or shrink: chunk moves).
struct StatusBar {
    done: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl StatusBar {
    fn start(members: &[String], what: &'static str) -> Self {
        use std::io::IsTerminal;
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let thread = std::io::stderr().is_terminal().then(|| {
            let (done, members) = (done.clone(), members.to_vec());
            std::thread::spawn(move || {
                let bar = progress_bar(what);
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    if let Some(Ok(v)) = remote(&members, serde_json::json!({"verb": "status"})) {
                        let chunk = v["chunk_bytes"].as_u64().unwrap_or(0);
                        let n = |x: &serde_json::Value| x.as_u64().unwrap_or(0);
                        let (p, c) = (&v["progress"], &v["change"]);
                        if p["op"] == what {
                            bar.set_length(n(&p["stripes_total"]) * chunk);
                            bar.set_position(n(&p["bytes_done"]));
                        } else if what == "change" && c.is_object() {
                            bar.set_length(n(&c["moves"]) * chunk);
                            bar.set_position(n(&c["moves_done"]) * chunk);
                        }
                    }
                    for _ in 0..20 {
                        if done.load(std::sync::atomic::Ordering::Relaxed) {
                            break;
                        }
                        std::thread::sleep(std::time::Duration::from_millis(50));
                    }
                }
                bar.finish_and_clear();
            })
        });
        Self { done, thread }
    }
}

impl Drop for StatusBar {
    fn drop(&mut self) {
        self.done.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The `change:` line of `status` (a grow, shrink or restripe in progress),
/// with its rate and time left when a process is running it.
fn change_line(v: &serde_json::Value) -> Option<String> {
    let c = v.get("change").filter(|c| c.is_object())?;
    let n = |k: &str| c[k].as_u64().unwrap_or(0);
    let what = if c["change"] == "restripe" {
        "new-layout rows written"
    } else {
        "chunk moves done"
    };
    let (done, total) = (n("moves_done"), n("moves"));
    let pace = match (c["moves_per_s"].as_f64(), c["eta_s"].as_f64()) {
        (Some(r), Some(eta)) => format!(", {r:.0} moves a second, {:.0} s left", eta.ceil()),
        (Some(r), None) => format!(", {r:.0} moves a second"),
        _ => "; hetraid assemble, serve or grow with the same members finishes it".into(),
    };
    Some(format!(
        "change: {} of slot {} in progress, {done} of {total} {what} ({:.1} %){pace}",
        c["change"].as_str().unwrap_or("?"),
        n("slot"),
        done as f64 * 100.0 / total.max(1) as f64
    ))
}

/// The member lines of `status` (local or served: from the status JSON):
/// per member its state, kind, data area, what the layout uses of it (and
/// leaves unused when members differ in size), its share of parity or
/// copies, errors since assembly, path (or where it was last seen) and a
/// rebuild's progress.
fn print_members(v: &serde_json::Value) {
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
fn print_spares(v: &serde_json::Value) {
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

#[derive(Debug, Args)]
pub struct RebuildCmd {
    /// The array's member files, the new one included.
    #[arg(required = true)]
    pub members: Vec<String>,
    /// Run without the array's members that are not given: they are
    /// recorded missing (mdadm's --run). Without it a command given only
    /// some of a healthy array's members refuses and changes nothing.
    #[arg(long)]
    pub degraded: bool,
    /// Rebuild speed while user I/O runs (MD speed_limit_min).
    #[arg(long, default_value = hetraid_core::pace::MD_DEFAULT_MIN_ARG, value_parser = size)]
    pub min_speed: u64,
    /// Rebuild speed limit (MD speed_limit_max); 0 = unlimited.
    #[arg(long, default_value = hetraid_core::pace::MD_DEFAULT_MAX_ARG, value_parser = size)]
    pub max_speed: u64,
    /// Rebuild failed members into the layout's spare space (S2-RAID with
    /// --spare-partitions) instead of onto a replacement member.
    #[arg(long)]
    pub to_spare: bool,
    /// What the two limits hold: array (the whole rebuild, as MD on one
    /// device) or stream (each parallel rebuild stream apart, as one md
    /// device per S2-RAID subRAID, so the streams' rates add up).
    #[arg(long, default_value = "array", value_name = "SCOPE", value_parser = hetraid_core::pace::PaceScope::parse)]
    pub pace: hetraid_core::pace::PaceScope,
    #[arg(long)]
    pub json: bool,
}

impl RebuildCmd {
    pub fn run(&self) -> Result<(), String> {
        if let Some(r) = remote_with_bar(
            &self.members,
            serde_json::json!({"verb": "rebuild", "min_speed": self.min_speed, "max_speed": self.max_speed, "to_spare": self.to_spare, "pace": self.pace.as_str()}),
            "rebuild",
        ) {
            let v = r?;
            if self.json {
                return super::print_json(&v);
            }
            return print_rebuilt(&serde_json::from_value(v).map_err(|e| e.to_string())?);
        }
        let bar = progress_bar("rebuild");
        let opts = RebuildOptions {
            min_speed: self.min_speed,
            max_speed: self.max_speed,
            stop_after: None,
            pace: self.pace,
        };
        if !self.to_spare {
            let held = Held::open(&self.members, "rebuild", self.degraded)?;
            // No replacement given: hot spares take the failed slots.
            let taken = held.cell.get().activate_spares().map_err(|e| e.to_string());
            for (slot, path) in taken.as_deref().unwrap_or_default() {
                eprintln!("hetraid: spare {path} takes the place of member {slot}");
            }
            taken?;
            let r = {
                let a = held.cell.get();
                let chunk = a.layout().chunk_bytes();
                let show = |p: hetraid_engine::RebuildProgress| {
                    bar.set_length(p.stripes_total * chunk);
                    bar.set_position(p.bytes_done);
                };
                a.rebuild(opts, &show).map_err(|e| e.to_string())
            };
            bar.finish_and_clear();
            held.close()?;
            let r = r?;
            if self.json {
                return super::print_json(&serde_json::to_value(&r).map_err(|e| e.to_string())?);
            }
            return print_rebuilt(&r);
        }
        let a = assemble(&self.members, self.degraded)?;
        let chunk = a.layout().chunk_bytes();
        let show = |p: hetraid_engine::RebuildProgress| {
            bar.set_length(p.stripes_total * chunk);
            bar.set_position(p.bytes_done);
        };
        let (a, r) = if self.to_spare {
            a.rebuild_to_spare(opts, &show).map_err(|e| e.to_string())?
        } else {
            let r = a.rebuild(opts, &show).map_err(|e| e.to_string())?;
            (a, r)
        };
        bar.finish_and_clear();
        a.close().map_err(|e| e.to_string())?;
        if self.json {
            return super::print_json(&serde_json::to_value(&r).map_err(|e| e.to_string())?);
        }
        print_rebuilt(&r)
    }
}

#[derive(Debug, Args)]
pub struct RebalanceCmd {
    /// The array's member files (a declustered array that rebuilt a member
    /// into its distributed spare space).
    #[arg(required = true)]
    pub members: Vec<String>,
    /// Run without the array's members that are not given: they are
    /// recorded missing (mdadm's --run). Without it a command given only
    /// some of a healthy array's members refuses and changes nothing.
    #[arg(long)]
    pub degraded: bool,
    /// The replacement (PATH[:hdd|ssd|nvram]): it takes the slot of the
    /// member rebuilt into spare space last, and that member's chunks are
    /// copied onto it from their spare homes.
    #[arg(long, value_name = "PATH[:kind]")]
    pub with: String,
    /// Overwrite a replacement that holds data or another array's member.
    #[arg(long)]
    pub force: bool,
    #[arg(long)]
    pub json: bool,
}

impl RebalanceCmd {
    pub fn run(&self) -> Result<(), String> {
        if remote(&self.members, serde_json::json!({"verb": "status"})).is_some() {
            return Err("rebalance runs on an array that is not served: stop hetraid serve (SIGTERM), rebalance, and serve again".into());
        }
        // The replacement given among the members, blank: a rebalance cut
        // short before it attached the device (it writes the device first).
        if let Some((new, rest, _)) = one_blank_member(&self.members)? {
            return Err(format!(
                "{new} carries no hetraid superblock: a rebalance cut short before it attached the device leaves it so; give it with --with, not among the members: hetraid rebalance {} --with {new}",
                rest.join(" ")
            ));
        }
        let (p, _kind) = split_member(&self.with)?;
        let a = assemble(&self.members, self.degraded)?;
        let new = open_member(&p)?;
        let bar = progress_bar("copy-back");
        let chunk = a.layout().chunk_bytes();
        let show = |pr: hetraid_engine::RebuildProgress| {
            bar.set_length(pr.stripes_total * chunk);
            bar.set_position(pr.bytes_done);
        };
        let r = a.copy_back(new, self.force, &show);
        bar.finish_and_clear();
        let (a, r) = r.map_err(|e| e.to_string())?;
        a.close().map_err(|e| e.to_string())?;
        if self.json {
            return super::print_json(&serde_json::to_value(&r).map_err(|e| e.to_string())?);
        }
        println!(
            "copied back member {} onto {} (in place of {}): {} chunks, {} in {:.2} s, {:.1} MB/s; its spare chunks are free again",
            r.member,
            r.path,
            if r.old_path.is_empty() { "the failed device" } else { &r.old_path },
            r.chunks,
            format_size(r.bytes),
            r.seconds,
            r.bytes as f64 / r.seconds.max(1e-9) / 1e6
        );
        Ok(())
    }
}

fn print_rebuilt(r: &hetraid_engine::RebuildReport) -> Result<(), String> {
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

#[derive(Debug, Args)]
pub struct ScrubCmd {
    #[arg(required = true)]
    pub members: Vec<String>,
    /// Run without the array's members that are not given: they are
    /// recorded missing (mdadm's --run). Without it a command given only
    /// some of a healthy array's members refuses and changes nothing.
    #[arg(long)]
    pub degraded: bool,
    /// Rewrite what scrub shows to be wrong (RAID6 syndromes, a minority of
    /// three or more mirror copies). Where the layout cannot tell which member
    /// is wrong, nothing is written unless you say which side to trust.
    #[arg(long)]
    pub repair: bool,
    /// With --repair, on parity layouts: where the wrong member cannot be told,
    /// rewrite parity from the data (MD's repair).
    #[arg(long)]
    pub trust_data: bool,
    /// With --repair, on mirror layouts: where the wrong copy cannot be told,
    /// copy member I's content over the others.
    #[arg(long, value_name = "SLOT|PATH")]
    pub trust_member: Option<String>,
    /// Scrub speed while user I/O runs, per member (MD speed_limit_min).
    #[arg(long, default_value = hetraid_core::pace::MD_DEFAULT_MIN_ARG, value_parser = size)]
    pub min_speed: u64,
    /// Scrub speed limit per member (MD speed_limit_max); 0 = unlimited.
    #[arg(long, default_value = hetraid_core::pace::MD_DEFAULT_MAX_ARG, value_parser = size)]
    pub max_speed: u64,
    #[arg(long)]
    pub json: bool,
}

/// HPDA's lines of `status` (local or served: from the status JSON).
fn print_hpda(v: &serde_json::Value) {
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

#[derive(clap::Args)]
pub struct ReclaimCmd {
    /// The array's members (and log devices, if on their own).
    #[arg(required = true)]
    pub members: Vec<String>,
    /// Run without the array's members that are not given: they are
    /// recorded missing (mdadm's --run). Without it a command given only
    /// some of a healthy array's members refuses and changes nothing.
    #[arg(long)]
    pub degraded: bool,
    #[arg(long)]
    pub json: bool,
}

impl ReclaimCmd {
    pub fn run(&self) -> Result<(), String> {
        let started = std::time::Instant::now();
        let v = if let Some(r) = remote(&self.members, serde_json::json!({"verb": "reclaim"})) {
            r?
        } else {
            let held = Held::open(&self.members, "reclaim", self.degraded)?;
            let r = {
                let a = held.cell.get();
                if !a.has_write_back_log() {
                    Err("reclaim applies to arrays with a write-back log (hpda, --log-mode write-back); this array has none".to_string())
                } else {
                    a.reclaim().map_err(|e| e.to_string())
                }
            };
            held.close()?;
            serde_json::json!({"reclaimed_bytes": r?})
        };
        if self.json {
            return super::print_json(&v);
        }
        let bytes = v["reclaimed_bytes"].as_u64().unwrap_or(0);
        println!(
            "reclaim: {bytes} bytes of the write log written to the members in {:.2} s; the log holds no write now",
            started.elapsed().as_secs_f64()
        );
        Ok(())
    }
}

impl ScrubCmd {
    pub fn run(&self) -> Result<(), String> {
        let trust_member = self
            .trust_member
            .as_deref()
            .map(|m| slot_of(m, &self.members))
            .transpose()?;
        let v = if let Some(r) = remote_with_bar(
            &self.members,
            serde_json::json!({"verb": "scrub", "repair": self.repair,
                "trust_data": self.trust_data, "trust_member": trust_member,
                "min_speed": self.min_speed, "max_speed": self.max_speed}),
            "scrub",
        ) {
            r?
        } else {
            let held = Held::open(&self.members, "scrub", self.degraded)?;
            let bar = progress_bar("scrub");
            let r = {
                let a = held.cell.get();
                let chunk = a.layout().chunk_bytes();
                let show = |p: hetraid_engine::RebuildProgress| {
                    bar.set_length(p.stripes_total * chunk);
                    bar.set_position(p.bytes_done);
                };
                let opts = hetraid_engine::ScrubOptions {
                    min_speed: self.min_speed,
                    max_speed: self.max_speed,
                };
                a.scrub_trust(self.repair, self.trust_data, trust_member)
                    .and_then(|trust| a.scrub_with(trust, opts, &show))
                    .map_err(|e| e.to_string())
            };
            bar.finish_and_clear();
            held.close()?;
            serde_json::to_value(r?).map_err(|e| e.to_string())?
        };
        // Mismatches left as they are: exit 1 (what was repaired is fine).
        let left = v["mismatches"].as_u64().unwrap_or(0) > v["repaired"].as_u64().unwrap_or(0);
        if self.json {
            super::print_json(&v)?;
            return exit_with(i32::from(left));
        }
        print!(
            "scrub: {} stripes checked, {} mismatched ({} pages)",
            v["stripes_checked"], v["mismatches"], v["mismatched_pages"]
        );
        if self.repair {
            print!(
                ", {} repaired ({} pages)",
                v["repaired"], v["repaired_pages"]
            );
        }
        println!();
        for d in v["details"].as_array().into_iter().flatten().take(20) {
            let what = match d["member"].as_u64() {
                Some(m) => format!(
                    "member {m} ({}) is wrong: {}",
                    d["path"].as_str().unwrap_or("-"),
                    d["action"].as_str().unwrap_or("?")
                ),
                None => d["action"].as_str().unwrap_or("?").to_string(),
            };
            println!(
                "  stripe {} pages {}-{}: {what}",
                d["stripe"], d["page_first"], d["page_last"]
            );
        }
        let unlocated = v["unlocated_pages"].as_u64().unwrap_or(0);
        if unlocated > 0 && !(self.trust_data || self.trust_member.is_some()) {
            println!(
                "{unlocated} pages mismatch where this layout cannot tell which member is wrong; nothing was written there. To rewrite them, say which side to trust: --repair --trust-data (parity from data) or --repair --trust-member I (mirrors)"
            );
        }
        exit_with(i32::from(left))
    }
}

#[derive(Debug, Args)]
pub struct DataCmd {
    #[arg(required = true)]
    pub members: Vec<String>,
    /// Run without the array's members that are not given: they are
    /// recorded missing (mdadm's --run). Without it a command given only
    /// some of a healthy array's members refuses and changes nothing.
    #[arg(long)]
    pub degraded: bool,
    /// Byte offset in the array.
    #[arg(long, value_parser = size)]
    pub offset: u64,
    /// Bytes (read: required; write: at most this many from stdin).
    #[arg(long, value_parser = size)]
    pub length: Option<u64>,
}

const IO_STEP: usize = 4 << 20;

impl DataCmd {
    pub fn write(&self) -> Result<(), String> {
        let a = assemble(&self.members, self.degraded)?;
        let cap = a.capacity();
        let mut stdin = std::io::stdin().lock();
        let mut off = self.offset;
        let limit = self.length.unwrap_or(u64::MAX);
        let mut done = 0u64;
        if off > cap {
            return Err(format!(
                "offset {off} is beyond the end of the array ({cap} bytes)"
            ));
        }
        let mut buf = vec![0u8; IO_STEP];
        while done < limit {
            let want = (limit - done).min(IO_STEP as u64) as usize;
            let mut got = 0;
            while got < want {
                match stdin.read(&mut buf[got..want]) {
                    Ok(0) => break,
                    Ok(k) => got += k,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(format!("reading standard input: {e}")),
                }
            }
            if got == 0 {
                break;
            }
            if off + got as u64 > cap {
                return Err(format!(
                    "the input reaches beyond the end of the array ({cap} bytes) at offset {}; {} bytes were written before it",
                    off + got as u64,
                    done
                ));
            }
            a.write(off, &buf[..got]).map_err(|e| e.to_string())?;
            off += got as u64;
            done += got as u64;
        }
        a.close().map_err(|e| e.to_string())?;
        print_warnings(&a);
        eprintln!("wrote {done} bytes at offset {}", self.offset);
        Ok(())
    }

    pub fn read(&self) -> Result<(), String> {
        let len = self.length.ok_or("read needs --length")?;
        if self.degraded {
            return Err("--degraded applies to commands that write; read reads any array it can and never records a member missing".into());
        }
        // Writable members let a read heal what it finds (a bad block is
        // rewritten from the redundancy); members the user may only read are
        // opened read-only, and nothing is written. So are they when some
        // member was not given: a read never records one missing.
        let writable = member_paths(&self.members)?
            .iter()
            .all(|p| std::fs::OpenOptions::new().write(true).open(p).is_ok())
            && Array::check_given(&open_all_read_only(&self.members)?, false).is_ok();
        let a = assemble_with(
            &self.members,
            AssembleOptions {
                force: false,
                access: if writable {
                    Access::ReadWrite
                } else {
                    Access::ReadOnly
                },
                degraded: !writable,
            },
        )?;
        let cap = a.capacity();
        if self.offset.checked_add(len).is_none_or(|e| e > cap) {
            return Err(format!(
                "{}+{len} reaches beyond the end of the array ({cap} bytes)",
                self.offset
            ));
        }
        let mut out = std::io::stdout().lock();
        let mut off = self.offset;
        let end = self.offset + len;
        let mut buf = vec![0u8; IO_STEP];
        while off < end {
            let n = ((end - off) as usize).min(IO_STEP);
            a.read(off, &mut buf[..n]).map_err(|e| e.to_string())?;
            out.write_all(&buf[..n])
                .map_err(|e| format!("writing standard output: {e}"))?;
            off += n as u64;
        }
        out.flush().map_err(|e| e.to_string())?;
        a.keep_uncommitted();
        a.close().map_err(|e| e.to_string())?;
        print_warnings(&a);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn utc_dates() {
        assert_eq!(super::utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(super::utc(951_782_400), "2000-02-29 00:00:00 UTC");
        assert_eq!(super::utc(1_795_398_302), "2026-11-23 01:45:02 UTC");
    }
}
