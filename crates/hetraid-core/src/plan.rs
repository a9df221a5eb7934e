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

/// RMW/RCW selection (SPEC §3).
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
        }
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

    /// Does choosing among copies apply (a mirrored layout, a policy other
    /// than `first`)?
    #[inline]
    fn balances(&self) -> bool {
        // The cheap test first: the layout's is a virtual call.
        self.reads
            .as_ref()
            .is_some_and(|r| r.policy != crate::readbalance::ReadPolicy::First)
            && crate::readbalance::keeps_copies(self.layout)
    }

    /// Where a read of `len` bytes at `co` into data chunk `i` of stripe `s`
    /// goes: the first copy, or (balancing) the copy the read policy picks
    /// among the live ones, given `loads` (updated with the choice, so the
    /// next chunk of the same request sees it) and the member the previous
    /// chunk used. None when no copy is available (the full planner then).
    #[inline]
    fn read_loc(
        &self,
        s: u64,
        i: usize,
        co: u64,
        len: u64,
        state: &ArrayState,
        cursor: &mut ReadCursor,
    ) -> Option<ChunkLoc> {
        let first = self.layout.data_loc(s, i);
        if !self.balances() {
            return state.available(first.member, s).then_some(first);
        }
        let st = self.layout.stripe(s);
        let copies: Vec<ChunkLoc> = std::iter::once(first)
            .chain(st.mirrors.get(i).into_iter().flatten().copied())
            .filter(|c| state.available(c.member, s))
            .map(|c| ChunkLoc {
                member: c.member,
                offset: c.offset + co,
            })
            .collect();
        if copies.is_empty() {
            return None;
        }
        let policy = self.reads.as_ref().expect("balancing").policy;
        let current = cursor
            .previous
            .and_then(|m| copies.iter().position(|c| c.member == m));
        let c = copies[crate::readbalance::choose(policy, &copies, &cursor.loads, current)];
        if let Some(l) = cursor.loads.get_mut(c.member) {
            l.pending += 1;
            l.head = c.offset + len;
        }
        cursor.previous = Some(c.member);
        Some(ChunkLoc {
            member: c.member,
            offset: c.offset - co,
        })
    }

    #[inline]
    fn read_cursor(&self) -> ReadCursor {
        ReadCursor {
            loads: match &self.reads {
                Some(r) if self.balances() => r.loads.clone(),
                _ => Vec::new(),
            },
            previous: None,
        }
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

    fn plan_read(
        &self,
        s: u64,
        mut pieces: Vec<Piece>,
        state: &ArrayState,
    ) -> Result<StripePlan, PlanError> {
        let (cols, k, pc) = self.columns(s);
        let failed = self.failed_set(s, &cols, state);
        let mut sp = StripePlan {
            stripe: s,
            columns: cols,
            data_count: k,
            parity_count: pc,
            runs: vec![],
            pieces: vec![],
        };
        let mut degraded_pages: Vec<(u32, u32)> = Vec::new();
        for p in pieces.iter_mut() {
            if !failed.contains(p.data) {
                p.direct = Some(p.data);
                continue;
            }
            if let Some(c) = sp.copies_of(p.data).find(|c| !failed.contains(*c)) {
                p.direct = Some(c);
                continue;
            }
            if pc == 0 {
                return Err(Self::data_lost(s, &sp.columns, failed));
            }
            let first = (p.chunk_offset / PAGE) as u32;
            let last = ((p.chunk_offset + p.len).div_ceil(PAGE)) as u32;
            degraded_pages.push((first, last));
        }
        if !degraded_pages.is_empty() {
            let mut lost = ColSet::default();
            let mut read = ColSet::default();
            for c in 0..k {
                if failed.contains(c) {
                    lost.insert(c);
                } else {
                    read.insert(c);
                }
            }
            let par = Self::parity_for(k, pc, failed, lost.len())
                .ok_or_else(|| Self::data_lost(s, &sp.columns, failed))?;
            read = read.union(par);
            degraded_pages.sort_unstable();
            let mut merged: Vec<(u32, u32)> = Vec::new();
            for (a, b) in degraded_pages {
                match merged.last_mut() {
                    Some(m) if m.1 >= a => m.1 = m.1.max(b),
                    _ => merged.push((a, b)),
                }
            }
            for (a, b) in merged {
                sp.runs.push(RowRun {
                    page: a,
                    pages: b - a,
                    mode: Mode::Degraded,
                    strategy: Strategy::Reconstruct,
                    read,
                    write: ColSet::default(),
                    lost,
                });
            }
        }
        // A piece whose column a degraded run reads anyway is served from that
        // read instead of a second read of the same pages.
        for p in pieces.iter_mut() {
            if let Some(c) = p.direct {
                let (a, b) = (
                    (p.chunk_offset / PAGE) as u32,
                    (p.chunk_offset + p.len).div_ceil(PAGE) as u32,
                );
                if c == p.data
                    && sp
                        .runs
                        .iter()
                        .any(|r| r.read.contains(c) && r.page <= a && b <= r.page + r.pages)
                {
                    p.direct = None;
                }
            }
        }
        sp.pieces = pieces;
        Ok(sp)
    }

    fn plan_write(
        &self,
        s: u64,
        pieces: Vec<Piece>,
        state: &ArrayState,
    ) -> Result<StripePlan, PlanError> {
        let (cols, k, pc) = self.columns(s);
        let failed = self.failed_set(s, &cols, state);
        let chunk_pages = (self.layout.chunk_bytes() / PAGE) as u32;
        let lo = pieces
            .iter()
            .map(|p| (p.chunk_offset / PAGE) as u32)
            .min()
            .unwrap_or(0);
        let hi = pieces
            .iter()
            .map(|p| (p.chunk_offset + p.len).div_ceil(PAGE) as u32)
            .max()
            .unwrap_or(0);
        debug_assert!(hi <= chunk_pages);
        let mut sp = StripePlan {
            stripe: s,
            columns: cols,
            data_count: k,
            parity_count: pc,
            runs: vec![],
            pieces,
        };
        let mut cover = vec![Cover::None; k];
        let cover_of = |page: u32, cover: &mut Vec<Cover>, pieces: &[Piece]| {
            let (ps, pe) = (page as u64 * PAGE, (page as u64 + 1) * PAGE);
            cover.iter_mut().for_each(|c| *c = Cover::None);
            for p in pieces {
                let (a, b) = (p.chunk_offset.max(ps), (p.chunk_offset + p.len).min(pe));
                if a < b {
                    cover[p.data] = if a == ps && b == pe {
                        Cover::Full
                    } else {
                        Cover::Partial
                    };
                }
            }
        };
        // modthresh-stripe: one decision for the stripe, over the members
        // its rows read under each rule.
        let stripe_pref = (self.policy == WritePolicy::ModthreshStripe).then(|| {
            let (mut written, mut not_full) = (ColSet::default(), ColSet::default());
            for page in lo..hi {
                cover_of(page, &mut cover, &sp.pieces);
                if cover.iter().all(|c| *c == Cover::None) {
                    continue;
                }
                for (i, c) in cover.iter().enumerate() {
                    if *c != Cover::None {
                        written.insert(i);
                    }
                    if *c != Cover::Full {
                        not_full.insert(i);
                    }
                }
            }
            let mut rmw = written;
            (k..k + pc).for_each(|c| rmw.insert(c));
            rmw.minus(failed).len() <= not_full.minus(failed).len() + 1
        });
        for page in lo..hi {
            cover_of(page, &mut cover, &sp.pieces);
            if cover.iter().all(|c| *c == Cover::None) {
                continue;
            }
            let row = self.decide_row(s, &sp, &cover, failed, page, stripe_pref)?;
            match sp.runs.last_mut() {
                Some(r)
                    if r.page + r.pages == page
                        && (r.mode, r.strategy, r.read, r.write, r.lost)
                            == (row.mode, row.strategy, row.read, row.write, row.lost) =>
                {
                    r.pages += 1
                }
                _ => sp.runs.push(row),
            }
        }
        Ok(sp)
    }

    fn decide_row(
        &self,
        s: u64,
        sp: &StripePlan,
        cover: &[Cover],
        failed: ColSet,
        page: u32,
        stripe_pref: Option<bool>,
    ) -> Result<RowRun, PlanError> {
        let (k, pc) = (sp.data_count, sp.parity_count);
        let mut written = ColSet::default();
        let mut not_full = ColSet::default();
        for (i, c) in cover.iter().enumerate() {
            if *c != Cover::None {
                written.insert(i);
            }
            if *c != Cover::Full {
                not_full.insert(i);
            }
        }
        let degraded = !failed.is_empty();
        let run = |mode, strategy, read: ColSet, write: ColSet, lost| RowRun {
            page,
            pages: 1,
            mode: if degraded { Mode::Degraded } else { mode },
            strategy,
            read,
            write,
            lost,
        };
        if pc == 0 {
            // Mirrors or no redundancy: per written column, read a partial page from
            // one live copy, write every live copy.
            let mut read = ColSet::default();
            let mut write = ColSet::default();
            for i in written.iter() {
                let copies: Vec<usize> = std::iter::once(i)
                    .chain(sp.copies_of(i))
                    .filter(|c| !failed.contains(*c))
                    .collect();
                if copies.is_empty() {
                    return Err(Self::data_lost(s, &sp.columns, failed));
                }
                if cover[i] == Cover::Partial {
                    read.insert(copies[0]);
                }
                copies.iter().for_each(|c| write.insert(*c));
            }
            let mode = if read.is_empty() {
                Mode::Full
            } else {
                Mode::Rmw
            };
            return Ok(run(mode, Strategy::Mirror, read, write, ColSet::default()));
        }
        let mut parity = ColSet::default();
        (k..k + pc).for_each(|c| parity.insert(c));
        let live_parity = parity.minus(failed);
        let write = written.union(parity).minus(failed);
        if live_parity.is_empty() {
            // Every parity column is gone: keep the data, read only partial pages.
            let read = ColSet(written.0 & not_full.0).minus(failed);
            return Ok(run(
                Mode::Rmw,
                Strategy::DataOnly,
                read,
                write,
                ColSet::default(),
            ));
        }
        let data_mask = ColSet(low_bits(k));
        if not_full.is_empty() {
            return Ok(run(
                Mode::Full,
                Strategy::Full,
                ColSet::default(),
                write,
                ColSet::default(),
            ));
        }
        let rmw_reads = written.union(live_parity);
        let rcw_reads = not_full;
        let rmw_ok = written.0 & failed.0 == 0;
        let rcw_ok = not_full.0 & failed.0 == 0;
        let use_rmw = match (rmw_ok, rcw_ok) {
            (true, true) => {
                stripe_pref.unwrap_or_else(|| self.prefer_rmw(sp, rmw_reads, rcw_reads, write))
            }
            (true, false) => true,
            (false, true) => false,
            (false, false) => {
                let lost = ColSet(failed.0 & data_mask.0);
                let par = Self::parity_for(k, pc, failed, lost.len())
                    .ok_or_else(|| Self::data_lost(s, &sp.columns, failed))?;
                let read = data_mask.minus(failed).union(par);
                return Ok(run(Mode::Rcw, Strategy::Reconstruct, read, write, lost));
            }
        };
        Ok(if use_rmw {
            run(
                Mode::Rmw,
                Strategy::Rmw,
                rmw_reads,
                write,
                ColSet::default(),
            )
        } else {
            run(
                Mode::Rcw,
                Strategy::Rcw,
                rcw_reads,
                write,
                ColSet::default(),
            )
        })
    }

    fn prefer_rmw(&self, sp: &StripePlan, rmw: ColSet, rcw: ColSet, write: ColSet) -> bool {
        let (a, b) = (rmw.len(), rcw.len());
        match self.policy {
            WritePolicy::Md => a < b,
            WritePolicy::Modthresh | WritePolicy::ModthreshStripe => a <= b + 1,
            WritePolicy::RmwAlways => true,
            WritePolicy::Cost => {
                // Estimated cost of a row = total member busy time (what limits
                // throughput under load) + the slowest member (latency). A member
                // read and then written at the same place positions once: the
                // write follows the read (a rotation on a disk, nothing on flash).
                let cost = |reads: ColSet| {
                    let mut busy: Vec<(usize, u64, u64)> = Vec::new(); // (member, ops, ns)
                    for c in reads.iter().chain(write.iter()) {
                        let m = sp.columns[c].loc.member;
                        let sv = self
                            .service
                            .get(m)
                            .copied()
                            .unwrap_or(crate::member::MemberKind::Hdd.default_service());
                        let xfer = sv.service_ns(PAGE) - sv.position_ns;
                        match busy.iter_mut().find(|b| b.0 == m) {
                            Some(b) => {
                                b.1 += 1;
                                b.2 += xfer;
                            }
                            None => busy.push((m, 1, sv.position_ns + xfer)),
                        }
                    }
                    let total: u64 = busy.iter().map(|b| b.2).sum();
                    total + busy.iter().map(|b| b.2).max().unwrap_or(0)
                };
                cost(rmw) <= cost(rcw)
            }
        }
    }
}
