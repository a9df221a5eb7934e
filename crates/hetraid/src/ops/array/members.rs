//! Verbs on members: `fail`, `remove`, `replace`, `re-add`, `add` and the
//! member scan behind them.

#[allow(unused_imports)]
use super::*;
pub use crate::cli::array::members::*;
use hetraid_engine::error::IntoFailure;

/// Among `members`, exactly one that carries no hetraid superblock (a new
/// device a kill left blank): it, the others, and the freshest superblock
/// among them. None otherwise.
pub(crate) fn one_blank_member(
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
pub(crate) fn is_log_file(p: &Path) -> bool {
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

/// Devices under `paths` (directories read one level: regular files and
/// block devices), each with the UUID of the array it belongs to.
pub(crate) fn scan_devices(paths: &[String]) -> Result<Vec<(String, PathBuf)>, String> {
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

impl MembersCmd {
    pub fn status(&self) -> Result<(), Failure> {
        if !self.test {
            return self.status_printed().map(|_| ());
        }
        match self.status_printed() {
            Ok(state) => Ok(exit_with(health_code(&state))?),
            Err(e) => {
                eprintln!("hetraid: {e}");
                Ok(exit_with(4)?)
            }
        }
    }

    /// Print the status; the array's state.
    fn status_printed(&self) -> Result<String, Failure> {
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
        if let Some(r) = remote_status(&self.members) {
            let held = r?;
            self.show(&held)?;
            return Ok(held.status.state.to_string());
        }
        let a = assemble_with(
            &self.members,
            AssembleOptions {
                force: false,
                access: Access::Inspect,
                degraded: true,
            },
        )?;
        let held = hetraid_nbd::control::HeldStatus {
            status: a.status(),
            process: None,
            pid: None,
        };
        self.show(&held)?;
        if !self.json && self.mkfs.is_none() {
            print_warnings(&a);
        }
        Ok(held.status.state.to_string())
    }

    /// The status as asked: text, JSON, or only the mkfs command line.
    fn show(&self, held: &hetraid_nbd::control::HeldStatus) -> Result<(), Failure> {
        let Some(fs) = &self.mkfs else {
            return Ok(crate::render::emit(held, self.json)?);
        };
        if self.json {
            return Err(
                "--mkfs prints a command line; --json has it as mkfs.ext4 and mkfs.xfs".into(),
            );
        }
        let a = held
            .status
            .fs_alignment
            .ok_or("the server is an older hetraid that does not give the stripe geometry")?;
        println!("mkfs.{fs} {}", a.options(fs)?);
        Ok(())
    }

    /// `assemble --scan`: every array found under the paths (or the
    /// configuration's devices when none are given), by UUID; with
    /// `--print-config`, the configuration's lines for them instead.
    fn assemble_scan(&self) -> Result<(), Failure> {
        let places = match self.members.is_empty() {
            true => names::scan_places(&crate::config::Config::load(self.config.as_deref())?)?,
            false => self.members.clone(),
        };
        let found = scan_devices(&places)?;
        if found.is_empty() {
            return Err(format!(
                "no hetraid member found in {}; give the directories or devices that hold the members",
                places.join(", ")
            ).into());
        }
        let mut arrays: Vec<(String, Vec<String>, String)> = names::group_found(&found)
            .into_iter()
            .map(|a| (a.uuid, a.paths, a.name))
            .collect();
        if self.print_config {
            arrays.retain(|(_, _, n)| self.name.as_ref().is_none_or(|x| x == n));
            let found: Vec<names::FoundArray> = arrays
                .into_iter()
                .map(|(uuid, paths, name)| names::FoundArray { uuid, paths, name })
                .collect();
            print!("{}", names::print_config(&places, &found));
            return Ok(());
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
                ).into());
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
                print_config: false,
                mkfs: None,
                config: None,
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
            )
            .into());
        }
        if failed > 0 {
            return Err(format!(
                "{failed} of {} arrays could not be assembled",
                assembled + failed
            )
            .into());
        }
        Ok(())
    }

    /// Assemble for writing and close, finishing a grow, restripe or
    /// shrink cut short first (as MD resumes a reshape when the array
    /// starts): the array, and the change's report when one finished.
    fn assemble_finishing(&self) -> Result<(Array, Option<hetraid_engine::ChangeReport>), Failure> {
        let open = || -> Result<Array, Failure> {
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
            a.commit().map_err(IntoFailure::failure)?;
            a.close().map_err(IntoFailure::failure)?;
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
    fn assemble_quiet(&self) -> Result<hetraid_engine::Status, Failure> {
        let (a, _) = self.assemble_finishing()?;
        print_warnings(&a);
        Ok(a.status())
    }

    pub fn assemble(&self) -> Result<(), Failure> {
        if self.test {
            return Err("--test applies to status (it exits with the array's health)".into());
        }
        if self.mkfs.is_some() {
            return Err("--mkfs applies to status (it prints the mkfs command line)".into());
        }
        if self.scan {
            return self.assemble_scan();
        }
        let (a, finished) = self.assemble_finishing()?;
        let st = a.status();
        if self.json {
            return Ok(crate::ops::print_json(
                &serde_json::to_value(&st).map_err(|e| e.to_string())?,
            )?);
        }
        print_warnings(&a);
        if let Some(r) = &finished {
            crate::render::emit(r, false)?;
        }
        println!(
            "assembled {} array {}: {} ({} members)",
            st.layout, st.uuid, st.state, st.members
        );
        Ok(())
    }
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

    pub fn fail(&self) -> Result<(), hetraid_core::Failure> {
        let member = self.slot("fail")?;
        let name = self.named(member);
        if let Some(r) = remote(
            &self.members,
            Request::Fail {
                member,
                force: self.force,
            },
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
        a.fail_with(member, self.force)
            .map_err(IntoFailure::failure)?;
        match a.close() {
            // Forced beyond the redundancy, the array is failed: that is what
            // was asked for, not an error of this command.
            Err(_) if self.force => {}
            r => r.map_err(IntoFailure::failure)?,
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
    pub fn remove(&self) -> Result<(), hetraid_core::Failure> {
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
                    let abs = std::path::absolute(&p).map_err(IntoFailure::failure)?;
                    if let Some(r) = remote(
                        &self.members,
                        Request::RemoveSpare {
                            with: abs.display().to_string(),
                        },
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
                            .map_err(IntoFailure::failure)?;
                        a.close().map_err(IntoFailure::failure)?;
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
        if let Some(r) = remote(&self.members, Request::Remove { member }) {
            r?;
        } else {
            let a = assemble(&self.members, self.degraded)?;
            a.remove(member).map_err(IntoFailure::failure)?;
            a.close().map_err(IntoFailure::failure)?;
        }
        println!(
            "member {} removed; its slot is empty until hetraid add or replace fills it",
            name
        );
        Ok(())
    }

    pub fn replace(&self) -> Result<(), hetraid_core::Failure> {
        let with = self
            .with
            .as_deref()
            .ok_or("replace needs --with NEW_MEMBER")?;
        let abs = std::path::absolute(split_member(with)?.0).map_err(IntoFailure::failure)?;
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
            Request::Replace {
                member: Some(member),
                log_copy: None,
                with: abs.display().to_string(),
                force: self.force,
            },
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
            .map_err(IntoFailure::failure)?;
        a.close().map_err(IntoFailure::failure)?;
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
    fn replace_log_copy(&self, copy: usize, with: &str) -> Result<(), Failure> {
        let (p, kind) = split_member(with)?;
        if kind.is_some() {
            return Err(format!(
                "{with}: a log copy keeps the kind given at create; give the path alone"
            )
            .into());
        }
        let abs = std::path::absolute(&p).map_err(IntoFailure::failure)?;
        // Served: the server copies the live records while clients write.
        if let Some(r) = remote_passing(
            &self.members,
            Request::Replace {
                member: None,
                log_copy: Some(copy),
                with: abs.display().to_string(),
                force: self.force,
            },
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
            .map_err(IntoFailure::failure)?;
        a.close().map_err(IntoFailure::failure)?;
        println!(
            "log copy {copy} is now {}, with the log's live records; list it with the members from now on",
            p.display()
        );
        Ok(())
    }
}

impl AddCmd {
    pub fn run(&self) -> Result<(), Failure> {
        let free = |state: &str| matches!(state, "faulty" | "removed" | "missing");
        let (p, kind) = split_member(&self.with)?;
        let kind = kind_of(&p, kind);
        // A served array: find the slot in its status, attach through it.
        if let Some(r) = remote_status(&self.members) {
            let st = r?.status;
            let slot = st
                .member_states
                .iter()
                .find(|m| free(&m.state))
                .map(|m| m.device)
                .filter(|_| !self.spare);
            let abs = std::path::absolute(&p).map_err(IntoFailure::failure)?;
            let Some(slot) = slot else {
                remote_passing(
                    &self.members,
                    Request::AddSpare {
                        with: abs.display().to_string(),
                        kind: Some(kind.as_str().into()),
                        force: self.force,
                    },
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
                Request::Replace {
                    member: Some(slot),
                    log_copy: None,
                    with: abs.display().to_string(),
                    force: self.force,
                },
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
            .filter(|&k| st.member_states.get(k).is_some_and(|m| free(&m.state)));
        let slot = own
            .or_else(|| {
                st.member_states
                    .iter()
                    .find(|m| free(&m.state))
                    .map(|m| m.device)
            })
            .filter(|_| !self.spare);
        let Some(slot) = slot else {
            let new = open_member(&p)?;
            a.add_spare(new, kind, self.force)
                .map_err(IntoFailure::failure)?;
            a.close().map_err(IntoFailure::failure)?;
            println!(
                "{} added as a hot spare: list it with the members; a served array rebuilds onto it when a member fails, an offline hetraid rebuild uses it for a failed slot",
                p.display()
            );
            return Ok(());
        };
        a.replace(slot, open_member(&p)?, self.force)
            .map_err(IntoFailure::failure)?;
        let st = a.status();
        a.close().map_err(IntoFailure::failure)?;
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
