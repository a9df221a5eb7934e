//! The write log's decisions: where the next record goes in the circular log,
//! when the log must be checkpointed to make room, how a request's stripe
//! updates are cut into records, and where a recovery scan goes next. The
//! engine encodes and writes the bytes (`hetraid-engine/src/log.rs`); the byte
//! format is in `docs/FORMAT.md` ("Write log").
//!
//! A record is a header page (4 KiB: header and entry table) followed by its
//! payload pages. Records lie back to back in the ring; one that does not fit
//! before the ring's end is preceded by a pad record filling the rest, and
//! goes at the ring's start. Every record, pads included, takes the next
//! sequence number, so a scan that finds a lower number (a record of an
//! earlier lap) or anything invalid has found the end of the log.

/// Records are made of whole pages.
pub const PAGE: u64 = 4096;
/// Entries (member extents) one header page can list.
pub const ENTRIES_MAX: usize = 252;

/// The circular log: a ring of `len` bytes in which the records from
/// `head` (sequence `head_seq`) up to `tail` (sequence `next_seq`, exclusive)
/// are live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ring {
    pub len: u64,
    pub head: u64,
    pub head_seq: u64,
    pub tail: u64,
    pub next_seq: u64,
    /// Bytes between head and tail (pads included).
    pub used: u64,
}

/// Where a record of some size goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    /// Ring offset of the record.
    pub offset: u64,
    /// A pad record first: (ring offset, bytes), filling the ring's end.
    pub pad: Option<(u64, u64)>,
    /// The record's sequence number (the pad, if any, has the one before).
    pub seq: u64,
}

impl Ring {
    /// An empty ring whose next record goes at `offset` with sequence `seq`
    /// (what the last checkpoint recorded).
    pub fn empty(len: u64, offset: u64, seq: u64) -> Self {
        assert!(len.is_multiple_of(PAGE) && len > 0 && offset < len && offset.is_multiple_of(PAGE));
        Self {
            len,
            head: offset,
            head_seq: seq,
            tail: offset,
            next_seq: seq,
            used: 0,
        }
    }

    /// A ring found by a recovery scan: records from `head` (sequence
    /// `head_seq`) to `tail` (`next_seq`), `used` bytes of them, are live.
    pub fn found(len: u64, head: u64, head_seq: u64, tail: u64, next_seq: u64, used: u64) -> Self {
        let mut r = Self::empty(len, head, head_seq);
        assert!(tail < len && tail.is_multiple_of(PAGE) && used <= len && next_seq >= head_seq);
        r.tail = tail;
        r.next_seq = next_seq;
        r.used = used;
        r
    }

    /// The largest record this ring takes: a quarter of it, so a checkpoint
    /// always makes room for the next one even after a pad.
    pub fn record_bytes_max(&self) -> u64 {
        self.len / 4 / PAGE * PAGE
    }

    /// Where a record of `bytes` goes, or None when the ring has no room for
    /// it (checkpoint first: every live record must then be on the members).
    pub fn place(&self, bytes: u64) -> Option<Placement> {
        assert!(bytes.is_multiple_of(PAGE) && bytes > 0 && bytes <= self.record_bytes_max());
        if self.tail + bytes <= self.len {
            return (self.used + bytes <= self.len).then_some(Placement {
                offset: self.tail,
                pad: None,
                seq: self.next_seq,
            });
        }
        let pad = self.len - self.tail;
        (self.used + pad + bytes <= self.len).then_some(Placement {
            offset: 0,
            pad: Some((self.tail, pad)),
            seq: self.next_seq + 1,
        })
    }

    /// Take the room `place` gave.
    pub fn commit(&mut self, p: &Placement, bytes: u64) {
        if let Some((_, pad)) = p.pad {
            self.used += pad;
            self.next_seq += 1;
        }
        debug_assert_eq!(p.seq, self.next_seq);
        self.used += bytes;
        self.next_seq += 1;
        self.tail = (p.offset + bytes) % self.len;
        debug_assert!(self.used <= self.len);
    }

    /// Everything logged so far is on the members: the ring is empty again.
    pub fn checkpoint(&mut self) {
        self.head = self.tail;
        self.head_seq = self.next_seq;
        self.used = 0;
    }

    /// Records logged since the last checkpoint.
    pub fn live_records(&self) -> u64 {
        self.next_seq - self.head_seq
    }
}

/// The ring offset after a record of `bytes` at `offset` (recovery scan).
pub fn next_offset(ring_len: u64, offset: u64, bytes: u64) -> u64 {
    (offset + bytes) % ring_len
}

/// Is a record header found at `offset` in the scan a live one? `seq` is the
/// sequence the scan expects there and `bytes` the record's stated length.
pub fn header_fits(ring_len: u64, offset: u64, bytes: u64) -> bool {
    bytes >= PAGE && bytes.is_multiple_of(PAGE) && offset + bytes <= ring_len
}

/// One stripe update's share of a record: payload bytes and entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Update {
    pub bytes: u64,
    pub entries: usize,
}

/// Why updates cannot be logged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchError {
    /// One stripe update is larger than a record may be.
    TooLarge { bytes: u64, max: u64 },
}

/// Cut consecutive stripe updates into records: each record holds whole
/// stripe updates (so replaying any prefix of the records leaves every stripe
/// consistent), at most `payload_max` payload bytes and [`ENTRIES_MAX`]
/// entries. Returns index ranges into `updates`.
pub fn batches(
    updates: &[Update],
    payload_max: u64,
) -> Result<Vec<std::ops::Range<usize>>, BatchError> {
    let mut out = Vec::new();
    let (mut start, mut bytes, mut entries) = (0, 0u64, 0usize);
    for (i, u) in updates.iter().enumerate() {
        if u.bytes > payload_max || u.entries > ENTRIES_MAX {
            return Err(BatchError::TooLarge {
                bytes: u.bytes,
                max: payload_max,
            });
        }
        if i > start && (bytes + u.bytes > payload_max || entries + u.entries > ENTRIES_MAX) {
            out.push(start..i);
            (start, bytes, entries) = (i, 0, 0);
        }
        bytes += u.bytes;
        entries += u.entries;
    }
    if start < updates.len() {
        out.push(start..updates.len());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_fill_the_ring_pad_at_the_end_and_wait_for_a_checkpoint() {
        let mut r = Ring::empty(16 * PAGE, 0, 7);
        assert_eq!(r.record_bytes_max(), 4 * PAGE);
        let p = r.place(3 * PAGE).unwrap();
        assert_eq!((p.offset, p.pad, p.seq), (0, None, 7));
        r.commit(&p, 3 * PAGE);
        for _ in 0..3 {
            let p = r.place(4 * PAGE).unwrap();
            r.commit(&p, 4 * PAGE);
        }
        // 15 pages used; a 2-page record needs the last page padded and the
        // ring's start, which is still live.
        assert_eq!(r.used, 15 * PAGE);
        assert_eq!(r.place(2 * PAGE), None);
        r.checkpoint();
        let p = r.place(2 * PAGE).unwrap();
        assert_eq!(p.pad, Some((15 * PAGE, PAGE)));
        assert_eq!((p.offset, p.seq), (0, 12));
        r.commit(&p, 2 * PAGE);
        assert_eq!((r.tail, r.next_seq, r.used), (2 * PAGE, 13, 3 * PAGE));
        assert_eq!(r.live_records(), 2);
    }

    #[test]
    fn the_ring_never_overwrites_a_live_record() {
        // Random record sizes; a shadow map of which pages are live.
        let mut x = 0x2545F4914F6CDD1Du64;
        let len = 64 * PAGE;
        let mut r = Ring::empty(len, 5 * PAGE, 0);
        let mut live: Vec<(u64, u64)> = Vec::new();
        for _ in 0..10_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let bytes = (1 + x % 16) * PAGE;
            match r.place(bytes) {
                Some(p) => {
                    let mut new = vec![(p.offset, bytes)];
                    if let Some(pad) = p.pad {
                        new.push(pad);
                    }
                    for (o, b) in &new {
                        assert!(o + b <= len);
                        for (lo, lb) in &live {
                            assert!(o + b <= *lo || lo + lb <= *o, "overlap");
                        }
                    }
                    live.extend(new);
                    r.commit(&p, bytes);
                }
                None => {
                    r.checkpoint();
                    live.clear();
                }
            }
        }
    }

    #[test]
    fn batches_keep_stripe_updates_whole() {
        let u = |bytes, entries| Update { bytes, entries };
        let ups = [u(3, 2), u(3, 2), u(3, 2), u(10, 1), u(1, 250), u(1, 3)];
        assert_eq!(batches(&ups, 10).unwrap(), vec![0..3, 3..4, 4..5, 5..6]);
        assert_eq!(
            batches(&[u(11, 1)], 10),
            Err(BatchError::TooLarge { bytes: 11, max: 10 })
        );
        assert!(batches(&[], 10).unwrap().is_empty());
    }
}
