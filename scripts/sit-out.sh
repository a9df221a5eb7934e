#!/usr/bin/env bash
# Slow-member sit-out on the path a user takes (issue 41): a RAID5 of five
# members, member 2 a file that takes 5 ms per read (nbdkit's delay filter
# behind nbdfuse: a disk gone slow), served; fio reads at random over NBD
# with sit-out off, then on (after fio's 2 s ramp, which is when the rule
# takes its three windows); `status` and `events` say which member sat out.
# Prints both p99s and their ratio. Needs nbdkit, nbdfuse (FUSE) and
# fio with its nbd engine.
#   HETRAID=...  the binary (default target/release/hetraid)
#   SECONDS_EACH=8  fio's runtime per side
set -euo pipefail
cd "$(dirname "$0")/.."
H=$(realpath "${HETRAID:-target/release/hetraid}")
[ -x "$H" ] || cargo build --release -q -p hetraid
each=${SECONDS_EACH:-8}
dir=$(mktemp -d)
kit=
server=
cleanup() {
    [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
    mountpoint -q "$dir/fuse" && (fusermount3 -u "$dir/fuse" 2>/dev/null || umount "$dir/fuse")
    [ -n "$kit" ] && kill "$kit" 2>/dev/null
    rm -rf "$dir"
}
trap cleanup EXIT
cd "$dir"
mkdir fuse
for i in 0 1 3 4; do truncate -s 64M "m$i"; done
truncate -s 64M slow.img
nbdkit --exit-with-parent -f --filter=delay -U "$dir/kit.sock" file slow.img rdelay=5ms &
kit=$!
for _ in $(seq 100); do [ -S kit.sock ] && break; sleep 0.1; done
nbdfuse fuse "nbd+unix:///?socket=$dir/kit.sock" &
for _ in $(seq 100); do [ -f fuse/nbd ] && break; sleep 0.1; done
[ -f fuse/nbd ] || { echo "FAILED: nbdfuse did not mount"; exit 1; }
M="$dir/m0 $dir/m1 $dir/fuse/nbd $dir/m3 $dir/m4"
$H create --layout raid5 $M 2>/dev/null
serve() {
    $H serve $M --listen "unix:$dir/a.sock" "$@" 2>>serve.log &
    server=$!
    for _ in $(seq 100); do [ -S a.sock ] && break; sleep 0.1; done
}
stop() {
    kill -INT "$server"; wait "$server" || true; server=
    rm -f a.sock
}
fio_json() {
    fio --name=r --ioengine=nbd --uri="nbd+unix:///?socket=$dir/a.sock" "$@" \
        --output-format=json 2>/dev/null | sed -n '/^{/,$p'
}
p99() {
    python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"][0]["read"]; print("%.0f %.0f" % (j["clat_ns"]["percentile"]["99.000000"]/1e3, j["iops"]))'
}
serve --sit-out off
fio_json --rw=write --bs=1M --size=200M --iodepth=4 >/dev/null
read -r off_p99 off_iops < <(fio_json --rw=randread --bs=4k --size=200M --iodepth=8 --ramp_time=2 --runtime="$each" --time_based | p99)
stop
serve
read -r on_p99 on_iops < <(fio_json --rw=randread --bs=4k --size=200M --iodepth=8 --ramp_time=2 --runtime="$each" --time_based | p99)
echo "status while served:"
$H status $M | grep -E 'sat out' | sed 's/^/  /'
$H status --json $M | python3 -c 'import json,sys; m=json.load(sys.stdin)["member_states"]; r=[x.get("io",{}).get("read_ops",0) for x in m]; print("member reads while served: %s; member 2: %d of %d" % (r, r[2], sum(r)))'
stop
echo "events:"
$H events $M | grep -E 'sat_out|sat_in' | sed 's/^/  /'
echo "sit-out off: p99 read ${off_p99} us, ${off_iops} IOPS"
echo "sit-out on:  p99 read ${on_p99} us, ${on_iops} IOPS"
python3 -c "print('p99 ratio: %.1fx' % ($off_p99 / max($on_p99, 1)))"
