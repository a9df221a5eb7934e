//! On-disk format: a 4 KiB superblock at offset 0 of every member, the
//! write-intent bitmap after it, data from `DATA_OFFSET`. Little-endian, versioned,
//! crc32c-checksummed. Byte map in docs/FORMAT.md.

use hetraid_core::layout::ParityOrder;
use hetraid_core::{MemberKind, WritePolicy};

pub const MAGIC: &[u8; 8] = b"HETRAID1";
/// The newest format: version 2 adds block checksums, version 3 a write log.
/// Each array is written with the oldest version that holds what it uses, so
/// older binaries keep reading arrays without the newer features (and refuse,
/// by name, the ones they would mishandle: a binary that ignored the log
/// would skip its replay).
pub const VERSION: u32 = 3;
pub const SB_SIZE: usize = 4096;
/// Bitmap region: [BITMAP_OFFSET, DATA_OFFSET).
pub const BITMAP_OFFSET: u64 = 4096;
pub const DATA_OFFSET: u64 = 1 << 20;
pub const MAX_MEMBERS: usize = 64;
const TABLE: usize = 376;
const ENTRY: usize = 32;
const RELOC_COUNT: usize = 2424;
const RELOC_TABLE: usize = 2432;
const RELOC_ENTRY: usize = 32;
/// Most relocation entries a superblock holds.
/// (New relocations stop one entry short of the table's 50: a version 3
/// superblock keeps the log's position in the last 16 bytes, `LOG_POS_AT`.)
pub const MAX_RELOCATIONS: usize = (LOG_POS_AT - RELOC_TABLE) / RELOC_ENTRY;
/// Entries an array without a log may hold (written before the log
/// position took the table's last entry).
const MAX_RELOCATIONS_NO_LOG: usize = (REGION_AT - RELOC_TABLE) / RELOC_ENTRY;
/// Version 3: the write log's checkpoint sequence the members last saw
/// (u64), then 8 reserved bytes.
const LOG_POS_AT: usize = REGION_AT - 16;
/// The last scrub's result (32 bytes), just before the checksum.
const SCRUB_AT: usize = CRC_AT - 32;
const CRC_AT: usize = SB_SIZE - 4;

/// The superblock records the array's layout options as core's
/// [`LayoutOptions`] (the options `ArraySpec` validated, defaults resolved:
/// `hetraid_core::spec::ArraySpec::stored_layout`). Bytes 72..120 hold them
/// (docs/FORMAT.md); the declustered layout's width, parity and spares share
/// the bytes of `group`, `copies` and `spare_partitions`, which it has no use
/// for: that sharing lives in `encode`/`decode` and nowhere else.
pub use hetraid_core::layout::LayoutOptions;

/// The layout fields whose bytes are shared or coded: the parity order by
/// its index in `ORDERS`, and the declustered layout's width, parity and
/// spares in the bytes of `group`, `copies` and `spare_partitions`.
struct LayoutBytes {
    parity_order: Option<ParityOrder>,
    copies: Option<usize>,
    group: Option<usize>,
    spare_partitions: usize,
}

impl LayoutBytes {
    fn of(o: &LayoutOptions) -> Self {
        // Options are validated before they are recorded: a parity order
        // that does not parse is never stored.
        let parity_order = o
            .parity_order
            .as_deref()
            .and_then(|p| ParityOrder::parse(p).ok());
        match o.is_declustered() {
            true => Self {
                parity_order,
                copies: o.declustered.parity,
                group: o.declustered.width,
                spare_partitions: o.declustered.spares.unwrap_or(0),
            },
            false => Self {
                parity_order,
                copies: o.copies,
                group: o.group,
                spare_partitions: o.spare_partitions,
            },
        }
    }

    /// `rest` (name, weights, partitions, bundles, level) with these fields.
    fn options(self, rest: LayoutOptions) -> LayoutOptions {
        let parity_order = self.parity_order.map(|o| o.as_str().to_string());
        match rest.is_declustered() {
            true => LayoutOptions {
                parity_order,
                declustered: hetraid_core::layout::DeclusterParams {
                    width: self.group,
                    parity: self.copies,
                    spares: Some(self.spare_partitions),
                },
                ..rest
            },
            false => LayoutOptions {
                parity_order,
                copies: self.copies,
                group: self.group,
                spare_partitions: self.spare_partitions,
                ..rest
            },
        }
    }
}

/// What a member slot is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoleState {
    Active,
    Faulty,
    Rebuilding,
    Removed,
    /// Absent when the array was started degraded (see core `membership`).
    Missing,
}

impl RoleState {
    /// Part of the running array (gets superblock updates).
    pub fn is_in(self) -> bool {
        matches!(self, Self::Active | Self::Rebuilding)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Faulty => "faulty",
            Self::Rebuilding => "rebuilding",
            Self::Removed => "removed",
            Self::Missing => "missing",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemberRole {
    pub state: RoleState,
    pub kind: MemberKind,
    /// Data-area bytes this member contributes.
    pub data_size: u64,
    /// Rebuilding: stripes below this are already rebuilt.
    pub rebuild_checkpoint: u64,
    /// Random id of the device in the slot, given when it entered it (0 =
    /// unknown, written by versions before ids).
    pub device: u64,
    /// Rebuilding a member that left intact and came back (re-add): only
    /// the regions the write-intent bitmap marks are rebuilt (entry byte 2).
    pub resync: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Superblock {
    pub uuid: [u8; 16],
    pub events: u64,
    /// This member's slot.
    pub member: u32,
    pub clean: bool,
    pub policy: WritePolicy,
    pub data_offset: u64,
    /// Block checksums (crc32c per 4 KiB) between the bitmap and the data:
    /// `data_offset - DATA_OFFSET` bytes of them (format version 2).
    pub checksums: bool,
    pub chunk_bytes: u64,
    pub bitmap_stripes: u32,
    pub layout: LayoutOptions,
    pub roles: Vec<MemberRole>,
    /// Extents moved into spare space (S2-RAID rebuild to spare).
    pub relocations: Vec<Relocation>,
    /// The last completed scrub (zpool status's "scan:" line).
    pub last_scrub: Option<ScrubRecord>,
    /// The write log, if the array has one (format version 3).
    pub log: Option<LogRecord>,
    /// Layouts with copies: how reads choose one (byte 2427).
    pub read_policy: ReadPolicy,
    /// RAIDX: each member keeps its bundle table past its data area (byte
    /// 4042; `crate::bundles`).
    pub bundle_table: bool,
    /// RAIDX: how its bundle table came to be (created, grown, members
    /// removed) and any change in progress (bytes 2432..4032, where other
    /// layouts keep relocations). None: arrays written before it, whose
    /// table is the allocator's over the member sizes.
    pub raidx_history: Option<hetraid_core::layout::raidx_history::History>,
    /// RAID5/6, RAIDH: a restripe in progress (bytes 2432..2720, where
    /// S²-RAID keeps relocations).
    pub reshape: Option<ReshapeRecord>,
    /// Hot spares (byte 4043 counts them; entries after the member table's
    /// n, state 5): devices that take a failed member's slot by themselves.
    pub spares: Vec<SpareRole>,
    /// Write generation (bytes 4044..4052): bumped at every clean -> dirty
    /// transition and written to every live member, so a member that comes
    /// back older than the others (a copy, a snapshot, a rolled-back VM) is
    /// known at assembly. 0: written before generations.
    pub generation: u64,
    /// The generation in which bitmap bits were last cleared (bytes
    /// 4052..4060, md's `events_cleared`): every region written since a
    /// member of a generation at least this old left is still marked, so it
    /// can be resynced from the bitmap; an older one is resynced whole.
    pub generation_cleared: u64,
    /// The generation's first superblock write reached every live member
    /// (the top bit of bytes 4044..4052, written by a second update before
    /// any data write): a member one generation behind while no member says
    /// so missed only a crash at the generation's start, and lacks nothing.
    pub generation_started: bool,
}

/// A hot spare: a device of the array holding no slot, waiting for one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpareRole {
    pub kind: MemberKind,
    /// The device's whole size in bytes (what a slot it takes may need).
    pub size: u64,
    /// Random id, as a member's.
    pub device: u64,
}

/// Where the spare count lives, and the state byte of a spare's entry.
const SPARES_AT: usize = 4043;
/// Write generation and the generation bits were last cleared in.
const GENERATION_AT: usize = 4044;
const STARTED_BIT: u64 = 1 << 63;
const SPARE_STATE: u8 = 5;

/// A restripe in progress (`grow --add` on RAID5/6/RAIDH, `grow --weights`
/// on RAIDH): from the layout over the first `old_members` slots with
/// `old_weights` to the one the superblock describes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReshapeRecord {
    pub old_members: usize,
    /// RAIDH: the weights before (empty for RAID5/6).
    pub old_weights: Vec<u64>,
    /// New-layout rows written (a step boundary).
    pub mark_rows: u64,
    /// The steps' window (the plan is recomputed from it).
    pub window_rows: u64,
    /// The step starting at this row overwrites data it has not copied:
    /// every member's chunk of that row is in its backup area (below) and
    /// is put back before the step runs again.
    pub backup_row: Option<u64>,
}

/// Reshape record: 1 (u8), old member count (u8), old weight count (u16),
/// reserved (4), mark rows (u64), window rows (u64), backup row + 1 (u64;
/// 0 none), reserved (8), old weights (64 x u32).
const RESHAPE_AT: usize = RELOC_TABLE;
/// Layouts that restripe.
fn restripes(name: &str) -> bool {
    matches!(name, "raid5" | "raid6" | "raidh")
}

/// RAIDX history (bytes 2432..4032 when the layout is raidx): changes done
/// (u16), initial slot count (u8), a change pending (u8), reserved (4),
/// moves done of the pending change (u64), the pending change (16), the
/// initial members' chunk slots (64 x u64), then the changes, 16 bytes each.
const HISTORY_AT: usize = RELOC_TABLE;
const HISTORY_CAPS: usize = HISTORY_AT + 32;
const HISTORY_CHANGES: usize = HISTORY_CAPS + 8 * MAX_MEMBERS;
/// Most changes a RAIDX history holds.
pub const HISTORY_MAX: usize = (LOG_POS_AT - HISTORY_CHANGES) / 16;
/// Changes an array without a log may hold (see `MAX_RELOCATIONS`).
const HISTORY_MAX_NO_LOG: usize = (REGION_AT - HISTORY_CHANGES) / 16;

fn put_change(b: &mut [u8], at: usize, c: &hetraid_core::layout::raidx_history::Change) {
    use hetraid_core::layout::raidx_history::Change;
    let (ty, slot, v) = match *c {
        Change::Grow { slot, chunks } => (1u8, slot, chunks),
        Change::Remove { slot, keep_bundles } => (2u8, slot, keep_bundles),
    };
    b[at] = ty;
    b[at + 1] = slot as u8;
    put_u64(b, at + 8, v);
}

fn change_at(
    b: &[u8],
    at: usize,
) -> Result<hetraid_core::layout::raidx_history::Change, FormatError> {
    use hetraid_core::layout::raidx_history::Change;
    let slot = b[at + 1] as usize;
    if slot >= MAX_MEMBERS {
        return Err(FormatError::Field("raidx history slot"));
    }
    let v = u64_at(b, at + 8);
    match b[at] {
        1 => Ok(Change::Grow { slot, chunks: v }),
        2 => Ok(Change::Remove {
            slot,
            keep_bundles: v,
        }),
        _ => Err(FormatError::Field("raidx history change")),
    }
}

use hetraid_core::readbalance::ReadPolicy;

/// Byte 2427: 0 md (what arrays written before it say), 1 first, 2..5
/// raidx1..raidx4.
fn read_policy_code(p: ReadPolicy) -> u8 {
    match p {
        ReadPolicy::Md => 0,
        ReadPolicy::First => 1,
        ReadPolicy::Raidx1 => 2,
        ReadPolicy::Raidx2 => 3,
        ReadPolicy::Raidx3 => 4,
        ReadPolicy::Raidx4 => 5,
    }
}

fn read_policy_of(b: u8) -> Option<ReadPolicy> {
    [
        ReadPolicy::Md,
        ReadPolicy::First,
        ReadPolicy::Raidx1,
        ReadPolicy::Raidx2,
        ReadPolicy::Raidx3,
        ReadPolicy::Raidx4,
    ]
    .get(b as usize)
    .copied()
}

/// How the write log is used (decided in core with the log's other rules).
pub use hetraid_core::logconfig::LogMode;

/// The array's write log as its superblock records it; the log devices carry
/// the rest (see `log/record.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogRecord {
    pub mode: LogMode,
    /// Random, never 0: the log devices of this array carry it.
    pub id: u32,
    /// Copies of the log (1, or 2 mirrored).
    pub copies: u16,
    /// Bit i: copy i is in use (a copy that failed is left out at assembly
    /// until it is replaced: its records may be behind).
    pub active: u8,
    /// Bumped when a copy is replaced; the copies written since carry it, so
    /// a device replaced earlier is never taken for the log.
    pub epoch: u32,
    /// The log lives on the members (`--log-region`): copy i in the `bytes`
    /// past the data area of slot `slots[i]`; None: on log devices of its own.
    pub region: Option<LogRegion>,
    /// The log's checkpoint sequence when the members' superblocks were
    /// last written (written after each checkpoint reached the log, and at
    /// a clean close, where the log is empty at it): a log copy whose
    /// checkpoint is older is a copy put back (a snapshot, a rolled-back
    /// VM disk, a device that lost flushed writes) and is never replayed.
    /// 0: not recorded (arrays written before it).
    pub checkpoint_seq: u64,
}

/// A write log kept on the members.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogRegion {
    pub bytes: u64,
    pub slots: [u8; 2],
}

/// Where the log region fields live (version 3): bytes (u64), then the
/// slots of copies 0 and 1.
const REGION_AT: usize = 4032;

/// What the last completed scrub found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ScrubRecord {
    /// When it finished, seconds since the Unix epoch.
    pub finished_unix_s: u64,
    pub duration_ms: u64,
    pub stripes_checked: u64,
    /// Stripes with a mismatch, and stripes where something was rewritten.
    pub mismatched_stripes: u32,
    pub repaired_stripes: u32,
}

/// `len` bytes of member `from_member` at `from_offset` (data-area offsets) now
/// live on `to_member` at `to_offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Relocation {
    pub from_member: u16,
    pub to_member: u16,
    pub from_offset: u64,
    pub to_offset: u64,
    pub len: u64,
}

/// Why a superblock was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    #[error("no hetraid superblock (bad magic)")]
    NoMagic,
    #[error("superblock version {0} is not supported (this hetraid reads versions 1 to {VERSION}); use a newer hetraid")]
    Version(u32),
    #[error("superblock checksum mismatch (damaged superblock)")]
    Checksum,
    #[error("superblock field {0} is invalid")]
    Field(&'static str),
}

use crate::le::{put_u16, put_u32, put_u64, u16_at, u32_at, u64_at};

fn opt16(v: Option<usize>) -> u16 {
    v.map_or(0, |x| x as u16)
}
fn unopt16(v: u16) -> Option<usize> {
    (v != 0).then_some(v as usize)
}

const POLICIES: [WritePolicy; 5] = [
    WritePolicy::Md,
    WritePolicy::Modthresh,
    WritePolicy::RmwAlways,
    WritePolicy::Cost,
    WritePolicy::ModthreshStripe,
];
const ORDERS: [ParityOrder; 4] = [
    ParityOrder::LeftSymmetric,
    ParityOrder::LeftAsymmetric,
    ParityOrder::RightSymmetric,
    ParityOrder::RightAsymmetric,
];
const KINDS: [MemberKind; 3] = [MemberKind::Hdd, MemberKind::Ssd, MemberKind::Nvram];

/// A member kind's byte code (0 hdd, 1 ssd, 2 nvram).
pub fn kind_code(k: MemberKind) -> u8 {
    KINDS.iter().position(|x| *x == k).unwrap() as u8
}

/// The kind for a byte code, if it is one.
pub fn kind_from_code(c: u8) -> Option<MemberKind> {
    KINDS.get(c as usize).copied()
}
const STATES: [RoleState; 5] = [
    RoleState::Active,
    RoleState::Faulty,
    RoleState::Rebuilding,
    RoleState::Removed,
    RoleState::Missing,
];

/// Largest chunk a superblock may name (and `create` accepts).
pub const CHUNK_MAX: u64 = hetraid_core::spec::CHUNK_BYTES_MAX;
/// A chunk size a superblock may carry: a power of two from 4 KiB to [`CHUNK_MAX`].
pub fn chunk_ok(chunk: u64) -> bool {
    hetraid_core::spec::chunk_ok(chunk)
}

/// Largest data area one member may contribute (1 PiB): sizes beyond are damage.
pub const MEMBER_DATA_MAX: u64 = 1 << 50;

impl Superblock {
    pub fn encode(&self) -> [u8; SB_SIZE] {
        assert!(
            self.roles.len() <= MAX_MEMBERS
                && self
                    .layout
                    .weights
                    .as_ref()
                    .is_none_or(|w| w.len() <= MAX_MEMBERS)
        );
        let mut b = [0u8; SB_SIZE];
        b[0..8].copy_from_slice(MAGIC);
        let version = match (self.log, self.checksums) {
            (Some(_), _) => 3,
            (None, true) => 2,
            (None, false) => 1,
        };
        put_u32(&mut b, 8, version);
        b[46] = self.checksums as u8;
        if let Some(l) = self.log {
            b[47] = match l.mode {
                LogMode::Journal => 1,
                LogMode::WriteBack => 2,
            };
            put_u32(&mut b, 68, l.id);
            put_u16(&mut b, 118, l.copies);
            b[2426] = l.active;
            put_u32(&mut b, 2428, l.epoch);
            put_u64(&mut b, LOG_POS_AT, l.checkpoint_seq);
            if let Some(r) = l.region {
                put_u64(&mut b, REGION_AT, r.bytes);
                b[REGION_AT + 8] = r.slots[0];
                b[REGION_AT + 9] = r.slots[1];
            }
        }
        put_u32(&mut b, 12, self.member);
        b[16..32].copy_from_slice(&self.uuid);
        put_u64(&mut b, 32, self.events);
        put_u32(&mut b, 40, self.roles.len() as u32);
        b[44] = self.clean as u8;
        b[45] = POLICIES.iter().position(|p| *p == self.policy).unwrap() as u8;
        b[2427] = read_policy_code(self.read_policy);
        b[4042] = self.bundle_table as u8;
        put_u64(&mut b, 48, self.data_offset);
        put_u64(&mut b, 56, self.chunk_bytes);
        put_u32(&mut b, 64, self.bitmap_stripes);
        let name = self.layout.name.as_bytes();
        b[72..72 + name.len().min(32)].copy_from_slice(&name[..name.len().min(32)]);
        let l = LayoutBytes::of(&self.layout);
        b[104] = l
            .parity_order
            .map_or(0xff, |o| ORDERS.iter().position(|x| *x == o).unwrap() as u8);
        b[105] = self
            .layout
            .raidx_level
            .as_deref()
            .and_then(|l| l.parse::<u8>().ok())
            .unwrap_or(0xff);
        put_u16(&mut b, 106, opt16(l.copies));
        put_u16(&mut b, 108, opt16(l.group));
        put_u16(&mut b, 110, opt16(self.layout.partitions));
        put_u16(&mut b, 112, l.spare_partitions as u16);
        put_u16(&mut b, 114, opt16(self.layout.chunks_per_bundle));
        let weights = self.layout.weights.as_deref().unwrap_or_default();
        put_u16(&mut b, 116, weights.len() as u16);
        for (i, w) in weights.iter().enumerate() {
            put_u32(&mut b, 120 + 4 * i, *w as u32);
        }
        for (i, r) in self.roles.iter().enumerate() {
            let at = TABLE + ENTRY * i;
            b[at] = STATES.iter().position(|s| *s == r.state).unwrap() as u8;
            b[at + 1] = KINDS.iter().position(|k| *k == r.kind).unwrap() as u8;
            put_u64(&mut b, at + 8, r.data_size);
            put_u64(&mut b, at + 16, r.rebuild_checkpoint);
            put_u64(&mut b, at + 24, r.device);
            b[at + 2] = (r.resync && r.state == RoleState::Rebuilding) as u8;
        }
        assert!(self.roles.len() + self.spares.len() <= MAX_MEMBERS);
        b[SPARES_AT] = self.spares.len() as u8;
        put_u64(
            &mut b,
            GENERATION_AT,
            self.generation & !STARTED_BIT | u64::from(self.generation_started) << 63,
        );
        put_u64(&mut b, GENERATION_AT + 8, self.generation_cleared);
        for (i, r) in self.spares.iter().enumerate() {
            let at = TABLE + ENTRY * (self.roles.len() + i);
            b[at] = SPARE_STATE;
            b[at + 1] = KINDS.iter().position(|k| *k == r.kind).unwrap() as u8;
            put_u64(&mut b, at + 8, r.size);
            put_u64(&mut b, at + 24, r.device);
        }
        let (reloc_max, history_max) = match self.log {
            Some(_) => (MAX_RELOCATIONS, HISTORY_MAX),
            None => (MAX_RELOCATIONS_NO_LOG, HISTORY_MAX_NO_LOG),
        };
        assert!(self.relocations.len() <= reloc_max);
        put_u16(&mut b, RELOC_COUNT, self.relocations.len() as u16);
        for (i, r) in self.relocations.iter().enumerate() {
            let at = RELOC_TABLE + RELOC_ENTRY * i;
            put_u16(&mut b, at, r.from_member);
            put_u16(&mut b, at + 2, r.to_member);
            put_u64(&mut b, at + 8, r.from_offset);
            put_u64(&mut b, at + 16, r.to_offset);
            put_u64(&mut b, at + 24, r.len);
        }
        if let Some(h) = &self.raidx_history {
            assert!(self.relocations.is_empty() && h.initial.len() <= MAX_MEMBERS);
            assert!(h.changes.len() <= history_max && !h.initial.is_empty());
            put_u16(&mut b, HISTORY_AT, h.changes.len() as u16);
            b[HISTORY_AT + 2] = h.initial.len() as u8;
            if let Some(p) = h.pending {
                b[HISTORY_AT + 3] = 1;
                put_u64(&mut b, HISTORY_AT + 8, p.moves_done);
                put_change(&mut b, HISTORY_AT + 16, &p.change);
            }
            for (i, c) in h.initial.iter().enumerate() {
                put_u64(&mut b, HISTORY_CAPS + 8 * i, *c);
            }
            for (i, c) in h.changes.iter().enumerate() {
                put_change(&mut b, HISTORY_CHANGES + 16 * i, c);
            }
        }
        if let Some(r) = &self.reshape {
            assert!(self.relocations.is_empty() && restripes(&self.layout.name));
            b[RESHAPE_AT] = 1;
            b[RESHAPE_AT + 1] = r.old_members as u8;
            put_u16(&mut b, RESHAPE_AT + 2, r.old_weights.len() as u16);
            put_u64(&mut b, RESHAPE_AT + 8, r.mark_rows);
            put_u64(&mut b, RESHAPE_AT + 16, r.window_rows);
            put_u64(&mut b, RESHAPE_AT + 24, r.backup_row.map_or(0, |x| x + 1));
            for (i, w) in r.old_weights.iter().enumerate() {
                put_u32(&mut b, RESHAPE_AT + 40 + 4 * i, *w as u32);
            }
        }
        if let Some(r) = self.last_scrub {
            put_u64(&mut b, SCRUB_AT, r.finished_unix_s);
            put_u64(&mut b, SCRUB_AT + 8, r.duration_ms);
            put_u64(&mut b, SCRUB_AT + 16, r.stripes_checked);
            put_u32(&mut b, SCRUB_AT + 24, r.mismatched_stripes);
            put_u32(&mut b, SCRUB_AT + 28, r.repaired_stripes);
        }
        let crc = hetraid_parity::crc32c::crc32c(&b[..CRC_AT]);
        put_u32(&mut b, CRC_AT, crc);
        b
    }

    pub fn decode(b: &[u8]) -> Result<Self, FormatError> {
        if b.len() < SB_SIZE || &b[0..8] != MAGIC {
            return Err(FormatError::NoMagic);
        }
        let version = u32_at(b, 8);
        if !(1..=VERSION).contains(&version) {
            return Err(FormatError::Version(version));
        }
        if hetraid_parity::crc32c::crc32c(&b[..CRC_AT]) != u32_at(b, CRC_AT) {
            return Err(FormatError::Checksum);
        }
        let n = u32_at(b, 40) as usize;
        if n == 0 || n > MAX_MEMBERS {
            return Err(FormatError::Field("member count"));
        }
        let spare_count = b[SPARES_AT] as usize;
        if n + spare_count > MAX_MEMBERS {
            return Err(FormatError::Field("spare count"));
        }
        let member = u32_at(b, 12);
        if member as usize >= n + spare_count {
            return Err(FormatError::Field("member index"));
        }
        let spares = spares_at(b, n, spare_count)?;
        let name_raw = &b[72..104];
        let name_len = name_raw.iter().position(|c| *c == 0).unwrap_or(32);
        let name = std::str::from_utf8(&name_raw[..name_len])
            .map_err(|_| FormatError::Field("layout name"))?
            .to_string();
        let wn = u16_at(b, 116) as usize;
        if wn > MAX_MEMBERS {
            return Err(FormatError::Field("weight count"));
        }
        let roles = roles_at(b, n)?;
        let raidx_history = raidx_history_at(b, &name, version, n)?;
        let reshape = reshape_at(b, &name, n)?;
        let relocations =
            relocations_at(b, version, n, raidx_history.is_some() || reshape.is_some())?;
        // Every field that sizes memory or I/O is bounded before anyone uses it.
        let chunk = u64_at(b, 56);
        if !chunk_ok(chunk) {
            return Err(FormatError::Field("chunk size"));
        }
        let checksums = match (version, b[46]) {
            (1, 0) | (2, 0) | (3, 0) => false,
            (2, 1) | (3, 1) => true,
            _ => return Err(FormatError::Field("checksum algorithm")),
        };
        let log = log_at(b, version, n)?;
        let data_offset = u64_at(b, 48);
        let largest = roles.iter().map(|r| r.data_size).max().unwrap_or(0);
        let area_ok = match checksums {
            false => data_offset == DATA_OFFSET,
            // Room for an entry per 4 KiB of the largest member, whole MiB.
            true => {
                let area = data_offset.saturating_sub(DATA_OFFSET);
                data_offset.is_multiple_of(1 << 20)
                    && area >= crate::member::checksum::area_bytes(largest)
                    && area <= crate::member::checksum::area_bytes(MEMBER_DATA_MAX)
            }
        };
        if !area_ok {
            return Err(FormatError::Field("data offset"));
        }
        for r in &roles {
            if r.data_size > MEMBER_DATA_MAX || r.data_size % chunk != 0 {
                return Err(FormatError::Field("member data size"));
            }
        }
        for r in &relocations {
            let in_range = |m: u16, o: u64| {
                o.checked_add(r.len)
                    .is_some_and(|e| e <= roles[m as usize].data_size)
            };
            if !in_range(r.from_member, r.from_offset) || !in_range(r.to_member, r.to_offset) {
                return Err(FormatError::Field("relocation extent"));
            }
        }
        let last_scrub = (u64_at(b, SCRUB_AT) != 0).then(|| ScrubRecord {
            finished_unix_s: u64_at(b, SCRUB_AT),
            duration_ms: u64_at(b, SCRUB_AT + 8),
            stripes_checked: u64_at(b, SCRUB_AT + 16),
            mismatched_stripes: u32_at(b, SCRUB_AT + 24),
            repaired_stripes: u32_at(b, SCRUB_AT + 28),
        });
        if let Some(h) = &raidx_history {
            if h.slots() > n
                || h.initial
                    .iter()
                    .chain(roles.iter().map(|r| &r.data_size))
                    .any(|&c| c > MEMBER_DATA_MAX)
            {
                return Err(FormatError::Field("raidx history slots"));
            }
        }
        Ok(Self {
            generation: u64_at(b, GENERATION_AT) & !STARTED_BIT,
            generation_started: u64_at(b, GENERATION_AT) & STARTED_BIT != 0,
            generation_cleared: u64_at(b, GENERATION_AT + 8),
            spares,
            reshape,
            raidx_history,
            last_scrub,
            log,
            relocations,
            uuid: b[16..32].try_into().unwrap(),
            events: u64_at(b, 32),
            member,
            clean: b[44] == 1,
            policy: *POLICIES
                .get(b[45] as usize)
                .ok_or(FormatError::Field("write policy"))?,
            read_policy: read_policy_of(b[2427]).ok_or(FormatError::Field("read policy"))?,
            bundle_table: match b[4042] {
                0 => false,
                1 => true,
                _ => return Err(FormatError::Field("bundle table")),
            },
            data_offset,
            checksums,
            chunk_bytes: u64_at(b, 56),
            bitmap_stripes: u32_at(b, 64).max(1),
            layout: LayoutBytes {
                parity_order: match b[104] {
                    0xff => None,
                    o => Some(
                        *ORDERS
                            .get(o as usize)
                            .ok_or(FormatError::Field("parity order"))?,
                    ),
                },
                copies: unopt16(u16_at(b, 106)),
                group: unopt16(u16_at(b, 108)),
                spare_partitions: u16_at(b, 112) as usize,
            }
            .options(LayoutOptions {
                name,
                weights: (wn > 0).then(|| (0..wn).map(|i| u32_at(b, 120 + 4 * i) as u64).collect()),
                partitions: unopt16(u16_at(b, 110)),
                chunks_per_bundle: unopt16(u16_at(b, 114)),
                raidx_level: (b[105] != 0xff).then(|| b[105].to_string()),
                ..Default::default()
            }),
            roles,
        })
    }

    /// The member table as the core's state machine sees it.
    pub fn table(&self) -> hetraid_core::membership::MemberTable {
        use hetraid_core::membership::{MemberTable, SlotRecord, SlotState};
        MemberTable {
            events: self.events,
            slots: self
                .roles
                .iter()
                .map(|r| SlotRecord {
                    state: match r.state {
                        RoleState::Active => SlotState::Active,
                        RoleState::Rebuilding => SlotState::Rebuilding {
                            checkpoint: r.rebuild_checkpoint,
                        },
                        RoleState::Faulty => SlotState::Faulty,
                        RoleState::Removed => SlotState::Removed,
                        RoleState::Missing => SlotState::Missing,
                    },
                    device: r.device,
                })
                .collect(),
        }
    }

    /// Take the state machine's table (states, checkpoints, device ids, events).
    pub fn set_table(&mut self, t: &hetraid_core::membership::MemberTable) {
        use hetraid_core::membership::SlotState;
        assert_eq!(
            t.slots.len(),
            self.roles.len(),
            "tables have one slot count"
        );
        self.events = t.events;
        for (r, s) in self.roles.iter_mut().zip(&t.slots) {
            (r.state, r.rebuild_checkpoint) = match s.state {
                SlotState::Active => (RoleState::Active, 0),
                SlotState::Rebuilding { checkpoint } => (RoleState::Rebuilding, checkpoint),
                SlotState::Faulty => (RoleState::Faulty, 0),
                SlotState::Removed => (RoleState::Removed, 0),
                SlotState::Missing => (RoleState::Missing, 0),
            };
            r.device = s.device;
            if r.state != RoleState::Rebuilding {
                r.resync = false;
            }
        }
    }

    pub fn uuid_string(&self) -> String {
        uuid::Uuid::from_bytes(self.uuid).hyphenated().to_string()
    }
}

/// A RAIDX array's history (its grows and shrinks), bounded.
fn raidx_history_at(
    b: &[u8],
    name: &str,
    version: u32,
    n: usize,
) -> Result<Option<hetraid_core::layout::raidx_history::History>, FormatError> {
    Ok(if name == "raidx" && b[HISTORY_AT + 2] != 0 {
        use hetraid_core::layout::raidx_history::{History, Pending};
        let h = u16_at(b, HISTORY_AT) as usize;
        let n0 = b[HISTORY_AT + 2] as usize;
        let max = if version == 3 {
            HISTORY_MAX
        } else {
            HISTORY_MAX_NO_LOG
        };
        if h > max || n0 > n {
            return Err(FormatError::Field("raidx history"));
        }
        Some(History {
            initial: (0..n0).map(|i| u64_at(b, HISTORY_CAPS + 8 * i)).collect(),
            changes: (0..h)
                .map(|i| change_at(b, HISTORY_CHANGES + 16 * i))
                .collect::<Result<_, _>>()?,
            pending: match b[HISTORY_AT + 3] {
                0 => None,
                1 => Some(Pending {
                    moves_done: u64_at(b, HISTORY_AT + 8),
                    change: change_at(b, HISTORY_AT + 16)?,
                }),
                _ => return Err(FormatError::Field("raidx history pending")),
            },
        })
    } else {
        None
    })
}

/// A restripe in progress, bounded.
fn reshape_at(b: &[u8], name: &str, n: usize) -> Result<Option<ReshapeRecord>, FormatError> {
    Ok(if restripes(name) && b[RESHAPE_AT] == 1 {
        let old_members = b[RESHAPE_AT + 1] as usize;
        let wn = u16_at(b, RESHAPE_AT + 2) as usize;
        let window_rows = u64_at(b, RESHAPE_AT + 16);
        if old_members == 0 || old_members > n || wn > MAX_MEMBERS || window_rows == 0 {
            return Err(FormatError::Field("reshape"));
        }
        Some(ReshapeRecord {
            old_members,
            old_weights: (0..wn)
                .map(|i| u32_at(b, RESHAPE_AT + 40 + 4 * i) as u64)
                .collect(),
            mark_rows: u64_at(b, RESHAPE_AT + 8),
            window_rows,
            backup_row: u64_at(b, RESHAPE_AT + 24).checked_sub(1),
        })
    } else {
        None
    })
}

/// The write log's record (format version 3), bounded.
fn log_at(b: &[u8], version: u32, n: usize) -> Result<Option<LogRecord>, FormatError> {
    Ok(match version {
        3 => {
            let mode = match b[47] {
                1 => LogMode::Journal,
                2 => LogMode::WriteBack,
                _ => return Err(FormatError::Field("log mode")),
            };
            let (id, copies, active) = (u32_at(b, 68), u16_at(b, 118), b[2426]);
            if id == 0 || !(1..=2).contains(&copies) || active >> copies != 0 {
                return Err(FormatError::Field("log"));
            }
            let region = match u64_at(b, REGION_AT) {
                0 => None,
                bytes => {
                    let slots = [b[REGION_AT + 8], b[REGION_AT + 9]];
                    let bad = slots[..copies as usize].iter().any(|&s| s as usize >= n)
                        || (copies == 2 && slots[0] == slots[1])
                        || bytes % 4096 != 0
                        || bytes > MEMBER_DATA_MAX;
                    if bad {
                        return Err(FormatError::Field("log region"));
                    }
                    Some(LogRegion { bytes, slots })
                }
            };
            Some(LogRecord {
                mode,
                id,
                copies,
                active,
                epoch: u32_at(b, 2428),
                region,
                checkpoint_seq: u64_at(b, LOG_POS_AT),
            })
        }
        _ => None,
    })
}

/// The hot spares' entries, after the member table.
fn spares_at(b: &[u8], n: usize, spare_count: usize) -> Result<Vec<SpareRole>, FormatError> {
    let mut spares = Vec::with_capacity(spare_count);
    for i in 0..spare_count {
        let at = TABLE + ENTRY * (n + i);
        if b[at] != SPARE_STATE {
            return Err(FormatError::Field("spare entry"));
        }
        spares.push(SpareRole {
            kind: *KINDS
                .get(b[at + 1] as usize)
                .ok_or(FormatError::Field("spare kind"))?,
            size: u64_at(b, at + 8),
            device: u64_at(b, at + 24),
        });
    }
    Ok(spares)
}

/// The member table.
fn roles_at(b: &[u8], n: usize) -> Result<Vec<MemberRole>, FormatError> {
    let mut roles = Vec::with_capacity(n);
    for i in 0..n {
        let at = TABLE + ENTRY * i;
        roles.push(MemberRole {
            state: *STATES
                .get(b[at] as usize)
                .ok_or(FormatError::Field("member state"))?,
            kind: *KINDS
                .get(b[at + 1] as usize)
                .ok_or(FormatError::Field("member kind"))?,
            data_size: u64_at(b, at + 8),
            rebuild_checkpoint: u64_at(b, at + 16),
            device: u64_at(b, at + 24),
            resync: b[at + 2] == 1,
        });
    }
    Ok(roles)
}

/// The relocation table (S²-RAID spare space); `none` where a history or
/// a restripe uses its bytes.
fn relocations_at(
    b: &[u8],
    version: u32,
    n: usize,
    none: bool,
) -> Result<Vec<Relocation>, FormatError> {
    let rn = if none {
        0
    } else {
        u16_at(b, RELOC_COUNT) as usize
    };
    let max = if version == 3 {
        MAX_RELOCATIONS
    } else {
        MAX_RELOCATIONS_NO_LOG
    };
    if rn > max {
        return Err(FormatError::Field("relocation count"));
    }
    let mut relocations = Vec::with_capacity(rn);
    for i in 0..rn {
        let at = RELOC_TABLE + RELOC_ENTRY * i;
        let r = Relocation {
            from_member: u16_at(b, at),
            to_member: u16_at(b, at + 2),
            from_offset: u64_at(b, at + 8),
            to_offset: u64_at(b, at + 16),
            len: u64_at(b, at + 24),
        };
        if r.from_member as usize >= n || r.to_member as usize >= n {
            return Err(FormatError::Field("relocation member"));
        }
        relocations.push(r);
    }
    Ok(relocations)
}

#[cfg(test)]
#[path = "format_tests.rs"]
mod tests;
