//! Live numbers of a served array (issue 39): `hetraid iostat` and `serve
//! --metrics` during a rebuild — the array rebuilding, the rebuild's
//! progress, per-member counters — and the metrics in a format promtool
//! accepts.

mod common;
use common::{args, hetraid};
use common::{files, ok};
use std::io::{Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

/// `GET /metrics` on a Unix socket: the body.
fn scrape(sock: &Path) -> String {
    let mut s = std::os::unix::net::UnixStream::connect(sock).unwrap();
    s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    assert!(reply.starts_with("HTTP/1.0 200 OK\r\n"), "{reply}");
    reply.split_once("\r\n\r\n").unwrap().1.to_string()
}

/// The value of the sample whose line starts with `name{` and holds every
/// one of `labels`.
fn sample(body: &str, name: &str, labels: &[&str]) -> Option<f64> {
    body.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .find(|l| labels.iter().all(|x| l.contains(x)))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[test]
fn iostat_and_metrics_show_a_rebuild_while_it_runs() {
    let d = tempfile::tempdir().unwrap();
    let m = files(d.path(), &["m0.img", "m1.img", "m2.img", "m3.img"], 40);
    let new = files(d.path(), &["new.img"], 40).remove(0);
    ok(&args(
        "create",
        &m,
        &["--layout", "raid5", "--name", "live"],
    ));
    common::write_array(&m, 0, &common::bytes(8 << 20, 3));
    let sock = d.path().join("nbd.sock");
    let msock = d.path().join("metrics.sock");
    let metrics = format!("unix:{}", msock.display());
    let _served = common::serve_with(&m, &sock, &["--metrics", &metrics]);
    // The metrics socket is private like the NBD one (0600 by default).
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&msock).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "metrics socket mode {mode:o}");
    let body = scrape(&msock);
    assert_eq!(
        sample(&body, "hetraid_array_state", &["state=\"optimal\""]),
        Some(1.0),
        "{body}"
    );
    // Fail a member and put a new one in its place, through the server;
    // then a rebuild slow enough to be watched (4 MB/s over 40 MiB).
    ok(&args("fail", &m, &["--member", "2"]));
    let body = scrape(&msock);
    assert_eq!(
        sample(&body, "hetraid_array_state", &["state=\"degraded\""]),
        Some(1.0),
        "{body}"
    );
    ok(&args("replace", &m, &["--member", "2", "--with", &new]));
    let members = vec![m[0].clone(), m[1].clone(), new.clone(), m[3].clone()];
    let mut rebuild = std::process::Command::new(env!("CARGO_BIN_EXE_hetraid"))
        .args(args(
            "rebuild",
            &members,
            &["--max-speed", "4M", "--min-speed", "4M"],
        ))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Metrics mid-rebuild: the array rebuilding, progress between 0 and 1,
    // the new member written to.
    let t = Instant::now();
    let body = loop {
        let body = scrape(&msock);
        let p = sample(
            &body,
            "hetraid_operation_progress_ratio",
            &["operation=\"rebuild\""],
        )
        .unwrap_or(0.0);
        if p > 0.0 && p < 1.0 {
            break body;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "no rebuild progress seen: {body}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(
        sample(&body, "hetraid_array_state", &["state=\"rebuilding\""]),
        Some(1.0),
        "{body}"
    );
    assert_eq!(
        sample(
            &body,
            "hetraid_member_state",
            &["slot=\"2\"", "state=\"rebuilding\""]
        ),
        Some(1.0),
        "{body}"
    );
    let written = sample(&body, "hetraid_member_written_bytes_total", &["slot=\"2\""]).unwrap();
    assert!(written > 0.0, "{body}");
    let read = sample(&body, "hetraid_member_read_bytes_total", &["slot=\"0\""]).unwrap();
    assert!(read > 0.0, "{body}");
    // promtool accepts the exposition (where it is installed; in CI it must be).
    if common::have("promtool") {
        let p = std::process::Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(std::process::Stdio::piped())
            .output_with(&body);
        assert!(
            p.status.success(),
            "promtool: {}",
            String::from_utf8_lossy(&p.stderr)
        );
    } else {
        common::missing("promtool (Debian package prometheus)");
    }
    // iostat over half a second, mid-rebuild: the new member written at
    // about the rebuild's pace, the others read, and the rebuild's line.
    let out = ok(&args("iostat", &members, &["0.5", "2", "--json"]));
    let reports: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(reports.len(), 2, "{out}");
    let a = &reports[1]["arrays"][0];
    assert_eq!(a["name"], "live", "{out}");
    let slot2 = &a["members"][2];
    let mb = slot2["write_mb_per_s"].as_f64().unwrap();
    assert!(
        mb > 0.5 && mb < 40.0,
        "new member written at {mb} MB/s: {out}"
    );
    assert!(
        a["members"][0]["read_mb_per_s"].as_f64().unwrap() > 0.5,
        "{out}"
    );
    let progress = a["progress"].as_str().unwrap_or("");
    assert!(progress.starts_with("rebuild: "), "{out}");
    // The text form names the array and its members.
    let text = ok(&args("iostat", &members, &[]));
    assert!(text.contains("live (rebuilding)"), "{text}");
    assert!(text.contains(&new), "{text}");
    // The server ends with the test; the rebuild's client with it.
    let _ = rebuild.kill();
    let _ = rebuild.wait();
}

/// Feeding a child's stdin and collecting its output.
trait OutputWith {
    fn output_with(&mut self, input: &str) -> std::process::Output;
}

impl OutputWith for std::process::Command {
    fn output_with(&mut self, input: &str) -> std::process::Output {
        let mut c = self
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        c.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
        c.wait_with_output().unwrap()
    }
}

#[test]
fn iostat_of_an_array_nobody_holds_says_so() {
    let d = tempfile::tempdir().unwrap();
    let m = files(d.path(), &["m0.img", "m1.img", "m2.img"], 16);
    ok(&args("create", &m, &["--layout", "raid5"]));
    let (code, _, err) = hetraid(&args("iostat", &m, &[]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("is not served or held by a command"), "{err}");
    let (code, _, err) = hetraid(&args("iostat", &m, &["0", "1"]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("interval 0 is out of range"), "{err}");
}
