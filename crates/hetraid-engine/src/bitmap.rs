//! Write-intent bitmap: one bit per region of stripes, set and made durable on
//! every live member before the region is written, cleared after a flush once the
//! region is idle. After a crash, assembly recomputes parity in dirty regions only,
//! which closes the RAID-5 write hole for everything acknowledged by a flush.

use std::collections::HashMap;

/// Room for new arrays' bitmaps: the metadata zone up to the annex (older
/// arrays may use the zone up to the data offset, and then keep no annex).
pub const BITMAP_BYTES: u64 = crate::annex::BITMAP_ROOM;
use hetraid_core::units::PAGE;

#[derive(Debug, Clone)]
pub struct Bitmap {
    pub stripes_per_bit: u64,
    /// Bits durable on the members.
    pub bits: Vec<u8>,
    /// In-flight writes per bit.
    inflight: HashMap<u64, u32>,
    /// Writes begun since the bitmap was made (safe mode's idle test).
    pub begun: u64,
    /// Per set bit: the `begun` count of its last write (so a flush clears
    /// only bits no write began on since the flush started).
    last_begun: HashMap<u64, u64>,
}

/// What a flush may clear once its member flush is done: the bits idle when
/// it started (their last write ended before it), unless a write began on
/// them since.
#[derive(Debug, Clone)]
pub struct Clearable {
    since: u64,
    bits: Vec<u64>,
}

impl Bitmap {
    /// Stripes per bit so that the bitmap fits, with regions of about 4 MiB.
    pub fn stripes_per_bit(stripes: u64, stripe_data_bytes: u64) -> u64 {
        let by_size = ((4u64 << 20) / stripe_data_bytes.max(1)).max(1);
        let by_room = stripes.div_ceil(BITMAP_BYTES * 8).max(1);
        by_size.max(by_room)
    }

    pub fn new(stripes_per_bit: u64, bits: Vec<u8>) -> Self {
        Self {
            stripes_per_bit,
            bits,
            inflight: HashMap::new(),
            begun: 0,
            last_begun: HashMap::new(),
        }
    }

    pub fn bit_of(&self, stripe: u64) -> u64 {
        stripe / self.stripes_per_bit
    }

    pub fn is_set(&self, bit: u64) -> bool {
        self.bits
            .get((bit / 8) as usize)
            .is_some_and(|b| b >> (bit % 8) & 1 == 1)
    }

    fn set(&mut self, bit: u64, v: bool) {
        let i = (bit / 8) as usize;
        if i < self.bits.len() {
            if v {
                self.bits[i] |= 1 << (bit % 8);
            } else {
                self.bits[i] &= !(1 << (bit % 8));
            }
        }
    }

    /// Register writes to `bits`; returns the bitmap pages (byte offset within the
    /// bitmap region) that changed and must be written and synced first.
    pub fn begin(&mut self, bits: &[u64]) -> Vec<u64> {
        let mut pages = Vec::new();
        self.begun += 1;
        for &b in bits {
            *self.inflight.entry(b).or_default() += 1;
            self.last_begun.insert(b, self.begun);
            if !self.is_set(b) {
                self.set(b, true);
                pages.push(b / 8 / PAGE * PAGE);
            }
        }
        pages.sort_unstable();
        pages.dedup();
        pages
    }

    pub fn end(&mut self, bits: &[u64]) {
        for b in bits {
            if let Some(c) = self.inflight.get_mut(b) {
                *c -= 1;
                if *c == 0 {
                    self.inflight.remove(b);
                }
            }
        }
    }

    /// Before a flush: the set bits with no write in flight. A write that
    /// ends later may not have reached the members when they are flushed,
    /// so its bit must not be cleared by this flush.
    pub fn clearable(&self) -> Clearable {
        let mut bits = Vec::new();
        for i in 0..self.bits.len() {
            if self.bits[i] == 0 {
                continue;
            }
            for j in 0..8 {
                let bit = i as u64 * 8 + j;
                if self.is_set(bit) && !self.inflight.contains_key(&bit) {
                    bits.push(bit);
                }
            }
        }
        Clearable {
            since: self.begun,
            bits,
        }
    }

    /// After the flush that followed `c`: clear its bits that no write
    /// began on since; returns changed pages.
    pub fn clear_idle(&mut self, c: &Clearable) -> Vec<u64> {
        let mut pages = Vec::new();
        for &bit in &c.bits {
            let quiet = !self.inflight.contains_key(&bit)
                && self.last_begun.get(&bit).is_none_or(|&n| n <= c.since);
            if quiet && self.is_set(bit) {
                self.set(bit, false);
                self.last_begun.remove(&bit);
                pages.push(bit / 8 / PAGE * PAGE);
            }
        }
        pages.dedup();
        pages
    }

    /// No write is in flight.
    pub fn idle(&self) -> bool {
        self.inflight.is_empty()
    }

    /// Set bits (dirty regions).
    pub fn dirty(&self) -> Vec<u64> {
        (0..self.bits.len() as u64 * 8)
            .filter(|b| self.is_set(*b))
            .collect()
    }

    pub fn page(&self, off: u64) -> &[u8] {
        let end = (off + PAGE).min(self.bits.len() as u64);
        &self.bits[off as usize..end as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flush_clears_only_bits_idle_before_it_began() {
        let mut bm = Bitmap::new(1, vec![0; 16]);
        assert_eq!(bm.begin(&[1, 2, 3]), vec![0]);
        bm.end(&[1]);
        // Bit 2's write ends while the members flush, bit 3's is still in
        // flight, bit 1 is written again meanwhile.
        let c = bm.clearable();
        bm.end(&[2]);
        bm.begin(&[1]);
        bm.end(&[1]);
        assert!(bm.clear_idle(&c).is_empty());
        assert!(bm.is_set(1) && bm.is_set(2) && bm.is_set(3));
        // The next flush clears what is quiet by then.
        let c = bm.clearable();
        assert_eq!(bm.clear_idle(&c), vec![0]);
        assert!(!bm.is_set(1) && !bm.is_set(2) && bm.is_set(3));
        bm.end(&[3]);
        let c = bm.clearable();
        bm.clear_idle(&c);
        assert!(bm.dirty().is_empty());
    }
}
