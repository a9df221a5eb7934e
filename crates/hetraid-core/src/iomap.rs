//! From a request to the exact member operations an executor issues.
//!
//! The engine and the simulator must issue the same reads and writes to every member
//! for the same request (DESIGN: "engine and simulator agree on per-member read and
//! write counts"). So the dispatch — the chunk-aligned read fast path, direct extents
//! for requests without parity work, and otherwise a plan whose runs are merged into
//! one operation per contiguous member range — is decided here, once.

use crate::error::PlanError;
use crate::plan::{ColSet, Op, Planner, Request, RowRun, StripePlan};
use crate::units::PAGE;
use crate::ArrayState;

/// Largest merged member operation.
pub const MERGE_MAX: u64 = 16 << 20;

/// One page run of one column of one stripe plan, at a member offset.
#[derive(Debug, Clone, Copy)]
pub struct PlanExtent {
    /// Index of the stripe plan.
    pub plan: usize,
    pub col: usize,
    pub run: RowRun,
    pub member: usize,
    pub off: u64,
    pub len: u64,
}

/// Contiguous extents of one member: `pieces[first..first + count]`, one operation.
#[derive(Debug, Clone, Copy)]
pub struct ExtentGroup {
    pub member: usize,
    pub off: u64,
    pub len: u64,
    pub first: usize,
    pub count: usize,
}

/// The page runs of `plans` whose columns `cols` selects (reads or writes), sorted by
/// (member, offset).
pub fn plan_extents(plans: &[StripePlan], cols: impl Fn(&RowRun) -> ColSet) -> Vec<PlanExtent> {
    let mut v = Vec::new();
    for (i, sp) in plans.iter().enumerate() {
        for run in &sp.runs {
            for c in cols(run).iter() {
                let loc = sp.columns[c].loc;
                v.push(PlanExtent {
                    plan: i,
                    col: c,
                    run: *run,
                    member: loc.member,
                    off: loc.offset + run.page as u64 * PAGE,
                    len: run.pages as u64 * PAGE,
                });
            }
        }
    }
    v.sort_by_key(|p| (p.member, p.off));
    v
}

/// Does an extent at (`member`, `off`, `len`) extend the operation (`gm`, `go`,
/// `gl`)? The one merge rule for the engine and the simulator.
fn extends(gm: usize, go: u64, gl: u64, member: usize, off: u64, len: u64) -> bool {
    gm == member && go + gl == off && gl + len <= MERGE_MAX
}

/// Merge sorted extents that are contiguous on one member (up to [`MERGE_MAX`]).
pub fn merge_extents(pieces: &[PlanExtent]) -> Vec<ExtentGroup> {
    let mut out: Vec<ExtentGroup> = Vec::new();
    for (i, p) in pieces.iter().enumerate() {
        match out.last_mut() {
            Some(g) if extends(g.member, g.off, g.len, p.member, p.off, p.len) => {
                g.len += p.len;
                g.count += 1;
            }
            _ => out.push(ExtentGroup {
                member: p.member,
                off: p.off,
                len: p.len,
                first: i,
                count: 1,
            }),
        }
    }
    out
}

/// A member operation: (member, member offset, length).
pub type MemberOp = (usize, u64, u64);

/// What one user request becomes on the members.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestIo {
    /// Issued first, in parallel.
    pub reads: Vec<MemberOp>,
    /// Issued after every read completed and the parity arithmetic is done.
    pub writes: Vec<MemberOp>,
    /// Bytes the parity arithmetic touches (reads and writes of parity runs).
    pub xor_bytes: u64,
    /// Stripes the executor locks for the request (empty on the direct paths, which
    /// take no stripe lock).
    pub stripes: Vec<u64>,
}

fn trim_unplanned() -> PlanError {
    PlanError::Invalid("a trim is planned by hetraid_core::trim::plan_trim, not the planner".into())
}

impl Planner<'_> {
    /// The member operations for `req` in `state`, dispatched exactly as the engine
    /// does: fast path, direct extents, or a merged plan.
    pub fn request_io(&self, req: &Request, state: &ArrayState) -> Result<RequestIo, PlanError> {
        let mut io = RequestIo::default();
        self.request_io_into(req, state, &mut io)?;
        Ok(io)
    }

    /// [`Planner::request_io`] into `io`, its vectors emptied and refilled:
    /// a caller that keeps them (the simulator, millions of requests)
    /// allocates nothing on the fast paths.
    pub fn request_io_into(
        &self,
        req: &Request,
        state: &ArrayState,
        io: &mut RequestIo,
    ) -> Result<(), PlanError> {
        io.reads.clear();
        io.writes.clear();
        io.stripes.clear();
        io.xor_bytes = 0;
        let fast = match req.op {
            Op::Read => self.direct_read(req.offset, req.len, state),
            Op::Write => self.direct_write(req.offset, req.len, state),
            Op::Trim => return Err(trim_unplanned()),
        };
        let ops = match req.op {
            Op::Read => &mut io.reads,
            _ => &mut io.writes,
        };
        if let Some((m, off)) = fast {
            ops.push((m, off, req.len));
            return Ok(());
        }
        if let Some(ext) = self.direct_extents(req, state) {
            ops.extend(ext.into_iter().map(|(m, mo, _, len)| (m, mo, len)));
            return Ok(());
        }
        let plan = self.plan(req, state)?;
        *io = Self::plan_io(&plan.stripes, req.op);
        Ok(())
    }

    /// The member operations for `req` on an array with a write log: writes
    /// always take the planned path (their stripe updates are logged), reads
    /// are dispatched as by [`Planner::request_io`].
    pub fn request_io_logged(
        &self,
        req: &Request,
        state: &ArrayState,
    ) -> Result<RequestIo, PlanError> {
        if req.op == Op::Read {
            return self.request_io(req, state);
        }
        let plan = self.plan(req, state)?;
        Ok(Self::plan_io(&plan.stripes, req.op))
    }

    /// Member operations of planned stripes. Writes are one batch (reads merged per
    /// member, then writes merged per member); planned reads go stripe by stripe,
    /// one operation per run and column plus one per direct piece.
    pub fn plan_io(stripes: &[StripePlan], op: Op) -> RequestIo {
        let mut io = RequestIo {
            stripes: stripes.iter().map(|s| s.stripe).collect(),
            ..Default::default()
        };
        for sp in stripes {
            for r in &sp.runs {
                // Runs that touch parity (and only those) cost arithmetic over
                // every page they move.
                let parity = (sp.data_count..sp.data_count + sp.parity_count)
                    .any(|c| r.read.contains(c) || r.write.contains(c));
                if parity {
                    io.xor_bytes += (r.read.len() + r.write.len()) as u64 * r.pages as u64 * PAGE;
                }
            }
        }
        match op {
            Op::Write => {
                // The same grouping as merge_extents(plan_extents(..)), which the
                // engine uses, without its bookkeeping (the simulator's hot path;
                // the engine-vs-simulator test holds the two equal).
                let g = |cols: fn(&RowRun) -> ColSet| {
                    let mut v: Vec<MemberOp> = Vec::new();
                    for sp in stripes {
                        for run in &sp.runs {
                            for c in cols(run).iter() {
                                let loc = sp.columns[c].loc;
                                let off = loc.offset + run.page as u64 * PAGE;
                                v.push((loc.member, off, run.pages as u64 * PAGE));
                            }
                        }
                    }
                    v.sort_unstable_by_key(|e| (e.0, e.1));
                    // Merge in place: `w` is the last kept extent.
                    let mut w = 0;
                    for i in 1..v.len() {
                        let e = v[i];
                        let g = &mut v[w];
                        if extends(g.0, g.1, g.2, e.0, e.1, e.2) {
                            g.2 += e.2;
                        } else {
                            w += 1;
                            v[w] = e;
                        }
                    }
                    v.truncate((w + 1).min(v.len()));
                    v
                };
                io.reads = g(|r| r.read);
                io.writes = g(|r| r.write);
            }
            // No stripe plan is a trim's (`trim::plan_trim`): nothing here.
            Op::Trim => {}
            Op::Read => {
                for sp in stripes {
                    for run in &sp.runs {
                        for c in run.read.iter() {
                            let loc = sp.columns[c].loc;
                            io.reads.push((
                                loc.member,
                                loc.offset + run.page as u64 * PAGE,
                                run.pages as u64 * PAGE,
                            ));
                        }
                    }
                    for p in sp.pieces.iter() {
                        if let Some(c) = p.direct {
                            let loc = sp.columns[c].loc;
                            io.reads
                                .push((loc.member, loc.offset + p.chunk_offset, p.len));
                        }
                    }
                }
            }
        }
        io
    }
}
