//! Little-endian fields at byte offsets: the one codec the on-disk
//! structures (superblocks, log headers and records, the annex, bundle
//! tables) read and write with. Their byte maps are in docs/FORMAT.md.
//! Each call panics on an offset past the buffer: callers read fixed-size
//! blocks they have already sized.

pub(crate) fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(b[at..at + 2].try_into().unwrap())
}

pub(crate) fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

pub(crate) fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

pub(crate) fn put_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_little_endian_and_round_trip() {
        let mut b = [0u8; 16];
        put_u16(&mut b, 0, 0x0102);
        put_u32(&mut b, 2, 0x0304_0506);
        put_u64(&mut b, 6, 0x0708_090a_0b0c_0d0e);
        assert_eq!(
            b[..14],
            [2, 1, 6, 5, 4, 3, 0x0e, 0x0d, 0x0c, 0x0b, 0x0a, 9, 8, 7]
        );
        assert_eq!(u16_at(&b, 0), 0x0102);
        assert_eq!(u32_at(&b, 2), 0x0304_0506);
        assert_eq!(u64_at(&b, 6), 0x0708_090a_0b0c_0d0e);
    }
}
