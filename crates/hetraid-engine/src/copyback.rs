//! Copy-back: the chunks a rebuild put into spare space go back onto a
//! replacement, in the core's batches, crash-safe at every step.

use crate::annex::EventKind;
use crate::array::Array;
use crate::error::{EngineError, Result};
use crate::format::{RoleState, Superblock};
use crate::member::{AlignedBuf, Member};
use crate::rebuild::*;
use hetraid_core::control::copyback::CopyWatch;
use hetraid_core::control::sweep::Step;
use hetraid_core::membership::Transition;
use hetraid_core::plan::{ArrayState, MemberState};
use hetraid_core::rebuild::CopyBack;
use std::sync::{Arc, Mutex};

impl Array {
    /// Copy the member rebuilt into distributed spare space last back onto
    /// `new`, put in its slot ("rebalance", as dRAID calls it): each of its
    /// chunks is read from its spare home (one read, where a rebuild reads
    /// the rest of the group) and written to its own place on `new`, and
    /// the spare chunks are free again. Offline (the array is consumed and
    /// returned reassembled). Crash-safe: the attach records the slot as
    /// rebuilding with the relocation dropped, in one superblock update, so
    /// a copy cut short leaves a member to rebuild (`hetraid rebuild`
    /// reconstructs it from parity; the spare homes are never trusted
    /// after that), and the activation is one more update.
    pub fn copy_back(
        self,
        new: Arc<dyn Member>,
        force: bool,
        progress: &(dyn Fn(RebuildProgress) + Sync),
    ) -> Result<(Array, CopyBackReport)> {
        // Offline: nobody else uses the array; as fast as the members go.
        let unpaced = hetraid_core::pace::PaceLimits {
            min_bps: 0,
            max_bps: 0,
        };
        self.copy_back_paced(new, force, unpaced, progress)
    }

    /// [`Array::copy_back`] held to `limits` (MD's two speeds).
    pub fn copy_back_paced(
        self,
        new: Arc<dyn Member>,
        force: bool,
        limits: hetraid_core::pace::PaceLimits,
        progress: &(dyn Fn(RebuildProgress) + Sync),
    ) -> Result<(Array, CopyBackReport)> {
        let plan = hetraid_core::rebuild::copy_back_moves(self.layout())
            .map_err(|e| EngineError::Refused(e.to_string()))?;
        let f = plan.member;
        let sb = self.superblock();
        let state = self.state();
        check_copy_back(&self, &plan, &sb, &state)?;
        let t0 = std::time::Instant::now();
        let old_path = self.path_of(f).unwrap_or_default();
        // One update: the slot takes `new` (rebuilding from stripe 0) and the
        // last relocation is dropped, so the layout in force is the restored
        // one from here on.
        self.replace_editing(f, new, force, &|s| drop_relocation(s, f))?;
        let target = self.member(f).ok_or_else(|| {
            EngineError::Refused(format!("slot {f} holds no device after the attach"))
        })?;
        let chunk = self.layout().chunk_bytes();
        let total = plan.moves.len() as u64;
        self.copy_moves(&plan, target.as_ref(), progress, limits, None)?;
        target.flush().map_err(|e| EngineError::Io {
            member: target.name(),
            source: e,
        })?;
        let device = self.superblock().roles[f].device;
        self.transition(Transition::FinishRebuild { slot: f, device })?;
        self.record_member(
            EventKind::RebuildFinished,
            f,
            [
                total,
                (t0.elapsed().as_secs_f64() * 1000.0) as u64,
                total * chunk,
            ],
        );
        let path = self.path_of(f).unwrap_or_default();
        let members: Vec<Arc<dyn Member>> = (0..self.slot_count())
            .filter(|&i| self.superblock().roles[i].state.is_in())
            .filter_map(|i| self.member(i))
            .collect();
        drop(self);
        let array = Array::assemble(members)?;
        Ok((
            array,
            CopyBackReport {
                member: f,
                path,
                old_path,
                chunks: total,
                bytes: total * chunk,
                seconds: t0.elapsed().as_secs_f64(),
                recopied: 0,
            },
        ))
    }

    /// Copy the moves of `plan` onto `target` as the core's copy-back sweep
    /// says (`control::copyback`): its batches, `COPY_BACK_BATCHES_IN_FLIGHT`
    /// lanes (one writes a batch while another reads the next, as the
    /// simulator's jobs), paced by `limits` under the one "users are
    /// active" rule. With `watch` (users writing meanwhile) each batch's
    /// moves are started before their spare homes are read.
    pub(crate) fn copy_moves(
        &self,
        plan: &CopyBack,
        target: &dyn Member,
        progress: &(dyn Fn(RebuildProgress) + Sync),
        limits: hetraid_core::pace::PaceLimits,
        watch: Option<&Mutex<CopyWatch>>,
    ) -> Result<()> {
        let t0 = std::time::Instant::now();
        let chunk = self.layout().chunk_bytes();
        let total = plan.moves.len() as u64;
        let sweep = Mutex::new(hetraid_core::control::copyback::sweep(plan, limits));
        let lanes = sweep.lock().unwrap().spec().lanes;
        let error: Mutex<Option<EngineError>> = Mutex::new(None);
        let lane = || {
            let mut buf = AlignedBuf::zeroed(0);
            // Bounded: each round takes a batch (finitely many), waits as
            // the pacer says (the average rate falls as time passes), or
            // ends; an error stops every lane.
            loop {
                let step = sweep.lock().unwrap().next(
                    0,
                    t0.elapsed().as_nanos() as u64,
                    self.users_active(),
                );
                let (first, len) = match step {
                    Step::Batch { first, len } => (first, len),
                    Step::Wait(ns) => {
                        std::thread::sleep(std::time::Duration::from_nanos(ns));
                        continue;
                    }
                    Step::Busy => {
                        std::thread::sleep(std::time::Duration::from_millis(1));
                        continue;
                    }
                    Step::Finished => return,
                };
                if let Some(w) = watch {
                    w.lock().unwrap().start(first, len);
                }
                if let Err(e) = self.copy_batch(&plan.moves[first..first + len], target, &mut buf) {
                    error.lock().unwrap().get_or_insert(e);
                    let mut s = sweep.lock().unwrap();
                    s.stop();
                    s.done(0, 0);
                    return;
                }
                let done = {
                    let mut s = sweep.lock().unwrap();
                    s.done(0, len);
                    s.stripes_done()
                };
                // Counted in moves (a chunk each), so the bytes and the
                // total agree.
                progress(RebuildProgress {
                    stripes_done: done,
                    stripes_total: total,
                    bytes_done: done * chunk,
                    elapsed_s: t0.elapsed().as_secs_f64(),
                });
            }
        };
        std::thread::scope(|sc| {
            for _ in 0..lanes {
                sc.spawn(lane);
            }
        });
        match error.into_inner().unwrap() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Copy `moves` onto `target`: every spare home read, then every place
    /// written.
    pub(crate) fn copy_batch(
        &self,
        moves: &[hetraid_core::layout::Move],
        target: &dyn Member,
        buf: &mut AlignedBuf,
    ) -> Result<()> {
        let cb = self.layout().chunk_bytes() as usize;
        if buf.len() < moves.len() * cb {
            *buf = AlignedBuf::zeroed(moves.len() * cb);
        }
        for (k, mv) in moves.iter().enumerate() {
            let src = self.member(mv.from.member).ok_or_else(|| {
                EngineError::Refused(format!(
                    "member {} is gone; the copy-back stopped (run hetraid rebuild)",
                    mv.from.member
                ))
            })?;
            src.read_at(
                &mut buf[k * cb..(k + 1) * cb],
                crate::format::DATA_OFFSET + mv.from.offset,
            )
            .map_err(|e| EngineError::Io {
                member: src.name(),
                source: e,
            })?;
        }
        for (k, mv) in moves.iter().enumerate() {
            target
                .write_at(
                    &buf[k * cb..(k + 1) * cb],
                    crate::format::DATA_OFFSET + mv.to.offset,
                )
                .map_err(|e| EngineError::Io {
                    member: target.name(),
                    source: e,
                })?;
        }
        Ok(())
    }

    /// Copy the moves `which` (dirty ones) again, a core batch at a time.
    pub(crate) fn copy_again(
        &self,
        plan: &CopyBack,
        which: &[usize],
        target: &dyn Member,
    ) -> Result<()> {
        let mut buf = AlignedBuf::zeroed(0);
        for part in which.chunks(plan.batch_moves()) {
            let moves: Vec<hetraid_core::layout::Move> =
                part.iter().map(|&i| plan.moves[i]).collect();
            self.copy_batch(&moves, target, &mut buf)?;
        }
        Ok(())
    }
}

/// Drop the relocation of slot `f` into spare space (the last one made).
fn drop_relocation(s: &mut Superblock, f: usize) {
    if let Some(k) = s
        .relocations
        .iter()
        .rposition(|r| r.len == 0 && r.from_member as usize == f)
    {
        s.relocations.remove(k);
    }
}

impl Array {
    /// A copy-back onto `new` while users run, checked before anything is
    /// written: the plan. As the offline one's checks, and `new` fits the
    /// slot and is not another array's member (unless `force`).
    pub(crate) fn copy_back_checked(&self, new: &dyn Member, force: bool) -> Result<CopyBack> {
        let plan = hetraid_core::rebuild::copy_back_moves(self.layout())
            .map_err(|e| EngineError::Refused(e.to_string()))?;
        let sb = self.superblock();
        check_copy_back(self, &plan, &sb, &self.state())?;
        self.check_slot_takes(&sb, plan.member, new)?;
        self.check_replacement(new, &sb, force)?;
        Ok(plan)
    }

    /// The copy is on `new` (flushed): it takes the slot with the
    /// relocation dropped (rebuilding from stripe 0: a crash here leaves a
    /// member to rebuild from parity), then is in sync. Two superblock
    /// updates.
    pub(crate) fn attach_copied(
        &self,
        plan: &CopyBack,
        new: Arc<dyn Member>,
        force: bool,
        seconds: f64,
    ) -> Result<()> {
        let f = plan.member;
        self.replace_editing(f, new, force, &|s| drop_relocation(s, f))?;
        let device = self.superblock().roles[f].device;
        self.transition(Transition::FinishRebuild { slot: f, device })?;
        let total = plan.moves.len() as u64;
        self.record_member(
            EventKind::RebuildFinished,
            f,
            [
                total,
                (seconds * 1000.0) as u64,
                total * self.layout().chunk_bytes(),
            ],
        );
        Ok(())
    }
}

/// The members as given, each telling `watch` of the writes it takes
/// (after they are done): a served copy-back's array runs on these.
pub(crate) fn watched(
    members: &[Arc<dyn Member>],
    watch: &Arc<Mutex<CopyWatch>>,
) -> Result<Vec<Arc<dyn Member>>> {
    members
        .iter()
        .map(|m| {
            let (slot, data) = match crate::array::read_sb(m.as_ref())? {
                Ok(sb) => (sb.member as usize, sb.data_offset),
                // Not a member (a spare): nothing of the copy lives there.
                Err(_) => (usize::MAX, crate::format::DATA_OFFSET),
            };
            Ok(Arc::new(WatchedMember {
                inner: m.clone(),
                slot,
                data,
                watch: watch.clone(),
            }) as Arc<dyn Member>)
        })
        .collect()
}

/// A member whose writes and discards a copy-back watches. Each is told
/// after it is done: a copy that read the spare home before the write
/// landed then finds its move started, and copies it again.
struct WatchedMember {
    inner: Arc<dyn Member>,
    slot: usize,
    /// Where the data area starts on the device: past the metadata and,
    /// with block checksums (which sit above this wrapper), their area.
    /// Writes before it (metadata, checksum pages) move no chunk.
    data: u64,
    watch: Arc<Mutex<CopyWatch>>,
}

impl WatchedMember {
    fn told(&self, off: u64, len: u64) {
        let data = self.data;
        let end = off + len;
        if end > data {
            let start = off.max(data);
            self.watch
                .lock()
                .unwrap()
                .written(self.slot, start - data, end - start);
        }
    }
}

impl Member for WatchedMember {
    fn read_at(&self, buf: &mut [u8], off: u64) -> std::io::Result<()> {
        self.inner.read_at(buf, off)
    }
    fn write_at(&self, buf: &[u8], off: u64) -> std::io::Result<()> {
        self.inner.write_at(buf, off)?;
        self.told(off, buf.len() as u64);
        Ok(())
    }
    fn write_vectored_at(&self, parts: &[&[u8]], off: u64) -> std::io::Result<()> {
        self.inner.write_vectored_at(parts, off)?;
        self.told(off, parts.iter().map(|p| p.len() as u64).sum());
        Ok(())
    }
    fn flush(&self) -> std::io::Result<()> {
        self.inner.flush()
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn name(&self) -> String {
        self.inner.name()
    }
    fn rehash(&self, off: u64, len: u64) -> std::io::Result<()> {
        self.inner.rehash(off, len)
    }
    fn discard(&self, off: u64, len: u64) -> std::io::Result<bool> {
        let r = self.inner.discard(off, len)?;
        self.told(off, len);
        Ok(r)
    }
    fn stored(&self, off: u64, len: u64) -> bool {
        self.inner.stored(off, len)
    }
    // `plain_file` stays None: every read goes through `read_at` (only
    // writes are watched, but nothing may bypass this wrapper).
}

/// A copy-back is refused, before anything is written, unless the slot was
/// retired into spare space and every spare home can be read.
fn check_copy_back(
    a: &Array,
    plan: &hetraid_core::rebuild::CopyBack,
    sb: &Superblock,
    state: &ArrayState,
) -> Result<()> {
    let f = plan.member;
    // Every spare home read must be readable; another member failed
    // meanwhile may wait (its rebuild can use the spare space this
    // frees).
    let mut sources: Vec<usize> = plan.moves.iter().map(|m| m.from.member).collect();
    sources.sort_unstable();
    sources.dedup();
    if let Some(&i) = sources
        .iter()
        .find(|&&i| state.members[i] != MemberState::InSync)
    {
        return Err(EngineError::Refused(format!(
            "member {i} ({}) holds spare chunks of member {f} and is {}; rebuild it first",
            a.path_of(i).unwrap_or_default(),
            sb.roles[i].state.as_str()
        )));
    }
    if sb.roles[f].state != RoleState::Removed {
        return Err(EngineError::Refused(format!(
            "slot {f} is {}, not retired into spare space; nothing to copy back",
            sb.roles[f].state.as_str()
        )));
    }
    Ok(())
}
