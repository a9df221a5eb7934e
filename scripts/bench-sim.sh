#!/usr/bin/env bash
# Simulator speed: simulated member operations per wall-clock second.
#   sim speed: N member-ops/s (RAID5 of 5 x caviar-black-640, random 4K writes, qd 16)
#   sim speed ssd: N member-ops/s (one disksim-ssd-32g in RAID0, random 4K writes)
# Each figure is the median of 3 runs of the release binary (process start and JSON
# output included). Goal: >= 2,000,000 member-ops/s. For scale, DiskSim 4.0 on this
# machine class: ~2,400 requests/s (~9,600 member-ops/s) for a 5-disk RAID-5 of
# Cheetah 15K.5, ~300,000 requests/s for one SSD.
set -euo pipefail
cd "$(dirname "$0")/.."
TOTAL=${TOTAL:-2G}
cargo build --release -q -p hetraid
B=target/release/hetraid

# Prints "member_ops seconds" for one run.
one() {
    local t0 t1 ops
    t0=$(date +%s%N)
    ops=$("$B" sim "$@" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["member_ops"])')
    t1=$(date +%s%N)
    echo "$ops $(( t1 - t0 ))"
}

speed() {
    local rates=()
    for _ in 1 2 3; do
        read -r ops ns < <(one "$@")
        rates+=("$(( ops * 1000000000 / ns ))")
    done
    printf '%s\n' "${rates[@]}" | sort -n | sed -n 2p
}

r=$(speed --layout raid5 --members 'caviar-black-640*5' --size 4K --qd 16 --total "$TOTAL" --seed 1)
echo "sim speed: $r member-ops/s (RAID5 of 5 x caviar-black-640, random 4K writes, qd 16; goal 2000000)"
r=$(speed --layout raid0 --members disksim-ssd-32g --size 4K --qd 16 --total "$TOTAL" --seed 1)
echo "sim speed ssd: $r member-ops/s (one disksim-ssd-32g, random 4K writes, qd 16)"

# Against DiskSim on its own SSD: 5,242,880 random 4 KiB writes (5M). DiskSim 4.0
# runs its SSD at 250,000-270,000 requests/s on this project's machines
# (../shared/reference/DISKSIM.md): about 20 s for the same run. Goal: >= 10x.
best=""
for _ in 1 2 3; do
    t0=$(date +%s%N)
    "$B" sim --layout raid0 --members disksim-ssd-32g --workload random-write --size 4K \
        --qd 16 --total 20480M --seed 1 --json > /dev/null
    t1=$(date +%s%N)
    ms=$(( (t1 - t0) / 1000000 ))
    if [ -z "$best" ] || [ "$ms" -lt "$best" ]; then best=$ms; fi
done
awk -v ms="$best" 'BEGIN {
    disksim = 5242880 / 260000;
    printf "sim speed vs disksim ssd: 5M random writes in %.2f s (DiskSim: about %.1f s at 260,000 requests/s), %.1fx\n", ms / 1000, disksim, disksim / (ms / 1000) }'

# Against DiskSim on its validated Cheetah 15K.5: the reference trace (100,000
# requests; DiskSim runs one disk at 6,000-10,000 requests/s). Goal: >= 100x.
REF=${REF:-../shared/reference}
if [ -f "$REF/disksim-c15k5-rand4k.trace" ]; then
    best=""
    for _ in 1 2 3; do
        t0=$(date +%s%N)
        "$B" sim --layout raid0 --members cheetah-15k5 --workload trace \
            --trace "$REF/disksim-c15k5-rand4k.trace" --replay timed --scheduler sptf \
            --disk-queue 8 --write-cache true --json > /dev/null
        t1=$(date +%s%N)
        ms=$(( (t1 - t0) / 1000000 ))
        if [ -z "$best" ] || [ "$ms" -lt "$best" ]; then best=$ms; fi
    done
    awk -v ms="$best" 'BEGIN {
        s = (ms < 1 ? 1 : ms) / 1000; disksim = 100000 / 8000;
        printf "sim speed vs disksim c15k5: 100,000-request trace in %.3f s (DiskSim: about %.1f s at 8,000 requests/s), %.0fx\n", s, disksim, disksim / s }'
else
    echo "sim speed vs disksim c15k5: skipped ($REF/disksim-c15k5-rand4k.trace not found; set REF)"
fi
