//! Block checksums: a crc32c per 4 KiB block of a member's data area, kept on
//! the same member, verified on every read. The engine sees a member whose data
//! area starts at `DATA_OFFSET` as always; this wrapper keeps the checksum area
//! between the metadata and the data and shifts data offsets past it:
//!
//! ```text
//! physical: [0, 1 MiB) superblock + bitmap | [1 MiB, 1 MiB + C) checksums | data
//! virtual:  [0, 1 MiB) superblock + bitmap | data
//! ```
//!
//! Entry i (4 bytes, little-endian) of the checksum area covers data block i.
//! 0 means "never written": the block must then read as zeros (or happen to
//! have crc32c u32::MAX, the one value 0 cannot stand for); otherwise the entry
//! is crc32c + 1. A freshly created or replaced member needs no initialisation.
//!
//! A block whose data and entry disagree reads as an `InvalidData` error: the
//! engine treats it as a failed sector (reconstruct, return, rewrite).
//!
//! Entries are kept in memory and written back lazily: a write updates its
//! entries and marks their checksum page dirty; dirty pages are written at
//! the member's next flush (before it reaches the device), or when more than
//! [`DIRTY_PAGES_MAX`] are dirty. So a 4 KiB random write costs no second
//! member write (the page of a hot region is written once per flush, not once
//! per write). What keeps this crash-safe: the write-intent bitmap clears a
//! region's bit only after a member flush that began after the region's last
//! write ended, and that flush wrote the region's pages first; a journal
//! checkpoint likewise lets records go only after such a flush. A crash
//! therefore leaves stale entries only in regions the bitmap marks dirty (or
//! whose records the journal replays through this wrapper), and assembly
//! recomputes the entries of those regions from the data
//! ([`ChecksumMember::rehash`]) before the resync.
//!
//! A read that races a write of the same block (allowed on a block device:
//! the reader gets old or new bytes) may see new data with the old entry.
//! Writers announce themselves per shard of checksum pages (a count in
//! flight and a generation bumped when done); a reader whose block fails
//! while a write to its shard overlapped it reads again instead of reporting
//! corruption, so only a mismatch no write explains is counted.

use super::{AlignedBuf, Member};
use hetraid_parity::crc32c::{crc32c, crc32c_append};
use std::io;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

const BLOCK: u64 = 4096;
const META: u64 = crate::format::DATA_OFFSET;
/// Entries per 4 KiB checksum page.
const PER_PAGE: u64 = BLOCK / 4;
/// Shards of checksum pages (by page index): each has a lock serialising the
/// writers of its pages and the write-overlap markers readers check.
const PAGE_LOCKS: u64 = 64;
/// Reads of a block retried while writes to its shard keep overlapping them
/// (64 yields, then pauses growing to a millisecond: about 1.5 s in all);
/// after that the mismatch is reported.
const RACE_RETRIES_MAX: usize = 1600;
/// Dirty checksum pages a member keeps before writing them back without a
/// flush: bounds the work (and, on a disk, the time) a flush adds, and the
/// entries a crash can leave stale to the regions the bitmap covers anyway.
/// 256 pages cover 1 GiB of data written at random.
pub const DIRTY_PAGES_MAX: usize = 256;

/// Writes to one shard: how many are between their data write and their
/// entry update, and how many have finished.
#[derive(Default)]
struct Shard {
    in_flight: AtomicUsize,
    generation: AtomicU64,
}

impl Shard {
    /// A reading of the markers: (writes in flight, generation).
    fn snapshot(&self) -> (usize, u64) {
        (
            self.in_flight.load(Ordering::SeqCst),
            self.generation.load(Ordering::SeqCst),
        )
    }
}

/// Marks a write in flight on the shards it touches until dropped.
struct Writing<'a>(&'a [Shard], std::ops::Range<u64>);

impl<'a> Writing<'a> {
    fn new(shards: &'a [Shard], pages: std::ops::Range<u64>) -> Self {
        for s in Self::touched(shards, &pages) {
            s.in_flight.fetch_add(1, Ordering::SeqCst);
        }
        Writing(shards, pages)
    }

    fn touched<'s>(
        shards: &'s [Shard],
        pages: &std::ops::Range<u64>,
    ) -> impl Iterator<Item = &'s Shard> {
        let n = (pages.end - pages.start).min(PAGE_LOCKS);
        (pages.start..pages.start + n).map(move |p| &shards[(p % PAGE_LOCKS) as usize])
    }
}

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        for s in Self::touched(self.0, &self.1) {
            s.generation.fetch_add(1, Ordering::SeqCst);
            s.in_flight.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// A write's new entries: on the stack up to 64 KiB of data (no allocation
/// for the small writes that are most of them), on the heap beyond.
type Entries = smallvec::SmallVec<[u32; 16]>;

/// Bytes of checksum area for a member whose data area may reach `data_bytes`,
/// rounded up to whole MiB.
pub fn area_bytes(data_bytes: u64) -> u64 {
    (data_bytes.div_ceil(BLOCK) * 4).div_ceil(1 << 20) * (1 << 20)
}

/// A block that failed its checksum (carried inside an `InvalidData` error, so
/// a scrub can say which 4 KiB page was wrong).
#[derive(Debug)]
pub struct BadBlock {
    /// Offset of the block in the member's data area.
    pub data_offset: u64,
    /// Its offset in the member file.
    pub member_offset: u64,
}

impl std::fmt::Display for BadBlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "checksum mismatch in data block {} (member offset {})",
            self.data_offset / BLOCK,
            self.member_offset
        )
    }
}

impl std::error::Error for BadBlock {}

/// The data-area offset of the bad block behind `e`, if it is a checksum mismatch.
pub fn bad_block(e: &io::Error) -> Option<u64> {
    e.get_ref()?
        .downcast_ref::<BadBlock>()
        .map(|b| b.data_offset)
}

pub struct ChecksumMember {
    inner: Arc<dyn Member>,
    /// The inner member's file, when it is a plain one: reads go straight
    /// to `pread`, inlined, as the slot's own reads do (see
    /// `slot::pread_exact` on what the calls in between cost).
    plain: Option<super::PlainFile>,
    area: u64,
    /// Checksum pages, loaded on first use (4 bytes per 4 KiB of data: 0.1 %
    /// of the data touched). Entries are atomics, so reads verify without a
    /// lock; writers of one page take its shard's lock to write it out whole.
    pages: Vec<OnceLock<Box<[AtomicU32]>>>,
    page_locks: Vec<Mutex<()>>,
    /// Per checksum page: its entries changed since it was last written.
    /// Set and cleared under the page's shard lock.
    dirty: Vec<std::sync::atomic::AtomicBool>,
    /// The dirty pages, in the order they became dirty (each once).
    dirty_list: Mutex<Vec<u64>>,
    shards: Vec<Shard>,
    mismatches: AtomicU64,
}

/// Ask the CPU to fetch entry `e` (a hint).
#[inline(always)]
fn prefetch_entry(e: &AtomicU32) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch hint; the address is a live entry.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(e as *const AtomicU32 as *const i8);
    }
    let _ = e;
}

fn entry(block: &[u8]) -> u32 {
    crc32c(block).wrapping_add(1)
}

fn matches(stored: u32, block: &[u8]) -> bool {
    let crc = crc32c(block);
    match stored {
        0 => crc == u32::MAX || block.iter().all(|&b| b == 0),
        s => s == crc.wrapping_add(1),
    }
}

impl ChecksumMember {
    /// Wrap `inner`, whose checksum area is `area` bytes long.
    pub fn new(inner: Arc<dyn Member>, area: u64) -> Self {
        Self {
            plain: inner.plain_file().filter(|p| !p.direct),
            inner,
            area,
            pages: (0..area / BLOCK).map(|_| OnceLock::new()).collect(),
            page_locks: (0..PAGE_LOCKS).map(|_| Mutex::new(())).collect(),
            dirty: (0..area / BLOCK)
                .map(|_| std::sync::atomic::AtomicBool::new(false))
                .collect(),
            dirty_list: Mutex::new(Vec::new()),
            shards: (0..PAGE_LOCKS).map(|_| Shard::default()).collect(),
            mismatches: AtomicU64::new(0),
        }
    }

    /// Blocks found not to match their checksum so far.
    pub fn mismatches(&self) -> u64 {
        self.mismatches.load(Ordering::Relaxed)
    }

    /// Checksum page `p`, read from the member on first use.
    fn page(&self, p: u64) -> io::Result<&[AtomicU32]> {
        let cell = self.pages.get(p as usize).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("data block {} is beyond the checksum area", p * PER_PAGE),
            )
        })?;
        if let Some(v) = cell.get() {
            return Ok(v);
        }
        let mut b = AlignedBuf::zeroed(BLOCK as usize);
        self.inner.read_at(&mut b, META + p * BLOCK)?;
        let v: Box<[AtomicU32]> = b
            .chunks_exact(4)
            .map(|c| AtomicU32::new(u32::from_le_bytes(c.try_into().unwrap())))
            .collect();
        // Two first uses at once read the same page; the first one kept wins.
        let _ = cell.set(v);
        Ok(cell.get().expect("set above"))
    }

    /// Set the entries of data blocks `first..` to `values` and mark the
    /// checksum pages they live on dirty (written back at the next flush, or
    /// now when too many are dirty).
    fn store(&self, first: u64, values: &[u32]) -> io::Result<()> {
        let mut i = 0;
        let mut dirty_now = 0;
        while i < values.len() {
            let b = first + i as u64;
            let (p, at) = (b / PER_PAGE, (b % PER_PAGE) as usize);
            let n = (PER_PAGE as usize - at).min(values.len() - i);
            let page = self.page(p)?;
            let _g = self.page_locks[(p % PAGE_LOCKS) as usize].lock().unwrap();
            for (e, v) in page[at..at + n].iter().zip(&values[i..i + n]) {
                e.store(*v, Ordering::Relaxed);
            }
            if !self.dirty[p as usize].swap(true, Ordering::Relaxed) {
                let mut list = self.dirty_list.lock().unwrap();
                list.push(p);
                dirty_now = list.len();
            }
            i += n;
        }
        if dirty_now > DIRTY_PAGES_MAX {
            self.write_back()?;
        }
        Ok(())
    }

    /// Write every dirty checksum page (not flushed: the caller flushes).
    fn write_back(&self) -> io::Result<()> {
        let mut list = std::mem::take(&mut *self.dirty_list.lock().unwrap());
        list.sort_unstable();
        let mut out = AlignedBuf::zeroed(BLOCK as usize);
        for (k, &p) in list.iter().enumerate() {
            let _g = self.page_locks[(p % PAGE_LOCKS) as usize].lock().unwrap();
            // Another write-back may have written it since it was listed.
            if !self.dirty[p as usize].swap(false, Ordering::Relaxed) {
                continue;
            }
            let page = self.pages[p as usize]
                .get()
                .expect("a dirty page is loaded");
            for (k, v) in page.iter().enumerate() {
                out[4 * k..4 * k + 4].copy_from_slice(&v.load(Ordering::Relaxed).to_le_bytes());
            }
            if let Err(e) = self.inner.write_at(&out, META + p * BLOCK) {
                // Still dirty, with the rest of the list: a later flush
                // tries again (the engine fails the member meanwhile).
                self.dirty[p as usize].store(true, Ordering::Relaxed);
                drop(_g);
                self.dirty_list
                    .lock()
                    .unwrap()
                    .extend_from_slice(&list[k..]);
                return Err(e);
            }
        }
        Ok(())
    }

    /// Checksum pages not yet written since their entries changed.
    pub fn dirty_pages(&self) -> usize {
        self.dirty_list.lock().unwrap().len()
    }

    fn stored(&self, block: u64) -> io::Result<u32> {
        Ok(self.page(block / PER_PAGE)?[(block % PER_PAGE) as usize].load(Ordering::Relaxed))
    }

    /// Recompute the entries of data bytes [off, off + len) (virtual data
    /// offsets relative to the data area) from the data as it is.
    pub fn rehash(&self, off: u64, len: u64) -> io::Result<()> {
        let (a, b) = (off / BLOCK, (off + len).div_ceil(BLOCK));
        let mut buf = AlignedBuf::zeroed(((b - a) * BLOCK) as usize);
        self.inner.read_at(&mut buf, META + self.area + a * BLOCK)?;
        let values: Vec<u32> = buf.chunks_exact(BLOCK as usize).map(entry).collect();
        self.store(a, &values)
    }

    /// The first block in `buf` (data blocks `first..`) that fails its entry.
    fn first_bad(&self, first: u64, buf: &[u8]) -> io::Result<Option<u64>> {
        for (k, block) in buf.chunks_exact(BLOCK as usize).enumerate() {
            let b = first + k as u64;
            if !matches(self.stored(b)?, block) {
                return Ok(Some(b));
            }
        }
        Ok(None)
    }

    /// The error for bad block `b`, counted.
    fn bad(&self, b: u64) -> io::Error {
        self.mismatches.fetch_add(1, Ordering::Relaxed);
        io::Error::new(
            io::ErrorKind::InvalidData,
            BadBlock {
                data_offset: b * BLOCK,
                member_offset: META + self.area + b * BLOCK,
            },
        )
    }

    /// Verify the blocks in `buf`, which holds data blocks `first..` (callers
    /// that hold the engine's stripe lock: no write can race them).
    fn verify(&self, first: u64, buf: &[u8]) -> io::Result<()> {
        match self.first_bad(first, buf)? {
            Some(b) => Err(self.bad(b)),
            None => Ok(()),
        }
    }

    /// Checksum pages of data blocks `first..first + count`.
    fn pages_of(first: u64, count: u64) -> std::ops::Range<u64> {
        first / PER_PAGE..(first + count.max(1) - 1) / PER_PAGE + 1
    }

    /// The write markers of every shard the blocks touch, summed: (in flight,
    /// generation).
    fn snapshot(&self, first: u64, count: u64) -> (usize, u64) {
        Writing::touched(&self.shards, &Self::pages_of(first, count))
            .map(Shard::snapshot)
            .fold((0, 0), |(f, g), (f2, g2)| (f + f2, g.wrapping_add(g2)))
    }

    /// Block `b`'s entry, its checksum page loaded, the CPU asked to fetch
    /// it while the data is read: the entries of a random block are rarely in
    /// cache, and the miss cost a tenth of a 4 KiB read from memory-speed
    /// members.
    fn entry_prefetched(&self, b: u64) -> io::Result<&AtomicU32> {
        let e = &self.page(b / PER_PAGE)?[(b % PER_PAGE) as usize];
        prefetch_entry(e);
        Ok(e)
    }

    /// Read whole data blocks `first..` into `buf` and verify them; a mismatch
    /// that a write to the same shard overlapped is read again.
    fn read_verified(&self, buf: &mut [u8], first: u64) -> io::Result<()> {
        let count = buf.len() as u64 / BLOCK;
        if count == 1 {
            // One block (the common random read): its entry looked up once,
            // fetched while the data is read, compared; a mismatch goes the
            // long way below (which reads again and tells a race from a bad
            // block).
            let e = self.entry_prefetched(first)?;
            self.read_data(buf, first)?;
            if matches(e.load(Ordering::Relaxed), buf) {
                return Ok(());
            }
        }
        self.entry_prefetched(first)?;
        for attempt in 0..RACE_RETRIES_MAX {
            let before = self.snapshot(first, count);
            self.read_data(buf, first)?;
            let Some(b) = self.first_bad(first, buf)? else {
                return Ok(());
            };
            let after = self.snapshot(first, count);
            if before.0 == 0 && after.0 == 0 && before.1 == after.1 {
                return Err(self.bad(b));
            }
            // Yield first; a writer that keeps the shard busy (a loaded
            // machine) gets growing pauses, up to a millisecond.
            if attempt < 64 {
                std::thread::yield_now();
            } else {
                let us = 1u64 << (attempt - 64).min(10);
                std::thread::sleep(std::time::Duration::from_micros(us));
            }
        }
        // Writes kept overlapping: report the block as it reads now.
        self.verify(first, buf)
    }

    /// Read data blocks `first..` into `buf` as they are.
    #[inline(always)]
    fn read_data(&self, buf: &mut [u8], first: u64) -> io::Result<()> {
        let at = META + self.area + first * BLOCK;
        match self.plain {
            Some(p) => {
                super::file::inside(p.len, at, buf.len())?;
                super::slot::pread_exact(p.fd, buf, at)
            }
            None => self.inner.read_at(buf, at),
        }
    }

    /// Data bytes [off, off + len) as whole blocks: (first block, blocks).
    fn blocks(off: u64, len: usize) -> (u64, u64) {
        let a = off / BLOCK;
        (a, (off + len as u64).div_ceil(BLOCK) - a)
    }

    /// Write `parts` (back to back) at data offset `d`: whole blocks only, or
    /// edges completed from the member (verified first).
    fn write_data(&self, parts: &[&[u8]], d: u64) -> io::Result<()> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let (first, count) = Self::blocks(d, len);
        // Readers of these blocks that fail meanwhile read again (until dropped,
        // after the entries are stored).
        let _writing = Writing::new(&self.shards, Self::pages_of(first, count));
        let aligned = d.is_multiple_of(BLOCK) && (len as u64).is_multiple_of(BLOCK);
        let values: Entries = if aligned {
            // Stream the parts through crc32c block by block, no copy.
            let mut values = Entries::with_capacity(count as usize);
            let (mut crc, mut filled) = (0u32, 0usize);
            for p in parts {
                let mut rest: &[u8] = p;
                while !rest.is_empty() {
                    let take = (BLOCK as usize - filled).min(rest.len());
                    crc = crc32c_append(crc, &rest[..take]);
                    filled += take;
                    rest = &rest[take..];
                    if filled == BLOCK as usize {
                        values.push(crc.wrapping_add(1));
                        (crc, filled) = (0, 0);
                    }
                }
            }
            self.inner.write_vectored_at(parts, META + self.area + d)?;
            values
        } else {
            let mut whole = AlignedBuf::zeroed((count * BLOCK) as usize);
            let base = first * BLOCK;
            let head = (d - base) as usize;
            if head > 0 || !len.is_multiple_of(BLOCK as usize) {
                // The first and last blocks keep their other bytes.
                for b in [first, first + count - 1] {
                    let at = ((b - first) * BLOCK) as usize;
                    let block = &mut whole[at..at + BLOCK as usize];
                    self.inner.read_at(block, META + self.area + b * BLOCK)?;
                    self.verify(b, block)?;
                }
            }
            let mut at = head;
            for p in parts {
                whole[at..at + p.len()].copy_from_slice(p);
                at += p.len();
            }
            self.inner.write_at(&whole, META + self.area + base)?;
            let mut values = Entries::with_capacity(count as usize);
            whole
                .chunks_exact(BLOCK as usize)
                .for_each(|b| values.push(entry(b)));
            values
        };
        self.store(first, &values)
    }
}

impl Member for ChecksumMember {
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        if off < META {
            return self.inner.read_at(buf, off);
        }
        let d = off - META;
        let (first, count) = Self::blocks(d, buf.len());
        if d.is_multiple_of(BLOCK) && (buf.len() as u64).is_multiple_of(BLOCK) {
            return self.read_verified(buf, first);
        }
        let mut whole = AlignedBuf::zeroed((count * BLOCK) as usize);
        self.read_verified(&mut whole, first)?;
        let at = (d - first * BLOCK) as usize;
        buf.copy_from_slice(&whole[at..at + buf.len()]);
        Ok(())
    }

    fn write_at(&self, buf: &[u8], off: u64) -> io::Result<()> {
        if off < META {
            return self.inner.write_at(buf, off);
        }
        self.write_data(&[buf], off - META)
    }

    fn write_vectored_at(&self, parts: &[&[u8]], off: u64) -> io::Result<()> {
        if off < META {
            return self.inner.write_vectored_at(parts, off);
        }
        self.write_data(parts, off - META)
    }

    fn flush(&self) -> io::Result<()> {
        // The pages first, so the flush makes them durable with the data.
        self.write_back()?;
        self.inner.flush()
    }

    fn len(&self) -> u64 {
        self.inner.len().saturating_sub(self.area)
    }

    fn name(&self) -> String {
        self.inner.name()
    }

    fn rehash(&self, off: u64, len: u64) -> io::Result<()> {
        ChecksumMember::rehash(self, off, len)
    }

    fn checksum_area(&self) -> Option<u64> {
        Some(self.area)
    }

    /// Whole blocks are discarded on the inner member and their entries set
    /// to 0 ("never written: reads as zeros"); the partial blocks at the
    /// edges are written as zeros, with their entries.
    fn discard(&self, off: u64, len: u64) -> io::Result<bool> {
        if off < META {
            return self.inner.discard(off, len);
        }
        let d = off - META;
        let (a, b) = (d.div_ceil(BLOCK) * BLOCK, (d + len) / BLOCK * BLOCK);
        if a >= b {
            super::write_zeroes(self, off, len)?;
            return Ok(false);
        }
        if d < a {
            super::write_zeroes(self, off, a - d)?;
        }
        if b < d + len {
            super::write_zeroes(self, META + b, d + len - b)?;
        }
        let (first, count) = (a / BLOCK, (b - a) / BLOCK);
        let _writing = Writing::new(&self.shards, Self::pages_of(first, count));
        let freed = self.inner.discard(META + self.area + a, b - a)?;
        // A page's worth of entries at a time: a discard of a whole member
        // allocates no entry list as long as it.
        let zeros = [0u32; PER_PAGE as usize];
        let mut b = first;
        while b < first + count {
            let n = (PER_PAGE - b % PER_PAGE).min(first + count - b);
            self.store(b, &zeros[..n as usize])?;
            b += n;
        }
        Ok(freed)
    }

    fn stored(&self, off: u64, len: u64) -> bool {
        if off < META {
            return self.inner.stored(off, len);
        }
        self.inner.stored(off + self.area, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::member::FaultMember;

    fn pair() -> (Arc<FaultMember>, ChecksumMember) {
        let raw = Arc::new(FaultMember::new("m", META + (1 << 20) + (4 << 20), 1));
        let c = ChecksumMember::new(raw.clone(), 1 << 20);
        (raw, c)
    }

    #[test]
    fn writes_read_back_and_a_flipped_byte_is_caught() {
        let (raw, c) = pair();
        assert_eq!(area_bytes(4 << 20), 1 << 20);
        // Never written: zeros read fine.
        let mut z = vec![1u8; 10_000];
        c.read_at(&mut z, META + 123).unwrap();
        assert!(z.iter().all(|&b| b == 0));
        // Aligned, vectored, unaligned.
        let a: Vec<u8> = (0..8192).map(|i| i as u8).collect();
        c.write_vectored_at(&[&a[..4096], &a[4096..]], META)
            .unwrap();
        c.write_at(b"hello", META + 10_000).unwrap();
        let mut back = vec![0u8; 8192];
        c.read_at(&mut back, META).unwrap();
        assert_eq!(back, a);
        let mut h = [0u8; 5];
        c.read_at(&mut h, META + 10_000).unwrap();
        assert_eq!(&h, b"hello");
        // Flip a byte behind the wrapper's back.
        let mut one = [0u8; 1];
        raw.read_at(&mut one, META + (1 << 20) + 5000).unwrap();
        one[0] ^= 1;
        raw.write_at(&one, META + (1 << 20) + 5000).unwrap();
        let e = c.read_at(&mut back, META).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert_eq!(c.mismatches(), 1);
        // rehash accepts the data as it is.
        c.rehash(4096, 4096).unwrap();
        c.read_at(&mut back, META).unwrap();
        // A fresh wrapper reads the entries from the member once flushed.
        c.flush().unwrap();
        assert_eq!(c.dirty_pages(), 0);
        let c2 = ChecksumMember::new(raw.clone(), 1 << 20);
        c2.read_at(&mut back, META).unwrap();
        c2.read_at(&mut h, META + 10_000).unwrap();
        assert_eq!(&h, b"hello");
    }

    #[test]
    fn entries_reach_the_member_at_a_flush_or_past_the_dirty_bound() {
        // Room for DIRTY_PAGES_MAX + 8 checksum pages' worth of data.
        let pages = DIRTY_PAGES_MAX as u64 + 8;
        let area = (pages * BLOCK).div_ceil(1 << 20) * (1 << 20);
        let raw = Arc::new(FaultMember::new(
            "m",
            META + area + pages * PER_PAGE * BLOCK,
            1,
        ));
        let c = ChecksumMember::new(raw.clone(), area);
        let block = vec![7u8; BLOCK as usize];
        let on_member = |p: u64| {
            let mut b = vec![0u8; BLOCK as usize];
            raw.read_at(&mut b, META + p * BLOCK).unwrap();
            u32::from_le_bytes(b[..4].try_into().unwrap())
        };
        // One write per checksum page: no page written until the bound.
        for p in 0..DIRTY_PAGES_MAX as u64 {
            c.write_at(&block, META + p * PER_PAGE * BLOCK).unwrap();
        }
        assert_eq!(c.dirty_pages(), DIRTY_PAGES_MAX);
        assert_eq!(on_member(0), 0, "a page was written before a flush");
        // A second write to a dirty page adds none.
        c.write_at(&block, META + BLOCK).unwrap();
        assert_eq!(c.dirty_pages(), DIRTY_PAGES_MAX);
        // One more page: all are written back.
        c.write_at(&block, META + DIRTY_PAGES_MAX as u64 * PER_PAGE * BLOCK)
            .unwrap();
        assert_eq!(c.dirty_pages(), 0);
        assert_eq!(on_member(0), entry(&block));
        assert_eq!(on_member(DIRTY_PAGES_MAX as u64), entry(&block));
        // Then the flush writes what became dirty since.
        c.write_at(
            &block,
            META + (DIRTY_PAGES_MAX as u64 + 1) * PER_PAGE * BLOCK,
        )
        .unwrap();
        assert_eq!(on_member(DIRTY_PAGES_MAX as u64 + 1), 0);
        c.flush().unwrap();
        assert_eq!(on_member(DIRTY_PAGES_MAX as u64 + 1), entry(&block));
        // Reads in between always used the entries in memory.
        let mut back = vec![0u8; BLOCK as usize];
        c.read_at(&mut back, META + BLOCK).unwrap();
        assert_eq!(back, block);
    }

    #[test]
    fn a_discard_reads_as_zeros_with_every_entry_right() {
        let (raw, c) = pair();
        let a: Vec<u8> = (0..5 * BLOCK as usize)
            .map(|i| (i % 251) as u8 + 1)
            .collect();
        c.write_at(&a, META).unwrap();
        // Not block-aligned at either end: edges written as zeros, whole
        // blocks discarded (the fault member writes zeros) with entry 0.
        c.discard(META + 1000, 3 * BLOCK).unwrap();
        let mut back = vec![0u8; a.len()];
        c.read_at(&mut back, META).unwrap();
        let mut want = a.clone();
        want[1000..1000 + 3 * BLOCK as usize].fill(0);
        assert_eq!(back, want);
        // Blocks 1 and 2 were whole: "never written" again.
        assert_eq!((c.stored(1).unwrap(), c.stored(2).unwrap()), (0, 0));
        c.flush().unwrap();
        // A fresh wrapper agrees with the member.
        let c2 = ChecksumMember::new(raw, 1 << 20);
        c2.read_at(&mut back, META).unwrap();
        assert_eq!(back, want);
        assert_eq!(c2.mismatches(), 0);
    }
}
