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
