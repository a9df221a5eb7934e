//! Starting a grow or a shrink: what is checked, and the change recorded in
//! the superblocks before the first chunk moves (so a kill at any point
//! resumes it); `living.rs` then moves the chunks in batches.

use super::living::*;
use super::*;
use hetraid_core::layout::raidx_history::{plan_change, Change, Pending};
use hetraid_core::layout::RaidXLevel;

impl Array {
    /// `hetraid grow --add`: member `new` (of kind `kind`) joins a RAIDX
    /// array in a new slot; chunks move onto it so the array holds the
    /// most bundles the members allow; the capacity grows by the bundles
    /// added. Offline: `given` are the array's members, not assembled
    /// elsewhere. Returns the change's report.
    pub fn grow_add(
        given: Vec<Arc<dyn Member>>,
        new: Arc<dyn Member>,
        kind: MemberKind,
        force: bool,
    ) -> Result<ChangeReport> {
        Self::grow(given, Some((new, kind)), None, force)
    }

    /// Grow: a member added (`new`), on RAIDX by moving chunks, on
    /// RAID5/6/RAIDH by restriping; or RAIDH's parity `weights` changed
    /// (with or without a member added). Offline; returns the report.
    pub fn grow(
        given: Vec<Arc<dyn Member>>,
        new: Option<(Arc<dyn Member>, MemberKind)>,
        weights: Option<Vec<u64>>,
        force: bool,
    ) -> Result<ChangeReport> {
        let all = Self::prepare_grow(given, new, weights, force)?;
        Self::resume_change(all, None)?.ok_or_else(|| {
            EngineError::Refused("the grow was recorded but did not run (a hetraid bug)".into())
        })
    }

    /// The first half of [`Array::grow_add`]: the new slot recorded on
    /// every member with the grow pending (no chunk moved yet). Returns the
    /// members, the new one last. Run again after a crash (the new member
    /// already holds its slot, the grow pending), it records nothing.
    pub fn prepare_grow(
        given: Vec<Arc<dyn Member>>,
        new: Option<(Arc<dyn Member>, MemberKind)>,
        weights: Option<Vec<u64>>,
        force: bool,
    ) -> Result<Vec<Arc<dyn Member>>> {
        Self::refuse_spares(&given)?;
        let first = given
            .first()
            .ok_or_else(|| EngineError::Refused("give the array's members".into()))?;
        let raidx = matches!(read_sb(first.as_ref())?, Ok(s) if s.layout.name == "raidx");
        if !raidx {
            return Self::prepare_restripe(given, new, weights, force);
        }
        let Some((new, kind)) = new else {
            return Err(EngineError::Refused(
                "give --add NEW: a raidx array grows by a member".into(),
            ));
        };
        if weights.is_some() {
            return Err(EngineError::Refused(
                "--weights on grow applies to raidh; a raidx array's parity follows the weights it was created with".into(),
            ));
        }
        // Run again after a crash: the new member already holds the slot.
        if let Ok(old) = read_sb(new.as_ref())? {
            let first = given.first().map(|g| read_sb(g.as_ref())).transpose()?;
            if first
                .and_then(|f| f.ok())
                .is_some_and(|f| f.uuid == old.uuid)
            {
                let mut all = given.clone();
                all.push(new.clone());
                let a = Self::assemble(all.clone())?;
                let pending = a.change_progress().is_some();
                let sb = a.superblock();
                // Its slot still holds it (a slot a shrink removed, or one
                // another device took, does not: it joins as a new member).
                let holds = sb.roles.get(old.member as usize).is_some_and(|r| {
                    r.state != RoleState::Removed
                        && (r.device == 0 || r.device == old.roles[old.member as usize].device)
                });
                a.close()?;
                if pending {
                    return Ok(all);
                }
                if holds {
                    return Err(EngineError::Refused(format!(
                        "{} is already a member of this array (slot {}) and no grow is in progress",
                        new.name(),
                        old.member
                    )));
                }
            }
        }
        let a = Self::assemble(given.clone())?;
        let sb = a.superblock();
        check_changeable(&a, &sb)?;
        if let Some(i) = (0..sb.roles.len()).find(|&i| {
            sb.roles[i].state != RoleState::Removed
                && (!a.present(i) || a.state().members[i] != MemberState::InSync)
        }) {
            return Err(EngineError::Refused(format!(
                "slot {i} is missing, failed or rebuilding: a member is added to a whole array (replace and rebuild first)"
            )));
        }
        let n = sb.roles.len();
        if n >= crate::format::MAX_MEMBERS {
            return Err(EngineError::Refused(format!(
                "the array has {n} member slots, the most it can have"
            )));
        }
        check_new_member(&given, new.as_ref(), force)?;
        let area = sb.data_offset - DATA_OFFSET;
        let mut data_size =
            lifecycle::data_area(new.len().saturating_sub(area), sb.chunk_bytes, 0, true);
        if sb.checksums {
            // The checksum area is the array's: it covers so much data.
            let covered = area / 4 * 4096 / sb.chunk_bytes * sb.chunk_bytes;
            data_size = data_size.min(covered);
        }
        if data_size < sb.chunk_bytes {
            return Err(EngineError::Kind(
                hetraid_core::ErrorKind::TooSmall,
                format!(
                "{} is {} bytes: too small to hold a chunk of {} past the array's {} bytes of metadata",
                new.name(),
                new.len(),
                sb.chunk_bytes,
                sb.data_offset
            )));
        }
        let params = RaidxParams::of(&sb)?;
        let (t, _) = table_now(&sb)?;
        let change = Change::Grow {
            slot: n,
            chunks: data_size / sb.chunk_bytes,
        };
        plan_change(&t, change, &params.core()).map_err(|e| EngineError::Refused(e.to_string()))?;
        a.close()?;
        let sb = a.superblock();
        drop(a);
        // The new slot: the new member's metadata first, then the others'
        // superblocks (assembly takes an old member's superblock that lacks
        // the slot for the freshest's, see `upgrade_for_grow`).
        let mut next = sb.clone();
        next.roles.push(MemberRole {
            state: RoleState::Active,
            kind,
            data_size,
            rebuild_checkpoint: 0,
            device: new_device_id(),
            resync: false,
        });
        let mut hist = history_of(&sb);
        hist.pending = Some(Pending {
            change,
            moves_done: 0,
        });
        next.raidx_history = Some(hist);
        if let Some(w) = next.layout.weights.as_mut() {
            w.push(u64::from(kind != MemberKind::Hdd));
        }
        next.events += 1;
        next.clean = true;
        let io = |m: &Arc<dyn Member>, e| io_err(m.as_ref(), e);
        let zero = AlignedBuf::zeroed((sb.data_offset - BITMAP_OFFSET) as usize);
        new.write_at(&zero, BITMAP_OFFSET)
            .map_err(|e| io(&new, e))?;
        crate::bundles::write_table(
            new.as_ref(),
            sb.data_offset + data_size,
            sb.uuid,
            n as u32,
            &vec![None; (data_size / sb.chunk_bytes) as usize],
        )
        .map_err(|e| io(&new, e))?;
        write_superblock(new.as_ref(), &next, n)?;
        for (slot, m) in raw_by_slot(&given, sb.uuid, n).iter().enumerate() {
            if let Some(m) = m {
                write_superblock(m.as_ref(), &next, slot)?;
            }
        }
        let mut all = given;
        all.push(new);
        Ok(all)
    }

    /// `hetraid shrink --member SLOT --size BYTES`: the array is shrunk to
    /// `size` bytes (the user has shrunk what sits above first), and the
    /// chunks of slot `slot` — a member failed, missing, or present and
    /// leaving — are re-placed into free slots of the others (rebuilt from
    /// their bundles when the member is gone), so the array is fully
    /// redundant again before any replacement. Refused, saying the largest
    /// size, when the others cannot hold `size`.
    pub fn shrink_remove(
        given: Vec<Arc<dyn Member>>,
        slot: usize,
        size: u64,
        force: bool,
    ) -> Result<ChangeReport> {
        Self::prepare_shrink(given.clone(), slot, size, force)?;
        Self::resume_change(given, None)?.ok_or_else(|| {
            EngineError::Refused("the shrink was recorded but did not run (a hetraid bug)".into())
        })
    }

    /// `grow --size max` on RAIDX: the first member whose device has room
    /// for more chunk slots than its slot uses (one replaced by a larger
    /// one) gets them, recorded as a pending grow of that slot (chunks then
    /// move onto it as onto a new member). `None`: every member is used
    /// whole. Run it until `None`.
    pub fn prepare_enlarge(given: Vec<Arc<dyn Member>>) -> Result<Option<usize>> {
        Self::refuse_spares(&given)?;
        let a = Self::assemble(given.clone())?;
        let sb = a.superblock();
        if sb.layout.name != "raidx" {
            return Err(EngineError::Refused(format!(
                "--size max applies to raidx, whose chunks move onto the room a larger member brings; a {} array cannot grow its members yet",
                sb.layout.name
            )));
        }
        // Run again after a crash: the change in progress is finished first.
        if let Some(p) = a.change_progress() {
            a.close()?;
            return Ok(Some(p.slot));
        }
        check_changeable(&a, &sb)?;
        let (t, _) = table_now(&sb)?;
        let area = sb.data_offset - DATA_OFFSET;
        let raw = raw_by_slot(&given, sb.uuid, sb.roles.len());
        let st = a.state();
        for (i, m) in raw.iter().enumerate() {
            let Some(m) = m else { continue };
            if sb.roles[i].state != RoleState::Active || st.members[i] != MemberState::InSync {
                continue;
            }
            let mut size =
                lifecycle::data_area(m.len().saturating_sub(area), sb.chunk_bytes, 0, true);
            if sb.checksums {
                size = size.min(area / 4 * 4096 / sb.chunk_bytes * sb.chunk_bytes);
            }
            let chunks = size / sb.chunk_bytes;
            if chunks <= t.caps[i] {
                continue;
            }
            let change = Change::Grow { slot: i, chunks };
            let params = RaidxParams::of(&sb)?;
            plan_change(&t, change, &params.core())
                .map_err(|e| EngineError::Refused(e.to_string()))?;
            a.close()?;
            record_pending(&a, change, Some((i, size)))?;
            return Ok(Some(i));
        }
        a.close()?;
        Ok(None)
    }

    /// The first half of [`Array::shrink_remove`]: the remove recorded
    /// pending (no chunk moved yet); nothing when the same remove is
    /// pending already (run again after a crash).
    pub fn prepare_shrink(
        given: Vec<Arc<dyn Member>>,
        slot: usize,
        size: u64,
        force: bool,
    ) -> Result<()> {
        Self::refuse_spares(&given)?;
        let a = Self::assemble(given.clone())?;
        let sb = a.superblock();
        // Run again after a crash: the same remove resumes.
        if let Some(Pending {
            change:
                Change::Remove {
                    slot: s,
                    keep_bundles,
                },
            ..
        }) = sb.raidx_history.as_ref().and_then(|h| h.pending)
        {
            // What `keep_bundles` counts: bundles, or chunks (varying widths).
            let unit = match RaidxParams::of(&sb)?.c {
                0 => sb.chunk_bytes,
                _ => sb.chunk_bytes * a.layout().data_per_stripe() as u64,
            };
            if s == slot && keep_bundles * unit == size {
                return a.close();
            }
        }
        check_changeable(&a, &sb)?;
        let params = RaidxParams::of(&sb)?;
        let n = sb.roles.len();
        if slot >= n {
            return Err(EngineError::Refused(format!(
                "slot {slot} is not a member slot of the array (it has slots 0 to {})",
                n - 1
            )));
        }
        if sb.roles[slot].state == RoleState::Removed {
            return Err(EngineError::Refused(format!(
                "slot {slot} is already removed: the array holds {} bytes on the other members",
                a.capacity()
            )));
        }
        let st = a.state();
        let whole = |i: usize| a.present(i) && st.members[i] == MemberState::InSync;
        if let Some(i) =
            (0..n).find(|&i| i != slot && sb.roles[i].state != RoleState::Removed && !whole(i))
        {
            return Err(EngineError::Refused(format!(
                "slot {i} is missing, failed or rebuilding too: the chunks of slot {slot} are re-placed on whole members only"
            )));
        }
        if params.level == RaidXLevel::X0 && !whole(slot) {
            return Err(EngineError::Refused(format!(
                "RAIDX0 keeps no redundancy: the chunks of slot {slot} are gone with its member and cannot be re-placed"
            )));
        }
        if params.c == 0 {
            if !whole(slot) {
                return Err(EngineError::Refused(format!(
                    "slot {slot} is missing or not in sync: a raidx of varying bundle widths moves chunks off a leaving member and evacuates others past the new end, reading it all; give its member, or replace it first (hetraid replace)"
                )));
            }
            return prepare_variable_shrink(a, &sb, &params, slot, size, force);
        }
        let data_per = a.layout().data_per_stripe() as u64;
        let bundle_bytes = sb.chunk_bytes * data_per;
        let (t, _) = table_now(&sb)?;
        let mut caps = t.caps.clone();
        caps[slot] = 0;
        let most = hetraid_core::layout::max_bundles(&caps, params.c).min(t.places.len() as u64);
        if !size.is_multiple_of(bundle_bytes) || size > a.capacity() {
            return Err(EngineError::Refused(format!(
                "--size {size} is not a whole number of bundles of {bundle_bytes} bytes up to the array's {} bytes; the survivors hold at most {} bytes",
                a.capacity(),
                most * bundle_bytes
            )));
        }
        if most == 0 {
            return Err(EngineError::Refused(format!(
                "without slot {slot} the other members cannot hold a single bundle of {} chunks on distinct members; add a member first (hetraid grow --add), then remove this one",
                params.c
            )));
        }
        let keep = size / bundle_bytes;
        if keep == 0 {
            return Err(EngineError::Refused(
                "--size 0 would leave an empty array; give the size the filesystem above was shrunk to".into(),
            ));
        }
        if keep > most {
            return Err(EngineError::Refused(format!(
                "the other members can hold {} bytes of the array's {}, not {size}: shrink the filesystem (or whatever sits on the array) to at most {} bytes, then give --size {}",
                most * bundle_bytes,
                a.capacity(),
                most * bundle_bytes,
                most * bundle_bytes
            )));
        }
        let change = Change::Remove {
            slot,
            keep_bundles: keep,
        };
        plan_change(&t, change, &params.core()).map_err(|e| EngineError::Refused(e.to_string()))?;
        if !force {
            shrink_guard(&a, size)?;
        }
        a.close()?;
        record_pending(&a, change, None)?;
        a.close()
    }

    /// Assemble `given` and run the change in progress to its end (`None`:
    /// nothing was pending, or `batches_max` stopped it).
    pub fn resume_change(
        given: Vec<Arc<dyn Member>>,
        batches_max: Option<u64>,
    ) -> Result<Option<ChangeReport>> {
        let a = Self::assemble(given.clone())?;
        let sb = a.superblock();
        let raw = raw_by_slot(&given, sb.uuid, sb.roles.len());
        let r = if sb.reshape.is_some() {
            a.run_restripe(batches_max)?
        } else {
            a.run_change(&raw, batches_max)?
        };
        a.close()?;
        // The change's end is an event, kept by the array as it is now.
        if let Some(rep) = &r {
            drop(a);
            let b = Self::assemble(given)?;
            b.record(
                crate::annex::EventKind::ChangeFinished,
                Some(rep.slot),
                [rep.moves, rep.capacity_before, rep.capacity_after],
                &format!("{} of slot {}", rep.change, rep.slot),
            );
            b.close()?;
        }
        Ok(r)
    }
}

/// [`Array::prepare_shrink`] of a raidx whose bundle widths vary: `size`
/// (whole chunks) must fit what the plan keeps.
fn prepare_variable_shrink(
    a: Array,
    sb: &Superblock,
    params: &RaidxParams,
    slot: usize,
    size: u64,
    force: bool,
) -> Result<()> {
    let chunk = sb.chunk_bytes;
    let (t, _) = table_now(sb)?;
    let change = Change::Remove {
        slot,
        keep_bundles: size / chunk,
    };
    let plan =
        plan_change(&t, change, &params.core()).map_err(|e| EngineError::Refused(e.to_string()))?;
    let kept = plan.shrinking.as_ref().map_or(0, |s| s.kept) * chunk;
    let after = plan
        .finish(&t, &params.core())
        .layout(&params.core())
        .map_err(|e| EngineError::Refused(e.to_string()))?
        .capacity_bytes();
    if size == 0 || !size.is_multiple_of(chunk) || size > kept {
        return Err(EngineError::Refused(format!(
            "--size {size} is not a whole number of {chunk}-byte chunks from 1 to the {kept} bytes the other members keep of the array's {} (it holds {after} bytes afterwards): shrink the filesystem (or whatever sits on the array) to at most {kept} bytes, then give --size {kept}",
            a.capacity()
        )));
    }
    if !force {
        shrink_guard(&a, size)?;
    }
    a.close()?;
    record_pending(&a, change, None)?;
    a.close()
}

/// Record `change` pending on every member of `a` (no move done yet), with
/// slot `resize.0`'s data area now `resize.1` bytes when given.
pub(super) fn record_pending(
    a: &Array,
    change: Change,
    resize: Option<(usize, u64)>,
) -> Result<()> {
    let mut sb = a.sb.lock().unwrap();
    let mut hist = history_of(&sb);
    hist.pending = Some(Pending {
        change,
        moves_done: 0,
    });
    sb.raidx_history = Some(hist);
    if let Some((slot, size)) = resize {
        sb.roles[slot].data_size = size;
    }
    sb.events += 1;
    a.persist(&mut sb)
}

/// Refuse a change on an array it cannot run on.
pub(super) fn check_changeable(a: &Array, sb: &Superblock) -> Result<()> {
    if !sb.bundle_table {
        return Err(EngineError::Refused(
            "this RAIDX array was created before members kept bundle tables; it cannot change its members (create it again with this hetraid)".into(),
        ));
    }
    if let Some(p) = a.change_progress() {
        return Err(EngineError::Refused(format!(
            "a {} of slot {} is in progress ({} of {} chunk moves done): finish it first with hetraid grow MEMBERS... (no --add), the members of the slots being changed among them",
            p.change, p.slot, p.moves_done, p.moves
        )));
    }
    if history_of(sb).changes.len() >= crate::format::HISTORY_MAX {
        return Err(EngineError::Refused(format!(
            "the array has changed its members {} times, as often as its superblock records; create a new array to change it again",
            crate::format::HISTORY_MAX
        )));
    }
    Ok(())
}

/// A shrink cuts what lies past `size` off the array: refused without
/// `force` when data was written there (the last byte that is not zero: a
/// filesystem shrunk first leaves its old blocks, so saying --force is the
/// operator's word that they are not needed) or when it would halve the
/// array (a size typed wrong, `128K` for `128G`).
pub(super) fn shrink_guard(a: &Array, size: u64) -> Result<()> {
    let cap = a.capacity();
    let cut = cap - size;
    if size < cap / 2 {
        return Err(EngineError::Refused(format!(
            "shrinking to {size} bytes cuts {cut} of the array's {cap} bytes, more than half: check --size (a filesystem on the array must be shrunk first), then say --force"
        )));
    }
    // The last written byte, scanned from the end back a MiB at a time.
    let step = 1u64 << 20;
    let mut buf = vec![0u8; step as usize];
    let mut end = cap;
    // Bounded: each round moves `end` back by up to a MiB, down to `size`.
    while end > size {
        let from = end.saturating_sub(step).max(size);
        let b = &mut buf[..(end - from) as usize];
        a.read(from, b)?;
        if let Some(k) = b.iter().rposition(|&x| x != 0) {
            let last = from + k as u64;
            return Err(EngineError::Refused(format!(
                "shrinking to {size} bytes makes {cut} bytes unreachable, and data was written there (the last byte that is not zero is at offset {last}, {} bytes past the new end): shrink what sits on the array first, then say --force",
                last + 1 - size
            )));
        }
        end = from;
    }
    Ok(())
}
