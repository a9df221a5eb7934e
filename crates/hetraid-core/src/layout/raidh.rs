//! RAIDH (thesis ch. 6): parity placed by integer weights with smooth weighted round
//! robin, so faster members hold proportionally more parity.

use super::{ChunkLoc, Layout, Redundancy, Stripe};
use crate::error::LayoutError;

/// The parity member of each stripe of one cycle of `sum(weights)` stripes.
///
/// Smooth weighted round robin, *add then pick*: every round adds w_d to each
/// counter c_d, picks the largest counter (ties: lowest index) and subtracts W from
/// it. (The thesis listing picks before adding, which can put the first parity on a
/// weight-0 member; [Wacha 2012] ch. 6 fixes the order.)
pub fn swrr_cycle(weights: &[u64]) -> Vec<usize> {
    let total: u64 = weights.iter().sum();
    let mut counters = vec![0i128; weights.len()];
    let mut out = Vec::with_capacity(total as usize);
    for _ in 0..total {
        for (c, w) in counters.iter_mut().zip(weights) {
            *c += *w as i128;
        }
        let mut best = 0;
        for d in 1..counters.len() {
            if counters[d] > counters[best] {
                best = d;
            }
        }
        counters[best] -= total as i128;
        out.push(best);
    }
    out
}

/// Longest parity cycle we accept (the cycle is materialised).
pub const MAX_CYCLE: u64 = 1 << 20;

/// One weight per member, not all zero, a cycle we can hold: the sum.
fn check_weights(sizes: &[u64], weights: &[u64]) -> Result<u64, LayoutError> {
    if weights.len() != sizes.len() {
        return Err(LayoutError::CountMismatch {
            what: "--weights".into(),
            got: weights.len(),
            members: sizes.len(),
        });
    }
    let total: u64 = weights.iter().sum();
    if total == 0 {
        return Err(LayoutError::ZeroWeights);
    }
    if total > MAX_CYCLE {
        return Err(LayoutError::Invalid(format!(
            "parity weights sum to {total}, above the {MAX_CYCLE} limit; divide them by a common factor"
        )));
    }
    Ok(total)
}

#[derive(Debug, Clone)]
pub struct RaidH {
    n: usize,
    chunk: u64,
    rows: u64,
    weights: Vec<u64>,
    cycle: Vec<usize>,
}

impl RaidH {
    pub fn new(sizes: &[u64], chunk: u64, weights: &[u64]) -> Result<Self, LayoutError> {
        let (n, rows) = super::classic::uniform_rows("raidh", sizes, chunk, 2)?;
        check_weights(sizes, weights)?;
        Ok(Self {
            n,
            chunk,
            rows,
            weights: weights.to_vec(),
            cycle: swrr_cycle(weights),
        })
    }

    pub fn weights(&self) -> &[u64] {
        &self.weights
    }

    pub fn cycle(&self) -> &[usize] {
        &self.cycle
    }
}

impl Layout for RaidH {
    fn data_loc(&self, s: u64, idx: usize) -> ChunkLoc {
        let pd = self.cycle[(s % self.cycle.len() as u64) as usize];
        ChunkLoc {
            member: if idx >= pd { idx + 1 } else { idx },
            offset: s * self.chunk,
        }
    }
    fn parity_cycle(&self) -> u64 {
        self.cycle.len() as u64
    }
    fn name(&self) -> String {
        "raidh".into()
    }
    row_accessors!();
    fn data_per_stripe(&self) -> usize {
        self.n - 1
    }
    fn redundancy(&self) -> Redundancy {
        Redundancy::Parity { count: 1 }
    }
    fn stripe(&self, s: u64) -> Stripe {
        let pd = self.cycle[(s % self.cycle.len() as u64) as usize];
        let at = |d| ChunkLoc {
            member: d,
            offset: s * self.chunk,
        };
        Stripe {
            index: s,
            data: (0..self.n).filter(|&d| d != pd).map(at).collect(),
            parity: vec![at(pd)],
            mirrors: vec![],
        }
    }
}

/// The P and Q members of each stripe of one cycle of `sum(weights)`
/// stripes: smooth weighted round robin with two distinct picks a stripe
/// (each round adds 2 w_d to every counter, then picks the largest for P
/// and the largest of the others for Q, subtracting W from each), so member
/// d holds 2 w_d of the cycle's 2 W parity chunks. No weight may exceed half
/// the sum (a member holds at most one of a stripe's two parities).
pub fn swrr_pairs(weights: &[u64]) -> Vec<(usize, usize)> {
    let total: u64 = weights.iter().sum();
    let mut counters = vec![0i128; weights.len()];
    let mut out = Vec::with_capacity(total as usize);
    let pick = |counters: &[i128], not: Option<usize>| {
        let mut best = usize::MAX;
        for d in 0..counters.len() {
            if Some(d) != not && (best == usize::MAX || counters[d] > counters[best]) {
                best = d;
            }
        }
        best
    };
    for _ in 0..total {
        for (c, w) in counters.iter_mut().zip(weights) {
            *c += 2 * *w as i128;
        }
        let p = pick(&counters, None);
        counters[p] -= total as i128;
        let q = pick(&counters, Some(p));
        counters[q] -= total as i128;
        out.push((p, q));
    }
    out
}

/// Weighted RAID6 ([Wacha 2012] ch. 6, "a second parity placed by the same weights"):
/// P and Q of each stripe on two distinct members picked by weight, the data
/// on the others in member order; an array with two SSDs can hold both
/// parities on them.
#[derive(Debug, Clone)]
pub struct RaidH6 {
    n: usize,
    chunk: u64,
    rows: u64,
    weights: Vec<u64>,
    cycle: Vec<(usize, usize)>,
}

impl RaidH6 {
    pub fn new(sizes: &[u64], chunk: u64, weights: &[u64]) -> Result<Self, LayoutError> {
        let (n, rows) = super::classic::uniform_rows("raidh6", sizes, chunk, 4)?;
        let total = check_weights(sizes, weights)?;
        if let Some(w) = weights.iter().find(|w| 2 * **w > total) {
            return Err(LayoutError::Invalid(format!(
                "raidh6 puts a stripe's P and Q on two members, so no weight may exceed half the sum; {w} is more than half of {total} (give another member weight too)"
            )));
        }
        Ok(Self {
            n,
            chunk,
            rows,
            weights: weights.to_vec(),
            cycle: swrr_pairs(weights),
        })
    }

    pub fn weights(&self) -> &[u64] {
        &self.weights
    }

    fn pq(&self, s: u64) -> (usize, usize) {
        self.cycle[(s % self.cycle.len() as u64) as usize]
    }
}

impl Layout for RaidH6 {
    fn data_loc(&self, s: u64, idx: usize) -> ChunkLoc {
        let (p, q) = self.pq(s);
        let (lo, hi) = (p.min(q), p.max(q));
        // The idx-th member that is neither P nor Q.
        let mut m = idx;
        if m >= lo {
            m += 1;
        }
        if m >= hi {
            m += 1;
        }
        ChunkLoc {
            member: m,
            offset: s * self.chunk,
        }
    }
    fn parity_cycle(&self) -> u64 {
        self.cycle.len() as u64
    }
    fn name(&self) -> String {
        "raidh6".into()
    }
    row_accessors!();
    fn data_per_stripe(&self) -> usize {
        self.n - 2
    }
    fn redundancy(&self) -> Redundancy {
        Redundancy::Parity { count: 2 }
    }
    fn stripe(&self, s: u64) -> Stripe {
        let (p, q) = self.pq(s);
        let at = |d| ChunkLoc {
            member: d,
            offset: s * self.chunk,
        };
        Stripe {
            index: s,
            data: (0..self.n).filter(|&d| d != p && d != q).map(at).collect(),
            parity: vec![at(p), at(q)],
            mirrors: vec![],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_distinct_and_proportional() {
        for w in [
            vec![1u64, 1, 1, 1, 1, 1],
            vec![0, 0, 0, 1, 1],
            vec![1, 1, 2, 2, 3, 3],
            vec![0, 1, 1, 1, 3],
        ] {
            let c = swrr_pairs(&w);
            let total: u64 = w.iter().sum();
            assert_eq!(c.len() as u64, total);
            assert!(c.iter().all(|(p, q)| p != q), "{w:?}: {c:?}");
            for (d, wd) in w.iter().enumerate() {
                let held = c.iter().filter(|(p, q)| *p == d || *q == d).count() as u64;
                assert_eq!(held, 2 * wd, "{w:?}: member {d} in {c:?}");
            }
        }
        // Two SSDs hold every parity.
        assert!(swrr_pairs(&[0, 0, 0, 1, 1])
            .iter()
            .all(|&(p, q)| p >= 3 && q >= 3));
        let sizes = vec![1u64 << 20; 5];
        assert!(RaidH6::new(&sizes, 65536, &[0, 0, 0, 0, 1]).is_err());
        assert!(RaidH6::new(&sizes, 65536, &[0, 0, 0, 1, 1]).is_ok());
    }

    #[test]
    fn raid5_and_raid4_are_weight_special_cases() {
        assert_eq!(swrr_cycle(&[1, 1, 1, 1, 1]), vec![0, 1, 2, 3, 4]);
        assert_eq!(swrr_cycle(&[0, 0, 0, 0, 5]), vec![4, 4, 4, 4, 4]);
    }

    #[test]
    fn weights_are_proportional_and_smooth() {
        let c = swrr_cycle(&[0, 0, 1, 1, 2]);
        assert_eq!(c.len(), 4);
        assert_eq!(c.iter().filter(|&&d| d == 4).count(), 2);
        assert!(!c.contains(&0));
        // Smooth: the heavy member never holds parity twice in a row here.
        assert!(c.windows(2).all(|w| w[0] != w[1]));
    }
}
