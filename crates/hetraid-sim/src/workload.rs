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

/// A streamed trace: the records from `base` on that were read and not yet
/// let go (the one being issued and the next, whose arrival is scheduled).
pub struct StreamCursor {
    open: TraceFile,
    stream: Option<crate::trace::Stream>,
    window: std::collections::VecDeque<TraceRecord>,
    base: usize,
    ended: bool,
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
            window: Default::default(),
            base: 0,
            ended: false,
        }
    }

    /// Record `i` without letting go of those before it (a look ahead:
    /// the window then holds the records up to `i`).
    fn peek(&mut self, i: usize) -> Result<Option<TraceRecord>, String> {
        if i < self.base {
            return Ok(None);
        }
        self.fill(i)?;
        Ok(self.window.get(i - self.base).copied())
    }

    /// Read until the window holds record `i` or the trace ends.
    fn fill(&mut self, i: usize) -> Result<(), String> {
        // Bounded by the trace: each round reads a record or ends.
        while self.base + self.window.len() <= i && !self.ended {
            let stream = match &mut self.stream {
                Some(s) => s,
                None => {
                    let o = &self.open;
                    self.stream.insert(crate::trace::Stream::open(
                        &o.path,
                        o.format.as_deref(),
                        "--trace-format",
                        o.limit,
                    )?)
                }
            };
            match stream.next_record()? {
                Some(r) => self.window.push_back(r),
                None => self.ended = true,
            }
        }
        Ok(())
    }

    /// Record `i` (never one before the last asked for but one).
    fn get(&mut self, i: usize) -> Result<Option<TraceRecord>, String> {
        debug_assert!(i >= self.base, "a streamed record is asked for again");
        while self.base < i && !self.window.is_empty() {
            self.window.pop_front();
            self.base += 1;
        }
        self.fill(i)?;
        Ok(i.checked_sub(self.base)
            .and_then(|k| self.window.get(k))
            .copied())
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
            Records::Streamed(c) => c.peek(i).ok().flatten(),
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
            Records::Streamed(c) => !c.ended || self.next < c.base + c.window.len(),
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
                    c.window.len() <= 14,
                    "the cursor holds {} records",
                    c.window.len()
                );
            }
        }
    }
}
