//! Creating an array: what a create checks before touching a member (the
//! layout, sizes, the log), and writing the first superblocks.

#[allow(unused_imports)]
use super::lifecycle::*;
#[allow(unused_imports)]
use super::*;
use hetraid_core::spec::SpecError;

impl Array {
    /// Check a create of members of (physical) sizes `lens` without touching them: member
    /// count, kinds, chunk size, room for metadata and one chunk, the layout.
    pub fn check_create(lens: &[u64], opts: &CreateOptions) -> Result<()> {
        let n = lens.len();
        let lens: Vec<u64> = match checksum_area(lens, opts) {
            Some(c) => {
                let need = DATA_OFFSET + c + opts.chunk_bytes;
                if let Some(&short) = lens.iter().find(|&&l| l < need) {
                    return Err(EngineError::Kind(
                hetraid_core::ErrorKind::TooSmall,
                format!(
                        "a member of {short} bytes is too small: with checksums each needs at least {need} (1 MiB of metadata, {c} of checksums, one chunk)"
                    )));
                }
                lens.iter().map(|l| l - c).collect()
            }
            None => lens.to_vec(),
        };
        let lens = &lens[..];
        if n > crate::format::MAX_MEMBERS {
            return Err(EngineError::Refused(format!(
                "at most {} members are supported",
                crate::format::MAX_MEMBERS
            )));
        }
        let spec = opts.spec();
        let chunk = opts.chunk_bytes;
        // The members and the chunk first, then the room each member gives.
        let kinds_wrong = !opts.kinds.is_empty() && opts.kinds.len() != n;
        if n == 0 || kinds_wrong || !hetraid_core::spec::chunk_ok(chunk) {
            return Err(EngineError::spec(
                spec.validate(lens).err().expect("refused"),
            ));
        }
        let need = DATA_OFFSET + chunk;
        if let Some(&short) = lens.iter().find(|&&l| l < need) {
            return Err(EngineError::Kind(
                hetraid_core::ErrorKind::TooSmall,
                format!(
                "a member of {short} bytes is too small: each needs at least {need} (1 MiB of metadata plus one chunk)"
            )));
        }
        let raidx = is_raidx(&opts.layout);
        let sizes: Vec<u64> = lens
            .iter()
            .map(|&l| data_area(l, chunk, 0, raidx))
            .collect();
        let is_hpda = opts.layout.kind() == Ok(hetraid_core::layout::LayoutKind::Hpda);
        // The rest is the core's (`ArraySpec::validate`).
        spec.validate(&sizes).map_err(|e| match (e, is_hpda) {
            // Its sizes are data areas: say what that means for a device.
            (SpecError::Layout(l), true) => EngineError::Layout(format!(
                "{l} (a member's data area is its size less {} MiB of metadata)",
                DATA_OFFSET >> 20
            )),
            (e, _) => EngineError::spec(e),
        })?;
        Ok(())
    }

    /// A log for the members: one or two devices (none of them a member),
    /// or a region of the members, each large enough for the layout (the
    /// core's rules, `logconfig`).
    fn check_log(l: &LogSpec, members: &[Arc<dyn Member>], layout: &dyn Layout) -> Result<()> {
        use hetraid_core::logconfig::{self as lc, Sized};
        let refuse = |e: lc::LogConfigError| EngineError::Refused(e.sentence(&lc::CLI));
        lc::choose(
            false,
            &lc::LogOptions {
                devices: l.devices.len(),
                region: l.region,
                size: None,
                mode: Some(l.mode.name().into()),
            },
        )
        .map_err(refuse)?;
        if let Some(bytes) = l.region {
            return lc::check_size(layout, l.mode, Sized::RegionOption, bytes).map_err(refuse);
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
        for d in &l.devices {
            lc::check_size(layout, l.mode, Sized::Device(d.name()), d.len()).map_err(refuse)?;
        }
        Ok(())
    }

    /// The smallest log device for `layout` in `mode` (core
    /// `logconfig::bytes_min`).
    pub fn log_bytes_min(layout: &dyn Layout, mode: crate::format::LogMode) -> u64 {
        hetraid_core::logconfig::bytes_min(layout, mode)
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
        check_new_members(&members, opts)?;
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
        let kind = record.kind().map_err(EngineError::layout)?;
        let spec = LayoutSpec {
            kind,
            chunk_bytes: opts.chunk_bytes,
            sizes: sizes.clone(),
            kinds: kinds.clone(),
        };
        let layout = build(&spec).map_err(|e| EngineError::Layout(e.to_string()))?;
        if let Some(l) = log_spec.filter(|_| !hpda) {
            Self::check_log(l, &members, layout.as_ref())?;
        }
        if hpda {
            region = Some(super::hpda::log_region(
                layout.as_ref(),
                log_spec.and_then(|l| l.region),
            )?);
        }
        let sb = first_superblock(&FirstSuperblock {
            opts,
            kinds: &kinds,
            sizes: &sizes,
            record,
            layout: layout.as_ref(),
            checksum_area: area,
            raidx,
            log: log_spec,
            region: region.as_ref(),
        });
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
        if raidx {
            write_bundle_tables(&sb, &raw, &sizes)?;
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
            array.first_sync(area.is_some())?;
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
                sat_out_any: AtomicBool::new(false),
                sit_out_waits: AtomicBool::new(false),
            },
            activity: super::UserActivity::new(),
            read_only: false,
            stripe_pool: Mutex::new(Vec::new()),
            read_errors: (0..n).map(|_| Default::default()).collect(),
            write_errors: (0..n).map(|_| Default::default()).collect(),
            user_io: Default::default(),
            measuring_since: Default::default(),
            sit_out: Mutex::new(None),
            sit_out_reads_seen: Default::default(),
            sat_out_mask: Default::default(),
            errors_before: Mutex::new(Vec::new()),
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
            bitmap_off_for_bench: AtomicBool::new(false),
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
}

/// What the first superblock of a new array is made from.
struct FirstSuperblock<'a> {
    opts: &'a CreateOptions,
    kinds: &'a [MemberKind],
    /// Each member's data area.
    sizes: &'a [u64],
    record: LayoutOptions,
    layout: &'a dyn Layout,
    /// Bytes of checksums per member (None: no checksums).
    checksum_area: Option<u64>,
    raidx: bool,
    log: Option<&'a LogSpec>,
    /// A log region: its bytes and the slots holding its copies.
    region: Option<&'a (u64, Vec<usize>)>,
}

/// The first superblock of a new array: every member active, event 1,
/// clean, new device ids, the log's record when there is one.
fn first_superblock(f: &FirstSuperblock<'_>) -> Superblock {
    let FirstSuperblock {
        opts,
        kinds,
        sizes,
        ref record,
        layout,
        checksum_area: area,
        raidx,
        log: log_spec,
        region,
    } = *f;
    let n = sizes.len();
    let stripe_bytes = opts.chunk_bytes * layout.data_per_stripe() as u64;
    let spb = Bitmap::stripes_per_bit(layout.stripe_count(), stripe_bytes);
    Superblock {
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
        layout: record.clone(),
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
    }
}

/// RAIDX: every member's bundle table, written before any superblock says
/// there is one.
fn write_bundle_tables(sb: &Superblock, raw: &[Arc<dyn Member>], sizes: &[u64]) -> Result<()> {
    let places = super::living::table_now(sb)?.0.places;
    for (i, m) in raw.iter().enumerate() {
        let slots = sizes[i] / sb.chunk_bytes;
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
    Ok(())
}

/// Members a create may take: none listed twice, each with room for the
/// metadata and a chunk, none another array's (unless forced).
fn check_new_members(members: &[Arc<dyn Member>], opts: &CreateOptions) -> Result<()> {
    let mut names = std::collections::HashSet::new();
    for m in members {
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
                return Err(EngineError::Kind(
                    hetraid_core::ErrorKind::Foreign,
                    format!(
                    "member {} already belongs to array {} (slot {}); use --force to overwrite it",
                    m.name(),
                    sb.uuid_string(),
                    sb.member
                ),
                ));
            }
        }
    }
    Ok(())
}
