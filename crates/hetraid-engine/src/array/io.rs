//! The request path: reads and writes planned by the core, executed on the
//! member queues, and read errors corrected under the stripe lock.

#[allow(unused_imports)]
use super::*;

impl Array {
    /// Read `buf.len()` bytes at `offset`.
    #[inline]
    pub fn read(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        // No write buffer, no write-back log: straight to the members, the
        // whole path inlined (see `member::slot::pread_exact` on why the
        // calls between here and the system call cost).
        if !self.hot.write_back_log && self.hot.wbuf.get().is_none() {
            return self.read_members(offset, buf);
        }
        self.read_layered(offset, buf)
    }

    /// A read with a write buffer or a write-back log in front.
    #[inline(never)]
    fn read_layered(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        if let Some(wb) = self.hot.wbuf.get() {
            // Buffered writes are newer than the members (looked up first).
            let pieces = self.buffer_pieces(wb, offset, buf.len() as u64);
            self.read_members_cold(offset, buf)?;
            for p in pieces {
                let at = (p.start - offset) as usize;
                let n = (p.end - p.start) as usize;
                buf[at..at + n].copy_from_slice(&p.handle[p.at as usize..p.at as usize + n]);
            }
            return Ok(());
        }
        let Some(log) = self.log.as_ref().filter(|l| l.mode() == LogMode::WriteBack) else {
            return self.read_members_cold(offset, buf);
        };
        // Write-back: what the log holds is newer. The index is looked up
        // before the members are read: a piece reclaimed meanwhile is on the
        // members by the time it leaves the index.
        let end = offset.saturating_add(buf.len() as u64);
        let pieces = log.overlapping(offset, end);
        self.note_user_io();
        if let Some(h) = &self.hpda {
            h.read();
        }
        if !hetraid_core::journal::covers(&pieces, offset, end) {
            self.read_members_cold(offset, buf)?;
        } else if end > self.capacity() {
            return self.read_members_cold(offset, buf);
        }
        for p in pieces {
            let at = (p.start - offset) as usize;
            let n = (p.end - p.start) as usize;
            buf[at..at + n].copy_from_slice(&p.handle[p.at as usize..p.at as usize + n]);
        }
        Ok(())
    }

    /// A planner for the read fast paths: with the read policy and the
    /// members' loads when reads balance over copies (core `readbalance`).
    #[inline]
    fn read_planner(&self) -> Planner<'_> {
        let p = Planner::new(self.layout.as_ref(), WritePolicy::Md, Vec::new())
            .with_sat_out(self.sat_out());
        if self.balance_reads.load(Ordering::Relaxed) {
            p.with_reads(self.read_policy(), self.member_loads())
        } else {
            p
        }
    }

    /// Read from the members (the log aside): out of line, for the
    /// layered paths.
    #[inline(never)]
    fn read_members_cold(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.read_members(offset, buf)
    }

    /// Read from the members (the log aside).
    #[inline(always)]
    fn read_members(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.note_user_io();
        // Fast path: inside one chunk on an in-sync member, read it directly (no
        // plan, no stripe lock — as MD's chunk-aligned reads bypass the stripe cache).
        let len = buf.len() as u64;
        let direct = if !self.hot.all_in_sync.load(Ordering::Acquire)
            || self.hot.sat_out_any.load(Ordering::Relaxed)
        {
            self.read_planner()
                .direct_read(offset, len, &self.state.read().unwrap())
        } else if let Some(map) = &self.hot.direct_map {
            // Common case: no lock, no virtual call (core `DirectMap`).
            map.locate(offset, len)
        } else {
            // No lock at all (a shared read-only flag).
            self.read_planner()
                .direct_read(offset, len, &self.healthy_state)
        };
        if let Some((m, off)) = direct {
            // One slot load on the hot path; an error from a slot emptied meanwhile
            // is not the member's fault, so only a present member is failed.
            // A read error is counted here and corrected under the stripe
            // lock by the planned path below, even when it was transient.
            match self.hot.slots[m].read_fast(buf, DATA_OFFSET + off) {
                Ok(()) => return Ok(()),
                Err(e) if self.hot.slots[m].present() => {
                    let stripe = self
                        .layout
                        .locate_chunk(offset / self.layout.chunk_bytes())
                        .0;
                    let suspect = (!self.read_error(m, &e)).then_some((m, stripe));
                    return self.run_suspect(
                        Request::read(offset, buf.len() as u64),
                        UserBuf::Read(buf),
                        suspect,
                    );
                }
                Err(_) => {}
            }
        }
        // Larger healthy reads: straight from the members, contiguous pieces merged.
        let req = Request::read(offset, buf.len() as u64);
        match self.direct_io(&req, UserBuf::Read(&mut *buf)) {
            Direct::Done => Ok(()),
            Direct::Fallback => self.run(req, UserBuf::Read(buf)),
            Direct::ReadError(m, stripe, e) => {
                let suspect = (!self.read_error(m, &e)).then_some((m, stripe));
                self.run_suspect(req, UserBuf::Read(buf), suspect)
            }
        }
    }

    /// Write `data` at `offset` (durable after [`Array::flush`]).
    pub fn write(&self, offset: u64, data: &[u8]) -> Result<()> {
        match self.hot.wbuf.get() {
            Some(wb) if !self.read_only => self.buffered_write(wb, offset, data),
            _ => self.write_now(offset, data),
        }
    }

    /// A write to the members now (the write buffer's drainers call it).
    pub(crate) fn write_now(&self, offset: u64, data: &[u8]) -> Result<()> {
        if self.read_only {
            return Err(EngineError::Refused(
                "the array was opened read-only; nothing was written".into(),
            ));
        }
        self.commit()?;
        self.note_user_io();
        if let Some(log) = &self.log {
            if log.all_lost() {
                return Err(EngineError::Refused(
                    "the write log failed on every copy: writes are refused, as they could no longer be made crash-safe; close the array (hetraid stop serving, or any command) to write what the log held to the members and go on without a log".into(),
                ));
            }
            // Dirty until a clean close: after a crash the superblock says
            // the log may hold writes (what a lost log cost).
            if !self.marked_dirty.load(Ordering::Acquire) {
                self.mark_dirty()?;
                self.marked_dirty.store(true, Ordering::Release);
            }
        }
        if let Some(log) = self.log.as_ref().filter(|l| l.mode() == LogMode::WriteBack) {
            let r = self.with_log_room(|alone| match &self.hpda {
                Some(h) => self.hpda_write(h, log, offset, data, alone),
                None => self.write_back(log, offset, data, alone),
            });
            self.record_log_copies(false)?;
            return r;
        }
        if self.checksums && self.log.is_none() {
            if let Some(done) = self.write_direct_marked(offset, data)? {
                return Ok(done);
            }
        }
        if self.checksums || self.log.is_some() {
            // Writes go through the planned path, which marks the bitmap or
            // logs the stripe updates.
            let r = self.run(
                Request::write(offset, data.len() as u64),
                UserBuf::Write(data),
            );
            self.record_log_copies(false)?;
            return r;
        }
        if let Some((m, off)) = self.direct_write_target(offset, data.len() as u64) {
            match self.hot.slots[m].write_at(data, DATA_OFFSET + off) {
                Ok(()) => return Ok(()),
                Err(e) if self.hot.slots[m].present() => {
                    if !self.member_error(m, &e) {
                        return Err(io_err(self.hot.slots[m].as_ref(), e));
                    }
                }
                Err(_) => {}
            }
        }
        if let Direct::Done = self.direct_io(
            &Request::write(offset, data.len() as u64),
            UserBuf::Write(data),
        ) {
            return Ok(());
        }
        self.run(
            Request::write(offset, data.len() as u64),
            UserBuf::Write(data),
        )
    }

    /// A write the planner sends straight to one member (no redundancy to
    /// update) on a checksummed array: under its stripe's lock (the data
    /// and its checksum entry are two updates, and a concurrent write of the
    /// same block must not interleave them) and its bitmap bit (a crash
    /// between them is repaired at assembly), as the planned path would,
    /// without the plan, the stripe buffers and the member queue: a 4 KiB
    /// write over NBD on a one-member RAID0 cost 5.6 us of server CPU
    /// through them, 4.4 us without checksums. None: not such a write (or
    /// the member failed it and the planned path decides).
    fn write_direct_marked(&self, offset: u64, data: &[u8]) -> Result<Option<()>> {
        // Healthy arrays only: anything else the planned path decides.
        if !self.hot.all_in_sync.load(Ordering::Acquire) {
            return Ok(None);
        }
        let Some((m, off)) = self.direct_write_target(offset, data.len() as u64) else {
            return Ok(None);
        };
        let stripe = self
            .layout
            .locate_chunk(offset / self.layout.chunk_bytes())
            .0;
        let _g = self.lock_stripe(stripe);
        let bits = self
            .write_marks_bitmap()
            .then(|| [self.bitmap.lock().unwrap().bit_of(stripe)]);
        if let Some(b) = &bits {
            self.bitmap_begin(b)?;
        }
        match self.hot.slots[m].write_at(data, DATA_OFFSET + off) {
            Ok(()) => {
                if let Some(b) = &bits {
                    self.bitmap.lock().unwrap().end(b);
                }
                Ok(Some(()))
            }
            // Failed part-way: the region stays dirty (never cleared in this
            // run), as the planned path leaves it.
            Err(e) if self.hot.slots[m].present() && !self.member_error(m, &e) => {
                Err(io_err(self.hot.slots[m].as_ref(), e))
            }
            Err(_) => Ok(None),
        }
    }

    /// Where a write of `len` at `offset` goes when the planner sends it
    /// straight to one member (core `Planner::direct_write`: no redundancy
    /// to update, inside one chunk).
    fn direct_write_target(&self, offset: u64, len: u64) -> Option<(usize, u64)> {
        let planner = Planner::new(self.layout.as_ref(), WritePolicy::Md, Vec::new());
        if self.hot.all_in_sync.load(Ordering::Acquire) {
            planner.direct_write(offset, len, &self.healthy_state)
        } else {
            planner.direct_write(offset, len, &self.state.read().unwrap())
        }
    }

    /// Whether user writes mark the write-intent bitmap: with redundancy or
    /// checksums (even RAID0 marks its writes then: a crash between a block
    /// and its checksum is repaired from the bitmap), unless a write log
    /// stands in for it (every stripe update is in the log before the
    /// members are written; a log that lost every copy protects nothing,
    /// so the bitmap again), or a benchmark switched it off.
    fn write_marks_bitmap(&self) -> bool {
        self.live_log().is_none()
            && !self.bitmap_off_for_bench.load(Ordering::Relaxed)
            && (self.layout.redundancy() != hetraid_core::Redundancy::None || self.checksums)
    }

    pub(crate) fn run(&self, req: Request, buf: UserBuf<'_>) -> Result<()> {
        self.run_suspect(req, buf, None)
    }

    /// [`Array::run`], first correcting `suspect` (member, stripe): a read
    /// error the unlocked fast path met.
    fn run_suspect(
        &self,
        req: Request,
        mut buf: UserBuf<'_>,
        suspect: Option<(usize, u64)>,
    ) -> Result<()> {
        // Lock the stripes first and plan under the locks: a plan made before a
        // rebuild finished a stripe would skip the member the rebuild just filled.
        let cap = self.capacity();
        if req.offset.checked_add(req.len).is_none_or(|e| e > cap) {
            return Err(hetraid_core::PlanError::OutOfRange {
                offset: req.offset,
                len: req.len,
                capacity: cap,
            }
            .into());
        }
        let chunk = self.layout.chunk_bytes();
        let stripes = (req.offset / chunk..(req.offset + req.len).div_ceil(chunk))
            .map(|c| self.layout.locate_chunk(c).0);
        let _g = self.lock_stripes(stripes);
        // Members corrected (read error, data written back) during this request,
        // and members left out of it (read-only arrays cannot write back).
        let mut corrected: Vec<(usize, u64)> = Vec::new();
        let mut excluded: Vec<usize> = Vec::new();
        if let Some((m, s)) = suspect {
            if self.read_only {
                excluded.push(m);
            } else if self.correct_locked(m, &[s]) {
                corrected.push((m, s));
            } else {
                let e = std::io::Error::other("its data could not be rewritten after a read error");
                if !self.member_error(m, &e) {
                    return Err(io_err(self.hot.slots[m].as_ref(), e));
                }
            }
        }
        // Each retry follows a member failure or a first correction of a member,
        // so it is bounded by twice the member count.
        for _ in 0..=2 * self.hot.slots.len() {
            let plan = {
                let mut state = self.state.read().unwrap().clone();
                excluded
                    .iter()
                    .for_each(|&m| state.members[m] = MemberState::Failed);
                self.planner().plan(&req, &state)?
            };
            match self.execute(&plan, &mut buf) {
                Ok(()) => return Ok(()),
                Err(Retry::MemberFailed) => continue,
                Err(Retry::ReadError(m, _, _)) if self.read_only => excluded.push(m),
                Err(Retry::ReadError(m, stripes, _)) => {
                    // Reconstruct what the member should hold in the stripes
                    // whose read failed and write it back (MD's read-error
                    // correction). A second error there after that, or a failed
                    // rewrite, fails the member.
                    let again = stripes.iter().any(|s| corrected.contains(&(m, *s)));
                    if again || !self.correct_locked(m, &stripes) {
                        let e = std::io::Error::other("read error after its data was rewritten");
                        if !self.state().members[m].eq(&MemberState::Failed)
                            && !self.member_error(m, &e)
                        {
                            return Err(io_err(self.hot.slots[m].as_ref(), e));
                        }
                    }
                    corrected.extend(stripes.iter().map(|&s| (m, s)));
                }
                Err(Retry::Fatal(e)) => return Err(e),
            }
        }
        Err(EngineError::TooManyFailures(
            "members kept failing during one request".into(),
        ))
    }

    /// Execute a plan whose stripes the caller has locked.
    pub(crate) fn execute(
        &self,
        plan: &Plan,
        buf: &mut UserBuf<'_>,
    ) -> std::result::Result<(), Retry> {
        let bits: Vec<u64> = if plan.op == Op::Write && self.write_marks_bitmap() {
            let bm = self.bitmap.lock().unwrap();
            let mut b: Vec<u64> = plan.stripes.iter().map(|s| bm.bit_of(s.stripe)).collect();
            b.dedup();
            b
        } else {
            vec![]
        };
        if !bits.is_empty() {
            self.bitmap_begin(&bits).map_err(Retry::Fatal)?;
        }
        let r = self.execute_locked(plan, buf);
        // A write that failed part-way leaves its regions dirty (never cleared in
        // this run), so the next assembly resyncs them.
        if !bits.is_empty() && !matches!(r, Err(Retry::Fatal(_))) {
            self.bitmap.lock().unwrap().end(&bits);
        }
        r
    }

    pub(crate) fn execute_locked(
        &self,
        plan: &Plan,
        buf: &mut UserBuf<'_>,
    ) -> std::result::Result<(), Retry> {
        if let UserBuf::Write(data) = buf {
            // All stripes of a write at once: reads merged per member, the
            // arithmetic per stripe, writes merged per member (a 1 MiB full-stripe
            // write becomes one operation per member).
            // Stripe buffers come from a pool: no allocation or zeroing per request.
            let mut bufs: Vec<StripeBufs> = {
                let mut pool = self.stripe_pool.lock().unwrap();
                let keep = pool.len().saturating_sub(plan.stripes.len());
                pool.split_off(keep)
            };
            for (i, sp) in plan.stripes.iter().enumerate() {
                match bufs.get_mut(i) {
                    Some(b) => b.refit(sp),
                    None => bufs.push(StripeBufs::new(sp)),
                }
            }
            let give_back = |bufs: Vec<StripeBufs>| {
                let mut pool = self.stripe_pool.lock().unwrap();
                if pool.len() < STRIPE_POOL_MAX {
                    pool.extend(bufs);
                }
            };
            if let Err(e) = self.read_plans(&plan.stripes, &mut bufs) {
                give_back(bufs);
                return Err(e.retry());
            }
            for (sp, b) in plan.stripes.iter().zip(bufs.iter_mut()) {
                exec::fill_writes(sp, b, data)
                    .map_err(|e| Retry::Fatal(EngineError::Refused(e)))?;
            }
            let written = match self.live_log() {
                Some(log) if self.hpda_guard() == Some(hetraid_core::hpda::Raid4Guard::Intent) => {
                    self.write_intent(log, &plan.stripes, &mut bufs, data)
                }
                Some(log) => self.write_logged(log, &plan.stripes, &mut bufs, data),
                None => self.write_plans(&plan.stripes, &mut bufs, data),
            };
            give_back(bufs);
            // A member that failed is marked faulty and the stripes are consistent
            // without it; a member that did not take the write but could not be
            // failed (ENOSPC, or the array needs it) fails the request.
            return written.map_err(Retry::Fatal);
        }
        for sp in &plan.stripes {
            let mut bufs = StripeBufs::new(sp);
            match buf {
                UserBuf::Read(out) => {
                    self.read_phase(sp, &mut bufs, Some(&mut **out))?;
                    exec::finish_reads(sp, &mut bufs, out)
                        .map_err(|e| Retry::Fatal(EngineError::Refused(e)))?;
                }
                UserBuf::Write(_) => unreachable!("writes are executed as one batch below"),
            }
        }
        Ok(())
    }

    pub(crate) fn data_off(&self) -> u64 {
        DATA_OFFSET
    }

    /// Issue a stripe plan's reads (and direct reads into `user`) in parallel.
    pub(crate) fn read_phase(
        &self,
        sp: &StripePlan,
        bufs: &mut StripeBufs,
        user: Option<&mut [u8]>,
    ) -> std::result::Result<(), Retry> {
        let mut ops = Vec::new();
        let mut dest: Vec<ReadDest> = Vec::new();
        for run in &sp.runs {
            for c in run.read.iter() {
                let loc = sp.columns[c].loc;
                ops.push((
                    loc.member,
                    IoOp::Read {
                        off: self.data_off() + loc.offset + run.page as u64 * PAGE,
                        len: (run.pages as u64 * PAGE) as usize,
                    },
                ));
                dest.push((c, run.page, run.pages, None));
            }
        }
        if user.is_some() {
            for p in sp.pieces.iter().filter(|p| p.direct.is_some()) {
                let loc = sp.columns[p.direct.unwrap()].loc;
                ops.push((
                    loc.member,
                    IoOp::Read {
                        off: self.data_off() + loc.offset + p.chunk_offset,
                        len: p.len as usize,
                    },
                ));
                dest.push((0, 0, 0, Some((p.buf_offset as usize, p.len as usize))));
            }
        }
        let members: Vec<usize> = ops.iter().map(|(m, _)| *m).collect();
        let results = run_batch(&self.queues, ops);
        let mut user = user;
        let mut failed: Option<Retry> = None;
        for ((r, m), (c, page, pages, direct)) in results.into_iter().zip(members).zip(dest) {
            match r {
                Ok(Some(data)) => match direct {
                    Some((a, len)) => user.as_deref_mut().expect("direct reads have a buffer")
                        [a..a + len]
                        .copy_from_slice(&data),
                    None => {
                        let run = hetraid_core::plan::RowRun {
                            page,
                            pages,
                            mode: hetraid_core::Mode::Read,
                            strategy: hetraid_core::plan::Strategy::Rcw,
                            read: Default::default(),
                            write: Default::default(),
                            lost: Default::default(),
                        };
                        bufs.run_slice(c, &run).copy_from_slice(&data);
                    }
                },
                Ok(None) => {}
                Err(e) => {
                    let r = if !self.present(m) || self.read_error(m, &e) {
                        Retry::MemberFailed
                    } else {
                        Retry::ReadError(m, vec![sp.stripe], crate::member::checksum::bad_block(&e))
                    };
                    failed.get_or_insert(r);
                }
            }
        }
        match failed {
            Some(r) => Err(r),
            None => Ok(()),
        }
    }

    pub(crate) fn live_members(&self) -> Vec<usize> {
        let st = self.state();
        (0..self.hot.slots.len())
            .filter(|&i| self.hot.slots[i].present() && st.members[i] != MemberState::Failed)
            .collect()
    }

    /// A scrub's reads: Ok, or the member whose read failed but is still in
    /// the array (a bad block or a checksum mismatch: correctable) with the
    /// bad block's data-area offset when known, or Err(None) when a member
    /// was lost.
    pub(crate) fn scrub_read(
        &self,
        sp: &StripePlan,
        bufs: &mut StripeBufs,
    ) -> std::result::Result<(), Option<(usize, Option<u64>)>> {
        match self.read_phase(sp, bufs, None) {
            Ok(()) => Ok(()),
            Err(Retry::ReadError(m, _, at)) => Err(Some((m, at))),
            Err(_) => Err(None),
        }
    }

    /// Read-error correction of member `m` in `stripes`, whose locks the caller
    /// holds: what `m` should hold is reconstructed from the other members and
    /// written to it. False when that could not be done.
    pub(crate) fn correct_locked(&self, m: usize, stripes: &[u64]) -> bool {
        let mut rstate = self.state();
        rstate.members[m] = MemberState::Failed;
        let planner = self.planner();
        let mut plans = Vec::new();
        for &s in stripes {
            match planner.rebuild_stripe(s, &rstate, &[m], None) {
                Ok(Some(sp)) => plans.push(sp),
                Ok(None) => {}
                Err(_) => return false,
            }
        }
        if plans.is_empty() {
            return true;
        }
        let mut bufs: Vec<StripeBufs> = plans.iter().map(StripeBufs::new).collect();
        if self.read_plans(&plans, &mut bufs).is_err() {
            return false;
        }
        for (sp, b) in plans.iter().zip(bufs.iter_mut()) {
            if exec::rebuild(sp, b).is_err() {
                return false;
            }
        }
        self.write_plans(&plans, &mut bufs, &[]).is_ok()
            && self.state().members[m] != MemberState::Failed
    }

    /// Reads of several stripe plans at once: contiguous extents on a member are
    /// merged into one operation (rebuild and scrub stream through members).
    pub(crate) fn read_plans(
        &self,
        plans: &[StripePlan],
        bufs: &mut [StripeBufs],
    ) -> std::result::Result<(), ReadFailure> {
        let pieces = plan_extents(plans, |r| r.read);
        let groups = merge_extents(&pieces);
        let ops = groups
            .iter()
            .map(|g| {
                (
                    g.member,
                    IoOp::Read {
                        off: DATA_OFFSET + g.off,
                        len: g.len as usize,
                    },
                )
            })
            .collect();
        for (g, r) in groups.iter().zip(run_batch(&self.queues, ops)) {
            let data = match r {
                Ok(Some(d)) => d,
                Ok(None) => unreachable!("reads return data"),
                Err(e) => {
                    let failed = !self.present(g.member) || self.read_error(g.member, &e);
                    let mut stripes: Vec<u64> = pieces[g.first..g.first + g.count]
                        .iter()
                        .map(|p| plans[p.plan].stripe)
                        .collect();
                    stripes.dedup();
                    return Err(ReadFailure {
                        member: g.member,
                        bad_block: crate::member::checksum::bad_block(&e),
                        stripes,
                        failed,
                        error: io_err(self.hot.slots[g.member].as_ref(), e),
                    });
                }
            };
            for p in &pieces[g.first..g.first + g.count] {
                let at = (p.off - g.off) as usize;
                bufs[p.plan]
                    .run_slice(p.col, &p.run)
                    .copy_from_slice(&data[at..at + p.len as usize]);
            }
        }
        Ok(())
    }

    /// A request of `len` bytes at `offset` must lie inside the array (a
    /// write acknowledged before it reaches the planner checks here).
    pub(crate) fn check_range(&self, offset: u64, len: u64) -> Result<()> {
        let cap = self.capacity();
        if offset.checked_add(len).is_none_or(|e| e > cap) {
            return Err(hetraid_core::PlanError::OutOfRange {
                offset,
                len,
                capacity: cap,
            }
            .into());
        }
        Ok(())
    }

    /// Writes of several stripe plans' `write` columns, merged like [`Array::read_plans`].
    /// `user` is the request's buffer (empty for rebuild): fully covered data
    /// columns are taken from it rather than from the buffers (core `write_source`).
    pub(crate) fn write_plans(
        &self,
        plans: &[StripePlan],
        bufs: &mut [StripeBufs],
        user: &[u8],
    ) -> Result<()> {
        self.commit()?;
        let pieces = plan_extents(plans, |r| r.write);
        let groups = merge_extents(&pieces);
        let mut ops = Vec::with_capacity(groups.len());
        for g in &groups {
            // The group's pieces, lent to the member worker without a copy: from
            // the request (fully covered data columns) or the stripe buffers. Both
            // outlive run_batch below.
            let parts = pieces[g.first..g.first + g.count]
                .iter()
                .map(|p| Borrowed::new(piece_source(plans, bufs, user, p)))
                .collect();
            ops.push((
                g.member,
                IoOp::WriteParts {
                    off: DATA_OFFSET + g.off,
                    parts,
                },
            ));
        }
        let mut kept = None;
        for (g, r) in groups.iter().zip(run_batch(&self.queues, ops)) {
            if let Err(e) = r {
                if !self.member_error(g.member, &e) && kept.is_none() {
                    kept = Some(io_err(self.hot.slots[g.member].as_ref(), e));
                }
            }
        }
        match kept {
            None => Ok(()),
            Some(e) => Err(e),
        }
    }

    /// Requests the core says need no parity work: member extents straight from or
    /// into the user's buffer; several members in parallel for large requests.
    /// Returns false (nothing done, or a member failed) to fall back to planning.
    pub(crate) fn direct_io(&self, req: &Request, buf: UserBuf<'_>) -> Direct {
        let planner = match req.op {
            Op::Read => self.read_planner(),
            Op::Write => Planner::new(self.layout.as_ref(), WritePolicy::Md, Vec::new()),
            Op::Trim => return Direct::Fallback,
        };
        let extents = {
            let st = self.state.read().unwrap();
            match planner.direct_extents(req, &st) {
                Some(e) => e,
                None => return Direct::Fallback,
            }
        };
        // The first read that failed: (member, its extent's buffer offset, error).
        let read_failure: Mutex<Option<(usize, u64, std::io::Error)>> = Mutex::new(None);
        let members: std::collections::BTreeSet<usize> = extents.iter().map(|e| e.0).collect();
        // Several members in parallel for a large request, unless they all
        // answer fast: then a thread per member costs more CPU (a spawn and
        // two switches each: half the server's CPU on 1 MiB reads from
        // memory-speed members) than it saves, and the server overlaps
        // requests anyway.
        let parallel = members.len() > 1
            && req.len >= (256 << 10)
            && !crate::queue::all_fast(&self.queues, members.iter().copied());
        let failed = AtomicBool::new(false);
        let one = |m: usize, mo: u64, b: UserBuf<'_>| {
            let Some(member) = Some(&self.hot.slots[m]).filter(|s| s.present()) else {
                failed.store(true, Ordering::Relaxed);
                return;
            };
            let b_is_read = matches!(b, UserBuf::Read(_));
            let t0 = std::time::Instant::now();
            let (r, bytes) = match b {
                UserBuf::Read(out) => (member.read_at(out, DATA_OFFSET + mo), out.len()),
                UserBuf::Write(d) => (member.write_at(d, DATA_OFFSET + mo), d.len()),
            };
            if let Some(q) = self.queues[m].as_ref() {
                q.teach(t0.elapsed().as_nanos() as u64, bytes as u64);
            }
            if let Err(e) = r {
                // Reads: the planned path that follows reads again, counts and
                // corrects. Writes: the member is failed here (or the planned
                // path fails the request).
                if b_is_read {
                    let bo = extents
                        .iter()
                        .find(|x| x.0 == m && x.1 == mo)
                        .map_or(0, |x| x.2);
                    read_failure.lock().unwrap().get_or_insert((m, bo, e));
                } else {
                    self.member_error(m, &e);
                }
                failed.store(true, Ordering::Relaxed);
            }
        };
        // One piece of the user buffer per extent, reads and writes alike.
        let pieces: Vec<(usize, u64, UserBuf<'_>)> = match buf {
            UserBuf::Read(out) => {
                // Split the buffer into disjoint pieces, in buffer order.
                let mut order: Vec<usize> = (0..extents.len()).collect();
                order.sort_by_key(|&i| extents[i].2);
                let mut rest: &mut [u8] = out;
                let mut at = 0u64;
                let mut v = Vec::with_capacity(extents.len());
                for i in order {
                    let (m, mo, bo, len) = extents[i];
                    let (_, tail) = std::mem::take(&mut rest).split_at_mut((bo - at) as usize);
                    let (piece, tail) = tail.split_at_mut(len as usize);
                    v.push((m, mo, UserBuf::Read(piece)));
                    rest = tail;
                    at = bo + len;
                }
                v
            }
            UserBuf::Write(data) => extents
                .iter()
                .map(|&(m, mo, bo, len)| {
                    (
                        m,
                        mo,
                        UserBuf::Write(&data[bo as usize..(bo + len) as usize]),
                    )
                })
                .collect(),
        };
        if parallel {
            // One thread per member, each doing its extents in order.
            let mut by_member: Vec<Vec<(u64, UserBuf<'_>)>> =
                (0..self.hot.slots.len()).map(|_| Vec::new()).collect();
            for (m, mo, b) in pieces {
                by_member[m].push((mo, b));
            }
            std::thread::scope(|s| {
                for (m, list) in by_member
                    .into_iter()
                    .enumerate()
                    .filter(|(_, l)| !l.is_empty())
                {
                    let one = &one;
                    s.spawn(move || list.into_iter().for_each(|(mo, b)| one(m, mo, b)));
                }
            });
        } else {
            pieces.into_iter().for_each(|(m, mo, b)| one(m, mo, b));
        }
        if let Some((m, bo, e)) = read_failure.into_inner().unwrap() {
            let chunk = self.layout.chunk_bytes();
            return Direct::ReadError(m, self.layout.locate_chunk((req.offset + bo) / chunk).0, e);
        }
        if failed.load(Ordering::Relaxed) {
            Direct::Fallback
        } else {
            Direct::Done
        }
    }
}

/// The bytes a write piece puts on its member: from the request (fully
/// covered data columns, core `write_source`) or the stripe buffers.
pub(super) fn piece_source<'a>(
    plans: &'a [StripePlan],
    bufs: &'a [StripeBufs],
    user: &'a [u8],
    p: &hetraid_core::iomap::PlanExtent,
) -> &'a [u8] {
    let src = match exec::write_source(&plans[p.plan], &p.run, p.col, user) {
        Some(src) => src,
        None => {
            let sb = &bufs[p.plan];
            let a = (p.run.page - sb.lo) as usize * PAGE as usize;
            &sb.cols[p.col][a..a + p.len as usize]
        }
    };
    debug_assert_eq!(src.len() as u64, p.len);
    src
}

/// The request's buffer: filled by reads, consumed by writes (never copied).
pub(crate) enum UserBuf<'a> {
    Read(&'a mut [u8]),
    Write(&'a [u8]),
}

/// Where a read lands: (column, first page, pages, direct user-buffer range).
pub(crate) type ReadDest = (usize, u32, u32, Option<(usize, usize)>);

/// What a request's direct (unplanned) path did.
pub(crate) enum Direct {
    Done,
    /// Nothing, or a member failed: plan the request.
    Fallback,
    /// A member's read failed: count it, then correct (member, stripe).
    ReadError(usize, u64, std::io::Error),
}

/// Why a plan's execution stopped.
/// A member read that failed during a batch of stripe plans.
pub(crate) struct ReadFailure {
    pub member: usize,
    /// The stripes whose read on it failed.
    pub stripes: Vec<u64>,
    /// The bad block's data-area offset, when a checksum named it.
    pub bad_block: Option<u64>,
    /// The member was failed (too many errors, or it is gone).
    pub failed: bool,
    pub error: EngineError,
}

impl ReadFailure {
    pub(crate) fn retry(self) -> Retry {
        if self.failed {
            Retry::MemberFailed
        } else {
            Retry::ReadError(self.member, self.stripes, self.bad_block)
        }
    }
}

pub(crate) enum Retry {
    /// A member returned a read error and is still in the array: correct it.
    /// (member, stripes, data-area offset of the bad block when known)
    ReadError(usize, Vec<u64>, Option<u64>),
    /// A member failed during the request: plan again with the new state.
    MemberFailed,
    Fatal(EngineError),
}
