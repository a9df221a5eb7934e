//! Where requests come from: a closed loop like XDD/fio, or a trace replayed at its
//! recorded times or as fast as possible.

use crate::kernel::{Ns, Rng};
use crate::trace::TraceRecord;
use hetraid_core::plan::{Op, Request};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pattern {
    Random,
    Sequential,
}

/// Closed-loop synthetic load.
#[derive(Debug, Clone)]
pub struct Closed {
    pub pattern: Pattern,
    pub read_fraction: f64,
    pub size: u64,
    pub align: u64,
    /// Addressed bytes from offset 0.
    pub span: u64,
    pub qd: u32,
    pub total_bytes: Option<u64>,
    pub until_ns: Option<Ns>,
    /// Random sizes: each request `size` to `size_max` bytes, uniform in
    /// steps of `size_step` (None: every request `size`).
    pub size_max: Option<u64>,
    pub size_step: u64,
    /// This share of requests are trims of `trim_size` bytes.
    pub trim_fraction: f64,
    pub trim_size: u64,
    issued_bytes: u64,
    cursor: u64,
}

impl Closed {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        pattern: Pattern,
        read_fraction: f64,
        size: u64,
        align: u64,
        span: u64,
        qd: u32,
        total_bytes: Option<u64>,
        until_ns: Option<Ns>,
    ) -> Self {
        Self {
            pattern,
            read_fraction,
            size,
            align,
            span,
            qd,
            total_bytes,
            until_ns,
            size_max: None,
            size_step: 512,
            trim_fraction: 0.0,
            trim_size: size,
            issued_bytes: 0,
            cursor: 0,
        }
    }

    /// The next request at `now`, or None when the load has issued everything.
    pub fn next(&mut self, now: Ns, rng: &mut Rng) -> Option<Request> {
        if self.total_bytes.is_some_and(|t| self.issued_bytes >= t)
            || self.until_ns.is_some_and(|u| now >= u)
        {
            return None;
        }
        let len = match self.size_max {
            Some(max) => {
                self.size + rng.below((max - self.size) / self.size_step + 1) * self.size_step
            }
            None => self.size,
        };
        let offset = match self.pattern {
            Pattern::Random => rng.below((self.span - len) / self.align + 1) * self.align,
            Pattern::Sequential => {
                if self.cursor + len > self.span {
                    self.cursor = 0;
                }
                let o = self.cursor;
                self.cursor += len;
                o
            }
        };
        // Trims are drawn only when asked for: a seed without them gives
        // the loads it always gave. They move no data (not in total_bytes).
        if self.trim_fraction > 0.0 && rng.unit() < self.trim_fraction {
            let len = self.trim_size.min(self.span);
            let offset = rng.below((self.span - len) / self.align + 1) * self.align;
            return Some(Request {
                op: Op::Trim,
                offset,
                len,
            });
        }
        // Draw the op even for pure loads so a seed gives the same offsets whatever
        // the read fraction.
        let u = rng.unit();
        let op = if u < self.read_fraction {
            Op::Read
        } else {
            Op::Write
        };
        self.issued_bytes += len;
        Some(Request { op, offset, len })
    }
}

/// Where a replay's records come from.
pub enum Records {
    /// Read whole (a looped trace: each pass needs the whole trace's length).
    Loaded(std::sync::Arc<Vec<TraceRecord>>),
    /// Read as the replay goes ([`crate::trace::Stream`]), opened at the
    /// first record asked for.
    Streamed(Box<StreamCursor>),
}

/// A streamed trace: the batches the reader handed over that hold records
/// not yet let go (from the one before the record being issued, through the
/// farthest one looked ahead at). Whole batches, indexed in place: taking
/// records one at a time into a queue was a tenth of a replay's time.
pub struct StreamCursor {
    open: TraceFile,
    stream: Option<crate::trace::Stream>,
    batches: std::collections::VecDeque<Vec<TraceRecord>>,
    /// The first record of the first batch, and records in all of them.
    base: usize,
    held: usize,
    ended: bool,
    /// An error reading ahead stopped the stream at this record: the
    /// record's own turn reports it.
    error: Option<(usize, String)>,
}

/// What opens a streamed trace.
#[derive(Debug, Clone)]
pub struct TraceFile {
    pub path: String,
    pub format: Option<String>,
    pub limit: Option<usize>,
}

impl StreamCursor {
    pub fn new(open: TraceFile) -> Self {
        Self {
            open,
            stream: None,
            batches: Default::default(),
            base: 0,
            held: 0,
            ended: false,
            error: None,
        }
    }

    /// Record `i` if held (after `fill`).
    fn at(&self, i: usize) -> Option<&TraceRecord> {
        let mut k = i.checked_sub(self.base)?;
        // Bounded by the batches held (two or three).
        for b in &self.batches {
            if k < b.len() {
                return b.get(k);
            }
            k -= b.len();
        }
        None
    }

    /// Record `i` without letting go of those before it (a look ahead).
    fn peek(&mut self, i: usize) -> Option<TraceRecord> {
        self.fill(i);
        let r = self.at(i).copied();
        // The batches were written by the reading thread, on another core:
        // ask for the lines a look ahead reaches next.
        if let Some(next) = self.at(i + crate::trace::PREFETCH_RECORDS_AHEAD) {
            crate::memory::prefetch_line(next);
        }
        r
    }

    /// Read until record `i` is held or the trace ends (or stops at an
    /// error, kept for its record's turn).
    fn fill(&mut self, i: usize) {
        // Bounded by the trace: each round reads a batch or ends.
        while self.base + self.held <= i && !self.ended {
            let stream = match &mut self.stream {
                Some(s) => s,
                None => {
                    let o = &self.open;
                    match crate::trace::Stream::open(
                        &o.path,
                        o.format.as_deref(),
                        "--trace-format",
                        o.limit,
                    ) {
                        Ok(s) => self.stream.insert(s),
                        Err(e) => {
                            self.ended = true;
                            self.error = Some((self.base + self.held, e));
                            return;
                        }
                    }
                }
            };
            match stream.next_batch() {
                Ok(Some(b)) => {
                    self.held += b.len();
                    self.batches.push_back(b);
                }
                Ok(None) => self.ended = true,
                Err(e) => {
                    self.ended = true;
                    self.error = Some((self.base + self.held, e));
                }
            }
        }
    }

    /// Record `i` (never one before the last asked for but one); an error
    /// the stream stopped at, at its record.
    fn get(&mut self, i: usize) -> Result<Option<TraceRecord>, String> {
        debug_assert!(i >= self.base, "a streamed record is asked for again");
        // Let go of the batches wholly before the record before `i`.
        while let Some(first) = self.batches.front() {
            if self.base + first.len() >= i {
                break;
            }
            self.base += first.len();
            self.held -= first.len();
            self.batches.pop_front();
        }
        self.fill(i);
        if let Some(r) = self.at(i) {
            return Ok(Some(*r));
        }
        match &self.error {
            Some((at, e)) if *at <= i => Err(e.clone()),
            _ => Ok(None),
        }
    }
}

/// A trace record as a request inside `span` bytes (offsets folded in,
/// sector-aligned).
fn in_span(r: TraceRecord, span: u64) -> Request {
    let len = r.len.min(span);
    let mut off = (r.offset % span) & !511;
    if off + len > span {
        off = (span - len) & !511;
    }
    Request {
        op: r.op,
        offset: off,
        len,
    }
}

/// Trace replay.
pub struct Replay {
    pub records: Records,
    pub next: usize,
    /// Issue at recorded times (else as fast as possible with `qd` outstanding).
    pub timed: bool,
    pub time_scale: f64,
    pub qd: u32,
    /// Addressed bytes: trace offsets are folded into this.
    pub span: u64,
}

impl Replay {
    fn record(&mut self, i: usize) -> Result<Option<TraceRecord>, String> {
        match &mut self.records {
            Records::Loaded(v) => Ok(v.get(i).copied()),
            Records::Streamed(c) => c.get(i),
        }
    }

    /// Record `i` as an array request inside the span; None past the end.
    pub fn request(&mut self, i: usize) -> Result<Option<Request>, String> {
        let span = self.span;
        Ok(self.record(i)?.map(|r| in_span(r, span)))
    }

    /// Record `i` as [`Self::request`] gives it, read ahead without
    /// letting go of the records before it: a hint of what comes (None
    /// past the end or on a read error, which the record's turn reports).
    pub fn upcoming(&mut self, i: usize) -> Option<Request> {
        let r = match &mut self.records {
            Records::Loaded(v) => v.get(i).copied(),
            Records::Streamed(c) => c.peek(i),
        };
        r.map(|r| in_span(r, self.span))
    }

    /// When record `i` arrives; None past the end.
    pub fn arrival_ns(&mut self, i: usize) -> Result<Option<Ns>, String> {
        let scale = self.time_scale;
        Ok(self.record(i)?.map(|r| (r.at_ns as f64 * scale) as Ns))
    }

    /// Records not yet issued may remain (a stream not read to its end may
    /// turn out to have none).
    pub fn more(&self) -> bool {
        match &self.records {
            Records::Loaded(v) => self.next < v.len(),
            Records::Streamed(c) => !c.ended || self.next < c.base + c.held,
        }
    }
}

pub enum Source {
    Closed(Closed),
    Replay(Replay),
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// Looking ahead (as the runner warms the members' models) changes
    /// neither what each record's turn gives nor, past the look, what the
    /// cursor holds: a streamed replay gives the records a loaded one gives.
    #[test]
    fn looking_ahead_in_a_streamed_trace_changes_no_record() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        for i in 0..20_000u64 {
            let block = (i * 7919) % 50_000 * 8;
            writeln!(f, "{}.000 0 {block} 8 {}", i / 3, i % 2).unwrap();
        }
        f.flush().unwrap();
        let path = f.path().to_str().unwrap().to_string();
        let loaded = crate::trace::read_file(&path, None, "--trace-format").unwrap();
        let replay = |records| Replay {
            records,
            next: 0,
            timed: true,
            time_scale: 1.0,
            qd: 1,
            span: 1 << 30,
        };
        let mut whole = replay(Records::Loaded(loaded.clone().into()));
        let mut streamed = replay(Records::Streamed(Box::new(StreamCursor::new(TraceFile {
            path,
            format: None,
            limit: None,
        }))));
        for i in 0..loaded.len() + 3 {
            for ahead in [12, 8, 4] {
                assert_eq!(
                    streamed.upcoming(i + ahead),
                    whole.upcoming(i + ahead),
                    "record {i}+{ahead}"
                );
            }
            assert_eq!(
                streamed.request(i).unwrap(),
                whole.request(i).unwrap(),
                "record {i}"
            );
            assert_eq!(
                streamed.arrival_ns(i + 1).unwrap(),
                whole.arrival_ns(i + 1).unwrap()
            );
            if let Records::Streamed(c) = &streamed.records {
                assert!(
                    c.batches.len() <= 3,
                    "the cursor holds {} batches",
                    c.batches.len()
                );
            }
        }
    }

    /// A malformed line that a look ahead reaches first still fails the
    /// replay, at its own record's turn (a look ahead must not swallow it).
    #[test]
    fn an_error_seen_looking_ahead_is_reported_at_its_turn() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        for i in 0..100u64 {
            if i == 50 {
                writeln!(f, "not a record").unwrap();
            } else {
                writeln!(f, "{i}.000 0 {} 8 1", i * 8).unwrap();
            }
        }
        f.flush().unwrap();
        let mut r = Replay {
            records: Records::Streamed(Box::new(StreamCursor::new(TraceFile {
                path: f.path().to_str().unwrap().to_string(),
                format: None,
                limit: None,
            }))),
            next: 0,
            timed: true,
            time_scale: 1.0,
            qd: 1,
            span: 1 << 30,
        };
        assert!(r.upcoming(80).is_none());
        let mut failed = None;
        for i in 0..100 {
            match r.request(i) {
                Ok(Some(_)) => {}
                Ok(None) => panic!("record {i}: the trace ended without its error"),
                Err(e) => {
                    failed = Some((i, e));
                    break;
                }
            }
        }
        let (i, e) = failed.expect("the malformed line fails the replay");
        assert!(i <= 50, "failed at record {i}");
        assert!(e.contains(":51:"), "{e}");
    }
}
