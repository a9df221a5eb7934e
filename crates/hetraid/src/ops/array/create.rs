//! `hetraid create`: what it checks, and the array it writes.

#[allow(unused_imports)]
use super::*;
pub use crate::cli::array::create::*;

impl CreateCmd {
    /// The log's paths, kinds and mode, checked by the core's rules
    /// (`logconfig`; None: no log).
    fn log_args(&self) -> Result<Option<LogArgs>, String> {
        use hetraid_core::logconfig::{self as lc, LogPlace};
        let choice = lc::choose(
            self.layout.layout.eq_ignore_ascii_case("hpda"),
            &lc::LogOptions {
                devices: self.log.as_ref().map_or(0, |l| l.len()),
                region: self.log_region,
                size: self.log_size,
                mode: self.log_mode.clone(),
            },
        )
        .map_err(|e| e.sentence(&lc::CLI))?;
        let Some(choice) = choice else {
            return Ok(None);
        };
        let mut paths = Vec::new();
        let mut kinds = Vec::new();
        if let LogPlace::Devices { .. } = choice.place {
            for l in self.log.iter().flatten() {
                let (p, k) = split_member(l)?;
                paths.push(p);
                kinds.push(k.unwrap_or(MemberKind::Ssd));
            }
        }
        Ok(Some((paths, kinds, choice.mode)))
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

    pub fn run(&self) -> Result<(), Failure> {
        let policy = WritePolicy::parse(&self.policy)?;
        let chunk = self.layout.chunk;
        // First, as the log's sizes below depend on it (core's rule).
        if !hetraid_core::spec::chunk_ok(chunk) {
            return Err(hetraid_core::spec::SpecError::Chunk(chunk)
                .sentence(&hetraid_core::spec::CLI)
                .into());
        }
        let record = self.layout.record()?;
        record.kind().map_err(|e| e.to_string())?;
        if let Some(n) = &self.name {
            if n.is_empty()
                || n.len() > hetraid_engine::annex::NAME_MAX
                || n.chars().any(|c| c.is_control())
            {
                return Err(format!(
                    "--name {n:?} is not usable: give 1 to {} bytes without control characters",
                    hetraid_engine::annex::NAME_MAX
                )
                .into());
            }
        }
        let (paths, kinds) = self.member_kinds(&record)?;
        // Validate everything before writing anything.
        self.check_member_paths(&paths)?;
        let mut created = Vec::new();
        let log = self.log_args()?;
        let log_size = self.check_log_devices(&paths, chunk, &log)?;
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
        Array::check_create(&lens, &opts).map_err(IntoFailure::failure)?;
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
                    return Err(Failure::new(
                        ErrorKind::Io,
                        format!("cannot open member {}: {e}", p.display()),
                    ));
                }
            }
        }
        let mut opts = opts;
        opts.log = match self.log_spec(log.as_ref(), log_size, &mut created) {
            Ok(l) => l,
            Err(e) => {
                cleanup(&created);
                return Err(e.into());
            }
        };
        let array = match Array::create(members, &opts) {
            Ok(a) => a,
            Err(e) => {
                cleanup(&created);
                return Err(e.failure());
            }
        };
        if let Some(n) = &self.name {
            array.set_name(n).map_err(IntoFailure::failure)?;
        }
        array.close().map_err(IntoFailure::failure)?;
        self.report_created(&array);
        Ok(())
    }

    /// The members' paths and kinds: `--kinds`, `PATH:kind`, or a preset's
    /// own (said, not silent); kinds that contradict the preset are refused.
    fn member_kinds(
        &self,
        record: &hetraid_engine::format::LayoutOptions,
    ) -> Result<(Vec<PathBuf>, Vec<MemberKind>), String> {
        let mut paths = Vec::new();
        let mut kinds = Vec::new();
        let mut detected = Vec::new();
        for m in &self.members {
            let (p, k) = split_member(m)?;
            // A block device's kind from the kernel, unless one is given.
            let k = match (k, &self.layout.kinds) {
                (None, None) => detected_kind(&p).map(|(k, file)| {
                    detected.push(format!(
                        "{} {} ({} is {})",
                        p.display(),
                        k.as_str(),
                        file.display(),
                        u8::from(k == MemberKind::Hdd)
                    ));
                    k
                }),
                (k, _) => k,
            };
            paths.push(p);
            kinds.push(k);
        }
        if !detected.is_empty() {
            eprintln!(
                "hetraid: member kinds from the kernel: {}",
                detected.join(", ")
            );
        }
        let explicit_kinds = kinds.iter().any(|k| k.is_some());
        let preset = hetraid_core::layout::Preset::parse(&self.layout.layout.to_ascii_lowercase());
        let files: Vec<String> = paths
            .iter()
            .zip(&kinds)
            .filter(|(_, k)| k.is_none())
            .map(|(p, _)| p.display().to_string())
            .collect();
        // Files have no kind to read (a preset's own kinds are said below).
        if self.layout.kinds.is_none() && !files.is_empty() && !explicit_kinds && preset.is_none() {
            eprintln!(
                "hetraid: note: {} {}: taken as hdd; write PATH:ssd (or --kinds) to say otherwise",
                files.join(", "),
                if files.len() == 1 {
                    "is not a block device"
                } else {
                    "are not block devices"
                }
            );
        }
        let kinds: Vec<MemberKind> = match (&self.layout.kinds, kinds.iter().any(|k| k.is_some())) {
            (Some(_), true) => {
                return Err(
                    "give member kinds either with --kinds or as PATH:kind, not both".into(),
                )
            }
            (Some(k), false) => k.clone(),
            (None, true) => kinds.iter().map(|k| k.unwrap_or(MemberKind::Hdd)).collect(),
            (None, false) => {
                match preset {
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
            hetraid_core::layout::check_given_kinds(
                &record.kind().map_err(|e| e.to_string())?,
                &kinds,
            )?;
        }
        Ok((paths, kinds))
    }

    /// Member paths that exist (or, with --size, do not), in directories
    /// that do, none listed twice.
    fn check_member_paths(&self, paths: &[PathBuf]) -> Result<(), String> {
        for p in paths {
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
        Ok(())
    }

    /// The log's devices (or region) checked before anything is written:
    /// not a member, not listed twice, not another array's, large enough.
    /// Returns the size of log files to create.
    fn check_log_devices(
        &self,
        paths: &[PathBuf],
        chunk: u64,
        log: &Option<LogArgs>,
    ) -> Result<u64, String> {
        let log_size = self
            .log_size
            .unwrap_or(hetraid_core::logconfig::LOG_DEVICE_BYTES_DEFAULT);
        // The mode's own minimum is checked once the layout is built
        // (`Array::check_create`); any log needs this much.
        let size_any = |what, bytes| {
            hetraid_core::logconfig::check_size_any(paths.len(), chunk, what, bytes)
                .map_err(|e| e.sentence(&hetraid_core::logconfig::CLI))
        };
        if let Some(r) = self.log_region {
            size_any(hetraid_core::logconfig::Sized::RegionOption, r)?;
        }
        if let Some((lp, _, _)) = log {
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
            for p in lp {
                use hetraid_core::logconfig::Sized;
                let (what, len) = if p.exists() {
                    let m = open_member_for(p, false)?;
                    if !self.force {
                        if let Some(owner) = belongs_to(m.as_ref()) {
                            return Err(format!(
                                "log device {} already {owner}; use --force to overwrite it",
                                p.display()
                            ));
                        }
                    }
                    (Sized::Device(p.display().to_string()), m.len())
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
                    // A file this command creates: --log-size sets it.
                    (Sized::SizeOption, log_size)
                };
                size_any(what, len)?;
            }
        }
        Ok(log_size)
    }

    /// The write log to create: HPDA's own, a region, or devices (log files
    /// this command creates are added to `created`).
    fn log_spec(
        &self,
        log: Option<&LogArgs>,
        log_size: u64,
        created: &mut Vec<PathBuf>,
    ) -> Result<Option<hetraid_engine::LogSpec>, String> {
        if self.layout.layout.eq_ignore_ascii_case("hpda") {
            return Ok(Some(hetraid_engine::LogSpec {
                devices: vec![],
                kinds: vec![],
                mode: hetraid_engine::format::LogMode::WriteBack,
                region: self.log_size,
            }));
        } else if let (Some(r), Some((_, _, mode))) = (self.log_region, log) {
            return Ok(Some(hetraid_engine::LogSpec {
                devices: vec![],
                kinds: vec![],
                mode: *mode,
                region: Some(r),
            }));
        } else if let Some((lp, kinds, mode)) = log {
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
                        return Err(format!("cannot open log device {}: {e}", p.display()));
                    }
                }
            }
            return Ok(Some(hetraid_engine::LogSpec {
                devices,
                kinds: kinds.clone(),
                mode: *mode,
                region: None,
            }));
        }
        Ok(None)
    }

    /// What `create` says once the array exists: unused room on members of
    /// different sizes, spare space a rebuild must share, the array, the log.
    fn report_created(&self, array: &Array) {
        let st = array.status();
        // Members of different sizes under a layout that cuts each to the
        // smallest (every layout but RAIDX, which places chunks on members
        // of any size, and HPDA, whose second disk holds only a log copy by
        // design): say how much is left unused, and what would use it.
        if !matches!(st.layout.as_str(), "raidx" | "hpda") {
            // What members larger than the smallest bring and the layout
            // leaves: distributed spare space (S²-RAID, declustered) is
            // used, not wasted, so it is not counted.
            let used = st
                .member_states
                .iter()
                .map(|m| m.data_bytes)
                .min()
                .unwrap_or(0);
            let waste: u64 = st
                .member_states
                .iter()
                .map(|m| m.data_bytes - used)
                .sum::<u64>()
                .min(st.member_states.iter().map(|m| m.unused_bytes).sum());
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
                    "hetraid: warning: the members differ in size: {} of them ({:.0} %) is not used, as {} cuts each member to the smallest's {}; raidx uses members of any size (hetraid layout --layout raidx --sizes ... shows what it would hold)",
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
    }
}
