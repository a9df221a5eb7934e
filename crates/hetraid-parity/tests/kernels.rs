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
