#!/usr/bin/env bash
# docs/OPERATING.md's path from bare disks to a mounted filesystem, as far
# as one machine allows (files for disks; nbdfuse and a loop device where a
# host would use the kernel's nbd-client): a named array, its configuration
# written by --print-config with the members left to the scan, `serve tank`,
# mkfs with `status --mkfs`, files written and verified, a disk failed and
# replaced by name, the rebuild seen by iostat, counters cleared, fsck and
# scrub clean. Needs root (loop devices, mount) and FUSE.
#   HETRAID=...  the binary (default target/release/hetraid)
set -euo pipefail
cd "$(dirname "$0")/.."
H=$(realpath "${HETRAID:-target/release/hetraid}")
[ -x "$H" ] || cargo build --release -q -p hetraid
dir=$(mktemp -d)
loop=
server=
cleanup() {
    mountpoint -q "$dir/mnt" && umount "$dir/mnt"
    [ -n "$loop" ] && losetup -d "$loop" 2>/dev/null
    mountpoint -q "$dir/fuse" && (fusermount3 -u "$dir/fuse" 2>/dev/null || umount "$dir/fuse")
    [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
    rm -rf "$dir"
}
trap cleanup EXIT
cd "$dir"
mkdir disks fuse mnt
for i in 0 1 2 3; do truncate -s 96M "disks/d$i.img"; done
# 1. Create, named.
$H create --layout raid5 --name tank disks/d0.img disks/d1.img disks/d2.img disks/d3.img 2>/dev/null
# 2. Configure: the lines --print-config writes, the members left to the
#    scan of `devices`, and where to listen.
$H assemble --scan --print-config "$dir/disks" | grep -v '^members' > hetraid.conf
echo "listen = \"unix:$dir/tank.sock\"" >> hetraid.conf
export HETRAID_CONFIG=$dir/hetraid.conf
echo "configuration:"; sed 's/^/  /' hetraid.conf
# 3. The server, as the unit runs it: by name.
$H serve tank 2>serve.log &
server=$!
for _ in $(seq 100); do [ -S tank.sock ] && break; sleep 0.1; done
[ -S tank.sock ] || { cat serve.log; echo "FAILED: serve tank did not listen"; exit 1; }
# 4. A block device.
nbdfuse fuse "nbd+unix:///?socket=$dir/tank.sock" &
for _ in $(seq 100); do [ -e fuse/nbd ] && break; sleep 0.1; done
loop=$(losetup -f --show fuse/nbd)
# 5. mkfs lined up with the stripes, as status --mkfs says.
mkfs=$($H status tank --mkfs ext4)
echo "mkfs: $mkfs $loop"
$mkfs -q "$loop"
mount "$loop" mnt
for f in a b c; do dd if=/dev/urandom of="mnt/$f" bs=1M count=8 status=none; done
(cd mnt && sha256sum a b c) > sums
sync
# 8. A disk fails and is replaced, by name; the rebuild runs in the server.
$H fail tank --member "$dir/disks/d1.img"
(cd mnt && sha256sum -c --quiet ../sums) && echo "files: intact, degraded"
truncate -s 96M disks/d4.img
$H replace tank --member "$dir/disks/d1.img" --with "$dir/disks/d4.img"
$H rebuild tank --max-speed 16M --min-speed 16M >rebuild.out &
rebuild=$!
seen=
for _ in $(seq 100); do
    out=$($H iostat tank 0.5 2)
    if grep -q 'rebuild: ' <<<"$out"; then seen=$out; break; fi
    sleep 0.1
done
[ -n "$seen" ] || { echo "FAILED: iostat never showed the rebuild"; exit 1; }
echo "iostat during the rebuild:"
awk '/^over /{buf=""} {buf=buf $0 "\n"} END{printf "%s", buf}' <<<"$seen" | sed 's/^/  /'
wait "$rebuild"
sed 's/^/  /' rebuild.out
$H status --test tank >/dev/null && echo "status --test tank: optimal"
(cd mnt && sha256sum -c --quiet ../sums) && echo "files: intact after the rebuild"
$H clear tank
umount mnt
fsck.ext4 -fn "$loop" >/dev/null && echo "fsck: clean"
losetup -d "$loop"; loop=
fusermount3 -u fuse 2>/dev/null || umount fuse
kill "$server"; wait "$server"; server=
$H scrub tank 2>/dev/null | head -1
echo "OK: from bare disks to a mounted filesystem, a disk replaced by name"
