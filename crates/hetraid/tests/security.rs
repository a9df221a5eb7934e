//! Who may reach a served array's control socket (issue 15): a private
//! directory and a 0600 socket, peers checked by their credentials and
//! refusals logged, a link or a squatter in the socket's place refused
//! without anything sent, and a new member never opened by the server on
//! the caller's behalf. The second-user cases run a command as uid 65534
//! (`setpriv`), with CAP_DAC_OVERRIDE so it gets past the directory and the
//! socket's modes to the server's own check; they need root (as CI runs),
//! and with `CI` set a missing `setpriv` or root fails the test.

mod common;
use common::args;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_hetraid")
}

/// `hetraid ARGS` with XDG_RUNTIME_DIR=`run`: (code, stdout, stderr).
fn h(run: &Path, a: &[&str]) -> (i32, String, String) {
    let o = Command::new(bin())
        .args(a)
        .env("XDG_RUNTIME_DIR", run)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into(),
        String::from_utf8_lossy(&o.stderr).into(),
    )
}

fn members(d: &Path) -> Vec<String> {
    let m: Vec<String> = (0..3)
        .map(|i| {
            let p = d.join(format!("m{i}"));
            std::fs::File::create(&p).unwrap().set_len(8 << 20).unwrap();
            p.display().to_string()
        })
        .collect();
    let mut a = vec!["create", "--layout", "raid5"];
    a.extend(m.iter().map(|s| s.as_str()));
    let o = Command::new(bin()).args(&a).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    m
}

fn uuid(m: &[String]) -> String {
    let o = Command::new(bin())
        .args(args("status", m, &["--json"]))
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    v["uuid"].as_str().unwrap().to_string()
}

struct Server {
    child: Child,
    log: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Serve `m` with XDG_RUNTIME_DIR=`run`, stderr to a log file; waits
    /// for the NBD socket.
    fn start(d: &Path, run: &Path, m: &[String]) -> Server {
        let sock = d.join("nbd.sock");
        let log = d.join("serve.log");
        let child = Command::new(bin())
            .args(args(
                "serve",
                m,
                &["--listen", &format!("unix:{}", sock.display())],
            ))
            .env("XDG_RUNTIME_DIR", run)
            .stderr(std::fs::File::create(&log).unwrap())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let t = Instant::now();
        while std::os::unix::net::UnixStream::connect(&sock).is_err() {
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "server did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // The control socket comes up beside it.
        std::thread::sleep(Duration::from_millis(200));
        Server { child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

fn private_run(d: &Path) -> PathBuf {
    let run = d.join("run");
    std::fs::create_dir(&run).unwrap();
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700)).unwrap();
    run
}

/// Can this test act as a second user? Root and setpriv are needed; with
/// CI set their absence fails the test.
fn second_user_possible() -> bool {
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc_geteuid() } == 0;
    let setpriv = Command::new("sh")
        .arg("-c")
        .arg("command -v setpriv")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if root && setpriv {
        return true;
    }
    let why = format!("second-user cases need root and setpriv (root {root}, setpriv {setpriv})");
    if std::env::var_os("CI").is_some() {
        panic!("CI is set and {why}");
    }
    eprintln!("skipping: {why}");
    false
}

extern "C" {
    #[link_name = "geteuid"]
    fn libc_geteuid() -> u32;
}

/// `hetraid ARGS` as uid/gid 65534 with CAP_DAC_OVERRIDE (past the modes,
/// up to the server's credential check).
fn as_nobody(run: &Path, a: &[&str]) -> (i32, String, String) {
    let o = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=+dac_override",
            "--ambient-caps=+dac_override",
            bin(),
        ])
        .args(a)
        .env("XDG_RUNTIME_DIR", run)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into(),
        String::from_utf8_lossy(&o.stderr).into(),
    )
}

#[test]
fn the_control_socket_is_private_checks_its_peers_and_logs_every_action() {
    let d = tempfile::tempdir().unwrap();
    let run = private_run(d.path());
    let m = members(d.path());
    let id = uuid(&m);
    let srv = Server::start(d.path(), &run, &m);
    let dir = run.join("hetraid");
    let sock = dir.join(format!("{id}.ctl"));
    let dm = std::fs::symlink_metadata(&dir).unwrap();
    assert!(
        dm.is_dir() && dm.mode() & 0o777 == 0o700,
        "dir mode {:o}",
        dm.mode()
    );
    let sm = std::fs::symlink_metadata(&sock).unwrap();
    assert_eq!(sm.mode() & 0o777, 0o600, "socket mode {:o}", sm.mode());
    // The server's own user gets through, and the action is logged.
    let (code, out, err) = h(&run, &args("fail", &m, &["--member", "1"]));
    assert_eq!(code, 0, "{out}{err}");
    assert!(srv.log().contains("control: uid 0 ("), "{}", srv.log());
    assert!(srv.log().contains("fail member=1"), "{}", srv.log());
    assert!(srv.log().contains(": done"), "{}", srv.log());
    // Failures carry their kind to the client and the exit code: a second
    // failure would lose data (2, nothing changed), an unknown verb is a
    // usage error (64).
    let ctl = |req: &str| h(&run, &["ctl-raw", sock.to_str().unwrap(), req]);
    let (code, out, err) = ctl(r#"{"verb":"fail","member":2}"#);
    assert_eq!(code, 2, "{out}{err}");
    assert!(out.contains(r#""kind":"would-lose-data""#), "{out}");
    let (code, out, _) = ctl(r#"{"verb":"frobnicate"}"#);
    assert_eq!(code, 64, "{out}");
    assert!(out.contains(r#""kind":"usage""#), "{out}");
    // A path alone is never opened by the server.
    let (code, _, err) = h(
        &run,
        &[
            "ctl-raw",
            sock.to_str().unwrap(),
            r#"{"verb":"replace","member":1,"with":"/etc/passwd"}"#,
        ],
    );
    assert_ne!(code, 0);
    assert!(err.contains("a path alone is not opened"), "{err}");
    // A file this user cannot open for writing never reaches the server.
    let ro = d.path().join("ro.img");
    std::fs::File::create(&ro)
        .unwrap()
        .set_len(8 << 20)
        .unwrap();
    if second_user_possible() {
        // Owned by root, 0600: uid 65534 cannot open it (no DAC override
        // for this one: a plain second user).
        std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o600)).unwrap();
        let o = Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                bin(),
                "ctl-raw",
            ])
            .arg(&sock)
            .arg(r#"{"verb":"status"}"#)
            .output()
            .unwrap();
        assert!(
            !o.status.success(),
            "a plain second user reached the socket"
        );
        // With the modes overridden it reaches the server, which refuses
        // it by its credentials and logs the attempt.
        let (code, out, err) = as_nobody(
            &run,
            &[
                "ctl-raw",
                sock.to_str().unwrap(),
                r#"{"verb":"fail","member":0}"#,
            ],
        );
        assert_ne!(code, 0, "{out}");
        assert!(
            err.contains("uid 65534 may not control this array"),
            "{err}"
        );
        assert!(srv.log().contains("refused uid 65534"), "{}", srv.log());
        // Its own command line does not trust root's directory either.
        let (code, _, err) = as_nobody(&run, &args("status", &m, &[]));
        assert_ne!(code, 0);
        assert!(err.contains("not private"), "{err}");
    }
    let v: serde_json::Value =
        serde_json::from_str(&h(&run, &args("status", &m, &["--json"])).1).unwrap();
    assert_eq!(v["member_states"][0]["state"], "active", "{v}");
    drop(srv);
}

#[test]
fn a_link_or_a_squatter_in_the_sockets_place_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let m = members(d.path());
    let id = uuid(&m);
    // The control directory is a link to a private directory elsewhere.
    let run = private_run(d.path());
    let elsewhere = d.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::fs::set_permissions(&elsewhere, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::symlink(&elsewhere, run.join("hetraid")).unwrap();
    let srv = Server::start(d.path(), &run, &m);
    assert!(
        srv.log().contains("not a directory (a link or a file)"),
        "{}",
        srv.log()
    );
    assert!(
        std::fs::read_dir(&elsewhere).unwrap().next().is_none(),
        "nothing made through the link"
    );
    let (code, _, err) = h(&run, &args("fail", &m, &["--member", "1"]));
    assert_eq!(code, 2);
    assert!(err.contains("not a directory (a link or a file)"), "{err}");
    drop(srv);
    // A socket owned by another user where the server's would be.
    let run2 = d.path().join("run2");
    std::fs::create_dir(&run2).unwrap();
    std::fs::set_permissions(&run2, std::fs::Permissions::from_mode(0o700)).unwrap();
    let dir = run2.join("hetraid");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let squat = dir.join(format!("{id}.ctl"));
    let _l = std::os::unix::net::UnixListener::bind(&squat).unwrap();
    if second_user_possible() {
        std::os::unix::fs::chown(&squat, Some(65534), Some(65534)).unwrap();
        let (code, _, err) = h(&run2, &args("fail", &m, &["--member", "1"]));
        assert_eq!(code, 2, "{err}");
        assert!(
            err.contains("is not a control socket this user can trust"),
            "{err}"
        );
    }
    // Nothing was failed.
    let o = Command::new(bin())
        .args(args("status", &m, &["--json"]))
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["member_states"][1]["state"], "active", "{v}");
}

/// A server run by an ordinary user: that user's `replace` with a file it
/// cannot open for writing (root's 0600 image) is refused by its own open,
/// nothing reaches the server, and the file is untouched.
#[test]
fn replace_with_a_file_the_caller_cannot_write_is_refused() {
    if !second_user_possible() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    // Traversable, not listable: the user reaches its own directory only.
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    let u = d.path().join("u");
    std::fs::create_dir(&u).unwrap();
    let m = members(&u);
    let run = u.join("run");
    std::fs::create_dir(&run).unwrap();
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700)).unwrap();
    for p in m.iter().map(PathBuf::from).chain([u.clone(), run.clone()]) {
        std::os::unix::fs::chown(&p, Some(65534), Some(65534)).unwrap();
    }
    let secret = d.path().join("secret.img");
    let content: Vec<u8> = (0..16u32 << 20).map(|i| (i % 251) as u8).collect();
    std::fs::write(&secret, &content).unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let nobody = |a: &[&str]| {
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", bin()])
            .args(a)
            .env("XDG_RUNTIME_DIR", &run)
            .output()
            .unwrap()
    };
    let sock = u.join("nbd.sock");
    let log = d.path().join("serve.log");
    let mut srv = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            bin(),
            "serve",
        ])
        .args(&m)
        .arg("--listen")
        .arg(format!("unix:{}", sock.display()))
        .env("XDG_RUNTIME_DIR", &run)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while !sock.exists() {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "server did not start: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    let o = nobody(&args("fail", &m, &["--member", "1"]));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = nobody(&args(
        "replace",
        &m,
        &["--member", "1", "--with", secret.to_str().unwrap()],
    ));
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("cannot open new member") && err.contains("ermission denied"),
        "{err}"
    );
    let _ = srv.kill();
    let _ = srv.wait();
    let served = std::fs::read_to_string(&log).unwrap();
    assert!(
        served.contains("fail member=1") && !served.contains("replace"),
        "{served}"
    );
    assert!(
        std::fs::read(&secret).unwrap() == content,
        "the file was written"
    );
}

/// Send `line` on the control socket at `sock` with `fds` attached in one
/// message; the server's reply line.
fn control_with_fds(sock: &Path, line: &str, fds: &[i32]) -> String {
    use std::io::BufRead;
    use std::os::fd::AsRawFd;
    let s = std::os::unix::net::UnixStream::connect(sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let bytes = format!("{line}\n");
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr() as *mut libc::c_void,
        iov_len: bytes.len(),
    };
    let mut cbuf = vec![0u8; 512];
    // SAFETY: every pointer in the message outlives sendmsg; the control
    // buffer holds one SCM_RIGHTS message of up to 64 descriptors.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        let size = std::mem::size_of_val(fds) as u32;
        msg.msg_control = cbuf.as_mut_ptr().cast();
        msg.msg_controllen = libc::CMSG_SPACE(size) as _;
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SCM_RIGHTS;
        (*c).cmsg_len = libc::CMSG_LEN(size) as _;
        std::ptr::copy_nonoverlapping(fds.as_ptr(), libc::CMSG_DATA(c).cast::<i32>(), fds.len());
        assert_eq!(
            libc::sendmsg(s.as_raw_fd(), &msg, libc::MSG_NOSIGNAL),
            bytes.len() as isize
        );
    }
    let mut reply = String::new();
    std::io::BufReader::new(&s).read_line(&mut reply).unwrap();
    reply
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

/// Issue 37 (findings 4 and 5), through a running server: a new member
/// passed open O_APPEND (where every write lands at the end) or as a memfd
/// (no name: the array would lose it) is refused with a sentence and
/// nothing changes; twelve descriptors in one message leave the server's
/// descriptor count as it was.
#[test]
fn passed_descriptors_that_append_or_have_no_name_are_refused_and_extras_closed() {
    let d = tempfile::tempdir().unwrap();
    let run = private_run(d.path());
    let m = members(d.path());
    let id = uuid(&m);
    let srv = Server::start(d.path(), &run, &m);
    let (code, _, err) = h(&run, &args("fail", &m, &["--member", "1"]));
    assert_eq!(code, 0, "{err}");
    std::thread::sleep(Duration::from_millis(500));
    let sock = run.join("hetraid").join(format!("{id}.ctl"));
    let snapshot = || -> Vec<Vec<u8>> { m.iter().map(|p| std::fs::read(p).unwrap()).collect() };
    let before = snapshot();
    let spare = d.path().join("spare");
    std::fs::File::create(&spare)
        .unwrap()
        .set_len(8 << 20)
        .unwrap();
    let request = |with: &Path| {
        serde_json::json!({"verb": "replace", "member": 1, "with": with, "force": false})
            .to_string()
    };
    let appending = std::fs::OpenOptions::new()
        .read(true)
        .append(true)
        .open(&spare)
        .unwrap();
    use std::os::fd::AsRawFd;
    let r = control_with_fds(&sock, &request(&spare), &[appending.as_raw_fd()]);
    assert!(r.contains("\"ok\":false") && r.contains("O_APPEND"), "{r}");
    // SAFETY: memfd_create with a NUL-terminated name.
    let mfd = unsafe { libc::memfd_create(c"spare".as_ptr(), 0) };
    assert!(mfd >= 0);
    // SAFETY: `mfd` is a new descriptor only this owns.
    let memfd = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(mfd) };
    memfd.set_len(8 << 20).unwrap();
    let r = control_with_fds(&sock, &request(&spare), &[memfd.as_raw_fd()]);
    assert!(r.contains("\"ok\":false") && r.contains("no name"), "{r}");
    assert!(snapshot() == before, "a refused replace changed a member");
    assert!(std::fs::read(&spare).unwrap().iter().all(|&b| b == 0));
    // Twelve descriptors in one message: all closed, whatever the answer.
    let pid = srv.child.id();
    let fds_before = open_fds(pid);
    let files: Vec<std::fs::File> = (0..12)
        .map(|_| std::fs::File::open(&spare).unwrap())
        .collect();
    let raw: Vec<i32> = files.iter().map(|f| f.as_raw_fd()).collect();
    for _ in 0..5 {
        let r = control_with_fds(&sock, &request(&spare), &raw);
        assert!(r.contains("\"ok\":false"), "{r}");
    }
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        open_fds(pid),
        fds_before,
        "descriptors leaked: {}",
        srv.log()
    );
    let (_, out, _) = h(&run, &args("status", &m, &[]));
    assert!(out.contains("degraded"), "{out}");
}
