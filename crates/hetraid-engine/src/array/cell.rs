//! A served array whose members change under it (issue 14): the server
//! holds an [`ArrayCell`], every request runs under a read guard of it, and
//! a change (`grow --add`, `shrink`) runs batch by batch, each batch with
//! the cell held for writing — in-flight requests finish first, the array
//! is closed, one batch of the offline change runs (the same crash-safe code
//! as `hetraid grow` on a stopped array), the array is assembled again with
//! its new table and put back. Between batches requests flow; connections
//! opened after the change see the new size, older ones keep theirs.

use super::*;
use std::sync::{RwLock, RwLockReadGuard};

/// What the server re-applies to each array it assembles (read policy,
/// write buffer).
pub type Reopen = Box<dyn Fn(&Arc<Array>) -> Result<()> + Send + Sync>;

pub struct ArrayCell {
    cur: RwLock<Arc<Array>>,
    /// The members as opened (no checksum layer), by the order given; a
    /// change updates them.
    members: std::sync::Mutex<Vec<Arc<dyn Member>>>,
    reopen: Reopen,
    /// One change at a time.
    changing: std::sync::Mutex<()>,
    /// The server is stopping: a change stops after its batch (it stays
    /// recorded, and continues when the array is next served or assembled).
    stopping: std::sync::atomic::AtomicBool,
    /// Batches of a change run per swap: 1 served (requests wait at most
    /// one batch), more for a command holding the array offline (fewer
    /// assemblies; `status` from another shell still sees progress).
    batches_per_swap: std::sync::atomic::AtomicU64,
    /// When user requests were last seen, across the arrays each batch
    /// assembles (the pacer's rule).
    activity: super::UserActivity,
    /// The change running: when it started and the moves done then.
    change_start: std::sync::Mutex<Option<(std::time::Instant, u64)>>,
}

/// How fast a change goes, for `status`.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ChangeRate {
    pub moves_per_s: f64,
    /// At that rate; None before a move is done.
    pub eta_s: Option<f64>,
}

/// How fast a served change may move chunks: MD's speed limits, by the
/// core's pacer (`hetraid_core::pace`, the rebuild's): `min_speed` while
/// requests arrive, up to `max_speed` when the array is idle.
#[derive(Debug, Clone, Copy)]
pub struct ChangeOptions {
    /// Bytes a second of chunk moves while users do I/O.
    pub min_speed: u64,
    /// Bytes a second at most (0: unlimited).
    pub max_speed: u64,
}

impl Default for ChangeOptions {
    fn default() -> Self {
        Self {
            min_speed: hetraid_core::pace::MD_DEFAULT.min_bps,
            max_speed: hetraid_core::pace::MD_DEFAULT.max_bps,
        }
    }
}

impl ArrayCell {
    pub fn new(array: Arc<Array>, members: Vec<Arc<dyn Member>>, reopen: Reopen) -> Self {
        Self {
            cur: RwLock::new(array),
            members: std::sync::Mutex::new(members),
            reopen,
            changing: std::sync::Mutex::new(()),
            stopping: std::sync::atomic::AtomicBool::new(false),
            activity: super::UserActivity::new(),
            batches_per_swap: std::sync::atomic::AtomicU64::new(
                hetraid_core::limits::SERVED_BATCHES_PER_SWAP,
            ),
            change_start: std::sync::Mutex::new(None),
        }
    }

    /// Run `n` batches of a change per swap (at least 1).
    pub fn set_batches_per_swap(&self, n: u64) {
        self.batches_per_swap
            .store(n.max(1), std::sync::atomic::Ordering::Relaxed);
    }

    /// The rate of the change running here and its time left.
    pub fn change_rate(&self) -> Option<ChangeRate> {
        let (t0, first) = (*self.change_start.lock().unwrap())?;
        let p = self.current().change_progress()?;
        let done = p.moves_done.saturating_sub(first);
        let rate = done as f64 / t0.elapsed().as_secs_f64().max(1e-6);
        Some(ChangeRate {
            moves_per_s: rate,
            eta_s: (done > 0).then(|| p.moves.saturating_sub(p.moves_done) as f64 / rate),
        })
    }

    /// The array's status, with the running change's pace.
    pub fn status(&self) -> Status {
        let mut st = self.get().status();
        if let Some(c) = st.change.as_mut() {
            c.rate = self.change_rate();
        }
        st
    }

    /// The array, held for one request: a change waits for it.
    pub fn get(&self) -> RwLockReadGuard<'_, Arc<Array>> {
        self.cur.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The array now (not held: for work that may span a change, take
    /// [`ArrayCell::get`] instead).
    pub fn current(&self) -> Arc<Array> {
        self.get().clone()
    }

    /// Stop a change running here after its current batch.
    pub fn stop(&self) {
        self.stopping
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// A device the served array took since it was opened (a replacement,
    /// a spare): later assemblies of a change include it.
    pub fn adopt(&self, m: Arc<dyn Member>) {
        let mut g = self.members.lock().unwrap();
        if !g.iter().any(|x| x.name() == m.name()) {
            g.push(m);
        }
    }

    /// The members as the server opened them.
    pub fn members(&self) -> Vec<Arc<dyn Member>> {
        self.members.lock().unwrap().clone()
    }

    /// Close the array in the cell, run `step` on the members, assemble
    /// them again and put the result in the cell — all while no request
    /// runs. When `step` fails the members are assembled again all the
    /// same (the change is crash-safe, so whatever it left is a valid
    /// array), and its error is returned.
    fn swap<T>(&self, members: &[Arc<dyn Member>], step: impl FnOnce() -> Result<T>) -> Result<T> {
        let mut g = self.cur.write().unwrap_or_else(|e| e.into_inner());
        g.close()?;
        let r = step();
        let a = Arc::new(Array::assemble(members.to_vec())?);
        (self.reopen)(&a)?;
        *g = a;
        r
    }

    /// `grow` (`--add`, `--weights`) on the served array.
    pub fn grow(
        &self,
        new: Option<(Arc<dyn Member>, MemberKind)>,
        weights: Option<Vec<u64>>,
        force: bool,
        opts: ChangeOptions,
    ) -> Result<ChangeReport> {
        let _one = self.changing.lock().unwrap();
        self.refuse_while_running("grow")?;
        self.begin_grow(new, weights, force)?;
        self.run_batches(opts)
    }

    /// `shrink --member --size` on the served array.
    pub fn shrink_remove(
        &self,
        slot: usize,
        size: u64,
        force: bool,
        opts: ChangeOptions,
    ) -> Result<ChangeReport> {
        let _one = self.changing.lock().unwrap();
        self.refuse_while_running("shrink")?;
        self.begin_shrink(slot, size, force)?;
        self.run_batches(opts)
    }

    /// Finish a change in progress, a batch at a time.
    pub fn resume(&self, opts: ChangeOptions) -> Result<Option<ChangeReport>> {
        let _one = self.changing.lock().unwrap();
        if self.current().change_progress().is_none() {
            return Ok(None);
        }
        self.refuse_while_running("grow")?;
        self.run_batches(opts).map(Some)
    }

    /// Forget the device named `name` (a member detached by `remove`): the
    /// cell holds it no longer, so once the array's slot lets it go its file
    /// is closed and its lock dropped.
    pub fn release(&self, name: &str) {
        let name = super::events::absolute(name);
        self.members
            .lock()
            .unwrap()
            .retain(|m| super::events::absolute(&m.name()) != name);
    }

    /// Hot spares take the slots that want one ([`Array::activate_spares`]),
    /// and the devices they replace are let go: a failed member whose slot
    /// a spare took is closed and unlocked, so it can be inspected or added
    /// back while clients go on (the `fail` verb's own release may have
    /// found the spare there first). Returns the slots taken and the spares'
    /// paths. `a` is the array as the caller holds it ([`ArrayCell::get`]:
    /// taking the cell's lock again here could wait behind a change that
    /// waits for the caller).
    pub fn activate_spares(&self, a: &Array) -> Result<Vec<(usize, String)>> {
        let before: Vec<Option<String>> = (0..a.slot_count())
            .map(|i| a.member(i).map(|m| m.name()))
            .collect();
        let taken = a.activate_spares()?;
        for (slot, _) in &taken {
            if let Some(Some(old)) = before.get(*slot) {
                self.release(old);
            }
        }
        Ok(taken)
    }

    /// `rebalance` on the served array (dRAID's, while clients go on): the
    /// chunks of the member rebuilt into spare space last are copied onto
    /// `new` as the core's paced sweep says, the spare homes staying the
    /// array's copy meanwhile; chunks users write after their copy started
    /// are copied again (core `CopyWatch`), the last round with requests
    /// held; then `new` takes the slot. Nothing is written before every
    /// check passed; a failure leaves the array as it was (relocated).
    pub fn copy_back(
        &self,
        new: Arc<dyn Member>,
        force: bool,
        opts: ChangeOptions,
        progress: &(dyn Fn(crate::rebuild::RebuildProgress) + Sync),
    ) -> Result<crate::rebuild::CopyBackReport> {
        use hetraid_core::control::copyback::CopyWatch;
        let _one = self.changing.lock().unwrap();
        self.refuse_while_running("rebalance")?;
        let plan = self.current().copy_back_checked(new.as_ref(), force)?;
        let raw = self.members();
        let watch = Arc::new(std::sync::Mutex::new(CopyWatch::new(&plan)));
        let watched = crate::copyback::watched(&raw, &watch)?;
        self.swap(&watched, || Ok(()))?;
        let r = self.copy_back_watched(&plan, new, force, opts, progress, &watch, &raw);
        if r.is_err() {
            // The relocated array again, on the members as they were.
            let _ = self.swap(&raw, || Ok(()));
        }
        r
    }

    #[allow(clippy::too_many_arguments)]
    fn copy_back_watched(
        &self,
        plan: &hetraid_core::rebuild::CopyBack,
        new: Arc<dyn Member>,
        force: bool,
        opts: ChangeOptions,
        progress: &(dyn Fn(crate::rebuild::RebuildProgress) + Sync),
        watch: &std::sync::Mutex<hetraid_core::control::copyback::CopyWatch>,
        raw: &[Arc<dyn Member>],
    ) -> Result<crate::rebuild::CopyBackReport> {
        use hetraid_core::control::copyback::RECOPY_ROUNDS_UNHELD_MAX;
        let t0 = std::time::Instant::now();
        let a = self.current();
        let f = plan.member;
        let old_path = a.path_of(f).unwrap_or_default();
        let limits = hetraid_core::pace::PaceLimits {
            min_bps: opts.min_speed,
            max_bps: opts.max_speed,
        };
        let show = |p: crate::rebuild::RebuildProgress| {
            a.note_progress("copy-back", &p, 0);
            progress(p);
        };
        // The copy goes through block checksums when the array keeps them
        // (their entries computed as it writes; written back at its flush,
        // before the attach reads them from the device).
        let target = crate::array::with_checksums(new.clone(), &a.superblock());
        let copied = a.copy_moves(plan, target.as_ref(), &show, limits, Some(watch));
        a.end_progress();
        copied?;
        let mut recopied = 0u64;
        for _ in 0..RECOPY_ROUNDS_UNHELD_MAX {
            let dirty = watch.lock().unwrap().take_dirty();
            if dirty.is_empty() {
                break;
            }
            recopied += dirty.len() as u64;
            a.copy_again(plan, &dirty, target.as_ref())?;
        }
        // The last round with requests held: nothing becomes dirty again.
        let mut g = self.cur.write().unwrap_or_else(|e| e.into_inner());
        let dirty = watch.lock().unwrap().take_dirty();
        recopied += dirty.len() as u64;
        g.copy_again(plan, &dirty, target.as_ref())?;
        target.flush().map_err(|e| EngineError::Io {
            member: target.name(),
            source: e,
        })?;
        drop(target);
        g.attach_copied(plan, new.clone(), force, t0.elapsed().as_secs_f64())?;
        g.close()?;
        let mut members = raw.to_vec();
        members.push(new.clone());
        let arr = Arc::new(Array::assemble(members.clone())?);
        (self.reopen)(&arr)?;
        *g = arr;
        *self.members.lock().unwrap() = members;
        let chunk = g.layout().chunk_bytes();
        let total = plan.moves.len() as u64;
        Ok(crate::rebuild::CopyBackReport {
            member: f,
            path: g.path_of(f).unwrap_or_default(),
            old_path,
            chunks: total,
            bytes: total * chunk,
            seconds: t0.elapsed().as_secs_f64(),
            recopied,
        })
    }

    /// The write log's background reclaimer ([`Array::run_reclaimer`]) on
    /// the array the cell holds at each look, so a grow or a rebalance that
    /// puts a new one in does not leave it without one. Each look holds the
    /// cell for reading: a change waits for a reclaim in progress.
    pub fn run_reclaimer(
        &self,
        idle: std::time::Duration,
        sleep: &dyn Fn(std::time::Duration) -> bool,
    ) {
        Array::reclaimer_loop(
            &|look: &mut dyn FnMut(&Array)| look(&self.get()),
            idle,
            sleep,
        )
    }

    /// The hot-spare watch of a served array, as MD's: at start a rebuild
    /// found waiting (a crash or a stop cut it short, or an offline replace
    /// or add left it) resumes from its checkpoint; whenever something
    /// changes (`crate::changes`), a slot that wants a member takes a spare
    /// and is rebuilt at once. `wait` blocks until a change or its timeout
    /// and says whether to stop; `stopped` says so between steps. A thread
    /// of `serve`; bounded by the server's life.
    pub fn run_spare_watch(
        &self,
        wait: &dyn Fn(std::time::Duration) -> bool,
        stopped: &dyn Fn() -> bool,
    ) {
        let mut pending = false;
        let mut resume_at_start = true;
        let mut first = true;
        loop {
            if !std::mem::take(&mut first) && wait(std::time::Duration::from_secs(30)) {
                return;
            }
            // Drain before looking: a change after this is seen next round.
            crate::changes::drain();
            let a = self.get();
            if a.change_progress().is_some() {
                continue;
            }
            if std::mem::take(&mut resume_at_start)
                && !pending
                && a.status()
                    .member_states
                    .iter()
                    .any(|m| m.state == "rebuilding" && m.path.is_some())
            {
                tracing::info!("resuming the rebuild found waiting at start");
                pending = true;
            }
            if !a.slots_wanting().is_empty() && !a.spare_status().is_empty() {
                match self.activate_spares(&a) {
                    // Each is an event (logged by the engine).
                    Ok(taken) => pending |= !taken.is_empty(),
                    Err(e) => {
                        tracing::warn!("a spare could not take a failed member's place: {e}")
                    }
                }
            }
            if pending && !stopped() {
                match a.rebuild(crate::RebuildOptions::default(), &|_| {}) {
                    Ok(r) if r.completed => pending = false,
                    Ok(_) => {}
                    // Another rebuild runs (it may not include the spare's
                    // slot): look again once it is done.
                    Err(EngineError::Busy(_)) => {}
                    Err(e) => {
                        tracing::warn!("the rebuild onto a spare stopped: {e}");
                        pending = false;
                    }
                }
            }
        }
    }

    /// Slow-member sit-out for a served array: a look of core's rule every
    /// interval (`Array::sit_out_look`) while users do I/O; idle, it waits
    /// for their next request (`wait_io`, on `changes::io_fd`). `sleep` and
    /// `wait_io` wait and say whether to stop.
    pub fn run_sit_out(
        &self,
        sleep: &dyn Fn(std::time::Duration) -> bool,
        wait_io: &dyn Fn() -> bool,
    ) {
        while !sleep(self.current().sit_out_interval()) {
            let a = self.current();
            a.sit_out_look();
            if a.sit_out_idle() && wait_io() {
                break;
            }
        }
    }

    /// MD's safe mode for a served array: a degraded array idle for a second
    /// is marked clean. `sleep` waits and says whether to stop.
    pub fn run_safe_mode(&self, sleep: &dyn Fn(std::time::Duration) -> bool) {
        let mut last = u64::MAX;
        while !sleep(std::time::Duration::from_secs(1)) {
            if let Err(e) = self.get().safe_mode_tick(&mut last) {
                tracing::warn!("marking the idle array clean failed: {e}");
            }
        }
    }

    /// The change moving chunks now, if one runs (not one merely recorded).
    pub fn change_running(&self) -> Option<ChangeProgress> {
        self.change_start
            .lock()
            .unwrap()
            .and_then(|_| self.current().change_progress())
    }

    /// Changes are exclusive with a rebuild or scrub running on the array
    /// (md refuses a reshape during recovery): refused, changing nothing,
    /// with the running one named.
    fn refuse_while_running(&self, verb: &str) -> Result<()> {
        match self.current().progress() {
            Some(p) => Err(EngineError::Busy(format!(
                "a {} is running on this array ({:.1} % done): {verb} changes nothing until it ends; run it again then",
                p.op, p.percent
            ))),
            None => Ok(()),
        }
    }

    /// Record a grow (no chunk moved yet) and serve the array with any new
    /// member; [`ArrayCell::step`] runs it.
    pub fn begin_grow(
        &self,
        new: Option<(Arc<dyn Member>, MemberKind)>,
        weights: Option<Vec<u64>>,
        force: bool,
    ) -> Result<()> {
        let given = self.members();
        let mut g = self.cur.write().unwrap_or_else(|e| e.into_inner());
        g.close()?;
        let (members, r) = match Array::prepare_grow(given.clone(), new, weights, force) {
            Ok(all) => (all, Ok(())),
            Err(e) => (given, Err(e)),
        };
        let arr = Arc::new(Array::assemble(members.clone())?);
        (self.reopen)(&arr)?;
        *g = arr;
        *self.members.lock().unwrap() = members;
        r
    }

    /// `grow --size max` on the served array: every member with room for
    /// more chunk slots gets them, one after the other.
    pub fn enlarge(&self, opts: ChangeOptions) -> Result<Vec<ChangeReport>> {
        let _one = self.changing.lock().unwrap();
        self.refuse_while_running("grow")?;
        let members = self.members();
        let mut out = Vec::new();
        // Bounded: each round grows one member to its whole size.
        for _ in 0..=members.len() {
            let slot = self.swap(&members, || Array::prepare_enlarge(members.clone()))?;
            if slot.is_none() {
                return Ok(out);
            }
            out.push(self.run_batches(opts)?);
        }
        Ok(out)
    }

    /// Record a shrink (no chunk moved yet); [`ArrayCell::step`] runs it.
    pub fn begin_shrink(&self, slot: usize, size: u64, force: bool) -> Result<()> {
        let members = self.members();
        self.swap(&members, || {
            Array::prepare_shrink(members.clone(), slot, size, force)
        })
    }

    /// One batch of the change in progress, while no request runs; the
    /// report when it was the last.
    pub fn step(&self) -> Result<Option<ChangeReport>> {
        let members = self.members();
        let n = self
            .batches_per_swap
            .load(std::sync::atomic::Ordering::Relaxed);
        let r = self.swap(&members, || Array::resume_change(members.clone(), Some(n)))?;
        if r.is_some() {
            // A member that left is no longer the array's.
            let uuid = self.current().superblock().uuid;
            self.members.lock().unwrap().retain(|m| {
                matches!(read_sb(m.as_ref()), Ok(Ok(sb)) if sb.uuid == uuid && sb.roles.get(sb.member as usize).is_some_and(|r| r.state != RoleState::Removed))
            });
        }
        Ok(r)
    }

    fn run_batches(&self, opts: ChangeOptions) -> Result<ChangeReport> {
        struct Clear<'a>(&'a std::sync::Mutex<Option<(std::time::Instant, u64)>>);
        impl Drop for Clear<'_> {
            fn drop(&mut self) {
                *self.0.lock().unwrap() = None;
            }
        }
        let start = std::time::Instant::now();
        let chunk = self.current().layout().chunk_bytes();
        let first = self.current().change_progress().map_or(0, |p| p.moves_done);
        *self.change_start.lock().unwrap() = Some((start, first));
        let _clear = Clear(&self.change_start);
        let total = self.current().change_progress().map_or(0, |p| p.moves);
        // The procedure (when each batch goes, when the change is over) is
        // the core's, as the simulator's grow runs it.
        use hetraid_core::control::change::{ChangeSpec, PacedChange, Step};
        let mut job = PacedChange::new(ChangeSpec {
            units_total: total,
            units_done_before: first,
            unit_bytes: chunk,
            limits: hetraid_core::pace::PaceLimits {
                min_bps: opts.min_speed,
                max_bps: opts.max_speed,
            },
        });
        // Bounded: the job's batches (each moves a unit or ends the
        // change), and waits that end as time passes (the pacer's average
        // rate falls); a stop ends it.
        loop {
            if self.stopping.load(std::sync::atomic::Ordering::SeqCst) {
                return Err(EngineError::Refused(
                    "the server is stopping: the change stays recorded and continues when the array is next served or assembled".into(),
                ));
            }
            if job.batches() >= job.batches_max() {
                break;
            }
            // Requests ran on the array now in the cell (each batch
            // assembles a new one: the cell keeps when they were seen).
            let busy = self.activity.observe(&self.current().hot.user_io);
            match job.next(start.elapsed().as_nanos() as u64, busy) {
                Step::Wait(ns) => std::thread::sleep(std::time::Duration::from_nanos(ns)),
                Step::Batch => {
                    if let Some(mut r) = self.step()? {
                        job.done(total, true);
                        // The last step reports its own run: the change's
                        // are every move since this run started.
                        r.moves = total.saturating_sub(first);
                        r.seconds = start.elapsed().as_secs_f64();
                        return Ok(r);
                    }
                    let Some(p) = self.current().change_progress() else {
                        return Err(EngineError::Refused(
                            "the change ended without a report (a hetraid bug)".into(),
                        ));
                    };
                    job.done(p.moves_done, false);
                }
                Step::Finished => break,
            }
        }
        Err(EngineError::Refused(
            "the change did not end after a batch per move (a hetraid bug)".into(),
        ))
    }
}
