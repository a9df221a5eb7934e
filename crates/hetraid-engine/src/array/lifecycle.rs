//! An array's superblocks and transitions, its log copies, clean shutdown
//! and crash recovery (bitmap resync); `create.rs` and `assemble.rs` bring
//! an array up. The helpers here are shared by all three.

#[allow(unused_imports)]
use super::*;

/// The checksum area for members of physical sizes `lens` (None: no checksums).
pub(crate) fn checksum_area(lens: &[u64], opts: &CreateOptions) -> Option<u64> {
    let largest = lens.iter().max().copied().unwrap_or(0);
    opts.checksums
        .then(|| crate::member::checksum::area_bytes(largest.saturating_sub(DATA_OFFSET).max(1)))
}

/// Where a log region starts on member `slot`, from the start of its data
/// area: where the layout puts it (HPDA: past HDD-1's parity, at the start
/// of HDD-2), or past the member's data (`--log-region`).
pub(crate) fn region_start(layout: &dyn Layout, slot: usize, data_size: u64) -> u64 {
    layout
        .log_regions()
        .iter()
        .find(|r| r.member == slot)
        .map_or(data_size, |r| r.offset)
}

/// The layout options an array of `members` (of `kinds`, or disks) is
/// created with: core `ArraySpec::stored_layout` (RAIDX5/6 weights from the
/// kinds, S2-RAID's partition count), stored so an array never depends on a
/// later default or a later reading of its kinds.
pub(crate) fn created_record(
    rec: &LayoutOptions,
    kinds: &[MemberKind],
    members: usize,
) -> Result<LayoutOptions> {
    let kinds = match kinds.is_empty() {
        true => vec![MemberKind::Hdd; members],
        false => kinds.to_vec(),
    };
    let spec = hetraid_core::spec::ArraySpec {
        layout: rec.clone(),
        ..Default::default()
    };
    spec.stored_layout(&kinds).map_err(EngineError::spec)
}

/// The data area a member of `len` bytes (as the array sees it, past any
/// checksums) gives with chunks of `chunk`: RAIDX keeps its bundle table
/// past the data area (`crate::bundles`), room for one entry per slot.
pub(crate) fn data_area(len: u64, chunk: u64, reserved: u64, raidx: bool) -> u64 {
    let room = len.saturating_sub(DATA_OFFSET + reserved);
    let table = if raidx {
        crate::bundles::table_bytes(room / chunk)
    } else {
        0
    };
    (room.saturating_sub(table) / chunk * chunk).min(crate::format::MEMBER_DATA_MAX)
}

/// Check each member's bundle table against the table the array has (the
/// allocator's, while chunks do not move): damage is named with its member.
/// The members whose bundle table disagrees with the array's (the
/// superblocks' history, on every member, checksummed): per slot, what is
/// wrong. A member's table is a copy of its part of the array's, so a
/// damaged one is rewritten from it (`repair_bundle_tables`), never a reason
/// to refuse the array.
pub(crate) fn check_bundle_tables(
    sb: &Superblock,
    raw_by_slot: &[Option<Arc<dyn Member>>],
) -> Result<Vec<(usize, String)>> {
    let (table, pending) = super::living::table_now(sb)?;
    let mut damaged = Vec::new();
    // While a change runs the superblock's history is the truth; the
    // tables are rewritten when it completes.
    if pending.is_some() {
        return Ok(damaged);
    }
    let places = table.places;
    for (i, m) in raw_by_slot.iter().enumerate() {
        let Some(m) = m else { continue };
        if sb.roles[i].state == RoleState::Removed {
            continue;
        }
        let size = sb.roles[i].data_size;
        let slots = size / sb.chunk_bytes;
        let found = match crate::bundles::read_table(
            m.as_ref(),
            sb.data_offset + size,
            sb.uuid,
            i as u32,
            slots,
        ) {
            Ok(f) => f,
            Err(e) => {
                damaged.push((i, e));
                continue;
            }
        };
        let want = crate::bundles::entries_of(&places, i, slots);
        let key = |e: &Option<crate::bundles::Entry>| e.map(|e| (e.bundle, e.pos));
        if let Some(k) = (0..slots as usize).find(|&k| key(&found[k]) != key(&want[k])) {
            damaged.push((
                i,
                format!(
                    "the bundle table on {} says slot {k} holds {}, but the array's table says {}",
                    m.name(),
                    found[k].map_or("nothing".into(), |e| format!(
                        "bundle {} position {}",
                        e.bundle, e.pos
                    )),
                    want[k].map_or("nothing".into(), |e| format!(
                        "bundle {} position {}",
                        e.bundle, e.pos
                    )),
                ),
            ));
        }
    }
    Ok(damaged)
}

/// Rewrite the bundle tables of `slots` from the array's table.
pub(crate) fn repair_bundle_tables(
    sb: &Superblock,
    raw_by_slot: &[Option<Arc<dyn Member>>],
    slots: &[usize],
) -> Result<()> {
    let places = super::living::table_now(sb)?.0.places;
    for &i in slots {
        let Some(m) = &raw_by_slot[i] else { continue };
        let size = sb.roles[i].data_size;
        let entries = crate::bundles::entries_of(&places, i, size / sb.chunk_bytes);
        crate::bundles::write_table(
            m.as_ref(),
            sb.data_offset + size,
            sb.uuid,
            i as u32,
            &entries,
        )
        .map_err(|e| io_err(m.as_ref(), e))?;
    }
    Ok(())
}

pub(crate) fn is_raidx(rec: &LayoutOptions) -> bool {
    matches!(
        rec.kind(),
        Ok(hetraid_core::layout::LayoutKind::RaidX { .. })
    )
}

/// Wrap members in block checksums when the superblock says so.
pub(crate) fn with_checksums(m: Arc<dyn Member>, sb: &Superblock) -> Arc<dyn Member> {
    let area = sb.data_offset - DATA_OFFSET;
    if sb.checksums && m.checksum_area() == Some(area) {
        // Wrapped already (a member of the array this one replaces): its
        // entries, some not yet written back, stay the ones in use.
        m
    } else if sb.checksums {
        Arc::new(ChecksumMember::new(m, area))
    } else {
        m
    }
}

impl Array {
    /// Record in the superblock which log copies are in use, when that
    /// changed (one event, so every member agrees which superblock is newer).
    pub(crate) fn record_log_copies(&self, always_check: bool) -> Result<()> {
        let Some(log) = &self.log else {
            return Ok(());
        };
        if !log.take_changed() && !always_check {
            return Ok(());
        }
        let live = log.live_mask();
        let mut sb = self.sb.lock().unwrap();
        let Some(rec) = sb.log.as_mut() else {
            return Ok(());
        };
        if rec.active == live {
            return Ok(());
        }
        let lost = rec.active & !live;
        rec.active = live;
        sb.events += 1;
        self.persist(&mut sb)?;
        drop(sb);
        let names = log.devices();
        for copy in (0..8).filter(|c| lost >> c & 1 == 1) {
            let name = names.get(copy).map_or_else(String::new, |d| d.0.clone());
            self.record(
                crate::annex::EventKind::LogCopyFailed,
                None,
                [copy as u64, 0, 0],
                &name,
            );
        }
        Ok(())
    }

    /// Put `dev` in as log copy `i` (a copy that failed or is missing): the
    /// log's live records are copied to it and it is recorded in use.
    pub fn replace_log_copy(&self, i: usize, dev: Arc<dyn Member>, force: bool) -> Result<()> {
        let Some(log) = &self.log else {
            return Err(EngineError::Refused("the array has no write log".into()));
        };
        for j in 0..self.slot_count() {
            if self.member(j).is_some_and(|m| m.name() == dev.name()) {
                return Err(EngineError::Refused(format!(
                    "{} is member {j} of this array, not a free device",
                    dev.name()
                )));
            }
        }
        if log
            .devices()
            .iter()
            .any(|(n, _, live)| *live && *n == dev.name())
        {
            return Err(EngineError::Refused(format!(
                "{} is a log copy in use",
                dev.name()
            )));
        }
        if !force {
            if let Ok(Some(h)) = crate::log::read_header(dev.as_ref()) {
                let sb = self.superblock();
                if h.uuid != sb.uuid {
                    return Err(EngineError::Refused(format!(
                        "{} holds the write log of array {}; use --force to overwrite it",
                        dev.name(),
                        h.uuid_string()
                    )));
                }
            } else if let Ok(Ok(theirs)) = read_sb(dev.as_ref()) {
                return Err(EngineError::Kind(
                    hetraid_core::ErrorKind::Foreign,
                    format!(
                        "{} belongs to array {} (slot {}); use --force to overwrite it",
                        dev.name(),
                        theirs.uuid_string(),
                        theirs.member
                    ),
                ));
            }
        }
        let epoch = self.superblock().log.map_or(0, |l| l.epoch) + 1;
        let name = super::events::absolute(&dev.name());
        log.replace_copy(i, dev, epoch)?;
        let _ = log.take_changed();
        let mut sb = self.sb.lock().unwrap();
        if let Some(rec) = sb.log.as_mut() {
            rec.epoch = epoch;
            rec.active = log.live_mask();
        }
        sb.events += 1;
        self.persist(&mut sb)?;
        drop(sb);
        self.record(
            crate::annex::EventKind::LogCopyReplaced,
            None,
            [i as u64, 0, 0],
            &name,
        );
        Ok(())
    }

    pub(crate) fn bitmap_stripes(&self) -> u64 {
        self.sb.lock().unwrap().bitmap_stripes as u64
    }

    /// Write the superblock as it is (no event bump: clean/dirty changes, or a
    /// table the state machine already bumped) to every live member, flushed.
    /// A member that cannot take it is failed when the array survives that (and
    /// the others learn of it); otherwise the error is returned.
    /// `sb` as each live member's superblock, written and flushed.
    fn superblock_writes(&self, sb: &Superblock) -> Vec<(usize, IoOp)> {
        let mut ops = Vec::new();
        for (i, slot) in self.hot.slots.iter().enumerate() {
            if !slot.present() || !sb.roles[i].state.is_in() {
                continue;
            }
            let mut s = sb.clone();
            s.member = i as u32;
            let mut b = AlignedBuf::zeroed(SB_SIZE);
            b.copy_from_slice(&s.encode());
            ops.push((i, IoOp::Write { off: 0, buf: b }));
            ops.push((i, IoOp::Flush));
        }
        ops
    }

    pub(crate) fn persist(&self, sb: &mut Superblock) -> Result<()> {
        if self.read_only {
            return Ok(());
        }
        // Every superblock written carries the log's checkpoint as its
        // copies' headers hold it (never ahead of them).
        if let (Some(rec), Some(log)) = (sb.log.as_mut(), self.log.as_ref()) {
            rec.checkpoint_seq = rec.checkpoint_seq.max(log.checkpoint_seq());
        }
        // The superblock written carries what assembly decided: committed,
        // the annex follows at the next chance.
        if self.uncommitted.swap(false, Ordering::AcqRel) {
            self.annex_due.store(true, Ordering::Release);
            let first = self.assembled_sb.lock().unwrap().take();
            if let Some(first) = first.filter(|f| f.events < sb.events) {
                // Best effort: a member whose write fails fails in the
                // update below, which handles it.
                let _ = run_batch(&self.queues, self.superblock_writes(&first));
            }
        }
        // Bounded: each round removes a member from the live set or returns.
        for _ in 0..=self.hot.slots.len() {
            let ops = self.superblock_writes(sb);
            let idx: Vec<usize> = ops.iter().map(|(i, _)| *i).collect();
            let mut failed: Vec<(usize, std::io::Error)> = Vec::new();
            for (r, i) in run_batch(&self.queues, ops).into_iter().zip(idx) {
                if let Err(e) = r {
                    if !failed.iter().any(|(j, _)| *j == i) {
                        failed.push((i, e));
                    }
                }
            }
            let Some((i, e)) = failed.into_iter().next() else {
                return Ok(());
            };
            let survives = |out: &[usize]| hetraid_core::layout::survives(self.layout(), out);
            let next = sb
                .table()
                .apply(
                    Transition::Fail {
                        slot: i,
                        force: false,
                    },
                    &survives,
                )
                .map_err(|_| io_err(self.hot.slots[i].as_ref(), e))?;
            self.warnings.lock().unwrap().push(format!(
                "member {i} ({}) failed: its superblock could not be written",
                self.hot.slots[i].name()
            ));
            let old = sb.table();
            sb.set_table(&next);
            self.sync_state(&old, &next);
        }
        Err(EngineError::TooManyFailures(
            "members kept failing while their superblocks were written".into(),
        ))
    }

    /// Apply a state-machine transition: the new table is written to every live
    /// member before anything acts on it.
    pub(crate) fn transition(&self, t: Transition) -> Result<()> {
        self.transitions(&[t], |_| {})
    }

    /// Apply several transitions as one superblock update (one event: members
    /// are never more than one event apart), after `edit` changes what is not
    /// the member table (relocations). All or nothing.
    pub(crate) fn transitions(
        &self,
        ts: &[Transition],
        edit: impl FnOnce(&mut Superblock),
    ) -> Result<()> {
        let mut sb = self.sb.lock().unwrap();
        let old = sb.table();
        let survives = |out: &[usize]| hetraid_core::layout::survives(self.layout(), out);
        let mut next = old.clone();
        for &t in ts {
            next = next
                .apply(t, &survives)
                .map_err(|f| EngineError::Kind(f.kind, self.name_slot(t, f.message)))?;
        }
        next.events = old.events + 1;
        edit(&mut sb);
        sb.set_table(&next);
        self.sync_state(&old, &next);
        self.persist(&mut sb)?;
        drop(sb);
        self.record_transitions(ts);
        Ok(())
    }

    /// The core names slots by number; operators name disks by path.
    fn name_slot(&self, t: Transition, msg: String) -> String {
        let slot = match t {
            Transition::Fail { slot, .. }
            | Transition::Attach { slot, .. }
            | Transition::Checkpoint { slot, .. }
            | Transition::FinishRebuild { slot, .. }
            | Transition::Remove { slot } => slot,
        };
        match self.hot.slots.get(slot).and_then(|s| s.get()) {
            Some(m) => msg.replacen(
                &format!("member {slot} "),
                &format!("member {slot} ({}) ", m.name()),
                1,
            ),
            None => msg,
        }
    }

    /// Bring the in-memory member states in line with a new table.
    pub(crate) fn sync_state(&self, old: &MemberTable, new: &MemberTable) {
        let mut st = self.state.write().unwrap();
        for (i, (o, n)) in old.slots.iter().zip(&new.slots).enumerate() {
            let same_device = o.device == n.device;
            st.members[i] = match n.state {
                SlotState::Active if self.hot.slots[i].present() => MemberState::InSync,
                SlotState::Rebuilding { checkpoint } if self.hot.slots[i].present() => {
                    match (&st.members[i], same_device) {
                        (MemberState::Rebuilding { .. }, true) => continue,
                        _ => MemberState::rebuilding(checkpoint),
                    }
                }
                _ => MemberState::Failed,
            };
        }
        self.refresh_in_sync(&st);
    }

    /// Keep the last scrub's result in the superblocks (no event: it changes
    /// no member's state).
    pub(crate) fn record_scrub(&self, r: crate::format::ScrubRecord) -> Result<()> {
        let mut sb = self.sb.lock().unwrap();
        sb.last_scrub = Some(r);
        self.persist(&mut sb)
    }

    /// Flush and mark the array clean (a restart then needs no resync);
    /// what assembly decided is written ([`Array::commit`]) unless
    /// [`Array::keep_uncommitted`] said otherwise.
    pub fn close(&self) -> Result<()> {
        self.commit()?;
        self.stop_write_buffer()?;
        self.flush()?;
        if self.read_only {
            return Ok(());
        }
        if let Some(log) = &self.log {
            // Write-back data to the members, then everything logged is on
            // the members: the log is empty.
            if log.all_lost() {
                // No copy left: the writes it acknowledged are still in
                // memory. They go to the members (with the bitmap), and the
                // array carries on without a log rather than lose them.
                let n = log.pieces().len();
                let bytes = self.reclaim()?;
                self.flush()?;
                let mut sb = self.sb.lock().unwrap();
                sb.log = None;
                sb.events += 1;
                self.persist(&mut sb)?;
                self.warnings.lock().unwrap().push(format!(
                    "the write log failed on every copy: its {n} writes not yet on the members ({bytes} bytes, kept in memory) were written to them; the array no longer has a log and uses the write-intent bitmap (create a new array to have a log again)"
                ));
            } else {
                self.reclaim()?;
                log.checkpoint(&|| self.flush_members())?;
                self.record_log_copies(false)?;
            }
        }
        // Checksum errors since assembly (the first of each member was
        // recorded when it happened), once per run.
        for i in 0..self.hot.slots.len() {
            let c = self.checksum_errors[i].load(Ordering::Relaxed);
            if c > 1 && self.checksum_errors_recorded(i) < c {
                self.record_member(crate::annex::EventKind::ChecksumErrors, i, [c as u64, 0, 0]);
            }
        }
        self.mark_clean(&mut self.sb.lock().unwrap())?;
        // Errors of this run are kept on the members (until `clear`).
        let errors_now = (0..self.hot.slots.len()).any(|i| {
            self.read_errors[i].load(Ordering::Relaxed) > 0
                || self.write_errors[i].load(Ordering::Relaxed) > 0
                || self.checksum_errors[i].load(Ordering::Relaxed) > 0
        });
        if self.annex_due.swap(false, Ordering::AcqRel) || errors_now {
            self.write_annex();
        }
        Ok(())
    }

    /// Recompute redundancy of every stripe in regions the bitmap marks dirty.
    pub(crate) fn recover_dirty(&self) -> Result<()> {
        let dirty = self.bitmap.lock().unwrap().dirty();
        if dirty.is_empty() {
            return Ok(());
        }
        self.commit()?;
        let spb = self.bitmap.lock().unwrap().stripes_per_bit;
        let state = self.state();
        let degraded = state.members.iter().any(|s| *s != MemberState::InSync);
        if degraded && self.layout.redundancy().tolerance() <= 1 {
            self.warnings.lock().unwrap().push(format!(
                "{} regions were being written at a crash while the array was degraded; their parity cannot be verified",
                dirty.len()
            ));
        }
        // A crash between a block's data and its checksum: the regions
        // being written get their checksums from the data first.
        let stripes: Vec<u64> = dirty
            .iter()
            .flat_map(|b| b * spb..((b + 1) * spb).min(self.layout.stripe_count()))
            .collect();
        let fixed = self.resync_stripes(&stripes)?;
        if fixed > 0 {
            self.warnings.lock().unwrap().push(format!(
                "resynced {} dirty regions after an unclean shutdown ({fixed} stripes repaired)",
                dirty.len()
            ));
        }
        self.flush()?;
        // Consistent again: clean, so the next write starts a generation.
        if self.log.is_none() {
            self.mark_clean(&mut self.sb.lock().unwrap())?;
        }
        Ok(())
    }

    /// HPDA: stripes an intent record names were being written in place at
    /// a crash; their parity is recomputed from their data. With a RAID4
    /// member absent that cannot be done (the write hole): refused without
    /// `force`, as a dirty degraded bitmap array is.
    pub(crate) fn recover_intents(
        &self,
        stripes: &[u64],
        access: Access,
        force: bool,
    ) -> Result<()> {
        let n = stripes.len();
        if access != Access::ReadWrite {
            self.warnings.lock().unwrap().push(format!(
                "{n} stripes were being written in place at an unclean shutdown; assembling for writing recomputes their parity"
            ));
            return Ok(());
        }
        let state = self.state();
        let absent: Vec<String> = (0..state.members.len())
            .filter(|&i| self.holds[i] && state.members[i] != MemberState::InSync)
            .map(|i| {
                self.member(i)
                    .map_or_else(|| format!("member {i} (missing)"), |m| m.name())
            })
            .collect();
        if !absent.is_empty() {
            let what = format!(
                "{n} stripes were being written in place at a crash and a RAID4 member is absent ({}): where such a write did not reach every member, data reconstructed for the absent member is wrong (the write hole)",
                absent.join(", ")
            );
            if !force {
                return Err(EngineError::Refused(format!(
                    "{what}. It is not started: give all members if you can (the stripes are then resynced), or start it anyway with hetraid assemble --force and the same members, then check the data in those stripes"
                )));
            }
            self.warnings
                .lock()
                .unwrap()
                .push(format!("{what}; started anyway (--force)"));
            return Ok(());
        }
        self.resync_stripes(stripes)?;
        self.warnings.lock().unwrap().push(format!(
            "recomputed the parity of {n} stripes that were being written in place at an unclean shutdown"
        ));
        Ok(())
    }

    /// Recompute the redundancy of `stripes` from their data (their block
    /// checksums first, when the array keeps them).
    fn resync_stripes(&self, stripes: &[u64]) -> Result<u64> {
        if self.checksums {
            let chunk = self.layout.chunk_bytes();
            for &s in stripes {
                for c in self.layout.stripe(s).all() {
                    if self.present(c.member) {
                        self.hot.slots[c.member]
                            .rehash(c.offset, chunk)
                            .map_err(|e| io_err(self.hot.slots[c.member].as_ref(), e))?;
                    }
                }
            }
        }
        let mut fixed = 0;
        for &s in stripes {
            let found = self.scrub_stripe(s, Some(hetraid_core::scrub::Trust::Resync))?;
            fixed += found.iter().any(|m| !m.fixed.is_empty()) as u64;
        }
        Ok(fixed)
    }

    /// A new array on members not known to be all zero: the checksum
    /// entries computed from the data (the checksum area holds old bytes,
    /// or every old block would read as bad), then the redundancy. Members
    /// assumed clean are all zero and need neither (entry 0 says "never
    /// written, reads as zeros").
    pub(crate) fn first_sync(&self, checksums: bool) -> Result<()> {
        if checksums {
            self.rehash_all()?;
        }
        self.resync_all()
    }

    /// Block checksums of every member's whole data area computed from the
    /// data as it is (a new array on members used before), then flushed.
    fn rehash_all(&self) -> Result<()> {
        const PIECE: u64 = 4 << 20;
        for (i, slot) in self.hot.slots.iter().enumerate() {
            if !self.present(i) {
                continue;
            }
            let data = slot.len().saturating_sub(crate::format::DATA_OFFSET);
            let mut off = 0;
            // Bounded: each round advances by a piece.
            while off < data {
                let len = PIECE.min(data - off);
                slot.rehash(off, len)
                    .map_err(|e| io_err(slot.as_ref(), e))?;
                off += len;
            }
        }
        self.flush_members()
    }

    pub(crate) fn resync_all(&self) -> Result<()> {
        for s in 0..self.layout.stripe_count() {
            self.scrub_stripe(s, Some(hetraid_core::scrub::Trust::Resync))?;
        }
        self.flush()
    }
}

#[cfg(test)]
mod partition_default_tests {
    use super::*;
    use hetraid_core::layout::{build, LayoutSpec};

    fn built(rec: &LayoutOptions) -> (u64, String) {
        let l = build(&LayoutSpec {
            kind: rec.kind().unwrap(),
            chunk_bytes: 65536,
            sizes: vec![64 << 20; 9],
            kinds: vec![],
        })
        .unwrap();
        let s = l.stripe(l.stripe_count() - 1);
        (
            l.stripe_count(),
            format!("{:?}", s.all().collect::<Vec<_>>()),
        )
    }

    /// `create` stores S²-RAID's partition count (G - 1 with spare space);
    /// a superblock written before it was stored (no count) still builds
    /// the layout it was created with, K = G: reading old arrays never
    /// changes where their data is.
    #[test]
    fn the_stored_count_decides_and_old_records_keep_k_equal_g() {
        let old = LayoutOptions {
            name: "s2raid5".into(),
            group: Some(3),
            partitions: None,
            spare_partitions: 1,
            ..Default::default()
        };
        let created = created_record(&old, &[], 9).unwrap();
        assert_eq!(created.partitions, Some(2));
        let k3 = LayoutOptions {
            partitions: Some(3),
            ..old.clone()
        };
        assert_eq!(built(&old), built(&k3));
        assert_ne!(built(&created), built(&k3));
        // Without spare space the default is unchanged: K = G.
        let no_spare = LayoutOptions {
            spare_partitions: 0,
            ..old.clone()
        };
        assert_eq!(
            created_record(&no_spare, &[], 9).unwrap().partitions,
            Some(3)
        );
        // S²-RAID10 on 6 members: m - 1 = 2 with spare space.
        let r10 = LayoutOptions {
            name: "s2raid10".into(),
            spare_partitions: 1,
            ..Default::default()
        };
        assert_eq!(created_record(&r10, &[], 6).unwrap().partitions, Some(2));
    }
}
