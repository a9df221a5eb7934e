//! In-process fuzzing of the request parser and decision function, on a fixed
//! corpus plus proptest's random bytes (seeds persisted for replay): nothing a
//! client sends may panic, and nothing out of range may reach the array.

use hetraid_nbd::proto::*;
use proptest::prelude::*;

fn check(bytes: &[u8; REQUEST_LEN], export: &Export) {
    let Ok(r) = parse_request(bytes) else { return };
    match decide(&r, export) {
        Action::Read { offset, len }
        | Action::Write { offset, len, .. }
        | Action::WriteZeroes { offset, len, .. }
        | Action::Trim { offset, len, .. } => {
            assert!(len > 0);
            assert!(
                offset + len as u64 <= export.size,
                "{r:?} reaches past the end"
            );
            if matches!(
                decide(&r, export),
                Action::Read { .. } | Action::Write { .. }
            ) {
                assert!(len <= MAX_PAYLOAD);
            }
            assert!(
                !export.read_only || matches!(decide(&r, export), Action::Read { .. }),
                "{r:?} writes a read-only export"
            );
        }
        Action::BlockStatus { offset, len, .. } => {
            assert!(
                export.base_allocation,
                "{r:?}: block status without a context"
            );
            assert!(len > 0 && offset + len as u64 <= export.size, "{r:?}");
        }
        Action::Error { discard, .. } => {
            if r.typ == CMD_WRITE {
                assert_eq!(discard, r.length);
            } else {
                assert_eq!(discard, 0);
            }
        }
        _ => {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4096, ..ProptestConfig::default() })]

    #[test]
    fn any_header_is_handled(mut bytes in proptest::array::uniform28(any::<u8>()), good_magic in any::<bool>(), size in 0u64..(1 << 40), ro in any::<bool>()) {
        if good_magic {
            bytes[0..4].copy_from_slice(&REQUEST_MAGIC.to_be_bytes());
            bytes[6] = 0;
            bytes[7] %= 8;
        }
        check(&bytes, &Export { size, read_only: ro, structured: ro, base_allocation: !ro, fast_zero: ro });
    }

    #[test]
    fn any_option_payload_is_handled(data in proptest::collection::vec(any::<u8>(), 0..64)) {
        let _ = parse_go(&data);
        let _ = hetraid_nbd::proto::parse_meta_context(&data);
    }
}

#[test]
fn corpus() {
    let e = Export {
        size: 1 << 30,
        read_only: false,
        structured: true,
        base_allocation: true,
        fast_zero: true,
    };
    let mut cases: Vec<[u8; REQUEST_LEN]> = Vec::new();
    for typ in 0..10u16 {
        for (off, len) in [
            (0u64, 0u32),
            (0, 1),
            (u64::MAX, 1),
            ((1 << 30) - 1, 1),
            ((1 << 30) - 1, 2),
            (0, u32::MAX),
            (0, MAX_PAYLOAD),
            (0, MAX_PAYLOAD + 1),
        ] {
            for flags in [0u16, 1, 2, 16, 0xffff] {
                let mut b = [0u8; REQUEST_LEN];
                b[0..4].copy_from_slice(&REQUEST_MAGIC.to_be_bytes());
                b[4..6].copy_from_slice(&flags.to_be_bytes());
                b[6..8].copy_from_slice(&typ.to_be_bytes());
                b[16..24].copy_from_slice(&off.to_be_bytes());
                b[24..28].copy_from_slice(&len.to_be_bytes());
                cases.push(b);
            }
        }
    }
    for b in &cases {
        check(b, &e);
        check(
            b,
            &Export {
                size: 0,
                read_only: true,
                structured: true,
                base_allocation: true,
                fast_zero: true,
            },
        );
    }
    assert_eq!(parse_request(&[0u8; REQUEST_LEN]), Err(Fatal::BadMagic(0)));
}
