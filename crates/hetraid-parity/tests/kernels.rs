//! Every kernel set against the byte-at-a-time reference, and recovery of every
//! one- and two-block loss. proptest prints the failing case and persists its seed.

use hetraid_parity::{kernels, pq_gen, pq_update, recover, reference, xor_gen, RecoverError};
use proptest::prelude::*;

fn rows() -> impl Strategy<Value = Vec<Vec<u8>>> {
    (1usize..12, 0usize..1200).prop_flat_map(|(k, len)| {
        proptest::collection::vec(proptest::collection::vec(any::<u8>(), len), k)
    })
}

proptest! {
    #[test]
    fn every_kernel_matches_reference(data in rows(), c in any::<u8>()) {
        let srcs: Vec<&[u8]> = data.iter().map(|d| d.as_slice()).collect();
        let len = data[0].len();
        let mut want = vec![0u8; len];
        reference::xor_gen(&mut want, &srcs);
        let (mut wp, mut wq) = (vec![0u8; len], vec![0u8; len]);
        reference::pq_gen(&srcs, &mut wp, &mut wq);
        let mut wm = data[0].clone();
        reference::mul_acc(c, &data[data.len() - 1], &mut wm);
        for k in kernels::available() {
            let mut got = vec![0xaau8; len];
            k.xor_gen(&mut got, &srcs);
            prop_assert_eq!(&got, &want, "xor_gen {}", k.name());
            let mut acc = data[0].clone();
            k.xor_acc(&mut acc, &srcs[1..]);
            prop_assert_eq!(&acc, &want, "xor_acc {}", k.name());
            let (mut p, mut q) = (vec![1u8; len], vec![2u8; len]);
            k.pq_gen(&srcs, &mut p, &mut q);
            prop_assert_eq!(&p, &wp, "P {}", k.name());
            prop_assert_eq!(&q, &wq, "Q {}", k.name());
            let mut m = data[0].clone();
            k.mul_acc(c, &data[data.len() - 1], &mut m);
            prop_assert_eq!(&m, &wm, "mul_acc {}", k.name());
        }
    }

    /// Long blocks (the wide loops, the non-temporal stores from 16 KiB)
    /// at every alignment (the tails, and unaligned streams falling back to
    /// plain stores), any width, and the fused read-modify-write: every set
    /// against the reference.
    #[test]
    fn every_kernel_at_any_length_and_alignment(
        k in 1usize..20,
        len in 0usize..40_000,
        off in 0usize..64,
        c in any::<u8>(),
        seed in any::<u64>(),
    ) {
        // One buffer per block, the block starting `off` bytes in.
        let mut next = seed;
        let mut bytes = |n: usize| {
            next = next.wrapping_add(0x9e37_79b9_7f4a_7c15);
            reference::pattern(n, next)
        };
        let bufs: Vec<Vec<u8>> = (0..k).map(|_| bytes(len + off)).collect();
        let srcs: Vec<&[u8]> = bufs.iter().map(|b| &b[off..]).collect();
        let mut want = vec![0u8; len];
        reference::xor_gen(&mut want, &srcs);
        let (mut wp, mut wq) = (vec![0u8; len], vec![0u8; len]);
        reference::pq_gen(&srcs, &mut wp, &mut wq);
        let old = bytes(len);
        let new = bytes(len);
        let (mut up, mut uq) = (wp.clone(), wq.clone());
        reference::xor_gen(&mut up, &[&wp, &old, &new]);
        reference::mul_acc(c, &old, &mut uq);
        reference::mul_acc(c, &new, &mut uq);
        // Two combinations of the sources with coefficients from the seed.
        let coefs: Vec<(u8, u8)> = (0..k)
            .map(|i| (c.wrapping_add(i as u8), c.wrapping_mul(3).wrapping_add(7 * i as u8)))
            .collect();
        let (mut w0, mut w1) = (vec![0u8; len], vec![0u8; len]);
        for (s, &(a, b)) in srcs.iter().zip(&coefs) {
            reference::mul_acc(a, s, &mut w0);
            reference::mul_acc(b, s, &mut w1);
        }
        for kern in kernels::available() {
            let (mut o0, mut o1) = (vec![9u8; len], vec![9u8; len]);
            kern.mul_sum2(&srcs, &coefs, &mut o0, &mut o1, false);
            prop_assert_eq!(&o0, &w0, "mul_sum2 first {}", kern.name());
            prop_assert_eq!(&o1, &w1, "mul_sum2 second {}", kern.name());
            // Accumulating the same sums again cancels them.
            kern.mul_sum2(&srcs, &coefs, &mut o0, &mut o1, true);
            prop_assert!(o0.iter().chain(&o1).all(|&x| x == 0), "mul_sum2 acc {}", kern.name());
            let mut out = vec![0x55u8; len + off];
            kern.xor_gen(&mut out[off..], &srcs);
            prop_assert_eq!(&out[off..], &want[..], "xor_gen {}", kern.name());
            let mut acc = srcs[0].to_vec();
            kern.xor_acc(&mut acc, &srcs[1..]);
            prop_assert_eq!(&acc, &want, "xor_acc {}", kern.name());
            let (mut p, mut q) = (vec![1u8; len + off], vec![2u8; len + off]);
            kern.pq_gen(&srcs, &mut p[off..], &mut q[off..]);
            prop_assert_eq!(&p[off..], &wp[..], "P {}", kern.name());
            prop_assert_eq!(&q[off..], &wq[..], "Q {}", kern.name());
            let mut m = want.clone();
            let mut wm = want.clone();
            kern.mul_acc(c, srcs[k - 1], &mut m);
            reference::mul_acc(c, srcs[k - 1], &mut wm);
            prop_assert_eq!(&m, &wm, "mul_acc {}", kern.name());
            // Syndrome recovery: blocks x and y lost (y == k: P lost too),
            // every set against the reference's sums.
            for (x, y) in [(0, k - 1), (k / 2, k), (k - 1, k)] {
                if x >= y {
                    continue;
                }
                let (a, b) = (c, c.rotate_left(3) ^ 0x5a);
                let mut data = srcs.clone();
                data[x] = &[];
                if y < k {
                    data[y] = &[];
                }
                let p = (y < k).then_some(&wp[..]);
                let (mut sp, mut sq) = (vec![0u8; len], wq.clone());
                for (i, d) in data.iter().enumerate().filter(|(_, d)| !d.is_empty()) {
                    sp.iter_mut().zip(d.iter()).for_each(|(s, d)| *s ^= d);
                    reference::mul_acc(hetraid_parity::gf::pow2(i), d, &mut sq);
                }
                if let Some(p) = p {
                    sp.iter_mut().zip(p).for_each(|(s, p)| *s ^= p);
                }
                let mut w0 = vec![0u8; len];
                reference::mul_acc(a, &sp, &mut w0);
                reference::mul_acc(b, &sq, &mut w0);
                let mut w1 = sp.clone();
                reference::xor_gen(&mut w1, &[&sp, &w0]);
                let (mut o0, mut o1) = (vec![7u8; len + off], vec![8u8; len + off]);
                let syn = kernels::Syndromes { data: &data, p, q: &wq, a, b };
                kern.solve2(syn, &mut o0[off..], &mut o1[off..]);
                prop_assert_eq!(&o0[off..], &w0[..], "solve2 out0 {} x {} y {}", kern.name(), x, y);
                prop_assert_eq!(&o1[off..], &w1[..], "solve2 out1 {} x {} y {}", kern.name(), x, y);
            }
            let (mut p2, mut q2) = (wp.clone(), wq.clone());
            kern.pq_update(c, &old, &new, &mut p2, &mut q2);
            prop_assert_eq!(&p2, &up, "pq_update P {}", kern.name());
            prop_assert_eq!(&q2, &uq, "pq_update Q {}", kern.name());
        }
    }

    #[test]
    fn rmw_delta_equals_regeneration(mut data in rows(), idx in any::<prop::sample::Index>(), seed in any::<u8>()) {
        let len = data[0].len();
        let k = data.len();
        let i = idx.index(k);
        let (mut p, mut q) = (vec![0u8; len], vec![0u8; len]);
        {
            let srcs: Vec<&[u8]> = data.iter().map(|d| d.as_slice()).collect();
            pq_gen(&srcs, &mut p, &mut q);
        }
        let new: Vec<u8> = (0..len).map(|j| (j as u8).wrapping_mul(31) ^ seed).collect();
        pq_update(i, &data[i], &new, &mut p, Some(&mut q));
        data[i] = new;
        let srcs: Vec<&[u8]> = data.iter().map(|d| d.as_slice()).collect();
        let (mut wp, mut wq) = (vec![0u8; len], vec![0u8; len]);
        pq_gen(&srcs, &mut wp, &mut wq);
        prop_assert_eq!(p, wp);
        prop_assert_eq!(q, wq);
    }

    #[test]
    fn any_two_losses_recover(data in rows(), a in any::<prop::sample::Index>(), b in any::<prop::sample::Index>(), raid6 in any::<bool>()) {
        let k = data.len();
        let len = data[0].len();
        let mut p = vec![0u8; len];
        let mut q = vec![0u8; len];
        {
            let srcs: Vec<&[u8]> = data.iter().map(|d| d.as_slice()).collect();
            if raid6 { pq_gen(&srcs, &mut p, &mut q) } else { xor_gen(&mut p, &srcs) }
        }
        let mut row: Vec<Vec<u8>> = data.clone();
        row.push(p);
        if raid6 { row.push(q); }
        let want = row.clone();
        let n = row.len();
        let missing: Vec<usize> = if raid6 { vec![a.index(n), b.index(n)] } else { vec![a.index(n)] };
        for &m in &missing { row[m].iter_mut().for_each(|x| *x = 0x5c); }
        let mut refs: Vec<&mut [u8]> = row.iter_mut().map(|r| r.as_mut_slice()).collect();
        recover(&mut refs, k, &missing).unwrap();
        prop_assert_eq!(row, want, "missing {:?} of {} blocks", missing, n);
    }
}

#[test]
fn recovery_refuses_too_many_losses() {
    let mut a = vec![1u8; 8];
    let mut b = vec![2u8; 8];
    let mut p = vec![3u8; 8];
    let mut refs: Vec<&mut [u8]> = vec![&mut a, &mut b, &mut p];
    assert_eq!(
        recover(&mut refs, 2, &[0, 1]),
        Err(RecoverError::TooManyMissing {
            missing: 2,
            parity: 1
        })
    );
    assert_eq!(recover(&mut refs, 2, &[7]), Err(RecoverError::BadIndex(7)));
}

#[test]
fn known_q_vector() {
    // Q of data [1, 1, 1] = 1 ^ 2 ^ 4 = 7; P = 1.
    let d = [vec![1u8; 3], vec![1u8; 3], vec![1u8; 3]];
    let srcs: Vec<&[u8]> = d.iter().map(|x| x.as_slice()).collect();
    let (mut p, mut q) = (vec![0u8; 3], vec![0u8; 3]);
    pq_gen(&srcs, &mut p, &mut q);
    assert_eq!(p, vec![1u8; 3]);
    assert_eq!(q, vec![7u8; 3]);
}

/// Every pair of losses (data+data, data+P, data+Q, P+Q) of RAID-6 rows of
/// several widths, at a length with a wide body and a byte tail.
#[test]
fn every_recovery_pair_of_every_width() {
    for k in [1usize, 2, 3, 4, 5, 8, 17] {
        let len = 1000 + k;
        let data: Vec<Vec<u8>> = (0..k)
            .map(|i| {
                (0..len)
                    .map(|j| (i * 131 + j * 7 + (j >> 8)) as u8)
                    .collect()
            })
            .collect();
        let srcs: Vec<&[u8]> = data.iter().map(|d| d.as_slice()).collect();
        let (mut p, mut q) = (vec![0u8; len], vec![0u8; len]);
        pq_gen(&srcs, &mut p, &mut q);
        let mut want = data.clone();
        want.push(p);
        want.push(q);
        let n = k + 2;
        for x in 0..n {
            for y in x..n {
                let mut row = want.clone();
                row[x].fill(0xa5);
                row[y].fill(0x5a);
                let mut refs: Vec<&mut [u8]> = row.iter_mut().map(|r| r.as_mut_slice()).collect();
                recover(&mut refs, k, &[x, y]).unwrap();
                assert!(row == want, "k {k}: lost {x} and {y}");
            }
        }
    }
}

/// Zero-length rows recover to zero-length blocks (the AVX2 XOR once read
/// the first source's pointer of an empty source list here; proptest found
/// it with a zero length).
#[test]
fn zero_length_rows_recover() {
    for miss in [&[0usize][..], &[0, 1], &[1, 4], &[4, 5]] {
        let mut blocks: Vec<&mut [u8]> = (0..6).map(|_| <&mut [u8]>::default()).collect();
        hetraid_parity::recover(&mut blocks, 4, miss).expect("a valid row");
        assert!(blocks.iter().all(|b| b.is_empty()), "{miss:?}");
    }
}
