//! Arrays by name (issue 39): the configuration file written by `assemble
//! --scan --print-config`, verbs taking a name or UUID, one member alone
//! shown as incomplete (never failed), and error counts kept on the members
//! until `clear`.

mod common;
use common::hetraid;
use common::{files, ok};
use std::path::Path;

/// The array `tank` of four members in `dir/arr`, and a configuration file
/// for it written by `--print-config`.
fn tank(dir: &Path) -> (Vec<String>, String) {
    std::fs::create_dir(dir.join("arr")).unwrap();
    let m = files(
        &dir.join("arr"),
        &["d0.img", "d1.img", "d2.img", "d3.img"],
        16,
    );
    let mut a = vec!["create", "--layout", "raid5", "--name", "tank"];
    a.extend(m.iter().map(String::as_str));
    ok(&a);
    let arr = dir.join("arr").display().to_string();
    let conf = ok(&["assemble", "--scan", "--print-config", &arr]);
    let path = dir.join("hetraid.conf");
    std::fs::write(&path, &conf).unwrap();
    (m, path.display().to_string())
}

#[test]
fn print_config_then_every_verb_by_name_or_uuid() {
    let d = tempfile::tempdir().unwrap();
    let (m, conf) = tank(d.path());
    let text = std::fs::read_to_string(&conf).unwrap();
    assert!(text.contains("name = \"tank\""), "{text}");
    for p in &m {
        assert!(text.contains(p.as_str()), "{p} not in {text}");
    }
    // By name: the members come from the file.
    let out = ok(&["status", "tank", "--config", &conf]);
    assert!(out.starts_with("array tank "), "{out}");
    assert!(out.contains("state optimal"), "{out}");
    let (code, _, _) = hetraid(&["status", "--test", "tank", "--config", &conf]);
    assert_eq!(code, 0);
    // By UUID, with the file in the environment instead.
    let uuid = hetraid(&["status", "--json", "tank", "--config", &conf]).1;
    let uuid = serde_json::from_str::<serde_json::Value>(&uuid).unwrap()["uuid"]
        .as_str()
        .unwrap()
        .to_string();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hetraid"))
        .args(["status", &uuid.to_uppercase()])
        .env("HETRAID_CONFIG", &conf)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    // A verb that changes the array, by name.
    ok(&["fail", "tank", "--member", &m[1], "--config", &conf]);
    let (code, out, _) = hetraid(&["status", "--test", "tank", "--config", &conf]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("state degraded"), "{out}");
}

#[test]
fn a_name_found_by_scanning_the_configured_devices() {
    let d = tempfile::tempdir().unwrap();
    let (_, _) = tank(d.path());
    // Only where to look: the array is found by its name on the members.
    let conf = d.path().join("scan.conf");
    let arr = d.path().join("arr").display().to_string();
    std::fs::write(&conf, format!("devices = [\"{arr}/*.img\"]\n")).unwrap();
    let conf = conf.display().to_string();
    let out = ok(&["status", "tank", "--config", &conf]);
    assert!(out.contains("state optimal"), "{out}");
    // A name nobody has: one sentence, exit 2, nothing assembled.
    let (code, _, err) = hetraid(&["status", "pool", "--config", &conf]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.starts_with("hetraid: pool: no such file, and no array named pool in"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn bad_configuration_files_are_refused_with_the_file_named() {
    let d = tempfile::tempdir().unwrap();
    let conf = d.path().join("bad.conf");
    for (text, says) in [
        ("devices = [\"/srv\"]\nmembrs = 1\n", "membrs"),
        (
            "[[array]]\nname = \"tank\"\nuuid = \"tank\"\n",
            "not a UUID",
        ),
    ] {
        std::fs::write(&conf, text).unwrap();
        let c = conf.display().to_string();
        let (code, _, err) = hetraid(&["status", "tank", "--config", &c]);
        assert_eq!(code, 2, "{text}: {err}");
        assert!(err.contains(&c) && err.contains(says), "{text}: {err}");
    }
    // A file others may write is not trusted to name devices.
    std::fs::write(&conf, "devices = [\"/srv\"]\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&conf, std::fs::Permissions::from_mode(0o666)).unwrap();
    let c = conf.display().to_string();
    let (code, _, err) = hetraid(&["status", "tank", "--config", &c]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("writable by nobody else"), "{err}");
    let (code, _, err) = hetraid(&["status", "tank", "--config", "/nonexistent/h.conf"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("/nonexistent/h.conf"), "{err}");
}

#[test]
fn one_member_alone_is_incomplete_not_failed() {
    let d = tempfile::tempdir().unwrap();
    let (m, _) = tank(d.path());
    let (code, out, err) = hetraid(&["status", &m[2]]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("state incomplete"), "{out}");
    assert!(!out.contains("state failed"), "{out}");
    assert!(
        out.contains("incomplete: 3 of 4 members not given (last seen: "),
        "{out}"
    );
    for p in [&m[0], &m[1], &m[3]] {
        assert!(out.contains(p.as_str()), "{p} not named: {out}");
    }
    let (code, _, _) = hetraid(&["status", "--test", &m[2]]);
    assert_eq!(code, 4, "status --test of one member alone exits 4");
    // Two members out for real (failed), the others given: failed, exit 2.
    let mut a = vec!["fail", "--member", "1"];
    a.extend(m.iter().map(String::as_str));
    ok(&a);
    let mut a = vec!["fail", "--member", "2", "--force"];
    a.extend([&m[0], &m[2], &m[3]].map(String::as_str));
    ok(&a);
    let (code, out, _) = hetraid(&["status", "--test", &m[0], &m[2], &m[3]]);
    assert_eq!(code, 2, "{out}");
    let (_, out, _) = hetraid(&["status", &m[0], &m[2], &m[3]]);
    assert!(out.contains("state failed"), "{out}");
}

#[test]
fn error_counts_last_across_runs_until_cleared() {
    let d = tempfile::tempdir().unwrap();
    let m = files(d.path(), &["c0.img", "c1.img", "c2.img", "c3.img"], 16);
    let mut a = vec!["create", "--layout", "raid5", "--checksums", "crc32c"];
    a.extend(m.iter().map(String::as_str));
    ok(&a);
    let data = common::bytes(1 << 20, 7);
    common::write_array(&m, 0, &data);
    // Corrupt one data block of member 1 on disk, then read it through
    // the array: healed, and counted.
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new().write(true).open(&m[1]).unwrap();
        f.write_all_at(b"XXXXXXXX", 2 << 20).unwrap();
    }
    assert_eq!(common::read_array(&m, 1 << 20), data);
    let counts = |json: &serde_json::Value, slot: usize| {
        let s = &json["member_states"][slot];
        (
            s["read_errors"].as_u64().unwrap(),
            s["write_errors"].as_u64().unwrap(),
            s["checksum_errors"].as_u64().unwrap(),
        )
    };
    let mut st = vec!["status", "--json"];
    st.extend(m.iter().map(String::as_str));
    // A later run still sees them (kept on the members).
    let j = common::json(&st);
    assert_eq!(counts(&j, 1), (1, 0, 1), "{j}");
    assert_eq!(counts(&j, 0), (0, 0, 0));
    let mut st_text = vec!["status"];
    st_text.extend(m.iter().map(String::as_str));
    let out = ok(&st_text);
    assert!(out.contains("read  write  cksum  path"), "{out}");
    // Cleared for member 1 only: zero from then on, and an event says so.
    let mut c = vec!["clear", "--member", "1"];
    c.extend(m.iter().map(String::as_str));
    let out = ok(&c);
    assert_eq!(
        out,
        "error counts of member 1 cleared: 1 read, 0 write, 1 checksum\n"
    );
    let j = common::json(&st);
    assert_eq!(counts(&j, 1), (0, 0, 0), "{j}");
    let mut ev = vec!["events", "--json"];
    ev.extend(m.iter().map(String::as_str));
    let events = common::json(&ev);
    let last = events.as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["event"], "cleared", "{events}");
    assert_eq!(last["values"], serde_json::json!([1, 0, 1]));
    // A slot the array does not have: refused, nothing changed.
    let mut c = vec!["clear", "--member", "9"];
    c.extend(m.iter().map(String::as_str));
    let before: Vec<Vec<u8>> = m.iter().map(|p| std::fs::read(p).unwrap()).collect();
    let (code, _, err) = hetraid(&c);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("member 9 is not a slot"), "{err}");
    for (p, b) in m.iter().zip(&before) {
        assert!(std::fs::read(p).unwrap() == *b, "{p} changed by a refusal");
    }
}

/// Four 16 MiB members of a new raid5 array `name` in `dir`.
fn array(dir: &Path, name: &str) -> Vec<String> {
    std::fs::create_dir(dir).unwrap();
    let m = files(dir, &["m0.img", "m1.img", "m2.img", "m3.img"], 16);
    let mut a = vec!["create", "--layout", "raid5", "--name", name];
    a.extend(m.iter().map(String::as_str));
    ok(&a);
    m
}

#[test]
fn monitor_scan_reports_degraded_and_failed_arrays_apart() {
    let d = tempfile::tempdir().unwrap();
    let a = array(&d.path().join("a"), "arra");
    let b = array(&d.path().join("b"), "arrb");
    let c = array(&d.path().join("c"), "arrc");
    let mut f = vec!["fail", "--member", "1"];
    f.extend(a.iter().map(String::as_str));
    ok(&f);
    let mut f = vec!["fail", "--member", "1"];
    f.extend(b.iter().map(String::as_str));
    ok(&f);
    ok(&["fail", "--member", "2", "--force", &b[0], &b[2], &b[3]]);
    let conf = d.path().join("h.conf");
    let root = d.path().display();
    std::fs::write(
        &conf,
        format!("devices = [\"{root}/a\", \"{root}/b\", \"{root}/c\"]\n"),
    )
    .unwrap();
    let conf = conf.display().to_string();
    let out = ok(&[
        "monitor",
        "--scan",
        "--oneshot",
        "--json",
        "--config",
        &conf,
    ]);
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let of = |name: &str| -> Vec<String> {
        lines
            .iter()
            .filter(|l| l["name"] == name)
            .map(|l| l["event"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(of("arra"), ["degraded_array"], "{out}");
    assert_eq!(of("arrb"), ["failed_array"], "{out}");
    assert!(of("arrc").is_empty(), "an optimal array is quiet: {out}");
    assert!(out.contains("do without: 1 faulty, 2 faulty"), "{out}");
    drop(c);
    // Members with --scan, or --daemonise with --oneshot: refused.
    let (code, _, err) = hetraid(&["monitor", "--scan", &a[0], "--config", &conf]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = hetraid(&["monitor", "--oneshot", "--daemonise", &a[0]]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn monitor_reports_a_failure_after_start_at_array_level() {
    use std::io::BufRead;
    let d = tempfile::tempdir().unwrap();
    let m = array(&d.path().join("c"), "arrc");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_hetraid"))
        .args(["monitor", "--json", "--test", "--delay", "0.1"])
        .args(&m)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for l in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let v: serde_json::Value = serde_json::from_str(&l).unwrap();
            let _ = tx.send(v["event"].as_str().unwrap().to_string());
        }
    });
    let next = || {
        rx.recv_timeout(std::time::Duration::from_secs(60))
            .expect("the monitor reports within a minute")
    };
    // The test message comes after the monitor's first look.
    assert_eq!(next(), "test_message");
    let mut f = vec!["fail", "--member", "2"];
    f.extend(m.iter().map(String::as_str));
    ok(&f);
    assert_eq!(next(), "failed");
    assert_eq!(next(), "degraded_array");
    // Stopped with SIGTERM, as systemd stops it.
    let _ = std::process::Command::new("kill")
        .arg(child.id().to_string())
        .status();
    assert!(child.wait().unwrap().success());
}

#[test]
fn serve_by_name_listens_where_the_configuration_says_and_tells_systemd() {
    let d = tempfile::tempdir().unwrap();
    let (_, conf) = tank(d.path());
    let sock = d.path().join("tank.sock");
    let mut text = std::fs::read_to_string(&conf).unwrap();
    text.push_str(&format!("listen = \"unix:{}\"\n", sock.display()));
    std::fs::write(&conf, text).unwrap();
    // systemd's side of Type=notify: a datagram socket named by NOTIFY_SOCKET.
    let notify = d.path().join("notify");
    let rx = std::os::unix::net::UnixDatagram::bind(&notify).unwrap();
    rx.set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_hetraid"))
        .args(["serve", "tank", "--config", &conf])
        .env("NOTIFY_SOCKET", &notify)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut buf = [0u8; 512];
    let n = rx.recv(&mut buf).expect("READY=1 within a minute");
    let msg = String::from_utf8_lossy(&buf[..n]).to_string();
    assert!(msg.contains("READY=1"), "{msg}");
    assert!(
        msg.contains("STATUS=serving raid5 array tank (optimal) on unix:"),
        "{msg}"
    );
    // Ready means a client connects.
    assert!(std::os::unix::net::UnixStream::connect(&sock).is_ok());
    let _ = std::process::Command::new("kill")
        .arg(child.id().to_string())
        .status();
    assert!(child.wait().unwrap().success());
}

#[test]
fn config_applies_to_array_verbs_only() {
    let (code, _, err) = hetraid(&["sim", "--config", "/tmp/x.toml"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--config names arrays for the array verbs"),
        "{err}"
    );
    // sim's own file argument is not the global option.
    let (code, _, err) = hetraid(&["sim", "/nonexistent/run.toml"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("/nonexistent/run.toml"), "{err}");
}

#[test]
fn monitor_mails_alarms_and_goes_to_the_background() {
    let d = tempfile::tempdir().unwrap();
    let m = array(&d.path().join("c"), "arrc");
    // A sendmail on the PATH that keeps what it is given.
    let bin = d.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let mailbox = d.path().join("mailbox");
    let fake = bin.join("sendmail");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\necho \"sendmail $*\" >> {0}\ncat >> {0}\n",
            mailbox.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut f = vec!["fail", "--member", "1"];
    f.extend(m.iter().map(String::as_str));
    ok(&f);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hetraid"))
        .args(["monitor", "--oneshot", "--test", "--mail", "root@localhost"])
        .args(&m)
        .env("PATH", &path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let mail = std::fs::read_to_string(&mailbox).unwrap();
    assert!(mail.contains("sendmail -t"), "{mail}");
    assert!(mail.contains("To: root@localhost"), "{mail}");
    assert!(
        mail.contains("Subject: hetraid: test_message on arrc"),
        "{mail}"
    );
    assert!(
        mail.contains("Subject: hetraid: degraded_array on arrc"),
        "{mail}"
    );
    // --daemonise: the pid is printed, the command returns, the monitor
    // runs on until stopped.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hetraid"))
        .args(["monitor", "--daemonise", "--delay", "0.2"])
        .args(&m)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let pid: i32 = text
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("no pid in {text}"));
    let alive = std::path::Path::new(&format!("/proc/{pid}")).exists();
    let _ = std::process::Command::new("kill")
        .arg(pid.to_string())
        .status();
    assert!(alive, "the daemon {pid} is not running");
}
