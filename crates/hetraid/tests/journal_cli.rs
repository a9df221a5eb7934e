//! The write log from the command line (issue 12): create a journaled RAID5,
//! write, kill -9 the writer mid-write, assemble (the log is replayed), read
//! back — every 4 KiB page holds the old or the new bytes, nothing else — and
//! scrub clean. Degraded, the same array starts without --force (the bitmap
//! alone would refuse it: the write hole).

mod common;
use common::{args, bytes, hetraid, run_stdin};
use std::path::Path;
use std::process::{Command, Stdio};

const SIZE: usize = 20 << 20;

fn ok(a: &[&str]) -> String {
    let (code, out, err) = hetraid(a);
    assert_eq!(code, 0, "hetraid {a:?}: {err}");
    out + &err
}

/// Members m0..m3 and log0 in `d`: (all paths, the data area written first).
fn journaled(d: &Path) -> (Vec<String>, Vec<u8>) {
    let mut m: Vec<String> = (0..4)
        .map(|i| d.join(format!("m{i}")).display().to_string())
        .collect();
    let log = d.join("log0").display().to_string();
    let out = ok(&args(
        "create",
        &m,
        &[
            "--layout",
            "raid5",
            "--size",
            "9M",
            "--log",
            &log,
            "--log-size",
            "4M",
        ],
    ));
    assert!(out.contains("write log: journal"), "{out}");
    m.push(log);
    let old = bytes(SIZE, 1);
    let (code, _, err) = run_stdin(&args("write", &m, &["--offset", "0"]), Some(&old));
    assert_eq!(code, 0, "{err}");
    (m, old)
}

/// Write `new` at 0 in a child and kill -9 it after `ms`.
fn killed_write(m: &[String], new: &[u8], ms: u64) {
    use std::io::Write;
    let mut c = Command::new(env!("CARGO_BIN_EXE_hetraid"))
        .args(args("write", m, &["--offset", "0"]))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = c.stdin.take().unwrap();
    let data = new.to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(&data);
    });
    std::thread::sleep(std::time::Duration::from_millis(ms));
    c.kill().unwrap(); // SIGKILL
    c.wait().unwrap();
    let _ = feeder.join();
}

fn read_all(m: &[String]) -> Vec<u8> {
    let len = SIZE.to_string();
    let (code, out, err) = run_stdin(&args("read", m, &["--offset", "0", "--length", &len]), None);
    assert_eq!(code, 0, "{err}");
    out
}

fn pages_old_or_new(back: &[u8], old: &[u8], new: &[u8]) -> (usize, usize) {
    let (mut o, mut n) = (0, 0);
    for (i, p) in back.chunks(4096).enumerate() {
        let r = i * 4096..i * 4096 + p.len();
        if p == &new[r.clone()] {
            n += 1;
        } else if p == &old[r] {
            o += 1;
        } else {
            panic!("page {i} holds neither the old nor the new bytes");
        }
    }
    (o, n)
}

#[test]
fn kill_9_mid_write_then_assemble_replays_and_scrub_is_clean() {
    let d = tempfile::tempdir().unwrap();
    let (m, old) = journaled(d.path());
    let new = bytes(SIZE, 2);
    killed_write(&m, &new, 150);
    let st = ok(&args("status", &m, &[]));
    assert!(st.contains("consistency: journal"), "{st}");
    let out = ok(&args("assemble", &m, &[]));
    let back = read_all(&m);
    let (o, n) = pages_old_or_new(&back, &old, &new);
    println!("after kill -9 and replay: {n} pages new, {o} old ({out})");
    let s = ok(&args("scrub", &m, &[]));
    assert!(s.contains(" 0 mismatched"), "{s}");
}

#[test]
fn a_degraded_journaled_array_starts_after_a_kill_without_force() {
    let d = tempfile::tempdir().unwrap();
    let (m, old) = journaled(d.path());
    ok(&args("fail", &m, &["--member", "3"]));
    let new = bytes(SIZE, 3);
    killed_write(&m, &new, 150);
    // No --force: the journal leaves no stripe half written.
    ok(&args("assemble", &m, &[]));
    let back = read_all(&m);
    pages_old_or_new(&back, &old, &new);
}

#[test]
fn log_options_are_checked_before_anything_is_written() {
    let d = tempfile::tempdir().unwrap();
    let p = |n: &str| d.path().join(n).display().to_string();
    let m: Vec<String> = (0..3).map(|i| p(&format!("m{i}"))).collect();
    for (extra, says) in [
        (vec!["--log-mode", "journal"], "--log-mode needs --log"),
        (vec!["--log-size", "8M"], "--log-size needs --log"),
        (vec!["--log", &m[0]], "both as a member and as the log"),
        (
            vec!["--log", &p("l"), "--log-mode", "fast"],
            "--log-mode fast is not known",
        ),
        (vec!["--log", &p("l"), "--log-size", "1M"], "needs at least"),
        (
            vec!["--log", &format!("{},{},{}", p("a"), p("b"), p("c"))],
            "one device or two",
        ),
        (vec!["--log", &p("l"), "--log-region", "4M"], "not both"),
        (vec!["--log-region", "100K"], "too small"),
        (
            vec!["--log-region", "4M", "--log-size", "4M"],
            "--log-size sizes --log files",
        ),
    ] {
        let mut a = vec!["create", "--layout", "raid5", "--size", "8M"];
        a.extend(m.iter().map(|s| s.as_str()));
        a.extend(extra);
        let (code, _, err) = hetraid(&a);
        assert_ne!(code, 0, "{a:?} was accepted");
        assert!(err.contains(says), "{a:?}: {err}");
        let left: Vec<_> = std::fs::read_dir(d.path()).unwrap().collect();
        assert!(left.is_empty(), "{a:?} left files behind");
    }
}

#[test]
fn write_back_kill_9_mid_write_keeps_acknowledged_pages_and_close_reclaims() {
    let d = tempfile::tempdir().unwrap();
    let mut m: Vec<String> = (0..4)
        .map(|i| d.path().join(format!("m{i}")).display().to_string())
        .collect();
    let log = d.path().join("log0").display().to_string();
    let out = ok(&args(
        "create",
        &m,
        &[
            "--layout",
            "raid5",
            "--size",
            "9M",
            "--log",
            &log,
            "--log-mode",
            "write-back",
            "--log-size",
            "16M",
        ],
    ));
    assert!(out.contains("write log: write-back"), "{out}");
    m.push(log);
    let old = bytes(SIZE, 4);
    let (code, _, err) = run_stdin(&args("write", &m, &["--offset", "0"]), Some(&old));
    assert_eq!(code, 0, "{err}");
    // `write` closed the array: everything is on the members.
    let st = ok(&args("status", &m, &[]));
    assert!(
        st.contains("consistency: write-back") && st.contains(", 0 not yet on the members"),
        "{st}"
    );
    let new = bytes(SIZE, 5);
    killed_write(&m, &new, 40);
    let back = read_all(&m);
    let (o, n) = pages_old_or_new(&back, &old, &new);
    println!("write-back after kill -9: {n} pages new, {o} old");
    // Assembling for writing and closing reclaims the log.
    ok(&args("assemble", &m, &[]));
    let st = ok(&args("status", &m, &[]));
    assert!(st.contains(", 0 not yet on the members"), "{st}");
    assert_eq!(read_all(&m), back, "reclaim changed what reads return");
    let s = ok(&args("scrub", &m, &[]));
    assert!(s.contains(" 0 mismatched"), "{s}");
}
