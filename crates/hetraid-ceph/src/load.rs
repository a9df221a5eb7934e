//! Per-OSD load under a client workload, and the recovery of one lost OSD,
//! predicted from a placement's shard shares and the devices' figures.
//!
//! Client operations are small (one stripe unit), at random places:
//! - a read reads one data shard of the PG;
//! - a write with partial writes (Ceph's optimized EC pools) reads and
//!   writes the data shard and all m coding shards (a parity delta): the
//!   coding shards are the hot spot, as parity is in RAID5;
//! - a write with full-stripe writes (Ceph before the optimized pools,
//!   Pacific's ECBackend included) reads the other k − 1 data shards and
//!   writes all k + m.
//!
//! An OSD's busy time per client operation is its operations times its
//! device's service time; the busiest OSD bounds the pool's rate.
//!
//! Recovery of a lost OSD reads, for each lost shard, the first k shards
//! that survive (data first, then coding, as jerasure's minimum_to_decode
//! picks them) and writes the rebuilt shard where CRUSH re-places it: with
//! `chooseleaf` and a host failure domain, mostly onto the lost OSD's
//! siblings on the same host (the leaf is retried inside the host first),
//! otherwise over the step's other OSDs by weight. Time is the busiest
//! OSD's bytes over its device's shard-sized rates: the device bound, with
//! Ceph's recovery throttles opened (`osd_recovery_sleep` 0, backfills
//! enough to keep every device busy).

use crate::cluster::{Cluster, FailureDomain};
use crate::placement::PlacementPlan;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum EcWrites {
    Partial,
    FullStripe,
}

impl EcWrites {
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "partial" => Ok(Self::Partial),
            "full-stripe" => Ok(Self::FullStripe),
            other => Err(format!(
                "--ec-writes '{other}' is unknown; use partial (optimized EC pools) or full-stripe (Ceph Pacific and earlier)"
            )),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Partial => "partial",
            Self::FullStripe => "full-stripe",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Workload {
    pub read_fraction: f64,
    pub ec_writes: EcWrites,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OsdLoad {
    pub osd: usize,
    /// Device reads per client operation.
    pub reads_per_op: f64,
    /// Device writes per client operation.
    pub writes_per_op: f64,
    /// Device busy time per client operation, ms.
    pub busy_ms_per_op: f64,
    /// Busy share when the pool runs at its bound (the busiest OSD: 1).
    pub utilization: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClientLoad {
    pub per_osd: Vec<OsdLoad>,
    /// The busiest OSD.
    pub bottleneck: usize,
    /// Client operations per second when the busiest OSD is always busy.
    pub ops_per_s_max: f64,
}

/// Per-OSD load of a small random client workload on `plan`.
pub fn client_load(cluster: &Cluster, plan: &PlacementPlan, w: Workload) -> ClientLoad {
    let k = plan.profile.k as f64;
    let f = w.read_fraction;
    let per_osd: Vec<OsdLoad> = cluster
        .osds
        .iter()
        .map(|o| {
            let data = plan.data_shards[o.id];
            let coding = plan.coding_shards[o.id];
            // A client operation hits one of the PG's k data shards.
            let mut reads = f * data / k;
            let mut writes = 0.0;
            match w.ec_writes {
                EcWrites::Partial => {
                    reads += (1.0 - f) * (data / k + coding);
                    writes += (1.0 - f) * (data / k + coding);
                }
                EcWrites::FullStripe => {
                    reads += (1.0 - f) * data * (k - 1.0) / k;
                    writes += (1.0 - f) * (data + coding);
                }
            }
            OsdLoad {
                osd: o.id,
                reads_per_op: reads,
                writes_per_op: writes,
                busy_ms_per_op: reads * o.figures.read_ms + writes * o.figures.write_ms,
                utilization: 0.0,
            }
        })
        .collect();
    let (bottleneck, busiest) = per_osd
        .iter()
        .map(|l| l.busy_ms_per_op)
        .enumerate()
        .fold((0, 0.0), |b, (i, t)| if t > b.1 { (i, t) } else { b });
    let per_osd = per_osd
        .into_iter()
        .map(|mut l| {
            l.utilization = if busiest > 0.0 {
                l.busy_ms_per_op / busiest
            } else {
                0.0
            };
            l
        })
        .collect();
    ClientLoad {
        per_osd,
        bottleneck,
        ops_per_s_max: if busiest > 0.0 { 1000.0 / busiest } else { 0.0 },
    }
}

/// What recovering one lost OSD costs and takes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Recovery {
    pub lost_osd: usize,
    /// Bytes the lost OSD held (its shards of a pool filled to the fill).
    pub lost_bytes: u64,
    /// Whether CRUSH has somewhere to re-place the lost shards (false: every
    /// OSD of the step already holds a shard of each PG; the PGs stay
    /// degraded and the prediction is for backfilling a replacement, whose
    /// writes are counted on the lost OSD's id).
    pub re_placed: bool,
    /// Bytes each surviving OSD reads and writes.
    pub read_bytes: Vec<u64>,
    pub write_bytes: Vec<u64>,
    /// The OSD whose work takes longest, and how long: the prediction.
    pub bottleneck: usize,
    pub predicted_s: f64,
    /// One replacement device writing every lost byte (a RAID hot spare).
    pub hot_spare_s: f64,
    /// hot_spare_s / predicted_s: what declustering over the cluster buys.
    pub speedup: f64,
}

/// Recovery of OSD `lost` when the pool holds `fill` of its usable bytes.
pub fn recovery(
    cluster: &Cluster,
    plan: &PlacementPlan,
    lost: usize,
    fill: f64,
) -> Result<Recovery, String> {
    let n = cluster.osds.len();
    if lost >= n {
        return Err(format!(
            "osd.{lost} is not in the cluster (it has osd.0 to osd.{})",
            n - 1
        ));
    }
    if !(fill > 0.0 && fill <= 1.0) {
        return Err(format!(
            "--fill {fill} is not in (0, 1]; give the pool's used share"
        ));
    }
    let k = plan.profile.k as f64;
    let stripes = fill * plan.usable_bytes(cluster) as f64 / k;
    let (dl, cl) = (plan.data_shards[lost], plan.coding_shards[lost]);
    let lost_bytes = stripes * (dl + cl);
    if lost_bytes <= 0.0 {
        return Ok(Recovery {
            lost_osd: lost,
            lost_bytes: 0,
            re_placed: true,
            read_bytes: vec![0; n],
            write_bytes: vec![0; n],
            bottleneck: lost,
            predicted_s: 0.0,
            hot_spare_s: 0.0,
            speedup: 1.0,
        });
    }
    let lost_data = stripes * dl;
    let lost_coding = stripes * cl;
    let others = |v: &[f64]| -> f64 { (0..n).filter(|&i| i != lost).map(|i| v[i]).sum() };
    let (data_rest, coding_rest) = (others(&plan.data_shards), others(&plan.coding_shards));
    let mut read = vec![0.0; n];
    for (i, r) in read.iter_mut().enumerate().filter(|(i, _)| *i != lost) {
        let d = if data_rest > 0.0 {
            plan.data_shards[i] / data_rest
        } else {
            0.0
        };
        let c = if coding_rest > 0.0 {
            plan.coding_shards[i] / coding_rest
        } else {
            0.0
        };
        // A lost data shard: the other k − 1 data shards and one coding
        // shard; a lost coding shard: the k data shards.
        *r = lost_data * ((k - 1.0) * d + c) + lost_coding * k * d;
    }
    // Where the rebuilt shards go: another OSD of the step the lost shard
    // came from, one that holds no shard of that PG yet (CRUSH skips the
    // PG's domains): with a host failure domain mostly the lost OSD's
    // siblings on its host, else the step's other OSDs by weight times
    // their chance of being outside the PG. None left: the PGs stay
    // degraded until the OSD is replaced, and the replacement is written.
    let eligible = |i: usize, class: Option<&str>| {
        i != lost && class.is_none_or(|c| cluster.osds[i].class() == c)
    };
    let mut write = vec![0.0; n];
    let mut re_placed = true;
    for (bytes, class, shards) in [
        (lost_data, plan.data_class, &plan.data_shards),
        (lost_coding, plan.coding_class, &plan.coding_shards),
    ] {
        if bytes <= 0.0 {
            continue;
        }
        // With one step over every class, a shard of either kind counts.
        let held = |i: usize| {
            if plan.data_class.is_none() {
                plan.data_shards[i] + plan.coding_shards[i]
            } else {
                shards[i]
            }
        };
        let host = cluster.osds[lost].host;
        let siblings: Vec<usize> = (0..n)
            .filter(|&i| eligible(i, class) && cluster.osds[i].host == host)
            .collect();
        let (targets, chance): (Vec<usize>, Vec<f64>) =
            if cluster.failure_domain == FailureDomain::Host && !siblings.is_empty() {
                let c = siblings.iter().map(|_| 1.0).collect();
                (siblings, c)
            } else {
                let t: Vec<usize> = (0..n).filter(|&i| eligible(i, class)).collect();
                let c = t.iter().map(|&i| (1.0 - held(i)).max(0.0)).collect();
                (t, c)
            };
        let w: f64 = targets
            .iter()
            .zip(&chance)
            .map(|(&i, c)| plan.crush_weights[i] * c)
            .sum();
        if w <= 1e-9 {
            re_placed = false;
            write[lost] += bytes;
            continue;
        }
        for (&i, c) in targets.iter().zip(&chance) {
            write[i] += bytes * plan.crush_weights[i] * c / w;
        }
    }
    let mb = 1e6;
    let time = |i: usize| {
        let f = &cluster.osds[i].figures;
        read[i] / (f.recovery_read_mbps * mb) + write[i] / (f.recovery_write_mbps * mb)
    };
    let (bottleneck, predicted_s) = (0..n)
        .filter(|&i| i != lost || !re_placed)
        .map(|i| (i, time(i)))
        .fold((lost, 0.0), |b, (i, t)| if t > b.1 { (i, t) } else { b });
    // A RAID hot spare: one new device writes every lost byte while each of
    // the survivors it reads from reads as much (the slowest of them bounds).
    let slowest_read = (0..n)
        .filter(|&i| read[i] > 0.0)
        .map(|i| cluster.osds[i].figures.recovery_read_mbps)
        .fold(f64::INFINITY, f64::min);
    let hot_spare_s = (lost_bytes / (cluster.osds[lost].figures.recovery_write_mbps * mb))
        .max(lost_bytes / (slowest_read * mb));
    Ok(Recovery {
        lost_osd: lost,
        lost_bytes: lost_bytes as u64,
        re_placed,
        read_bytes: read.iter().map(|b| *b as u64).collect(),
        write_bytes: write.iter().map(|b| *b as u64).collect(),
        bottleneck,
        predicted_s,
        hot_spare_s,
        speedup: if predicted_s > 0.0 {
            hot_spare_s / predicted_s
        } else {
            1.0
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::tests_support::cluster;
    use crate::placement::{plan, plan_km, EcProfile, Placement};

    #[test]
    fn partial_writes_make_the_coding_shards_the_hot_spot() {
        // RAID4S at cluster scale: 6 hosts of 4 HDD + 1 SSD, 4+2.
        let c = cluster(6, 4, 1, FailureDomain::Host);
        let p = EcProfile::new(4, 2).unwrap();
        let rate = |pl, ec_writes| {
            let plan = plan(&c, pl, p, 0.0).unwrap();
            client_load(
                &c,
                &plan,
                Workload {
                    read_fraction: 0.0,
                    ec_writes,
                },
            )
            .ops_per_s_max
        };
        let fast = rate(Placement::CodingOnFast, EcWrites::Partial);
        let spread = rate(Placement::Spread, EcWrites::Partial);
        // Partial writes: every write reads and writes all m coding shards,
        // so the coding shards are the hot spot and the SSDs take it.
        assert!(
            fast > 2.0 * spread,
            "coding on fast {fast}, spread {spread}"
        );
        // Full-stripe writes touch every shard alike: the SSDs take only
        // their m of k + m writes, and the gain shrinks.
        let fast_full = rate(Placement::CodingOnFast, EcWrites::FullStripe);
        let spread_full = rate(Placement::Spread, EcWrites::FullStripe);
        assert!(
            fast / spread > 1.5 * (fast_full / spread_full),
            "partial {fast}/{spread}, full stripe {fast_full}/{spread_full}"
        );
    }

    #[test]
    fn per_osd_load_adds_up_to_the_operations_a_request_makes() {
        let c = cluster(4, 3, 1, FailureDomain::Host);
        let plan = plan(&c, Placement::Spread, EcProfile::new(2, 1).unwrap(), 0.3).unwrap();
        for (ec, want) in [
            (EcWrites::Partial, 0.3 + 0.7 * 4.0),
            (EcWrites::FullStripe, 0.3 + 0.7 * 4.0),
        ] {
            let l = client_load(
                &c,
                &plan,
                Workload {
                    read_fraction: 0.3,
                    ec_writes: ec,
                },
            );
            let ops: f64 = l
                .per_osd
                .iter()
                .map(|o| o.reads_per_op + o.writes_per_op)
                .sum();
            // partial: 1 read + (1 + m) reads and writes = 4; full stripe with
            // k = 2: k - 1 reads + k + m writes = 4.
            assert!((ops - want).abs() < 1e-9, "{ec:?}: {ops}");
            assert!((l.per_osd[l.bottleneck].utilization - 1.0).abs() < 1e-12);
        }
    }

    #[test]
    fn recovery_reads_k_shards_per_lost_shard_and_writes_each_once() {
        let c = cluster(6, 4, 1, FailureDomain::Host);
        let pl = plan_km(&c, Placement::CodingOnFast, 4, 2);
        for lost in [0usize, 4] {
            let r = recovery(&c, &pl, lost, 0.5).unwrap();
            let read: u64 = r.read_bytes.iter().sum();
            let written: u64 = r.write_bytes.iter().sum();
            let lb = r.lost_bytes as f64;
            assert!(
                (read as f64 / lb - 4.0).abs() < 1e-6,
                "lost {lost}: read {read}"
            );
            assert!((written as f64 / lb - 1.0).abs() < 1e-6);
            assert_eq!(r.read_bytes[lost] + r.write_bytes[lost], 0);
            // Writes stay in the lost OSD's class.
            for o in &c.osds {
                if r.write_bytes[o.id] > 0 {
                    assert_eq!(o.class(), c.osds[lost].class());
                }
            }
            assert!(r.speedup > 1.0, "{r:?}");
        }
        // A lost HDD's shards go to its host's other HDDs (chooseleaf
        // retries the leaf inside the host).
        let r = recovery(&c, &pl, 0, 0.5).unwrap();
        assert!(r.write_bytes[1] > 0 && r.write_bytes[5] == 0);
        assert!(recovery(&c, &pl, 99, 0.5).is_err() && recovery(&c, &pl, 0, 0.0).is_err());
        // One host of 4 HDD + 2 SSD at 4+2: every OSD holds a shard of every
        // PG, so nothing can be re-placed; k = 3, m = 1 leaves one of each.
        let one = cluster(1, 4, 2, FailureDomain::Osd);
        let full = plan(
            &one,
            Placement::CodingOnFast,
            EcProfile::new(4, 2).unwrap(),
            0.0,
        )
        .unwrap();
        let r = recovery(&one, &full, 0, 0.5).unwrap();
        assert!(!r.re_placed && r.write_bytes[0] == r.lost_bytes, "{r:?}");
        let roomy = plan(
            &one,
            Placement::CodingOnFast,
            EcProfile::new(3, 1).unwrap(),
            0.0,
        )
        .unwrap();
        for lost in [0, 4] {
            let r = recovery(&one, &roomy, lost, 0.5).unwrap();
            assert!(r.re_placed && r.write_bytes[lost] == 0, "{r:?}");
        }
    }
}
