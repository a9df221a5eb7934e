//! AVX2: 128 bytes per loop iteration (four 256-bit lanes) for XOR and P+Q,
//! split-nibble shuffles for multiplication by a constant.

use super::{
    portable::{self, Portable},
    Kernels,
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

impl Kernels for Avx2 {
    fn name(&self) -> &'static str {
        "avx2"
    }

    fn xor_gen(&self, dst: &mut [u8], srcs: &[&[u8]]) {
        let done = dst.len() / BLOCK * BLOCK;
        // SAFETY: AVX2 is present (this set is only handed out when detected) and all
        // slices are at least `done` bytes long (caller contract, checked in lib.rs).
        // Common source counts get a fully unrolled loop with the source pointers in
        // registers.
        unsafe {
            match srcs.len() {
                2 => xor_fixed::<2>(dst, srcs, done),
                3 => xor_fixed::<3>(dst, srcs, done),
                4 => xor_fixed::<4>(dst, srcs, done),
                5 => xor_fixed::<5>(dst, srcs, done),
                6 => xor_fixed::<6>(dst, srcs, done),
                7 => xor_fixed::<7>(dst, srcs, done),
                8 => xor_fixed::<8>(dst, srcs, done),
                _ => xor_blocks(dst, srcs, done, false),
            }
        }
        portable::xor_range(dst, srcs, done, false);
    }

    fn xor_acc(&self, dst: &mut [u8], srcs: &[&[u8]]) {
        let done = dst.len() / BLOCK * BLOCK;
        // SAFETY: as in `xor_gen`.
        unsafe { xor_blocks(dst, srcs, done, true) };
        portable::xor_range(dst, srcs, done, true);
    }

    fn pq_gen(&self, data: &[&[u8]], p: &mut [u8], q: &mut [u8]) {
        let done = p.len() / BLOCK * BLOCK;
        // SAFETY: as in `xor_gen`.
        unsafe { pq_blocks(data, p, q, done) };
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

    fn solve2(
        &self,
        data: &[&[u8]],
        p: Option<&[u8]>,
        q: &[u8],
        a: u8,
        b: u8,
        out0: &mut [u8],
        out1: &mut [u8],
    ) {
        let done = out0.len() / BLOCK * BLOCK;
        // SAFETY: as in `xor_gen`.
        unsafe { solve2_blocks(data, p, q, a, b, out0, out1, done) };
        if done < out0.len() {
            let mut tail: [&[u8]; crate::MAX_BLOCKS] = [&[]; crate::MAX_BLOCKS];
            for (t, d) in tail.iter_mut().zip(data) {
                *t = d.get(done..).unwrap_or(&[]);
            }
            super::solve2_by_sums(
                &Portable,
                &tail[..data.len()],
                p.map(|p| &p[done..]),
                &q[done..],
                a,
                b,
                &mut out0[done..],
                &mut out1[done..],
            );
        }
    }
}

/// The nibble tables of multiplication by `c`, in both halves of a ymm.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn mul_tables(c: u8) -> (__m256i, __m256i) {
    let (lo, hi) = gf::nibble_tables(c);
    (
        _mm256_broadcastsi128_si256(_mm_loadu_si128(lo.as_ptr() as *const __m128i)),
        _mm256_broadcastsi128_si256(_mm_loadu_si128(hi.as_ptr() as *const __m128i)),
    )
}

/// `c * x` with `c`'s nibble tables: two shuffles.
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
#[target_feature(enable = "avx2")]
unsafe fn pq_update_blocks(c: u8, old: &[u8], new: &[u8], p: &mut [u8], q: &mut [u8], len: usize) {
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

/// [`Kernels::solve2`] in one pass, 128 bytes per step: the syndromes by
/// Horner's rule from the highest data block down (a lost block only
/// doubles S_Q), then two multiplications per byte for `out0` and one XOR
/// for `out1`. Against one multiply-accumulate per source and output (ISA-L's
/// `ec_encode_data`), a 4+2 row of two lost blocks multiplies 2 times per
/// byte instead of 8.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2")]
unsafe fn solve2_blocks(
    data: &[&[u8]],
    p: Option<&[u8]>,
    q: &[u8],
    a: u8,
    b: u8,
    out0: &mut [u8],
    out1: &mut [u8],
    len: usize,
) {
    let poly = _mm256_set1_epi8(0x1d);
    let (ta, tb) = (mul_tables(a), mul_tables(b));
    let (o0, o1) = (out0.as_mut_ptr(), out1.as_mut_ptr());
    let mut i = 0;
    while i < len {
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
            store(o0.add(i + j * 32), x);
            store(o1.add(i + j * 32), _mm256_xor_si256(sp[j], x));
        }
        i += BLOCK;
    }
}

#[inline]
#[target_feature(enable = "avx2")]
unsafe fn load(p: *const u8) -> __m256i {
    _mm256_loadu_si256(p as *const __m256i)
}

#[inline]
#[target_feature(enable = "avx2")]
unsafe fn store(p: *mut u8, v: __m256i) {
    _mm256_storeu_si256(p as *mut __m256i, v);
}

/// Non-temporal stores for parity outputs of at least STREAM_MIN bytes: parity is
/// written to a member next, not read back by the CPU, so it should not evict the
/// data being read (ISA-L's xor_gen/pq_gen do the same). Needs 32-byte alignment.
const STREAM_MIN: usize = 16 * 1024;

fn use_stream(p: *const u8, len: usize) -> bool {
    len >= STREAM_MIN && (p as usize).is_multiple_of(32)
}

#[target_feature(enable = "avx2")]
unsafe fn xor_blocks(dst: &mut [u8], srcs: &[&[u8]], len: usize, acc: bool) {
    let d = dst.as_mut_ptr();
    let stream = use_stream(d, len);
    let mut i = 0;
    while i < len {
        let (mut a, mut b, mut c, mut e);
        let first;
        if acc {
            let p = d.add(i) as *const __m256i;
            a = _mm256_loadu_si256(p);
            b = _mm256_loadu_si256(p.add(1));
            c = _mm256_loadu_si256(p.add(2));
            e = _mm256_loadu_si256(p.add(3));
            first = 0;
        } else {
            let p = srcs[0].as_ptr().add(i) as *const __m256i;
            a = _mm256_loadu_si256(p);
            b = _mm256_loadu_si256(p.add(1));
            c = _mm256_loadu_si256(p.add(2));
            e = _mm256_loadu_si256(p.add(3));
            first = 1;
        }
        for s in &srcs[first..] {
            let p = s.as_ptr().add(i) as *const __m256i;
            a = _mm256_xor_si256(a, _mm256_loadu_si256(p));
            b = _mm256_xor_si256(b, _mm256_loadu_si256(p.add(1)));
            c = _mm256_xor_si256(c, _mm256_loadu_si256(p.add(2)));
            e = _mm256_xor_si256(e, _mm256_loadu_si256(p.add(3)));
        }
        let o = d.add(i) as *mut __m256i;
        if stream {
            _mm256_stream_si256(o, a);
            _mm256_stream_si256(o.add(1), b);
            _mm256_stream_si256(o.add(2), c);
            _mm256_stream_si256(o.add(3), e);
        } else {
            _mm256_storeu_si256(o, a);
            _mm256_storeu_si256(o.add(1), b);
            _mm256_storeu_si256(o.add(2), c);
            _mm256_storeu_si256(o.add(3), e);
        }
        i += BLOCK;
    }
    if stream {
        _mm_sfence();
    }
}

#[target_feature(enable = "avx2")]
unsafe fn xor_fixed<const K: usize>(dst: &mut [u8], srcs: &[&[u8]], len: usize) {
    let mut p = [std::ptr::null::<u8>(); K];
    for (slot, s) in p.iter_mut().zip(srcs) {
        *slot = s.as_ptr();
    }
    let d = dst.as_mut_ptr();
    let stream = use_stream(d, len);
    // 256 bytes (eight lanes) per iteration while they last, then 128.
    let mut i = 0;
    while i + 2 * BLOCK <= len {
        let mut v = [_mm256_setzero_si256(); 8];
        let s0 = p[0].add(i) as *const __m256i;
        for (j, lane) in v.iter_mut().enumerate() {
            *lane = _mm256_loadu_si256(s0.add(j));
        }
        for src in p.iter().skip(1) {
            let x = src.add(i) as *const __m256i;
            for (j, lane) in v.iter_mut().enumerate() {
                *lane = _mm256_xor_si256(*lane, _mm256_loadu_si256(x.add(j)));
            }
        }
        let o = d.add(i) as *mut __m256i;
        for (j, lane) in v.iter().enumerate() {
            if stream {
                _mm256_stream_si256(o.add(j), *lane);
            } else {
                _mm256_storeu_si256(o.add(j), *lane);
            }
        }
        i += 2 * BLOCK;
    }
    if stream {
        _mm_sfence();
    }
    if i < len {
        xor_blocks(&mut dst[i..], &srcs_tail(srcs, i)[..K], len - i, false);
    }
}

/// Sources advanced by `from` bytes (at most 8, fixed-size: no allocation).
fn srcs_tail<'a>(srcs: &[&'a [u8]], from: usize) -> [&'a [u8]; 8] {
    let mut out: [&[u8]; 8] = [&[]; 8];
    for (o, s) in out.iter_mut().zip(srcs) {
        *o = &s[from..];
    }
    out
}

#[inline]
#[target_feature(enable = "avx2")]
unsafe fn mul2(x: __m256i, poly: __m256i) -> __m256i {
    // High bit of each byte -> 0xff mask (signed compare against zero), shift left,
    // reduce by 0x1d where the high bit was set.
    let mask = _mm256_cmpgt_epi8(_mm256_setzero_si256(), x);
    _mm256_xor_si256(_mm256_add_epi8(x, x), _mm256_and_si256(mask, poly))
}

#[target_feature(enable = "avx2")]
unsafe fn pq_blocks(data: &[&[u8]], p: &mut [u8], q: &mut [u8], len: usize) {
    let poly = _mm256_set1_epi8(0x1d);
    let stream = use_stream(p.as_ptr(), len) && use_stream(q.as_ptr(), len);
    let top = data.len() - 1;
    let mut i = 0;
    while i < len {
        let t = data[top].as_ptr().add(i) as *const __m256i;
        let mut p0 = _mm256_loadu_si256(t);
        let mut p1 = _mm256_loadu_si256(t.add(1));
        let mut p2 = _mm256_loadu_si256(t.add(2));
        let mut p3 = _mm256_loadu_si256(t.add(3));
        let (mut q0, mut q1, mut q2, mut q3) = (p0, p1, p2, p3);
        for z in (0..top).rev() {
            let s = data[z].as_ptr().add(i) as *const __m256i;
            let d0 = _mm256_loadu_si256(s);
            let d1 = _mm256_loadu_si256(s.add(1));
            let d2 = _mm256_loadu_si256(s.add(2));
            let d3 = _mm256_loadu_si256(s.add(3));
            p0 = _mm256_xor_si256(p0, d0);
            p1 = _mm256_xor_si256(p1, d1);
            p2 = _mm256_xor_si256(p2, d2);
            p3 = _mm256_xor_si256(p3, d3);
            q0 = _mm256_xor_si256(mul2(q0, poly), d0);
            q1 = _mm256_xor_si256(mul2(q1, poly), d1);
            q2 = _mm256_xor_si256(mul2(q2, poly), d2);
            q3 = _mm256_xor_si256(mul2(q3, poly), d3);
        }
        let po = p.as_mut_ptr().add(i) as *mut __m256i;
        let qo = q.as_mut_ptr().add(i) as *mut __m256i;
        if stream {
            _mm256_stream_si256(po, p0);
            _mm256_stream_si256(po.add(1), p1);
            _mm256_stream_si256(po.add(2), p2);
            _mm256_stream_si256(po.add(3), p3);
            _mm256_stream_si256(qo, q0);
            _mm256_stream_si256(qo.add(1), q1);
            _mm256_stream_si256(qo.add(2), q2);
            _mm256_stream_si256(qo.add(3), q3);
        } else {
            _mm256_storeu_si256(po, p0);
            _mm256_storeu_si256(po.add(1), p1);
            _mm256_storeu_si256(po.add(2), p2);
            _mm256_storeu_si256(po.add(3), p3);
            _mm256_storeu_si256(qo, q0);
            _mm256_storeu_si256(qo.add(1), q1);
            _mm256_storeu_si256(qo.add(2), q2);
            _mm256_storeu_si256(qo.add(3), q3);
        }
        i += BLOCK;
    }
    if stream {
        _mm_sfence();
    }
}

#[target_feature(enable = "avx2")]
unsafe fn mul_acc_blocks(c: u8, src: &[u8], dst: &mut [u8], len: usize) {
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
