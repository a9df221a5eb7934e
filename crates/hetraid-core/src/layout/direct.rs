//! The read fast path's map: a classic striped layout's arithmetic in one
//! small value, kept beside the array for reads inside one chunk of a
//! healthy array.
//!
//! Why: [`crate::plan::Planner::direct_read`] answers the same question
//! through the layout's trait object (five virtual calls: chunk size,
//! capacity, stripe count, data per stripe, data location) and the array
//! state. After a 4 KiB `pread` has run through the kernel, the caches and
//! branch predictors those calls need are cold: the engine's lookup cost
//! about 140 ns a read at queue depth 1 on a memory-speed member, against
//! 30 ns in a hot loop, most of the gap to raw `pread`. A `DirectMap` is
//! one cache line of plain fields and one inlined function.
//!
//! It is not a second placement rule: RAID5 and RAID6 place data with the
//! same functions their layouts use ([`super::classic`]), and a test checks
//! that every offset maps as `direct_read` maps it on a healthy array.

use super::classic::{raid5_data_member, raid6_data_member};
use super::{divmod, ParityOrder};

/// How data index `i` of stripe `s` finds its member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// On member `i` (RAID0, RAID4).
    Fixed,
    /// RAID5's rotation.
    Raid5(ParityOrder),
    /// RAID6's rotation (P, Q, then data).
    Raid6,
}

/// Logical offset -> (member, offset in the member's data area) for a read
/// inside one chunk, every member in sync.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DirectMap {
    placement: Placement,
    members: u32,
    data_per_stripe: u32,
    chunk_shift: u32,
    capacity_bytes: u64,
}

impl DirectMap {
    /// None when the chunk is not a power of two (the planner then answers).
    pub(crate) fn new(
        placement: Placement,
        members: usize,
        data_per_stripe: usize,
        chunk_bytes: u64,
        capacity_bytes: u64,
    ) -> Option<Self> {
        if !chunk_bytes.is_power_of_two() || data_per_stripe == 0 {
            return None;
        }
        Some(Self {
            placement,
            members: members.try_into().ok()?,
            data_per_stripe: data_per_stripe.try_into().ok()?,
            chunk_shift: chunk_bytes.trailing_zeros(),
            capacity_bytes,
        })
    }

    /// Where `len` bytes at `offset` are, when they lie inside one chunk of
    /// the array (None otherwise, or for an empty read).
    #[inline]
    pub fn locate(&self, offset: u64, len: u64) -> Option<(usize, u64)> {
        let shift = self.chunk_shift;
        let in_chunk = offset & ((1u64 << shift) - 1);
        if len == 0
            || len > (1u64 << shift) - in_chunk
            || len > self.capacity_bytes.saturating_sub(offset)
        {
            return None;
        }
        let (s, i) = divmod(offset >> shift, u64::from(self.data_per_stripe));
        let (n, i) = (self.members as usize, i as usize);
        let member = match self.placement {
            Placement::Fixed => i,
            Placement::Raid5(order) => raid5_data_member(order, n, s, i),
            Placement::Raid6 => raid6_data_member(n, s, i),
        };
        Some((member, (s << shift) + in_chunk))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{Layout, Move, Raid0, Raid1, Raid10, Raid4, Raid5, Raid6, RaidH, Remapped};
    use crate::plan::{ArrayState, Planner};
    use crate::WritePolicy;

    /// Every layout that has a map maps every offset (and read lengths
    /// that fit, cross a chunk, run past the end) as the planner does.
    #[test]
    fn maps_as_the_planner_does() {
        let kib = 1024u64;
        let sizes = |n: usize, chunk: u64| vec![37 * chunk + 512; n];
        let mut layouts: Vec<Box<dyn Layout>> = vec![
            Box::new(Raid0::new(&sizes(3, 16 * kib), 16 * kib).unwrap()),
            Box::new(Raid4::new(&sizes(4, 16 * kib), 16 * kib).unwrap()),
            Box::new(Raid6::new(&sizes(5, 16 * kib), 16 * kib).unwrap()),
            Box::new(Raid6::new(&sizes(7, 4 * kib), 4 * kib).unwrap()),
        ];
        for (order, n, chunk) in [
            (ParityOrder::LeftSymmetric, 5, 16 * kib),
            (ParityOrder::LeftAsymmetric, 4, 8 * kib),
            (ParityOrder::RightSymmetric, 6, 8 * kib),
            (ParityOrder::RightAsymmetric, 3, 32 * kib),
        ] {
            layouts.push(Box::new(
                Raid5::new(&sizes(n, chunk), chunk, order).unwrap(),
            ));
        }
        let mut mapped = 0u64;
        for layout in &layouts {
            let name = layout.name();
            let map = layout
                .direct_map()
                .unwrap_or_else(|| panic!("{name}: no map"));
            let planner = Planner::new(layout.as_ref(), WritePolicy::Md, vec![]);
            let state = ArrayState::healthy(layout.members());
            let (cap, chunk) = (layout.capacity_bytes(), layout.chunk_bytes());
            for offset in (0..cap + chunk).step_by(512) {
                for len in [0, 512, 4096, chunk - 512, chunk, chunk + 512, u64::MAX] {
                    let want = planner.direct_read(offset, len, &state);
                    assert_eq!(
                        map.locate(offset, len),
                        want,
                        "{name} at {offset} len {len}"
                    );
                    mapped += u64::from(want.is_some());
                }
            }
        }
        assert!(mapped > 10_000, "only {mapped} reads mapped");
    }

    /// Layouts with copies, weights or relocations keep the planner.
    #[test]
    fn other_layouts_have_none() {
        let sizes = vec![64u64 << 20; 4];
        let chunk = 64 << 10;
        let raid5 = || Box::new(Raid5::new(&sizes, chunk, ParityOrder::LeftSymmetric).unwrap());
        let moved = Move {
            from: crate::layout::ChunkLoc {
                member: 0,
                offset: 0,
            },
            to: crate::layout::ChunkLoc {
                member: 1,
                offset: chunk,
            },
            len: chunk,
        };
        let others: Vec<Box<dyn Layout>> = vec![
            Box::new(Raid1::new(&sizes, chunk).unwrap()),
            Box::new(Raid10::new(&sizes, chunk, 2).unwrap()),
            Box::new(RaidH::new(&sizes, chunk, &[1, 1, 2, 2]).unwrap()),
            Box::new(Remapped::new(raid5(), vec![moved])),
        ];
        assert!(raid5().direct_map().is_some());
        for l in others {
            assert!(l.direct_map().is_none(), "{}", l.name());
        }
    }
}
