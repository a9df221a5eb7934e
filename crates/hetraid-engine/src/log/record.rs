//! The log's bytes on a device: the header slots, the record headers (data,
//! intent, stripe updates) and their constants. The layout is in
//! `docs/FORMAT.md` ("Write log").

use super::*;
pub const LOG_MAGIC: &[u8; 8] = b"HETRLOG1";
pub const LOG_VERSION: u32 = 1;
/// Where the ring starts on a log device, and the smallest ring (core's).
pub use hetraid_core::journal::{RING_MIN, RING_OFFSET};
pub(super) const REC_MAGIC: u32 = 0x4352_4C48; // "HLRC"
pub(super) const TYPE_STRIPES: u8 = 1;
pub(super) const TYPE_DATA: u8 = 2;
pub(super) const TYPE_PAD: u8 = 3;
/// HPDA: the stripes a RAID4 write is about to change (resynced after a crash).
pub(super) const TYPE_INTENT: u8 = 4;
pub(super) const ENTRY_AT: usize = 64;
/// The sequence number of the first record of the write this record went
/// out in (a group commit writes many at once; 0: written before it was
/// kept). Later writes start only after earlier ones were flushed, so a
/// valid record whose write started after a bad record means the bad one
/// was damaged after it was durable, not torn by a crash.
pub(super) const WRITE_FIRST_AT: usize = 56;
pub(super) const ENTRY: usize = 16;
pub(super) const HDR_CRC_AT: usize = 4092;

pub(super) use crate::le::{u16_at, u32_at, u64_at};

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
    Ok(header_in(&b, m.len()))
}

/// The newest log header in `head` (a device's first two pages or more)
/// of a device of `len` bytes: each slot holds the generations of its
/// parity.
pub fn header_in(head: &[u8], len: u64) -> Option<LogHeader> {
    if len < RING_OFFSET || head.len() < 2 * PAGE as usize {
        return None;
    }
    let slots = [0, 1].map(|i| {
        LogHeader::decode(&head[i * PAGE as usize..(i + 1) * PAGE as usize])
            .filter(|h| h.generation % 2 == i as u64)
    });
    slots.into_iter().flatten().max_by_key(|h| h.generation)
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

/// The header page of a write-back data record: one write of `len` bytes at
/// array offset `at`, its payload padded to whole pages.
pub(super) fn data_header(
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
pub(super) fn intent_header(template: &LogHeader, seq: u64, runs: &[(u64, u64)]) -> AlignedBuf {
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
pub(super) static ZEROS: [u8; PAGE as usize] = [0; PAGE as usize];

pub(super) fn record_header(
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
