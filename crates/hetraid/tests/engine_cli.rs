//! The lifecycle verbs end to end through the binary, bad input refused with
//! nothing written, and a real `kill -9` of a writing process.

mod common;
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_hetraid"))
}

fn run(args: &[&str], stdin: Option<&[u8]>) -> (i32, Vec<u8>, String) {
    common::run_stdin(args, stdin)
}

fn ok(args: &[&str], stdin: Option<&[u8]>) -> Vec<u8> {
    let (code, out, err) = run(args, stdin);
    assert_eq!(code, 0, "hetraid {args:?}: {err}");
    out
}

fn data(n: usize, seed: u64) -> Vec<u8> {
    common::bytes(n, seed)
}

fn paths(dir: &Path, names: &[&str]) -> Vec<String> {
    names
        .iter()
        .map(|n| dir.join(n).display().to_string())
        .collect()
}

fn with<'a>(verb: &'a str, members: &'a [String], extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![verb];
    v.extend(members.iter().map(|s| s.as_str()));
    v.extend_from_slice(extra);
    v
}

fn hash_files(ps: &[String]) -> Vec<Vec<u8>> {
    ps.iter()
        .map(|p| std::fs::read(p).unwrap_or_default())
        .collect()
}

#[test]
fn lifecycle_round_trip() {
    let d = tempfile::tempdir().unwrap();
    let m = paths(d.path(), &["a", "b", "c", "d", "e"]);
    let mut create = vec![
        "create", "--layout", "raid5", "--chunk", "16K", "--size", "8M",
    ];
    create.extend(m.iter().map(|s| s.as_str()));
    ok(&create, None);
    let payload = data(3_000_000, 1);
    ok(&with("write", &m, &["--offset", "12345"]), Some(&payload));
    let back = ok(
        &with("read", &m, &["--offset", "12345", "--length", "3000000"]),
        None,
    );
    assert!(back == payload);
    ok(&with("fail", &m, &["--member", "2"]), None);
    let st: Value = serde_json::from_slice(&ok(
        &with(
            "status",
            &m[..2].iter().chain(&m[3..]).cloned().collect::<Vec<_>>(),
            &["--json"],
        ),
        None,
    ))
    .unwrap();
    assert_eq!(st["state"], "degraded");
    assert_eq!(st["member_states"][2]["state"], "faulty");
    let live: Vec<String> = m
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 2)
        .map(|(_, s)| s.clone())
        .collect();
    let more = data(100_000, 2);
    ok(&with("write", &live, &["--offset", "1M"]), Some(&more));
    let new = d.path().join("new").display().to_string();
    std::fs::File::create(&new)
        .unwrap()
        .set_len(8 << 20)
        .unwrap();
    ok(
        &with("replace", &live, &["--member", "2", "--with", &new]),
        None,
    );
    let mut full = m.clone();
    full[2] = new.clone();
    let r: Value = serde_json::from_slice(&ok(
        &with("rebuild", &full, &["--json", "--max-speed", "0"]),
        None,
    ))
    .unwrap();
    assert_eq!(r["completed"], true);
    assert_eq!(r["members"][0], 2);
    let s: Value = serde_json::from_slice(&ok(&with("scrub", &full, &["--json"]), None)).unwrap();
    assert_eq!(s["mismatches"], 0);
    assert!(s["stripes_checked"].as_u64().unwrap() > 0);
    let mut expect = payload.clone();
    expect[1048576 - 12345..1048576 - 12345 + 100_000].copy_from_slice(&more);
    let back = ok(
        &with("read", &full, &["--offset", "12345", "--length", "3000000"]),
        None,
    );
    assert!(back == expect, "contents after rebuild");
}

#[test]
fn scrub_reports_and_repairs_corruption() {
    let d = tempfile::tempdir().unwrap();
    let m = paths(d.path(), &["a", "b", "c", "d"]);
    // Without block checksums: the syndromes alone find the flipped byte.
    let mut create = vec![
        "create",
        "--layout",
        "raid6",
        "--chunk",
        "4K",
        "--size",
        "2M",
        "--checksums",
        "none",
    ];
    create.extend(m.iter().map(|s| s.as_str()));
    ok(&create, None);
    ok(
        &with("write", &m, &["--offset", "0"]),
        Some(&data(500_000, 3)),
    );
    // Flip a byte in member 0's data area (data starts at 1 MiB).
    let mut f = std::fs::read(&m[0]).unwrap();
    f[(1 << 20) + 5000] ^= 0x55;
    std::fs::write(&m[0], f).unwrap();
    // A mismatch left as it is: exit 1.
    let (code, out, err) = run(&with("scrub", &m, &["--json"]), None);
    assert_eq!(code, 1, "{err}");
    let s: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(s["mismatches"], 1);
    let s: Value =
        serde_json::from_slice(&ok(&with("scrub", &m, &["--repair", "--json"]), None)).unwrap();
    assert_eq!(s["repaired"], 1);
    let s: Value = serde_json::from_slice(&ok(&with("scrub", &m, &["--json"]), None)).unwrap();
    assert_eq!(s["mismatches"], 0);
}

#[test]
fn bad_input_is_refused_with_nothing_written() {
    let d = tempfile::tempdir().unwrap();
    let m = paths(d.path(), &["a", "b", "c", "d"]);
    let o = paths(d.path(), &["w", "x", "y", "z"]);
    for set in [&m, &o] {
        let mut create = vec![
            "create", "--layout", "raid5", "--chunk", "4K", "--size", "3M",
        ];
        create.extend(set.iter().map(|s| s.as_str()));
        ok(&create, None);
    }
    ok(
        &with("write", &m, &["--offset", "0"]),
        Some(&data(100_000, 4)),
    );
    let before = hash_files(&m);
    let before_o = hash_files(&o);
    let nowhere = d.path().join("no/such/dir/m").display().to_string();
    let mixed = vec![m[0].clone(), m[1].clone(), m[2].clone(), o[3].clone()];
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            with("write", &m, &["--offset", "999999999"])
                .iter()
                .map(|s| s.to_string())
                .collect(),
            "beyond",
        ),
        (
            with("read", &m, &["--offset", "0", "--length", "1G"])
                .iter()
                .map(|s| s.to_string())
                .collect(),
            "beyond",
        ),
        (
            with("status", &mixed, &[])
                .iter()
                .map(|s| s.to_string())
                .collect(),
            "belongs to array",
        ),
        (
            with("read", &m[..2], &["--offset", "0", "--length", "4K"])
                .iter()
                .map(|s| s.to_string())
                .collect(),
            "missing",
        ),
        (
            with("fail", &m, &["--member", "9"])
                .iter()
                .map(|s| s.to_string())
                .collect(),
            "does not exist",
        ),
        (
            vec![
                "create".into(),
                "--layout".into(),
                "raid5".into(),
                "--size".into(),
                "2M".into(),
                m[0].clone(),
                d.path().join("n1").display().to_string(),
                d.path().join("n2").display().to_string(),
            ],
            "exists",
        ),
        (
            vec![
                "create".into(),
                "--layout".into(),
                "raid5".into(),
                "--size".into(),
                "2M".into(),
                d.path().join("n3").display().to_string(),
                d.path().join("n4").display().to_string(),
                nowhere.clone(),
            ],
            "does not exist",
        ),
        (
            vec![
                "create".into(),
                "--layout".into(),
                "raid6".into(),
                "--size".into(),
                "2M".into(),
                d.path().join("n5").display().to_string(),
                d.path().join("n6").display().to_string(),
            ],
            "at least",
        ),
        (
            with(
                "status",
                &[d.path().join("nothing").display().to_string()],
                &[],
            )
            .iter()
            .map(|s| s.to_string())
            .collect(),
            "does not exist",
        ),
    ];
    for (args, want) in &cases {
        let a: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        let (code, out, err) = run(&a, Some(&data(4096, 5)));
        assert_ne!(code, 0, "{a:?} should fail");
        assert!(out.is_empty(), "{a:?} wrote to stdout");
        assert!(err.contains(want), "{a:?}: expected '{want}' in: {err}");
        assert!(!err.contains("panicked"), "{a:?} panicked: {err}");
    }
    assert!(
        hash_files(&m) == before,
        "a refused command changed the members"
    );
    assert!(
        hash_files(&o) == before_o,
        "a refused command changed another array"
    );
    for n in ["n1", "n2", "n3", "n4", "n5", "n6"] {
        assert!(!d.path().join(n).exists(), "refused create left {n} behind");
    }
    // A non-member file is refused by name.
    let junk = d.path().join("junk").display().to_string();
    std::fs::write(&junk, vec![7u8; 3 << 20]).unwrap();
    let (code, _, err) = run(&with("status", &[m[0].clone(), junk.clone()], &[]), None);
    assert_ne!(code, 0);
    assert!(err.contains("junk") && err.contains("superblock"), "{err}");
}

/// kill -9 of a writing process, then assemble (bitmap resync) and scrub: data
/// flushed before the kill is intact and parity is consistent.
#[test]
fn kill_9_mid_write_then_assemble_and_scrub() {
    let d = tempfile::tempdir().unwrap();
    let m: Vec<String> = paths(d.path(), &["a", "b", "c", "d", "e"]);
    let mut create = vec![
        "create", "--layout", "raid5", "--chunk", "8K", "--size", "40M",
    ];
    create.extend(m.iter().map(|s| s.as_str()));
    ok(&create, None);
    let flushed_len: usize = 100 << 20;
    let base = data(flushed_len, 6);
    ok(&with("write", &m, &["--offset", "0"]), Some(&base));
    // Regions a killed writer may have left half-written (old or new bytes).
    let mut unsure: Vec<(usize, usize)> = Vec::new();
    for round in 0..3u64 {
        // Overwrite a region slowly from a pipe and kill the writer mid-way.
        let start = (1usize << 20) + round as usize * (30 << 20);
        let mut child = bin()
            .args(with("write", &m, &["--offset", &start.to_string()]))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let junk = data(8 << 20, 100 + round);
        for piece in junk.chunks(1 << 20).take(3 + round as usize * 2) {
            if stdin.write_all(piece).is_err() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(40));
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        drop(stdin);
        unsure.push((start, start + (8 << 20)));
        let st: Value =
            serde_json::from_slice(&ok(&with("assemble", &m, &["--json"]), None)).unwrap();
        assert_eq!(st["state"], "optimal");
        let s: Value = serde_json::from_slice(&ok(&with("scrub", &m, &["--json"]), None)).unwrap();
        assert_eq!(
            s["mismatches"], 0,
            "round {round}: parity stale after kill -9 and assembly"
        );
        // Everywhere outside the regions killed writers touched, flushed data is intact.
        let back = ok(
            &with(
                "read",
                &m,
                &["--offset", "0", "--length", &flushed_len.to_string()],
            ),
            None,
        );
        for i in 0..flushed_len {
            if back[i] != base[i] && !unsure.iter().any(|(a, b)| (*a..*b).contains(&i)) {
                panic!("round {round}: flushed byte {i} changed after kill -9");
            }
        }
    }
}

#[test]
fn demo_runs_at_file_speed() {
    let d = tempfile::tempdir().unwrap();
    let out = ok(
        &[
            "demo",
            "--no-emulation",
            "--size",
            "8M",
            "--dir",
            &d.path().display().to_string(),
        ],
        None,
    );
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.contains("0 mismatches") && text.contains("summary:"),
        "{text}"
    );
}

#[allow(dead_code)]
fn unused(_: PathBuf) {}

/// Status JSON and each member's redundancy share.
fn redundancy_shares(m: &[String]) -> (Value, Vec<f64>) {
    let st: Value = serde_json::from_slice(&ok(&with("status", m, &["--json"]), None)).unwrap();
    let shares = st["member_states"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["redundancy_share"].as_f64().unwrap_or(-1.0))
        .collect();
    (st, shares)
}

/// `create --weights auto`: the core's weights from the kinds (2 SSD + 3
/// HDD: all parity on the SSDs), said on stderr; without kinds, refused
/// with nothing created.
#[test]
fn create_with_automatic_weights_follows_the_kinds() {
    let d = tempfile::tempdir().unwrap();
    let m = paths(d.path(), &["m0", "m1", "m2", "m3", "m4"]);
    let mut create = vec![
        "create",
        "--layout",
        "raidh",
        "--weights",
        "auto",
        "--size",
        "8M",
    ];
    create.extend(m.iter().map(|s| s.as_str()));
    let (code, _, err) = run(&create, None);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--weights auto needs --kinds"), "{err}");
    assert!(!Path::new(&m[0]).exists(), "nothing is created");
    create.extend(["--kinds", "hdd,hdd,hdd,ssd,ssd"]);
    let (code, _, err) = run(&create, None);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("weights auto: 0,0,0,16,16"), "{err}");
    let (st, shares) = redundancy_shares(&m);
    assert_eq!(shares, vec![0.0, 0.0, 0.0, 0.5, 0.5], "{st}");
}

/// Weighted RAID6 (`raidh6`, issue 19): P and Q both on the two SSDs by
/// weight; any two members lost, the data reads back; `--weights auto`
/// (one-parity model) refused for it.
#[test]
fn raidh6_holds_both_parities_on_the_weighted_members() {
    let d = tempfile::tempdir().unwrap();
    let m = paths(d.path(), &["m0", "m1", "m2", "m3", "m4", "m5"]);
    let mut create = vec![
        "create",
        "--layout",
        "raidh6",
        "--weights",
        "auto",
        "--kinds",
        "hdd,hdd,hdd,hdd,ssd,ssd",
        "--size",
        "4M",
    ];
    create.extend(m.iter().map(|s| s.as_str()));
    let (code, _, err) = run(&create, None);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("applies to raidh, not to raidh6"), "{err}");
    create[4] = "0,0,0,0,1,1";
    ok(&create, None);
    let (st, shares) = redundancy_shares(&m);
    assert_eq!(shares, vec![0.0, 0.0, 0.0, 0.0, 1.0, 1.0], "{st}");
    let payload = data(3_000_000, 7);
    ok(&with("write", &m, &["--offset", "0"]), Some(&payload));
    ok(&with("fail", &m, &["--member", "1"]), None);
    ok(&with("fail", &m, &["--member", "4"]), None);
    let out = ok(
        &with("read", &m, &["--offset", "0", "--length", "3000000"]),
        None,
    );
    assert!(out == payload, "two members lost: data differs");
}

/// Nine member paths in `dir`.
fn nine(dir: &Path) -> Vec<String> {
    paths(dir, &["m0", "m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8"])
}

/// `create --layout s2raid5 --group 3 --spare-partitions 1 EXTRA... MEMBERS...`.
fn s2_create<'a>(m: &'a [String], extra: &[&'a str]) -> Vec<&'a str> {
    let mut c = vec![
        "create",
        "--layout",
        "s2raid5",
        "--group",
        "3",
        "--spare-partitions",
        "1",
    ];
    c.extend_from_slice(extra);
    c.extend(m.iter().map(|s| s.as_str()));
    c
}

/// K = G with spare space: one disk is shared by two rebuild streams, and
/// create says so, naming both disks by path.
#[test]
fn s2raid5_with_as_many_partitions_as_the_group_gets_a_note() {
    let d = tempfile::tempdir().unwrap();
    let m = nine(d.path());
    let (code, _, err) = run(&s2_create(&m, &["--partitions", "3", "--size", "4M"]), None);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("leave out --partitions"), "{err}");
    assert!(err.contains(&format!("when {} fails", m[0])), "{err}");
}

#[test]
fn s2raid5_rebuilds_to_spare_from_the_command_line() {
    let d = tempfile::tempdir().unwrap();
    let m = nine(d.path());
    let create = s2_create(&m, &["--chunk", "8K", "--size", "4M"]);
    // With spare partitions K defaults to G - 1 (core `default_partitions`):
    // no disk is shared by two rebuild streams, and no note.
    let (code, _, err) = run(&create, None);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("rebuild into spare space"), "{err}");
    let st: Value = serde_json::from_slice(&ok(&with("status", &m, &["--json"]), None)).unwrap();
    assert_eq!(
        (st["partitions"].as_u64(), st["spare_partitions"].as_u64()),
        (Some(2), Some(1))
    );
    let text = String::from_utf8(ok(&with("status", &m, &[]), None)).unwrap();
    assert!(
        text.contains("s2raid5 (2 partitions + 1 spare per member)"),
        "{text}"
    );
    let payload = data(5_000_000, 9);
    ok(&with("write", &m, &["--offset", "0"]), Some(&payload));
    ok(&with("fail", &m, &["--member", "4"]), None);
    let live: Vec<String> = m
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 4)
        .map(|(_, s)| s.clone())
        .collect();
    let r: Value = serde_json::from_slice(&ok(
        &with(
            "rebuild",
            &live,
            &["--to-spare", "--json", "--max-speed", "0"],
        ),
        None,
    ))
    .unwrap();
    assert_eq!(r["streams"], 2);
    let st: Value = serde_json::from_slice(&ok(&with("status", &live, &["--json"]), None)).unwrap();
    assert_eq!(st["state"], "optimal");
    assert_eq!(st["member_states"][4]["state"], "removed");
    let back = ok(
        &with("read", &live, &["--offset", "0", "--length", "5000000"]),
        None,
    );
    assert!(back == payload);
    // And it survives another failure.
    ok(&with("fail", &live, &["--member", "0"]), None);
    let rest: Vec<String> = live[1..].to_vec();
    let back = ok(
        &with("read", &rest, &["--offset", "0", "--length", "5000000"]),
        None,
    );
    assert!(back == payload);
}

/// The declustered layout from the command line (issue 20): create, write,
/// fail, rebuild into distributed spare space, read back; options of other
/// layouts are refused with it, and its own with others.
#[test]
fn declustered_from_the_command_line() {
    let d = tempfile::tempdir().unwrap();
    let m = paths(d.path(), &["d0", "d1", "d2", "d3", "d4", "d5", "d6", "d7"]);
    let mut create = vec![
        "create",
        "--layout",
        "declustered",
        "--width",
        "4",
        "--spares",
        "1",
        "--chunk",
        "8K",
        "--size",
        "4M",
    ];
    create.extend(m.iter().map(|s| s.as_str()));
    let (code, _, err) = run(&create, None);
    assert_eq!(code, 0, "{err}");
    let payload = data(3_000_000, 5);
    ok(&with("write", &m, &["--offset", "0"]), Some(&payload));
    ok(&with("fail", &m, &["--member", "5"]), None);
    let live: Vec<String> = m
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 5)
        .map(|(_, s)| s.clone())
        .collect();
    let r: Value = serde_json::from_slice(&ok(
        &with(
            "rebuild",
            &live,
            &["--to-spare", "--json", "--max-speed", "0"],
        ),
        None,
    ))
    .unwrap();
    assert_eq!(r["completed"], true, "{r}");
    let st: Value = serde_json::from_slice(&ok(&with("status", &live, &["--json"]), None)).unwrap();
    assert_eq!(st["state"], "optimal");
    let back = ok(
        &with("read", &live, &["--offset", "0", "--length", "3000000"]),
        None,
    );
    assert!(back == payload);
    // Rebalance: member 5's chunks go home onto a replacement, which
    // frees the spare chunks; the array is whole on the new member set.
    let fresh = d.path().join("n5").to_str().unwrap().to_string();
    std::fs::File::create(&fresh)
        .unwrap()
        .set_len(5 << 20)
        .unwrap();
    // `add` into the retired slot would attach an empty device whose data
    // is in spare space: refused, naming the slot's path and rebalance,
    // and nothing written to the new device.
    let (code, _, err) = run(&with("add", &live, &["--with", &fresh]), None);
    assert_ne!(code, 0);
    assert!(
        err.contains("slot 5") && err.contains(&m[5]) && err.contains("hetraid rebalance"),
        "{err}"
    );
    assert!(std::fs::read(&fresh).unwrap().iter().all(|&b| b == 0));
    let r: Value = serde_json::from_slice(&ok(
        &with("rebalance", &live, &["--with", &fresh, "--json"]),
        None,
    ))
    .unwrap();
    assert_eq!(r["member"], 5, "{r}");
    assert!(r["chunks"].as_u64().unwrap() > 0, "{r}");
    let mut all = live.clone();
    all.push(fresh.clone());
    let st: Value = serde_json::from_slice(&ok(&with("status", &all, &["--json"]), None)).unwrap();
    assert_eq!(st["state"], "optimal");
    let back = ok(
        &with("read", &all, &["--offset", "0", "--length", "3000000"]),
        None,
    );
    assert!(back == payload);
    let sc = String::from_utf8(ok(&with("scrub", &all, &[]), None)).unwrap();
    assert!(sc.contains(" 0 mismatched"), "{sc}");
    // Nothing relocated any more: refused in one sentence.
    let (code, _, err) = run(&with("rebalance", &all, &["--with", &m[5]]), None);
    assert_ne!(code, 0);
    assert!(err.contains("nothing to copy back"), "{err}");
    for (extra, want) in [
        (
            vec!["--layout", "declustered", "--width", "4", "--group", "3"],
            "--group",
        ),
        (vec!["--layout", "raid5", "--width", "4"], "--width"),
        (vec!["--layout", "declustered"], "--width"),
        (
            vec!["--layout", "declustered", "--width", "8", "--spares", "1"],
            "--width + --spares",
        ),
    ] {
        let d2 = tempfile::tempdir().unwrap();
        let m2 = paths(d2.path(), &["a", "b", "c", "e", "f", "g", "h", "i"]);
        let mut c = vec!["create"];
        c.extend(extra.iter().copied());
        c.extend(["--size", "4M"]);
        c.extend(m2.iter().map(|s| s.as_str()));
        let (code, _, err) = run(&c, None);
        assert_eq!(code, 2, "{extra:?}: {err}");
        assert!(err.contains(want), "{extra:?}: {err}");
        assert!(
            !m2.iter().any(|p| std::path::Path::new(p).exists()),
            "{extra:?} wrote a member"
        );
    }
}
