//! AVX-512F: 256 bytes per iteration for XOR; P+Q and multiplication reuse the
//! AVX2 kernels (the 512-bit versions did not pay for their complexity on the
//! memory-bound sizes RAID uses).

use super::{avx2::Avx2, portable, Kernels};
use std::arch::x86_64::*;

pub struct Avx512;

impl Avx512 {
    pub fn detected() -> bool {
        is_x86_feature_detected!("avx512f") && Avx2::detected()
    }
}

const BLOCK: usize = 256;

impl Kernels for Avx512 {
    fn name(&self) -> &'static str {
        "avx512"
    }

    fn xor_gen(&self, dst: &mut [u8], srcs: &[&[u8]]) {
        let done = dst.len() / BLOCK * BLOCK;
        // SAFETY: only handed out when AVX-512F is detected; lengths checked in lib.rs.
        unsafe { xor_blocks(dst, srcs, done, false) };
        portable::xor_range(dst, srcs, done, false);
    }

    fn xor_acc(&self, dst: &mut [u8], srcs: &[&[u8]]) {
        let done = dst.len() / BLOCK * BLOCK;
        // SAFETY: as above.
        unsafe { xor_blocks(dst, srcs, done, true) };
        portable::xor_range(dst, srcs, done, true);
    }

    fn pq_gen(&self, data: &[&[u8]], p: &mut [u8], q: &mut [u8]) {
        Avx2.pq_gen(data, p, q)
    }

    fn mul_acc(&self, c: u8, src: &[u8], dst: &mut [u8]) {
        Avx2.mul_acc(c, src, dst)
    }
}

/// # Safety
///
/// The CPU must have avx512f (the caller checked it); every pointer and length must cover the bytes read and written.
#[target_feature(enable = "avx512f")]
unsafe fn xor_blocks(dst: &mut [u8], srcs: &[&[u8]], len: usize, acc: bool) {
    // SAFETY: the caller keeps this function's contract: the CPU has the features it is compiled for, and the pointers and lengths cover what it reads and writes.
    unsafe {
        let d = dst.as_mut_ptr();
        let mut i = 0;
        while i < len {
            let base = if acc {
                d.add(i) as *const u8
            } else {
                srcs[0].as_ptr().add(i)
            };
            let mut a = _mm512_loadu_si512(base as *const __m512i);
            let mut b = _mm512_loadu_si512(base.add(64) as *const __m512i);
            let mut c = _mm512_loadu_si512(base.add(128) as *const __m512i);
            let mut e = _mm512_loadu_si512(base.add(192) as *const __m512i);
            let first = if acc { 0 } else { 1 };
            for s in &srcs[first..] {
                let p = s.as_ptr().add(i);
                a = _mm512_xor_si512(a, _mm512_loadu_si512(p as *const __m512i));
                b = _mm512_xor_si512(b, _mm512_loadu_si512(p.add(64) as *const __m512i));
                c = _mm512_xor_si512(c, _mm512_loadu_si512(p.add(128) as *const __m512i));
                e = _mm512_xor_si512(e, _mm512_loadu_si512(p.add(192) as *const __m512i));
            }
            let o = d.add(i);
            _mm512_storeu_si512(o as *mut __m512i, a);
            _mm512_storeu_si512(o.add(64) as *mut __m512i, b);
            _mm512_storeu_si512(o.add(128) as *mut __m512i, c);
            _mm512_storeu_si512(o.add(192) as *mut __m512i, e);
            i += BLOCK;
        }
    }
}
