//! The texts Ceph takes: a CRUSH map (`crushtool -c` compiles it), the
//! erasure-code profile, and the commands that apply them to a cluster.

use crate::cluster::Cluster;
use crate::placement::{Placement, PlacementPlan};
use std::fmt::Write;

/// Rule ids in the map: Ceph's default replicated rule, the erasure-coded
/// pool's rule, and (with two classes or more) the hybrid replicated rule.
pub const REPLICATED_RULE_ID: usize = 0;
pub const EC_RULE_ID: usize = 1;
pub const HYBRID_RULE_ID: usize = 2;
pub const EC_RULE: &str = "hetraid_ec";
pub const HYBRID_RULE: &str = "hetraid_hybrid";

/// CRUSH weights are 16.16 fixed point: write five decimals.
fn weight(w: f64) -> String {
    format!("{w:.5}")
}

/// The CRUSH map: tunables as Ceph's `optimal` profile sets them, one device
/// line per OSD with its class, a host bucket per host under root
/// `default`, and the rules.
pub fn crush_map(cluster: &Cluster, plan: &PlacementPlan) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "# CRUSH map written by hetraid ceph: {} OSDs on {} hosts, erasure code k={} m={}, placement {}.",
        cluster.osds.len(),
        cluster.hosts.len(),
        plan.profile.k,
        plan.profile.m,
        plan.placement.as_str()
    );
    t.push_str("# Compile with: crushtool -c crushmap.txt -o crushmap.bin\n");
    for (name, v) in [
        ("choose_local_tries", 0),
        ("choose_local_fallback_tries", 0),
        ("choose_total_tries", 50),
        ("chooseleaf_descend_once", 1),
        ("chooseleaf_vary_r", 1),
        ("chooseleaf_stable", 1),
        ("straw_calc_version", 1),
    ] {
        let _ = writeln!(t, "tunable {name} {v}");
    }
    t.push_str("\n# devices\n");
    for o in &cluster.osds {
        let _ = writeln!(
            t,
            "device {} osd.{} class {}  # {}",
            o.id,
            o.id,
            o.class(),
            o.device
        );
    }
    t.push_str("\n# types\ntype 0 osd\ntype 1 host\ntype 11 root\n\n# buckets\n");
    let mut host_weights = Vec::new();
    for (h, host) in cluster.hosts.iter().enumerate() {
        let _ = writeln!(
            t,
            "host {} {{\n\tid -{}\n\talg straw2\n\thash 0",
            host.name,
            h + 2
        );
        let mut sum = 0.0;
        for o in cluster.osds.iter().filter(|o| o.host == h) {
            let w = plan.crush_weights[o.id];
            sum += w;
            let _ = writeln!(t, "\titem osd.{} weight {}", o.id, weight(w));
        }
        t.push_str("}\n");
        host_weights.push(sum);
    }
    t.push_str("root default {\n\tid -1\n\talg straw2\n\thash 0\n");
    for (h, host) in cluster.hosts.iter().enumerate() {
        let _ = writeln!(t, "\titem {} weight {}", host.name, weight(host_weights[h]));
    }
    t.push_str("}\n\n# rules\n");
    let domain = cluster.failure_domain.as_str();
    let _ = writeln!(
        t,
        "rule replicated_rule {{\n\tid {REPLICATED_RULE_ID}\n\ttype replicated\n\tmin_size 1\n\tmax_size 10\n\tstep take default\n\tstep chooseleaf firstn 0 type {domain}\n\tstep emit\n}}"
    );
    let _ = writeln!(
        t,
        "# The erasure-coded pool: shards 0..{} are data, {}..{} coding.",
        plan.profile.k - 1,
        plan.profile.k,
        plan.profile.width() - 1
    );
    let _ = writeln!(
        t,
        "rule {EC_RULE} {{\n\tid {EC_RULE_ID}\n\ttype erasure\n\tmin_size 3\n\tmax_size {}\n\tstep set_chooseleaf_tries 5\n\tstep set_choose_tries 100",
        plan.profile.width().max(3)
    );
    match (plan.data_class, plan.coding_class) {
        (Some(data), Some(coding)) => {
            let _ = writeln!(
                t,
                "\tstep take default class {data}\n\tstep chooseleaf indep {} type {domain}\n\tstep emit\n\tstep take default class {coding}\n\tstep chooseleaf indep {} type {domain}\n\tstep emit",
                plan.profile.k, plan.profile.m
            );
        }
        _ => {
            let _ = writeln!(
                t,
                "\tstep take default\n\tstep chooseleaf indep 0 type {domain}\n\tstep emit"
            );
        }
    }
    t.push_str("}\n");
    let classes = cluster.classes_by_speed(0.5);
    if classes.len() >= 2 {
        let (slow, fast) = (classes[0], classes[classes.len() - 1]);
        let _ = writeln!(
            t,
            "# Replicated pools for reads: the first copy (the primary, which serves reads) on the fast class, the others on the slow one.\nrule {HYBRID_RULE} {{\n\tid {HYBRID_RULE_ID}\n\ttype replicated\n\tmin_size 1\n\tmax_size 10\n\tstep take default class {fast}\n\tstep chooseleaf firstn 1 type {domain}\n\tstep emit\n\tstep take default class {slow}\n\tstep chooseleaf firstn -1 type {domain}\n\tstep emit\n}}"
        );
    }
    t
}

/// The erasure-code profile's name and its `ceph osd erasure-code-profile
/// set` arguments.
pub fn ec_profile(cluster: &Cluster, plan: &PlacementPlan) -> (String, String) {
    let name = format!("hetraid-k{}m{}", plan.profile.k, plan.profile.m);
    let args = format!(
        "k={} m={} plugin=jerasure technique=reed_sol_van crush-failure-domain={}",
        plan.profile.k,
        plan.profile.m,
        cluster.failure_domain.as_str()
    );
    (name, args)
}

/// Primary affinity per OSD for read-heavy pools: a primary serves its PG's
/// reads, so each OSD's affinity is its small-read rate relative to the
/// fastest (1.0 for the fastest class, about 0.02 for a disk beside an SSD).
pub fn primary_affinity(cluster: &Cluster) -> Vec<f64> {
    let best = cluster
        .osds
        .iter()
        .map(|o| o.figures.read_ms)
        .fold(f64::INFINITY, f64::min);
    cluster
        .osds
        .iter()
        .map(|o| ((best / o.figures.read_ms).min(1.0) * 100.0).round() / 100.0)
        .collect()
}

/// Placement groups for the pool: about 50 shards per OSD, a power of two.
pub fn pg_count(cluster: &Cluster, plan: &PlacementPlan) -> usize {
    let want = (cluster.osds.len() * 50 / plan.profile.width()).max(8);
    let mut p = 8;
    while p * 2 <= want && p < 4096 {
        p *= 2;
    }
    p
}

/// The commands that apply the map, the profile and the pool (and the
/// primary affinities when given) to a running cluster.
pub fn apply_script(
    cluster: &Cluster,
    plan: &PlacementPlan,
    pool: &str,
    affinity: Option<&[f64]>,
) -> String {
    let (profile, args) = ec_profile(cluster, plan);
    let pgs = pg_count(cluster, plan);
    let mut t = String::new();
    t.push_str(
        "#!/bin/sh\n# Written by hetraid ceph. The OSD ids and host names are the description's:\n",
    );
    t.push_str("# create the OSDs in that order, with osd_crush_update_on_start = false so they stay where the map puts them.\nset -eu\ncd \"$(dirname \"$0\")\"\n");
    t.push_str("crushtool -c crushmap.txt -o crushmap.bin\nceph osd setcrushmap -i crushmap.bin\n");
    let _ = writeln!(
        t,
        "ceph osd erasure-code-profile set {profile} {args} --force"
    );
    let _ = writeln!(
        t,
        "ceph osd pool create {pool} {pgs} {pgs} erasure {profile} {EC_RULE}"
    );
    let _ = writeln!(t, "ceph osd pool set {pool} allow_ec_overwrites true");
    if plan.placement != Placement::Spread {
        t.push_str("# Coding shards are on the fast class: keep reads off them unless a data shard is lost.\n");
    }
    if let Some(a) = affinity {
        t.push_str("# Read-heavy: primaries (which serve reads) on the fast devices.\n");
        for (o, v) in cluster.osds.iter().zip(a) {
            let _ = writeln!(t, "ceph osd primary-affinity osd.{} {v:.2}", o.id);
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::tests_support::cluster;
    use crate::cluster::FailureDomain;
    use crate::placement::plan_km;

    #[test]
    fn the_map_names_every_osd_its_class_and_the_rules_take_the_classes() {
        let c = cluster(3, 2, 1, FailureDomain::Host);
        let p = plan_km(&c, Placement::CodingOnFast, 2, 1);
        let m = crush_map(&c, &p);
        assert!(m.contains("device 2 osd.2 class ssd"), "{m}");
        assert!(m.contains("host node2 {\n\tid -4"), "{m}");
        assert!(m.contains("step take default class hdd\n\tstep chooseleaf indep 2 type host"));
        assert!(m.contains("step take default class ssd\n\tstep chooseleaf indep 1 type host"));
        assert!(m.contains(HYBRID_RULE));
        let s = plan_km(&c, Placement::Spread, 2, 1);
        assert!(
            crush_map(&c, &s).contains("step take default\n\tstep chooseleaf indep 0 type host")
        );
        let a = primary_affinity(&c);
        assert_eq!(a[2], 1.0);
        assert!(a[0] < 0.05);
        let script = apply_script(&c, &p, "ecpool", Some(&a));
        assert!(
            script.contains("ceph osd pool create ecpool 128 128 erasure hetraid-k2m1 hetraid_ec"),
            "{script}"
        );
        assert!(script.contains("ceph osd primary-affinity osd.2 1.00"));
    }
}
