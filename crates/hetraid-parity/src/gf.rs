//! GF(2^8) arithmetic with the RAID-6 polynomial x^8 + x^4 + x^3 + x^2 + 1 (0x11d)
//! and generator g = 2, as in H. P. Anvin, "The mathematics of RAID-6".
//!
//! Tables are built at compile time so nothing allocates or initialises lazily.

/// exp[i] = g^i for i in 0..510 (doubled so `exp[log a + log b]` needs no modulo).
pub const EXP: [u8; 512] = build_exp();
/// log[a] = i such that g^i = a, for a != 0. log[0] is unused (0).
pub const LOG: [u8; 256] = build_log();

const fn build_exp() -> [u8; 512] {
    let mut t = [0u8; 512];
    let mut x: u16 = 1;
    let mut i = 0;
    while i < 512 {
        t[i] = x as u8;
        x <<= 1;
        if x & 0x100 != 0 {
            x ^= 0x11d;
        }
        i += 1;
    }
    t
}

const fn build_log() -> [u8; 256] {
    let exp = build_exp();
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 255 {
        t[exp[i] as usize] = i as u8;
        i += 1;
    }
    t
}

/// a * b in GF(2^8).
#[inline]
pub fn mul(a: u8, b: u8) -> u8 {
    if a == 0 || b == 0 {
        return 0;
    }
    EXP[LOG[a as usize] as usize + LOG[b as usize] as usize]
}

/// Multiplicative inverse; `inv(0)` is defined as 0 (callers never divide by zero).
#[inline]
pub fn inv(a: u8) -> u8 {
    if a == 0 {
        return 0;
    }
    EXP[255 - LOG[a as usize] as usize]
}

/// g^n for any n (reduced modulo 255).
#[inline]
pub fn pow2(n: usize) -> u8 {
    EXP[n % 255]
}

/// Nibble tables for multiplying by a constant with a 16-entry shuffle:
/// `c * x = lo[x & 15] ^ hi[x >> 4]`.
pub fn nibble_tables(c: u8) -> ([u8; 16], [u8; 16]) {
    let mut lo = [0u8; 16];
    let mut hi = [0u8; 16];
    for i in 0..16u8 {
        lo[i as usize] = mul(c, i);
        hi[i as usize] = mul(c, i << 4);
    }
    (lo, hi)
}

/// The 8x8 bit matrix of "multiply by `c`" for GFNI's `gf2p8affineqb`
/// (which works for any polynomial, where `gf2p8mulb` is fixed to AES's
/// 0x11b): byte 7 - i of the result holds the input bits that feed output
/// bit i, since multiplying by a constant is linear over GF(2).
pub const fn affine_matrix(c: u8) -> u64 {
    let mut m = 0u64;
    let mut i = 0;
    while i < 8 {
        let mut row = 0u8;
        let mut j = 0;
        while j < 8 {
            // Bit i of c * x^j.
            if const_mul(c, 1 << j) >> i & 1 == 1 {
                row |= 1 << j;
            }
            j += 1;
        }
        m |= (row as u64) << (8 * (7 - i));
        i += 1;
    }
    m
}

/// a * b by shift-and-add, usable in constant evaluation.
const fn const_mul(mut a: u8, mut b: u8) -> u8 {
    let mut r = 0u8;
    while b != 0 {
        if b & 1 == 1 {
            r ^= a;
        }
        let hi = a & 0x80;
        a <<= 1;
        if hi != 0 {
            a ^= 0x1d;
        }
        b >>= 1;
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The affine matrix applied bit by bit (as the instruction defines it)
    /// multiplies by c, for every c and x.
    #[test]
    fn affine_matrices_multiply() {
        for c in 0..=255u8 {
            let m = affine_matrix(c);
            for x in 0..=255u8 {
                let mut y = 0u8;
                for i in 0..8 {
                    let row = (m >> (8 * (7 - i))) as u8;
                    y |= (((row & x).count_ones() & 1) as u8) << i;
                }
                assert_eq!(y, mul(c, x), "c {c} x {x}");
                assert_eq!(const_mul(c, x), mul(c, x));
            }
        }
    }

    #[test]
    fn field_axioms_hold_exhaustively() {
        for a in 0..=255u8 {
            assert_eq!(mul(a, 1), a);
            assert_eq!(mul(a, 0), 0);
            if a != 0 {
                assert_eq!(mul(a, inv(a)), 1, "inverse of {a}");
            }
            for b in 0..=255u8 {
                assert_eq!(mul(a, b), mul(b, a));
            }
        }
        // g = 2 generates the whole multiplicative group.
        let mut seen = [false; 256];
        for i in 0..255 {
            seen[pow2(i) as usize] = true;
        }
        assert_eq!(seen.iter().filter(|s| **s).count(), 255);
        assert_eq!(mul(0x80, 2), 0x1d);
    }
}
