//! Issue 35: every command a transaction, every device with a generation.
//! A refused command exits 2 with one sentence and leaves every member
//! byte-identical; a command given only some members of a healthy array
//! refuses unless `--degraded`; a member put back from a copy is detected,
//! left out and resynced; a superblock altered to another geometry is
//! refused by name.
//!
//! `operator_mistakes_change_nothing` draws verbs and mistakes from a seed
//! (`HETRAID_SEED` replays one, `HETRAID_CASES` sets how many; CI runs a
//! short slice).

mod common;
use common::{args, bytes, env_u64, hetraid, run_stdin, Rng};
use std::path::Path;

fn p(d: &Path, n: &str) -> String {
    d.join(n).display().to_string()
}

fn digest(files: &[String]) -> Vec<u32> {
    files
        .iter()
        .map(|f| crc32c::crc32c(&std::fs::read(f).unwrap()))
        .collect()
}

/// A 4-member RAID5 of 8 MiB files holding 4 MiB of data.
fn raid5(d: &Path, tag: &str) -> (Vec<String>, Vec<u8>) {
    let m: Vec<String> = (0..4).map(|i| p(d, &format!("{tag}{i}"))).collect();
    let (c, _, e) = hetraid(&args(
        "create",
        &m,
        &["--layout", "raid5", "--size", "8M", "--chunk", "64K"],
    ));
    assert_eq!(c, 0, "{e}");
    let data = bytes(4 << 20, 7);
    let (c, _, e) = run_stdin(&args("write", &m, &["--offset", "0"]), Some(&data));
    assert_eq!(c, 0, "{e}");
    (m, data)
}

fn read(m: &[String], len: usize) -> Vec<u8> {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_hetraid"))
        .args(args(
            "read",
            m,
            &["--offset", "0", "--length", &len.to_string()],
        ))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    o.stdout
}

/// Case 1: a member left off the command line, for every verb that writes.
#[test]
fn a_forgotten_member_degrades_nothing() {
    let d = tempfile::tempdir().unwrap();
    let (m, data) = raid5(d.path(), "m");
    let x = p(d.path(), "x");
    std::fs::write(&x, vec![0u8; 8 << 20]).unwrap();
    let before = digest(&m);
    let three = &m[..3];
    let cases: Vec<Vec<&str>> = vec![
        args("fail", three, &["--member", "9"]),
        args("fail", three, &["--member", "1"]),
        args("grow", three, &["--add", &x]),
        args("shrink", three, &["--member", "1", "--size", "1M"]),
        args("rebalance", three, &["--with", &x]),
        args("scrub", three, &["--repair", "--trust-member", "7"]),
        args("scrub", three, &["--repair", "--trust-data"]),
        args("rebuild", three, &[]),
        args("remove", three, &["--member", "1"]),
        args("assemble", three, &[]),
        args("write", three, &["--offset", "0"]),
    ];
    for a in &cases {
        let (code, _, err) = run_stdin(a, Some(&[1u8; 4096]));
        assert_eq!(code, 2, "hetraid {a:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "one sentence: {err}");
        assert!(!err.contains("panicked"), "{err}");
        assert_eq!(digest(&m), before, "hetraid {a:?} changed a member");
    }
    let (_, _, err) = hetraid(&args("write", three, &["--offset", "0"]));
    assert!(
        err.contains("member 3 (last seen") && err.contains("--degraded"),
        "{err}"
    );
    // read and status never record a member missing.
    assert_eq!(read(three, 4 << 20), data);
    let (code, _, _) = hetraid(&args("status", &m, &["--test"]));
    assert_eq!(code, 0);
    assert_eq!(digest(&m), before);
    // --degraded says so: the array then runs without it.
    let (code, _, err) = run_stdin(
        &args("write", three, &["--offset", "0", "--degraded"]),
        Some(&data[..4096]),
    );
    assert_eq!(code, 0, "{err}");
    let (code, _, _) = hetraid(&args("status", &m, &["--test"]));
    assert_eq!(code, 1, "degraded once --degraded wrote");
}

/// Case 6: a member copied aside, writes, the copy put back: detected, left
/// out, resynced whole, every byte right (with and without checksums).
#[test]
fn a_member_put_back_from_a_copy_is_detected_and_resynced() {
    for checksums in [false, true] {
        let d = tempfile::tempdir().unwrap();
        let m: Vec<String> = (0..4).map(|i| p(d.path(), &format!("m{i}"))).collect();
        let mut extra = vec!["--layout", "raid5", "--size", "16M"];
        if checksums {
            extra.extend(["--checksums", "crc32c"]);
        }
        let (c, _, e) = hetraid(&args("create", &m, &extra));
        assert_eq!(c, 0, "{e}");
        let old = bytes(6 << 20, 1);
        let new = bytes(6 << 20, 2);
        let w = |data: &[u8]| {
            let (c, _, e) = run_stdin(&args("write", &m, &["--offset", "0"]), Some(data));
            assert_eq!(c, 0, "{e}");
        };
        w(&old);
        let copy = std::fs::read(&m[1]).unwrap();
        w(&new);
        std::fs::write(&m[1], copy).unwrap();
        let (code, _, err) = hetraid(&args("status", &m, &["--test"]));
        assert_eq!(code, 1, "the copy put back shows as degraded: {err}");
        assert!(err.contains("write generation"), "{err}");
        assert_eq!(read(&m, 6 << 20), new, "checksums {checksums}");
        let (c, out, e) = hetraid(&args("add", &m, &["--with", &m[1]]));
        assert_eq!(c, 0, "{e}");
        assert!(!out.contains("re-added"), "a copy is resynced whole: {out}");
        let (c, _, e) = hetraid(&args("rebuild", &m, &[]));
        assert_eq!(c, 0, "{e}");
        assert_eq!(read(&m, 6 << 20), new);
        let (c, out, e) = hetraid(&args("scrub", &m, &[]));
        assert_eq!(c, 0, "{out}{e}");
        assert!(out.contains("0 mismatched"), "{out}");
    }
}

/// Case 7: a superblock made freshest with another layout is refused by
/// name, and the array reads right without it.
#[test]
fn a_superblock_with_another_geometry_is_refused_by_name() {
    let d = tempfile::tempdir().unwrap();
    let (m, data) = raid5(d.path(), "m");
    let mut sb = std::fs::read(&m[2]).unwrap()[..4096].to_vec();
    sb[72..104].fill(0);
    sb[72..77].copy_from_slice(b"raid0");
    let ev = u64::from_le_bytes(sb[32..40].try_into().unwrap()) + 1;
    sb[32..40].copy_from_slice(&ev.to_le_bytes());
    let crc = crc32c::crc32c(&sb[..4092]);
    sb[4092..].copy_from_slice(&crc.to_le_bytes());
    let mut f = std::fs::read(&m[2]).unwrap();
    f[..4096].copy_from_slice(&sb);
    std::fs::write(&m[2], f).unwrap();
    let before = digest(&m);
    for verb in ["status", "assemble"] {
        let (code, _, err) = hetraid(&args(verb, &m, &[]));
        assert_ne!(code, 0);
        assert!(
            err.contains(&m[2]) && err.contains("another geometry"),
            "{err}"
        );
    }
    assert_eq!(digest(&m), before);
    let rest = [m[0].clone(), m[1].clone(), m[3].clone()];
    assert_eq!(read(&rest, 4 << 20), data);
}

/// Case 5: a shrink past written data or by more than half needs --force.
#[test]
fn shrink_past_data_needs_force() {
    let d = tempfile::tempdir().unwrap();
    let m: Vec<String> = (0..5).map(|i| p(d.path(), &format!("r{i}"))).collect();
    let (c, _, e) = hetraid(&args(
        "create",
        &m,
        &[
            "--layout",
            "raidx",
            "--raidx-level",
            "5",
            "--chunks-per-bundle",
            "3",
            "--size",
            "16M",
        ],
    ));
    assert_eq!(c, 0, "{e}");
    let data = bytes(36 << 20, 3);
    let (c, _, e) = run_stdin(&args("write", &m, &["--offset", "0"]), Some(&data));
    assert_eq!(c, 0, "{e}");
    let before = digest(&m);
    for (size, why) in [
        ("128K", "more than half"),
        ("30M", "data was written there"),
    ] {
        let (code, _, err) = hetraid(&args("shrink", &m, &["--member", "4", "--size", size]));
        assert_eq!(code, 2, "--size {size}: {err}");
        assert!(err.contains("--force") && err.contains(why), "{err}");
        assert_eq!(digest(&m), before, "--size {size}");
    }
}

/// Case 12: probe --destructive keeps a member of an array.
#[test]
fn probe_destructive_keeps_a_member() {
    let d = tempfile::tempdir().unwrap();
    let (m, _) = raid5(d.path(), "m");
    let before = digest(&m);
    let (code, _, err) = hetraid(&[
        "probe",
        &m[0],
        "--destructive",
        "--seconds",
        "0.1",
        "--out",
        d.path().to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("hetraid array"), "{err}");
    assert_eq!(digest(&m), before);
}

/// Verbs that write × operator mistakes on healthy and degraded arrays:
/// every refusal exits 2 in one sentence with every member unchanged.
#[test]
fn operator_mistakes_change_nothing() {
    let seed = env_u64("HETRAID_SEED", 0x35_35_35);
    let cases = env_u64("HETRAID_CASES", 24);
    let mut rng = Rng(seed | 1);
    let d = tempfile::tempdir().unwrap();
    let (m, _) = raid5(d.path(), "m");
    let other = {
        let o: Vec<String> = (0..3).map(|i| p(d.path(), &format!("o{i}"))).collect();
        let (c, _, e) = hetraid(&args("create", &o, &["--layout", "raid5", "--size", "8M"]));
        assert_eq!(c, 0, "{e}");
        o
    };
    let blank = p(d.path(), "blank");
    std::fs::write(&blank, vec![0u8; 8 << 20]).unwrap();
    let verbs = [
        "fail",
        "remove",
        "add",
        "replace",
        "rebuild",
        "grow",
        "shrink",
        "rebalance",
        "scrub",
        "reclaim",
        "write",
        "serve",
    ];
    let mut refusals = 0;
    for case in 0..cases {
        // Healthy, or degraded by one failed member (recorded).
        let degraded = rng.below(2) == 1;
        let (code, _, err) = hetraid(&args("status", &m, &["--test"]));
        assert!(code <= 1, "{err}");
        if degraded && code == 0 {
            let (c, _, e) = hetraid(&args("fail", &m, &["--member", "3"]));
            assert_eq!(c, 0, "{e}");
        } else if !degraded && code == 1 {
            let (c, _, e) = hetraid(&args("add", &m, &["--with", &m[3]]));
            assert_eq!(c, 0, "{e}");
            let (c, _, e) = hetraid(&args("rebuild", &m, &[]));
            assert_eq!(c, 0, "{e}");
        }
        let verb = verbs[rng.below(verbs.len() as u64) as usize];
        // The mistake: a member left out, a foreign member, a wrong slot,
        // an option that does not apply.
        let mistake = rng.below(4);
        let mut given: Vec<String> = m.clone();
        let mut extra: Vec<String> = Vec::new();
        match mistake {
            0 => {
                let k = rng.below(3) as usize;
                given.remove(k);
            }
            1 => given.push(other[0].clone()),
            2 => extra.extend(["--member".into(), "9".into()]),
            _ => extra.push("--no-such-option".into()),
        }
        match verb {
            "add" | "replace" if mistake != 2 => {
                extra.extend(["--with".into(), blank.clone()]);
                if verb == "replace" {
                    extra.extend(["--member".into(), "0".into()]);
                }
            }
            "replace" => extra.extend(["--with".into(), blank.clone()]),
            "grow" if mistake != 2 => extra.extend(["--add".into(), blank.clone()]),
            "shrink" if mistake != 2 => {
                extra.extend(["--member".into(), "1".into(), "--size".into(), "1M".into()])
            }
            "shrink" => extra.extend(["--size".into(), "1M".into()]),
            "rebalance" => extra.extend(["--with".into(), blank.clone()]),
            "scrub" => extra.extend(["--repair".into(), "--trust-member".into(), "1".into()]),
            "write" => extra.extend(["--offset".into(), "0".into()]),
            "serve" => extra.extend(["--listen".into(), format!("unix:{}", p(d.path(), "s.sock"))]),
            _ => {}
        }
        let all: Vec<String> = m
            .iter()
            .chain(other.iter())
            .cloned()
            .chain([blank.clone()])
            .collect();
        let before = digest(&all);
        let extra_s: Vec<&str> = extra.iter().map(String::as_str).collect();
        let a = args(verb, &given, &extra_s);
        let (code, _, err) = run_stdin(&a, Some(&[5u8; 4096]));
        let ctx = format!("seed {seed} case {case} (degraded {degraded}): hetraid {a:?}");
        assert!(!err.contains("panicked"), "{ctx}: {err}");
        if std::env::var_os("HETRAID_VERBOSE").is_some() {
            eprintln!("{ctx}: exit {code}: {}", err.trim_end());
        }
        if code != 0 {
            refusals += 1;
            assert!(code == 2 || code == 64, "{ctx}: exit {code}: {err}");
            assert_eq!(
                digest(&all),
                before,
                "{ctx}: refused ({err}) but changed a member"
            );
            if code == 2 {
                assert_eq!(
                    err.trim_end().lines().count(),
                    1,
                    "{ctx}: one sentence: {err}"
                );
            }
        }
    }
    eprintln!("{cases} cases, {refusals} refused, seed {seed}");
    assert!(refusals > 0);
}
