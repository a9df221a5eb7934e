//! Relocations: extents of members moved elsewhere (S2-RAID rebuilds into spare
//! space; later RAIDX re-placement). The wrapped layout is unchanged; every chunk
//! inside a moved extent is reported at its new place.

use super::{ChunkLoc, Layout, LogRegion, Redundancy, Stripe};
use serde::Serialize;

/// `len` bytes at `from` now live at `to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Move {
    pub from: ChunkLoc,
    pub to: ChunkLoc,
    pub len: u64,
}

impl Move {
    fn apply(&self, c: ChunkLoc) -> Option<ChunkLoc> {
        (c.member == self.from.member
            && c.offset >= self.from.offset
            && c.offset < self.from.offset + self.len)
            .then(|| ChunkLoc {
                member: self.to.member,
                offset: self.to.offset + (c.offset - self.from.offset),
            })
    }
}

#[derive(Debug)]
pub struct Remapped {
    inner: Box<dyn Layout>,
    moves: Vec<Move>,
}

impl Remapped {
    pub fn new(inner: Box<dyn Layout>, moves: Vec<Move>) -> Self {
        Self { inner, moves }
    }

    pub fn moves(&self) -> &[Move] {
        &self.moves
    }

    fn map(&self, c: ChunkLoc) -> ChunkLoc {
        self.moves.iter().find_map(|m| m.apply(c)).unwrap_or(c)
    }
}

impl Layout for Remapped {
    fn data_loc(&self, s: u64, idx: usize) -> ChunkLoc {
        self.map(self.inner.data_loc(s, idx))
    }
    fn name(&self) -> String {
        self.inner.name()
    }
    fn members(&self) -> usize {
        self.inner.members()
    }
    fn chunk_bytes(&self) -> u64 {
        self.inner.chunk_bytes()
    }
    fn stripe_count(&self) -> u64 {
        self.inner.stripe_count()
    }
    fn data_per_stripe(&self) -> usize {
        self.inner.data_per_stripe()
    }
    fn redundancy(&self) -> Redundancy {
        self.inner.redundancy()
    }
    fn parity_cycle(&self) -> u64 {
        self.inner.parity_cycle()
    }
    fn stripe(&self, s: u64) -> Stripe {
        let st = self.inner.stripe(s);
        if self.moves.is_empty() {
            return st;
        }
        Stripe {
            index: st.index,
            data: st.data.into_iter().map(|c| self.map(c)).collect(),
            parity: st.parity.into_iter().map(|c| self.map(c)).collect(),
            mirrors: st
                .mirrors
                .into_iter()
                .map(|v| v.into_iter().map(|c| self.map(c)).collect())
                .collect(),
        }
    }
    fn locate_chunk(&self, l: u64) -> (u64, usize) {
        self.inner.locate_chunk(l)
    }
    fn capacity_bytes(&self) -> u64 {
        self.inner.capacity_bytes()
    }
    fn data_in_stripe(&self, s: u64) -> usize {
        self.inner.data_in_stripe(s)
    }
    fn logical_chunk(&self, s: u64, i: usize) -> u64 {
        self.inner.logical_chunk(s, i)
    }
    fn bundles(&self) -> Option<u64> {
        self.inner.bundles()
    }
    fn log_regions(&self) -> Vec<LogRegion> {
        self.inner.log_regions()
    }
    fn spare_slots(&self) -> usize {
        self.inner.spare_slots()
    }
    fn spare_location(&self, lost: ChunkLoc, target: usize, slot: usize) -> Option<ChunkLoc> {
        self.inner.spare_location(lost, target, slot)
    }
    fn spare_extent(&self, lost: ChunkLoc) -> Option<(u64, u64)> {
        self.inner.spare_extent(lost)
    }
}
