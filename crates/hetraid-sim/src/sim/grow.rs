//! The controller's grow: a member added to a RAID5 or RAID6 and the data
//! restriped onto all of them, step by step (the core's `reshape_steps`),
//! paced by MD's limits between steps (the core's `control::change`), as
//! the engine's served array runs `hetraid grow --add`. Each step runs with
//! user requests held, as the engine's runs between two assemblies with
//! requests waiting at the array's lock: its reads through the array (the
//! old layout above the mark), a critical step's chunks read for the
//! backup, then the new rows written whole, parity included. The backup
//! and superblock writes outside the data area are not simulated (the
//! simulator models no superblock), as for a rebuild's checkpoints.

use super::*;
use hetraid_core::control::change::{ChangeSpec, PacedChange, Step};
use hetraid_core::layout::reshape::Reshaping;
use hetraid_core::layout::Layout;

/// A grow in progress.
pub(super) struct GrowRun {
    pub job: PacedChange,
    /// The next of the setup's steps.
    pub next_step: usize,
    /// A step wants to run or runs (user requests are held).
    pub stepping: bool,
    /// User requests a step held.
    pub requests_held: u64,
    pub finished_at: Option<Ns>,
    /// Response times of the user requests done while it ran.
    pub resp: Vec<Ns>,
}

impl GrowRun {
    pub fn new(s: &Setup) -> Option<Self> {
        s.grow.as_ref()?;
        let l = s
            .layout
            .as_reshaping()
            .expect("a grow runs on a reshaping layout");
        Some(Self {
            job: PacedChange::new(ChangeSpec {
                units_total: l.new_layout().stripe_count(),
                units_done_before: l.mark_rows(),
                unit_bytes: l.chunk_bytes(),
                limits: hetraid_core::pace::PaceLimits {
                    min_bps: s.cfg.min_speed.0,
                    max_bps: s.cfg.max_speed.0,
                },
            }),
            next_step: 0,
            stepping: false,
            requests_held: 0,
            finished_at: None,
            resp: Vec::new(),
        })
    }
}

impl Runner<'_> {
    /// The grow's report (`end`: the run's end).
    pub(super) fn grow_report(&mut self, end: Ns) -> Option<crate::report::GrowReport> {
        let secs = |t: Ns| t as f64 / NS_PER_S as f64;
        let l = self.s.layout.as_reshaping()?;
        let (before, after) = (
            l.old_layout().capacity_bytes(),
            l.new_layout().capacity_bytes(),
        );
        let g = self.grow.as_mut()?;
        let t = g.finished_at.unwrap_or(end);
        let (m, _, p, _) = summarize(&mut g.resp);
        Some(crate::report::GrowReport {
            grow_time_s: secs(t),
            steps: g.job.batches(),
            backup_steps: self.s.grow.as_ref()?[..g.next_step]
                .iter()
                .filter(|s| s.backup)
                .count() as u64,
            rows: g.job.units_done(),
            moved_bytes: g.job.bytes(),
            grow_mbps: g.job.bytes() as f64 / secs(t.max(1)) / 1e6,
            capacity_before: before,
            capacity_after: after,
            requests_during: g.resp.len() as u64,
            requests_held: g.requests_held,
            mean_response_during_ms: m,
            p99_response_during_ms: p,
            completed: g.finished_at.is_some(),
        })
    }

    fn reshaping(&self) -> &Reshaping {
        self.s
            .layout
            .as_reshaping()
            .expect("a grow runs on a reshaping layout")
    }

    /// Ask the job what to do: wait as the pacer says, close the gate for
    /// the next step, or end.
    pub(super) fn grow_next(&mut self) -> Result<(), String> {
        let now = self.k.now();
        let busy = self.users_active();
        let g = self.grow.as_mut().unwrap();
        if g.stepping || g.finished_at.is_some() {
            return Ok(());
        }
        match g.job.next(now, busy) {
            Step::Wait(ns) => self.k.at(now + ns, Ev::GrowWake),
            Step::Batch => {
                g.stepping = true;
                self.hold_requests();
                return self.grow_try_step();
            }
            Step::Finished => g.finished_at = Some(now),
        }
        Ok(())
    }

    /// Start the step once the gate is closed and no user request is on
    /// the members (the held ones are counted in flight).
    pub(super) fn grow_try_step(&mut self) -> Result<(), String> {
        let Some(g) = self.grow.as_ref() else {
            return Ok(());
        };
        let running = self
            .jobs
            .iter()
            .flatten()
            .any(|j| matches!(j.kind, JobKind::Grow));
        if !g.stepping || running || self.users_on_members() {
            return Ok(());
        }
        let io = self.grow_step_io(g.next_step)?;
        self.start_job(JobKind::Grow, io)
    }

    /// Step `k`'s member operations, as the engine's `run_restripe` issues
    /// them in the data area.
    fn grow_step_io(&self, k: usize) -> Result<RequestIo, String> {
        let st = &self.s.grow.as_ref().unwrap()[k];
        let l = self.reshaping();
        let chunk = l.chunk_bytes();
        let len = st.bytes.end - st.bytes.start;
        let mut io = if len > 0 {
            self.planner
                .request_io(&Request::read(st.bytes.start, len), &self.state)
                .map_err(|e| format!("grow step at row {}: {e}", st.rows.start))?
        } else {
            RequestIo::default()
        };
        if st.backup {
            // Every member's chunk of the row, read for its backup area.
            io.reads
                .extend((0..l.members()).map(|m| (m, st.rows.start * chunk, chunk)));
        }
        let new = l.new_layout();
        io.writes.clear();
        for row in st.rows.clone() {
            let s = new.stripe(row);
            io.writes.extend(
                s.data
                    .iter()
                    .chain(&s.parity)
                    .map(|c| (c.member, c.offset, chunk)),
            );
            if !s.parity.is_empty() {
                io.xor_bytes += chunk * s.data.len() as u64;
            }
        }
        io.stripes.clear();
        Ok(io)
    }

    /// A step is on the members: the mark moves past it, the held requests
    /// go (planned on the layout as it is now), and the job is asked again.
    pub(super) fn grow_step_done(&mut self, now: Ns) -> Result<(), String> {
        let steps = self.s.grow.as_ref().unwrap();
        let g = self.grow.as_mut().unwrap();
        let st = &steps[g.next_step];
        g.next_step += 1;
        let last = g.next_step == steps.len();
        g.job.done(st.rows.end, last);
        if last {
            g.finished_at = Some(now);
            self.end = self.end.max(now);
        }
        g.stepping = false;
        self.reshaping().set_mark(st.rows.end);
        self.state_version += 1;
        let held = self.release_requests()?;
        self.grow.as_mut().unwrap().requests_held += held;
        self.k.at(now, Ev::GrowWake);
        Ok(())
    }
}
