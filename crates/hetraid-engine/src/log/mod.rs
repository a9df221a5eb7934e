//! The write log's bytes: log device headers, records, append, checkpoint and
//! the recovery scan. Where records go and when to checkpoint is decided in
//! `hetraid_core::journal`; the byte format is in `docs/FORMAT.md` ("Write
//! log").
//!
//! ```text
//! log device offset   contents
//! 0, 4 KiB            header slots 0 and 1 (generation g lives in slot g % 2)
//! 64 KiB ..           the ring: records, back to back, wrapping
//! ```
//!
//! Every record is written to every copy and flushed before `append` returns;
//! either copy alone recovers the log. A copy whose write fails is dropped
//! (with a warning); when none is left, writes are refused.

use crate::error::{EngineError, Result};
use crate::format::{LogMode, LogRecord};
use crate::member::{AlignedBuf, Member};
use hetraid_core::journal::{self, LogIndex, Piece, Reserve, Ring, ENTRIES_MAX, PAGE};
use hetraid_parity::crc32c::{crc32c, crc32c_append};
use std::io;
use std::sync::{Arc, Condvar, Mutex, RwLock};

mod append;
mod record;
mod scan;

use append::*;
use record::*;
pub use record::{
    header_in, is_log_device, left_out, read_header, LogHeader, LOG_MAGIC, LOG_VERSION, RING_MIN,
    RING_OFFSET,
};
pub use scan::Damage;
use scan::*;

/// One member extent of a record: `parts` back to back at data-area `offset`
/// of slot `member`.
pub struct Entry<'a> {
    pub member: u16,
    pub offset: u64,
    pub parts: Vec<&'a [u8]>,
}

impl Entry<'_> {
    fn len(&self) -> u64 {
        self.parts.iter().map(|p| p.len() as u64).sum()
    }
}

/// A record read back by the recovery scan.
pub struct Replayed {
    pub seq: u64,
    /// Where it starts in the ring.
    pub offset: u64,
    /// The copy it was read from intact.
    pub copy: usize,
    /// Stripe updates: (slot, data-area offset, ring offset, bytes): read
    /// back with [`Log::read_ring`] when replayed.
    pub entries: Vec<(u16, u64, u64, u64)>,
    /// A write-back write: (array offset, bytes, ring offset of the payload).
    pub data: Option<(u64, u64, u64)>,
    /// HPDA intent: runs of stripes (first, count) whose parity is
    /// recomputed from their data (empty for other records).
    pub stripes: Vec<(u64, u64)>,
}

/// A logged write's bytes, shared by the index pieces that point into it
/// (kept in memory, as md's stripe cache and ZFS's dirty data are: a log
/// that loses every copy at run time loses nothing acknowledged). Bounded
/// by `journal::INDEX_BYTES_MAX` whatever the log's size.
pub type Bytes = Arc<Vec<u8>>;

/// What one copy's scan found: the records, and where the log ends.
struct Scan {
    records: Vec<Replayed>,
    end_offset: u64,
    end_seq: u64,
    /// Bytes from the checkpoint to the end (pads included).
    bytes: u64,
    damage: Option<Damage>,
    /// (copy, ring offset) of records of the cut write past the end.
    leftovers: Vec<(usize, u64)>,
}

struct State {
    ring: Ring,
    generation: u64,
    /// Records before this sequence number are on the flushed members
    /// (written in the headers: see `LogHeader::flushed_seq`).
    flushed_seq: u64,
    /// HPDA: stripes named by intent records since the last checkpoint.
    announced: hetraid_core::hpda::Announced,
}

pub struct Log {
    /// By copy index; None: missing or failed.
    copies: Mutex<Vec<Option<Arc<dyn Member>>>>,
    /// Every copy's paths, for messages (by copy index), and kinds.
    names: Mutex<Vec<String>>,
    kinds: Vec<hetraid_core::MemberKind>,
    template: LogHeader,
    state: Mutex<State>,
    in_flight: Mutex<u64>,
    idle: Condvar,
    warnings: Mutex<Vec<String>>,
    /// Write-back: the array bytes the log holds newer than the members.
    index: RwLock<LogIndex<Bytes>>,
    /// A copy was dropped or added since the array last recorded which are
    /// in use.
    changed: std::sync::atomic::AtomicBool,
    /// No copy is left (kept beside `copies` so the write path reads an
    /// atomic, not the lock).
    lost: std::sync::atomic::AtomicBool,
    /// The array's log epoch (headers carry it).
    epoch: std::sync::atomic::AtomicU32,
    /// Bytes reclaimed since opened.
    reclaimed: std::sync::atomic::AtomicU64,
    /// Write-back group commit: writes waiting to be logged together.
    group: Mutex<Group>,
    group_turn: Condvar,
    /// Write-back: the room kept for the reclaimer (core `journal::Reserve`).
    reserve: Reserve,
    /// The most bytes of logged writes kept in memory (`Reserve::memory_max`).
    memory_max: std::sync::atomic::AtomicU64,
    /// The checkpoint sequence the copies' headers hold (the members'
    /// superblocks record it after it, `LogRecord::checkpoint_seq`).
    written_checkpoint: std::sync::atomic::AtomicU64,
    /// (copy, ring offset) of records a crash cut, past the end: cleared
    /// before the log is written again (`Log::clear_leftovers`).
    leftovers: Mutex<Vec<(usize, u64)>>,
    /// The thread reclaiming now: its records may use the reserved room
    /// (`Log::reclaiming`).
    reclaimer: Mutex<Option<std::thread::ThreadId>>,
}

/// While alive, the records this thread appends are the reclaimer's.
pub struct Reclaiming<'a>(&'a Log);

impl Drop for Reclaiming<'_> {
    fn drop(&mut self) {
        *self.0.reclaimer.lock().unwrap() = None;
    }
}

/// Writes waiting for the group commit, and the outcome of those logged.
/// One writer at a time leads: it logs everything waiting (one write and
/// one flush per copy for all of it), hands out the outcomes, and gives the
/// lead to a writer still waiting.
#[derive(Default)]
struct Group {
    waiting: Vec<(u64, u64, Bytes)>,
    done: std::collections::HashMap<u64, Result<Option<u64>>>,
    next_ticket: u64,
    leading: bool,
}

impl Log {
    /// Ring length a set of log devices gives (the smallest of them).
    pub fn ring_len(devs: &[Arc<dyn Member>]) -> u64 {
        devs.iter()
            .map(|d| journal::ring_bytes(d.len()))
            .min()
            .unwrap_or(0)
    }

    /// Write empty-log headers on `devs` (one or two copies, of `kinds`; ssd
    /// when not given) for array `uuid`.
    pub fn format(
        devs: Vec<Arc<dyn Member>>,
        kinds: &[hetraid_core::MemberKind],
        uuid: [u8; 16],
        rec: LogRecord,
        reserve: Reserve,
    ) -> Result<Self> {
        let ring_len = Self::ring_len(&devs);
        if ring_len < RING_MIN {
            return Err(EngineError::Refused(format!(
                "a log device must be at least {} bytes ({} of header, {} of log); {} is smaller",
                RING_OFFSET + RING_MIN,
                RING_OFFSET,
                RING_MIN,
                devs.iter()
                    .find(|d| d.len() < RING_OFFSET + RING_MIN)
                    .map_or_else(|| "one".into(), |d| d.name())
            )));
        }
        let template = LogHeader {
            uuid,
            id: rec.id,
            copy: 0,
            copies: rec.copies as u32,
            mode: rec.mode,
            kind: hetraid_core::MemberKind::Ssd,
            ring_len,
            generation: 1,
            checkpoint_offset: 0,
            checkpoint_seq: 1,
            epoch: rec.epoch,
            flushed_seq: 0,
        };
        for (i, d) in devs.iter().enumerate() {
            for generation in [0, 1] {
                let h = LogHeader {
                    copy: i as u32,
                    generation,
                    kind: kinds
                        .get(i)
                        .copied()
                        .unwrap_or(hetraid_core::MemberKind::Ssd),
                    ..template.clone()
                };
                d.write_at(&h.encode(), generation * PAGE)
                    .map_err(|e| log_err(d.as_ref(), e))?;
            }
            // A record left by an earlier use of the device must not look
            // live: the first header page of the ring is cleared.
            d.write_at(&AlignedBuf::zeroed(PAGE as usize), RING_OFFSET)
                .map_err(|e| log_err(d.as_ref(), e))?;
            d.flush().map_err(|e| log_err(d.as_ref(), e))?;
        }
        let n = devs.len();
        let epoch = rec.epoch;
        let log = Self::new(
            devs.into_iter().map(Some).collect(),
            (0..n)
                .map(|i| {
                    kinds
                        .get(i)
                        .copied()
                        .unwrap_or(hetraid_core::MemberKind::Ssd)
                })
                .collect(),
            template,
            Ring::empty(ring_len, 0, 1),
            reserve,
        );
        log.epoch.store(epoch, std::sync::atomic::Ordering::SeqCst);
        Ok(log)
    }

    fn new(
        copies: Vec<Option<Arc<dyn Member>>>,
        kinds: Vec<hetraid_core::MemberKind>,
        template: LogHeader,
        ring: Ring,
        reserve: Reserve,
    ) -> Self {
        let written_checkpoint = template.checkpoint_seq;
        let reserve = if template.mode == LogMode::WriteBack {
            reserve
        } else {
            Reserve::none(reserve.members)
        };
        let names = copies
            .iter()
            .enumerate()
            .map(|(i, c)| {
                c.as_ref()
                    .map_or_else(|| format!("log copy {i} (missing)"), |c| c.name())
            })
            .collect();
        Self {
            copies: Mutex::new(copies),
            names: Mutex::new(names),
            kinds,
            index: RwLock::new(LogIndex::default()),
            state: Mutex::new(State {
                generation: template.generation,
                flushed_seq: template.flushed_seq,
                announced: Default::default(),
                ring,
            }),
            template,
            in_flight: Mutex::new(0),
            idle: Condvar::new(),
            warnings: Mutex::new(Vec::new()),
            changed: std::sync::atomic::AtomicBool::new(false),
            lost: std::sync::atomic::AtomicBool::new(false),
            epoch: std::sync::atomic::AtomicU32::new(0),
            reclaimed: std::sync::atomic::AtomicU64::new(0),
            group: Mutex::new(Group::default()),
            group_turn: Condvar::new(),
            written_checkpoint: std::sync::atomic::AtomicU64::new(written_checkpoint),
            leftovers: Mutex::new(Vec::new()),
            memory_max: std::sync::atomic::AtomicU64::new(reserve.memory_max),
            reserve,
            reclaimer: Mutex::new(None),
        }
    }

    /// Open the log from the devices found (with their headers) for the
    /// array `uuid` whose superblock records `rec`, and scan it: the records
    /// after the last checkpoint, to be replayed, from the copy that holds
    /// the most. The caller replays them, flushes the members and then calls
    /// [`Log::checkpoint`]. Damage (see `scan_copies`) is refused by name;
    /// with `force` the log opens without the damaged record, and the
    /// returned flag says the redundancy must be resynced from the data.
    pub fn open(
        found: Vec<(Arc<dyn Member>, LogHeader)>,
        uuid: [u8; 16],
        rec: LogRecord,
        reserve: Reserve,
        force: bool,
    ) -> Result<(Self, Vec<Replayed>, bool)> {
        let mut copies: Vec<Option<Arc<dyn Member>>> = vec![None; rec.copies as usize];
        let mut generations = vec![0u64; rec.copies as usize];
        let mut kinds = vec![hetraid_core::MemberKind::Ssd; rec.copies as usize];
        let mut newest: Option<LogHeader> = None;
        let mut warnings = Vec::new();
        for (d, h) in found {
            if let Some(why) = left_out(d.as_ref(), &h, uuid, &rec) {
                warnings.push(why);
                continue;
            }
            if h.uuid != uuid || h.id != rec.id {
                return Err(EngineError::Kind(
                hetraid_core::ErrorKind::Foreign,
                format!(
                    "log device {} belongs to another array or an earlier log of this one; leave it out",
                    d.name()
                )));
            }
            let slot = copies.get_mut(h.copy as usize).ok_or_else(|| {
                EngineError::Refused(format!(
                    "log device {} says it is copy {} of a log of {} copies; the array records {}",
                    d.name(),
                    h.copy,
                    h.copies,
                    rec.copies
                ))
            })?;
            if let Some(other) = slot {
                let g = generations[h.copy as usize];
                if g == h.generation {
                    return Err(EngineError::Refused(format!(
                        "log devices {} and {} are the same copy of the log; give only one",
                        other.name(),
                        d.name()
                    )));
                }
                // The one written last is the copy; the other was replaced.
                let (keep, drop) = if h.generation > g {
                    (d.clone(), other.name())
                } else {
                    (other.clone(), d.name())
                };
                warnings.push(format!(
                    "log device {drop} is left out: an older copy {} of the log (it was replaced)",
                    h.copy
                ));
                if h.generation < g {
                    continue;
                }
                *slot = Some(keep);
                generations[h.copy as usize] = h.generation;
                kinds[h.copy as usize] = h.kind;
                if newest.as_ref().is_none_or(|n| h.generation > n.generation) {
                    newest = Some(h);
                }
                continue;
            }
            generations[h.copy as usize] = h.generation;
            *slot = Some(d);
            kinds[h.copy as usize] = h.kind;
            if newest.as_ref().is_none_or(|n| h.generation > n.generation) {
                newest = Some(h);
            }
        }
        let Some(newest) = newest else {
            return Err(EngineError::Refused(if warnings.is_empty() {
                "the array has a write log and none of its log devices was given; add the log device(s) to the member list, or, if the log is lost, hetraid assemble --force starts without it (the writes it held are lost)".into()
            } else {
                format!(
                    "no log device given can be used: {}; give the array's current log device(s), or, if the log is lost, hetraid assemble --force starts without it (what it held is lost; nothing if the array was closed cleanly)",
                    warnings.join("; ")
                )
            }));
        };
        let template = LogHeader {
            copy: 0,
            ..newest.clone()
        };
        let mut live: Vec<(usize, &dyn Member)> = Vec::new();
        for (i, c) in copies.iter().enumerate() {
            match c {
                Some(d) => live.push((i, d.as_ref())),
                None => warnings.push(format!(
                    "log copy {i} is missing: the log runs on {} copy until it is replaced",
                    copies.iter().flatten().count()
                )),
            }
        }
        let best = scan_copies(&live, &newest);
        let mut resync_all = false;
        let mut records = best.records;
        if let Some(d) = &best.damage {
            let on = live
                .iter()
                .map(|(_, m)| format!("log device {}", m.name()))
                .collect::<Vec<_>>()
                .join(" and ");
            let what = format!(
                "the write log is damaged: record {} (ring offset {}) is intact on no copy ({on}), yet {} records written after it are intact, so it was lost after it was durable (a bad sector or flipped bits), not cut by a crash",
                d.seq, d.offset, d.later
            );
            let lost = match newest.mode {
                LogMode::Journal => "the stripe update it held; nothing is replayed (replaying around it could write older stripe contents over newer), and the redundancy is resynced from the data: writes flushed before the crash are on the members",
                LogMode::WriteBack => "the write it held, unless a later write replaced it; the intact records are kept, and the redundancy is resynced from the data",
            };
            if !force {
                return Err(EngineError::Refused(format!(
                    "{what}; nothing was replayed or written. Replace the damaged device if it is failing; hetraid assemble --force starts without the damaged record, losing {lost}"
                )));
            }
            warnings.push(format!(
                "{what}; started without it (--force), losing {lost}"
            ));
            resync_all = true;
            if newest.mode == LogMode::Journal {
                records.clear();
            }
        }
        let ring = Ring::found(
            newest.ring_len,
            newest.checkpoint_offset,
            newest.checkpoint_seq,
            best.end_offset,
            best.end_seq,
            best.bytes,
        );
        // Intent records whose member writes a checkpoint saw flushed need
        // nothing more.
        let records = records
            .into_iter()
            .filter(|r| r.stripes.is_empty() || r.seq >= newest.flushed_seq)
            .collect();
        let log = Self::new(copies, kinds, template, ring, reserve);
        log.epoch
            .store(rec.epoch, std::sync::atomic::Ordering::SeqCst);
        log.warnings.lock().unwrap().extend(warnings);
        *log.leftovers.lock().unwrap() = best.leftovers;
        Ok((log, records, resync_all))
    }

    /// Records of the write a crash cut, found past the end of the log:
    /// their header pages are cleared before the log is written again (a
    /// later record of the same sequence could otherwise land before one of
    /// them and make it look like its successor).
    pub fn clear_leftovers(&self) -> Result<()> {
        let left = std::mem::take(&mut *self.leftovers.lock().unwrap());
        let copies = self.copies.lock().unwrap();
        let zero = AlignedBuf::zeroed(PAGE as usize);
        let mut touched = std::collections::BTreeSet::new();
        for (c, off) in left {
            if let Some(d) = copies.get(c).and_then(|d| d.as_ref()) {
                d.write_at(&zero, RING_OFFSET + off)
                    .map_err(|e| log_err(d.as_ref(), e))?;
                touched.insert(c);
            }
        }
        for c in touched {
            let d = copies[c].as_ref().unwrap();
            d.flush().map_err(|e| log_err(d.as_ref(), e))?;
        }
        Ok(())
    }

    pub fn mode(&self) -> LogMode {
        self.template.mode
    }

    /// Write-back: the most data a record (and a reclaim batch) holds.
    pub fn write_back_record_max(&self) -> u64 {
        self.reserve.record_max(self.template.ring_len)
    }

    /// Write-back: reclaim down to this many bytes before logging a write.
    pub fn reclaim_before_write(&self) -> Option<u64> {
        let reserved = self.index.read().unwrap().reserved();
        journal::reclaim_before_write(&self.state.lock().unwrap().ring, reserved)
    }

    /// Does a reclaim down to `target` go on?
    pub fn reclaim_more(&self, target: u64) -> bool {
        let (empty, reserved) = {
            let i = self.index.read().unwrap();
            (i.is_empty(), i.reserved())
        };
        journal::reclaim_more(&self.state.lock().unwrap().ring, reserved, empty, target)
    }

    /// Keep at most `bytes` of logged writes in memory (the log is
    /// reclaimed to stay under it).
    pub fn set_memory_max(&self, bytes: u64) {
        self.memory_max
            .store(bytes, std::sync::atomic::Ordering::Relaxed);
    }

    /// The calling thread is the reclaimer until the guard drops: its
    /// records may use the room kept for it.
    pub fn reclaiming(&self) -> Reclaiming<'_> {
        *self.reclaimer.lock().unwrap() = Some(std::thread::current().id());
        Reclaiming(self)
    }

    fn is_reclaimer(&self) -> bool {
        *self.reclaimer.lock().unwrap() == Some(std::thread::current().id())
    }

    /// Payload bytes one record may carry.
    pub fn payload_max(&self) -> u64 {
        self.state.lock().unwrap().ring.record_bytes_max() - PAGE
    }

    /// The copies' paths, kinds, and whether each is in use.
    pub fn devices(&self) -> Vec<(String, hetraid_core::MemberKind, bool)> {
        let c = self.copies.lock().unwrap();
        let names = self.names.lock().unwrap().clone();
        names
            .iter()
            .zip(&self.kinds)
            .zip(c.iter())
            .map(|((n, k), c)| (n.clone(), *k, c.is_some()))
            .collect()
    }

    /// Stop using copy `i` (its device left the array).
    pub fn drop_copy(&self, i: usize) {
        let mut copies = self.copies.lock().unwrap();
        if copies.get_mut(i).is_some_and(|c| c.take().is_some()) {
            self.copies_changed(&copies);
        }
    }

    /// Every copy failed: nothing can be logged any more.
    pub fn all_lost(&self) -> bool {
        self.lost.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The copies in use changed (callers hold the copies' lock).
    fn copies_changed(&self, copies: &[Option<Arc<dyn Member>>]) {
        use std::sync::atomic::Ordering::{Release, SeqCst};
        self.changed.store(true, SeqCst);
        self.lost.store(copies.iter().all(Option::is_none), Release);
    }

    /// Did the copies in use change since the last call?
    pub fn take_changed(&self) -> bool {
        // Read first: the write path asks on every write, and a swap would
        // write the shared cache line each time.
        use std::sync::atomic::Ordering::SeqCst;
        self.changed.load(SeqCst) && self.changed.swap(false, SeqCst)
    }

    /// Copy `i` is missing: it is of `kind` (what a replacement keeps).
    pub fn kind_if_missing(&mut self, i: usize, kind: hetraid_core::MemberKind) {
        let missing = self
            .copies
            .lock()
            .unwrap()
            .get(i)
            .is_some_and(Option::is_none);
        if missing {
            self.kinds[i] = kind;
        }
    }

    /// How many copies the log has (live or not).
    pub fn copy_count(&self) -> usize {
        self.template.copies as usize
    }

    /// Bit i: copy i is in use.
    pub fn live_mask(&self) -> u8 {
        self.copies
            .lock()
            .unwrap()
            .iter()
            .enumerate()
            .filter(|(_, c)| c.is_some())
            .fold(0, |m, (i, _)| m | 1 << i)
    }

    /// Put `dev` in as copy `i`: the live records are copied from a copy in
    /// use (appends wait meanwhile), then its header is written; from then on
    /// every record goes to it too.
    pub fn replace_copy(&self, i: usize, dev: Arc<dyn Member>, epoch: u32) -> Result<()> {
        let mut st = self.state.lock().unwrap();
        let mut copies = self.copies.lock().unwrap();
        if i >= copies.len() {
            return Err(EngineError::Kind(
                hetraid_core::ErrorKind::NotFound,
                format!(
                    "log copy {i} does not exist; the log has {} (0 to {})",
                    copies.len(),
                    copies.len() - 1
                ),
            ));
        }
        if copies[i].is_some() {
            return Err(EngineError::Refused(format!(
                "log copy {i} ({}) is in use; only a failed or missing copy is replaced",
                self.names.lock().unwrap()[i]
            )));
        }
        if journal::ring_bytes(dev.len()) < st.ring.len {
            return Err(EngineError::Refused(format!(
                "{} is {} bytes; a copy of this log needs at least {}",
                dev.name(),
                dev.len(),
                RING_OFFSET + st.ring.len
            )));
        }
        let src = copies.iter().flatten().next().cloned().ok_or_else(|| {
            EngineError::Refused("no copy of the log is left to copy from".into())
        })?;
        let err = |m: &dyn Member, e: io::Error| log_err(m, e);
        // The live span, head to tail (wrapping), in pieces of at most 1 MiB.
        let (mut at, mut left) = (st.ring.head, st.ring.used);
        let mut buf = AlignedBuf::zeroed(1 << 20);
        while left > 0 {
            let n = left.min(1 << 20).min(st.ring.len - at);
            src.read_at(&mut buf[..n as usize], RING_OFFSET + at)
                .map_err(|e| err(src.as_ref(), e))?;
            dev.write_at(&buf[..n as usize], RING_OFFSET + at)
                .map_err(|e| err(dev.as_ref(), e))?;
            at = (at + n) % st.ring.len;
            left -= n;
        }
        // Whatever the device held after the tail must not look live.
        dev.write_at(
            &AlignedBuf::zeroed(PAGE as usize),
            RING_OFFSET + st.ring.tail,
        )
        .map_err(|e| err(dev.as_ref(), e))?;
        // Every copy, the new one included, gets a header of the new epoch
        // (the next generation): the device replaced is never taken for a copy.
        st.generation += 1;
        self.epoch.store(epoch, std::sync::atomic::Ordering::SeqCst);
        copies[i] = Some(dev.clone());
        let mut failed = None;
        for (k, c) in copies.iter().enumerate() {
            let Some(d) = c else { continue };
            let h = LogHeader {
                copy: k as u32,
                kind: self.kinds[k],
                generation: st.generation,
                checkpoint_offset: st.ring.head,
                checkpoint_seq: st.ring.head_seq,
                epoch,
                flushed_seq: st.flushed_seq,
                ..self.template.clone()
            };
            if let Err(e) = d
                .write_at(&h.encode(), (st.generation % 2) * PAGE)
                .and_then(|_| d.flush())
            {
                failed = Some((k, err(d.as_ref(), e)));
                break;
            }
        }
        if let Some((k, e)) = failed {
            if k == i {
                copies[i] = None;
            }
            return Err(e);
        }
        self.names.lock().unwrap()[i] = dev.name();
        self.copies_changed(&copies);
        Ok(())
    }

    /// Ring size, bytes in use, records since the last checkpoint.
    pub fn usage(&self) -> (u64, u64, u64) {
        let s = self.state.lock().unwrap();
        (s.ring.len, s.ring.used, s.ring.live_records())
    }

    /// Warnings so far (copies dropped), kept.
    pub fn warnings(&self) -> Vec<String> {
        self.warnings.lock().unwrap().clone()
    }

    pub fn take_warnings(&self) -> Vec<String> {
        std::mem::take(&mut self.warnings.lock().unwrap())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::member::FaultMember;

    fn dev(name: &str) -> Arc<dyn Member> {
        Arc::new(FaultMember::new(name, RING_OFFSET + RING_MIN, 1))
    }

    fn rec() -> LogRecord {
        LogRecord {
            mode: LogMode::Journal,
            id: 9,
            copies: 2,
            active: 0b11,
            epoch: 0,
            region: None,
            checkpoint_seq: 0,
        }
    }

    fn found(devs: &[Arc<dyn Member>]) -> Vec<(Arc<dyn Member>, LogHeader)> {
        devs.iter()
            .map(|d| (d.clone(), read_header(d.as_ref()).unwrap().unwrap()))
            .collect()
    }

    #[test]
    fn records_come_back_in_order_and_a_checkpoint_empties_the_log() {
        let devs = vec![dev("a"), dev("b")];
        let log = Log::format(devs.clone(), &[], [3; 16], rec(), Reserve::none(3)).unwrap();
        let data: Vec<Vec<u8>> = (0..40u8).map(|i| vec![i; 8192]).collect();
        let ok = || Ok(());
        // 40 records of 3 pages: more than the 256-page ring holds, so
        // checkpoints happen along the way.
        for (i, d) in data.iter().enumerate() {
            log.append(
                &[Entry {
                    member: (i % 3) as u16,
                    offset: i as u64 * 8192,
                    parts: vec![&d[..4096], &d[4096..]],
                }],
                &ok,
            )
            .unwrap();
            log.done();
        }
        let live = log.usage().2;
        let (opened, replayed, _) =
            Log::open(found(&devs), [3; 16], rec(), Reserve::none(3), false).unwrap();
        assert_eq!(replayed.len() as u64, live);
        let first = 40 - live as usize;
        for (r, i) in replayed.iter().zip(first..) {
            assert_eq!(r.entries.len(), 1);
            let (m, off, at, len) = r.entries[0];
            assert_eq!((m as usize, off), (i % 3, i as u64 * 8192));
            let b = opened.read_ring(r.copy, at, len).unwrap();
            assert_eq!(&b[..], &data[i][..]);
        }
        log.checkpoint(&ok).unwrap();
        let (_, replayed, _) =
            Log::open(found(&devs), [3; 16], rec(), Reserve::none(3), false).unwrap();
        assert!(replayed.is_empty());
    }

    #[test]
    fn a_torn_record_ends_the_scan_and_either_copy_recovers() {
        let devs = vec![dev("a"), dev("b")];
        let log = Log::format(devs.clone(), &[], [3; 16], rec(), Reserve::none(3)).unwrap();
        let d = vec![7u8; 4096];
        for i in 0..3 {
            log.append(
                &[Entry {
                    member: 0,
                    offset: i * 4096,
                    parts: vec![&d],
                }],
                &|| Ok(()),
            )
            .unwrap();
            log.done();
        }
        // Record 2 (third) torn on copy a: a flipped payload byte.
        let at = RING_OFFSET + 2 * 2 * PAGE + PAGE + 5;
        devs[0].write_at(&[0x55], at).unwrap();
        let (_, r, _) = Log::open(found(&devs), [3; 16], rec(), Reserve::none(3), false).unwrap();
        assert_eq!(r.len(), 3, "copy b has all three");
        let (_, r, _) =
            Log::open(found(&devs[..1]), [3; 16], rec(), Reserve::none(3), false).unwrap();
        assert_eq!(r.len(), 2, "copy a ends before the torn record");
        // A foreign array's log is refused by name.
        let e = Log::open(found(&devs), [4; 16], rec(), Reserve::none(3), false)
            .err()
            .unwrap();
        assert!(e.to_string().contains("belongs to another array"), "{e}");
    }
}
