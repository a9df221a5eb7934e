//! Assembling an array from its members: which given members it starts
//! with (generations, identities, the member-state machine's `assemble`),
//! the write log found and replayed, what a command may still commit.

#[allow(unused_imports)]
use super::lifecycle::*;
#[allow(unused_imports)]
use super::*;

impl Array {
    /// Assemble from members alone, in any order, for reading and writing;
    /// resync regions left dirty by a crash.
    /// Members not given are recorded missing (`degraded`): for library use
    /// and for re-assembling a set a command has checked already.
    pub fn assemble(given: Vec<Arc<dyn Member>>) -> Result<Self> {
        Self::assemble_with(
            given,
            AssembleOptions {
                degraded: true,
                ..AssembleOptions::default()
            },
        )
    }

    /// Refuse, naming them, when members the array holds were not given and
    /// `degraded` is not said; writes nothing (for commands that hand the
    /// members to a procedure that assembles them itself).
    pub fn check_given(given: &[Arc<dyn Member>], degraded: bool) -> Result<()> {
        if degraded {
            return Ok(());
        }
        Self::assemble_with(
            given.to_vec(),
            AssembleOptions {
                access: Access::Inspect,
                ..AssembleOptions::default()
            },
        )
        .map(|_| ())
    }

    /// Slots of the array that no given member claimed (assembled with
    /// `degraded`).
    pub fn not_given(&self) -> &[usize] {
        &self.not_given
    }

    /// Leave what assembly decided unwritten if nothing was written yet
    /// (`read`: a read records no member missing and moves no table; a heal
    /// it made has committed already).
    pub fn keep_uncommitted(&self) {
        if self.uncommitted.swap(false, Ordering::AcqRel) {
            self.annex_due.store(false, Ordering::Release);
            self.assembled_sb.lock().unwrap().take();
        }
    }

    /// Write what assembly decided (see `uncommitted`) and the annex if it is
    /// due. Every write path calls it first; `assemble` and `serve` call it to
    /// start the array as decided.
    pub fn commit(&self) -> Result<()> {
        if self.read_only {
            return Ok(());
        }
        if self.uncommitted.load(Ordering::Acquire) {
            let mut sb = self.sb.lock().unwrap();
            self.persist(&mut sb)?;
        }
        if self.annex_due.load(Ordering::Acquire) && self.annex_due.swap(false, Ordering::AcqRel) {
            self.write_annex();
        }
        Ok(())
    }

    /// Assemble as `opts` says. Which members are used is the core's decision
    /// (`membership::assemble`): stale, replaced or truncated members are left
    /// out with a warning naming them; members run apart are refused.
    pub fn assemble_with(given: Vec<Arc<dyn Member>>, opts: AssembleOptions) -> Result<Self> {
        if given.is_empty() {
            return Err(EngineError::Refused("give the array's members".into()));
        }
        // Log devices are listed with the members; their header tells them
        // apart. A device that cannot be read, or a log device whose header
        // is damaged, is left out with a warning (md kicks a member it
        // cannot read at assembly): one bad device never stops the array.
        let Given {
            logs,
            members: given,
            sbs,
            early,
            unreadable,
        } = sort_given(given)?;
        let (given, sbs, odd_warnings) = check_geometry(given, sbs, opts.force)?;
        // Hot spares (a slot past the member table) are set aside: they
        // hold no slot (`spares.rs`).
        let mut spare_given = Vec::new();
        let (given, mut sbs) = {
            let (mut g, mut s) = (Vec::new(), Vec::new());
            for (m, sb) in given.into_iter().zip(sbs) {
                if sb.member as usize >= sb.roles.len() {
                    spare_given.push((m, sb));
                } else {
                    g.push(m);
                    s.push(sb);
                }
            }
            (g, s)
        };
        if given.is_empty() {
            return Err(EngineError::Refused(
                "only spares were given; give the array's members too".into(),
            ));
        }
        let fresh = sbs.iter().max_by_key(|s| s.events).unwrap().clone();
        super::living::upgrade_for_grow(&mut sbs, &fresh);
        // The members as given (a log region is read past the checksum layer).
        let raw = given.clone();
        let given: Vec<Arc<dyn Member>> = given
            .into_iter()
            .map(|m| with_checksums(m, &fresh))
            .collect();
        let n = fresh.roles.len();
        let spec = spec_of(&fresh)?;
        let layout = layout_of(&fresh)?;
        let nbits = layout.stripe_count().div_ceil(fresh.bitmap_stripes as u64);
        if nbits.div_ceil(8) > DATA_OFFSET - BITMAP_OFFSET {
            let freshest = sbs
                .iter()
                .position(|s| s.events == fresh.events)
                .unwrap_or(0);
            return Err(EngineError::Refused(format!(
                "member {} has a damaged superblock: its bitmap would need {} bytes",
                given[freshest].name(),
                nbits.div_ceil(8)
            )));
        }
        let cands: Vec<Candidate> = sbs
            .iter()
            .zip(&given)
            .map(|(sb, m)| Candidate {
                table: sb.table(),
                slot: sb.member as usize,
                clean: sb.clean,
                generation: sb.generation,
                generation_started: sb.generation_started,
                size_ok: (sb.member as usize) < n
                    && m.len() >= DATA_OFFSET + fresh.roles[sb.member as usize].data_size,
            })
            .collect();
        // `status` shows any array, even one that cannot start.
        let inspect = opts.access == Access::Inspect;
        let survives =
            |out: &[usize]| inspect || hetraid_core::layout::survives(layout.as_ref(), out);
        let mode = AssembleMode {
            force: opts.force,
            writable: opts.access == Access::ReadWrite,
            // A member left out by --force for its geometry was given:
            // its slot runs degraded as the operator asked.
            degraded: opts.degraded
                || opts.force && !odd_warnings.is_empty()
                // A member given but unreadable runs degraded, as md kicks it.
                || unreadable > 0,
        };
        let a = membership::assemble(&cands, mode, &survives).map_err(|e| {
            EngineError::Refused(assemble_refusal(e, &given, &raw, &fresh, &cands, &sbs))
        })?;
        let mut warnings = early;
        warnings.extend(odd_warnings);
        warnings.extend(left_out_warnings(&a, &cands, &fresh, &given));
        let mut sb = fresh.clone();
        sb.set_table(&a.table);
        sb.clean = a.clean;
        let slots: Vec<Option<Arc<dyn Member>>> =
            a.used.iter().map(|u| u.map(|i| given[i].clone())).collect();
        let raw_slots: Vec<Option<Arc<dyn Member>>> =
            a.used.iter().map(|u| u.map(|i| raw[i].clone())).collect();
        let damaged_tables = if sb.bundle_table {
            check_bundle_tables(&sb, &raw_slots)?
        } else {
            Vec::new()
        };
        let mut array = Self::from_parts(sb, spec, layout, slots)?;
        array.not_given = a.not_given.clone();
        array.read_only = opts.access != Access::ReadWrite;
        array.warnings.lock().unwrap().extend(warnings);
        array.merge_bitmaps(!a.forced.is_empty())?;
        array.refuse_write_hole(a.clean, !a.forced.is_empty(), opts.access, opts.force)?;
        // Nothing is written yet: the first write commits what was decided
        // (`commit`), so a command that refuses after this changes nothing.
        if !array.read_only {
            array.uncommitted.store(true, Ordering::Release);
            if a.changed {
                *array.assembled_sb.lock().unwrap() = Some(array.superblock());
            }
        }
        array.fix_bundle_tables(&damaged_tables, &raw_slots)?;
        array.restore_restripe_step(opts.access)?;
        array.take_spares(spare_given);
        array.load_annex(&raw);
        array.record_assembly(&a, &cands);
        let raw_by_slot: Vec<Option<Arc<dyn Member>>> =
            a.used.iter().map(|u| u.map(|i| raw[i].clone())).collect();
        array.open_log(logs, raw_by_slot, opts.access, opts.force)?;
        if !array.read_only && (!a.clean || !a.forced.is_empty()) {
            array.recover_dirty()?;
        }
        Ok(array)
    }

    /// The log's copies kept as regions of the members in their slots, with
    /// their headers (a copy whose member is failed or absent is left out).
    fn region_copies(
        &self,
        sb: &Superblock,
        region: crate::format::LogRegion,
        raw_by_slot: &[Option<Arc<dyn Member>>],
    ) -> Result<Vec<(Arc<dyn Member>, crate::log::LogHeader)>> {
        let mut found = Vec::new();
        // The copies are regions of the members in their slots.
        let st = self.state();
        let copies = sb.log.map_or(0, |l| l.copies as usize);
        for &slot in &region.slots[..copies] {
            let slot = slot as usize;
            let Some(m) = raw_by_slot.get(slot).cloned().flatten() else {
                continue;
            };
            if st.members[slot] == MemberState::Failed {
                continue;
            }
            let dev: Arc<dyn Member> = Arc::new(crate::member::RegionMember::new(
                m,
                sb.data_offset + region_start(self.layout.as_ref(), slot, sb.roles[slot].data_size),
                region.bytes,
            ));
            if let Some(h) =
                crate::log::read_header(dev.as_ref()).map_err(|e| io_err(dev.as_ref(), e))?
            {
                found.push((dev, h));
            }
        }
        Ok(found)
    }

    /// `--force` with no usable copy of the log: the array goes on without
    /// a log (the bitmap), after a full resync; the warning says what was lost.
    fn start_without_log(&self, sb: &Superblock, rec: crate::format::LogRecord) -> Result<()> {
        // --force: the user accepts losing what the log held. The array
        // goes on without a log (the bitmap), after a full resync.
        let lost = match (sb.clean, rec.mode) {
            (true, _) => "the array was closed cleanly, so the log held nothing: no write is lost",
            (false, crate::format::LogMode::WriteBack) => "every write acknowledged since the log was last reclaimed is lost (how many is not known without the log)",
            (false, crate::format::LogMode::Journal) => "no acknowledged write is lost, but stripes being written at a crash may be inconsistent",
        };
        self.warnings.lock().unwrap().push(format!(
            "no usable copy of the write log ({}) was given; started without it (--force): {lost}; the array now uses the write-intent bitmap, and its redundancy is resynced from the data",
            rec.mode.name()
        ));
        {
            let mut sb = self.sb.lock().unwrap();
            sb.log = None;
            sb.events += 1;
            self.persist(&mut sb)?;
        }
        self.resync_all()
    }

    /// Write the stripe updates a crash left in the log to the members
    /// again (read-write assembly), so none is left half done.
    fn replay_stripe_updates(
        &self,
        log: &crate::log::Log,
        records: &[crate::log::Replayed],
    ) -> Result<()> {
        self.commit()?;
        let st = self.state();
        let (mut writes, mut bytes) = (0u64, 0u64);
        for r in records {
            for &(slot, off, ring_at, len) in &r.entries {
                let i = slot as usize;
                if i >= self.hot.slots.len()
                    || !self.present(i)
                    || st.members[i] == MemberState::Failed
                {
                    continue;
                }
                let buf = log.read_ring(r.copy, ring_at, len)?;
                if let Err(e) = self.hot.slots[i].write_at(&buf, DATA_OFFSET + off) {
                    if !self.member_error(i, &e) {
                        return Err(io_err(self.hot.slots[i].as_ref(), e));
                    }
                }
                writes += 1;
                bytes += buf.len() as u64;
            }
        }
        self.warnings.lock().unwrap().push(format!(
            "replayed {} stripe updates from the write log ({writes} member writes, {bytes} bytes) after an unclean shutdown",
            records.len()
        ));
        Ok(())
    }

    /// Open the write log from the log devices given and replay what it
    /// holds (read-write assembly): every stripe update logged since the last
    /// checkpoint is written again, so none is left half done.
    fn open_log(
        &mut self,
        mut logs: Vec<(Arc<dyn Member>, crate::log::LogHeader)>,
        raw_by_slot: Vec<Option<Arc<dyn Member>>>,
        access: Access,
        force: bool,
    ) -> Result<()> {
        let sb = self.superblock();
        if let Some(region) = sb.log.and_then(|l| l.region) {
            if let Some((d, _)) = logs.first() {
                return Err(EngineError::Refused(format!(
                    "{} is a log device, but this array keeps its log on its members; leave it out",
                    d.name()
                )));
            }
            logs.extend(self.region_copies(&sb, region, &raw_by_slot)?);
        }
        let Some(rec) = sb.log else {
            if let Some((d, _)) = logs.first() {
                return Err(EngineError::Refused(format!(
                    "{} is a write log device, but array {} has no log; leave it out",
                    d.name(),
                    sb.uuid_string()
                )));
            }
            return Ok(());
        };
        if logs.is_empty() && access == Access::Inspect {
            self.warnings.lock().unwrap().push(
                "the array has a write log, but no log device was given: what it holds is not shown".into(),
            );
            return Ok(());
        }
        let usable = logs.iter().any(|(d, h)| {
            h.uuid == sb.uuid
                && h.id == rec.id
                && crate::log::left_out(d.as_ref(), h, sb.uuid, &rec).is_none()
        });
        if !usable && force && access == Access::ReadWrite {
            return self.start_without_log(&sb, rec);
        }
        let (mut log, records, resync_all) = match crate::log::Log::open(
            logs,
            sb.uuid,
            rec,
            hetraid_core::journal::Reserve::new(self.layout.members(), self.layout.redundancy()),
            force && access == Access::ReadWrite,
        ) {
            Ok(x) => x,
            // `status` shows the array even when its log cannot be used.
            Err(e) if access == Access::Inspect => {
                self.warnings
                    .lock()
                    .unwrap()
                    .push(format!("the write log cannot be used: {e}"));
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        // A region copy that is missing is of its member's kind (a device of
        // its own would say in its header).
        if let Some(region) = rec.region {
            for (copy, &slot) in region.slots[..rec.copies as usize].iter().enumerate() {
                if let Some(r) = sb.roles.get(slot as usize) {
                    log.kind_if_missing(copy, r.kind);
                }
            }
        }
        self.warnings.lock().unwrap().extend(log.take_warnings());
        // Write-back writes go back in the index (reads see them at once,
        // even read-only); only stripe updates need writing to members.
        let mut writes_back = 0u64;
        for r in &records {
            if let Some(d) = r.data {
                log.reindex(r.seq, d, r.copy, r.offset)?;
                writes_back += 1;
            }
        }
        if writes_back > 0 {
            self.warnings.lock().unwrap().push(format!(
                "the write log holds {writes_back} writes not yet on the members ({} bytes); reads see them, and they are written to the members as the log is reclaimed",
                log.unreclaimed_bytes()
            ));
        }
        // HPDA intents: stripes being written in place at the crash.
        let intent_stripes: Vec<u64> = {
            let mut v: Vec<u64> = records
                .iter()
                .flat_map(|r| r.stripes.iter().flat_map(|&(f, c)| f..f + c))
                .filter(|&s| s < self.layout.stripe_count())
                .collect();
            v.sort_unstable();
            v.dedup();
            v
        };
        let records: Vec<crate::log::Replayed> = records
            .into_iter()
            .filter(|r| r.data.is_none() && r.stripes.is_empty())
            .collect();
        if !records.is_empty() {
            match access {
                Access::Inspect => {
                    self.warnings.lock().unwrap().push(format!(
                        "the write log holds {} stripe updates not yet replayed (an unclean shutdown); assembling for writing replays them",
                        records.len()
                    ));
                }
                Access::ReadOnly => {
                    return Err(EngineError::Refused(format!(
                        "the write log holds {} stripe updates not yet on the members (an unclean shutdown); reading now could return old data: assemble for writing once (hetraid assemble) to replay them",
                        records.len()
                    )));
                }
                Access::ReadWrite => self.replay_stripe_updates(&log, &records)?,
            }
        }
        if !intent_stripes.is_empty() {
            self.recover_intents(&intent_stripes, access, force)?;
        }
        if access == Access::ReadWrite {
            log.clear_leftovers()?;
            log.checkpoint(&|| self.flush_members())?;
        }
        self.set_log(Some(log));
        if access == Access::ReadWrite {
            // Copies missing now are recorded as out: they cannot come back
            // later with records behind the others'.
            self.record_log_copies(true)?;
            // The members say where the log starts now: the records just
            // replayed are never replayed again from a copy put back.
            self.note_log_position()?;
            if resync_all {
                // A damaged record may have been half on the members.
                self.resync_all()?;
            }
        }
        Ok(())
    }
}

/// The devices given, sorted by what their headers say.
struct Given {
    /// Log devices, with their headers.
    logs: Vec<(Arc<dyn Member>, crate::log::LogHeader)>,
    /// Members, with their superblocks.
    members: Vec<Arc<dyn Member>>,
    sbs: Vec<Superblock>,
    /// Warnings for devices left out (unreadable, a log copy's lost header).
    early: Vec<String>,
    /// Devices that could not be read.
    unreadable: usize,
}

/// Sort the devices given into log devices and members. A device that
/// cannot be read, or a log device whose header is damaged, is left out
/// with a warning (md kicks a member it cannot read at assembly): one bad
/// device never stops the array. Refused: only log devices, a device with
/// no superblock that cannot be a log copy with its header lost, nothing
/// readable, members of another array.
fn sort_given(given: Vec<Arc<dyn Member>>) -> Result<Given> {
    let mut logs = Vec::new();
    let mut members = Vec::new();
    let mut early: Vec<String> = Vec::new();
    let mut unreadable = 0usize;
    for m in given {
        match crate::log::is_log_device(m.as_ref()) {
            Err(e) => {
                early.push(format!(
                    "{} is left out: it cannot be read ({e}); the array runs without it",
                    m.name()
                ));
                unreadable += 1;
            }
            Ok(true) => match crate::log::read_header(m.as_ref()) {
                Ok(Some(h)) => logs.push((m, h)),
                Ok(None) => early.push(format!(
                    "log device {} is left out: neither header slot is valid (damaged or overwritten)",
                    m.name()
                )),
                Err(e) => early.push(format!(
                    "log device {} is left out: its header cannot be read ({e})",
                    m.name()
                )),
            },
            Ok(false) => members.push(m),
        }
    }
    let given = members;
    if given.is_empty() {
        return Err(EngineError::Refused(
            "only log devices were given; give the array's members too".into(),
        ));
    }
    let mut sbs = Vec::new();
    let mut kept = Vec::new();
    let mut unknown: Vec<(Arc<dyn Member>, String)> = Vec::new();
    for m in given {
        match read_sb(m.as_ref()) {
            Ok(Ok(sb)) => {
                sbs.push(sb);
                kept.push(m);
            }
            Ok(Err(e)) => unknown.push((m, e.to_string())),
            Err(e) => {
                early.push(format!("{e}; it is left out and the array runs without it"));
                unreadable += 1;
            }
        }
    }
    let given = kept;
    if let Some(first) = sbs.first() {
        // A device with neither a superblock nor a log header, given
        // to an array one of whose log copies was not found, is taken
        // for that copy with its header slots lost: left out.
        let log_missing = first
            .log
            .map_or(0, |l| l.copies as usize)
            .saturating_sub(logs.len());
        if unknown.len() <= log_missing {
            for (m, e) in unknown.drain(..) {
                early.push(format!(
                    "{} is left out: it has {e} and no log header either; taken for the write log's missing copy with its header lost, the log runs on its other copy (replace it: hetraid replace ... --log-copy I --with DEV)",
                    m.name()
                ));
            }
        }
    }
    if let Some((m, e)) = unknown.first() {
        return Err(EngineError::Refused(format!(
            "member {} is refused: {e}",
            m.name()
        )));
    }
    if given.is_empty() {
        return Err(EngineError::Refused(format!(
            "no member could be read: {}",
            early.join("; ")
        )));
    }
    let first = &sbs[0];
    for (m, sb) in given.iter().zip(&sbs) {
        if sb.uuid != first.uuid {
            return Err(EngineError::Kind(
                hetraid_core::ErrorKind::Foreign,
                format!(
                "member {} belongs to array {}, not to array {} of member {}; assemble members of one array",
                m.name(),
                sb.uuid_string(),
                first.uuid_string(),
                given[0].name()
            )));
        }
    }
    Ok(Given {
        logs,
        members: given,
        sbs,
        early,
        unreadable,
    })
}

/// Members of one array agree on what never changes while it lives: the
/// layout's kind and parameters, the chunk, where data starts, checksums.
/// One that disagrees was altered or comes from elsewhere, whatever its
/// event counter claims (md's compare_super): refused by name, or left out
/// with `force` (the warnings say which).
#[allow(clippy::type_complexity)]
fn check_geometry(
    given: Vec<Arc<dyn Member>>,
    sbs: Vec<Superblock>,
    force: bool,
) -> Result<(Vec<Arc<dyn Member>>, Vec<Superblock>, Vec<String>)> {
    let geometry = |sb: &Superblock| {
        let l = &sb.layout;
        (
            l.name.to_ascii_lowercase(),
            l.parity_order.clone(),
            l.copies,
            l.group,
            l.partitions,
            l.spare_partitions,
            l.raidx_level.clone(),
            sb.chunk_bytes,
            sb.data_offset,
            sb.checksums,
        )
    };
    let describe = |sb: &Superblock| {
        format!(
            "{}, chunk {}, data at {}{}",
            sb.layout.name,
            sb.chunk_bytes,
            sb.data_offset,
            if sb.checksums { ", checksums" } else { "" }
        )
    };
    let votes = |g: &_| sbs.iter().filter(|s| geometry(s) == *g).count();
    let fresh_i = (0..sbs.len())
        .max_by_key(|&i| (sbs[i].events, usize::MAX - i))
        .unwrap();
    let majority = (0..sbs.len())
        .max_by_key(|&i| (votes(&geometry(&sbs[i])), i == fresh_i, usize::MAX - i))
        .unwrap();
    let odd: Vec<usize> = (0..sbs.len())
        .filter(|&i| geometry(&sbs[i]) != geometry(&sbs[majority]))
        .collect();
    if let Some(&i) = odd.first() {
        if !force {
            return Err(EngineError::Refused(format!(
                "member {} describes another geometry ({}, event {}) than member {} ({}, event {}) of the same array: its superblock was altered or comes from elsewhere; leave it out, or say --force to start without it",
                given[i].name(),
                describe(&sbs[i]),
                sbs[i].events,
                given[majority].name(),
                describe(&sbs[majority]),
                sbs[majority].events
            )));
        }
    }
    let odd_warnings: Vec<String> = odd
        .iter()
        .map(|&i| {
            format!(
                "member {} is left out (--force): it describes another geometry ({}) than the others ({})",
                given[i].name(),
                describe(&sbs[i]),
                describe(&sbs[majority])
            )
        })
        .collect();
    let (given, sbs): (Vec<_>, Vec<_>) = given
        .into_iter()
        .zip(sbs)
        .enumerate()
        .filter(|(i, _)| !odd.contains(i))
        .map(|(_, x)| x)
        .unzip();
    Ok((given, sbs, odd_warnings))
}

/// Why the member-state machine would not assemble, in an operator's words
/// (members by path, what to do).
fn assemble_refusal(
    e: AssembleError,
    given: &[Arc<dyn Member>],
    raw: &[Arc<dyn Member>],
    fresh: &Superblock,
    cands: &[Candidate],
    sbs: &[Superblock],
) -> String {
    let name = |i: usize| given[i].name();
    match e {
        AssembleError::NoMembers => "give the array's members".into(),
        AssembleError::NotGiven { slots } => {
            let annex = super::events::read_annex(raw, fresh.uuid);
            let named: Vec<String> = slots
                .iter()
                .map(|&s| {
                    match annex
                        .as_ref()
                        .and_then(|a| a.paths.get(s))
                        .filter(|p| !p.is_empty())
                    {
                        Some(p) => format!("member {s} (last seen {p})"),
                        None => format!("member {s}"),
                    }
                })
                .collect();
            let (was, it) = if slots.len() == 1 {
                ("was", "it")
            } else {
                ("were", "them")
            };
            format!(
                "{} {was} not given: give {it}, or say --degraded to run without {it}",
                named.join(", ")
            )
        }
        AssembleError::Incarnation { candidate } => format!(
            "member {} has a member table of another size than the freshest member's; it belongs to another incarnation of the array: leave it out",
            name(candidate)
        ),
        AssembleError::Split { a, b, detail } => format!(
            "members {} and {} were run apart ({detail}): each may hold writes the other lacks, so they are not merged; keep one side by assembling it alone, then hetraid replace the other side's slots (their data is rebuilt from the side kept)",
            name(a),
            name(b)
        ),
        AssembleError::Copies { a, b, slot } => format!(
            "members {} and {} are the same member of slot {slot} (one is a copy of the other); give only one",
            name(a),
            name(b)
        ),
        AssembleError::Unreadable { slots } => {
            let left: Vec<String> = (0..given.len())
                .filter(|&i| !cands[i].size_ok || sbs[i].events + 1 < fresh.events || !fresh.roles[sbs[i].member as usize].state.is_in())
                .map(|i| format!("{} (event {})", name(i), sbs[i].events))
                .collect();
            format!(
                "the array cannot start: the members of slots {slots:?} are missing, faulty or being rebuilt, more than it can do without{}; give all members, or, if the members left out are intact, hetraid assemble --force brings back the freshest of them (writes made after they left are lost on them)",
                if left.is_empty() {
                    String::new()
                } else {
                    format!(" (left out: {})", left.join(", "))
                }
            )
        }
    }
}

/// The warnings for members the assembly left out or brought back.
fn left_out_warnings(
    a: &membership::Assembly,
    cands: &[Candidate],
    fresh: &Superblock,
    given: &[Arc<dyn Member>],
) -> Vec<String> {
    let name = |i: usize| given[i].name();
    let mut warnings = Vec::new();
    for l in &a.left_out {
        let slot = cands[l.candidate].slot;
        // A slot a shrink emptied takes no device back: the device
        // joins again as a new member.
        let emptied = fresh.raidx_history.as_ref().is_some_and(|h| {
            h.changes.iter().any(|c| matches!(c, hetraid_core::layout::raidx_history::Change::Remove { slot: s, .. } if *s == slot))
        });
        warnings.push(if emptied {
            format!(
                "member {} is left out: slot {slot} was removed by a shrink (its chunks live on the other members); to use the device again: hetraid grow MEMBERS... --add {}",
                name(l.candidate),
                name(l.candidate)
            )
        } else {
            format!(
                "member {} is left out: {}; to use it again: hetraid add MEMBERS... --with {} (back in slot {slot}; if it left intact, only the regions written since are resynced)",
                name(l.candidate),
                l.reason,
                name(l.candidate),
            )
        });
    }
    for f in &a.forced {
        warnings.push(format!(
            "member {} was brought back by --force: {}; the whole array's redundancy is resynced from its data",
            name(f.candidate),
            f.reason
        ));
    }
    for &s in &a.recorded_missing {
        warnings.push(format!(
            "member {s} is missing: the others' superblocks record it with the array's first write, and it then cannot rejoin without a rebuild"
        ));
    }
    warnings
}

impl Array {
    /// The bitmap: a region is dirty when any member used says so (a crash
    /// may have stopped between members); every region when a member was
    /// brought back by force.
    fn merge_bitmaps(&mut self, forced: bool) -> Result<()> {
        let array = self;
        let len = array.bitmap.lock().unwrap().bits.len();
        let mut bits = vec![0u8; len];
        let mut page = AlignedBuf::zeroed(len.div_ceil(PAGE as usize) * PAGE as usize);
        for m in array.hot.slots.iter().filter_map(|s| s.get()) {
            if page.is_empty() {
                break;
            }
            m.read_at(&mut page, BITMAP_OFFSET)
                .map_err(|e| io_err(m.as_ref(), e))?;
            bits.iter_mut().zip(page.iter()).for_each(|(b, p)| *b |= p);
        }
        if forced {
            bits.iter_mut().for_each(|b| *b = 0xff);
        }
        array.bitmap = Mutex::new(Bitmap::new(array.bitmap_stripes(), bits));
        Ok(())
    }

    /// A degraded array not shut down cleanly has the write hole: refused
    /// (or warned of: inspecting, or --force).
    fn refuse_write_hole(
        &self,
        clean: bool,
        forced: bool,
        access: Access,
        force: bool,
    ) -> Result<()> {
        let array = self;
        // Bits of a clean array are regions written while a member was out
        // (kept for its re-add), not writes cut by a crash.
        let dirty = if clean {
            0
        } else {
            array.bitmap.lock().unwrap().dirty().len()
        };
        let degraded = array.out_members(true) > 0;
        if dirty > 0 && degraded && !forced {
            let what = format!(
                    "the array is degraded and was not shut down cleanly: {dirty} regions were being written at the crash, and where a write did not reach every member, data reconstructed for the absent members is wrong (the write hole)"
                );
            match access {
                    Access::Inspect => array.warnings.lock().unwrap().push(what),
                    _ if force => array.warnings.lock().unwrap().push(format!(
                        "{what}; started anyway (--force): check your data, then replace and rebuild"
                    )),
                    _ => {
                        return Err(EngineError::Refused(format!(
                            "{what}. It is not started: give all members if you can (the regions are then resynced), or start it anyway with hetraid assemble --force and the same members, then check the data in those regions"
                        )))
                    }
                }
        }
        Ok(())
    }
}

impl Array {
    /// A damaged bundle table is a copy gone wrong: rewritten from the
    /// array's table when the array is written, named until then.
    fn fix_bundle_tables(
        &self,
        damaged_tables: &[(usize, String)],
        raw_slots: &[Option<Arc<dyn Member>>],
    ) -> Result<()> {
        if !damaged_tables.is_empty() {
            let what: Vec<String> = damaged_tables.iter().map(|(_, w)| w.clone()).collect();
            if self.read_only {
                self.warnings.lock().unwrap().push(format!(
                    "{}: the array's own table (in every superblock) is used; assembling for writing rewrites the damaged copy",
                    what.join("; ")
                ));
            } else {
                self.commit()?;
                let fix: Vec<usize> = damaged_tables.iter().map(|(i, _)| *i).collect();
                repair_bundle_tables(&self.superblock(), raw_slots, &fix)?;
                self.warnings.lock().unwrap().push(format!(
                    "{}: rewritten from the array's table",
                    what.join("; ")
                ));
            }
        }
        Ok(())
    }

    /// A restripe step cut by a crash: its backed-up chunks go back first
    /// (read-write), or it is named (inspect), or reading is refused.
    fn restore_restripe_step(&self, access: Access) -> Result<()> {
        if self
            .superblock()
            .reshape
            .as_ref()
            .is_some_and(|r| r.backup_row.is_some())
        {
            match access {
                Access::ReadWrite => self.restore_reshape_backup()?,
                Access::Inspect => self.warnings.lock().unwrap().push(
                    "a restripe step was cut by a crash: assembling for writing puts its backed-up chunks back".into(),
                ),
                Access::ReadOnly => {
                    return Err(EngineError::Refused(
                        "a restripe step was cut by a crash and its chunks wait in the members' backup areas; reading now could return wrong data: assemble for writing once (hetraid assemble) to put them back".into(),
                    ))
                }
            }
        }
        Ok(())
    }
}

impl Array {
    /// The events an assembly leaves (read-write): members recorded
    /// missing, members brought back by force.
    fn record_assembly(&self, a: &membership::Assembly, cands: &[Candidate]) {
        if self.read_only {
            return;
        }
        for &s in &a.recorded_missing {
            self.record_member(crate::annex::EventKind::Missing, s, [0; 3]);
        }
        for f in &a.forced {
            let c = &cands[f.candidate];
            self.record_member(
                crate::annex::EventKind::Forced,
                c.slot,
                [c.table.events, a.table.events, 0],
            );
        }
    }
}

/// The layout options of a superblock, with its members' sizes and kinds.
pub(super) fn spec_of(sb: &Superblock) -> Result<LayoutSpec> {
    Ok(LayoutSpec {
        kind: sb.layout.kind().map_err(EngineError::layout)?,
        chunk_bytes: sb.chunk_bytes,
        sizes: sb.roles.iter().map(|r| r.data_size).collect(),
        kinds: sb.roles.iter().map(|r| r.kind).collect(),
    })
}

/// The layout a superblock describes, as assembly builds it: RAIDX's
/// bundle history, a restripe in progress, relocations applied.
pub fn layout_of(sb: &Superblock) -> Result<Box<dyn Layout>> {
    let spec = spec_of(sb)?;
    let layout = if sb.raidx_history.is_some() {
        super::living::raidx_layout(sb)?
    } else if sb.reshape.is_some() {
        super::restripe::reshaping_layout(sb)?
    } else {
        build(&spec).map_err(|e| EngineError::Layout(e.to_string()))?
    };
    Ok(relocated(layout, sb))
}

/// The health a superblock records, without the devices at hand (what
/// `monitor` knows): `optimal`, `degraded`, `rebuilding` or `failed`, by
/// the slots it does not list active. `Array::status` says more (members
/// not given, a member failing now).
pub fn recorded_health(sb: &Superblock) -> Result<&'static str> {
    let layout = layout_of(sb)?;
    let out: Vec<usize> = (0..sb.roles.len())
        .filter(|&i| sb.roles[i].state != RoleState::Active)
        .collect();
    Ok(
        if out.len() > layout.redundancy().tolerance()
            || !hetraid_core::layout::survives(layout.as_ref(), &out)
        {
            "failed"
        } else if sb.roles.iter().any(|r| r.state == RoleState::Rebuilding) {
            "rebuilding"
        } else if !out.is_empty() {
            "degraded"
        } else {
            "optimal"
        },
    )
}
