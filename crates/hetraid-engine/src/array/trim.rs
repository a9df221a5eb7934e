//! TRIM on an assembled array: the core says which whole stripes a trim
//! covers and which member extents to discard (`hetraid_core::trim`); this
//! discards them under the stripes' locks, marked in the write-intent bitmap
//! like a write (a crash part-way leaves them to resync), and answers which
//! ranges read as zeroes without being stored (NBD `base:allocation`).

use super::*;

/// What a trim did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Trimmed {
    /// Array bytes that now read as zeroes (whole stripes).
    pub discarded_bytes: u64,
    /// Array bytes of the request left as they were (partial stripes at its
    /// edges, or all of it on an array whose trims are only advice).
    pub kept_bytes: u64,
    /// Member bytes whose space was given back (holes punched).
    pub freed_member_bytes: u64,
}

impl Array {
    /// Why this array takes trims as advice only, if it does: a write log
    /// replays stripe updates whose parity was computed from what the
    /// members held before; replayed over a discarded stripe it would leave
    /// it inconsistent.
    pub fn trim_unsupported(&self) -> Option<&'static str> {
        if !hetraid_core::trim::trims_discard(self.log.is_some()) {
            Some("arrays with a write log (or HPDA's) keep trimmed data")
        } else {
            None
        }
    }

    /// Discard array bytes `[offset, offset + len)`: whole stripes read as
    /// zeroes afterwards and their members' space is given back; the rest
    /// is left as it was. Durable after [`Array::flush`], like a write.
    pub fn trim(&self, offset: u64, len: u64) -> Result<Trimmed> {
        self.discard_whole_stripes(offset, len).map(|(t, _)| t)
    }

    /// Make `[offset, offset + len)` read as zeroes: whole stripes discarded
    /// when `may_hole` and this array's trims are real, everything else
    /// written with zeroes. Durable after [`Array::flush`].
    pub fn write_zeroes(&self, offset: u64, len: u64, may_hole: bool) -> Result<()> {
        self.check_range(offset, len)?;
        let whole = if may_hole && self.trim_unsupported().is_none() {
            self.discard_whole_stripes(offset, len)?.1
        } else {
            Vec::new()
        };
        let chunk = self.layout.chunk_bytes();
        let zero = vec![0u8; len.min(1 << 20) as usize];
        let (end, mut at) = (offset + len, offset);
        // Bounded: every round moves `at` to the next chunk boundary at least.
        while at < end {
            let (s, _) = self.layout.locate_chunk(at / chunk);
            let next = ((at / chunk + 1) * chunk).min(end);
            if whole.binary_search(&s).is_err() {
                let mut w = at;
                while w < next {
                    let n = ((next - w) as usize).min(zero.len());
                    self.write(w, &zero[..n])?;
                    w += n as u64;
                }
            }
            at = next;
        }
        Ok(())
    }

    /// The trim: what it did, and the stripes it discarded (ascending).
    fn discard_whole_stripes(&self, offset: u64, len: u64) -> Result<(Trimmed, Vec<u64>)> {
        if self.read_only {
            return Err(EngineError::Refused(
                "the array was opened read-only; nothing was trimmed".into(),
            ));
        }
        self.check_range(offset, len)?;
        let nothing = Trimmed {
            kept_bytes: len,
            ..Default::default()
        };
        if self.trim_unsupported().is_some() || len == 0 {
            return Ok((nothing, Vec::new()));
        }
        self.commit()?;
        self.note_user_io();
        let chunk = self.layout.chunk_bytes();
        let stripes =
            (offset / chunk..(offset + len).div_ceil(chunk)).map(|c| self.layout.locate_chunk(c).0);
        let _g = self.lock_stripes(stripes);
        // Planned under the locks, from the members' state now: a member a
        // rebuild is filling is discarded only where it is already valid.
        let plan = {
            let state = self.state.read().unwrap().clone();
            hetraid_core::trim::plan_trim(self.layout.as_ref(), &state, offset, len)?
        };
        if plan.extents.is_empty() {
            return Ok((nothing, Vec::new()));
        }
        let bits: Vec<u64> =
            if self.layout.redundancy() != hetraid_core::Redundancy::None || self.checksums {
                let bm = self.bitmap.lock().unwrap();
                let mut b: Vec<u64> = plan.stripes.iter().map(|&s| bm.bit_of(s)).collect();
                b.sort_unstable();
                b.dedup();
                b
            } else {
                vec![]
            };
        if !bits.is_empty() {
            self.bitmap_begin(&bits)?;
        }
        let mut freed = 0;
        let mut kept_error = None;
        for &(m, off, n) in &plan.extents {
            let slot = &self.hot.slots[m];
            if !slot.present() {
                continue;
            }
            match slot.discard(DATA_OFFSET + off, n) {
                Ok(true) => freed += n,
                Ok(false) => {}
                Err(e) => {
                    // As a failed write: the member is failed (the stripes
                    // are consistent without it), or the trim fails.
                    if !self.member_error(m, &e) && kept_error.is_none() {
                        kept_error = Some(io_err(slot.as_ref(), e));
                    }
                }
            }
        }
        if let Some(e) = kept_error {
            // Left marked: the next assembly resyncs these stripes.
            return Err(e);
        }
        if !bits.is_empty() {
            self.bitmap.lock().unwrap().end(&bits);
        }
        let discarded = len - plan.kept_bytes;
        let t = Trimmed {
            discarded_bytes: discarded,
            kept_bytes: plan.kept_bytes,
            freed_member_bytes: freed,
        };
        Ok((t, plan.stripes))
    }

    /// Which parts of `[offset, offset + len)` read as zeroes without being
    /// stored (never written, or trimmed): (length, hole) runs in order,
    /// covering the start of the range at least (a long range is answered
    /// for its first part, see `hetraid_core::trim::ALLOCATION_CHUNKS_MAX`).
    pub fn allocation(&self, offset: u64, len: u64) -> Result<Vec<(u64, bool)>> {
        self.check_range(offset, len)?;
        let state = self.state.read().unwrap().clone();
        let stored = |m: usize, off: u64, n: u64| {
            let s = &self.hot.slots[m];
            !s.present() || s.stored(DATA_OFFSET + off, n)
        };
        Ok(hetraid_core::trim::allocation(
            self.layout.as_ref(),
            &state,
            offset,
            len,
            &stored,
        )?)
    }
}
