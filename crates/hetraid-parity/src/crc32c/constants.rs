//! Constants for folding and joining CRC-32C runs, derived from the polynomial at compile
//! time rather than copied, so they cannot be mistyped.
//!
//! In the reflected bit order of the `crc32` instruction, a 32-bit register
//! `v` multiplied (carry-less) by the reflected 32-bit value of
//! `x^(8n-33) mod P`, then fed to `crc32(0, product)`, gives `v * x^(8n) mod P`:
//! the register of `v` followed by `n` zero bytes. The carry-less product of
//! two reflected operands carries one extra factor `x`, and `crc32` of a
//! 64-bit word multiplies by `x^32`, hence the 33.

/// CRC-32C's polynomial, normal bit order, x^32 included.
pub const CASTAGNOLI: u64 = 0x1_1EDC_6F41;

/// `x^n mod P` for a 33-bit polynomial `p` (normal bit order).
pub const fn xpow_mod(n: u32, p: u64) -> u32 {
    let mut r: u64 = 1;
    let mut i = 0;
    while i < n {
        r <<= 1;
        if r & (1 << 32) != 0 {
            r ^= p;
        }
        i += 1;
    }
    r as u32
}

/// A folding constant, `x^n mod P` reflected and shifted left by one: a
/// 128-bit lane of message folded forward by `d` bits is its low half times
/// the constant for `d + 32` XOR its high half times the one for `d - 32`
/// (Intel, "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ";
/// the shift makes up for the product of two reflected operands being one
/// bit short). The IEEE test below reproduces crc32fast's published values.
pub const fn fold_key(n: u32, p: u64) -> u64 {
    (xpow_mod(n, p).reverse_bits() as u64) << 1
}

/// Keys (low half, high half) that fold a 128-bit lane forward by `bytes`.
pub const fn fold_keys(bytes: u32) -> (u64, u64) {
    (
        fold_key(8 * bytes + 32, CASTAGNOLI),
        fold_key(8 * bytes - 32, CASTAGNOLI),
    )
}

/// The key that shifts a CRC-32C register past `bytes` zero bytes.
pub const fn shift_key(bytes: usize) -> u64 {
    xpow_mod(8 * bytes as u32 - 33, CASTAGNOLI).reverse_bits() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crc32c::reference;

    /// The register after `n` zero bytes, computed bit by bit.
    fn shifted(v: u32, n: usize) -> u32 {
        !reference::crc32c_append(!v, &vec![0u8; n])
    }

    /// Carry-less product, low 64 bits, in plain Rust.
    fn clmul(a: u64, b: u64) -> u64 {
        (0..64)
            .filter(|i| b >> i & 1 != 0)
            .fold(0, |acc, i| acc ^ (a << i))
    }

    /// `crc32(0, w)` in plain Rust: the register after 8 bytes of `w`.
    fn crc32_u64(w: u64) -> u32 {
        !reference::crc32c_append(!0, &w.to_le_bytes())
    }

    /// crc32fast's PCLMULQDQ constants for IEEE CRC-32 (0x04C11DB7).
    #[test]
    fn fold_keys_reproduce_the_published_ieee_constants() {
        let ieee = 0x1_04C1_1DB7;
        assert_eq!(fold_key(4 * 128 + 32, ieee), 0x1_5444_2bd4);
        assert_eq!(fold_key(4 * 128 - 32, ieee), 0x1_c6e4_1596);
        assert_eq!(fold_key(128 + 32, ieee), 0x1_7519_97d0);
        assert_eq!(fold_key(128 - 32, ieee), 0x0_ccaa_009e);
        assert_eq!(fold_key(64, ieee), 0x1_63cd_6124);
    }

    #[test]
    fn a_shift_key_moves_a_register_past_zero_bytes() {
        for n in [8usize, 32, 64, 1360, 2720] {
            for v in [1u32, 0x8000_0000, 0xDEAD_BEEF, 0x1234_5678] {
                assert_eq!(
                    crc32_u64(clmul(v as u64, shift_key(n))),
                    shifted(v, n),
                    "v {v:#x} n {n}"
                );
            }
        }
    }
}
