//! The annex: what an operator wants to know of an array beyond its member
//! table — the array's name, the last known path of every slot (a failed or
//! removed member is still named by where it was), and the last events (zpool
//! events) — kept on every member in the last 32 KiB of the metadata zone,
//! just below the data offset. Byte map in docs/FORMAT.md ("Annex").
//!
//! Why not the superblock: its 4 KiB are full, and none of this decides
//! anything. The superblock stays the only truth for assembly; the annex is
//! written after it, each copy checked by its own CRCs, and the freshest copy
//! that checks out is the one read. A torn annex write loses at worst the
//! event being written on that member, never an assembly.

use crate::format::{BITMAP_OFFSET, DATA_OFFSET};
use serde::Serialize;

pub const ANNEX_BYTES: u64 = 32 << 10;
pub const ANNEX_AT: u64 = DATA_OFFSET - ANNEX_BYTES;
/// Bitmap bytes an array may use and still have an annex.
pub const BITMAP_ROOM: u64 = ANNEX_AT - BITMAP_OFFSET;
const MAGIC: &[u8; 8] = b"HETRANX1";
const PAGE: usize = hetraid_core::units::PAGE as usize;
const CRC_AT: usize = PAGE - 4;
const PATH_PAGES: usize = 2;
const PATHS_PER_PAGE: usize = 32;
const PATH_BYTES: usize = 127;
/// Longest path kept whole; longer ones keep their end.
pub const PATH_MAX: usize = PATH_BYTES - 1;
const EVENT_PAGES: usize = 5;
const EVENT_BYTES: usize = 128;
const EVENTS_PER_PAGE: usize = 31;
/// Events kept (the oldest is dropped when a new one comes).
pub const EVENTS_MAX: usize = EVENT_PAGES * EVENTS_PER_PAGE;
const DETAIL_BYTES: usize = EVENT_BYTES - 49;
pub const NAME_MAX: usize = 64;
const SLOTS: usize = PATH_PAGES * PATHS_PER_PAGE;

/// What happened. The names (`as_str`) are what `hetraid events`, `--json`,
/// `monitor --program` and the server's log say: a contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    Created,
    /// A member was marked faulty (by `fail` or by I/O errors).
    Failed,
    Removed,
    /// A device entered a failed, missing or removed slot (replace, add).
    Attached,
    /// A member that left intact came back (bitmap resync only).
    ReAdded,
    SpareAdded,
    /// A spare took a failed member's slot.
    SpareActivated,
    RebuildStarted,
    RebuildFinished,
    /// A rebuild stopped before its end (interrupted, or a member failed).
    RebuildStopped,
    ScrubStarted,
    ScrubFinished,
    /// A scrub left mismatches unrepaired.
    ScrubMismatch,
    ChecksumErrors,
    /// Assembly recorded an absent member as missing.
    Missing,
    /// Assembly brought back a stale member (--force).
    Forced,
    ChangeStarted,
    ChangeFinished,
    LogCopyFailed,
    LogCopyReplaced,
    Reclaimed,
    /// `hetraid clear`: error counters set back to zero.
    Cleared,
    /// A member left out of reads for its slow reads (core `sitout`).
    SatOut,
    /// A member sat out reads again.
    SatIn,
}

const KINDS: [EventKind; 24] = [
    EventKind::Created,
    EventKind::Failed,
    EventKind::Removed,
    EventKind::Attached,
    EventKind::ReAdded,
    EventKind::SpareAdded,
    EventKind::SpareActivated,
    EventKind::RebuildStarted,
    EventKind::RebuildFinished,
    EventKind::RebuildStopped,
    EventKind::ScrubStarted,
    EventKind::ScrubFinished,
    EventKind::ScrubMismatch,
    EventKind::ChecksumErrors,
    EventKind::Missing,
    EventKind::Forced,
    EventKind::ChangeStarted,
    EventKind::ChangeFinished,
    EventKind::LogCopyFailed,
    EventKind::LogCopyReplaced,
    EventKind::Reclaimed,
    EventKind::Cleared,
    EventKind::SatOut,
    EventKind::SatIn,
];

impl EventKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Failed => "failed",
            Self::Removed => "removed",
            Self::Attached => "attached",
            Self::ReAdded => "re_added",
            Self::SpareAdded => "spare_added",
            Self::SpareActivated => "spare_activated",
            Self::RebuildStarted => "rebuild_started",
            Self::RebuildFinished => "rebuild_finished",
            Self::RebuildStopped => "rebuild_stopped",
            Self::ScrubStarted => "scrub_started",
            Self::ScrubFinished => "scrub_finished",
            Self::ScrubMismatch => "scrub_mismatch",
            Self::ChecksumErrors => "checksum_errors",
            Self::Missing => "missing",
            Self::Forced => "forced",
            Self::ChangeStarted => "change_started",
            Self::ChangeFinished => "change_finished",
            Self::LogCopyFailed => "log_copy_failed",
            Self::LogCopyReplaced => "log_copy_replaced",
            Self::Reclaimed => "reclaimed",
            Self::Cleared => "cleared",
            Self::SatOut => "sat_out",
            Self::SatIn => "sat_in",
        }
    }

    /// Worth an operator's attention (logged as a warning, mdadm's
    /// "critical" events).
    pub fn is_alarm(self) -> bool {
        matches!(
            self,
            Self::Failed
                | Self::Missing
                | Self::Forced
                | Self::ScrubMismatch
                | Self::ChecksumErrors
                | Self::RebuildStopped
                | Self::LogCopyFailed
        )
    }

    fn code(self) -> u16 {
        KINDS.iter().position(|k| *k == self).unwrap() as u16 + 1
    }

    fn of(code: u16) -> Option<Self> {
        KINDS.get((code as usize).checked_sub(1)?).copied()
    }
}

/// One event. `values` mean what the kind says (documented where each is
/// recorded; `Event::text` spells them out).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Event {
    /// Numbered from 1 over the array's life.
    pub seq: u64,
    pub time_unix_ms: u64,
    pub kind: EventKind,
    pub slot: Option<u16>,
    pub values: [u64; 3],
    /// The member's path, or a short detail.
    pub detail: String,
}

impl Event {
    /// One line for people: what happened, to which member, with numbers.
    pub fn text(&self) -> String {
        let who = match self.slot {
            Some(s) if self.detail.is_empty() => format!("member {s}"),
            Some(s) => format!("member {s} ({})", self.detail),
            None => String::new(),
        };
        let [a, b, c] = self.values;
        match self.kind {
            EventKind::Created => format!("array created ({})", self.detail),
            EventKind::Failed => format!("{who} failed"),
            EventKind::Removed => format!("{who} removed"),
            EventKind::Attached => format!("{who} attached, to be rebuilt"),
            EventKind::ReAdded => format!("{who} re-added: {a} bitmap regions to resync"),
            EventKind::SpareAdded => format!("spare {} added", self.detail),
            EventKind::SpareActivated => match self.slot {
                Some(s) => format!(
                    "spare {} took the place of member {s}, to be rebuilt",
                    self.detail
                ),
                None => format!("spare {} activated", self.detail),
            },
            EventKind::RebuildStarted => format!("rebuild of {who} started at stripe {a} of {b}"),
            EventKind::RebuildFinished => {
                format!(
                    "rebuild of {who} finished: {a} stripes in {:.1} s",
                    b as f64 / 1000.0
                )
            }
            EventKind::RebuildStopped => format!("rebuild of {who} stopped at stripe {a} of {b}"),
            EventKind::ScrubStarted => "scrub started".into(),
            EventKind::ScrubFinished => {
                format!("scrub finished: {a} stripes checked, {b} mismatched, {c} repaired")
            }
            EventKind::ScrubMismatch => {
                format!("scrub left {a} mismatched stripes unrepaired")
            }
            EventKind::ChecksumErrors => format!("{who}: {a} checksum errors"),
            EventKind::Missing => format!("{who} missing at assembly"),
            EventKind::Forced => format!("{who} brought back by --force (stale)"),
            EventKind::ChangeStarted => format!("{} started", self.detail),
            EventKind::ChangeFinished => format!(
                "{} finished: {a} moves, capacity {b} -> {c} bytes",
                self.detail
            ),
            EventKind::LogCopyFailed => format!("write log copy {a} failed ({})", self.detail),
            EventKind::LogCopyReplaced => {
                format!("write log copy {a} replaced by {}", self.detail)
            }
            EventKind::Reclaimed => format!("write-back log reclaimed: {a} bytes"),
            EventKind::SatOut => format!(
                "{who} sat out for reads for {c} s: its reads took {} against {} (read from the others meanwhile)",
                duration_text(a),
                duration_text(b)
            ),
            EventKind::SatIn => format!("{who} serves reads again"),
            EventKind::Cleared => match self.slot {
                Some(_) => {
                    format!("{who}: error counts cleared ({a} read, {b} write, {c} checksum)")
                }
                None => {
                    format!("error counts cleared ({a} read, {b} write, {c} checksum, all members)")
                }
            },
        }
    }
}

/// `ns` for people: ms above one, else µs.
fn duration_text(ns: u64) -> String {
    match ns >= 1_000_000 {
        true => format!("{:.2} ms", ns as f64 / 1e6),
        false => format!("{:.1} µs", ns as f64 / 1e3),
    }
}

/// The annex of one array (the same on every member but for `slot`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Annex {
    pub uuid: [u8; 16],
    /// The superblock's event counter when this copy was written.
    pub sb_events: u64,
    pub name: String,
    /// Last known path per slot ("" unknown); spares are not kept here.
    pub paths: Vec<String>,
    /// Oldest first; at most EVENTS_MAX.
    pub events: std::collections::VecDeque<Event>,
    /// Sequence number of the next event.
    pub next_seq: u64,
    /// Per slot, the I/O errors counted since the last `hetraid clear`
    /// (zpool status's READ, WRITE and CKSUM columns). Trailing slots with
    /// no error are left out.
    pub errors: Vec<ErrorCounts>,
}

/// One member's error counts, kept across assemblies until cleared.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct ErrorCounts {
    pub read: u32,
    pub write: u32,
    pub checksum: u32,
}

impl ErrorCounts {
    pub fn is_zero(&self) -> bool {
        *self == Self::default()
    }

    /// Both counts together (saturating: a count never wraps to zero).
    pub fn plus(self, o: ErrorCounts) -> ErrorCounts {
        ErrorCounts {
            read: self.read.saturating_add(o.read),
            write: self.write.saturating_add(o.write),
            checksum: self.checksum.saturating_add(o.checksum),
        }
    }
}

/// Where the error counts live in the header page: 12 bytes per slot.
const ERRORS_AT: usize = 256;
const ERRORS_BYTES: usize = 12;

fn put_str(b: &mut [u8], s: &str) {
    let s = s.as_bytes();
    let n = s.len().min(b.len());
    b[..n].copy_from_slice(&s[..n]);
}

fn get_str(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

/// `s` cut to `max` bytes, keeping its end (a path's file name matters most),
/// on a character boundary.
pub fn tail(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut at = s.len() - (max - 3);
    while !s.is_char_boundary(at) {
        at += 1;
    }
    format!("...{}", &s[at..])
}

fn seal(page: &mut [u8]) {
    let crc = hetraid_parity::crc32c::crc32c(&page[..CRC_AT]);
    page[CRC_AT..PAGE].copy_from_slice(&crc.to_le_bytes());
}

fn sealed(page: &[u8]) -> bool {
    hetraid_parity::crc32c::crc32c(&page[..CRC_AT]) == u32_at(page, CRC_AT)
}

use crate::le::{u16_at, u32_at, u64_at};

impl Annex {
    pub fn new(uuid: [u8; 16], name: &str, paths: Vec<String>) -> Self {
        Self {
            uuid,
            name: name.to_string(),
            paths,
            next_seq: 1,
            ..Self::default()
        }
    }

    /// Append an event (the oldest goes when EVENTS_MAX are kept).
    pub fn push(
        &mut self,
        time_unix_ms: u64,
        kind: EventKind,
        slot: Option<usize>,
        values: [u64; 3],
        detail: &str,
    ) -> Event {
        let e = Event {
            seq: self.next_seq.max(1),
            time_unix_ms,
            kind,
            slot: slot.map(|s| s as u16),
            values,
            detail: tail(detail, DETAIL_BYTES),
        };
        self.next_seq = e.seq + 1;
        if self.events.len() == EVENTS_MAX {
            self.events.pop_front();
        }
        self.events.push_back(e.clone());
        e
    }

    /// Record `path` as slot `slot`'s (kept to its last PATH_MAX bytes).
    pub fn set_path(&mut self, slot: usize, path: &str) {
        if slot < SLOTS {
            if self.paths.len() <= slot {
                self.paths.resize(slot + 1, String::new());
            }
            self.paths[slot] = tail(path, PATH_MAX);
        }
    }

    pub fn encode(&self, slot: u32) -> Vec<u8> {
        let mut b = vec![0u8; ANNEX_BYTES as usize];
        let h = &mut b[..PAGE];
        h[0..8].copy_from_slice(MAGIC);
        h[8..12].copy_from_slice(&1u32.to_le_bytes());
        h[12..16].copy_from_slice(&slot.to_le_bytes());
        h[16..32].copy_from_slice(&self.uuid);
        h[32..40].copy_from_slice(&self.sb_events.to_le_bytes());
        h[40..48].copy_from_slice(&self.next_seq.to_le_bytes());
        h[48..50].copy_from_slice(&(self.events.len() as u16).to_le_bytes());
        h[50..52].copy_from_slice(&(self.paths.len().min(SLOTS) as u16).to_le_bytes());
        put_str(&mut h[64..64 + NAME_MAX], &tail(&self.name, NAME_MAX));
        for (s, c) in self.errors.iter().take(SLOTS).enumerate() {
            let r = &mut h[ERRORS_AT + s * ERRORS_BYTES..][..ERRORS_BYTES];
            r[0..4].copy_from_slice(&c.read.to_le_bytes());
            r[4..8].copy_from_slice(&c.write.to_le_bytes());
            r[8..12].copy_from_slice(&c.checksum.to_le_bytes());
        }
        seal(h);
        for p in 0..PATH_PAGES {
            let page = &mut b[PAGE * (1 + p)..PAGE * (2 + p)];
            for i in 0..PATHS_PER_PAGE {
                if let Some(path) = self.paths.get(p * PATHS_PER_PAGE + i) {
                    put_str(&mut page[i * PATH_BYTES..(i + 1) * PATH_BYTES - 1], path);
                }
            }
            seal(page);
        }
        for (i, e) in self.events.iter().enumerate() {
            let at = PAGE * (1 + PATH_PAGES) + (i / EVENTS_PER_PAGE) * PAGE;
            let r = &mut b[at + (i % EVENTS_PER_PAGE) * EVENT_BYTES..][..EVENT_BYTES];
            r[0..8].copy_from_slice(&e.seq.to_le_bytes());
            r[8..16].copy_from_slice(&e.time_unix_ms.to_le_bytes());
            r[16..18].copy_from_slice(&e.kind.code().to_le_bytes());
            r[18..20].copy_from_slice(&e.slot.unwrap_or(u16::MAX).to_le_bytes());
            for (j, v) in e.values.iter().enumerate() {
                r[24 + 8 * j..32 + 8 * j].copy_from_slice(&v.to_le_bytes());
            }
            r[48] = e.detail.len().min(DETAIL_BYTES) as u8;
            put_str(&mut r[49..], &e.detail);
        }
        for p in 0..EVENT_PAGES {
            seal(&mut b[PAGE * (1 + PATH_PAGES + p)..PAGE * (2 + PATH_PAGES + p)]);
        }
        b
    }

    /// The annex in `b`, or None when it is absent or damaged anywhere.
    pub fn decode(b: &[u8]) -> Option<Self> {
        if b.len() < ANNEX_BYTES as usize || &b[0..8] != MAGIC {
            return None;
        }
        if !(0..8).all(|p| sealed(&b[p * PAGE..(p + 1) * PAGE])) {
            return None;
        }
        if u32_at(b, 8) != 1 {
            return None;
        }
        let count = u16_at(b, 48) as usize;
        let slots = u16_at(b, 50) as usize;
        if count > EVENTS_MAX || slots > SLOTS {
            return None;
        }
        let mut a = Self {
            uuid: b[16..32].try_into().unwrap(),
            sb_events: u64_at(b, 32),
            next_seq: u64_at(b, 40),
            name: get_str(&b[64..64 + NAME_MAX]),
            ..Self::default()
        };
        a.errors = (0..SLOTS)
            .map(|s| {
                let at = ERRORS_AT + s * ERRORS_BYTES;
                ErrorCounts {
                    read: u32_at(b, at),
                    write: u32_at(b, at + 4),
                    checksum: u32_at(b, at + 8),
                }
            })
            .collect();
        while a.errors.last().is_some_and(ErrorCounts::is_zero) {
            a.errors.pop();
        }
        for s in 0..slots {
            let at = PAGE * (1 + s / PATHS_PER_PAGE) + (s % PATHS_PER_PAGE) * PATH_BYTES;
            a.paths.push(get_str(&b[at..at + PATH_BYTES - 1]));
        }
        for i in 0..count {
            let at = PAGE * (1 + PATH_PAGES) + (i / EVENTS_PER_PAGE) * PAGE;
            let r = &b[at + (i % EVENTS_PER_PAGE) * EVENT_BYTES..][..EVENT_BYTES];
            let kind = EventKind::of(u16_at(r, 16))?;
            let slot = u16_at(r, 18);
            let len = (r[48] as usize).min(DETAIL_BYTES);
            a.events.push_back(Event {
                seq: u64_at(r, 0),
                time_unix_ms: u64_at(r, 8),
                kind,
                slot: (slot != u16::MAX).then_some(slot),
                values: [u64_at(r, 24), u64_at(r, 32), u64_at(r, 40)],
                detail: String::from_utf8_lossy(&r[49..49 + len]).into_owned(),
            });
        }
        Some(a)
    }

    /// The freshest of several copies (by superblock event, then sequence).
    pub fn freshest(copies: impl IntoIterator<Item = Annex>) -> Option<Annex> {
        copies.into_iter().max_by_key(|a| (a.sb_events, a.next_seq))
    }
}

/// What one member file says of its array, read without opening it for
/// writing or taking its lock (a served array's members too): its
/// superblock and its annex copy (None when absent or damaged).
pub fn read_member(
    path: &std::path::Path,
) -> std::io::Result<(crate::format::Superblock, Option<Annex>)> {
    use std::os::unix::fs::FileExt;
    let id = crate::identity::Identity::of_path(path)?;
    let Some(sb) = id.superblock().cloned() else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("no hetraid superblock: it {}", id.describe()),
        ));
    };
    let f = std::fs::File::open(path)?;
    let mut b = vec![0u8; ANNEX_BYTES as usize];
    let annex = f
        .read_exact_at(&mut b, ANNEX_AT)
        .ok()
        .and_then(|_| Annex::decode(&b))
        .filter(|a| a.uuid == sb.uuid);
    Ok((sb, annex))
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Annex {
        let mut a = Annex::new([7; 16], "tank", vec!["/dev/sda".into(), "a.img".into()]);
        a.sb_events = 9;
        a.errors = vec![
            ErrorCounts::default(),
            ErrorCounts {
                read: 3,
                write: 1,
                checksum: u32::MAX,
            },
        ];
        a.set_path(5, &format!("/very/{}/long.img", "x".repeat(300)));
        for i in 0..200u64 {
            a.push(
                1000 + i,
                KINDS[i as usize % KINDS.len()],
                Some(1),
                [i, 2, 3],
                "b.img",
            );
        }
        a
    }

    #[test]
    fn round_trips_and_keeps_the_last_events() {
        let a = sample();
        let d = Annex::decode(&a.encode(3)).unwrap();
        assert_eq!(d, a);
        assert_eq!(d.events.len(), EVENTS_MAX);
        assert_eq!(d.events.back().unwrap().seq, 200);
        assert_eq!(d.events.front().unwrap().seq, 200 - EVENTS_MAX as u64 + 1);
        assert!(d.paths[5].starts_with("...") && d.paths[5].ends_with("/long.img"));
        assert!(d.paths[5].len() <= PATH_MAX);
    }

    #[test]
    fn any_damaged_page_is_refused() {
        let b = sample().encode(0);
        for p in 0..8 {
            let mut bad = b.clone();
            bad[p * PAGE + 100] ^= 1;
            assert!(Annex::decode(&bad).is_none(), "page {p}");
        }
        assert!(Annex::decode(&vec![0u8; ANNEX_BYTES as usize]).is_none());
    }

    #[test]
    fn the_freshest_copy_wins() {
        let mut a = sample();
        let old = a.clone();
        a.push(5, EventKind::Failed, Some(0), [0; 3], "x");
        assert_eq!(Annex::freshest([old, a.clone()]), Some(a));
    }

    #[test]
    fn every_kind_has_a_text_and_a_code() {
        for k in KINDS {
            assert_eq!(EventKind::of(k.code()), Some(k));
            let e = Event {
                seq: 1,
                time_unix_ms: 0,
                kind: k,
                slot: Some(2),
                values: [1, 2, 3],
                detail: "d.img".into(),
            };
            assert!(!e.text().is_empty());
        }
    }
}
