#!/usr/bin/env bash
# NBD path: fio (nbd engine) against hetraid serving a one-member RAID0 and against
# `nbdkit file` on the same member file, alternating, median of RUNS (default 5) runs each:
#   nbd seq-write 1M: hetraid 3.1 GB/s, nbdkit 3.2 GB/s, ratio 0.97
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-5}
DIR=${DIR:-/dev/shm}
SIZE=${SIZE:-512M}
SECS=${SECS:-3}
# ONLY="seq-write rand-read" runs just those lines.
for t in fio nbdkit python3; do
    command -v $t >/dev/null || { echo "bench-nbd: needs $t (apt-get install fio nbdkit)" >&2; exit 1; }
done
cargo build --release -q -p hetraid
H=$PWD/target/release/hetraid
W=$(mktemp -d "$DIR/hetraid-bench-nbd.XXXXXX")
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$W"' EXIT
$H create --layout raid0 --size "$SIZE" "$W/m0" >/dev/null

start_hetraid() {
    $H serve "$W/m0" --listen "unix:$W/h.sock" --workers 16 2>/dev/null &
    HP=$!
    for _ in $(seq 100); do [ -S "$W/h.sock" ] && return; sleep 0.05; done
}
stop_hetraid() { kill "$HP"; wait "$HP" 2>/dev/null || true; }
start_nbdkit() {
    nbdkit --exit-with-parent -f -U "$W/k.sock" file "$W/m0" 2>/dev/null &
    KP=$!
    for _ in $(seq 100); do [ -S "$W/k.sock" ] && return; sleep 0.05; done
}
stop_nbdkit() { kill "$KP"; wait "$KP" 2>/dev/null || true; }

# fio_run SOCKET RW BS QD -> bytes/s and IOPS of the run
fio_run() {
    fio --name=b --ioengine=nbd --uri="nbd+unix:///?socket=$1" --rw="$2" --bs="$3" --iodepth="$4" \
        --size=256M --time_based --runtime="$SECS" --output-format=json 2>/dev/null |
        python3 -c 'import json,sys; t=sys.stdin.read(); j=json.loads(t[t.index("{"):])["jobs"][0]; d=j["read"] if j["read"]["io_bytes"] else j["write"]; print(d["bw_bytes"], d["iops"])'
}

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

start_hetraid
start_nbdkit
for w in "seq-write write 1M 4" "seq-read read 1M 4" "rand-write randwrite 4k 16" "rand-read randread 4k 16"; do
    set -- $w
    name=$1 rw=$2 bs=$3 qd=$4
    case " ${ONLY:-$name} " in *" $name "*) ;; *) continue ;; esac
    hs=() ks=()
    for i in $(seq "$RUNS"); do
        # Who goes first alternates, so a drift of the host's speed within a pair
        # does not favour either server.
        if [ $((i % 2)) = 1 ]; then
            hs+=("$(fio_run "$W/h.sock" "$rw" "$bs" "$qd")")
            ks+=("$(fio_run "$W/k.sock" "$rw" "$bs" "$qd")")
        else
            ks+=("$(fio_run "$W/k.sock" "$rw" "$bs" "$qd")")
            hs+=("$(fio_run "$W/h.sock" "$rw" "$bs" "$qd")")
        fi
    done
    if [ "$bs" = 1M ]; then
        h=$(printf '%s\n' "${hs[@]}" | cut -d' ' -f1 | median)
        k=$(printf '%s\n' "${ks[@]}" | cut -d' ' -f1 | median)
        awk -v n="$name" -v h="$h" -v k="$k" 'BEGIN {printf "nbd %s 1M: hetraid %.2f GB/s, nbdkit %.2f GB/s, ratio %.2f\n", n, h/1e9, k/1e9, h/k}'
    else
        h=$(printf '%s\n' "${hs[@]}" | cut -d' ' -f2 | median)
        k=$(printf '%s\n' "${ks[@]}" | cut -d' ' -f2 | median)
        awk -v n="$name" -v h="$h" -v k="$k" 'BEGIN {printf "nbd %s 4K QD16: hetraid %d IOPS, nbdkit %d IOPS, ratio %.2f\n", n, h, k, h/k}'
    fi
done
stop_hetraid
stop_nbdkit
