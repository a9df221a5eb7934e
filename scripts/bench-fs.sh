#!/usr/bin/env bash
# The path users take: ext4 on a served array (hetraid serve -> nbdfuse -> a
# loop device -> mkfs.ext4 -> mount) against the same stack over `nbdkit file`
# on one file of the same capacity, fio inside the filesystem (O_DIRECT, so
# the page cache above the loop device does not hide the server):
#   fs rand-write 4K QD16: hetraid N IOPS, nbdkit N IOPS, ratio R; CPU/request hetraid U us, nbdkit U us
#   fs seq-read 1M QD4: hetraid X MB/s, nbdkit Y MB/s, ratio R; CPU/request ...
# (CPU/request: the server process's utime + stime over the run / fio's
# requests.) Stacks alternate run by run, medians of RUNS (default 3).
# Needs root (loop devices, mount), FUSE, nbdfuse, nbdkit, fio.
#   LAYOUT=raid5 MEMBERS=5 SIZE=256M (each member) DIR=/dev/shm SECS=8
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
LAYOUT=${LAYOUT:-raid5}
MEMBERS=${MEMBERS:-5}
SIZE=${SIZE:-256M}
DIR=${DIR:-/dev/shm}
SECS=${SECS:-8}
for t in fio nbdkit nbdfuse losetup mkfs.ext4 python3; do
    command -v $t >/dev/null || { echo "bench-fs: needs $t (apt-get install fio nbdkit nbdfuse e2fsprogs)" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "bench-fs: needs root (loop devices, mount)" >&2; exit 1; }
cargo build --release -q -p hetraid
H=$PWD/target/release/hetraid
W=$(mktemp -d "$DIR/hetraid-bench-fs.XXXXXX")
SP= LOOP=
teardown() {
    mountpoint -q "$W/mnt" && umount "$W/mnt"
    if [ -n "$LOOP" ]; then losetup -d "$LOOP" 2>/dev/null || true; LOOP=; fi
    mountpoint -q "$W/fuse" && { fusermount3 -u "$W/fuse" 2>/dev/null || umount "$W/fuse"; }
    if [ -n "$SP" ]; then kill -INT "$SP" 2>/dev/null || true; wait "$SP" 2>/dev/null || true; SP=; fi
    rm -f "$W/s"
}
trap 'teardown; rm -rf "$W"' EXIT
mkdir -p "$W/fuse" "$W/mnt"
m=()
for i in $(seq 0 $((MEMBERS - 1))); do m+=("$W/m$i"); done
$H create --layout "$LAYOUT" --size "$SIZE" "${m[@]}" >/dev/null 2>&1
CAP=$($H status "${m[@]}" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["capacity_bytes"])')
truncate -s "$CAP" "$W/plain"
TCK=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# up hetraid|nbdkit: serve, attach, mount (a fresh ext4 each time).
up() {
    if [ "$1" = hetraid ]; then
        $H serve "${m[@]}" --listen "unix:$W/s" 2>/dev/null &
    else
        nbdkit --exit-with-parent -f -U "$W/s" file "$W/plain" 2>/dev/null &
    fi
    SP=$!
    for _ in $(seq 100); do [ -S "$W/s" ] && break; sleep 0.05; done
    nbdfuse "$W/fuse" "nbd+unix:///?socket=$W/s" &
    for _ in $(seq 100); do [ -e "$W/fuse/nbd" ] && break; sleep 0.05; done
    # Direct I/O on the loop device: buffered, it reads the FUSE file through
    # the page cache and fio's reads never reach the server.
    LOOP=$(losetup -f --show --direct-io=on "$W/fuse/nbd")
    mkfs.ext4 -q -F -E nodiscard,lazy_itable_init=0,lazy_journal_init=0 "$LOOP"
    mount "$LOOP" "$W/mnt"
}
# run RW BS QD -> "bytes/s IOPS cpu_us_per_request"
run() {
    local t0 t1 out
    t0=$(cpu_ticks "$SP")
    out=$(fio --name=b --directory="$W/mnt" --filename=f --size=$((CAP / 2)) --ioengine=libaio --direct=1 \
        --rw="$1" --bs="$2" --iodepth="$3" --time_based --runtime="$SECS" --output-format=json 2>/dev/null |
        python3 -c 'import json,sys; t=sys.stdin.read(); j=json.loads(t[t.index("{"):])["jobs"][0]; d=j["read"] if j["read"]["io_bytes"] else j["write"]; print(d["bw_bytes"], d["iops"], d["total_ios"])')
    t1=$(cpu_ticks "$SP")
    set -- $out
    awk -v b="$1" -v i="$2" -v n="$3" -v d=$((t1 - t0)) -v tck="$TCK" 'BEGIN {printf "%s %s %.1f\n", b, i, d / tck / n * 1e6}'
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
declare -A R
for n in $(seq "$RUNS"); do
    order="hetraid nbdkit"
    [ $((n % 2)) = 0 ] && order="nbdkit hetraid"
    for who in $order; do
        up "$who"
        # The file fio reads is laid down first (1M writes), then reused.
        fio --name=lay --directory="$W/mnt" --filename=f --size=$((CAP / 2)) --ioengine=libaio --direct=1 \
            --rw=write --bs=1M --iodepth=4 >/dev/null 2>&1
        R[$who-w]+="$(run randwrite 4k 16)"$'\n'
        R[$who-r]+="$(run read 1M 4)"$'\n'
        teardown
    done
done
line() { # NAME KEY FIELD UNIT SCALE
    local h k hc kc
    h=$(printf '%s' "${R[hetraid-$2]}" | cut -d' ' -f"$3" | median)
    k=$(printf '%s' "${R[nbdkit-$2]}" | cut -d' ' -f"$3" | median)
    hc=$(printf '%s' "${R[hetraid-$2]}" | cut -d' ' -f3 | median)
    kc=$(printf '%s' "${R[nbdkit-$2]}" | cut -d' ' -f3 | median)
    awk -v n="$1" -v h="$h" -v k="$k" -v u="$4" -v s="$5" -v hc="$hc" -v kc="$kc" -v l="$LAYOUT" -v m="$MEMBERS" 'BEGIN {
        printf "fs %s (ext4, %s of %d): hetraid %.0f %s, nbdkit %.0f %s, ratio %.2f; CPU/request hetraid %.1f us, nbdkit %.1f us\n", n, l, m, h / s, u, k / s, u, h / k, hc, kc }'
}
line "rand-write 4K QD16" w 2 IOPS 1
line "seq-read 1M QD4" r 1 MB/s 1e6
