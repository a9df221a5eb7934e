//! What makes writes durable and a crash recoverable: flush, the
//! write-intent bitmap's pages, the clean/dirty mark and safe mode.

#[allow(unused_imports)]
use super::*;

impl Array {
    pub(crate) fn write_bitmap_pages(&self, bm: &Bitmap, pages: &[u64]) -> Result<()> {
        self.commit()?;
        let mut ops = Vec::new();
        for &m in &self.live_members() {
            for &p in pages {
                let src = bm.page(p);
                let mut b = AlignedBuf::zeroed(PAGE as usize);
                b[..src.len()].copy_from_slice(src);
                ops.push((
                    m,
                    IoOp::Write {
                        off: BITMAP_OFFSET + p,
                        buf: b,
                    },
                ));
            }
            ops.push((m, IoOp::Flush));
        }
        let idx: Vec<usize> = ops.iter().map(|(m, _)| *m).collect();
        for (r, m) in run_batch(&self.queues, ops).into_iter().zip(idx) {
            if let Err(e) = r {
                self.member_error(m, &e);
            }
        }
        Ok(())
    }

    /// Writes from now on skip the write-intent bitmap, so that benchmarks
    /// can measure what it costs. Not for use: a crash afterwards leaves
    /// parity the next assembly does not know to resync.
    #[doc(hidden)]
    pub fn without_bitmap_for_benchmarks(&self) {
        self.bitmap_off_for_bench.store(true, Ordering::Relaxed);
    }

    pub(crate) fn bitmap_begin(&self, bits: &[u64]) -> Result<()> {
        let mut bm = self.bitmap.lock().unwrap();
        let pages = bm.begin(bits);
        // Dirty before the first write of this run, even when its bits are
        // set already (kept for a re-add while a member is out): a clean
        // superblock is taken to mean no write was cut by a crash.
        if !pages.is_empty() || !self.marked_dirty.load(Ordering::Acquire) {
            self.mark_dirty()?;
            self.marked_dirty.store(true, Ordering::Release);
        }
        if !pages.is_empty() {
            self.write_bitmap_pages(&bm, &pages)?;
        }
        Ok(())
    }

    pub(crate) fn mark_dirty(&self) -> Result<()> {
        let mut sb = self.sb.lock().unwrap();
        // A new write generation at every clean -> dirty transition, on
        // every live member before the first write: a member that comes
        // back from before it is known stale. (A crash's recovery marks the
        // array clean, so a run after one starts a generation too.)
        if sb.clean {
            sb.clean = false;
            sb.generation += 1;
            sb.generation_started = false;
            self.persist(&mut sb)?;
            // Every live member has the generation now; a member found one
            // behind it later while some member says so was put back.
            sb.generation_started = true;
            self.persist(&mut sb)?;
        }
        Ok(())
    }

    /// Bits are about to be cleared, or log records let go, in this
    /// generation: the superblock says so first (`generation_cleared`), so
    /// a member older than it is never resynced from the bitmap alone.
    pub(super) fn note_cleared(&self) -> Result<()> {
        let mut sb = self.sb.lock().unwrap();
        if sb.generation_cleared < sb.generation {
            sb.generation_cleared = sb.generation;
            self.persist(&mut sb)?;
        }
        Ok(())
    }

    /// Clean on every live member (nothing in flight: the caller knows);
    /// the next write marks it dirty again, in a new generation.
    pub(crate) fn mark_clean(&self, sb: &mut Superblock) -> Result<()> {
        if !sb.clean {
            sb.clean = true;
            self.persist(sb)?;
        }
        self.marked_dirty.store(false, Ordering::Release);
        Ok(())
    }

    /// md's safe mode, on a timer: a degraded bitmap array (no log) that
    /// began no write since the last tick and has none in flight is flushed,
    /// which marks it clean ([`Array::flush`]), so a crash while it idles is
    /// not taken for a crash in the middle of writes. `last` is the caller's
    /// count of writes begun at its last tick.
    pub fn safe_mode_tick(&self, last: &mut u64) -> Result<()> {
        if self.read_only || self.log.is_some() || !self.keeps_bitmap() {
            return Ok(());
        }
        {
            let bm = self.bitmap.lock().unwrap();
            let quiet = bm.idle() && bm.begun == *last;
            *last = bm.begun;
            if !quiet {
                return Ok(());
            }
        }
        if self.sb.lock().unwrap().clean {
            return Ok(());
        }
        self.flush()
    }

    /// Make every completed write durable on every member, then clear idle bitmap bits.
    pub fn flush(&self) -> Result<()> {
        if self.read_only {
            return Ok(());
        }
        // Buffered writes first reach the members.
        if let Some(wb) = self.hot.wbuf.get() {
            self.wait_drained(wb)?;
        }
        // Which bits this flush may clear, taken before it: a write that
        // ends while the members flush may have missed the flush.
        let clearable = self.bitmap.lock().unwrap().clearable();
        let live = self.live_members();
        let ops: Vec<(usize, IoOp)> = live.iter().map(|&m| (m, IoOp::Flush)).collect();
        for (r, m) in run_batch(&self.queues, ops).into_iter().zip(live) {
            if let Err(e) = r {
                self.member_error(m, &e);
            }
        }
        // Beyond what the layout survives (not merely its guaranteed
        // tolerance: RAID10 lives through members of different pairs).
        let st = self.state();
        let out: Vec<usize> = (0..st.members.len())
            .filter(|&i| self.holds[i] && st.members[i] == MemberState::Failed)
            .collect();
        if out.len() > self.layout.redundancy().tolerance()
            && !hetraid_core::layout::survives(self.layout(), &out)
        {
            return Err(EngineError::TooManyFailures(format!(
                "{} members failed",
                out.len()
            )));
        }
        // While a member holding data is out, the bits stay: they are what a
        // member coming back intact must resync (mdadm --re-add).
        if self.keeps_bitmap() {
            // md's safe mode: with nothing in flight the array is marked
            // clean, so a crash later is not taken for a crash in the middle
            // of writes. The bits (regions written while a member is out,
            // for its re-add) stay; a degraded array assembled clean after
            // a crash starts without --force. The bitmap's lock keeps
            // writes from beginning meanwhile; the next one marks it dirty
            // (a new generation) before it starts.
            if self.log.is_none() {
                let bm = self.bitmap.lock().unwrap();
                if bm.idle() {
                    self.mark_clean(&mut self.sb.lock().unwrap())?;
                }
            }
            return Ok(());
        }
        let mut bm = self.bitmap.lock().unwrap();
        let pages = bm.clear_idle(&clearable);
        if !pages.is_empty() {
            self.note_cleared()?;
            self.write_bitmap_pages(&bm, &pages)?;
        }
        Ok(())
    }

    /// Flush every live member (a member that fails is failed).
    pub(crate) fn flush_members(&self) -> Result<()> {
        // The write log calls this before it lets records go (a
        // checkpoint): writes of this generation are then no longer all in
        // the log, which the superblock says first (`generation_cleared`).
        if self.log.is_some() && !self.read_only {
            self.note_cleared()?;
        }
        let live = self.live_members();
        let ops: Vec<(usize, IoOp)> = live.iter().map(|&m| (m, IoOp::Flush)).collect();
        for (r, m) in run_batch(&self.queues, ops).into_iter().zip(live) {
            if let Err(e) = r {
                if !self.member_error(m, &e) {
                    return Err(io_err(self.hot.slots[m].as_ref(), e));
                }
            }
        }
        Ok(())
    }
}
