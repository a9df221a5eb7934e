//! Mean time to data loss as the expected time to absorption of a continuous-time
//! Markov chain. States: the sets of failed members the layout survives, reached
//! from "all healthy" by failures. Each working member i fails at rate λ_i; one
//! repair crew (MD rebuilds one member at a time) restores a failed member at rate
//! μ, the member chosen uniformly. A failure that makes the set fatal goes to the
//! absorbing "data lost" state.
//!
//! With T_s the expected time to loss from state s:
//!   (Σ rates out of s) · T_s − Σ_{s' transient} rate(s→s') · T_{s'} = 1,
//! a dense linear system solved by Gaussian elimination with partial pivoting.
//!
//! A member that holds no chunk (HPDA's HDD-2, the log's mirror) is left out
//! of the chain: losing it loses no data (the reclaimer empties the log onto
//! the RAID4 while it is out), as in the HPDA paper's model.

use crate::fatal::FailureSets;
use crate::ModelError;
use std::collections::HashMap;

/// States the chain may have at most (the solve is cubic in them).
pub const STATES_MAX: usize = 1500;

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Mttdl {
    pub hours: f64,
    /// Transient states of the chain (failure sets the layout survives).
    pub states: usize,
    /// Most members that can be down at once without losing data.
    pub max_survivable_failures: usize,
}

/// MTTDL in hours for members failing at `fail_per_h[i]` and a repair rate of
/// `repair_per_h` (1 / mean time to repair).
pub fn mttdl(
    sets: &FailureSets,
    fail_per_h: &[f64],
    repair_per_h: f64,
) -> Result<Mttdl, ModelError> {
    mttdl_per_member(sets, fail_per_h, &vec![repair_per_h; sets.members()])
}

/// As [`mttdl`], with a repair rate per member (a rebuild's time depends on which
/// member is lost: an SSD parity member, an S2-RAID member with spare space...).
/// With several members down the crew works on one chosen uniformly, so member j
/// comes back at rate `repair_per_h[j] / down`.
pub fn mttdl_per_member(
    sets: &FailureSets,
    fail_per_h: &[f64],
    repair_per_h: &[f64],
) -> Result<Mttdl, ModelError> {
    let n = sets.members();
    if fail_per_h.len() != n || repair_per_h.len() != n {
        return Err(ModelError::Invalid(format!(
            "{} failure rates and {} repair rates for {n} members",
            fail_per_h.len(),
            repair_per_h.len()
        )));
    }
    if let Some(bad) = fail_per_h.iter().find(|r| !(r.is_finite() && **r > 0.0)) {
        return Err(ModelError::Invalid(format!(
            "failure rate {bad}/h: every member needs a positive, finite MTBF"
        )));
    }
    if let Some(bad) = repair_per_h.iter().find(|r| !(r.is_finite() && **r >= 0.0)) {
        return Err(ModelError::Invalid(format!(
            "repair rate {bad}/h: give a positive, finite mean time to repair"
        )));
    }
    if sets.fatal(0) {
        return Err(ModelError::Invalid(
            "the layout loses data with every member working (no stripes?)".into(),
        ));
    }
    // Breadth-first over survivable failure sets.
    let mut index: HashMap<u64, usize> = HashMap::new();
    let mut states: Vec<u64> = vec![0];
    index.insert(0, 0);
    let mut at = 0;
    while at < states.len() {
        let s = states[at];
        at += 1;
        for i in (0..n).filter(|&i| sets.holding_members() >> i & 1 == 1) {
            let next = s | 1 << i;
            if next == s || index.contains_key(&next) || sets.fatal(next) {
                continue;
            }
            if states.len() == STATES_MAX {
                return Err(ModelError::Invalid(format!(
                    "more than {STATES_MAX} survivable failure sets: the chain is too large \
                     to solve densely; use fewer members"
                )));
            }
            index.insert(next, states.len());
            states.push(next);
        }
    }
    let k = states.len();
    // Row-major k × (k + 1) augmented matrix.
    let mut a = vec![0.0f64; k * (k + 1)];
    for (row, &s) in states.iter().enumerate() {
        let mut out = 0.0;
        for (i, &rate) in fail_per_h.iter().enumerate() {
            if s >> i & 1 == 1 || sets.holding_members() >> i & 1 == 0 {
                continue;
            }
            out += rate;
            if let Some(&col) = index.get(&(s | 1 << i)) {
                a[row * (k + 1) + col] -= rate;
            }
        }
        let down = s.count_ones() as usize;
        for (i, &mu) in repair_per_h.iter().enumerate() {
            if s >> i & 1 == 1 && mu > 0.0 {
                let rate = mu / down as f64;
                out += rate;
                a[row * (k + 1) + index[&(s & !(1 << i))]] -= rate;
            }
        }
        a[row * (k + 1) + row] += out;
        a[row * (k + 1) + k] = 1.0;
    }
    let t = solve(&mut a, k)?;
    Ok(Mttdl {
        hours: t[0],
        states: k,
        max_survivable_failures: states
            .iter()
            .map(|s| s.count_ones() as usize)
            .max()
            .unwrap_or(0),
    })
}

/// Gaussian elimination with partial pivoting on a k × (k + 1) augmented matrix.
fn solve(a: &mut [f64], k: usize) -> Result<Vec<f64>, ModelError> {
    let w = k + 1;
    for col in 0..k {
        let pivot = (col..k)
            .max_by(|&x, &y| a[x * w + col].abs().total_cmp(&a[y * w + col].abs()))
            .expect("col < k");
        if a[pivot * w + col].abs() < f64::MIN_POSITIVE {
            return Err(ModelError::Invalid(
                "the chain has no path to recovery or loss (singular system)".into(),
            ));
        }
        if pivot != col {
            for j in 0..w {
                a.swap(col * w + j, pivot * w + j);
            }
        }
        let p = a[col * w + col];
        for row in col + 1..k {
            let f = a[row * w + col] / p;
            if f != 0.0 {
                for j in col..w {
                    a[row * w + j] -= f * a[col * w + j];
                }
            }
        }
    }
    let mut x = vec![0.0; k];
    for row in (0..k).rev() {
        let mut s = a[row * w + k];
        for j in row + 1..k {
            s -= a[row * w + j] * x[j];
        }
        x[row] = s / a[row * w + row];
    }
    Ok(x)
}

/// The textbook closed form for a single-parity array of `n` identical members:
/// MTTDL = ((2n − 1)λ + μ) / (n(n − 1)λ²); n = 4 gives SPEC's (7λ + μ)/(12λ²).
pub fn raid5_closed_form_h(n: usize, fail_per_h: f64, repair_per_h: f64) -> f64 {
    let (n, l) = (n as f64, fail_per_h);
    ((2.0 * n - 1.0) * l + repair_per_h) / (n * (n - 1.0) * l * l)
}

/// The HPDA paper's closed form for 3 SSDs (failure rate φ, data) and HDD-1
/// (λ, parity), repair rate μ:
/// MTTDL = (Δ + 3φ(3φ+μ) + λ(2φ+μ)) / ((3φ+λ)Δ − 3φμ(3φ+μ) − μλ(2φ+λ+μ)),
/// Δ = (2φ+λ+μ)(3φ+μ), as printed. Solving the paper's chain (state 0 → one
/// SSD down at 3φ or HDD-1 down at λ; back at μ; a second RAID4 member lost
/// is data loss) gives λ(2φ+λ+μ) in the numerator where the paper prints
/// λ(2φ+μ): a λ² term, a relative 2·10⁻⁷ at the paper's rates and a 24 h
/// repair ([`hpda_chain_closed_form_h`] is the exact one).
pub fn hpda_closed_form_h(phi: f64, lambda: f64, mu: f64) -> f64 {
    let delta = (2.0 * phi + lambda + mu) * (3.0 * phi + mu);
    (delta + 3.0 * phi * (3.0 * phi + mu) + lambda * (2.0 * phi + mu))
        / ((3.0 * phi + lambda) * delta
            - 3.0 * phi * mu * (3.0 * phi + mu)
            - mu * lambda * (2.0 * phi + lambda + mu))
}

/// The exact solution of the chain [`hpda_closed_form_h`] describes.
pub fn hpda_chain_closed_form_h(phi: f64, lambda: f64, mu: f64) -> f64 {
    let delta = (2.0 * phi + lambda + mu) * (3.0 * phi + mu);
    (delta + 3.0 * phi * (3.0 * phi + mu) + lambda * (2.0 * phi + lambda + mu))
        / ((3.0 * phi + lambda) * delta
            - 3.0 * phi * mu * (3.0 * phi + mu)
            - mu * lambda * (2.0 * phi + lambda + mu))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hetraid_core::layout::{build, LayoutOptions, LayoutSpec};

    fn sets(
        name: &str,
        n: usize,
        extra: impl FnOnce(&str) -> hetraid_core::layout::LayoutKind,
    ) -> FailureSets {
        let kind = extra(name);
        let l = build(&LayoutSpec {
            kind,
            chunk_bytes: 64 << 10,
            sizes: vec![64 << 20; n],
            kinds: vec![],
        })
        .unwrap();
        FailureSets::of(l.as_ref())
    }

    fn plain(name: &str, n: usize) -> FailureSets {
        sets(name, n, |name| LayoutOptions::named(name).kind().unwrap())
    }

    const L: f64 = 1.0 / 50_000.0;
    const MU: f64 = 1.0 / 24.0;

    #[test]
    fn raid5_of_four_matches_the_closed_form() {
        let m = mttdl(&plain("raid5", 4), &[L; 4], MU).unwrap();
        let want = (7.0 * L + MU) / (12.0 * L * L);
        assert!((m.hours / want - 1.0).abs() < 1e-9, "{} vs {want}", m.hours);
        assert_eq!(m.states, 5);
        assert_eq!(m.max_survivable_failures, 1);
        for n in 3..10 {
            let m = mttdl(&plain("raid5", n), &vec![L; n], MU).unwrap();
            let want = raid5_closed_form_h(n, L, MU);
            assert!((m.hours / want - 1.0).abs() < 1e-9, "n={n}");
        }
    }

    #[test]
    fn no_repair_and_no_redundancy_have_textbook_values() {
        // RAID0: the first failure loses data, 1/(nλ).
        let m = mttdl(&plain("raid0", 4), &[L; 4], MU).unwrap();
        assert!((m.hours - 1.0 / (4.0 * L)).abs() < 1e-6);
        // RAID1 of two without repair: 1/(2λ) + 1/λ.
        let m = mttdl(&plain("raid1", 2), &[L; 2], 0.0).unwrap();
        assert!((m.hours / (1.5 / L) - 1.0).abs() < 1e-9);
    }

    #[test]
    fn layouts_rank_as_their_redundancy_says() {
        let r5 = mttdl(&plain("raid5", 6), &[L; 6], MU).unwrap();
        let r6 = mttdl(&plain("raid6", 6), &[L; 6], MU).unwrap();
        let r10 = mttdl(&plain("raid10", 6), &[L; 6], MU).unwrap();
        // RAID10 survives some double failures (not on one mirror pair): between.
        assert!(
            r5.hours < r10.hours && r10.hours < r6.hours,
            "{r5:?} {r10:?} {r6:?}"
        );
        assert_eq!(r6.max_survivable_failures, 2);
        assert_eq!(r10.max_survivable_failures, 3);
        // A faster repair always helps.
        let slow = mttdl(&plain("raid5", 6), &[L; 6], MU / 10.0).unwrap();
        assert!(slow.hours < r5.hours);
    }

    #[test]
    fn s2raid_survives_what_its_sub_arrays_survive() {
        // 9 disks, G = 3: each sub-array is a 3-member RAID5, so some double failures
        // (members of no common sub-array) are survivable — but not all.
        let s = sets("s2raid5", 9, |_| {
            hetraid_core::layout::LayoutKind::S2Raid5 {
                group: 3,
                partitions: None,
                spare_partitions: 0,
            }
        });
        assert!(!s.fatal(0b1));
        let doubles: Vec<(usize, usize)> = (0..9)
            .flat_map(|a| (a + 1..9).map(move |b| (a, b)))
            .collect();
        let survivable = doubles
            .iter()
            .filter(|(a, b)| !s.fatal(1 << a | 1 << b))
            .count();
        assert!(survivable > 0 && survivable < doubles.len(), "{survivable}");
        let r5 = mttdl(&plain("raid5", 9), &[L; 9], MU).unwrap();
        let s2 = mttdl(&s, &[L; 9], MU).unwrap();
        assert!(s2.hours > r5.hours);
    }

    #[test]
    fn a_faster_repair_of_one_member_helps_only_as_much_as_that_member_fails() {
        let s = plain("raid5", 4);
        let even = mttdl(&s, &[L; 4], MU).unwrap().hours;
        let same = mttdl_per_member(&s, &[L; 4], &[MU; 4]).unwrap().hours;
        assert_eq!(even, same);
        let one = mttdl_per_member(&s, &[L; 4], &[MU * 10.0, MU, MU, MU])
            .unwrap()
            .hours;
        let all = mttdl(&s, &[L; 4], MU * 10.0).unwrap().hours;
        assert!(even < one && one < all, "{even} {one} {all}");
        // By hand: T0 = 1/(4λ) + mean_j T_j and T_j = (1 + μ_j T0)/(μ_j + 3λ).
        let mus = [MU * 10.0, MU, MU, MU];
        let a: f64 = mus.iter().map(|m| m / (m + 3.0 * L)).sum::<f64>() / 4.0;
        let b: f64 = mus.iter().map(|m| 1.0 / (m + 3.0 * L)).sum::<f64>() / 4.0;
        let want = (1.0 / (4.0 * L) + b) / (1.0 - a);
        assert!((one / want - 1.0).abs() < 1e-9, "{one} vs {want}");
    }

    #[test]
    fn bad_rates_are_refused() {
        let s = plain("raid5", 4);
        assert!(mttdl(&s, &[L; 3], MU).is_err());
        assert!(mttdl(&s, &[L, L, L, 0.0], MU).is_err());
        assert!(mttdl(&s, &[L; 4], f64::INFINITY).is_err());
    }

    /// HPDA ([Mao 2010]): 3 SSDs + 2 HDDs, λ = 1/50,000 h, φ = 1/200,000 h (the
    /// SSDs hold no parity: no wear factor). The chain over the layout's
    /// failure sets (HDD-2 out of it) equals the paper's closed form.
    #[test]
    fn hpda_matches_the_papers_closed_form() {
        use hetraid_core::MemberKind::{Hdd, Ssd};
        let l = build(&LayoutSpec {
            kind: hetraid_core::layout::LayoutKind::Hpda,
            chunk_bytes: 64 << 10,
            sizes: vec![64 << 20, 64 << 20, 64 << 20, 192 << 20, 128 << 20],
            kinds: vec![Ssd, Ssd, Ssd, Hdd, Hdd],
        })
        .unwrap();
        let s = FailureSets::of(l.as_ref());
        assert_eq!(s.holding_members(), 0b01111, "HDD-2 holds no chunk");
        let phi = 1.0 / 200_000.0;
        for mttr_h in [6.0, 24.0, 48.0, 168.0, 1000.0] {
            let mu = 1.0 / mttr_h;
            let m = mttdl(&s, &[phi, phi, phi, L, L], mu).unwrap();
            assert_eq!(m.states, 5, "0, one of three SSDs, HDD-1");
            let exact = hpda_chain_closed_form_h(phi, L, mu);
            assert!(
                (m.hours / exact - 1.0).abs() < 1e-9,
                "{} vs {exact}",
                m.hours
            );
            let paper = hpda_closed_form_h(phi, L, mu);
            let gap = (m.hours / paper - 1.0).abs();
            if mttr_h <= 48.0 {
                assert!(
                    gap < 1e-6,
                    "MTTR {mttr_h} h: {} vs the paper's {paper} ({gap:e})",
                    m.hours
                );
            }
            // The printed form's λ² slip grows with the repair time, never
            // past a percent at any MTTR a disk array sees.
            assert!(gap < 1e-2, "MTTR {mttr_h} h: {gap:e}");
        }
    }
}
