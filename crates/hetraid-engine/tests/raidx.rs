//! RAIDX on real bytes (issue 14): RAIDX5 created with member kinds puts
//! each bundle's parity on the SSD where the bundle has it, the weights are
//! stored with the array (the layout never depends on a later reading of
//! kinds), and the data survives the SSD's failure.

mod common;
use common::*;
use hetraid_core::MemberKind;
use hetraid_engine::format::LayoutOptions;
use hetraid_engine::member::Member;
use hetraid_engine::Array;

#[test]
fn raidx5_with_kinds_stores_ssd_parity_weights_and_survives_the_ssd() {
    let chunk = 16384;
    let sizes = vec![MIB + 40 * chunk; 5];
    let (_f, members) = fault_members_sized("x", &sizes, |i| i as u64);
    let mut o = opts("raidx", chunk);
    o.layout = LayoutOptions {
        name: "raidx".into(),
        chunks_per_bundle: Some(3),
        raidx_level: Some("5".into()),
        ..Default::default()
    };
    o.kinds = vec![
        MemberKind::Hdd,
        MemberKind::Hdd,
        MemberKind::Hdd,
        MemberKind::Hdd,
        MemberKind::Ssd,
    ];
    let a = Array::create(members.clone(), &o).unwrap();
    assert_eq!(a.superblock().layout.weights, Some(vec![0, 0, 0, 0, 1]));
    let l = a.layout();
    let mut on_ssd = 0;
    for s in 0..l.stripe_count() {
        let st = l.stripe(s);
        if st.all().any(|c| c.member == 4) {
            assert_eq!(st.parity[0].member, 4, "bundle {s}");
            on_ssd += 1;
        }
    }
    assert!(on_ssd > 10);
    let data = Rng(3).bytes(a.capacity() as usize);
    a.write(0, &data).unwrap();
    a.close().unwrap();
    drop(a);
    // Reassembled: the same layout (weights from the superblock).
    let a = Array::assemble(members.clone()).unwrap();
    assert_eq!(a.superblock().layout.weights, Some(vec![0, 0, 0, 0, 1]));
    assert_eq!(a.scrub(None).unwrap().mismatches, 0);
    a.fail(4).unwrap();
    let mut out = vec![0u8; data.len()];
    a.read(0, &mut out).unwrap();
    assert!(out == data, "read without the SSD differs");
}

/// Each member keeps its bundle table past its data area (issue 14):
/// assembly checks it against the array's table and names a damaged one;
/// a replacement gets its slot's table; the overhead stays far under 0.3 %.
#[test]
fn bundle_tables_are_stored_checked_and_follow_replacements() {
    use hetraid_engine::format::DATA_OFFSET;
    let chunk = 65536;
    let sizes = vec![
        MIB + 300 * chunk,
        MIB + 200 * chunk,
        MIB + 150 * chunk,
        MIB + 120 * chunk,
    ];
    let (faults, members) = fault_members_sized("b", &sizes, |i| 40 + i as u64);
    let mut o = opts("raidx", chunk);
    o.layout = LayoutOptions {
        name: "raidx".into(),
        chunks_per_bundle: Some(2),
        ..Default::default()
    };
    let a = Array::create(members.clone(), &o).unwrap();
    let sb = a.superblock();
    assert!(sb.bundle_table);
    let shown = a.status().bundle_table_bytes.unwrap();
    assert!(shown > 0 && shown * 300 < a.capacity(), "{shown}");
    for (i, r) in sb.roles.iter().enumerate() {
        let table = hetraid_engine::bundles::table_bytes(r.data_size / chunk);
        let overhead = table as f64 / (r.data_size + table) as f64;
        assert!(overhead < 0.003, "member {i}: {overhead}");
        assert!(DATA_OFFSET + r.data_size + table <= sizes[i]);
    }
    let data = Rng(8).bytes(a.capacity() as usize);
    a.write(0, &data).unwrap();
    a.close().unwrap();
    drop(a);
    let a = Array::assemble(members.clone()).unwrap();
    // Replace member 2: the new device gets the slot's table.
    a.fail(2).unwrap();
    let new: std::sync::Arc<dyn Member> = std::sync::Arc::new(
        hetraid_engine::member::FaultMember::new("b2-new", sizes[2], 77),
    );
    a.replace(2, new.clone(), false).unwrap();
    rebuild_unthrottled(&a);
    a.close().unwrap();
    drop(a);
    let mut now = members.clone();
    now[2] = new;
    let a = Array::assemble(now.clone()).unwrap();
    let mut out = vec![0u8; data.len()];
    a.read(0, &mut out).unwrap();
    assert!(out == data);
    drop(a);
    // A damaged entry on member 1 (issue 35, case 4): status names it and
    // the array still reads right; assembling for writing rewrites that copy
    // from the array's table (the superblocks' history), naming it.
    let sb = Array::assemble(now.clone()).unwrap().superblock();
    let at = sb.data_offset + sb.roles[1].data_size + 4096 + 3 * 16;
    let mut b = [0u8; 1];
    faults[1].read_at(&mut b, at).unwrap();
    b[0] ^= 0x40;
    faults[1].write_at(&b, at).unwrap();
    let st = Array::assemble_with(
        now.clone(),
        hetraid_engine::AssembleOptions {
            degraded: true,
            access: hetraid_engine::Access::Inspect,
            ..Default::default()
        },
    )
    .unwrap()
    .status();
    assert!(
        st.warnings
            .iter()
            .any(|w| w.contains("bundle table") && w.contains("b1")),
        "{:?}",
        st.warnings
    );
    let a = Array::assemble(now.clone()).unwrap();
    assert!(
        a.warnings()
            .iter()
            .any(|w| w.contains("b1") && w.contains("rewritten")),
        "{:?}",
        a.warnings()
    );
    let mut out = vec![0u8; data.len()];
    a.read(0, &mut out).unwrap();
    assert!(out == data);
    a.close().unwrap();
    drop(a);
    let a = Array::assemble(now).unwrap();
    assert!(
        !a.warnings().iter().any(|w| w.contains("bundle table")),
        "repaired for good: {:?}",
        a.warnings()
    );
}

/// Read balancing in the engine (issue 14): a 4-way RAID1 read by eight
/// threads at random spreads its reads over the copies with the default
/// policy (MD's), where `first` reads one member only.
#[test]
fn raid1_reads_spread_over_the_copies_in_the_engine() {
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    struct Counted {
        inner: std::sync::Arc<dyn Member>,
        reads: AtomicU64,
    }
    impl Member for Counted {
        fn read_at(&self, buf: &mut [u8], off: u64) -> std::io::Result<()> {
            if off >= hetraid_engine::format::DATA_OFFSET {
                self.reads.fetch_add(1, Relaxed);
            }
            // A disk takes time: the in-flight counts matter.
            std::thread::sleep(std::time::Duration::from_micros(200));
            self.inner.read_at(buf, off)
        }
        fn write_at(&self, buf: &[u8], off: u64) -> std::io::Result<()> {
            self.inner.write_at(buf, off)
        }
        fn flush(&self) -> std::io::Result<()> {
            self.inner.flush()
        }
        fn len(&self) -> u64 {
            self.inner.len()
        }
        fn name(&self) -> String {
            self.inner.name()
        }
    }
    for policy in [None, Some(hetraid_core::readbalance::ReadPolicy::First)] {
        let (_f, raw) = fault_members_sized("r", &[4 * MIB; 4], |i| 60 + i as u64);
        let counted: Vec<std::sync::Arc<Counted>> = raw
            .iter()
            .map(|m| {
                std::sync::Arc::new(Counted {
                    inner: m.clone(),
                    reads: AtomicU64::new(0),
                })
            })
            .collect();
        let members: Vec<std::sync::Arc<dyn Member>> = counted
            .iter()
            .map(|c| c.clone() as std::sync::Arc<dyn Member>)
            .collect();
        let mut o = opts("raid1", 65536);
        o.read_policy = policy;
        let a = Array::create(members, &o).unwrap();
        let cap = a.capacity();
        let before: Vec<u64> = counted.iter().map(|c| c.reads.load(Relaxed)).collect();
        std::thread::scope(|s| {
            for t in 0..8u64 {
                let a = &a;
                s.spawn(move || {
                    let mut rng = Rng(t + 1);
                    let mut buf = vec![0u8; 4096];
                    for _ in 0..100 {
                        a.read(rng.below(cap / 4096) * 4096, &mut buf).unwrap();
                    }
                });
            }
        });
        let reads: Vec<u64> = counted
            .iter()
            .zip(&before)
            .map(|(c, b)| c.reads.load(Relaxed) - b)
            .collect();
        assert_eq!(reads.iter().sum::<u64>(), 800, "{reads:?}");
        match policy {
            None => assert!(
                reads.iter().all(|&r| r >= 100),
                "md: every copy takes a share: {reads:?}"
            ),
            Some(_) => assert_eq!(reads[0], 800, "first: {reads:?}"),
        }
    }
}

/// RAIDX without a bundle width (issue 41): each bundle as wide as it can
/// be where it is placed, so the array holds its capacity bound on members
/// of very different sizes (one parity: all but the largest member; two:
/// all but the two largest). Real bytes survive one (two) failures, a
/// replacement is rebuilt, the table is the same after assembly, and a
/// remove keeping more than the others hold is refused with nothing
/// written.
#[test]
fn raidx_with_widths_per_bundle_holds_the_bound_and_its_bytes() {
    use hetraid_core::layout::raidx_widths::capacity_bound;
    let chunk = 16384u64;
    // 4, 4, 6, 6, 12, 12 units of 24 chunks (issue 41's set, scaled down).
    let units = [4u64, 4, 6, 6, 12, 12];
    for (level, lost) in [("5", vec![5usize]), ("6", vec![4, 0])] {
        let sizes: Vec<u64> = units.iter().map(|u| 2 * MIB + u * 24 * chunk).collect();
        let (f, members) = fault_members_sized(&format!("v{level}"), &sizes, |i| 60 + i as u64);
        let mut o = opts("raidx", chunk);
        o.layout = LayoutOptions {
            name: "raidx".into(),
            chunks_per_bundle: None,
            raidx_level: Some(level.into()),
            ..Default::default()
        };
        let a = Array::create(members.clone(), &o).unwrap();
        let caps = chunk_caps(&a, chunk);
        let lvl = hetraid_core::layout::RaidXLevel::parse(level).unwrap();
        assert_eq!(
            a.capacity(),
            capacity_bound(&caps, lvl) * chunk,
            "RAIDX{level} holds its bound"
        );
        assert_eq!(a.status().capacity_bound_bytes, Some(a.capacity()));
        let l = a.layout();
        let widths: std::collections::BTreeSet<usize> = (0..l.stripe_count())
            .map(|s| l.stripe(s).all().count())
            .collect();
        // Three layers (6, 4 and 2 wide) at one parity; at two the top
        // one (two members) cannot be protected.
        let want = if level == "5" { 3 } else { 2 };
        assert_eq!(widths.len(), want, "widths {widths:?} over {caps:?}");
        let data = Rng(41).bytes(a.capacity() as usize);
        a.write(0, &data).unwrap();
        a.close().unwrap();
        drop(a);
        // Removing a member keeping more than the others hold is refused,
        // saying what they keep, every member byte-identical.
        let before: Vec<Vec<u8>> = f.iter().map(|m| m.durable()).collect();
        let e = Array::shrink_remove(members.clone(), 1, data.len() as u64, true).unwrap_err();
        assert!(e.to_string().contains("the other members keep"), "{e}");
        assert!(f.iter().map(|m| m.durable()).collect::<Vec<_>>() == before);
        let a = Array::assemble(members.clone()).unwrap();
        assert_eq!(
            a.capacity() as usize,
            data.len(),
            "the same table after assembly"
        );
        assert_eq!(a.scrub(None).unwrap().mismatches, 0);
        for &m in &lost {
            a.fail(m).unwrap();
        }
        let mut out = vec![0u8; data.len()];
        a.read(0, &mut out).unwrap();
        assert!(
            out == data,
            "RAIDX{level} without {lost:?} reads other bytes"
        );
        let mut now = members.clone();
        for &m in &lost {
            let new: std::sync::Arc<dyn Member> = std::sync::Arc::new(
                hetraid_engine::member::FaultMember::new(&format!("v{level}-new{m}"), sizes[m], 90),
            );
            a.replace(m, new.clone(), false).unwrap();
            now[m] = new;
        }
        rebuild_unthrottled(&a);
        a.close().unwrap();
        drop(a);
        let a = Array::assemble(now.clone()).unwrap();
        assert_eq!(a.scrub(None).unwrap().mismatches, 0);
        // Another member lost reads from the rebuilt ones.
        let other = (lost[0] + 1) % units.len();
        a.fail(other).unwrap();
        a.read(0, &mut out).unwrap();
        assert!(
            out == data,
            "RAIDX{level} rebuilt, without {other}, reads other bytes"
        );
    }
}
