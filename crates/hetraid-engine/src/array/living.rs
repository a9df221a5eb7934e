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
        match sb.layout.kind().map_err(EngineError::layout)? {
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
            if done > plan.steps() as u64 {
                return Err(EngineError::Layout(format!(
                    "the pending change records {done} moves done of {}",
                    plan.steps()
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
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
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
    /// A member leaving a raidx of varying bundle widths: what its steps
    /// were (`moves` counts them all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shrink: Option<ShrinkSteps>,
}

/// The steps of a remove from a raidx of varying bundle widths.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ShrinkSteps {
    /// Kept chunks copied into the places of chunks cut off the end.
    pub evacuated: u64,
    /// Bundles that lost the member's position (parity computed again).
    pub narrowed: u64,
    /// Bundles dropped whole.
    pub dropped: u64,
    /// Chunks moved (off the member, and to pair free room).
    pub moved: u64,
}

/// A change in progress, for `status`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ChangeProgress {
    pub change: String,
    pub slot: usize,
    pub moves_done: u64,
    pub moves: u64,
    /// Its pace, when the process answering runs it (`moves_per_s`, `eta_s`).
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<super::ChangeRate>,
}

pub(super) fn change_name(c: &Change) -> (&'static str, usize) {
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
                rate: None,
            });
        }
        let pend = sb.raidx_history.as_ref()?.pending?;
        let (_, plan) = table_now(&sb).ok()?;
        let (name, slot) = change_name(&pend.change);
        Some(ChangeProgress {
            change: name.into(),
            slot,
            moves_done: pend.moves_done,
            moves: plan.map_or(0, |p| p.steps() as u64),
            rate: None,
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
        let now = plan.partial(t, pend.moves_done as usize);
        let (mut places, mut parity_at) = (now.places, now.parity_at);
        let st = self.state();
        let usable = |m: usize| {
            m < self.hot.slots.len() && self.present(m) && st.members[m] == MemberState::InSync
        };
        let mut rebuilt = 0u64;
        let mut batches_run = 0u64;
        let labelled = plan
            .shrinking
            .as_ref()
            .map(|s| super::living_shrink::places_of_labels(t, s));
        for batch in plan.batches(t, hetraid_core::limits::CHANGE_BATCH_MOVES_MAX) {
            if (batch.end as u64) <= pend.moves_done {
                continue;
            }
            debug_assert_eq!(batch.start as u64, pend.moves_done.max(batch.start as u64));
            if batches_max.is_some_and(|m| batches_run >= m) {
                return Ok(None);
            }
            use super::living_shrink::{step_kind, StepKind};
            match (step_kind(plan, batch.start), &plan.shrinking, &labelled) {
                (StepKind::Evacuation(i), Some(s), Some(at)) => {
                    self.evacuate(t, s, at, i, &usable)?
                }
                (StepKind::Narrowing, Some(s), _) => {
                    let after = plan.partial(t, batch.end);
                    self.narrow_bundles(&after, s, &usable)?;
                    (places, parity_at) = (after.places, after.parity_at);
                }
                (StepKind::Moves(first), _, _) => {
                    let moves = &plan.moves[first..first + batch.len()];
                    rebuilt += self.run_moves(moves, &mut places, &parity_at, &usable)?;
                }
                _ => unreachable!("evacuations come with a shrinking plan"),
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
        // New bundles, and the chunks bundles gain (variable widths), are
        // zeroed before the table that names them is written: their parity
        // holds as it is.
        let widened: Vec<Vec<(usize, u64)>> = plan.widened.iter().map(|w| vec![w.1]).collect();
        self.zero_added_bundles(&plan.added, chunk, &usable)?;
        self.zero_added_bundles(&widened, chunk, &usable)?;
        let after = plan.finish(t, &p);
        // Every member's table, then the superblock that makes it the truth
        // (while the change is pending, assembly does not check tables).
        write_tables(raw, &sb0, &after.places, &usable)?;
        hist.pending = None;
        hist.changes.push(pend.change);
        // Data per bundle: the widest bundle's, as the layout counts it.
        let layout_before = t
            .layout(&p)
            .map_err(|e| EngineError::Refused(e.to_string()))?;
        let layout_after = after
            .layout(&p)
            .map_err(|e| EngineError::Refused(e.to_string()))?;
        let bundle_bytes = chunk * layout_after.data_per_stripe() as u64;
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
        if let Change::Remove { slot, .. } = pend.change {
            self.retire_removed(slot)?;
        }
        let (mut name, slot) = change_name(&pend.change);
        if name == "grow" && slot < t.caps.len() {
            name = "enlarge";
        }
        Ok(Some(ChangeReport {
            change: name.into(),
            slot,
            moves: plan.steps() as u64,
            rebuilt,
            bundles_before: t.places.len() as u64,
            bundles_after,
            capacity_before: layout_before.capacity_bytes(),
            capacity_after: layout_after.capacity_bytes(),
            seconds: start.elapsed().as_secs_f64(),
            shrink: plan.shrinking.as_ref().map(|s| ShrinkSteps {
                evacuated: s.evacuations.len() as u64,
                narrowed: s.narrowed.len() as u64,
                dropped: s.dropped.len() as u64,
                moved: plan.moves.len() as u64,
            }),
        }))
    }

    /// Copy (or, from a member that is gone, rebuild) each chunk of
    /// `moves` to its new place, `places` following; the members written
    /// are flushed. Returns the chunks rebuilt.
    fn run_moves(
        &self,
        moves: &[hetraid_core::layout::raidx_grow::Move],
        places: &mut [Vec<(usize, u64)>],
        parity_at: &[u8],
        usable: &dyn Fn(usize) -> bool,
    ) -> Result<u64> {
        let chunk = self.superblock().chunk_bytes;
        let level = RaidxParams::of(&self.superblock())?.level;
        let mut buf = AlignedBuf::zeroed(chunk as usize);
        let mut rebuilt = 0;
        let mut targets = std::collections::BTreeSet::new();
        for m in moves {
            let b = m.bundle as usize;
            if usable(m.from.0) {
                self.hot.slots[m.from.0]
                    .read_at(&mut buf, self.data_off() + m.from.1 * chunk)
                    .map_err(|e| io_err(self.hot.slots[m.from.0].as_ref(), e))?;
            } else {
                // Bundle b's P position, by its width (widths vary without c).
                let width = places[b].len();
                let p_at = parity_at
                    .get(b)
                    .map_or_else(|| width - 1 - b % width, |&x| x as usize);
                let roles = hetraid_core::layout::position_roles(level, width, p_at);
                self.rebuild_chunk(&places[b], &roles, m.pos, usable, &mut buf)?;
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
        Ok(rebuilt)
    }

    /// The bundles a grow adds start zeroed (their parity and copies agree).
    fn zero_added_bundles(
        &self,
        added: &[Vec<(usize, u64)>],
        chunk: u64,
        usable: &dyn Fn(usize) -> bool,
    ) -> Result<()> {
        let zero = AlignedBuf::zeroed(chunk as usize);
        let mut zeroed = std::collections::BTreeSet::new();
        for &(m, slot) in added.iter().flatten() {
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
        Ok(())
    }

    /// A removed member that is still here no longer belongs: its
    /// superblock says so (it is not given again).
    fn retire_removed(&self, slot: usize) -> Result<()> {
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
        Ok(())
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

/// Every usable member's bundle table for `places` (before the superblock
/// that makes them the truth).
fn write_tables(
    raw: &[Option<Arc<dyn Member>>],
    sb0: &Superblock,
    places: &[Vec<(usize, u64)>],
    usable: &dyn Fn(usize) -> bool,
) -> Result<()> {
    for (i, m) in raw.iter().enumerate() {
        let Some(m) = m else { continue };
        if !usable(i) {
            continue;
        }
        let size = sb0.roles[i].data_size;
        let entries = crate::bundles::entries_of(places, i, size / sb0.chunk_bytes);
        crate::bundles::write_table(
            m.as_ref(),
            sb0.data_offset + size,
            sb0.uuid,
            i as u32,
            &entries,
        )
        .map_err(|e| io_err(m.as_ref(), e))?;
    }
    Ok(())
}

/// The members by slot, as given (no checksum layer), from their
/// superblocks; members that are not the array's are ignored here
/// (assembly names them).
pub(super) fn raw_by_slot(
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
            return Err(EngineError::Kind(
                hetraid_core::ErrorKind::Foreign,
                format!(
                    "{} already belongs to array {} (slot {}); use --force to overwrite it",
                    new.name(),
                    old.uuid_string(),
                    old.member
                ),
            ));
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

impl Array {}

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
