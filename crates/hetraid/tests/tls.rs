//! Serving over a network (issue 15): TLS by NBD STARTTLS (`serve
//! --tls-cert/--tls-key`), a round trip with nbdcopy and nbdinfo over
//! `nbds://` checking the server against a test CA; a plaintext client
//! refused; an export name other than `--name` refused; TCP beyond loopback
//! without TLS refused unless `--insecure-allow-remote`. With `CI` set, a
//! missing nbdcopy or nbdinfo fails the test.

mod common;
use common::have;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_hetraid")
}

/// A test CA and a server certificate for localhost, as PEM files in
/// `dir`: ca-cert.pem (what libnbd's tls-certificates directory holds),
/// server-cert.pem, server-key.pem.
fn certificates(dir: &Path) {
    certificates_for(dir, "localhost", false)
}

/// As `certificates`, for `name` (a host name or an IP address); `expired`:
/// valid only in 2019.
fn certificates_for(dir: &Path, name: &str, expired: bool) {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "hetraid test CA");
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(vec![name.to_string()]).unwrap();
    p.distinguished_name.push(DnType::CommonName, name);
    if expired {
        p.not_before = rcgen::date_time_ymd(2019, 1, 1);
        p.not_after = rcgen::date_time_ymd(2019, 12, 31);
    }
    let cert = p.signed_by(&key, &ca_cert, &ca_key).unwrap();
    std::fs::write(dir.join("ca-cert.pem"), ca_cert.pem()).unwrap();
    std::fs::write(dir.join("server-cert.pem"), cert.pem()).unwrap();
    std::fs::write(dir.join("server-key.pem"), key.serialize_pem()).unwrap();
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn tls_round_trip_with_nbdcopy_and_nbdinfo_and_what_is_refused() {
    if !have("nbdcopy") || !have("nbdinfo") {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let certs = d.path().join("certs");
    std::fs::create_dir(&certs).unwrap();
    certificates(&certs);
    let m: Vec<String> = (0..4)
        .map(|i| d.path().join(format!("m{i}")).display().to_string())
        .collect();
    let mut a = vec!["create", "--layout", "raid5", "--size", "16M"];
    a.extend(m.iter().map(|s| s.as_str()));
    assert!(Command::new(bin()).args(&a).status().unwrap().success());
    // Beyond loopback without TLS: refused, nothing served.
    let o = Command::new(bin())
        .arg("serve")
        .args(&m)
        .args(["--listen", "tcp:0.0.0.0:1"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("there is no TLS"));
    let port = free_port();
    let srv = serve_tls(d.path(), &m, &certs, port, &["--name", "arr"]);
    let uri = |name: &str| {
        format!(
            "nbds://localhost:{port}/{name}?tls-certificates={}",
            certs.display()
        )
    };
    let input = d.path().join("in.bin");
    let data: Vec<u8> = (0..4u32 << 20)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    std::fs::write(&input, &data).unwrap();
    let run = |c: &mut Command| {
        let o = c.output().unwrap();
        assert!(
            o.status.success(),
            "{c:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).to_string()
    };
    run(Command::new("nbdcopy").arg(&input).arg(uri("arr")));
    let size: u64 = run(Command::new("nbdinfo").arg("--size").arg(uri("arr")))
        .trim()
        .parse()
        .unwrap();
    assert!(size >= data.len() as u64);
    let out = d.path().join("out.bin");
    run(Command::new("nbdcopy").arg(uri("arr")).arg(&out));
    assert!(std::fs::read(&out).unwrap()[..data.len()] == data[..]);
    // Plaintext: refused (TLS required first).
    let o = Command::new("nbdinfo")
        .arg("--size")
        .arg(format!("nbd://localhost:{port}/arr"))
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("TLS"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // Another export name: refused.
    let o = Command::new("nbdinfo")
        .arg("--size")
        .arg(uri("other"))
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("no export named"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    drop(srv);
}

/// Serve `m` over TLS on 127.0.0.1:`port` with `extra` options, stderr to
/// `d/serve.log`; waits until it listens.
fn serve_tls(d: &Path, m: &[String], certs: &Path, port: u16, extra: &[&str]) -> Server {
    let srv = Server(
        Command::new(bin())
            .arg("serve")
            .args(m)
            .args(["--listen", &format!("tcp:127.0.0.1:{port}")])
            .args(extra)
            .arg("--tls-cert")
            .arg(certs.join("server-cert.pem"))
            .arg("--tls-key")
            .arg(certs.join("server-key.pem"))
            .env("XDG_RUNTIME_DIR", d)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(d.join("serve.log")).unwrap())
            .spawn()
            .unwrap(),
    );
    let t = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "server did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    srv
}

/// Issue 37: an expired server certificate is served with a warning that
/// says so (clients refuse it; the server used to start silently), and a
/// client connecting by IP address adds no rustls SNI warning to the log.
#[test]
fn an_expired_certificate_is_warned_of_and_ip_clients_log_no_sni_noise() {
    if !have("nbdinfo") {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let m: Vec<String> = (0..3)
        .map(|i| d.path().join(format!("m{i}")).display().to_string())
        .collect();
    let mut a = vec!["create", "--layout", "raid5", "--size", "16M"];
    a.extend(m.iter().map(|s| s.as_str()));
    assert!(Command::new(bin()).args(&a).status().unwrap().success());
    let old = d.path().join("old");
    std::fs::create_dir(&old).unwrap();
    certificates_for(&old, "127.0.0.1", true);
    let port = free_port();
    let srv = serve_tls(d.path(), &m, &old, port, &[]);
    std::thread::sleep(Duration::from_millis(200));
    drop(srv);
    let log = std::fs::read_to_string(d.path().join("serve.log")).unwrap();
    assert!(
        log.contains("warning:") && log.contains("expired on") && log.contains("renew it"),
        "{log}"
    );
    let ip = d.path().join("ip");
    std::fs::create_dir(&ip).unwrap();
    certificates_for(&ip, "127.0.0.1", false);
    let port = free_port();
    let srv = serve_tls(d.path(), &m, &ip, port, &[]);
    for _ in 0..3 {
        let o = Command::new("nbdinfo")
            .arg("--size")
            .arg(format!(
                "nbds://127.0.0.1:{port}/?tls-certificates={}",
                ip.display()
            ))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    drop(srv);
    let log = std::fs::read_to_string(d.path().join("serve.log")).unwrap();
    assert!(!log.contains("SNI"), "{log}");
    assert!(!log.contains("warning"), "{log}");
}
