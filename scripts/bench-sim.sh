#!/usr/bin/env bash
# Simulator speed: simulated member operations per wall-clock second.
#   sim speed: N member-ops/s (RAID5 of 5 x caviar-black-640, random 4K writes, qd 16)
#   sim speed ssd: N member-ops/s (one disksim-ssd-32g in RAID0, random 4K writes)
#   sim speed vs disksim ssd (same machine, ...): hetraid T s, DiskSim T s, Rx; memory; fidelity
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

# Against DiskSim on its own SSD, on this machine: DiskSim 4.0 with the SSD
# extension is built from reference/disksim (needs gcc, make, bison, flex; about
# 30 s, once, into target/disksim) and runs its own ssd-rw5m workload
# (5,000,000 random writes, 3.6 GB span, garbage collection from the start);
# hetraid runs a trace drawn with the same statistics
# (scripts/gen-ssd-rw-trace.py, kept in target/) on the same SSD, preconditioned.
# Wall-clock time and peak memory of each, best of RUNS_SSD (default 3), and
# the fidelity: mean response, erases, write amplification. Goal: >= 10x.
DS_OUT=target/disksim
DS=$DS_OUT/disksim-4.0/src/disksim
if [ ! -x "$DS" ]; then
    if command -v bison >/dev/null && command -v flex >/dev/null && command -v gcc >/dev/null; then
        bash reference/disksim/build.sh "$DS_OUT" >/dev/null
    fi
fi
if [ -x "$DS" ]; then
    TR=target/ssd-rw5m-equal.disksim
    [ -s "$TR" ] || python3 scripts/gen-ssd-rw-trace.py 5000000 1 > "$TR"
    peak() { awk '/^Maximum resident/ {print $NF}' "$1" 2>/dev/null || true; }
    best_ds="" best_h="" mem_ds="" mem_h=""
    for _ in $(seq "${RUNS_SSD:-3}"); do
        t0=$(date +%s%N)
        ( cd "$DS_OUT/disksim-4.0/ssdmodel/valid" &&
            command time -f "%M" -o /tmp/hetraid-bench-ds.mem ../../src/disksim ssd-rw5m.parv /tmp/hetraid-bench-ds.outv ascii 0 1 )
        t1=$(date +%s%N)
        ms=$(( (t1 - t0) / 1000000 )); mem_ds=$(cat /tmp/hetraid-bench-ds.mem)
        if [ -z "$best_ds" ] || [ "$ms" -lt "$best_ds" ]; then best_ds=$ms; fi
        t0=$(date +%s%N)
        command time -f "%M" -o /tmp/hetraid-bench-h.mem "$B" sim --layout raid0 --members disksim-ssd-32g \
            --workload trace --trace "$TR" --precondition --json > /tmp/hetraid-bench-h.json
        t1=$(date +%s%N)
        ms=$(( (t1 - t0) / 1000000 )); mem_h=$(cat /tmp/hetraid-bench-h.mem)
        if [ -z "$best_h" ] || [ "$ms" -lt "$best_h" ]; then best_h=$ms; fi
    done
    python3 - "$best_ds" "$best_h" "$mem_ds" "$mem_h" <<'PY'
import json, re, sys
ds_ms, h_ms, ds_kb, h_kb = (float(v) for v in sys.argv[1:5])
out = open("/tmp/hetraid-bench-ds.outv").read()
resp = float(re.search(r"Overall I/O System Response time average:\s+([\d.]+)", out).group(1))
erases = sum(int(v) for v in re.findall(r"Number of cleans:\s+(\d+)", out))
host = sum(int(v) for v in re.findall(r"elem #\d+\s+Total reqs issued:\s+(\d+)", out))
moved = sum(int(v) for v in re.findall(r"Pages moved:\s+(\d+)", out))
wa = (host + moved) / host
j = json.load(open("/tmp/hetraid-bench-h.json"))
m = j["members"][0]
print(f"sim speed vs disksim ssd (same machine, rw5m, garbage collection): hetraid {h_ms / 1000:.2f} s, "
      f"DiskSim {ds_ms / 1000:.2f} s, {ds_ms / h_ms:.1f}x; peak memory hetraid {h_kb / 1024:.0f} MB, "
      f"DiskSim {ds_kb / 1024:.0f} MB ({h_kb / ds_kb:.1f}x); mean response {j['mean_response_ms']:.4f} ms vs {resp:.4f} "
      f"({j['mean_response_ms'] / resp:.3f}), erases {m['erases']} vs {erases} ({m['erases'] / erases:.3f}), "
      f"write amplification {m['write_amplification']:.3f} vs {wa:.3f} ({m['write_amplification'] / wa:.3f})")
PY
else
    echo "sim speed vs disksim ssd: skipped (DiskSim could not be built: apt-get install bison flex gcc make)"
fi

# Against DiskSim on its validated Cheetah 15K.5: the reference trace (100,000
# requests; DiskSim runs one disk at 6,000-10,000 requests/s). Goal: >= 100x.
REF=${REF:-reference/disksim}
C15K5_TRACE="$REF/disksim-c15k5-rand4k.trace"
if [ ! -f "$C15K5_TRACE" ] && [ -f "$C15K5_TRACE.gz" ]; then
    mkdir -p target
    gzip -dc "$C15K5_TRACE.gz" > target/disksim-c15k5-rand4k.trace
    C15K5_TRACE=target/disksim-c15k5-rand4k.trace
fi
if [ -f "$C15K5_TRACE" ]; then
    best=""
    for _ in 1 2 3; do
        t0=$(date +%s%N)
        "$B" sim --layout raid0 --members cheetah-15k5 --workload trace \
            --trace "$C15K5_TRACE" --replay timed --scheduler sptf \
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
