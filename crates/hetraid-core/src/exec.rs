//! The arithmetic of a stripe plan, on buffers: what an executor computes between
//! its reads and its writes. Pure (no I/O); the engine calls it with real member
//! pages, the tests with [`MemArray`].
//!
//! Protocol for one [`StripePlan`]:
//! 1. `StripeBufs::new(plan)`; read every run's `read` columns into
//!    `bufs.run_slice(col, run)`; read direct pieces straight into the user buffer.
//! 2. writes: [`fill_writes`]; reads: [`finish_reads`]; rebuild: [`rebuild`];
//!    scrub: [`scrub`].
//! 3. write every run's `write` columns from `bufs.run_slice(col, run)`.

use crate::plan::{ColSet, Plan, Role, RowRun, Strategy, StripePlan};
use crate::units::PAGE;

/// Page buffers for every column over a stripe plan's page window.
pub struct StripeBufs {
    pub lo: u32,
    pub pages: u32,
    pub cols: Vec<Vec<u8>>,
}

impl StripeBufs {
    pub fn new(sp: &StripePlan) -> Self {
        let (lo, hi) = sp.window().unwrap_or((0, 0));
        let len = (hi - lo) as usize * PAGE as usize;
        Self {
            lo,
            pages: hi - lo,
            cols: vec![vec![0u8; len]; sp.columns.len()],
        }
    }

    /// Reuse these buffers for another plan (no reallocation when they are large
    /// enough). Contents are not cleared: every byte a plan uses is read or computed.
    pub fn refit(&mut self, sp: &StripePlan) {
        let (lo, hi) = sp.window().unwrap_or((0, 0));
        let len = (hi - lo) as usize * PAGE as usize;
        self.lo = lo;
        self.pages = hi - lo;
        self.cols.resize_with(sp.columns.len(), Vec::new);
        for c in &mut self.cols {
            c.resize(len, 0);
        }
    }

    fn range(&self, run: &RowRun) -> std::ops::Range<usize> {
        let a = (run.page - self.lo) as usize * PAGE as usize;
        a..a + run.pages as usize * PAGE as usize
    }

    pub fn run_slice(&mut self, col: usize, run: &RowRun) -> &mut [u8] {
        let r = self.range(run);
        &mut self.cols[col][r]
    }
}

/// Copy the request bytes of data column `i` that fall in `run` into its buffer.
fn overlay(sp: &StripePlan, bufs: &mut StripeBufs, run: &RowRun, i: usize, user: &[u8]) {
    let (rs, re) = (run.page as u64 * PAGE, (run.page + run.pages) as u64 * PAGE);
    let base = bufs.lo as u64 * PAGE;
    for p in sp.pieces.iter().filter(|p| p.data == i) {
        let (a, b) = (p.chunk_offset.max(rs), (p.chunk_offset + p.len).min(re));
        if a < b {
            let src = (p.buf_offset + a - p.chunk_offset) as usize;
            bufs.cols[i][(a - base) as usize..(b - base) as usize]
                .copy_from_slice(&user[src..src + (b - a) as usize]);
        }
    }
}

fn has_piece(sp: &StripePlan, run: &RowRun, i: usize) -> bool {
    let (rs, re) = (run.page as u64 * PAGE, (run.page + run.pages) as u64 * PAGE);
    sp.pieces
        .iter()
        .any(|p| p.data == i && p.chunk_offset < re && p.chunk_offset + p.len > rs)
}

/// Recover a parity run's `lost` columns (and any unread parity) from what was read.
fn recover_run(sp: &StripePlan, bufs: &mut StripeBufs, run: &RowRun) -> Result<(), String> {
    let (k, pc) = (sp.data_count, sp.parity_count);
    let width = k + pc;
    let mut missing: Vec<usize> = Vec::new();
    for c in 0..width {
        if run.lost.contains(c) || !run.read.contains(c) {
            missing.push(c);
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    let r = bufs.range(run);
    let mut blocks: Vec<&mut [u8]> = bufs.cols[..width]
        .iter_mut()
        .map(|c| &mut c[r.clone()])
        .collect();
    hetraid_parity::recover(&mut blocks, k, &missing)
        .map_err(|e| format!("stripe {}: {e}", sp.stripe))
}

/// The request bytes that become data column `i`'s pages in `run`, when the
/// request covers all of them: such columns are not staged in the buffers, their
/// parity is computed and their pages written straight from the request.
pub fn user_source<'a>(
    sp: &StripePlan,
    run: &RowRun,
    i: usize,
    user: &'a [u8],
) -> Option<&'a [u8]> {
    let (rs, re) = (run.page as u64 * PAGE, (run.page + run.pages) as u64 * PAGE);
    let p = sp
        .pieces
        .iter()
        .find(|p| p.data == i && p.chunk_offset <= rs && p.chunk_offset + p.len >= re)?;
    let a = (p.buf_offset + rs - p.chunk_offset) as usize;
    user.get(a..a + (re - rs) as usize)
}

/// Where the pages of write column `c` in `run` come from: the request for fully
/// covered data columns and their copies, the buffers otherwise (None).
pub fn write_source<'a>(
    sp: &StripePlan,
    run: &RowRun,
    c: usize,
    user: &'a [u8],
) -> Option<&'a [u8]> {
    match sp.columns[c].role {
        Role::Data(i) | Role::Copy(i) => user_source(sp, run, i, user),
        _ => None,
    }
}

/// Recompute parity columns from all data columns (request bytes where they
/// cover a column, buffers otherwise).
fn parity_from_data(sp: &StripePlan, bufs: &mut StripeBufs, run: &RowRun, user: &[u8]) {
    let (k, pc) = (sp.data_count, sp.parity_count);
    let r = bufs.range(run);
    let (data, par) = bufs.cols.split_at_mut(k);
    let srcs: Vec<&[u8]> = data
        .iter()
        .enumerate()
        .map(|(i, d)| user_source(sp, run, i, user).unwrap_or(&d[r.clone()]))
        .collect();
    match pc {
        1 => hetraid_parity::xor_gen(&mut par[0][r], &srcs),
        2 => {
            let (p, q) = par.split_at_mut(1);
            hetraid_parity::pq_gen(&srcs, &mut p[0][r.clone()], &mut q[0][r]);
        }
        _ => {}
    }
}

/// After the reads of a write plan: compute every page to write.
pub fn fill_writes(sp: &StripePlan, bufs: &mut StripeBufs, user: &[u8]) -> Result<(), String> {
    let k = sp.data_count;
    for run in &sp.runs {
        match run.strategy {
            Strategy::Rmw => {
                let r = bufs.range(run);
                for i in 0..k {
                    if !has_piece(sp, run, i) {
                        continue;
                    }
                    let old = bufs.cols[i][r.clone()].to_vec();
                    overlay(sp, bufs, run, i, user);
                    let (data, par) = bufs.cols.split_at_mut(k);
                    let new = &data[i][r.clone()];
                    for (j, pcol) in par.iter_mut().enumerate().take(sp.parity_count) {
                        if !run.read.contains(k + j) {
                            continue;
                        }
                        if j == 0 {
                            hetraid_parity::xor_acc(&mut pcol[r.clone()], &[&old, new]);
                        } else {
                            hetraid_parity::q_acc(i, &old, &mut pcol[r.clone()]);
                            hetraid_parity::q_acc(i, new, &mut pcol[r.clone()]);
                        }
                    }
                }
            }
            Strategy::Rcw | Strategy::Full | Strategy::Reconstruct => {
                if run.strategy == Strategy::Reconstruct {
                    recover_run(sp, bufs, run)?;
                }
                for i in 0..k {
                    if user_source(sp, run, i, user).is_none() {
                        overlay(sp, bufs, run, i, user);
                    }
                }
                parity_from_data(sp, bufs, run, user);
            }
            Strategy::DataOnly => {
                for i in 0..k {
                    if user_source(sp, run, i, user).is_none() {
                        overlay(sp, bufs, run, i, user);
                    }
                }
            }
            Strategy::Mirror => {
                let r = bufs.range(run);
                for i in 0..k {
                    // Fully covered: every copy is written from the request itself.
                    if !has_piece(sp, run, i) || user_source(sp, run, i, user).is_some() {
                        continue;
                    }
                    let copies: Vec<usize> = sp.copies_of(i).collect();
                    if let Some(&src) = copies.iter().find(|c| run.read.contains(**c)) {
                        let v = bufs.cols[src][r.clone()].to_vec();
                        bufs.cols[i][r.clone()].copy_from_slice(&v);
                    }
                    overlay(sp, bufs, run, i, user);
                    if !copies.is_empty() {
                        let v = bufs.cols[i][r.clone()].to_vec();
                        for c in copies {
                            bufs.cols[c][r.clone()].copy_from_slice(&v);
                        }
                    }
                }
            }
            Strategy::Rebuild | Strategy::Scrub => {
                return Err("fill_writes got a rebuild or scrub plan".into())
            }
        }
    }
    Ok(())
}

/// After the reads of a read plan: reconstruct lost columns and copy every
/// non-direct piece into `out` (the request buffer).
pub fn finish_reads(sp: &StripePlan, bufs: &mut StripeBufs, out: &mut [u8]) -> Result<(), String> {
    for run in &sp.runs {
        recover_run(sp, bufs, run)?;
    }
    let base = bufs.lo as u64 * PAGE;
    for p in sp.pieces.iter().filter(|p| p.direct.is_none()) {
        let a = (p.chunk_offset - base) as usize;
        out[p.buf_offset as usize..(p.buf_offset + p.len) as usize]
            .copy_from_slice(&bufs.cols[p.data][a..a + p.len as usize]);
    }
    Ok(())
}

/// After the reads of a rebuild plan: recompute the lost columns.
pub fn rebuild(sp: &StripePlan, bufs: &mut StripeBufs) -> Result<(), String> {
    for run in &sp.runs {
        if sp.parity_count > 0 {
            recover_run(sp, bufs, run)?;
        } else {
            let r = bufs.range(run);
            for c in run.lost.iter() {
                let i = match sp.columns[c].role {
                    Role::Data(i) | Role::Copy(i) => i,
                    _ => unreachable!(),
                };
                let src = std::iter::once(i)
                    .chain(sp.copies_of(i))
                    .find(|j| run.read.contains(*j))
                    .ok_or("no copy read")?;
                let v = bufs.cols[src][r.clone()].to_vec();
                bufs.cols[c][r.clone()].copy_from_slice(&v);
            }
        }
    }
    Ok(())
}

/// Scrub result for one stripe.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScrubOutcome {
    /// Pages whose redundancy did not match.
    pub mismatched_pages: u64,
}

/// After the reads of a scrub plan: verify; on mismatch the redundancy columns'
/// buffers hold the correct contents (write them when repairing).
pub fn scrub(sp: &StripePlan, bufs: &mut StripeBufs) -> ScrubOutcome {
    let mut out = ScrubOutcome::default();
    let k = sp.data_count;
    for run in &sp.runs {
        let r = bufs.range(run);
        let before: Vec<Vec<u8>> = bufs.cols.iter().map(|c| c[r.clone()].to_vec()).collect();
        if sp.parity_count > 0 {
            parity_from_data(sp, bufs, run, &[]);
        } else {
            for i in 0..k {
                let src = std::iter::once(i)
                    .chain(sp.copies_of(i))
                    .find(|c| run.read.contains(*c));
                if let Some(src) = src {
                    let v = bufs.cols[src][r.clone()].to_vec();
                    for c in std::iter::once(i)
                        .chain(sp.copies_of(i))
                        .collect::<Vec<_>>()
                    {
                        bufs.cols[c][r.clone()].copy_from_slice(&v);
                    }
                }
            }
        }
        for page in 0..run.pages as usize {
            let pr = page * PAGE as usize..(page + 1) * PAGE as usize;
            let bad = run.read.iter().any(|c| {
                before[c][pr.clone()] != bufs.cols[c][r.start + pr.start..r.start + pr.end]
            });
            out.mismatched_pages += bad as u64;
        }
    }
    out
}

/// An in-memory array of members: executes plans with real bytes. Reading or
/// writing a member marked failed is an error, so tests catch plans that touch
/// members they must not.
#[derive(Debug, Clone)]
pub struct MemArray {
    pub members: Vec<Vec<u8>>,
    pub failed: Vec<bool>,
    pub reads: Vec<u64>,
    pub writes: Vec<u64>,
}

impl MemArray {
    pub fn new(sizes: &[u64]) -> Self {
        let n = sizes.len();
        Self {
            members: sizes.iter().map(|&s| vec![0u8; s as usize]).collect(),
            failed: vec![false; n],
            reads: vec![0; n],
            writes: vec![0; n],
        }
    }

    fn read(&mut self, m: usize, off: u64, buf: &mut [u8]) -> Result<(), String> {
        if self.failed[m] {
            return Err(format!("plan reads failed member {m}"));
        }
        self.reads[m] += 1;
        let o = off as usize;
        buf.copy_from_slice(
            self.members[m]
                .get(o..o + buf.len())
                .ok_or(format!("read past end of member {m}"))?,
        );
        Ok(())
    }

    fn write(&mut self, m: usize, off: u64, buf: &[u8]) -> Result<(), String> {
        if self.failed[m] {
            return Err(format!("plan writes failed member {m}"));
        }
        self.writes[m] += 1;
        let o = off as usize;
        self.members[m]
            .get_mut(o..o + buf.len())
            .ok_or(format!("write past end of member {m}"))?
            .copy_from_slice(buf);
        Ok(())
    }

    fn do_reads(&mut self, sp: &StripePlan, bufs: &mut StripeBufs) -> Result<(), String> {
        for run in &sp.runs {
            for c in run.read.iter() {
                let loc = sp.columns[c].loc;
                let off = loc.offset + run.page as u64 * PAGE;
                let mut tmp = vec![0u8; run.pages as usize * PAGE as usize];
                self.read(loc.member, off, &mut tmp)?;
                bufs.run_slice(c, run).copy_from_slice(&tmp);
            }
        }
        Ok(())
    }

    fn do_writes(
        &mut self,
        sp: &StripePlan,
        bufs: &mut StripeBufs,
        cols: impl Fn(&RowRun) -> ColSet,
        user: &[u8],
    ) -> Result<(), String> {
        for run in &sp.runs {
            for c in cols(run).iter() {
                let loc = sp.columns[c].loc;
                let data = match write_source(sp, run, c, user) {
                    Some(src) => src.to_vec(),
                    None => bufs.run_slice(c, run).to_vec(),
                };
                self.write(loc.member, loc.offset + run.page as u64 * PAGE, &data)?;
            }
        }
        Ok(())
    }

    /// Execute a read or write plan; `data` is the request buffer.
    pub fn execute(&mut self, plan: &Plan, data: &mut [u8]) -> Result<(), String> {
        for sp in &plan.stripes {
            let mut bufs = StripeBufs::new(sp);
            self.do_reads(sp, &mut bufs)?;
            match plan.op {
                crate::plan::Op::Trim => {
                    return Err("a trim has no stripe plan (hetraid_core::trim plans it)".into())
                }
                crate::plan::Op::Write => {
                    fill_writes(sp, &mut bufs, data)?;
                    self.do_writes(sp, &mut bufs, |r| r.write, data)?;
                }
                crate::plan::Op::Read => {
                    for p in sp.pieces.iter().filter(|p| p.direct.is_some()) {
                        let loc = sp.columns[p.direct.unwrap()].loc;
                        let (a, b) = (p.buf_offset as usize, (p.buf_offset + p.len) as usize);
                        self.read(loc.member, loc.offset + p.chunk_offset, &mut data[a..b])?;
                    }
                    finish_reads(sp, &mut bufs, data)?;
                }
            }
        }
        Ok(())
    }

    /// Execute a rebuild plan.
    pub fn execute_rebuild(&mut self, sp: &StripePlan) -> Result<(), String> {
        let mut bufs = StripeBufs::new(sp);
        self.do_reads(sp, &mut bufs)?;
        rebuild(sp, &mut bufs)?;
        self.do_writes(sp, &mut bufs, |r| r.write, &[])
    }

    /// Execute a scrub plan; returns mismatched pages (repaired when the plan writes).
    pub fn execute_scrub(&mut self, sp: &StripePlan) -> Result<u64, String> {
        let mut bufs = StripeBufs::new(sp);
        self.do_reads(sp, &mut bufs)?;
        let o = scrub(sp, &mut bufs);
        if o.mismatched_pages > 0 {
            self.do_writes(sp, &mut bufs, |r| r.write, &[])?;
        }
        Ok(o.mismatched_pages)
    }
}
