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
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

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

/// Every step of a reshape: [`plan_reshape`]'s, then steps of up to
/// `window_rows` rows with no bytes (written as zeros, parity included)
/// over the new layout's rows past the data, so the room the reshape adds
/// reads as zeros and its redundancy holds.
pub fn reshape_steps(old: &dyn Layout, new: &dyn Layout, window_rows: u64) -> Vec<Step> {
    let mut steps = plan_reshape(old, new, window_rows);
    let total = old.capacity_bytes().min(new.capacity_bytes());
    let mut a = steps.last().map_or(0, |s| s.rows.end);
    // Bounded: each step advances `a` by at least one row.
    while a < new.stripe_count() {
        let b = (a + window_rows).min(new.stripe_count());
        steps.push(Step {
            rows: a..b,
            bytes: total..total,
            backup: false,
        });
        a = b;
    }
    steps
}

/// The layout of an array part-way through a reshape: new-layout rows
/// `[0, mark_rows)` hold the logical chunks below the mark (what the steps
/// copied), the old layout's rows from the one holding the mark onwards hold
/// the rest; between them, rows the last step overwrote or that only held
/// data already copied are not used. Stripes are numbered new rows first,
/// then the old rows in use. The capacity stays the old one until the
/// reshape ends. The engine runs I/O on it between steps.
///
/// The mark moves only by [`Reshaping::set_mark`], between steps, while
/// nothing is planned on the layout (the simulator's step runs with user
/// requests held, as the engine's runs between two assemblies); atomics
/// let it move through a shared reference, and cost a plain load here.
#[derive(Debug)]
pub struct Reshaping {
    old: Box<dyn Layout>,
    new: Box<dyn Layout>,
    mark_rows: AtomicU64,
    mark_chunks: AtomicU64,
    /// The first old row in use.
    old_start: AtomicU64,
    capacity: u64,
}

impl Reshaping {
    /// `mark_rows`: new-layout rows written (a step boundary of
    /// [`plan_reshape`], or past its last step).
    pub fn new(old: Box<dyn Layout>, new: Box<dyn Layout>, mark_rows: u64) -> Self {
        let capacity = old.capacity_bytes().min(new.capacity_bytes());
        let l = Self {
            old,
            new,
            mark_rows: AtomicU64::new(0),
            mark_chunks: AtomicU64::new(0),
            old_start: AtomicU64::new(0),
            capacity,
        };
        l.set_mark(mark_rows);
        l
    }

    /// Move the mark to `mark_rows` new-layout rows written (a step's end).
    /// Only while nothing is planned on the layout: stripe numbers above
    /// the mark change with it.
    pub fn set_mark(&self, mark_rows: u64) {
        let chunk = self.new.chunk_bytes();
        let total = self.capacity / chunk;
        let mark_rows = mark_rows.min(self.new.stripe_count());
        let mark_chunks = (mark_rows * self.new.data_per_stripe() as u64).min(total);
        let old_start = if mark_chunks < total {
            self.old.locate_chunk(mark_chunks).0
        } else {
            self.old.stripe_count()
        };
        debug_assert!(old_start >= mark_rows || mark_chunks == total);
        self.mark_rows.store(mark_rows, Relaxed);
        self.mark_chunks.store(mark_chunks, Relaxed);
        self.old_start.store(old_start.max(mark_rows), Relaxed);
    }

    /// New-layout rows written.
    pub fn mark_rows(&self) -> u64 {
        self.mark_rows.load(Relaxed)
    }

    /// The layout the reshape moves the data into.
    pub fn new_layout(&self) -> &dyn Layout {
        self.new.as_ref()
    }

    /// The layout the data comes from.
    pub fn old_layout(&self) -> &dyn Layout {
        self.old.as_ref()
    }

    fn old_row(&self, s: u64) -> u64 {
        s - self.mark_rows() + self.old_start.load(Relaxed)
    }
}

impl Layout for Reshaping {
    fn name(&self) -> String {
        self.new.name()
    }
    fn members(&self) -> usize {
        self.new.members()
    }
    fn chunk_bytes(&self) -> u64 {
        self.new.chunk_bytes()
    }
    fn stripe_count(&self) -> u64 {
        self.mark_rows()
            + self
                .old
                .stripe_count()
                .saturating_sub(self.old_start.load(Relaxed))
    }
    fn data_per_stripe(&self) -> usize {
        self.old.data_per_stripe()
    }
    fn redundancy(&self) -> super::Redundancy {
        self.new.redundancy()
    }
    fn stripe(&self, s: u64) -> super::Stripe {
        if s < self.mark_rows() {
            return self.new.stripe(s);
        }
        let mut st = self.old.stripe(self.old_row(s));
        st.index = s;
        st
    }
    fn data_loc(&self, s: u64, idx: usize) -> super::ChunkLoc {
        if s < self.mark_rows() {
            self.new.data_loc(s, idx)
        } else {
            self.old.data_loc(self.old_row(s), idx)
        }
    }
    fn locate_chunk(&self, lc: u64) -> (u64, usize) {
        if lc < self.mark_chunks.load(Relaxed) {
            self.new.locate_chunk(lc)
        } else {
            let (s, i) = self.old.locate_chunk(lc);
            (s - self.old_start.load(Relaxed) + self.mark_rows(), i)
        }
    }
    fn logical_chunk(&self, s: u64, i: usize) -> u64 {
        if s < self.mark_rows() {
            self.new.logical_chunk(s, i)
        } else {
            self.old.logical_chunk(self.old_row(s), i)
        }
    }
    fn capacity_bytes(&self) -> u64 {
        self.capacity
    }
    fn as_reshaping(&self) -> Option<&Reshaping> {
        Some(self)
    }
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
    fn the_reshaping_layout_reads_each_chunk_where_the_steps_left_it() {
        let pair = |k: usize| match k {
            0 => (raid5(4, 48), raid5(5, 48)),
            _ => (
                raidh(vec![1, 1, 1, 1, 1], 40),
                raidh(vec![0, 0, 1, 1, 3], 40),
            ),
        };
        for k in 0..2 {
            let (old, new) = pair(k);
            let steps = plan_reshape(old.as_ref(), new.as_ref(), 6);
            let chunk = old.chunk_bytes();
            for st in &steps {
                // At the step's start: below it the new layout, above the old.
                let (o, n) = pair(k);
                let l = Reshaping::new(o, n, st.rows.start);
                assert_eq!(l.capacity_bytes(), old.capacity_bytes());
                let mut used = std::collections::HashSet::new();
                for lc in 0..l.capacity_bytes() / chunk {
                    let (s, i) = l.locate_chunk(lc);
                    assert_eq!(l.logical_chunk(s, i), lc);
                    let loc = l.data_loc(s, i);
                    assert_eq!(l.stripe(s).data[i], loc);
                    let want = if lc * chunk < st.bytes.start {
                        let (s, i) = new.locate_chunk(lc);
                        new.data_loc(s, i)
                    } else {
                        let (s, i) = old.locate_chunk(lc);
                        old.data_loc(s, i)
                    };
                    assert_eq!(loc, want, "chunk {lc} at mark {}", st.rows.start);
                    assert!(used.insert(loc), "two chunks at {loc:?}");
                }
                // The rows in use never include one the step overwrites
                // while it still holds uncopied data, unless backed up.
                if !st.backup {
                    for s in 0..l.stripe_count() {
                        for c in l.stripe(s).all() {
                            let row = c.offset / chunk;
                            assert!(
                                s < st.rows.start || !st.rows.contains(&row),
                                "stripe {s} uses row {row} the step writes"
                            );
                        }
                    }
                }
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
