#!/usr/bin/env bash
# Issue 41 on the path a user takes: a RAIDX of varying bundle widths over
# six members of 4:4:6:6:12:12 sizes, served; ext4 on it (nbdfuse and a
# loop device where a host would use the kernel's nbd-client), files
# written; the filesystem shrunk with resize2fs to what the array keeps
# without a member (`hetraid shrink` says it when asked for more); the
# member removed while the server runs and the files are read over and
# over; then fsck, the files, more files and a scrub. Prints the capacity
# against the bound before and after. Needs root (loop devices, mount)
# and FUSE.
#   HETRAID=...  the binary (default target/release/hetraid)
#   LEVEL=5      the RAIDX level (5, 6, 0, 1, 10)
set -euo pipefail
cd "$(dirname "$0")/.."
H=$(realpath "${HETRAID:-target/release/hetraid}")
[ -x "$H" ] || cargo build --release -q -p hetraid
LEVEL=${LEVEL:-5}
dir=$(mktemp -d)
loop=
server=
reader=
cleanup() {
    set +e
    touch "$dir/stop"
    [ -n "$reader" ] && wait "$reader" 2>/dev/null
    mountpoint -q "$dir/mnt" && umount "$dir/mnt"
    [ -n "$loop" ] && losetup -d "$loop" 2>/dev/null
    mountpoint -q "$dir/fuse" && (fusermount3 -u "$dir/fuse" 2>/dev/null || umount "$dir/fuse")
    [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
    rm -rf "$dir"
}
trap cleanup EXIT
cd "$dir"
mkdir fuse mnt
M=""
i=0
for u in 4 4 6 6 12 12; do
    truncate -s $((u * 24 + 4))M "m$i"
    M="$M $dir/m$i"
    i=$((i + 1))
done
$H create $M --layout raidx --raidx-level "$LEVEL" --chunk 1M 2>/dev/null
bound() { $H status $1 --json | python3 -c 'import json,sys; s=json.load(sys.stdin); print("%d of a bound of %d bytes (%.3f)" % (s["capacity_bytes"], s["capacity_bound_bytes"], s["capacity_bytes"]/s["capacity_bound_bytes"]))'; }
echo "created RAIDX$LEVEL: $(bound "$M")"
$H serve $M --listen "unix:$dir/a.sock" 2>serve.log &
server=$!
for _ in $(seq 100); do [ -S a.sock ] && break; sleep 0.1; done
[ -S a.sock ] || { cat serve.log; echo "FAILED: serve did not listen"; exit 1; }
nbdfuse fuse "nbd+unix:///?socket=$dir/a.sock" &
for _ in $(seq 100); do [ -e fuse/nbd ] && break; sleep 0.1; done
loop=$(losetup -f --show fuse/nbd)
mkfs.ext4 -q -b 4096 "$loop"
mount "$loop" mnt
for f in a b c d; do dd if=/dev/urandom of="mnt/$f" bs=1M count=24 status=none; done
(cd mnt && sha256sum a b c d) > sums
umount mnt
# What the others keep without member 2: shrink says it when asked for all.
cap=$($H status $M --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["capacity_bytes"])')
set +e
said=$($H shrink $M --member "$dir/m2" --size "$cap" 2>&1)
code=$?
set -e
[ "$code" = 2 ] || { echo "$said"; echo "FAILED: shrink to the whole size exited $code, not 2"; exit 1; }
keep=$(echo "$said" | sed -n 's/.*then give --size \([0-9]*\).*/\1/p')
echo "shrink says: keep $keep bytes"
e2fsck -fy "$loop" >/dev/null 2>&1
resize2fs "$loop" "$((keep / 4096))" >/dev/null 2>&1
echo "filesystem shrunk to $keep bytes"
# The member leaves while the files are read (the server runs the change
# between batches of requests).
mount -o ro "$loop" mnt
(
    n=0
    while [ ! -e stop ]; do
        (cd mnt && sha256sum -c --quiet ../sums) || { echo "FAILED: a file read back wrong during the shrink"; exit 1; }
        n=$((n + 1))
    done
    echo "files read back $n times during the shrink, all intact"
) &
reader=$!
$H shrink $M --member "$dir/m2" --size "$keep" --force
touch stop
wait "$reader"
reader=
umount mnt
# The export is smaller now: connect again (nbd-client would see the new
# size the same way).
losetup -d "$loop"; loop=
fusermount3 -u fuse 2>/dev/null || umount fuse
nbdfuse fuse "nbd+unix:///?socket=$dir/a.sock" &
for _ in $(seq 100); do [ -e fuse/nbd ] && break; sleep 0.1; done
loop=$(losetup -f --show fuse/nbd)
echo "block device: $(blockdev --getsize64 "$loop") bytes"
L=$(echo $M | tr ' ' '\n' | grep -v "/m2$" | tr '\n' ' ')
echo "after: $(bound "$L")"
e2fsck -fn "$loop" >/dev/null 2>&1 && echo "fsck: clean"
mount "$loop" mnt
(cd mnt && sha256sum -c --quiet ../sums) && echo "files: intact"
dd if=/dev/urandom of=mnt/e bs=1M count=16 status=none
(cd mnt && sha256sum e) >> sums
umount mnt
losetup -d "$loop"; loop=
fusermount3 -u fuse 2>/dev/null || umount fuse
kill -INT "$server"; wait "$server" || true; server=
$H scrub $L
$H assemble $L >/dev/null
echo "PASSED"
