//! CRC-32C with the SSE 4.2 `crc32` instruction, three streams at once, the
//! streams joined by one carry-less multiplication each (PCLMULQDQ).
//!
//! The instruction's latency is three cycles and one can start every cycle,
//! so one stream runs at a third of the possible speed. The input is cut into
//! three equal runs of `L` bytes that are checksummed side by side; the CRC
//! register is linear, so the whole is `shift(a, 2L) ^ shift(b, L) ^ c`, where
//! `shift(v, n)` multiplies by `x^(8n)` mod P: one `pclmulqdq` by the constant
//! `x^(8n-33)` and one `crc32` of the product (see [`super::constants`]).
//! The `crc32c` crate does the same with table-based joins every 256 bytes; a
//! 4 KiB block here is one run of 3 x 1360 bytes plus 16, so it pays one join.

use super::constants::shift_key;
use std::arch::x86_64::*;

/// Run lengths tried in turn (bytes per stream, multiples of 8), with the
/// keys that shift by `2L` and by `L` bytes.
const RUNS: [(usize, u64, u64); 4] = [
    (1360, shift_key(2 * 1360), shift_key(1360)),
    (512, shift_key(2 * 512), shift_key(512)),
    (128, shift_key(2 * 128), shift_key(128)),
    (32, shift_key(2 * 32), shift_key(32)),
];

pub fn detected() -> bool {
    is_x86_feature_detected!("sse4.2") && is_x86_feature_detected!("pclmulqdq")
}

/// # Safety
///
/// The CPU must have sse4.2 (the caller checked it); every pointer and length must cover the bytes read and written.
#[inline]
#[target_feature(enable = "sse4.2")]
pub(super) unsafe fn word(p: *const u8, at: usize) -> u64 {
    // SAFETY: the caller keeps this function's contract: the CPU has the features it is compiled for, and the pointers and lengths cover what it reads and writes.
    unsafe { u64::from_le(std::ptr::read_unaligned(p.add(at) as *const u64)) }
}

/// Low 64 bits of the carry-less product of two 32-bit values.
///
/// # Safety
///
/// The CPU must have pclmulqdq (the caller checked it); every pointer and length must cover the bytes read and written.
#[inline]
#[target_feature(enable = "pclmulqdq")]
pub(super) unsafe fn clmul(a: u64, b: u64) -> u64 {
    let p = _mm_clmulepi64_si128(_mm_cvtsi64_si128(a as i64), _mm_cvtsi64_si128(b as i64), 0);
    _mm_cvtsi128_si64(p) as u64
}

/// CRC-32C of the bytes behind `crc` followed by `data`.
///
/// # Safety
/// The CPU must have SSE 4.2 and PCLMULQDQ ([`detected`]).
#[target_feature(enable = "sse4.2,pclmulqdq")]
pub unsafe fn append(crc: u32, data: &[u8]) -> u32 {
    // SAFETY: the caller keeps this function's contract: the CPU has the features it is compiled for, and the pointers and lengths cover what it reads and writes.
    unsafe {
        let mut r = (!crc) as u64;
        let (mut p, mut left) = (data.as_ptr(), data.len());
        for &(len, k2, k1) in &RUNS {
            while left >= 3 * len {
                let (mut a, mut b, mut c) = (r, 0u64, 0u64);
                let mut i = 0;
                while i < len {
                    a = _mm_crc32_u64(a, word(p, i));
                    b = _mm_crc32_u64(b, word(p, len + i));
                    c = _mm_crc32_u64(c, word(p, 2 * len + i));
                    i += 8;
                }
                r = _mm_crc32_u64(0, clmul(a, k2) ^ clmul(b, k1)) ^ c;
                p = p.add(3 * len);
                left -= 3 * len;
            }
        }
        while left >= 8 {
            r = _mm_crc32_u64(r, word(p, 0));
            p = p.add(8);
            left -= 8;
        }
        let mut r = r as u32;
        for k in 0..left {
            r = _mm_crc32_u8(r, *p.add(k));
        }
        !r
    }
}
