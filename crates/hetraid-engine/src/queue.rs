//! One submission queue and worker thread per member, so a slow member slows only
//! the work that needs it. A batch of operations on several members runs in
//! parallel; the caller waits for the whole batch.
//!
//! Parallel costs a hand-off: two thread switches per operation (send, wake,
//! answer, wake), 10–20 µs of CPU on a small VM, which is more than a 4 KiB
//! read or write takes on an SSD or in the page cache. So a small batch whose
//! members have answered fast lately runs in the caller's thread, one
//! operation after the other: its latency is the sum of a few microseconds,
//! and requests still overlap because the NBD server runs many at once. A
//! member that takes longer than [`INLINE_LATENCY_NS_MAX`] per small
//! operation (a disk) gets its operations in parallel again, where waiting
//! on several actuators at once is what saves time.

use crate::member::{AlignedBuf, Member};
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

type Job = Box<dyn FnOnce(&dyn Member) + Send>;

/// A small operation on a member that answers within this (the fastest of
/// its last [`LATENCY_WINDOW_OPS`] small operations) runs in the caller's
/// thread (see the module's documentation).
pub const INLINE_LATENCY_NS_MAX: u64 = 50_000;
/// Operations up to this size teach a member's recent latency; a batch of
/// at most [`INLINE_OPS_MAX`] such operations may run in the caller's thread.
pub const INLINE_OP_BYTES_MAX: usize = 64 << 10;
pub const INLINE_OPS_MAX: usize = 8;
/// Small operations per latency window. The window's fastest operation
/// speaks for the member: on a busy CPU a thread preempted mid-operation
/// measures the scheduler, not the member, and that never makes all of a
/// window's operations slow; a disk's are all slow.
pub const LATENCY_WINDOW_OPS: u64 = 64;

/// A member's recent small-operation latency (see [`LATENCY_WINDOW_OPS`]).
/// Updates from several threads race benignly: a sample lost at a window's
/// edge changes nothing that matters.
#[derive(Default)]
struct RecentLatency {
    /// The fastest operation of the last whole window (0 until one ends:
    /// a new member is taken as fast).
    last_window_min_ns: AtomicU64,
    window_min_ns: AtomicU64,
    window_ops: AtomicU64,
}

impl RecentLatency {
    fn new() -> Self {
        let l = Self::default();
        l.window_min_ns.store(u64::MAX, Ordering::Relaxed);
        l
    }

    fn add(&self, ns: u64) {
        self.window_min_ns.fetch_min(ns, Ordering::Relaxed);
        if self.window_ops.fetch_add(1, Ordering::Relaxed) % LATENCY_WINDOW_OPS
            == LATENCY_WINDOW_OPS - 1
        {
            let min = self.window_min_ns.swap(u64::MAX, Ordering::Relaxed);
            self.last_window_min_ns.store(min, Ordering::Relaxed);
        }
    }

    /// An operation of `bytes` took `ns`: counted as a small one would be,
    /// scaled to [`INLINE_OP_BYTES_MAX`] when larger (a 1 MiB read from
    /// memory-speed members stays fast, a disk's seek does not).
    fn learn(&self, ns: u64, bytes: u64) {
        let small = INLINE_OP_BYTES_MAX as u64;
        self.add(if bytes <= small {
            ns
        } else {
            ns.saturating_mul(small) / bytes
        });
    }

    fn fast(&self) -> bool {
        self.last_window_min_ns.load(Ordering::Relaxed) <= INLINE_LATENCY_NS_MAX
    }
}

pub struct MemberQueue {
    member: Arc<dyn Member>,
    tx: Option<Sender<Job>>,
    worker: Option<JoinHandle<()>>,
    latency: Arc<RecentLatency>,
}

impl MemberQueue {
    pub fn new(member: Arc<dyn Member>, index: usize) -> Self {
        let (tx, rx) = channel::<Job>();
        let m = member.clone();
        let latency = Arc::new(RecentLatency::new());
        let worker = std::thread::Builder::new()
            .name(format!("hetraid-m{index}"))
            .spawn(move || {
                for job in rx {
                    job(member.as_ref());
                }
            })
            .expect("spawn member worker");
        Self {
            member: m,
            tx: Some(tx),
            worker: Some(worker),
            latency,
        }
    }

    /// Run `op` on this member's thread or the caller's, teaching the
    /// member's recent latency (flushes aside: their time is the device's
    /// cache, not an operation's).
    fn timed(latency: &RecentLatency, member: &dyn Member, op: IoOp) -> IoResult {
        let (bytes, flush) = (op.bytes() as u64, matches!(op, IoOp::Flush));
        let t0 = Instant::now();
        let r = run_op(member, op);
        if !flush {
            latency.learn(t0.elapsed().as_nanos().min(u64::MAX as u128) as u64, bytes);
        }
        r
    }

    /// The member answered its recent small operations fast (see the
    /// module's documentation): work for it may run in the caller's thread.
    fn fast(&self) -> bool {
        self.latency.fast()
    }

    /// An operation of `bytes` done outside the queue took `ns`: it teaches
    /// the recent latency as the queue's own operations do.
    pub(crate) fn teach(&self, ns: u64, bytes: u64) {
        self.latency.learn(ns, bytes);
    }

    fn submit(&self, job: Job) {
        // The worker only exits when the queue is dropped, so send cannot fail.
        self.tx
            .as_ref()
            .expect("queue open")
            .send(job)
            .expect("member worker alive");
    }
}

impl Drop for MemberQueue {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}

/// One member operation of a batch.
pub enum IoOp {
    Read {
        off: u64,
        len: usize,
    },
    Write {
        off: u64,
        buf: AlignedBuf,
    },
    /// Write borrowed pieces back to back at `off` (no copy; `pwritev` on files).
    WriteParts {
        off: u64,
        parts: Vec<Borrowed>,
    },
    Flush,
}

impl IoOp {
    fn bytes(&self) -> usize {
        match self {
            IoOp::Read { len, .. } => *len,
            IoOp::Write { buf, .. } => buf.len(),
            IoOp::WriteParts { parts, .. } => parts.iter().map(|p| p.1).sum(),
            IoOp::Flush => 0,
        }
    }
}

/// A slice lent to a member worker for the duration of one [`run_batch`].
///
/// Sound because `run_batch` does not return before every operation it was given
/// has finished: it waits until each job has dropped its result sender, which a job
/// does when it completes or unwinds. The lender's slices therefore outlive every
/// use, exactly as with scoped threads.
pub struct Borrowed(*const u8, usize);

// SAFETY: see the type's documentation; the bytes are only read.
unsafe impl Send for Borrowed {}

impl Borrowed {
    pub fn new(s: &[u8]) -> Self {
        Borrowed(s.as_ptr(), s.len())
    }
}

/// Result of one operation: read data (reads) or nothing.
pub type IoResult = io::Result<Option<AlignedBuf>>;

/// Every one of `members` answered its recent operations fast (an absent
/// one counts as fast): their work may run in the caller's thread, one
/// after the other (see the module's documentation). The one rule for
/// batches here and the engine's direct reads and writes.
pub(crate) fn all_fast(
    queues: &[Option<MemberQueue>],
    mut members: impl Iterator<Item = usize>,
) -> bool {
    members.all(|m| {
        queues
            .get(m)
            .and_then(|q| q.as_ref())
            .is_none_or(|q| q.fast())
    })
}

/// Run `ops` (member index, operation) on their members' queues in parallel and
/// return the results in the same order.
pub fn run_batch(queues: &[Option<MemberQueue>], ops: Vec<(usize, IoOp)>) -> Vec<IoResult> {
    let absent = |m: usize| {
        Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("member {m} is not present"),
        ))
    };
    // One operation, or a small batch on members that answer fast: in the
    // caller's thread (no hand-off). Members that model one actuator
    // serialize themselves.
    let inline = ops.len() == 1
        || (ops.len() <= INLINE_OPS_MAX
            && ops.iter().all(|(_, op)| op.bytes() <= INLINE_OP_BYTES_MAX)
            && all_fast(queues, ops.iter().map(|(m, _)| *m)));
    if inline {
        return ops
            .into_iter()
            .map(|(m, op)| match queues.get(m).and_then(|q| q.as_ref()) {
                Some(q) => MemberQueue::timed(&q.latency, q.member.as_ref(), op),
                None => absent(m),
            })
            .collect();
    }
    let n = ops.len();
    let (tx, rx) = channel::<(usize, IoResult)>();
    let mut results: Vec<Option<IoResult>> = (0..n).map(|_| None).collect();
    for (i, (m, op)) in ops.into_iter().enumerate() {
        let Some(q) = queues.get(m).and_then(|q| q.as_ref()) else {
            results[i] = Some(absent(m));
            continue;
        };
        let tx = tx.clone();
        let lat = q.latency.clone();
        q.submit(Box::new(move |member: &dyn Member| {
            let _ = tx.send((i, MemberQueue::timed(&lat, member, op)));
        }));
    }
    drop(tx);
    for (i, r) in rx {
        results[i] = Some(r);
    }
    results
        .into_iter()
        .map(|r| r.expect("every job answers"))
        .collect()
}

fn run_op(member: &dyn Member, op: IoOp) -> IoResult {
    match op {
        IoOp::Read { off, len } => {
            let mut b = AlignedBuf::pooled(len);
            member.read_at(&mut b, off).map(|_| Some(b))
        }
        IoOp::Write { off, buf } => {
            let r = member.write_at(&buf, off).map(|_| None);
            buf.recycle();
            r
        }
        IoOp::WriteParts { off, parts } => {
            // SAFETY: the lender keeps the bytes alive until run_batch returns.
            let slices: Vec<&[u8]> = parts
                .iter()
                .map(|b| unsafe { std::slice::from_raw_parts(b.0, b.1) })
                .collect();
            member.write_vectored_at(&slices, off).map(|_| None)
        }
        IoOp::Flush => member.flush().map(|_| None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// A member that answers after `delay` and notes which thread ran each
    /// operation.
    struct Noting {
        delay: std::time::Duration,
        threads: Mutex<Vec<String>>,
    }

    impl Member for Noting {
        fn read_at(&self, buf: &mut [u8], _off: u64) -> io::Result<()> {
            std::thread::sleep(self.delay);
            let name = std::thread::current().name().unwrap_or("").to_string();
            self.threads.lock().unwrap().push(name);
            buf.fill(7);
            Ok(())
        }
        fn write_at(&self, _buf: &[u8], _off: u64) -> io::Result<()> {
            Ok(())
        }
        fn flush(&self) -> io::Result<()> {
            Ok(())
        }
        fn len(&self) -> u64 {
            1 << 20
        }
        fn name(&self) -> String {
            "noting".into()
        }
    }

    fn queues(delay_us: u64) -> (Vec<Arc<Noting>>, Vec<Option<MemberQueue>>) {
        let ms: Vec<Arc<Noting>> = (0..2)
            .map(|_| {
                Arc::new(Noting {
                    delay: std::time::Duration::from_micros(delay_us),
                    threads: Mutex::new(Vec::new()),
                })
            })
            .collect();
        let qs = ms
            .iter()
            .enumerate()
            .map(|(i, m)| Some(MemberQueue::new(m.clone() as Arc<dyn Member>, i)))
            .collect();
        (ms, qs)
    }

    fn two_reads() -> Vec<(usize, IoOp)> {
        (0..2)
            .map(|m| (m, IoOp::Read { off: 0, len: 4096 }))
            .collect()
    }

    /// Small batches on fast members run in the caller's thread; on members
    /// slower than the hand-off, once a window has shown it, in parallel on
    /// the members' own threads. Both return every operation's data.
    #[test]
    fn small_batches_run_inline_only_on_fast_members() {
        for (delay_us, slow) in [(0, false), (200, true)] {
            let (ms, qs) = queues(delay_us);
            for _ in 0..LATENCY_WINDOW_OPS {
                for r in run_batch(&qs, two_reads()) {
                    assert!(r.unwrap().unwrap().iter().all(|&b| b == 7));
                }
            }
            ms.iter().for_each(|m| m.threads.lock().unwrap().clear());
            let r = run_batch(&qs, two_reads());
            assert_eq!(r.len(), 2);
            for (i, m) in ms.iter().enumerate() {
                let t = m.threads.lock().unwrap().clone();
                let on_own = t == [format!("hetraid-m{i}")];
                assert_eq!(on_own, slow, "delay {delay_us} us: ran on {t:?}");
            }
        }
    }

    /// Large operations go to the members' threads whatever their speed.
    #[test]
    fn large_batches_run_in_parallel() {
        let (ms, qs) = queues(0);
        let ops = (0..2)
            .map(|m| {
                (
                    m,
                    IoOp::Read {
                        off: 0,
                        len: 256 << 10,
                    },
                )
            })
            .collect();
        run_batch(&qs, ops);
        for (i, m) in ms.iter().enumerate() {
            assert_eq!(*m.threads.lock().unwrap(), [format!("hetraid-m{i}")]);
        }
    }
}
