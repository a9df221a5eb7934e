//! RAIDX bundles whose width is chosen where each is placed, so that any set
//! of member sizes reaches the capacity bound (issue 41). Pure: the bound,
//! and a placement that reaches it; the layout built on it comes next.
//!
//! # The bound
//!
//! A bundle holds at most one chunk per member. With `T` the chunks of all
//! members and `L1 >= L2` the two largest members' chunks:
//!
//! - **one parity chunk a bundle** (RAIDX5): data = chunks used − bundles,
//!   and there are at least as many bundles as chunks used on the largest
//!   member (one each); its unused chunks count against `T` too, so
//!   data <= `T − L1`;
//! - **two parity chunks a bundle** (RAIDX6): data = used − 2 × bundles, and
//!   bundles >= the chunks used on each of the two largest members, so
//!   data <= `T − L1 − L2`;
//! - **two copies** (RAIDX1 with two, RAIDX10): data = half the chunks used
//!   <= `T / 2`, and every bundle has a chunk off the largest member, so
//!   data <= `T − L1`: data <= `min(T / 2, T − L1)`;
//! - **no redundancy** (RAIDX0): `T`.
//!
//! These are the figures Synology's SHR (one and two parity) and btrfs raid1
//! reach; a fixed bundle width reaches them only on some sets.
//!
//! # The placement
//!
//! Parity levels, layer by layer (what SHR does with partitions): every
//! member with free chunks joins the bundle, as long as at least `parity +
//! 1` members have some; a layer runs until its smallest member is full.
//! Summing the layers' data, `(width − parity) × height`, gives exactly the
//! bound (the widths below `parity + 1` are the part of the largest members
//! nothing can protect). Copies: each bundle is a pair, the two members with
//! the most free chunks (ties to the lower index), the greedy that pairs the
//! largest member with all the others first. RAIDX10 bundles are pairs too:
//! a wider bundle holds the largest member once while the small ones pair
//! among themselves (10, 1, 1, 1, 1 chunks: 3 data chunks in bundles of 4
//! against 4 in pairs), and only pairs reach the bound on every set.

use super::raidx::RaidXLevel;
use super::raidx_grow::Place;

/// Chunks a bundle of `level` spends on redundancy besides its data:
/// (parity chunks, copies per data chunk).
fn redundancy(level: RaidXLevel) -> (usize, usize) {
    match level {
        RaidXLevel::X0 => (0, 1),
        RaidXLevel::X1 | RaidXLevel::X10 => (0, 2),
        RaidXLevel::X5 => (1, 1),
        RaidXLevel::X6 => (2, 1),
    }
}

/// The most data chunks a RAIDX at `level` can hold on members of `chunks`
/// chunks each (see the module text).
pub fn capacity_bound(chunks: &[u64], level: RaidXLevel) -> u64 {
    let mut sorted = chunks.to_vec();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    let total: u64 = sorted.iter().sum();
    let largest = |k: usize| sorted.get(k).copied().unwrap_or(0);
    match level {
        RaidXLevel::X0 => total,
        RaidXLevel::X5 if sorted.len() >= 2 => total - largest(0),
        RaidXLevel::X6 if sorted.len() >= 3 => total - largest(0) - largest(1),
        RaidXLevel::X1 | RaidXLevel::X10 if sorted.len() >= 2 => {
            (total / 2).min(total - largest(0))
        }
        _ => 0,
    }
}

/// Data chunks a bundle of `width` chunks holds at `level`.
pub fn data_in_bundle(level: RaidXLevel, width: usize) -> usize {
    let (parity, copies) = redundancy(level);
    width.saturating_sub(parity) / copies
}

/// The narrowest bundle `level` can place (one that keeps its redundancy).
pub fn width_min(level: RaidXLevel) -> usize {
    let (parity, copies) = redundancy(level);
    (parity + 1).max(copies)
}

/// Bundles over members of `chunks` chunks each, widths chosen as they are
/// placed (see the module text): each bundle's places (member, slot),
/// members ascending, slots from 0 up on every member. Its data chunks sum
/// to [`capacity_bound`] up to rounding (at most one chunk per member).
pub fn place(chunks: &[u64], level: RaidXLevel) -> Vec<Vec<Place>> {
    let (parity, copies) = redundancy(level);
    let mut free = chunks.to_vec();
    let mut next = vec![0u64; chunks.len()];
    let mut bundles = Vec::new();
    let mut take = |members: &mut Vec<usize>, free: &mut [u64], count: u64| {
        members.sort_unstable();
        for _ in 0..count {
            bundles.push(
                members
                    .iter()
                    .map(|&m| {
                        free[m] -= 1;
                        next[m] += 1;
                        (m, next[m] - 1)
                    })
                    .collect::<Vec<Place>>(),
            );
        }
    };
    // Bounded: every round fills at least one member (parity) or places at
    // least one bundle (copies), or ends.
    loop {
        let mut members: Vec<usize> = (0..free.len()).filter(|&m| free[m] > 0).collect();
        if copies == 1 {
            // A layer: everyone with room, until the smallest is full.
            if members.len() < (parity + 1).max(1) {
                break;
            }
            let height = members.iter().map(|&m| free[m]).min().expect("members");
            take(&mut members, &mut free, height);
        } else {
            // A pair: the two with the most free (ties: lower index).
            if members.len() < 2 {
                break;
            }
            members.sort_by(|&a, &b| free[b].cmp(&free[a]).then(a.cmp(&b)));
            members.truncate(2);
            take(&mut members, &mut free, 1);
        }
    }
    bundles
}

/// What growing a variable-width table does ([`plan_grow`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VariableGrow {
    /// Bundles that gain a data chunk, and where it goes, in order.
    pub widened: Vec<(u64, Place)>,
    /// Bundles placed in what is left, as [`place`] places them.
    pub added: Vec<Vec<Place>>,
    /// Mirrors: chunks moved onto the member with room, so that pairs can
    /// form with the slots they leave (in order, before `added` join).
    pub moves: Vec<super::raidx_grow::Move>,
}

/// Grow a table placed by [`place`] (and grown by this since) to the
/// member capacities `caps` (chunks; members only grow, new ones are
/// appended), keeping every chunk where it is.
///
/// A free chunk slot is worth most as one more data chunk of a bundle that
/// has none on its member (no parity spent): every member's free slots
/// widen the bundles without it, narrowest first, as far as they go (the
/// members are independent: a bundle takes one chunk from each member it
/// lacks). What is left is on members every bundle already holds; it is
/// placed as new layers ([`place`]). The data chunks added land after all
/// the data the table held (`RaidX` widenings), so no byte moves. Levels
/// with parity and none (RAIDX0/5/6); mirrors are pairs and do not widen.
pub fn plan_grow(
    places: &[Vec<Place>],
    caps: &[u64],
    level: RaidXLevel,
) -> Result<VariableGrow, String> {
    let (_, copies) = redundancy(level);
    let mut used: Vec<Vec<bool>> = caps.iter().map(|&c| vec![false; c as usize]).collect();
    for (b, ps) in places.iter().enumerate() {
        for &(m, slot) in ps {
            let cell = used
                .get_mut(m)
                .and_then(|u| u.get_mut(slot as usize))
                .ok_or(format!(
                "bundle {b} holds slot {slot} of member {m}, past its capacity: members only grow"
            ))?;
            *cell = true;
        }
    }
    let mut free: Vec<std::collections::VecDeque<u64>> = used
        .iter()
        .map(|u| (0..u.len() as u64).filter(|&s| !u[s as usize]).collect())
        .collect();
    if copies > 1 {
        return Ok(grow_pairs(places, free));
    }
    let mut widths: Vec<usize> = places.iter().map(Vec::len).collect();
    let mut plan = VariableGrow::default();
    for (m, free_m) in free.iter_mut().enumerate() {
        if free_m.is_empty() {
            continue;
        }
        let mut lacking: Vec<usize> = (0..places.len())
            .filter(|&b| places[b].iter().all(|p| p.0 != m))
            .collect();
        lacking.sort_by_key(|&b| (widths[b], b));
        for b in lacking {
            let Some(slot) = free_m.pop_front() else {
                break;
            };
            widths[b] += 1;
            plan.widened.push((b as u64, (m, slot)));
        }
    }
    // The rest as layers, on the free slots left.
    let left: Vec<u64> = free.iter().map(|f| f.len() as u64).collect();
    for bundle in place(&left, level) {
        plan.added.push(
            bundle
                .into_iter()
                .map(|(m, i)| (m, free[m][i as usize]))
                .collect(),
        );
    }
    Ok(plan)
}

/// What removing a member from a variable-width table does
/// ([`plan_remove`]): logical chunks evacuated, bundles narrowed or
/// dropped, chunks moved off the member.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VariableRemove {
    /// The member's chunks moved into slots of members their bundles lack
    /// (free, or left by a drop), numbered as the bundles are after the
    /// drops, in order.
    pub moves: Vec<super::raidx_grow::Move>,
    /// `(keep, cut)`: logical chunk `keep` is copied into the place of
    /// logical chunk `cut` (past the new end), and the two swap places —
    /// so every chunk a narrowing or a drop frees is past the end.
    pub evacuations: Vec<(u64, u64)>,
    /// Bundles that lose the member's position, one data chunk less.
    pub narrowed: Vec<Narrowing>,
    /// Bundles dropped whole (too narrow to lose a chunk), ascending.
    pub dropped: Vec<u64>,
    /// Logical chunks kept (from 0): all but those freed.
    pub kept: u64,
}

/// A bundle losing position `pos`; its P is then at `parity_at` (RAIDX5/6),
/// and its parity is computed again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Narrowing {
    pub bundle: u64,
    pub pos: usize,
    pub parity_at: u8,
}

/// A bundle after a narrowing: its places and labels without `pos`, the
/// labels of positions now P or Q cleared; and the label it frees (the
/// lost position's, or that of a data chunk that becomes parity).
pub fn narrow(
    level: RaidXLevel,
    places: &[Place],
    labels: &[u64],
    n: &Narrowing,
) -> (Vec<Place>, Vec<u64>, u64) {
    use super::raidx::{position_roles, PositionRole, NO_LABEL};
    let mut ps = places.to_vec();
    let mut ls = labels.to_vec();
    ps.remove(n.pos);
    let mut freed = ls.remove(n.pos);
    let roles = position_roles(level, ps.len(), n.parity_at as usize);
    for (r, l) in roles.iter().zip(ls.iter_mut()) {
        if matches!(r, PositionRole::P | PositionRole::Q) && *l != NO_LABEL {
            debug_assert_eq!(freed, NO_LABEL, "one label freed a narrowing");
            freed = std::mem::replace(l, NO_LABEL);
        }
    }
    debug_assert!(
        roles
            .iter()
            .zip(&ls)
            .all(|(r, &l)| matches!(r, PositionRole::P | PositionRole::Q) == (l == NO_LABEL)),
        "a parity position becomes data"
    );
    (ps, ls, freed)
}

/// Where P goes when bundle `places` (P at `p`) loses position `j`: it
/// stays when `j` held data (RAIDX6: Q after it stays too); RAIDX5 losing
/// P puts it on the heaviest member left (`weights`; ties: the position
/// whose data is latest, the likeliest to be cut anyway); RAIDX6 losing P
/// puts it just before Q, and losing Q puts it after P.
fn narrowed_parity(
    level: RaidXLevel,
    places: &[Place],
    labels: &[u64],
    p: usize,
    j: usize,
    weights: &[u64],
) -> usize {
    let w = places.len() - 1;
    let shift = |i: usize| if i > j { i - 1 } else { i };
    match level {
        RaidXLevel::X5 if j == p => (0..places.len())
            .filter(|&i| i != j)
            .max_by_key(|&i| (weights.get(places[i].0).copied().unwrap_or(0), labels[i]))
            .map(shift)
            .expect("a bundle keeps chunks"),
        RaidXLevel::X6 if j == p => (shift((p + 1) % places.len()) + w - 1) % w,
        RaidXLevel::X5 | RaidXLevel::X6 => shift(p),
        _ => 0,
    }
}

/// A table as [`plan_remove`] reads it.
#[derive(Debug, Clone, Copy)]
pub struct TableView<'a> {
    pub places: &'a [Vec<Place>],
    /// P positions, explicit for RAIDX5/6.
    pub parity_at: &'a [u8],
    /// Each position's logical chunk ([`super::raidx::RaidX::labels`]).
    pub labels: &'a [Vec<u64>],
    /// Chunk slots per member.
    pub caps: &'a [u64],
}

/// Plan removing member `r` (present and whole) from a variable-width
/// table `t`; at most `spare_max` bundles narrowing would keep that lack
/// one of the largest members are dropped instead.
///
/// Each bundle with a chunk on `r` keeps it by moving it to a slot of a
/// member the bundle lacks — a free one, or one a dropped bundle leaves —
/// or loses that position (one data chunk less: the cost of the member's
/// room), or, at the narrowest width its level allows, is dropped whole
/// (mirrors: of two pairs left with one copy each on different members,
/// one is dropped and the other's copy goes where the first's was). The
/// chunks narrowings and drops free are made the last logical ones by
/// evacuating the kept chunks among them into the places of cut ones, so
/// the array keeps its first `kept` chunks where a user reads them. The
/// order the engine runs it in: evacuations; narrowings and drops at once
/// (the moves' bundle numbers are the table's after it); the moves. What
/// is still free is filled by [`plan_grow`] (the caller's part).
pub fn plan_remove(
    t: &TableView<'_>,
    level: RaidXLevel,
    weights: &[u64],
    r: usize,
    spare_max: usize,
) -> Result<VariableRemove, String> {
    use super::raidx::NO_LABEL;
    let TableView {
        places,
        parity_at,
        labels,
        caps,
    } = *t;
    if r >= caps.len() || caps[r] == 0 {
        return Err(format!("member slot {r} holds nothing to remove"));
    }
    let mut used: Vec<Vec<bool>> = caps.iter().map(|&c| vec![false; c as usize]).collect();
    for ps in places {
        for &(m, slot) in ps {
            used[m][slot as usize] = true;
        }
    }
    // Slots a moved chunk can take, per member: free ones now, and those
    // dropped bundles leave.
    let mut pool: Vec<std::collections::VecDeque<u64>> = used
        .iter()
        .enumerate()
        .map(|(m, u)| {
            (0..u.len() as u64)
                .filter(|&s| m != r && !u[s as usize])
                .collect()
        })
        .collect();
    let take = |pool: &mut [std::collections::VecDeque<u64>], ps: &[Place]| {
        let m = (0..pool.len())
            .filter(|&m| !pool[m].is_empty() && ps.iter().all(|p| p.0 != m))
            .max_by_key(|&m| (pool[m].len(), std::cmp::Reverse(m)))?;
        Some((m, pool[m].pop_front().expect("a slot")))
    };
    let with_r: Vec<(usize, usize)> = places
        .iter()
        .enumerate()
        .filter_map(|(b, ps)| ps.iter().position(|p| p.0 == r).map(|j| (b, j)))
        .collect();
    let mut moved: Vec<(usize, usize, Place)> = Vec::new();
    let mut left = Vec::new();
    // Free slots first (nothing lost)...
    for &(b, j) in &with_r {
        match take(&mut pool, &places[b]) {
            Some(to) => moved.push((b, j, to)),
            None => left.push((b, j)),
        }
    }
    // ...then the narrowest bundles: dropped, unless a slot an earlier
    // drop left takes the chunk; then the others: moved into what the
    // drops left, or narrowed.
    left.sort_by_key(|&(b, _)| (places[b].len() > width_min(level), b));
    let mut plan = VariableRemove::default();
    let mut freed: Vec<u64> = Vec::new();
    // The members every bundle must hold for the bound (the largest left,
    // one per parity chunk).
    let (parity, _) = redundancy(level);
    let mut by_size: Vec<usize> = (0..caps.len()).filter(|&m| m != r).collect();
    by_size.sort_by_key(|&m| (std::cmp::Reverse(caps[m]), m));
    let largest = &by_size[..parity.min(by_size.len())];
    let mut spared = 0;
    for (b, j) in left {
        let ps = &places[b];
        // A bundle without the largest members spends parity on room the
        // bound does not: up to `spare_max` of those narrowing would keep
        // are dropped instead, their room left to widen others.
        let wasteful = parity > 0 && largest.iter().any(|l| ps.iter().all(|p| p.0 != *l));
        if let Some(to) = take(&mut pool, ps) {
            moved.push((b, j, to));
        } else if ps.len() <= width_min(level) || (wasteful && spared < spare_max) {
            spared += usize::from(ps.len() > width_min(level));
            plan.dropped.push(b as u64);
            let mut ls: Vec<u64> = labels[b]
                .iter()
                .copied()
                .filter(|&l| l != NO_LABEL)
                .collect();
            ls.dedup();
            freed.extend(ls);
            for &(m, slot) in ps.iter().filter(|p| p.0 != r) {
                pool[m].push_back(slot);
            }
        } else {
            let p = parity_at.get(b).copied().unwrap_or(0) as usize;
            let n = Narrowing {
                bundle: b as u64,
                pos: j,
                parity_at: narrowed_parity(level, ps, &labels[b], p, j, weights) as u8,
            };
            freed.push(narrow(level, ps, &labels[b], &n).2);
            plan.narrowed.push(n);
        }
    }
    plan.dropped.sort_unstable();
    plan.narrowed.sort_by_key(|n| n.bundle);
    // Moves, numbered as the bundles are once the drops are done.
    moved.sort_by_key(|m| m.0);
    for (b, j, to) in moved {
        let gone = plan.dropped.partition_point(|&d| d < b as u64) as u64;
        plan.moves.push(super::raidx_grow::Move {
            bundle: b as u64 - gone,
            pos: j,
            from: places[b][j],
            to,
        });
    }
    let total: u64 = places
        .iter()
        .map(|ps| data_in_bundle(level, ps.len()) as u64)
        .sum();
    plan.kept = total - freed.len() as u64;
    freed.sort_unstable();
    let kept_freed: Vec<u64> = freed.iter().copied().filter(|&l| l < plan.kept).collect();
    let cut = (plan.kept..total).filter(|l| freed.binary_search(l).is_err());
    plan.evacuations = kept_freed.into_iter().zip(cut).collect();
    Ok(plan)
}

/// Mirrors (pairs) grown into the `free` slots: a pair of the two members
/// with the most free slots while two have some (as [`place`]); then, while
/// one member alone has two or more, a pair without it gives it a chunk
/// (moved there) and the slot that chunk leaves pairs with another of its
/// slots: one pair more for two of its slots, the greedy that pairs the
/// largest member with all the others.
fn grow_pairs(
    places: &[Vec<Place>],
    mut free: Vec<std::collections::VecDeque<u64>>,
) -> VariableGrow {
    let mut plan = VariableGrow::default();
    let mut table = places.to_vec();
    // Bounded: each round uses two free slots, or ends.
    loop {
        let mut with: Vec<usize> = (0..free.len()).filter(|&m| !free[m].is_empty()).collect();
        with.sort_by(|&a, &b| free[b].len().cmp(&free[a].len()).then(a.cmp(&b)));
        match with[..] {
            [a, b, ..] => {
                let pair = vec![(a.min(b), 0), (a.max(b), 0)]
                    .into_iter()
                    .map(|(m, _)| (m, free[m].pop_front().expect("free")))
                    .collect();
                plan.added.push(pair);
            }
            [m] if free[m].len() >= 2 => {
                let Some(b) = (0..table.len()).find(|&b| table[b].iter().all(|p| p.0 != m)) else {
                    break;
                };
                let (pos, from) = (0, table[b][0]);
                let to = (m, free[m].pop_front().expect("free"));
                plan.moves.push(super::raidx_grow::Move {
                    bundle: b as u64,
                    pos,
                    from,
                    to,
                });
                table[b][pos] = to;
                let other = (m, free[m].pop_front().expect("two free"));
                let mut pair = vec![from, other];
                pair.sort_unstable();
                plan.added.push(pair);
            }
            _ => break,
        }
    }
    plan
}

/// The capacity bound of the RAIDX `spec` describes, in bytes, with what it
/// is in words (see the module text); None for other layouts. Fixed-width
/// RAIDX levels 1 and 10 keep two copies when their bundles are pairs: the
/// mirror bound is given for them (more copies hold less).
pub fn spec_bound(spec: &super::LayoutSpec) -> Option<(u64, &'static str)> {
    let super::LayoutKind::RaidX {
        chunks_per_bundle,
        level,
        ..
    } = &spec.kind
    else {
        return None;
    };
    let level = level.unwrap_or(RaidXLevel::default_for(*chunks_per_bundle));
    let chunk = spec.chunk_bytes.max(1);
    let chunks: Vec<u64> = spec.sizes.iter().map(|s| s / chunk).collect();
    let words = match level {
        RaidXLevel::X0 => "all bytes",
        RaidXLevel::X5 => "all bytes but the largest member's",
        RaidXLevel::X6 => "all bytes but the two largest members'",
        RaidXLevel::X1 | RaidXLevel::X10 => {
            "half of all bytes, at most all but the largest member's"
        }
    };
    Some((capacity_bound(&chunks, level) * chunk, words))
}

/// Data chunks `bundles` hold at `level`.
pub fn data_chunks(bundles: &[Vec<Place>], level: RaidXLevel) -> u64 {
    bundles
        .iter()
        .map(|b| data_in_bundle(level, b.len()) as u64)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const LEVELS: [RaidXLevel; 5] = [
        RaidXLevel::X0,
        RaidXLevel::X1,
        RaidXLevel::X5,
        RaidXLevel::X6,
        RaidXLevel::X10,
    ];

    /// Every bundle on distinct members, at least the level's narrowest,
    /// every slot inside its member and used once.
    fn check(chunks: &[u64], level: RaidXLevel, bundles: &[Vec<Place>]) {
        let mut used: Vec<Vec<bool>> = chunks.iter().map(|&c| vec![false; c as usize]).collect();
        for (b, places) in bundles.iter().enumerate() {
            assert!(places.len() >= width_min(level), "bundle {b}: {places:?}");
            for (i, &(m, slot)) in places.iter().enumerate() {
                assert!(
                    places[..i].iter().all(|p| p.0 != m),
                    "bundle {b} has two chunks on member {m}"
                );
                let cell = &mut used[m][slot as usize];
                assert!(!*cell, "slot {slot} of member {m} is used twice");
                *cell = true;
            }
        }
    }

    #[test]
    fn the_issue_sets_reach_the_bound() {
        // In TiB, 1 TiB chunks: (sizes, T − L).
        for (sizes, one) in [
            (vec![4u64, 6, 6, 8], 16u64),
            (vec![8; 8], 56),
            (vec![2, 3, 4, 8, 8], 17),
            (vec![4, 4, 6, 6, 12, 12], 32),
        ] {
            assert_eq!(capacity_bound(&sizes, RaidXLevel::X5), one);
            let b = place(&sizes, RaidXLevel::X5);
            check(&sizes, RaidXLevel::X5, &b);
            assert_eq!(data_chunks(&b, RaidXLevel::X5), one, "{sizes:?}");
        }
        // Double parity: all but the two largest; mirrors: half, or all but
        // the largest.
        let sizes = [4u64, 4, 6, 6, 12, 12];
        assert_eq!(capacity_bound(&sizes, RaidXLevel::X6), 20);
        assert_eq!(
            data_chunks(&place(&sizes, RaidXLevel::X6), RaidXLevel::X6),
            20
        );
        assert_eq!(capacity_bound(&[1, 1, 10], RaidXLevel::X1), 2);
        assert_eq!(
            data_chunks(&place(&[1, 1, 10], RaidXLevel::X1), RaidXLevel::X1),
            2
        );
        assert_eq!(capacity_bound(&[3, 3, 3], RaidXLevel::X10), 4);
        let sizes = [10u64, 1, 1, 1, 1];
        assert_eq!(
            data_chunks(&place(&sizes, RaidXLevel::X10), RaidXLevel::X10),
            4
        );
        // Too few members for the level: nothing.
        assert_eq!(capacity_bound(&[5, 5], RaidXLevel::X6), 0);
        assert!(place(&[5, 5], RaidXLevel::X6).is_empty());
    }

    /// Grow `places` (over `caps`) to `after` and apply the plan.
    fn grown(places: &[Vec<Place>], after: &[u64], level: RaidXLevel) -> Vec<Vec<Place>> {
        let g = plan_grow(places, after, level).unwrap();
        let mut out = places.to_vec();
        for m in &g.moves {
            assert_eq!(out[m.bundle as usize][m.pos], m.from);
            out[m.bundle as usize][m.pos] = m.to;
        }
        for &(b, p) in &g.widened {
            out[b as usize].push(p);
        }
        out.extend(g.added);
        out
    }

    #[test]
    fn adding_a_disk_to_four_equal_ones_reaches_the_new_bound() {
        // 4 x 4T then a fifth 4T: new bundles alone would hold 15.2T of 16T.
        let mut caps = vec![4000u64; 4];
        let mut t = place(&caps, RaidXLevel::X5);
        assert_eq!(data_chunks(&t, RaidXLevel::X5), 12000);
        caps.push(4000);
        t = grown(&t, &caps, RaidXLevel::X5);
        check(&caps, RaidXLevel::X5, &t);
        assert_eq!(data_chunks(&t, RaidXLevel::X5), 16000);
        // And 4T, 4T, 6T, 6T, 12T + a 12T (SHR's case): 32T.
        let mut caps = vec![4u64, 4, 6, 6, 12];
        let mut t = place(&caps, RaidXLevel::X5);
        caps.push(12);
        t = grown(&t, &caps, RaidXLevel::X5);
        check(&caps, RaidXLevel::X5, &t);
        assert_eq!(data_chunks(&t, RaidXLevel::X5), 32);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Random sequences of adding a member or enlarging one, from any
        /// 2..16 members of sizes spread up to 100x: after every step the
        /// table is valid and within 0.99 of the bound for the new sizes
        /// (every level: mirrors gain pairs, moving chunks onto the member
        /// with room).
        #[test]
        fn growing_keeps_the_bound(
            sizes in prop::collection::vec(100u64..10_000, 2..=12),
            steps in prop::collection::vec((any::<bool>(), 0usize..16, 100u64..10_000), 1..5),
        ) {
            for level in LEVELS {
                let mut caps = sizes.clone();
                let mut t = place(&caps, level);
                for &(add, m, size) in &steps {
                    if add && caps.len() < 16 {
                        caps.push(size);
                    } else {
                        let m = m % caps.len();
                        caps[m] += size;
                    }
                    t = grown(&t, &caps, level);
                    check(&caps, level, &t);
                    let got = data_chunks(&t, level);
                    let bound = capacity_bound(&caps, level);
                    prop_assert!(got <= bound, "{level:?} {caps:?}: {got} over {bound}");
                    prop_assert!(
                        got as f64 >= 0.99 * bound as f64 && got + caps.len() as u64 >= bound,
                        "{level:?} {sizes:?} -> {caps:?}: {got} of {bound}"
                    );
                }
            }
        }

        /// Any 2..16 members, sizes spread up to 100x: every level's
        /// placement is a valid table within one chunk per member of its
        /// bound (0.99 of it once members hold 100 chunks or more).
        #[test]
        fn every_size_set_reaches_the_bound(
            sizes in prop::collection::vec(100u64..10_000, 2..=16),
        ) {
            for level in LEVELS {
                let b = place(&sizes, level);
                check(&sizes, level, &b);
                let got = data_chunks(&b, level);
                let bound = capacity_bound(&sizes, level);
                prop_assert!(got <= bound, "{level:?} {sizes:?}: {got} over the bound {bound}");
                prop_assert!(
                    got + sizes.len() as u64 >= bound,
                    "{level:?} {sizes:?}: {got} of {bound}"
                );
                prop_assert!(got as f64 >= 0.99 * bound as f64, "{level:?} {sizes:?}: {got} of {bound}");
            }
        }
    }
}
