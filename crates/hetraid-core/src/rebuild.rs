//! Rebuild and scrub plans, and the rebuild scheduler that groups stripes into
//! streams sharing no member, so they can run in parallel (S2-RAID yields one
//! stream per affected subRAID; classic RAID5 one stream).

use crate::error::PlanError;
use crate::layout::Layout;
use crate::plan::{low_bits, ArrayState, ColSet, Mode, Planner, RowRun, Strategy, StripePlan};
use crate::units::PAGE;
use serde::Serialize;
use std::collections::BTreeMap;

impl Planner<'_> {
    fn full_run(
        &self,
        mode: Mode,
        strategy: Strategy,
        read: ColSet,
        write: ColSet,
        lost: ColSet,
    ) -> RowRun {
        RowRun {
            page: 0,
            pages: (self.layout.chunk_bytes() / PAGE) as u32,
            mode,
            strategy,
            read,
            write,
            lost,
        }
    }

    /// Plan rebuilding stripe `s`'s chunks that live on `rebuilding` members (which
    /// `state` must not count as available for `s`). `redirect = Some((member,
    /// slot))` writes the rebuilt chunk into that member's spare slot instead of in
    /// place. Returns None when the stripe has nothing on those members.
    pub fn rebuild_stripe(
        &self,
        s: u64,
        state: &ArrayState,
        rebuilding: &[usize],
        redirect: Option<(usize, usize)>,
    ) -> Result<Option<StripePlan>, PlanError> {
        let (mut cols, k, pc) = self.columns(s);
        let mut lost = ColSet::default();
        let mut failed = ColSet::default();
        for (c, col) in cols.iter().enumerate() {
            if !state.available(col.loc.member, s) {
                failed.insert(c);
                if rebuilding.contains(&col.loc.member) {
                    lost.insert(c);
                }
            }
        }
        if lost.is_empty() {
            return Ok(None);
        }
        let data_lost = |f: ColSet| PlanError::DataLost {
            stripe: s,
            failed: f.iter().map(|c| cols[c].loc.member).collect(),
        };
        let mut read = ColSet::default();
        if pc > 0 {
            let data = ColSet(low_bits(k));
            let lost_data = ColSet(failed.0 & data.0).len();
            let mut par = ColSet::default();
            for c in k..k + pc {
                if par.len() < lost_data && !failed.contains(c) {
                    par.insert(c);
                }
            }
            if par.len() < lost_data {
                return Err(data_lost(failed));
            }
            read = data.minus(failed).union(par);
        } else {
            for c in lost.iter() {
                let i = match cols[c].role {
                    crate::plan::Role::Data(i) | crate::plan::Role::Copy(i) => i,
                    _ => unreachable!("mirror stripes have no parity"),
                };
                let src = std::iter::once(i)
                    .chain(
                        cols.iter()
                            .enumerate()
                            .filter(|(_, x)| x.role == crate::plan::Role::Copy(i))
                            .map(|(j, _)| j),
                    )
                    .find(|j| !failed.contains(*j))
                    .ok_or_else(|| data_lost(failed))?;
                read.insert(src);
            }
        }
        if let Some((target, slot)) = redirect {
            for c in lost.iter() {
                let loc = self
                    .layout
                    .spare_location(cols[c].loc, target, slot)
                    .ok_or_else(|| {
                        PlanError::Invalid(format!(
                            "member {target} has no spare slot {slot} for stripe {s}"
                        ))
                    })?;
                cols[c].loc = loc;
            }
        }
        let run = self.full_run(Mode::Rebuild, Strategy::Rebuild, read, lost, lost);
        Ok(Some(StripePlan {
            stripe: s,
            columns: cols,
            data_count: k,
            parity_count: pc,
            runs: vec![run],
            pieces: vec![],
        }))
    }

    /// Plan a scrub of stripe `s`: read every live column; `repair` lists the
    /// redundancy columns (P, Q, copies) a mismatch rewrites. None when the stripe
    /// has no redundancy left to check.
    pub fn scrub_stripe(&self, s: u64, state: &ArrayState, repair: bool) -> Option<StripePlan> {
        let (cols, k, pc) = self.columns(s);
        let mut read = ColSet::default();
        for (c, col) in cols.iter().enumerate() {
            if state.available(col.loc.member, s) {
                read.insert(c);
            }
        }
        let redundant = ColSet(read.0 & !low_bits(k));
        // Parity: every column must be present to check; mirrors: two copies.
        let checkable = if pc > 0 {
            read.len() == cols.len()
        } else {
            !redundant.is_empty()
        };
        if !checkable {
            return None;
        }
        let write = if repair { redundant } else { ColSet::default() };
        let run = self.full_run(Mode::Scrub, Strategy::Scrub, read, write, ColSet::default());
        Some(StripePlan {
            stripe: s,
            columns: cols,
            data_count: k,
            parity_count: pc,
            runs: vec![run],
            pieces: vec![],
        })
    }
}

/// One group of stripes whose rebuild reads a member set disjoint from every other
/// stream's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RebuildStream {
    pub stripes: Vec<u64>,
    /// Members read by this stream.
    pub read_members: Vec<usize>,
    /// Spare target (member, slot) when rebuilding into spare space.
    pub target: Option<(usize, usize)>,
}

/// Batches a rebuild stream has in flight: while one batch's rebuilt chunks are
/// written, the next batch is read (MD's resync keeps many requests in flight for
/// the same reason). With one, a stream alternates reading and writing and an
/// in-place rebuild runs at about half the media rate. The engine runs this many
/// lanes per stream, the simulator this many jobs.
pub const BATCHES_IN_FLIGHT: usize = 2;

/// Batches a rebuild stream keeps in flight: [`BATCHES_IN_FLIGHT`], or for a
/// declustered layout (whose batch touches each member only a few times, and
/// ends when its busiest member is done) more, so every member's queue
/// stays full.
/// The engine runs this many lanes per stream, the simulator this many jobs.
pub fn batches_in_flight(layout: &dyn Layout) -> usize {
    if layout.rebuild_spread() > 1 {
        DECLUSTERED_BATCHES_IN_FLIGHT
    } else {
        BATCHES_IN_FLIGHT
    }
}

/// Batches in flight for a declustered rebuild. Measured on experiment 12
/// (90 disks, 4 MiB chunks): with 2 the rebuild ran at 0.48-1.0 of the
/// (N − 1)/G limit, with 16 (and `rebuild_spread`'s four times N/G stripes
/// a batch) at 0.93-1.06 for G = 2 to 17. The engine does not run
/// declustered arrays yet; when it does, these buffers need a bound.
pub const DECLUSTERED_BATCHES_IN_FLIGHT: usize = 16;

/// Stripes a rebuild stream takes per batch: about 8 MiB per member operation
/// (positioning amortised, as a real resync streams), at most 64 MiB of buffers per
/// stream. The engine and the simulator both batch by this.
/// Under a speed limit `max_bps` (0 = none), at most a quarter second of work
/// per batch ([`crate::pace::batch_bytes_max`]).
pub fn batch_stripes(layout: &dyn Layout, max_bps: u64) -> usize {
    const OP_BYTES: u64 = 8 << 20;
    const STREAM_BYTES: u64 = 64 << 20;
    let chunk = layout.chunk_bytes();
    let cols = layout.stripe(0).all().count().max(1) as u64;
    // A declustered group touches G of N members: N/G times the stripes
    // keep each member's operation (and the buffers per member) the same.
    let spread = layout.rebuild_spread().max(1);
    // Every batch of a stream in flight together holds at most
    // STREAM_BUFFERS_PER_MEMBER per member (a declustered stream keeps 16
    // batches in flight).
    let in_flight = batches_in_flight(layout) as u64;
    ((OP_BYTES / chunk).max(1) * spread)
        .min(STREAM_BYTES * spread / (chunk * cols))
        .min(STREAM_BUFFERS_PER_MEMBER * layout.members() as u64 / (in_flight * chunk * cols))
        .min(crate::pace::batch_bytes_max(max_bps) / chunk)
        .max(1) as usize
}

/// Buffers a rebuild stream holds at most per member of the array, all its
/// batches in flight together. A RAID5 stream never gets near it (two
/// batches of at most 64 MiB); a declustered one keeps every member's queue
/// full only with several operations queued on each (experiment 12, 90 disks
/// at 4 MiB chunks: 64 MiB per member gives 0.67-0.94 of the (N − 1)/G
/// limit, 128 MiB 0.81-0.94, 256 MiB 0.93-0.97).
pub const STREAM_BUFFERS_PER_MEMBER: u64 = 128 << 20;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RebuildSchedule {
    pub streams: Vec<RebuildStream>,
}

impl RebuildSchedule {
    pub fn stripe_count(&self) -> usize {
        self.streams.iter().map(|s| s.stripes.len()).sum()
    }
}

fn find(parent: &mut [usize], x: usize) -> usize {
    let mut r = x;
    while parent[r] != r {
        r = parent[r];
    }
    let mut y = x;
    while parent[y] != r {
        let next = parent[y];
        parent[y] = r;
        y = next;
    }
    r
}

/// Group the rebuild of `rebuilding` members into streams that share no member.
/// With `to_spare` (and a layout that reserves spare slots) each stream gets its
/// own spare target outside its read set.
pub fn schedule(
    layout: &dyn Layout,
    state: &ArrayState,
    rebuilding: &[usize],
    to_spare: bool,
) -> Result<RebuildSchedule, PlanError> {
    schedule_with_used(layout, state, rebuilding, to_spare, &[])
}

/// [`schedule`] when some spare slots are already taken: `used[m]` slots of member m.
pub fn schedule_with_used(
    layout: &dyn Layout,
    state: &ArrayState,
    rebuilding: &[usize],
    to_spare: bool,
    used_slots: &[usize],
) -> Result<RebuildSchedule, PlanError> {
    for &m in rebuilding {
        if m >= layout.members() {
            return Err(PlanError::NoSuchMember(m));
        }
    }
    let planner = Planner::new(layout, crate::plan::WritePolicy::Md, vec![]);
    // Stripes grouped by the member set their rebuild reads.
    let mut groups: BTreeMap<u128, Vec<u64>> = BTreeMap::new();
    for s in 0..layout.stripe_count() {
        if let Some(sp) = planner.rebuild_stripe(s, state, rebuilding, None)? {
            let mut mask = 0u128;
            for c in sp.runs[0].read.iter() {
                mask |= 1 << sp.columns[c].loc.member;
            }
            groups.entry(mask).or_default().push(s);
        }
    }
    // Union groups whose member sets intersect (union-find over members).
    let n = layout.members();
    let mut parent: Vec<usize> = (0..n).collect();
    for &mask in groups.keys() {
        let ms: Vec<usize> = (0..n).filter(|m| mask >> m & 1 == 1).collect();
        for w in ms.windows(2) {
            let (a, b) = (find(&mut parent, w[0]), find(&mut parent, w[1]));
            parent[a] = b;
        }
    }
    let mut streams: BTreeMap<usize, (u128, Vec<u64>)> = BTreeMap::new();
    for (mask, stripes) in groups {
        let root = if mask == 0 {
            usize::MAX
        } else {
            find(&mut parent, mask.trailing_zeros() as usize)
        };
        let e = streams.entry(root).or_default();
        e.0 |= mask;
        e.1.extend(stripes);
    }
    let mut out: Vec<RebuildStream> = streams
        .into_values()
        .map(|(mask, mut stripes)| {
            stripes.sort_unstable();
            RebuildStream {
                stripes,
                read_members: (0..n).filter(|m| mask >> m & 1 == 1).collect(),
                target: None,
            }
        })
        .collect();
    out.sort_by_key(|s| s.stripes[0]);
    if to_spare && layout.distributed_spare() {
        // The layout places each chunk in its row's spare (`spare_location`
        // ignores the member): every stream takes the next free slot.
        if layout.spare_slots() == 0 {
            return Err(PlanError::Invalid(
                "the distributed spare space is used up; replace a member instead".into(),
            ));
        }
        for st in out.iter_mut() {
            st.target = Some((usize::MAX, 0));
        }
        return Ok(RebuildSchedule { streams: out });
    }
    if to_spare && layout.spare_slots() > 0 {
        let used: u128 = out
            .iter()
            .flat_map(|s| s.read_members.iter())
            .fold(0, |a, m| a | 1 << m);
        let mut slots_used: Vec<usize> = (0..n)
            .map(|m| used_slots.get(m).copied().unwrap_or(0))
            .collect();
        for st in out.iter_mut() {
            let ok = |m: usize| {
                !st.read_members.contains(&m) && !rebuilding.contains(&m) && state.available(m, 0)
            };
            let pick = (0..n)
                .filter(|&m| ok(m) && slots_used[m] < layout.spare_slots())
                .min_by_key(|&m| (used >> m & 1, slots_used[m], m))
                .ok_or_else(|| PlanError::Invalid("no member has a free spare slot for every rebuild stream; reserve more spare partitions".into()))?;
            st.target = Some((pick, slots_used[pick]));
            slots_used[pick] += 1;
        }
    }
    Ok(RebuildSchedule { streams: out })
}

/// A rebuild into spare space after member `failed` fails: the member one
/// stream writes while another stream reads, if the schedule has one. Then
/// that disk carries two streams and the rebuild takes about twice as long
/// as its streams apart would. For S²-RAID with K = G partitions it always
/// happens (K streams of N disks need K·N = R disks, R − 1 survive); K < G
/// avoids it. `None` also for layouts without spare space.
pub fn shared_spare_target(layout: &dyn Layout, failed: usize) -> Option<usize> {
    if layout.spare_slots() == 0 || failed >= layout.members() {
        return None;
    }
    let state = ArrayState::with_failed(layout.members(), &[failed]);
    let sched = schedule(layout, &state, &[failed], true).ok()?;
    sched.streams.iter().enumerate().find_map(|(i, st)| {
        let (t, _) = st.target?;
        sched
            .streams
            .iter()
            .enumerate()
            .any(|(j, o)| j != i && o.read_members.contains(&t))
            .then_some(t)
    })
}

/// Where every lost extent lives after a rebuild into spare space by `sched`: one
/// [`Move`](crate::layout::Move) per extent (an S2-RAID partition), for a
/// [`Remapped`](crate::layout::Remapped) layout. The engine stores these in its
/// superblock; the simulator switches to the remapped layout when its rebuild ends.
pub fn spare_moves(
    layout: &dyn Layout,
    sched: &RebuildSchedule,
    failed: &[usize],
) -> Result<Vec<crate::layout::Move>, PlanError> {
    if layout.distributed_spare() {
        return Err(PlanError::Invalid(format!(
            "layout {} relocates by rule (Layout::relocated), not by moves",
            layout.name()
        )));
    }
    let mut moves: Vec<crate::layout::Move> = Vec::new();
    for st in &sched.streams {
        let (target, slot) = st.target.ok_or_else(|| {
            PlanError::Invalid("a rebuild into spare space needs a target per stream".into())
        })?;
        for &s in &st.stripes {
            for c in layout
                .stripe(s)
                .all()
                .filter(|c| failed.contains(&c.member))
            {
                let (off, len) = layout.spare_extent(c).ok_or_else(|| {
                    PlanError::Invalid(format!("layout {} has no spare extents", layout.name()))
                })?;
                let from = crate::layout::ChunkLoc {
                    member: c.member,
                    offset: off,
                };
                let to = layout.spare_location(from, target, slot).ok_or_else(|| {
                    PlanError::Invalid(format!("member {target} has no spare slot {slot}"))
                })?;
                let m = crate::layout::Move { from, to, len };
                if !moves.contains(&m) {
                    moves.push(m);
                }
            }
        }
    }
    Ok(moves)
}

#[cfg(test)]
mod shared_target_tests {
    use super::*;
    use crate::layout::S2Raid5;

    /// S²-RAID5 on 9 disks, G = 3: with K = 3 a stream writes a disk another
    /// reads (8 survivors for 3 x 3 disks); with K = 2 none does.
    #[test]
    fn k_equal_g_shares_a_disk_and_k_below_g_does_not() {
        let sizes = vec![64u64 << 20; 9];
        let k3 = S2Raid5::new(&sizes, 65536, 3, Some(3), 1).unwrap();
        let k2 = S2Raid5::new(&sizes, 65536, 3, Some(2), 1).unwrap();
        for failed in 0..9 {
            assert!(
                shared_spare_target(&k3, failed).is_some(),
                "K = 3, member {failed}"
            );
            assert_eq!(
                shared_spare_target(&k2, failed),
                None,
                "K = 2, member {failed}"
            );
        }
        let no_spare = S2Raid5::new(&sizes, 65536, 3, Some(3), 0).unwrap();
        assert_eq!(shared_spare_target(&no_spare, 4), None);
    }

    /// The default partition count with spare space (`default_partitions`) is
    /// the largest whose streams and spare targets share no disk, for every
    /// single failure: one more partition shares one.
    #[test]
    fn default_partitions_share_no_disk() {
        use crate::layout::{default_partitions, S2Raid10};
        let shares =
            |l: &dyn Layout| (0..l.members()).find(|&f| shared_spare_target(l, f).is_some());
        for g in [2usize, 3, 5] {
            for n in 2..=g {
                let sizes = vec![64u64 << 20; n * g];
                let k = default_partitions(g, 1);
                let l = S2Raid5::new(&sizes, 65536, g, Some(k), 1).unwrap();
                assert_eq!(shares(&l), None, "s2raid5 G {g} N {n} K {k}");
                if k < g {
                    let more = S2Raid5::new(&sizes, 65536, g, Some(k + 1), 1).unwrap();
                    assert!(shares(&more).is_some(), "s2raid5 G {g} N {n} K {}", k + 1);
                }
                assert_eq!(default_partitions(g, 0), g);
            }
        }
        for m in 2usize..=5 {
            let sizes = vec![64u64 << 20; 2 * m];
            let k = default_partitions(m, 1);
            let l = S2Raid10::new(&sizes, 65536, Some(k), 1).unwrap();
            assert_eq!(shares(&l), None, "s2raid10 m {m} K {k}");
            let more = S2Raid10::new(&sizes, 65536, Some(k + 1), 1).unwrap();
            assert!(shares(&more).is_some(), "s2raid10 m {m} K {}", k + 1);
        }
    }
}

/// A copy-back onto a replacement: the member whose chunks go home, and
/// each chunk's move from its spare home to its own place on that member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyBack {
    pub member: usize,
    /// In stripe order; each one chunk long.
    pub moves: Vec<crate::layout::Move>,
}

/// Bytes of chunks one copy-back batch moves: its reads (spread over the
/// members holding spare homes) are issued together, then its writes (in
/// order, onto the replacement). Large enough that the replacement's writes
/// stream; two batches in flight ([`COPY_BACK_BATCHES_IN_FLIGHT`]) keep it
/// writing while the next batch is read.
pub const COPY_BACK_BATCH_BYTES: u64 = 64 << 20;

/// Copy-back batches in flight: one being written while the next is read.
/// The simulator runs this many jobs; the engine this many buffers, read by
/// one thread while another writes (the same operations, overlapped alike).
pub const COPY_BACK_BATCHES_IN_FLIGHT: usize = 2;

impl CopyBack {
    /// The moves in batches of at most [`COPY_BACK_BATCH_BYTES`] (at least
    /// one move each), in order. The engine and the simulator both copy by
    /// these: one read per move from its spare home, one write per move to
    /// its place.
    pub fn batches(&self) -> std::slice::Chunks<'_, crate::layout::Move> {
        self.moves.chunks(self.batch_moves())
    }

    /// Moves in a batch (the last may have fewer).
    pub fn batch_moves(&self) -> usize {
        let len = self.moves.first().map_or(1, |m| m.len.max(1));
        (COPY_BACK_BATCH_BYTES / len).max(1) as usize
    }

    pub fn bytes(&self) -> u64 {
        self.moves.iter().map(|m| m.len).sum()
    }
}

/// What copying the last member rebuilt into distributed spare space back
/// onto a replacement in its slot moves: every chunk whose place differs
/// between `layout` and its [`Layout::restored`] form, which must be that
/// member's (a chunk of another member moving would mean the spare homes
/// are not what the restored layout computes: refused). Reads only spare
/// homes and writes only the replacement, so the layout in force stays
/// whole until the copy is recorded: a copy cut short is simply redone, or
/// replaced by a rebuild.
pub fn copy_back_moves(layout: &dyn Layout) -> Result<CopyBack, PlanError> {
    let (member, after) = layout.restored().ok_or_else(|| {
        PlanError::Invalid(
            "no member was rebuilt into distributed spare space: nothing to copy back".into(),
        )
    })?;
    let mut moves = Vec::new();
    let len = layout.chunk_bytes();
    for s in 0..layout.stripe_count() {
        let (b, a) = (layout.stripe(s), after.stripe(s));
        for (from, to) in b.all().zip(a.all()) {
            if from == to {
                continue;
            }
            if to.member != member || from.member == member {
                return Err(PlanError::Invalid(format!(
                    "stripe {s}: a chunk of member {} would move from member {} to {}; only member {member}'s chunks go home in a copy-back",
                    to.member, from.member, to.member
                )));
            }
            moves.push(crate::layout::Move { from, to, len });
        }
    }
    Ok(CopyBack { member, moves })
}
