//! Creating and assembling an array, its superblocks, clean shutdown and
//! crash recovery (bitmap resync).

#[allow(unused_imports)]
use super::*;

/// The checksum area for members of physical sizes `lens` (None: no checksums).
fn checksum_area(lens: &[u64], opts: &CreateOptions) -> Option<u64> {
    let largest = lens.iter().max().copied().unwrap_or(0);
    opts.checksums
        .then(|| crate::member::checksum::area_bytes(largest.saturating_sub(DATA_OFFSET).max(1)))
}

/// Where a log region starts on member `slot`, from the start of its data
/// area: where the layout puts it (HPDA: past HDD-1's parity, at the start
/// of HDD-2), or past the member's data (`--log-region`).
pub(crate) fn region_start(layout: &dyn Layout, slot: usize, data_size: u64) -> u64 {
    layout
        .log_regions()
        .iter()
        .find(|r| r.member == slot)
        .map_or(data_size, |r| r.offset)
}

/// The layout record an array is created with: RAIDX5/6 given member kinds
/// and no `--weights` take their parity weights from the kinds (core
/// `weights_from_kinds`: parity on the SSDs), and the weights are stored
/// with the array, so its layout never depends on a later reading of kinds.
/// S2-RAID's partition count is stored too (core `default_partitions`: one
/// fewer with spare space), so an array never depends on a later default.
pub(crate) fn created_record(
    rec: &LayoutRecord,
    kinds: &[MemberKind],
    members: usize,
) -> Result<LayoutRecord> {
    let kind = rec.kind().map_err(EngineError::Layout)?;
    let mut rec = rec.clone();
    if rec.partitions.is_none() {
        rec.partitions = kind.clone().with_default_partitions(members).partitions();
    }
    if let Some(w) = hetraid_core::layout::weights_from_kinds(&kind, kinds) {
        rec.weights = w;
    }
    Ok(rec)
}

/// The data area a member of `len` bytes (as the array sees it, past any
/// checksums) gives with chunks of `chunk`: RAIDX keeps its bundle table
/// past the data area (`crate::bundles`), room for one entry per slot.
pub(crate) fn data_area(len: u64, chunk: u64, reserved: u64, raidx: bool) -> u64 {
    let room = len.saturating_sub(DATA_OFFSET + reserved);
    let table = if raidx {
        crate::bundles::table_bytes(room / chunk)
    } else {
        0
    };
    (room.saturating_sub(table) / chunk * chunk).min(crate::format::MEMBER_DATA_MAX)
}

/// Check each member's bundle table against the table the array has (the
/// allocator's, while chunks do not move): damage is named with its member.
/// The members whose bundle table disagrees with the array's (the
/// superblocks' history, on every member, checksummed): per slot, what is
/// wrong. A member's table is a copy of its part of the array's, so a
/// damaged one is rewritten from it (`repair_bundle_tables`), never a reason
/// to refuse the array.
pub(crate) fn check_bundle_tables(
    sb: &Superblock,
    raw_by_slot: &[Option<Arc<dyn Member>>],
) -> Result<Vec<(usize, String)>> {
    let (table, pending) = super::living::table_now(sb)?;
    let mut damaged = Vec::new();
    // While a change runs the superblock's history is the truth; the
    // tables are rewritten when it completes.
    if pending.is_some() {
        return Ok(damaged);
    }
    let places = table.places;
    for (i, m) in raw_by_slot.iter().enumerate() {
        let Some(m) = m else { continue };
        if sb.roles[i].state == RoleState::Removed {
            continue;
        }
        let size = sb.roles[i].data_size;
        let slots = size / sb.chunk_bytes;
        let found = match crate::bundles::read_table(
            m.as_ref(),
            sb.data_offset + size,
            sb.uuid,
            i as u32,
            slots,
        ) {
            Ok(f) => f,
            Err(e) => {
                damaged.push((i, e));
                continue;
            }
        };
        let want = crate::bundles::entries_of(&places, i, slots);
        let key = |e: &Option<crate::bundles::Entry>| e.map(|e| (e.bundle, e.pos));
        if let Some(k) = (0..slots as usize).find(|&k| key(&found[k]) != key(&want[k])) {
            damaged.push((
                i,
                format!(
                    "the bundle table on {} says slot {k} holds {}, but the array's table says {}",
                    m.name(),
                    found[k].map_or("nothing".into(), |e| format!(
                        "bundle {} position {}",
                        e.bundle, e.pos
                    )),
                    want[k].map_or("nothing".into(), |e| format!(
                        "bundle {} position {}",
                        e.bundle, e.pos
                    )),
                ),
            ));
        }
    }
    Ok(damaged)
}

/// Rewrite the bundle tables of `slots` from the array's table.
fn repair_bundle_tables(
    sb: &Superblock,
    raw_by_slot: &[Option<Arc<dyn Member>>],
    slots: &[usize],
) -> Result<()> {
    let places = super::living::table_now(sb)?.0.places;
    for &i in slots {
        let Some(m) = &raw_by_slot[i] else { continue };
        let size = sb.roles[i].data_size;
        let entries = crate::bundles::entries_of(&places, i, size / sb.chunk_bytes);
        crate::bundles::write_table(
            m.as_ref(),
            sb.data_offset + size,
            sb.uuid,
            i as u32,
            &entries,
        )
        .map_err(|e| io_err(m.as_ref(), e))?;
    }
    Ok(())
}

fn is_raidx(rec: &LayoutRecord) -> bool {
    matches!(
        rec.kind(),
        Ok(hetraid_core::layout::LayoutKind::RaidX { .. })
    )
}

/// Wrap members in block checksums when the superblock says so.
pub(crate) fn with_checksums(m: Arc<dyn Member>, sb: &Superblock) -> Arc<dyn Member> {
    if sb.checksums {
        Arc::new(ChecksumMember::new(m, sb.data_offset - DATA_OFFSET))
    } else {
        m
    }
}

impl Array {
    /// Check a create of members of (physical) sizes `lens` without touching them: member
    /// count, kinds, chunk size, room for metadata and one chunk, the layout.
    pub fn check_create(lens: &[u64], opts: &CreateOptions) -> Result<()> {
        let n = lens.len();
        let lens: Vec<u64> = match checksum_area(lens, opts) {
            Some(c) => {
                let need = DATA_OFFSET + c + opts.chunk_bytes;
                if let Some(&short) = lens.iter().find(|&&l| l < need) {
                    return Err(EngineError::Refused(format!(
                        "a member of {short} bytes is too small: with checksums each needs at least {need} (1 MiB of metadata, {c} of checksums, one chunk)"
                    )));
                }
                lens.iter().map(|l| l - c).collect()
            }
            None => lens.to_vec(),
        };
        let lens = &lens[..];
        if n == 0 {
            return Err(EngineError::Refused("give at least one member".into()));
        }
        if n > crate::format::MAX_MEMBERS {
            return Err(EngineError::Refused(format!(
                "at most {} members are supported",
                crate::format::MAX_MEMBERS
            )));
        }
        if !opts.kinds.is_empty() && opts.kinds.len() != n {
            return Err(EngineError::Refused(format!(
                "--kinds lists {} kinds for {n} members; give one per member",
                opts.kinds.len()
            )));
        }
        let chunk = opts.chunk_bytes;
        if !crate::format::chunk_ok(chunk) {
            return Err(EngineError::Refused(format!(
                "chunk size {chunk} is not a power of two between 4K and 1G"
            )));
        }
        let need = DATA_OFFSET + chunk;
        if let Some(&short) = lens.iter().find(|&&l| l < need) {
            return Err(EngineError::Refused(format!(
                "a member of {short} bytes is too small: each needs at least {need} (1 MiB of metadata plus one chunk)"
            )));
        }
        let raidx = is_raidx(&opts.layout);
        let sizes: Vec<u64> = lens
            .iter()
            .map(|&l| data_area(l, chunk, 0, raidx))
            .collect();
        let kind = opts.layout.kind().map_err(EngineError::Layout)?;
        if kind == hetraid_core::layout::LayoutKind::Hpda {
            if let Some(l) = &opts.log {
                if !l.devices.is_empty() {
                    return Err(EngineError::Refused(
                        "hpda keeps its write log on HDD-1 (past the parity) and HDD-2 (the mirror); give no log devices".into(),
                    ));
                }
                if l.mode != crate::format::LogMode::WriteBack {
                    return Err(EngineError::Refused(
                        "hpda's log is write-back (random writes are acknowledged from it); a journal mode does not apply".into(),
                    ));
                }
            }
        }
        let kinds = if opts.kinds.is_empty() {
            vec![MemberKind::Hdd; n]
        } else {
            opts.kinds.clone()
        };
        let is_hpda = kind == hetraid_core::layout::LayoutKind::Hpda;
        let layout = build(&LayoutSpec {
            kind,
            chunk_bytes: chunk,
            sizes,
            kinds,
        })
        .map_err(|e| {
            EngineError::Layout(match is_hpda {
                // Its sizes are data areas: say what that means for a device.
                true => format!(
                    "{e} (a member's data area is its size less {} MiB of metadata)",
                    DATA_OFFSET >> 20
                ),
                false => e.to_string(),
            })
        })?;
        if opts.read_policy.is_some() {
            hetraid_core::readbalance::applies(layout.as_ref())
                .map_err(|e| EngineError::Refused(format!("--read-policy {e}")))?;
        }
        Ok(())
    }

    /// A log for `n` members of chunk `chunk`: one or two devices, none of
    /// them a member, each large enough for the largest stripe update; or a
    /// region of the members as large.
    fn check_log(
        l: &LogSpec,
        members: &[Arc<dyn Member>],
        chunk: u64,
        layout: &dyn Layout,
    ) -> Result<()> {
        let n = members.len();
        let need = Self::log_bytes_min(layout, chunk, l.mode);
        let why = match l.mode {
            crate::format::LogMode::Journal => "a record must hold the largest stripe update",
            crate::format::LogMode::WriteBack => "beside the largest write it must keep room for the stripe updates that write everything it holds to the members, or it could fill and stop",
        };
        if let Some(bytes) = l.region {
            if !l.devices.is_empty() {
                return Err(EngineError::Refused(
                    "give log devices or a log region on the members, not both".into(),
                ));
            }
            if bytes < need {
                return Err(EngineError::Refused(format!(
                    "a log region of {bytes} bytes is too small: with {n} members of {chunk}-byte chunks it needs at least {need} ({why})"
                )));
            }
            return Ok(());
        }
        if !(1..=2).contains(&l.devices.len()) {
            return Err(EngineError::Refused(format!(
                "give one log device or two (mirrored), not {}",
                l.devices.len()
            )));
        }
        if !l.kinds.is_empty() && l.kinds.len() != l.devices.len() {
            return Err(EngineError::Refused(format!(
                "{} log kinds for {} log devices; give one per device",
                l.kinds.len(),
                l.devices.len()
            )));
        }
        for d in &l.devices {
            if members.iter().any(|m| m.name() == d.name()) {
                return Err(EngineError::Refused(format!(
                    "{} is given both as a member and as a log device",
                    d.name()
                )));
            }
        }
        if l.devices.len() == 2 && l.devices[0].name() == l.devices[1].name() {
            return Err(EngineError::Refused(format!(
                "log device {} is listed twice",
                l.devices[0].name()
            )));
        }
        if let Some(small) = l.devices.iter().find(|d| d.len() < need) {
            return Err(EngineError::Refused(format!(
                "log device {} is {} bytes; with {n} members of {chunk}-byte chunks it needs at least {need} ({why})",
                small.name(),
                small.len()
            )));
        }
        Ok(())
    }

    /// The smallest log device for `layout` of chunk `chunk` in `mode`
    /// (core `journal::log_bytes_min`).
    pub fn log_bytes_min(layout: &dyn Layout, chunk: u64, mode: crate::format::LogMode) -> u64 {
        let n = layout.members();
        let reserve = match mode {
            crate::format::LogMode::Journal => hetraid_core::journal::Reserve::none(n),
            crate::format::LogMode::WriteBack => {
                hetraid_core::journal::Reserve::new(n, layout.redundancy())
            }
        };
        hetraid_core::journal::log_bytes_min(n, chunk, &reserve)
    }

    /// The smallest journal-mode log for `n` members (what any log needs;
    /// `create` checks the mode's own minimum once the layout is built).
    pub fn log_bytes_min_any(n: usize, chunk: u64) -> u64 {
        hetraid_core::journal::log_bytes_min(n, chunk, &hetraid_core::journal::Reserve::none(n))
    }

    /// Write superblocks and an empty bitmap to `members` and assemble them.
    pub fn create(members: Vec<Arc<dyn Member>>, opts: &CreateOptions) -> Result<Self> {
        let n = members.len();
        // Checksums sit between the bitmap and the data: members are wrapped,
        // and everything below sees the space that is left for data.
        let physical: Vec<u64> = members.iter().map(|m| m.len()).collect();
        Self::check_create(&physical, opts)?;
        let area = checksum_area(&physical, opts);
        let raw = members.clone();
        let members: Vec<Arc<dyn Member>> = match area {
            Some(c) => members
                .into_iter()
                .map(|m| Arc::new(ChecksumMember::new(m, c)) as Arc<dyn Member>)
                .collect(),
            None => members,
        };
        let mut names = std::collections::HashSet::new();
        for m in &members {
            if !names.insert(m.name()) {
                return Err(EngineError::Refused(format!(
                    "member {} is listed twice",
                    m.name()
                )));
            }
            let need = DATA_OFFSET + opts.chunk_bytes;
            if m.len() < need {
                return Err(EngineError::Refused(format!(
                    "member {} is {} bytes; it needs at least {need} (1 MiB of metadata plus one chunk)",
                    m.name(),
                    m.len()
                )));
            }
            if !opts.force {
                if let Ok(sb) = read_sb(m.as_ref())? {
                    return Err(EngineError::Refused(format!(
                        "member {} already belongs to array {} (slot {}); use --force to overwrite it",
                        m.name(),
                        sb.uuid_string(),
                        sb.member
                    )));
                }
            }
        }
        let hpda = opts.layout.kind().ok() == Some(hetraid_core::layout::LayoutKind::Hpda);
        // HPDA keeps its write-back log on HDD-1 and HDD-2 (checked in
        // check_create); --log-size may make it smaller than the room there.
        let hpda_log = hpda.then(|| LogSpec {
            devices: vec![],
            kinds: vec![],
            mode: crate::format::LogMode::WriteBack,
            region: opts.log.as_ref().and_then(|l| l.region),
        });
        let log_spec = if hpda {
            hpda_log.as_ref()
        } else {
            opts.log.as_ref()
        };
        let kinds = if opts.kinds.is_empty() {
            vec![MemberKind::Hdd; n]
        } else {
            opts.kinds.clone()
        };
        // A log region is carved from the end of the fastest members.
        let mut region = log_spec.filter(|_| !hpda).and_then(|l| l.region).map(|b| {
            let bytes = b.div_ceil(PAGE) * PAGE;
            (bytes, super::region_slots(&kinds, n))
        });
        let region_of = |i: usize| {
            region
                .as_ref()
                .filter(|(_, s)| s.contains(&i))
                .map_or(0, |(b, _)| *b)
        };
        for (i, m) in members.iter().enumerate() {
            let need = DATA_OFFSET + opts.chunk_bytes + region_of(i);
            if m.len() < need {
                return Err(EngineError::Refused(format!(
                    "member {} is {} bytes; holding the log region it needs at least {need}",
                    m.name(),
                    m.len()
                )));
            }
        }
        let raidx = is_raidx(&opts.layout);
        let sizes: Vec<u64> = members
            .iter()
            .enumerate()
            .map(|(i, m)| data_area(m.len(), opts.chunk_bytes, region_of(i), raidx))
            .collect();
        let record = created_record(&opts.layout, &kinds, members.len())?;
        let kind = record.kind().map_err(EngineError::Layout)?;
        let spec = LayoutSpec {
            kind,
            chunk_bytes: opts.chunk_bytes,
            sizes: sizes.clone(),
            kinds: kinds.clone(),
        };
        let layout = build(&spec).map_err(|e| EngineError::Layout(e.to_string()))?;
        if let Some(l) = log_spec.filter(|_| !hpda) {
            Self::check_log(l, &members, opts.chunk_bytes, layout.as_ref())?;
        }
        if hpda {
            region = Some(super::hpda::log_region(
                layout.as_ref(),
                log_spec.and_then(|l| l.region),
            )?);
        }
        let stripe_bytes = opts.chunk_bytes * layout.data_per_stripe() as u64;
        let spb = Bitmap::stripes_per_bit(layout.stripe_count(), stripe_bytes);
        let sb = Superblock {
            generation: 0,
            generation_cleared: 0,
            generation_started: false,
            uuid: *uuid::Uuid::new_v4().as_bytes(),
            events: 1,
            member: 0,
            clean: true,
            policy: opts.policy,
            read_policy: opts.read_policy.unwrap_or_default(),
            bundle_table: raidx,
            data_offset: DATA_OFFSET + area.unwrap_or(0),
            checksums: area.is_some(),
            chunk_bytes: opts.chunk_bytes,
            bitmap_stripes: spb as u32,
            layout: record,
            roles: (0..n)
                .map(|i| MemberRole {
                    state: RoleState::Active,
                    kind: kinds[i],
                    data_size: sizes[i],
                    rebuild_checkpoint: 0,
                    device: new_device_id(),
                    resync: false,
                })
                .collect(),
            relocations: vec![],
            last_scrub: None,
            reshape: None,
            spares: vec![],
            raidx_history: raidx.then(|| {
                hetraid_core::layout::raidx_history::History::new(
                    sizes.iter().map(|s| s / opts.chunk_bytes).collect(),
                )
            }),
            log: log_spec.map(|l| {
                let copies = match &region {
                    Some((_, s)) => s.len(),
                    None => l.devices.len(),
                };
                crate::format::LogRecord {
                    mode: l.mode,
                    id: (new_device_id() as u32).max(1),
                    copies: copies as u16,
                    active: (1u8 << copies) - 1,
                    epoch: 0,
                    // A new log's first checkpoint (`Log::format`).
                    checkpoint_seq: 1,
                    region: region.as_ref().map(|(bytes, s)| crate::format::LogRegion {
                        bytes: *bytes,
                        slots: [s[0] as u8, s.get(1).copied().unwrap_or(0) as u8],
                    }),
                }
            }),
        };
        // The log first: a member superblock that records a log must never
        // exist without it.
        let log = match (log_spec, sb.log) {
            (Some(l), Some(rec)) => {
                let (devices, kinds) = match &region {
                    Some((bytes, slots)) => (
                        slots
                            .iter()
                            .map(|&i| {
                                Arc::new(crate::member::RegionMember::new(
                                    raw[i].clone(),
                                    sb.data_offset + region_start(layout.as_ref(), i, sizes[i]),
                                    *bytes,
                                )) as Arc<dyn Member>
                            })
                            .collect(),
                        slots.iter().map(|&i| kinds[i]).collect(),
                    ),
                    None => (l.devices.clone(), l.kinds.clone()),
                };
                Some(crate::log::Log::format(
                    devices,
                    &kinds,
                    sb.uuid,
                    rec,
                    hetraid_core::journal::Reserve::new(layout.members(), layout.redundancy()),
                )?)
            }
            _ => None,
        };
        // RAIDX: every member's bundle table, before any superblock says
        // there is one.
        if raidx {
            let places = super::living::table_now(&sb)?.0.places;
            for (i, m) in raw.iter().enumerate() {
                let slots = sizes[i] / opts.chunk_bytes;
                let entries = crate::bundles::entries_of(&places, i, slots);
                crate::bundles::write_table(
                    m.as_ref(),
                    sb.data_offset + sizes[i],
                    sb.uuid,
                    i as u32,
                    &entries,
                )
                .map_err(|e| io_err(m.as_ref(), e))?;
            }
        }
        let zero = AlignedBuf::zeroed((DATA_OFFSET - BITMAP_OFFSET) as usize);
        for (i, m) in members.iter().enumerate() {
            m.write_at(&zero, BITMAP_OFFSET)
                .map_err(|e| io_err(m.as_ref(), e))?;
            let mut s = sb.clone();
            s.member = i as u32;
            let mut b = AlignedBuf::zeroed(SB_SIZE);
            b.copy_from_slice(&s.encode());
            m.write_at(&b, 0).map_err(|e| io_err(m.as_ref(), e))?;
            m.flush().map_err(|e| io_err(m.as_ref(), e))?;
        }
        let mut array =
            Self::from_parts(sb, spec, layout, members.into_iter().map(Some).collect())?;
        array.set_log(log);
        array.load_annex(&[]);
        array.record(
            crate::annex::EventKind::Created,
            None,
            [n as u64, 0, 0],
            &format!("{}, {n} members", array.layout.name()),
        );
        if !opts.assume_clean {
            array.resync_all()?;
        }
        Ok(array)
    }

    pub(crate) fn from_parts(
        sb: Superblock,
        spec: LayoutSpec,
        layout: Box<dyn Layout>,
        members: Vec<Option<Arc<dyn Member>>>,
    ) -> Result<Self> {
        let n = members.len();
        let mut state = ArrayState::healthy(n);
        for (i, r) in sb.roles.iter().enumerate() {
            state.members[i] = match (r.state, members[i].is_some()) {
                (RoleState::Active, true) => MemberState::InSync,
                (RoleState::Rebuilding, true) => MemberState::rebuilding(r.rebuild_checkpoint),
                _ => MemberState::Failed,
            };
        }
        let slots: Vec<Arc<crate::member::Slot>> = members
            .into_iter()
            .enumerate()
            .map(|(i, m)| Arc::new(crate::member::Slot::new(i, m)))
            .collect();
        let queues = slots
            .iter()
            .enumerate()
            .map(|(i, s)| Some(MemberQueue::new(s.clone() as Arc<dyn Member>, i)))
            .collect();
        let nbits = layout.stripe_count().div_ceil(sb.bitmap_stripes as u64);
        let bitmap = Bitmap::new(
            sb.bitmap_stripes as u64,
            vec![0; nbits.div_ceil(8) as usize],
        );
        let in_sync = state.members.iter().all(|m| *m == MemberState::InSync);
        let mut holds = vec![sb.relocations.is_empty(); n];
        // HPDA's HDD-2 holds no chunk, only a log copy.
        // RAIDX: a slot emptied by a remove holds nothing.
        let raidx = layout.bundles().is_some();
        if !sb.relocations.is_empty() || !layout.log_regions().is_empty() || raidx {
            holds = vec![false; n];
            // Without relocations the pattern repeats every parity cycle.
            let scan = if sb.relocations.is_empty() && !raidx {
                layout.parity_cycle().min(layout.stripe_count())
            } else {
                layout.stripe_count()
            };
            for st in (0..scan).map(|s| layout.stripe(s)) {
                st.all().for_each(|c| holds[c.member] = true);
            }
        }
        let service = spec
            .kinds_or_default()
            .iter()
            .map(|k| k.default_service())
            .collect();
        let checksums = sb.checksums;
        let direct_map = layout.direct_map();
        let array = Self {
            hot: ReadHot {
                slots: slots.into(),
                direct_map,
                wbuf: std::sync::OnceLock::new(),
                all_in_sync: AtomicBool::new(in_sync),
                user_io: AtomicBool::new(false),
                io_seen: AtomicBool::new(false),
                write_back_log: false,
            },
            activity: super::UserActivity::new(),
            read_only: false,
            stripe_pool: Mutex::new(Vec::new()),
            read_errors: (0..n).map(|_| Default::default()).collect(),
            policy: sb.policy,
            service,
            holds,
            sb: Mutex::new(sb),
            layout,
            queues,
            state: RwLock::new(state),
            locks: (0..LOCK_SHARDS).map(|_| Mutex::new(())).collect(),
            bitmap: Mutex::new(bitmap),
            rebuild_running: AtomicBool::new(false),
            checksums,
            log: None,
            reclaiming: Mutex::new(()),
            log_admission: Default::default(),
            log_seq_noted: std::sync::atomic::AtomicU64::new(0),
            hpda: (spec.kind == hetraid_core::layout::LayoutKind::Hpda)
                .then(super::hpda::HpdaRuntime::new),
            read_policy: std::sync::atomic::AtomicU8::new(0),
            kinds: spec.kinds_or_default(),
            balance_reads: AtomicBool::new(false),
            marked_dirty: AtomicBool::new(false),
            uncommitted: AtomicBool::new(false),
            assembled_sb: Mutex::new(None),
            not_given: Vec::new(),
            annex_due: AtomicBool::new(false),
            checksum_errors: (0..n).map(|_| Default::default()).collect(),
            healthy_state: ArrayState::healthy(n),
            warnings: Mutex::new(Vec::new()),
            annex: Mutex::new(None),
            progress: Mutex::new(None),
            spares: Mutex::new(Vec::new()),
            cancel: AtomicBool::new(false),
            usage: std::sync::OnceLock::new(),
        };
        // The superblock's read policy (layouts with copies).
        let policy = array.superblock().read_policy;
        array.apply_read_policy(policy);
        Ok(array)
    }

    /// Assemble from members alone, in any order, for reading and writing;
    /// resync regions left dirty by a crash.
    /// Members not given are recorded missing (`degraded`): for library use
    /// and for re-assembling a set a command has checked already.
    pub fn assemble(given: Vec<Arc<dyn Member>>) -> Result<Self> {
        Self::assemble_with(
            given,
            AssembleOptions {
                degraded: true,
                ..AssembleOptions::default()
            },
        )
    }

    /// Refuse, naming them, when members the array holds were not given and
    /// `degraded` is not said; writes nothing (for commands that hand the
    /// members to a procedure that assembles them itself).
    pub fn check_given(given: &[Arc<dyn Member>], degraded: bool) -> Result<()> {
        if degraded {
            return Ok(());
        }
        Self::assemble_with(
            given.to_vec(),
            AssembleOptions {
                access: Access::Inspect,
                ..AssembleOptions::default()
            },
        )
        .map(|_| ())
    }

    /// Slots of the array that no given member claimed (assembled with
    /// `degraded`).
    pub fn not_given(&self) -> &[usize] {
        &self.not_given
    }

    /// Leave what assembly decided unwritten if nothing was written yet
    /// (`read`: a read records no member missing and moves no table; a heal
    /// it made has committed already).
    pub fn keep_uncommitted(&self) {
        if self.uncommitted.swap(false, Ordering::AcqRel) {
            self.annex_due.store(false, Ordering::Release);
            self.assembled_sb.lock().unwrap().take();
        }
    }

    /// Write what assembly decided (see `uncommitted`) and the annex if it is
    /// due. Every write path calls it first; `assemble` and `serve` call it to
    /// start the array as decided.
    pub fn commit(&self) -> Result<()> {
        if self.read_only {
            return Ok(());
        }
        if self.uncommitted.load(Ordering::Acquire) {
            let mut sb = self.sb.lock().unwrap();
            self.persist(&mut sb)?;
        }
        if self.annex_due.load(Ordering::Acquire) && self.annex_due.swap(false, Ordering::AcqRel) {
            self.write_annex();
        }
        Ok(())
    }

    /// Assemble as `opts` says. Which members are used is the core's decision
    /// (`membership::assemble`): stale, replaced or truncated members are left
    /// out with a warning naming them; members run apart are refused.
    pub fn assemble_with(given: Vec<Arc<dyn Member>>, opts: AssembleOptions) -> Result<Self> {
        if given.is_empty() {
            return Err(EngineError::Refused("give the array's members".into()));
        }
        // Log devices are listed with the members; their header tells them
        // apart. A device that cannot be read, or a log device whose header
        // is damaged, is left out with a warning (md kicks a member it
        // cannot read at assembly): one bad device never stops the array.
        let mut logs = Vec::new();
        let mut members = Vec::new();
        let mut early: Vec<String> = Vec::new();
        let mut unreadable = 0usize;
        for m in given {
            match crate::log::is_log_device(m.as_ref()) {
                Err(e) => {
                    early.push(format!(
                        "{} is left out: it cannot be read ({e}); the array runs without it",
                        m.name()
                    ));
                    unreadable += 1;
                }
                Ok(true) => match crate::log::read_header(m.as_ref()) {
                    Ok(Some(h)) => logs.push((m, h)),
                    Ok(None) => early.push(format!(
                        "log device {} is left out: neither header slot is valid (damaged or overwritten)",
                        m.name()
                    )),
                    Err(e) => early.push(format!(
                        "log device {} is left out: its header cannot be read ({e})",
                        m.name()
                    )),
                },
                Ok(false) => members.push(m),
            }
        }
        let given = members;
        if given.is_empty() {
            return Err(EngineError::Refused(
                "only log devices were given; give the array's members too".into(),
            ));
        }
        let mut sbs = Vec::new();
        let mut kept = Vec::new();
        let mut unknown: Vec<(Arc<dyn Member>, String)> = Vec::new();
        for m in given {
            match read_sb(m.as_ref()) {
                Ok(Ok(sb)) => {
                    sbs.push(sb);
                    kept.push(m);
                }
                Ok(Err(e)) => unknown.push((m, e.to_string())),
                Err(e) => {
                    early.push(format!("{e}; it is left out and the array runs without it"));
                    unreadable += 1;
                }
            }
        }
        let given = kept;
        if let Some(first) = sbs.first() {
            // A device with neither a superblock nor a log header, given
            // to an array one of whose log copies was not found, is taken
            // for that copy with its header slots lost: left out.
            let log_missing = first
                .log
                .map_or(0, |l| l.copies as usize)
                .saturating_sub(logs.len());
            if unknown.len() <= log_missing {
                for (m, e) in unknown.drain(..) {
                    early.push(format!(
                        "{} is left out: it has {e} and no log header either; taken for the write log's missing copy with its header lost, the log runs on its other copy (replace it: hetraid replace ... --log-copy I --with DEV)",
                        m.name()
                    ));
                }
            }
        }
        if let Some((m, e)) = unknown.first() {
            return Err(EngineError::Refused(format!(
                "member {} is refused: {e}",
                m.name()
            )));
        }
        if given.is_empty() {
            return Err(EngineError::Refused(format!(
                "no member could be read: {}",
                early.join("; ")
            )));
        }
        let first = &sbs[0];
        for (m, sb) in given.iter().zip(&sbs) {
            if sb.uuid != first.uuid {
                return Err(EngineError::Refused(format!(
                    "member {} belongs to array {}, not to array {} of member {}; assemble members of one array",
                    m.name(),
                    sb.uuid_string(),
                    first.uuid_string(),
                    given[0].name()
                )));
            }
        }
        // Members of one array agree on what never changes while it lives:
        // the layout's kind and parameters, the chunk, where data starts,
        // checksums. One that disagrees was altered or comes from elsewhere,
        // whatever its event counter claims (md's compare_super): refused by
        // name, or left out with --force.
        let geometry = |sb: &Superblock| {
            let l = &sb.layout;
            (
                l.name.to_ascii_lowercase(),
                l.parity_order,
                l.copies,
                l.group,
                l.partitions,
                l.spare_partitions,
                l.raidx_level.clone(),
                sb.chunk_bytes,
                sb.data_offset,
                sb.checksums,
            )
        };
        let describe = |sb: &Superblock| {
            format!(
                "{}, chunk {}, data at {}{}",
                sb.layout.name,
                sb.chunk_bytes,
                sb.data_offset,
                if sb.checksums { ", checksums" } else { "" }
            )
        };
        let votes = |g: &_| sbs.iter().filter(|s| geometry(s) == *g).count();
        let fresh_i = (0..sbs.len())
            .max_by_key(|&i| (sbs[i].events, usize::MAX - i))
            .unwrap();
        let majority = (0..sbs.len())
            .max_by_key(|&i| (votes(&geometry(&sbs[i])), i == fresh_i, usize::MAX - i))
            .unwrap();
        let odd: Vec<usize> = (0..sbs.len())
            .filter(|&i| geometry(&sbs[i]) != geometry(&sbs[majority]))
            .collect();
        if let Some(&i) = odd.first() {
            if !opts.force {
                return Err(EngineError::Refused(format!(
                    "member {} describes another geometry ({}, event {}) than member {} ({}, event {}) of the same array: its superblock was altered or comes from elsewhere; leave it out, or say --force to start without it",
                    given[i].name(),
                    describe(&sbs[i]),
                    sbs[i].events,
                    given[majority].name(),
                    describe(&sbs[majority]),
                    sbs[majority].events
                )));
            }
        }
        let odd_warnings: Vec<String> = odd
            .iter()
            .map(|&i| {
                format!(
                    "member {} is left out (--force): it describes another geometry ({}) than the others ({})",
                    given[i].name(),
                    describe(&sbs[i]),
                    describe(&sbs[majority])
                )
            })
            .collect();
        let (given, sbs): (Vec<_>, Vec<_>) = given
            .into_iter()
            .zip(sbs)
            .enumerate()
            .filter(|(i, _)| !odd.contains(i))
            .map(|(_, x)| x)
            .unzip();
        // Hot spares (a slot past the member table) are set aside: they
        // hold no slot (`spares.rs`).
        let mut spare_given = Vec::new();
        let (given, mut sbs) = {
            let (mut g, mut s) = (Vec::new(), Vec::new());
            for (m, sb) in given.into_iter().zip(sbs) {
                if sb.member as usize >= sb.roles.len() {
                    spare_given.push((m, sb));
                } else {
                    g.push(m);
                    s.push(sb);
                }
            }
            (g, s)
        };
        if given.is_empty() {
            return Err(EngineError::Refused(
                "only spares were given; give the array's members too".into(),
            ));
        }
        let fresh = sbs.iter().max_by_key(|s| s.events).unwrap().clone();
        super::living::upgrade_for_grow(&mut sbs, &fresh);
        // The members as given (a log region is read past the checksum layer).
        let raw = given.clone();
        let given: Vec<Arc<dyn Member>> = given
            .into_iter()
            .map(|m| with_checksums(m, &fresh))
            .collect();
        let n = fresh.roles.len();
        let sizes: Vec<u64> = fresh.roles.iter().map(|r| r.data_size).collect();
        let kinds: Vec<MemberKind> = fresh.roles.iter().map(|r| r.kind).collect();
        let kind = fresh.layout.kind().map_err(EngineError::Layout)?;
        let spec = LayoutSpec {
            kind,
            chunk_bytes: fresh.chunk_bytes,
            sizes,
            kinds,
        };
        let layout = if fresh.raidx_history.is_some() {
            super::living::raidx_layout(&fresh)?
        } else if fresh.reshape.is_some() {
            super::restripe::reshaping_layout(&fresh)?
        } else {
            build(&spec).map_err(|e| EngineError::Layout(e.to_string()))?
        };
        let layout = relocated(layout, &fresh);
        let nbits = layout.stripe_count().div_ceil(fresh.bitmap_stripes as u64);
        if nbits.div_ceil(8) > DATA_OFFSET - BITMAP_OFFSET {
            let freshest = sbs
                .iter()
                .position(|s| s.events == fresh.events)
                .unwrap_or(0);
            return Err(EngineError::Refused(format!(
                "member {} has a damaged superblock: its bitmap would need {} bytes",
                given[freshest].name(),
                nbits.div_ceil(8)
            )));
        }
        let cands: Vec<Candidate> = sbs
            .iter()
            .zip(&given)
            .map(|(sb, m)| Candidate {
                table: sb.table(),
                slot: sb.member as usize,
                clean: sb.clean,
                generation: sb.generation,
                generation_started: sb.generation_started,
                size_ok: (sb.member as usize) < n
                    && m.len() >= DATA_OFFSET + fresh.roles[sb.member as usize].data_size,
            })
            .collect();
        let name = |i: usize| given[i].name();
        // `status` shows any array, even one that cannot start.
        let inspect = opts.access == Access::Inspect;
        let survives =
            |out: &[usize]| inspect || hetraid_core::layout::survives(layout.as_ref(), out);
        let mode = AssembleMode {
            force: opts.force,
            writable: opts.access == Access::ReadWrite,
            // A member left out by --force for its geometry was given:
            // its slot runs degraded as the operator asked.
            degraded: opts.degraded
                || opts.force && !odd_warnings.is_empty()
                // A member given but unreadable runs degraded, as md kicks it.
                || unreadable > 0,
        };
        let a = membership::assemble(&cands, mode, &survives).map_err(|e| {
            EngineError::Refused(match e {
                AssembleError::NoMembers => "give the array's members".into(),
                AssembleError::NotGiven { slots } => {
                    let annex = super::events::read_annex(&raw, fresh.uuid);
                    let named: Vec<String> = slots
                        .iter()
                        .map(|&s| {
                            match annex
                                .as_ref()
                                .and_then(|a| a.paths.get(s))
                                .filter(|p| !p.is_empty())
                            {
                                Some(p) => format!("member {s} (last seen {p})"),
                                None => format!("member {s}"),
                            }
                        })
                        .collect();
                    let (was, it) = if slots.len() == 1 {
                        ("was", "it")
                    } else {
                        ("were", "them")
                    };
                    format!(
                        "{} {was} not given: give {it}, or say --degraded to run without {it}",
                        named.join(", ")
                    )
                }
                AssembleError::Incarnation { candidate } => format!(
                    "member {} has a member table of another size than the freshest member's; it belongs to another incarnation of the array: leave it out",
                    name(candidate)
                ),
                AssembleError::Split { a, b, detail } => format!(
                    "members {} and {} were run apart ({detail}): each may hold writes the other lacks, so they are not merged; keep one side by assembling it alone, then hetraid replace the other side's slots (their data is rebuilt from the side kept)",
                    name(a),
                    name(b)
                ),
                AssembleError::Copies { a, b, slot } => format!(
                    "members {} and {} are the same member of slot {slot} (one is a copy of the other); give only one",
                    name(a),
                    name(b)
                ),
                AssembleError::Unreadable { slots } => {
                    let left: Vec<String> = (0..given.len())
                        .filter(|&i| !cands[i].size_ok || sbs[i].events + 1 < fresh.events || !fresh.roles[sbs[i].member as usize].state.is_in())
                        .map(|i| format!("{} (event {})", name(i), sbs[i].events))
                        .collect();
                    format!(
                        "the array cannot start: the members of slots {slots:?} are missing, faulty or being rebuilt, more than it can do without{}; give all members, or, if the members left out are intact, hetraid assemble --force brings back the freshest of them (writes made after they left are lost on them)",
                        if left.is_empty() {
                            String::new()
                        } else {
                            format!(" (left out: {})", left.join(", "))
                        }
                    )
                }
            })
        })?;
        let mut warnings = early;
        warnings.extend(odd_warnings);
        for l in &a.left_out {
            let slot = cands[l.candidate].slot;
            // A slot a shrink emptied takes no device back: the device
            // joins again as a new member.
            let emptied = fresh.raidx_history.as_ref().is_some_and(|h| {
                h.changes.iter().any(|c| matches!(c, hetraid_core::layout::raidx_history::Change::Remove { slot: s, .. } if *s == slot))
            });
            warnings.push(if emptied {
                format!(
                    "member {} is left out: slot {slot} was removed by a shrink (its chunks live on the other members); to use the device again: hetraid grow MEMBERS... --add {}",
                    name(l.candidate),
                    name(l.candidate)
                )
            } else {
                format!(
                    "member {} is left out: {}; to use it again: hetraid add MEMBERS... --with {} (back in slot {slot}; if it left intact, only the regions written since are resynced)",
                    name(l.candidate),
                    l.reason,
                    name(l.candidate),
                )
            });
        }
        for f in &a.forced {
            warnings.push(format!(
                "member {} was brought back by --force: {}; the whole array's redundancy is resynced from its data",
                name(f.candidate),
                f.reason
            ));
        }
        for &s in &a.recorded_missing {
            warnings.push(format!(
                "member {s} is missing: the others' superblocks record it with the array's first write, and it then cannot rejoin without a rebuild"
            ));
        }
        let mut sb = fresh.clone();
        sb.set_table(&a.table);
        sb.clean = a.clean;
        let slots: Vec<Option<Arc<dyn Member>>> =
            a.used.iter().map(|u| u.map(|i| given[i].clone())).collect();
        let raw_slots: Vec<Option<Arc<dyn Member>>> =
            a.used.iter().map(|u| u.map(|i| raw[i].clone())).collect();
        let damaged_tables = if sb.bundle_table {
            check_bundle_tables(&sb, &raw_slots)?
        } else {
            Vec::new()
        };
        let mut array = Self::from_parts(sb, spec, layout, slots)?;
        array.not_given = a.not_given.clone();
        array.read_only = opts.access != Access::ReadWrite;
        array.warnings.lock().unwrap().extend(warnings);
        // The bitmap: a region is dirty when any member used says so (a crash
        // may have stopped between members).
        let len = array.bitmap.lock().unwrap().bits.len();
        let mut bits = vec![0u8; len];
        let mut page = AlignedBuf::zeroed(len.div_ceil(PAGE as usize) * PAGE as usize);
        for m in array.hot.slots.iter().filter_map(|s| s.get()) {
            if page.is_empty() {
                break;
            }
            m.read_at(&mut page, BITMAP_OFFSET)
                .map_err(|e| io_err(m.as_ref(), e))?;
            bits.iter_mut().zip(page.iter()).for_each(|(b, p)| *b |= p);
        }
        if !a.forced.is_empty() {
            bits.iter_mut().for_each(|b| *b = 0xff);
        }
        array.bitmap = Mutex::new(Bitmap::new(array.bitmap_stripes(), bits));
        // Bits of a clean array are regions written while a member was out
        // (kept for its re-add), not writes cut by a crash.
        let dirty = if a.clean {
            0
        } else {
            array.bitmap.lock().unwrap().dirty().len()
        };
        let degraded = array.out_members(true) > 0;
        if dirty > 0 && degraded && a.forced.is_empty() {
            let what = format!(
                "the array is degraded and was not shut down cleanly: {dirty} regions were being written at the crash, and where a write did not reach every member, data reconstructed for the absent members is wrong (the write hole)"
            );
            match opts.access {
                Access::Inspect => array.warnings.lock().unwrap().push(what),
                _ if opts.force => array.warnings.lock().unwrap().push(format!(
                    "{what}; started anyway (--force): check your data, then replace and rebuild"
                )),
                _ => {
                    return Err(EngineError::Refused(format!(
                        "{what}. It is not started: give all members if you can (the regions are then resynced), or start it anyway with hetraid assemble --force and the same members, then check the data in those regions"
                    )))
                }
            }
        }
        // Nothing is written yet: the first write commits what was decided
        // (`commit`), so a command that refuses after this changes nothing.
        if !array.read_only {
            array.uncommitted.store(true, Ordering::Release);
            if a.changed {
                *array.assembled_sb.lock().unwrap() = Some(array.superblock());
            }
        }
        // A damaged bundle table is a copy gone wrong: rewritten from the
        // array's table when the array is written, named until then.
        if !damaged_tables.is_empty() {
            let what: Vec<String> = damaged_tables.iter().map(|(_, w)| w.clone()).collect();
            if array.read_only {
                array.warnings.lock().unwrap().push(format!(
                    "{}: the array's own table (in every superblock) is used; assembling for writing rewrites the damaged copy",
                    what.join("; ")
                ));
            } else {
                array.commit()?;
                let fix: Vec<usize> = damaged_tables.iter().map(|(i, _)| *i).collect();
                repair_bundle_tables(&array.superblock(), &raw_slots, &fix)?;
                array.warnings.lock().unwrap().push(format!(
                    "{}: rewritten from the array's table",
                    what.join("; ")
                ));
            }
        }
        // A restripe step cut by a crash: its backed-up chunks go back first.
        if array
            .superblock()
            .reshape
            .as_ref()
            .is_some_and(|r| r.backup_row.is_some())
        {
            match opts.access {
                Access::ReadWrite => array.restore_reshape_backup()?,
                Access::Inspect => array.warnings.lock().unwrap().push(
                    "a restripe step was cut by a crash: assembling for writing puts its backed-up chunks back".into(),
                ),
                Access::ReadOnly => {
                    return Err(EngineError::Refused(
                        "a restripe step was cut by a crash and its chunks wait in the members' backup areas; reading now could return wrong data: assemble for writing once (hetraid assemble) to put them back".into(),
                    ))
                }
            }
        }
        array.take_spares(spare_given);
        array.load_annex(&raw);
        if !array.read_only {
            for &s in &a.recorded_missing {
                array.record_member(crate::annex::EventKind::Missing, s, [0; 3]);
            }
            for f in &a.forced {
                let c = &cands[f.candidate];
                array.record_member(
                    crate::annex::EventKind::Forced,
                    c.slot,
                    [c.table.events, a.table.events, 0],
                );
            }
        }
        let raw_by_slot: Vec<Option<Arc<dyn Member>>> =
            a.used.iter().map(|u| u.map(|i| raw[i].clone())).collect();
        array.open_log(logs, raw_by_slot, opts.access, opts.force)?;
        if !array.read_only && (!a.clean || !a.forced.is_empty()) {
            array.recover_dirty()?;
        }
        Ok(array)
    }

    /// Open the write log from the log devices given and replay what it
    /// holds (read-write assembly): every stripe update logged since the last
    /// checkpoint is written again, so none is left half done.
    fn open_log(
        &mut self,
        mut logs: Vec<(Arc<dyn Member>, crate::log::LogHeader)>,
        raw_by_slot: Vec<Option<Arc<dyn Member>>>,
        access: Access,
        force: bool,
    ) -> Result<()> {
        let sb = self.superblock();
        if let Some(region) = sb.log.and_then(|l| l.region) {
            if let Some((d, _)) = logs.first() {
                return Err(EngineError::Refused(format!(
                    "{} is a log device, but this array keeps its log on its members; leave it out",
                    d.name()
                )));
            }
            // The copies are regions of the members in their slots.
            let st = self.state();
            let copies = sb.log.map_or(0, |l| l.copies as usize);
            for &slot in &region.slots[..copies] {
                let slot = slot as usize;
                let Some(m) = raw_by_slot.get(slot).cloned().flatten() else {
                    continue;
                };
                if st.members[slot] == MemberState::Failed {
                    continue;
                }
                let dev: Arc<dyn Member> = Arc::new(crate::member::RegionMember::new(
                    m,
                    sb.data_offset
                        + region_start(self.layout.as_ref(), slot, sb.roles[slot].data_size),
                    region.bytes,
                ));
                if let Some(h) =
                    crate::log::read_header(dev.as_ref()).map_err(|e| io_err(dev.as_ref(), e))?
                {
                    logs.push((dev, h));
                }
            }
        }
        let Some(rec) = sb.log else {
            if let Some((d, _)) = logs.first() {
                return Err(EngineError::Refused(format!(
                    "{} is a write log device, but array {} has no log; leave it out",
                    d.name(),
                    sb.uuid_string()
                )));
            }
            return Ok(());
        };
        if logs.is_empty() && access == Access::Inspect {
            self.warnings.lock().unwrap().push(
                "the array has a write log, but no log device was given: what it holds is not shown".into(),
            );
            return Ok(());
        }
        let usable = logs.iter().any(|(d, h)| {
            h.uuid == sb.uuid
                && h.id == rec.id
                && crate::log::left_out(d.as_ref(), h, sb.uuid, &rec).is_none()
        });
        if !usable && force && access == Access::ReadWrite {
            // --force: the user accepts losing what the log held. The array
            // goes on without a log (the bitmap), after a full resync.
            let lost = match (sb.clean, rec.mode) {
                (true, _) => "the array was closed cleanly, so the log held nothing: no write is lost",
                (false, crate::format::LogMode::WriteBack) => "every write acknowledged since the log was last reclaimed is lost (how many is not known without the log)",
                (false, crate::format::LogMode::Journal) => "no acknowledged write is lost, but stripes being written at a crash may be inconsistent",
            };
            self.warnings.lock().unwrap().push(format!(
                "no usable copy of the write log ({}) was given; started without it (--force): {lost}; the array now uses the write-intent bitmap, and its redundancy is resynced from the data",
                rec.mode.name()
            ));
            {
                let mut sb = self.sb.lock().unwrap();
                sb.log = None;
                sb.events += 1;
                self.persist(&mut sb)?;
            }
            return self.resync_all();
        }
        let (mut log, records, resync_all) = match crate::log::Log::open(
            logs,
            sb.uuid,
            rec,
            hetraid_core::journal::Reserve::new(self.layout.members(), self.layout.redundancy()),
            force && access == Access::ReadWrite,
        ) {
            Ok(x) => x,
            // `status` shows the array even when its log cannot be used.
            Err(e) if access == Access::Inspect => {
                self.warnings
                    .lock()
                    .unwrap()
                    .push(format!("the write log cannot be used: {e}"));
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        // A region copy that is missing is of its member's kind (a device of
        // its own would say in its header).
        if let Some(region) = rec.region {
            for (copy, &slot) in region.slots[..rec.copies as usize].iter().enumerate() {
                if let Some(r) = sb.roles.get(slot as usize) {
                    log.kind_if_missing(copy, r.kind);
                }
            }
        }
        self.warnings.lock().unwrap().extend(log.take_warnings());
        // Write-back writes go back in the index (reads see them at once,
        // even read-only); only stripe updates need writing to members.
        let mut writes_back = 0u64;
        for r in &records {
            if let Some(d) = r.data {
                log.reindex(r.seq, d, r.copy, r.offset)?;
                writes_back += 1;
            }
        }
        if writes_back > 0 {
            self.warnings.lock().unwrap().push(format!(
                "the write log holds {writes_back} writes not yet on the members ({} bytes); reads see them, and they are written to the members as the log is reclaimed",
                log.unreclaimed_bytes()
            ));
        }
        // HPDA intents: stripes being written in place at the crash.
        let intent_stripes: Vec<u64> = {
            let mut v: Vec<u64> = records
                .iter()
                .flat_map(|r| r.stripes.iter().flat_map(|&(f, c)| f..f + c))
                .filter(|&s| s < self.layout.stripe_count())
                .collect();
            v.sort_unstable();
            v.dedup();
            v
        };
        let records: Vec<crate::log::Replayed> = records
            .into_iter()
            .filter(|r| r.data.is_none() && r.stripes.is_empty())
            .collect();
        if !records.is_empty() {
            match access {
                Access::Inspect => {
                    self.warnings.lock().unwrap().push(format!(
                        "the write log holds {} stripe updates not yet replayed (an unclean shutdown); assembling for writing replays them",
                        records.len()
                    ));
                }
                Access::ReadOnly => {
                    return Err(EngineError::Refused(format!(
                        "the write log holds {} stripe updates not yet on the members (an unclean shutdown); reading now could return old data: assemble for writing once (hetraid assemble) to replay them",
                        records.len()
                    )));
                }
                Access::ReadWrite => {
                    self.commit()?;
                    let st = self.state();
                    let (mut writes, mut bytes) = (0u64, 0u64);
                    for r in &records {
                        for &(slot, off, ring_at, len) in &r.entries {
                            let i = slot as usize;
                            if i >= self.hot.slots.len()
                                || !self.present(i)
                                || st.members[i] == MemberState::Failed
                            {
                                continue;
                            }
                            let buf = log.read_ring(r.copy, ring_at, len)?;
                            if let Err(e) = self.hot.slots[i].write_at(&buf, DATA_OFFSET + off) {
                                if !self.member_error(i, &e) {
                                    return Err(io_err(self.hot.slots[i].as_ref(), e));
                                }
                            }
                            writes += 1;
                            bytes += buf.len() as u64;
                        }
                    }
                    self.warnings.lock().unwrap().push(format!(
                        "replayed {} stripe updates from the write log ({writes} member writes, {bytes} bytes) after an unclean shutdown",
                        records.len()
                    ));
                }
            }
        }
        if !intent_stripes.is_empty() {
            self.recover_intents(&intent_stripes, access, force)?;
        }
        if access == Access::ReadWrite {
            log.clear_leftovers()?;
            log.checkpoint(&|| self.flush_members())?;
        }
        self.set_log(Some(log));
        if access == Access::ReadWrite {
            // Copies missing now are recorded as out: they cannot come back
            // later with records behind the others'.
            self.record_log_copies(true)?;
            // The members say where the log starts now: the records just
            // replayed are never replayed again from a copy put back.
            self.note_log_position()?;
            if resync_all {
                // A damaged record may have been half on the members.
                self.resync_all()?;
            }
        }
        Ok(())
    }

    /// Record in the superblock which log copies are in use, when that
    /// changed (one event, so every member agrees which superblock is newer).
    pub(crate) fn record_log_copies(&self, always_check: bool) -> Result<()> {
        let Some(log) = &self.log else {
            return Ok(());
        };
        if !log.take_changed() && !always_check {
            return Ok(());
        }
        let live = log.live_mask();
        let mut sb = self.sb.lock().unwrap();
        let Some(rec) = sb.log.as_mut() else {
            return Ok(());
        };
        if rec.active == live {
            return Ok(());
        }
        let lost = rec.active & !live;
        rec.active = live;
        sb.events += 1;
        self.persist(&mut sb)?;
        drop(sb);
        let names = log.devices();
        for copy in (0..8).filter(|c| lost >> c & 1 == 1) {
            let name = names.get(copy).map_or_else(String::new, |d| d.0.clone());
            self.record(
                crate::annex::EventKind::LogCopyFailed,
                None,
                [copy as u64, 0, 0],
                &name,
            );
        }
        Ok(())
    }

    /// Put `dev` in as log copy `i` (a copy that failed or is missing): the
    /// log's live records are copied to it and it is recorded in use.
    pub fn replace_log_copy(&self, i: usize, dev: Arc<dyn Member>, force: bool) -> Result<()> {
        let Some(log) = &self.log else {
            return Err(EngineError::Refused("the array has no write log".into()));
        };
        for j in 0..self.slot_count() {
            if self.member(j).is_some_and(|m| m.name() == dev.name()) {
                return Err(EngineError::Refused(format!(
                    "{} is member {j} of this array, not a free device",
                    dev.name()
                )));
            }
        }
        if log
            .devices()
            .iter()
            .any(|(n, _, live)| *live && *n == dev.name())
        {
            return Err(EngineError::Refused(format!(
                "{} is a log copy in use",
                dev.name()
            )));
        }
        if !force {
            if let Ok(Some(h)) = crate::log::read_header(dev.as_ref()) {
                let sb = self.superblock();
                if h.uuid != sb.uuid {
                    return Err(EngineError::Refused(format!(
                        "{} holds the write log of array {}; use --force to overwrite it",
                        dev.name(),
                        h.uuid_string()
                    )));
                }
            } else if let Ok(Ok(theirs)) = read_sb(dev.as_ref()) {
                return Err(EngineError::Refused(format!(
                    "{} belongs to array {} (slot {}); use --force to overwrite it",
                    dev.name(),
                    theirs.uuid_string(),
                    theirs.member
                )));
            }
        }
        let epoch = self.superblock().log.map_or(0, |l| l.epoch) + 1;
        let name = super::events::absolute(&dev.name());
        log.replace_copy(i, dev, epoch)?;
        let _ = log.take_changed();
        let mut sb = self.sb.lock().unwrap();
        if let Some(rec) = sb.log.as_mut() {
            rec.epoch = epoch;
            rec.active = log.live_mask();
        }
        sb.events += 1;
        self.persist(&mut sb)?;
        drop(sb);
        self.record(
            crate::annex::EventKind::LogCopyReplaced,
            None,
            [i as u64, 0, 0],
            &name,
        );
        Ok(())
    }

    fn bitmap_stripes(&self) -> u64 {
        self.sb.lock().unwrap().bitmap_stripes as u64
    }

    /// Write the superblock as it is (no event bump: clean/dirty changes, or a
    /// table the state machine already bumped) to every live member, flushed.
    /// A member that cannot take it is failed when the array survives that (and
    /// the others learn of it); otherwise the error is returned.
    /// `sb` as each live member's superblock, written and flushed.
    fn superblock_writes(&self, sb: &Superblock) -> Vec<(usize, IoOp)> {
        let mut ops = Vec::new();
        for (i, slot) in self.hot.slots.iter().enumerate() {
            if !slot.present() || !sb.roles[i].state.is_in() {
                continue;
            }
            let mut s = sb.clone();
            s.member = i as u32;
            let mut b = AlignedBuf::zeroed(SB_SIZE);
            b.copy_from_slice(&s.encode());
            ops.push((i, IoOp::Write { off: 0, buf: b }));
            ops.push((i, IoOp::Flush));
        }
        ops
    }

    pub(crate) fn persist(&self, sb: &mut Superblock) -> Result<()> {
        if self.read_only {
            return Ok(());
        }
        // Every superblock written carries the log's checkpoint as its
        // copies' headers hold it (never ahead of them).
        if let (Some(rec), Some(log)) = (sb.log.as_mut(), self.log.as_ref()) {
            rec.checkpoint_seq = rec.checkpoint_seq.max(log.checkpoint_seq());
        }
        // The superblock written carries what assembly decided: committed,
        // the annex follows at the next chance.
        if self.uncommitted.swap(false, Ordering::AcqRel) {
            self.annex_due.store(true, Ordering::Release);
            let first = self.assembled_sb.lock().unwrap().take();
            if let Some(first) = first.filter(|f| f.events < sb.events) {
                // Best effort: a member whose write fails fails in the
                // update below, which handles it.
                let _ = run_batch(&self.queues, self.superblock_writes(&first));
            }
        }
        // Bounded: each round removes a member from the live set or returns.
        for _ in 0..=self.hot.slots.len() {
            let ops = self.superblock_writes(sb);
            let idx: Vec<usize> = ops.iter().map(|(i, _)| *i).collect();
            let mut failed: Vec<(usize, std::io::Error)> = Vec::new();
            for (r, i) in run_batch(&self.queues, ops).into_iter().zip(idx) {
                if let Err(e) = r {
                    if !failed.iter().any(|(j, _)| *j == i) {
                        failed.push((i, e));
                    }
                }
            }
            let Some((i, e)) = failed.into_iter().next() else {
                return Ok(());
            };
            let survives = |out: &[usize]| hetraid_core::layout::survives(self.layout(), out);
            let next = sb
                .table()
                .apply(
                    Transition::Fail {
                        slot: i,
                        force: false,
                    },
                    &survives,
                )
                .map_err(|_| io_err(self.hot.slots[i].as_ref(), e))?;
            self.warnings.lock().unwrap().push(format!(
                "member {i} ({}) failed: its superblock could not be written",
                self.hot.slots[i].name()
            ));
            let old = sb.table();
            sb.set_table(&next);
            self.sync_state(&old, &next);
        }
        Err(EngineError::TooManyFailures(
            "members kept failing while their superblocks were written".into(),
        ))
    }

    /// Apply a state-machine transition: the new table is written to every live
    /// member before anything acts on it.
    pub(crate) fn transition(&self, t: Transition) -> Result<()> {
        self.transitions(&[t], |_| {})
    }

    /// Apply several transitions as one superblock update (one event: members
    /// are never more than one event apart), after `edit` changes what is not
    /// the member table (relocations). All or nothing.
    pub(crate) fn transitions(
        &self,
        ts: &[Transition],
        edit: impl FnOnce(&mut Superblock),
    ) -> Result<()> {
        let mut sb = self.sb.lock().unwrap();
        let old = sb.table();
        let survives = |out: &[usize]| hetraid_core::layout::survives(self.layout(), out);
        let mut next = old.clone();
        for &t in ts {
            next = next
                .apply(t, &survives)
                .map_err(|e| EngineError::Refused(self.name_slot(t, e)))?;
        }
        next.events = old.events + 1;
        edit(&mut sb);
        sb.set_table(&next);
        self.sync_state(&old, &next);
        self.persist(&mut sb)?;
        drop(sb);
        self.record_transitions(ts);
        Ok(())
    }

    /// The core names slots by number; operators name disks by path.
    fn name_slot(&self, t: Transition, msg: String) -> String {
        let slot = match t {
            Transition::Fail { slot, .. }
            | Transition::Attach { slot, .. }
            | Transition::Checkpoint { slot, .. }
            | Transition::FinishRebuild { slot, .. }
            | Transition::Remove { slot } => slot,
        };
        match self.hot.slots.get(slot).and_then(|s| s.get()) {
            Some(m) => msg.replacen(
                &format!("member {slot} "),
                &format!("member {slot} ({}) ", m.name()),
                1,
            ),
            None => msg,
        }
    }

    /// Bring the in-memory member states in line with a new table.
    pub(crate) fn sync_state(&self, old: &MemberTable, new: &MemberTable) {
        let mut st = self.state.write().unwrap();
        for (i, (o, n)) in old.slots.iter().zip(&new.slots).enumerate() {
            let same_device = o.device == n.device;
            st.members[i] = match n.state {
                SlotState::Active if self.hot.slots[i].present() => MemberState::InSync,
                SlotState::Rebuilding { checkpoint } if self.hot.slots[i].present() => {
                    match (&st.members[i], same_device) {
                        (MemberState::Rebuilding { .. }, true) => continue,
                        _ => MemberState::rebuilding(checkpoint),
                    }
                }
                _ => MemberState::Failed,
            };
        }
        self.refresh_in_sync(&st);
    }

    /// Keep the last scrub's result in the superblocks (no event: it changes
    /// no member's state).
    pub(crate) fn record_scrub(&self, r: crate::format::ScrubRecord) -> Result<()> {
        let mut sb = self.sb.lock().unwrap();
        sb.last_scrub = Some(r);
        self.persist(&mut sb)
    }

    /// Flush and mark the array clean (a restart then needs no resync);
    /// what assembly decided is written ([`Array::commit`]) unless
    /// [`Array::keep_uncommitted`] said otherwise.
    pub fn close(&self) -> Result<()> {
        self.commit()?;
        self.stop_write_buffer()?;
        self.flush()?;
        if self.read_only {
            return Ok(());
        }
        if let Some(log) = &self.log {
            // Write-back data to the members, then everything logged is on
            // the members: the log is empty.
            if log.all_lost() {
                // No copy left: the writes it acknowledged are still in
                // memory. They go to the members (with the bitmap), and the
                // array carries on without a log rather than lose them.
                let n = log.pieces().len();
                let bytes = self.reclaim()?;
                self.flush()?;
                let mut sb = self.sb.lock().unwrap();
                sb.log = None;
                sb.events += 1;
                self.persist(&mut sb)?;
                self.warnings.lock().unwrap().push(format!(
                    "the write log failed on every copy: its {n} writes not yet on the members ({bytes} bytes, kept in memory) were written to them; the array no longer has a log and uses the write-intent bitmap (create a new array to have a log again)"
                ));
            } else {
                self.reclaim()?;
                log.checkpoint(&|| self.flush_members())?;
                self.record_log_copies(false)?;
            }
        }
        // Checksum errors since assembly (the first of each member was
        // recorded when it happened), once per run.
        for i in 0..self.hot.slots.len() {
            let c = self.checksum_errors[i].load(Ordering::Relaxed);
            if c > 1 && self.checksum_errors_recorded(i) < c {
                self.record_member(crate::annex::EventKind::ChecksumErrors, i, [c as u64, 0, 0]);
            }
        }
        self.mark_clean(&mut self.sb.lock().unwrap())?;
        if self.annex_due.swap(false, Ordering::AcqRel) {
            self.write_annex();
        }
        Ok(())
    }

    /// Recompute redundancy of every stripe in regions the bitmap marks dirty.
    pub(crate) fn recover_dirty(&self) -> Result<()> {
        let dirty = self.bitmap.lock().unwrap().dirty();
        if dirty.is_empty() {
            return Ok(());
        }
        self.commit()?;
        let spb = self.bitmap.lock().unwrap().stripes_per_bit;
        let state = self.state();
        let degraded = state.members.iter().any(|s| *s != MemberState::InSync);
        if degraded && self.layout.redundancy().tolerance() <= 1 {
            self.warnings.lock().unwrap().push(format!(
                "{} regions were being written at a crash while the array was degraded; their parity cannot be verified",
                dirty.len()
            ));
        }
        // A crash between a block's data and its checksum: the regions
        // being written get their checksums from the data first.
        let stripes: Vec<u64> = dirty
            .iter()
            .flat_map(|b| b * spb..((b + 1) * spb).min(self.layout.stripe_count()))
            .collect();
        let fixed = self.resync_stripes(&stripes)?;
        if fixed > 0 {
            self.warnings.lock().unwrap().push(format!(
                "resynced {} dirty regions after an unclean shutdown ({fixed} stripes repaired)",
                dirty.len()
            ));
        }
        self.flush()?;
        // Consistent again: clean, so the next write starts a generation.
        if self.log.is_none() {
            self.mark_clean(&mut self.sb.lock().unwrap())?;
        }
        Ok(())
    }

    /// HPDA: stripes an intent record names were being written in place at
    /// a crash; their parity is recomputed from their data. With a RAID4
    /// member absent that cannot be done (the write hole): refused without
    /// `force`, as a dirty degraded bitmap array is.
    fn recover_intents(&self, stripes: &[u64], access: Access, force: bool) -> Result<()> {
        let n = stripes.len();
        if access != Access::ReadWrite {
            self.warnings.lock().unwrap().push(format!(
                "{n} stripes were being written in place at an unclean shutdown; assembling for writing recomputes their parity"
            ));
            return Ok(());
        }
        let state = self.state();
        let absent: Vec<String> = (0..state.members.len())
            .filter(|&i| self.holds[i] && state.members[i] != MemberState::InSync)
            .map(|i| {
                self.member(i)
                    .map_or_else(|| format!("member {i} (missing)"), |m| m.name())
            })
            .collect();
        if !absent.is_empty() {
            let what = format!(
                "{n} stripes were being written in place at a crash and a RAID4 member is absent ({}): where such a write did not reach every member, data reconstructed for the absent member is wrong (the write hole)",
                absent.join(", ")
            );
            if !force {
                return Err(EngineError::Refused(format!(
                    "{what}. It is not started: give all members if you can (the stripes are then resynced), or start it anyway with hetraid assemble --force and the same members, then check the data in those stripes"
                )));
            }
            self.warnings
                .lock()
                .unwrap()
                .push(format!("{what}; started anyway (--force)"));
            return Ok(());
        }
        self.resync_stripes(stripes)?;
        self.warnings.lock().unwrap().push(format!(
            "recomputed the parity of {n} stripes that were being written in place at an unclean shutdown"
        ));
        Ok(())
    }

    /// Recompute the redundancy of `stripes` from their data (their block
    /// checksums first, when the array keeps them).
    fn resync_stripes(&self, stripes: &[u64]) -> Result<u64> {
        if self.checksums {
            let chunk = self.layout.chunk_bytes();
            for &s in stripes {
                for c in self.layout.stripe(s).all() {
                    if self.present(c.member) {
                        self.hot.slots[c.member]
                            .rehash(c.offset, chunk)
                            .map_err(|e| io_err(self.hot.slots[c.member].as_ref(), e))?;
                    }
                }
            }
        }
        let mut fixed = 0;
        for &s in stripes {
            let found = self.scrub_stripe(s, Some(hetraid_core::scrub::Trust::Resync))?;
            fixed += found.iter().any(|m| !m.fixed.is_empty()) as u64;
        }
        Ok(fixed)
    }

    pub(crate) fn resync_all(&self) -> Result<()> {
        for s in 0..self.layout.stripe_count() {
            self.scrub_stripe(s, Some(hetraid_core::scrub::Trust::Resync))?;
        }
        self.flush()
    }
}

#[cfg(test)]
mod partition_default_tests {
    use super::*;
    use hetraid_core::layout::{build, LayoutSpec};

    fn built(rec: &LayoutRecord) -> (u64, String) {
        let l = build(&LayoutSpec {
            kind: rec.kind().unwrap(),
            chunk_bytes: 65536,
            sizes: vec![64 << 20; 9],
            kinds: vec![],
        })
        .unwrap();
        let s = l.stripe(l.stripe_count() - 1);
        (
            l.stripe_count(),
            format!("{:?}", s.all().collect::<Vec<_>>()),
        )
    }

    /// `create` stores S²-RAID's partition count (G - 1 with spare space);
    /// a superblock written before it was stored (no count) still builds
    /// the layout it was created with, K = G: reading old arrays never
    /// changes where their data is.
    #[test]
    fn the_stored_count_decides_and_old_records_keep_k_equal_g() {
        let old = LayoutRecord {
            name: "s2raid5".into(),
            group: Some(3),
            partitions: None,
            spare_partitions: 1,
            ..Default::default()
        };
        let created = created_record(&old, &[], 9).unwrap();
        assert_eq!(created.partitions, Some(2));
        let k3 = LayoutRecord {
            partitions: Some(3),
            ..old.clone()
        };
        assert_eq!(built(&old), built(&k3));
        assert_ne!(built(&created), built(&k3));
        // Without spare space the default is unchanged: K = G.
        let no_spare = LayoutRecord {
            spare_partitions: 0,
            ..old.clone()
        };
        assert_eq!(
            created_record(&no_spare, &[], 9).unwrap().partitions,
            Some(3)
        );
        // S²-RAID10 on 6 members: m - 1 = 2 with spare space.
        let r10 = LayoutRecord {
            name: "s2raid10".into(),
            spare_partitions: 1,
            ..Default::default()
        };
        assert_eq!(created_record(&r10, &[], 6).unwrap().partitions, Some(2));
    }
}
