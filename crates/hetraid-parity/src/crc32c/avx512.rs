//! CRC-32C by carry-less folding in 512-bit registers (x86_64 with AVX-512F
//! and VPCLMULQDQ, e.g. Intel Ice Lake and later, AMD Zen 4).
//!
//! Four registers (sixteen 128-bit lanes) take 256 bytes a step, each lane
//! folded forward 256 bytes onto the next step's data; at the end the four
//! registers fold into one (64 bytes apart), its four lanes into one (48, 32
//! and 16 bytes apart), and the `crc32` instruction turns the last lane into
//! the register, as in [`super::vpclmul`]. No integer streams beside the
//! folds: where 512-bit carry-less multiplies issue every cycle the vector
//! units alone outrun the hybrid split, which was tuned for Zen 3's 256-bit
//! ones (35 GB/s there against ISA-L's 77 GB/s on 4 KiB blocks measured on an
//! AVX-512 Xeon). Whatever is left past the last whole 256 bytes goes to
//! [`super::sse42`].

use super::constants::fold_keys;
use super::vpclmul::fold128;
use std::arch::x86_64::*;

/// Bytes per step: four 512-bit registers.
const STEP: usize = 256;
const FOLD_STEP: (u64, u64) = fold_keys(STEP as u32);
const FOLD_64: (u64, u64) = fold_keys(64);
const FOLD_48: (u64, u64) = fold_keys(48);
const FOLD_32: (u64, u64) = fold_keys(32);
const FOLD_16: (u64, u64) = fold_keys(16);

pub fn detected() -> bool {
    is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("vpclmulqdq")
        && super::sse42::detected()
}

/// # Safety
///
/// The CPU must have avx512f (the caller checked it).
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn keys(k: (u64, u64)) -> __m512i {
    let (lo, hi) = (k.0 as i64, k.1 as i64);
    _mm512_set_epi64(hi, lo, hi, lo, hi, lo, hi, lo)
}

/// # Safety
///
/// The CPU must have avx512f; `p + at` must address 64 readable bytes.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn load(p: *const u8, at: usize) -> __m512i {
    // SAFETY: the caller keeps this function's contract.
    unsafe { _mm512_loadu_si512(p.add(at) as *const __m512i) }
}

/// Each lane of `a` folded forward by the keys `k`, XORed into `b`.
///
/// # Safety
///
/// The CPU must have avx512f and vpclmulqdq (the caller checked it).
#[inline]
#[target_feature(enable = "avx512f,vpclmulqdq")]
unsafe fn fold512(a: __m512i, b: __m512i, k: __m512i) -> __m512i {
    let lo = _mm512_clmulepi64_epi128(a, k, 0x00);
    let hi = _mm512_clmulepi64_epi128(a, k, 0x11);
    // b ^ lo ^ hi in one instruction.
    _mm512_ternarylogic_epi64(b, lo, hi, 0x96)
}

/// CRC-32C of the bytes behind `crc` followed by `data`.
///
/// # Safety
/// The CPU must have AVX-512F, VPCLMULQDQ, PCLMULQDQ and SSE 4.2 ([`detected`]).
#[target_feature(enable = "avx512f,vpclmulqdq,pclmulqdq,sse4.2")]
pub unsafe fn append(crc: u32, data: &[u8]) -> u32 {
    // SAFETY: the caller keeps this function's contract; every load below
    // is inside `data` (steps * STEP <= data.len()).
    unsafe {
        let steps = data.len() / STEP;
        if steps == 0 {
            return super::sse42::append(crc, data);
        }
        let p = data.as_ptr();
        let mut v = [load(p, 0), load(p, 64), load(p, 128), load(p, 192)];
        // The register (`!crc`) enters as the first four bytes' XOR.
        let r = _mm512_zextsi128_si512(_mm_cvtsi32_si128(!crc as i32));
        v[0] = _mm512_xor_si512(v[0], r);
        let k = keys(FOLD_STEP);
        for s in 1..steps {
            let at = s * STEP;
            for (i, l) in v.iter_mut().enumerate() {
                *l = fold512(*l, load(p, at + 64 * i), k);
            }
        }
        // Four registers into one, then its four lanes into one.
        let k64 = keys(FOLD_64);
        let x = fold512(fold512(fold512(v[0], v[1], k64), v[2], k64), v[3], k64);
        let lane0 = _mm512_extracti32x4_epi32::<0>(x);
        let lane1 = _mm512_extracti32x4_epi32::<1>(x);
        let lane2 = _mm512_extracti32x4_epi32::<2>(x);
        let lane3 = _mm512_extracti32x4_epi32::<3>(x);
        let w = fold128(lane2, lane3, FOLD_16);
        let w = fold128(lane1, w, FOLD_32);
        let w = fold128(lane0, w, FOLD_48);
        let lo = _mm_cvtsi128_si64(w) as u64;
        let hi = _mm_extract_epi64(w, 1) as u64;
        let reg = _mm_crc32_u64(_mm_crc32_u64(0, lo), hi) as u32;
        super::sse42::append(!reg, &data[steps * STEP..])
    }
}
