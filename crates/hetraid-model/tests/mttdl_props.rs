//! MTTDL properties over random layouts and rates (proptest prints the failing case
//! and keeps its seed under proptest-regressions/ for replay).

use hetraid_core::layout::{build, LayoutKind, LayoutSpec};
use hetraid_model::{mttdl_per_member, FailureSets};
use proptest::prelude::*;

const CHUNK: u64 = 8192;

fn any_layout() -> impl Strategy<Value = LayoutSpec> {
    let uniform = |kind: LayoutKind, n: usize| LayoutSpec {
        kind,
        chunk_bytes: CHUNK,
        sizes: vec![CHUNK * 12; n],
        kinds: vec![],
    };
    prop_oneof![
        (1usize..6).prop_map(move |n| uniform(LayoutKind::Raid0, n)),
        (2usize..5).prop_map(move |n| uniform(LayoutKind::Raid1, n)),
        (2usize..7).prop_map(move |n| uniform(LayoutKind::Raid10 { copies: 2 }, n)),
        (3usize..7).prop_map(move |n| uniform(LayoutKind::Raid4, n)),
        (3usize..8).prop_map(move |n| uniform(
            LayoutKind::Raid5 {
                order: hetraid_core::layout::ParityOrder::LeftSymmetric
            },
            n
        )),
        (4usize..8).prop_map(move |n| uniform(LayoutKind::Raid6, n)),
        proptest::collection::vec(0u64..4, 3..7)
            .prop_filter("some weight", |w| w.iter().sum::<u64>() > 0)
            .prop_map(move |w| uniform(LayoutKind::RaidH { weights: w.clone() }, w.len())),
        (0usize..2).prop_map(move |spare| uniform(
            LayoutKind::S2Raid5 {
                group: 3,
                partitions: None,
                spare_partitions: spare,
            },
            9
        )),
        (2usize..4).prop_map(move |m| uniform(
            LayoutKind::S2Raid10 {
                partitions: None,
                spare_partitions: 0,
            },
            2 * m
        )),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn mttdl_behaves(
        spec in any_layout(),
        mtbf_h in proptest::collection::vec(10_000.0f64..1_000_000.0, 9),
        mttr_h in proptest::collection::vec(0.5f64..200.0, 9),
    ) {
        let layout = build(&spec).unwrap();
        let n = layout.members();
        let sets = FailureSets::of(layout.as_ref());
        prop_assert!(sets.complete);
        let fail: Vec<f64> = mtbf_h[..n].iter().map(|h| 1.0 / h).collect();
        let repair: Vec<f64> = mttr_h[..n].iter().map(|h| 1.0 / h).collect();
        let m = mttdl_per_member(&sets, &fail, &repair).unwrap();
        let first_failure_h = 1.0 / fail.iter().sum::<f64>();
        let tolerance = layout.redundancy().tolerance();
        // Data is lost no sooner than the first failure; without redundancy, at it.
        prop_assert!(m.hours >= first_failure_h * (1.0 - 1e-9), "{m:?}");
        if tolerance == 0 {
            prop_assert!((m.hours / first_failure_h - 1.0).abs() < 1e-9);
        }
        // Every layout survives what its redundancy promises (S2/RAID10 more).
        prop_assert!(m.max_survivable_failures >= tolerance);
        // Faster repair never hurts, and helps whenever a failure is survivable.
        let faster: Vec<f64> = repair.iter().map(|r| r * 2.0).collect();
        let f = mttdl_per_member(&sets, &fail, &faster).unwrap();
        if m.max_survivable_failures > 0 {
            prop_assert!(f.hours > m.hours, "{} vs {}", f.hours, m.hours);
        } else {
            prop_assert!((f.hours / m.hours - 1.0).abs() < 1e-9);
        }
        // Members failing twice as often always lose data sooner.
        let worse: Vec<f64> = fail.iter().map(|r| r * 2.0).collect();
        let w = mttdl_per_member(&sets, &worse, &repair).unwrap();
        prop_assert!(w.hours < m.hours);
    }
}
