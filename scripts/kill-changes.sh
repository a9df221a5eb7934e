#!/usr/bin/env bash
# kill -9 campaign against the changes that move data (issue 35): a RAIDX5
# grow, a shrink, a remove from a RAIDX of varying widths (issue 41), a served
# rebuild, and (issue 36) a restripe of a RAID5 with
# a journal or write-back log are killed at a random moment, then
# resumed the way the messages say (grow MEMBERS..., the command a message
# names, or serve again), and every byte is read back and scrubbed.
#   KILLS=N     rounds per kind (default 20)
#   SEED=N      replays a campaign (bash's RANDOM)
#   HETRAID=... the binary (default target/release/hetraid, copied first so a
#               rebuild meanwhile does not pull it away)
set -euo pipefail
cd "$(dirname "$0")/.."
KILLS=${KILLS:-20}
SEED=${SEED:-35}
RANDOM=$SEED
src=${HETRAID:-target/release/hetraid}
[ -x "$src" ] || cargo build --release -q -p hetraid
dir=$(mktemp -d)
trap 'pkill -9 -f "$dir/" 2>/dev/null || true; rm -rf "$dir"' EXIT
H=$dir/hetraid
cp "$src" "$H"
cd "$dir"
fail() { echo "FAILED (seed $SEED, $1)"; exit 1; }
ms() { echo "0.$(printf %03d $((RANDOM % 1000)))"; }

setup() {
    rm -f m0 m1 m2 m3 x n data
    truncate -s 32M m0 m1 m2 m3 x n
    $H create --layout raidx --raidx-level 5 --chunks-per-bundle 3 m0 m1 m2 m3 >/dev/null
    head -c 40M /dev/urandom >data
    $H write m0 m1 m2 m3 --offset 0 <data 2>/dev/null
}

check() {
    local what=$1; shift
    $H read "$@" --offset 0 --length 40M 2>/dev/null | cmp -s - data || fail "$what: data differs"
    $H scrub "$@" >/dev/null 2>&1 || fail "$what: scrub found a mismatch"
}

# A RAIDX5 of varying widths (issue 41) over members of unequal sizes, data
# in the part a remove of member 2 keeps (what shrink says when asked for
# more).
vsetup() {
    rm -f v0 v1 v2 v3 v4 vdata
    truncate -s 24M v0 v1
    truncate -s 32M v2 v3
    truncate -s 48M v4
    $H create --layout raidx --raidx-level 5 --chunk 1M v0 v1 v2 v3 v4 >/dev/null 2>&1
    if [ -z "${vkeep:-}" ]; then
        vkeep=$({ $H shrink v0 v1 v2 v3 v4 --member 2 --size 1G 2>&1 || true; } | sed -n 's/.*then give --size \([0-9]*\).*/\1/p')
        [ -n "$vkeep" ] || fail "shrink did not say what a remove keeps"
    fi
    head -c "$vkeep" /dev/urandom >vdata
    $H write v0 v1 v2 v3 v4 --offset 0 <vdata 2>/dev/null
}

grow_kills=0 shrink_kills=0 serve_kills=0 log_kills=0 named=0 vkills=0
for ((i = 0; i < KILLS; i++)); do
    # A remove from a RAIDX of varying widths killed, finished by grow
    # MEMBERS... (or run again when the kill came before it was recorded).
    vsetup
    $H shrink v0 v1 v2 v3 v4 --member 2 --size "$vkeep" --force --max-speed 20M >/dev/null 2>&1 &
    pid=$!
    sleep "$(ms)"
    kill -9 $pid 2>/dev/null && vkills=$((vkills + 1)) || true
    wait $pid 2>/dev/null || true
    out=$($H grow v0 v1 v2 v3 v4 2>&1) || [[ $out == *"no grow or shrink is in progress"* ]] \
        || fail "varying-width shrink round $i: resume refused: $out"
    if $H status v0 v1 v2 v3 v4 2>/dev/null | grep -q "^     2  active"; then
        $H shrink v0 v1 v2 v3 v4 --member 2 --size "$vkeep" --force >/dev/null 2>&1 \
            || fail "varying-width shrink round $i: the shrink run again failed"
    fi
    $H read v0 v1 v3 v4 --offset 0 --length "$vkeep" 2>/dev/null | cmp -s - vdata \
        || fail "varying-width shrink round $i: data differs"
    $H scrub v0 v1 v3 v4 >/dev/null 2>&1 || fail "varying-width shrink round $i: scrub found a mismatch"
    # A grow killed, resumed by grow MEMBERS... (or the command named).
    setup
    $H grow m0 m1 m2 m3 --add x --max-speed 20M >/dev/null 2>&1 &
    pid=$!
    sleep "$(ms)"
    kill -9 $pid 2>/dev/null && grow_kills=$((grow_kills + 1)) || true
    wait $pid 2>/dev/null || true
    if ! out=$($H grow m0 m1 m2 m3 x 2>&1); then
        cmd=$(sed -n 's/.*start it again with: hetraid //p' <<<"$out")
        if [ -n "$cmd" ]; then
            named=$((named + 1))
            # shellcheck disable=SC2086
            $H $cmd >/dev/null || fail "grow round $i: the named command failed"
        elif [[ $out != *"no grow or shrink is in progress"* ]]; then
            fail "grow round $i: resume refused: $out"
        fi
    fi
    if $H status m0 m1 m2 m3 x >/dev/null 2>&1; then
        check "grow round $i" m0 m1 m2 m3 x
    else
        check "grow round $i (x never joined)" m0 m1 m2 m3
    fi
    # A shrink of slot 1 killed, finished by grow MEMBERS... (no --add).
    setup
    $H shrink m0 m1 m2 m3 --member 1 --size 40M --force --max-speed 20M >/dev/null 2>&1 &
    pid=$!
    sleep "$(ms)"
    kill -9 $pid 2>/dev/null && shrink_kills=$((shrink_kills + 1)) || true
    wait $pid 2>/dev/null || true
    out=$($H grow m0 m1 m2 m3 2>&1) || [[ $out == *"no grow or shrink is in progress"* ]] \
        || fail "shrink round $i: resume refused: $out"
    check "shrink round $i" m0 m1 m2 m3
    # A served rebuild killed; serve again resumes it.
    setup
    $H fail m0 m1 m2 m3 --member 2 >/dev/null
    $H replace m0 m1 m3 --member 2 --with n >/dev/null
    $H serve m0 m1 n m3 --listen "unix:$dir/s" >/dev/null 2>&1 &
    pid=$!
    sleep "$(ms)"
    kill -9 $pid 2>/dev/null && serve_kills=$((serve_kills + 1)) || true
    wait $pid 2>/dev/null || true
    $H serve m0 m1 n m3 --listen "unix:$dir/s" >serve.log 2>&1 &
    pid=$!
    for _ in $(seq 1 300); do
        st=$($H status m0 m1 n m3 2>/dev/null || true)
        [[ $st == *"state optimal"* ]] && break
        sleep 0.1
    done
    kill $pid 2>/dev/null || fail "serve round $i: serve exited: $(cat serve.log)"
    wait $pid 2>/dev/null || true
    st=$($H status m0 m1 n m3 2>&1 || true)
    [[ $st == *"state optimal"* ]] || fail "serve round $i: not resumed: ${st%%$'\n'*}"
    check "serve round $i" m0 m1 n m3
    # A restripe of a RAID5 with a write log killed, resumed by grow MEMBERS...
    rm -f m0 m1 m2 m3 x l data
    truncate -s 32M m0 m1 m2 m3 x
    mode=journal
    ((i % 2)) && mode=write-back
    $H create --layout raid5 m0 m1 m2 m3 --log l --log-size 8M --log-mode $mode >/dev/null
    head -c 40M /dev/urandom >data
    $H write m0 m1 m2 m3 l --offset 0 <data 2>/dev/null
    $H grow m0 m1 m2 m3 l --add x >/dev/null 2>&1 &
    pid=$!
    sleep "$(ms)"
    kill -9 $pid 2>/dev/null && log_kills=$((log_kills + 1)) || true
    wait $pid 2>/dev/null || true
    if ! out=$($H grow m0 m1 m2 m3 x l 2>&1); then
        cmd=$(sed -n 's/.*start it again with: hetraid //p' <<<"$out")
        if [ -n "$cmd" ]; then
            named=$((named + 1))
            # shellcheck disable=SC2086
            $H $cmd >/dev/null || fail "log round $i: the named command failed"
        elif [[ $out != *"no grow or shrink is in progress"* ]]; then
            fail "log round $i ($mode): resume refused: $out"
        fi
    fi
    if $H status m0 m1 m2 m3 x l >/dev/null 2>&1; then
        check "log round $i ($mode)" m0 m1 m2 m3 x l
    else
        check "log round $i ($mode, x never joined)" m0 m1 m2 m3 l
    fi
done
echo "kill-changes: $KILLS rounds, seed $SEED: $grow_kills grows, $shrink_kills shrinks, $vkills removes from a raidx of varying widths, $serve_kills served rebuilds, $log_kills restripes with a log killed; $named resumes by the command a message named; every byte read back, scrub clean"
