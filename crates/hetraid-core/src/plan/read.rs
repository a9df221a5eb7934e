//! Planning reads: the columns a read needs, read around failed members,
//! and the copy a balanced read picks.

use super::*;

impl Planner<'_> {
    /// Does choosing among copies apply (a mirrored layout, a policy other
    /// than `first`)?
    #[inline]
    pub(super) fn balances(&self) -> bool {
        // The cheap test first: the layout's is a virtual call.
        self.reads
            .as_ref()
            .is_some_and(|r| r.policy != crate::readbalance::ReadPolicy::First)
            && crate::readbalance::keeps_copies(self.layout)
    }

    /// Where a read of `len` bytes at `co` into data chunk `i` of stripe `s`
    /// goes: the first copy, or (balancing) the copy the read policy picks
    /// among the live ones, given `loads` (updated with the choice, so the
    /// next chunk of the same request sees it) and the member the previous
    /// chunk used. None when no copy is available (the full planner then).
    #[inline]
    pub(super) fn read_loc(
        &self,
        s: u64,
        i: usize,
        co: u64,
        len: u64,
        state: &ArrayState,
        cursor: &mut ReadCursor,
    ) -> Option<ChunkLoc> {
        let first = self.layout.data_loc(s, i);
        let sat_out = self.sat_out;
        if !self.balances() {
            // A sat-out member's chunk goes to the full planner (a copy, or
            // a reconstruction).
            return (state.available(first.member, s) && !sat_out.contains(first.member))
                .then_some(first);
        }
        let st = self.layout.stripe(s);
        let mut copies: Vec<ChunkLoc> = std::iter::once(first)
            .chain(st.mirrors.get(i).into_iter().flatten().copied())
            .filter(|c| state.available(c.member, s))
            .map(|c| ChunkLoc {
                member: c.member,
                offset: c.offset + co,
            })
            .collect();
        if !sat_out.is_empty() && copies.iter().any(|c| !sat_out.contains(c.member)) {
            copies.retain(|c| !sat_out.contains(c.member));
        }
        if copies.is_empty() {
            return None;
        }
        let policy = self.reads.as_ref().expect("balancing").policy;
        let current = cursor
            .previous
            .and_then(|m| copies.iter().position(|c| c.member == m));
        let c = copies[crate::readbalance::choose(policy, &copies, &cursor.loads, current)];
        if let Some(l) = cursor.loads.get_mut(c.member) {
            l.pending += 1;
            l.head = c.offset + len;
        }
        cursor.previous = Some(c.member);
        Some(ChunkLoc {
            member: c.member,
            offset: c.offset - co,
        })
    }

    #[inline]
    pub(super) fn read_cursor(&self) -> ReadCursor {
        ReadCursor {
            loads: match &self.reads {
                Some(r) if self.balances() => r.loads.clone(),
                _ => Vec::new(),
            },
            previous: None,
        }
    }

    pub(super) fn plan_read(
        &self,
        s: u64,
        pieces: Vec<Piece>,
        state: &ArrayState,
    ) -> Result<StripePlan, PlanError> {
        let (cols, k, pc) = self.columns(s);
        let failed = self.failed_set(s, &cols, state);
        if !self.sat_out.is_empty() {
            // Sat-out members count as failed for this read when the stripe
            // can still be read without them; else they are read.
            let mut around = failed;
            for (c, col) in cols.iter().enumerate() {
                if self.sat_out.contains(col.loc.member) {
                    around.insert(c);
                }
            }
            if around != failed {
                if let Ok(sp) =
                    self.plan_read_around(s, cols.clone(), k, pc, pieces.clone(), around)
                {
                    return Ok(sp);
                }
            }
        }
        self.plan_read_around(s, cols, k, pc, pieces, failed)
    }

    /// [`Planner::plan_read`] with the columns in `failed` left out.
    fn plan_read_around(
        &self,
        s: u64,
        cols: Vec<Column>,
        k: usize,
        pc: usize,
        mut pieces: Vec<Piece>,
        failed: ColSet,
    ) -> Result<StripePlan, PlanError> {
        let mut sp = StripePlan {
            stripe: s,
            columns: cols,
            data_count: k,
            parity_count: pc,
            runs: vec![],
            pieces: vec![],
        };
        let mut degraded_pages: Vec<(u32, u32)> = Vec::new();
        for p in pieces.iter_mut() {
            if !failed.contains(p.data) {
                p.direct = Some(p.data);
                continue;
            }
            if let Some(c) = sp.copies_of(p.data).find(|c| !failed.contains(*c)) {
                p.direct = Some(c);
                continue;
            }
            if pc == 0 {
                return Err(Self::data_lost(s, &sp.columns, failed));
            }
            let first = (p.chunk_offset / PAGE) as u32;
            let last = ((p.chunk_offset + p.len).div_ceil(PAGE)) as u32;
            degraded_pages.push((first, last));
        }
        if !degraded_pages.is_empty() {
            let mut lost = ColSet::default();
            let mut read = ColSet::default();
            for c in 0..k {
                if failed.contains(c) {
                    lost.insert(c);
                } else {
                    read.insert(c);
                }
            }
            let par = Self::parity_for(k, pc, failed, lost.len())
                .ok_or_else(|| Self::data_lost(s, &sp.columns, failed))?;
            read = read.union(par);
            degraded_pages.sort_unstable();
            let mut merged: Vec<(u32, u32)> = Vec::new();
            for (a, b) in degraded_pages {
                match merged.last_mut() {
                    Some(m) if m.1 >= a => m.1 = m.1.max(b),
                    _ => merged.push((a, b)),
                }
            }
            for (a, b) in merged {
                sp.runs.push(RowRun {
                    page: a,
                    pages: b - a,
                    mode: Mode::Degraded,
                    strategy: Strategy::Reconstruct,
                    read,
                    write: ColSet::default(),
                    lost,
                });
            }
        }
        // A piece whose column a degraded run reads anyway is served from that
        // read instead of a second read of the same pages.
        for p in pieces.iter_mut() {
            if let Some(c) = p.direct {
                let (a, b) = (
                    (p.chunk_offset / PAGE) as u32,
                    (p.chunk_offset + p.len).div_ceil(PAGE) as u32,
                );
                if c == p.data
                    && sp
                        .runs
                        .iter()
                        .any(|r| r.read.contains(c) && r.page <= a && b <= r.page + r.pages)
                {
                    p.direct = None;
                }
            }
        }
        sp.pieces = pieces;
        Ok(sp)
    }
}
