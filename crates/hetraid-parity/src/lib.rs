//! XOR and RAID-6 P+Q kernels for hetraid.
//!
//! * [`xor_gen`] / [`xor_acc`]: RAID-4/5 parity, any length, any number of sources.
//! * [`pq_gen`]: RAID-6 P (XOR) and Q (Reed–Solomon over GF(2^8), generator 2).
//! * [`pq_update`] / [`q_acc`]: read-modify-write deltas for P and Q.
//! * [`recover`]: rebuild any one or two missing blocks of a P(+Q) row.
//! * [`crc32c`]: the block checksum, folded with PCLMULQDQ where the CPU has it.
//!
//! The instruction set is chosen once at run time ([`kernels::best`]); every set is
//! tested against the byte-at-a-time [`reference`]. Why our own GF code rather than a
//! crate: the RAID-6 construction (generator 2, Horner evaluation of Q) is not what the
//! general Reed–Solomon crates implement, and ISA-L's bindings need a system library at
//! build time; the benchmark `scripts/bench-parity.sh` compares us with ISA-L directly.
//!
//! Nothing here allocates: tails are handled byte-wise and recovery works through
//! fixed stack buffers.

pub mod crc32c;
pub mod gf;
pub mod kernels;
pub mod reference;

use kernels::best;

/// Most blocks a row may have (GF(2^8) allows 255 data blocks with a distinct
/// coefficient each, plus P and Q).
pub const MAX_BLOCKS: usize = 257;

/// Why a recovery could not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecoverError {
    /// More blocks missing than the row has parity blocks.
    TooManyMissing { missing: usize, parity: usize },
    /// A missing index does not name a block of the row.
    BadIndex(usize),
    /// The row is not data blocks followed by P, or P and Q.
    BadShape { blocks: usize, data: usize },
}

impl std::fmt::Display for RecoverError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::TooManyMissing { missing, parity } => {
                write!(f, "{missing} blocks are missing but the row has only {parity} parity blocks")
            }
            Self::BadIndex(i) => write!(f, "missing block index {i} is not part of the row"),
            Self::BadShape { blocks, data } => write!(
                f,
                "a row of {blocks} blocks cannot hold {data} data blocks plus one or two parity blocks"
            ),
        }
    }
}

impl std::error::Error for RecoverError {}

fn check_len(want: usize, got: usize) {
    assert_eq!(want, got, "parity kernels need equal-length blocks");
}

/// `dst = XOR of srcs` (all zero when `srcs` is empty).
pub fn xor_gen(dst: &mut [u8], srcs: &[&[u8]]) {
    srcs.iter().for_each(|s| check_len(dst.len(), s.len()));
    if srcs.is_empty() {
        dst.fill(0);
    } else {
        best().xor_gen(dst, srcs);
    }
}

/// `dst ^= XOR of srcs`.
pub fn xor_acc(dst: &mut [u8], srcs: &[&[u8]]) {
    srcs.iter().for_each(|s| check_len(dst.len(), s.len()));
    if !srcs.is_empty() {
        best().xor_acc(dst, srcs);
    }
}

/// RAID-6 P and Q of `data` (P = Q = 0 for no data).
pub fn pq_gen(data: &[&[u8]], p: &mut [u8], q: &mut [u8]) {
    check_len(p.len(), q.len());
    data.iter().for_each(|s| check_len(p.len(), s.len()));
    assert!(
        data.len() <= MAX_BLOCKS - 2,
        "RAID-6 rows hold at most 255 data blocks"
    );
    if data.is_empty() {
        p.fill(0);
        q.fill(0);
    } else {
        best().pq_gen(data, p, q);
    }
}

/// `q ^= g^index * src`: the Q contribution of data block `index`.
pub fn q_acc(index: usize, src: &[u8], q: &mut [u8]) {
    check_len(q.len(), src.len());
    best().mul_acc(gf::pow2(index), src, q);
}

/// `dst ^= c * src` over GF(2^8).
pub fn mul_acc(c: u8, src: &[u8], dst: &mut [u8]) {
    check_len(dst.len(), src.len());
    best().mul_acc(c, src, dst);
}

/// Read-modify-write of one data block: fold `old ^ new` of block `index` into P and
/// (when given) Q.
pub fn pq_update(index: usize, old: &[u8], new: &[u8], p: &mut [u8], q: Option<&mut [u8]>) {
    check_len(p.len(), old.len());
    check_len(p.len(), new.len());
    match q {
        Some(q) => {
            check_len(q.len(), old.len());
            best().pq_update(gf::pow2(index), old, new, p, q);
        }
        None => best().xor_acc(p, &[old, new]),
    }
}

/// Recover the blocks listed in `missing` of a row laid out as `data_count` data
/// blocks followed by P and, when `blocks.len() == data_count + 2`, Q. The contents
/// of missing blocks on entry are ignored; on success every block of the row is
/// consistent.
pub fn recover(
    blocks: &mut [&mut [u8]],
    data_count: usize,
    missing: &[usize],
) -> Result<(), RecoverError> {
    let n = blocks.len();
    if data_count == 0 || n < data_count + 1 || n > data_count + 2 || n > MAX_BLOCKS {
        return Err(RecoverError::BadShape {
            blocks: n,
            data: data_count,
        });
    }
    let parity = n - data_count;
    let len = blocks[0].len();
    blocks.iter().for_each(|b| check_len(len, b.len()));
    let mut miss = [usize::MAX; 2];
    let mut m = 0;
    for &i in missing {
        if i >= n {
            return Err(RecoverError::BadIndex(i));
        }
        if miss[..m.min(2)].contains(&i) {
            continue;
        }
        if m >= parity {
            return Err(RecoverError::TooManyMissing {
                missing: missing.len(),
                parity,
            });
        }
        miss[m] = i;
        m += 1;
    }
    miss[..m].sort_unstable();
    let miss: &[usize] = &miss[..m];
    let (p_idx, q_idx) = (data_count, data_count + 1);
    let data_missing: usize = miss.iter().filter(|&&i| i < data_count).count();
    let p_missing = miss.contains(&p_idx);
    match (data_missing, miss) {
        (_, []) => Ok(()),
        (0, _) => {
            regen_parity(blocks, data_count);
            Ok(())
        }
        (1, [x]) | (1, [x, _]) if !p_missing => {
            // Data block x from P (Q, if also missing, is regenerated after).
            let x = *x;
            let t = std::mem::take(&mut blocks[x]);
            with_sources(blocks, data_count + 1, |srcs| best().xor_gen(t, srcs));
            blocks[x] = t;
            if miss.contains(&q_idx) {
                regen_parity(blocks, data_count);
            }
            Ok(())
        }
        (1, [x, _]) => {
            // Data block x and P missing: with S_Q = Q ^ sum g^i Di over the
            // other data, Dx = S_Q / g^x and P = Dx ^ sum Di.
            let x = *x;
            solve2(blocks, data_count, x, p_idx, 0, gf::inv(gf::pow2(x)));
            Ok(())
        }
        (2, [x, y]) => {
            // Both from P, Q and the other data. With the syndromes S_P =
            // Dx ^ Dy and S_Q = g^x Dx ^ g^y Dy (P and Q less the other
            // data): Dx = (g^y S_P ^ S_Q) / (g^x ^ g^y), Dy = S_P ^ Dx.
            let (x, y) = (*x, *y);
            let (gx, gy) = (gf::pow2(x), gf::pow2(y));
            let c_q = gf::inv(gx ^ gy);
            solve2(blocks, data_count, x, y, gf::mul(gy, c_q), c_q);
            Ok(())
        }
        _ => unreachable!("at most two blocks are missing and at most two are data"),
    }
}

/// Lost blocks `x` (data) and `y` (data, or P) of a RAID-6 row rebuilt by
/// [`Kernels::solve2`] with coefficients `a` and `b`.
fn solve2(blocks: &mut [&mut [u8]], data_count: usize, x: usize, y: usize, a: u8, b: u8) {
    let tx = std::mem::take(&mut blocks[x]);
    let ty = std::mem::take(&mut blocks[y]);
    let (data, parity) = blocks.split_at(data_count);
    let mut arr: [&[u8]; MAX_BLOCKS] = [&[]; MAX_BLOCKS];
    for (slot, d) in arr.iter_mut().zip(data) {
        *slot = d;
    }
    let p = (!parity[0].is_empty()).then_some(&*parity[0]);
    let syn = kernels::Syndromes {
        data: &arr[..data_count],
        p,
        q: parity[1],
        a,
        b,
    };
    best().solve2(syn, tx, ty);
    blocks[x] = tx;
    blocks[y] = ty;
}

/// Run `f` with the blocks `0..upto` that are not empty (taken ones are empty).
fn with_sources(blocks: &[&mut [u8]], upto: usize, f: impl FnOnce(&[&[u8]])) {
    let mut arr: [&[u8]; MAX_BLOCKS] = [&[]; MAX_BLOCKS];
    let mut k = 0;
    for b in &blocks[..upto] {
        if !b.is_empty() {
            arr[k] = b;
            k += 1;
        }
    }
    f(&arr[..k]);
}

/// Recompute P (and Q when present) from the data blocks.
fn regen_parity(blocks: &mut [&mut [u8]], data_count: usize) {
    let (data, parity) = blocks.split_at_mut(data_count);
    let mut arr: [&[u8]; MAX_BLOCKS] = [&[]; MAX_BLOCKS];
    for (i, d) in data.iter().enumerate() {
        arr[i] = d;
    }
    let srcs = &arr[..data_count];
    match parity {
        [p] => best().xor_gen(p, srcs),
        [p, q] => best().pq_gen(srcs, p, q),
        _ => unreachable!("shape checked by recover"),
    }
}
