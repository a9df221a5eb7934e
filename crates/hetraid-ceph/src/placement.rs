//! Where an erasure-coded pool's shards go, and in what share per OSD.
//!
//! Ceph's CRUSH places the k + m shards of a placement group (PG) on k + m
//! distinct failure domains; shard i < k is data, shard i ≥ k coding. What
//! a rule can say is limited, and this module keeps to what CRUSH does:
//!
//! - `spread`: one step over every OSD by capacity weight (plain Ceph; the
//!   coding shards land wherever data does);
//! - `coding-on-fast`: two steps, k shards from the slow class and m from
//!   the fast one: RAID4S's parity device at cluster scale;
//! - `weighted`: as `coding-on-fast`, with the fast class's CRUSH weights set
//!   by service rate instead of capacity, so a faster SSD takes more coding
//!   shards: RAIDH's weights restricted to the devices that hold parity.
//!
//! What cannot be mapped: RAIDH weights that give one device both data and
//! parity. CRUSH checks collisions only inside one step and its positional
//! weight sets (`choose_args`) apply per step, not per shard position, in the
//! `indep` mode erasure-coded pools use, so a device in both steps could
//! hold two shards of a PG (docs/SCALE.md).

use crate::cluster::{Cluster, FailureDomain};
use serde::Serialize;

/// Shards per PG: k data, m coding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct EcProfile {
    pub k: usize,
    pub m: usize,
}

impl EcProfile {
    pub fn new(k: usize, m: usize) -> Result<Self, String> {
        if k < 2 || m < 1 || k + m > 32 {
            return Err(format!(
                "erasure code k={k} m={m} is out of range; use k >= 2, m >= 1 and k + m <= 32"
            ));
        }
        Ok(Self { k, m })
    }

    pub fn width(&self) -> usize {
        self.k + self.m
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    Spread,
    CodingOnFast,
    Weighted,
}

impl Placement {
    pub const ALL: [Placement; 3] = [Self::Spread, Self::CodingOnFast, Self::Weighted];

    pub fn parse(s: &str) -> Result<Option<Self>, String> {
        match s {
            "auto" => Ok(None),
            "spread" => Ok(Some(Self::Spread)),
            "coding-on-fast" | "raid4s" => Ok(Some(Self::CodingOnFast)),
            "weighted" | "raidh" => Ok(Some(Self::Weighted)),
            other => Err(format!(
                "placement '{other}' is unknown; use auto, spread, coding-on-fast (raid4s) or weighted (raidh)"
            )),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Spread => "spread",
            Self::CodingOnFast => "coding-on-fast",
            Self::Weighted => "weighted",
        }
    }
}

/// A placement worked out for one cluster: the weights the CRUSH map gives
/// and each OSD's expected shards per PG.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlacementPlan {
    pub placement: Placement,
    pub profile: EcProfile,
    /// The class the data shards come from (None: every class).
    pub data_class: Option<&'static str>,
    /// The class the coding shards come from (None: every class).
    pub coding_class: Option<&'static str>,
    /// CRUSH weight per OSD as the map writes it.
    pub crush_weights: Vec<f64>,
    /// Expected data shards per PG on each OSD (they sum to k).
    pub data_shards: Vec<f64>,
    /// Expected coding shards per PG on each OSD (they sum to m).
    pub coding_shards: Vec<f64>,
}

impl PlacementPlan {
    /// Bytes the pool can hold before its fullest OSD is full: each PG
    /// stores k shards of data per m coding, so the OSD with the least room
    /// per shard it holds decides.
    pub fn usable_bytes(&self, cluster: &Cluster) -> u64 {
        let stripes = cluster
            .osds
            .iter()
            .map(|o| {
                let s = self.data_shards[o.id] + self.coding_shards[o.id];
                if s > 0.0 {
                    o.capacity_bytes as f64 / s
                } else {
                    f64::INFINITY
                }
            })
            .fold(f64::INFINITY, f64::min);
        (stripes * self.profile.k as f64) as u64
    }
}

/// Work out `placement` for `cluster`; `read_fraction` orders the classes by
/// speed (and sets the weighted placement's rates).
pub fn plan(
    cluster: &Cluster,
    placement: Placement,
    profile: EcProfile,
    read_fraction: f64,
) -> Result<PlacementPlan, String> {
    let n = cluster.osds.len();
    let capacity: Vec<f64> = cluster.osds.iter().map(|o| o.capacity_weight()).collect();
    let domain = cluster.failure_domain.as_str();
    match placement {
        Placement::Spread => {
            let have = cluster.domains_with(None);
            if have < profile.width() {
                return Err(format!(
                    "k + m = {} shards need as many {domain}s, and the cluster has {have}; lower k or m, or use --failure-domain osd",
                    profile.width()
                ));
            }
            let all = vec![true; n];
            let shards = spread_over(cluster, &capacity, &all, profile.width() as f64);
            let kf = profile.k as f64 / profile.width() as f64;
            Ok(PlacementPlan {
                placement,
                profile,
                data_class: None,
                coding_class: None,
                crush_weights: capacity,
                data_shards: shards.iter().map(|s| s * kf).collect(),
                coding_shards: shards.iter().map(|s| s * (1.0 - kf)).collect(),
            })
        }
        Placement::CodingOnFast | Placement::Weighted => {
            let classes = cluster.classes_by_speed(read_fraction);
            if classes.len() != 2 {
                return Err(format!(
                    "{} needs exactly two device classes (a slow one for data, a fast one for coding); this cluster has {} ({}): use --placement spread",
                    placement.as_str(),
                    classes.len(),
                    classes.join(", ")
                ));
            }
            let (slow, fast) = (classes[0], classes[1]);
            for (class, need, what) in [(slow, profile.k, "k data"), (fast, profile.m, "m coding")]
            {
                let have = cluster.domains_with(Some(class));
                if have < need {
                    return Err(format!(
                        "{what} shards need {need} {domain}s with a {class} device, and the cluster has {have}; lower k or m, or use --failure-domain osd"
                    ));
                }
            }
            let mut weights = capacity.clone();
            if placement == Placement::Weighted {
                // Every OSD of the fast class holds only coding shards, and
                // every client write touches all m of them: equal busy time
                // means shares in proportion to the rate (1 / op time).
                // Scaled to the class's capacity weight, so the root's
                // weight still reads as TiB.
                let fast_ids: Vec<usize> = cluster
                    .osds
                    .iter()
                    .filter(|o| o.class() == fast)
                    .map(|o| o.id)
                    .collect();
                let cap: f64 = fast_ids.iter().map(|&i| capacity[i]).sum();
                let rate: f64 = fast_ids
                    .iter()
                    .map(|&i| 1.0 / cluster.osds[i].op_ms(read_fraction))
                    .sum();
                for &i in &fast_ids {
                    weights[i] = cap * (1.0 / cluster.osds[i].op_ms(read_fraction)) / rate;
                }
            }
            let in_class =
                |c: &str| -> Vec<bool> { cluster.osds.iter().map(|o| o.class() == c).collect() };
            let data = spread_over(cluster, &weights, &in_class(slow), profile.k as f64);
            let coding = spread_over(cluster, &weights, &in_class(fast), profile.m as f64);
            Ok(PlacementPlan {
                placement,
                profile,
                data_class: Some(slow),
                coding_class: Some(fast),
                crush_weights: weights,
                data_shards: data,
                coding_shards: coding,
            })
        }
    }
}

/// Expected shards per OSD when one CRUSH step picks `count` distinct
/// failure domains among the `eligible` OSDs by `weights`, and a host's
/// share goes to its OSDs by weight. CRUSH draws a domain in proportion to
/// its weight and draws again when it repeats one: successive sampling
/// without replacement, whose inclusion chances are not proportional to
/// weight (a domain three times as heavy is picked less than three times
/// as often when three are drawn: the "multi-pick anomaly"). Computed
/// exactly ([`successive_sampling`]), as crushtool measures it.
pub fn spread_over(cluster: &Cluster, weights: &[f64], eligible: &[bool], count: f64) -> Vec<f64> {
    let n = cluster.osds.len();
    let w = |i: usize| {
        if eligible[i] {
            weights[i].max(0.0)
        } else {
            0.0
        }
    };
    let domains: Vec<Vec<usize>> = match cluster.failure_domain {
        FailureDomain::Osd => (0..n).map(|i| vec![i]).collect(),
        FailureDomain::Host => (0..cluster.hosts.len())
            .map(|h| (0..n).filter(|&i| cluster.osds[i].host == h).collect())
            .collect(),
    };
    let dw: Vec<f64> = domains
        .iter()
        .map(|d| d.iter().map(|&i| w(i)).sum())
        .collect();
    let share = successive_sampling(&dw, count.round() as usize);
    let mut out = vec![0.0; n];
    for (d, members) in domains.iter().enumerate() {
        if dw[d] > 0.0 {
            for &i in members {
                out[i] = share[d] * w(i) / dw[d];
            }
        }
    }
    out
}

/// States the exact computation may hold before it falls back to Rosén's
/// approximation (π = 1 − e^(−w·t), Σ π = count).
const SAMPLING_STATES_MAX: usize = 50_000;

/// The chance each item is among `count` drawn one at a time without
/// replacement, each draw in proportion to weight among those left.
/// Items of equal weight are interchangeable, so the exact computation runs
/// over how many of each weight are drawn (a few device models: a few
/// groups), level by level.
pub fn successive_sampling(w: &[f64], count: usize) -> Vec<f64> {
    use std::collections::HashMap;
    // Groups of equal positive weight: (weight, members).
    let mut groups: Vec<(f64, Vec<usize>)> = Vec::new();
    for (i, &x) in w.iter().enumerate().filter(|(_, x)| **x > 0.0) {
        match groups.iter_mut().find(|g| g.0 == x) {
            Some(g) => g.1.push(i),
            None => groups.push((x, vec![i])),
        }
    }
    let size: Vec<usize> = groups.iter().map(|g| g.1.len()).collect();
    let count = count.min(size.iter().sum());
    let mut picked = vec![0.0; groups.len()];
    let mut states: HashMap<Vec<u16>, f64> = HashMap::from([(vec![0u16; groups.len()], 1.0)]);
    let mut exact = true;
    for _ in 0..count {
        let mut next: HashMap<Vec<u16>, f64> = HashMap::new();
        for (k, p) in &states {
            let total: f64 = (0..groups.len())
                .map(|g| (size[g] - k[g] as usize) as f64 * groups[g].0)
                .sum();
            for g in 0..groups.len() {
                let left = size[g] - k[g] as usize;
                if left == 0 {
                    continue;
                }
                let q = p * left as f64 * groups[g].0 / total;
                picked[g] += q;
                let mut s = k.clone();
                s[g] += 1;
                *next.entry(s).or_insert(0.0) += q;
            }
        }
        if next.len() > SAMPLING_STATES_MAX {
            exact = false;
            break;
        }
        states = next;
    }
    let mut out = vec![0.0; w.len()];
    if exact {
        for (g, (_, members)) in groups.iter().enumerate() {
            for &i in members {
                out[i] = picked[g] / members.len() as f64;
            }
        }
        return out;
    }
    // Rosén: bisect t so that the inclusion chances add up to count.
    let pi = |t: f64, x: f64| 1.0 - (-x * t).exp();
    let (mut lo, mut hi) = (0.0, 1.0);
    while w.iter().map(|&x| pi(hi, x.max(0.0))).sum::<f64>() < count as f64 && hi < 1e300 {
        hi *= 2.0;
    }
    for _ in 0..200 {
        let mid = (lo + hi) / 2.0;
        if w.iter().map(|&x| pi(mid, x.max(0.0))).sum::<f64>() < count as f64 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    for (o, &x) in out.iter_mut().zip(w) {
        *o = pi(hi, x.max(0.0));
    }
    out
}

/// Tests: the plan of `placement` for a k+m profile with no read share.
#[cfg(test)]
pub(crate) fn plan_km(c: &Cluster, placement: Placement, k: usize, m: usize) -> PlacementPlan {
    plan(c, placement, EcProfile::new(k, m).unwrap(), 0.0).unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::tests_support::cluster;

    #[test]
    fn successive_sampling_is_exact_and_not_proportional() {
        // The heavy item is missed only if the three draws take the three
        // light ones: 3/13 * 2/12 * 1/11.
        let s = successive_sampling(&[10.0, 1.0, 1.0, 1.0], 3);
        assert!((s[0] - (1.0 - 6.0 / 1716.0)).abs() < 1e-12, "{s:?}");
        assert!((s.iter().sum::<f64>() - 3.0).abs() < 1e-9);
        assert!((s[1] - s[3]).abs() < 1e-12);
        // Equal weights: count / n each; zero weights: never.
        let s = successive_sampling(&[1.0, 1.0, 0.0, 1.0, 1.0], 2);
        assert_eq!(s[2], 0.0);
        assert!(s
            .iter()
            .filter(|x| **x > 0.0)
            .all(|x| (x - 0.5).abs() < 1e-12));
        // Three times the weight, picked 2.5 times as often when 3 of 8 are
        // drawn (crushtool: 0.545 and 0.208 of objects).
        let s = successive_sampling(&[2.0, 2.0, 2.0, 2.0, 0.64, 0.64, 0.64, 0.64], 3);
        assert!(
            (s[0] - 0.5417).abs() < 0.002 && (s[4] - 0.2083).abs() < 0.002,
            "{s:?}"
        );
        // More groups than the exact computation holds: Rosén's
        // approximation still adds up.
        let w: Vec<f64> = (1..=24).map(|i| i as f64).collect();
        let s = successive_sampling(&w, 10);
        assert!((s.iter().sum::<f64>() - 10.0).abs() < 1e-6);
        assert!(s.windows(2).all(|p| p[0] <= p[1]));
    }

    #[test]
    fn coding_on_fast_puts_every_coding_shard_on_the_fast_class() {
        let c = cluster(3, 4, 1, FailureDomain::Host);
        let p = plan_km(&c, Placement::CodingOnFast, 2, 1);
        for o in &c.osds {
            if o.class() == "ssd" {
                assert_eq!(p.data_shards[o.id], 0.0);
                assert!((p.coding_shards[o.id] - 1.0 / 3.0).abs() < 1e-9);
            } else {
                assert_eq!(p.coding_shards[o.id], 0.0);
                assert!((p.data_shards[o.id] - 2.0 / 12.0).abs() < 1e-9);
            }
        }
        let s = plan_km(&c, Placement::Spread, 2, 1);
        assert!((s.data_shards.iter().sum::<f64>() - 2.0).abs() < 1e-9);
        assert!((s.coding_shards.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        // The SSDs are small: coding on them caps the pool far below spread.
        assert!(p.usable_bytes(&c) < s.usable_bytes(&c));
    }

    #[test]
    fn too_few_domains_and_wrong_classes_are_refused() {
        let c = cluster(2, 4, 1, FailureDomain::Host);
        let e = plan(&c, Placement::Spread, EcProfile::new(2, 1).unwrap(), 0.0).unwrap_err();
        assert!(e.contains("need as many hosts"), "{e}");
        let e = plan(
            &c,
            Placement::CodingOnFast,
            EcProfile::new(3, 1).unwrap(),
            0.0,
        )
        .unwrap_err();
        assert!(
            e.contains("k data shards need 3 hosts with a hdd device"),
            "{e}"
        );
        let c = cluster(1, 6, 0, FailureDomain::Osd);
        let e = plan(
            &c,
            Placement::CodingOnFast,
            EcProfile::new(4, 2).unwrap(),
            0.0,
        )
        .unwrap_err();
        assert!(e.contains("two device classes"), "{e}");
        assert!(EcProfile::new(1, 1).is_err() && EcProfile::new(30, 3).is_err());
    }
}
