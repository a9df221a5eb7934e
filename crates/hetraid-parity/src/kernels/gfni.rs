//! AVX-512 (F + BW) with GFNI: 512 bytes per iteration for XOR (eight zmm
//! accumulators, the source pointers in registers for the common widths),
//! and GF(2^8) multiplication by a constant as one `vgf2p8affineqb` with the
//! constant's bit matrix (`gf::affine_matrix`): Q's Horner step (multiply by
//! 2, then add the next block) and `mul_acc` cost one instruction per 64 bytes
//! instead of AVX2's five-instruction nibble shuffle. `gf2p8mulb` cannot be
//! used: it is fixed to AES's polynomial 0x11b, RAID-6 uses 0x11d.
//!
//! Stores: plain while the sources are in cache, non-temporal when they
//! come from memory, as the probe of [`super::residency`] finds (the AVX2
//! set's rule). On the Intel Xeon this set was first measured on, always
//! plain was as good (non-temporal stores cost 10 % in cache and gained
//! nothing from memory); on an AMD EPYC (Zen 4) from memory, plain stores
//! left P+Q 4+2 at 0.83-0.90x ISA-L and 4+1 XOR at 0.91-0.94x rusty_erasure,
//! non-temporal ones 1.18-1.21x and 1.03-1.05x (in-process, interleaved).
//! The streaming XOR walks one line of each source per step (see
//! `xor_width`).

use super::{portable, residency, Kernels};
use crate::gf;
use std::arch::x86_64::*;

pub struct Gfni;

impl Gfni {
    pub fn detected() -> bool {
        is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("gfni")
    }
}

/// Bytes per iteration of the wide loops (eight zmm registers).
const WIDE: usize = 512;
/// Bytes per iteration of the narrow loops (one zmm register).
const LANE: usize = 64;
/// zmm registers each of P and Q per iteration of the P+Q loop.
const PQ_LANES: usize = 8;
/// Accumulators of the fixed XOR loop for rows of more than 8 sources.
const XOR_WIDE_ROW_LANES: usize = 4;

impl Kernels for Gfni {
    fn name(&self) -> &'static str {
        "avx512-gfni"
    }

    fn xor_gen(&self, dst: &mut [u8], srcs: &[&[u8]]) {
        let done = dst.len() / LANE * LANE;
        // SAFETY: this set is only handed out when AVX-512F/BW and GFNI are
        // detected; every slice is at least `done` long (lengths checked in
        // lib.rs). Common widths get the source pointers in registers.
        unsafe {
            let aligned = (dst.as_ptr() as usize).is_multiple_of(LANE);
            // Probed however wide the row (not streamed unasked above the
            // cache's ways): in cache the wide loop with plain stores wins
            // (8+1 and 16+1 at 64 KiB: 1.13x and 1.34x ISA-L), and the
            // streaming loop is the narrow one.
            let streams = (srcs.len() + 1).min(residency::WAYS);
            residency::run_aligned(
                residency::Kind::Xor,
                streams,
                aligned,
                done,
                |from, to, nt| match srcs.len() {
                    1 => xor_fixed::<1>(dst, srcs, from, to, nt),
                    2 => xor_fixed::<2>(dst, srcs, from, to, nt),
                    3 => xor_fixed::<3>(dst, srcs, from, to, nt),
                    4 => xor_fixed::<4>(dst, srcs, from, to, nt),
                    5 => xor_fixed::<5>(dst, srcs, from, to, nt),
                    6 => xor_fixed::<6>(dst, srcs, from, to, nt),
                    7 => xor_fixed::<7>(dst, srcs, from, to, nt),
                    8 => xor_fixed::<8>(dst, srcs, from, to, nt),
                    9 => xor_fixed::<9>(dst, srcs, from, to, nt),
                    10 => xor_fixed::<10>(dst, srcs, from, to, nt),
                    11 => xor_fixed::<11>(dst, srcs, from, to, nt),
                    12 => xor_fixed::<12>(dst, srcs, from, to, nt),
                    13 => xor_fixed::<13>(dst, srcs, from, to, nt),
                    14 => xor_fixed::<14>(dst, srcs, from, to, nt),
                    15 => xor_fixed::<15>(dst, srcs, from, to, nt),
                    16 => xor_fixed::<16>(dst, srcs, from, to, nt),
                    _ => xor_any(dst, srcs, from, to, false),
                },
            );
        }
        portable::xor_range(dst, srcs, done, false);
    }

    fn xor_acc(&self, dst: &mut [u8], srcs: &[&[u8]]) {
        let done = dst.len() / LANE * LANE;
        // SAFETY: as in `xor_gen`.
        unsafe { xor_any(dst, srcs, 0, done, true) };
        portable::xor_range(dst, srcs, done, true);
    }

    fn pq_gen(&self, data: &[&[u8]], p: &mut [u8], q: &mut [u8]) {
        let done = p.len() / LANE * LANE;
        // SAFETY: as in `xor_gen`.
        unsafe {
            let aligned = [p.as_ptr(), q.as_ptr()]
                .iter()
                .all(|o| (*o as usize).is_multiple_of(LANE));
            residency::run_aligned(
                residency::Kind::Pq,
                data.len() + 2,
                aligned,
                done,
                |from, to, nt| match nt {
                    true => pq_blocks::<true>(data, p, q, from, to),
                    false => pq_blocks::<false>(data, p, q, from, to),
                },
            );
        }
        portable::pq_range(data, p, q, done);
    }

    fn mul_acc(&self, c: u8, src: &[u8], dst: &mut [u8]) {
        let done = dst.len() / LANE * LANE;
        // SAFETY: as in `xor_gen`.
        unsafe { mul_acc_blocks(c, src, dst, done) };
        portable::Portable.mul_acc(c, &src[done..], &mut dst[done..]);
    }

    fn mul_sum2(
        &self,
        srcs: &[&[u8]],
        coefs: &[(u8, u8)],
        out0: &mut [u8],
        out1: &mut [u8],
        acc: bool,
    ) {
        let done = out0.len() / LANE * LANE;
        // SAFETY: as in `xor_gen`.
        unsafe {
            // Outputs written once (no accumulation, one batch of sources)
            // may stream past the cache.
            let aligned = !acc
                && srcs.len() <= MUL_SUM2_BATCH
                && [out0.as_ptr(), out1.as_ptr()]
                    .iter()
                    .all(|o| (*o as usize).is_multiple_of(LANE));
            residency::run_aligned(
                residency::Kind::Solve,
                srcs.len() + 2,
                aligned,
                done,
                |from, to, nt| match nt {
                    true => mul_sum2_blocks::<true>(srcs, coefs, out0, out1, from, to, acc),
                    false => mul_sum2_blocks::<false>(srcs, coefs, out0, out1, from, to, acc),
                },
            );
        }
        // The tail, byte-wise.
        for j in done..out0.len() {
            let (mut a, mut b) = if acc { (out0[j], out1[j]) } else { (0, 0) };
            for (s, &(ca, cb)) in srcs.iter().zip(coefs) {
                a ^= gf::mul(ca, s[j]);
                b ^= gf::mul(cb, s[j]);
            }
            out0[j] = a;
            out1[j] = b;
        }
    }

    fn pq_update(&self, c: u8, old: &[u8], new: &[u8], p: &mut [u8], q: &mut [u8]) {
        let done = p.len() / LANE * LANE;
        // SAFETY: as in `xor_gen`.
        unsafe { pq_update_blocks(c, old, new, p, q, done) };
        portable::Portable.pq_update(
            c,
            &old[done..],
            &new[done..],
            &mut p[done..],
            &mut q[done..],
        );
    }
}

/// # Safety
///
/// The CPU must have avx512f (the caller checked it); every pointer and length must cover the bytes read and written.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn load(p: *const u8) -> __m512i {
    // SAFETY: the caller keeps this function's contract: the CPU has the features it is compiled for, and the pointers and lengths cover what it reads and writes.
    unsafe { _mm512_loadu_si512(p as *const __m512i) }
}

/// # Safety
///
/// The CPU must have avx512f (the caller checked it); every pointer and length must cover the bytes read and written.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn store(p: *mut u8, v: __m512i) {
    // SAFETY: the caller keeps this function's contract: the CPU has the features it is compiled for, and the pointers and lengths cover what it reads and writes.
    unsafe {
        _mm512_storeu_si512(p as *mut __m512i, v);
    }
}

/// A plain store, or with `NT` a non-temporal one (`p` 64-byte aligned).
///
/// # Safety
///
/// The CPU must have avx512f (the caller checked it); `p` must address 64
/// writable bytes, 64-byte aligned when `NT`.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn put<const NT: bool>(p: *mut u8, v: __m512i) {
    // SAFETY: the caller keeps this function's contract.
    unsafe {
        if NT {
            _mm512_stream_si512(p as *mut __m512i, v);
        } else {
            _mm512_storeu_si512(p as *mut __m512i, v);
        }
    }
}

/// Ends a run of non-temporal stores: they are weakly ordered, and the
/// caller's next use of the output (another thread's read after a lock
/// hand-off) must see them.
#[inline]
fn fence_streams(nt: bool) {
    if nt {
        // SAFETY: SFENCE exists on every x86_64 CPU.
        unsafe { _mm_sfence() };
    }
}

/// `dst = XOR of K sources` over bytes `from..to` (multiples of 64), with
/// non-temporal stores when `nt` (`dst` 64-byte aligned): 512 bytes per
/// iteration while they last, then 64.
///
/// # Safety
///
/// The CPU must have avx512f (the caller checked it); every pointer and length must cover the bytes read and written.
#[target_feature(enable = "avx512f")]
unsafe fn xor_fixed<const K: usize>(
    dst: &mut [u8],
    srcs: &[&[u8]],
    from: usize,
    to: usize,
    nt: bool,
) {
    // SAFETY: the caller keeps this function's contract: the CPU has the features it is compiled for, and the pointers and lengths cover what it reads and writes.
    unsafe {
        if nt {
            xor_width::<K, true>(dst, srcs, from, to);
        } else {
            xor_width::<K, false>(dst, srcs, from, to);
        }
        fence_streams(nt);
    }
}

/// [`xor_fixed`] with its accumulator count chosen by the width.
///
/// # Safety
///
/// As [`xor_fixed`].
#[target_feature(enable = "avx512f")]
unsafe fn xor_width<const K: usize, const NT: bool>(
    dst: &mut [u8],
    srcs: &[&[u8]],
    from: usize,
    to: usize,
) {
    // SAFETY: the caller keeps this function's contract.
    unsafe {
        // From memory (streaming): one line of each source per step. The
        // sources' lines are then asked for side by side, as the hardware
        // prefetchers follow them best (4+1 at 64 KiB from 512 MiB: 1.11x
        // rusty_erasure's one-line AVX2 loop, against 1.02x with 8 lines of
        // a source per step; 8+1 1.01-1.07x against 0.87-0.97x).
        if NT {
            return xor_lanes::<K, 1, NT>(dst, srcs, from, to);
        }
        // Wide rows keep fewer accumulators: the pointers need the registers.
        if K > 8 {
            return xor_lanes::<K, XOR_WIDE_ROW_LANES, NT>(dst, srcs, from, to);
        }
        // 5-8 sources: sixteen accumulators (1 KiB per step) measured ahead of
        // eight (8+1 at 64 KiB in cache: 210 against 190 GB/s, ISA-L 205); up to
        // four, eight (sixteen fell to 143 against 162 GB/s for 4+1).
        if K > 4 {
            return xor_lanes::<K, 16, NT>(dst, srcs, from, to);
        }
        xor_lanes::<K, 8, NT>(dst, srcs, from, to)
    }
}

/// [`xor_fixed`] with `L` zmm accumulators.
///
/// # Safety
///
/// The CPU must have avx512f (the caller checked it); every pointer and length must cover the bytes read and written.
#[target_feature(enable = "avx512f")]
unsafe fn xor_lanes<const K: usize, const L: usize, const NT: bool>(
    dst: &mut [u8],
    srcs: &[&[u8]],
    from: usize,
    len: usize,
) {
    // SAFETY: the caller keeps this function's contract: the CPU has the features it is compiled for, and the pointers and lengths cover what it reads and writes.
    unsafe {
        let mut s = [std::ptr::null::<u8>(); K];
        for (slot, src) in s.iter_mut().zip(srcs) {
            *slot = src.as_ptr();
        }
        let d = dst.as_mut_ptr();
        let mut i = from;
        while i + L * LANE <= len {
            let mut v = [_mm512_setzero_si512(); L];
            for (j, lane) in v.iter_mut().enumerate() {
                *lane = load(s[0].add(i + j * LANE));
            }
            for src in s.iter().skip(1) {
                for (j, lane) in v.iter_mut().enumerate() {
                    *lane = _mm512_xor_si512(*lane, load(src.add(i + j * LANE)));
                }
            }
            for (j, lane) in v.iter().enumerate() {
                put::<NT>(d.add(i + j * LANE), *lane);
            }
            i += L * LANE;
        }
        while i < len {
            let mut v = load(s[0].add(i));
            for src in s.iter().skip(1) {
                v = _mm512_xor_si512(v, load(src.add(i)));
            }
            put::<NT>(d.add(i), v);
            i += LANE;
        }
    }
}

/// Any number of sources (and the accumulate form): eight accumulators per
/// 512 bytes, sources walked from the slice.
///
/// # Safety
///
/// The CPU must have avx512f (the caller checked it); every pointer and length must cover the bytes read and written.
#[target_feature(enable = "avx512f")]
unsafe fn xor_any(dst: &mut [u8], srcs: &[&[u8]], from: usize, len: usize, acc: bool) {
    // SAFETY: the caller keeps this function's contract: the CPU has the features it is compiled for, and the pointers and lengths cover what it reads and writes.
    unsafe {
        let d = dst.as_mut_ptr();
        let first = if acc { 0 } else { 1 };
        let base = |i: usize| -> *const u8 {
            if acc {
                d.add(i) as *const u8
            } else {
                srcs[0].as_ptr().add(i)
            }
        };
        let mut i = from;
        while i + WIDE <= len {
            let b = base(i);
            let mut v = [_mm512_setzero_si512(); 8];
            for (j, lane) in v.iter_mut().enumerate() {
                *lane = load(b.add(j * LANE));
            }
            for src in &srcs[first..] {
                let p = src.as_ptr().add(i);
                for (j, lane) in v.iter_mut().enumerate() {
                    *lane = _mm512_xor_si512(*lane, load(p.add(j * LANE)));
                }
            }
            for (j, lane) in v.iter().enumerate() {
                store(d.add(i + j * LANE), *lane);
            }
            i += WIDE;
        }
        while i < len {
            let mut v = load(base(i));
            for src in &srcs[first..] {
                v = _mm512_xor_si512(v, load(src.as_ptr().add(i)));
            }
            store(d.add(i), v);
            i += LANE;
        }
    }
}

/// P and Q by Horner's rule from the highest block down: P ^= D, Q = 2Q ^ D,
/// the doubling one affine instruction. Four zmm of P and four of Q per
/// 256 bytes, then one of each per 64.
///
/// # Safety
///
/// The CPU must have avx512f,avx512bw,gfni (the caller checked it); every pointer and length must cover the bytes read and written.
#[target_feature(enable = "avx512f,avx512bw,gfni")]
unsafe fn pq_blocks<const NT: bool>(
    data: &[&[u8]],
    p: &mut [u8],
    q: &mut [u8],
    from: usize,
    len: usize,
) {
    // SAFETY: the caller keeps this function's contract: the CPU has the features it is compiled for, and the pointers and lengths cover what it reads and writes.
    unsafe {
        let two = _mm512_set1_epi64(gf::affine_matrix(2) as i64);
        let top = data.len() - 1;
        let (po, qo) = (p.as_mut_ptr(), q.as_mut_ptr());
        let mut i = from;
        while i + PQ_LANES * LANE <= len {
            let t = data[top].as_ptr().add(i);
            let mut pv = [_mm512_setzero_si512(); PQ_LANES];
            for (j, v) in pv.iter_mut().enumerate() {
                *v = load(t.add(j * LANE));
            }
            let mut qv = pv;
            for z in (0..top).rev() {
                let s = data[z].as_ptr().add(i);
                for j in 0..PQ_LANES {
                    let d = load(s.add(j * LANE));
                    pv[j] = _mm512_xor_si512(pv[j], d);
                    qv[j] = _mm512_xor_si512(_mm512_gf2p8affine_epi64_epi8::<0>(qv[j], two), d);
                }
            }
            for j in 0..PQ_LANES {
                put::<NT>(po.add(i + j * LANE), pv[j]);
                put::<NT>(qo.add(i + j * LANE), qv[j]);
            }
            i += PQ_LANES * LANE;
        }
        while i < len {
            let mut pv = load(data[top].as_ptr().add(i));
            let mut qv = pv;
            for z in (0..top).rev() {
                let d = load(data[z].as_ptr().add(i));
                pv = _mm512_xor_si512(pv, d);
                qv = _mm512_xor_si512(_mm512_gf2p8affine_epi64_epi8::<0>(qv, two), d);
            }
            put::<NT>(po.add(i), pv);
            put::<NT>(qo.add(i), qv);
            i += LANE;
        }
        fence_streams(NT);
    }
}

/// `dst ^= c * src`: one affine instruction per 64 bytes, four at a time.
///
/// # Safety
///
/// The CPU must have avx512f,avx512bw,gfni (the caller checked it); every pointer and length must cover the bytes read and written.
#[target_feature(enable = "avx512f,avx512bw,gfni")]
unsafe fn mul_acc_blocks(c: u8, src: &[u8], dst: &mut [u8], len: usize) {
    // SAFETY: the caller keeps this function's contract: the CPU has the features it is compiled for, and the pointers and lengths cover what it reads and writes.
    unsafe {
        let m = _mm512_set1_epi64(gf::affine_matrix(c) as i64);
        let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
        let mut i = 0;
        while i + 4 * LANE <= len {
            for j in 0..4 {
                let o = i + j * LANE;
                let x = _mm512_gf2p8affine_epi64_epi8::<0>(load(s.add(o)), m);
                store(d.add(o), _mm512_xor_si512(load(d.add(o)), x));
            }
            i += 4 * LANE;
        }
        while i < len {
            let x = _mm512_gf2p8affine_epi64_epi8::<0>(load(s.add(i)), m);
            store(d.add(i), _mm512_xor_si512(load(d.add(i)), x));
            i += LANE;
        }
    }
}

/// A read-modify-write of one data block in one pass: delta = old ^ new,
/// P ^= delta, Q ^= c * delta.
///
/// # Safety
///
/// The CPU must have avx512f,avx512bw,gfni (the caller checked it); every pointer and length must cover the bytes read and written.
#[target_feature(enable = "avx512f,avx512bw,gfni")]
unsafe fn pq_update_blocks(c: u8, old: &[u8], new: &[u8], p: &mut [u8], q: &mut [u8], len: usize) {
    // SAFETY: the caller keeps this function's contract: the CPU has the features it is compiled for, and the pointers and lengths cover what it reads and writes.
    unsafe {
        let m = _mm512_set1_epi64(gf::affine_matrix(c) as i64);
        let (o, n, pp, qp) = (old.as_ptr(), new.as_ptr(), p.as_mut_ptr(), q.as_mut_ptr());
        let mut i = 0;
        while i < len {
            let delta = _mm512_xor_si512(load(o.add(i)), load(n.add(i)));
            store(pp.add(i), _mm512_xor_si512(load(pp.add(i)), delta));
            let x = _mm512_gf2p8affine_epi64_epi8::<0>(delta, m);
            store(qp.add(i), _mm512_xor_si512(load(qp.add(i)), x));
            i += LANE;
        }
    }
}

/// Two GF(2^8) linear combinations of the sources: 256 bytes of each output
/// in eight accumulators per pass over the sources, the coefficients' bit
/// matrices built once per call (16 sources per batch: a longer row is
/// folded in batches).
///
/// # Safety
///
/// The CPU must have avx512f,avx512bw,gfni (the caller checked it); every pointer and length must cover the bytes read and written.
#[target_feature(enable = "avx512f,avx512bw,gfni")]
unsafe fn mul_sum2_blocks<const NT: bool>(
    srcs: &[&[u8]],
    coefs: &[(u8, u8)],
    out0: &mut [u8],
    out1: &mut [u8],
    from: usize,
    len: usize,
    acc: bool,
) {
    // SAFETY: the caller keeps this function's contract: the CPU has the features it is compiled for, and the pointers and lengths cover what it reads and writes.
    unsafe {
        const BATCH: usize = MUL_SUM2_BATCH;
        let (o0, o1) = (out0.as_mut_ptr(), out1.as_mut_ptr());
        let mut first_batch = !acc;
        for (sb, cb) in srcs.chunks(BATCH).zip(coefs.chunks(BATCH)) {
            let mut ma = [_mm512_setzero_si512(); BATCH];
            let mut mb = [_mm512_setzero_si512(); BATCH];
            for (j, &(a, b)) in cb.iter().enumerate() {
                ma[j] = _mm512_set1_epi64(gf::affine_matrix(a) as i64);
                mb[j] = _mm512_set1_epi64(gf::affine_matrix(b) as i64);
            }
            let mut i = from;
            while i < len {
                let step = if i + 4 * LANE <= len { 4 } else { 1 };
                let mut va = [_mm512_setzero_si512(); 4];
                let mut vb = [_mm512_setzero_si512(); 4];
                if !first_batch {
                    for j in 0..step {
                        va[j] = load(o0.add(i + j * LANE));
                        vb[j] = load(o1.add(i + j * LANE));
                    }
                }
                for (z, s) in sb.iter().enumerate() {
                    let p = s.as_ptr().add(i);
                    for j in 0..step {
                        let x = load(p.add(j * LANE));
                        va[j] =
                            _mm512_xor_si512(va[j], _mm512_gf2p8affine_epi64_epi8::<0>(x, ma[z]));
                        vb[j] =
                            _mm512_xor_si512(vb[j], _mm512_gf2p8affine_epi64_epi8::<0>(x, mb[z]));
                    }
                }
                for j in 0..step {
                    put::<NT>(o0.add(i + j * LANE), va[j]);
                    put::<NT>(o1.add(i + j * LANE), vb[j]);
                }
                i += step * LANE;
            }
            first_batch = false;
        }
        fence_streams(NT);
    }
}

/// Sources per pass of [`mul_sum2_blocks`] (a coefficient pair each in
/// registers); more sources accumulate into the outputs pass by pass.
const MUL_SUM2_BATCH: usize = 16;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference;

    /// Both store kinds write the same bytes, over a range that starts past
    /// the probe's bytes as the calls do (the probe picks between them by
    /// timing, so the property tests, whose blocks are in cache, would
    /// otherwise only ever see the plain ones).
    #[test]
    fn streaming_and_plain_stores_agree() {
        if !Gfni::detected() {
            return;
        }
        let len = 64 * 1024;
        let srcs: Vec<Vec<u8>> = (0..9).map(|i| reference::pattern(len, i)).collect();
        let s: Vec<&[u8]> = srcs.iter().map(|v| v.as_slice()).collect();
        // 64-byte aligned outputs (a Vec of 64-byte elements).
        #[derive(Clone, Copy)]
        #[repr(align(64))]
        struct Zmm(#[allow(dead_code)] [u8; 64]);
        let aligned = || vec![Zmm([0; 64]); len / 64];
        let bytes = |v: &mut Vec<Zmm>| {
            // SAFETY: the Vec holds len bytes of plain arrays.
            unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr() as *mut u8, len) }
        };
        let from = residency::PROBE;
        for width in [4usize, 8] {
            let s = &s[..width];
            let (mut wx, mut wp, mut wq) = (vec![0u8; len], vec![0u8; len], vec![0u8; len]);
            reference::xor_gen(&mut wx, s);
            reference::pq_gen(s, &mut wp, &mut wq);
            for nt in [false, true] {
                let (mut x, mut p, mut q) = (aligned(), aligned(), aligned());
                let (x, p, q) = (bytes(&mut x), bytes(&mut p), bytes(&mut q));
                // SAFETY: the CPU has the features (checked above); outputs
                // of `len` bytes, 64-byte aligned.
                unsafe {
                    match width {
                        4 => xor_fixed::<4>(x, s, 0, from, false),
                        _ => xor_fixed::<8>(x, s, 0, from, false),
                    }
                    match width {
                        4 => xor_fixed::<4>(x, s, from, len, nt),
                        _ => xor_fixed::<8>(x, s, from, len, nt),
                    }
                    pq_blocks::<false>(s, p, q, 0, from);
                    match nt {
                        true => pq_blocks::<true>(s, p, q, from, len),
                        false => pq_blocks::<false>(s, p, q, from, len),
                    }
                }
                assert!(x == &wx[..], "xor {width}+1, nt {nt}");
                assert!(p == &wp[..], "P {width}+2, nt {nt}");
                assert!(q == &wq[..], "Q {width}+2, nt {nt}");
                // Sums of two products: P = sum of 1 * D, Q = sum of g^i * D.
                let coefs: Vec<(u8, u8)> = (0..width).map(|i| (1, gf::pow2(i))).collect();
                let (mut a, mut b) = (aligned(), aligned());
                let (a, b) = (bytes(&mut a), bytes(&mut b));
                // SAFETY: as above.
                unsafe {
                    mul_sum2_blocks::<false>(s, &coefs, a, b, 0, from, false);
                    match nt {
                        true => mul_sum2_blocks::<true>(s, &coefs, a, b, from, len, false),
                        false => mul_sum2_blocks::<false>(s, &coefs, a, b, from, len, false),
                    }
                }
                assert!(a == &wp[..], "sum of D {width}, nt {nt}");
                assert!(b == &wq[..], "sum of g^i D {width}, nt {nt}");
            }
        }
    }
}
