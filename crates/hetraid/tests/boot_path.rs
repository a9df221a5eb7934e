//! docs/OPERATING.md's path from bare disks to a mounted filesystem (issue
//! 39), run as `scripts/boot-path.sh` with this build's binary: the
//! configuration from `--print-config`, `serve tank` finding its members by
//! scan, nbdfuse and a loop device, mkfs with `status --mkfs`, files
//! verified across a failure, a replace and a rebuild by name that `iostat`
//! shows, `clear`, fsck and scrub clean.
//!
//! It needs what a block device needs: root, /dev/fuse and loop devices
//! (not a client `.ci/run` can install). Without them it says so and
//! returns; nbdfuse and mkfs.ext4 are required with `CI` set.

mod common;

#[test]
fn from_bare_disks_to_a_mounted_filesystem_by_name() {
    if !common::block_devices_here() {
        return;
    }
    for tool in ["nbdfuse", "mkfs.ext4", "losetup", "fsck.ext4"] {
        if !common::have(tool) {
            common::missing(tool);
            return;
        }
    }
    let (stdout, stderr) = common::run_script("boot-path.sh", &[]);
    for said in [
        "mkfs: mkfs.ext4 -b 4096 -E stride=16,stripe_width=48 /dev/loop",
        "files: intact, degraded",
        "tank (rebuilding)",
        "rebuild: ",
        "status --test tank: optimal",
        "files: intact after the rebuild",
        "fsck: clean",
        "0 mismatched",
        "OK: from bare disks",
    ] {
        assert!(
            stdout.contains(said),
            "'{said}' not in:\n{stdout}\n{stderr}"
        );
    }
}

/// Loop devices over files, their `queue/rotational` set as the test
/// wants; detached when dropped.
struct Loops(Vec<String>);

impl Loops {
    /// A loop device over a new 32 MiB file at `f`, its rotational flag set
    /// to `rotational`; the flag's path when it cannot be set.
    fn attach(&mut self, f: &std::path::Path, rotational: &str) -> Result<(), String> {
        std::fs::File::create(f).unwrap().set_len(32 << 20).unwrap();
        let out = std::process::Command::new("losetup")
            .args(["-f", "--show"])
            .arg(f)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let dev = String::from_utf8_lossy(&out.stdout).trim().to_string();
        self.0.push(dev.clone());
        let flag = format!(
            "/sys/block/{}/queue/rotational",
            dev.trim_start_matches("/dev/")
        );
        std::fs::write(&flag, rotational).map_err(|_| flag)
    }
}

impl Drop for Loops {
    fn drop(&mut self) {
        for l in &self.0 {
            let _ = std::process::Command::new("losetup")
                .args(["-d", l])
                .status();
        }
    }
}

#[test]
fn member_kinds_come_from_the_kernels_rotational_flag() {
    let root = rustix::process::geteuid().is_root();
    if !root || !std::path::Path::new("/dev/loop-control").exists() {
        eprintln!("skipping: needs root and loop devices");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let mut loops = Loops(Vec::new());
    for (i, rotational) in ["1", "1", "1", "0"].iter().enumerate() {
        if let Err(flag) = loops.attach(&d.path().join(format!("f{i}")), rotational) {
            eprintln!("skipping: {flag} cannot be set here");
            return;
        }
    }
    // raid4s with kinds from the kernel: the SSD (rotational 0) is the
    // fourth, where the preset wants it; said on stderr, kept in status.
    let mut a = vec!["create", "--layout", "raid4s"];
    a.extend(loops.0.iter().map(String::as_str));
    let (code, _, err) = common::hetraid(&a);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("member kinds from the kernel: "), "{err}");
    assert!(
        err.contains(&format!("{} ssd", loops.0[3]))
            && err.contains(&format!("{} hdd", loops.0[0])),
        "{err}"
    );
    let st = common::json(&common::args("status", &loops.0, &["--json"]));
    let kinds: Vec<&str> = st["member_states"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["hdd", "hdd", "hdd", "ssd"]);
    // An explicit kind wins over the kernel's.
    for l in &loops.0 {
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .open(l)
            .and_then(|mut f| std::io::Write::write_all(&mut f, &[0u8; 1 << 20]));
    }
    let given: Vec<String> = loops.0.iter().map(|l| format!("{l}:hdd")).collect();
    let mut a = vec!["create", "--layout", "raid5", "--force"];
    a.extend(given.iter().map(String::as_str));
    let (code, _, err) = common::hetraid(&a);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("from the kernel"), "{err}");
    let st = common::json(&common::args("status", &loops.0, &["--json"]));
    assert!(st["member_states"]
        .as_array()
        .unwrap()
        .iter()
        .all(|m| m["kind"] == "hdd"));
    // A spare added without a kind takes the kernel's too.
    loops.attach(&d.path().join("spare"), "0").unwrap();
    let spare = loops.0[4].clone();
    let members = &loops.0[..4];
    common::ok(&common::args("add", members, &["--with", &spare]));
    let st = common::json(&common::args("status", &loops.0, &["--json"]));
    assert_eq!(st["spares"][0]["kind"], "ssd", "{st}");
}
