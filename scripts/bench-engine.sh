#!/usr/bin/env bash
# Engine against baselines measured in the same run, members on /dev/shm:
#   engine raid5 4+1 seq-write 1M: X GB/s, raid0 4 members Y GB/s, ratio R
#   engine raid5 4+1 rand-read 4K qd16: N IOPS, raw pread N IOPS, ratio R
#   engine raid5 4+1 rand-write 4K qd16: N IOPS at U us CPU/write, raid0 of 5 N IOPS at U us, ratio R, CPU Cx
#   engine raid6 4+2 rand-write 4K qd16: (the same against raid0 of 6)
#   engine raid5 4+1 rand-write 4K qd16 bitmap: N IOPS at U us, without N IOPS at U us, ratio R
#   engine raid5 4+1 rand-read 4K qd16 checksums: N IOPS, without N IOPS, ratio R
#   engine raid5 4+1 rand-write 4K qd16 checksums: N IOPS at U us, without N IOPS at U us, ratio R
#   engine raid5 4+1 rand-write 4K qd16 journal(ssd): X IOPS, bitmap Y IOPS, ratio R
#   engine raid5 4+1 rand-write 4K qd16 write-back(ssd): X IOPS, bitmap Y IOPS, ratio R
#   engine hpda 3+2 rand-write 4K qd16: X IOPS, ssd raid5 4+1 Y IOPS, ratio R
#   engine raidx1 7 mixed disks rand-write 1M qd1: write buffer X MB/s, none Y MB/s, ratio R
#   log recovery: a full 64 MiB journal ... scanned and replayed in T s
#   rebuild 9 x emulated hdd ...: raid5 in place A s, s2raid5 into spare space B s, ratio R
#   s2raid5 with 2 partitions (no disk shared): ..., rebuild streams: ideal ..., per stream ...
# seq-write is the median of 3 alternating passes; rand-read the median of 3 runs,
# each the median ratio of 40 engine/raw pairs of 0.25 s passes (after one
# untimed pass of each).
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${DIR:-/dev/shm}
MIB=${MIB:-128}
cargo build --release -q -p hetraid-engine --examples
B=target/release/examples/engine_bench

read -r e b < <($B seq-write "$DIR" "$MIB")
awk -v e="$e" -v b="$b" 'BEGIN {printf "engine raid5 4+1 seq-write 1M: %.2f GB/s, raid0 4 members %.2f GB/s, ratio %.2f\n", e, b, e / b}'

# rand-read: each run pairs engine and raw passes back to back (10 pairs, the
# order swapped every pair) and gives the median of the pairs' ratios; the
# line is the median of 3 runs.
es=() bs=() rs=()
for _ in 1 2 3; do
    read -r e b r < <($B rand-read "$DIR" "$MIB" 16 10)
    es+=("$e") bs+=("$b") rs+=("$r")
done
median() { printf '%s\n' "$@" | sort -n | sed -n 2p; }
e=$(median "${es[@]}") b=$(median "${bs[@]}") r=$(median "${rs[@]}")
awk -v e="$e" -v b="$b" -v r="$r" 'BEGIN {printf "engine raid5 4+1 rand-read 4K qd16: %d IOPS, raw pread %d IOPS, ratio %.2f\n", e, b, r}'

# Small writes against RAID0 of the same members, with the CPU time (all
# threads) per write; paired passes (see rand-read).
read -r p5 p5c z5 z5c r5 p6 p6c z6 z6c r6 < <($B rand-write "$DIR" "$MIB" 16 "${WRITE_SECS:-8}")
awk -v p="$p5" -v pc="$p5c" -v z="$z5" -v zc="$z5c" -v r="$r5" 'BEGIN {printf "engine raid5 4+1 rand-write 4K qd16: %d IOPS at %.2f us CPU/write, raid0 of 5 %d IOPS at %.2f us, ratio %.2f, CPU %.1fx\n", p, pc, z, zc, r, pc / zc}'
awk -v p="$p6" -v pc="$p6c" -v z="$z6" -v zc="$z6c" -v r="$r6" 'BEGIN {printf "engine raid6 4+2 rand-write 4K qd16: %d IOPS at %.2f us CPU/write, raid0 of 6 %d IOPS at %.2f us, ratio %.2f, CPU %.1fx\n", p, pc, z, zc, r, pc / zc}'
# The write-intent bitmap's cost: the same RAID5 with it switched off (a
# benchmark-only switch), file sets swapped between two rounds.
read -r w wc n nc r < <($B rand-write-bitmap "$DIR" "$MIB" 16 "${WRITE_SECS:-8}")
awk -v w="$w" -v wc="$wc" -v n="$n" -v nc="$nc" -v r="$r" 'BEGIN {printf "engine raid5 4+1 rand-write 4K qd16 bitmap: %d IOPS at %.2f us CPU/write, without %d IOPS at %.2f us, ratio %.2f\n", w, wc, n, nc, r}'

# Checksums: medians of 3 runs (each the median of 3 alternating passes);
# single runs of seq-write vary by +-10 % on a shared 2-core machine.
cs=() ps=()
for _ in 1 2 3; do
    read -r c p < <($B seq-write-checksums "$DIR" "$MIB")
    cs+=("$c") ps+=("$p")
done
c=$(median "${cs[@]}") p=$(median "${ps[@]}")
awk -v c="$c" -v p="$p" 'BEGIN {printf "engine raid5 4+1 seq-write 1M checksums: %.2f GB/s, without %.2f GB/s, ratio %.2f\n", c, p, c / p}'
# (paired passes, the checksums on one file set and then on the other:
# two sets made one after the other read at different speeds)
read -r c p r < <($B rand-read-checksums "$DIR" "$MIB" 16 "${CHECKSUM_SECS:-8}")
awk -v c="$c" -v p="$p" -v r="$r" 'BEGIN {printf "engine raid5 4+1 rand-read 4K qd16 checksums: %d IOPS, without %d IOPS, ratio %.2f\n", c, p, r}'
read -r c cc p pc r < <($B rand-write-checksums "$DIR" "$MIB" 16 "${CHECKSUM_SECS:-8}")
awk -v c="$c" -v cc="$cc" -v p="$p" -v pc="$pc" -v r="$r" 'BEGIN {printf "engine raid5 4+1 rand-write 4K qd16 checksums: %d IOPS at %.2f us CPU/write, without %d IOPS at %.2f us, ratio %.2f\n", c, cc, p, pc, r}'

# The write log: members are emulated 7200 rpm disks (SlowMember), the log an
# emulated SSD; 4 KiB random writes, journal vs the write-intent bitmap.
read -r j b w < <($B rand-write-journal "$DIR" 64 16 "${JOURNAL_SECS:-8}")
awk -v j="$j" -v b="$b" 'BEGIN {printf "engine raid5 4+1 rand-write 4K qd16 journal(ssd): %d IOPS, bitmap %d IOPS, ratio %.2f\n", j, b, j / b}'
awk -v w="$w" -v b="$b" 'BEGIN {printf "engine raid5 4+1 rand-write 4K qd16 write-back(ssd): %d IOPS, bitmap %d IOPS, ratio %.2f\n", w, b, w / b}'
# HPDA (issue 13): 3 emulated OCZ Core V2 SSDs + 2 emulated WD2500YD disks
# against SSD RAID5 4+1 of the same SSDs, 4 KiB random writes at QD16.
read -r h r routed < <($B hpda-rand-write "$DIR" 64 16 "${HPDA_SECS:-2}")
awk -v h="$h" -v r="$r" -v n="$routed" 'BEGIN {printf "engine hpda 3+2 rand-write 4K qd16: %d IOPS, ssd raid5 4+1 %d IOPS, ratio %.2f (%d writes to the log)\n", h, r, h / r, n}'
# RAIDX write buffer (issue 14): RAIDX1 on 7 emulated mixed disks, one writer
# of 1 MiB random writes, 16 MiB buffer vs none (the final drain counted).
read -r wb plain < <($B raidx-write-buffer "$DIR" 64 1 "${RAIDX_SECS:-4}")
awk -v b="$wb" -v p="$plain" 'BEGIN {printf "engine raidx1 7 mixed disks rand-write 1M qd1: write buffer %.2f MB/s, none %.2f MB/s, ratio %.2f\n", b, p, b / p}'
read -r t used ring records < <($B log-recovery "$DIR" 64)
awk -v t="$t" -v u="$used" -v r="$ring" -v n="$records" 'BEGIN {printf "log recovery: a full %d MiB journal (%d MiB, %d records in use) scanned and replayed in %.3f s (%.0f MB/s)\n", r / 1048576, u / 1048576, n, t, u / t / 1e6}'

# Rebuild streams (issue 18): the ideal is every stream at RAID5's in-place rate.
target/release/examples/rebuild_race "${REBUILD_MIB:-256}"
