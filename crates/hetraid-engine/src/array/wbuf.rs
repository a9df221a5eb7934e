//! The write buffer (the RAIDX paper's, [Fekete, Varki]): a write is acknowledged
//! once its bytes are in memory and written to the members by a pool of
//! drainers meanwhile, so a burst keeps every member busy instead of each
//! request waiting for its slowest member. What the NBD contract allows: a
//! write is durable after a flush, and `flush` waits until the buffer has
//! drained (and reports a write that failed meanwhile). Reads see buffered
//! bytes (the same index the write-back log uses, core `LogIndex`).
//!
//! Order: writes are drained first in, first out, and a drainer does not
//! start a write while an earlier one overlapping it is still running, so
//! the members end with the newest bytes of every overlap; writes that do
//! not overlap go out in parallel.

#[allow(unused_imports)]
use super::*;
use hetraid_core::journal::LogIndex;
use hetraid_core::wbuf::DrainQueue;
use std::sync::Condvar;

struct State {
    /// What is buffered and what drains next (core `wbuf::DrainQueue`, the
    /// simulator's too).
    q: DrainQueue<Arc<Vec<u8>>>,
    /// A drained write that failed: reported by the next flush.
    failed: Option<String>,
    stop: bool,
}

pub(crate) struct WriteBuffer {
    state: Mutex<State>,
    /// Signalled when a write is queued or finishes, or at stop.
    changed: Condvar,
    index: RwLock<LogIndex<Arc<Vec<u8>>>>,
    drainers: Mutex<Vec<std::thread::JoinHandle<()>>>,
}

impl Array {
    /// Buffer writes in `bytes` of memory, drained by `drainers` threads
    /// (`serve --write-buffer`). Not with a write log or HPDA (their log
    /// decides when a write is acknowledged).
    pub fn start_write_buffer(self: &Arc<Self>, bytes: u64, drainers: usize) -> Result<()> {
        if self.log.is_some() {
            return Err(EngineError::Refused(
                "a write buffer does not go with a write log: the log decides when a write is acknowledged".into(),
            ));
        }
        if bytes == 0 || drainers == 0 {
            return Err(EngineError::Refused(
                "a write buffer needs some bytes and at least one drainer".into(),
            ));
        }
        let wb = Arc::new(WriteBuffer {
            state: Mutex::new(State {
                q: DrainQueue::new(bytes, drainers),
                failed: None,
                stop: false,
            }),
            changed: Condvar::new(),
            index: RwLock::new(LogIndex::default()),
            drainers: Mutex::new(Vec::new()),
        });
        if self.hot.wbuf.set(wb.clone()).is_err() {
            return Err(EngineError::Refused(
                "the write buffer is on already".into(),
            ));
        }
        let mut handles = wb.drainers.lock().unwrap();
        for _ in 0..drainers {
            let (array, wb) = (self.clone(), wb.clone());
            handles.push(std::thread::spawn(move || array.drain(&wb)));
        }
        Ok(())
    }

    /// Drain what is buffered and stop the drainers (before close).
    pub fn stop_write_buffer(&self) -> Result<()> {
        let Some(wb) = self.hot.wbuf.get() else {
            return Ok(());
        };
        let r = self.wait_drained(wb);
        wb.state.lock().unwrap().stop = true;
        wb.changed.notify_all();
        for h in wb.drainers.lock().unwrap().drain(..) {
            let _ = h.join();
        }
        r
    }

    /// A write into the buffer: waits for room (a write larger than the
    /// buffer waits for it to empty), then is acknowledged.
    pub(crate) fn buffered_write(&self, wb: &WriteBuffer, offset: u64, data: &[u8]) -> Result<()> {
        self.check_range(offset, data.len() as u64)?;
        if data.is_empty() {
            return Ok(());
        }
        let len = data.len() as u64;
        let data = Arc::new(data.to_vec());
        let mut st = wb.state.lock().unwrap();
        while !st.q.admits(len) && !st.stop {
            st = wb.changed.wait(st).unwrap();
        }
        let ticket = st.q.push(offset, len, data.clone());
        // Indexed under the state lock, in ticket order: a newer write
        // replaces an older one for reads.
        wb.index
            .write()
            .unwrap()
            .insert(offset, len, ticket, data, 0, 0);
        wb.changed.notify_all();
        Ok(())
    }

    /// A drainer: takes the oldest write no earlier running write overlaps,
    /// writes it to the members, drops it from the index unless a newer
    /// write replaced it.
    fn drain(&self, wb: &WriteBuffer) {
        loop {
            let job = {
                let mut st = wb.state.lock().unwrap();
                loop {
                    // The core's order (the simulator's too).
                    if let Some(p) = st.q.start_next() {
                        break Some(p);
                    }
                    if st.stop && st.q.queued() == 0 {
                        break None;
                    }
                    st = wb.changed.wait(st).unwrap();
                }
            };
            let Some(p) = job else { return };
            let r = self.write_now(p.offset, &p.item);
            let len = p.len;
            wb.index
                .write()
                .unwrap()
                .remove_if_unchanged(&hetraid_core::journal::Piece {
                    start: p.offset,
                    end: p.offset + len,
                    seq: p.ticket,
                    handle: p.item.clone(),
                    at: 0,
                });
            let mut st = wb.state.lock().unwrap();
            st.q.done(p.ticket);
            if let Err(e) = r {
                st.failed.get_or_insert_with(|| {
                    format!(
                        "a buffered write of {len} bytes at {} failed: {e}",
                        p.offset
                    )
                });
            }
            wb.changed.notify_all();
        }
    }

    /// Wait until every buffered write is on the members; the first that
    /// failed since the last wait is the error.
    pub(crate) fn wait_drained(&self, wb: &WriteBuffer) -> Result<()> {
        let mut st = wb.state.lock().unwrap();
        while st.q.used() > 0 {
            st = wb.changed.wait(st).unwrap();
        }
        match st.failed.take() {
            Some(e) => Err(EngineError::Refused(e)),
            None => Ok(()),
        }
    }

    /// The buffered pieces of `[offset, offset + len)`, looked up before
    /// the members are read: a piece drained meanwhile is on the members by
    /// the time it leaves the index, and one still in it is newer.
    pub(crate) fn buffer_pieces(
        &self,
        wb: &WriteBuffer,
        offset: u64,
        len: u64,
    ) -> Vec<hetraid_core::journal::Piece<Arc<Vec<u8>>>> {
        wb.index
            .read()
            .unwrap()
            .overlapping(offset, offset.saturating_add(len))
    }
}
