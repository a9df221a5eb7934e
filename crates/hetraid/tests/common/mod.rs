//! Running the binary from tests: from the repository root (so the shipped
//! `traces/`, `experiments/` and `docs/` paths resolve), capturing everything.
#![allow(dead_code)]

use serde_json::Value;
use std::process::Command;

/// (exit status, stdout, stderr) of `hetraid ARGS`.
pub fn hetraid(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_hetraid"))
        .args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .output()
        .expect("run hetraid");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

/// The JSON document `hetraid ARGS` prints; the test fails if it fails.
pub fn json(args: &[&str]) -> Value {
    let (code, out, err) = hetraid(args);
    assert_eq!(code, 0, "hetraid {args:?} failed: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

/// (exit status, stdout, stderr) of `hetraid ARGS` with `stdin` fed to it.
pub fn run_stdin<S: AsRef<std::ffi::OsStr>>(
    args: &[S],
    stdin: Option<&[u8]>,
) -> (i32, Vec<u8>, String) {
    use std::io::Write;
    use std::process::Stdio;
    let mut c = Command::new(env!("CARGO_BIN_EXE_hetraid"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run hetraid");
    if let Some(d) = stdin {
        // A command that refuses its input may exit before reading it all.
        let _ = c.stdin.take().unwrap().write_all(d);
    }
    drop(c.stdin.take());
    let o = c.wait_with_output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        o.stdout,
        String::from_utf8_lossy(&o.stderr).into(),
    )
}

/// `n` pseudo-random bytes from `seed` (xorshift).
pub fn bytes(n: usize, seed: u64) -> Vec<u8> {
    hetraid_parity::reference::pattern(n, seed)
}

/// `VERB MEMBERS... EXTRA...` as arguments.
pub fn args<'a>(verb: &'a str, members: &'a [String], extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![verb];
    v.extend(members.iter().map(|s| s.as_str()));
    v.extend_from_slice(extra);
    v
}

/// Is `tool` installed? When not: skipped locally, a failure with `CI` set
/// (a test that skips in CI passed without running).
pub fn have(tool: &str) -> bool {
    let ok = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .stdout(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        missing(&format!(
            "{tool} is not installed (apt-get install libnbd-bin qemu-utils fio)"
        ));
    }
    ok
}

/// A client the test needs is missing: skip locally, fail in CI.
/// Whether this process can make a block device for a filesystem (root,
/// /dev/fuse, loop devices); says why not when it cannot. (Not a client
/// `.ci/run` can install: CI without them skips.)
pub fn block_devices_here() -> bool {
    let root = rustix::process::geteuid().is_root();
    let devices = ["/dev/fuse", "/dev/loop-control"]
        .iter()
        .all(|d| std::path::Path::new(d).exists());
    if !root || !devices {
        eprintln!(
            "skipping: needs root, /dev/fuse and loop devices (a block device for the filesystem)"
        );
    }
    root && devices
}

pub fn missing(what: &str) {
    if std::env::var_os("CI").is_some() {
        panic!("CI is set and {what}: the test cannot run");
    }
    eprintln!("skipping: {what}");
}

/// `hetraid write MEMBERS --offset OFFSET` of `data`; the test fails if it fails.
pub fn write_array(members: &[String], offset: u64, data: &[u8]) {
    let mut a = vec!["write".to_string()];
    a.extend(members.iter().cloned());
    a.extend(["--offset".into(), offset.to_string()]);
    let (code, _, err) = run_stdin(&a, Some(data));
    assert_eq!(code, 0, "{err}");
}

/// `hetraid read MEMBERS` of the first `len` bytes; the test fails if it fails.
pub fn read_array(members: &[String], len: usize) -> Vec<u8> {
    let mut a = vec!["read".to_string()];
    a.extend(members.iter().cloned());
    a.extend([
        "--offset".into(),
        "0".into(),
        "--length".into(),
        len.to_string(),
    ]);
    let (code, out, err) = run_stdin(&a, None);
    assert_eq!(code, 0, "{err}");
    out
}

/// A seeded xorshift generator: randomized tests print their seed and replay
/// from it.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A number from the environment (a seed, a case count), or `default`.
pub fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// A `hetraid serve` child, killed when dropped.
pub struct Served(pub std::process::Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `hetraid serve MEMBERS --listen unix:SOCK`, once it accepts connections.
pub fn serve(members: &[String], sock: &std::path::Path) -> Served {
    serve_with(members, sock, &[])
}

/// Files `names` of `mib` MiB each in `d` (sparse), their paths.
pub fn files(d: &std::path::Path, names: &[&str], mib: u64) -> Vec<String> {
    names
        .iter()
        .map(|n| {
            let p = d.join(n);
            std::fs::File::create(&p)
                .unwrap()
                .set_len(mib << 20)
                .unwrap();
            p.display().to_string()
        })
        .collect()
}

/// The stdout of `hetraid ARGS`; the test fails if it fails.
pub fn ok(a: &[&str]) -> String {
    let (code, out, err) = hetraid(a);
    assert_eq!(code, 0, "hetraid {a:?}: {err}");
    out
}

/// `hetraid serve MEMBERS --listen unix:SOCK EXTRA...`, once it accepts
/// connections.
pub fn serve_with(members: &[String], sock: &std::path::Path, extra: &[&str]) -> Served {
    let listen = format!("unix:{}", sock.display());
    let mut a = vec!["--listen", listen.as_str()];
    a.extend_from_slice(extra);
    let child = Command::new(env!("CARGO_BIN_EXE_hetraid"))
        .args(args("serve", members, &a))
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let t = std::time::Instant::now();
    while std::os::unix::net::UnixStream::connect(sock).is_err() {
        assert!(
            t.elapsed() < std::time::Duration::from_secs(20),
            "server did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Served(child)
}

/// Run `scripts/NAME` with this build's binary (`HETRAID`) and `env`; the
/// test fails, with both outputs, if it does. Its (stdout, stderr).
pub fn run_script(name: &str, env: &[(&str, &str)]) -> (String, String) {
    let script = format!("{}/../../scripts/{name}", env!("CARGO_MANIFEST_DIR"));
    let out = std::process::Command::new("bash")
        .arg(script)
        .env("HETRAID", env!("CARGO_BIN_EXE_hetraid"))
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{name} failed:\n{stdout}\n{stderr}");
    (stdout, stderr)
}
