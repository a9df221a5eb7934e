//! Writing the log: records to every copy at once (append, intents, data,
//! groups), the index kept alongside, reads back from the ring, and the
//! checkpoint that frees the ring behind the members.

use super::*;

impl Log {
    /// Write `bufs` at ring offset `at` on every live copy and flush; a copy
    /// that fails is dropped. Err when no copy took it.
    fn write_all(&self, bufs: &[&[u8]], at: u64) -> Result<()> {
        let mut copies = self.copies.lock().unwrap();
        let results = on_every_copy(&copies, |_, d| {
            d.write_vectored_at(bufs, RING_OFFSET + at)
                .and_then(|_| d.flush())
        });
        self.drop_failed(&mut copies, results)
    }

    /// Log one record of stripe updates durably (every live copy, flushed).
    /// When the ring is full, checkpoints first: waits for every logged
    /// record to be on the members, calls `flush_members`, writes the
    /// headers. Every successful append must be followed by [`Log::done`]
    /// once its member writes returned.
    pub fn append(
        &self,
        entries: &[Entry<'_>],
        flush_members: &dyn Fn() -> Result<()>,
    ) -> Result<u64> {
        assert!(!entries.is_empty() && entries.len() <= ENTRIES_MAX);
        let payload: u64 = entries.iter().map(Entry::len).sum();
        assert!(payload.is_multiple_of(PAGE));
        let bytes = PAGE + payload;
        let mut st = self.state.lock().unwrap();
        let p = self.place_locked(&mut st, bytes, flush_members)?;
        let h = record_header(&self.template, TYPE_STRIPES, p.seq, bytes, entries);
        let mut bufs: Vec<&[u8]> = vec![&h];
        entries.iter().for_each(|e| bufs.extend(&e.parts));
        self.write_all(&bufs, p.offset)?;
        st.ring.commit(&p, bytes);
        *self.in_flight.lock().unwrap() += 1;
        Ok(p.seq)
    }

    /// HPDA: make a RAID4 write of `stripes` crash-safe. Stripes not yet
    /// named since the last checkpoint are named in intent records (core
    /// `hpda::Announced`: a run ahead of the write), durable before this
    /// returns; after a crash those stripes' parity is recomputed. Like
    /// [`Log::append`], must be followed by [`Log::done`] once the member
    /// writes returned (a checkpoint waits for them before it forgets the
    /// names). Returns the intent records written.
    pub fn guard_intent(
        &self,
        stripes: impl IntoIterator<Item = u64>,
        stripe_count: u64,
        flush_members: &dyn Fn() -> Result<()>,
    ) -> Result<usize> {
        let mut st = self.state.lock().unwrap();
        let records = st.announced.intents_for(stripes, stripe_count);
        for runs in &records {
            if let Err(e) = self.append_intent_locked(&mut st, runs, flush_members) {
                // Names whose record was not written are forgotten (naming
                // again is safe; a name without its record is not).
                st.announced.clear();
                return Err(e);
            }
        }
        *self.in_flight.lock().unwrap() += 1;
        Ok(records.len())
    }

    /// Where a record of `bytes` goes (checkpointing first when the ring is
    /// full), with the pad before it written when it wraps.
    fn place_locked(
        &self,
        st: &mut State,
        bytes: u64,
        flush_members: &dyn Fn() -> Result<()>,
    ) -> Result<journal::Placement> {
        let reclaimer = self.is_reclaimer();
        let slack = self.reserve.slack(st.ring.len);
        let place = |ring: &Ring| {
            let reserved = self.index.read().unwrap().reserved();
            journal::place_record(ring, bytes, reclaimer, reserved, slack)
        };
        let p = match place(&st.ring) {
            Some(p) => p,
            None => {
                self.checkpoint_locked(st, flush_members)?;
                // Journal mode: the ring is empty now. Write-back: it may
                // still hold writes not yet reclaimed, whose room is kept
                // for the reclaimer: the writer reclaims, then tries again.
                place(&st.ring).ok_or(EngineError::LogFull)?
            }
        };
        if let Some((at, pad)) = p.pad {
            let h = record_header(&self.template, TYPE_PAD, p.seq - 1, pad, &[]);
            self.write_all(&[&h], at)?;
        }
        Ok(p)
    }

    fn append_intent_locked(
        &self,
        st: &mut State,
        runs: &[(u64, u64)],
        flush_members: &dyn Fn() -> Result<()>,
    ) -> Result<()> {
        assert!(!runs.is_empty() && runs.len() <= ENTRIES_MAX);
        let p = self.place_locked(st, PAGE, flush_members)?;
        let h = intent_header(&self.template, p.seq, runs);
        self.write_all(&[&h], p.offset)?;
        st.ring.commit(&p, PAGE);
        Ok(())
    }

    /// Write-back: log `data` for array offset `at` durably and index it.
    /// Ok(None) when the ring has no room even after a checkpoint (the
    /// logged data must be reclaimed first). Writes arriving together are
    /// logged together (group commit, core `journal::place_group`): their
    /// records go out in one write and one flush per copy.
    pub fn append_data(
        &self,
        at: u64,
        data: &[u8],
        flush_members: &dyn Fn() -> Result<()>,
    ) -> Result<Option<u64>> {
        let bytes = journal::data_record_bytes(data.len() as u64);
        let max = self.state.lock().unwrap().ring.record_bytes_max();
        if bytes > max {
            return Err(EngineError::Refused(format!(
                "a write of {} bytes is larger than a log record may be ({}); write in smaller pieces or use a larger log",
                data.len(),
                max - PAGE
            )));
        }
        let data: Bytes = Arc::new(data.to_vec());
        let mut g = self.group.lock().unwrap();
        let ticket = g.next_ticket;
        g.next_ticket += 1;
        g.waiting.push((ticket, at, data));
        // Bounded: every round either finds the outcome, or leads one batch
        // (which holds this write), or waits for the leader's batch.
        loop {
            if let Some(r) = g.done.remove(&ticket) {
                return r;
            }
            if !g.leading {
                g.leading = true;
                let batch = std::mem::take(&mut g.waiting);
                drop(g);
                let outcomes = self.log_group(&batch, flush_members);
                g = self.group.lock().unwrap();
                for ((t, _, _), r) in batch.iter().zip(outcomes) {
                    g.done.insert(*t, r);
                }
                // The lead passes to a writer still waiting, if any.
                g.leading = false;
                self.group_turn.notify_all();
                continue;
            }
            g = self.group_turn.wait(g).unwrap();
        }
    }

    /// Log a batch of write-back writes (at, data) as one group: the
    /// outcome of each, in order.
    fn log_group(
        &self,
        batch: &[(u64, u64, Bytes)],
        flush_members: &dyn Fn() -> Result<()>,
    ) -> Vec<Result<Option<u64>>> {
        let all_fail = |e: EngineError| {
            let msg = e.to_string();
            batch
                .iter()
                .map(|_| Err(EngineError::Refused(msg.clone())))
                .collect()
        };
        let mut st = self.state.lock().unwrap();
        let writes: Vec<(u64, u64)> = batch.iter().map(|b| (b.1, b.2.len() as u64)).collect();
        let reserve = Reserve {
            memory_max: self.memory_max.load(std::sync::atomic::Ordering::Relaxed),
            ..self.reserve
        };
        let (mut placed, mut groups) =
            journal::place_group(&mut st.ring, &reserve, &self.index.read().unwrap(), &writes);
        if placed.is_empty() {
            // No room: a checkpoint frees what was reclaimed.
            if let Err(e) = self.checkpoint_locked(&mut st, flush_members) {
                return all_fail(e);
            }
            (placed, groups) =
                journal::place_group(&mut st.ring, &reserve, &self.index.read().unwrap(), &writes);
        }
        let headers: Vec<AlignedBuf> = placed
            .iter()
            .zip(batch)
            .enumerate()
            .map(|(i, ((p, bytes, _), (_, at, data)))| {
                // The first record of its I/O group.
                let first = groups
                    .iter()
                    .find(|g| g.contains(&i))
                    .map_or(p.seq, |g| placed[g.start].0.seq);
                data_header(&self.template, p.seq, first, *bytes, *at, data)
            })
            .collect();
        for g in &groups {
            let first = &placed[g.start].0;
            if let Some((pad_at, pad)) = first.pad {
                let h = record_header(&self.template, TYPE_PAD, first.seq - 1, pad, &[]);
                if let Err(e) = self.write_all(&[&h], pad_at) {
                    return all_fail(e);
                }
            }
            let mut bufs: Vec<&[u8]> = Vec::with_capacity(3 * g.len());
            for i in g.clone() {
                let data = &batch[i].2;
                let pad = (placed[i].1 - PAGE) as usize - data.len();
                bufs.push(&headers[i]);
                bufs.push(data);
                bufs.push(&ZEROS[..pad]);
            }
            if let Err(e) = self.write_all(&bufs, first.offset) {
                return all_fail(e);
            }
        }
        // Indexed in sequence order (under the ring's lock): a newer write
        // always replaces an older one.
        let mut index = self.index.write().unwrap();
        let mut out = Vec::with_capacity(batch.len());
        for (i, (_, at, data)) in batch.iter().enumerate() {
            match placed.get(i) {
                Some((p, _, cost)) => {
                    index.insert(*at, data.len() as u64, p.seq, data.clone(), *cost, p.offset);
                    out.push(Ok(Some(p.seq)));
                }
                None => out.push(Ok(None)),
            }
        }
        out
    }

    /// A write-back record found by the recovery scan goes back in the
    /// index: `len` bytes at array offset `at`, read from copy `copy` (the
    /// one the scan found it intact on) at ring offset `payload`; the record
    /// is at `record`.
    pub fn reindex(
        &self,
        seq: u64,
        (at, len, payload): (u64, u64, u64),
        copy: usize,
        record: u64,
    ) -> Result<()> {
        let mut data = self
            .read_ring(
                copy,
                payload / PAGE * PAGE,
                (payload % PAGE + len).div_ceil(PAGE) * PAGE,
            )?
            .to_vec();
        data.drain(..(payload % PAGE) as usize);
        data.truncate(len as usize);
        let cost = self.reserve.cost(at, len);
        self.index
            .write()
            .unwrap()
            .insert(at, len, seq, Arc::new(data), cost, record);
        Ok(())
    }

    /// `len` bytes at ring offset `at` of copy `copy` (a record being
    /// replayed; another copy when that one is gone or fails).
    pub fn read_ring(&self, copy: usize, at: u64, len: u64) -> Result<AlignedBuf> {
        let mut b = AlignedBuf::zeroed(len as usize);
        self.read_bytes(Some(copy), at, &mut b)?;
        Ok(b)
    }

    fn read_bytes(&self, first: Option<usize>, at: u64, out: &mut [u8]) -> Result<()> {
        // The copy the scan found the record intact on; the others only
        // when it is gone (they may hold it damaged).
        let copies: Vec<Arc<dyn Member>> = {
            let c = self.copies.lock().unwrap();
            match first.and_then(|i| c.get(i).cloned().flatten()) {
                Some(d) => vec![d],
                None => c.iter().flatten().cloned().collect(),
            }
        };
        // Whole pages around the bytes (log devices may be opened for
        // direct I/O).
        let start = at / PAGE * PAGE;
        let end = (at + out.len() as u64).div_ceil(PAGE) * PAGE;
        let mut buf = AlignedBuf::zeroed((end - start) as usize);
        let mut last = None;
        for d in copies {
            match d.read_at(&mut buf, RING_OFFSET + start) {
                Ok(()) => {
                    let o = (at - start) as usize;
                    out.copy_from_slice(&buf[o..o + out.len()]);
                    return Ok(());
                }
                Err(e) => last = Some(log_err(d.as_ref(), e)),
            }
        }
        Err(last.unwrap_or_else(|| {
            EngineError::Refused("the write log has no copy left to read logged writes from".into())
        }))
    }

    /// The logged bytes newer than the members in `[start, end)`.
    pub fn overlapping(&self, start: u64, end: u64) -> Vec<Piece<Bytes>> {
        self.index.read().unwrap().overlapping(start, end)
    }

    /// Every logged piece not yet reclaimed.
    pub fn pieces(&self) -> Vec<Piece<Bytes>> {
        self.index.read().unwrap().pieces()
    }

    /// A piece is on the members: drop it from the index unless a newer
    /// write replaced it meanwhile.
    pub fn reclaimed(&self, p: &Piece<Bytes>) -> bool {
        let gone = self.index.write().unwrap().remove_reclaimed(p);
        self.reclaimed
            .fetch_add(gone, std::sync::atomic::Ordering::Relaxed);
        gone > 0
    }

    /// Bytes reclaimed to the members since the log was opened.
    pub fn reclaimed_bytes(&self) -> u64 {
        self.reclaimed.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Pieces of logged writes not yet on the members.
    pub fn entries(&self) -> u64 {
        self.index.read().unwrap().len() as u64
    }

    /// Bytes of logged writes not yet on the members.
    pub fn unreclaimed_bytes(&self) -> u64 {
        self.index.read().unwrap().bytes()
    }

    /// A record's member writes have returned (whatever their outcome).
    pub fn done(&self) {
        let mut n = self.in_flight.lock().unwrap();
        *n -= 1;
        if *n == 0 {
            self.idle.notify_all();
        }
    }

    /// Mark everything logged so far as on the members: waits for in-flight
    /// records, flushes the members, then writes the new checkpoint.
    pub fn checkpoint(&self, flush_members: &dyn Fn() -> Result<()>) -> Result<()> {
        let mut st = self.state.lock().unwrap();
        self.checkpoint_locked(&mut st, flush_members)
    }

    fn checkpoint_locked(
        &self,
        st: &mut State,
        flush_members: &dyn Fn() -> Result<()>,
    ) -> Result<()> {
        {
            let mut n = self.in_flight.lock().unwrap();
            while *n > 0 {
                n = self.idle.wait(n).unwrap();
            }
        }
        flush_members()?;
        // Every record so far is on the members now: intents before here
        // are no longer needed, and no stripe is named any more.
        st.flushed_seq = st.ring.next_seq;
        st.announced.clear();
        // The head moves to the oldest record still needed (a write-back
        // write not yet reclaimed), or past everything.
        let needed = self.index.read().unwrap().oldest_needed();
        st.ring.checkpoint_keeping(needed);
        st.generation += 1;
        let g = st.generation;
        let mut copies = self.copies.lock().unwrap();
        let headers: Vec<AlignedBuf> = (0..copies.len())
            .map(|i| {
                LogHeader {
                    copy: i as u32,
                    kind: self.kinds[i],
                    epoch: self.epoch.load(std::sync::atomic::Ordering::SeqCst),
                    generation: g,
                    checkpoint_offset: st.ring.head,
                    checkpoint_seq: st.ring.head_seq,
                    flushed_seq: st.flushed_seq,
                    ..self.template.clone()
                }
                .encode()
            })
            .collect();
        let results = on_every_copy(&copies, |i, d| {
            d.write_at(&headers[i], (g % 2) * PAGE)
                .and_then(|_| d.flush())
        });
        self.drop_failed(&mut copies, results)?;
        self.written_checkpoint
            .store(st.ring.head_seq, std::sync::atomic::Ordering::Release);
        Ok(())
    }

    /// Drop the copies whose write (`results`, from `on_every_copy`) failed,
    /// each with a warning; refused when none is left.
    fn drop_failed(
        &self,
        copies: &mut [Option<Arc<dyn Member>>],
        results: Vec<Option<io::Result<()>>>,
    ) -> Result<()> {
        let mut last = None;
        for (i, (c, r)) in copies.iter_mut().zip(results).enumerate() {
            let (Some(d), Some(r)) = (c.as_ref(), r) else {
                continue;
            };
            if let Err(e) = r {
                self.warnings.lock().unwrap().push(format!(
                    "log copy {i} ({}) failed and is no longer used: {e}",
                    d.name()
                ));
                last = Some(log_err(d.as_ref(), e));
                *c = None;
            }
        }
        if last.is_some() {
            self.copies_changed(copies);
        }
        if copies.iter().all(Option::is_none) {
            return Err(EngineError::Refused(format!(
                "the write log failed on every copy ({}): writes are refused, as they could no longer be made crash-safe{}",
                self.names.lock().unwrap().join(", "),
                last.map_or_else(String::new, |e| format!(" (last error: {e})"))
            )));
        }
        Ok(())
    }

    /// The checkpoint sequence the copies' headers hold now.
    pub fn checkpoint_seq(&self) -> u64 {
        self.written_checkpoint
            .load(std::sync::atomic::Ordering::Acquire)
    }
}

/// Run `op` on every live copy at once (a mirrored log waits for the slower
/// copy, not for both in turn): the result per copy, None where there is
/// none.
pub(super) fn on_every_copy(
    copies: &[Option<Arc<dyn Member>>],
    op: impl Fn(usize, &dyn Member) -> io::Result<()> + Sync,
) -> Vec<Option<io::Result<()>>> {
    let live: Vec<usize> = (0..copies.len()).filter(|&i| copies[i].is_some()).collect();
    let mut out: Vec<Option<io::Result<()>>> = copies.iter().map(|_| None).collect();
    if live.len() < 2 {
        for &i in &live {
            out[i] = Some(op(i, copies[i].as_deref().unwrap()));
        }
        return out;
    }
    std::thread::scope(|sc| {
        let others: Vec<_> = live[1..]
            .iter()
            .map(|&i| {
                let (op, d) = (&op, copies[i].as_deref().unwrap());
                (i, sc.spawn(move || op(i, d)))
            })
            .collect();
        out[live[0]] = Some(op(live[0], copies[live[0]].as_deref().unwrap()));
        for (i, h) in others {
            out[i] = Some(
                h.join()
                    .unwrap_or_else(|_| Err(io::Error::other("log copy writer panicked"))),
            );
        }
    });
    out
}

pub(super) fn log_err(m: &dyn Member, e: io::Error) -> EngineError {
    EngineError::LogIo {
        device: m.name(),
        source: e,
    }
}
