//! The write log on the request path: journaled and write-back writes, the
//! room the log keeps (backpressure when full), and the reclaimer that
//! writes logged data to the members (on demand, when full, when idle).

use super::io::{piece_source, UserBuf};
#[allow(unused_imports)]
use super::*;

impl Array {
    /// The write phase with a write log: the stripe updates are cut into
    /// records of whole stripes (core `journal::batches`); each record is
    /// durable in the log before its stripes' member writes start, so a crash
    /// leaves every stripe either untouched or replayable.
    pub(super) fn write_logged(
        &self,
        log: &crate::log::Log,
        plans: &[StripePlan],
        bufs: &mut [StripeBufs],
        user: &[u8],
    ) -> Result<()> {
        use hetraid_core::journal;
        // The same cut the simulator makes (core `journal::record_bytes`).
        let updates = journal::stripe_updates(plans);
        let batches = journal::batches(&updates, log.payload_max()).map_err(|e| match e {
            journal::BatchError::TooLarge { bytes, max } => EngineError::Refused(format!(
                "a stripe update of {bytes} bytes does not fit in a log record of at most {max}: the log is too small for this array"
            )),
        })?;
        for r in batches {
            let (plans, bufs) = (&plans[r.clone()], &mut bufs[r]);
            let pieces = plan_extents(plans, |r| r.write);
            if pieces.is_empty() {
                continue;
            }
            let groups = merge_extents(&pieces);
            {
                let entries: Vec<crate::log::Entry<'_>> = groups
                    .iter()
                    .map(|g| crate::log::Entry {
                        member: g.member as u16,
                        offset: g.off,
                        parts: pieces[g.first..g.first + g.count]
                            .iter()
                            .map(|p| piece_source(plans, bufs, user, p))
                            .collect(),
                    })
                    .collect();
                log.append(&entries, &|| self.flush_members())?;
            }
            self.note_log_position()?;
            let written = self.write_plans(plans, bufs, user);
            log.done();
            written?;
        }
        Ok(())
    }

    /// Write-back: the write is acknowledged once durable in the log. When
    /// the log is past its high-water mark the writer reclaims first; when it
    /// is full, the writer waits for (or does) a reclaim.
    /// `alone`: no other writer logs now (`with_log_room`): a part that
    /// finds no room reclaims everything first.
    pub(crate) fn write_back(
        &self,
        log: &crate::log::Log,
        offset: u64,
        data: &[u8],
        alone: bool,
    ) -> Result<()> {
        self.check_range(offset, data.len() as u64)?;
        if data.is_empty() {
            return Ok(());
        }
        if let Some(target) = log.reclaim_before_write() {
            self.reclaim_to(target)?;
        }
        // A write larger than a record is logged as several (acknowledged
        // once all are durable).
        // The same cut the simulator makes (core `split_run`).
        let max = self.write_back_record_max(log);
        let end = offset + data.len() as u64;
        for (at, len) in hetraid_core::journal::split_run(offset, end, max) {
            let part = &data[(at - offset) as usize..(at - offset + len) as usize];
            let flush = || self.flush_members();
            if log.append_data(at, part, &flush)?.is_some() {
                continue;
            }
            // The room left is the reclaimer's. Sharing the log, the writer
            // gives way (`with_log_room`); alone, it reclaims, and the
            // empty log takes the part.
            if !alone {
                return Err(EngineError::LogFull);
            }
            self.reclaim_to(0)?;
            if log.append_data(at, part, &flush)?.is_none() {
                return Err(EngineError::LogFull);
            }
        }
        self.note_log_position()?;
        Ok(())
    }

    /// The most data a write-back record, and a reclaim batch, holds: a
    /// batch's stripe updates (its data plus parity or copies, at most the
    /// member count times the data) must fit in the quarter of the ring that
    /// data may not use, with room to spare.
    pub(super) fn write_back_record_max(&self, log: &crate::log::Log) -> u64 {
        log.write_back_record_max()
    }

    /// A write to a write-back log: when the log has no room for it (the
    /// room left is kept for the reclaimer, core `journal::Reserve`), the
    /// writer waits until no other writer is logging, reclaims everything,
    /// and logs alone. Backpressure, never a failure: reclaiming empties the
    /// log, and an empty log takes the largest record.
    pub(super) fn with_log_room(&self, op: impl Fn(bool) -> Result<()>) -> Result<()> {
        {
            let _shared = self.log_admission.read().unwrap();
            match op(false) {
                Err(EngineError::LogFull) => {}
                r => return r,
            }
        }
        let _alone = self.log_admission.write().unwrap();
        // Bounded by the core's retry bound.
        for _ in 0..hetraid_core::journal::LOG_FULL_RECLAIMS_MAX {
            self.reclaim_to(0)?;
            match op(true) {
                Err(EngineError::LogFull) => continue,
                r => return r,
            }
        }
        Err(EngineError::Refused(
            "the write log has no room for a write although everything it held was written to the members; this is a hetraid bug (please report it with `hetraid status`)".into(),
        ))
    }

    /// The log's background reclaimer (`serve` runs it on a thread of its
    /// own), by the core's procedure (`control::reclaimer`): a look every
    /// `LOOK_NS`; HPDA's policy batch by batch, or a write-back log's idle
    /// rule with `idle` (quiet that long with writes in the log: all of it
    /// to the members). `sleep(d)` waits and says whether to go on (false:
    /// the server is stopping). Returns when it says stop; at once for an
    /// array without a write-back log.
    pub fn run_reclaimer(
        &self,
        idle: std::time::Duration,
        sleep: &dyn Fn(std::time::Duration) -> bool,
    ) {
        Self::reclaimer_loop(&|look: &mut dyn FnMut(&Array)| look(self), idle, sleep)
    }

    /// [`Array::run_reclaimer`] over whichever array `with` hands its look
    /// (a served array's cell: a grow or a rebalance puts a new one in it,
    /// and its log is the one to look after).
    pub(crate) fn reclaimer_loop(
        with: &OnCurrent<'_>,
        idle: std::time::Duration,
        sleep: &dyn Fn(std::time::Duration) -> bool,
    ) {
        use hetraid_core::control::reclaimer::{WriteBackIdle, LOOK_NS};
        let mut any = false;
        with(&mut |a| any = a.has_write_back_log());
        if !any {
            return;
        }
        let look = std::time::Duration::from_nanos(LOOK_NS);
        let t0 = std::time::Instant::now();
        let mut wb = WriteBackIdle::new(idle.as_nanos() as u64, 0);
        // Bounded by the server's life: `sleep` says when to stop.
        while sleep(look) {
            let now = t0.elapsed().as_nanos() as u64;
            with(&mut |a| a.reclaimer_look(&mut wb, now, idle));
        }
    }

    /// One look of the background reclaimer (core `control::reclaimer`):
    /// HPDA's policy batch by batch, or a write-back log's idle rule.
    fn reclaimer_look(
        &self,
        wb: &mut hetraid_core::control::reclaimer::WriteBackIdle,
        now: u64,
        idle: std::time::Duration,
    ) {
        if self.hpda.is_some() {
            let mut l = hetraid_core::control::reclaimer::HpdaLook::default();
            let mut total = 0u64;
            // Bounded by the look's batch limit.
            while let Some(target) = self.hpda_next(&mut l) {
                match self.reclaim_batches(target, 1) {
                    Ok(n) => total += n,
                    Err(e) => {
                        tracing::info!("reclaiming the write log failed: {e}");
                        break;
                    }
                }
            }
            if total > 0 {
                tracing::info!("{total} bytes of the write log written to the RAID4");
            }
            return;
        }
        let pending = self.log.as_ref().is_some_and(|l| l.unreclaimed_bytes() > 0);
        if wb.look(now, self.take_io_seen(), pending) {
            match self.reclaim() {
                Ok(n) => tracing::info!(
                    "idle for {:.1} s: {n} bytes of the write log written to the members",
                    idle.as_secs_f64()
                ),
                Err(e) => tracing::info!("reclaiming the write log failed: {e}"),
            }
        }
    }

    /// Write everything the write-back log holds to the members and free the
    /// log (a clean shutdown does this). Returns the bytes written.
    pub fn reclaim(&self) -> Result<u64> {
        self.reclaim_to(0)
    }

    /// Reclaim the oldest logged writes until the log uses at most `target`
    /// bytes (or holds no data). Each batch is written as journaled stripe
    /// updates (whole stripes where the log holds them: contiguous pieces
    /// are merged), then dropped from the index, then the log is
    /// checkpointed up to the oldest write still needed.
    pub(crate) fn reclaim_to(&self, target: u64) -> Result<u64> {
        self.reclaim_batches(target, usize::MAX)
    }

    /// [`Array::reclaim_to`], at most `batches_max` batches.
    pub(crate) fn reclaim_batches(&self, target: u64, batches_max: usize) -> Result<u64> {
        let Some(log) = self.log.as_ref().filter(|l| l.mode() == LogMode::WriteBack) else {
            return Ok(0);
        };
        let _one = self.reclaiming.lock().unwrap();
        // Its records may use the room kept for it.
        let _reclaimer = log.reclaiming();
        // HPDA: no direct RAID4 write runs while the reclaimer writes.
        let _exclusive = self.hpda.as_ref().map(|h| h.direct.write().unwrap());
        let batch_max = self.write_back_record_max(log);
        let mut written = 0u64;
        // Bounded by the pieces present at the start: each round removes the
        // oldest ones (newer writes that arrive meanwhile wait for a later round).
        let mut rounds = (log.pieces().len() + 1).min(batches_max);
        while rounds > 0 {
            rounds -= 1;
            if !log.reclaim_more(target) {
                break;
            }
            let pieces = log.pieces();
            // The oldest pieces, merged into runs (core `reclaim_batch`).
            let (batch, runs) = hetraid_core::journal::reclaim_batch(&pieces, batch_max);
            for (start, end, idx) in runs {
                let mut buf: Vec<u8> = Vec::with_capacity((end - start) as usize);
                for &i in &idx {
                    let p = &batch[i];
                    buf.extend_from_slice(
                        &p.handle[p.at as usize..(p.at + p.end - p.start) as usize],
                    );
                }
                for (at, len) in hetraid_core::journal::split_run(start, end, batch_max) {
                    let part = &buf[(at - start) as usize..(at - start + len) as usize];
                    self.run(Request::write(at, len), UserBuf::Write(part))?;
                }
                written += end - start;
            }
            for p in &batch {
                log.reclaimed(p);
            }
            if !log.all_lost() {
                log.checkpoint(&|| self.flush_members())?;
                self.note_log_position()?;
            }
        }
        Ok(written)
    }

    /// The log was checkpointed since the members' superblocks last said
    /// where: they say it now (`LogRecord::checkpoint_seq`), so a copy of
    /// the log put back from before is never replayed.
    pub(crate) fn note_log_position(&self) -> Result<()> {
        let Some(log) = self.log.as_ref().filter(|_| !self.read_only) else {
            return Ok(());
        };
        // The write path asks after every record: an atomic answers
        // unless a checkpoint moved since the superblocks were written.
        let seq = log.checkpoint_seq();
        if seq <= self.log_seq_noted.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut sb = self.sb.lock().unwrap();
        if sb.log.is_some_and(|l| l.checkpoint_seq < seq) {
            self.persist(&mut sb)?;
        }
        let noted = sb.log.map_or(seq, |l| l.checkpoint_seq);
        self.log_seq_noted.fetch_max(noted, Ordering::AcqRel);
        Ok(())
    }

    /// The log, while it has a copy to write to.
    pub(crate) fn live_log(&self) -> Option<&crate::log::Log> {
        self.log.as_ref().filter(|l| !l.all_lost())
    }
}

/// Runs a look on the array in force now (the array itself, or the one a
/// served array's cell holds).
pub(crate) type OnCurrent<'a> = dyn Fn(&mut dyn FnMut(&Array)) + 'a;
