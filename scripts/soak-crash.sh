#!/usr/bin/env bash
# Crash soak for the write log: SEEDS (default 5000) journal crash cycles
# (degraded RAID5, a process death at a random member or log write, power
# loss with dropped or torn pages, assembly with replay, every acknowledged
# write checked) plus the bitmap-only cycles that show the write hole.
# A failure prints its seed; replay it with HETRAID_SEED=N and the same test.
set -euo pipefail
cd "$(dirname "$0")/.."
SEEDS=${SEEDS:-5000}
HETRAID_SEEDS=$SEEDS cargo test --release -q -p hetraid-engine --test journal -- \
    --nocapture the_journal_closes_the_write_hole the_write_hole_is_real_with_the_bitmap_alone 2>&1 |
    grep -E "journal:|bitmap only:|panicked|replay with|test result"
