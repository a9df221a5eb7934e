//! One file per instruction set, all behind [`Kernels`]. The dispatcher picks the
//! widest set the CPU has at run time; `reference.rs` defines the expected results.

#[cfg(target_arch = "x86_64")]
pub mod avx2;
#[cfg(target_arch = "x86_64")]
pub mod avx512;
#[cfg(target_arch = "x86_64")]
pub mod gfni;
pub mod portable;
#[cfg(target_arch = "x86_64")]
pub mod residency;

/// The primitive operations every instruction set provides. Callers guarantee that
/// all slices have the same length (any length, odd ones included) and that
/// `srcs`/`data` are non-empty.
pub trait Kernels: Sync {
    /// Short name printed by benchmarks ("avx2", "portable", ...).
    fn name(&self) -> &'static str;
    /// `dst = srcs[0] ^ srcs[1] ^ ...`.
    fn xor_gen(&self, dst: &mut [u8], srcs: &[&[u8]]);
    /// `dst ^= srcs[0] ^ srcs[1] ^ ...`.
    fn xor_acc(&self, dst: &mut [u8], srcs: &[&[u8]]);
    /// `P = XOR of data`, `Q = sum g^i * data[i]` over GF(2^8).
    fn pq_gen(&self, data: &[&[u8]], p: &mut [u8], q: &mut [u8]);
    /// `dst ^= c * src` over GF(2^8).
    fn mul_acc(&self, c: u8, src: &[u8], dst: &mut [u8]);
    /// Read-modify-write of one data block whose Q coefficient is `c`:
    /// `P ^= old ^ new`, `Q ^= c * (old ^ new)`. Sets without a fused
    /// kernel compose it from the operations above.
    fn pq_update(&self, c: u8, old: &[u8], new: &[u8], p: &mut [u8], q: &mut [u8]) {
        self.xor_acc(p, &[old, new]);
        self.mul_acc(c, old, q);
        self.mul_acc(c, new, q);
    }
    /// Two linear combinations of the same sources in one pass (recovery of
    /// two blocks): `out0 = sum coefs[i].0 * srcs[i]`, `out1 = sum
    /// coefs[i].1 * srcs[i]` (`^=` instead of `=` with `acc`).
    /// `coefs.len() == srcs.len()`.
    fn mul_sum2(
        &self,
        srcs: &[&[u8]],
        coefs: &[(u8, u8)],
        out0: &mut [u8],
        out1: &mut [u8],
        acc: bool,
    ) {
        if !acc {
            out0.fill(0);
            out1.fill(0);
        }
        for (s, &(a, b)) in srcs.iter().zip(coefs) {
            self.mul_acc(a, s, out0);
            self.mul_acc(b, s, out1);
        }
    }
    /// Two lost blocks of a RAID-6 row, at least one of them data, from the
    /// syndromes: with `S_P = P ^ XOR of the data present` (P left out when
    /// `p` is `None`, that is when P is the other lost block) and `S_Q = Q ^
    /// sum g^i D_i` over the data present, `out0 = a * S_P ^ b * S_Q` and
    /// `out1 = S_P ^ out0`. `data` holds every data block in index order,
    /// the lost ones empty. Sets whose multiplication is cheap fold it into
    /// [`Kernels::mul_sum2`] ([`solve2_by_sums`]); AVX2 computes the
    /// syndromes with Horner doublings and multiplies only twice per byte.
    fn solve2(&self, s: Syndromes<'_>, out0: &mut [u8], out1: &mut [u8]) {
        solve2_by_sums(self, s, out0, out1)
    }
}

/// What [`Kernels::solve2`] rebuilds from: every data block in index order
/// (the lost ones empty), P (`None` when it is the other lost block), Q,
/// and the coefficients `a` of S_P and `b` of S_Q.
#[derive(Clone, Copy)]
pub struct Syndromes<'a> {
    pub data: &'a [&'a [u8]],
    pub p: Option<&'a [u8]>,
    pub q: &'a [u8],
    pub a: u8,
    pub b: u8,
}

/// [`Kernels::solve2`] as two linear combinations of every surviving block
/// (data i: `(a ^ b g^i, 1 ^ a ^ b g^i)`, P: `(a, 1 ^ a)`, Q: `(b, b)`), in
/// one [`Kernels::mul_sum2`] pass per 16 sources (small stack batches: a
/// 4 KiB row pays no setup for the 257 blocks a row may have).
pub fn solve2_by_sums<K: Kernels + ?Sized>(
    kern: &K,
    Syndromes { data, p, q, a, b }: Syndromes<'_>,
    out0: &mut [u8],
    out1: &mut [u8],
) {
    const BATCH: usize = 16;
    let mut srcs: [&[u8]; BATCH] = [&[]; BATCH];
    let mut coefs = [(0u8, 0u8); BATCH];
    let (mut k, mut acc) = (0, false);
    let present = data
        .iter()
        .enumerate()
        .filter(|(_, d)| !d.is_empty())
        .map(|(i, d)| {
            let c = a ^ crate::gf::mul(b, crate::gf::pow2(i));
            (*d, (c, 1 ^ c))
        });
    let parity = p.map(|p| (p, (a, 1 ^ a))).into_iter().chain([(q, (b, b))]);
    for (src, coef) in present.chain(parity) {
        srcs[k] = src;
        coefs[k] = coef;
        k += 1;
        if k == BATCH {
            kern.mul_sum2(&srcs, &coefs, out0, out1, acc);
            (k, acc) = (0, true);
        }
    }
    if k > 0 || !acc {
        kern.mul_sum2(&srcs[..k], &coefs[..k], out0, out1, acc);
    }
}

/// Every kernel set this CPU can run, widest first (used by tests and benches).
pub fn available() -> Vec<&'static dyn Kernels> {
    let mut v: Vec<&'static dyn Kernels> = Vec::new();
    #[cfg(target_arch = "x86_64")]
    {
        if gfni::Gfni::detected() {
            v.push(&gfni::Gfni);
        }
        if avx512::Avx512::detected() {
            v.push(&avx512::Avx512);
        }
        if avx2::Avx2::detected() {
            v.push(&avx2::Avx2);
        }
    }
    v.push(&portable::Portable);
    v
}

/// The kernel set chosen for this CPU (the first of [`available`]).
pub fn best() -> &'static dyn Kernels {
    static BEST: std::sync::OnceLock<&'static dyn Kernels> = std::sync::OnceLock::new();
    *BEST.get_or_init(|| available()[0])
}
