//! `hetraid ceph` against Ceph's own CRUSH implementation: the generated map
//! is compiled by Debian's `crushtool` (package ceph-base), which then maps
//! 20,000 objects; the tests check where the shards land against the
//! placement's intent and the load model's shares.

mod common;
use common::{hetraid, json};
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// Objects CRUSH maps per check: ±5 % at the smallest expected count here
/// (about 3,300 shards per OSD) is more than five standard deviations.
const OBJECTS: usize = 20_000;

fn have_crushtool() -> bool {
    let ok = Command::new("crushtool").arg("--help").output().is_ok();
    if !ok {
        common::missing("crushtool is not installed (apt-get install ceph-base)");
    }
    ok
}

/// `hetraid ceph ARGS --out DIR --json`, then the map compiled.
fn generate(dir: &Path, args: &[&str]) -> Value {
    let out = dir.to_str().unwrap();
    let mut a = vec!["ceph"];
    a.extend_from_slice(args);
    a.extend(["--out", out, "--json"]);
    let report = json(&a);
    let c = Command::new("crushtool")
        .args([
            "-c",
            &format!("{out}/crushmap.txt"),
            "-o",
            &format!("{out}/crushmap.bin"),
        ])
        .output()
        .unwrap();
    assert!(
        c.status.success(),
        "crushtool -c: {}",
        String::from_utf8_lossy(&c.stderr)
    );
    report
}

/// `crushtool --test --show-mappings` for `rule` with `reps` shards: one
/// OSD list per object.
fn mappings(dir: &Path, rule: usize, reps: usize) -> Vec<Vec<usize>> {
    let o = Command::new("crushtool")
        .arg("-i")
        .arg(dir.join("crushmap.bin"))
        .args(["--test", "--show-mappings", "--rule", &rule.to_string()])
        .args(["--num-rep", &reps.to_string(), "--min-x", "0"])
        .args(["--max-x", &(OBJECTS - 1).to_string()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    let maps: Vec<Vec<usize>> = text
        .lines()
        .filter_map(|l| l.split_once('[').map(|(_, r)| r.trim_end_matches(']')))
        .map(|r| r.split(',').map(|v| v.trim().parse().unwrap()).collect())
        .collect();
    assert_eq!(maps.len(), OBJECTS, "{text}");
    maps
}

fn class(report: &Value, osd: usize) -> String {
    report["osds"][osd]["class"].as_str().unwrap().to_string()
}

fn host(report: &Value, osd: usize) -> String {
    report["osds"][osd]["host"].as_str().unwrap().to_string()
}

/// Each OSD's share of `positions` over all objects against what the
/// report's model expects (the sum of `fields`, shards per PG): within ±5 %.
fn check_shares(
    report: &Value,
    maps: &[Vec<usize>],
    positions: std::ops::Range<usize>,
    fields: &[&str],
) {
    let n = report["osds"].as_array().unwrap().len();
    let mut count = vec![0usize; n];
    for m in maps {
        for &o in &m[positions.clone()] {
            count[o] += 1;
        }
    }
    for (o, c) in count.iter().enumerate() {
        let per_pg: f64 = fields
            .iter()
            .map(|f| report["osds"][o][*f].as_f64().unwrap())
            .sum();
        let want = per_pg * maps.len() as f64;
        if want == 0.0 {
            assert_eq!(*c, 0, "osd.{o} holds {fields:?} it should not: {count:?}");
        } else {
            let r = *c as f64 / want;
            assert!(
                (0.95..=1.05).contains(&r),
                "osd.{o}: {c} {fields:?} against {want:.0} expected ({r:.3}); all {count:?}"
            );
        }
    }
}

#[test]
fn coding_shards_land_on_the_fast_class_and_data_spreads_by_weight() {
    if !have_crushtool() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // RAID4S at cluster scale: six hosts of four disks and an SSD, 4+2.
    let hosts: Vec<String> = (1..=6)
        .map(|h| format!("--host=node{h}=caviar-black-640*4,x25e-64"))
        .collect();
    let mut args: Vec<&str> = hosts.iter().map(|s| s.as_str()).collect();
    args.extend(["--placement", "coding-on-fast"]);
    let report = generate(dir.path(), &args);
    assert_eq!(report["placement"]["chosen"], "coding-on-fast");
    let maps = mappings(dir.path(), 1, 6);
    for m in &maps {
        assert_eq!(m.len(), 6, "{m:?}");
        for (pos, &o) in m.iter().enumerate() {
            let want = if pos < 4 { "hdd" } else { "ssd" };
            assert_eq!(class(&report, o), want, "shard {pos} on osd.{o}: {m:?}");
        }
        // Each step keeps its shards on distinct hosts.
        for part in [&m[..4], &m[4..]] {
            let mut h: Vec<String> = part.iter().map(|&o| host(&report, o)).collect();
            h.sort();
            h.dedup();
            assert_eq!(h.len(), part.len(), "{m:?}");
        }
    }
    check_shares(&report, &maps, 0..4, &["data_shards_per_pg"]);
    check_shares(&report, &maps, 4..6, &["coding_shards_per_pg"]);

    // The hybrid replicated rule: the primary on an SSD, the copies on disks.
    for m in mappings(dir.path(), 2, 3) {
        assert_eq!(class(&report, m[0]), "ssd", "{m:?}");
        assert!(m[1..].iter().all(|&o| class(&report, o) == "hdd"), "{m:?}");
    }
}

#[test]
fn spread_follows_unequal_weights_and_weighted_follows_service_rates() {
    if !have_crushtool() {
        return;
    }
    // Devices of three sizes on one host, spread by capacity (osd failure
    // domain): every OSD's share of all three shards within ±5 % of the
    // model's (CRUSH's multi-pick arithmetic, not plain proportion).
    let dir = tempfile::tempdir().unwrap();
    let report = generate(
        dir.path(),
        &[
            "--host",
            "node1=wd20eads*4,caviar-black-640*4,x25e-64*2",
            "--failure-domain",
            "osd",
            "--k",
            "2",
            "--m",
            "1",
            "--placement",
            "spread",
        ],
    );
    let maps = mappings(dir.path(), 1, 3);
    check_shares(
        &report,
        &maps,
        0..3,
        &["data_shards_per_pg", "coding_shards_per_pg"],
    );

    // Two SSD models for the coding shards: weighted gives the faster one
    // more, in proportion to its rate; CRUSH follows the weights.
    let dir = tempfile::tempdir().unwrap();
    let report = generate(
        dir.path(),
        &[
            "--host",
            "node1=caviar-black-640*4,x25e-64,ocz-core-v2-120",
            "--failure-domain",
            "osd",
            "--k",
            "3",
            "--m",
            "1",
            "--placement",
            "weighted",
        ],
    );
    let (fast, slow) = (
        report["osds"][4]["coding_shards_per_pg"].as_f64().unwrap(),
        report["osds"][5]["coding_shards_per_pg"].as_f64().unwrap(),
    );
    assert!(
        (fast + slow - 1.0).abs() < 1e-9 && fast != slow,
        "{fast} {slow}"
    );
    let maps = mappings(dir.path(), 1, 4);
    check_shares(&report, &maps, 0..3, &["data_shards_per_pg"]);
    check_shares(&report, &maps, 3..4, &["coding_shards_per_pg"]);
}

#[test]
fn read_heavy_pools_get_primary_affinity_and_bad_input_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let r = json(&[
        "ceph",
        "--host",
        "a=caviar-black-640*3,x25e-64",
        "--host",
        "b=caviar-black-640*3,x25e-64",
        "--failure-domain",
        "osd",
        "--k",
        "2",
        "--m",
        "1",
        "--workload",
        "random-read",
        "--out",
        out,
        "--json",
    ]);
    // Reads pay for no parity placement: spread is as good and keeps capacity.
    assert_eq!(r["placement"]["chosen"], "spread");
    assert_eq!(r["osds"][3]["primary_affinity"], 1.0);
    assert!(r["osds"][0]["primary_affinity"].as_f64().unwrap() < 0.1);
    let apply = std::fs::read_to_string(dir.path().join("apply.sh")).unwrap();
    assert!(
        apply.contains("ceph osd primary-affinity osd.0 0.0"),
        "{apply}"
    );
    // Nothing is written over.
    let (code, _, err) = hetraid(&[
        "ceph",
        "--host",
        "a=x25e-64*3",
        "--failure-domain",
        "osd",
        "--k",
        "2",
        "--m",
        "1",
        "--out",
        out,
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("exists; remove it"), "{err}");
    for (args, want) in [
        (vec!["ceph"], "describe the cluster"),
        (
            vec!["ceph", "--host", "a=x25e-64*3", "--cluster", "c.toml"],
            "not both",
        ),
        (vec!["ceph", "--host", "a b=x25e-64"], "CRUSH name"),
        (vec!["ceph", "--host", "a=nope"], "unknown"),
        (
            vec![
                "ceph",
                "--host",
                "a=x25e-64*6",
                "--failure-domain",
                "osd",
                "--placement",
                "coding-on-fast",
            ],
            "two device classes",
        ),
        (vec!["ceph", "--host", "a=x25e-64*6"], "need as many hosts"),
        (
            vec!["ceph", "--host", "a=x25e-64*6", "--k", "1"],
            "out of range",
        ),
        (
            vec!["ceph", "--host", "a=x25e-64*6", "--read-fraction", "0.5"],
            "applies to --workload mixed",
        ),
        (
            vec![
                "ceph",
                "--host",
                "a=x25e-64*6",
                "--placement",
                "spread",
                "--objective",
                "capacity",
            ],
            "drop it",
        ),
        (
            vec!["ceph", "--host", "a=x25e-64*6", "--fill", "0"],
            "--fill",
        ),
        (
            vec!["ceph", "--host", "a=x25e-64*6", "--ec-writes", "some"],
            "partial",
        ),
    ] {
        let (code, _, err) = hetraid(&args);
        assert_ne!(code, 0, "{args:?}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
}
