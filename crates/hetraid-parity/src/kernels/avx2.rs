//! AVX2: 128 bytes per loop iteration (four 256-bit lanes) for XOR of up to
//! 8 sources and 256 for more, 128 for P+Q and recovery, split-nibble
//! shuffles for multiplication by a constant. Outputs of 16 KiB and more
//! take plain or non-temporal stores by where the sources were found
//! ([`super::residency`]).

use super::{
    portable::{self, Portable},
    residency, Kernels, Syndromes,
};
use crate::gf;
use std::arch::x86_64::*;

pub struct Avx2;

impl Avx2 {
    pub fn detected() -> bool {
        is_x86_feature_detected!("avx2")
    }
}

const BLOCK: usize = 128;
/// One ymm register.
const LANE: usize = 32;
/// Bytes per iteration of the XOR loop over any number of sources (eight
/// lanes).
const WIDE: usize = 8 * LANE;

impl Kernels for Avx2 {
    fn name(&self) -> &'static str {
        "avx2"
    }

    fn xor_gen(&self, dst: &mut [u8], srcs: &[&[u8]]) {
        if srcs.is_empty() {
            // The XOR of nothing (recovery hands zero-length rows over with
            // no sources; `xor_any` reads its first source's pointer).
            return dst.fill(0);
        }
        let done = dst.len() / LANE * LANE;
        let d = dst.as_mut_ptr();
        // SAFETY: AVX2 is present (this set is only handed out when detected) and all
        // slices are at least `done` bytes long (caller contract, checked in lib.rs).
        // Common source counts get the source pointers in a fixed array.
        unsafe {
            let run = |from, to, stream| match srcs.len() {
                1 => fixed::<1>(d, srcs, from, to, stream),
                2 => fixed::<2>(d, srcs, from, to, stream),
                3 => fixed::<3>(d, srcs, from, to, stream),
                4 => fixed::<4>(d, srcs, from, to, stream),
                5 => fixed::<5>(d, srcs, from, to, stream),
                6 => fixed::<6>(d, srcs, from, to, stream),
                7 => fixed::<7>(d, srcs, from, to, stream),
                8 => fixed::<8>(d, srcs, from, to, stream),
                9 => fixed::<9>(d, srcs, from, to, stream),
                10 => fixed::<10>(d, srcs, from, to, stream),
                11 => fixed::<11>(d, srcs, from, to, stream),
                12 => fixed::<12>(d, srcs, from, to, stream),
                13 => fixed::<13>(d, srcs, from, to, stream),
                14 => fixed::<14>(d, srcs, from, to, stream),
                15 => fixed::<15>(d, srcs, from, to, stream),
                16 => fixed::<16>(d, srcs, from, to, stream),
                _ => xor_any(d, srcs, from, to, false, stream),
            };
            residency::run(residency::Kind::Xor, srcs.len() + 1, d, done, run);
        }
        portable::xor_range(dst, srcs, done, false);
    }

    fn xor_acc(&self, dst: &mut [u8], srcs: &[&[u8]]) {
        let done = dst.len() / LANE * LANE;
        // SAFETY: as in `xor_gen`. Plain stores: the destination is read
        // anyway (and the probe's second pass would fold the sources twice).
        unsafe { xor_any(dst.as_mut_ptr(), srcs, 0, done, true, false) };
        portable::xor_range(dst, srcs, done, true);
    }

    fn pq_gen(&self, data: &[&[u8]], p: &mut [u8], q: &mut [u8]) {
        let done = p.len() / BLOCK * BLOCK;
        let (pp, qp) = (p.as_mut_ptr(), q.as_mut_ptr());
        // SAFETY: as in `xor_gen`; both outputs must be aligned to stream.
        unsafe {
            let aligned = if (qp as usize).is_multiple_of(32) {
                pp
            } else {
                qp
            };
            residency::run(
                residency::Kind::Pq,
                data.len() + 2,
                aligned,
                done,
                |from, to, stream| {
                    if stream {
                        pq_blocks::<true>(data, pp, qp, from, to)
                    } else {
                        pq_blocks::<false>(data, pp, qp, from, to)
                    }
                },
            );
        }
        portable::pq_range(data, p, q, done);
    }

    fn mul_acc(&self, c: u8, src: &[u8], dst: &mut [u8]) {
        let done = dst.len() / 32 * 32;
        // SAFETY: as in `xor_gen`.
        unsafe { mul_acc_blocks(c, src, dst, done) };
        Portable.mul_acc(c, &src[done..], &mut dst[done..]);
    }

    fn pq_update(&self, c: u8, old: &[u8], new: &[u8], p: &mut [u8], q: &mut [u8]) {
        let done = p.len() / 64 * 64;
        // SAFETY: as in `xor_gen`.
        unsafe { pq_update_blocks(c, old, new, p, q, done) };
        Portable.pq_update(
            c,
            &old[done..],
            &new[done..],
            &mut p[done..],
            &mut q[done..],
        );
    }

    fn solve2(&self, syn: Syndromes<'_>, out0: &mut [u8], out1: &mut [u8]) {
        let done = out0.len() / BLOCK * BLOCK;
        let (o0, o1) = (out0.as_mut_ptr(), out1.as_mut_ptr());
        // SAFETY: as in `xor_gen`; both outputs must be aligned to stream.
        unsafe {
            let aligned = if (o1 as usize).is_multiple_of(32) {
                o0
            } else {
                o1
            };
            let streams = syn.data.len() + 3;
            residency::run(
                residency::Kind::Solve,
                streams,
                aligned,
                done,
                |from, to, stream| {
                    if stream {
                        solve2_blocks::<true>(syn, o0, o1, from, to)
                    } else {
                        solve2_blocks::<false>(syn, o0, o1, from, to)
                    }
                },
            );
        }
        if done < out0.len() {
            let mut tail: [&[u8]; crate::MAX_BLOCKS] = [&[]; crate::MAX_BLOCKS];
            for (t, d) in tail.iter_mut().zip(syn.data) {
                *t = d.get(done..).unwrap_or(&[]);
            }
            let tail = Syndromes {
                data: &tail[..syn.data.len()],
                p: syn.p.map(|p| &p[done..]),
                q: &syn.q[done..],
                ..syn
            };
            super::solve2_by_sums(&Portable, tail, &mut out0[done..], &mut out1[done..]);
        }
    }
}

/// The nibble tables of multiplication by `c`, in both halves of a ymm.
///
/// # Safety
///
/// The CPU must have avx2 (the caller checked it); every pointer and length must cover the bytes read and written.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn mul_tables(c: u8) -> (__m256i, __m256i) {
    // SAFETY: the caller keeps this function's contract: the CPU has the features it is compiled for, and the pointers and lengths cover what it reads and writes.
    unsafe {
        let (lo, hi) = gf::nibble_tables(c);
        (
            _mm256_broadcastsi128_si256(_mm_loadu_si128(lo.as_ptr() as *const __m128i)),
            _mm256_broadcastsi128_si256(_mm_loadu_si128(hi.as_ptr() as *const __m128i)),
        )
    }
}

/// `c * x` with `c`'s nibble tables: two shuffles.
///
/// # Safety
///
/// The CPU must have avx2 (the caller checked it); every pointer and length must cover the bytes read and written.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn mul(x: __m256i, (lo_t, hi_t): (__m256i, __m256i)) -> __m256i {
    let nib = _mm256_set1_epi8(0x0f);
    let l = _mm256_and_si256(x, nib);
    let h = _mm256_and_si256(_mm256_srli_epi64(x, 4), nib);
    _mm256_xor_si256(_mm256_shuffle_epi8(lo_t, l), _mm256_shuffle_epi8(hi_t, h))
}

/// A read-modify-write of one data block in one pass, 64 bytes per step:
/// delta = old ^ new, P ^= delta, Q ^= c * delta (ISA-L reads and writes P
/// and Q once for the old contents and once for the new).
///
/// # Safety
///
/// The CPU must have avx2 (the caller checked it); every pointer and length must cover the bytes read and written.
#[target_feature(enable = "avx2")]
unsafe fn pq_update_blocks(c: u8, old: &[u8], new: &[u8], p: &mut [u8], q: &mut [u8], len: usize) {
    // SAFETY: the caller keeps this function's contract: the CPU has the features it is compiled for, and the pointers and lengths cover what it reads and writes.
    unsafe {
        let t = mul_tables(c);
        let (o, n) = (old.as_ptr(), new.as_ptr());
        let (pp, qp) = (p.as_mut_ptr(), q.as_mut_ptr());
        let mut i = 0;
        while i < len {
            for j in [i, i + 32] {
                let delta = _mm256_xor_si256(load(o.add(j)), load(n.add(j)));
                store(pp.add(j), _mm256_xor_si256(load(pp.add(j)), delta));
                store(qp.add(j), _mm256_xor_si256(load(qp.add(j)), mul(delta, t)));
            }
            i += 64;
        }
    }
}

/// [`Kernels::solve2`] in one pass, 128 bytes per step: the syndromes by
/// Horner's rule from the highest data block down (a lost block only
/// doubles S_Q), then two multiplications per byte for `out0` and one XOR
/// for `out1`. Against one multiply-accumulate per source and output (ISA-L's
/// `ec_encode_data`), a 4+2 row of two lost blocks multiplies 2 times per
/// byte instead of 8.
///
/// # Safety
///
/// The CPU must have avx2 (the caller checked it); every pointer and length must cover the bytes read and written.
#[target_feature(enable = "avx2")]
unsafe fn solve2_blocks<const STREAM: bool>(
    Syndromes { data, p, q, a, b }: Syndromes<'_>,
    o0: *mut u8,
    o1: *mut u8,
    from: usize,
    to: usize,
) {
    // SAFETY: the caller keeps this function's contract: the CPU has the features it is compiled for, and the pointers and lengths cover what it reads and writes.
    unsafe {
        let stream = STREAM;
        let poly = _mm256_set1_epi8(0x1d);
        let (ta, tb) = (mul_tables(a), mul_tables(b));
        let mut i = from;
        while i < to {
            let mut sp = [_mm256_setzero_si256(); 4];
            let mut sq = [_mm256_setzero_si256(); 4];
            for d in data.iter().rev() {
                if d.is_empty() {
                    for v in sq.iter_mut() {
                        *v = mul2(*v, poly);
                    }
                    continue;
                }
                let s = d.as_ptr().add(i);
                for j in 0..4 {
                    let x = load(s.add(j * 32));
                    sp[j] = _mm256_xor_si256(sp[j], x);
                    sq[j] = _mm256_xor_si256(mul2(sq[j], poly), x);
                }
            }
            if let Some(p) = p {
                for (j, v) in sp.iter_mut().enumerate() {
                    *v = _mm256_xor_si256(*v, load(p.as_ptr().add(i + j * 32)));
                }
            }
            for j in 0..4 {
                let sq = _mm256_xor_si256(sq[j], load(q.as_ptr().add(i + j * 32)));
                let x = _mm256_xor_si256(mul(sp[j], ta), mul(sq, tb));
                put(o0.add(i + j * 32), x, stream);
                put(o1.add(i + j * 32), _mm256_xor_si256(sp[j], x), stream);
            }
            i += BLOCK;
        }
        if stream {
            _mm_sfence();
        }
    }
}

/// # Safety
///
/// The CPU must have avx2 (the caller checked it); every pointer and length must cover the bytes read and written.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn load(p: *const u8) -> __m256i {
    // SAFETY: the caller keeps this function's contract: the CPU has the features it is compiled for, and the pointers and lengths cover what it reads and writes.
    unsafe { _mm256_loadu_si256(p as *const __m256i) }
}

/// # Safety
///
/// The CPU must have avx2 (the caller checked it); every pointer and length must cover the bytes read and written.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn store(p: *mut u8, v: __m256i) {
    // SAFETY: the caller keeps this function's contract: the CPU has the features it is compiled for, and the pointers and lengths cover what it reads and writes.
    unsafe {
        _mm256_storeu_si256(p as *mut __m256i, v);
    }
}

/// A plain or (`stream`: `p` 32-byte aligned) non-temporal store.
///
/// # Safety
///
/// The CPU must have avx2 (the caller checked it); every pointer and length must cover the bytes read and written.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn put(p: *mut u8, v: __m256i, stream: bool) {
    // SAFETY: the caller keeps this function's contract: the CPU has the features it is compiled for, and the pointers and lengths cover what it reads and writes.
    unsafe {
        if stream {
            _mm256_stream_si256(p as *mut __m256i, v);
        } else {
            _mm256_storeu_si256(p as *mut __m256i, v);
        }
    }
}

/// [`xor_fixed`] with the store kind and the lanes per iteration
/// compile-time constants (no branch per store in the loop). Up to 8
/// sources take four lanes (128 bytes, as ISA-L's AVX2 XOR), more take
/// eight. Measured in-process against ISA-L, 64 KiB blocks, 300 interleaved
/// slices (four lanes against eight, both streaming): 8+1 in cache 1.036,
/// 1.012 and 1.015 against 1.007, 0.951 and 1.015; 8+1 from memory 1.032
/// against 1.022; 4+1 and 6+1 the same either way; 16+1 in cache 1.015
/// against 1.109 (there, with twice the sources a cache set has ways, the
/// longer iteration pays).
///
/// # Safety
///
/// The CPU must have avx2 (the caller checked it); every pointer and length must cover the bytes read and written.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn fixed<const K: usize>(d: *mut u8, srcs: &[&[u8]], from: usize, to: usize, stream: bool) {
    // SAFETY: the caller keeps this function's contract: the CPU has the features it is compiled for, and the pointers and lengths cover what it reads and writes.
    unsafe {
        match (K <= 8, stream) {
            (true, true) => xor_fixed::<K, 4, true>(d, srcs, from, to),
            (true, false) => xor_fixed::<K, 4, false>(d, srcs, from, to),
            (false, true) => xor_fixed::<K, 8, true>(d, srcs, from, to),
            (false, false) => xor_fixed::<K, 8, false>(d, srcs, from, to),
        }
    }
}

/// `d = XOR of K sources` over bytes `from..to` (multiples of 32): `L`
/// lanes (of 32 bytes) per iteration while they last, then one.
///
/// # Safety
///
/// The CPU must have avx2 (the caller checked it); every pointer and length must cover the bytes read and written.
#[target_feature(enable = "avx2")]
unsafe fn xor_fixed<const K: usize, const L: usize, const STREAM: bool>(
    d: *mut u8,
    srcs: &[&[u8]],
    from: usize,
    to: usize,
) {
    // SAFETY: the caller keeps this function's contract: the CPU has the features it is compiled for, and the pointers and lengths cover what it reads and writes.
    unsafe {
        let stream = STREAM;
        let mut s = [std::ptr::null::<u8>(); K];
        for (slot, src) in s.iter_mut().zip(srcs) {
            *slot = src.as_ptr();
        }
        let mut i = from;
        while i + L * LANE <= to {
            let mut v = [_mm256_setzero_si256(); L];
            for (j, lane) in v.iter_mut().enumerate() {
                *lane = load(s[0].add(i + j * LANE));
            }
            for src in s.iter().skip(1) {
                for (j, lane) in v.iter_mut().enumerate() {
                    *lane = _mm256_xor_si256(*lane, load(src.add(i + j * LANE)));
                }
            }
            for (j, lane) in v.iter().enumerate() {
                put(d.add(i + j * LANE), *lane, stream);
            }
            i += L * LANE;
        }
        while i < to {
            let mut v = load(s[0].add(i));
            for src in s.iter().skip(1) {
                v = _mm256_xor_si256(v, load(src.add(i)));
            }
            put(d.add(i), v, stream);
            i += LANE;
        }
        if stream {
            _mm_sfence();
        }
    }
}

/// Any number of sources, and the accumulate form (`d ^= ...`): as
/// [`xor_fixed`], the sources walked from the slice.
///
/// # Safety
///
/// The CPU must have avx2 (the caller checked it); every pointer and length must cover the bytes read and written.
#[target_feature(enable = "avx2")]
unsafe fn xor_any(d: *mut u8, srcs: &[&[u8]], from: usize, to: usize, acc: bool, stream: bool) {
    // SAFETY: the caller keeps this function's contract: the CPU has the features it is compiled for, and the pointers and lengths cover what it reads and writes.
    unsafe {
        let (base, rest) = if acc {
            (d as *const u8, srcs)
        } else {
            (srcs[0].as_ptr(), &srcs[1..])
        };
        let mut i = from;
        while i + WIDE <= to {
            let mut v = [_mm256_setzero_si256(); 8];
            for (j, lane) in v.iter_mut().enumerate() {
                *lane = load(base.add(i + j * LANE));
            }
            for src in rest {
                let p = src.as_ptr().add(i);
                for (j, lane) in v.iter_mut().enumerate() {
                    *lane = _mm256_xor_si256(*lane, load(p.add(j * LANE)));
                }
            }
            for (j, lane) in v.iter().enumerate() {
                put(d.add(i + j * LANE), *lane, stream);
            }
            i += WIDE;
        }
        while i < to {
            let mut v = load(base.add(i));
            for src in rest {
                v = _mm256_xor_si256(v, load(src.as_ptr().add(i)));
            }
            put(d.add(i), v, stream);
            i += LANE;
        }
        if stream {
            _mm_sfence();
        }
    }
}

/// # Safety
///
/// The CPU must have avx2 (the caller checked it); every pointer and length must cover the bytes read and written.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn mul2(x: __m256i, poly: __m256i) -> __m256i {
    // High bit of each byte -> 0xff mask (signed compare against zero), shift left,
    // reduce by 0x1d where the high bit was set.
    let mask = _mm256_cmpgt_epi8(_mm256_setzero_si256(), x);
    _mm256_xor_si256(_mm256_add_epi8(x, x), _mm256_and_si256(mask, poly))
}

/// P and Q over bytes `from..to` (multiples of 128) by Horner's rule from
/// the highest block down: four lanes of each per iteration.
///
/// The store kind is a compile-time constant, as in [`xor_fixed`]: with it a
/// run-time flag (one loop, the branch hoisted out of it by the compiler),
/// 4+2 of 64 KiB blocks from memory ran 4-9 % slower (in-process against
/// ISA-L, 400 interleaved slices of 64 calls each, in three runs: 1.004,
/// 1.030, 0.910 of ISA-L against 1.062, 1.081, 0.999 for the same loop with
/// a constant). The machine code of the inner loop is the same; the
/// difference is in how the run-time form lays out the stores (every output
/// address computed before one branch, then eight stores at the top of the
/// loop).
///
/// # Safety
///
/// The CPU must have avx2 (the caller checked it); every pointer and length must cover the bytes read and written.
#[target_feature(enable = "avx2")]
unsafe fn pq_blocks<const STREAM: bool>(
    data: &[&[u8]],
    pp: *mut u8,
    qp: *mut u8,
    from: usize,
    to: usize,
) {
    // SAFETY: the caller keeps this function's contract: the CPU has the features it is compiled for, and the pointers and lengths cover what it reads and writes.
    unsafe {
        let stream = STREAM;
        let poly = _mm256_set1_epi8(0x1d);
        let top = data.len() - 1;
        let mut i = from;
        while i < to {
            let t = data[top].as_ptr().add(i);
            let mut pv = [_mm256_setzero_si256(); 4];
            for (j, v) in pv.iter_mut().enumerate() {
                *v = load(t.add(j * LANE));
            }
            let mut qv = pv;
            for z in (0..top).rev() {
                let s = data[z].as_ptr().add(i);
                for j in 0..4 {
                    let d = load(s.add(j * LANE));
                    pv[j] = _mm256_xor_si256(pv[j], d);
                    qv[j] = _mm256_xor_si256(mul2(qv[j], poly), d);
                }
            }
            for j in 0..4 {
                put(pp.add(i + j * LANE), pv[j], stream);
                put(qp.add(i + j * LANE), qv[j], stream);
            }
            i += BLOCK;
        }
        if stream {
            _mm_sfence();
        }
    }
}

/// # Safety
///
/// The CPU must have avx2 (the caller checked it); every pointer and length must cover the bytes read and written.
#[target_feature(enable = "avx2")]
unsafe fn mul_acc_blocks(c: u8, src: &[u8], dst: &mut [u8], len: usize) {
    // SAFETY: the caller keeps this function's contract: the CPU has the features it is compiled for, and the pointers and lengths cover what it reads and writes.
    unsafe {
        let (lo, hi) = gf::nibble_tables(c);
        let lo_t = _mm256_broadcastsi128_si256(_mm_loadu_si128(lo.as_ptr() as *const __m128i));
        let hi_t = _mm256_broadcastsi128_si256(_mm_loadu_si128(hi.as_ptr() as *const __m128i));
        let nib = _mm256_set1_epi8(0x0f);
        let mut i = 0;
        while i < len {
            let x = _mm256_loadu_si256(src.as_ptr().add(i) as *const __m256i);
            let l = _mm256_and_si256(x, nib);
            let h = _mm256_and_si256(_mm256_srli_epi64(x, 4), nib);
            let m = _mm256_xor_si256(_mm256_shuffle_epi8(lo_t, l), _mm256_shuffle_epi8(hi_t, h));
            let o = dst.as_mut_ptr().add(i) as *mut __m256i;
            _mm256_storeu_si256(o, _mm256_xor_si256(_mm256_loadu_si256(o), m));
            i += 32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference;

    /// Both store kinds write the same bytes (the probe picks between them
    /// by timing, so the property tests, whose blocks are in cache, would
    /// otherwise only ever see the plain one).
    #[test]
    fn streaming_and_plain_stores_agree() {
        if !Avx2::detected() {
            return;
        }
        let len = 64 * 1024;
        let srcs: Vec<Vec<u8>> = (0..5).map(|i| reference::pattern(len, i)).collect();
        let s: Vec<&[u8]> = srcs.iter().map(|v| v.as_slice()).collect();
        let (mut wx, mut wp, mut wq) = (vec![0u8; len], vec![0u8; len], vec![0u8; len]);
        reference::xor_gen(&mut wx, &s);
        reference::pq_gen(&s, &mut wp, &mut wq);
        // 32-byte aligned outputs (a Vec of 32-byte elements).
        #[derive(Clone, Copy)]
        #[repr(align(32))]
        struct Ymm(#[allow(dead_code)] [u8; 32]);
        let aligned = || vec![Ymm([0; 32]); len / 32];
        for stream in [false, true] {
            let (mut x, mut p, mut q) = (aligned(), aligned(), aligned());
            let bytes = |v: &mut Vec<Ymm>| v.as_mut_ptr() as *mut u8;
            let (xp, pp, qp) = (bytes(&mut x), bytes(&mut p), bytes(&mut q));
            // SAFETY: AVX2 detected; outputs of `len` bytes, 32-byte aligned.
            unsafe {
                fixed::<5>(xp, &s, 0, len, stream);
                if stream {
                    pq_blocks::<true>(&s, pp, qp, 0, len);
                } else {
                    pq_blocks::<false>(&s, pp, qp, 0, len);
                }
                let got = |ptr: *mut u8| std::slice::from_raw_parts(ptr, len).to_vec();
                assert_eq!(got(xp), wx, "xor, stream {stream}");
                assert_eq!(got(pp), wp, "P, stream {stream}");
                assert_eq!(got(qp), wq, "Q, stream {stream}");
                // Data 1 and 3 lost: out0 = D1, out1 = D3.
                let (g1, g3) = (gf::pow2(1), gf::pow2(3));
                let c_q = gf::inv(g1 ^ g3);
                let data = [s[0], &[], s[2], &[], s[4]];
                let syn = Syndromes {
                    data: &data,
                    p: Some(&wp),
                    q: &wq,
                    a: gf::mul(g3, c_q),
                    b: c_q,
                };
                if stream {
                    solve2_blocks::<true>(syn, xp, pp, 0, len);
                } else {
                    solve2_blocks::<false>(syn, xp, pp, 0, len);
                }
                assert_eq!(got(xp), srcs[1], "D1, stream {stream}");
                assert_eq!(got(pp), srcs[3], "D3, stream {stream}");
            }
        }
    }
}
