//! Bit-at-a-time CRC-32C: slow, obviously right, the definition the fast
//! kernels are tested against.

/// The reflected Castagnoli polynomial.
pub const POLY_REFLECTED: u32 = 0x82F6_3B78;

/// CRC-32C of the bytes behind `crc` followed by `data`.
pub fn crc32c_append(crc: u32, data: &[u8]) -> u32 {
    let mut r = !crc;
    for &b in data {
        r ^= b as u32;
        for _ in 0..8 {
            r = if r & 1 != 0 {
                (r >> 1) ^ POLY_REFLECTED
            } else {
                r >> 1
            };
        }
    }
    !r
}
