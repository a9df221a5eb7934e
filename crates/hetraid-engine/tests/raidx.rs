//! RAIDX on real bytes (issue 14): RAIDX5 created with member kinds puts
//! each bundle's parity on the SSD where the bundle has it, the weights are
//! stored with the array (the layout never depends on a later reading of
//! kinds), and the data survives the SSD's failure.

mod common;
use common::*;
use hetraid_core::MemberKind;
use hetraid_engine::format::LayoutRecord;
use hetraid_engine::Array;

#[test]
fn raidx5_with_kinds_stores_ssd_parity_weights_and_survives_the_ssd() {
    let chunk = 16384;
    let sizes = vec![MIB + 40 * chunk; 5];
    let (_f, members) = fault_members_sized("x", &sizes, |i| i as u64);
    let mut o = opts("raidx", chunk);
    o.layout = LayoutRecord {
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
    assert_eq!(a.superblock().layout.weights, vec![0, 0, 0, 0, 1]);
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
    assert_eq!(a.superblock().layout.weights, vec![0, 0, 0, 0, 1]);
    assert_eq!(a.scrub(None).unwrap().mismatches, 0);
    a.fail(4).unwrap();
    let mut out = vec![0u8; data.len()];
    a.read(0, &mut out).unwrap();
    assert!(out == data, "read without the SSD differs");
}
