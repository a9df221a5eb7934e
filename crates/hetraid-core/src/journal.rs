//! The write log's decisions: where the next record goes in the circular log,
//! when the log must be checkpointed to make room, how a request's stripe
//! updates are cut into records, and where a recovery scan goes next. The
//! engine encodes and writes the bytes (`hetraid-engine/src/log/`); the byte
//! format is in `docs/FORMAT.md` ("Write log").
//!
//! A record is a header page (4 KiB: header and entry table) followed by its
//! payload pages. Records lie back to back in the ring; one that does not fit
//! before the ring's end is preceded by a pad record filling the rest, and
//! goes at the ring's start. Every record, pads included, takes the next
//! sequence number, so a scan that finds a lower number (a record of an
//! earlier lap) or anything invalid has found the end of the log.

/// Records are made of whole pages.
pub use crate::units::PAGE;
/// Where the ring starts on a log device (after the header slots).
pub const RING_OFFSET: u64 = 64 << 10;
/// The smallest ring.
pub const RING_MIN: u64 = 1 << 20;

/// The smallest log device for `n` members of chunk `chunk`: a record holds
/// at least one whole stripe update (every member's chunk at worst) and may
/// be a quarter of the ring; a write-back log (`reserve`, see [`Reserve`])
/// also holds its largest data record beside the room kept for the
/// reclaimer, or it could fill with data the reclaimer has no room to write.
pub fn log_bytes_min(n: usize, chunk: u64, reserve: &Reserve) -> u64 {
    let ring = (4 * (n as u64 * chunk + PAGE)).max(RING_MIN);
    let ring = match reserve.expansion {
        0 => ring,
        _ => ring.max(reserve.ring_min()),
    };
    RING_OFFSET + ring
}

/// The ring a log device of `device_bytes` holds.
pub fn ring_bytes(device_bytes: u64) -> u64 {
    device_bytes.saturating_sub(RING_OFFSET) / PAGE * PAGE
}
/// The most pieces a write-back index holds (a piece and its record take
/// about 150 bytes: about 40 MiB at most). A writer that finds it full
/// reclaims first.
pub const INDEX_PIECES_MAX: usize = 1 << 18;
/// The most bytes of logged writes a write-back index holds in memory,
/// whatever the log's size (reads and the reclaimer use them; a log that
/// loses every copy at run time loses nothing acknowledged). A writer that
/// finds it full reclaims first.
pub const INDEX_BYTES_MAX: u64 = 256 << 20;
/// The most data one write-back record holds (larger writes are logged as
/// several records): far below the memory bound, and what a recovery scan
/// reads past the end of the log stays small on a large log.
pub const WRITE_BACK_RECORD_MAX: u64 = 8 << 20;
/// The most bytes of data records one group commit writes at once: a crash
/// cuts at most this much past the end of the log, which is where the
/// recovery scan looks for records of the cut write (`PROBE_BYTES_MAX`).
pub const GROUP_BYTES_MAX: u64 = 32 << 20;
/// A write-back write that finds no room (`place_group` places nothing)
/// reclaims everything and tries again alone, this many times; failing
/// still is a bug (an empty log takes the largest record). The engine and
/// the simulator both stop there.
pub const LOG_FULL_RECLAIMS_MAX: u32 = 1;

/// A write-back log is written to the members once the array has had no user
/// request for this long (`serve --reclaim-idle`): after a burst the log
/// empties, and a crash then replays nothing.
pub const RECLAIM_IDLE_NS_DEFAULT: u64 = 5_000_000_000;

/// Is an idle reclaim due: the log holds writes not yet on the members, and
/// no user request came for `idle_ns`? The engine's background reclaimer and
/// the simulator both ask this.
pub fn idle_reclaim_due(quiet_ns: u64, idle_ns: u64, pending: bool) -> bool {
    pending && quiet_ns >= idle_ns
}
/// How far past the end of the log the recovery scan looks for intact
/// records (of the write a crash cut, or past a damaged record): at least a
/// group write or the largest record, at most this.
pub const PROBE_BYTES_MAX: u64 = 64 << 20;
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

    /// The records before `seq` (at ring offset `offset`) are no longer
    /// needed: the ring's head moves there.
    pub fn checkpoint_to(&mut self, offset: u64, seq: u64) {
        assert!(seq >= self.head_seq && seq <= self.next_seq);
        if seq == self.next_seq {
            return self.checkpoint();
        }
        self.used -= (offset + self.len - self.head) % self.len;
        self.head = offset;
        self.head_seq = seq;
    }

    /// A checkpoint once every logged record is on the members: the head
    /// moves to `oldest_needed` (seq, ring offset: a write-back record not
    /// yet reclaimed, [`LogIndex::oldest_needed`]) or past everything.
    pub fn checkpoint_keeping(&mut self, oldest_needed: Option<(u64, u64)>) {
        match oldest_needed {
            Some((seq, offset)) => self.checkpoint_to(offset, seq),
            None => self.checkpoint(),
        }
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

/// Write-back mode's index: which array bytes the log holds newer than the
/// members, one piece per logged write, a newer write replacing what it
/// overlaps. `T` is the engine's handle on a write's bytes; a piece is
/// `(record seq, handle, offset of the piece within the handle's bytes)`.
#[derive(Debug, Clone)]
pub struct LogIndex<T> {
    /// start -> (end, seq, handle, offset in handle)
    pieces: std::collections::BTreeMap<u64, Piece<T>>,
    /// Per record: its pieces (a record is needed in the log while it has
    /// any), its reclaim cost ([`Reserve::cost`]) and its ring offset (where
    /// a checkpoint keeping it moves the head).
    live: std::collections::BTreeMap<u64, (usize, u64, u64, u64)>,
    /// The reclaim costs of the records still needed, summed.
    reserved: u64,
    /// The bytes of the records still needed (what their handles hold).
    held: u64,
}

/// One piece of the index: array bytes `[start, end)` are bytes
/// `[at, at + end - start)` of record `seq`'s write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece<T> {
    pub start: u64,
    pub end: u64,
    pub seq: u64,
    pub handle: T,
    pub at: u64,
}

impl<T: Clone> Default for LogIndex<T> {
    fn default() -> Self {
        Self {
            pieces: Default::default(),
            live: Default::default(),
            reserved: 0,
            held: 0,
        }
    }
}

impl<T: Clone> LogIndex<T> {
    fn dec(&mut self, seq: u64) {
        let (n, cost, _, len) = self.live.get_mut(&seq).expect("a piece's record is live");
        *n -= 1;
        if *n == 0 {
            self.reserved -= *cost;
            self.held -= *len;
            self.live.remove(&seq);
        }
    }

    fn inc(&mut self, seq: u64) {
        self.live.get_mut(&seq).expect("a piece's record is live").0 += 1;
    }

    /// Cut pieces so that none crosses `at`.
    fn split(&mut self, at: u64) {
        let Some((_, p)) = self.pieces.range(..at).next_back() else {
            return;
        };
        if p.end <= at {
            return;
        }
        let mut right = p.clone();
        right.at += at - p.start;
        right.start = at;
        self.pieces.get_mut(&p.start.clone()).unwrap().end = at;
        self.inc(right.seq);
        self.pieces.insert(at, right);
    }

    /// Remove everything in `[start, end)`.
    fn cut(&mut self, start: u64, end: u64) {
        self.split(start);
        self.split(end);
        let gone: Vec<u64> = self.pieces.range(start..end).map(|(k, _)| *k).collect();
        for k in gone {
            let p = self.pieces.remove(&k).unwrap();
            self.dec(p.seq);
        }
    }

    /// Record `seq` (at ring offset `offset`) wrote `len` bytes at `start`
    /// (bytes of `handle` from 0); writing them to the members takes at most
    /// `cost` bytes of ring ([`Reserve::cost`]), held in
    /// [`LogIndex::reserved`] while the record is needed.
    pub fn insert(&mut self, start: u64, len: u64, seq: u64, handle: T, cost: u64, offset: u64) {
        if len == 0 {
            return;
        }
        self.cut(start, start + len);
        assert!(!self.live.contains_key(&seq), "a record is indexed once");
        self.live.insert(seq, (1, cost, offset, len));
        self.reserved += cost;
        self.held += len;
        self.pieces.insert(
            start,
            Piece {
                start,
                end: start + len,
                seq,
                handle,
                at: 0,
            },
        );
    }

    /// The pieces overlapping `[start, end)`, clipped to it, in order.
    pub fn overlapping(&self, start: u64, end: u64) -> Vec<Piece<T>> {
        let first = self
            .pieces
            .range(..=start)
            .next_back()
            .filter(|(_, p)| p.end > start)
            .map(|(k, _)| *k)
            .unwrap_or(start);
        self.pieces
            .range(first..end)
            .map(|(_, p)| {
                let (s, e) = (p.start.max(start), p.end.min(end));
                Piece {
                    start: s,
                    end: e,
                    seq: p.seq,
                    handle: p.handle.clone(),
                    at: p.at + (s - p.start),
                }
            })
            .collect()
    }

    /// Every piece, in array order.
    pub fn pieces(&self) -> Vec<Piece<T>> {
        self.pieces.values().cloned().collect()
    }

    /// Remove `p` (a piece as [`LogIndex::pieces`] gave it) if the index
    /// still holds exactly it: reclaimed bytes that a newer write replaced
    /// meanwhile stay.
    pub fn remove_if_unchanged(&mut self, p: &Piece<T>) -> bool {
        match self.pieces.get(&p.start) {
            Some(q) if q.end == p.end && q.seq == p.seq && q.at == p.at => {
                self.pieces.remove(&p.start);
                self.dec(p.seq);
                true
            }
            _ => false,
        }
    }

    /// `p` (a piece as [`LogIndex::pieces`] gave it) was written to the
    /// members: whatever of `[p.start, p.end)` the index still holds from
    /// record `p.seq` goes (those bytes are the ones written; a newer write
    /// that replaced part of it meanwhile stays). Returns the bytes removed.
    /// Unlike [`LogIndex::remove_if_unchanged`], a record whose pieces were
    /// all written never stays needed, so its reclaim cost is released.
    pub fn remove_reclaimed(&mut self, p: &Piece<T>) -> u64 {
        self.split(p.start);
        self.split(p.end);
        let gone: Vec<u64> = self
            .pieces
            .range(p.start..p.end)
            .filter(|(_, q)| q.seq == p.seq)
            .map(|(k, _)| *k)
            .collect();
        let mut bytes = 0;
        for k in gone {
            let q = self.pieces.remove(&k).unwrap();
            bytes += q.end - q.start;
            self.dec(q.seq);
        }
        bytes
    }

    /// Ring bytes the reclaimer needs to write everything the index holds
    /// to the members (the reclaim costs of the records still needed).
    pub fn reserved(&self) -> u64 {
        self.reserved
    }

    /// The oldest record the index still needs, (seq, ring offset) (None:
    /// none).
    pub fn oldest_needed(&self) -> Option<(u64, u64)> {
        self.live.iter().next().map(|(s, x)| (*s, x.2))
    }

    /// Bytes of the records still needed (a record partly replaced is
    /// held whole: its handle holds all of it).
    pub fn held(&self) -> u64 {
        self.held
    }

    /// Bytes the index holds.
    pub fn bytes(&self) -> u64 {
        self.pieces.values().map(|p| p.end - p.start).sum()
    }

    /// Pieces in the index.
    pub fn len(&self) -> usize {
        self.pieces.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pieces.is_empty()
    }
}

/// Write-back: does the log hold all of `[start, end)`, given the pieces
/// [`LogIndex::overlapping`] returned for it? Then a read needs no member.
pub fn covers<T>(pieces: &[Piece<T>], start: u64, end: u64) -> bool {
    pieces.iter().map(|p| p.end - p.start).sum::<u64>() >= end.saturating_sub(start)
}

/// Write-back: the bytes of a data record for a write of `len` bytes (header
/// page and the payload padded to whole pages).
pub fn data_record_bytes(len: u64) -> u64 {
    PAGE + len.div_ceil(PAGE) * PAGE
}

/// Write-back's room rule. The reclaimer writes logged data to the members
/// as journaled stripe updates, and those records go at the ring's tail,
/// behind data records not yet reclaimed: their room is freed only when the
/// checkpoint passes every older data record. So room is reserved as data
/// is admitted: every record not yet reclaimed holds its reclaim cost (the
/// most ring its stripe updates can take, [`Reserve::cost`]), and a record
/// other than the reclaimer's is admitted only while
///
/// ```text
/// used + pad + bytes + reserved + this record's cost + slack <= ring
/// ```
///
/// The reclaimer's own records are always admitted. Reclaiming a batch adds
/// at most the batch's costs to `used` and releases them from `reserved`
/// (a record whose pieces all went is no longer needed): the sum never
/// grows, except by the part of one record cut at the batch's end and one
/// pad where the ring wraps, which `slack` covers. So the reclaimer always
/// has room, reclaiming everything empties the ring, and a writer that
/// finds no room reclaims (or waits for the reclaimer) and then fits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reserve {
    /// Members of the array.
    pub members: usize,
    /// Members a written byte reaches at most: its data and its parity or
    /// copies ([`Reserve::expansion_of`]); 0 in journal mode.
    pub expansion: u64,
    /// The most bytes of logged writes the index holds in memory
    /// ([`INDEX_BYTES_MAX`] unless set, `serve --log-memory`).
    pub memory_max: u64,
}

impl Reserve {
    pub fn new(members: usize, redundancy: crate::layout::Redundancy) -> Self {
        Self {
            members,
            expansion: Self::expansion_of(redundancy),
            memory_max: INDEX_BYTES_MAX,
        }
    }

    /// HPDA of `members`: its log is write-back, and the RAID4 writes each
    /// byte to its data member and the parity.
    pub fn hpda(members: usize) -> Self {
        Self {
            members,
            expansion: 2,
            memory_max: INDEX_BYTES_MAX,
        }
    }

    /// Journal mode: nothing is reserved (every record is on the members
    /// at the next checkpoint).
    pub fn none(members: usize) -> Self {
        Self {
            members,
            expansion: 0,
            memory_max: INDEX_BYTES_MAX,
        }
    }

    /// How many members one written byte is written to at most: a stripe
    /// update writes the data and, on each parity member, at most the
    /// union of the written ranges (no more bytes than the data), or the
    /// data's copies.
    pub fn expansion_of(r: crate::layout::Redundancy) -> u64 {
        use crate::layout::Redundancy;
        match r {
            Redundancy::None => 1,
            Redundancy::Mirror { copies } => copies as u64,
            Redundancy::Parity { count } => 1 + count as u64,
        }
    }

    /// The most ring the reclaimer's stripe updates take to write a logged
    /// write of `len` bytes at array offset `at`: each page it spans on
    /// each member it reaches; a header page; two cut points a newer write
    /// can make in an older piece (each a header and, unaligned, a page per
    /// member written twice), charged to the newer write; and a header per
    /// 100 payload pages (a record lists at most 252 extents).
    pub fn cost(&self, at: u64, len: u64) -> u64 {
        if self.expansion == 0 || len == 0 {
            return 0;
        }
        let pages = (at + len).div_ceil(PAGE) - at / PAGE;
        let unaligned =
            u64::from(!at.is_multiple_of(PAGE)) + u64::from(!(at + len).is_multiple_of(PAGE));
        let payload = self.expansion * (pages + unaligned);
        PAGE * (payload + 3 + payload / 100)
    }

    /// The most data one write-back record (and one reclaim batch) holds:
    /// a batch's stripe updates must fit in a record of the ring.
    pub fn record_max(&self, ring_len: u64) -> u64 {
        (ring_len / (8 * self.members as u64) / PAGE * PAGE)
            .clamp(PAGE, WRITE_BACK_RECORD_MAX)
            .min(ring_len / 4 / PAGE * PAGE - PAGE)
    }

    /// Room kept free beyond the reservations: one record's cost (a batch
    /// can end inside a record, which then stays reserved whole) and one
    /// pad (the reclaimer's records wrap at most once while everything is
    /// reclaimed; a pad is smaller than the record after it).
    pub fn slack(&self, ring_len: u64) -> u64 {
        if self.expansion == 0 {
            return 0;
        }
        // An unaligned record of the largest size costs the most.
        2 * self.cost(PAGE - 1, self.record_max(ring_len)) + 2 * PAGE
    }

    /// Does a ring of `len` bytes take the largest data record on top of
    /// its own cost and the slack (with nothing else in it), and the
    /// stripe updates of one batch in one record? The smallest such ring
    /// is the write-back log's minimum.
    pub fn ring_fits(&self, len: u64) -> bool {
        let max = self.record_max(len);
        let cost = self.cost(PAGE - 1, max);
        len >= RING_MIN
            && data_record_bytes(max) + cost + self.slack(len) <= len
            && cost <= len / 4 / PAGE * PAGE
    }

    /// The smallest ring [`Reserve::ring_fits`] takes (whole pages).
    pub fn ring_min(&self) -> u64 {
        let mut len = RING_MIN;
        // Bounded: a record's cost is at most 3/8 of the ring plus a
        // constant (the record is at most ring / 8 per member), so doubling
        // ends.
        while !self.ring_fits(len) {
            assert!(len < 1 << 50, "a write-back ring always fits somewhere");
            len *= 2;
        }
        if len == RING_MIN {
            return len;
        }
        let (mut lo, mut hi) = (len / 2 / PAGE, len / PAGE);
        while lo + 1 < hi {
            let mid = (lo + hi) / 2;
            if self.ring_fits(mid * PAGE) {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        hi * PAGE
    }
}

/// May a record of `bytes` go where `p` says, with `reserved` ring bytes
/// held for the reclaimer and `cost` more for this record ([`Reserve`])?
/// For every record but the reclaimer's.
pub fn admits(
    ring: &Ring,
    p: &Placement,
    bytes: u64,
    reserved: u64,
    cost: u64,
    slack: u64,
) -> bool {
    if reserved + cost == 0 {
        return true;
    }
    ring.used + p.pad.map_or(0, |x| x.1) + bytes + reserved + cost + slack <= ring.len
}

/// Where a stripe-update or intent record of `bytes` goes: the
/// reclaimer's wherever the ring has room, any other only under [`admits`]
/// (it must leave the reclaimer its reserved room). None: checkpoint, then
/// (write-back) reclaim first.
pub fn place_record(
    ring: &Ring,
    bytes: u64,
    reclaimer: bool,
    reserved: u64,
    slack: u64,
) -> Option<Placement> {
    ring.place(bytes)
        .filter(|p| reclaimer || admits(ring, p, bytes, reserved, 0, slack))
}

/// A data record placed by [`place_group`]: (placement, bytes, reclaim cost).
pub type Placed = (Placement, u64, u64);

/// Group commit (write-back): the data records of writes `(at, len)`,
/// waiting together, placed one after another in the ring (each under
/// [`admits`], with `reserved` held before the first) and taken, until the
/// first that does not fit. Returns each placed record (placement, bytes,
/// reclaim cost) and the I/O groups: ranges of records contiguous in the
/// ring, each written with one write and one flush per copy (a pad, where
/// the ring wraps, starts a new group). One flush for many records is what
/// makes a log on disks keep up with a queue of small writes; the records
/// themselves are the ones a write alone makes, so recovery does not know
/// about groups.
pub fn place_group<T: Clone>(
    ring: &mut Ring,
    reserve: &Reserve,
    index: &LogIndex<T>,
    writes: &[(u64, u64)],
) -> (Vec<Placed>, Vec<std::ops::Range<usize>>) {
    let mut placed: Vec<Placed> = Vec::new();
    let mut groups: Vec<std::ops::Range<usize>> = Vec::new();
    let slack = reserve.slack(ring.len);
    let (mut reserved, mut held) = (index.reserved(), index.held());
    let mut group_bytes = 0u64;
    for &(at, len) in writes {
        let bytes = data_record_bytes(len);
        // The index's memory is bounded: a write cuts at most one older
        // piece in three (two more pieces), and holds its bytes.
        if bytes > ring.record_bytes_max()
            || index.len() + 2 * (placed.len() + 1) > INDEX_PIECES_MAX
            // (an empty index takes one record whatever its size)
            || (held > 0 && held + len > reserve.memory_max)
            || (!placed.is_empty() && group_bytes + bytes > GROUP_BYTES_MAX)
        {
            break;
        }
        let cost = reserve.cost(at, len);
        let Some(p) = ring
            .place(bytes)
            .filter(|p| admits(ring, p, bytes, reserved, cost, slack))
        else {
            break;
        };
        ring.commit(&p, bytes);
        reserved += cost;
        held += len;
        group_bytes += bytes;
        let i = placed.len();
        // Contiguous with the record before: no pad, and not wrapped to 0.
        let follows = placed
            .last()
            .is_some_and(|(q, b, _)| p.pad.is_none() && q.offset + b == p.offset);
        match groups.last_mut() {
            Some(g) if follows => g.end = i + 1,
            _ => groups.push(i..i + 1),
        }
        placed.push((p, bytes, cost));
    }
    (placed, groups)
}

/// Write-back: the most data one record (and one reclaim batch) holds, for
/// an array of `members` ([`Reserve::record_max`]).
pub fn write_back_record_max(ring: &Ring, members: usize) -> u64 {
    Reserve::none(members).record_max(ring.len)
}

/// Write-back: before logging a write, reclaim down to this many bytes of
/// the ring when it is more than half used, counting the room reserved for
/// the reclaimer ([`Reserve`]).
pub fn reclaim_before_write(ring: &Ring, reserved: u64) -> Option<u64> {
    (ring.used + reserved > ring.len / 2).then_some(ring.len / 4)
}

/// Does a reclaim down to `target` bytes (0: everything) go on, with the
/// ring as it is, `reserved` held for the reclaimer, and the index empty or
/// not?
pub fn reclaim_more(ring: &Ring, reserved: u64, index_empty: bool, target: u64) -> bool {
    !index_empty && (target == 0 || ring.used + reserved > target)
}

/// A run of the array a reclaim writes: (start, end, the batch pieces it
/// is made of, in array order).
pub type ReclaimRun = (u64, u64, Vec<usize>);

/// One reclaim batch: the oldest pieces (by record, then offset) up to
/// `batch_max` bytes (at least one piece), and the runs of the array they
/// cover — contiguous pieces merged, so whole stripes go out as full-stripe
/// writes — as (start, end, indices into the batch in array order).
pub fn reclaim_batch<T: Clone>(
    pieces: &[Piece<T>],
    batch_max: u64,
) -> (Vec<Piece<T>>, Vec<ReclaimRun>) {
    let mut sorted: Vec<&Piece<T>> = pieces.iter().collect();
    sorted.sort_by_key(|p| (p.seq, p.start));
    let mut batch = Vec::new();
    let mut bytes = 0;
    for p in sorted {
        if bytes > 0 && bytes + (p.end - p.start) > batch_max {
            break;
        }
        bytes += p.end - p.start;
        batch.push(p.clone());
    }
    let mut order: Vec<usize> = (0..batch.len()).collect();
    order.sort_by_key(|&i| batch[i].start);
    let mut runs: Vec<ReclaimRun> = Vec::new();
    for i in order {
        match runs.last_mut() {
            Some(r) if r.1 == batch[i].start => {
                r.1 = batch[i].end;
                r.2.push(i);
            }
            _ => runs.push((batch[i].start, batch[i].end, vec![i])),
        }
    }
    (batch, runs)
}

/// A reclaim run written in pieces of at most `max` bytes (each one's stripe
/// updates fit in the room the log keeps for them).
pub fn split_run(start: u64, end: u64, max: u64) -> Vec<(u64, u64)> {
    assert!(max > 0);
    let mut v = Vec::new();
    let mut at = start;
    while at < end {
        let n = max.min(end - at);
        v.push((at, n));
        at += n;
    }
    v
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

/// The stripe updates of planned stripes, as the log records them: each
/// stripe's written bytes and member extents.
pub fn stripe_updates(stripes: &[crate::plan::StripePlan]) -> Vec<Update> {
    stripes
        .iter()
        .map(|sp| {
            let pieces = crate::iomap::plan_extents(std::slice::from_ref(sp), |r| r.write);
            Update {
                bytes: pieces.iter().map(|p| p.len).sum(),
                entries: pieces.len(),
            }
        })
        .collect()
}

/// The records (whole bytes, header page included) that journal the stripe
/// updates of a planned write, as the engine writes them: whole stripes per
/// record ([`batches`]), records without writes left out.
pub fn record_bytes(
    stripes: &[crate::plan::StripePlan],
    payload_max: u64,
) -> Result<Vec<u64>, BatchError> {
    let updates = stripe_updates(stripes);
    Ok(batches(&updates, payload_max)?
        .into_iter()
        .map(|r| updates[r].iter().map(|u| u.bytes).sum::<u64>())
        .filter(|&b| b > 0)
        .map(|b| PAGE + b)
        .collect())
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
#[path = "journal_tests.rs"]
mod tests;
