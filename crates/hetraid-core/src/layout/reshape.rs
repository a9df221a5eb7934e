//! Restriping a classic array (RAID5, RAID6, RAIDH) onto a new layout —
//! more members (mdadm `--grow --raid-devices`) or other RAIDH weights — as
//! MD reshapes: data is copied in logical order, a window of rows at a time,
//! from the old layout into the new one, and a durable progress mark says
//! where the new layout ends. Pure: which rows each step writes, which
//! logical bytes it reads, and whether it must first save what it overwrites
//! (MD's "critical section" backup). The engine executes the steps.
//!
//! A step writes new-layout rows `[a, b)` in place over old-layout rows
//! `[a, b)` of the same members. That is safe without a backup when every
//! byte of old data living in those rows is already in the new layout
//! (below the step's logical start, so a previous step copied it): then a
//! crash part-way through the step loses nothing, and the step is simply
//! redone from the mark. Otherwise the step's source bytes go to a backup
//! (the write log) first and are replayed from there after a crash. Growing
//! by members needs this only for the first rows (the new layout packs more
//! data per row, so it runs ahead of the old); a weight change, which keeps
//! data per row, needs it for every step.

use super::Layout;

/// One reshape step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// New-layout rows written.
    pub rows: std::ops::Range<u64>,
    /// Logical bytes copied (the new rows' data).
    pub bytes: std::ops::Range<u64>,
    /// The step overwrites old data not yet in the new layout: back up the
    /// step's source bytes before writing.
    pub backup: bool,
}

/// The largest logical byte (exclusive) of old data that rows `[a, b)` of
/// the old layout hold, or 0 when they hold none.
fn old_data_end(old: &dyn Layout, a: u64, b: u64) -> u64 {
    let chunk = old.chunk_bytes();
    (a..b.min(old.stripe_count()))
        .flat_map(|s| (0..old.data_per_stripe()).map(move |i| (s, i)))
        .map(|(s, i)| (old.logical_chunk(s, i) + 1) * chunk)
        .max()
        .unwrap_or(0)
}

/// The steps that move the data of `old` (its logical capacity) into `new`
/// over the same members (the new layout may have more), at most
/// `window_rows` rows a step. Each step's rows are all of the new layout's
/// rows whose data lies in the copied range.
pub fn plan_reshape(old: &dyn Layout, new: &dyn Layout, window_rows: u64) -> Vec<Step> {
    assert!(window_rows > 0);
    assert_eq!(
        old.chunk_bytes(),
        new.chunk_bytes(),
        "a reshape keeps the chunk"
    );
    let chunk = new.chunk_bytes();
    let row_bytes = chunk * new.data_per_stripe() as u64;
    let total = old.capacity_bytes().min(new.capacity_bytes());
    let rows = total.div_ceil(row_bytes).min(new.stripe_count());
    let mut steps = Vec::new();
    let mut a = 0;
    // Bounded: every step advances `a` by at least one row.
    while a < rows {
        let start = a * row_bytes;
        // The widest window, up to `window_rows`, that overwrites only old
        // data already copied; at least one row (backed up if it must be).
        let mut b = a + 1;
        while b < rows && b - a < window_rows && old_data_end(old, a, b + 1) <= start {
            b += 1;
        }
        let backup = old_data_end(old, a, b) > start;
        steps.push(Step {
            rows: a..b,
            bytes: start..(b * row_bytes).min(total),
            backup,
        });
        a = b;
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{build, LayoutKind, LayoutSpec, ParityOrder};

    fn raid5(n: usize, rows: u64) -> Box<dyn Layout> {
        build(&LayoutSpec {
            kind: LayoutKind::Raid5 {
                order: ParityOrder::parse("left-symmetric").unwrap(),
            },
            chunk_bytes: 4096,
            sizes: vec![rows * 4096; n],
            kinds: vec![],
        })
        .unwrap()
    }

    fn raidh(weights: Vec<u64>, rows: u64) -> Box<dyn Layout> {
        build(&LayoutSpec {
            kind: LayoutKind::RaidH { weights },
            chunk_bytes: 4096,
            sizes: vec![rows * 4096; 5],
            kinds: vec![],
        })
        .unwrap()
    }

    #[test]
    fn growing_raid5_backs_up_only_the_first_rows_and_loses_nothing() {
        for n in 3..7 {
            let old = raid5(n, 64);
            let new = raid5(n + 1, 64);
            let steps = plan_reshape(old.as_ref(), new.as_ref(), 16);
            let backed: Vec<&Step> = steps.iter().filter(|s| s.backup).collect();
            assert!(
                !backed.is_empty() && backed.len() <= n,
                "n = {n}: {} backed-up steps",
                backed.len()
            );
            assert!(steps.last().unwrap().rows.end <= new.stripe_count());
            // Windows grow as the new layout runs ahead.
            assert!(steps.iter().any(|s| s.rows.end - s.rows.start > 1));
            for crash_at in 0..steps.len() {
                run_with(old.as_ref(), new.as_ref(), &steps, crash_at);
            }
        }
    }

    #[test]
    fn new_raidh_weights_back_up_every_step_and_lose_nothing() {
        let old = raidh(vec![1, 1, 1, 1, 1], 40);
        let new = raidh(vec![0, 0, 1, 1, 3], 40);
        let steps = plan_reshape(old.as_ref(), new.as_ref(), 4);
        assert!(
            steps.iter().all(|s| s.backup),
            "rows keep their data: each step overwrites what it reads"
        );
        for crash_at in 0..steps.len() {
            run_with(old.as_ref(), new.as_ref(), &steps, crash_at);
        }
    }

    #[test]
    fn a_plan_that_skips_its_backups_loses_data() {
        // The check above can fail: with the backups dropped, a crash in
        // some critical step of a RAID5 grow loses bytes.
        let old = raid5(4, 32);
        let new = raid5(5, 32);
        let mut steps = plan_reshape(old.as_ref(), new.as_ref(), 8);
        steps.iter_mut().for_each(|s| s.backup = false);
        let lost = (0..steps.len())
            .filter(|&crash_at| {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    run_with(old.as_ref(), new.as_ref(), &steps, crash_at)
                }))
                .is_err()
            })
            .count();
        assert!(lost > 0, "no crash point lost data without the backups");
    }

    /// Members as byte arrays with the old layout's data; the steps run in
    /// order, step `crash_at` cut part-way by a crash and then resumed from
    /// the last completed step (a backed-up step replayed from its backup,
    /// another read again). Every logical byte must then read back through
    /// the new layout.
    fn run_with(old: &dyn Layout, new: &dyn Layout, steps: &[Step], crash_at: usize) {
        let chunk = old.chunk_bytes();
        let n = new.members();
        let size = (new.stripe_count() * chunk).max(old.stripe_count() * chunk) as usize;
        let mut disks = vec![vec![0u8; size]; n];
        let total = old.capacity_bytes().min(new.capacity_bytes());
        let logical = |o: u64| (o.wrapping_mul(0x9e37_79b9).wrapping_add(o >> 7)) as u8;
        let place = |l: &dyn Layout, lc: u64| {
            let (s, i) = l.locate_chunk(lc);
            l.data_loc(s, i)
        };
        for lc in 0..total / chunk {
            let loc = place(old, lc);
            for k in 0..chunk {
                disks[loc.member][(loc.offset + k) as usize] = logical(lc * chunk + k);
            }
        }
        let mut crashed = false;
        let mut i = 0;
        while i < steps.len() {
            let st = &steps[i];
            let src: Vec<(u64, Vec<u8>)> = (st.bytes.start / chunk..st.bytes.end.div_ceil(chunk))
                .map(|lc| {
                    let loc = if lc * chunk < st.bytes.start {
                        place(new, lc)
                    } else {
                        place(old, lc)
                    };
                    (
                        lc,
                        disks[loc.member][loc.offset as usize..(loc.offset + chunk) as usize]
                            .to_vec(),
                    )
                })
                .collect();
            // Written in the new layout's member order (so a cut leaves
            // some overwritten rows behind).
            let cut = if i == crash_at && !crashed {
                src.len() / 2
            } else {
                src.len()
            };
            for (lc, data) in &src[..cut] {
                let loc = place(new, *lc);
                disks[loc.member][loc.offset as usize..(loc.offset + chunk) as usize]
                    .copy_from_slice(data);
            }
            if cut < src.len() {
                crashed = true;
                if st.backup {
                    for (lc, data) in &src {
                        let loc = place(new, *lc);
                        disks[loc.member][loc.offset as usize..(loc.offset + chunk) as usize]
                            .copy_from_slice(data);
                    }
                    i += 1;
                }
                continue;
            }
            i += 1;
        }
        for lc in 0..total / chunk {
            let loc = place(new, lc);
            for k in 0..chunk {
                assert_eq!(
                    disks[loc.member][(loc.offset + k) as usize],
                    logical(lc * chunk + k)
                );
            }
        }
    }
}
