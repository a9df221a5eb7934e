//! Replace, rebuild and scrub on an assembled array.
//!
//! A rebuild runs the core's schedule: one thread per stream, streams reading
//! disjoint member sets (S2-RAID: one per affected subRAID), each stripe under its
//! stripe lock. Speed follows MD's two knobs: at most `max_speed` bytes/s, and
//! `min_speed` while user I/O is running. Progress is checkpointed in the
//! superblocks as the largest prefix of rebuilt stripes, so a restarted rebuild
//! resumes there. While it runs, the member state carries the exact set of rebuilt
//! stripes (updated under the stripe locks), so user writes to stripes already
//! rebuilt reach the new member and writes to the others are rebuilt from the
//! surviving members later: the rebuild is online.

use crate::annex::EventKind;
use crate::array::Array;
use crate::error::{EngineError, Result};
use crate::format::RoleState;
use crate::member::Member;
use hetraid_core::control::sweep::{Step, Stripes, Sweep, SweepSpec};
use hetraid_core::exec::{self, StripeBufs};
use hetraid_core::membership::Transition;
use hetraid_core::plan::{ArrayState, MemberState, Planner};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy)]
pub struct RebuildOptions {
    /// Bytes per second while user I/O runs (MD speed_limit_min; default 1 MB/s).
    pub min_speed: u64,
    /// Bytes per second at most (MD speed_limit_max; default 200 MB/s; 0 = unlimited).
    pub max_speed: u64,
    /// Stop after this many stripes (tests of resumption); None = run to the end.
    pub stop_after: Option<u64>,
    /// What the two limits hold: the whole rebuild (MD on one device) or
    /// each parallel stream (an md device per S2-RAID subRAID).
    pub pace: hetraid_core::pace::PaceScope,
}

impl Default for RebuildOptions {
    fn default() -> Self {
        Self {
            min_speed: hetraid_core::pace::MD_DEFAULT.min_bps,
            max_speed: hetraid_core::pace::MD_DEFAULT.max_bps,
            stop_after: None,
            pace: hetraid_core::pace::PaceScope::Array,
        }
    }
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct RebuildProgress {
    pub stripes_done: u64,
    pub stripes_total: u64,
    pub bytes_done: u64,
    pub elapsed_s: f64,
}

#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct RebuildReport {
    pub members: Vec<usize>,
    /// The paths of `members` (the devices rebuilt, or the failed ones
    /// whose chunks moved to spare space).
    #[serde(default)]
    pub paths: Vec<String>,
    pub streams: usize,
    pub stripes: u64,
    pub bytes: u64,
    pub seconds: f64,
    pub completed: bool,
    /// Per stream (in schedule order): seconds until its last batch was
    /// written (a stream whose target another stream reads ends later).
    #[serde(default)]
    pub stream_seconds: Vec<f64>,
}

/// What a copy-back did.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CopyBackReport {
    /// The slot that took the replacement.
    pub member: usize,
    /// The replacement's path, and the path of the device that left the slot.
    pub path: String,
    pub old_path: String,
    /// Chunks copied from spare space, and their bytes.
    pub chunks: u64,
    pub bytes: u64,
    pub seconds: f64,
    /// Chunks copied again because users wrote their spare homes after
    /// their copy started (a served rebalance; 0 offline).
    #[serde(default)]
    pub recopied: u64,
}

impl Array {
    /// Rebuild every member in the rebuilding state, in place.
    pub fn rebuild(
        &self,
        opts: RebuildOptions,
        progress: &(dyn Fn(RebuildProgress) + Sync),
    ) -> Result<RebuildReport> {
        // One rebuild at a time (a second request on a served array would
        // redo the first one's work and race it to the finish).
        if self
            .rebuild_running
            .swap(true, std::sync::atomic::Ordering::AcqRel)
        {
            return Err(EngineError::Busy(
                "a rebuild is already running on this array; wait for it (hetraid status shows its progress)".into(),
            ));
        }
        struct Running<'a>(&'a std::sync::atomic::AtomicBool);
        impl Drop for Running<'_> {
            fn drop(&mut self) {
                self.0.store(false, std::sync::atomic::Ordering::Release);
            }
        }
        let _running = Running(&self.rebuild_running);
        let sb = self.superblock();
        let targets: Vec<usize> = (0..sb.roles.len())
            .filter(|&i| sb.roles[i].state == RoleState::Rebuilding && self.present(i))
            .collect();
        // The devices being filled: a target failed or replaced meanwhile stops
        // the rebuild (the state machine never activates another device).
        let devices: Vec<u64> = targets.iter().map(|&t| sb.roles[t].device).collect();
        if targets.is_empty() {
            return Ok(RebuildReport {
                paths: vec![],
                members: vec![],
                streams: 0,
                stripes: 0,
                bytes: 0,
                seconds: 0.0,
                completed: true,
                stream_seconds: vec![],
            });
        }
        let start_at = targets
            .iter()
            .map(|&i| sb.roles[i].rebuild_checkpoint)
            .min()
            .unwrap_or(0);
        // During the rebuild the targets count as missing for every stripe.
        let mut rstate = self.state();
        for &t in &targets {
            rstate.members[t] = MemberState::Failed;
        }
        let sched = hetraid_core::rebuild::schedule(self.layout(), &rstate, &targets, false)?;
        let total = self.layout().stripe_count();
        // Re-added members: only the stripes of regions the bitmap marks.
        // The others are valid on them already: marked so at once, with
        // every stripe lock held, so no write planned before sees them
        // otherwise.
        let clean: Option<Vec<bool>> = if targets.iter().all(|&t| sb.roles[t].resync) {
            let _all = self.lock_stripes(0..(total.min(crate::array::LOCK_SHARDS as u64)));
            let bm = self.bitmap.lock().unwrap();
            let clean: Vec<bool> = (0..total).map(|s| !bm.is_set(bm.bit_of(s))).collect();
            drop(bm);
            let mut words = vec![0u64; total.div_ceil(64) as usize];
            for (s, &c) in clean.iter().enumerate() {
                if c || (s as u64) < start_at {
                    words[s / 64] |= 1 << (s % 64);
                }
            }
            let words = std::sync::Arc::new(words);
            let mut st = self.state.write().unwrap();
            for &t in &targets {
                st.members[t] = MemberState::Rebuilding {
                    valid_below_stripe: start_at,
                    done: Some(words.clone()),
                };
            }
            Some(clean)
        } else {
            None
        };
        for &t in &targets {
            self.record_member(EventKind::RebuildStarted, t, [start_at, total, 0]);
        }
        let track = |p: RebuildProgress| {
            self.note_progress("rebuild", &p, 0);
            progress(p)
        };
        let progress_guard = self.progress_guard();
        let run = self.run_streams(
            &sched,
            &rstate,
            &targets,
            &devices,
            start_at,
            clean.as_deref(),
            opts,
            &track,
        );
        drop(progress_guard);
        let stopped = |done: &[bool]| {
            for &t in &targets {
                self.record_member(EventKind::RebuildStopped, t, [prefix(done), total, 0]);
            }
        };
        if let Some(e) = run.error {
            let _ = self.checkpoint(&targets, &devices, prefix(&run.done));
            stopped(&run.done);
            return Err(e);
        }
        self.flush()?;
        if run.completed {
            self.finish_rebuild(&targets, &devices)?;
            for &t in &targets {
                self.record_member(
                    EventKind::RebuildFinished,
                    t,
                    [run.stripes, (run.seconds * 1000.0) as u64, run.bytes],
                );
            }
        } else {
            self.checkpoint(&targets, &devices, prefix(&run.done))?;
            stopped(&run.done);
        }
        Ok(RebuildReport {
            paths: targets
                .iter()
                .map(|&i| self.path_of(i).unwrap_or_default())
                .collect(),
            members: targets,
            streams: sched.streams.len(),
            stripes: run.stripes,
            bytes: run.bytes,
            seconds: run.seconds,
            completed: run.completed,
            stream_seconds: run.stream_seconds,
        })
    }

    /// Rebuild the chunks of failed members into the layout's spare space (S2-RAID:
    /// each stream writes a different member's spare partition), record the
    /// relocations, retire the failed slots, and return the array reassembled
    /// with its new layout: fully redundant again without a replacement disk.
    pub fn rebuild_to_spare(
        self,
        opts: RebuildOptions,
        progress: &(dyn Fn(RebuildProgress) + Sync),
    ) -> Result<(Array, RebuildReport)> {
        let layout = self.layout();
        if layout.spare_slots() == 0 {
            return Err(EngineError::Refused(if layout.distributed_spare() {
                "every spare chunk holds a member rebuilt into spare space already; copy one back onto a replacement first (hetraid rebalance MEMBERS... --with NEW), or replace the failed member".to_string()
            } else {
                format!(
                    "layout {} reserves no spare space; replace the failed member instead (or create with --spare-partitions)",
                    layout.name()
                )
            }));
        }
        let sb = self.superblock();
        let state = self.state();
        let failed: Vec<usize> = (0..sb.roles.len())
            .filter(|&i| {
                state.members[i] == MemberState::Failed && sb.roles[i].state != RoleState::Removed
            })
            .filter(|&i| {
                (0..layout.stripe_count()).any(|s| layout.stripe(s).all().any(|c| c.member == i))
            })
            .collect();
        if failed.is_empty() {
            return Ok((
                self,
                RebuildReport {
                    paths: vec![],
                    members: vec![],
                    streams: 0,
                    stripes: 0,
                    bytes: 0,
                    seconds: 0.0,
                    completed: true,
                    stream_seconds: vec![],
                },
            ));
        }
        let mut used = vec![0usize; sb.roles.len()];
        for r in sb.relocations.iter().filter(|r| r.len > 0) {
            used[r.to_member as usize] += 1;
        }
        let sched =
            hetraid_core::rebuild::schedule_with_used(layout, &state, &failed, true, &used)?;
        let run = self.run_streams(&sched, &state, &failed, &[], 0, None, opts, progress);
        if let Some(e) = run.error {
            return Err(e);
        }
        self.flush()?;
        // Record where every lost extent now lives.
        let sb = self.superblock();
        // A distributed spare (declustered) is recorded as one length-0
        // record per member, in failure order: the layout computes where
        // each chunk went (core `Layout::relocated`).
        let moved: Vec<crate::format::Relocation> = if layout.distributed_spare() {
            failed
                .iter()
                .map(|&f| crate::format::Relocation {
                    from_member: f as u16,
                    to_member: f as u16,
                    from_offset: 0,
                    to_offset: 0,
                    len: 0,
                })
                .collect()
        } else {
            hetraid_core::rebuild::spare_moves(layout, &sched, &failed)?
                .into_iter()
                .map(|m| crate::format::Relocation {
                    from_member: m.from.member as u16,
                    to_member: m.to.member as u16,
                    from_offset: m.from.offset,
                    to_offset: m.to.offset,
                    len: m.len,
                })
                .collect()
        };
        if sb.relocations.len() + moved.len() > crate::format::MAX_RELOCATIONS {
            return Err(EngineError::Refused(
                "the superblock's relocation table is full".into(),
            ));
        }
        let retire: Vec<Transition> = failed
            .iter()
            .map(|&slot| Transition::Remove { slot })
            .collect();
        self.transitions(&retire, |sb| sb.relocations.extend(moved))?;
        let keep: Vec<bool> = self
            .superblock()
            .roles
            .iter()
            .map(|r| r.state.is_in())
            .collect();
        let members: Vec<Arc<dyn Member>> = (0..self.slot_count())
            .filter(|&i| keep[i])
            .filter_map(|i| self.member(i))
            .collect();
        let paths = failed
            .iter()
            .map(|&i| self.path_of(i).unwrap_or_default())
            .collect();
        drop(self);
        let array = Array::assemble(members)?;
        Ok((
            array,
            RebuildReport {
                paths,
                members: failed,
                streams: sched.streams.len(),
                stripes: run.stripes,
                bytes: run.bytes,
                seconds: run.seconds,
                completed: run.completed,
                stream_seconds: run.stream_seconds,
            },
        ))
    }

    /// Run every stream of `sched` on its own thread, BATCH stripes at a time with
    /// merged member I/O, throttled by `opts`.
    // The targets and the devices they hold travel as two slices, as everywhere
    // in the rebuild; bundling them for this one signature would not read better.
    #[allow(clippy::too_many_arguments)]
    fn run_streams(
        &self,
        sched: &hetraid_core::rebuild::RebuildSchedule,
        rstate: &ArrayState,
        targets: &[usize],
        devices: &[u64],
        start_at: u64,
        skip: Option<&[bool]>,
        opts: RebuildOptions,
        progress: &(dyn Fn(RebuildProgress) + Sync),
    ) -> StreamsRun {
        let layout = self.layout();
        let planner = Planner::new(layout, self.superblock().policy, vec![]);
        // Stripes to rebuild: from the checkpoint on, less those `skip`
        // says are valid already (a re-add).
        let wanted = |x: u64| x >= start_at && !skip.is_some_and(|k| k[x as usize]);
        let total: u64 = sched
            .streams
            .iter()
            .map(|s| s.stripes.iter().filter(|&&x| wanted(x)).count() as u64)
            .sum();
        let done_flags: Mutex<Vec<bool>> =
            Mutex::new((0..layout.stripe_count()).map(|s| !wanted(s)).collect());
        let done = AtomicU64::new(0);
        let bytes = AtomicU64::new(0);
        let stop = AtomicBool::new(false);
        let error: Mutex<Option<EngineError>> = Mutex::new(None);
        let t0 = Instant::now();
        let chunk = layout.chunk_bytes();
        let batch_len = hetraid_core::rebuild::batch_stripes(layout, opts.max_speed);
        let last_ckpt = Mutex::new(Instant::now());
        self.hot.user_io.store(false, Ordering::Relaxed);
        let todos: Vec<Vec<u64>> = sched
            .streams
            .iter()
            .map(|st| st.stripes.iter().copied().filter(|&s| wanted(s)).collect())
            .collect();
        // The procedure is the core's (`control::sweep`, the simulator's
        // too): which batch each lane takes, how many are in flight, when
        // the pacer says wait and when a stream is done. This drives it with
        // threads and the wall clock.
        let sweep = Mutex::new(Sweep::new(SweepSpec {
            streams: todos.iter().cloned().map(Stripes::List).collect(),
            batch_stripes: batch_len,
            lanes: hetraid_core::rebuild::batches_in_flight(layout),
            stripe_bytes: chunk,
            limits: hetraid_core::pace::PaceLimits {
                min_bps: opts.min_speed,
                max_bps: opts.max_speed,
            },
            scope: opts.pace,
            stop_after: opts.stop_after,
        }));
        // Per stream, when its lanes finished (ns since t0, the latest lane's).
        let stream_end: Vec<AtomicU64> = todos.iter().map(|_| AtomicU64::new(0)).collect();
        let lanes = sweep.lock().unwrap().spec().lanes;
        let shared = Lanes {
            planner: &planner,
            rstate,
            targets,
            devices,
            done_flags: &done_flags,
            done: &done,
            bytes: &bytes,
            stop: &stop,
            error: &error,
            last_ckpt: &last_ckpt,
            sweep: &sweep,
            t0,
            chunk,
            total,
            progress,
        };
        std::thread::scope(|scope| {
            for (si, ((stream, todo), own_end)) in sched
                .streams
                .iter()
                .zip(&todos)
                .zip(&stream_end)
                .enumerate()
            {
                // The lanes of a stream take its batches in order: one writes
                // its batch while the next reads. Each lane holds only its own
                // batch's stripe locks, like any request, so lanes cannot
                // deadlock each other or user I/O.
                for _ in 0..lanes {
                    let sh = &shared;
                    scope.spawn(move || self.rebuild_lane(sh, si, stream.target, todo, own_end));
                }
            }
        });
        let done_v = done_flags.into_inner().unwrap();
        let completed = sched
            .streams
            .iter()
            .all(|st| st.stripes.iter().all(|&s| done_v[s as usize]));
        StreamsRun {
            done: done_v,
            stripes: done.load(Ordering::Relaxed),
            bytes: bytes.load(Ordering::Relaxed),
            seconds: t0.elapsed().as_secs_f64(),
            stream_seconds: stream_end
                .iter()
                .map(|e| e.load(Ordering::Relaxed) as f64 / 1e9)
                .collect(),
            completed,
            error: error.into_inner().unwrap(),
        }
    }

    /// One lane of a rebuild stream: batches as the sweep hands them out,
    /// each rebuilt under its stripe locks, progress and checkpoints after
    /// each; the lane's end recorded in `own_end`.
    fn rebuild_lane(
        &self,
        sh: &Lanes<'_>,
        si: usize,
        target: Option<(usize, usize)>,
        todo: &[u64],
        own_end: &AtomicU64,
    ) {
        // Buffers reused from batch to batch.
        let mut pool: Vec<StripeBufs> = Vec::new();
        // This lane's end is its stream's if it is the last.
        struct LaneEnd<'a>(&'a AtomicU64, Instant);
        impl Drop for LaneEnd<'_> {
            fn drop(&mut self) {
                self.0
                    .fetch_max(self.1.elapsed().as_nanos() as u64, Ordering::Relaxed);
            }
        }
        let _end = LaneEnd(own_end, sh.t0);
        let halted = || sh.stop.load(Ordering::Relaxed) || self.cancel.load(Ordering::Relaxed);
        // Bounded: each round takes a batch (finitely many),
        // or waits as the pacer says (the average rate falls
        // as time passes), or ends; a stop or cancel ends it.
        loop {
            if halted() {
                return;
            }
            let step = sh.sweep.lock().unwrap().next(
                si,
                sh.t0.elapsed().as_nanos() as u64,
                self.users_active(),
            );
            let (first, len) = match step {
                Step::Batch { first, len } => (first, len),
                // No stripe lock is held while waiting.
                Step::Wait(ns) => {
                    std::thread::sleep(Duration::from_nanos(ns));
                    continue;
                }
                // As many lanes as the sweep allows batches in
                // flight: another lane's batch ends first.
                Step::Busy => {
                    std::thread::sleep(Duration::from_millis(1));
                    continue;
                }
                Step::Finished => return,
            };
            let batch = &todo[first..first + len];
            if let Err(e) = self.rebuild_batch(
                sh.planner, sh.rstate, sh.targets, sh.devices, batch, target, &mut pool,
            ) {
                *sh.error.lock().unwrap() = Some(e);
                sh.stop.store(true, Ordering::Relaxed);
                sh.sweep.lock().unwrap().stop();
                return;
            }
            {
                let mut f = sh.done_flags.lock().unwrap();
                batch.iter().for_each(|&s| f[s as usize] = true);
            }
            sh.sweep.lock().unwrap().done(si, len);
            let d = sh.done.fetch_add(len as u64, Ordering::Relaxed) + len as u64;
            let b = sh.bytes.fetch_add(sh.chunk * len as u64, Ordering::Relaxed)
                + sh.chunk * len as u64;
            (sh.progress)(RebuildProgress {
                stripes_done: d,
                stripes_total: sh.total,
                bytes_done: b,
                elapsed_s: sh.t0.elapsed().as_secs_f64(),
            });
            let mut lc = sh.last_ckpt.lock().unwrap();
            if lc.elapsed() > Duration::from_secs(1) && target.is_none() {
                *lc = Instant::now();
                drop(lc);
                let _ = self.checkpoint(
                    sh.targets,
                    sh.devices,
                    prefix(&sh.done_flags.lock().unwrap()),
                );
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn rebuild_batch(
        &self,
        planner: &Planner,
        rstate: &ArrayState,
        targets: &[usize],
        devices: &[u64],
        batch: &[u64],
        redirect: Option<(usize, usize)>,
        pool: &mut Vec<StripeBufs>,
    ) -> Result<()> {
        let mut plans = Vec::with_capacity(batch.len());
        for &s in batch {
            if let Some(sp) = planner.rebuild_stripe(s, rstate, targets, redirect)? {
                plans.push(sp);
            }
        }
        let _g = self.lock_many(batch);
        while pool.len() < plans.len() {
            pool.push(StripeBufs::new(&plans[0]));
        }
        let bufs = &mut pool[..plans.len()];
        for (sp, b) in plans.iter().zip(bufs.iter_mut()) {
            b.refit(sp);
        }
        self.read_plans(&plans, bufs).map_err(|f| f.error)?;
        for (sp, b) in plans.iter().zip(bufs.iter_mut()) {
            exec::rebuild(sp, b).map_err(EngineError::Refused)?;
        }
        self.write_plans(&plans, bufs, &[])?;
        // Still under the stripe locks: later user writes see the new member.
        if redirect.is_none() && !self.mark_rebuilt(targets, devices, batch) {
            let names: Vec<String> = targets
                .iter()
                .map(|&t| {
                    format!(
                        "{t} ({})",
                        self.member(t).map(|m| m.name()).unwrap_or_default()
                    )
                })
                .collect();
            return Err(EngineError::Refused(format!(
                "member {} was failed or replaced while it was being rebuilt; the rebuild stopped without activating it",
                names.join(", ")
            )));
        }
        Ok(())
    }

    fn checkpoint(&self, targets: &[usize], devices: &[u64], upto: u64) -> Result<()> {
        let ts: Vec<Transition> = targets
            .iter()
            .zip(devices)
            .map(|(&slot, &device)| Transition::Checkpoint {
                slot,
                device,
                stripe: upto,
            })
            .collect();
        self.transitions(&ts, |_| {})
    }

    fn finish_rebuild(&self, targets: &[usize], devices: &[u64]) -> Result<()> {
        let ts: Vec<Transition> = targets
            .iter()
            .zip(devices)
            .map(|(&slot, &device)| Transition::FinishRebuild { slot, device })
            .collect();
        self.transitions(&ts, |_| {})
    }
}

struct StreamsRun {
    done: Vec<bool>,
    stripes: u64,
    bytes: u64,
    seconds: f64,
    stream_seconds: Vec<f64>,
    completed: bool,
    error: Option<EngineError>,
}

/// Stripes [0, prefix) are all done.
fn prefix(flags: &[bool]) -> u64 {
    flags.iter().position(|d| !d).unwrap_or(flags.len()) as u64
}

/// What a rebuild's lanes share.
struct Lanes<'a> {
    planner: &'a Planner<'a>,
    rstate: &'a ArrayState,
    targets: &'a [usize],
    devices: &'a [u64],
    /// Stripes rebuilt (and those never to rebuild).
    done_flags: &'a Mutex<Vec<bool>>,
    /// Stripes and bytes rebuilt, for progress and the report.
    done: &'a AtomicU64,
    bytes: &'a AtomicU64,
    /// Set on an error (kept in `error`): every lane stops.
    stop: &'a AtomicBool,
    error: &'a Mutex<Option<EngineError>>,
    last_ckpt: &'a Mutex<Instant>,
    sweep: &'a Mutex<Sweep>,
    t0: Instant,
    chunk: u64,
    total: u64,
    progress: &'a (dyn Fn(RebuildProgress) + Sync),
}
