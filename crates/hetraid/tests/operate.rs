//! Operating an array as an administrator does (issue 16): members named by
//! path, events kept on the members and seen by `events` and `monitor
//! --program`, health and usage exit codes, re-add with a partial resync
//! (measured in bytes rebuilt), hot spares, progress seen from another
//! process, preset kind errors and size warnings, names and `assemble
//! --scan`, help examples, man page and completions.

mod common;
use common::{args, hetraid, json};
use common::{files, ok};
use std::path::Path;
use std::time::{Duration, Instant};

fn write_at(m: &[String], offset: u64, data: &[u8]) {
    common::write_array(m, offset, data)
}

fn read_all(m: &[String], len: usize) -> Vec<u8> {
    common::read_array(m, len)
}

/// A RAID5 of 64 KiB chunks on files `names` of `mib` MiB in `d`, filled
/// with bytes from `seed`: the members and the data.
fn raid5_filled(d: &Path, names: &[&str], mib: u64, seed: u64) -> (Vec<String>, Vec<u8>) {
    let m = files(d, names, mib);
    ok(&args(
        "create",
        &m,
        &["--layout", "raid5", "--chunk", "64K"],
    ));
    let data = common::bytes(capacity(&m), seed);
    write_at(&m, 0, &data);
    (m, data)
}

fn capacity(m: &[String]) -> usize {
    json(&args("status", m, &["--json"]))["capacity_bytes"]
        .as_u64()
        .unwrap() as usize
}

#[test]
fn members_by_path_names_events_and_health_codes() {
    let d = tempfile::tempdir().unwrap();
    let m = files(d.path(), &["a.img", "b.img", "c.img", "d.img"], 32);
    ok(&args(
        "create",
        &m,
        &["--layout", "raid5", "--chunk", "64K", "--name", "tank"],
    ));
    let st = json(&args("status", &m, &["--json"]));
    assert_eq!(st["name"], "tank");
    assert_eq!(hetraid(&args("status", &m, &["--test"])).0, 0);
    // Fail by path: the message names slot and path.
    let out = ok(&args("fail", &m, &["--member", &m[1]]));
    assert!(out.contains("member 1 (") && out.contains("b.img"), "{out}");
    assert_eq!(
        hetraid(&args("status", &m, &["--test"])).0,
        1,
        "degraded: 1"
    );
    ok(&args("remove", &m, &["--member", "1"]));
    // The removed member keeps its last known path in status.
    let rest = vec![m[0].clone(), m[2].clone(), m[3].clone()];
    let text = ok(&args("status", &rest, &[]));
    assert!(text.contains("array tank "), "{text}");
    let line = text
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some("removed"))
        .unwrap();
    assert!(line.contains("b.img (last seen)"), "{line}");
    let st = json(&args("status", &rest, &["--json"]));
    assert!(st["member_states"][1]["last_path"]
        .as_str()
        .unwrap()
        .ends_with("b.img"));
    // Two out of a RAID5: failed, 2; a file that is no member: 4.
    ok(&args("fail", &rest, &["--member", &m[2], "--force"]));
    assert_eq!(
        hetraid(&args("status", &rest, &["--test"])).0,
        2,
        "failed: 2"
    );
    let junk = d.path().join("junk");
    std::fs::write(&junk, vec![0u8; 8192]).unwrap();
    let junk = junk.display().to_string();
    assert_eq!(hetraid(&["status", "--test", &junk]).0, 4, "unreadable: 4");
    // Usage errors are told apart from refusals.
    assert_eq!(hetraid(&["status", "--bogus", &junk]).0, 64);
    assert_eq!(hetraid(&["status", &junk]).0, 2);
    // The events, in order, by name, on every member (read without a lock).
    let ev = json(&args("events", &rest, &["--json"]));
    let kinds: Vec<&str> = ev
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["created", "failed", "removed", "failed"], "{ev}");
    assert_eq!(ev[1]["slot"], 1);
    assert!(ev[1]["detail"].as_str().unwrap().ends_with("b.img"));
    assert_eq!(ev[0]["name"], "tank");
    let since = json(&args("events", &rest, &["--json", "--since", "2"]));
    assert_eq!(since.as_array().unwrap().len(), 2);
}

/// A member that left intact comes back (`add`) and only the regions
/// written since are rebuilt: measured in bytes, and the data is right
/// even after another member fails.
#[test]
fn re_add_resyncs_only_what_was_written_since() {
    let d = tempfile::tempdir().unwrap();
    let (m, mut data) = raid5_filled(d.path(), &["a", "b", "c", "d"], 64, 16);
    let cap = data.len();
    ok(&args("fail", &m, &["--member", &m[1]]));
    let others = vec![m[0].clone(), m[2].clone(), m[3].clone()];
    let patch = common::bytes(3 << 20, 17);
    write_at(&others, 50 << 20, &patch);
    data[50 << 20..(50 << 20) + patch.len()].copy_from_slice(&patch);
    let out = ok(&args("add", &others, &["--with", &m[1]]));
    assert!(out.contains("re-added in slot 1"), "{out}");
    let st = json(&args("status", &m, &["--json"]));
    assert_eq!(st["member_states"][1]["readd"], true);
    let r = json(&args("rebuild", &m, &["--json"]));
    let full = cap as u64 / 3;
    let bytes = r["bytes"].as_u64().unwrap();
    assert!(
        bytes > 0 && bytes < full / 10,
        "re-add rebuilt {bytes} of {full} bytes"
    );
    assert_eq!(read_all(&m, cap), data);
    let s = ok(&args("scrub", &m, &[]));
    assert!(s.contains(" 0 mismatched"), "{s}");
    // The resynced member is right where it matters: lose another one.
    ok(&args("fail", &m, &["--member", &m[0]]));
    assert_eq!(read_all(&m, cap), data);
    // A device that was not this slot's is rebuilt whole.
    let e = files(d.path(), &["e"], 64);
    let mut now = vec![m[1].clone(), m[2].clone(), m[3].clone()];
    let out = ok(&args("add", &now, &["--with", &e[0]]));
    assert!(
        out.contains("added in slot 0") && !out.contains("re-added"),
        "{out}"
    );
    now.push(e[0].clone());
    let r = json(&args("rebuild", &now, &["--json"]));
    assert_eq!(
        r["bytes"].as_u64().unwrap(),
        full,
        "a new device is rebuilt whole"
    );
    assert_eq!(read_all(&now, cap), data);
}

#[test]
fn a_hot_spare_takes_a_failed_slot_at_rebuild() {
    let d = tempfile::tempdir().unwrap();
    let (m, data) = raid5_filled(d.path(), &["a", "b", "c", "d"], 32, 3);
    let cap = data.len();
    // Too small to take any slot: refused, nothing written.
    let tiny = files(d.path(), &["tiny"], 8);
    let (code, _, err) = hetraid(&args("add", &m, &["--with", &tiny[0]]));
    assert_eq!(code, 2);
    assert!(err.contains("too small to take any slot"), "{err}");
    assert!(std::fs::read(&tiny[0]).unwrap().iter().all(|&b| b == 0));
    let s = files(d.path(), &["spare"], 40);
    let out = ok(&args("add", &m, &["--with", &format!("{}:ssd", s[0])]));
    assert!(out.contains("added as a hot spare"), "{out}");
    let mut all = m.clone();
    all.push(s[0].clone());
    let st = json(&args("status", &all, &["--json"]));
    assert_eq!(st["state"], "optimal");
    assert_eq!(st["spares"][0]["kind"], "ssd");
    assert_eq!(st["spares"][0]["fits_slots"].as_array().unwrap().len(), 4);
    let text = ok(&args("status", &all, &[]));
    assert!(
        text.lines()
            .any(|l| l.split_whitespace().take(2).eq(["spare", "spare"]) && l.contains("/spare")),
        "{text}"
    );
    // A change of members waits for the spares to be taken off; a spare
    // alone is no array.
    let extra = files(d.path(), &["extra"], 32);
    let (code, _, err) = hetraid(&args("grow", &all, &["--add", &extra[0]]));
    assert_eq!(code, 2);
    assert!(err.contains("has hot spares"), "{err}");
    let (code, _, err) = hetraid(&["status", &s[0]]);
    assert_eq!(code, 2);
    assert!(err.contains("only spares were given"), "{err}");
    // Without the spare given, status says one is listed but absent.
    let st = json(&args("status", &m, &["--json"]));
    assert_eq!(st["spares_missing"], 1);
    ok(&args("fail", &all, &["--member", &m[2]]));
    let (code, out, err) = hetraid(&args("rebuild", &all, &[]));
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("takes the place of member 2"), "{err}");
    assert!(
        out.contains("rebuilt member(s) [2 (") && out.contains("spare)"),
        "{out}"
    );
    let now = vec![m[0].clone(), m[1].clone(), s[0].clone(), m[3].clone()];
    let st = json(&args("status", &now, &["--json"]));
    assert_eq!(st["state"], "optimal");
    assert!(st["spares"].as_array().unwrap().is_empty());
    assert_eq!(read_all(&now, cap), data);
    let kinds: Vec<String> = json(&args("events", &now, &["--json"]))
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event"].as_str().unwrap().to_string())
        .collect();
    for k in [
        "spare_added",
        "failed",
        "spare_activated",
        "rebuild_finished",
    ] {
        assert!(kinds.iter().any(|x| x == k), "{k} in {kinds:?}");
    }
    // A spare is taken off by path (its superblock cleared).
    let s2 = files(d.path(), &["spare2"], 40);
    ok(&args("add", &now, &["--with", &s2[0]]));
    let mut with2 = now.clone();
    with2.push(s2[0].clone());
    let out = ok(&args("remove", &with2, &["--member", &s2[0]]));
    assert!(out.contains("spare"), "{out}");
    let st = json(&args("status", &now, &["--json"]));
    assert_eq!(st["spares_missing"], 0);
}

/// `monitor --program` runs the program once per event, with the event,
/// the array and the member's path.
#[test]
fn monitor_runs_a_program_per_event() {
    let d = tempfile::tempdir().unwrap();
    let m = files(d.path(), &["a", "b", "c"], 16);
    ok(&args(
        "create",
        &m,
        &["--layout", "raid5", "--chunk", "64K", "--name", "watched"],
    ));
    let log = d.path().join("events.log");
    let script = d.path().join("alert.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho \"$1 $2 $3 slot=$HETRAID_SLOT\" >> {}\n",
            log.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_hetraid"))
        .arg("monitor")
        .args(&m)
        .args([
            "--program",
            script.to_str().unwrap(),
            "--delay",
            "0.1",
            "--test",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let wait_for = |what: &str| {
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(20) {
            if std::fs::read_to_string(&log).is_ok_and(|s| s.contains(what)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "no {what:?} in {:?}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    };
    wait_for("test_message watched");
    ok(&args("fail", &m, &["--member", &m[1]]));
    wait_for("failed watched");
    let text = std::fs::read_to_string(&log).unwrap();
    let line = text.lines().find(|l| l.starts_with("failed ")).unwrap();
    assert!(line.contains("/b slot=1"), "{line}");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let _ = child.wait();
    // At start, a degraded array is reported (mdadm's DegradedArray).
    let (code, out, _) = hetraid(&args("monitor", &m, &["--oneshot"]));
    assert_eq!(code, 0);
    assert!(out.contains("degraded_array"), "{out}");
}

/// An offline rebuild holds a control socket: `status` from another process
/// sees who holds the array and how far it got.
#[test]
fn status_sees_an_offline_rebuild_from_another_process() {
    let d = tempfile::tempdir().unwrap();
    let m = files(d.path(), &["a", "b", "c", "d"], 64);
    ok(&args(
        "create",
        &m,
        &["--layout", "raid5", "--chunk", "64K"],
    ));
    ok(&args("fail", &m, &["--member", "1"]));
    let e = files(d.path(), &["e"], 64);
    ok(&args("replace", &m, &["--member", "1", "--with", &e[0]]));
    let now = vec![m[0].clone(), e[0].clone(), m[2].clone(), m[3].clone()];
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_hetraid"))
        .arg("rebuild")
        .args(&now)
        .args(["--max-speed", "12M"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let mut seen = None;
    while t0.elapsed() < Duration::from_secs(20) && seen.is_none() {
        std::thread::sleep(Duration::from_millis(300));
        let (_, out, _) = hetraid(&args("status", &now, &[]));
        // Past its first second the line has a rate and a time left.
        let rated = out
            .lines()
            .any(|l| l.starts_with("rebuild: ") && l.contains("MB/s"));
        if out.contains("hetraid rebuild running") && rated {
            seen = Some(out);
        }
    }
    let out = seen.expect("status never saw the rebuild");
    let line = out.lines().find(|l| l.starts_with("rebuild: ")).unwrap();
    assert!(line.contains("MB/s") && line.contains("left"), "{line}");
    // The device that failed out of the slot is still named, as mdadm
    // --detail lists it faulty while the replacement is rebuilt.
    assert!(
        out.lines()
            .any(|l| l.trim_start().starts_with("gone") && l.contains("/b  (failed out of slot 1")),
        "{out}"
    );
    let v = json(&args("status", &now, &["--json"]));
    assert!(v["progress"]["percent"].as_f64().is_some() || v["progress"].is_null());
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(json(&args("status", &now, &["--json"]))["state"], "optimal");
}

#[test]
fn preset_kinds_that_contradict_are_refused_and_size_waste_is_said() {
    let d = tempfile::tempdir().unwrap();
    let p = |n: &str| d.path().join(n).display().to_string();
    let (code, _, err) = hetraid(&[
        "create",
        "--layout",
        "raid4s",
        "--size",
        "16M",
        &p("x1"),
        &format!("{}:ssd", p("x2")),
        &p("x3"),
        &format!("{}:ssd", p("x4")),
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("raid4s needs exactly one SSD") && err.contains("2 SSDs"),
        "{err}"
    );
    assert!(!Path::new(&p("x1")).exists(), "nothing created");
    let (code, _, err) = hetraid(&[
        "create",
        "--layout",
        "raide",
        "--size",
        "16M",
        "--kinds",
        "ssd,hdd,hdd,hdd",
        &p("y1"),
        &p("y2"),
        &p("y3"),
        &p("y4"),
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("raide needs exactly two SSDs"), "{err}");
    // Without kinds: one sentence says which member is taken as the SSD.
    let (code, _, err) = hetraid(&[
        "create",
        "--layout",
        "raid4s",
        "--size",
        "16M",
        &p("z1"),
        &p("z2"),
        &p("z3"),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("raid4s takes") && err.contains("z3 as its SSD"),
        "{err}"
    );
    let text = ok(&["status", &p("z1"), &p("z2"), &p("z3")]);
    let parity: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(" active "))
        .map(|l| l.split_whitespace().nth(6).unwrap())
        .collect();
    assert_eq!(parity, ["0%", "0%", "100%"], "{text}");
    // Members of different sizes under RAID5: the waste and what avoids it.
    let m: Vec<String> = [("w1", 32), ("w2", 128), ("w3", 32), ("w4", 512)]
        .iter()
        .map(|(n, mib)| {
            let q = p(n);
            std::fs::File::create(&q)
                .unwrap()
                .set_len(mib << 20)
                .unwrap();
            q
        })
        .collect();
    let (code, _, err) = hetraid(&args("create", &m, &["--layout", "raid5"]));
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("is not used") && err.contains("raidx uses members of any size"),
        "{err}"
    );
    let st = json(&args("status", &m, &["--json"]));
    assert!(st["member_states"][3]["unused_bytes"].as_u64().unwrap() > 400 << 20);
}

#[test]
fn assemble_scan_finds_arrays_by_uuid_and_name() {
    let d = tempfile::tempdir().unwrap();
    let a = files(d.path(), &["a1", "a2", "a3"], 16);
    let b = files(d.path(), &["b1", "b2"], 16);
    ok(&args(
        "create",
        &a,
        &["--layout", "raid5", "--name", "tank"],
    ));
    ok(&args("create", &b, &["--layout", "raid1"]));
    std::fs::write(d.path().join("notes.txt"), "not a member").unwrap();
    let dir = d.path().display().to_string();
    let out = ok(&["assemble", "--scan", &dir]);
    assert!(
        out.contains("assembled tank (") && out.contains("raid5 optimal, 3 members"),
        "{out}"
    );
    assert!(out.contains("raid1 optimal, 2 members"), "{out}");
    let out = ok(&["assemble", "--scan", &dir, "--name", "tank"]);
    assert_eq!(out.lines().count(), 1, "{out}");
    let (code, _, err) = hetraid(&["assemble", "--scan", &dir, "--name", "nope"]);
    assert_eq!(code, 2);
    assert!(err.contains("no array named nope"), "{err}");
}

#[test]
fn every_verb_has_an_example_and_man_and_completions_are_generated() {
    let (_, out, _) = hetraid(&["--help"]);
    let verbs: Vec<String> = out
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .filter(|v| v != "help")
        .collect();
    assert!(verbs.len() > 20, "{verbs:?}");
    for v in &verbs {
        let (code, help, err) = hetraid(&[v, "--help"]);
        assert_eq!(code, 0, "{v}: {err}");
        assert!(
            help.contains("Example:"),
            "hetraid {v} --help has no example"
        );
    }
    let man = ok(&["man"]);
    assert!(
        man.contains(".TH hetraid") && man.contains("HETRAID MONITOR"),
        "man page"
    );
    for sh in ["bash", "zsh", "fish"] {
        let c = ok(&["completions", sh]);
        assert!(c.contains("monitor") && c.contains("--member"), "{sh}");
    }
}
