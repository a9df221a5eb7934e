//! Scrub verdicts: for every 4 KiB page row of a stripe whose redundancy does
//! not match, which member is wrong — when the layout can tell — and what a
//! repair may rewrite. Repair never writes over a copy it has not shown to be
//! the wrong one, unless the operator says which side to trust.
//!
//! - P+Q (RAID6): the syndromes locate one bad column. With dP = P ⊕ P' and
//!   dQ = Q ⊕ Q' (primes: recomputed from the data), a bad data column z gives
//!   dQ = g^z·dP in every byte; only dP ≠ 0 names P, only dQ ≠ 0 names Q
//!   (MD's raid6check, ZFS raidz2).
//! - Mirrors with three or more copies: majority vote per page; the minority
//!   copies are the bad ones.
//! - Single parity and two-way mirrors cannot tell: reported as such, and
//!   rewritten only with [`Trust::Data`] (parity from data, MD's repair) or
//!   [`Trust::Member`] (mirrors from that member's copy).

use crate::exec::StripeBufs;
use crate::plan::StripePlan;
use crate::units::PAGE;
use hetraid_parity::gf;

/// What a repair may rewrite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trust {
    /// Only columns located as wrong.
    Located,
    /// Also, where nothing is located, parity from the data (MD's repair).
    Data,
    /// Also, where nothing is located, mirror copies from this member's copy.
    Member(usize),
    /// Crash resync of dirty regions: redundancy from the data (parity) or the
    /// first copy (mirrors), without locating: a write in flight at the crash
    /// may have reached any subset of the columns, and either content is right.
    Resync,
}

/// One page row that did not match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageMismatch {
    /// Page index within the stripe's chunks (0 = the chunks' first 4 KiB).
    pub page: u32,
    /// Columns shown to be wrong; None when the layout cannot tell.
    pub located: Option<Vec<usize>>,
    /// Columns rewritten (their buffers hold the new content of this page).
    pub fixed: Vec<usize>,
}

/// Verify every page row a scrub plan read; with `repair`, put the content to
/// write into the buffers of the columns listed in each mismatch's `fixed`.
pub fn verify(sp: &StripePlan, bufs: &mut StripeBufs, repair: Option<Trust>) -> Vec<PageMismatch> {
    let mut out = Vec::new();
    for run in &sp.runs {
        for p in 0..run.pages {
            let page = run.page + p;
            let at = (page - bufs.lo) as usize * PAGE as usize;
            let r = at..at + PAGE as usize;
            let read = |c: usize| run.read.contains(c);
            let m: Vec<_> = match sp.parity_count {
                0 => mirrors(sp, bufs, r, &read, repair),
                1 => single_parity(sp, bufs, r, repair).into_iter().collect(),
                _ => pq(sp, bufs, r, repair).into_iter().collect(),
            };
            out.extend(m.into_iter().map(|(located, fixed)| PageMismatch {
                page,
                located,
                fixed,
            }));
        }
    }
    out
}

type Verdict = Option<(Option<Vec<usize>>, Vec<usize>)>;

fn single_parity(
    sp: &StripePlan,
    bufs: &mut StripeBufs,
    r: std::ops::Range<usize>,
    repair: Option<Trust>,
) -> Verdict {
    let k = sp.data_count;
    let mut p = vec![0u8; r.len()];
    {
        let srcs: Vec<&[u8]> = bufs.cols[..k].iter().map(|c| &c[r.clone()]).collect();
        hetraid_parity::xor_gen(&mut p, &srcs);
    }
    if bufs.cols[k][r.clone()] == p[..] {
        return None;
    }
    let fixed = match repair {
        Some(Trust::Data | Trust::Resync) => {
            bufs.cols[k][r].copy_from_slice(&p);
            vec![k]
        }
        _ => vec![],
    };
    Some((None, fixed))
}

fn pq(
    sp: &StripePlan,
    bufs: &mut StripeBufs,
    r: std::ops::Range<usize>,
    repair: Option<Trust>,
) -> Verdict {
    let k = sp.data_count;
    let (mut p, mut q) = (vec![0u8; r.len()], vec![0u8; r.len()]);
    {
        let srcs: Vec<&[u8]> = bufs.cols[..k].iter().map(|c| &c[r.clone()]).collect();
        hetraid_parity::pq_gen(&srcs, &mut p, &mut q);
    }
    let dp: Vec<u8> = p
        .iter()
        .zip(&bufs.cols[k][r.clone()])
        .map(|(a, b)| a ^ b)
        .collect();
    let dq: Vec<u8> = q
        .iter()
        .zip(&bufs.cols[k + 1][r.clone()])
        .map(|(a, b)| a ^ b)
        .collect();
    let p_ok = dp.iter().all(|&b| b == 0);
    let q_ok = dq.iter().all(|&b| b == 0);
    let located: Option<usize> = match (p_ok, q_ok) {
        (true, true) => return None,
        (false, true) => Some(k),
        (true, false) => Some(k + 1),
        (false, false) => bad_data_column(&dp, &dq).filter(|&z| z < k),
    };
    let fixed = match (located, repair) {
        (_, None) => vec![],
        (Some(z), Some(t)) if t != Trust::Resync => {
            if z < k {
                // d_z ⊕ dP is the data that makes P (and Q) match.
                bufs.cols[z][r.clone()]
                    .iter_mut()
                    .zip(&dp)
                    .for_each(|(d, e)| *d ^= e);
            } else if z == k {
                bufs.cols[k][r].copy_from_slice(&p);
            } else {
                bufs.cols[k + 1][r].copy_from_slice(&q);
            }
            vec![z]
        }
        (_, Some(Trust::Data | Trust::Resync)) => {
            bufs.cols[k][r.clone()].copy_from_slice(&p);
            bufs.cols[k + 1][r].copy_from_slice(&q);
            vec![k, k + 1]
        }
        _ => vec![],
    };
    Some((located.map(|z| vec![z]), fixed))
}

/// The data column z with dQ = g^z·dP in every byte, if there is one.
fn bad_data_column(dp: &[u8], dq: &[u8]) -> Option<usize> {
    let mut z: Option<usize> = None;
    for (&a, &b) in dp.iter().zip(dq) {
        match (a, b) {
            (0, 0) => {}
            (0, _) | (_, 0) => return None,
            _ => {
                let e = (gf::LOG[b as usize] as usize + 255 - gf::LOG[a as usize] as usize) % 255;
                if z.is_some_and(|z| z != e) {
                    return None;
                }
                z = Some(e);
            }
        }
    }
    z
}

fn mirrors(
    sp: &StripePlan,
    bufs: &mut StripeBufs,
    r: std::ops::Range<usize>,
    read: &dyn Fn(usize) -> bool,
    repair: Option<Trust>,
) -> Vec<(Option<Vec<usize>>, Vec<usize>)> {
    let mut out = Vec::new();
    for i in 0..sp.data_count {
        let group: Vec<usize> = std::iter::once(i)
            .chain(sp.copies_of(i))
            .filter(|&c| read(c))
            .collect();
        if group.len() < 2 {
            continue;
        }
        let first = bufs.cols[group[0]][r.clone()].to_vec();
        if group[1..]
            .iter()
            .all(|&c| bufs.cols[c][r.clone()] == first[..])
        {
            continue;
        }
        // Majority: a content held by more than half of the copies read.
        let majority = group.iter().copied().find(|&c| {
            let v = &bufs.cols[c][r.clone()];
            2 * group
                .iter()
                .filter(|&&o| bufs.cols[o][r.clone()] == *v)
                .count()
                > group.len()
        });
        let (located, source) = match majority {
            Some(m) => {
                let v = bufs.cols[m][r.clone()].to_vec();
                let bad: Vec<usize> = group
                    .iter()
                    .copied()
                    .filter(|&c| bufs.cols[c][r.clone()] != v[..])
                    .collect();
                (
                    Some(bad),
                    (repair.is_some() && repair != Some(Trust::Resync)).then_some(m),
                )
            }
            None => (
                None,
                match repair {
                    Some(Trust::Member(member)) => group
                        .iter()
                        .copied()
                        .find(|&c| sp.columns[c].loc.member == member),
                    _ => None,
                },
            ),
        };
        let source = match repair {
            Some(Trust::Resync) => Some(group[0]),
            _ => source,
        };
        let fixed = match source {
            Some(s) => {
                let v = bufs.cols[s][r.clone()].to_vec();
                let mut f = Vec::new();
                for &c in &group {
                    if bufs.cols[c][r.clone()] != v[..] {
                        bufs.cols[c][r.clone()].copy_from_slice(&v);
                        f.push(c);
                    }
                }
                f
            }
            None => vec![],
        };
        out.push((located, fixed));
    }
    out
}
