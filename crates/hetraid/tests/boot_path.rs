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
    let root = rustix::process::geteuid().is_root();
    let devices = ["/dev/fuse", "/dev/loop-control"]
        .iter()
        .all(|d| std::path::Path::new(d).exists());
    if !root || !devices {
        eprintln!(
            "skipping: needs root, /dev/fuse and loop devices (a block device for the filesystem)"
        );
        return;
    }
    for tool in ["nbdfuse", "mkfs.ext4", "losetup", "fsck.ext4"] {
        if !common::have(tool) {
            common::missing(tool);
            return;
        }
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/boot-path.sh");
    let out = std::process::Command::new("bash")
        .arg(script)
        .env("HETRAID", env!("CARGO_BIN_EXE_hetraid"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "boot-path.sh failed:\n{stdout}\n{stderr}"
    );
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
