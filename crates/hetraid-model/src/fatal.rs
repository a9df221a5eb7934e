//! Which sets of failed members lose data, from the layout's stripes.

use hetraid_core::layout::{Layout, Redundancy};
use std::collections::BTreeSet;

/// Stripes scanned for their shapes at most (layouts repeat long before this; the
/// result says when a layout was cut short).
pub const STRIPES_SCANNED_MAX: u64 = 1 << 20;

/// The distinct stripe shapes of a layout, enough to tell whether a set of failed
/// members (a bit mask) loses data.
#[derive(Debug, Clone)]
pub struct FailureSets {
    members: usize,
    redundancy: Redundancy,
    /// Parity and no-redundancy layouts: the member of every chunk of a stripe
    /// (data and parity; a member may in principle hold two).
    parity_shapes: BTreeSet<Vec<u8>>,
    /// Mirrored layouts: per data chunk, the mask of members holding a copy.
    mirror_shapes: BTreeSet<Vec<u64>>,
    parity_masks: u64,
    /// Members holding a chunk of some stripe (bit i = member i).
    holding: u64,
    /// Stripes looked at, and whether that was all of them.
    pub stripes_scanned: u64,
    pub complete: bool,
}

impl FailureSets {
    pub fn of(layout: &dyn Layout) -> Self {
        let total = layout.stripe_count();
        let scanned = total.min(STRIPES_SCANNED_MAX);
        let redundancy = layout.redundancy();
        let mut parity_shapes = BTreeSet::new();
        let mut mirror_shapes = BTreeSet::new();
        let mut parity_masks = 0u64;
        let mut holding = 0u64;
        for s in 0..scanned {
            let st = layout.stripe(s);
            holding |= st.all().fold(0u64, |m, c| m | 1u64 << c.member);
            parity_masks |= st.parity.iter().fold(0u64, |m, c| m | 1u64 << c.member);
            match redundancy {
                Redundancy::Mirror { .. } => {
                    let masks: Vec<u64> = st
                        .data
                        .iter()
                        .enumerate()
                        .map(|(i, d)| {
                            let copies = st.mirrors.get(i).map(|m| m.as_slice()).unwrap_or(&[]);
                            copies
                                .iter()
                                .fold(1u64 << d.member, |m, c| m | 1u64 << c.member)
                        })
                        .collect();
                    mirror_shapes.insert(masks);
                }
                _ => {
                    let mut members: Vec<u8> = st.all().map(|c| c.member as u8).collect();
                    members.sort_unstable();
                    parity_shapes.insert(members);
                }
            }
        }
        Self {
            members: layout.members(),
            redundancy,
            parity_shapes,
            mirror_shapes,
            parity_masks,
            holding,
            stripes_scanned: scanned,
            complete: scanned == total,
        }
    }

    pub fn members(&self) -> usize {
        self.members
    }

    /// Distinct stripe shapes found.
    pub fn shapes(&self) -> usize {
        self.parity_shapes.len() + self.mirror_shapes.len()
    }

    /// Members holding a parity chunk in some stripe (bit i = member i).
    pub fn parity_members(&self) -> u64 {
        self.parity_masks
    }

    /// Members holding a chunk of some stripe (bit i = member i); HPDA's
    /// HDD-2 holds only the log's mirror.
    pub fn holding_members(&self) -> u64 {
        self.holding
    }

    /// Does every stripe have a chunk on every member (RAID4/5-like)?
    pub fn every_stripe_spans_all(&self) -> bool {
        let all = (0..self.members as u8).collect::<Vec<u8>>();
        self.mirror_shapes.is_empty() && self.parity_shapes.iter().all(|s| *s == all)
    }

    /// Does losing the members in `failed` (bit i = member i) lose data?
    pub fn fatal(&self, failed: u64) -> bool {
        match self.redundancy {
            Redundancy::Mirror { .. } => self
                .mirror_shapes
                .iter()
                .any(|chunks| chunks.iter().any(|&copies| copies & !failed == 0)),
            r => {
                let tolerance = r.tolerance();
                self.parity_shapes.iter().any(|members| {
                    members.iter().filter(|&&m| failed >> m & 1 == 1).count() > tolerance
                })
            }
        }
    }
}
