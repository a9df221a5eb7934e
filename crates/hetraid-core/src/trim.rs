//! TRIM (discard): which stripes a trim covers whole, the member extents that
//! then give their space back, and which array ranges read as zeroes without
//! being stored (NBD `base:allocation` holes). The engine executes these; the
//! simulator counts the discards in its SSD model.
//!
//! The rule that keeps parity right: only stripes whose every data chunk the
//! trim covers are discarded, and then every chunk of the stripe — data,
//! parity, copies — on every member that holds it. A discarded extent reads
//! as zeroes, and for every code here (XOR, P+Q, weighted parity, mirrors)
//! the redundancy of zero data is zero, so the stripe is consistent. A member
//! that is failed, or not yet rebuilt at that stripe, is left alone: what it
//! would be rebuilt to from the others is zeroes too. Partial stripes at the
//! edges of a trim are left as they are (a trim is advisory: NBD and SCSI
//! both let a device ignore it), so the edges cost no read-modify-write.

use crate::layout::Layout;
use crate::plan::{merge, ArrayState, Extent};
use crate::PlanError;

/// Do trims discard on an array with (`has_log`) or without a write log? A
/// log replays stripe updates whose parity was computed from what the
/// members held before a discard; replayed over a discarded stripe it would
/// leave it inconsistent. So with a log, trims are advice only (kept).
pub fn trims_discard(has_log: bool) -> bool {
    !has_log
}

/// Chunks one allocation query visits at most: a longer query is answered
/// for its first part (NBD lets a server describe less than was asked).
pub const ALLOCATION_CHUNKS_MAX: u64 = 1 << 16;

/// What one trim does.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TrimPlan {
    /// Stripes discarded whole, ascending.
    pub stripes: Vec<u64>,
    /// Member extents discarded (member, offset in its data area, length),
    /// contiguous ones merged.
    pub extents: Vec<Extent>,
    /// Bytes of the request left as they are (partial stripes at its edges).
    pub kept_bytes: u64,
}

/// `[offset, offset + len)` inside the array.
fn in_range(layout: &dyn Layout, offset: u64, len: u64) -> Result<(), PlanError> {
    let cap = layout.capacity_bytes();
    if offset.checked_add(len).is_none_or(|e| e > cap) {
        return Err(PlanError::OutOfRange {
            offset,
            len,
            capacity: cap,
        });
    }
    Ok(())
}

/// Plan a trim of array bytes `[offset, offset + len)`.
pub fn plan_trim(
    layout: &dyn Layout,
    state: &ArrayState,
    offset: u64,
    len: u64,
) -> Result<TrimPlan, PlanError> {
    in_range(layout, offset, len)?;
    let chunk = layout.chunk_bytes();
    let (first, end) = (offset.div_ceil(chunk), (offset + len) / chunk);
    let mut stripes = Vec::new();
    // Bounded by the request: one pass over the chunks it covers whole, and
    // `d` checks per stripe whose first data chunk is among them.
    for c in first..end.max(first) {
        let (s, i) = layout.locate_chunk(c);
        if i != 0 {
            continue;
        }
        let d = layout.data_in_stripe(s);
        let whole = (0..d).all(|j| (first..end).contains(&layout.logical_chunk(s, j)));
        if whole {
            stripes.push(s);
        }
    }
    stripes.sort_unstable();
    let mut extents = Vec::new();
    for &s in &stripes {
        for loc in layout.stripe(s).all() {
            if state.available(loc.member, s) {
                extents.push((loc.member, loc.offset, chunk));
            }
        }
    }
    let discarded = stripes
        .iter()
        .map(|&s| layout.data_in_stripe(s) as u64 * chunk)
        .sum::<u64>();
    Ok(TrimPlan {
        stripes,
        extents: merge(extents),
        kept_bytes: len - discarded,
    })
}

/// Which parts of `[offset, offset + len)` read as zeroes without being
/// stored: (length, hole) runs in order, adjacent equal ones merged,
/// covering at most `ALLOCATION_CHUNKS_MAX` chunks. `stored(member, offset,
/// len)` says whether a member stores anything in that extent of its data
/// area (true when it cannot tell). A data chunk on a member that holds it
/// is a hole when that member stores nothing there; a chunk whose member is
/// failed or not yet rebuilt is a hole when no other chunk of its stripe is
/// stored (it would be rebuilt, and read, as zeroes).
pub fn allocation(
    layout: &dyn Layout,
    state: &ArrayState,
    offset: u64,
    len: u64,
    stored: &dyn Fn(usize, u64, u64) -> bool,
) -> Result<Vec<(u64, bool)>, PlanError> {
    in_range(layout, offset, len)?;
    let chunk = layout.chunk_bytes();
    let mut runs: Vec<(u64, bool)> = Vec::new();
    let mut at = offset;
    let end = offset + len;
    let mut visited = 0;
    // Bounded: one chunk per round, at most ALLOCATION_CHUNKS_MAX.
    while at < end && visited < ALLOCATION_CHUNKS_MAX {
        let c = at / chunk;
        let within = at % chunk;
        let n = (chunk - within).min(end - at);
        let (s, i) = layout.locate_chunk(c);
        let loc = layout.data_loc(s, i);
        let hole = if state.available(loc.member, s) {
            !stored(loc.member, loc.offset + within, n)
        } else {
            layout
                .stripe(s)
                .all()
                .filter(|l| state.available(l.member, s))
                .all(|l| !stored(l.member, l.offset, chunk))
        };
        match runs.last_mut() {
            Some(last) if last.1 == hole => last.0 += n,
            _ => runs.push((n, hole)),
        }
        at += n;
        visited += 1;
    }
    Ok(runs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{build, LayoutKind, LayoutSpec};

    fn raid5(n: usize) -> Box<dyn Layout> {
        build(&LayoutSpec {
            kind: LayoutKind::Raid5 {
                order: crate::layout::ParityOrder::LeftSymmetric,
            },
            chunk_bytes: 64 << 10,
            sizes: vec![16 << 20; n],
            kinds: Vec::new(),
        })
        .unwrap()
    }

    #[test]
    fn only_whole_stripes_are_discarded_with_their_parity() {
        let l = raid5(4);
        let stripe = 3 * (64 << 10);
        let st = ArrayState::healthy(4);
        // From the middle of stripe 0 to the middle of stripe 3: stripes 1
        // and 2 whole.
        let p = plan_trim(l.as_ref(), &st, stripe / 2, 3 * stripe).unwrap();
        assert_eq!(p.stripes, vec![1, 2]);
        assert_eq!(p.kept_bytes, stripe);
        let bytes: u64 = p.extents.iter().map(|e| e.2).sum();
        assert_eq!(bytes, 2 * 4 * (64 << 10), "data and parity of 2 stripes");
        // Less than a stripe: nothing.
        let p = plan_trim(l.as_ref(), &st, 0, stripe - 1).unwrap();
        assert!(p.stripes.is_empty() && p.extents.is_empty());
        // A failed member is left alone.
        let st = ArrayState::with_failed(4, &[2]);
        let p = plan_trim(l.as_ref(), &st, 0, stripe).unwrap();
        assert_eq!(p.stripes, vec![0]);
        assert!(p.extents.iter().all(|e| e.0 != 2));
        assert_eq!(p.extents.len(), 3);
        assert!(plan_trim(l.as_ref(), &st, 0, l.capacity_bytes() + 1).is_err());
    }

    #[test]
    fn holes_follow_what_members_store() {
        let l = raid5(4);
        let chunk = 64 << 10;
        let st = ArrayState::healthy(4);
        // Member 1 stores its first chunk only; nothing else is stored.
        let stored = |m: usize, off: u64, _len: u64| m == 1 && off < chunk;
        let runs = allocation(l.as_ref(), &st, 0, 6 * chunk, &stored).unwrap();
        let total: u64 = runs.iter().map(|r| r.0).sum();
        assert_eq!(total, 6 * chunk);
        let on = |c: u64, f: &dyn Fn(crate::ChunkLoc) -> bool| {
            let (s, i) = l.locate_chunk(c);
            f(l.data_loc(s, i))
        };
        let stored_chunks = (0..6)
            .filter(|&c| on(c, &|loc| loc.member == 1 && loc.offset < chunk))
            .count() as u64;
        assert_eq!(stored_chunks, 1, "one data chunk in member 1's first chunk");
        let data: u64 = runs.iter().filter(|r| !r.1).map(|r| r.0).sum();
        assert_eq!(data, stored_chunks * chunk);
        // A failed member's chunk is a hole only when its stripe stores nothing.
        let st = ArrayState::with_failed(4, &[1]);
        let runs = allocation(l.as_ref(), &st, 0, 6 * chunk, &|_, _, _| false).unwrap();
        assert_eq!(runs, vec![(6 * chunk, true)]);
        // Member 0 stores everything: its chunks, and member 1's (failed:
        // rebuilt from a stripe that stores something), are data; 2 and 3's
        // are holes.
        let runs = allocation(l.as_ref(), &st, 0, 6 * chunk, &|m, _, _| m == 0).unwrap();
        let holes: u64 = runs.iter().filter(|r| r.1).map(|r| r.0).sum();
        let expect = (0..6).filter(|&c| on(c, &|loc| loc.member >= 2)).count() as u64;
        assert_eq!(holes, expect * chunk);
    }
}
