//! The steps a member's removal from a variable-width RAIDX runs besides
//! moving chunks (core's `raidx_widths::plan_remove` decides them): an
//! evacuation copies a kept logical chunk into the place of one cut off
//! the end and computes that bundle's parity again; the narrowing step
//! computes the parity of every bundle that lost a position under its new
//! roles. Each reads only chunks it does not write, so a step cut short by
//! a crash is run again whole (the pending change counts steps done).

use super::*;
use hetraid_core::layout::raidx_history::{ChangePlan, Shrinking, Table};
use hetraid_core::layout::{position_roles, PositionRole, RaidXLevel, NO_LABEL};

/// Where each logical chunk of the table before the change is (its data
/// position and copies): evacuation `i` reads its kept chunk's and writes
/// its cut chunk's, which no earlier one touched (every chunk is named by
/// one evacuation at most).
pub(super) fn places_of_labels(t: &Table, s: &Shrinking) -> HashMap<u64, Vec<(usize, usize)>> {
    let mut at: HashMap<u64, Vec<(usize, usize)>> = HashMap::new();
    for (b, ls) in s.labels.iter().enumerate() {
        for (i, &l) in ls.iter().enumerate() {
            if l != NO_LABEL && b < t.places.len() {
                at.entry(l).or_default().push((b, i));
            }
        }
    }
    at
}

type HashMap<K, V> = std::collections::HashMap<K, V>;

impl Array {
    /// Evacuation `i` of `s`: the kept chunk's bytes into every place of
    /// the cut chunk, then that bundle's parity from its data.
    pub(super) fn evacuate(
        &self,
        t: &Table,
        s: &Shrinking,
        at: &HashMap<u64, Vec<(usize, usize)>>,
        i: usize,
        usable: &dyn Fn(usize) -> bool,
    ) -> Result<()> {
        let (keep, cut) = s.evacuations[i];
        let chunk = self.superblock().chunk_bytes;
        let missing = |l: u64| {
            EngineError::Layout(format!(
                "logical chunk {l} has no place in the table being shrunk (a hetraid bug)"
            ))
        };
        let from = at.get(&keep).ok_or_else(|| missing(keep))?;
        let &(fb, fi) = from
            .iter()
            .find(|&&(b, i)| usable(t.places[b][i].0))
            .ok_or_else(|| {
                EngineError::Refused(format!(
                    "logical chunk {keep} is on no member in sync; give all members (a member being removed must stay until its removal ends)"
                ))
            })?;
        let mut buf = AlignedBuf::zeroed(chunk as usize);
        self.read_place(t.places[fb][fi], &mut buf)?;
        let to = at.get(&cut).ok_or_else(|| missing(cut))?;
        for &(b, i) in to {
            self.write_place(t.places[b][i], &buf, usable)?;
        }
        let b = to[0].0;
        let roles = roles_at(s.level, &t.places[b], s.parity_at.get(b).copied());
        self.write_parity(&t.places[b], &roles, usable)?;
        self.flush_places(&t.places[b])
    }

    /// The narrowing step: every narrowed bundle's parity under its roles
    /// in `after` (the table once narrowings and drops are done).
    pub(super) fn narrow_bundles(
        &self,
        after: &Table,
        s: &Shrinking,
        usable: &dyn Fn(usize) -> bool,
    ) -> Result<()> {
        let mut touched: Vec<(usize, u64)> = Vec::new();
        for n in &s.narrowed {
            let b = n.bundle as usize - s.dropped.partition_point(|&d| d < n.bundle);
            let ps = &after.places[b];
            let roles = roles_at(s.level, ps, after.parity_at.get(b).copied());
            self.write_parity(ps, &roles, usable)?;
            touched.extend_from_slice(ps);
        }
        self.flush_places(&touched)
    }

    /// P (and Q) of a bundle at `places` computed from its data chunks.
    fn write_parity(
        &self,
        places: &[(usize, u64)],
        roles: &[PositionRole],
        usable: &dyn Fn(usize) -> bool,
    ) -> Result<()> {
        let chunk = self.superblock().chunk_bytes as usize;
        let k = roles
            .iter()
            .filter(|r| matches!(r, PositionRole::Data(_)))
            .count();
        let parity: Vec<(usize, PositionRole)> = roles
            .iter()
            .enumerate()
            .filter(|(_, r)| matches!(r, PositionRole::P | PositionRole::Q))
            .map(|(i, r)| (i, *r))
            .collect();
        if parity.is_empty() {
            return Ok(());
        }
        let mut data: Vec<AlignedBuf> = (0..k).map(|_| AlignedBuf::zeroed(chunk)).collect();
        for (i, r) in roles.iter().enumerate() {
            if let PositionRole::Data(d) = r {
                self.read_place(places[i], &mut data[*d])?;
            }
        }
        let srcs: Vec<&[u8]> = data.iter().map(|d| &d[..]).collect();
        let mut p = AlignedBuf::zeroed(chunk);
        let mut q = AlignedBuf::zeroed(chunk);
        if parity.len() == 1 {
            hetraid_parity::xor_gen(&mut p, &srcs);
        } else {
            hetraid_parity::pq_gen(&srcs, &mut p, &mut q);
        }
        for (i, r) in parity {
            let b = if r == PositionRole::P { &p } else { &q };
            self.write_place(places[i], b, usable)?;
        }
        Ok(())
    }

    fn read_place(&self, (m, slot): (usize, u64), buf: &mut [u8]) -> Result<()> {
        let chunk = buf.len() as u64;
        let d = &self.hot.slots[m];
        d.read_at(buf, self.data_off() + slot * chunk)
            .map_err(|e| io_err(d.as_ref(), e))
    }

    fn write_place(
        &self,
        (m, slot): (usize, u64),
        buf: &[u8],
        usable: &dyn Fn(usize) -> bool,
    ) -> Result<()> {
        if !usable(m) {
            return Err(EngineError::Refused(format!(
                "slot {m} takes a chunk but is not in sync; give all members"
            )));
        }
        let chunk = buf.len() as u64;
        let d = &self.hot.slots[m];
        d.write_at(buf, self.data_off() + slot * chunk)
            .map_err(|e| io_err(d.as_ref(), e))
    }

    fn flush_places(&self, places: &[(usize, u64)]) -> Result<()> {
        let mut ms: Vec<usize> = places.iter().map(|p| p.0).collect();
        ms.sort_unstable();
        ms.dedup();
        for m in ms {
            let d = &self.hot.slots[m];
            d.flush().map_err(|e| io_err(d.as_ref(), e))?;
        }
        Ok(())
    }
}

/// The roles of a bundle at `places` whose P is at `p` (None: rotation is
/// not used once a table is being shrunk; levels without parity ignore it).
fn roles_at(level: RaidXLevel, places: &[(usize, u64)], p: Option<u8>) -> Vec<PositionRole> {
    position_roles(level, places.len(), p.unwrap_or(0) as usize)
}

/// What step `i` of `plan` is.
pub(super) enum StepKind {
    Evacuation(usize),
    Narrowing,
    /// Moves, from this index of `plan.moves`.
    Moves(usize),
}

pub(super) fn step_kind(plan: &ChangePlan, i: usize) -> StepKind {
    match &plan.shrinking {
        Some(s) if i < s.evacuations.len() => StepKind::Evacuation(i),
        Some(s) if i == s.evacuations.len() => StepKind::Narrowing,
        Some(s) => StepKind::Moves(i - s.evacuations.len() - 1),
        None => StepKind::Moves(i),
    }
}
