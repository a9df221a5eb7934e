//! Tests of `format.rs` (kept apart: the module reads in one sitting).

use super::*;

fn sample() -> Superblock {
    Superblock {
        generation: 3,
        generation_cleared: 2,
        generation_started: true,
        uuid: [7; 16],
        events: 42,
        member: 2,
        clean: false,
        policy: WritePolicy::Modthresh,
        read_policy: ReadPolicy::Raidx4,
        bundle_table: true,
        data_offset: DATA_OFFSET,
        checksums: false,
        chunk_bytes: 65536,
        bitmap_stripes: 16,
        layout: LayoutOptions {
            name: "raidh".into(),
            weights: Some(vec![0, 0, 1, 1, 2]),
            ..Default::default()
        },
        roles: (0..5)
            .map(|i| MemberRole {
                state: if i == 3 {
                    RoleState::Rebuilding
                } else {
                    RoleState::Active
                },
                kind: if i == 4 {
                    MemberKind::Ssd
                } else {
                    MemberKind::Hdd
                },
                data_size: 1 << 30,
                rebuild_checkpoint: i,
                device: 0x1234_5678 + i,
                resync: false,
            })
            .collect(),
        last_scrub: Some(ScrubRecord {
            finished_unix_s: 1_800_000_000,
            duration_ms: 1234,
            stripes_checked: 99,
            mismatched_stripes: 2,
            repaired_stripes: 1,
        }),
        log: None,
        relocations: vec![Relocation {
            from_member: 4,
            to_member: 1,
            from_offset: 65536,
            to_offset: 1 << 20,
            len: 65536,
        }],
        raidx_history: None,
        reshape: None,
        spares: vec![SpareRole {
            kind: MemberKind::Ssd,
            size: 1 << 30,
            device: 99,
        }],
    }
}

#[test]
fn a_raidx_history_round_trips() {
    use hetraid_core::layout::raidx_history::{Change, History, Pending};
    let mut s = sample();
    s.relocations.clear();
    s.layout = LayoutOptions {
        name: "raidx".into(),
        chunks_per_bundle: Some(3),
        ..Default::default()
    };
    s.raidx_history = Some(History {
        initial: vec![100, 90, 80],
        changes: vec![
            Change::Grow {
                slot: 3,
                chunks: 120,
            },
            Change::Remove {
                slot: 1,
                keep_bundles: 77,
            },
        ],
        pending: Some(Pending {
            change: Change::Grow { slot: 4, chunks: 5 },
            moves_done: 9,
        }),
    });
    assert_eq!(Superblock::decode(&s.encode()).unwrap(), s);
    // A history naming more slots than the member table is damage.
    let mut bad = s.clone();
    bad.roles.truncate(4);
    assert!(Superblock::decode(&bad.encode()).is_err());
}

#[test]
fn round_trip() {
    let s = sample();
    assert_eq!(Superblock::decode(&s.encode()), Ok(s));
    let mut l = sample();
    l.log = Some(LogRecord {
        mode: LogMode::Journal,
        id: 0xfeed,
        copies: 2,
        active: 0b10,
        epoch: 3,
        checkpoint_seq: 77,
        region: Some(LogRegion {
            bytes: 8 << 20,
            slots: [4, 1],
        }),
    });
    let b = l.encode();
    assert_eq!(u32_at(&b, 8), 3, "an array with a log is format version 3");
    assert_eq!(Superblock::decode(&b), Ok(l));
}

#[test]
fn any_flipped_byte_is_caught() {
    let b = sample().encode();
    for i in 0..SB_SIZE {
        let mut c = b;
        c[i] ^= 0x40;
        assert!(
            Superblock::decode(&c).is_err(),
            "flip at byte {i} went unnoticed"
        );
    }
}
