//! RAIDX's bundle table on the members ([Fekete, Varki], issue 14): each member
//! keeps, past its data area, one entry per chunk slot of its own — which
//! bundle the chunk there belongs to and at which position — so its size is
//! fixed by the member's size. Byte layout in `docs/FORMAT.md` ("RAIDX bundle
//! table").
//!
//! Today every table is the allocator's (a RAIDX array's chunks do not move
//! yet), and assembly checks the members' tables against it: a table that
//! disagrees is damage, named with its member. Growing and re-placing
//! (`hetraid_core::layout::raidx_grow`) will make the tables the truth; each
//! entry carries a generation for that (a chunk copied to a new slot is
//! claimed there with a higher generation before its old entry is cleared,
//! so a crash between the two leaves the newer claim winning).

use crate::le::{u16_at, u32_at, u64_at};
use crate::member::{AlignedBuf, Member};
use hetraid_parity::crc32c::crc32c;
use std::io;

use hetraid_core::units::PAGE;
pub const TABLE_MAGIC: &[u8; 8] = b"HETRXTB1";
const ENTRY: usize = 16;
/// Entries per table page (the last 16 bytes: page index and CRC).
pub const ENTRIES_PER_PAGE: u64 = 255;
/// Pages written at once.
const BATCH_PAGES: u64 = 256;

/// One slot's entry: the chunk there is bundle `bundle`'s at `pos`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub bundle: u64,
    pub pos: u16,
    pub generation: u32,
}

/// Bytes of the table of a member with `slots` chunk slots: a header page
/// and the entry pages (16 bytes a slot: 0.024 % of 64 KiB chunks).
pub fn table_bytes(slots: u64) -> u64 {
    PAGE + slots.div_ceil(ENTRIES_PER_PAGE) * PAGE
}

fn header(uuid: [u8; 16], member: u32, slots: u64) -> AlignedBuf {
    let mut h = AlignedBuf::zeroed(PAGE as usize);
    h[0..8].copy_from_slice(TABLE_MAGIC);
    h[8..12].copy_from_slice(&1u32.to_le_bytes());
    h[12..16].copy_from_slice(&member.to_le_bytes());
    h[16..32].copy_from_slice(&uuid);
    h[32..40].copy_from_slice(&slots.to_le_bytes());
    let crc = crc32c(&h[..4092]);
    h[4092..4096].copy_from_slice(&crc.to_le_bytes());
    h
}

/// Write the table of a member (its `entries`, one per slot) at byte `at`
/// of it, and flush.
pub fn write_table(
    m: &dyn Member,
    at: u64,
    uuid: [u8; 16],
    member: u32,
    entries: &[Option<Entry>],
) -> io::Result<()> {
    let slots = entries.len() as u64;
    m.write_at(&header(uuid, member, slots), at)?;
    let pages = slots.div_ceil(ENTRIES_PER_PAGE);
    let mut first = 0;
    while first < pages {
        let n = BATCH_PAGES.min(pages - first);
        let mut buf = AlignedBuf::zeroed((n * PAGE) as usize);
        for p in 0..n {
            let page = &mut buf[(p * PAGE) as usize..((p + 1) * PAGE) as usize];
            let base = (first + p) * ENTRIES_PER_PAGE;
            for i in 0..ENTRIES_PER_PAGE.min(slots - base) {
                if let Some(e) = entries[(base + i) as usize] {
                    let o = i as usize * ENTRY;
                    page[o..o + 8].copy_from_slice(&(e.bundle + 1).to_le_bytes());
                    page[o + 8..o + 10].copy_from_slice(&e.pos.to_le_bytes());
                    page[o + 12..o + 16].copy_from_slice(&e.generation.to_le_bytes());
                }
            }
            page[4080..4088].copy_from_slice(&(first + p).to_le_bytes());
            let crc = crc32c(&page[..4092]);
            page[4092..4096].copy_from_slice(&crc.to_le_bytes());
        }
        m.write_at(&buf, at + PAGE + first * PAGE)?;
        first += n;
    }
    m.flush()
}

/// Read the table at byte `at` of member `name` (slot `member` of array
/// `uuid`): its entries, or why it cannot be used.
pub fn read_table(
    m: &dyn Member,
    at: u64,
    uuid: [u8; 16],
    member: u32,
    slots: u64,
) -> Result<Vec<Option<Entry>>, String> {
    let name = m.name();
    let mut h = AlignedBuf::zeroed(PAGE as usize);
    m.read_at(&mut h, at)
        .map_err(|e| format!("cannot read the bundle table of {name}: {e}"))?;
    let crc = u32_at(&h, 4092);
    if &h[0..8] != TABLE_MAGIC || crc32c(&h[..4092]) != crc {
        return Err(format!("{name} has no valid bundle table (damaged header)"));
    }
    if h[16..32] != uuid || u32_at(&h, 12) != member {
        return Err(format!(
            "the bundle table on {name} belongs to another array or slot"
        ));
    }
    if u64_at(&h, 32) != slots {
        return Err(format!(
            "the bundle table on {name} covers another number of slots"
        ));
    }
    let pages = slots.div_ceil(ENTRIES_PER_PAGE);
    let mut out = Vec::with_capacity(slots as usize);
    let mut first = 0;
    while first < pages {
        let n = BATCH_PAGES.min(pages - first);
        let mut buf = AlignedBuf::zeroed((n * PAGE) as usize);
        m.read_at(&mut buf, at + PAGE + first * PAGE)
            .map_err(|e| format!("cannot read the bundle table of {name}: {e}"))?;
        for p in 0..n {
            let page = &buf[(p * PAGE) as usize..((p + 1) * PAGE) as usize];
            let crc = u32_at(page, 4092);
            let index = u64_at(page, 4080);
            if crc32c(&page[..4092]) != crc || index != first + p {
                return Err(format!(
                    "page {} of the bundle table on {name} is damaged",
                    first + p
                ));
            }
            let base = (first + p) * ENTRIES_PER_PAGE;
            for i in 0..ENTRIES_PER_PAGE.min(slots - base) {
                let o = i as usize * ENTRY;
                let b = u64_at(page, o);
                out.push((b != 0).then(|| Entry {
                    bundle: b - 1,
                    pos: u16_at(page, o + 8),
                    generation: u32_at(page, o + 12),
                }));
            }
        }
        first += n;
    }
    Ok(out)
}

/// The entries a member's slots get from a bundle table (places per bundle,
/// positions in order): slot k of `member` of `slots`.
pub fn entries_of(
    places: &[Vec<hetraid_core::layout::raidx_grow::Place>],
    member: usize,
    slots: u64,
) -> Vec<Option<Entry>> {
    let mut out = vec![None; slots as usize];
    for (b, ps) in places.iter().enumerate() {
        for (pos, &(m, slot)) in ps.iter().enumerate() {
            if m == member && slot < slots {
                out[slot as usize] = Some(Entry {
                    bundle: b as u64,
                    pos: pos as u16,
                    generation: 1,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::member::FaultMember;

    #[test]
    fn a_table_round_trips_and_damage_is_named() {
        let m = FaultMember::new("t0", 4 << 20, 1);
        let uuid = [9u8; 16];
        let slots = 700;
        let entries: Vec<Option<Entry>> = (0..slots)
            .map(|i| {
                (i % 3 != 0).then_some(Entry {
                    bundle: i * 7,
                    pos: (i % 4) as u16,
                    generation: 1 + (i % 2) as u32,
                })
            })
            .collect();
        write_table(&m, 8192, uuid, 2, &entries).unwrap();
        assert_eq!(read_table(&m, 8192, uuid, 2, slots).unwrap(), entries);
        assert!(read_table(&m, 8192, [1; 16], 2, slots)
            .unwrap_err()
            .contains("another array"));
        assert!(read_table(&m, 8192, uuid, 3, slots)
            .unwrap_err()
            .contains("slot"));
        // A flipped byte in the second entry page.
        let mut b = [0u8; 1];
        m.read_at(&mut b, 8192 + 2 * 4096 + 100).unwrap();
        b[0] ^= 1;
        m.write_at(&b, 8192 + 2 * 4096 + 100).unwrap();
        let e = read_table(&m, 8192, uuid, 2, slots).unwrap_err();
        assert!(e.contains("page 1") && e.contains("t0"), "{e}");
        assert_eq!(table_bytes(255), 8192);
        assert_eq!(table_bytes(256), 12288);
    }
}
