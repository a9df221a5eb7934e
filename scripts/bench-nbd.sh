#!/usr/bin/env bash
# NBD path: fio (nbd engine) against hetraid serving a one-member RAID0 (block
# checksums on, the default) and against `nbdkit file` on a file of the same
# size next to it, alternating, median of RUNS (default 5) runs each:
#   nbd seq-write 1M: hetraid 3.1 GB/s, nbdkit 3.2 GB/s, ratio 0.97; CPU/request hetraid X us, nbdkit Y us
# (CPU/request: the server process's utime + stime over a run divided by the
# requests fio completed, medians.)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-5}
DIR=${DIR:-/dev/shm}
SIZE=${SIZE:-512M}
SECS=${SECS:-3}
# ONLY="seq-write rand-read" runs just those lines; "parity" the small-write
# lines of RAID5 and RAID6 against RAID0 of the same members, with the
# server's CPU time per write (issue 40's measure).
for t in fio nbdkit python3; do
    command -v $t >/dev/null || { echo "bench-nbd: needs $t (apt-get install fio nbdkit)" >&2; exit 1; }
done
cargo build --release -q -p hetraid
H=$PWD/target/release/hetraid
W=$(mktemp -d "$DIR/hetraid-bench-nbd.XXXXXX")
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$W"' EXIT
# CHECKSUMS=none measures the array without block checksums (the default is on).
$H create --layout raid0 --size "$SIZE" --checksums "${CHECKSUMS:-crc32c}" "$W/m0" >/dev/null 2>&1
# nbdkit's own file: on the member file it wrote over the array's metadata
# and checksums (reads from hetraid then failed their checksums).
truncate -s "$SIZE" "$W/k0"

start_hetraid() {
    $H serve "$W/m0" --listen "unix:$W/h.sock" --workers 16 2>/dev/null &
    HP=$!
    for _ in $(seq 100); do [ -S "$W/h.sock" ] && return; sleep 0.05; done
}
stop_hetraid() { kill "$HP"; wait "$HP" 2>/dev/null || true; }
start_nbdkit() {
    nbdkit --exit-with-parent -f -U "$W/k.sock" file "$W/k0" 2>/dev/null &
    KP=$!
    for _ in $(seq 100); do [ -S "$W/k.sock" ] && return; sleep 0.05; done
}
stop_nbdkit() { kill "$KP"; wait "$KP" 2>/dev/null || true; }

TCK=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# fio_run SOCKET RW BS QD PID -> bytes/s, IOPS and the server's (PID's) CPU
# time per request in µs (utime + stime over the run / requests completed)
fio_run() {
    local t0 t1 out
    t0=$(cpu_ticks "$5")
    out=$(fio --name=b --ioengine=nbd --uri="nbd+unix:///?socket=$1" --rw="$2" --bs="$3" --iodepth="$4" \
        --size=256M --time_based --runtime="$SECS" --output-format=json 2>/dev/null |
        python3 -c 'import json,sys; t=sys.stdin.read(); j=json.loads(t[t.index("{"):])["jobs"][0]; d=j["read"] if j["read"]["io_bytes"] else j["write"]; print(d["bw_bytes"], d["iops"], d["total_ios"])')
    t1=$(cpu_ticks "$5")
    set -- $out
    awk -v b="$1" -v i="$2" -v n="$3" -v d=$((t1 - t0)) -v tck="$TCK" 'BEGIN {printf "%s %s %.1f\n", b, i, d / tck / n * 1e6}'
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
            hs+=("$(fio_run "$W/h.sock" "$rw" "$bs" "$qd" "$HP")")
            ks+=("$(fio_run "$W/k.sock" "$rw" "$bs" "$qd" "$KP")")
        else
            ks+=("$(fio_run "$W/k.sock" "$rw" "$bs" "$qd" "$KP")")
            hs+=("$(fio_run "$W/h.sock" "$rw" "$bs" "$qd" "$HP")")
        fi
    done
    hc=$(printf '%s\n' "${hs[@]}" | cut -d' ' -f3 | median)
    kc=$(printf '%s\n' "${ks[@]}" | cut -d' ' -f3 | median)
    if [ "$bs" = 1M ]; then
        h=$(printf '%s\n' "${hs[@]}" | cut -d' ' -f1 | median)
        k=$(printf '%s\n' "${ks[@]}" | cut -d' ' -f1 | median)
        awk -v n="$name" -v h="$h" -v k="$k" -v hc="$hc" -v kc="$kc" 'BEGIN {printf "nbd %s 1M: hetraid %.2f GB/s, nbdkit %.2f GB/s, ratio %.2f; CPU/request hetraid %.1f us, nbdkit %.1f us\n", n, h/1e9, k/1e9, h/k, hc, kc}'
    else
        h=$(printf '%s\n' "${hs[@]}" | cut -d' ' -f2 | median)
        k=$(printf '%s\n' "${ks[@]}" | cut -d' ' -f2 | median)
        awk -v n="$name" -v h="$h" -v k="$k" -v hc="$hc" -v kc="$kc" 'BEGIN {printf "nbd %s 4K QD16: hetraid %d IOPS, nbdkit %d IOPS, ratio %.2f; CPU/request hetraid %.1f us, nbdkit %.1f us\n", n, h, k, h/k, hc, kc}'
    fi
done
stop_hetraid
stop_nbdkit

# Small writes on parity layouts against RAID0 of the same members: IOPS and
# the server's CPU time per write (utime + stime of the serving process over
# the run, divided by the writes fio completed), medians of RUNS runs.
case " ${ONLY:-parity} " in *" parity "*) ;; *) exit 0 ;; esac
# fio_ops SOCKET -> IOPS and writes completed of a 4K QD16 random-write run
fio_ops() {
    fio --name=b --ioengine=nbd --uri="nbd+unix:///?socket=$1" --rw=randwrite --bs=4k --iodepth=16 \
        --size=256M --time_based --runtime="$SECS" --output-format=json 2>/dev/null |
        python3 -c 'import json,sys; t=sys.stdin.read(); j=json.loads(t[t.index("{"):])["jobs"][0]["write"]; print(j["iops"], j["total_ios"])'
}
# serve_layout NAME LAYOUT N: N members of SIZE in $W/NAME, served on $W/NAME.sock
serve_layout() {
    mkdir -p "$W/$1"
    local m=()
    for i in $(seq 0 $(($3 - 1))); do m+=("$W/$1/m$i"); done
    $H create --layout "$2" --size "$SIZE" "${m[@]}" >/dev/null 2>&1
    $H serve "${m[@]}" --listen "unix:$W/$1.sock" --workers 16 2>/dev/null &
    eval "P_$1=$!"
    for _ in $(seq 100); do [ -S "$W/$1.sock" ] && return; sleep 0.05; done
}
# one_run NAME -> "IOPS us_per_write"
one_run() {
    local pid
    pid=$(eval echo "\$P_$1")
    local t0 out t1
    t0=$(cpu_ticks "$pid")
    out=$(fio_ops "$W/$1.sock")
    t1=$(cpu_ticks "$pid")
    set -- $out
    awk -v i="$1" -v n="$2" -v d=$((t1 - t0)) -v tck="$TCK" 'BEGIN {printf "%d %.1f\n", i, d / tck / n * 1e6}'
}
for pair in "raid5 5" "raid6 6"; do
    set -- $pair
    lay=$1 n=$2
    serve_layout "p$lay" "$lay" "$n"
    serve_layout "z$lay" raid0 "$n"
    ps=() zs=()
    for i in $(seq "$RUNS"); do
        if [ $((i % 2)) = 1 ]; then
            ps+=("$(one_run "p$lay")"); zs+=("$(one_run "z$lay")")
        else
            zs+=("$(one_run "z$lay")"); ps+=("$(one_run "p$lay")")
        fi
    done
    pi=$(printf '%s\n' "${ps[@]}" | cut -d' ' -f1 | median)
    pc=$(printf '%s\n' "${ps[@]}" | cut -d' ' -f2 | median)
    zi=$(printf '%s\n' "${zs[@]}" | cut -d' ' -f1 | median)
    zc=$(printf '%s\n' "${zs[@]}" | cut -d' ' -f2 | median)
    awk -v l="$lay" -v n="$n" -v pi="$pi" -v pc="$pc" -v zi="$zi" -v zc="$zc" 'BEGIN {
        printf "nbd rand-write 4K QD16 %s of %d: %d IOPS at %.1f us CPU/write; raid0 of %d: %d IOPS at %.1f us; IOPS ratio %.2f, CPU %.1fx\n",
            l, n, pi, pc, n, zi, zc, pi / zi, pc / zc }'
    kill "$(eval echo "\$P_p$lay")" "$(eval echo "\$P_z$lay")" 2>/dev/null || true
    wait 2>/dev/null || true
done
