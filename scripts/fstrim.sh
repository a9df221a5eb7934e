#!/usr/bin/env bash
# TRIM on the path users take (issue 37): a RAID5 of four file members served
# over NBD, mounted through nbdfuse and a loop device as ext4 (or FS=xfs,
# FS=btrfs), filled, the files deleted, `fstrim` run; the members' allocated
# bytes must drop, `nbdinfo --map` must show holes, fsck and scrub must be
# clean. Needs root (loop devices, mount) and FUSE; prints the numbers.
#   SIZE=256M   each member's size
#   FS=ext4     the filesystem
#   HETRAID=... the binary (default target/release/hetraid)
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE=${SIZE:-256M}
FS=${FS:-ext4}
H=$(realpath "${HETRAID:-target/release/hetraid}")
[ -x "$H" ] || cargo build --release -q -p hetraid
dir=$(mktemp -d)
loop=
cleanup() {
    mountpoint -q "$dir/mnt" && umount "$dir/mnt"
    [ -n "$loop" ] && losetup -d "$loop" 2>/dev/null
    mountpoint -q "$dir/fuse" && (fusermount3 -u "$dir/fuse" 2>/dev/null || umount "$dir/fuse")
    pkill -INT -f "listen unix:$dir/s" 2>/dev/null || true
    sleep 1
    rm -rf "$dir"
}
trap cleanup EXIT
cd "$dir"
allocated() { du -k m0 m1 m2 m3 | awk '{s+=$1} END {print s * 1024}'; }
$H create --layout raid5 --chunk 64K --size "$SIZE" m0 m1 m2 m3 >/dev/null
echo "members after create:  $(allocated) bytes allocated"
$H serve m0 m1 m2 m3 --listen "unix:$dir/s" 2>serve.log &
for _ in $(seq 100); do [ -S "$dir/s" ] && break; sleep 0.1; done
mkdir fuse mnt
nbdfuse fuse "nbd+unix:///?socket=$dir/s" &
for _ in $(seq 100); do [ -e fuse/nbd ] && break; sleep 0.1; done
loop=$(losetup -f --show fuse/nbd)
case $FS in
    ext4) mkfs.ext4 -q -E nodiscard "$loop" ;;
    xfs) mkfs.xfs -q -K "$loop" ;;
    btrfs) mkfs.btrfs -q -K "$loop" ;;
    *) echo "FS=$FS: use ext4, xfs or btrfs"; exit 2 ;;
esac
mount "$loop" mnt
cap=$(( $(df -k --output=avail mnt | tail -1) * 1024 * 3 / 4 ))
dd if=/dev/urandom of=mnt/data bs=1M count=$((cap >> 20)) status=none
sync
filled=$(allocated)
echo "members after filling: $filled bytes allocated ($((cap >> 20)) MiB written)"
rm mnt/data
sync
fstrim -v mnt
sync
umount mnt
# The loop device passes discards on from a work queue: fstrim can return
# before the last one reaches the server; unmounting waits for them.
trimmed=$(allocated)
echo "members after fstrim:  $trimmed bytes allocated (after unmounting)"
holes=$(nbdinfo --map "nbd+unix:///?socket=$dir/s" | grep -c "hole,zero" || true)
echo "nbdinfo --map: $holes hole extents"

case $FS in
    ext4) fsck.ext4 -fn "$loop" >/dev/null ;;
    xfs) xfs_repair -n "$loop" >/dev/null 2>&1 ;;
    btrfs) btrfs check "$loop" >/dev/null 2>&1 ;;
esac
echo "fsck: clean"
losetup -d "$loop"; loop=
fusermount3 -u fuse 2>/dev/null || umount fuse
pkill -INT -f "listen unix:$dir/s"
for _ in $(seq 100); do pgrep -f "listen unix:$dir/s" >/dev/null || break; sleep 0.1; done
$H scrub m0 m1 m2 m3 | tail -1
[ "$trimmed" -lt $((filled / 4)) ] || { echo "FAILED: fstrim gave back too little"; exit 1; }
[ "$holes" -gt 0 ] || { echo "FAILED: no holes in the map"; exit 1; }
echo "OK: fstrim gave back $(( (filled - trimmed) >> 20 )) MiB of member space"
