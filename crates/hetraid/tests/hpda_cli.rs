//! HPDA from the command line (issue 13): what `create --layout hpda` refuses
//! (one sentence, exit 2, nothing written), and a life on files: create,
//! random and sequential writes, status (routing, log, monitor), reclaim,
//! an SSD failed and rebuilt, read back equal, scrub clean.

mod common;
use common::{bytes, hetraid, run_stdin};

fn sized(d: &std::path::Path, sizes: &[u64]) -> Vec<String> {
    sizes
        .iter()
        .enumerate()
        .map(|(i, &mib)| {
            let p = d.join(format!("m{i}"));
            std::fs::File::create(&p)
                .unwrap()
                .set_len(mib << 20)
                .unwrap();
            p.display().to_string()
        })
        .collect()
}

fn with_kinds(m: &[String]) -> Vec<String> {
    m.iter()
        .zip(["ssd", "ssd", "ssd", "hdd", "hdd"])
        .map(|(p, k)| format!("{p}:{k}"))
        .collect()
}

fn all_zero(paths: &[String]) -> bool {
    paths
        .iter()
        .all(|p| std::fs::read(p).unwrap().iter().all(|&b| b == 0))
}

#[test]
fn create_refuses_what_hpda_cannot_be_and_writes_nothing() {
    let d = tempfile::tempdir().unwrap();
    // HDD-1 no larger than an SSD: no room for the log past the parity.
    let m = sized(d.path(), &[8, 8, 8, 8, 8]);
    let k = with_kinds(&m);
    let mut cases: Vec<(Vec<String>, &str)> = Vec::new();
    let base = |extra: &[&str]| {
        let mut a = vec!["create".to_string(), "--layout".into(), "hpda".into()];
        a.extend(extra.iter().map(|s| s.to_string()));
        a.extend(k.iter().cloned());
        a
    };
    cases.push((base(&[]), "HDD-1 (member 3) holds the RAID4's parity"));
    cases.push((
        base(&["--log", "x.log"]),
        "leave out --log and --log-region",
    ));
    cases.push((
        base(&["--log-region", "4M"]),
        "leave out --log and --log-region",
    ));
    cases.push((
        base(&["--log-mode", "journal"]),
        "--log-mode journal does not apply",
    ));
    // Three HDDs.
    let mut three = vec!["create".to_string(), "--layout".into(), "hpda".into()];
    three.extend(
        m.iter()
            .zip(["ssd", "ssd", "hdd", "hdd", "hdd"])
            .map(|(p, k)| format!("{p}:{k}")),
    );
    cases.push((three, "exactly two HDDs"));
    for (a, want) in &cases {
        let a: Vec<&str> = a.iter().map(|s| s.as_str()).collect();
        let (code, _, err) = hetraid(&a);
        assert_eq!(code, 2, "{a:?}: {err}");
        assert!(err.contains(want), "{a:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "one sentence: {err}");
        assert!(all_zero(&m), "{a:?} wrote to a member");
    }
    // A log larger than the room on HDD-1.
    let m = sized(d.path(), &[8, 8, 8, 40, 32]);
    let k = with_kinds(&m);
    let mut a = vec!["create", "--layout", "hpda", "--log-size", "1G"];
    a.extend(k.iter().map(|s| s.as_str()));
    let (code, _, err) = hetraid(&a);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("more than the"), "{err}");
    assert!(all_zero(&m));
}

#[test]
fn an_hpda_array_lives_on_files() {
    let d = tempfile::tempdir().unwrap();
    let m = sized(d.path(), &[16, 16, 16, 16 + 18, 18]);
    let k = with_kinds(&m);
    let mut a = vec![
        "create",
        "--layout",
        "hpda",
        "--chunk",
        "16K",
        "--log-size",
        "16M",
    ];
    a.extend(k.iter().map(|s| s.as_str()));
    let (code, out, err) = hetraid(&a);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("write log: write-back on"), "{out}");
    assert!(!out.contains("list it with the members"), "{out}");
    let ms: Vec<&str> = m.iter().map(|s| s.as_str()).collect();
    let with = |verb: &str, extra: &[&str]| {
        let mut v = vec![verb];
        v.extend(&ms);
        v.extend_from_slice(extra);
        v.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    // 8 MiB written in one go (sequential: the RAID4), then 4 KiB pieces at
    // scattered places (random: the log), each its own process.
    let data = bytes(8 << 20, 3);
    let (code, _, err) = run_stdin(&with("write", &["--offset", "0"]), Some(&data));
    assert_eq!(code, 0, "{err}");
    let mut expect = data.clone();
    for i in 0..8u64 {
        let off = ((i * 7919) % 2000) * 4096;
        let piece = bytes(4096, 100 + i);
        let o = off.to_string();
        let (code, _, err) = run_stdin(&with("write", &["--offset", &o]), Some(&piece));
        assert_eq!(code, 0, "{err}");
        expect[off as usize..off as usize + 4096].copy_from_slice(&piece);
    }
    let read_back = || {
        let (code, got, err) = run_stdin(&with("read", &["--offset", "0", "--length", "8M"]), None);
        assert_eq!(code, 0, "{err}");
        got
    };
    assert!(read_back() == expect, "read back differs");
    // A process writes and closes: close reclaims, so the log is empty.
    let status = |extra: &[&str]| {
        let (code, out, err) = run_stdin(&with("status", extra), None);
        assert_eq!(code, 0, "{err}");
        String::from_utf8(out).unwrap()
    };
    let s = status(&[]);
    assert!(
        s.contains("hpda: random to the log, sequential to the RAID4"),
        "{s}"
    );
    assert!(s.contains("hpda log: 0 entries"), "{s}");
    assert!(s.contains("hpda monitor:"), "{s}");
    let (code, out, err) = run_stdin(&with("reclaim", &[]), None);
    assert_eq!(code, 0, "{err}");
    assert!(
        String::from_utf8_lossy(&out).contains("reclaim: 0 bytes"),
        "{}",
        String::from_utf8_lossy(&out)
    );
    // An SSD fails; reads still return the data; replaced and rebuilt.
    let (code, _, err) = run_stdin(&with("fail", &["--member", "1"]), None);
    assert_eq!(code, 0, "{err}");
    let mut live: Vec<String> = m.clone();
    live.remove(1);
    let lv: Vec<&str> = live.iter().map(|s| s.as_str()).collect();
    let mut r = vec!["read"];
    r.extend(&lv);
    r.extend(["--offset", "0", "--length", "8M"]);
    let (code, got, err) = run_stdin(&r, None);
    assert_eq!(code, 0, "{err}");
    assert!(got == expect, "degraded read differs");
    let new = d.path().join("new1");
    std::fs::File::create(&new)
        .unwrap()
        .set_len(16 << 20)
        .unwrap();
    let nw = new.display().to_string();
    let mut rp = vec!["replace"];
    rp.extend(&lv);
    rp.extend(["--member", "1", "--with", &nw]);
    let (code, _, err) = run_stdin(&rp, None);
    assert_eq!(code, 0, "{err}");
    let mut now = m.clone();
    now[1] = nw.clone();
    let nv: Vec<&str> = now.iter().map(|s| s.as_str()).collect();
    let mut rb = vec!["rebuild"];
    rb.extend(&nv);
    let (code, _, err) = run_stdin(&rb, None);
    assert_eq!(code, 0, "{err}");
    let mut rd = vec!["read"];
    rd.extend(&nv);
    rd.extend(["--offset", "0", "--length", "8M"]);
    let (code, got, err) = run_stdin(&rd, None);
    assert_eq!(code, 0, "{err}");
    assert!(got == expect, "read after the rebuild differs");
    let mut sc = vec!["scrub"];
    sc.extend(&nv);
    sc.push("--json");
    let (code, out, err) = run_stdin(&sc, None);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["mismatches"], 0, "{v}");
}

/// [Mao 2010]'s reliability comparison: HPDA (3 SSD + 2 HDD) lasts longer than
/// RAID5 of 4 disks and RAID5 of 4 SSDs (their parity wears them), at every
/// repair time.
#[test]
fn hpda_outlasts_raid5_of_disks_and_of_ssds() {
    let mttdl = |layout: &str, members: &str, mttr: &str| -> f64 {
        let (code, out, err) = hetraid(&[
            "analyze",
            "mttdl",
            "--layout",
            layout,
            "--members",
            members,
            "--mttr-h",
            mttr,
            "--json",
        ]);
        assert_eq!(code, 0, "{err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        v["mttdl_h"].as_f64().unwrap()
    };
    for mttr in ["6", "24", "168"] {
        let h = mttdl("hpda", "ocz-core-v2-120*3,wd2500yd*2", mttr);
        let r5h = mttdl("raid5", "wd2500yd*4", mttr);
        let r5s = mttdl("raid5", "ocz-core-v2-120*4", mttr);
        assert!(
            h > 6.0 * r5h && h > 1.5 * r5s,
            "MTTR {mttr} h: {h} {r5h} {r5s}"
        );
    }
}
