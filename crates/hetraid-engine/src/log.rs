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

pub const LOG_MAGIC: &[u8; 8] = b"HETRLOG1";
pub const LOG_VERSION: u32 = 1;
/// Where the ring starts on a log device, and the smallest ring (core's).
pub use hetraid_core::journal::{RING_MIN, RING_OFFSET};
const REC_MAGIC: u32 = 0x4352_4C48; // "HLRC"
const TYPE_STRIPES: u8 = 1;
const TYPE_DATA: u8 = 2;
const TYPE_PAD: u8 = 3;
/// HPDA: the stripes a RAID4 write is about to change (resynced after a crash).
const TYPE_INTENT: u8 = 4;
const ENTRY_AT: usize = 64;
/// The sequence number of the first record of the write this record went
/// out in (a group commit writes many at once; 0: written before it was
/// kept). Later writes start only after earlier ones were flushed, so a
/// valid record whose write started after a bad record means the bad one
/// was damaged after it was durable, not torn by a crash.
const WRITE_FIRST_AT: usize = 56;
const ENTRY: usize = 16;
const HDR_CRC_AT: usize = 4092;

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// One slot of a log device's header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogHeader {
    pub uuid: [u8; 16],
    pub id: u32,
    /// This device's copy index, and how many copies the log has.
    pub copy: u32,
    pub copies: u32,
    pub mode: LogMode,
    /// What the device is (hdd, ssd, nvram), as given at create.
    pub kind: hetraid_core::MemberKind,
    pub ring_len: u64,
    /// Bumped by every header write; the newer valid slot wins.
    pub generation: u64,
    /// Where the first record not known to be on the members is, and its
    /// sequence number.
    pub checkpoint_offset: u64,
    pub checkpoint_seq: u64,
    /// The array's log epoch when this header was written (see
    /// `LogRecord::epoch`).
    pub epoch: u32,
    /// Every record before this sequence number had its member writes
    /// flushed when the header was written (0: not known). Intent records
    /// before it need no resync after a crash.
    pub flushed_seq: u64,
}

impl LogHeader {
    /// The array's UUID, as `status` prints it.
    pub fn uuid_string(&self) -> String {
        uuid::Uuid::from_bytes(self.uuid).hyphenated().to_string()
    }

    pub fn encode(&self) -> AlignedBuf {
        let mut b = AlignedBuf::zeroed(PAGE as usize);
        b[0..8].copy_from_slice(LOG_MAGIC);
        b[8..12].copy_from_slice(&LOG_VERSION.to_le_bytes());
        b[12..16].copy_from_slice(&self.copy.to_le_bytes());
        b[16..32].copy_from_slice(&self.uuid);
        b[32..36].copy_from_slice(&self.id.to_le_bytes());
        b[36..40].copy_from_slice(&self.copies.to_le_bytes());
        b[40] = match self.mode {
            LogMode::Journal => 1,
            LogMode::WriteBack => 2,
        };
        b[41] = crate::format::kind_code(self.kind);
        b[48..56].copy_from_slice(&RING_OFFSET.to_le_bytes());
        b[56..64].copy_from_slice(&self.ring_len.to_le_bytes());
        b[64..72].copy_from_slice(&self.generation.to_le_bytes());
        b[72..80].copy_from_slice(&self.checkpoint_offset.to_le_bytes());
        b[80..88].copy_from_slice(&self.checkpoint_seq.to_le_bytes());
        b[88..92].copy_from_slice(&self.epoch.to_le_bytes());
        b[92..100].copy_from_slice(&self.flushed_seq.to_le_bytes());
        let crc = crc32c(&b[..HDR_CRC_AT]);
        b[HDR_CRC_AT..].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// A valid header slot, or None (not a log device, damaged, unknown version).
    pub fn decode(b: &[u8]) -> Option<Self> {
        if b.len() < PAGE as usize || &b[0..8] != LOG_MAGIC || u32_at(b, 8) != LOG_VERSION {
            return None;
        }
        if crc32c(&b[..HDR_CRC_AT]) != u32_at(b, HDR_CRC_AT) {
            return None;
        }
        let h = Self {
            copy: u32_at(b, 12),
            uuid: b[16..32].try_into().unwrap(),
            id: u32_at(b, 32),
            copies: u32_at(b, 36),
            mode: match b[40] {
                1 => LogMode::Journal,
                2 => LogMode::WriteBack,
                _ => return None,
            },
            kind: crate::format::kind_from_code(b[41])?,
            ring_len: u64_at(b, 56),
            generation: u64_at(b, 64),
            checkpoint_offset: u64_at(b, 72),
            checkpoint_seq: u64_at(b, 80),
            epoch: u32_at(b, 88),
            flushed_seq: u64_at(b, 92),
        };
        let ok = u64_at(b, 48) == RING_OFFSET
            && h.id != 0
            && (1..=2).contains(&h.copies)
            && h.copy < h.copies
            && h.ring_len >= RING_MIN
            && h.ring_len.is_multiple_of(PAGE)
            && h.checkpoint_offset < h.ring_len
            && h.checkpoint_offset.is_multiple_of(PAGE);
        ok.then_some(h)
    }
}

/// Does `m` carry a log device's magic? (Assembly sorts devices by it.)
pub fn is_log_device(m: &dyn Member) -> io::Result<bool> {
    // Either header slot (a replaced copy may have had only one written).
    if m.len() < 2 * PAGE {
        return Ok(false);
    }
    let mut b = AlignedBuf::zeroed(2 * PAGE as usize);
    m.read_at(&mut b, 0)?;
    Ok(&b[0..8] == LOG_MAGIC || &b[PAGE as usize..PAGE as usize + 8] == LOG_MAGIC)
}

/// The newer valid header of a log device, or None when neither slot is valid.
pub fn read_header(m: &dyn Member) -> io::Result<Option<LogHeader>> {
    let mut b = AlignedBuf::zeroed(2 * PAGE as usize);
    if m.len() < RING_OFFSET {
        return Ok(None);
    }
    m.read_at(&mut b, 0)?;
    let slots = [0, 1].map(|i| {
        LogHeader::decode(&b[i * PAGE as usize..(i + 1) * PAGE as usize])
            .filter(|h| h.generation % 2 == i as u64)
    });
    Ok(slots.into_iter().flatten().max_by_key(|h| h.generation))
}

/// Why a log device found at assembly is not taken as a copy of the log
/// (None: it is a usable copy). One rule for `Log::open` and for deciding
/// whether any usable copy was given at all.
pub fn left_out(d: &dyn Member, h: &LogHeader, uuid: [u8; 16], rec: &LogRecord) -> Option<String> {
    if d.len() < RING_OFFSET + h.ring_len {
        return Some(format!(
            "log device {} is left out: it is {} bytes, shorter than its log ({}; truncated?)",
            d.name(),
            d.len(),
            RING_OFFSET + h.ring_len
        ));
    }
    if h.uuid != uuid || h.id != rec.id {
        return None; // not this log's: Log::open refuses it by name
    }
    if h.epoch < rec.epoch {
        return Some(format!(
            "log device {} is left out: it was copy {} of the log before that copy was replaced",
            d.name(),
            h.copy
        ));
    }
    if rec.active >> h.copy & 1 == 0 {
        // A copy that failed earlier: its records may be behind.
        return Some(format!(
            "log device {} (copy {}) is left out: it failed earlier and may be behind; replace it: hetraid replace ... --log-copy {} --with {}",
            d.name(),
            h.copy,
            h.copy,
            d.name()
        ));
    }
    if rec.checkpoint_seq > 0 && h.checkpoint_seq < rec.checkpoint_seq {
        // The members saw the log checkpointed past this copy's records:
        // it was put back from a copy (a snapshot, a rolled-back disk, a
        // device that lost flushed writes). Replaying it would write old
        // data over newer.
        return Some(format!(
            "log device {} (copy {}) is left out: it is older than the array (its checkpoint is at record {}, the members recorded record {}); it was put back from an older copy, and replaying it would write old data over newer",
            d.name(),
            h.copy,
            h.checkpoint_seq,
            rec.checkpoint_seq
        ));
    }
    None
}

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

/// The header page of a write-back data record: one write of `len` bytes at
/// array offset `at`, its payload padded to whole pages.
fn data_header(
    template: &LogHeader,
    seq: u64,
    first: u64,
    bytes: u64,
    at: u64,
    data: &[u8],
) -> AlignedBuf {
    let mut h = AlignedBuf::zeroed(PAGE as usize);
    h[0..4].copy_from_slice(&REC_MAGIC.to_le_bytes());
    h[4] = TYPE_DATA;
    h[8..16].copy_from_slice(&seq.to_le_bytes());
    h[16..32].copy_from_slice(&template.uuid);
    h[32..40].copy_from_slice(&bytes.to_le_bytes());
    h[40..44].copy_from_slice(&1u32.to_le_bytes());
    h[48..52].copy_from_slice(&template.id.to_le_bytes());
    h[WRITE_FIRST_AT..WRITE_FIRST_AT + 8].copy_from_slice(&first.to_le_bytes());
    h[ENTRY_AT + 4..ENTRY_AT + 8].copy_from_slice(&(data.len() as u32).to_le_bytes());
    h[ENTRY_AT + 8..ENTRY_AT + 16].copy_from_slice(&at.to_le_bytes());
    let pad = (bytes - PAGE) as usize - data.len();
    let mut crc = crc32c(&h);
    crc = crc32c_append(crc, data);
    crc = crc32c_append(crc, &ZEROS[..pad]);
    h[44..48].copy_from_slice(&crc.to_le_bytes());
    h
}

/// The header page of an intent record: stripe runs (first, count), one
/// entry each (count at +4, first stripe at +8).
fn intent_header(template: &LogHeader, seq: u64, runs: &[(u64, u64)]) -> AlignedBuf {
    let mut h = AlignedBuf::zeroed(PAGE as usize);
    h[0..4].copy_from_slice(&REC_MAGIC.to_le_bytes());
    h[4] = TYPE_INTENT;
    h[8..16].copy_from_slice(&seq.to_le_bytes());
    h[16..32].copy_from_slice(&template.uuid);
    h[32..40].copy_from_slice(&PAGE.to_le_bytes());
    h[40..44].copy_from_slice(&(runs.len() as u32).to_le_bytes());
    h[48..52].copy_from_slice(&template.id.to_le_bytes());
    h[WRITE_FIRST_AT..WRITE_FIRST_AT + 8].copy_from_slice(&seq.to_le_bytes());
    for (i, &(first, count)) in runs.iter().enumerate() {
        let at = ENTRY_AT + ENTRY * i;
        h[at + 4..at + 8].copy_from_slice(&(count as u32).to_le_bytes());
        h[at + 8..at + 16].copy_from_slice(&first.to_le_bytes());
    }
    let crc = crc32c(&h);
    h[44..48].copy_from_slice(&crc.to_le_bytes());
    h
}

/// Padding for data records.
static ZEROS: [u8; PAGE as usize] = [0; PAGE as usize];

fn record_header(
    template: &LogHeader,
    kind: u8,
    seq: u64,
    bytes: u64,
    entries: &[Entry<'_>],
) -> AlignedBuf {
    let mut h = AlignedBuf::zeroed(PAGE as usize);
    h[0..4].copy_from_slice(&REC_MAGIC.to_le_bytes());
    h[4] = kind;
    h[8..16].copy_from_slice(&seq.to_le_bytes());
    h[16..32].copy_from_slice(&template.uuid);
    h[32..40].copy_from_slice(&bytes.to_le_bytes());
    h[40..44].copy_from_slice(&(entries.len() as u32).to_le_bytes());
    h[48..52].copy_from_slice(&template.id.to_le_bytes());
    // Written alone: its write starts with it.
    h[WRITE_FIRST_AT..WRITE_FIRST_AT + 8].copy_from_slice(&seq.to_le_bytes());
    for (i, e) in entries.iter().enumerate() {
        let at = ENTRY_AT + ENTRY * i;
        h[at..at + 2].copy_from_slice(&e.member.to_le_bytes());
        h[at + 4..at + 8].copy_from_slice(&((e.len() / PAGE) as u32).to_le_bytes());
        h[at + 8..at + 16].copy_from_slice(&e.offset.to_le_bytes());
    }
    let mut crc = crc32c(&h);
    for e in entries {
        for p in &e.parts {
            crc = crc32c_append(crc, p);
        }
    }
    h[44..48].copy_from_slice(&crc.to_le_bytes());
    h
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
                return Err(EngineError::Refused(format!(
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
            return Err(EngineError::Refused(format!(
                "log copy {i} does not exist; the log has {} (0 to {})",
                copies.len(),
                copies.len() - 1
            )));
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

    /// Write `bufs` at ring offset `at` on every live copy and flush; a copy
    /// that fails is dropped. Err when no copy took it.
    fn write_all(&self, bufs: &[&[u8]], at: u64) -> Result<()> {
        let mut copies = self.copies.lock().unwrap();
        let mut last = None;
        let results = on_every_copy(&copies, |_, d| {
            d.write_vectored_at(bufs, RING_OFFSET + at)
                .and_then(|_| d.flush())
        });
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
            self.copies_changed(&copies);
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
        let mut dropped = false;
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
        for (i, (c, r)) in copies.iter_mut().zip(results).enumerate() {
            let (Some(d), Some(r)) = (c.as_ref(), r) else {
                continue;
            };
            if let Err(e) = r {
                self.warnings.lock().unwrap().push(format!(
                    "log copy {i} ({}) failed and is no longer used: {e}",
                    d.name()
                ));
                *c = None;
                dropped = true;
            }
        }
        if dropped {
            self.copies_changed(&copies);
        }
        if copies.iter().all(Option::is_none) {
            return Err(EngineError::Refused(format!(
                "the write log failed on every copy ({}): writes are refused",
                self.names.lock().unwrap().join(", ")
            )));
        }
        self.written_checkpoint
            .store(st.ring.head_seq, std::sync::atomic::Ordering::Release);
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
fn on_every_copy(
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

fn log_err(m: &dyn Member, e: io::Error) -> EngineError {
    EngineError::LogIo {
        device: m.name(),
        source: e,
    }
}

/// A record read at ring offset `off` as sequence `seq`: (the record, None
/// for a pad; its bytes; the first sequence of the write it went out in),
/// or None when no live record is there (torn, of an earlier lap, foreign,
/// damaged). `budget`: ring bytes left for the scan.
fn read_record(
    d: &dyn Member,
    h: &LogHeader,
    off: u64,
    seq: u64,
    budget: u64,
) -> Option<(Option<Replayed>, u64, u64)> {
    let mut head = AlignedBuf::zeroed(PAGE as usize);
    d.read_at(&mut head, RING_OFFSET + off).ok()?;
    let bytes = u64_at(&head, 32);
    let kind = head[4];
    let n = u32_at(&head, 40) as usize;
    let live = u32_at(&head, 0) == REC_MAGIC
        && head[16..32] == h.uuid
        && u32_at(&head, 48) == h.id
        && u64_at(&head, 8) == seq
        && matches!(kind, TYPE_STRIPES | TYPE_PAD | TYPE_DATA | TYPE_INTENT)
        && n <= ENTRIES_MAX
        && journal::header_fits(h.ring_len, off, bytes)
        && bytes <= budget;
    if !live {
        return None;
    }
    let first = u64_at(&head, WRITE_FIRST_AT);
    let stated = u32_at(&head, 44);
    let mut zeroed = head.to_vec();
    zeroed[44..48].fill(0);
    let mut crc = crc32c(&zeroed);
    let mut entries = Vec::new();
    let mut data = None;
    if kind == TYPE_DATA {
        let len = u32_at(&head, ENTRY_AT + 4) as u64;
        let at = u64_at(&head, ENTRY_AT + 8);
        let padded = len.div_ceil(PAGE) * PAGE;
        if n != 1 || PAGE + padded != bytes {
            return None;
        }
        let mut buf = AlignedBuf::zeroed(padded as usize);
        if padded > 0 {
            d.read_at(&mut buf, RING_OFFSET + off + PAGE).ok()?;
        }
        crc = crc32c_append(crc, &buf);
        data = Some((at, len, off + PAGE));
    }
    let mut stripes = Vec::new();
    if kind == TYPE_INTENT {
        if bytes != PAGE {
            return None;
        }
        for i in 0..n {
            let e = ENTRY_AT + ENTRY * i;
            stripes.push((u64_at(&head, e + 8), u32_at(&head, e + 4) as u64));
        }
    }
    if kind == TYPE_STRIPES {
        let mut at = off + PAGE;
        let mut sum = PAGE;
        for i in 0..n {
            let e = ENTRY_AT + ENTRY * i;
            let member = u16::from_le_bytes(head[e..e + 2].try_into().unwrap());
            let len = u32_at(&head, e + 4) as u64 * PAGE;
            let offset = u64_at(&head, e + 8);
            sum += len;
            if len == 0 || sum > bytes {
                return None;
            }
            let mut buf = AlignedBuf::zeroed(len as usize);
            d.read_at(&mut buf, RING_OFFSET + at).ok()?;
            crc = crc32c_append(crc, &buf);
            entries.push((member, offset, at, len));
            at += len;
        }
        if sum != bytes {
            return None;
        }
    }
    if crc != stated {
        return None;
    }
    let rec = (kind != TYPE_PAD).then_some(Replayed {
        copy: 0,
        seq,
        offset: off,
        entries,
        data,
        stripes,
    });
    Some((rec, bytes, first))
}

/// A live record found past the end of the chain by [`probe`].
struct Beyond {
    copy: usize,
    offset: u64,
    seq: u64,
    first: u64,
}

/// The live records of a copy in the `budget` ring bytes from `from`
/// whose sequence is `seq` or later: every page is looked at (a damaged
/// header hides where the next record starts). One sequential read of at
/// most the ring, in 1 MiB pieces, plus each candidate's payload.
fn probe(
    copy: usize,
    d: &dyn Member,
    h: &LogHeader,
    from: u64,
    seq: u64,
    budget: u64,
) -> Vec<Beyond> {
    let mut found = Vec::new();
    let piece = 1u64 << 20;
    let mut buf = AlignedBuf::zeroed(piece as usize);
    let mut done = 0u64;
    // Bounded: `done` grows by at least a page a round, up to `budget`.
    while done < budget {
        let off = (from + done) % h.ring_len;
        let n = piece.min(budget - done).min(h.ring_len - off);
        if d.read_at(&mut buf[..n as usize], RING_OFFSET + off)
            .is_err()
        {
            done += n;
            continue;
        }
        let mut skip_to = n;
        let mut p = 0u64;
        while p < n {
            let page = &buf[p as usize..(p + PAGE) as usize];
            let s = u64_at(page, 8);
            let candidate = u32_at(page, 0) == REC_MAGIC
                && page[16..32] == h.uuid
                && u32_at(page, 48) == h.id
                && s >= seq
                && s < seq + h.ring_len / PAGE;
            if candidate {
                if let Some((_, bytes, first)) = read_record(d, h, off + p, s, budget - done - p) {
                    found.push(Beyond {
                        copy,
                        offset: off + p,
                        seq: s,
                        first,
                    });
                    p += bytes;
                    skip_to = skip_to.max(p);
                    continue;
                }
            }
            p += PAGE;
        }
        done += skip_to.max(PAGE);
    }
    found
}

/// Damage found by the scan: a record no copy holds intact, with intact
/// records written after it.
#[derive(Debug, Clone)]
pub struct Damage {
    pub seq: u64,
    pub offset: u64,
    /// Intact records after it.
    pub later: u64,
}

/// Read the records from the checkpoint in `h`, every copy at once: each
/// record is taken from whichever copy holds it intact (the copies are laid
/// out alike), so a bad record on one copy costs nothing while the other
/// has it. Where no copy holds the next record the chain ends — a torn
/// tail (a crash cuts only the last write) unless an intact record written
/// in a later write follows: that is damage, and the scan goes on past it.
/// Records of the cut write found past the end are returned as leftovers
/// (cleared before the log is written again: they must never be taken for
/// records of a later write at the same place). Reads at most the ring
/// once per copy, plus the probe past the end.
fn scan_copies(copies: &[(usize, &dyn Member)], h: &LogHeader) -> Scan {
    let (mut off, mut seq) = (h.checkpoint_offset, h.checkpoint_seq);
    let mut records = Vec::new();
    let mut total = 0u64;
    let mut damage: Option<Damage> = None;
    let mut leftovers = Vec::new();
    // Bounded: each round takes a record (at least a page of the ring
    // budget) or ends, or jumps forward past damage (also within budget).
    while total < h.ring_len {
        let got = copies
            .iter()
            .find_map(|(c, d)| read_record(*d, h, off, seq, h.ring_len - total).map(|r| (*c, r)));
        if let Some((copy, (rec, bytes, _))) = got {
            if let Some(mut r) = rec {
                r.copy = copy;
                records.push(r);
                if let Some(d) = damage.as_mut() {
                    d.later += 1;
                }
            }
            total += bytes;
            off = journal::next_offset(h.ring_len, off, bytes);
            seq += 1;
            continue;
        }
        // Far enough for a cut group write or the largest record, bounded
        // (a scan of a huge ring must not read it all).
        let window = (h.ring_len - total).min(journal::PROBE_BYTES_MAX);
        let beyond: Vec<Beyond> = copies
            .iter()
            .flat_map(|(i, d)| probe(*i, *d, h, off, seq, window))
            .collect();
        // A record whose write started after this one: this one was
        // durable before it (writes wait for the earlier ones' flush).
        let next = beyond
            .iter()
            .filter(|b| b.first > seq)
            .min_by_key(|b| b.seq);
        match next {
            Some(b) => {
                damage.get_or_insert(Damage {
                    seq,
                    offset: off,
                    later: 0,
                });
                total += (b.offset + h.ring_len - off) % h.ring_len;
                off = b.offset;
                seq = b.seq;
            }
            None => {
                leftovers = beyond.iter().map(|b| (b.copy, b.offset)).collect();
                break;
            }
        }
    }
    Scan {
        records,
        end_offset: off,
        end_seq: seq,
        bytes: total,
        damage,
        leftovers,
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
