//! One submission queue and worker thread per member, so a slow member slows only
//! the work that needs it. A batch of operations on several members runs in
//! parallel; the caller waits for the whole batch.

use crate::member::{AlignedBuf, Member};
use std::io;
use std::sync::mpsc::{channel, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

type Job = Box<dyn FnOnce(&dyn Member) + Send>;

pub struct MemberQueue {
    member: Arc<dyn Member>,
    tx: Option<Sender<Job>>,
    worker: Option<JoinHandle<()>>,
}

impl MemberQueue {
    pub fn new(member: Arc<dyn Member>, index: usize) -> Self {
        let (tx, rx) = channel::<Job>();
        let m = member.clone();
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
        }
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

/// Run `ops` (member index, operation) on their members' queues in parallel and
/// return the results in the same order.
pub fn run_batch(queues: &[Option<MemberQueue>], mut ops: Vec<(usize, IoOp)>) -> Vec<IoResult> {
    let n = ops.len();
    // One operation: run it in the caller's thread (no hand-off; the common small
    // read). Members that model one actuator serialize themselves.
    if n == 1 {
        let (m, op) = ops.pop().expect("one op");
        return vec![match queues.get(m).and_then(|q| q.as_ref()) {
            Some(q) => run_op(q.member.as_ref(), op),
            None => Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("member {m} is not present"),
            )),
        }];
    }
    let (tx, rx) = channel::<(usize, IoResult)>();
    let mut results: Vec<Option<IoResult>> = (0..n).map(|_| None).collect();
    for (i, (m, op)) in ops.into_iter().enumerate() {
        let Some(q) = queues.get(m).and_then(|q| q.as_ref()) else {
            results[i] = Some(Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("member {m} is not present"),
            )));
            continue;
        };
        let tx = tx.clone();
        q.submit(Box::new(move |member: &dyn Member| {
            let _ = tx.send((i, run_op(member, op)));
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
