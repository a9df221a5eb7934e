#!/usr/bin/env bash
# A real single-host Ceph (one monitor, one manager, six OSDs on files) with
# hetraid's placement applied: `hetraid ceph` writes the CRUSH map, the
# erasure-code profile and rule for 4 HDD + 2 SSD (coding shards on the SSDs,
# RAID4S at cluster scale), this script applies them, writes objects with
# `rados bench`, checks with `ceph osd map` and the PG table where every
# shard went, then stops one OSD and measures the recovery.
#
# Needs Debian's ceph-mon, ceph-mgr, ceph-osd and ceph-common (apt-get
# install ceph-mon ceph-mgr ceph-osd ceph-common) and root (the OSDs use
# files under a temporary directory; nothing else on the machine is
# touched). Everything listens on 127.0.0.1 only and is stopped on exit.
#
#   scripts/ceph-single-node.sh            # K=3 M=1 (a lost OSD of either class can be re-placed)
#   K=2 M=2 BENCH_S=30 scripts/ceph-single-node.sh
set -euo pipefail
cd "$(dirname "$0")/.."

K=${K:-3}
M=${M:-1}
BENCH_S=${BENCH_S:-20}
OSD_BYTES=${OSD_BYTES:-$((4 << 30))}
POOL=hetraid-ec
HETRAID=${HETRAID:-target/release/hetraid}

for tool in ceph ceph-mon ceph-mgr ceph-osd monmaptool ceph-authtool crushtool rados uuidgen; do
    command -v "$tool" >/dev/null || {
        echo "ceph-single-node: $tool is missing: apt-get install ceph-mon ceph-mgr ceph-osd ceph-common uuid-runtime" >&2
        exit 1
    }
done
[ "$(id -u)" = 0 ] || { echo "ceph-single-node: run as root (the daemons' files live under a temporary directory)" >&2; exit 1; }
[ -x "$HETRAID" ] || cargo build --release -q

DIR=$(mktemp -d /tmp/hetraid-ceph.XXXXXX)
CONF=$DIR/ceph.conf
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    sleep 1
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    [ -n "${KEEP:-}" ] || rm -rf "$DIR"
}
trap cleanup EXIT
say() { printf 'ceph-single-node: %s\n' "$*"; }
c() { ceph -c "$CONF" "$@"; }

FSID=$(uuidgen)
mkdir -p "$DIR/run" "$DIR/log" "$DIR/mon/ceph-a" "$DIR/mgr/ceph-x"
cat >"$CONF" <<EOF
[global]
fsid = $FSID
mon host = [v2:127.0.0.1:3300,v1:127.0.0.1:6789]
public addr = 127.0.0.1
ms bind ipv6 = false
auth cluster required = none
auth service required = none
auth client required = none
keyring = $DIR/keyring
run dir = $DIR/run
admin socket = $DIR/run/\$name.asok
log file = $DIR/log/\$name.log
pid file = $DIR/run/\$name.pid
mon data = $DIR/mon/\$cluster-\$id
mgr data = $DIR/mgr/\$cluster-\$id
osd data = $DIR/osd/\$cluster-\$id
mon allow pool delete = true
mon warn on pool no redundancy = false
mon osd down out interval = 5
mon max pg per osd = 1000
osd pool default size = 1
osd pool default min size = 1
# The map hetraid writes decides where OSDs sit and what class they are.
osd crush update on start = false
osd class update on start = false
osd objectstore = bluestore
bluestore block create = true
bluestore block size = $OSD_BYTES
# Six OSDs on one small machine: memory turned down.
osd memory target = 939524096
bluestore cache autotune = false
bluestore cache size = 134217728
# The recovery measured is the devices', not the throttles'.
osd recovery sleep = 0
osd recovery sleep hdd = 0
osd recovery sleep ssd = 0
osd recovery sleep hybrid = 0
osd max backfills = 8
osd recovery max active = 8
EOF

say "monitor, manager"
ceph-authtool --create-keyring "$DIR/keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
ceph-authtool "$DIR/keyring" --gen-key -n client.admin --cap mon 'allow *' --cap osd 'allow *' --cap mgr 'allow *' >/dev/null
monmaptool --create --fsid "$FSID" --addv a '[v2:127.0.0.1:3300,v1:127.0.0.1:6789]' "$DIR/monmap" >/dev/null
ceph-mon -c "$CONF" --mkfs -i a --monmap "$DIR/monmap" --keyring "$DIR/keyring"
ceph-mon -c "$CONF" -i a -f 2>>"$DIR/log/daemons.err" & PIDS+=($!)
for _ in $(seq 60); do c -s >/dev/null 2>&1 && break; sleep 1; done
ceph-mgr -c "$CONF" -i x -f 2>>"$DIR/log/daemons.err" & PIDS+=($!)

say "six OSDs on files of $((OSD_BYTES >> 30)) GiB"
for i in 0 1 2 3 4 5; do
    uuid=$(uuidgen)
    id=$(c osd new "$uuid")
    [ "$id" = "$i" ] || { echo "ceph-single-node: expected osd.$i, got osd.$id" >&2; exit 1; }
    mkdir -p "$DIR/osd/ceph-$i"
    ceph-osd -c "$CONF" -i "$i" --mkfs --osd-uuid "$uuid" >/dev/null 2>&1
    ceph-osd -c "$CONF" -i "$i" -f 2>>"$DIR/log/daemons.err" & PIDS+=($!)
    eval "OSD_PID_$i=$!"
done
for _ in $(seq 120); do
    up=$(c osd stat -f json | python3 -c 'import json,sys; print(json.load(sys.stdin)["num_up_osds"])')
    [ "$up" = 6 ] && break
    sleep 1
done
say "osds up: $up"

say "hetraid ceph: the map, profile and rule for 4 HDD + 2 SSD, k=$K m=$M"
"$HETRAID" ceph --host node1='caviar-black-640*4,x25e-64*2' --failure-domain osd \
    --k "$K" --m "$M" --placement coding-on-fast --pool "$POOL" --out "$DIR/hetraid" >"$DIR/report.txt"
sed -n '1,6p' "$DIR/report.txt"
# apply.sh runs ceph with the default config path; give it ours.
mkdir -p "$DIR/bin"
printf '#!/bin/sh\nexec %s -c %s "$@"\n' "$(command -v ceph)" "$CONF" >"$DIR/bin/ceph"
chmod +x "$DIR/bin/ceph"
PATH="$DIR/bin:$PATH" sh "$DIR/hetraid/apply.sh" 2>&1 | sed 's/^/  /'
echo "ssd OSDs: $(c osd crush class ls-osd ssd | tr '\n' ' ')"

wait_clean() { # seconds it took until every PG is active+clean
    local t0=$SECONDS
    for _ in $(seq 900); do
        if c pg stat -f json | python3 -c '
import json, sys
s = json.load(sys.stdin)
m = s.get("pg_summary", s)
states = {x["name"]: x["num"] for x in m["num_pg_by_state"]}
n = m["num_pgs"]
sys.exit(0 if n > 0 and states.get("active+clean", 0) == n else 1)' 2>/dev/null; then
            echo $((SECONDS - t0)); return 0
        fi
        sleep 1
    done
    echo "ceph-single-node: PGs not clean after 900 s" >&2; c -s >&2; return 1
}
say "pool created; every PG active+clean in $(wait_clean) s"

say "rados bench: ${BENCH_S} s of 4 MiB writes"
c osd pool set "$POOL" pg_autoscale_mode off >/dev/null 2>&1 || true
rados -c "$CONF" -p "$POOL" bench "$BENCH_S" write -b 4M -t 8 --no-cleanup 2>&1 |
    grep -E '^(Total writes made|Bandwidth \(MB/sec\)|Average IOPS|Average Latency)' | sed 's/^/  /'

say "where the shards went (ceph osd map of 5 objects; then every PG's up set)"
rados -c "$CONF" -p "$POOL" ls | sort >"$DIR/objects"
objs=$(sed -n 1,5p "$DIR/objects")
for o in $objs; do c osd map "$POOL" "$o" | sed 's/^/  /'; done
c pg ls-by-pool "$POOL" -f json | python3 -c '
import json, sys
k, m = int(sys.argv[1]), int(sys.argv[2])
d = json.load(sys.stdin)
pgs = d["pg_stats"] if isinstance(d, dict) else d
ssd = {4, 5}
bad = [p["pgid"] for p in pgs if any((o in ssd) != (i >= k) for i, o in enumerate(p["up"]))]
print(f"  {len(pgs)} PGs: coding shards ({k}..{k+m-1}) on ssd and data shards on hdd in {len(pgs) - len(bad)}; elsewhere: {bad or 0}")
sys.exit(1 if bad else 0)' "$K" "$M"
used=$(c df -f json | python3 -c 'import json,sys; d=json.load(sys.stdin); print([p for p in d["pools"] if p["name"]==sys.argv[1]][0]["stats"]["stored"])' "$POOL")
say "stored: $((used >> 20)) MiB"

# PGs whose up set holds osd.$1.
mapping() {
    c pg ls-by-pool "$POOL" -f json | python3 -c '
import json, sys
v = int(sys.argv[1])
d = json.load(sys.stdin)
pgs = d["pg_stats"] if isinstance(d, dict) else d
print(sum(v in p["up"] for p in pgs))' "$1"
}
# Wait until mapping($1) is zero (want=none) or not (want=some).
wait_mapping() {
    for _ in $(seq 120); do
        n=$(mapping "$1")
        { [ "$2" = none ] && [ "$n" = 0 ]; } && return 0
        { [ "$2" = some ] && [ "$n" != 0 ]; } && return 0
        sleep 0.5
    done
    echo "ceph-single-node: PGs did not remap around osd.$1" >&2; return 1
}

for victim in 0 4; do
    held=$(c osd df -f json | python3 -c '
import json, sys
v = int(sys.argv[1])
print([n for n in json.load(sys.stdin)["nodes"] if n["id"] == v][0]["kb_used_data"] * 1024)' "$victim")
    say "stopping osd.$victim ($([ $victim -lt 4 ] && echo hdd || echo ssd), $(mapping "$victim") PGs, $((held >> 20)) MiB) and marking it out"
    pid_var=OSD_PID_$victim
    kill "${!pid_var}"
    t0=$(date +%s.%N)
    c osd down "$victim" >/dev/null 2>&1 || true
    c osd out "$victim" >/dev/null 2>&1
    wait_mapping "$victim" none
    wait_clean >/dev/null
    took=$(python3 -c "import time; print(f'{time.time() - $t0:.1f}')")
    say "recovered: every PG active+clean ${took} s after osd.$victim stopped: $(python3 -c "print(f'{$held / $took / 1e6:.1f}')") MB/s of its data"
    # Bring it back for the next round.
    ceph-osd -c "$CONF" -i "$victim" -f 2>>"$DIR/log/daemons.err" & PIDS+=($!)
    eval "OSD_PID_$victim=$!"
    c osd in "$victim" >/dev/null 2>&1
    wait_mapping "$victim" some
    say "osd.$victim back in; clean again in $(wait_clean) s"
done
say "done"
