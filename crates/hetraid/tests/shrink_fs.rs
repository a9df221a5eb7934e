//! Issue 41 on the path a user takes, run as `scripts/shrink-fs.sh` with
//! this build's binary: ext4 on a served RAIDX5 of varying bundle widths,
//! shrunk with resize2fs to what `hetraid shrink` says the array keeps
//! without a member, the member removed while the server runs and the
//! files are read, then fsck, the files and a scrub clean, and the
//! capacity at the bound of the members left.
//!
//! It needs what a block device needs: root, /dev/fuse and loop devices.
//! Without them it says so and returns; nbdfuse and the e2fsprogs are
//! required with `CI` set.

mod common;

#[test]
fn a_member_leaves_a_served_raidx_under_a_shrunk_filesystem() {
    if !common::block_devices_here() {
        return;
    }
    for tool in ["nbdfuse", "mkfs.ext4", "losetup", "e2fsck", "resize2fs"] {
        if !common::have(tool) {
            common::missing(tool);
            return;
        }
    }
    let (stdout, stderr) = common::run_script("shrink-fs.sh", &[("LEVEL", "5")]);
    for said in [
        "created RAIDX5: 810549248 of a bound of 810549248 bytes (1.000)",
        "shrink says: keep 658505728 bytes",
        "145 chunks evacuated past the new end, 145 bundles narrowed",
        "all intact",
        "after: 658505728 of a bound of 658505728 bytes (1.000)",
        "fsck: clean",
        "files: intact",
        " 0 mismatched",
        "PASSED",
    ] {
        assert!(
            stdout.contains(said),
            "'{said}' not in:\n{stdout}\n{stderr}"
        );
    }
}
