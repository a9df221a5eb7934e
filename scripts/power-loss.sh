#!/bin/sh
# Issue 36's power-loss campaign by hand: CYCLES cycles (default 10000) of
# crates/hetraid-engine/tests/power_loss.rs from BASE (default 36000) over
# the bitmap, a journal, write-back logs of one and two copies and HPDA,
# healthy and degraded, with power cut during recovery in a third of them.
# CI runs 60. A failure prints HETRAID_SEED=N, which replays that cycle.
set -e
cd "$(dirname "$0")/.."
HETRAID_CYCLES="${CYCLES:-10000}" HETRAID_BASE="${BASE:-36000}" \
  cargo test --release -p hetraid-engine --test power_loss -- --nocapture
