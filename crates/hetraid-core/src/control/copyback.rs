//! A copy-back (dRAID's rebalance) while users read and write: the core's
//! moves copied from their spare homes onto the replacement as a paced
//! sweep, and a watch that keeps the copy right meanwhile.
//!
//! The spare homes stay the array's copy until the end (the layout in
//! force is the relocated one), so users keep writing there. A move is
//! *started* before its spare home is read; a user write (or discard) that
//! touches the spare home of a started move makes it *dirty*: what was
//! copied may be older than what the spare home holds now. Dirty moves are
//! copied again; the last round runs with user requests held, so none can
//! become dirty again, and then the replacement takes the slot. A write
//! that lands before its move is started needs nothing: the read comes
//! after it. This is live migration's pre-copy, with the dirty set bounded
//! by the moves.

use super::sweep::{Stripes, Sweep, SweepSpec};
use crate::pace::{PaceLimits, PaceScope};
use crate::rebuild::{CopyBack, COPY_BACK_BATCHES_IN_FLIGHT};
use std::collections::{BTreeSet, HashMap};

/// Rounds of copying dirty moves again while users run, before the last
/// one with requests held: a steady writer cannot keep the copy-back from
/// ending, and the held round is short when writes are few.
pub const RECOPY_ROUNDS_UNHELD_MAX: usize = 3;

/// The copy-back's sweep: one stream over the moves (a "stripe" here is a
/// move), the core's batches (`CopyBack::batches`), that many in flight,
/// a move's bytes counted for the limits.
pub fn sweep(plan: &CopyBack, limits: PaceLimits) -> Sweep {
    Sweep::new(SweepSpec {
        streams: vec![Stripes::Range(0..plan.moves.len() as u64)],
        batch_stripes: plan.batch_moves(),
        lanes: COPY_BACK_BATCHES_IN_FLIGHT,
        stripe_bytes: plan.moves.first().map_or(0, |m| m.len),
        limits,
        scope: PaceScope::Array,
        stop_after: None,
    })
}

/// Which moves are started, and which a user write made dirty since.
#[derive(Debug, Clone)]
pub struct CopyWatch {
    /// Spare home (member, chunk index) -> move.
    homes: HashMap<(usize, u64), usize>,
    chunk: u64,
    started: Vec<bool>,
    dirty: BTreeSet<usize>,
}

impl CopyWatch {
    pub fn new(plan: &CopyBack) -> Self {
        let chunk = plan.moves.first().map_or(1, |m| m.len.max(1));
        Self {
            homes: plan
                .moves
                .iter()
                .enumerate()
                .map(|(i, m)| ((m.from.member, m.from.offset / chunk), i))
                .collect(),
            chunk,
            started: vec![false; plan.moves.len()],
            dirty: BTreeSet::new(),
        }
    }

    /// Moves `first..first + len` are about to be read: a write from now on
    /// makes them dirty.
    pub fn start(&mut self, first: usize, len: usize) {
        self.started[first..first + len].fill(true);
    }

    /// A user write or discard of `len` bytes at data offset `off` of
    /// `member`.
    pub fn written(&mut self, member: usize, off: u64, len: u64) {
        if len == 0 {
            return;
        }
        for c in off / self.chunk..=(off + len - 1) / self.chunk {
            if let Some(&i) = self.homes.get(&(member, c)) {
                if self.started[i] {
                    self.dirty.insert(i);
                }
            }
        }
    }

    /// The dirty moves, in order; they are clean again (started: the caller
    /// copies them now).
    pub fn take_dirty(&mut self) -> Vec<usize> {
        std::mem::take(&mut self.dirty).into_iter().collect()
    }

    pub fn dirty_len(&self) -> usize {
        self.dirty.len()
    }
}

#[cfg(test)]
mod tests {
    use super::super::sweep::Step;
    use super::*;
    use crate::layout::{ChunkLoc, Move};

    fn plan(n: usize) -> CopyBack {
        let c = 65536;
        CopyBack {
            member: 3,
            moves: (0..n as u64)
                .map(|i| Move {
                    from: ChunkLoc {
                        member: (i % 3) as usize,
                        offset: (100 + i) * c,
                    },
                    to: ChunkLoc {
                        member: 3,
                        offset: i * c,
                    },
                    len: c,
                })
                .collect(),
        }
    }

    #[test]
    fn only_writes_after_a_move_started_make_it_dirty() {
        let p = plan(6);
        let mut w = CopyWatch::new(&p);
        let c = 65536;
        // Move 1's home: member 1, chunk 101. Before it starts: nothing.
        w.written(1, 101 * c + 512, 4096);
        assert_eq!(w.dirty_len(), 0);
        w.start(0, 3);
        w.written(1, 101 * c + 512, 4096);
        // A write over moves 1 and 4's homes? 4 is on member 1 too (104),
        // not started; and a write elsewhere on member 1 is no home.
        w.written(1, 101 * c, 4 * c);
        w.written(1, 500 * c, c);
        assert_eq!(w.take_dirty(), vec![1]);
        assert_eq!(w.take_dirty(), Vec::<usize>::new());
        // Member 0, chunk 100 (move 0) and member 2, chunk 102 (move 2).
        w.written(2, 102 * c + c - 1, 1);
        w.written(0, 100 * c, 1);
        assert_eq!(w.take_dirty(), vec![0, 2]);
    }

    #[test]
    fn the_sweep_hands_out_the_core_batches_two_at_a_time() {
        let p = plan(5000);
        let unpaced = PaceLimits {
            min_bps: 0,
            max_bps: 0,
        };
        let mut s = sweep(&p, unpaced);
        let mut got = Vec::new();
        // Two in flight, then busy until one is done.
        let Step::Batch { first, len } = s.next(0, 0, false) else {
            panic!("a first batch")
        };
        got.push((first, len));
        let Step::Batch { first, len } = s.next(0, 0, false) else {
            panic!("a second batch in flight")
        };
        got.push((first, len));
        assert_eq!(s.next(0, 0, false), Step::Busy);
        s.done(0, got[0].1);
        // Bounded: a batch per round, five thousand moves.
        for _ in 0..100 {
            match s.next(0, 0, false) {
                Step::Batch { first, len } => {
                    got.push((first, len));
                    s.done(0, len);
                }
                _ => break,
            }
        }
        let want: Vec<(usize, usize)> = p
            .batches()
            .scan(0, |at, b| {
                let r = (*at, b.len());
                *at += b.len();
                Some(r)
            })
            .collect();
        assert_eq!(got, want);
    }
}
