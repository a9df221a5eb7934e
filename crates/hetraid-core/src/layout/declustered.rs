//! Parity declustering with distributed spare space (issue 20; Holland and
//! Gibson 1992, OpenZFS dRAID): redundancy groups of width G (G − P data + P
//! parity chunks) laid over all N members so that a lost member's groups
//! draw on every survivor about equally, with S spare chunks in every row.
//!
//! Construction (permutation and shift, as dRAID; not a block design, which
//! exists only for some (N, G)):
//! - A **slice** is `rows_per_slice = G / gcd(G, N − S)` rows of one chunk per
//!   member, all under one permutation π of the members. Positions 0..N−S−1
//!   of each row carry group chunks, positions N−S..N−1 are spare chunks.
//!   Group j of the slice takes the G positions j·G .. j·G + G − 1 of the
//!   slice's positions read row after row; a group that runs past a row's
//!   end continues at the start of the next row, on other positions of the
//!   same permutation, so its G chunks are on G distinct members.
//! - Slice q's permutation is a base permutation σ_k, k = (q / N) mod K,
//!   shifted by t = q mod N: π(pos) = (σ_k(pos) + t) mod N. Over the N shifts
//!   of a base every member is a spare equally often and the members that
//!   share groups with member f are f + d for the base's pairwise
//!   differences d, so a failure's read load on member f + d is the count
//!   of difference d. The K ≤ `BASES_MAX` bases are chosen greedily from
//!   seeded random permutations to make those counts equal (within
//!   `BALANCE_GOAL`): over every K·N slices (`balance_cycle_rows`) each
//!   survivor's rebuild load is within that of the mean, for every single
//!   failure (core test `every_failure_loads_every_survivor_alike`).
//! - Stripe numbering follows the slices: consecutive logical chunks run
//!   over consecutive positions, so sequential I/O spreads over members.
//!
//! A lost chunk's spare home is in its own row (`spare_chunk`): the row's
//! spare positions, in failure order.

use super::{need_members, ChunkLoc, Layout, Redundancy, Stripe};
use crate::error::LayoutError;

/// Base permutations at most.
pub const BASES_MAX: usize = 64;
/// Random permutations tried for each base.
const CANDIDATES: usize = 48;
/// Stop adding bases when the difference counts are within this of their mean.
pub const BALANCE_GOAL: f64 = 0.05;
/// The seed of the base permutations (part of the format: changing it moves data).
const SEED: u64 = 0x6865_7472_6169_6431; // "hetraid1"

#[derive(Debug, Clone)]
pub struct Declustered {
    n: usize,
    g: usize,
    p: usize,
    s: usize,
    chunk: u64,
    rows_per_slice: u64,
    groups_per_slice: u64,
    slices: u64,
    bases: Vec<Vec<u16>>,
    /// Members rebuilt into spare space, in order: relocated[i]'s chunks
    /// live in spare slot i of their rows.
    relocated: Vec<usize>,
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// splitmix64: the seeded generator of the base permutations.
fn next(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Declustered {
    /// N members of `sizes`, groups of `width` with `parity` (1 or 2) parity
    /// chunks, `spares` spare chunks per row.
    pub fn new(
        sizes: &[u64],
        chunk: u64,
        width: usize,
        parity: usize,
        spares: usize,
    ) -> Result<Self, LayoutError> {
        let n = sizes.len();
        need_members("declustered", n, 3)?;
        if !(1..=2).contains(&parity) {
            return Err(LayoutError::Invalid(format!(
                "declustered --parity {parity}: 1 or 2 parity chunks per group"
            )));
        }
        if width < parity + 1 {
            return Err(LayoutError::Invalid(format!(
                "declustered --width {width} must hold at least one data chunk beside {parity} parity"
            )));
        }
        if width + spares > n {
            return Err(LayoutError::Invalid(format!(
                "declustered needs --width + --spares ({width} + {spares}) members at most; there are {n}"
            )));
        }
        let cols = (n - spares) as u64;
        let rows_per_slice = width as u64 / gcd(width as u64, cols);
        let groups_per_slice = rows_per_slice * cols / width as u64;
        let min = *sizes.iter().min().unwrap();
        let slices = min / chunk / rows_per_slice;
        if slices == 0 {
            let m = sizes.iter().position(|s| *s == min).unwrap();
            return Err(LayoutError::MemberTooSmall {
                member: m,
                size: min,
                need: chunk * rows_per_slice,
            });
        }
        let mut l = Self {
            n,
            g: width,
            p: parity,
            s: spares,
            chunk,
            rows_per_slice,
            groups_per_slice,
            slices,
            bases: Vec::new(),
            relocated: Vec::new(),
        };
        l.bases = l.choose_bases();
        Ok(l)
    }

    pub fn width(&self) -> usize {
        self.g
    }

    pub fn spares(&self) -> usize {
        self.s
    }

    /// Rows after which every member has been loaded alike by any failure.
    pub fn balance_cycle_rows(&self) -> u64 {
        self.bases.len() as u64 * self.n as u64 * self.rows_per_slice
    }

    /// Positions (within a slice's sequence) of group j's G columns.
    fn group_positions(&self, j: u64) -> impl Iterator<Item = (u64, usize)> + '_ {
        let cols = (self.n - self.s) as u64;
        (0..self.g as u64).map(move |c| {
            let k = j * self.g as u64 + c;
            (k / cols, (k % cols) as usize)
        })
    }

    /// The member at position `pos` of slice `q`.
    fn member_at(&self, q: u64, pos: usize) -> usize {
        let k = (q / self.n as u64) as usize % self.bases.len();
        (self.bases[k][pos] as usize + (q % self.n as u64) as usize) % self.n
    }

    /// The columns a rebuild reads when column `lost` of a group is lost:
    /// every other column with one parity; with two, data and P (Q is
    /// recomputed from the data when Q is the lost one).
    fn read_columns(&self, lost: usize) -> impl Iterator<Item = usize> + '_ {
        let q = (self.p == 2).then_some(self.g - 1);
        (0..self.g).filter(move |&c| c != lost && (Some(lost) == q || Some(c) != q))
    }

    /// Difference counts of one base: for a lost chunk at position a, each
    /// chunk read at position b adds one to d = (σ(b) − σ(a)) mod N.
    fn differences(&self, sigma: &[u16]) -> Vec<u64> {
        let mut h = vec![0u64; self.n];
        for j in 0..self.groups_per_slice {
            let pos: Vec<usize> = self.group_positions(j).map(|(_, p)| p).collect();
            for lost in 0..self.g {
                for c in self.read_columns(lost) {
                    let d = (sigma[pos[c]] as usize + self.n - sigma[pos[lost]] as usize) % self.n;
                    h[d] += 1;
                }
            }
        }
        h
    }

    /// Spread of the counts over d = 1..N−1: (max − min) / mean / 2.
    fn spread(h: &[u64]) -> f64 {
        let d = &h[1..];
        let mean = d.iter().sum::<u64>() as f64 / d.len() as f64;
        let (lo, hi) = (
            *d.iter().min().unwrap() as f64,
            *d.iter().max().unwrap() as f64,
        );
        if mean == 0.0 {
            return 0.0;
        }
        (hi - lo) / mean / 2.0
    }

    /// Greedy: add the candidate that flattens the summed difference counts
    /// most, until they are within `BALANCE_GOAL` or `BASES_MAX` bases.
    fn choose_bases(&self) -> Vec<Vec<u16>> {
        let mut x = SEED
            ^ (self.n as u64) << 32
            ^ (self.g as u64) << 16
            ^ (self.s as u64) << 8
            ^ self.p as u64;
        let mut sum = vec![0u64; self.n];
        let mut bases = Vec::new();
        // Bounded: at most BASES_MAX rounds of CANDIDATES permutations.
        for _ in 0..BASES_MAX {
            let mut best: Option<(f64, Vec<u16>, Vec<u64>)> = None;
            for _ in 0..CANDIDATES {
                let mut sigma: Vec<u16> = (0..self.n as u16).collect();
                for i in (1..self.n).rev() {
                    let j = (next(&mut x) % (i as u64 + 1)) as usize;
                    sigma.swap(i, j);
                }
                let h = self.differences(&sigma);
                let total: Vec<u64> = sum.iter().zip(&h).map(|(a, b)| a + b).collect();
                let sp = Self::spread(&total);
                if best.as_ref().is_none_or(|b| sp < b.0) {
                    best = Some((sp, sigma, total));
                }
            }
            let (sp, sigma, total) = best.expect("CANDIDATES > 0");
            bases.push(sigma);
            sum = total;
            if sp <= BALANCE_GOAL {
                break;
            }
        }
        bases
    }

    /// Spare slot `slot` of the row at byte `offset`: the member at the
    /// row's position N − S + slot.
    fn spare_home(&self, offset: u64, slot: usize) -> ChunkLoc {
        let q = offset / self.chunk / self.rows_per_slice;
        ChunkLoc {
            member: self.member_at(q, self.n - self.s + slot),
            offset,
        }
    }

    /// Where the chunk at `lost` is rebuilt into spare space when it is the
    /// `slot`-th failure relocated (0 first): the row's spare position
    /// N − S + slot. None past the spares or for a spare chunk itself.
    pub fn spare_chunk(&self, lost: ChunkLoc, slot: usize) -> Option<ChunkLoc> {
        if slot >= self.s || lost.member >= self.n {
            return None;
        }
        let q = lost.offset / self.chunk / self.rows_per_slice;
        if q >= self.slices {
            return None;
        }
        // The lost chunk must hold group data (not be a spare chunk).
        let is_spare = (self.n - self.s..self.n).any(|pos| self.member_at(q, pos) == lost.member);
        if is_spare {
            return None;
        }
        Some(self.spare_home(lost.offset, slot))
    }

    /// A row's spare slots through the failures `failures` (in order): each
    /// failure loses the chunk its member holds in the row (its own, or a
    /// rebuilt one in its spare slot), which goes to the first slot whose
    /// member is alive and empty. Returns, for the tracked chunk (the one
    /// originally on `track`), the member holding it at the end, and the
    /// member that received the last failure's lost chunk (None: the last
    /// failure lost nothing in this row). Bounded: failures x S steps.
    fn row_walk(&self, q: u64, failures: &[usize], track: usize) -> (usize, Option<usize>) {
        let spare: Vec<usize> = (0..self.s)
            .map(|k| self.member_at(q, self.n - self.s + k))
            .collect();
        // Slot k holds the chunk first placed on member held[k].
        let mut held: Vec<Option<usize>> = vec![None; self.s];
        let mut at = track;
        let mut last = None;
        for (j, &f) in failures.iter().enumerate() {
            let dead = &failures[..=j];
            let lost = match spare.iter().position(|&m| m == f) {
                Some(k) => held[k].take(),
                None => Some(f),
            };
            last = None;
            if let Some(orig) = lost {
                if let Some(k) =
                    (0..self.s).find(|&k| held[k].is_none() && !dead.contains(&spare[k]))
                {
                    held[k] = Some(orig);
                    last = Some(spare[k]);
                    if orig == track {
                        at = spare[k];
                    }
                }
            }
        }
        (at, last)
    }

    /// `loc` (a chunk's place before any failure) after the relocations.
    fn relocate(&self, loc: ChunkLoc) -> ChunkLoc {
        if self.relocated.is_empty() {
            return loc;
        }
        let q = loc.offset / self.chunk / self.rows_per_slice;
        ChunkLoc {
            member: self.row_walk(q, &self.relocated, loc.member).0,
            offset: loc.offset,
        }
    }
}

impl Layout for Declustered {
    fn name(&self) -> String {
        "declustered".into()
    }
    fn members(&self) -> usize {
        self.n
    }
    fn chunk_bytes(&self) -> u64 {
        self.chunk
    }
    fn stripe_count(&self) -> u64 {
        self.slices * self.groups_per_slice
    }
    fn data_per_stripe(&self) -> usize {
        self.g - self.p
    }
    fn redundancy(&self) -> Redundancy {
        Redundancy::Parity { count: self.p }
    }
    fn stripe(&self, s: u64) -> Stripe {
        let q = s / self.groups_per_slice;
        let j = s % self.groups_per_slice;
        let locs: Vec<ChunkLoc> = self
            .group_positions(j)
            .map(|(row, pos)| {
                self.relocate(ChunkLoc {
                    member: self.member_at(q, pos),
                    offset: (q * self.rows_per_slice + row) * self.chunk,
                })
            })
            .collect();
        let k = self.g - self.p;
        Stripe {
            index: s,
            data: locs[..k].to_vec(),
            parity: locs[k..].to_vec(),
            mirrors: vec![],
        }
    }
    fn parity_cycle(&self) -> u64 {
        self.stripe_count()
    }
    fn spare_slots(&self) -> usize {
        self.s - self.relocated.len()
    }
    fn distributed_spare(&self) -> bool {
        true
    }
    fn spare_location(&self, lost: ChunkLoc, _target: usize, _slot: usize) -> Option<ChunkLoc> {
        // The layout, not the scheduler, picks the member: the first live,
        // empty spare of the lost chunk's row (`row_walk`).
        if self.relocated.len() >= self.s || lost.member >= self.n {
            return None;
        }
        let q = lost.offset / self.chunk / self.rows_per_slice;
        if q >= self.slices {
            return None;
        }
        let mut failures = self.relocated.clone();
        failures.push(lost.member);
        let member = self.row_walk(q, &failures, usize::MAX).1?;
        Some(ChunkLoc {
            member,
            offset: lost.offset / self.chunk * self.chunk,
        })
    }
    fn spare_extent(&self, lost: ChunkLoc) -> Option<(u64, u64)> {
        Some((lost.offset / self.chunk * self.chunk, self.chunk))
    }
    fn rebuild_spread(&self) -> u64 {
        // A group touches G of N members; four times N/G stripes a batch
        // (measured with `DECLUSTERED_BATCHES_IN_FLIGHT`, experiment 12).
        4 * (self.n / self.g).max(1) as u64
    }
    fn relocated(&self, failed: &[usize]) -> Option<Box<dyn Layout>> {
        let mut l = self.clone();
        l.relocated.extend_from_slice(failed);
        (l.relocated.len() <= self.s).then(|| Box::new(l) as Box<dyn Layout>)
    }

    fn restored(&self) -> Option<(usize, Box<dyn Layout>)> {
        let mut l = self.clone();
        let m = l.relocated.pop()?;
        Some((m, Box::new(l)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every single failure loads every survivor alike: over a balance
    /// cycle, the chunks each survivor reads for the failed member's groups
    /// are within 10 % of their mean (the bound; the bases aim at
    /// 5 %), for one and two parities, widths from 2 to 17.
    #[test]
    fn every_failure_loads_every_survivor_alike() {
        for (n, g, p, s) in [
            (12, 4, 1, 1),
            (12, 5, 2, 2),
            (25, 5, 1, 1),
            (30, 9, 2, 1),
            (90, 2, 1, 1),
            (90, 5, 1, 2),
            (90, 9, 1, 2),
            (90, 17, 2, 2),
        ] {
            let probe = Declustered::new(&vec![1 << 30; n], 4096, g, p, s).unwrap();
            let rows = probe.balance_cycle_rows();
            let l = Declustered::new(&vec![rows * 4096; n], 4096, g, p, s).unwrap();
            assert_eq!(l.slices * l.rows_per_slice, rows, "{n} {g}");
            let mut load = vec![vec![0u64; n]; n];
            for st in 0..l.stripe_count() {
                let cols: Vec<ChunkLoc> = l.stripe(st).all().collect();
                for lost in 0..g {
                    for c in l.read_columns(lost) {
                        load[cols[lost].member][cols[c].member] += 1;
                    }
                }
            }
            for (f, row) in load.iter().enumerate() {
                let survivors: Vec<u64> = (0..n).filter(|&v| v != f).map(|v| row[v]).collect();
                let mean = survivors.iter().sum::<u64>() as f64 / survivors.len() as f64;
                for (v, &x) in survivors.iter().enumerate() {
                    assert!(
                        (x as f64 / mean - 1.0).abs() <= 0.10,
                        "N {n} G {g} P {p} S {s}: failed {f}, survivor {v} reads {x}, mean {mean:.1} ({} bases)",
                        l.bases.len()
                    );
                }
            }
        }
    }

    /// Spare chunks: each row keeps S, every member is a spare alike over
    /// the N shifts, and a lost chunk's spare home is in its own row on
    /// another member.
    #[test]
    fn spare_chunks_are_spread_and_in_the_lost_chunks_row() {
        let (n, g, s) = (10, 4, 2);
        let l = Declustered::new(&vec![1 << 24; n], 4096, g, 1, s).unwrap();
        let mut used = vec![vec![false; n]; (l.slices * l.rows_per_slice) as usize];
        for st in 0..l.stripe_count() {
            for c in l.stripe(st).all() {
                let r = (c.offset / 4096) as usize;
                assert!(!used[r][c.member], "row {r} member {} twice", c.member);
                used[r][c.member] = true;
            }
        }
        let mut spare_count = vec![0u64; n];
        for row in &used {
            assert_eq!(row.iter().filter(|u| !**u).count(), s);
            for (m, u) in row.iter().enumerate() {
                if !u {
                    spare_count[m] += 1;
                }
            }
        }
        let full_cycles = l.slices / n as u64 * n as u64;
        assert!(full_cycles > 0);
        let st = l.stripe(3);
        let lost = st.data[0];
        for slot in 0..s {
            let home = l.spare_chunk(lost, slot).unwrap();
            assert_eq!(home.offset, lost.offset);
            assert_ne!(home.member, lost.member);
            assert!(!used[(home.offset / 4096) as usize][home.member]);
        }
        assert_eq!(l.spare_chunk(lost, s), None);
        // Spares spread: in the first whole number of shift cycles, alike.
        let per = (full_cycles * l.rows_per_slice) as usize;
        let mut early = vec![0u64; n];
        for row in &used[..per] {
            for (m, u) in row.iter().enumerate() {
                if !u {
                    early[m] += 1;
                }
            }
        }
        assert!(early.iter().all(|&c| c == early[0]), "{early:?}");
    }

    /// After a rebuild into spare space the relocated layout has no chunk on
    /// the failed member, every chunk is where the rebuild put it (its row's
    /// spare), and no two chunks share a place; a second failure takes the
    /// next spare slot, past the last none is left.
    #[test]
    fn relocation_moves_the_failed_members_chunks_into_their_rows_spares() {
        let (n, g, s) = (11, 4, 2);
        let l = Declustered::new(&vec![1 << 22; n], 4096, g, 1, s).unwrap();
        let one = l.relocated(&[3]).unwrap();
        let two = l.relocated(&[3, 7]).unwrap();
        assert!(l.relocated(&[3, 7, 1]).is_none());
        assert_eq!(
            (l.spare_slots(), one.spare_slots(), two.spare_slots()),
            (2, 1, 0)
        );
        for (lay, gone) in [(&one, vec![3]), (&two, vec![3, 7])] {
            let mut seen = std::collections::HashSet::new();
            for st in 0..lay.stripe_count() {
                let a: Vec<ChunkLoc> = lay.stripe(st).all().collect();
                let b: Vec<ChunkLoc> = l.stripe(st).all().collect();
                for (x, y) in a.iter().zip(&b) {
                    assert!(!gone.contains(&x.member), "stripe {st}: {x:?}");
                    assert!(seen.insert(*x), "stripe {st}: {x:?} twice");
                    if x != y {
                        assert_eq!(x.offset, y.offset, "stays in its row");
                        assert!(gone.contains(&y.member));
                    }
                }
            }
        }
        // The planner's redirect for the first failure lands where the
        // relocated layout expects it.
        let st = (0..l.stripe_count())
            .find(|&st| l.stripe(st).all().any(|c| c.member == 3))
            .unwrap();
        let lost = l.stripe(st).all().find(|c| c.member == 3).unwrap();
        let home = one
            .stripe(st)
            .all()
            .find(|c| c.offset == lost.offset && !l.stripe(st).all().any(|o| o == *c))
            .unwrap();
        assert_eq!(l.spare_location(lost, usize::MAX, 0), Some(home));
    }

    #[test]
    fn bad_parameters_are_refused() {
        let s = vec![1 << 20; 8];
        assert!(Declustered::new(&s, 4096, 8, 1, 1).is_err());
        assert!(Declustered::new(&s, 4096, 4, 3, 1).is_err());
        assert!(Declustered::new(&s, 4096, 2, 2, 1).is_err());
        assert!(Declustered::new(&s[..2], 4096, 2, 1, 0).is_err());
        assert!(Declustered::new(&[4096; 8], 4096, 3, 1, 1).is_err());
        assert!(Declustered::new(&s, 4096, 7, 1, 1).is_ok());
    }
}
