//! CRC-32C of whole 4 KiB blocks on two kinds of execution unit at once
//! (x86_64 with AVX2, VPCLMULQDQ and SSE 4.2, e.g. AMD Zen 3, Intel Ice Lake).
//!
//! The first 1536 bytes of a block are folded by carry-less multiplication,
//! three 256-bit registers (six 128-bit lanes) 96 bytes at a time, on the
//! vector units; meanwhile the integer units run the `crc32` instruction over
//! the other 2560 bytes as four 640-byte streams. Neither unit waits for the other, so
//! the block costs what its slower half costs. The five partial registers are
//! joined with [`super::constants::shift_key`] as in [`super::sse42`]. Inputs
//! that are not whole blocks finish with the [`super::sse42`] kernel.

use super::constants::{fold_keys, shift_key};
use super::sse42::{clmul, word};
use std::arch::x86_64::*;

const BLOCK: usize = 4096;
/// 256-bit registers folded on the vector units, 96 bytes per step.
const LANES: usize = 3;
const STEP: usize = 32 * LANES;
const STEPS: usize = 16;
/// The folded part: 1536 bytes, 37.5 % of a block; the `crc32` instruction,
/// at one 8-byte word a cycle, takes the other 2560 bytes in the same time as
/// the vector units fold theirs on Zen 3 (measured: 50/50 was vector-bound).
const FOLDED: usize = STEP * STEPS;
const STREAMS: usize = 4;
/// Words per stream per step.
const WORDS: usize = 5;
const STREAM: usize = 8 * WORDS * STEPS;

// Keys as constants: computed once by the compiler, not per call.
const FOLD_STEP: (u64, u64) = fold_keys(STEP as u32);
const FOLD_48: (u64, u64) = fold_keys(48);
const FOLD_16: (u64, u64) = fold_keys(16);
const SHIFT_FOLDED: u64 = shift_key(BLOCK - FOLDED);
const SHIFT_3: u64 = shift_key(3 * STREAM);
const SHIFT_2: u64 = shift_key(2 * STREAM);
const SHIFT_1: u64 = shift_key(STREAM);
const _: () = assert!(FOLDED + STREAMS * STREAM == BLOCK);

pub fn detected() -> bool {
    is_x86_feature_detected!("avx2")
        && is_x86_feature_detected!("vpclmulqdq")
        && super::sse42::detected()
}

/// # Safety
///
/// The CPU must have avx2,vpclmulqdq (the caller checked it); every pointer and length must cover the bytes read and written.
#[inline]
#[target_feature(enable = "avx2,vpclmulqdq")]
unsafe fn fold256(a: __m256i, b: __m256i, k: __m256i) -> __m256i {
    let lo = _mm256_clmulepi64_epi128(a, k, 0x00);
    let hi = _mm256_clmulepi64_epi128(a, k, 0x11);
    _mm256_xor_si256(_mm256_xor_si256(b, lo), hi)
}

/// # Safety
///
/// The CPU must have pclmulqdq (the caller checked it); every pointer and length must cover the bytes read and written.
#[inline]
#[target_feature(enable = "pclmulqdq")]
pub(super) unsafe fn fold128(a: __m128i, b: __m128i, k: (u64, u64)) -> __m128i {
    let k = _mm_set_epi64x(k.1 as i64, k.0 as i64);
    let lo = _mm_clmulepi64_si128(a, k, 0x00);
    let hi = _mm_clmulepi64_si128(a, k, 0x11);
    _mm_xor_si128(_mm_xor_si128(b, lo), hi)
}

/// # Safety
///
/// The CPU must have avx2 (the caller checked it); every pointer and length must cover the bytes read and written.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn load(p: *const u8, at: usize) -> __m256i {
    // SAFETY: the caller keeps this function's contract: the CPU has the features it is compiled for, and the pointers and lengths cover what it reads and writes.
    unsafe { _mm256_loadu_si256(p.add(at) as *const __m256i) }
}

/// The CRC register after one block at `p`, starting from register `r`;
/// `next`: another block follows (fetch it ahead).
///
/// # Safety
///
/// The CPU must have avx2,vpclmulqdq,pclmulqdq,sse4.2 (the caller checked it); every pointer and length must cover the bytes read and written.
#[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq,sse4.2")]
unsafe fn block(r: u32, p: *const u8, next: bool) -> u32 {
    // SAFETY: the caller keeps this function's contract: the CPU has the features it is compiled for, and the pointers and lengths cover what it reads and writes.
    unsafe {
        let (k0, k1) = FOLD_STEP;
        let k = _mm256_set_epi64x(k1 as i64, k0 as i64, k1 as i64, k0 as i64);
        let mut v = [load(p, 0), load(p, 32), load(p, 64)];
        v[0] = _mm256_xor_si256(v[0], _mm256_zextsi128_si256(_mm_cvtsi32_si128(r as i32)));
        let s = p.add(FOLDED);
        let mut c = [0u64; STREAMS];
        for it in 0..STEPS {
            // The five parts walk a block at once, which the hardware prefetchers
            // do not follow: fetch the next block's lines (4 per step, 64 in all)
            // ahead (not past the input: a lone block, as after a read, is in
            // cache already and the lines after it are someone else's).
            if next {
                for l in 0..4 {
                    let ahead = p.add(BLOCK + 64 * (4 * it + l));
                    _mm_prefetch::<_MM_HINT_T0>(ahead as *const i8);
                }
            }
            if it > 0 {
                for (i, l) in v.iter_mut().enumerate() {
                    *l = fold256(*l, load(p, STEP * it + 32 * i), k);
                }
            }
            for w in 0..WORDS {
                for (j, cj) in c.iter_mut().enumerate() {
                    *cj = _mm_crc32_u64(*cj, word(s, STREAM * j + 8 * (WORDS * it + w)));
                }
            }
        }
        // Six 128-bit lanes (in message order) into one.
        let x = [
            _mm256_castsi256_si128(v[0]),
            _mm256_extracti128_si256(v[0], 1),
            _mm256_castsi256_si128(v[1]),
            _mm256_extracti128_si256(v[1], 1),
            _mm256_castsi256_si128(v[2]),
            _mm256_extracti128_si256(v[2], 1),
        ];
        let y = [
            fold128(x[0], x[3], FOLD_48),
            fold128(x[1], x[4], FOLD_48),
            fold128(x[2], x[5], FOLD_48),
        ];
        let w = fold128(fold128(y[0], y[1], FOLD_16), y[2], FOLD_16);
        // The folded lane has the CRC of the whole folded part: run it through crc32.
        let lo = _mm_cvtsi128_si64(w) as u64;
        let hi = _mm_extract_epi64(w, 1) as u64;
        let first = _mm_crc32_u64(_mm_crc32_u64(0, lo), hi);
        let joined = clmul(first, SHIFT_FOLDED)
            ^ clmul(c[0], SHIFT_3)
            ^ clmul(c[1], SHIFT_2)
            ^ clmul(c[2], SHIFT_1);
        (_mm_crc32_u64(0, joined) ^ c[3]) as u32
    }
}

/// CRC-32C of the bytes behind `crc` followed by `data`.
///
/// # Safety
/// The CPU must have AVX2, VPCLMULQDQ, PCLMULQDQ and SSE 4.2 ([`detected`]).
#[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq,sse4.2")]
pub unsafe fn append(crc: u32, data: &[u8]) -> u32 {
    // SAFETY: the caller keeps this function's contract: the CPU has the features it is compiled for, and the pointers and lengths cover what it reads and writes.
    unsafe {
        let mut r = !crc;
        let n = data.len() / BLOCK;
        for i in 0..n {
            r = block(r, data.as_ptr().add(i * BLOCK), i + 1 < n);
        }
        super::sse42::append(!r, &data[n * BLOCK..])
    }
}
