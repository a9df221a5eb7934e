//! Naive byte-at-a-time implementations. They define what the fast kernels must
//! compute; every SIMD path is tested against them.

use crate::gf;

/// dst = XOR of all sources.
pub fn xor_gen(dst: &mut [u8], srcs: &[&[u8]]) {
    for (i, d) in dst.iter_mut().enumerate() {
        *d = srcs.iter().fold(0, |acc, s| acc ^ s[i]);
    }
}

/// P = XOR of data, Q = sum of g^i * D_i.
pub fn pq_gen(data: &[&[u8]], p: &mut [u8], q: &mut [u8]) {
    for i in 0..p.len() {
        let mut pp = 0u8;
        let mut qq = 0u8;
        for (z, d) in data.iter().enumerate() {
            pp ^= d[i];
            qq ^= gf::mul(gf::pow2(z), d[i]);
        }
        p[i] = pp;
        q[i] = qq;
    }
}

/// dst ^= c * src.
pub fn mul_acc(c: u8, src: &[u8], dst: &mut [u8]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d ^= gf::mul(c, *s);
    }
}

/// A deterministic test pattern: `n` bytes of xorshift64 from `seed` (the
/// tests' and benchmarks' data).
pub fn pattern(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}
