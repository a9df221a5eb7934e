//! Growing a RAIDX array ([Fekete, Varki]: "add a device: extend the table, move
//! chunks so new bundles can form"): from the bundles an array has and its
//! members' capacities after the change (a member added, or one replaced by
//! a larger one), which chunks move where and which bundles are added, so
//! that the array holds the most bundles the new capacities allow
//! ([`max_bundles`]) and every existing bundle keeps its index and the role
//! of each of its positions (data keeps its logical place; only where a
//! chunk lives changes). Pure: the engine copies the chunks and records the
//! table; this decides.
//!
//! How: a fresh allocation of the new bundle count over the new capacities
//! says how many chunks each member should hold in the end (`target`). A
//! member holding more than its target sheds the excess to members holding
//! fewer (first to those that would otherwise need more new chunks than
//! there are new bundles — the new member above all), never into a bundle
//! that already has a chunk there. The new bundles then take, on each
//! member, what its target leaves, c members each, the ones with the most
//! left first.

use super::raidx::max_bundles;
use crate::error::LayoutError;

/// A chunk's place: (member, slot), the slot in chunks from the start of
/// the member's data area.
pub type Place = (usize, u64);

/// One chunk relocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Move {
    pub bundle: u64,
    /// Position within the bundle (its role: data index, parity...).
    pub pos: usize,
    pub from: Place,
    pub to: Place,
}

/// What growing does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrowPlan {
    /// In order; a move's target slot is free when it runs (it may be one
    /// an earlier move of the plan freed).
    pub moves: Vec<Move>,
    /// Bundles appended after the existing ones, positions in member order.
    pub added: Vec<Vec<Place>>,
}

impl GrowPlan {
    /// The bundles after the plan: `bundles` with the moves applied, then the
    /// added ones.
    pub fn apply(&self, bundles: &[Vec<Place>]) -> Vec<Vec<Place>> {
        let mut out = bundles.to_vec();
        for m in &self.moves {
            debug_assert_eq!(out[m.bundle as usize][m.pos], m.from);
            out[m.bundle as usize][m.pos] = m.to;
        }
        out.extend(self.added.iter().cloned());
        out
    }
}

/// Check a table: every bundle of `c` chunks (`c` 0: any width from 1) on
/// distinct members, every slot inside its member and used once.
pub fn check_table(bundles: &[Vec<Place>], caps: &[u64], c: usize) -> Result<(), String> {
    let mut used = std::collections::HashSet::new();
    for (b, places) in bundles.iter().enumerate() {
        if (c != 0 && places.len() != c) || places.is_empty() {
            return Err(format!("bundle {b} has {} chunks, not {c}", places.len()));
        }
        for (i, &(m, slot)) in places.iter().enumerate() {
            if m >= caps.len() || slot >= caps[m] {
                return Err(format!(
                    "bundle {b} puts a chunk at slot {slot} of member {m}, outside it"
                ));
            }
            if places[..i].iter().any(|p| p.0 == m) {
                return Err(format!("bundle {b} has two chunks on member {m}"));
            }
            if !used.insert((m, slot)) {
                return Err(format!("slot {slot} of member {m} is used twice"));
            }
        }
    }
    Ok(())
}

/// Plan growing `bundles` (a valid table of bundles of `c` chunks) to the
/// member capacities `caps` (in chunks; members may only grow, new ones are
/// appended). Errors when a capacity shrank or the plan cannot be made.
pub fn plan_grow(bundles: &[Vec<Place>], caps: &[u64], c: usize) -> Result<GrowPlan, LayoutError> {
    let n = caps.len();
    let mut used = vec![0u64; n];
    let mut taken: Vec<Taken> = vec![Taken::default(); n];
    for places in bundles {
        for &(m, slot) in places {
            if m >= n || slot >= caps[m] {
                return Err(LayoutError::Invalid(format!(
                    "member {m} would lose slot {slot}, which holds data: members can only grow"
                )));
            }
            used[m] += 1;
            taken[m].insert(slot);
        }
    }
    let b_now = bundles.len() as u64;
    let b_after = max_bundles(caps, c);
    if b_after < b_now {
        return Err(LayoutError::Invalid(format!(
            "the members hold {b_now} bundles but the new sizes allow only {b_after}"
        )));
    }
    let new = b_after - b_now;
    // Chunks each member holds in the end: a fresh allocation's counts.
    let target = fresh_counts(caps, c, b_after);
    // How many existing chunks each member keeps in the end (`keep`): as
    // close to what it holds as the targets allow — at most its target, and
    // at least its target less the new bundle count (a member joins each new
    // bundle once) — adjusted so the existing chunks all have a place.
    let total = bundles.len() as u64 * c as u64;
    let lo: Vec<u64> = (0..n).map(|m| target[m].saturating_sub(new)).collect();
    let mut keep: Vec<u64> = (0..n).map(|m| used[m].clamp(lo[m], target[m])).collect();
    let mut sum: u64 = keep.iter().sum();
    // Bounded: each step moves `sum` one closer to `total`.
    while sum > total {
        // Give up a kept chunk where the member keeps the most above its floor.
        let m = (0..n)
            .filter(|&m| keep[m] > lo[m])
            .max_by_key(|&m| (keep[m] - lo[m], std::cmp::Reverse(m)))
            .expect("the targets hold every chunk");
        keep[m] -= 1;
        sum -= 1;
    }
    while sum < total {
        let m = (0..n)
            .filter(|&m| keep[m] < target[m])
            .max_by_key(|&m| (target[m] - keep[m], std::cmp::Reverse(m)))
            .expect("the targets hold every chunk");
        keep[m] += 1;
        sum += 1;
    }
    let mut count = used.clone();
    let moves = relocate(bundles, caps, &keep, &mut taken, &mut count)?;
    // New bundles: what each member's target leaves, c members a bundle,
    // the most left first (ties: lowest member), as the fresh allocator.
    let mut left: Vec<u64> = (0..n).map(|m| target[m] - count[m]).collect();
    let mut added = Vec::with_capacity(new as usize);
    let mut order: Vec<usize> = (0..n).collect();
    for _ in 0..new {
        order.sort_by(|&a, &b| left[b].cmp(&left[a]).then(a.cmp(&b)));
        let mut pick: Vec<usize> = order[..c].to_vec();
        if pick.iter().any(|&m| left[m] == 0) {
            return Err(LayoutError::Invalid(
                "the grown members cannot form the new bundles (a hetraid bug: please report the member sizes)".into(),
            ));
        }
        pick.sort_unstable();
        added.push(
            pick.iter()
                .map(|&m| {
                    left[m] -= 1;
                    (m, take_free(caps, m, &mut taken))
                })
                .collect(),
        );
    }
    Ok(GrowPlan { moves, added })
}

/// What re-redundancy after losing a member does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemovePlan {
    /// Bundles kept (the rest, at the end of the array, are dropped: the
    /// user shrank what sits above first).
    pub bundles: u64,
    /// In order. A move from the lost member is a reconstruction (its chunk
    /// is rebuilt from the rest of its bundle into the new place); the
    /// others are copies that make room.
    pub moves: Vec<Move>,
}

impl RemovePlan {
    /// The bundles after the plan.
    pub fn apply(&self, bundles: &[Vec<Place>]) -> Vec<Vec<Place>> {
        let mut out = bundles[..self.bundles as usize].to_vec();
        for m in &self.moves {
            debug_assert_eq!(out[m.bundle as usize][m.pos], m.from);
            out[m.bundle as usize][m.pos] = m.to;
        }
        out
    }
}

/// Plan re-placing the chunks of member `lost` (gone, or being removed) into
/// free slots on the other members, keeping the first `keep_bundles`
/// bundles (the array shrunk to them), so every kept bundle has `c` chunks
/// on distinct surviving members again — full redundancy before any
/// replacement arrives ([Fekete, Varki]). `caps` are the members' capacities in
/// chunks (the lost one's is ignored). Refused, saying how far to shrink,
/// when the survivors cannot hold that many bundles.
pub fn plan_remove(
    bundles: &[Vec<Place>],
    caps: &[u64],
    c: usize,
    lost: usize,
    keep_bundles: u64,
) -> Result<RemovePlan, LayoutError> {
    let n = caps.len();
    if lost >= n {
        return Err(LayoutError::Invalid(format!(
            "member {lost} does not exist"
        )));
    }
    if keep_bundles > bundles.len() as u64 {
        return Err(LayoutError::Invalid(format!(
            "the array holds {} bundles; it cannot keep {keep_bundles}",
            bundles.len()
        )));
    }
    let mut caps_after = caps.to_vec();
    caps_after[lost] = 0;
    let most = max_bundles(&caps_after, c);
    if keep_bundles > most {
        return Err(LayoutError::Invalid(format!(
            "the surviving members can hold {most} bundles, not {keep_bundles}: shrink the array to at most {most} bundles first"
        )));
    }
    let kept = &bundles[..keep_bundles as usize];
    let mut count = vec![0u64; n];
    let mut taken: Vec<Taken> = vec![Taken::default(); n];
    for places in kept {
        for &(m, slot) in places {
            count[m] += 1;
            if m != lost {
                taken[m].insert(slot);
            }
        }
    }
    // The lost member keeps nothing; every other member keeps what it holds
    // and takes a share of the lost chunks where it has room (at most one
    // chunk per bundle: at most `keep_bundles`), the most room first.
    let hi: Vec<u64> = (0..n)
        .map(|m| {
            if m == lost {
                0
            } else {
                caps[m].min(keep_bundles)
            }
        })
        .collect();
    let mut keep: Vec<u64> = (0..n).map(|m| count[m].min(hi[m])).collect();
    let total = keep_bundles * c as u64;
    let mut sum: u64 = keep.iter().sum();
    // Bounded: each step adds one.
    while sum < total {
        let m = (0..n)
            .filter(|&m| keep[m] < hi[m])
            .max_by_key(|&m| (hi[m] - keep[m], std::cmp::Reverse(m)))
            .expect("max_bundles says the survivors hold them");
        keep[m] += 1;
        sum += 1;
    }
    let moves = relocate(kept, caps, &keep, &mut taken, &mut count)?;
    Ok(RemovePlan {
        bundles: keep_bundles,
        moves,
    })
}

/// Move chunks so each member holds `keep` of them (from `count`, updated):
/// donors (above) hand chunks to receivers (below) along paths of members —
/// u passes a chunk of a bundle v is not in to v, and v, keeping its count,
/// passes one on in turn. Usually a path is one step; when every receiver
/// shares every bundle of the donor, a breadth-first search over members
/// finds a longer one. A path is carried out from its receiver end, so each
/// member on it takes the chunk into the slot it has just given up; the
/// receiver takes its lowest free slot (`taken` tracks them).
fn relocate(
    bundles: &[Vec<Place>],
    caps: &[u64],
    keep: &[u64],
    taken: &mut [Taken],
    count: &mut [u64],
) -> Result<Vec<Move>, LayoutError> {
    let n = caps.len();
    let total: u64 = count.iter().sum();
    let mut current: Vec<Vec<Place>> = bundles.to_vec();
    // Per member, its chunks: slot -> bundle.
    let mut of_member: Vec<std::collections::BTreeMap<u64, u64>> = vec![Default::default(); n];
    for (b, places) in current.iter().enumerate() {
        for &(m, slot) in places {
            of_member[m].insert(slot, b as u64);
        }
    }
    let mut moves: Vec<Move> = Vec::new();
    // Bounded: each round moves one chunk off a donor for good.
    for _ in 0..=total {
        let Some(m) = (0..n).find(|&m| count[m] > keep[m]) else {
            break;
        };
        let receiver = |r: usize| count[r] < keep[r];
        let path = find_path(m, n, &current, &of_member, &receiver).ok_or_else(|| {
            LayoutError::Invalid(format!(
                "no member can take a chunk from member {m} (a hetraid bug: please report the member sizes)"
            ))
        })?;
        // path: [(from, to, bundle)], from m to a receiver.
        let mut vacated: Option<u64> = None;
        for &(from, to, b) in path.iter().rev() {
            let pos = current[b as usize]
                .iter()
                .position(|p| p.0 == from)
                .expect("the bundle holds the member");
            let slot = match vacated.take() {
                Some(s) => s,
                None => take_free(caps, to, taken),
            };
            let old = current[b as usize][pos];
            current[b as usize][pos] = (to, slot);
            of_member[from].remove(&old.1);
            of_member[to].insert(slot, b);
            moves.push(Move {
                bundle: b,
                pos,
                from: old,
                to: (to, slot),
            });
            vacated = Some(old.1);
        }
        // The donor's slot is free now.
        taken[m].remove(vacated.expect("a path has a step"));
        count[m] -= 1;
        count[path.last().unwrap().1] += 1;
    }
    if let Some(m) = (0..n).find(|&m| count[m] != keep[m]) {
        return Err(LayoutError::Invalid(format!(
            "member {m} ends with {} chunks, not {} (a hetraid bug: please report the member sizes)",
            count[m], keep[m]
        )));
    }
    Ok(moves)
}

/// A member's slots in use, with a mark below which every slot is in use
/// (so finding the lowest free one does not scan from 0 each time).
#[derive(Debug, Clone, Default)]
struct Taken {
    set: std::collections::BTreeSet<u64>,
    low: u64,
}

impl Taken {
    fn insert(&mut self, s: u64) {
        self.set.insert(s);
    }

    fn remove(&mut self, s: u64) {
        self.set.remove(&s);
        self.low = self.low.min(s);
    }
}

/// The lowest free slot of member `m` (bounded by its capacity), taken.
fn take_free(caps: &[u64], m: usize, taken: &mut [Taken]) -> u64 {
    let t = &mut taken[m];
    let mut s = t.low;
    // Bounded by the capacity: every slot below `low` is in use.
    while s < caps[m] && t.set.contains(&s) {
        s += 1;
    }
    assert!(s < caps[m], "the targets leave the member a free slot");
    t.set.insert(s);
    t.low = s + 1;
    s
}

/// A shortest path of members from `m` to one `receiver` accepts: steps
/// (from, to, bundle) where the bundle holds `from` and not `to`. Breadth
/// first over members (at most n of them), each step's bundle the last one
/// of `from` (slots at the end freed first).
fn find_path(
    m: usize,
    n: usize,
    bundles: &[Vec<Place>],
    of_member: &[std::collections::BTreeMap<u64, u64>],
    receiver: &dyn Fn(usize) -> bool,
) -> Option<Vec<(usize, usize, u64)>> {
    let mut prev: Vec<Option<(usize, u64)>> = vec![None; n];
    let mut seen = vec![false; n];
    seen[m] = true;
    let mut queue = std::collections::VecDeque::from([m]);
    while let Some(u) = queue.pop_front() {
        for v in 0..n {
            if seen[v] {
                continue;
            }
            // A bundle of u without v, the one whose chunk on u is last.
            let b = of_member[u]
                .values()
                .rev()
                .find(|&&b| !bundles[b as usize].iter().any(|p| p.0 == v));
            let Some(&b) = b else { continue };
            seen[v] = true;
            prev[v] = Some((u, b));
            if receiver(v) {
                let mut path = Vec::new();
                let mut at = v;
                while let Some((from, b)) = prev[at] {
                    path.push((from, at, b));
                    at = from;
                }
                path.reverse();
                return Some(path);
            }
            queue.push_back(v);
        }
    }
    None
}

/// Chunks per member of a fresh greedy allocation of `bundles` bundles of
/// `c` over `caps` (the allocator's rule: the c members with the most free
/// chunks take each bundle).
fn fresh_counts(caps: &[u64], c: usize, bundles: u64) -> Vec<u64> {
    let n = caps.len();
    let mut free = caps.to_vec();
    let mut count = vec![0u64; n];
    let mut idx: Vec<usize> = (0..n).collect();
    for _ in 0..bundles {
        idx.sort_by(|&a, &b| free[b].cmp(&free[a]).then(a.cmp(&b)));
        for &m in &idx[..c] {
            free[m] -= 1;
            count[m] += 1;
        }
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table a fresh array of `caps` gets (the allocator's).
    fn fresh(caps: &[u64], c: usize) -> Vec<Vec<Place>> {
        let x = super::super::raidx::RaidX::new(
            &caps.iter().map(|s| s * 4096).collect::<Vec<_>>(),
            4096,
            c,
            Some(if c == 1 {
                super::super::raidx::RaidXLevel::X0
            } else {
                super::super::raidx::RaidXLevel::X1
            }),
        )
        .unwrap();
        (0..crate::layout::Layout::stripe_count(&x))
            .map(|b| {
                x.bundle(b)
                    .iter()
                    .map(|l| (l.member, l.offset / 4096))
                    .collect()
            })
            .collect()
    }

    #[test]
    fn adding_a_disk_reaches_the_bound_and_moves_only_the_excess() {
        // 1 TB + 2 x 250 GB at c = 2 holds 500 GB of bundles; a third 250 GB
        // disk lets every chunk of the small ones pair with the big one's.
        let caps = [1000u64, 250, 250];
        let t = fresh(&caps, 2);
        assert_eq!(t.len(), 500);
        let grown = [1000u64, 250, 250, 500];
        let p = plan_grow(&t, &grown, 2).unwrap();
        let after = p.apply(&t);
        assert_eq!(after.len() as u64, max_bundles(&grown, 2));
        check_table(&after, &grown, 2).unwrap();
        // No bundle moved that did not have to (the 1 TB disk sheds nothing).
        assert!(
            p.moves.iter().all(|m| m.from.0 != 0),
            "{:?}",
            &p.moves[..3.min(p.moves.len())]
        );
    }

    #[test]
    fn random_growth_always_reaches_the_bound() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for _ in 0..400 {
            let c = 1 + next(4) as usize;
            let n = c + next(4) as usize;
            let mut caps: Vec<u64> = (0..n).map(|_| 1 + next(12)).collect();
            let mut t = fresh(&caps, c);
            for _ in 0..3 {
                // Add a member, or enlarge one.
                if next(2) == 0 {
                    caps.push(1 + next(16));
                } else {
                    let m = next(caps.len() as u64) as usize;
                    caps[m] += 1 + next(8);
                }
                let p = plan_grow(&t, &caps, c).unwrap_or_else(|e| panic!("{caps:?} c={c}: {e}"));
                let after = p.apply(&t);
                check_table(&after, &caps, c).unwrap_or_else(|e| panic!("{caps:?} c={c}: {e}"));
                assert_eq!(after.len() as u64, max_bundles(&caps, c), "{caps:?} c={c}");
                // Run in order, every move lands in a slot free at that
                // moment (a chunk never overwrites another).
                let mut occupied: std::collections::HashSet<Place> =
                    t.iter().flatten().copied().collect();
                for m in &p.moves {
                    assert!(
                        occupied.remove(&m.from),
                        "{m:?} moves a chunk that is not there"
                    );
                    assert!(occupied.insert(m.to), "{m:?} lands on a chunk");
                }
                t = after;
            }
        }
    }

    #[test]
    fn shrinking_is_refused() {
        let t = fresh(&[4, 4, 4], 2);
        assert!(plan_grow(&t, &[4, 4, 2], 2).is_err());
    }

    #[test]
    fn losing_a_member_re_places_its_chunks_on_the_survivors() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let mut refused = 0;
        for _ in 0..3000 {
            let c = 1 + next(4) as usize;
            let n = c + 1 + next(4) as usize;
            let caps: Vec<u64> = (0..n).map(|_| 1 + next(12)).collect();
            let t = fresh(&caps, c);
            let lost = next(n as u64) as usize;
            let mut survivors = caps.clone();
            survivors[lost] = 0;
            let most = max_bundles(&survivors, c).min(t.len() as u64);
            // Keeping more than the survivors hold is refused, saying so.
            if most < t.len() as u64 {
                let e = plan_remove(&t, &caps, c, lost, t.len() as u64).unwrap_err();
                assert!(e.to_string().contains("shrink"), "{e}");
                refused += 1;
            }
            let keep = most - next(most / 2 + 1);
            let p = plan_remove(&t, &caps, c, lost, keep)
                .unwrap_or_else(|e| panic!("{caps:?} c={c} lost {lost} keep {keep}: {e}"));
            let after = p.apply(&t);
            assert_eq!(after.len() as u64, keep);
            check_table(&after, &survivors, c)
                .unwrap_or_else(|e| panic!("{caps:?} c={c} lost {lost} keep {keep}: {e}"));
            // Run in order, no chunk lands on another.
            let mut occupied: std::collections::HashSet<Place> =
                t[..keep as usize].iter().flatten().copied().collect();
            for m in &p.moves {
                assert!(occupied.remove(&m.from));
                assert!(occupied.insert(m.to), "{m:?}");
            }
            // Only the lost member's chunks and what made room for them move.
            let lost_chunks = t[..keep as usize]
                .iter()
                .flatten()
                .filter(|p| p.0 == lost)
                .count();
            assert!(p.moves.iter().filter(|m| m.from.0 == lost).count() == lost_chunks);
        }
        assert!(refused > 100, "{refused}");
    }
}
