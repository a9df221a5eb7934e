//! A living RAIDX array (issue 14): members added (`grow --add`) and members
//! removed with re-redundancy (`shrink --member`), executed chunk by chunk
//! from the plans `hetraid_core::layout::raidx_history` makes. The
//! superblock keeps the history; the change in progress records how many of
//! its moves are on the members, made durable after each crash-safe batch
//! (no move of a batch writes a slot the batch reads), so after a kill the
//! batch is run again from its start. Offline: the array is assembled for
//! the change alone (a served array is stopped, changed and served again).

use super::*;
use hetraid_core::layout::raidx_history::{
    plan_change, Change, ChangePlan, History, Params, Pending, Table,
};
use hetraid_core::layout::{PositionRole, RaidXLevel};

/// The RAIDX parameters of a superblock's layout.
pub(crate) struct RaidxParams {
    pub c: usize,
    pub level: RaidXLevel,
    pub weights: Vec<u64>,
    pub chunk: u64,
}

impl RaidxParams {
    pub fn of(sb: &Superblock) -> Result<Self> {
        match sb.layout.kind().map_err(EngineError::Layout)? {
            hetraid_core::layout::LayoutKind::RaidX {
                chunks_per_bundle,
                level,
                weights,
            } => Ok(Self {
                c: chunks_per_bundle,
                level: level.unwrap_or(RaidXLevel::default_for(chunks_per_bundle)),
                weights,
                chunk: sb.chunk_bytes,
            }),
            _ => Err(EngineError::Refused(format!(
                "array {} is {}, not raidx: members are added to it by restriping, which this hetraid does not do yet",
                sb.uuid_string(),
                sb.layout.name
            ))),
        }
    }

    pub fn core(&self) -> Params<'_> {
        Params {
            chunk: self.chunk,
            c: self.c,
            level: Some(self.level),
            weights: &self.weights,
        }
    }
}

/// The history a RAIDX superblock records (arrays written before histories:
/// created over the members as they are, nothing changed since).
pub(crate) fn history_of(sb: &Superblock) -> History {
    sb.raidx_history.clone().unwrap_or_else(|| {
        History::new(
            sb.roles
                .iter()
                .map(|r| r.data_size / sb.chunk_bytes)
                .collect(),
        )
    })
}

/// The bundle table on the members now, and the pending change's plan.
pub(crate) fn table_now(sb: &Superblock) -> Result<(Table, Option<ChangePlan>)> {
    let p = planned(sb)?;
    let done = sb
        .raidx_history
        .as_ref()
        .and_then(|h| h.pending)
        .map_or(0, |x| x.moves_done);
    let now = match &p.plan {
        Some(plan) => {
            if done > plan.moves.len() as u64 {
                return Err(EngineError::Layout(format!(
                    "the pending change records {done} moves done of {}",
                    plan.moves.len()
                )));
            }
            plan.partial(&p.completed, done as usize)
        }
        None => p.completed.clone(),
    };
    Ok((now, p.plan.clone()))
}

/// The table once the completed changes are replayed, and the pending
/// change's plan.
pub(crate) struct Planned {
    pub completed: Table,
    pub plan: Option<ChangePlan>,
}

type PlanKey = ([u8; 16], u64, usize, RaidXLevel, Vec<u64>, History);

/// Replaying a history costs a plan per change; an array changing is
/// assembled again after every batch (served), so the last few replays are
/// kept, keyed by everything they depend on (the moves done excluded).
static PLANS: std::sync::Mutex<Vec<(PlanKey, Arc<Planned>)>> = std::sync::Mutex::new(Vec::new());

pub(crate) fn planned(sb: &Superblock) -> Result<Arc<Planned>> {
    let p = RaidxParams::of(sb)?;
    let mut hist = history_of(sb);
    if let Some(x) = hist.pending.as_mut() {
        x.moves_done = 0;
    }
    let key: PlanKey = (
        sb.uuid,
        p.chunk,
        p.c,
        p.level,
        p.weights.clone(),
        hist.clone(),
    );
    if let Some((_, v)) = PLANS.lock().unwrap().iter().find(|(k, _)| *k == key) {
        return Ok(v.clone());
    }
    let err = |e: hetraid_core::error::LayoutError| EngineError::Layout(e.to_string());
    let completed = hist.completed(&p.core()).map_err(err)?;
    let plan = match hist.pending {
        Some(x) => Some(plan_change(&completed, x.change, &p.core()).map_err(err)?),
        None => None,
    };
    let v = Arc::new(Planned { completed, plan });
    let mut cache = PLANS.lock().unwrap();
    if cache.len() >= 4 {
        cache.remove(0);
    }
    cache.push((key, v.clone()));
    Ok(v)
}

/// A RAIDX array's layout from its history.
pub(crate) fn raidx_layout(sb: &Superblock) -> Result<Box<dyn Layout>> {
    let p = RaidxParams::of(sb)?;
    let (t, _) = table_now(sb)?;
    if t.caps.len() != sb.roles.len() {
        return Err(EngineError::Refused(format!(
            "the superblock's RAIDX history covers {} member slots, its member table {}: the superblock is damaged",
            t.caps.len(),
            sb.roles.len()
        )));
    }
    Ok(Box::new(
        t.layout(&p.core())
            .map_err(|e| EngineError::Layout(e.to_string()))?,
    ))
}

/// What a change did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ChangeReport {
    /// "grow" or "remove".
    pub change: String,
    pub slot: usize,
    pub moves: u64,
    /// Of them, chunks rebuilt from their bundles (the member was gone).
    pub rebuilt: u64,
    pub bundles_before: u64,
    pub bundles_after: u64,
    pub capacity_before: u64,
    pub capacity_after: u64,
    pub seconds: f64,
}

/// A change in progress, for `status`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ChangeProgress {
    pub change: String,
    pub slot: usize,
    pub moves_done: u64,
    pub moves: u64,
}

fn change_name(c: &Change) -> (&'static str, usize) {
    match *c {
        Change::Grow { slot, .. } => ("grow", slot),
        Change::Remove { slot, .. } => ("remove", slot),
    }
}

impl Array {
    /// RAIDX: the change in progress, if any.
    pub fn change_progress(&self) -> Option<ChangeProgress> {
        let sb = self.superblock();
        if let Some(r) = &sb.reshape {
            return Some(ChangeProgress {
                change: "restripe".into(),
                slot: sb.roles.len() - 1,
                moves_done: r.mark_rows,
                moves: super::restripe::layouts(&sb).map_or(0, |(_, n)| n.stripe_count()),
            });
        }
        let pend = sb.raidx_history.as_ref()?.pending?;
        let (_, plan) = table_now(&sb).ok()?;
        let (name, slot) = change_name(&pend.change);
        Some(ChangeProgress {
            change: name.into(),
            slot,
            moves_done: pend.moves_done,
            moves: plan.map_or(0, |p| p.moves.len() as u64),
        })
    }

    /// Run the pending change to its end: the moves batch by batch (each
    /// batch's end durable in the superblock), the added bundles zeroed,
    /// every member's bundle table rewritten, the change recorded done.
    /// `raw` are the members by slot without the checksum layer (the bundle
    /// tables live past it). The array must be used for nothing else
    /// meanwhile, and is stale afterwards: close it and assemble again.
    /// `batches_max` stops after that many batches (tests: a kill at a
    /// batch boundary).
    pub fn run_change(
        &self,
        raw: &[Option<Arc<dyn Member>>],
        batches_max: Option<u64>,
    ) -> Result<Option<ChangeReport>> {
        let start = std::time::Instant::now();
        let sb0 = self.superblock();
        let params = RaidxParams::of(&sb0)?;
        let p = params.core();
        let mut hist = history_of(&sb0);
        let Some(pend) = hist.pending else {
            return Ok(None);
        };
        let planned = planned(&sb0)?;
        let t = &planned.completed;
        let Some(plan) = planned.plan.as_ref() else {
            return Ok(None);
        };
        let chunk = sb0.chunk_bytes;
        let mut places = plan.partial(t, pend.moves_done as usize).places;
        let parity_at = t.parity_at.clone();
        let p_at = |b: usize| -> usize {
            parity_at
                .get(b)
                .map_or(params.c - 1 - b % params.c, |&x| x as usize)
        };
        let st = self.state();
        let usable = |m: usize| {
            m < self.hot.slots.len() && self.present(m) && st.members[m] == MemberState::InSync
        };
        let mut rebuilt = 0u64;
        let mut batches_run = 0u64;
        let mut buf = AlignedBuf::zeroed(chunk as usize);
        for batch in plan.batches(t, hetraid_core::limits::CHANGE_BATCH_MOVES_MAX) {
            if (batch.end as u64) <= pend.moves_done {
                continue;
            }
            debug_assert_eq!(batch.start as u64, pend.moves_done.max(batch.start as u64));
            if batches_max.is_some_and(|m| batches_run >= m) {
                return Ok(None);
            }
            let mut targets = std::collections::BTreeSet::new();
            for m in &plan.moves[batch.clone()] {
                let b = m.bundle as usize;
                if usable(m.from.0) {
                    self.hot.slots[m.from.0]
                        .read_at(&mut buf, self.data_off() + m.from.1 * chunk)
                        .map_err(|e| io_err(self.hot.slots[m.from.0].as_ref(), e))?;
                } else {
                    let roles =
                        hetraid_core::layout::position_roles(params.level, params.c, p_at(b));
                    self.rebuild_chunk(&places[b], &roles, m.pos, &usable, &mut buf)?;
                    rebuilt += 1;
                }
                let to = m.to.0;
                if !usable(to) {
                    return Err(EngineError::Refused(format!(
                        "slot {to} takes a chunk but is not in sync; give all members"
                    )));
                }
                self.hot.slots[to]
                    .write_at(&buf, self.data_off() + m.to.1 * chunk)
                    .map_err(|e| io_err(self.hot.slots[to].as_ref(), e))?;
                targets.insert(to);
                places[b][m.pos] = m.to;
            }
            for &to in &targets {
                self.hot.slots[to]
                    .flush()
                    .map_err(|e| io_err(self.hot.slots[to].as_ref(), e))?;
            }
            hist.pending = Some(Pending {
                change: pend.change,
                moves_done: batch.end as u64,
            });
            let mut sb = self.sb.lock().unwrap();
            sb.raidx_history = Some(hist.clone());
            sb.events += 1;
            self.persist(&mut sb)?;
            batches_run += 1;
        }
        // The added bundles start zeroed (their parity and copies agree).
        let zero = AlignedBuf::zeroed(chunk as usize);
        let mut zeroed = std::collections::BTreeSet::new();
        for &(m, slot) in plan.added.iter().flatten() {
            if !usable(m) {
                return Err(EngineError::Refused(format!(
                    "slot {m} takes a new bundle but is not in sync; give all members"
                )));
            }
            self.hot.slots[m]
                .write_at(&zero, self.data_off() + slot * chunk)
                .map_err(|e| io_err(self.hot.slots[m].as_ref(), e))?;
            zeroed.insert(m);
        }
        for &m in &zeroed {
            self.hot.slots[m]
                .flush()
                .map_err(|e| io_err(self.hot.slots[m].as_ref(), e))?;
        }
        let after = plan.finish(t, &p);
        // Every member's table, then the superblock that makes it the truth
        // (while the change is pending, assembly does not check tables).
        for (i, m) in raw.iter().enumerate() {
            let Some(m) = m else { continue };
            if !usable(i) {
                continue;
            }
            let size = sb0.roles[i].data_size;
            let entries = crate::bundles::entries_of(&after.places, i, size / chunk);
            crate::bundles::write_table(
                m.as_ref(),
                sb0.data_offset + size,
                sb0.uuid,
                i as u32,
                &entries,
            )
            .map_err(|e| io_err(m.as_ref(), e))?;
        }
        hist.pending = None;
        hist.changes.push(pend.change);
        let k = params.c
            - match params.level {
                RaidXLevel::X0 => 0,
                RaidXLevel::X1 => params.c - 1,
                RaidXLevel::X5 => 1,
                RaidXLevel::X6 => 2,
                RaidXLevel::X10 => params.c / 2,
            };
        let bundle_bytes = chunk * k as u64;
        let bundles_after = after.places.len() as u64;
        {
            let mut sb = self.sb.lock().unwrap();
            sb.raidx_history = Some(hist);
            if let Change::Remove { slot, .. } = pend.change {
                sb.roles[slot].state = RoleState::Removed;
            }
            // The bitmap covers the new bundle count (the array is clean).
            let spb = Bitmap::stripes_per_bit(bundles_after, bundle_bytes);
            sb.bitmap_stripes = (spb as u32).max(sb.bitmap_stripes);
            sb.events += 1;
            self.persist(&mut sb)?;
        }
        // A removed member that is still here no longer belongs: its
        // superblock says so (it is not given again).
        if let Change::Remove { slot, .. } = pend.change {
            if self.present(slot) {
                let mut sb = self.superblock();
                sb.member = slot as u32;
                sb.roles[slot].state = RoleState::Removed;
                let mut b = AlignedBuf::zeroed(SB_SIZE);
                b.copy_from_slice(&sb.encode());
                let m = &self.hot.slots[slot];
                m.write_at(&b, 0)
                    .and_then(|_| m.flush())
                    .map_err(|e| io_err(m.as_ref(), e))?;
            }
        }
        let (mut name, slot) = change_name(&pend.change);
        if name == "grow" && slot < t.caps.len() {
            name = "enlarge";
        }
        Ok(Some(ChangeReport {
            change: name.into(),
            slot,
            moves: plan.moves.len() as u64,
            rebuilt,
            bundles_before: t.places.len() as u64,
            bundles_after,
            capacity_before: t.places.len() as u64 * bundle_bytes,
            capacity_after: bundles_after * bundle_bytes,
            seconds: start.elapsed().as_secs_f64(),
        }))
    }

    /// The chunk at position `lost` of a bundle at `places`, from the rest
    /// of it (members that are `usable`).
    fn rebuild_chunk(
        &self,
        places: &[(usize, u64)],
        roles: &[PositionRole],
        lost: usize,
        usable: &dyn Fn(usize) -> bool,
        out: &mut [u8],
    ) -> Result<()> {
        let chunk = out.len();
        let mut bufs: Vec<AlignedBuf> = Vec::with_capacity(places.len());
        let mut missing = Vec::new();
        for (i, &(m, slot)) in places.iter().enumerate() {
            let mut b = AlignedBuf::zeroed(chunk);
            if i != lost && usable(m) {
                self.hot.slots[m]
                    .read_at(&mut b, self.data_off() + slot * chunk as u64)
                    .map_err(|e| io_err(self.hot.slots[m].as_ref(), e))?;
            } else {
                missing.push(i);
            }
            bufs.push(b);
        }
        let gone = || {
            EngineError::Refused(format!(
                "a chunk of bundle places {places:?} cannot be rebuilt: positions {missing:?} are all unreadable"
            ))
        };
        let want = roles[lost];
        // Copies: any readable position holding the same data.
        let data_of = |r: PositionRole| match r {
            PositionRole::Data(i) | PositionRole::Copy(i) => Some(i),
            _ => None,
        };
        if roles.iter().all(|r| data_of(*r).is_some()) {
            let i = data_of(want).expect("a data role");
            let src = (0..places.len())
                .find(|&j| !missing.contains(&j) && data_of(roles[j]) == Some(i))
                .ok_or_else(gone)?;
            out.copy_from_slice(&bufs[src]);
            return Ok(());
        }
        // Parity: the row as data blocks in order, then P (and Q).
        let k = roles
            .iter()
            .filter(|r| matches!(r, PositionRole::Data(_)))
            .count();
        let row_index = |r: PositionRole| match r {
            PositionRole::Data(i) => i,
            PositionRole::P => k,
            PositionRole::Q => k + 1,
            PositionRole::Copy(_) => unreachable!("parity bundles keep no copies"),
        };
        let mut order: Vec<usize> = (0..places.len()).collect();
        order.sort_by_key(|&i| row_index(roles[i]));
        let miss: Vec<usize> = missing.iter().map(|&i| row_index(roles[i])).collect();
        let mut row: Vec<&mut [u8]> = Vec::with_capacity(places.len());
        let mut taken: Vec<Option<AlignedBuf>> = bufs.into_iter().map(Some).collect();
        let mut owned: Vec<AlignedBuf> = order.iter().map(|&i| taken[i].take().unwrap()).collect();
        for b in owned.iter_mut() {
            row.push(&mut b[..]);
        }
        hetraid_parity::recover(&mut row, k, &miss).map_err(|_| gone())?;
        out.copy_from_slice(row[row_index(want)]);
        Ok(())
    }
}

/// The members by slot, as given (no checksum layer), from their
/// superblocks; members that are not the array's are ignored here
/// (assembly names them).
fn raw_by_slot(
    given: &[Arc<dyn Member>],
    uuid: [u8; 16],
    n: usize,
) -> Vec<Option<Arc<dyn Member>>> {
    let mut out = vec![None; n];
    for m in given {
        if let Ok(Ok(sb)) = read_sb(m.as_ref()) {
            if sb.uuid == uuid && (sb.member as usize) < n && out[sb.member as usize].is_none() {
                out[sb.member as usize] = Some(m.clone());
            }
        }
    }
    out
}

/// Record `change` pending on every member of `a` (no move done yet), with
/// slot `resize.0`'s data area now `resize.1` bytes when given.
fn record_pending(a: &Array, change: Change, resize: Option<(usize, u64)>) -> Result<()> {
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

/// A device about to join the array: not one of its members, and not
/// another array's member unless `force`.
pub(crate) fn check_new_member(
    given: &[Arc<dyn Member>],
    new: &dyn Member,
    force: bool,
) -> Result<()> {
    if given.iter().any(|g| g.name() == new.name()) {
        return Err(EngineError::Refused(format!(
            "{} is already a member of the array; give a new device to add",
            new.name()
        )));
    }
    if !force {
        if let Ok(old) = read_sb(new)? {
            // A device that left this array (its slot removed by a shrink,
            // or taken by another device) joins as a new member: nothing of
            // it is in use. The caller has checked that no slot holds it.
            let ours = given
                .first()
                .map(|g| read_sb(g.as_ref()))
                .transpose()?
                .and_then(|r| r.ok())
                .is_some_and(|sb| sb.uuid == old.uuid);
            if ours {
                return Ok(());
            }
            return Err(EngineError::Refused(format!(
                "{} already belongs to array {} (slot {}); use --force to overwrite it",
                new.name(),
                old.uuid_string(),
                old.member
            )));
        }
    }
    Ok(())
}

/// Write superblock `sb` as slot `slot`'s on `m`, and flush.
pub(crate) fn write_superblock(m: &dyn Member, sb: &Superblock, slot: usize) -> Result<()> {
    let mut s = sb.clone();
    s.member = slot as u32;
    let mut b = AlignedBuf::zeroed(SB_SIZE);
    b.copy_from_slice(&s.encode());
    m.write_at(&b, 0)
        .and_then(|_| m.flush())
        .map_err(|e| io_err(m, e))
}

/// Refuse a change on an array it cannot run on.
fn check_changeable(a: &Array, sb: &Superblock) -> Result<()> {
    RaidxParams::of(sb)?;
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
            return Err(EngineError::Refused(format!(
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
        if !params.weights.is_empty() {
            next.layout.weights.push(u64::from(kind != MemberKind::Hdd));
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
            let bundle_bytes = sb.chunk_bytes * a.layout().data_per_stripe() as u64;
            if s == slot && keep_bundles * bundle_bytes == size {
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

/// A member whose superblock lacks the slot a grow adds, one event behind
/// the freshest, which records that grow pending with no move done, was
/// cut off by a crash while the new slot was recorded: it is the same
/// array, and takes the freshest's superblock.
pub(crate) fn upgrade_for_grow(sbs: &mut [Superblock], fresh: &Superblock) {
    let raidx = match fresh.raidx_history.as_ref().and_then(|h| h.pending) {
        Some(Pending {
            change: Change::Grow { slot, .. },
            moves_done: 0,
        }) => Some(slot),
        _ => None,
    };
    // A restripe gaining a member, no row written yet.
    let restripe = fresh
        .reshape
        .as_ref()
        .filter(|r| r.mark_rows == 0 && r.backup_row.is_none())
        .map(|r| r.old_members);
    let Some(slot) = raidx.or(restripe) else {
        return;
    };
    for sb in sbs.iter_mut() {
        if sb.uuid == fresh.uuid
            && sb.roles.len() == slot
            && fresh.roles.len() == slot + 1
            && sb.events + 1 == fresh.events
        {
            let member = sb.member;
            *sb = fresh.clone();
            sb.member = member;
        }
    }
}

/// A shrink cuts what lies past `size` off the array: refused without
/// `force` when data was written there (the last byte that is not zero: a
/// filesystem shrunk first leaves its old blocks, so saying --force is the
/// operator's word that they are not needed) or when it would halve the
/// array (a size typed wrong, `128K` for `128G`).
fn shrink_guard(a: &Array, size: u64) -> Result<()> {
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
