//! Scrub and repair from the command line never destroy good data (issue 11):
//! a bad copy of a 4-way RAID1 is outvoted, RAID6 repairs the member its
//! syndromes name, RAID5 says it cannot tell and writes nothing unless told
//! which side to trust.

mod common;
use common::{args, bytes, hetraid, run_stdin};
use serde_json::Value;
use std::path::Path;

const DATA_OFFSET: usize = 1 << 20;

fn ok(a: &[&str]) -> String {
    let (code, out, err) = hetraid(a);
    assert_eq!(code, 0, "hetraid {a:?}: {err}");
    out
}

fn json(a: &[&str]) -> Value {
    serde_json::from_str(&ok(a)).unwrap()
}

/// A scrub that leaves mismatches: it exits 1 (issue 16).
fn left(a: &[&str]) -> String {
    let (code, out, err) = hetraid(a);
    assert_eq!(
        code, 1,
        "hetraid {a:?} should exit 1 (mismatch left): {err}"
    );
    out
}

/// An array of `n` 4 MiB members with 1 MiB of data; returns members, data.
/// Without block checksums: these tests are about what parity and copies
/// alone can tell (the checksummed case is below).
fn array(d: &Path, layout: &str, n: usize) -> (Vec<String>, Vec<u8>) {
    let m: Vec<String> = (0..n)
        .map(|i| d.join(format!("m{i}")).display().to_string())
        .collect();
    ok(&args(
        "create",
        &m,
        &[
            "--layout",
            layout,
            "--chunk",
            "64K",
            "--size",
            "4M",
            "--checksums",
            "none",
        ],
    ));
    let data = bytes(1 << 20, 17);
    let (code, _, err) = run_stdin(&args("write", &m, &["--offset", "0"]), Some(&data));
    assert_eq!(code, 0, "{err}");
    (m, data)
}

fn read(m: &[String]) -> Vec<u8> {
    let (code, out, err) = run_stdin(&args("read", m, &["--offset", "0", "--length", "1M"]), None);
    assert_eq!(code, 0, "{err}");
    out
}

fn flip(path: &str, at: usize) {
    let mut f = std::fs::read(path).unwrap();
    f[DATA_OFFSET + at] ^= 0x5a;
    std::fs::write(path, f).unwrap();
}

#[test]
fn four_way_raid1_keeps_the_good_copies() {
    let d = tempfile::tempdir().unwrap();
    let (m, data) = array(d.path(), "raid1", 4);
    flip(&m[0], 8192 + 17);
    let s = json(&args("scrub", &m, &["--repair", "--json"]));
    assert_eq!(s["repaired_pages"], 1, "{s}");
    assert_eq!(s["details"][0]["member"], 0, "{s}");
    assert_eq!(s["details"][0]["action"], "repaired");
    assert_eq!(read(&m), data);
    // Member 0 itself holds the good bytes again.
    let f = std::fs::read(&m[0]).unwrap();
    assert_eq!(&f[DATA_OFFSET..DATA_OFFSET + (1 << 20)], &data[..]);
    assert_eq!(json(&args("scrub", &m, &["--json"]))["mismatches"], 0);
}

#[test]
fn raid6_repairs_the_member_its_syndromes_name() {
    let d = tempfile::tempdir().unwrap();
    let (m, data) = array(d.path(), "raid6", 5);
    // Stripe 0 of a left-symmetric RAID6 of 5: data on members 0, 1, 2.
    flip(&m[1], 4096 * 3 + 9);
    let s: Value = serde_json::from_str(&left(&args("scrub", &m, &["--json"]))).unwrap();
    assert_eq!(s["details"][0]["member"], 1, "located before repair: {s}");
    assert_eq!(s["details"][0]["action"], "located, not repaired");
    let out = ok(&args("scrub", &m, &["--repair"]));
    assert!(
        out.contains("member 1") && out.contains("repaired"),
        "{out}"
    );
    assert_eq!(read(&m), data);
    assert_eq!(json(&args("scrub", &m, &["--json"]))["mismatches"], 0);
}

#[test]
fn raid5_cannot_tell_and_writes_nothing_unless_trusted() {
    let d = tempfile::tempdir().unwrap();
    let (m, _) = array(d.path(), "raid5", 4);
    flip(&m[2], 100);
    // The data areas (the superblocks record the scrub's result).
    let data_areas = || -> Vec<Vec<u8>> {
        m.iter()
            .map(|p| std::fs::read(p).unwrap()[DATA_OFFSET..].to_vec())
            .collect()
    };
    let before = data_areas();
    let out = left(&args("scrub", &m, &["--repair"]));
    assert!(out.contains("cannot tell"), "{out}");
    let after = data_areas();
    assert!(
        before == after,
        "scrub --repair wrote without knowing which member is wrong"
    );
    let s = json(&args("scrub", &m, &["--repair", "--trust-data", "--json"]));
    assert_eq!(s["repaired"], 1, "{s}");
    assert_eq!(json(&args("scrub", &m, &["--json"]))["mismatches"], 0);
}

#[test]
fn trust_options_that_do_not_apply_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let (r5, _) = array(d.path(), "raid5", 3);
    let e = hetraid(&args("scrub", &r5, &["--trust-data"])).2;
    assert!(e.contains("--repair"), "{e}");
    let e = hetraid(&args("scrub", &r5, &["--repair", "--trust-member", "1"])).2;
    assert!(e.contains("--trust-data"), "{e}");
    let d2 = tempfile::tempdir().unwrap();
    let (r1, _) = array(d2.path(), "raid1", 2);
    let e = hetraid(&args("scrub", &r1, &["--repair", "--trust-data"])).2;
    assert!(e.contains("--trust-member"), "{e}");
    flip(&r1[1], 5);
    let s = json(&args(
        "scrub",
        &r1,
        &["--repair", "--trust-member", "0", "--json"],
    ));
    assert_eq!(s["repaired"], 1, "{s}");
    let f0 = std::fs::read(&r1[0]).unwrap();
    let f1 = std::fs::read(&r1[1]).unwrap();
    assert_eq!(&f0[DATA_OFFSET..], &f1[DATA_OFFSET..]);
}

/// The last scrub's result is kept in the superblocks and shown by status
/// (zpool status's "scan:" line).
#[test]
fn status_shows_the_last_scrub() {
    let d = tempfile::tempdir().unwrap();
    let (m, _) = array(d.path(), "raid6", 5);
    assert!(ok(&args("status", &m, &[])).contains("scan: none requested"));
    flip(&m[0], 3);
    ok(&args("scrub", &m, &["--repair", "--max-speed", "0"]));
    let st = ok(&args("status", &m, &[]));
    assert!(
        st.contains("scan: scrub finished") && st.contains("1 mismatched, 1 repaired"),
        "{st}"
    );
    let j = json(&args("status", &m, &["--json"]));
    assert_eq!(j["last_scrub"]["repaired_stripes"], 1, "{j}");
    assert_eq!(j["last_scrub"]["stripes_checked"], j["stripe_count"]);
}

/// With checksums, RAID5 knows which member is wrong: scrub --repair fixes it.
#[test]
fn raid5_with_checksums_repairs_the_right_member() {
    let d = tempfile::tempdir().unwrap();
    let m: Vec<String> = (0..4)
        .map(|i| d.path().join(format!("c{i}")).display().to_string())
        .collect();
    ok(&args(
        "create",
        &m,
        &[
            "--layout",
            "raid5",
            "--chunk",
            "64K",
            "--size",
            "6M",
            "--checksums",
            "crc32c",
        ],
    ));
    let data = bytes(1 << 20, 23);
    let (code, _, err) = run_stdin(&args("write", &m, &["--offset", "0"]), Some(&data));
    assert_eq!(code, 0, "{err}");
    // The checksum area (1 MiB) sits before the data on every member.
    let mut f = std::fs::read(&m[2]).unwrap();
    f[2 * DATA_OFFSET + 4096 * 2 + 7] ^= 0x5a;
    std::fs::write(&m[2], f).unwrap();
    let s = json(&args("scrub", &m, &["--repair", "--json"]));
    assert_eq!(s["details"][0]["member"], 2, "{s}");
    assert_eq!(s["details"][0]["action"], "repaired", "{s}");
    assert_eq!(
        s["details"][0]["page_first"], 2,
        "the bad block's page: {s}"
    );
    assert_eq!(read(&m), data);
    assert_eq!(json(&args("scrub", &m, &["--json"]))["mismatches"], 0);
    let st = ok(&args("status", &m, &[]));
    assert!(st.contains("checksums: crc32c"), "{st}");
    let e = hetraid(&args(
        "create",
        &m,
        &[
            "--layout",
            "raid5",
            "--size",
            "6M",
            "--force",
            "--checksums",
            "md5",
        ],
    ))
    .2;
    assert!(e.contains("crc32c or none"), "{e}");
}
