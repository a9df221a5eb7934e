//! A paced sweep over stripes: the procedure a rebuild and a scrub follow.
//!
//! The stripes come in streams (a rebuild's schedule: one per parallel
//! stream; a scrub: one). Each stream is swept in order, in batches, with up
//! to `lanes` batches in flight (one written while the next is read). Before
//! each batch the pacer (`pace::wait_ns`, MD's two limits and the one
//! "users are active" rule) is asked; it may say wait. A stream ends when
//! its last batch is done and the pacer lets it go, as MD's `md_do_sync`
//! sleeps after its last chunk too.
//!
//! The job owns the order, the batch size, the lanes, the bytes the limits
//! are held to and when a stream is done. The engine's lanes (threads, the
//! wall clock) and the simulator's (events, simulated time) ask it the same
//! question — `next` — and tell it the same news — `done` — so both run one
//! procedure, not two copies of it.

use crate::pace::{self, PaceLimits, PaceScope};

/// The stripes of one stream, in the order they are swept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stripes {
    /// Listed (a rebuild's schedule).
    List(Vec<u64>),
    /// Every stripe of a range (a scrub: no list of a whole array's stripes
    /// held in memory).
    Range(std::ops::Range<u64>),
}

impl Stripes {
    pub fn len(&self) -> usize {
        match self {
            Stripes::List(l) => l.len(),
            Stripes::Range(r) => (r.end - r.start) as usize,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The stripes from index `first`, `len` of them.
    pub fn slice(&self, first: usize, len: usize) -> Vec<u64> {
        match self {
            Stripes::List(l) => l[first..first + len].to_vec(),
            Stripes::Range(r) => (r.start + first as u64..r.start + (first + len) as u64).collect(),
        }
    }
}

/// What a sweep covers and how it is paced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweepSpec {
    /// Per stream, its stripes in the order they are swept.
    pub streams: Vec<Stripes>,
    /// Stripes per batch (at least one).
    pub batch_stripes: usize,
    /// Batches each stream keeps in flight (at least one).
    pub lanes: usize,
    /// Bytes one stripe counts for the speed limits (a chunk: MD counts
    /// per device).
    pub stripe_bytes: u64,
    pub limits: PaceLimits,
    /// Whether the limits hold the whole sweep or each stream apart.
    pub scope: PaceScope,
    /// Stop once this many stripes were handed out (None: all of them).
    pub stop_after: Option<u64>,
}

/// What a lane of a stream does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Sweep `len` stripes of the stream from index `first` of its list,
    /// then call [`Sweep::done`].
    Batch { first: usize, len: usize },
    /// The pacer says wait: ask again after this many nanoseconds.
    Wait(u64),
    /// The stream has its lanes' worth of batches in flight: ask again when
    /// one is done.
    Busy,
    /// Nothing is left for this lane (the stream is done once its batches
    /// in flight are).
    Finished,
}

/// A sweep in progress.
#[derive(Debug, Clone)]
pub struct Sweep {
    spec: SweepSpec,
    /// Per stream, the index of the next stripe to hand out.
    next: Vec<usize>,
    /// Per stream, batches in flight.
    inflight: Vec<usize>,
    /// Bytes swept in all, and per stream.
    bytes: u64,
    stream_bytes: Vec<u64>,
    /// Stripes handed out (for `stop_after`), and done.
    claimed: u64,
    stripes_done: u64,
    stopped: bool,
}

impl Sweep {
    pub fn new(spec: SweepSpec) -> Self {
        let n = spec.streams.len();
        Self {
            spec: SweepSpec {
                batch_stripes: spec.batch_stripes.max(1),
                lanes: spec.lanes.max(1),
                ..spec
            },
            next: vec![0; n],
            inflight: vec![0; n],
            bytes: 0,
            stream_bytes: vec![0; n],
            claimed: 0,
            stripes_done: 0,
            stopped: false,
        }
    }

    pub fn spec(&self) -> &SweepSpec {
        &self.spec
    }

    /// The stripes of stream `stream` a `Step::Batch` names.
    pub fn stripes(&self, stream: usize, first: usize, len: usize) -> Vec<u64> {
        self.spec.streams[stream].slice(first, len)
    }

    /// What a lane of `stream` does at `now_ns` (since the sweep started),
    /// with users active or not (`pace::users_active`).
    pub fn next(&mut self, stream: usize, now_ns: u64, users_active: bool) -> Step {
        if self.inflight[stream] >= self.spec.lanes {
            return Step::Busy;
        }
        let bytes = self.spec.scope.bytes(self.bytes, self.stream_bytes[stream]);
        let wait = pace::wait_ns(self.spec.limits, bytes, now_ns, users_active);
        if wait > 0 {
            return Step::Wait(wait);
        }
        let list = &self.spec.streams[stream];
        let first = self.next[stream];
        if self.stopped || first >= list.len() {
            return Step::Finished;
        }
        let mut len = self.spec.batch_stripes.min(list.len() - first);
        if let Some(max) = self.spec.stop_after {
            len = len.min(max.saturating_sub(self.claimed) as usize);
            if len == 0 {
                self.stopped = true;
                return Step::Finished;
            }
        }
        self.next[stream] = first + len;
        self.inflight[stream] += 1;
        self.claimed += len as u64;
        Step::Batch { first, len }
    }

    /// A batch of `len` stripes of `stream` is done.
    pub fn done(&mut self, stream: usize, len: usize) {
        assert!(
            self.inflight[stream] > 0,
            "a batch done that was not started"
        );
        self.inflight[stream] -= 1;
        let b = len as u64 * self.spec.stripe_bytes;
        self.bytes += b;
        self.stream_bytes[stream] += b;
        self.stripes_done += len as u64;
    }

    /// Stop handing out batches (an error, a cancel); those in flight end.
    pub fn stop(&mut self) {
        self.stopped = true;
    }

    /// Has `stream` nothing in flight and nothing left to hand out?
    pub fn stream_idle_and_empty(&self, stream: usize) -> bool {
        self.inflight[stream] == 0
            && (self.stopped || self.next[stream] >= self.spec.streams[stream].len())
    }

    /// Bytes swept in all.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Bytes swept per stream.
    pub fn stream_bytes(&self) -> &[u64] {
        &self.stream_bytes
    }

    /// Stripes swept in all.
    pub fn stripes_done(&self) -> u64 {
        self.stripes_done
    }

    /// Stripes the sweep covers in all.
    pub fn stripes_total(&self) -> u64 {
        let all: u64 = self.spec.streams.iter().map(|s| s.len() as u64).sum();
        self.spec.stop_after.map_or(all, |n| n.min(all))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: u64 = 1_000_000;

    fn spec(streams: Vec<Vec<u64>>, batch: usize, lanes: usize, min: u64, max: u64) -> SweepSpec {
        SweepSpec {
            streams: streams.into_iter().map(Stripes::List).collect(),
            batch_stripes: batch,
            lanes,
            stripe_bytes: MB,
            limits: PaceLimits {
                min_bps: min,
                max_bps: max,
            },
            scope: PaceScope::Array,
            stop_after: None,
        }
    }

    /// Drive a sweep as an executor would, batches taking `batch_ns` each,
    /// with users active throughout or not: the time it ends.
    fn drive(s: &mut Sweep, batch_ns: u64, users: bool) -> u64 {
        let mut now = 0u64;
        let mut log = Vec::new();
        // Bounded: every round hands out a batch, waits, or ends.
        for _ in 0..10_000 {
            match s.next(0, now, users) {
                Step::Batch { first, len } => {
                    log.push(s.stripes(0, first, len));
                    now += batch_ns;
                    s.done(0, len);
                }
                Step::Wait(ns) => now += ns,
                Step::Busy => unreachable!("one lane at a time here"),
                Step::Finished => return now,
            }
        }
        panic!("the sweep did not end: {log:?}");
    }

    #[test]
    fn batches_come_in_order_and_the_last_is_short() {
        let mut s = Sweep::new(spec(vec![(0..7).collect()], 3, 1, 0, 0));
        let mut got = Vec::new();
        while let Step::Batch { first, len } = s.next(0, 0, false) {
            got.push(s.stripes(0, first, len));
            s.done(0, len);
        }
        assert_eq!(got, vec![vec![0, 1, 2], vec![3, 4, 5], vec![6]]);
        assert!(s.stream_idle_and_empty(0));
        assert_eq!((s.stripes_done(), s.bytes()), (7, 7 * MB));
    }

    #[test]
    fn a_range_sweeps_as_its_list_would() {
        let mut a = Sweep::new(spec(vec![(5..12).collect()], 3, 1, 0, 0));
        let mut sp = spec(vec![], 3, 1, 0, 0);
        sp.streams = vec![Stripes::Range(5..12)];
        let mut b = Sweep::new(sp);
        loop {
            let (x, y) = (a.next(0, 0, false), b.next(0, 0, false));
            assert_eq!(x, y);
            let Step::Batch { first, len } = x else { break };
            assert_eq!(a.stripes(0, first, len), b.stripes(0, first, len));
            a.done(0, len);
            b.done(0, len);
        }
    }

    #[test]
    fn lanes_bound_the_batches_in_flight() {
        let mut s = Sweep::new(spec(vec![(0..10).collect()], 2, 2, 0, 0));
        assert!(matches!(s.next(0, 0, false), Step::Batch { first: 0, .. }));
        assert!(matches!(s.next(0, 0, false), Step::Batch { first: 2, .. }));
        assert_eq!(s.next(0, 0, false), Step::Busy);
        s.done(0, 2);
        assert!(matches!(s.next(0, 0, false), Step::Batch { first: 4, .. }));
        assert!(!s.stream_idle_and_empty(0));
    }

    #[test]
    fn the_pacer_holds_the_average_rate_and_waits_after_the_last_batch() {
        // 8 MB at a 4 MB/s maximum, batches instant: 2 s, the last wait
        // included (MD sleeps after its last chunk too).
        let mut s = Sweep::new(spec(vec![(0..8).collect()], 1, 1, MB, 4 * MB));
        assert_eq!(drive(&mut s, 0, false), 2_000_000_000);
        // With users active the minimum holds: 8 s.
        let mut s = Sweep::new(spec(vec![(0..8).collect()], 1, 1, MB, 4 * MB));
        assert_eq!(drive(&mut s, 0, true), 8_000_000_000);
        // Unlimited and idle: as fast as the batches go.
        let mut s = Sweep::new(spec(vec![(0..8).collect()], 1, 1, 0, 0));
        assert_eq!(drive(&mut s, 1000, false), 8000);
    }

    #[test]
    fn stop_after_truncates_and_ends_every_stream() {
        let mut sp = spec(vec![(0..10).collect(), (10..20).collect()], 4, 1, 0, 0);
        sp.stop_after = Some(6);
        let mut s = Sweep::new(sp);
        assert_eq!(s.stripes_total(), 6);
        assert_eq!(s.next(0, 0, false), Step::Batch { first: 0, len: 4 });
        assert_eq!(s.next(1, 0, false), Step::Batch { first: 0, len: 2 });
        s.done(0, 4);
        s.done(1, 2);
        assert_eq!(s.next(0, 0, false), Step::Finished);
        assert_eq!(s.next(1, 0, false), Step::Finished);
        assert!(s.stream_idle_and_empty(0) && s.stream_idle_and_empty(1));
    }

    #[test]
    fn per_stream_limits_let_streams_add_up() {
        let mut sp = spec(vec![(0..4).collect(), (4..8).collect()], 1, 1, MB, 4 * MB);
        sp.scope = PaceScope::Stream;
        let mut s = Sweep::new(sp);
        // Both streams take a batch at 0; at 0.25 s each may go on, as its
        // own bytes (1 MB) are at its own 4 MB/s.
        for st in 0..2 {
            assert!(matches!(s.next(st, 0, false), Step::Batch { .. }));
            s.done(st, 1);
        }
        assert_eq!(s.next(0, 0, false), Step::Wait(250_000_000));
        assert!(matches!(
            s.next(1, 250_000_000, false),
            Step::Batch { first: 1, .. }
        ));
    }
}
