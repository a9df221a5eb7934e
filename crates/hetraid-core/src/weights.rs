//! RAIDH parity weights from the members' service rates ([Wacha 2012] ch. 6, "derive
//! weights automatically"): the parity shares that make every member equally
//! busy under a workload of small random requests, as a pure function the
//! engine (`create --weights auto`, from the members' kinds) and the
//! simulator (`weights = "auto"`, from the devices' models) both call.
//!
//! Model, per request on n members, member d holding parity share p_d and
//! data share q_d = (1 − p_d)/(n − 1): a small write is a read-modify-write
//! of one data chunk and its parity (two operations each), a read one
//! operation on a data chunk. With t_d the member's time per operation and f
//! the read fraction, member d is busy
//!     t_d · ((1 − f)(2 p_d + 2 q_d) + f q_d) = t_d (α p_d + β)
//! with α = 2(1 − f) − (2 − f)/(n − 1) and β = (2 − f)/(n − 1). Equal busy
//! time T for all: p_d = (T/t_d − β)/α, Σ p_d = 1. A member whose share would
//! be negative (too slow to hold parity) gets none, and the rest are solved
//! again. Throughput follows the busiest member, so the predicted gain over
//! RAID5 (p_d = 1/n) is max_d busy(RAID5) / max_d busy(weights).

/// The weights and what the model expects of them.
#[derive(Debug, Clone, PartialEq)]
pub struct WeightPlan {
    /// Integer parity weights, one per member (the smallest positive one is
    /// about `RESOLUTION`; members that hold no parity get 0).
    pub weights: Vec<u64>,
    /// Parity shares the weights stand for (sum 1).
    pub shares: Vec<f64>,
    /// Throughput over RAID5's on the same members, as the model predicts.
    pub predicted_gain: f64,
}

impl WeightPlan {
    /// "0,0,0,16,16 (model: 1.60x RAID5)", as the commands print it.
    pub fn summary(&self) -> String {
        format!(
            "{} (model: {:.2}x RAID5)",
            self.weights
                .iter()
                .map(|w| w.to_string())
                .collect::<Vec<_>>()
                .join(","),
            self.predicted_gain
        )
    }
}

/// Weights are shares scaled so that the largest is this (a parity cycle of
/// at most n x RESOLUTION stripes).
pub const RESOLUTION: u64 = 16;

/// The busy time per request of each member under `shares`.
fn busy(service_ns: &[f64], shares: &[f64], read_fraction: f64) -> Vec<f64> {
    let n = service_ns.len() as f64;
    let f = read_fraction;
    let a = 1.0 / (n - 1.0);
    service_ns
        .iter()
        .zip(shares)
        .map(|(t, p)| t * ((1.0 - f) * (2.0 * p + 2.0 * a * (1.0 - p)) + f * a * (1.0 - p)))
        .collect()
}

fn max(v: &[f64]) -> f64 {
    v.iter().copied().fold(0.0, f64::max)
}

/// Weights for members whose random operation takes `service_ns` each, under
/// `read_fraction` reads. Needs at least three members (two hold no choice)
/// and positive times.
pub fn auto_weights(service_ns: &[f64], read_fraction: f64) -> Result<WeightPlan, String> {
    let n = service_ns.len();
    if n < 3 {
        return Err(format!(
            "automatic weights need at least 3 members, not {n}"
        ));
    }
    if service_ns.iter().any(|t| !(t.is_finite() && *t > 0.0)) {
        return Err("automatic weights need every member's service time (positive)".into());
    }
    if !(0.0..=1.0).contains(&read_fraction) {
        return Err(format!(
            "read fraction {read_fraction} is not between 0 and 1"
        ));
    }
    let f = read_fraction;
    let a = 1.0 / (n as f64 - 1.0);
    let alpha = 2.0 * (1.0 - f) - (2.0 - f) * a;
    let beta = (2.0 - f) * a;
    let raid5 = vec![1.0 / n as f64; n];
    let shares = if alpha <= 1e-12 {
        // Parity costs no more than data (reads only): placement does not
        // matter; spread it as RAID5 does.
        raid5.clone()
    } else {
        // Bounded: each round drops at least one member or ends.
        let mut holds = vec![true; n];
        let mut p = vec![0.0; n];
        for _ in 0..n {
            let inv: f64 = (0..n)
                .filter(|&d| holds[d])
                .map(|d| 1.0 / service_ns[d])
                .sum();
            let k = holds.iter().filter(|h| **h).count() as f64;
            // Σ over holders of (T/t_d − β)/α = 1.
            let t = (alpha + k * beta) / inv;
            let mut dropped = false;
            for d in 0..n {
                p[d] = if holds[d] {
                    (t / service_ns[d] - beta) / alpha
                } else {
                    0.0
                };
                if holds[d] && p[d] < 0.0 {
                    holds[d] = false;
                    dropped = true;
                }
            }
            if !dropped {
                break;
            }
        }
        p.iter().map(|x| x.max(0.0)).collect::<Vec<f64>>()
    };
    let top = shares.iter().copied().fold(0.0, f64::max);
    let weights: Vec<u64> = shares
        .iter()
        .map(|s| (s / top * RESOLUTION as f64).round() as u64)
        .collect();
    let sum: u64 = weights.iter().sum();
    let shares: Vec<f64> = weights.iter().map(|w| *w as f64 / sum as f64).collect();
    let predicted_gain = max(&busy(service_ns, &raid5, f)) / max(&busy(service_ns, &shares, f));
    Ok(WeightPlan {
        weights,
        shares,
        predicted_gain,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_members_get_equal_weights() {
        let w = auto_weights(&[5.0; 5], 0.0).unwrap();
        assert_eq!(w.weights, vec![RESOLUTION; 5]);
        assert!((w.predicted_gain - 1.0).abs() < 1e-9);
    }

    /// [Wacha 2012] ch. 6 / the thesis: one member 4x faster among five (F = 3) takes
    /// all the parity (RAID4S), and the model's gain is the published +60 %.
    #[test]
    fn one_fast_member_of_five_takes_the_parity_for_1_6x() {
        let w = auto_weights(&[1.0, 1.0, 1.0, 1.0, 0.25], 0.0).unwrap();
        assert_eq!(w.weights, vec![0, 0, 0, 0, RESOLUTION]);
        assert!(
            (w.predicted_gain - 1.6).abs() < 1e-9,
            "{}",
            w.predicted_gain
        );
    }

    /// Two SSDs and three disks: the disks hold no parity, the SSDs share it;
    /// faster SSDs than that, and the disks' data work alone decides.
    #[test]
    fn two_ssds_share_the_parity_and_the_disks_hold_none() {
        let w = auto_weights(&[1.0, 1.0, 1.0, 0.25, 0.25], 0.0).unwrap();
        assert_eq!(w.weights, vec![0, 0, 0, RESOLUTION, RESOLUTION]);
        assert!(w.predicted_gain > 1.5, "{}", w.predicted_gain);
        // A slightly faster member gets a little more than its share.
        let w = auto_weights(&[1.0, 1.0, 1.0, 1.0, 0.8], 0.0).unwrap();
        assert!(
            w.weights[4] > w.weights[0] && w.weights[0] > 0,
            "{:?}",
            w.weights
        );
        assert!(w.predicted_gain > 1.0);
    }

    /// Reads only: parity placement does not matter (RAID5's spread).
    #[test]
    fn reads_only_leave_raid5() {
        let w = auto_weights(&[1.0, 1.0, 1.0, 1.0, 0.25], 1.0).unwrap();
        assert_eq!(w.weights, vec![RESOLUTION; 5]);
        assert!(auto_weights(&[1.0, 1.0], 0.0).is_err());
        assert!(auto_weights(&[1.0, 0.0, 1.0], 0.0).is_err());
        assert!(auto_weights(&[1.0, 1.0, 1.0], 1.5).is_err());
    }

    /// The weights it returns make the members about equally busy (within
    /// what integer weights allow), never worse than RAID5.
    #[test]
    fn the_weights_balance_the_members() {
        let t = [3.0, 2.0, 1.5, 1.0, 0.7, 0.5];
        for f in [0.0, 0.3, 0.7] {
            let w = auto_weights(&t, f).unwrap();
            assert!(
                w.predicted_gain >= 1.0 - 1e-9,
                "f {f}: {}",
                w.predicted_gain
            );
            let b = busy(&t, &w.shares, f);
            let holders: Vec<f64> = b
                .iter()
                .zip(&w.weights)
                .filter(|(_, w)| **w > 0)
                .map(|(b, _)| *b)
                .collect();
            let (lo, hi) = (
                holders.iter().copied().fold(f64::MAX, f64::min),
                max(&holders),
            );
            assert!(hi / lo < 1.15, "f {f}: busy {b:?} for {:?}", w.weights);
        }
    }
}
