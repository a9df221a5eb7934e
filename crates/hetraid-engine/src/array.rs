//! An assembled array: executes the core's plans on real members.
//!
//! Shape of one request: plan (core) -> lock the stripes -> mark the bitmap ->
//! read phase (parallel, per-member queues) -> arithmetic (core::exec) -> write
//! phase (parallel) -> unlock. A member I/O error marks the member faulty and the
//! request is planned again, degraded; beyond the redundancy the request fails.

use crate::bitmap::Bitmap;
use crate::error::{EngineError, Result};
use crate::format::{
    LayoutRecord, MemberRole, RoleState, Superblock, BITMAP_OFFSET, DATA_OFFSET, SB_SIZE,
};
use crate::member::{AlignedBuf, Member};
use crate::queue::{run_batch, Borrowed, IoOp, MemberQueue};
use hetraid_core::exec::{self, StripeBufs};
use hetraid_core::iomap::{merge_extents, plan_extents};
use hetraid_core::layout::{build, Layout, LayoutSpec};
use hetraid_core::plan::{ArrayState, MemberState, Op, Plan, Planner, Request, StripePlan};
use hetraid_core::{MemberKind, WritePolicy};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

const PAGE: u64 = 4096;
const LOCK_SHARDS: usize = 4096;
/// Most stripe buffer sets kept for reuse.
const STRIPE_POOL_MAX: usize = 256;

/// How to create an array.
#[derive(Debug, Clone)]
pub struct CreateOptions {
    pub layout: LayoutRecord,
    pub chunk_bytes: u64,
    pub policy: WritePolicy,
    pub kinds: Vec<MemberKind>,
    /// Members are known to be all zero (freshly created files): skip the
    /// initial parity sync.
    pub assume_clean: bool,
    /// Overwrite members that carry another array's superblock.
    pub force: bool,
}

pub struct Array {
    sb: Mutex<Superblock>,
    layout: Box<dyn Layout>,
    slots: Vec<Arc<crate::member::Slot>>,
    queues: Vec<Option<MemberQueue>>,
    state: RwLock<ArrayState>,
    locks: Vec<Mutex<()>>,
    bitmap: Mutex<Bitmap>,
    /// Set by user I/O, cleared by the rebuild throttle each time it looks.
    pub(crate) user_io: AtomicBool,
    /// Every member in sync: the read fast path needs no lock.
    all_in_sync: AtomicBool,
    healthy_state: ArrayState,
    warnings: Mutex<Vec<String>>,
    /// Does member i hold any chunk (false once all of it was relocated)?
    holds: Vec<bool>,
    /// Reusable stripe buffers for the write path.
    stripe_pool: Mutex<Vec<StripeBufs>>,
    /// Write policy and per-member service models (fixed for the array's life).
    policy: WritePolicy,
    service: Vec<hetraid_core::ServiceModel>,
}

/// `hetraid status` data.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    pub uuid: String,
    pub layout: String,
    pub members: usize,
    pub chunk_bytes: u64,
    pub capacity_bytes: u64,
    pub stripe_count: u64,
    pub policy: &'static str,
    pub events: u64,
    pub clean: bool,
    pub state: &'static str,
    pub dirty_regions: usize,
    pub member_states: Vec<MemberStatus>,
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct MemberStatus {
    pub device: usize,
    pub path: Option<String>,
    pub state: &'static str,
    pub kind: &'static str,
    pub data_bytes: u64,
    pub rebuild_checkpoint: Option<u64>,
}

/// The layout with the superblock's relocations applied.
pub(crate) fn relocated(layout: Box<dyn Layout>, sb: &Superblock) -> Box<dyn Layout> {
    if sb.relocations.is_empty() {
        return layout;
    }
    let moves = sb
        .relocations
        .iter()
        .map(|r| hetraid_core::layout::Move {
            from: hetraid_core::ChunkLoc {
                member: r.from_member as usize,
                offset: r.from_offset,
            },
            to: hetraid_core::ChunkLoc {
                member: r.to_member as usize,
                offset: r.to_offset,
            },
            len: r.len,
        })
        .collect();
    Box::new(hetraid_core::layout::Remapped::new(layout, moves))
}

fn io_err(m: &dyn Member, e: std::io::Error) -> EngineError {
    EngineError::Io {
        member: m.name(),
        source: e,
    }
}

fn read_sb(m: &dyn Member) -> Result<std::result::Result<Superblock, crate::format::FormatError>> {
    let mut b = AlignedBuf::zeroed(SB_SIZE);
    if m.len() < SB_SIZE as u64 {
        return Ok(Err(crate::format::FormatError::NoMagic));
    }
    m.read_at(&mut b, 0).map_err(|e| io_err(m, e))?;
    Ok(Superblock::decode(&b))
}

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

    fn from_parts(
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

    pub fn layout(&self) -> &dyn Layout {
        self.layout.as_ref()
    }

    pub fn capacity(&self) -> u64 {
        self.layout.capacity_bytes()
    }

    /// Is a member in slot `i`?
    pub fn present(&self, i: usize) -> bool {
        self.slots.get(i).is_some_and(|s| s.present())
    }

    /// The member in slot `i`, if any.
    pub fn member(&self, i: usize) -> Option<Arc<dyn Member>> {
        self.slots.get(i).and_then(|s| s.get())
    }

    pub fn slot_count(&self) -> usize {
        self.slots.len()
    }

    pub fn state(&self) -> ArrayState {
        self.state.read().unwrap().clone()
    }

    pub fn superblock(&self) -> Superblock {
        self.sb.lock().unwrap().clone()
    }

    fn planner(&self) -> Planner<'_> {
        Planner::new(self.layout.as_ref(), self.policy, self.service.clone())
    }

    fn lock_stripes(&self, stripes: impl Iterator<Item = u64>) -> Vec<MutexGuard<'_, ()>> {
        let mut shards: Vec<usize> = stripes.map(|s| (s % LOCK_SHARDS as u64) as usize).collect();
        shards.sort_unstable();
        shards.dedup();
        shards
            .into_iter()
            .map(|i| self.locks[i].lock().unwrap())
            .collect()
    }

    /// Persist the superblock (bumping the event counter) on every live member.
    fn write_superblocks(&self, sb: &mut Superblock) -> Result<()> {
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

    /// Mark member `i` faulty (as `hetraid fail` and as an I/O error do).
    pub fn fail(&self, i: usize) -> Result<()> {
        let mut sb = self.sb.lock().unwrap();
        if i >= sb.roles.len() {
            return Err(EngineError::Refused(format!(
                "member {i} does not exist; members are 0 to {}",
                sb.roles.len() - 1
            )));
        }
        if sb.roles[i].state == RoleState::Faulty {
            return Ok(());
        }
        sb.roles[i].state = RoleState::Faulty;
        {
            let mut st = self.state.write().unwrap();
            st.members[i] = MemberState::Failed;
            self.refresh_in_sync(&st);
        }
        self.write_superblocks(&mut sb)?;
        drop(sb);
        let failed = self.out_members(true);
        if failed > self.layout.redundancy().tolerance() {
            self.warnings.lock().unwrap().push(format!(
                "{failed} members are out: data beyond the redundancy is lost"
            ));
        }
        Ok(())
    }

    /// Record a member I/O error: the member becomes faulty.
    fn member_error(&self, i: usize, e: &std::io::Error) {
        let name = self.slots[i].name();
        self.warnings
            .lock()
            .unwrap()
            .push(format!("member {i} ({name}) failed: {e}"));
        let _ = self.fail(i);
    }

    /// Read `buf.len()` bytes at `offset`.
    pub fn read(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.note_user_io();
        // Fast path: inside one chunk on an in-sync member, read it directly (no
        // plan, no stripe lock — as MD's chunk-aligned reads bypass the stripe cache).
        let planner = Planner::new(self.layout.as_ref(), WritePolicy::Md, Vec::new());
        let direct = if self.all_in_sync.load(Ordering::Acquire) {
            // Common case: no lock at all (a shared read-only flag).
            planner.direct_read(offset, buf.len() as u64, &self.healthy_state)
        } else {
            planner.direct_read(offset, buf.len() as u64, &self.state.read().unwrap())
        };
        if let Some((m, off)) = direct {
            // One slot load on the hot path; an error from a slot emptied meanwhile
            // is not the member's fault, so only a present member is failed.
            match self.slots[m].read_at(buf, DATA_OFFSET + off) {
                Ok(()) => return Ok(()),
                Err(e) if self.slots[m].present() => self.member_error(m, &e),
                Err(_) => {}
            }
        }
        // Larger healthy reads: straight from the members, contiguous pieces merged.
        let req = Request::read(offset, buf.len() as u64);
        if self.direct_io(&req, UserBuf::Read(&mut *buf)) {
            return Ok(());
        }
        self.run(req, UserBuf::Read(buf))
    }

    /// Write `data` at `offset` (durable after [`Array::flush`]).
    pub fn write(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.note_user_io();
        let planner = Planner::new(self.layout.as_ref(), WritePolicy::Md, Vec::new());
        let direct = if self.all_in_sync.load(Ordering::Acquire) {
            planner.direct_write(offset, data.len() as u64, &self.healthy_state)
        } else {
            planner.direct_write(offset, data.len() as u64, &self.state.read().unwrap())
        };
        if let Some((m, off)) = direct {
            match self.slots[m].write_at(data, DATA_OFFSET + off) {
                Ok(()) => return Ok(()),
                Err(e) if self.slots[m].present() => self.member_error(m, &e),
                Err(_) => {}
            }
        }
        if self.direct_io(
            &Request::write(offset, data.len() as u64),
            UserBuf::Write(data),
        ) {
            return Ok(());
        }
        self.run(
            Request::write(offset, data.len() as u64),
            UserBuf::Write(data),
        )
    }

    fn run(&self, req: Request, mut buf: UserBuf<'_>) -> Result<()> {
        // Lock the stripes first and plan under the locks: a plan made before a
        // rebuild finished a stripe would skip the member the rebuild just filled.
        let cap = self.capacity();
        if req.offset.checked_add(req.len).is_none_or(|e| e > cap) {
            return Err(hetraid_core::PlanError::OutOfRange {
                offset: req.offset,
                len: req.len,
                capacity: cap,
            }
            .into());
        }
        let chunk = self.layout.chunk_bytes();
        let stripes = (req.offset / chunk..(req.offset + req.len).div_ceil(chunk))
            .map(|c| self.layout.locate_chunk(c).0);
        let _g = self.lock_stripes(stripes);
        // Each retry follows a member failure, so it is bounded by the member count.
        for _ in 0..=self.slots.len() {
            let plan = {
                let state = self.state.read().unwrap();
                self.planner().plan(&req, &state)?
            };
            match self.execute(&plan, &mut buf) {
                Ok(()) => return Ok(()),
                Err(Retry::MemberFailed) => continue,
                Err(Retry::Fatal(e)) => return Err(e),
            }
        }
        Err(EngineError::TooManyFailures(
            "members kept failing during one request".into(),
        ))
    }

    /// Execute a plan whose stripes the caller has locked.
    fn execute(&self, plan: &Plan, buf: &mut UserBuf<'_>) -> std::result::Result<(), Retry> {
        // Without redundancy there is nothing to resync after a crash.
        let bits: Vec<u64> =
            if plan.op == Op::Write && self.layout.redundancy() != hetraid_core::Redundancy::None {
                let bm = self.bitmap.lock().unwrap();
                let mut b: Vec<u64> = plan.stripes.iter().map(|s| bm.bit_of(s.stripe)).collect();
                b.dedup();
                b
            } else {
                vec![]
            };
        if !bits.is_empty() {
            self.bitmap_begin(&bits).map_err(Retry::Fatal)?;
        }
        let r = self.execute_locked(plan, buf);
        if !bits.is_empty() {
            self.bitmap.lock().unwrap().end(&bits);
        }
        r
    }

    fn execute_locked(&self, plan: &Plan, buf: &mut UserBuf<'_>) -> std::result::Result<(), Retry> {
        if let UserBuf::Write(data) = buf {
            // All stripes of a write at once: reads merged per member, the
            // arithmetic per stripe, writes merged per member (a 1 MiB full-stripe
            // write becomes one operation per member).
            // Stripe buffers come from a pool: no allocation or zeroing per request.
            let mut bufs: Vec<StripeBufs> = {
                let mut pool = self.stripe_pool.lock().unwrap();
                let keep = pool.len().saturating_sub(plan.stripes.len());
                pool.split_off(keep)
            };
            for (i, sp) in plan.stripes.iter().enumerate() {
                match bufs.get_mut(i) {
                    Some(b) => b.refit(sp),
                    None => bufs.push(StripeBufs::new(sp)),
                }
            }
            let give_back = |bufs: Vec<StripeBufs>| {
                let mut pool = self.stripe_pool.lock().unwrap();
                if pool.len() < STRIPE_POOL_MAX {
                    pool.extend(bufs);
                }
            };
            if self.read_plans(&plan.stripes, &mut bufs).is_err() {
                give_back(bufs);
                return Err(Retry::MemberFailed);
            }
            for (sp, b) in plan.stripes.iter().zip(bufs.iter_mut()) {
                exec::fill_writes(sp, b, data)
                    .map_err(|e| Retry::Fatal(EngineError::Refused(e)))?;
            }
            let written = self.write_plans(&plan.stripes, &mut bufs, data);
            give_back(bufs);
            if written.is_err() {
                // The failed member is marked faulty; the stripes stay consistent
                // without it as long as the redundancy covers the loss.
                let out = self.out_members(true);
                if out > self.layout.redundancy().tolerance() {
                    return Err(Retry::Fatal(EngineError::TooManyFailures(format!(
                        "{out} members out"
                    ))));
                }
            }
            return Ok(());
        }
        for sp in &plan.stripes {
            let mut bufs = StripeBufs::new(sp);
            match buf {
                UserBuf::Read(out) => {
                    self.read_phase(sp, &mut bufs, Some(&mut **out))?;
                    exec::finish_reads(sp, &mut bufs, out)
                        .map_err(|e| Retry::Fatal(EngineError::Refused(e)))?;
                }
                UserBuf::Write(_) => unreachable!("writes are executed as one batch below"),
            }
        }
        Ok(())
    }

    fn data_off(&self) -> u64 {
        DATA_OFFSET
    }

    /// Issue a stripe plan's reads (and direct reads into `user`) in parallel.
    fn read_phase(
        &self,
        sp: &StripePlan,
        bufs: &mut StripeBufs,
        user: Option<&mut [u8]>,
    ) -> std::result::Result<(), Retry> {
        let mut ops = Vec::new();
        let mut dest: Vec<ReadDest> = Vec::new();
        for run in &sp.runs {
            for c in run.read.iter() {
                let loc = sp.columns[c].loc;
                ops.push((
                    loc.member,
                    IoOp::Read {
                        off: self.data_off() + loc.offset + run.page as u64 * PAGE,
                        len: (run.pages as u64 * PAGE) as usize,
                    },
                ));
                dest.push((c, run.page, run.pages, None));
            }
        }
        if user.is_some() {
            for p in sp.pieces.iter().filter(|p| p.direct.is_some()) {
                let loc = sp.columns[p.direct.unwrap()].loc;
                ops.push((
                    loc.member,
                    IoOp::Read {
                        off: self.data_off() + loc.offset + p.chunk_offset,
                        len: p.len as usize,
                    },
                ));
                dest.push((0, 0, 0, Some((p.buf_offset as usize, p.len as usize))));
            }
        }
        let members: Vec<usize> = ops.iter().map(|(m, _)| *m).collect();
        let results = run_batch(&self.queues, ops);
        let mut user = user;
        let mut failed = false;
        for ((r, m), (c, page, pages, direct)) in results.into_iter().zip(members).zip(dest) {
            match r {
                Ok(Some(data)) => match direct {
                    Some((a, len)) => user.as_deref_mut().expect("direct reads have a buffer")
                        [a..a + len]
                        .copy_from_slice(&data),
                    None => {
                        let run = hetraid_core::plan::RowRun {
                            page,
                            pages,
                            mode: hetraid_core::Mode::Read,
                            strategy: hetraid_core::plan::Strategy::Rcw,
                            read: Default::default(),
                            write: Default::default(),
                            lost: Default::default(),
                        };
                        bufs.run_slice(c, &run).copy_from_slice(&data);
                    }
                },
                Ok(None) => {}
                Err(e) => {
                    self.member_error(m, &e);
                    failed = true;
                }
            }
        }
        if failed {
            return Err(Retry::MemberFailed);
        }
        Ok(())
    }

    fn write_phase(
        &self,
        sp: &StripePlan,
        bufs: &mut StripeBufs,
        cols: impl Fn(&hetraid_core::plan::RowRun) -> hetraid_core::plan::ColSet,
    ) -> std::result::Result<(), Retry> {
        let mut ops = Vec::new();
        for run in &sp.runs {
            for c in cols(run).iter() {
                let loc = sp.columns[c].loc;
                let data = bufs.run_slice(c, run);
                let mut b = AlignedBuf::pooled(data.len());
                b.copy_from_slice(data);
                ops.push((
                    loc.member,
                    IoOp::Write {
                        off: self.data_off() + loc.offset + run.page as u64 * PAGE,
                        buf: b,
                    },
                ));
            }
        }
        let members: Vec<usize> = ops.iter().map(|(m, _)| *m).collect();
        let mut any = false;
        for (r, m) in run_batch(&self.queues, ops).into_iter().zip(members) {
            if let Err(e) = r {
                // The stripe stays consistent without this member: mark it faulty.
                self.member_error(m, &e);
                any = true;
            }
        }
        if any {
            let failed = self.out_members(true);
            if failed > self.layout.redundancy().tolerance() {
                return Err(Retry::Fatal(EngineError::TooManyFailures(format!(
                    "{failed} members out"
                ))));
            }
        }
        Ok(())
    }

    fn live_members(&self) -> Vec<usize> {
        let st = self.state();
        (0..self.slots.len())
            .filter(|&i| self.slots[i].present() && st.members[i] != MemberState::Failed)
            .collect()
    }

    fn write_bitmap_pages(&self, bm: &Bitmap, pages: &[u64]) -> Result<()> {
        let mut ops = Vec::new();
        for &m in &self.live_members() {
            for &p in pages {
                let src = bm.page(p);
                let mut b = AlignedBuf::zeroed(PAGE as usize);
                b[..src.len()].copy_from_slice(src);
                ops.push((
                    m,
                    IoOp::Write {
                        off: BITMAP_OFFSET + p,
                        buf: b,
                    },
                ));
            }
            ops.push((m, IoOp::Flush));
        }
        let idx: Vec<usize> = ops.iter().map(|(m, _)| *m).collect();
        for (r, m) in run_batch(&self.queues, ops).into_iter().zip(idx) {
            if let Err(e) = r {
                self.member_error(m, &e);
            }
        }
        Ok(())
    }

    fn bitmap_begin(&self, bits: &[u64]) -> Result<()> {
        let mut bm = self.bitmap.lock().unwrap();
        let pages = bm.begin(bits);
        if !pages.is_empty() {
            self.mark_dirty()?;
            self.write_bitmap_pages(&bm, &pages)?;
        }
        Ok(())
    }

    fn mark_dirty(&self) -> Result<()> {
        let mut sb = self.sb.lock().unwrap();
        if sb.clean {
            sb.clean = false;
            self.write_superblocks(&mut sb)?;
        }
        Ok(())
    }

    /// Make every completed write durable on every member, then clear idle bitmap bits.
    pub fn flush(&self) -> Result<()> {
        let live = self.live_members();
        let ops: Vec<(usize, IoOp)> = live.iter().map(|&m| (m, IoOp::Flush)).collect();
        for (r, m) in run_batch(&self.queues, ops).into_iter().zip(live) {
            if let Err(e) = r {
                self.member_error(m, &e);
            }
        }
        let failed = self.out_members(false);
        if failed > self.layout.redundancy().tolerance() {
            return Err(EngineError::TooManyFailures(format!(
                "{failed} members failed"
            )));
        }
        let mut bm = self.bitmap.lock().unwrap();
        let pages = bm.clear_idle();
        if !pages.is_empty() {
            self.write_bitmap_pages(&bm, &pages)?;
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
    fn recover_dirty(&self) -> Result<()> {
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

    fn resync_all(&self) -> Result<()> {
        for s in 0..self.layout.stripe_count() {
            self.scrub_stripe(s, true)?;
        }
        self.flush()
    }

    /// Check (and with `repair`, fix) one stripe; returns (mismatched pages, stripes repaired).
    pub fn scrub_stripe(&self, s: u64, repair: bool) -> Result<(u64, u64)> {
        let state = self.state();
        let planner = self.planner();
        let Some(sp) = planner.scrub_stripe(s, &state, repair) else {
            return Ok((0, 0));
        };
        let _g = self.lock_stripes(std::iter::once(s));
        let mut bufs = StripeBufs::new(&sp);
        if self.read_phase(&sp, &mut bufs, None).is_err() {
            return Ok((0, 0));
        }
        let out = exec::scrub(&sp, &mut bufs);
        if out.mismatched_pages > 0 && repair {
            let _ = self.write_phase(&sp, &mut bufs, |r| r.write);
            return Ok((out.mismatched_pages, 1));
        }
        Ok((out.mismatched_pages, 0))
    }

    pub fn status(&self) -> Status {
        let sb = self.superblock();
        let st = self.state();
        let failed = self.out_members(false);
        let rebuilding = st
            .members
            .iter()
            .any(|s| matches!(s, MemberState::Rebuilding { .. }));
        let state = if failed > self.layout.redundancy().tolerance() {
            "failed"
        } else if rebuilding {
            "rebuilding"
        } else if failed > 0 {
            "degraded"
        } else {
            "optimal"
        };
        Status {
            uuid: sb.uuid_string(),
            layout: self.layout.name(),
            members: sb.roles.len(),
            chunk_bytes: sb.chunk_bytes,
            capacity_bytes: self.capacity(),
            stripe_count: self.layout.stripe_count(),
            policy: sb.policy.as_str(),
            events: sb.events,
            clean: sb.clean,
            state,
            dirty_regions: self.bitmap.lock().unwrap().dirty().len(),
            member_states: sb
                .roles
                .iter()
                .enumerate()
                .map(|(i, r)| MemberStatus {
                    device: i,
                    path: self.slots[i].get().map(|m| m.name()),
                    state: if !self.slots[i].present() && r.state == RoleState::Active {
                        "missing"
                    } else {
                        r.state.as_str()
                    },
                    kind: r.kind.as_str(),
                    data_bytes: r.data_size,
                    rebuild_checkpoint: (r.state == RoleState::Rebuilding)
                        .then_some(r.rebuild_checkpoint),
                })
                .collect(),
            warnings: self.warnings.lock().unwrap().clone(),
        }
    }

    /// Replace the superblock (bumping events) on every live member.
    pub(crate) fn store_superblock(&self, new: Superblock) -> Result<()> {
        let mut sb = self.sb.lock().unwrap();
        let events = sb.events.max(new.events);
        *sb = new;
        sb.events = events;
        self.write_superblocks(&mut sb)
    }

    /// Attach `m` to slot `i` as a member being rebuilt from scratch.
    pub(crate) fn set_slot(&self, i: usize, m: Arc<dyn Member>) {
        let mut st = self.state.write().unwrap();
        self.slots[i].set(Some(m));
        st.members[i] = MemberState::rebuilding(0);
        self.refresh_in_sync(&st);
    }

    pub(crate) fn set_in_sync(&self, members: &[usize]) {
        let mut st = self.state.write().unwrap();
        for &m in members {
            st.members[m] = MemberState::InSync;
        }
        self.refresh_in_sync(&st);
    }

    /// Reads of several stripe plans at once: contiguous extents on a member are
    /// merged into one operation (rebuild and scrub stream through members).
    pub(crate) fn read_plans(&self, plans: &[StripePlan], bufs: &mut [StripeBufs]) -> Result<()> {
        let pieces = plan_extents(plans, |r| r.read);
        let groups = merge_extents(&pieces);
        let ops = groups
            .iter()
            .map(|g| {
                (
                    g.member,
                    IoOp::Read {
                        off: DATA_OFFSET + g.off,
                        len: g.len as usize,
                    },
                )
            })
            .collect();
        for (g, r) in groups.iter().zip(run_batch(&self.queues, ops)) {
            let data = match r {
                Ok(Some(d)) => d,
                Ok(None) => unreachable!("reads return data"),
                Err(e) => {
                    self.member_error(g.member, &e);
                    return Err(EngineError::TooManyFailures(format!(
                        "member {} failed during a rebuild or scrub",
                        g.member
                    )));
                }
            };
            for p in &pieces[g.first..g.first + g.count] {
                let at = (p.off - g.off) as usize;
                bufs[p.plan]
                    .run_slice(p.col, &p.run)
                    .copy_from_slice(&data[at..at + p.len as usize]);
            }
        }
        Ok(())
    }

    /// Writes of several stripe plans' `write` columns, merged like [`Array::read_plans`].
    /// `user` is the request's buffer (empty for rebuild): fully covered data
    /// columns are taken from it rather than from the buffers (core `write_source`).
    pub(crate) fn write_plans(
        &self,
        plans: &[StripePlan],
        bufs: &mut [StripeBufs],
        user: &[u8],
    ) -> Result<()> {
        let pieces = plan_extents(plans, |r| r.write);
        let groups = merge_extents(&pieces);
        let mut ops = Vec::with_capacity(groups.len());
        for g in &groups {
            // The group's pieces, lent to the member worker without a copy: from
            // the request (fully covered data columns) or the stripe buffers. Both
            // outlive run_batch below.
            let parts = pieces[g.first..g.first + g.count]
                .iter()
                .map(|p| {
                    let src = match exec::write_source(&plans[p.plan], &p.run, p.col, user) {
                        Some(src) => src,
                        None => {
                            let sb = &bufs[p.plan];
                            let a = (p.run.page - sb.lo) as usize * PAGE as usize;
                            &sb.cols[p.col][a..a + p.len as usize]
                        }
                    };
                    debug_assert_eq!(src.len() as u64, p.len);
                    Borrowed::new(src)
                })
                .collect();
            ops.push((
                g.member,
                IoOp::WriteParts {
                    off: DATA_OFFSET + g.off,
                    parts,
                },
            ));
        }
        let mut failed = Vec::new();
        for (g, r) in groups.iter().zip(run_batch(&self.queues, ops)) {
            if let Err(e) = r {
                self.member_error(g.member, &e);
                failed.push(g.member);
            }
        }
        match failed.first() {
            None => Ok(()),
            Some(m) => Err(EngineError::TooManyFailures(format!(
                "member {m} failed while writing"
            ))),
        }
    }

    pub(crate) fn lock_many(&self, stripes: &[u64]) -> Vec<MutexGuard<'_, ()>> {
        self.lock_stripes(stripes.iter().copied())
    }

    /// Requests the core says need no parity work: member extents straight from or
    /// into the user's buffer; several members in parallel for large requests.
    /// Returns false (nothing done, or a member failed) to fall back to planning.
    fn direct_io(&self, req: &Request, buf: UserBuf<'_>) -> bool {
        let planner = Planner::new(self.layout.as_ref(), WritePolicy::Md, Vec::new());
        let extents = {
            let st = self.state.read().unwrap();
            match planner.direct_extents(req, &st) {
                Some(e) => e,
                None => return false,
            }
        };
        let members: std::collections::BTreeSet<usize> = extents.iter().map(|e| e.0).collect();
        let parallel = members.len() > 1 && req.len >= (256 << 10);
        let failed = AtomicBool::new(false);
        let one = |m: usize, mo: u64, b: UserBuf<'_>| {
            let Some(member) = Some(&self.slots[m]).filter(|s| s.present()) else {
                failed.store(true, Ordering::Relaxed);
                return;
            };
            let r = match b {
                UserBuf::Read(out) => member.read_at(out, DATA_OFFSET + mo),
                UserBuf::Write(d) => member.write_at(d, DATA_OFFSET + mo),
            };
            if let Err(e) = r {
                self.member_error(m, &e);
                failed.store(true, Ordering::Relaxed);
            }
        };
        // One piece of the user buffer per extent, reads and writes alike.
        let pieces: Vec<(usize, u64, UserBuf<'_>)> = match buf {
            UserBuf::Read(out) => {
                // Split the buffer into disjoint pieces, in buffer order.
                let mut order: Vec<usize> = (0..extents.len()).collect();
                order.sort_by_key(|&i| extents[i].2);
                let mut rest: &mut [u8] = out;
                let mut at = 0u64;
                let mut v = Vec::with_capacity(extents.len());
                for i in order {
                    let (m, mo, bo, len) = extents[i];
                    let (_, tail) = std::mem::take(&mut rest).split_at_mut((bo - at) as usize);
                    let (piece, tail) = tail.split_at_mut(len as usize);
                    v.push((m, mo, UserBuf::Read(piece)));
                    rest = tail;
                    at = bo + len;
                }
                v
            }
            UserBuf::Write(data) => extents
                .iter()
                .map(|&(m, mo, bo, len)| {
                    (
                        m,
                        mo,
                        UserBuf::Write(&data[bo as usize..(bo + len) as usize]),
                    )
                })
                .collect(),
        };
        if parallel {
            // One thread per member, each doing its extents in order.
            let mut by_member: Vec<Vec<(u64, UserBuf<'_>)>> =
                (0..self.slots.len()).map(|_| Vec::new()).collect();
            for (m, mo, b) in pieces {
                by_member[m].push((mo, b));
            }
            std::thread::scope(|s| {
                for (m, list) in by_member
                    .into_iter()
                    .enumerate()
                    .filter(|(_, l)| !l.is_empty())
                {
                    let one = &one;
                    s.spawn(move || list.into_iter().for_each(|(mo, b)| one(m, mo, b)));
                }
            });
        } else {
            pieces.into_iter().for_each(|(m, mo, b)| one(m, mo, b));
        }
        !failed.load(Ordering::Relaxed)
    }

    /// Stripes `batch` are rebuilt on `targets`: from now on user writes to them
    /// must reach the targets too. Called with the batch's stripe locks held.
    pub(crate) fn mark_rebuilt(&self, targets: &[usize], batch: &[u64]) {
        let stripes = self.layout.stripe_count();
        let mut st = self.state.write().unwrap();
        for &t in targets {
            if let MemberState::Rebuilding {
                valid_below_stripe,
                done,
            } = &mut st.members[t]
            {
                let mut bits: Vec<u64> = match done.take() {
                    Some(d) => std::sync::Arc::try_unwrap(d).unwrap_or_else(|d| (*d).clone()),
                    None => vec![0; stripes.div_ceil(64) as usize],
                };
                for &s in batch {
                    bits[(s / 64) as usize] |= 1 << (s % 64);
                }
                while *valid_below_stripe < stripes
                    && bits[(*valid_below_stripe / 64) as usize] >> (*valid_below_stripe % 64) & 1
                        == 1
                {
                    *valid_below_stripe += 1;
                }
                *done = Some(std::sync::Arc::new(bits));
            }
        }
    }

    /// Record that users are doing I/O (read-mostly: the flag's cache line is only
    /// written when it changes).
    fn note_user_io(&self) {
        if !self.user_io.load(Ordering::Relaxed) {
            self.user_io.store(true, Ordering::Relaxed);
        }
    }

    fn refresh_in_sync(&self, st: &ArrayState) {
        self.all_in_sync.store(
            st.members.iter().all(|m| *m == MemberState::InSync),
            Ordering::Release,
        );
    }

    /// Members that hold chunks but are failed (or, with `rebuilding`, not in sync).
    /// A member whose chunks were all relocated to spare space does not count.
    pub fn out_members(&self, rebuilding: bool) -> usize {
        let st = self.state();
        (0..st.members.len())
            .filter(|&i| self.holds[i])
            .filter(|&i| match st.members[i] {
                MemberState::InSync => false,
                MemberState::Failed => true,
                MemberState::Rebuilding { .. } => rebuilding,
            })
            .count()
    }

    pub fn warnings(&self) -> Vec<String> {
        self.warnings.lock().unwrap().clone()
    }
}

/// The request's buffer: filled by reads, consumed by writes (never copied).
enum UserBuf<'a> {
    Read(&'a mut [u8]),
    Write(&'a [u8]),
}

/// Where a read lands: (column, first page, pages, direct user-buffer range).
type ReadDest = (usize, u32, u32, Option<(usize, usize)>);

/// Why a plan's execution stopped.
enum Retry {
    /// A member failed during the request: plan again with the new state.
    MemberFailed,
    Fatal(EngineError),
}
