//! The DESIGN.md invariants, for every layout, with proptest (failing cases are
//! printed and their seeds persisted under proptest-regressions/ for replay).

use hetraid_core::exec::MemArray;
use hetraid_core::layout::{
    build, max_bundles, swrr_cycle, LayoutKind, LayoutSpec, ParityOrder, Preset, RaidXLevel,
    S2Raid5,
};
use hetraid_core::plan::{ArrayState, MemberState, Planner, Request, WritePolicy};
use hetraid_core::{Layout, MemberKind, Redundancy};
use proptest::prelude::*;
use std::collections::HashSet;

const CHUNK: u64 = 8192;

/// A small layout of every kind, members of a few chunks each.
fn any_spec() -> impl Strategy<Value = LayoutSpec> {
    let uniform = |kind: LayoutKind, n: usize| LayoutSpec {
        kind,
        chunk_bytes: CHUNK,
        sizes: vec![CHUNK * 6; n],
        kinds: vec![],
    };
    prop_oneof![
        (1usize..6).prop_map(move |n| uniform(LayoutKind::Raid0, n)),
        (2usize..5).prop_map(move |n| uniform(LayoutKind::Raid1, n)),
        (2usize..7, 2usize..4)
            .prop_filter("copies <= n", |(n, c)| c <= n)
            .prop_map(move |(n, c)| uniform(LayoutKind::Raid10 { copies: c }, n)),
        (2usize..7).prop_map(move |n| uniform(LayoutKind::Raid4, n)),
        (2usize..7, 0usize..4).prop_map(move |(n, o)| {
            let order = [
                ParityOrder::LeftSymmetric,
                ParityOrder::LeftAsymmetric,
                ParityOrder::RightSymmetric,
                ParityOrder::RightAsymmetric,
            ][o];
            uniform(LayoutKind::Raid5 { order }, n)
        }),
        (4usize..8).prop_map(move |n| uniform(LayoutKind::Raid6, n)),
        proptest::collection::vec(0u64..4, 2..7)
            .prop_filter("some weight", |w| w.iter().sum::<u64>() > 0)
            .prop_map(move |w| uniform(LayoutKind::RaidH { weights: w.clone() }, w.len())),
        proptest::collection::vec(0u64..4, 4..8)
            .prop_filter("two parities fit", |w| {
                let t = w.iter().sum::<u64>();
                t > 0 && w.iter().all(|x| 2 * x <= t)
            })
            .prop_map(move |w| uniform(LayoutKind::RaidH6 { weights: w.clone() }, w.len())),
        (0usize..6, 3usize..6).prop_map(move |(p, n)| {
            let preset = [
                Preset::Raid4S,
                Preset::Raid4N,
                Preset::Raid5S,
                Preset::RaidF5,
                Preset::RaidE,
                Preset::Raid5NSS,
            ][p];
            uniform(LayoutKind::Preset(preset), n.max(4))
        }),
        (0usize..2).prop_map(move |spare| LayoutSpec {
            kind: LayoutKind::S2Raid5 {
                group: 3,
                partitions: None,
                spare_partitions: spare
            },
            chunk_bytes: CHUNK,
            sizes: vec![CHUNK * 12; 9],
            kinds: vec![],
        }),
        (2usize..4).prop_map(move |m| uniform(
            LayoutKind::S2Raid10 {
                partitions: None,
                spare_partitions: 0,
            },
            2 * m
        )),
        // Declustered: groups of width G over N members with S spares a row.
        (5usize..10, 2usize..6, 1usize..3, 0usize..3)
            .prop_filter("fits", |(n, g, p, s)| g + s <= *n && *g > *p)
            .prop_map(move |(n, g, p, s)| LayoutSpec {
                kind: LayoutKind::Declustered {
                    width: g,
                    parity: p,
                    spares: s,
                },
                chunk_bytes: CHUNK,
                sizes: vec![CHUNK * 40; n],
                kinds: vec![],
            }),
        (
            proptest::collection::vec(1u64..8, 3..6),
            0usize..5,
            any::<bool>()
        )
            .prop_map(move |(sz, l, variable)| {
                let (c, level) = [
                    (2, RaidXLevel::X1),
                    (3, RaidXLevel::X5),
                    (3, RaidXLevel::X0),
                    (4, RaidXLevel::X6),
                    (4, RaidXLevel::X10),
                ][l];
                let mut sizes: Vec<u64> = sz.iter().map(|s| s * CHUNK).collect();
                while sizes.len() < c {
                    sizes.push(4 * CHUNK);
                }
                // RAIDX5/6: every other spec places parity by weights (a member
                // of weight 0 among them).
                let weights = if matches!(level, RaidXLevel::X5 | RaidXLevel::X6) && sz[0] % 2 == 0
                {
                    (0..sizes.len() as u64)
                        .map(|i| (i * 7 + sz[0]) % 4)
                        .collect()
                } else {
                    vec![]
                };
                LayoutSpec {
                    kind: LayoutKind::RaidX {
                        // 0: widths chosen per bundle (to the capacity bound).
                        chunks_per_bundle: if variable { 0 } else { c },
                        level: Some(level),
                        weights,
                    },
                    chunk_bytes: CHUNK,
                    sizes,
                    kinds: vec![],
                }
            }),
        (2usize..4).prop_map(move |n| {
            // HDD-1: the parity and the smallest log; HDD-2: the log.
            let log = hetraid_core::journal::log_bytes_min(
                n + 2,
                CHUNK,
                &hetraid_core::journal::Reserve::hpda(n + 2),
            )
            .div_ceil(CHUNK)
                * CHUNK;
            let mut sizes = vec![CHUNK * 6; n];
            sizes.push(CHUNK * 6 + log);
            sizes.push(log);
            LayoutSpec {
                kind: LayoutKind::Hpda,
                chunk_bytes: CHUNK,
                sizes,
                kinds: vec![],
            }
        }),
    ]
}

fn built(spec: &LayoutSpec) -> Box<dyn Layout> {
    build(spec).unwrap_or_else(|e| panic!("{spec:?}: {e}"))
}

/// A deterministic byte pattern for request `seq`.
fn pattern(seq: u64, len: usize) -> Vec<u8> {
    let mut x = seq.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, ..ProptestConfig::default() })]

    /// Every logical chunk has exactly one data place, no place holds two chunks,
    /// no stripe has two chunks on one member, and everything fits in the members.
    #[test]
    fn layouts_are_bijections(spec in any_spec()) {
        let l = built(&spec);
        let mut seen: HashSet<(usize, u64)> = HashSet::new();
        let chunks = l.capacity_bytes() / l.chunk_bytes();
        let mut data_chunks = 0u64;
        prop_assert!(l.stripe_count() > 0);
        for s in 0..l.stripe_count() {
            let st = l.stripe(s);
            // Every stripe holds data_per_stripe() data chunks, except
            // where widths vary (at most that many).
            let k = l.data_in_stripe(s);
            prop_assert_eq!(st.data.len(), k);
            prop_assert!(k <= l.data_per_stripe() && k > 0);
            data_chunks += k as u64;
            let mut members = HashSet::new();
            for c in st.all() {
                prop_assert!(members.insert(c.member), "stripe {} puts two chunks on member {}", s, c.member);
                prop_assert!(seen.insert((c.member, c.offset)), "two chunks at member {} offset {}", c.member, c.offset);
                prop_assert!(c.offset + l.chunk_bytes() <= spec.sizes[c.member]);
                prop_assert_eq!(c.offset % l.chunk_bytes(), 0);
            }
            for i in 0..k {
                let lc = l.logical_chunk(s, i);
                prop_assert_eq!(l.locate_chunk(lc), (s, i));
                prop_assert!(lc < chunks);
            }
        }
        prop_assert_eq!(data_chunks, chunks, "the stripes hold the capacity");
    }

    /// Random writes (normal and degraded) applied to an in-memory array read back
    /// like a plain disk, scrub finds parity consistent, and a rebuild restores the
    /// failed member byte for byte.
    #[test]
    fn plans_match_a_reference_disk(
        spec in any_spec(),
        ops in proptest::collection::vec((any::<u64>(), 1u64..40_000, any::<bool>()), 1..12),
        fail_pick in any::<prop::sample::Index>(),
        fail_at in 0usize..12,
        policy in 0usize..5,
    ) {
        let l = built(&spec);
        let n = l.members();
        let cap = l.capacity_bytes();
        let policy = [WritePolicy::Md, WritePolicy::Modthresh, WritePolicy::RmwAlways, WritePolicy::Cost, WritePolicy::ModthreshStripe][policy];
        let kinds: Vec<MemberKind> = (0..n).map(|m| if m % 2 == 0 { MemberKind::Hdd } else { MemberKind::Ssd }).collect();
        let planner = Planner::new(l.as_ref(), policy, kinds.iter().map(|k| k.default_service()).collect());
        let mut arr = MemArray::new(&spec.sizes);
        let mut reference = vec![0u8; cap as usize];
        let mut state = ArrayState::healthy(n);
        let tolerance = l.redundancy().tolerance();
        let victim = fail_pick.index(n);
        for (seq, (off, len, is_write)) in ops.iter().enumerate() {
            if seq == fail_at && tolerance > 0 {
                state.members[victim] = MemberState::Failed;
                arr.failed[victim] = true;
            }
            let off = off % cap;
            let len = (*len).min(cap - off);
            if *is_write {
                let mut data = pattern(seq as u64, len as usize);
                let plan = planner.plan(&Request::write(off, len), &state).unwrap();
                arr.execute(&plan, &mut data).map_err(|e| TestCaseError::fail(format!("write {off}+{len}: {e}")))?;
                reference[off as usize..(off + len) as usize].copy_from_slice(&data);
            } else {
                let mut out = vec![0xeeu8; len as usize];
                let plan = planner.plan(&Request::read(off, len), &state).unwrap();
                arr.execute(&plan, &mut out).map_err(|e| TestCaseError::fail(format!("read {off}+{len}: {e}")))?;
                prop_assert!(out == reference[off as usize..(off + len) as usize], "read {}+{} differs", off, len);
            }
        }
        // Everything reads back, degraded or not.
        let mut all = vec![0u8; cap as usize];
        let plan = planner.plan(&Request::read(0, cap), &state).unwrap();
        arr.execute(&plan, &mut all).map_err(TestCaseError::fail)?;
        prop_assert!(all == reference, "full read differs from the reference");
        // Rebuild a failed member onto a blank replacement, in place.
        if state.members[victim] == MemberState::Failed {
            arr.failed[victim] = false;
            arr.members[victim].iter_mut().for_each(|b| *b = 0xa5);
            for s in 0..l.stripe_count() {
                if let Some(sp) = planner.rebuild_stripe(s, &state, &[victim], None).unwrap() {
                    arr.execute_rebuild(&sp).map_err(TestCaseError::fail)?;
                }
            }
            state.members[victim] = MemberState::InSync;
            let plan = planner.plan(&Request::read(0, cap), &state).unwrap();
            let mut again = vec![0u8; cap as usize];
            arr.execute(&plan, &mut again).map_err(TestCaseError::fail)?;
            prop_assert!(again == reference, "read after rebuild differs");
        }
        // Redundancy is consistent everywhere.
        if l.redundancy() != Redundancy::None {
            for s in 0..l.stripe_count() {
                if let Some(sp) = planner.scrub_stripe(s, &state, false) {
                    let bad = arr.execute_scrub(&sp).map_err(TestCaseError::fail)?;
                    prop_assert_eq!(bad, 0, "stripe {} redundancy mismatch", s);
                }
            }
        }
    }

    /// Any two failures of a RAID6 (and weighted RAID6) stripe lose nothing.
    #[test]
    fn raid6_survives_any_two(n in 4usize..8, a in any::<prop::sample::Index>(), b in any::<prop::sample::Index>(), seed in any::<u64>(), weighted in any::<bool>(), wseed in any::<u64>()) {
        // Weighted: the last two members (say, SSDs) heavier, every weight
        // at most half the sum.
        let kind = if weighted {
            let mut w: Vec<u64> = (0..n).map(|i| (wseed >> (i * 2)) & 1).collect();
            w[n - 1] = 2;
            w[n - 2] = 2;
            LayoutKind::RaidH6 { weights: w }
        } else {
            LayoutKind::Raid6
        };
        let spec = LayoutSpec { kind, chunk_bytes: CHUNK, sizes: vec![CHUNK * 4; n], kinds: vec![] };
        let l = built(&spec);
        let cap = l.capacity_bytes();
        let planner = Planner::new(l.as_ref(), WritePolicy::Md, vec![]);
        let mut arr = MemArray::new(&spec.sizes);
        let mut data = pattern(seed, cap as usize);
        arr.execute(&planner.plan(&Request::write(0, cap), &ArrayState::healthy(n)).unwrap(), &mut data).unwrap();
        let failed = [a.index(n), b.index(n)];
        let state = ArrayState::with_failed(n, &failed);
        failed.iter().for_each(|&f| arr.failed[f] = true);
        // A degraded write, then a full read.
        let mut w = pattern(seed ^ 1, 20_000);
        let off = seed % (cap - 20_000);
        arr.execute(&planner.plan(&Request::write(off, 20_000), &state).unwrap(), &mut w).unwrap();
        data[off as usize..off as usize + 20_000].copy_from_slice(&w);
        let mut out = vec![0u8; cap as usize];
        arr.execute(&planner.plan(&Request::read(0, cap), &state).unwrap(), &mut out).unwrap();
        prop_assert!(out == data);
    }

    /// RAIDH: over one cycle each member holds parity exactly in proportion to its weight.
    #[test]
    fn raidh_parity_is_proportional(w in proptest::collection::vec(0u64..6, 2..8)) {
        prop_assume!(w.iter().sum::<u64>() > 0);
        let cycle = swrr_cycle(&w);
        for (d, wd) in w.iter().enumerate() {
            prop_assert_eq!(cycle.iter().filter(|&&x| x == d).count() as u64, *wd);
        }
    }

    /// Weighted RAID6: over one cycle each member holds 2 w_d of the 2 W
    /// parity chunks, P and Q never on one member.
    #[test]
    fn raidh6_parity_is_proportional(w in proptest::collection::vec(0u64..6, 4..8)) {
        let t = w.iter().sum::<u64>();
        prop_assume!(t > 0 && w.iter().all(|x| 2 * x <= t));
        let cycle = hetraid_core::layout::swrr_pairs(&w);
        prop_assert!(cycle.iter().all(|(p, q)| p != q));
        for (d, wd) in w.iter().enumerate() {
            let held = cycle.iter().filter(|(p, q)| *p == d || *q == d).count() as u64;
            prop_assert_eq!(held, 2 * wd);
        }
    }

    /// RAIDX: the allocator reaches the brute-force maximum on small member sets.
    #[test]
    fn raidx_allocator_is_maximal(sizes in proptest::collection::vec(0u64..5, 2..5), c in 1usize..4) {
        prop_assume!(sizes.len() >= c);
        let best = brute_force_bundles(&sizes, c);
        prop_assert_eq!(max_bundles(&sizes, c), best);
        if best > 0 {
            let l = built(&LayoutSpec {
                kind: LayoutKind::RaidX { chunks_per_bundle: c, level: Some(RaidXLevel::X0), weights: vec![] },
                chunk_bytes: 4096,
                sizes: sizes.iter().map(|s| s * 4096).collect(),
                kinds: vec![],
            });
            prop_assert_eq!(l.stripe_count(), best);
        }
    }

    /// RAIDX living (issue 14): after any sequence of members added,
    /// enlarged and lost (with the array shrunk to what the survivors hold),
    /// the bundle count is the brute-force maximum for the member set, no
    /// bundle has two chunks on one member, and no slot is used twice.
    #[test]
    fn raidx_adds_and_removes_keep_the_maximum(
        start in proptest::collection::vec(1u64..4, 3..5),
        c in 1usize..4,
        ops in proptest::collection::vec((0u8..3, any::<prop::sample::Index>(), 1u64..3), 1..4),
    ) {
        use hetraid_core::layout::raidx_grow::{check_table, plan_grow, plan_remove, Place};
        prop_assume!(start.len() >= c);
        let x = hetraid_core::layout::RaidX::new(
            &start.iter().map(|s| s * 4096).collect::<Vec<_>>(), 4096, c, Some(RaidXLevel::X0),
        );
        prop_assume!(x.is_ok());
        let mut table: Vec<Vec<Place>> = x.unwrap().places();
        let mut caps = start.clone();
        for (op, which, amount) in ops {
            // Small sets: the brute force is exponential.
            match op {
                0 if caps.len() < 5 => caps.push(amount),
                0 => continue,
                1 => {
                    let m = which.index(caps.len());
                    caps[m] += amount;
                }
                _ => {
                    // Lose a member still holding chunks, keeping what the
                    // survivors can hold.
                    let live: Vec<usize> = (0..caps.len()).filter(|&m| caps[m] > 0).collect();
                    if live.len() <= c {
                        continue;
                    }
                    let lost = live[which.index(live.len())];
                    let mut survivors = caps.clone();
                    survivors[lost] = 0;
                    let keep = brute_force_bundles(&survivors, c).min(table.len() as u64);
                    let p = plan_remove(&table, &caps, c, lost, keep).unwrap();
                    table = p.apply(&table);
                    caps = survivors;
                    prop_assert_eq!(table.len() as u64, keep);
                    prop_assert!(check_table(&table, &caps, c).is_ok());
                    // Then grow back into the room the loss left.
                }
            }
            let p = plan_grow(&table, &caps, c).unwrap();
            table = p.apply(&table);
            prop_assert_eq!(table.len() as u64, brute_force_bundles(&caps, c), "caps {:?} c {}", caps, c);
            prop_assert!(check_table(&table, &caps, c).is_ok());
        }
    }

    /// S2-RAID5: for any single failed member the affected subRAIDs' survivors are
    /// pairwise disjoint, and the scheduler makes one stream per affected subRAID.
    #[test]
    fn s2_survivors_are_disjoint(gi in 0usize..3, nf in any::<prop::sample::Index>(), victim in any::<prop::sample::Index>()) {
        let g = [2usize, 3, 5][gi];
        let n = 2 + nf.index(g - 1); // 2..=g groups
        let r = n * g;
        let sizes = vec![4096 * g as u64 * 2; r];
        let l = S2Raid5::new(&sizes, 4096, g, None, 0).unwrap();
        let v = victim.index(r);
        let mut used: HashSet<usize> = HashSet::new();
        let mut affected = 0;
        for x in 0..g * g {
            let members: Vec<usize> = (0..n).map(|i| l.member_of(x, i)).collect();
            if members.contains(&v) {
                affected += 1;
                for m in members.into_iter().filter(|&m| m != v) {
                    prop_assert!(used.insert(m), "member {} serves two rebuild streams", m);
                }
            }
        }
        prop_assert_eq!(affected, g);
        let state = ArrayState::with_failed(r, &[v]);
        let sched = hetraid_core::rebuild::schedule(&l, &state, &[v], false).unwrap();
        prop_assert_eq!(sched.streams.len(), g);
    }
}

fn brute_force_bundles(sizes: &[u64], c: usize) -> u64 {
    // Every subset of members tried as the next bundle, remembered by the
    // (sorted) free counts: the answer depends on nothing else.
    fn go(
        free: &mut Vec<u64>,
        c: usize,
        memo: &mut std::collections::HashMap<Vec<u64>, u64>,
    ) -> u64 {
        let mut key = free.clone();
        key.sort_unstable();
        if let Some(&b) = memo.get(&key) {
            return b;
        }
        let b = search(free, c, memo);
        memo.insert(key, b);
        b
    }
    fn search(
        free: &mut Vec<u64>,
        c: usize,
        memo: &mut std::collections::HashMap<Vec<u64>, u64>,
    ) -> u64 {
        let n = free.len();
        let mut best = 0;
        // Try every c-subset of members with free space as the next bundle.
        let mut idx: Vec<usize> = (0..c).collect();
        loop {
            if idx.iter().all(|&i| free[i] > 0) {
                idx.iter().for_each(|&i| free[i] -= 1);
                best = best.max(1 + go(free, c, memo));
                idx.iter().for_each(|&i| free[i] += 1);
            }
            // next combination
            let mut i = c;
            loop {
                if i == 0 {
                    return best;
                }
                i -= 1;
                if idx[i] != i + n - c {
                    break;
                }
                if i == 0 && idx[0] == n - c {
                    return best;
                }
            }
            idx[i] += 1;
            for j in i + 1..c {
                idx[j] = idx[j - 1] + 1;
            }
        }
    }
    go(&mut sizes.to_vec(), c, &mut Default::default())
}

#[test]
fn raid4_and_raid5_fall_out_of_raidh_weights() {
    let sizes = vec![CHUNK * 10; 5];
    let h5 = built(&LayoutSpec {
        kind: LayoutKind::RaidH {
            weights: vec![1; 5],
        },
        chunk_bytes: CHUNK,
        sizes: sizes.clone(),
        kinds: vec![],
    });
    let h4 = built(&LayoutSpec {
        kind: LayoutKind::RaidH {
            weights: vec![0, 0, 0, 0, 5],
        },
        chunk_bytes: CHUNK,
        sizes: sizes.clone(),
        kinds: vec![],
    });
    let r4 = built(&LayoutSpec {
        kind: LayoutKind::Raid4,
        chunk_bytes: CHUNK,
        sizes: sizes.clone(),
        kinds: vec![],
    });
    let r5 = built(&LayoutSpec {
        kind: LayoutKind::Raid5 {
            order: ParityOrder::RightAsymmetric,
        },
        chunk_bytes: CHUNK,
        sizes,
        kinds: vec![],
    });
    for s in 0..10 {
        assert_eq!(h4.stripe(s), r4.stripe(s), "stripe {s}");
        assert_eq!(
            h5.stripe(s).parity,
            vec![hetraid_core::ChunkLoc {
                member: (s % 5) as usize,
                offset: s * CHUNK
            }]
        );
        assert_eq!(
            h5.stripe(s),
            r5.stripe(s),
            "RAIDH {{1,1,1,1,1}} is right-asymmetric RAID5"
        );
    }
}

/// RAID4S of four data members and an SSD, 64 KiB chunks.
fn raid4s_4_plus_1() -> Box<dyn hetraid_core::layout::Layout> {
    built(&LayoutSpec {
        kind: LayoutKind::Preset(Preset::Raid4S),
        chunk_bytes: 65536,
        sizes: vec![1 << 30; 5],
        kinds: vec![],
    })
}

/// [Wacha 2012] ch. 3–4: on a 4+1 array with 64 KiB chunks, writes of 64 KiB and less are RMW,
/// md switches to RCW at 128 KiB, modthresh keeps 128 KiB as RMW.
#[test]
fn modthresh_keeps_128k_writes_rmw() {
    use hetraid_core::plan::Mode;
    let l = raid4s_4_plus_1();
    let state = ArrayState::healthy(5);
    let modes = |policy, len| {
        let p = Planner::new(l.as_ref(), policy, vec![])
            .plan(&Request::write(0, len), &state)
            .unwrap();
        p.stripes
            .iter()
            .flat_map(|s| s.runs.iter().map(|r| r.mode))
            .collect::<Vec<_>>()
    };
    for len in [4096u64, 16384, 65536] {
        assert_eq!(modes(WritePolicy::Md, len), vec![Mode::Rmw], "md {len}");
    }
    assert_eq!(modes(WritePolicy::Md, 131072), vec![Mode::Rcw]);
    assert_eq!(modes(WritePolicy::Modthresh, 131072), vec![Mode::Rmw]);
    assert_eq!(modes(WritePolicy::Md, 262144), vec![Mode::Full]);
    // RMW of 128 KiB touches the two data disks and the SSD parity only.
    let p = Planner::new(l.as_ref(), WritePolicy::Modthresh, vec![])
        .plan(&Request::write(0, 131072), &state)
        .unwrap();
    let io = p.member_io(5);
    assert_eq!(
        io.iter().map(|m| m.read_pages).collect::<Vec<_>>(),
        vec![16, 16, 0, 0, 16]
    );
    assert_eq!(
        io.iter().map(|m| m.write_pages).collect::<Vec<_>>(),
        vec![16, 16, 0, 0, 16]
    );
}

/// modthresh decided per page row mixes RMW and RCW rows within one
/// stripe for a write of 2.5 chunks at a page offset (some rows cover three
/// columns, some two), which reads more than either alone; modthresh-stripe
/// decides once per stripe: every row of a stripe has one mode, and it
/// reads fewer members than the mix.
#[test]
fn modthresh_stripe_never_mixes_modes_within_a_stripe() {
    use hetraid_core::plan::Mode;
    let l = raid4s_4_plus_1();
    let state = ArrayState::healthy(5);
    let plan = |policy| {
        Planner::new(l.as_ref(), policy, vec![])
            .plan(&Request::write(8192, 160 << 10), &state)
            .unwrap()
    };
    let modes = |p: &hetraid_core::plan::Plan| {
        let mut m: Vec<Mode> = p.stripes[0].runs.iter().map(|r| r.mode).collect();
        m.dedup();
        m
    };
    // Members read (each costs a disk a positioning): mixing rows reads
    // every data member; one mode reads fewer.
    let members_read =
        |p: &hetraid_core::plan::Plan| p.member_io(5).iter().filter(|m| m.read_pages > 0).count();
    let per_row = plan(WritePolicy::Modthresh);
    assert!(modes(&per_row).len() > 1, "{:?}", modes(&per_row));
    let per_stripe = plan(WritePolicy::ModthreshStripe);
    assert_eq!(modes(&per_stripe).len(), 1, "{:?}", modes(&per_stripe));
    assert!(
        members_read(&per_stripe) < members_read(&per_row),
        "{} vs {}",
        members_read(&per_stripe),
        members_read(&per_row)
    );
}

/// The cost policy keeps a RAID4S half-stripe write on the fast parity member.
#[test]
fn cost_policy_prefers_the_fast_member() {
    use hetraid_core::plan::Mode;
    let kinds = [
        MemberKind::Hdd,
        MemberKind::Hdd,
        MemberKind::Hdd,
        MemberKind::Hdd,
        MemberKind::Ssd,
    ];
    let spec = LayoutSpec {
        kind: LayoutKind::Raid4,
        chunk_bytes: 65536,
        sizes: vec![1 << 30; 5],
        kinds: kinds.to_vec(),
    };
    let l = built(&spec);
    let p = Planner::new(
        l.as_ref(),
        WritePolicy::Cost,
        kinds.iter().map(|k| k.default_service()).collect(),
    )
    .plan(&Request::write(0, 131072), &ArrayState::healthy(5))
    .unwrap();
    assert_eq!(p.stripes[0].runs[0].mode, Mode::Rmw);
}

#[test]
fn out_of_range_and_data_loss_are_errors() {
    let spec = LayoutSpec {
        kind: LayoutKind::Raid5 {
            order: ParityOrder::LeftSymmetric,
        },
        chunk_bytes: CHUNK,
        sizes: vec![CHUNK * 4; 4],
        kinds: vec![],
    };
    let l = built(&spec);
    let cap = l.capacity_bytes();
    let p = Planner::new(l.as_ref(), WritePolicy::Md, vec![]);
    assert!(p
        .plan(&Request::write(cap - 1, 2), &ArrayState::healthy(4))
        .is_err());
    assert!(p
        .plan(&Request::read(u64::MAX, 2), &ArrayState::healthy(4))
        .is_err());
    let two = ArrayState::with_failed(4, &[0, 1]);
    assert!(matches!(
        p.plan(&Request::read(0, cap), &two),
        Err(hetraid_core::PlanError::DataLost { .. })
    ));
}

proptest! {
    /// data_loc (the fast path) agrees with the full stripe for every layout, and
    /// direct_read agrees with the planner's direct pieces.
    #[test]
    fn fast_path_agrees_with_the_planner(spec in any_spec(), off in any::<u64>(), len in 1u64..9000, failed in proptest::option::of(0usize..9)) {
        let l = built(&spec);
        for s in 0..l.stripe_count() {
            let st = l.stripe(s);
            for (i, c) in st.data.iter().enumerate() {
                prop_assert_eq!(l.data_loc(s, i), *c);
            }
        }
        let n = l.members();
        let state = ArrayState::with_failed(n, &failed.filter(|f| *f < n).into_iter().collect::<Vec<_>>());
        let p = Planner::new(l.as_ref(), WritePolicy::Md, vec![]);
        let off = off % l.capacity_bytes();
        if let Some((m, mo)) = p.direct_read(off, len, &state) {
            let plan = p.plan(&Request::read(off, len), &state).unwrap();
            prop_assert_eq!(plan.stripes.len(), 1);
            let sp = &plan.stripes[0];
            prop_assert!(sp.runs.is_empty());
            let piece = sp.pieces[0];
            let loc = sp.columns[piece.direct.unwrap()].loc;
            prop_assert_eq!((loc.member, loc.offset + piece.chunk_offset), (m, mo));
        }
    }

    /// Balanced reads (every policy, random member loads, a member failed)
    /// read each chunk from one of its live copies: the same bytes as the
    /// first copy holds.
    #[test]
    fn balanced_reads_come_from_live_copies(
        spec in any_spec(),
        off in any::<u64>(),
        len in 1u64..200_000,
        failed in proptest::option::of(0usize..9),
        policy in 0u8..6,
        seed in any::<u64>(),
    ) {
        use hetraid_core::readbalance::{MemberLoad, ReadPolicy};
        let l = built(&spec);
        if !matches!(l.redundancy(), hetraid_core::Redundancy::Mirror { .. }) {
            return Ok(());
        }
        let n = l.members();
        let failed: Vec<usize> = failed.filter(|f| *f < n).into_iter().collect();
        let state = ArrayState::with_failed(n, &failed);
        let mut x = seed | 1;
        let mut next = || { x ^= x << 13; x ^= x >> 7; x ^= x << 17; x };
        let loads: Vec<MemberLoad> = (0..n).map(|_| MemberLoad {
            pending: (next() % 4) as u32,
            head: next() % (1 << 24),
            rotational: next() % 2 == 0,
            bytes_per_s: 50_000_000 + next() % 200_000_000,
        }).collect();
        let p = Planner::new(l.as_ref(), WritePolicy::Md, vec![])
            .with_reads(ReadPolicy::from_code(policy).unwrap(), loads);
        let off = off % l.capacity_bytes();
        let len = len.min(l.capacity_bytes() - off);
        let chunk = l.chunk_bytes();
        if let Some(ext) = p.direct_extents(&Request::read(off, len), &state) {
            for (m, mo, bo, elen) in ext {
                prop_assert!(!failed.contains(&m), "read from failed member {}", m);
                let mut at = 0;
                while at < elen {
                    let pos = off + bo + at;
                    let co = pos % chunk;
                    let (s, i) = l.locate_chunk(pos / chunk);
                    let st = l.stripe(s);
                    let ok = std::iter::once(st.data[i])
                        .chain(st.mirrors.get(i).into_iter().flatten().copied())
                        .any(|c| c.member == m && c.offset + co == mo + at);
                    prop_assert!(ok, "byte {} read from member {} offset {}, not a copy", pos, m, mo + at);
                    at += (chunk - co).min(elen - at);
                }
            }
        }
    }
}

/// Write-back's room rule (core `journal::Reserve`) against the real
/// planner: writes are admitted by `place_group`; the reclaimer journals
/// the real stripe updates of what it writes (`journal::record_bytes` of the
/// plan) and must always find room (after a checkpoint at most); a writer
/// that finds no room reclaims everything and then fits. Degraded arrays
/// write fewer members, never more.
fn write_back_never_wedges(
    l: &dyn Layout,
    failed: Option<usize>,
    ring_len: u64,
    seed: u64,
) -> Result<(), String> {
    use hetraid_core::journal::{self, LogIndex, Reserve, Ring, PAGE};
    let n = l.members();
    let reserve = Reserve::new(n, l.redundancy());
    let mut state = ArrayState::healthy(n);
    if let Some(f) = failed.filter(|_| l.redundancy().tolerance() > 0) {
        state.members[f % n] = MemberState::Failed;
    }
    let planner = Planner::new(l, WritePolicy::Md, Vec::new());
    let cap = l.capacity_bytes();
    let mut ring = Ring::empty(ring_len, 0, 1);
    let mut index: LogIndex<()> = LogIndex::default();
    let slack = reserve.slack(ring_len);
    let max = reserve.record_max(ring_len);
    let mut x = seed | 1;
    let mut rnd = |m: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % m.max(1)
    };
    // Reclaim down to `target` (0: everything), as both executors do.
    let reclaim = |ring: &mut Ring, index: &mut LogIndex<()>, target: u64| -> Result<(), String> {
        let mut rounds = index.len() + 1;
        while rounds > 0 && journal::reclaim_more(ring, index.reserved(), index.is_empty(), target)
        {
            rounds -= 1;
            let (batch, runs) = journal::reclaim_batch(&index.pieces(), max);
            for (start, end, _) in runs {
                for (at, len) in journal::split_run(start, end, max) {
                    let plan = planner
                        .plan(&Request::write(at, len), &state)
                        .map_err(|e| e.to_string())?;
                    let payload_max = ring.record_bytes_max() - PAGE;
                    let records = journal::record_bytes(&plan.stripes, payload_max)
                        .map_err(|e| format!("{e:?}"))?;
                    for bytes in records {
                        let p = match journal::place_record(
                            ring,
                            bytes,
                            true,
                            index.reserved(),
                            slack,
                        ) {
                            Some(p) => p,
                            None => {
                                // The engine checkpoints first (every record
                                // so far is on the members here).
                                ring.checkpoint_keeping(index.oldest_needed());
                                journal::place_record(ring, bytes, true, index.reserved(), slack)
                                    .ok_or_else(|| format!(
                                        "the reclaimer found no room for a record of {bytes}: ring {} used {} reserved {}",
                                        ring.len, ring.used, index.reserved()
                                    ))?
                            }
                        };
                        ring.commit(&p, bytes);
                    }
                }
            }
            for p in &batch {
                index.remove_reclaimed(p);
            }
            ring.checkpoint_keeping(index.oldest_needed());
        }
        Ok(())
    };
    let mut seq_writes = 0;
    for _ in 0..300 {
        let len = 1 + rnd(3 * max);
        let at = rnd(cap.saturating_sub(len)) / 512 * 512;
        let len = len.min(cap - at);
        if let Some(t) = journal::reclaim_before_write(&ring, index.reserved()) {
            if rnd(3) == 0 {
                reclaim(&mut ring, &mut index, t)?;
            }
        }
        for (a, b) in journal::split_run(at, at + len, max) {
            let mut tries = 0;
            loop {
                let (placed, _) = journal::place_group(&mut ring, &reserve, &index, &[(a, b)]);
                if let Some((p, _, cost)) = placed.first() {
                    index.insert(a, b, p.seq, (), *cost, p.offset);
                    seq_writes += 1;
                    break;
                }
                tries += 1;
                if tries > 1 {
                    return Err(format!(
                        "an empty log did not take a write of {b} bytes: ring {} used {}",
                        ring.len, ring.used
                    ));
                }
                reclaim(&mut ring, &mut index, 0)?;
                if !index.is_empty() {
                    return Err("reclaiming everything left data in the log".into());
                }
                ring.checkpoint();
            }
        }
    }
    reclaim(&mut ring, &mut index, 0)?;
    if !index.is_empty() || seq_writes == 0 {
        return Err("the log did not empty".into());
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// The smallest write-back log the rule allows, and a larger one, never
    /// wedge on any layout, healthy or degraded.
    #[test]
    fn a_write_back_log_never_wedges(spec in any_spec(), failed in proptest::option::of(0usize..9), seed in any::<u64>(), bigger in any::<bool>()) {
        let l = built(&spec);
        let reserve = hetraid_core::journal::Reserve::new(l.members(), l.redundancy());
        let min = hetraid_core::journal::log_bytes_min(l.members(), l.chunk_bytes(), &reserve)
            - hetraid_core::journal::RING_OFFSET;
        let ring = if bigger { min * 3 } else { min };
        if let Err(e) = write_back_never_wedges(l.as_ref(), failed, ring, seed) {
            prop_assert!(false, "{:?} ring {} failed {:?} seed {}: {}", spec.kind, ring, failed, seed, e);
        }
    }
}

proptest! {
    /// Reads with a member sat out (core `sitout`) return the same bytes;
    /// with no member failed and redundancy to spare they never touch the
    /// sat-out member (neither the planner nor the simulator's
    /// `request_io`), and with one failed they still read (the sat-out
    /// member read where the stripe needs it).
    #[test]
    fn sat_out_members_are_read_around(
        spec in any_spec(),
        seed in any::<u64>(),
        sat in 0usize..9,
        failed in proptest::option::of(0usize..9),
        off in any::<u64>(),
        len in 1u64..100_000,
    ) {
        use hetraid_core::sitout::SatOut;
        let l = built(&spec);
        let n = l.members();
        let sat = sat % n;
        let cap = l.capacity_bytes();
        let mut arr = MemArray::new(&spec.sizes);
        let mut data = pattern(seed, cap as usize);
        let writer = Planner::new(l.as_ref(), WritePolicy::Md, vec![]);
        arr.execute(&writer.plan(&Request::write(0, cap), &ArrayState::healthy(n)).unwrap(), &mut data).unwrap();
        let tolerance = l.redundancy().tolerance();
        let failed: Vec<usize> = failed.filter(|f| *f < n && *f != sat && tolerance >= 1).into_iter().collect();
        let state = ArrayState::with_failed(n, &failed);
        failed.iter().for_each(|&f| arr.failed[f] = true);
        let p = Planner::new(l.as_ref(), WritePolicy::Md, vec![]).with_sat_out(SatOut(1 << sat));
        let off = off % cap;
        let len = len.min(cap - off);
        let req = Request::read(off, len);
        arr.reads.iter_mut().for_each(|r| *r = 0);
        let mut out = vec![0u8; len as usize];
        arr.execute(&p.plan(&req, &state).unwrap(), &mut out).unwrap();
        prop_assert!(out[..] == data[off as usize..(off + len) as usize], "{:?}: bytes differ", spec.kind);
        let io = p.request_io(&req, &state).unwrap();
        if failed.is_empty() && tolerance >= 1 {
            prop_assert_eq!(arr.reads[sat], 0, "{:?}: sat-out member {} read", spec.kind, sat);
            prop_assert!(io.reads.iter().all(|r| r.0 != sat), "{:?}: request_io reads {}", spec.kind, sat);
            prop_assert!(p.direct_read(off, len, &state).is_none_or(|(m, _)| m != sat));
        }
        // Writes planned with the member sat out (reads chosen around it)
        // leave the same bytes and parity: a full read without it agrees.
        let mut w = pattern(seed ^ 5, len as usize);
        arr.execute(&p.plan(&Request::write(off, len), &state).unwrap(), &mut w).unwrap();
        data[off as usize..(off + len) as usize].copy_from_slice(&w);
        let mut all = vec![0u8; cap as usize];
        arr.execute(&p.plan(&Request::read(0, cap), &state).unwrap(), &mut all).unwrap();
        prop_assert!(all == data, "{:?}: bytes differ after a write", spec.kind);
        // A one-page RAID5 write reads around the sat-out member.
        if failed.is_empty() && matches!(spec.kind, LayoutKind::Raid5 { .. }) && n >= 3 {
            let page = off / 4096 * 4096;
            arr.reads.iter_mut().for_each(|r| *r = 0);
            let mut w = pattern(seed ^ 9, 4096);
            arr.execute(&p.plan(&Request::write(page, 4096), &state).unwrap(), &mut w).unwrap();
            prop_assert_eq!(arr.reads[sat], 0, "RAID5 write read sat-out member {}", sat);
        }
    }
}
