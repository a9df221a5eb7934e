//! Issue 10's command-line cases, one regression test each (the numbers are the
//! issue's): what an administrator does by mistake must never lose data.
//! The engine-level cases are in `crates/hetraid-engine/tests/safety.rs`.

mod common;
use common::{args, bytes, hetraid, run_stdin, serve};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

fn p(d: &Path, n: &str) -> String {
    d.join(n).display().to_string()
}

fn ok(a: &[&str]) -> String {
    let (code, out, err) = hetraid(a);
    assert_eq!(code, 0, "hetraid {a:?}: {err}");
    out + &err
}

fn refused(a: &[&str], want: &str) -> String {
    let (code, _, err) = hetraid(a);
    assert_ne!(code, 0, "hetraid {a:?} should fail");
    assert!(
        err.contains(want),
        "hetraid {a:?}: expected '{want}' in: {err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    err
}

/// `hetraid write MEMBERS --offset OFF` with `data` on stdin.
fn write(members: &[String], off: u64, data: &[u8]) -> (i32, String) {
    let (code, _, err) = run_stdin(
        &args("write", members, &["--offset", &off.to_string()]),
        Some(data),
    );
    (code, err)
}

fn read(members: &[String], off: u64, len: u64) -> Vec<u8> {
    let o = Command::new(env!("CARGO_BIN_EXE_hetraid"))
        .args(args(
            "read",
            members,
            &["--offset", &off.to_string(), "--length", &len.to_string()],
        ))
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "read: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o.stdout
}

/// A RAID5 of `n` 8 MiB members in `d`, with 1 MiB of data written.
fn raid5(d: &Path, prefix: &str, n: usize) -> (Vec<String>, Vec<u8>) {
    let m: Vec<String> = (0..n).map(|i| p(d, &format!("{prefix}{i}"))).collect();
    ok(&args(
        "create",
        &m,
        &["--layout", "raid5", "--chunk", "64K", "--size", "8M"],
    ));
    let data = bytes(1 << 20, 9);
    assert_eq!(write(&m, 0, &data).0, 0);
    (m, data)
}

/// Case 2: a truncated member is left out by name (it is not "optimal"); reads
/// come from the others, and nothing grows the file back.
#[test]
fn case02_a_truncated_member_is_left_out() {
    let d = tempfile::tempdir().unwrap();
    let (m, data) = raid5(d.path(), "m", 4);
    let f = std::fs::OpenOptions::new().write(true).open(&m[2]).unwrap();
    f.set_len(4 << 20).unwrap();
    drop(f);
    let st = ok(&args("status", &m, &[]));
    assert!(
        st.contains("degraded") && st.contains("m2 is left out"),
        "{st}"
    );
    assert_eq!(read(&m, 0, 1 << 20), data);
    let more = bytes(3 * (64 << 10), 4);
    let (code, err) = write(&m, 0, &more);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("m2"), "the warning names the member: {err}");
    assert_eq!(std::fs::metadata(&m[2]).unwrap().len(), 4 << 20);
    assert_eq!(read(&m, 0, more.len() as u64), more);
}

/// Case 3: serve never deletes what is at its socket path.
#[test]
fn case03_serve_keeps_whatever_is_at_the_socket_path() {
    let d = tempfile::tempdir().unwrap();
    let (m, data) = raid5(d.path(), "m", 3);
    let listen = format!("unix:{}", m[1]);
    refused(&args("serve", &m, &["--listen", &listen]), "not a socket");
    let user = p(d.path(), "notes.txt");
    std::fs::write(&user, "keep me").unwrap();
    refused(
        &args("serve", &m, &["--listen", &format!("unix:{user}")]),
        "not a socket",
    );
    assert_eq!(std::fs::read_to_string(&user).unwrap(), "keep me");
    assert_eq!(read(&m, 0, 1 << 20), data);
}

/// Case 4: replace and add refuse another array's member and a file with data.
#[test]
fn case04_replace_and_add_do_not_overwrite_without_force() {
    let d = tempfile::tempdir().unwrap();
    let (m, data) = raid5(d.path(), "m", 3);
    let (o, odata) = raid5(d.path(), "o", 3);
    ok(&args("fail", &m, &["--member", "1"]));
    let user = p(d.path(), "user.img");
    let mut content = bytes(8 << 20, 3);
    content[..16].copy_from_slice(b"precious user da");
    std::fs::write(&user, &content).unwrap();
    for verb in ["replace", "add"] {
        let mut extra = vec!["--with", o[0].as_str()];
        if verb == "replace" {
            extra.extend(["--member", "1"]);
        }
        refused(&args(verb, &m, &extra), "belongs to array");
        extra[1] = &user;
        refused(&args(verb, &m, &extra), "not empty");
    }
    assert_eq!(std::fs::read(&user).unwrap(), content);
    assert_eq!(read(&o, 0, 1 << 20), odata);
    extra_force(&m, &user);
    let live = vec![m[0].clone(), user.clone(), m[2].clone()];
    ok(&args("rebuild", &live, &[]));
    assert_eq!(read(&live, 0, 1 << 20), data);
}

fn extra_force(m: &[String], user: &str) {
    ok(&args(
        "replace",
        m,
        &["--member", "1", "--with", user, "--force"],
    ));
}

/// Case 5: a refused create leaves a pre-existing file exactly as it was.
#[test]
fn case05_refused_create_keeps_existing_files() {
    let d = tempfile::tempdir().unwrap();
    let keep = p(d.path(), "keep.img");
    std::fs::write(&keep, b"do not delete").unwrap();
    let new = p(d.path(), "new.img");
    refused(
        &[
            "create", "--layout", "raid6", "--size", "4M", "--force", &keep, &new,
        ],
        "at least",
    );
    refused(
        &[
            "create", "--layout", "nosuch", "--size", "4M", "--force", &keep, &new,
        ],
        "nosuch",
    );
    assert_eq!(std::fs::read(&keep).unwrap(), b"do not delete");
    assert!(!Path::new(&new).exists());
}

/// Case 7: fail beyond the redundancy changes nothing without --force.
#[test]
fn case07_fail_beyond_redundancy_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let (m, data) = raid5(d.path(), "m", 3);
    ok(&args("fail", &m, &["--member", "0"]));
    let before: Vec<Vec<u8>> = m.iter().map(|f| std::fs::read(f).unwrap()).collect();
    let e = refused(&args("fail", &m, &["--member", "1"]), "--force");
    assert!(e.contains("m1"), "names the member by path: {e}");
    let after: Vec<Vec<u8>> = m.iter().map(|f| std::fs::read(f).unwrap()).collect();
    assert!(before == after, "a refused fail changed a member");
    assert_eq!(read(&m, 0, 1 << 20), data);
    // RAID0: any member.
    let r0: Vec<String> = (0..2).map(|i| p(d.path(), &format!("z{i}"))).collect();
    ok(&args("create", &r0, &["--layout", "raid0", "--size", "4M"]));
    refused(&args("fail", &r0, &["--member", "1"]), "--force");
    ok(&args("fail", &r0, &["--member", "1", "--force"]));
}

/// Case 9: RAID1 halves written apart are refused together; one side is kept.
#[test]
fn case09_split_brain_halves_are_not_merged() {
    let d = tempfile::tempdir().unwrap();
    let m = vec![p(d.path(), "a"), p(d.path(), "b")];
    ok(&args("create", &m, &["--layout", "raid1", "--size", "4M"]));
    // Each half alone is refused without --degraded (issue 35), and runs
    // with it.
    assert_eq!(write(&m[..1], 0, &[1u8; 4096]).0, 2);
    let deg = |h: &[String], v: u8| {
        run_stdin(
            &args("write", h, &["--offset", "0", "--degraded"]),
            Some(&[v; 4096]),
        )
        .0
    };
    assert_eq!(deg(&m[..1], 1), 0);
    assert_eq!(deg(&m[1..], 2), 0);
    let e = refused(&args("status", &m, &[]), "run apart");
    assert!(e.contains(&m[0]) && e.contains(&m[1]), "{e}");
    refused(
        &args("read", &m, &["--offset", "0", "--length", "4K"]),
        "run apart",
    );
    // Keep b: a is re-added (replace accepts a member that left this array).
    ok(&args(
        "replace",
        &m[1..],
        &["--member", "0", "--with", &m[0]],
    ));
    ok(&args("rebuild", &m, &[]));
    assert_eq!(read(&m, 0, 4096), vec![2u8; 4096]);
}

/// Case 11: --chunk 0 is refused in one sentence and leaves no file behind.
#[test]
fn case11_bad_chunk_sizes_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let m: Vec<String> = (0..3).map(|i| p(d.path(), &format!("c{i}"))).collect();
    for chunk in ["0", "3K", "2G"] {
        refused(
            &args(
                "create",
                &m,
                &["--layout", "raid5", "--chunk", chunk, "--size", "4M"],
            ),
            "power of two",
        );
    }
    assert!(m.iter().all(|f| !Path::new(f).exists()));
}

/// Case 13: verbs use every member path given, not only the first; remove
/// removes; typos are refused; a member listed twice is named; read-only
/// members can be inspected and read.
#[test]
fn case13_wrong_members_and_typos_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let (m, data) = raid5(d.path(), "m", 4);
    {
        let sock = d.path().join("s.sock");
        let _srv = serve(&m, &sock);
        let bogus = vec![m[0].clone(), p(d.path(), "nope"), "/etc/passwd".into()];
        refused(&args("fail", &bogus, &["--member", "3"]), "nope");
        let bogus = vec![m[0].clone(), "/etc/passwd".into()];
        refused(&args("fail", &bogus, &["--member", "3"]), "superblock");
        let st = ok(&args("status", &m, &[]));
        assert!(
            st.contains("optimal"),
            "the served array is untouched: {st}"
        );
        // remove acts on the served array too.
        ok(&args("fail", &m, &["--member", "3"]));
        ok(&args("remove", &m, &["--member", "3"]));
        let st = ok(&args("status", &m, &["--json"]));
        assert!(st.contains("\"removed\""), "{st}");
        // add reaches the served array too.
        let fresh = p(d.path(), "fresh");
        std::fs::File::create(&fresh)
            .unwrap()
            .set_len(8 << 20)
            .unwrap();
        let out = ok(&args("add", &m, &["--with", &fresh]));
        assert!(out.contains("served array in slot 3"), "{out}");
        ok(&args("rebuild", &m, &["--max-speed", "0"]));
        assert!(ok(&args("status", &m, &[])).contains("optimal"));
    }
    let now: Vec<String> = vec![
        m[0].clone(),
        m[1].clone(),
        m[2].clone(),
        p(d.path(), "fresh"),
    ];
    assert_eq!(
        read(&now, 0, 1 << 20),
        data,
        "after fail, remove, add and rebuild"
    );
    // Offline: remove changes the slot's state.
    let (n, _) = raid5(d.path(), "n", 3);
    ok(&args("fail", &n, &["--member", "2"]));
    ok(&args("remove", &n, &["--member", "2"]));
    let st = ok(&args("status", &n[..2], &[]));
    assert!(
        st.lines()
            .any(|l| l.split_whitespace().take(2).eq(["2", "removed"])),
        "{st}"
    );
    // Typos.
    let t: Vec<String> = (0..3).map(|i| p(d.path(), &format!("t{i}"))).collect();
    refused(
        &args(
            "create",
            &t,
            &[
                "--layout",
                "raid5",
                "--parity-order",
                "left-symetric",
                "--size",
                "4M",
            ],
        ),
        "left-symetric",
    );
    let kinded = vec![format!("{}:nvme", t[0]), t[1].clone(), t[2].clone()];
    refused(
        &args("create", &kinded, &["--layout", "raid5", "--size", "4M"]),
        "nvme",
    );
    assert!(!Path::new(&format!("{}:nvme", t[0])).exists());
    assert!(!Path::new(&t[0]).exists());
    // Listed twice, or through a link.
    let link = p(d.path(), "link");
    std::os::unix::fs::symlink(&m[0], &link).unwrap();
    let twice = vec![m[0].clone(), m[1].clone(), m[2].clone(), link.clone()];
    refused(&args("status", &twice, &[]), "same file");
}

/// Case 1, as the issue ran it: on a served RAID5, `fail`, `replace --with
/// new1`, a slow `rebuild` in the background; meanwhile `fail` and `replace
/// --with new2`. The first rebuild stops with an error and activates nothing;
/// a second rebuild fills new2 and every byte reads back.
#[test]
fn case01_served_rebuild_stops_when_its_target_is_replaced() {
    let d = tempfile::tempdir().unwrap();
    let (mut m, data) = raid5(d.path(), "m", 4);
    let sock = d.path().join("s.sock");
    let mut srv = serve(&m, &sock);
    ok(&args("fail", &m, &["--member", "1"]));
    let new1 = p(d.path(), "new1");
    let new2 = p(d.path(), "new2");
    for n in [&new1, &new2] {
        std::fs::File::create(n).unwrap().set_len(8 << 20).unwrap();
    }
    ok(&args("replace", &m, &["--member", "1", "--with", &new1]));
    let slow = Command::new(env!("CARGO_BIN_EXE_hetraid"))
        .args(args(
            "rebuild",
            &m,
            &["--max-speed", "1M", "--min-speed", "1M"],
        ))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    ok(&args("fail", &m, &["--member", "1"]));
    ok(&args("replace", &m, &["--member", "1", "--with", &new2]));
    let o = slow.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "the first rebuild must fail: {err}");
    assert!(err.contains("failed or replaced"), "{err}");
    let st = ok(&args("status", &m, &["--json"]));
    assert!(
        st.contains("\"rebuilding\""),
        "new2 is still to rebuild: {st}"
    );
    ok(&args("rebuild", &m, &["--max-speed", "0"]));
    assert!(ok(&args("status", &m, &[])).contains("optimal"));
    // Stop the server (SIGTERM: flush, mark clean), then read from the files.
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(srv.0.id() as i32, libc::SIGTERM) };
    let _ = srv.0.wait();
    m[1] = new2;
    assert_eq!(read(&m, 0, 1 << 20), data);
    let (code, out, err) = hetraid(&args("scrub", &m, &[]));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(", 0 mismatched"), "{out}");
}

/// Case 13: members the user may only read (immutable, or read-only for a
/// non-root user) can still be inspected and read; writing says why not.
#[test]
fn case13_read_only_members_can_be_inspected_and_read() {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (m, data) = raid5(d.path(), "r", 3);
    // Root ignores permissions but not the immutable attribute.
    let immutable = Command::new("chattr")
        .arg("+i")
        .args(&m)
        .status()
        .is_ok_and(|s| s.success());
    if !immutable {
        for f in &m {
            let mut perm = std::fs::metadata(f).unwrap().permissions();
            perm.set_readonly(true);
            std::fs::set_permissions(f, perm).unwrap();
        }
        if std::fs::OpenOptions::new().write(true).open(&m[0]).is_ok() {
            // Root without chattr: nothing makes the files read-only.
            assert!(
                std::env::var_os("CI").is_none(),
                "CI is set and no way to make a file read-only (chattr) exists"
            );
            eprintln!("skipping: cannot make a member read-only here");
            return;
        }
    }
    let undo = || {
        if immutable {
            let _ = Command::new("chattr").arg("-i").args(&m).status();
        }
    };
    let st = hetraid(&args("status", &m, &[]));
    let back = Command::new(env!("CARGO_BIN_EXE_hetraid"))
        .args(args("read", &m, &["--offset", "0", "--length", "1M"]))
        .output()
        .unwrap();
    let w = write(&m, 0, &[1u8; 4096]);
    undo();
    assert_eq!(st.0, 0, "status of read-only members: {}", st.2);
    assert!(st.1.contains("optimal"), "{}", st.1);
    assert!(
        back.status.success(),
        "{}",
        String::from_utf8_lossy(&back.stderr)
    );
    assert!(back.stdout == data);
    assert_ne!(w.0, 0);
    assert!(w.1.contains("cannot open member"), "{}", w.1);
}

/// Case 6's way back: members failed one after another (here by force) leave
/// an array that will not start; `assemble --force` brings back the freshest
/// and the data written before is all there.
#[test]
fn case06_assemble_force_is_the_way_back() {
    let d = tempfile::tempdir().unwrap();
    let (m, data) = raid5(d.path(), "m", 4);
    ok(&args("fail", &m, &["--member", "0"]));
    ok(&args("fail", &m, &["--member", "1", "--force"]));
    refused(
        &args("read", &m, &["--offset", "0", "--length", "1M"]),
        "--force",
    );
    refused(&args("assemble", &m, &[]), "assemble --force");
    let out = ok(&args("assemble", &m, &["--force"]));
    assert!(
        out.contains("brought back by --force") && out.contains("m1"),
        "{out}"
    );
    assert!(out.contains("degraded"), "{out}");
    assert_eq!(read(&m, 0, 1 << 20), data);
}

/// Case 10 from the command line: a write killed on a degraded array leaves it
/// dirty and degraded; reads are refused until `assemble --force`.
#[test]
fn case10_killed_write_on_a_degraded_array_needs_force() {
    let d = tempfile::tempdir().unwrap();
    let m: Vec<String> = (0..4).map(|i| p(d.path(), &format!("k{i}"))).collect();
    ok(&args(
        "create",
        &m,
        &["--layout", "raid5", "--chunk", "64K", "--size", "40M"],
    ));
    ok(&args("fail", &m, &["--member", "3"]));
    let big = bytes(96 << 20, 5);
    for attempt in 0..20u64 {
        let mut c = Command::new(env!("CARGO_BIN_EXE_hetraid"))
            .args(args("write", &m, &["--offset", "0"]))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut input = c.stdin.take().unwrap();
        // Feed part of the data, then kill it while it waits for more: the
        // regions it wrote are dirty.
        let _ = input.write_all(&big[..(8 + attempt as usize) << 20]);
        std::thread::sleep(Duration::from_millis(300));
        let _ = c.kill();
        let _ = c.wait();
        drop(input);
        let (code, _, err) = hetraid(&args("read", &m, &["--offset", "0", "--length", "4K"]));
        if code != 0 {
            assert!(err.contains("degraded") && err.contains("--force"), "{err}");
            let out = ok(&args("assemble", &m, &["--force"]));
            assert!(out.contains("--force"), "{out}");
            // Started once by force, it starts again without.
            ok(&args("read", &m, &["--offset", "0", "--length", "4K"]));
            return;
        }
    }
    panic!("no kill left the array dirty in 20 attempts");
}
