//! The I/O planner: request + array state + write policy -> per-stripe plans.
//!
//! Decisions are made per 4 KiB page row, like Linux MD: for each row of a partial
//! stripe write the planner counts the reads a read-modify-write (RMW) and a
//! reconstruct-write (RCW) would need and lets the policy choose. Degraded rows pick
//! whichever strategy the surviving members allow. Consecutive rows with the same
//! decision are merged into one [`RowRun`].

use crate::error::PlanError;
use crate::layout::{ChunkLoc, Layout};
use crate::member::ServiceModel;
use crate::units::PAGE;
use serde::Serialize;

mod read;
mod write;

/// RMW/RCW selection ([Wacha 2012] ch. 3–4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WritePolicy {
    /// Linux MD: RMW if rmw < rcw.
    Md,
    /// RAID4S-modthresh: RMW if rmw <= rcw + 1.
    Modthresh,
    /// The same threshold decided once per stripe (over the members every
    /// row of the request's stripe reads) instead of per 4 KiB page row: a
    /// request then never mixes RMW and RCW rows within a stripe.
    ModthreshStripe,
    /// RAID4S-modified: always RMW when possible.
    RmwAlways,
    /// The smaller estimated completion time from per-member service models.
    Cost,
}

impl WritePolicy {
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "md" => Ok(Self::Md),
            "modthresh" => Ok(Self::Modthresh),
            "modthresh-stripe" => Ok(Self::ModthreshStripe),
            "rmw-always" => Ok(Self::RmwAlways),
            "cost" => Ok(Self::Cost),
            _ => Err(format!(
                "write policy '{s}' is unknown; use md, modthresh, modthresh-stripe, rmw-always or cost"
            )),
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Md => "md",
            Self::Modthresh => "modthresh",
            Self::ModthreshStripe => "modthresh-stripe",
            Self::RmwAlways => "rmw-always",
            Self::Cost => "cost",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Read,
    Write,
    /// A discard ([`crate::trim::plan_trim`] decides it; the planner plans
    /// reads and writes only).
    Trim,
}

/// A user request on the array's logical address space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    pub op: Op,
    pub offset: u64,
    pub len: u64,
}

impl Request {
    pub fn read(offset: u64, len: u64) -> Self {
        Self {
            op: Op::Read,
            offset,
            len,
        }
    }
    pub fn write(offset: u64, len: u64) -> Self {
        Self {
            op: Op::Write,
            offset,
            len,
        }
    }
}

/// Health of one member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemberState {
    InSync,
    Failed,
    /// Being rebuilt: stripes below the checkpoint, and stripes whose bit is set in
    /// `done` (one bit per stripe, for rebuild streams that finish out of order),
    /// are valid on it; the rest are neither read nor written (the rebuild fills
    /// them from the other members, including any write made meanwhile).
    Rebuilding {
        valid_below_stripe: u64,
        done: Option<std::sync::Arc<Vec<u64>>>,
    },
}

impl MemberState {
    pub fn rebuilding(valid_below_stripe: u64) -> Self {
        Self::Rebuilding {
            valid_below_stripe,
            done: None,
        }
    }
}

/// Health of every member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArrayState {
    pub members: Vec<MemberState>,
}

impl ArrayState {
    pub fn healthy(n: usize) -> Self {
        Self {
            members: vec![MemberState::InSync; n],
        }
    }

    pub fn with_failed(n: usize, failed: &[usize]) -> Self {
        let mut s = Self::healthy(n);
        for &f in failed {
            if f < n {
                s.members[f] = MemberState::Failed;
            }
        }
        s
    }

    /// Does `member` hold valid data for `stripe`?
    #[inline]
    pub fn available(&self, member: usize, stripe: u64) -> bool {
        match self.members.get(member) {
            Some(MemberState::InSync) => true,
            Some(MemberState::Rebuilding {
                valid_below_stripe,
                done,
            }) => {
                stripe < *valid_below_stripe
                    || done.as_ref().is_some_and(|d| {
                        d.get((stripe / 64) as usize)
                            .is_some_and(|w| w >> (stripe % 64) & 1 == 1)
                    })
            }
            _ => false,
        }
    }
}

/// What a column of a stripe plan is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Data(usize),
    P,
    Q,
    Copy(usize),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Column {
    pub role: Role,
    pub loc: ChunkLoc,
}

/// What a run does, as reported to users.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Read,
    Degraded,
    Rmw,
    Rcw,
    Full,
    Rebuild,
    Scrub,
}

/// The arithmetic a run needs (what [`crate::exec`] computes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    /// Old data and parity read; parity updated by deltas.
    Rmw,
    /// Unwritten data read; parity recomputed from all data.
    Rcw,
    /// Every data page overwritten; parity from new data alone.
    Full,
    /// Lost columns recovered from the reads, then as RCW (writes) or served (reads).
    Reconstruct,
    /// No parity to maintain: data pages only (partial pages read first).
    DataOnly,
    /// Mirrored data: partial pages read from one copy, every live copy written.
    Mirror,
    /// Rebuild lost columns from the reads and write them.
    Rebuild,
    /// Read everything and verify (repair writes parity/copies on mismatch).
    Scrub,
}

/// A set of column indices of one stripe plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct ColSet(pub u64);

impl ColSet {
    pub fn contains(self, c: usize) -> bool {
        self.0 >> c & 1 == 1
    }
    pub fn insert(&mut self, c: usize) {
        self.0 |= 1 << c;
    }
    pub fn len(self) -> usize {
        self.0.count_ones() as usize
    }
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
    pub fn iter(self) -> impl Iterator<Item = usize> {
        // Set bits lowest first (the simulator's hot path walks these).
        let mut bits = self.0;
        std::iter::from_fn(move || {
            (bits != 0).then(|| {
                let c = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                c
            })
        })
    }
    pub fn union(self, o: Self) -> Self {
        Self(self.0 | o.0)
    }
    pub fn minus(self, o: Self) -> Self {
        Self(self.0 & !o.0)
    }
}

impl Serialize for ColSet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

/// Consecutive page rows of one stripe with the same decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RowRun {
    /// First page row within the chunk.
    pub page: u32,
    pub pages: u32,
    pub mode: Mode,
    pub strategy: Strategy,
    /// Columns whose pages are read first.
    pub read: ColSet,
    /// Columns whose pages are written last.
    pub write: ColSet,
    /// Columns whose old contents must be recovered from the reads.
    pub lost: ColSet,
}

/// User bytes of one data column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Piece {
    /// Data index within the stripe.
    pub data: usize,
    pub chunk_offset: u64,
    pub len: u64,
    /// Offset in the request's buffer.
    pub buf_offset: u64,
    /// Reads: the column read directly into the user buffer (None: from a run).
    pub direct: Option<usize>,
}

/// Everything to do on one stripe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StripePlan {
    pub stripe: u64,
    pub columns: Vec<Column>,
    pub data_count: usize,
    pub parity_count: usize,
    pub runs: Vec<RowRun>,
    pub pieces: Vec<Piece>,
}

impl StripePlan {
    /// Page window [lo, hi) covered by the runs (None when there are none).
    pub fn window(&self) -> Option<(u32, u32)> {
        let lo = self.runs.iter().map(|r| r.page).min()?;
        let hi = self.runs.iter().map(|r| r.page + r.pages).max()?;
        Some((lo, hi))
    }

    /// Column index of data `i`'s copies.
    pub fn copies_of(&self, i: usize) -> impl Iterator<Item = usize> + '_ {
        self.columns
            .iter()
            .enumerate()
            .filter(move |(_, c)| c.role == Role::Copy(i))
            .map(|(j, _)| j)
    }
}

/// A whole request's plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plan {
    pub op: Op,
    pub offset: u64,
    pub len: u64,
    pub stripes: Vec<StripePlan>,
}

/// One member's I/O in a plan.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct MemberIo {
    pub device: usize,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub read_pages: u64,
    pub write_pages: u64,
    /// Contiguous extents after merging (= requests a member sees).
    pub read_ops: u64,
    pub write_ops: u64,
}

/// A member extent: (member, offset, length).
pub type Extent = (usize, u64, u64);

impl Plan {
    /// Reads and writes as member extents, contiguous ones merged.
    pub fn extents(&self) -> (Vec<Extent>, Vec<Extent>) {
        let mut reads = Vec::new();
        let mut writes = Vec::new();
        for sp in &self.stripes {
            for p in &sp.pieces {
                if let Some(c) = p.direct {
                    let l = sp.columns[c].loc;
                    reads.push((l.member, l.offset + p.chunk_offset, p.len));
                }
            }
            for r in &sp.runs {
                let off = r.page as u64 * PAGE;
                let len = r.pages as u64 * PAGE;
                for c in r.read.iter() {
                    let l = sp.columns[c].loc;
                    reads.push((l.member, l.offset + off, len));
                }
                for c in r.write.iter() {
                    let l = sp.columns[c].loc;
                    writes.push((l.member, l.offset + off, len));
                }
            }
        }
        (merge(reads), merge(writes))
    }

    /// Per-member totals for `members` members.
    pub fn member_io(&self, members: usize) -> Vec<MemberIo> {
        let mut io: Vec<MemberIo> = (0..members)
            .map(|d| MemberIo {
                device: d,
                ..Default::default()
            })
            .collect();
        let (r, w) = self.extents();
        for (m, off, len) in r {
            io[m].read_bytes += len;
            io[m].read_pages += pages_touched(off, len);
            io[m].read_ops += 1;
        }
        for (m, off, len) in w {
            io[m].write_bytes += len;
            io[m].write_pages += pages_touched(off, len);
            io[m].write_ops += 1;
        }
        io
    }
}

/// The set {0, .., k-1}.
pub fn low_bits(k: usize) -> u64 {
    if k >= 64 {
        u64::MAX
    } else {
        (1u64 << k) - 1
    }
}

/// 4 KiB pages an extent touches.
pub fn pages_touched(off: u64, len: u64) -> u64 {
    if len == 0 {
        return 0;
    }
    (off + len).div_ceil(PAGE) - off / PAGE
}

pub(crate) fn merge(mut v: Vec<Extent>) -> Vec<Extent> {
    v.sort_unstable();
    let mut out: Vec<Extent> = Vec::with_capacity(v.len());
    for e in v {
        match out.last_mut() {
            Some(last) if last.0 == e.0 && last.1 + last.2 >= e.1 => {
                let end = (last.1 + last.2).max(e.1 + e.2);
                last.2 = end - last.1;
            }
            _ => out.push(e),
        }
    }
    out
}

/// Turns requests into plans for one layout.
pub struct Planner<'a> {
    pub layout: &'a dyn Layout,
    pub policy: WritePolicy,
    /// Per-member service models for the `cost` policy.
    pub service: Vec<ServiceModel>,
    /// Layouts with copies: how reads choose one, and the members' state
    /// now (None: the first live copy).
    pub reads: Option<ReadBalance>,
    /// Members sat out for reads (core `sitout`): read from a copy or
    /// rebuilt from the rest of the stripe when that is possible.
    pub sat_out: crate::sitout::SatOut,
}

/// A request's reads so far: the members' loads with its own chunks added,
/// and the member its previous chunk went to.
struct ReadCursor {
    loads: Vec<crate::readbalance::MemberLoad>,
    previous: Option<usize>,
}

/// A read policy and the snapshot of the members it decides from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadBalance {
    pub policy: crate::readbalance::ReadPolicy,
    /// By member.
    pub loads: Vec<crate::readbalance::MemberLoad>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Cover {
    None,
    Partial,
    Full,
}

impl<'a> Planner<'a> {
    #[inline]
    pub fn new(layout: &'a dyn Layout, policy: WritePolicy, service: Vec<ServiceModel>) -> Self {
        Self {
            layout,
            policy,
            service,
            reads: None,
            sat_out: crate::sitout::SatOut::NONE,
        }
    }

    /// Reads leave the members in `sat_out` out where they can.
    pub fn with_sat_out(mut self, sat_out: crate::sitout::SatOut) -> Self {
        self.sat_out = sat_out;
        self
    }

    /// Reads on layouts with copies choose a copy with `policy` from the
    /// members' state in `loads`.
    pub fn with_reads(
        mut self,
        policy: crate::readbalance::ReadPolicy,
        loads: Vec<crate::readbalance::MemberLoad>,
    ) -> Self {
        self.reads = Some(ReadBalance { policy, loads });
        self
    }

    /// Columns of stripe `s`: data 0..k, then P, Q, then copies.
    pub fn columns(&self, s: u64) -> (Vec<Column>, usize, usize) {
        let st = self.layout.stripe(s);
        let k = st.data.len();
        let pc = st.parity.len();
        let mut cols: Vec<Column> = st
            .data
            .iter()
            .enumerate()
            .map(|(i, &loc)| Column {
                role: Role::Data(i),
                loc,
            })
            .collect();
        for (j, &loc) in st.parity.iter().enumerate() {
            cols.push(Column {
                role: if j == 0 { Role::P } else { Role::Q },
                loc,
            });
        }
        for (i, m) in st.mirrors.iter().enumerate() {
            for &loc in m {
                cols.push(Column {
                    role: Role::Copy(i),
                    loc,
                });
            }
        }
        (cols, k, pc)
    }

    /// The read fast path (MD's chunk-aligned read): a read that stays inside one
    /// chunk whose member is in sync goes straight to that member. Returns
    /// (member, member offset), or None when the full planner is needed.
    #[inline]
    pub fn direct_read(&self, offset: u64, len: u64, state: &ArrayState) -> Option<(usize, u64)> {
        let chunk = self.layout.chunk_bytes();
        // Chunks are powers of two but for odd layouts: a mask and a shift
        // instead of a 64-bit division on every read.
        let (index, co) = if chunk.is_power_of_two() {
            (offset >> chunk.trailing_zeros(), offset & (chunk - 1))
        } else {
            (offset / chunk, offset % chunk)
        };
        if len == 0 || len > chunk - co || offset.checked_add(len)? > self.layout.capacity_bytes() {
            return None;
        }
        let (s, i) = self.layout.locate_chunk(index);
        let loc = self.read_loc(s, i, co, len, state, &mut self.read_cursor())?;
        Some((loc.member, loc.offset + co))
    }

    /// Direct extents of a request that needs no parity work: every read whose
    /// chunks sit on in-sync members, and every write to a layout without
    /// redundancy. Returns (member, member offset, buffer offset, length) with
    /// extents contiguous on both the member and the buffer merged, or None when
    /// the full planner is needed.
    pub fn direct_extents(
        &self,
        req: &Request,
        state: &ArrayState,
    ) -> Option<Vec<(usize, u64, u64, u64)>> {
        if req.op == Op::Write && self.layout.redundancy() != crate::layout::Redundancy::None {
            return None;
        }
        let cap = self.layout.capacity_bytes();
        if req.len == 0 || req.offset.checked_add(req.len)? > cap {
            return None;
        }
        let chunk = self.layout.chunk_bytes();
        let mut out: Vec<(usize, u64, u64, u64)> = Vec::new();
        let (mut pos, end) = (req.offset, req.offset + req.len);
        let mut cursor = self.read_cursor();
        while pos < end {
            let co = pos % chunk;
            let len = (chunk - co).min(end - pos);
            let (s, i) = self.layout.locate_chunk(pos / chunk);
            let loc = if req.op == Op::Read {
                self.read_loc(s, i, co, len, state, &mut cursor)?
            } else {
                let loc = self.layout.data_loc(s, i);
                if !state.available(loc.member, s) {
                    return None;
                }
                loc
            };
            let (m, mo, bo) = (loc.member, loc.offset + co, pos - req.offset);
            match out.iter_mut().rev().find(|e| e.0 == m) {
                Some(e) if e.1 + e.3 == mo && e.2 + e.3 == bo => e.3 += len,
                _ => out.push((m, mo, bo, len)),
            }
            pos += len;
        }
        Some(out)
    }

    /// The write fast path for layouts without redundancy (RAID0 has no stripe
    /// cache in MD either): a write inside one chunk goes straight to its member.
    pub fn direct_write(&self, offset: u64, len: u64, state: &ArrayState) -> Option<(usize, u64)> {
        if self.layout.redundancy() != crate::layout::Redundancy::None {
            return None;
        }
        self.direct_read(offset, len, state)
    }

    /// Plan a user read or write.
    pub fn plan(&self, req: &Request, state: &ArrayState) -> Result<Plan, PlanError> {
        let cap = self.layout.capacity_bytes();
        if req.len == 0 || req.offset.checked_add(req.len).is_none_or(|e| e > cap) {
            if req.len == 0 && req.offset <= cap {
                return Ok(Plan {
                    op: req.op,
                    offset: req.offset,
                    len: 0,
                    stripes: vec![],
                });
            }
            return Err(PlanError::OutOfRange {
                offset: req.offset,
                len: req.len,
                capacity: cap,
            });
        }
        if state.members.len() != self.layout.members() {
            return Err(PlanError::Invalid(format!(
                "array state describes {} members but the layout has {}",
                state.members.len(),
                self.layout.members()
            )));
        }
        let chunk = self.layout.chunk_bytes();
        // Pieces grouped by stripe, in stripe order. A Vec, not a map: requests touch
        // few stripes, and logical order is stripe order for most layouts.
        let mut by_stripe: Vec<(u64, Vec<Piece>)> = Vec::new();
        let (mut pos, end) = (req.offset, req.offset + req.len);
        while pos < end {
            let lc = pos / chunk;
            let co = pos % chunk;
            let len = (chunk - co).min(end - pos);
            let (s, i) = self.layout.locate_chunk(lc);
            let at = match by_stripe.iter().rposition(|e| e.0 == s) {
                Some(i) => i,
                None => {
                    by_stripe.push((s, Vec::new()));
                    by_stripe.len() - 1
                }
            };
            by_stripe[at].1.push(Piece {
                data: i,
                chunk_offset: co,
                len,
                buf_offset: pos - req.offset,
                direct: None,
            });
            pos += len;
        }
        by_stripe.sort_by_key(|e| e.0);
        let mut stripes = Vec::with_capacity(by_stripe.len());
        for (s, pieces) in by_stripe {
            stripes.push(match req.op {
                Op::Read => self.plan_read(s, pieces, state)?,
                Op::Write => self.plan_write(s, pieces, state)?,
                Op::Trim => {
                    return Err(PlanError::Invalid(
                        "a trim is planned by hetraid_core::trim::plan_trim, not the planner"
                            .into(),
                    ))
                }
            });
        }
        Ok(Plan {
            op: req.op,
            offset: req.offset,
            len: req.len,
            stripes,
        })
    }

    fn failed_set(&self, s: u64, cols: &[Column], state: &ArrayState) -> ColSet {
        let mut f = ColSet::default();
        for (c, col) in cols.iter().enumerate() {
            if !state.available(col.loc.member, s) {
                f.insert(c);
            }
        }
        f
    }

    /// For reconstruction: which parity columns to read for `lost_data` lost data
    /// columns, or None when too few survive.
    fn parity_for(k: usize, pc: usize, failed: ColSet, lost_data: usize) -> Option<ColSet> {
        let mut p = ColSet::default();
        for c in k..k + pc {
            if p.len() < lost_data && !failed.contains(c) {
                p.insert(c);
            }
        }
        (p.len() == lost_data).then_some(p)
    }

    fn data_lost(s: u64, cols: &[Column], failed: ColSet) -> PlanError {
        PlanError::DataLost {
            stripe: s,
            failed: failed.iter().map(|c| cols[c].loc.member).collect(),
        }
    }
}
