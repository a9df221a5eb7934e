//! An assembled array: executes the core's plans on real members.
//!
//! Shape of one request: plan (core) -> lock the stripes -> mark the bitmap ->
//! read phase (parallel, per-member queues) -> arithmetic (core::exec) -> write
//! phase (parallel) -> unlock. A member I/O error marks the member faulty and the
//! request is planned again, degraded; beyond the redundancy the request fails.

use crate::bitmap::Bitmap;
use crate::error::{EngineError, Result};
use crate::format::{
    LayoutOptions, LogMode, MemberRole, RoleState, Superblock, BITMAP_OFFSET, DATA_OFFSET, SB_SIZE,
};
use crate::member::{AlignedBuf, ChecksumMember, Member};
use crate::queue::{run_batch, Borrowed, IoOp, MemberQueue};
use hetraid_core::exec::{self, StripeBufs};
use hetraid_core::iomap::{merge_extents, plan_extents};
use hetraid_core::layout::{build, Layout, LayoutSpec};
use hetraid_core::membership::{
    self, AssembleError, AssembleMode, Candidate, MemberTable, SlotState, Transition,
};
use hetraid_core::plan::{ArrayState, MemberState, Op, Plan, Planner, Request, StripePlan};
use hetraid_core::{MemberKind, WritePolicy};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

mod cell;
mod events;
mod spares;
pub use events::{log_event, OpProgress};
pub use spares::SpareStatus;
mod failure;
pub use cell::{ArrayCell, ChangeOptions, ChangeRate, Reopen};
mod assemble;
pub use assemble::{layout_of, recorded_health};
mod change_prepare;
mod create;
mod durability;
mod hpda;
mod io;
mod lifecycle;
mod living;
mod living_shrink;
mod restripe;
mod sitout;
mod writeback;
pub use living::{ChangeProgress, ChangeReport, ShrinkSteps};
mod status;
mod trim;
mod wbuf;

pub use hpda::HpdaStatus;
pub(crate) use lifecycle::{region_start, with_checksums};
pub use status::{Departed, LogDeviceStatus, LogStatus, MemberStatus, Mkfs, Status};
pub use trim::Trimmed;

use hetraid_core::units::PAGE;
pub(crate) const LOCK_SHARDS: usize = 4096;
/// Most stripe buffer sets kept for reuse.
const STRIPE_POOL_MAX: usize = 256;

/// How to create an array.
#[derive(Debug, Clone)]
pub struct CreateOptions {
    pub layout: LayoutOptions,
    pub chunk_bytes: u64,
    pub policy: WritePolicy,
    pub kinds: Vec<MemberKind>,
    /// Members are known to be all zero (freshly created files): skip the
    /// initial parity sync.
    pub assume_clean: bool,
    /// Overwrite members that carry another array's superblock.
    pub force: bool,
    /// Keep a crc32c per 4 KiB block and verify every read (format version 2).
    pub checksums: bool,
    /// A write log on separate devices (format version 3).
    pub log: Option<LogSpec>,
    /// Layouts with copies: how reads choose one (None: md).
    pub read_policy: Option<hetraid_core::readbalance::ReadPolicy>,
}

impl CreateOptions {
    /// The array these options ask for, as core's [`ArraySpec`] (whose
    /// `validate` holds the configuration rules).
    ///
    /// [`ArraySpec`]: hetraid_core::spec::ArraySpec
    pub fn spec(&self) -> hetraid_core::spec::ArraySpec {
        use hetraid_core::logconfig::LogOptions;
        let hpda = self.layout.kind() == Ok(hetraid_core::layout::LayoutKind::Hpda);
        let log = match &self.log {
            None => LogOptions::default(),
            // HPDA's `region` is how much of its own room the log uses.
            Some(l) => LogOptions {
                devices: l.devices.len(),
                region: l.region.filter(|_| !hpda),
                size: l.region.filter(|_| hpda),
                mode: Some(l.mode.name().into()),
            },
        };
        hetraid_core::spec::ArraySpec {
            layout: self.layout.clone(),
            chunk_bytes: self.chunk_bytes,
            kinds: self.kinds.clone(),
            log,
            checksums: self.checksums,
            write_buffer: false,
            read_policy: self.read_policy,
        }
    }
}

/// The write log an array is created with: one device, or two mirrored.
#[derive(Clone)]
pub struct LogSpec {
    pub devices: Vec<Arc<dyn Member>>,
    /// One per device, or empty (ssd).
    pub kinds: Vec<MemberKind>,
    pub mode: crate::format::LogMode,
    /// Or: keep the log on the members, this many bytes past the data area
    /// of the two fastest (`devices` then empty).
    pub region: Option<u64>,
}

/// The members that hold a log region: the fastest kinds first (nvram, ssd,
/// hdd), then the lowest slots; two when there are two members or more.
pub fn region_slots(kinds: &[MemberKind], n: usize) -> Vec<usize> {
    let rank = |k: MemberKind| match k {
        MemberKind::Nvram => 0,
        MemberKind::Ssd => 1,
        MemberKind::Hdd => 2,
    };
    let mut v: Vec<usize> = (0..n).collect();
    v.sort_by_key(|&i| (kinds.get(i).map_or(2, |&k| rank(k)), i));
    v.truncate(2);
    v
}

impl std::fmt::Debug for LogSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self.devices.iter().map(|d| d.name()).collect();
        f.debug_struct("LogSpec")
            .field("devices", &names)
            .field("mode", &self.mode)
            .finish()
    }
}

/// What an assembly is for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Access {
    /// Reads and writes: absent members are recorded as missing, a crash is
    /// recovered.
    #[default]
    ReadWrite,
    /// Reads only: nothing is written to any member.
    ReadOnly,
    /// `status`: nothing is written, and a dirty degraded array is shown (with a
    /// warning) rather than refused.
    Inspect,
}

/// How to assemble.
#[derive(Debug, Clone, Copy, Default)]
pub struct AssembleOptions {
    /// Start even when some members are stale (the freshest are brought back)
    /// or the array is dirty and degraded (MD's --force).
    pub force: bool,
    pub access: Access,
    /// Run without members the table holds in the array that were not given
    /// (mdadm's `--run`): they are recorded missing. Without it such an
    /// assembly is refused, naming them, so a forgotten path cannot degrade a
    /// healthy array. `Array::assemble` (library use, re-assembly of a set a
    /// command already checked) says yes.
    pub degraded: bool,
}

/// A fresh random device id (never 0).
pub fn new_device_id() -> u64 {
    let b = *uuid::Uuid::new_v4().as_bytes();
    crate::le::u64_at(&b, 0).max(1)
}

/// When user requests were last seen, for the pacer's "users active" rule
/// (`hetraid_core::pace::users_active`): the engine sees a flag the request
/// paths raise, and stamps the time it finds it raised.
pub(crate) struct UserActivity {
    epoch: std::time::Instant,
    /// Nanoseconds after `epoch` requests were last seen, +1 (0: never).
    seen_ns: std::sync::atomic::AtomicU64,
}

impl UserActivity {
    pub(crate) fn new() -> Self {
        Self {
            epoch: std::time::Instant::now(),
            seen_ns: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Take `flag` (raised by each request) and answer by the core's rule.
    pub(crate) fn observe(&self, flag: &AtomicBool) -> bool {
        let now = self.epoch.elapsed().as_nanos() as u64 + 1;
        if flag.swap(false, Ordering::Relaxed) {
            // Only forward: another lane may have stamped a later time.
            self.seen_ns.fetch_max(now, Ordering::Relaxed);
        }
        let seen = self.seen_ns.load(Ordering::Relaxed);
        // Saturating: a lane that read the clock before another stamped a
        // later time sees "just now" (a plain subtraction overflowed there,
        // and the rebuild panicked in debug builds).
        hetraid_core::pace::users_active(false, (seen != 0).then(|| now.saturating_sub(seen)))
    }
}

/// What every read looks at, in one cache line. Spread over the array's
/// other fields (as Rust orders them by size) they took five lines, each a
/// miss after the kernel's `pread` has run through the caches.
#[repr(C, align(64))]
pub(crate) struct ReadHot {
    pub(crate) slots: Box<[Arc<crate::member::Slot>]>,
    /// The layout's read fast path map (`Layout::direct_map`), for reads
    /// inside one chunk while every member is in sync.
    pub(crate) direct_map: Option<hetraid_core::layout::DirectMap>,
    /// The write buffer, once started (`serve --write-buffer`).
    pub(crate) wbuf: std::sync::OnceLock<Arc<wbuf::WriteBuffer>>,
    /// Every member in sync: the read fast path needs no lock.
    pub(crate) all_in_sync: AtomicBool,
    /// Set by user I/O, cleared by the rebuild throttle each time it looks.
    pub(crate) user_io: AtomicBool,
    /// Set by user I/O, cleared by the idle reclaimer each time it looks.
    pub(crate) io_seen: AtomicBool,
    /// The write log is in write-back mode (reads look it up first).
    pub(crate) write_back_log: bool,
    /// Some member sits out reads (`Array::sat_out`).
    pub(crate) sat_out_any: AtomicBool,
    /// The sit-out looker waits for user I/O (`changes::io_fd`).
    pub(crate) sit_out_waits: AtomicBool,
}
const _: () = assert!(
    std::mem::size_of::<ReadHot>() == 64,
    "ReadHot is one cache line"
);

pub struct Array {
    pub(crate) hot: ReadHot,
    /// The pacer's view of `hot.user_io`.
    pub(crate) activity: UserActivity,
    /// Assembled read-only (Access::ReadOnly or Inspect): nothing is written.
    read_only: bool,
    sb: Mutex<Superblock>,
    layout: Box<dyn Layout>,
    queues: Vec<Option<MemberQueue>>,
    pub(crate) state: RwLock<ArrayState>,
    locks: Vec<Mutex<()>>,
    pub(crate) bitmap: Mutex<Bitmap>,
    /// Block checksums on every member (format version 2).
    pub(crate) checksums: bool,
    /// The write log (format version 3): every stripe update is logged
    /// before the members are written.
    pub(crate) log: Option<crate::log::Log>,
    /// One write-back reclaim at a time.
    pub(crate) reclaiming: Mutex<()>,
    /// Write-back writers log under the shared side; one that found no
    /// room reclaims and logs under the exclusive side (`with_log_room`).
    pub(crate) log_admission: std::sync::RwLock<()>,
    /// The log checkpoint the members' superblocks last recorded
    /// (`note_log_position`'s fast path).
    pub(crate) log_seq_noted: std::sync::atomic::AtomicU64,
    /// HPDA: the monitor, the director's counters (None: another layout).
    pub(crate) hpda: Option<hpda::HpdaRuntime>,
    /// Layouts with copies: the read policy (`ReadPolicy::code`) and whether
    /// reads balance (a policy other than `first`).
    pub(crate) read_policy: std::sync::atomic::AtomicU8,
    pub(crate) balance_reads: AtomicBool,
    /// Member kinds (fixed for the array's life).
    kinds: Vec<MemberKind>,
    /// The superblock says dirty (log arrays mark it on their first write;
    /// this spares the write path the superblock's lock afterwards).
    pub(crate) marked_dirty: AtomicBool,
    /// Benchmarks only ([`Array::without_bitmap_for_benchmarks`]): writes
    /// skip the write-intent bitmap.
    pub(crate) bitmap_off_for_bench: AtomicBool,
    /// What assembly decided is not written yet (absent members recorded
    /// missing, forced members, the freshest table for members one event
    /// behind, moved paths): the first write of any kind writes it first
    /// (`commit`). A command that refuses after assembling leaves every
    /// member byte-identical.
    pub(crate) uncommitted: AtomicBool,
    /// The superblock assembly decided, while `uncommitted` and when it
    /// differs from the members' (missing recorded, a fresher table): it is
    /// written as its own update before one that bumps the event counter
    /// again, so a kill between two members' writes leaves them within one
    /// event, as when assembly wrote it at once.
    pub(crate) assembled_sb: Mutex<Option<Superblock>>,
    /// Slots no given member claimed at assembly (`--degraded`).
    pub(crate) not_given: Vec<usize>,
    /// The annex changed while uncommitted: written at the next chance.
    pub(crate) annex_due: AtomicBool,
    /// Checksum mismatches per member since assembly.
    pub(crate) checksum_errors: Vec<std::sync::atomic::AtomicU32>,
    /// A rebuild is running (one at a time).
    pub(crate) rebuild_running: AtomicBool,
    healthy_state: ArrayState,
    warnings: Mutex<Vec<String>>,
    /// Name, last known member paths, events (`crate::annex`); None when the
    /// bitmap leaves no room for it.
    pub(crate) annex: Mutex<Option<crate::annex::Annex>>,
    /// The rebuild or scrub running now (`status` shows it).
    pub(crate) progress: Mutex<Option<events::OpProgress>>,
    /// Hot spares given at assembly (or added since) that the array lists.
    pub(crate) spares: Mutex<Vec<spares::SpareDev>>,
    /// Stop long operations (rebuild) at their next batch: the server is
    /// shutting down. They checkpoint and can resume.
    pub(crate) cancel: AtomicBool,
    /// Per member, chunks by role (computed on first `status`).
    pub(crate) usage: std::sync::OnceLock<Vec<hetraid_core::layout::MemberUsage>>,
    /// Does member i hold any chunk (false once all of it was relocated)?
    holds: Vec<bool>,
    /// Read errors per member since assembly (MD's read-error count).
    read_errors: Vec<std::sync::atomic::AtomicU32>,
    /// Write errors per member since assembly.
    write_errors: Vec<std::sync::atomic::AtomicU32>,
    /// The users' I/O (a server's requests) while measuring, and since
    /// when measuring is on (`measure_io`).
    user_io: crate::iostat::IoCounters,
    measuring_since: std::sync::OnceLock<std::time::Instant>,
    /// Per member, the errors counted before this assembly and not cleared
    /// (the annex's): status shows them plus this run's.
    errors_before: Mutex<Vec<crate::annex::ErrorCounts>>,
    /// Reusable stripe buffers for the write path.
    stripe_pool: Mutex<Vec<StripeBufs>>,
    /// Write policy and per-member service models (fixed for the array's life).
    policy: WritePolicy,
    service: Vec<hetraid_core::ServiceModel>,
    /// Slow-member sit-out: the rule's state (from the first look), and
    /// the members sat out (bit m of the 128).
    pub(crate) sit_out: Mutex<Option<sitout::SitOutState>>,
    pub(crate) sat_out_mask: [std::sync::atomic::AtomicU64; 2],
    /// Member reads counted at the last look (`Array::sit_out_idle`).
    pub(crate) sit_out_reads_seen: std::sync::atomic::AtomicU64,
}

/// The layout with the superblock's relocations applied.
pub(crate) fn relocated(layout: Box<dyn Layout>, sb: &Superblock) -> Box<dyn Layout> {
    if sb.relocations.is_empty() {
        return layout;
    }
    // A distributed spare relocates whole members by the layout's rule: one
    // record of length 0 per member, in failure order (docs/FORMAT.md).
    if layout.distributed_spare() {
        let members: Vec<usize> = sb
            .relocations
            .iter()
            .filter(|r| r.len == 0)
            .map(|r| r.from_member as usize)
            .collect();
        if let Some(l) = layout.relocated(&members) {
            return l;
        }
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

pub(crate) fn read_sb(
    m: &dyn Member,
) -> Result<std::result::Result<Superblock, crate::format::FormatError>> {
    let mut b = AlignedBuf::zeroed(SB_SIZE);
    if m.len() < SB_SIZE as u64 {
        return Ok(Err(crate::format::FormatError::NoMagic));
    }
    m.read_at(&mut b, 0).map_err(|e| io_err(m, e))?;
    Ok(Superblock::decode(&b))
}

impl Array {
    /// Ask running rebuilds to stop at their next batch (shutdown); they
    /// record where they got and resume from there next time.
    pub fn cancel_long_operations(&self) {
        self.cancel.store(true, Ordering::Relaxed);
    }

    pub fn layout(&self) -> &dyn Layout {
        self.layout.as_ref()
    }

    pub fn capacity(&self) -> u64 {
        self.layout.capacity_bytes()
    }

    /// Is a member in slot `i`?
    pub fn present(&self, i: usize) -> bool {
        self.hot.slots.get(i).is_some_and(|s| s.present())
    }

    /// The member in slot `i`, if any.
    pub fn member(&self, i: usize) -> Option<Arc<dyn Member>> {
        self.hot.slots.get(i).and_then(|s| s.get())
    }

    pub fn slot_count(&self) -> usize {
        self.hot.slots.len()
    }

    pub fn state(&self) -> ArrayState {
        self.state.read().unwrap().clone()
    }

    pub fn superblock(&self) -> Superblock {
        self.sb.lock().unwrap().clone()
    }

    pub(crate) fn planner(&self) -> Planner<'_> {
        Planner::new(self.layout.as_ref(), self.policy, self.service.clone())
            .with_sat_out(self.sat_out())
    }

    pub(crate) fn lock_stripes(
        &self,
        stripes: impl Iterator<Item = u64>,
    ) -> Vec<MutexGuard<'_, ()>> {
        let mut shards: Vec<usize> = stripes.map(|s| (s % LOCK_SHARDS as u64) as usize).collect();
        shards.sort_unstable();
        shards.dedup();
        shards
            .into_iter()
            .map(|i| self.locks[i].lock().unwrap())
            .collect()
    }

    /// [`Array::lock_stripes`] for one stripe, without the guard list.
    pub(crate) fn lock_stripe(&self, stripe: u64) -> MutexGuard<'_, ()> {
        self.locks[(stripe % LOCK_SHARDS as u64) as usize]
            .lock()
            .unwrap()
    }

    /// Put `m` into slot `i` (the state machine's Attach follows).
    pub(crate) fn set_slot(&self, i: usize, m: Arc<dyn Member>) {
        let _st = self.state.write().unwrap();
        self.hot.slots[i].set(Some(m));
    }

    /// Put back what slot `i` held (a refused attach, or a removed member).
    pub(crate) fn restore_slot(&self, i: usize, m: Option<Arc<dyn Member>>) {
        let _st = self.state.write().unwrap();
        self.hot.slots[i].set(m);
    }

    pub(crate) fn policy(&self) -> WritePolicy {
        self.policy
    }

    pub(crate) fn queues(&self) -> &[Option<MemberQueue>] {
        &self.queues
    }

    pub(crate) fn lock_many(&self, stripes: &[u64]) -> Vec<MutexGuard<'_, ()>> {
        self.lock_stripes(stripes.iter().copied())
    }

    /// Stripes `batch` are rebuilt on `targets`: from now on user writes to them
    /// must reach the targets too. Called with the batch's stripe locks held.
    /// Returns false, marking nothing, when a target no longer holds the device
    /// the rebuild is filling (it was failed or replaced meanwhile).
    pub(crate) fn mark_rebuilt(&self, targets: &[usize], devices: &[u64], batch: &[u64]) -> bool {
        let sb = self.sb.lock().unwrap();
        let still = targets
            .iter()
            .zip(devices)
            .all(|(&t, &d)| sb.roles[t].state == RoleState::Rebuilding && sb.roles[t].device == d);
        if !still {
            return false;
        }
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
        true
    }

    /// Record that users are doing I/O (read-mostly: the flag's cache line is only
    /// written when it changes).
    /// Attach the write log (the read path's flag follows its mode).
    pub(crate) fn set_log(&mut self, log: Option<crate::log::Log>) {
        self.hot.write_back_log = log.as_ref().is_some_and(|l| l.mode() == LogMode::WriteBack);
        self.log = log;
    }

    #[inline]
    pub(crate) fn note_user_io(&self) {
        if !self.hot.user_io.load(Ordering::Relaxed) {
            self.hot.user_io.store(true, Ordering::Relaxed);
        }
        if !self.hot.io_seen.load(Ordering::Relaxed) {
            self.hot.io_seen.store(true, Ordering::Relaxed);
        }
        if self.hot.sit_out_waits.load(Ordering::Relaxed) {
            self.wake_sit_out();
        }
    }

    /// Are users active, by the core's rule (`pace::users_active`)? Requests
    /// since the last look are seen now; the window runs from then.
    pub(crate) fn users_active(&self) -> bool {
        self.activity.observe(&self.hot.user_io)
    }

    /// Was there user I/O since the last call? (The idle reclaimer asks.)
    pub fn take_io_seen(&self) -> bool {
        self.hot.io_seen.swap(false, Ordering::Relaxed)
    }

    /// Write-back: keep at most `bytes` of logged writes in memory
    /// (`serve --log-memory`).
    pub fn set_log_memory(&self, bytes: u64) {
        if let Some(l) = &self.log {
            l.set_memory_max(bytes);
        }
    }

    /// The array keeps a write-back log.
    pub fn has_write_back_log(&self) -> bool {
        self.log
            .as_ref()
            .is_some_and(|l| l.mode() == LogMode::WriteBack)
    }

    pub(crate) fn refresh_in_sync(&self, st: &ArrayState) {
        self.hot.all_in_sync.store(
            st.members.iter().all(|m| *m == MemberState::InSync),
            Ordering::Release,
        );
    }

    /// Keep the bitmap's bits (no clearing after flushes): a member that
    /// holds data is not in sync, so every region written meanwhile is one
    /// it lacks if it comes back (re-add).
    pub(crate) fn keeps_bitmap(&self) -> bool {
        if self.hot.all_in_sync.load(Ordering::Acquire) {
            return false;
        }
        let st = self.state.read().unwrap();
        (0..st.members.len()).any(|i| self.holds[i] && st.members[i] != MemberState::InSync)
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

    /// Does member `i` hold any chunk? (HPDA's HDD-2 holds only a log copy.)
    pub fn holds_chunks(&self, i: usize) -> bool {
        self.holds.get(i).copied().unwrap_or(false)
    }

    /// RAIDX: the bundle table as (member, slot) places (the allocator's,
    /// while chunks do not move).
    pub(crate) fn layout_places(
        &self,
    ) -> Result<Vec<Vec<hetraid_core::layout::raidx_grow::Place>>> {
        Ok(living::table_now(&self.superblock())?.0.places)
    }

    /// The read policy in force.
    pub fn read_policy(&self) -> hetraid_core::readbalance::ReadPolicy {
        hetraid_core::readbalance::ReadPolicy::from_code(self.read_policy.load(Ordering::Relaxed))
            .unwrap_or_default()
    }

    /// Does the layout keep copies (reads may choose one)?
    pub fn keeps_copies(&self) -> bool {
        hetraid_core::readbalance::keeps_copies(self.layout.as_ref())
    }

    /// Use `policy` for reads from now on (`persist`: record it in the
    /// superblock, as `create --read-policy` does; otherwise for this run,
    /// as `serve --read-policy`). Refused for layouts without copies.
    pub fn set_read_policy(
        &self,
        policy: hetraid_core::readbalance::ReadPolicy,
        persist: bool,
    ) -> Result<()> {
        hetraid_core::readbalance::applies(self.layout.as_ref())
            .map_err(|e| EngineError::Refused(format!("--read-policy {e}")))?;
        self.apply_read_policy(policy);
        if persist && !self.read_only {
            let mut sb = self.sb.lock().unwrap();
            sb.read_policy = policy;
            self.persist(&mut sb)?;
        }
        Ok(())
    }

    /// Count I/O from now on, per member and for the users (iostat,
    /// metrics): a server or a command holding the array turns it on.
    pub fn measure_io(&self) {
        self.measuring_since.get_or_init(std::time::Instant::now);
        self.hot.slots.iter().for_each(|s| s.measure(true));
    }

    /// The users' counters, while measuring (the server counts its
    /// requests in them).
    #[inline]
    pub fn user_io(&self) -> Option<&crate::iostat::IoCounters> {
        self.measuring_since.get().map(|_| &self.user_io)
    }

    pub(crate) fn apply_read_policy(&self, policy: hetraid_core::readbalance::ReadPolicy) {
        let on = self.keeps_copies() && policy != hetraid_core::readbalance::ReadPolicy::First;
        self.read_policy.store(policy.code(), Ordering::Relaxed);
        self.balance_reads.store(on, Ordering::Relaxed);
        self.hot.slots.iter().for_each(|s| s.track(on));
    }

    /// The members' state as the read policy sees it.
    pub(crate) fn member_loads(&self) -> Vec<hetraid_core::readbalance::MemberLoad> {
        self.hot
            .slots
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let (pending, head) = s.load();
                hetraid_core::readbalance::MemberLoad {
                    pending,
                    head: head.saturating_sub(DATA_OFFSET),
                    rotational: self.kinds.get(i).is_none_or(|k| *k == MemberKind::Hdd),
                    bytes_per_s: self.service.get(i).map_or(0, |m| m.bytes_per_s),
                }
            })
            .collect()
    }

    pub fn warnings(&self) -> Vec<String> {
        self.warnings.lock().unwrap().clone()
    }
}

#[cfg(test)]
mod user_activity_tests {
    use super::*;

    #[test]
    fn a_stamp_later_than_this_lanes_clock_counts_as_just_now() {
        // Two rebuild lanes: one reads the clock, the other stamps a later
        // time before the first loads the stamp (this overflowed once).
        let a = UserActivity::new();
        a.seen_ns.store(u64::MAX / 2, Ordering::Relaxed);
        assert!(a.observe(&AtomicBool::new(false)));
        // And a stamp never moves back.
        a.observe(&AtomicBool::new(true));
        assert_eq!(a.seen_ns.load(Ordering::Relaxed), u64::MAX / 2);
    }
}
