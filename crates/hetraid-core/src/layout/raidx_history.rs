//! A living RAIDX array's bundle table as a history (issue 14): the
//! allocator's table over the members it was created with, then every
//! change since — a member added or enlarged ([`Change::Grow`], planned by
//! [`super::raidx_grow::plan_grow`]), a member lost or removed with the
//! array shrunk to what the others hold ([`Change::Remove`], planned by
//! [`super::raidx_grow::plan_remove`]) — and at most one change in
//! progress, of which the first `moves_done` chunk moves are on the members.
//! The plans are deterministic, so the superblock stores the history (a few
//! bytes a change) and every assembly recomputes the same table; the bundle
//! tables the members keep are checked against it.
//!
//! Crash safety of a change (the engine's part, decided here): moves run in
//! [`ChangePlan::batches`]; no move of a batch writes a slot another move of
//! the same batch reads, so a batch cut short by a crash is simply run again
//! from its first move, and `moves_done` is made durable after each batch.
//!
//! A table whose bundle widths vary (issue 41) grows by
//! `raidx_widths::plan_grow` and loses a member by
//! `raidx_widths::plan_remove` ([`Shrinking`]): its steps are evacuations
//! (a kept logical chunk copied into the place of one cut off the end, that
//! bundle's parity computed again), one narrowing step (the bundles that
//! lost a position get parity for their new roles; dropped bundles go),
//! then moves; `moves_done` counts them all. From the first shrink on, the
//! table keeps every position's logical chunk (`Table::labels`). There
//! `Change::Remove::keep_bundles` is the size kept in chunks.

use super::raidx::{RaidX, RaidXLevel};
use super::raidx_grow::{plan_grow, plan_remove, Move, Place};
use crate::error::LayoutError;

/// One change of the member set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Slot `slot` (an existing one, or the next new one) now has `chunks`
    /// chunk slots (at least what it had).
    Grow { slot: usize, chunks: u64 },
    /// Slot `slot` is emptied: its chunks go to free slots of the others,
    /// and the array keeps its first `keep_bundles` bundles.
    Remove { slot: usize, keep_bundles: u64 },
}

/// A change in progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pending {
    pub change: Change,
    /// Moves of its plan already on the members (a batch boundary).
    pub moves_done: u64,
}

/// The table's history, as the superblock keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct History {
    /// Chunk slots of each member at create.
    pub initial: Vec<u64>,
    pub changes: Vec<Change>,
    pub pending: Option<Pending>,
}

/// A bundle table with what it was made over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    /// Per bundle, its chunks' places in position order.
    pub places: Vec<Vec<Place>>,
    /// Chunk slots per member slot (0: removed).
    pub caps: Vec<u64>,
    /// RAIDX5/6 with weights: each bundle's P position (empty: rotation).
    pub parity_at: Vec<u8>,
    /// Variable widths: data chunks bundles gained after they were placed,
    /// in logical order (`RaidX::with_widenings`).
    pub widened: Vec<super::raidx::Widening>,
    /// Variable widths after a member left: each position's logical chunk
    /// (`RaidX::with_labels`; empty: the order the bundles and widenings
    /// give).
    pub labels: Vec<Vec<u64>>,
}

/// What one change does to a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangePlan {
    /// Bundles kept (all of them for a grow).
    pub keep_bundles: u64,
    pub moves: Vec<Move>,
    /// Bundles added at the end (a grow); their chunks are zeroed before
    /// they join, so their redundancy holds from the start.
    pub added: Vec<Vec<Place>>,
    pub caps_after: Vec<u64>,
    /// Lost chunks (moves from `lost`) are rebuilt from their bundles.
    pub lost: Option<usize>,
    /// Variable widths: bundles that gain a data chunk, and where; zeroed
    /// before they join (their parity holds as it is), after every data
    /// chunk the table held.
    pub widened: Vec<(u64, Place)>,
    /// A variable-width remove: its steps past the moves.
    pub shrinking: Option<Box<Shrinking>>,
}

/// What a remove from a variable-width table does besides moving chunks
/// (`raidx_widths::plan_remove`), in the order it runs: evacuations, a
/// step each; the narrowings (parity computed again) and drops, one step;
/// then the plan's moves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shrinking {
    pub level: RaidXLevel,
    /// The table's labels and P positions before the change, explicit.
    pub labels: Vec<Vec<u64>>,
    pub parity_at: Vec<u8>,
    pub evacuations: Vec<(u64, u64)>,
    pub narrowed: Vec<super::raidx_widths::Narrowing>,
    pub dropped: Vec<u64>,
    /// Logical chunks kept from the array (the rest is cut off its end).
    pub kept: u64,
}

/// The RAIDX parameters a table is read with.
#[derive(Debug, Clone, Copy)]
pub struct Params<'a> {
    pub chunk: u64,
    pub c: usize,
    pub level: Option<RaidXLevel>,
    /// Parity weights per member slot (empty: rotation).
    pub weights: &'a [u64],
}

impl Table {
    /// The layout this table describes.
    pub fn layout(&self, p: &Params<'_>) -> Result<RaidX, LayoutError> {
        RaidX::from_places(
            &self.places,
            &self.caps,
            p.chunk,
            p.c,
            p.level,
            self.parity_at.clone(),
        )?
        .with_widenings(&self.widened)?
        .with_labels(&self.labels)
    }
}

impl History {
    /// The history of an array created over members of `caps` chunks.
    pub fn new(caps: Vec<u64>) -> Self {
        Self {
            initial: caps,
            changes: Vec::new(),
            pending: None,
        }
    }

    /// The table once every completed change is applied.
    pub fn completed(&self, p: &Params<'_>) -> Result<Table, LayoutError> {
        let sizes: Vec<u64> = self.initial.iter().map(|c| c * p.chunk).collect();
        let weights = weights_for(p.weights, sizes.len());
        let x = match p.c {
            0 => RaidX::variable_with_weights(&sizes, p.chunk, p.level, weights)?,
            c => RaidX::with_weights(&sizes, p.chunk, c, p.level, weights)?,
        };
        let mut t = Table {
            places: x.places(),
            caps: self.initial.clone(),
            parity_at: x.parity_positions().to_vec(),
            widened: Vec::new(),
            labels: Vec::new(),
        };
        for ch in &self.changes {
            let plan = plan_change(&t, *ch, p)?;
            t = plan.finish(&t, p);
        }
        Ok(t)
    }

    /// The table on the members now: the completed one, with the pending
    /// change's first `moves_done` moves; and the pending change's plan.
    pub fn current(&self, p: &Params<'_>) -> Result<(Table, Option<ChangePlan>), LayoutError> {
        let t = self.completed(p)?;
        let Some(pend) = self.pending else {
            return Ok((t, None));
        };
        let plan = plan_change(&t, pend.change, p)?;
        if pend.moves_done > plan.steps() as u64 {
            return Err(LayoutError::Invalid(format!(
                "the pending change records {} moves done of {}",
                pend.moves_done,
                plan.steps()
            )));
        }
        let now = plan.partial(&t, pend.moves_done as usize);
        Ok((now, Some(plan)))
    }

    /// Slots in use by the history (the initial members and any added).
    pub fn slots(&self) -> usize {
        let mut n = self.initial.len();
        for ch in self
            .changes
            .iter()
            .chain(self.pending.iter().map(|p| &p.change))
        {
            if let Change::Grow { slot, .. } = ch {
                n = n.max(slot + 1);
            }
        }
        n
    }
}

fn weights_for(w: &[u64], n: usize) -> &[u64] {
    if w.is_empty() {
        w
    } else {
        &w[..n.min(w.len())]
    }
}

/// Plan `change` on table `t`.
pub fn plan_change(t: &Table, change: Change, p: &Params<'_>) -> Result<ChangePlan, LayoutError> {
    if p.c == 0 {
        return plan_variable_change(t, change, p);
    }
    match change {
        Change::Grow { slot, chunks } => {
            let caps = grown_caps(t, slot, chunks)?;
            let most = super::raidx::max_bundles(&caps, p.c);
            if most > super::raidx::MAX_BUNDLES {
                return Err(LayoutError::Invalid(format!(
                    "{most} bundles exceed the {} limit of the in-memory table; use a larger chunk",
                    super::raidx::MAX_BUNDLES
                )));
            }
            let g = plan_grow(&t.places, &caps, p.c)?;
            Ok(ChangePlan::grow(t, caps, g.moves, g.added, Vec::new()))
        }
        Change::Remove { slot, keep_bundles } => {
            let r = plan_remove(&t.places, &t.caps, p.c, slot, keep_bundles)?;
            let mut caps = t.caps.clone();
            caps[slot] = 0;
            Ok(ChangePlan {
                keep_bundles: r.bundles,
                moves: r.moves,
                added: Vec::new(),
                caps_after: caps,
                lost: Some(slot),
                widened: Vec::new(),
                shrinking: None,
            })
        }
    }
}

/// The capacities after a grow of slot `slot` to `chunks` chunks.
fn grown_caps(t: &Table, slot: usize, chunks: u64) -> Result<Vec<u64>, LayoutError> {
    let mut caps = t.caps.clone();
    if slot > caps.len() {
        return Err(LayoutError::Invalid(format!(
            "slot {slot} does not follow the {} slots of the array",
            caps.len()
        )));
    }
    if slot == caps.len() {
        caps.push(chunks);
    } else if chunks < caps[slot] {
        return Err(LayoutError::Invalid(format!(
            "slot {slot} would shrink from {} to {chunks} chunks: a grow only adds room",
            caps[slot]
        )));
    } else {
        caps[slot] = chunks;
    }
    Ok(caps)
}

/// A change of a table whose bundle widths vary: a grow widens bundles and
/// places new ones (`raidx_widths::plan_grow`), moving nothing but, for
/// mirrors, chunks onto the member with room.
fn plan_variable_change(
    t: &Table,
    change: Change,
    p: &Params<'_>,
) -> Result<ChangePlan, LayoutError> {
    let level = p.level.unwrap_or(RaidXLevel::X5);
    let (slot, chunks) = match change {
        Change::Grow { slot, chunks } => (slot, chunks),
        Change::Remove { slot, .. } => return plan_variable_remove(t, slot, level, p),
    };
    let caps = grown_caps(t, slot, chunks)?;
    let g =
        super::raidx_widths::plan_grow(&t.places, &caps, level).map_err(LayoutError::Invalid)?;
    if (t.places.len() + g.added.len()) as u64 > super::raidx::MAX_BUNDLES {
        return Err(LayoutError::Invalid(format!(
            "{} bundles exceed the {} limit of the in-memory table; use a larger chunk",
            t.places.len() + g.added.len(),
            super::raidx::MAX_BUNDLES
        )));
    }
    Ok(ChangePlan::grow(t, caps, g.moves, g.added, g.widened))
}

/// Member `slot` leaves a variable-width table (`raidx_widths::plan_remove`),
/// and what its leaving frees is filled again (`raidx_widths::plan_grow`:
/// its moves, mirrors', run after the remove's).
fn plan_variable_remove(
    t: &Table,
    slot: usize,
    level: RaidXLevel,
    p: &Params<'_>,
) -> Result<ChangePlan, LayoutError> {
    if slot >= t.caps.len() || t.caps[slot] == 0 {
        return Err(LayoutError::Invalid(format!(
            "slot {slot} is not a member of the array"
        )));
    }
    let labels = if t.labels.is_empty() {
        t.layout(p)?.labels()
    } else {
        t.labels.clone()
    };
    let parity = matches!(level, RaidXLevel::X5 | RaidXLevel::X6);
    let parity_at = if parity && t.parity_at.is_empty() {
        rotation(&t.places)
    } else {
        t.parity_at.clone()
    };
    // Narrowing keeps every bundle; when that leaves more bundles than the
    // bound allows, dropping some narrow ones instead lets their room widen
    // others (a data chunk for each slot, not one for two): the plan that
    // holds the most wins, the fewest drops on a tie (more of the array kept).
    let mut caps_after = t.caps.clone();
    caps_after[slot] = 0;
    let bound = super::raidx_widths::capacity_bound(&caps_after, level);
    let mut best = remove_with(t, slot, level, p, (&labels, &parity_at), 0)?;
    let held = |x: &ChangePlan| super::raidx_widths::data_chunks(&x.finish(t, p).places, level);
    let first = held(&best);
    if first < bound {
        let gap = (bound - first) as usize;
        let mut most = first;
        for spare in [gap / 2, gap, 2 * gap, 4 * gap, usize::MAX] {
            let x = remove_with(t, slot, level, p, (&labels, &parity_at), spare)?;
            let h = held(&x);
            if h > most {
                (best, most) = (x, h);
            }
        }
    }
    Ok(best)
}

/// [`plan_variable_remove`] with at most `spare` narrow bundles dropped
/// instead of narrowed (`raidx_widths::plan_remove`).
fn remove_with(
    t: &Table,
    slot: usize,
    level: RaidXLevel,
    p: &Params<'_>,
    (labels, parity_at): (&[Vec<u64>], &[u8]),
    spare: usize,
) -> Result<ChangePlan, LayoutError> {
    let w = weights_for(p.weights, t.caps.len());
    let view = super::raidx_widths::TableView {
        places: &t.places,
        parity_at,
        labels,
        caps: &t.caps,
    };
    let rm = super::raidx_widths::plan_remove(&view, level, w, slot, spare)
        .map_err(LayoutError::Invalid)?;
    let mut caps_after = t.caps.clone();
    caps_after[slot] = 0;
    let mut plan = ChangePlan {
        keep_bundles: t.places.len() as u64,
        moves: rm.moves,
        added: Vec::new(),
        caps_after: caps_after.clone(),
        lost: Some(slot),
        widened: Vec::new(),
        shrinking: Some(Box::new(Shrinking {
            level,
            labels: labels.to_vec(),
            parity_at: parity_at.to_vec(),
            evacuations: rm.evacuations,
            narrowed: rm.narrowed,
            dropped: rm.dropped,
            kept: rm.kept,
        })),
    };
    if plan.shrinking.as_ref().is_some_and(|s| s.kept == 0) {
        return Err(LayoutError::Invalid(format!(
            "without slot {slot} the other members cannot hold a single bundle; add a member first (hetraid grow --add), then remove this one"
        )));
    }
    // What the member's leaving frees, filled as a grow would.
    let mid = plan.finish(t, p);
    let fill = super::raidx_widths::plan_grow(&mid.places, &caps_after, level)
        .map_err(LayoutError::Invalid)?;
    plan.moves.extend(fill.moves);
    plan.widened = fill.widened;
    plan.added = fill.added;
    Ok(plan)
}

/// Logical chunks `labels` names (its data positions: copies and parity
/// carry none of their own).
fn label_count(labels: &[Vec<u64>]) -> u64 {
    labels
        .iter()
        .flatten()
        .filter(|&&l| l != super::raidx::NO_LABEL)
        .max()
        .map_or(0, |&l| l + 1)
}

/// The roles of bundle `b`'s positions in table `t`.
fn roles_of(t: &Table, b: usize, level: RaidXLevel) -> Vec<super::raidx::PositionRole> {
    let w = t.places[b].len();
    let p = t.parity_at.get(b).map_or(w - 1 - b % w, |&x| x as usize);
    super::raidx::position_roles(level, w, p)
}

/// Labels for a bundle of `roles` whose data takes the next logical
/// chunks from `next`.
fn label_roles(roles: &[super::raidx::PositionRole], next: &mut u64) -> Vec<u64> {
    use super::raidx::PositionRole::*;
    let data = roles.iter().filter(|r| matches!(r, Data(_))).count() as u64;
    let first = *next;
    *next += data;
    roles
        .iter()
        .map(|r| match r {
            Data(i) | Copy(i) => first + *i as u64,
            P | Q => super::raidx::NO_LABEL,
        })
        .collect()
}

impl Shrinking {
    /// The labels before the change with the first `done` evacuations'
    /// swaps.
    pub fn swapped(&self, done: usize) -> Vec<Vec<u64>> {
        let mut labels = self.labels.clone();
        if done == 0 {
            return labels;
        }
        let mut at: std::collections::HashMap<u64, Vec<(usize, usize)>> = Default::default();
        for (b, ls) in labels.iter().enumerate() {
            for (i, &l) in ls.iter().enumerate() {
                if l != super::raidx::NO_LABEL {
                    at.entry(l).or_default().push((b, i));
                }
            }
        }
        for &(keep, cut) in &self.evacuations[..done] {
            let k = at.remove(&keep).unwrap_or_default();
            let c = at.remove(&cut).unwrap_or_default();
            for &(b, i) in &k {
                labels[b][i] = cut;
            }
            for &(b, i) in &c {
                labels[b][i] = keep;
            }
            at.insert(keep, c);
            at.insert(cut, k);
        }
        labels
    }

    /// The narrowings and drops applied to `out` (moves and evacuations
    /// done): what is left holds logical chunks 0 to `kept` once each.
    pub fn narrow_and_drop(&self, out: &mut Table) {
        for n in &self.narrowed {
            let b = n.bundle as usize;
            let (ps, ls, _) =
                super::raidx_widths::narrow(self.level, &out.places[b], &out.labels[b], n);
            out.places[b] = ps;
            out.labels[b] = ls;
            if !out.parity_at.is_empty() {
                out.parity_at[b] = n.parity_at;
            }
        }
        for &b in self.dropped.iter().rev() {
            out.places.remove(b as usize);
            out.labels.remove(b as usize);
            if !out.parity_at.is_empty() {
                out.parity_at.remove(b as usize);
            }
        }
        debug_assert!(out
            .labels
            .iter()
            .flatten()
            .all(|&l| l == super::raidx::NO_LABEL || l < self.kept));
    }
}

/// Each bundle's P position by rotation (`w - 1 - b % w`), explicit.
fn rotation(places: &[Vec<Place>]) -> Vec<u8> {
    places
        .iter()
        .enumerate()
        .map(|(b, ps)| (ps.len() - 1 - b % ps.len()) as u8)
        .collect()
}

impl ChangePlan {
    /// Its steps (what `Pending::moves_done` counts): the moves; for a
    /// variable remove, its evacuations and the narrowing step first.
    pub fn steps(&self) -> usize {
        self.moves.len()
            + self
                .shrinking
                .as_ref()
                .map_or(0, |s| s.evacuations.len() + 1)
    }

    /// A grow of `t` to `caps`: every bundle kept, none lost.
    fn grow(
        t: &Table,
        caps: Vec<u64>,
        moves: Vec<Move>,
        added: Vec<Vec<Place>>,
        widened: Vec<(u64, Place)>,
    ) -> Self {
        Self {
            keep_bundles: t.places.len() as u64,
            moves,
            added,
            caps_after: caps,
            lost: None,
            widened,
            shrinking: None,
        }
    }

    /// `t` with the first `done` moves (bundles past `keep_bundles`
    /// dropped: a remove starts by shrinking; added bundles join only at
    /// the end). Caps: the larger of before and after, so a slot being
    /// emptied still holds its unmoved chunks.
    pub fn partial(&self, t: &Table, done: usize) -> Table {
        let caps: Vec<u64> = (0..self.caps_after.len())
            .map(|i| self.caps_after[i].max(t.caps.get(i).copied().unwrap_or(0)))
            .collect();
        if let Some(s) = &self.shrinking {
            let e = s.evacuations.len();
            let mut out = Table {
                places: t.places.clone(),
                caps,
                parity_at: s.parity_at.clone(),
                widened: Vec::new(),
                labels: s.swapped(done.min(e)),
            };
            if done > e {
                s.narrow_and_drop(&mut out);
                for m in &self.moves[..done - e - 1] {
                    debug_assert_eq!(out.places[m.bundle as usize][m.pos], m.from);
                    out.places[m.bundle as usize][m.pos] = m.to;
                }
            }
            return out;
        }
        let keep = self.keep_bundles as usize;
        let mut places = t.places[..keep].to_vec();
        for m in &self.moves[..done] {
            debug_assert_eq!(places[m.bundle as usize][m.pos], m.from);
            places[m.bundle as usize][m.pos] = m.to;
        }
        let parity_at = if t.parity_at.is_empty() {
            Vec::new()
        } else {
            t.parity_at[..keep].to_vec()
        };
        Table {
            places,
            caps,
            parity_at,
            widened: t.widened.clone(),
            labels: t.labels.clone(),
        }
    }

    /// The table after the whole change.
    pub fn finish(&self, t: &Table, p: &Params<'_>) -> Table {
        let mut out = self.partial(t, self.steps());
        out.caps = self.caps_after.clone();
        let first_added = out.places.len();
        if !self.widened.is_empty() {
            self.widen(&mut out, p);
        }
        out.places.extend(self.added.iter().cloned());
        if !out.parity_at.is_empty() {
            let w = weights_for(p.weights, out.caps.len());
            let mut held = vec![0u64; out.caps.len()];
            for (b, ps) in out.places.iter().enumerate().take(first_added) {
                held[ps[out.parity_at[b] as usize].0] += 1;
            }
            for b in first_added..out.places.len() {
                let ps = &out.places[b];
                let c = ps.len();
                let rotation = c - 1 - b % c;
                let weight = |i: usize| w.get(ps[i].0).copied().unwrap_or(0);
                let pos = (0..c)
                    .max_by(|&i, &j| {
                        let l = weight(i) as u128 * (held[ps[j].0] + 1) as u128;
                        let r = weight(j) as u128 * (held[ps[i].0] + 1) as u128;
                        l.cmp(&r)
                            .then((i == rotation).cmp(&(j == rotation)))
                            .then(j.cmp(&i))
                    })
                    .expect("a bundle has chunks");
                held[ps[pos].0] += 1;
                out.parity_at.push(pos as u8);
            }
        }
        if !out.labels.is_empty() {
            // Added bundles' data after everything (labels explicit).
            let level = p.level.unwrap_or(RaidXLevel::X5);
            let mut next = label_count(&out.labels);
            for b in first_added..out.places.len() {
                let roles = roles_of(&out, b, level);
                out.labels.push(label_roles(&roles, &mut next));
            }
        }
        out
    }

    /// Apply the widenings to `out` (the table before the added bundles):
    /// parity positions made explicit (a rotation follows the width, which
    /// changes), each new chunk the bundle's last data chunk — appended
    /// (RAIDX0/5: data in position order, P kept where it is), or put just
    /// before P (RAIDX6: data runs from after Q round to P, so P and Q shift
    /// one on) — and its logical place after all the table held.
    fn widen(&self, out: &mut Table, p: &Params<'_>) {
        let level = p.level.unwrap_or(RaidXLevel::X5);
        let parity = matches!(level, RaidXLevel::X5 | RaidXLevel::X6);
        if parity && out.parity_at.is_empty() {
            out.parity_at = out
                .places
                .iter()
                .enumerate()
                .map(|(b, ps)| (ps.len() - 1 - b % ps.len()) as u8)
                .collect();
        }
        let after = out.places.len() as u64;
        let mut next = label_count(&out.labels);
        for &(b, place) in &self.widened {
            let ps = &mut out.places[b as usize];
            // Where the chunk goes: the bundle's last data chunk.
            let at = if level == RaidXLevel::X6 {
                out.parity_at[b as usize] as usize
            } else {
                ps.len()
            };
            ps.insert(at, place);
            if level == RaidXLevel::X6 {
                out.parity_at[b as usize] += 1;
            }
            if out.labels.is_empty() {
                out.widened.push(super::raidx::Widening {
                    after_bundles: after,
                    bundle: b,
                });
            } else {
                out.labels[b as usize].insert(at, next);
                next += 1;
            }
        }
    }

    /// The moves in crash-safe batches: a batch ends before a move that
    /// writes a slot an earlier move of the batch reads (its own chunk, or —
    /// a rebuilt chunk — the rest of its bundle in the table `t` the plan
    /// starts from), so a batch is idempotent. At most `max` moves a batch.
    pub fn batches(&self, t: &Table, max: usize) -> Vec<std::ops::Range<usize>> {
        assert!(max > 0);
        let mut out = Vec::new();
        if let Some(s) = &self.shrinking {
            // Evacuations and the narrowing a step each (each reads chunks
            // and writes another's, and parity); the moves read the leaving
            // member only and write the others.
            let e = s.evacuations.len() + 1;
            out.extend((0..e).map(|i| i..i + 1));
            let n = self.steps();
            out.extend((e..n).step_by(max).map(|i| i..(i + max).min(n)));
            return out;
        }
        let mut places: Vec<Vec<Place>> = t.places[..self.keep_bundles as usize].to_vec();
        let mut reads: std::collections::HashSet<Place> = Default::default();
        let mut start = 0;
        for (i, m) in self.moves.iter().enumerate() {
            if i > start && (i - start >= max || reads.contains(&m.to)) {
                out.push(start..i);
                start = i;
                reads.clear();
            }
            if Some(m.from.0) == self.lost {
                reads.extend(
                    places[m.bundle as usize]
                        .iter()
                        .copied()
                        .filter(|p| *p != m.from),
                );
            } else {
                reads.insert(m.from);
            }
            places[m.bundle as usize][m.pos] = m.to;
        }
        if start < self.moves.len() {
            out.push(start..self.moves.len());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(c: usize, weights: &[u64]) -> Params<'_> {
        Params {
            chunk: 4096,
            c,
            level: None,
            weights,
        }
    }

    #[test]
    fn a_history_replays_to_the_same_table_and_batches_never_read_what_they_write() {
        let p = params(3, &[]);
        let mut h = History::new(vec![40, 40, 30, 20]);
        h.changes.push(Change::Grow {
            slot: 4,
            chunks: 60,
        });
        h.changes.push(Change::Grow {
            slot: 2,
            chunks: 50,
        });
        let t = h.completed(&p).unwrap();
        super::super::raidx_grow::check_table(&t.places, &t.caps, 3).unwrap();
        assert_eq!(
            t.places.len() as u64,
            super::super::raidx::max_bundles(&t.caps, 3)
        );
        assert_eq!(h.completed(&p).unwrap(), t, "replay is deterministic");
        // Remove member 1 keeping what the others hold.
        let mut caps = t.caps.clone();
        caps[1] = 0;
        let keep = super::super::raidx::max_bundles(&caps, 3).min(t.places.len() as u64);
        let ch = Change::Remove {
            slot: 1,
            keep_bundles: keep,
        };
        let plan = plan_change(&t, ch, &p).unwrap();
        let after = plan.finish(&t, &p);
        assert!(after.places.iter().flatten().all(|pl| pl.0 != 1));
        for b in plan.batches(&t, 1000) {
            let mut places = t.places[..keep as usize].to_vec();
            for m in &plan.moves[..b.start] {
                places[m.bundle as usize][m.pos] = m.to;
            }
            let mut read = std::collections::HashSet::new();
            for m in &plan.moves[b.clone()] {
                assert!(!read.contains(&m.to), "move into a slot its batch reads");
                if m.from.0 == 1 {
                    read.extend(places[m.bundle as usize].iter().copied());
                } else {
                    read.insert(m.from);
                }
                places[m.bundle as usize][m.pos] = m.to;
            }
        }
        // Every prefix at a batch boundary is a valid table.
        h.pending = Some(Pending {
            change: ch,
            moves_done: 0,
        });
        for b in plan.batches(&t, 3) {
            h.pending = Some(Pending {
                change: ch,
                moves_done: b.end as u64,
            });
            let (now, _) = h.current(&p).unwrap();
            super::super::raidx_grow::check_table(&now.places, &now.caps, 3).unwrap();
        }
    }

    /// Variable widths (issue 41): grows by an added member and an enlarged
    /// one widen bundles and place new ones; every logical chunk the array
    /// held stays on the same member at the same offset (nothing moves), the
    /// logical map is a bijection, and the capacity reaches the new bound.
    #[test]
    fn a_variable_table_grows_in_place_to_the_bound() {
        use crate::layout::Layout;
        for level in [RaidXLevel::X0, RaidXLevel::X5, RaidXLevel::X6] {
            let p = Params {
                chunk: 4096,
                c: 0,
                level: Some(level),
                weights: &[],
            };
            let mut h = History::new(vec![40, 40, 60, 60, 120]);
            let mut before = h.completed(&p).unwrap().layout(&p).unwrap();
            for ch in [
                Change::Grow {
                    slot: 5,
                    chunks: 120,
                },
                Change::Grow {
                    slot: 0,
                    chunks: 90,
                },
                Change::Grow {
                    slot: 6,
                    chunks: 30,
                },
            ] {
                h.changes.push(ch);
                let t = h.completed(&p).unwrap();
                super::super::raidx_grow::check_table(&t.places, &t.caps, 0).unwrap();
                let after = t.layout(&p).unwrap();
                let bound = super::super::raidx_widths::capacity_bound(&t.caps, level);
                let cap = after.capacity_bytes() / 4096;
                assert!(
                    cap <= bound && cap + t.caps.len() as u64 >= bound,
                    "{level:?}: {cap} of {bound}"
                );
                let loc = |l: &RaidX, c: u64| {
                    let (s, i) = l.locate_chunk(c);
                    assert_eq!(l.logical_chunk(s, i), c, "{level:?}: chunk {c}");
                    l.data_loc(s, i)
                };
                for c in 0..before.capacity_bytes() / 4096 {
                    assert_eq!(
                        loc(&before, c),
                        loc(&after, c),
                        "{level:?}: chunk {c} moved"
                    );
                }
                let mut seen = std::collections::HashSet::new();
                for c in 0..cap {
                    assert!(
                        seen.insert(loc(&after, c)),
                        "{level:?}: two chunks at one place"
                    );
                }
                // Each stripe's data and parity are on distinct members.
                for s in 0..after.stripe_count() {
                    let st = after.stripe(s);
                    let mut m: Vec<usize> =
                        st.data.iter().chain(&st.parity).map(|l| l.member).collect();
                    let n = m.len();
                    m.sort_unstable();
                    m.dedup();
                    assert_eq!(m.len(), n, "{level:?}: stripe {s}");
                    assert_eq!(st.data.len(), after.data_in_stripe(s));
                }
                before = after;
            }
        }
    }

    /// Contents of every place of table `t` when each position holds its
    /// logical chunk's number (parity: none).
    fn contents(t: &Table, p: &Params<'_>) -> std::collections::HashMap<Place, u64> {
        let labels = if t.labels.is_empty() {
            t.layout(p).unwrap().labels()
        } else {
            t.labels.clone()
        };
        let mut c = std::collections::HashMap::new();
        for (ps, ls) in t.places.iter().zip(&labels) {
            for (&pl, &l) in ps.iter().zip(ls) {
                if l != crate::layout::NO_LABEL {
                    c.insert(pl, l);
                }
            }
        }
        c
    }

    /// Run `plan` (from `t`) over `content` as the engine does: moves copy
    /// a chunk, evacuations copy a kept chunk into every place of a cut one
    /// (the swap follows); returns the table after.
    fn run(
        plan: &ChangePlan,
        t: &Table,
        p: &Params<'_>,
        content: &mut std::collections::HashMap<Place, u64>,
    ) -> Table {
        if let Some(s) = &plan.shrinking {
            let mut at: std::collections::HashMap<u64, Vec<Place>> = Default::default();
            for (ps, ls) in t.places.iter().zip(&s.labels) {
                for (&pl, &l) in ps.iter().zip(ls) {
                    at.entry(l).or_default().push(pl);
                }
            }
            for &(keep, cut) in &s.evacuations {
                let from = at[&keep][0];
                let v = content[&from];
                let to = at.remove(&cut).expect("a cut chunk has a place");
                for &pl in &to {
                    content.insert(pl, v);
                }
                let k = at.insert(keep, to).expect("kept");
                at.insert(cut, k);
            }
        }
        for m in &plan.moves {
            let v = content.get(&m.from).copied();
            if let Some(v) = v {
                content.insert(m.to, v);
            }
        }
        plan.finish(t, p)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

        /// Issue 41: random sequences of adding a member, enlarging one and
        /// removing one, from 2..12 members of sizes spread up to 100x, at
        /// every level (parity weighted or not): after each change the table replays the same, is
        /// valid (a bundle's chunks on distinct members, each slot once, at
        /// least the level's narrowest), holds within one chunk per member
        /// and 0.99 of the bound for the new sizes, and — a remove run as
        /// the engine runs it — every logical chunk it keeps reads what it
        /// held.
        #[test]
        fn add_and_remove_keep_the_bound_and_the_data(
            sizes in proptest::collection::vec(20u64..2_000, 2..=12),
            steps in proptest::collection::vec((0u8..3, 0usize..16, 20u64..2_000), 1..6),
            weighted in proptest::prelude::any::<bool>(),
        ) {
            use super::super::raidx_widths::{capacity_bound, width_min};
            use crate::layout::Layout;
            for level in [RaidXLevel::X0, RaidXLevel::X1, RaidXLevel::X5, RaidXLevel::X6, RaidXLevel::X10] {
                // Parity weights on every other member (RAIDX5/6: parity
                // where the weights say, through the changes).
                let w: Vec<u64> = (0..16).map(|i| (i % 2) as u64).collect();
                let weights: &[u64] = if weighted && matches!(level, RaidXLevel::X5 | RaidXLevel::X6) { &w } else { &[] };
                let p = Params { chunk: 4096, c: 0, level: Some(level), weights };
                let mut h = History::new(sizes.clone());
                if h.completed(&p).is_err() {
                    // Too few members for the level to start with.
                    proptest::prop_assert!(sizes.len() < width_min(level));
                    continue;
                }
                for &(kind, m, size) in &steps {
                    let t = h.completed(&p).unwrap();
                    let live: Vec<usize> = (0..t.caps.len()).filter(|&i| t.caps[i] > 0).collect();
                    let ch = match kind {
                        0 if t.caps.len() < 16 => Change::Grow { slot: t.caps.len(), chunks: size },
                        1 => { let s = live[m % live.len()]; Change::Grow { slot: s, chunks: t.caps[s] + size } }
                        _ => Change::Remove { slot: live[m % live.len()], keep_bundles: 0 },
                    };
                    let plan = match plan_change(&t, ch, &p) {
                        Ok(x) => x,
                        // Too few members left for the level: refused.
                        Err(e) => {
                            proptest::prop_assert!(matches!(ch, Change::Remove { .. }), "{level:?}: {e}");
                            proptest::prop_assert!(live.len() <= width_min(level), "{level:?} {:?}: {e}", t.caps);
                            continue;
                        }
                    };
                    // The array runs on the partial tables between steps.
                    let n = plan.steps();
                    for done in [0, n / 3, n / 2, n.saturating_sub(1), n] {
                        let now = plan.partial(&t, done);
                        super::super::raidx_grow::check_table(&now.places, &now.caps, 0).unwrap();
                        now.layout(&p).unwrap();
                    }
                    let mut content = contents(&t, &p);
                    let after = run(&plan, &t, &p, &mut content);
                    h.changes.push(ch);
                    let replay = h.completed(&p).unwrap();
                    proptest::prop_assert_eq!(&replay, &after, "replay differs");
                    super::super::raidx_grow::check_table(&after.places, &after.caps, 0).unwrap();
                    proptest::prop_assert!(after.places.iter().all(|b| b.len() >= width_min(level)));
                    let layout = after.layout(&p).unwrap();
                    let got = layout.capacity_bytes() / 4096;
                    let bound = capacity_bound(&after.caps, level);
                    let members = after.caps.iter().filter(|&&c| c > 0).count() as u64;
                    proptest::prop_assert!(got <= bound, "{level:?}: {got} over {bound}");
                    proptest::prop_assert!(
                        got as f64 >= 0.99 * bound as f64 || got + members >= bound,
                        "{level:?} {sizes:?} {steps:?} -> {:?}: {got} of {bound}", after.caps
                    );
                    if let Some(s) = &plan.shrinking {
                        // Every kept chunk reads what it held.
                        let now = contents(&after, &p);
                        for l in 0..s.kept {
                            let (b, i) = layout.locate_chunk(l);
                            let loc = layout.data_loc(b, i);
                            let pl = (loc.member, loc.offset / 4096);
                            proptest::prop_assert_eq!(now.get(&pl), Some(&l));
                            proptest::prop_assert_eq!(content.get(&pl), Some(&l), "{:?}: chunk {} lost", level, l);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn weighted_parity_survives_a_grow_and_new_bundles_follow_the_weights() {
        let w = [0, 0, 0, 1, 1];
        let p = Params {
            level: Some(RaidXLevel::X5),
            ..params(3, &w)
        };
        let mut h = History::new(vec![20, 20, 20, 20]);
        let before = h.completed(&p).unwrap();
        h.changes.push(Change::Grow {
            slot: 4,
            chunks: 40,
        });
        let after = h.completed(&p).unwrap();
        assert_eq!(
            &after.parity_at[..before.places.len()],
            &before.parity_at[..],
            "existing bundles keep their parity position"
        );
        let on_ssd = (before.places.len()..after.places.len())
            .filter(|&b| {
                let m = after.places[b][after.parity_at[b] as usize].0;
                w[m] == 1
            })
            .count();
        let added = after.places.len() - before.places.len();
        assert!(added > 0);
        assert_eq!(on_ssd, added, "new bundles put parity on weighted members");
    }
}
