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
use common::{args, bytes, env_u64, hetraid, run_stdin, serve, Rng};
use std::path::Path;
use std::time::{Duration, Instant};

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
    // With --force it shrinks; the slot is then named removed, and the
    // device joins again as a new member.
    ok(&args(
        "shrink",
        &m,
        &["--member", "4", "--size", "30M", "--force"],
    ));
    let (_, _, err) = hetraid(&args("status", &m, &[]));
    assert!(
        err.contains("removed by a shrink") && err.contains("grow"),
        "{err}"
    );
    let out = ok(&args("grow", &m[..4], &["--add", &m[4]]));
    assert!(out.contains("added"), "{out}");
    assert_eq!(read(&m, 30 << 20), data[..30 << 20]);
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
    let empty = blank(d.path(), "blank", 8);
    // A rebuilding array (a replacement attached, not rebuilt) and a
    // changing one (a grow recorded, no chunk moved).
    let (r0, _) = raid5(d.path(), "r");
    ok(&args("fail", &r0, &["--member", "1"]));
    let rb = blank(d.path(), "rb", 8);
    let r_rest = [r0[0].clone(), r0[2].clone(), r0[3].clone()];
    ok(&args("replace", &r_rest, &["--member", "1", "--with", &rb]));
    let r = vec![r0[0].clone(), rb, r0[2].clone(), r0[3].clone()];
    let (x0, _) = raidx5(d.path(), "x");
    let xb = blank(d.path(), "xb", 16);
    ok(&args("grow", &x0, &["--add", &xb, "--batches", "0"]));
    let mut x = x0.clone();
    x.push(xb);
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
        // Healthy, degraded by one failed member (recorded), rebuilding,
        // or changing.
        let state = rng.below(4);
        let degraded = state == 1;
        let (code, _, err) = hetraid(&args("status", &m, &["--test"]));
        assert!(code <= 1, "{err}");
        if state <= 1 && degraded && code == 0 {
            let (c, _, e) = hetraid(&args("fail", &m, &["--member", "3"]));
            assert_eq!(c, 0, "{e}");
        } else if state == 0 && code == 1 {
            let (c, _, e) = hetraid(&args("add", &m, &["--with", &m[3]]));
            assert_eq!(c, 0, "{e}");
            let (c, _, e) = hetraid(&args("rebuild", &m, &[]));
            assert_eq!(c, 0, "{e}");
        }
        let verb = verbs[rng.below(verbs.len() as u64) as usize];
        // The mistake: a member left out, a foreign member, a wrong slot,
        // an option that does not apply.
        let mistake = rng.below(4);
        let target = match state {
            2 => &r,
            3 => &x,
            _ => &m,
        };
        let mut given: Vec<String> = target.clone();
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
                extra.extend(["--with".into(), empty.clone()]);
                if verb == "replace" {
                    extra.extend(["--member".into(), "0".into()]);
                }
            }
            "replace" => extra.extend(["--with".into(), empty.clone()]),
            "grow" if mistake != 2 => extra.extend(["--add".into(), empty.clone()]),
            "shrink" if mistake != 2 => {
                extra.extend(["--member".into(), "1".into(), "--size".into(), "1M".into()])
            }
            "shrink" => extra.extend(["--size".into(), "1M".into()]),
            "rebalance" => extra.extend(["--with".into(), empty.clone()]),
            "scrub" => extra.extend(["--repair".into(), "--trust-member".into(), "1".into()]),
            "write" => extra.extend(["--offset".into(), "0".into()]),
            "serve" => extra.extend(["--listen".into(), format!("unix:{}", p(d.path(), "s.sock"))]),
            _ => {}
        }
        let all: Vec<String> = m
            .iter()
            .chain(other.iter())
            .chain(r.iter())
            .chain(x.iter())
            .cloned()
            .chain([empty.clone()])
            .collect();
        let before = digest(&all);
        let extra_s: Vec<&str> = extra.iter().map(String::as_str).collect();
        let a = args(verb, &given, &extra_s);
        let (code, _, err) = run_stdin(&a, Some(&[5u8; 4096]));
        let ctx = format!("seed {seed} case {case} (state {state}): hetraid {a:?}");
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

fn ok(a: &[&str]) -> String {
    let (code, out, err) = hetraid(a);
    assert_eq!(code, 0, "hetraid {a:?}: {err}");
    out + &err
}

fn blank(d: &Path, n: &str, mib: u64) -> String {
    let f = p(d, n);
    std::fs::write(&f, vec![0u8; (mib << 20) as usize]).unwrap();
    f
}

/// Poll `status` until `want` shows up (or fail after 30 s).
fn wait_status(m: &[String], want: &str) -> String {
    let t = Instant::now();
    loop {
        let (_, out, err) = hetraid(&args("status", m, &[]));
        if out.contains(want) || err.contains(want) {
            return out;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "no '{want}' in: {out}{err}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A 4-member RAIDX5 (c = 3) of 16 MiB files holding 12 MiB.
fn raidx5(d: &Path, tag: &str) -> (Vec<String>, Vec<u8>) {
    let m: Vec<String> = (0..4).map(|i| p(d, &format!("{tag}{i}"))).collect();
    ok(&args(
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
    let data = bytes(12 << 20, 11);
    let (c, _, e) = run_stdin(&args("write", &m, &["--offset", "0"]), Some(&data));
    assert_eq!(c, 0, "{e}");
    (m, data)
}

/// Case 3: grow while an offline rebuild runs is refused, the new device
/// untouched; case 15: before that rebuild, status says it waits and how
/// to run it.
#[test]
fn grow_waits_for_a_running_rebuild_and_status_names_a_waiting_one() {
    let d = tempfile::tempdir().unwrap();
    let (m, data) = raidx5(d.path(), "m");
    ok(&args("fail", &m, &["--member", "1"]));
    let n = blank(d.path(), "n", 16);
    let rest = [m[0].clone(), m[2].clone(), m[3].clone()];
    let out = ok(&args("replace", &rest, &["--member", "1", "--with", &n]));
    let now = vec![m[0].clone(), n.clone(), m[2].clone(), m[3].clone()];
    assert!(out.contains("hetraid rebuild"), "{out}");
    let st = ok(&args("status", &now, &[]));
    assert!(
        st.contains("awaiting rebuild")
            && st.contains(&format!("hetraid rebuild {}", now.join(" "))),
        "{st}"
    );
    let mut rb = std::process::Command::new(env!("CARGO_BIN_EXE_hetraid"))
        .args(args("rebuild", &now, &["--max-speed", "1M"]))
        .stderr(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_status(&now, "% (stripe");
    let x = blank(d.path(), "x", 16);
    let (code, _, err) = hetraid(&args("grow", &now, &["--add", &x]));
    // Assembling members another process holds is busy too (a kind, not a
    // sentence: the exit code says "try again").
    let (acode, _, aerr) = hetraid(&args("assemble", &now, &[]));
    let _ = rb.kill();
    assert_eq!(acode, 75, "{aerr}");
    assert!(aerr.contains("in use by another hetraid process"), "{aerr}");
    let _ = rb.wait();
    // Busy (EX_TEMPFAIL): nothing was changed, try again once it ends.
    assert_eq!(code, 75, "{err}");
    assert!(err.contains("a rebuild is running"), "{err}");
    assert!(
        std::fs::read(&x).unwrap().iter().all(|&b| b == 0),
        "x was written"
    );
    // Case 10: serve resumes the rebuild the kill cut short.
    let sock = d.path().join("s.sock");
    let _s = serve(&now, &sock);
    wait_status(&now, "state optimal");
    drop(_s);
    assert_eq!(read(&now, 12 << 20), data);
}

/// Case 4: a flipped byte in one member's bundle table does not stop the
/// array: status exits 0 and names it, reads are right, assembly rewrites it.
#[test]
fn a_damaged_bundle_table_page_is_rewritten_not_fatal() {
    let d = tempfile::tempdir().unwrap();
    let (m, data) = raidx5(d.path(), "m");
    let (_, out, _) = hetraid(&args("status", &m, &["--json"]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let size = v["member_states"][2]["data_bytes"].as_u64().unwrap();
    // The table follows the data area, which follows the metadata (1 MiB)
    // and, with block checksums (the default), their area: 1 MiB for
    // members of up to 1 GiB of data.
    assert_eq!(v["checksums"], true, "{v}");
    let start = (1 << 20) + (1 << 20) + size;
    for at in [start + 10, start + 4096 + 50] {
        let mut f = std::fs::read(&m[2]).unwrap();
        f[at as usize] ^= 0xff;
        std::fs::write(&m[2], f).unwrap();
        let (code, _, err) = hetraid(&args("status", &m, &["--test"]));
        assert_eq!(code, 0, "{err}");
        assert!(err.contains(&m[2]) && err.contains("bundle table"), "{err}");
        assert_eq!(read(&m, 12 << 20), data);
        let out = ok(&args("assemble", &m, &[]));
        assert!(out.contains("optimal"), "{out}");
        let (_, _, err) = hetraid(&args("status", &m, &[]));
        assert!(!err.contains("bundle table"), "repaired: {err}");
    }
}

/// Case 8: a served array lets a failed member go, so it is re-added while
/// served; case 11: a served grow works after a spare took over.
#[test]
fn served_arrays_release_failed_members_and_grow_after_a_spare() {
    let d = tempfile::tempdir().unwrap();
    let (m, data) = raidx5(d.path(), "m");
    let sp = blank(d.path(), "sp", 16);
    ok(&args("add", &m, &["--with", &sp]));
    let mut all = m.clone();
    all.push(sp.clone());
    let sock = d.path().join("s.sock");
    let _s = serve(&all, &sock);
    ok(&args("fail", &all, &["--member", &m[2]]));
    // The spare takes slot 2 and is rebuilt by the server.
    let now = vec![m[0].clone(), m[1].clone(), sp.clone(), m[3].clone()];
    wait_status(&now, "state optimal");
    // m2 is closed by the server: it can be opened (and locked) again.
    let out = ok(&args("add", &now, &["--with", &m[2]]));
    assert!(out.contains("spare"), "{out}");
    let x = blank(d.path(), "x", 16);
    let mut with_spare = now.clone();
    with_spare.push(m[2].clone());
    ok(&args("remove", &with_spare, &["--member", &m[2]]));
    let out = ok(&args("grow", &now, &["--add", &x]));
    assert!(out.contains("slot 4 added"), "{out}");
    drop(_s);
    let mut grown = now.clone();
    grown.push(x);
    assert_eq!(read(&grown, 12 << 20), data);
}

/// Case 13: --scan leaves an earlier incarnation's member and an older
/// copy out with a warning; two arrays of one name are refused by --name.
#[test]
fn scan_leaves_old_copies_out_and_refuses_a_name_twice() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("a");
    std::fs::create_dir(&dir).unwrap();
    let m: Vec<String> = (0..4).map(|i| p(&dir, &format!("m{i}"))).collect();
    ok(&args(
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
            "--name",
            "tank",
        ],
    ));
    let old = d.path().join("old");
    std::fs::copy(&m[0], &old).unwrap();
    let x = blank(&dir, "x", 16);
    ok(&args("grow", &m, &["--add", &x]));
    std::fs::copy(&m[1], dir.join("m1.bak")).unwrap();
    let (c, _, e) = run_stdin(
        &args(
            "write",
            &[m.clone(), vec![x.clone()]].concat(),
            &["--offset", "0"],
        ),
        Some(&[3u8; 8192]),
    );
    assert_eq!(c, 0, "{e}");
    std::fs::rename(&old, dir.join("old")).unwrap();
    let dirs = [dir.display().to_string()];
    let (code, out, err) = hetraid(&args("assemble", &dirs, &["--scan"]));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("5 members"), "{out}");
    assert!(
        err.contains("old is left out") && err.contains("m1.bak is left out"),
        "{err}"
    );
    let other = d.path().join("b");
    std::fs::create_dir(&other).unwrap();
    let o: Vec<String> = (0..3).map(|i| p(&other, &format!("o{i}"))).collect();
    ok(&args(
        "create",
        &o,
        &["--layout", "raid5", "--size", "8M", "--name", "tank"],
    ));
    let both = [dir.display().to_string(), other.display().to_string()];
    let (code, _, err) = hetraid(&args("assemble", &both, &["--scan", "--name", "tank"]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("2 arrays are named tank"), "{err}");
}

/// Case 14: the resume of a grow given a new device a kill left blank
/// names the command that starts it again, which works.
#[test]
fn a_grow_cut_before_it_began_names_the_command() {
    let d = tempfile::tempdir().unwrap();
    let (m, data) = raidx5(d.path(), "m");
    let x = blank(d.path(), "x", 16);
    let mut all = m.clone();
    all.push(x.clone());
    let (code, _, err) = hetraid(&args("grow", &all, &[]));
    assert_eq!(code, 2, "{err}");
    let want = format!("hetraid grow {} --add {x}", m.join(" "));
    assert!(err.contains(&want), "{err}");
    ok(&args("grow", &m, &["--add", &x]));
    assert_eq!(read(&all, 12 << 20), data);
    // A log device has no member superblock either: it is never taken for
    // the blank new device of a grow cut short (it was, in a kill campaign
    // of grows of a RAID5 with a journal).
    let e = tempfile::tempdir().unwrap();
    let log = p(e.path(), "log0");
    let mut m: Vec<String> = (0..4).map(|i| p(e.path(), &format!("r{i}"))).collect();
    let mut a = vec![
        "create",
        "--layout",
        "raid5",
        "--size",
        "16M",
        "--log",
        &log,
        "--log-size",
        "8M",
    ];
    a.extend(m.iter().map(|s| s.as_str()));
    ok(&a);
    m.push(log.clone());
    let (code, _, err) = hetraid(&args("grow", &m, &[]));
    assert_eq!(code, 2, "{err}");
    assert!(!err.contains("carries no hetraid superblock"), "{err}");
    assert!(err.contains("no grow or shrink is in progress"), "{err}");
}

/// Case 9: a served degraded array idle for a second after a client's
/// write (no flush asked) is marked clean, so a kill then is not taken for
/// a crash with writes in flight: it starts again without --force.
#[test]
fn a_degraded_array_killed_while_idle_starts_without_force() {
    // libnbd's Python binding: a client that writes and never flushes.
    let py = if Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    };
    let has_nbd = std::process::Command::new(py)
        .args(["-c", "import nbd"])
        .status()
        .is_ok_and(|s| s.success());
    if !has_nbd {
        common::missing("python3-libnbd is not installed (apt-get install python3-libnbd)");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let (m, _) = raid5(d.path(), "m");
    ok(&args("fail", &m, &["--member", "1"]));
    let live = [m[0].clone(), m[2].clone(), m[3].clone()];
    let sock = d.path().join("s.sock");
    let s = serve(&live, &sock);
    let script = format!(
        "import nbd, time\nh = nbd.NBD()\nh.connect_uri('nbd+unix:///?socket={}')\nh.pwrite(b'\\x07' * 65536, 0)\ntime.sleep(20)\n",
        sock.display()
    );
    let mut client = std::process::Command::new(py)
        .args(["-c", &script])
        .spawn()
        .unwrap();
    let clean = || {
        let (_, out, _) = hetraid(&args("status", &live, &["--json"]));
        serde_json::from_str::<serde_json::Value>(&out).unwrap_or_default()["clean"] == true
    };
    // Dirty once the write began, clean once idle.
    let t = Instant::now();
    while clean() {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the write never came"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    while !clean() {
        assert!(t.elapsed() < Duration::from_secs(15), "never marked clean");
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(s); // kill -9, the client still connected
    let _ = client.kill();
    let _ = client.wait();
    let st = ok(&args("status", &live, &[]));
    assert!(!st.contains("dirty"), "{st}");
    let got = read(&live, 65536);
    assert!(got.iter().all(|&b| b == 7), "the client's write is there");
}

/// Case 2: repeating a grow that finished (as anyone does after a kill, not
/// knowing whether it finished) is refused and changes nothing.
#[test]
fn repeating_a_finished_grow_changes_nothing() {
    let d = tempfile::tempdir().unwrap();
    let (m, data) = raidx5(d.path(), "m");
    let x = blank(d.path(), "x", 16);
    ok(&args("grow", &m, &["--add", &x]));
    let mut all = m.clone();
    all.push(x.clone());
    let before = digest(&all);
    for a in [
        args("grow", &m, &["--add", &x]),
        args("grow", &all, &[]),
        args("grow", &all, &["--add", &x]),
    ] {
        let (code, _, err) = hetraid(&a);
        assert_eq!(code, 2, "hetraid {a:?}: {err}");
        assert_eq!(digest(&all), before, "hetraid {a:?} changed a member");
    }
    let (code, _, _) = hetraid(&args("status", &all, &["--test"]));
    assert_eq!(code, 0);
    assert_eq!(read(&all, 12 << 20), data);
}

/// `serve` checks every option before it touches the array: a refusal
/// leaves every member as it was, also when the assembly alone would have
/// recorded a member not given as missing (it once checked --workers,
/// --max-connections and --stall-timeout after committing the assembly).
#[test]
fn serve_refuses_bad_options_before_touching_the_array() {
    let d = tempfile::tempdir().unwrap();
    let (m, _) = raid5(d.path(), "m");
    let given = m[..3].to_vec();
    let sock = format!("unix:{}", d.path().join("s.sock").display());
    let before = digest(&m);
    for (extra, says) in [
        (["--workers", "0"], "--workers"),
        (["--max-connections", "0"], "--max-connections 0"),
        (["--stall-timeout", "0"], "--stall-timeout"),
        (["--log-memory", "1K"], "--log-memory"),
    ] {
        let mut a = args("serve", &given, &["--degraded", "--listen", &sock]);
        a.extend(extra);
        let (code, _, err) = hetraid(&a);
        assert_eq!(code, 2, "{extra:?}: {err}");
        assert!(err.contains(says), "{extra:?}: {err}");
        assert_eq!(digest(&m), before, "{extra:?} changed a member");
    }
}
