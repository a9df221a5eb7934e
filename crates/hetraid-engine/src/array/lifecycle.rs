//! Creating and assembling an array, its superblocks, clean shutdown and
//! crash recovery (bitmap resync).

#[allow(unused_imports)]
use super::*;

impl Array {
    /// Write superblocks and an empty bitmap to `members` and assemble them.
    pub fn create(members: Vec<Arc<dyn Member>>, opts: &CreateOptions) -> Result<Self> {
        let n = members.len();
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
        let kinds = if opts.kinds.is_empty() {
            vec![MemberKind::Hdd; n]
        } else {
            opts.kinds.clone()
        };
        let sizes: Vec<u64> = members
            .iter()
            .map(|m| (m.len() - DATA_OFFSET) / opts.chunk_bytes * opts.chunk_bytes)
            .collect();
        let kind = opts.layout.kind().map_err(EngineError::Layout)?;
        let spec = LayoutSpec {
            kind,
            chunk_bytes: opts.chunk_bytes,
            sizes: sizes.clone(),
            kinds: kinds.clone(),
        };
        let layout = build(&spec).map_err(|e| EngineError::Layout(e.to_string()))?;
        let stripe_bytes = opts.chunk_bytes * layout.data_per_stripe() as u64;
        let spb = Bitmap::stripes_per_bit(layout.stripe_count(), stripe_bytes);
        let sb = Superblock {
            uuid: *uuid::Uuid::new_v4().as_bytes(),
            events: 1,
            member: 0,
            clean: true,
            policy: opts.policy,
            data_offset: DATA_OFFSET,
            chunk_bytes: opts.chunk_bytes,
            bitmap_stripes: spb as u32,
            layout: opts.layout.clone(),
            roles: (0..n)
                .map(|i| MemberRole {
                    state: RoleState::Active,
                    kind: kinds[i],
                    data_size: sizes[i],
                    rebuild_checkpoint: 0,
                })
                .collect(),
            relocations: vec![],
        };
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
        let array = Self::from_parts(sb, spec, layout, members.into_iter().map(Some).collect())?;
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
        if !sb.relocations.is_empty() {
            for st in (0..layout.stripe_count()).map(|s| layout.stripe(s)) {
                st.all().for_each(|c| holds[c.member] = true);
            }
        }
        let service = spec
            .kinds_or_default()
            .iter()
            .map(|k| k.default_service())
            .collect();
        Ok(Self {
            stripe_pool: Mutex::new(Vec::new()),
            policy: sb.policy,
            service,
            holds,
            sb: Mutex::new(sb),
            layout,
            slots,
            queues,
            state: RwLock::new(state),
            locks: (0..LOCK_SHARDS).map(|_| Mutex::new(())).collect(),
            bitmap: Mutex::new(bitmap),
            user_io: AtomicBool::new(false),
            all_in_sync: AtomicBool::new(in_sync),
            healthy_state: ArrayState::healthy(n),
            warnings: Mutex::new(Vec::new()),
        })
    }

    /// Assemble from members alone, in any order; resync regions left dirty by a
    /// crash.
    pub fn assemble(given: Vec<Arc<dyn Member>>) -> Result<Self> {
        if given.is_empty() {
            return Err(EngineError::Refused("give the array's members".into()));
        }
        let mut sbs = Vec::new();
        for m in &given {
            match read_sb(m.as_ref())? {
                Ok(sb) => sbs.push(sb),
                Err(e) => {
                    return Err(EngineError::Refused(format!(
                        "member {} is refused: {e}",
                        m.name()
                    )));
                }
            }
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
        let fresh = sbs.iter().max_by_key(|s| s.events).unwrap().clone();
        let n = fresh.roles.len();
        let mut slots: Vec<Option<Arc<dyn Member>>> = vec![None; n];
        for (m, sb) in given.iter().zip(&sbs) {
            if sb.events < fresh.events {
                return Err(EngineError::Refused(format!(
                    "member {} is stale (event {} < {}): it was failed or removed; leave it out, or bring it back with replace",
                    m.name(),
                    sb.events,
                    fresh.events
                )));
            }
            let i = sb.member as usize;
            if i >= n || sb.roles.len() != n {
                return Err(EngineError::Refused(format!(
                    "member {} has an inconsistent member table",
                    m.name()
                )));
            }
            if slots[i].is_some() {
                return Err(EngineError::Refused(format!(
                    "members {} and another both claim slot {i}",
                    m.name()
                )));
            }
            if !matches!(
                fresh.roles[i].state,
                RoleState::Active | RoleState::Rebuilding
            ) {
                return Err(EngineError::Refused(format!(
                    "member {} is marked {} in the array",
                    m.name(),
                    fresh.roles[i].state.as_str()
                )));
            }
            slots[i] = Some(m.clone());
        }
        let sizes: Vec<u64> = fresh.roles.iter().map(|r| r.data_size).collect();
        let kinds: Vec<MemberKind> = fresh.roles.iter().map(|r| r.kind).collect();
        let kind = fresh.layout.kind().map_err(EngineError::Layout)?;
        let spec = LayoutSpec {
            kind,
            chunk_bytes: fresh.chunk_bytes,
            sizes,
            kinds,
        };
        let layout = build(&spec).map_err(|e| EngineError::Layout(e.to_string()))?;
        let layout = relocated(layout, &fresh);
        let tol = layout.redundancy().tolerance();
        let missing: Vec<usize> = (0..n)
            .filter(|&i| fresh.roles[i].state != RoleState::Removed)
            .filter(|&i| slots[i].is_none() || fresh.roles[i].state != RoleState::Active)
            .collect();
        let absent: Vec<usize> = (0..n)
            .filter(|&i| slots[i].is_none() && fresh.roles[i].state == RoleState::Active)
            .collect();
        if missing.len() > tol && !absent.is_empty() {
            return Err(EngineError::Refused(format!(
                "members for slots {absent:?} are missing and the array survives only {tol} missing; give all members"
            )));
        }
        let mut array = Self::from_parts(fresh.clone(), spec, layout, slots)?;
        // The bitmap as the freshest live member has it.
        let src = array
            .slots
            .iter()
            .find(|s| s.present())
            .expect("a member is present")
            .clone();
        let mut bits = vec![0u8; array.bitmap.lock().unwrap().bits.len()];
        let mut page = AlignedBuf::zeroed(bits.len().div_ceil(PAGE as usize) * PAGE as usize);
        if !page.is_empty() {
            src.read_at(&mut page, BITMAP_OFFSET)
                .map_err(|e| io_err(src.as_ref(), e))?;
            let l = bits.len();
            bits.copy_from_slice(&page[..l]);
        }
        array.bitmap = Mutex::new(Bitmap::new(fresh.bitmap_stripes as u64, bits));
        array.recover_dirty()?;
        Ok(array)
    }

    /// Persist the superblock (bumping the event counter) on every live member.
    pub(crate) fn write_superblocks(&self, sb: &mut Superblock) -> Result<()> {
        sb.events += 1;
        let mut ops = Vec::new();
        for (i, slot) in self.slots.iter().enumerate() {
            if !slot.present()
                || !matches!(sb.roles[i].state, RoleState::Active | RoleState::Rebuilding)
            {
                continue;
            }
            let mut s = sb.clone();
            s.member = i as u32;
            let mut b = AlignedBuf::zeroed(SB_SIZE);
            b.copy_from_slice(&s.encode());
            ops.push((i, IoOp::Write { off: 0, buf: b }));
            ops.push((i, IoOp::Flush));
        }
        let idx: Vec<usize> = ops.iter().map(|(i, _)| *i).collect();
        let mut failed = Vec::new();
        for (r, i) in run_batch(&self.queues, ops).into_iter().zip(idx) {
            if r.is_err() && !failed.contains(&i) {
                failed.push(i);
            }
        }
        // A member that cannot take its superblock is failed (recorded on the others).
        if !failed.is_empty() {
            for &i in &failed {
                sb.roles[i].state = RoleState::Faulty;
                let mut st = self.state.write().unwrap();
                st.members[i] = MemberState::Failed;
                self.refresh_in_sync(&st);
            }
            return self.write_superblocks(sb);
        }
        Ok(())
    }

    /// Flush and mark the array clean (a restart then needs no resync).
    pub fn close(&self) -> Result<()> {
        self.flush()?;
        let mut sb = self.sb.lock().unwrap();
        if !sb.clean {
            sb.clean = true;
            self.write_superblocks(&mut sb)?;
        }
        Ok(())
    }

    /// Recompute redundancy of every stripe in regions the bitmap marks dirty.
    pub(crate) fn recover_dirty(&self) -> Result<()> {
        let dirty = self.bitmap.lock().unwrap().dirty();
        if dirty.is_empty() {
            return Ok(());
        }
        let spb = self.bitmap.lock().unwrap().stripes_per_bit;
        let state = self.state();
        let degraded = state.members.iter().any(|s| *s != MemberState::InSync);
        if degraded && self.layout.redundancy().tolerance() <= 1 {
            self.warnings.lock().unwrap().push(format!(
                "{} regions were being written at a crash while the array was degraded; their parity cannot be verified",
                dirty.len()
            ));
        }
        let mut fixed = 0;
        for b in &dirty {
            for s in b * spb..((b + 1) * spb).min(self.layout.stripe_count()) {
                fixed += self.scrub_stripe(s, true)?.1;
            }
        }
        if fixed > 0 {
            self.warnings.lock().unwrap().push(format!(
                "resynced {} dirty regions after an unclean shutdown ({fixed} stripes repaired)",
                dirty.len()
            ));
        }
        self.flush()
    }

    pub(crate) fn resync_all(&self) -> Result<()> {
        for s in 0..self.layout.stripe_count() {
            self.scrub_stripe(s, true)?;
        }
        self.flush()
    }

    /// Replace the superblock (bumping events) on every live member.
    pub(crate) fn store_superblock(&self, new: Superblock) -> Result<()> {
        let mut sb = self.sb.lock().unwrap();
        let events = sb.events.max(new.events);
        *sb = new;
        sb.events = events;
        self.write_superblocks(&mut sb)
    }
}
