//! AVX-512 (F + BW) with GFNI: 512 bytes per iteration for XOR (eight zmm
//! accumulators, the source pointers in registers for the common widths),
//! and GF(2^8) multiplication by a constant as one `vgf2p8affineqb` with the
//! constant's bit matrix (`gf::affine_matrix`): Q's Horner step (multiply by
//! 2, then add the next block) and `mul_acc` cost one instruction per 64 bytes
//! instead of AVX2's five-instruction nibble shuffle. `gf2p8mulb` cannot be
//! used: it is fixed to AES's polynomial 0x11b, RAID-6 uses 0x11d.
//!
//! Stores are plain, as ISA-L's AVX-512 kernels do (`NO_NT_LDST`): measured
//! here, non-temporal stores of 64 KiB parity blocks cost 10 % while the
//! stripe is in cache and gained nothing streaming from memory (xor 4+1:
//! 130 against 143 GB/s in cache, 28.6 against 30.5 GB/s from memory).
//! (The AVX2 set keeps its non-temporal stores.)

use super::{portable, Kernels};
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
            match srcs.len() {
                1 => xor_fixed::<1>(dst, srcs, done),
                2 => xor_fixed::<2>(dst, srcs, done),
                3 => xor_fixed::<3>(dst, srcs, done),
                4 => xor_fixed::<4>(dst, srcs, done),
                5 => xor_fixed::<5>(dst, srcs, done),
                6 => xor_fixed::<6>(dst, srcs, done),
                7 => xor_fixed::<7>(dst, srcs, done),
                8 => xor_fixed::<8>(dst, srcs, done),
                9 => xor_fixed::<9>(dst, srcs, done),
                10 => xor_fixed::<10>(dst, srcs, done),
                11 => xor_fixed::<11>(dst, srcs, done),
                12 => xor_fixed::<12>(dst, srcs, done),
                13 => xor_fixed::<13>(dst, srcs, done),
                14 => xor_fixed::<14>(dst, srcs, done),
                15 => xor_fixed::<15>(dst, srcs, done),
                16 => xor_fixed::<16>(dst, srcs, done),
                _ => xor_any(dst, srcs, done, false),
            }
        }
        portable::xor_range(dst, srcs, done, false);
    }

    fn xor_acc(&self, dst: &mut [u8], srcs: &[&[u8]]) {
        let done = dst.len() / LANE * LANE;
        // SAFETY: as in `xor_gen`.
        unsafe { xor_any(dst, srcs, done, true) };
        portable::xor_range(dst, srcs, done, true);
    }

    fn pq_gen(&self, data: &[&[u8]], p: &mut [u8], q: &mut [u8]) {
        let done = p.len() / LANE * LANE;
        // SAFETY: as in `xor_gen`.
        unsafe { pq_blocks(data, p, q, done) };
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
        unsafe { mul_sum2_blocks(srcs, coefs, out0, out1, done, acc) };
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

/// `dst = XOR of K sources` over `len` bytes (a multiple of 64): 512 bytes
/// per iteration while they last, then 64.
///
/// # Safety
///
/// The CPU must have avx512f (the caller checked it); every pointer and length must cover the bytes read and written.
#[target_feature(enable = "avx512f")]
unsafe fn xor_fixed<const K: usize>(dst: &mut [u8], srcs: &[&[u8]], len: usize) {
    // SAFETY: the caller keeps this function's contract: the CPU has the features it is compiled for, and the pointers and lengths cover what it reads and writes.
    unsafe {
        // Wide rows keep fewer accumulators: the pointers need the registers.
        if K > 8 {
            return xor_lanes::<K, XOR_WIDE_ROW_LANES>(dst, srcs, len);
        }
        // 5-8 sources: sixteen accumulators (1 KiB per step) measured ahead of
        // eight (8+1 at 64 KiB in cache: 210 against 190 GB/s, ISA-L 205); up to
        // four, eight (sixteen fell to 143 against 162 GB/s for 4+1).
        if K > 4 {
            return xor_lanes::<K, 16>(dst, srcs, len);
        }
        xor_lanes::<K, 8>(dst, srcs, len)
    }
}

/// [`xor_fixed`] with `L` zmm accumulators.
///
/// # Safety
///
/// The CPU must have avx512f (the caller checked it); every pointer and length must cover the bytes read and written.
#[target_feature(enable = "avx512f")]
unsafe fn xor_lanes<const K: usize, const L: usize>(dst: &mut [u8], srcs: &[&[u8]], len: usize) {
    // SAFETY: the caller keeps this function's contract: the CPU has the features it is compiled for, and the pointers and lengths cover what it reads and writes.
    unsafe {
        let mut s = [std::ptr::null::<u8>(); K];
        for (slot, src) in s.iter_mut().zip(srcs) {
            *slot = src.as_ptr();
        }
        let d = dst.as_mut_ptr();
        let mut i = 0;
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
                store(d.add(i + j * LANE), *lane);
            }
            i += L * LANE;
        }
        while i < len {
            let mut v = load(s[0].add(i));
            for src in s.iter().skip(1) {
                v = _mm512_xor_si512(v, load(src.add(i)));
            }
            store(d.add(i), v);
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
unsafe fn xor_any(dst: &mut [u8], srcs: &[&[u8]], len: usize, acc: bool) {
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
        let mut i = 0;
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
unsafe fn pq_blocks(data: &[&[u8]], p: &mut [u8], q: &mut [u8], len: usize) {
    // SAFETY: the caller keeps this function's contract: the CPU has the features it is compiled for, and the pointers and lengths cover what it reads and writes.
    unsafe {
        let two = _mm512_set1_epi64(gf::affine_matrix(2) as i64);
        let top = data.len() - 1;
        let (po, qo) = (p.as_mut_ptr(), q.as_mut_ptr());
        let mut i = 0;
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
                store(po.add(i + j * LANE), pv[j]);
                store(qo.add(i + j * LANE), qv[j]);
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
            store(po.add(i), pv);
            store(qo.add(i), qv);
            i += LANE;
        }
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
unsafe fn mul_sum2_blocks(
    srcs: &[&[u8]],
    coefs: &[(u8, u8)],
    out0: &mut [u8],
    out1: &mut [u8],
    len: usize,
    acc: bool,
) {
    // SAFETY: the caller keeps this function's contract: the CPU has the features it is compiled for, and the pointers and lengths cover what it reads and writes.
    unsafe {
        const BATCH: usize = 16;
        let (o0, o1) = (out0.as_mut_ptr(), out1.as_mut_ptr());
        let mut first_batch = !acc;
        for (sb, cb) in srcs.chunks(BATCH).zip(coefs.chunks(BATCH)) {
            let mut ma = [_mm512_setzero_si512(); BATCH];
            let mut mb = [_mm512_setzero_si512(); BATCH];
            for (j, &(a, b)) in cb.iter().enumerate() {
                ma[j] = _mm512_set1_epi64(gf::affine_matrix(a) as i64);
                mb[j] = _mm512_set1_epi64(gf::affine_matrix(b) as i64);
            }
            let mut i = 0;
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
                    store(o0.add(i + j * LANE), va[j]);
                    store(o1.add(i + j * LANE), vb[j]);
                }
                i += step * LANE;
            }
            first_batch = false;
        }
    }
}
