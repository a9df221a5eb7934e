//! Portable fallback: 64-bit SWAR words, byte tail.

use super::Kernels;
use crate::gf;

pub struct Portable;

const LANE: usize = 8;

#[inline]
fn load(s: &[u8], i: usize) -> u64 {
    u64::from_ne_bytes(s[i..i + LANE].try_into().unwrap())
}

#[inline]
fn store(d: &mut [u8], i: usize, v: u64) {
    d[i..i + LANE].copy_from_slice(&v.to_ne_bytes());
}

/// Multiply each byte by g = 2 in GF(2^8).
#[inline]
fn mul2(x: u64) -> u64 {
    let hi = x & 0x8080_8080_8080_8080;
    let reduce = (hi >> 7).wrapping_mul(0x1d);
    ((x << 1) & 0xfefe_fefe_fefe_fefe) ^ reduce
}

/// XOR (or XOR-accumulate) bytes `from..` one at a time; the SIMD sets use it for
/// their tails so no kernel allocates.
pub fn xor_range(dst: &mut [u8], srcs: &[&[u8]], from: usize, acc: bool) {
    for j in from..dst.len() {
        let v = srcs.iter().fold(0, |a, s| a ^ s[j]);
        if acc {
            dst[j] ^= v;
        } else {
            dst[j] = v;
        }
    }
}

/// P+Q of bytes `from..` one at a time.
pub fn pq_range(data: &[&[u8]], p: &mut [u8], q: &mut [u8], from: usize) {
    let top = data.len() - 1;
    for j in from..p.len() {
        let mut pp = data[top][j];
        let mut qq = pp;
        for z in (0..top).rev() {
            let d = data[z][j];
            pp ^= d;
            qq = gf::mul(qq, 2) ^ d;
        }
        p[j] = pp;
        q[j] = qq;
    }
}

impl Kernels for Portable {
    fn name(&self) -> &'static str {
        "portable"
    }

    fn xor_gen(&self, dst: &mut [u8], srcs: &[&[u8]]) {
        let n = dst.len();
        let words = n / LANE * LANE;
        let mut i = 0;
        while i < words {
            let mut v = load(srcs[0], i);
            for s in &srcs[1..] {
                v ^= load(s, i);
            }
            store(dst, i, v);
            i += LANE;
        }
        xor_range(dst, srcs, words, false);
    }

    fn xor_acc(&self, dst: &mut [u8], srcs: &[&[u8]]) {
        let n = dst.len();
        let words = n / LANE * LANE;
        let mut i = 0;
        while i < words {
            let mut v = load(dst, i);
            for s in srcs {
                v ^= load(s, i);
            }
            store(dst, i, v);
            i += LANE;
        }
        xor_range(dst, srcs, words, true);
    }

    fn pq_gen(&self, data: &[&[u8]], p: &mut [u8], q: &mut [u8]) {
        let n = p.len();
        let words = n / LANE * LANE;
        let top = data.len() - 1;
        let mut i = 0;
        while i < words {
            let mut pp = load(data[top], i);
            let mut qq = pp;
            for z in (0..top).rev() {
                let d = load(data[z], i);
                pp ^= d;
                qq = mul2(qq) ^ d;
            }
            store(p, i, pp);
            store(q, i, qq);
            i += LANE;
        }
        pq_range(data, p, q, words);
    }

    fn mul_acc(&self, c: u8, src: &[u8], dst: &mut [u8]) {
        let (lo, hi) = gf::nibble_tables(c);
        for (d, s) in dst.iter_mut().zip(src) {
            *d ^= lo[(*s & 15) as usize] ^ hi[(*s >> 4) as usize];
        }
    }
}
