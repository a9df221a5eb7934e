//! Rebuild scheduling and execution: S2-RAID streams into spare space, and reads
//! and writes while a rebuild is part-way through.

use hetraid_core::exec::MemArray;
use hetraid_core::layout::{build, LayoutKind, LayoutSpec, ParityOrder};
use hetraid_core::plan::{ArrayState, MemberState, Planner, Request, WritePolicy};
use hetraid_core::rebuild::schedule;
use std::collections::HashSet;

fn fill(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 12) as u8)
        .collect()
}

#[test]
fn s2raid5_rebuilds_three_disjoint_streams_into_spare_space() {
    let chunk = 4096;
    let spec = LayoutSpec {
        kind: LayoutKind::S2Raid5 {
            group: 3,
            partitions: None,
            spare_partitions: 1,
        },
        chunk_bytes: chunk,
        sizes: vec![chunk * 4 * 8; 9], // K = 3 data partitions + 1 spare, 8 chunks each
        kinds: vec![],
    };
    let l = build(&spec).unwrap();
    let planner = Planner::new(l.as_ref(), WritePolicy::Md, vec![]);
    let cap = l.capacity_bytes();
    let mut arr = MemArray::new(&spec.sizes);
    let mut data = fill(cap as usize, 7);
    arr.execute(
        &planner
            .plan(&Request::write(0, cap), &ArrayState::healthy(9))
            .unwrap(),
        &mut data,
    )
    .unwrap();
    let original = arr.members[4].clone();

    let state = ArrayState::with_failed(9, &[4]);
    arr.failed[4] = true;
    let sched = schedule(l.as_ref(), &state, &[4], true).unwrap();
    assert_eq!(
        sched.streams.len(),
        3,
        "D4 loses subRAIDs 1, 3, 8: three streams"
    );
    let reads: Vec<HashSet<usize>> = sched
        .streams
        .iter()
        .map(|s| s.read_members.iter().copied().collect())
        .collect();
    assert_eq!(reads.iter().map(|r| r.len()).sum::<usize>(), 6);
    let mut sets: Vec<Vec<usize>> = sched
        .streams
        .iter()
        .map(|s| s.read_members.clone())
        .collect();
    sets.sort();
    assert_eq!(sets, vec![vec![0, 8], vec![1, 7], vec![2, 6]]);
    let mut targets = HashSet::new();
    for st in &sched.streams {
        let (t, slot) = st.target.expect("spare target");
        assert!(
            !st.read_members.contains(&t) && t != 4,
            "a stream writes to a member it reads"
        );
        assert!(targets.insert((t, slot)), "two streams share a spare slot");
        for &s in &st.stripes {
            let sp = planner
                .rebuild_stripe(s, &state, &[4], st.target)
                .unwrap()
                .unwrap();
            arr.execute_rebuild(&sp).unwrap();
            // The rebuilt chunk sits in the target's spare partition, equal to the lost one.
            let lost = l.stripe(s).all().find(|c| c.member == 4).unwrap();
            let at = l.spare_location(lost, t, slot).unwrap();
            assert_eq!(
                arr.members[t][at.offset as usize..(at.offset + chunk) as usize],
                original[lost.offset as usize..(lost.offset + chunk) as usize]
            );
        }
    }
    assert_eq!(sched.stripe_count() as u64, l.stripe_count() / 3);
}

#[test]
fn raid5_rebuild_is_one_stream() {
    let spec = LayoutSpec {
        kind: LayoutKind::Raid5 {
            order: ParityOrder::LeftSymmetric,
        },
        chunk_bytes: 4096,
        sizes: vec![4096 * 16; 9],
        kinds: vec![],
    };
    let l = build(&spec).unwrap();
    let sched = schedule(l.as_ref(), &ArrayState::with_failed(9, &[4]), &[4], true).unwrap();
    assert_eq!(sched.streams.len(), 1);
    assert_eq!(sched.streams[0].stripes.len(), 16);
    assert_eq!(
        sched.streams[0].target, None,
        "RAID5 reserves no spare space"
    );
}

#[test]
fn io_during_a_partial_rebuild_reads_back() {
    let chunk = 8192u64;
    for kind in [
        LayoutKind::Raid5 {
            order: ParityOrder::LeftSymmetric,
        },
        LayoutKind::Raid6,
        LayoutKind::Raid10 { copies: 2 },
    ] {
        let spec = LayoutSpec {
            kind: kind.clone(),
            chunk_bytes: chunk,
            sizes: vec![chunk * 8; 6],
            kinds: vec![],
        };
        let l = build(&spec).unwrap();
        let n = 6;
        let planner = Planner::new(l.as_ref(), WritePolicy::Md, vec![]);
        let cap = l.capacity_bytes();
        let mut arr = MemArray::new(&spec.sizes);
        let mut reference = fill(cap as usize, 3);
        arr.execute(
            &planner
                .plan(&Request::write(0, cap), &ArrayState::healthy(n))
                .unwrap(),
            &mut reference.clone(),
        )
        .unwrap();
        // Member 2 replaced by a blank disk, rebuilt half way.
        let victim = 2;
        arr.members[victim].iter_mut().for_each(|b| *b = 0);
        let half = l.stripe_count() / 2;
        let mut state = ArrayState::with_failed(n, &[victim]);
        for s in 0..half {
            if let Some(sp) = planner.rebuild_stripe(s, &state, &[victim], None).unwrap() {
                arr.execute_rebuild(&sp).unwrap();
            }
        }
        state.members[victim] = MemberState::rebuilding(half);
        // Writes everywhere while part-rebuilt.
        for (i, off) in [0u64, cap / 3, cap / 2, cap - 20_000]
            .into_iter()
            .enumerate()
        {
            let mut w = fill(20_000, 100 + i as u8);
            arr.execute(
                &planner.plan(&Request::write(off, 20_000), &state).unwrap(),
                &mut w,
            )
            .unwrap();
            reference[off as usize..off as usize + 20_000].copy_from_slice(&w);
        }
        // Finish the rebuild, then everything reads back and the member is whole.
        for s in half..l.stripe_count() {
            if let Some(sp) = planner.rebuild_stripe(s, &state, &[victim], None).unwrap() {
                arr.execute_rebuild(&sp).unwrap();
            }
        }
        state.members[victim] = MemberState::InSync;
        let mut out = vec![0u8; cap as usize];
        arr.execute(
            &planner.plan(&Request::read(0, cap), &state).unwrap(),
            &mut out,
        )
        .unwrap();
        assert!(
            out == reference,
            "{kind:?}: contents differ after an online rebuild"
        );
        for s in 0..l.stripe_count() {
            if let Some(sp) = planner.scrub_stripe(s, &state, false) {
                assert_eq!(arr.execute_scrub(&sp).unwrap(), 0, "{kind:?} stripe {s}");
            }
        }
    }
}

#[test]
fn scrub_finds_and_repairs_corruption() {
    let spec = LayoutSpec {
        kind: LayoutKind::Raid6,
        chunk_bytes: 4096,
        sizes: vec![4096 * 4; 5],
        kinds: vec![],
    };
    let l = build(&spec).unwrap();
    let planner = Planner::new(l.as_ref(), WritePolicy::Md, vec![]);
    let mut arr = MemArray::new(&spec.sizes);
    let cap = l.capacity_bytes();
    arr.execute(
        &planner
            .plan(&Request::write(0, cap), &ArrayState::healthy(5))
            .unwrap(),
        &mut fill(cap as usize, 9),
    )
    .unwrap();
    let p = l.stripe(1).parity[0];
    arr.members[p.member][p.offset as usize + 100] ^= 0xff;
    let st = ArrayState::healthy(5);
    let check: u64 = (0..4)
        .map(|s| {
            arr.execute_scrub(&planner.scrub_stripe(s, &st, false).unwrap())
                .unwrap()
        })
        .sum();
    assert_eq!(check, 1);
    let fixed: u64 = (0..4)
        .map(|s| {
            arr.execute_scrub(&planner.scrub_stripe(s, &st, true).unwrap())
                .unwrap()
        })
        .sum();
    assert_eq!(fixed, 1);
    let again: u64 = (0..4)
        .map(|s| {
            arr.execute_scrub(&planner.scrub_stripe(s, &st, false).unwrap())
                .unwrap()
        })
        .sum();
    assert_eq!(again, 0);
}
