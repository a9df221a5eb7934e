//! The CRC-32C kernels against the bitwise reference: every length around the
//! kernel's thresholds, unaligned starts, chained appends, random data.

use hetraid_parity::crc32c::{self, reference};
use proptest::prelude::*;

fn bytes(n: usize, seed: u64) -> Vec<u8> {
    hetraid_parity::reference::pattern(n, seed)
}

#[test]
fn known_vectors() {
    // RFC 3720 (iSCSI) B.4 test vectors.
    assert_eq!(crc32c::crc32c(&[0u8; 32]), 0x8A91_36AA);
    assert_eq!(crc32c::crc32c(&[0xFFu8; 32]), 0x62A8_AB43);
    let inc: Vec<u8> = (0..32).collect();
    assert_eq!(crc32c::crc32c(&inc), 0x46DD_794E);
    assert_eq!(crc32c::crc32c(b"123456789"), 0xE306_9283);
    // And the same through the long path.
    assert_eq!(
        crc32c::crc32c(&[0u8; 4096]),
        reference::crc32c_append(0, &[0u8; 4096])
    );
}

#[test]
fn every_length_up_to_1100_and_every_start_offset() {
    let data = bytes(1200, 7);
    for len in 0..1100 {
        for start in [0, 1, 3, 8, 15] {
            let d = &data[start..start + len];
            for init in [0u32, 0xFFFF_FFFF, 0x1234_5678] {
                assert_eq!(
                    crc32c::crc32c_append(init, d),
                    reference::crc32c_append(init, d),
                    "len {len} start {start} init {init:#x}"
                );
            }
        }
    }
}

#[test]
fn a_4k_block_matches_the_crate_and_appends_chain() {
    let data = bytes(1 << 20, 11);
    for b in data.chunks(4096) {
        assert_eq!(crc32c::crc32c(b), ::crc32c::crc32c(b));
    }
    let whole = crc32c::crc32c(&data);
    let (a, b) = data.split_at(300_001);
    assert_eq!(crc32c::crc32c_append(crc32c::crc32c(a), b), whole);
    assert_eq!(whole, ::crc32c::crc32c(&data));
}

proptest! {
    #[test]
    fn random_inputs(seed in any::<u64>(), len in 0usize..20_000, init in any::<u32>()) {
        let d = bytes(len, seed);
        prop_assert_eq!(crc32c::crc32c_append(init, &d), reference::crc32c_append(init, &d));
    }
}

/// Every kernel this CPU can run, called directly, against the reference:
/// the dispatcher picks one per length, so the others would otherwise go
/// untested on a machine that has a faster one.
#[cfg(target_arch = "x86_64")]
#[test]
fn every_kernel_this_cpu_has_matches_the_reference() {
    type Kernel = unsafe fn(u32, &[u8]) -> u32;
    let kernels: [(&str, bool, Kernel); 3] = [
        ("avx512", crc32c::avx512::detected(), crc32c::avx512::append),
        (
            "vpclmul",
            crc32c::vpclmul::detected(),
            crc32c::vpclmul::append,
        ),
        ("sse42", crc32c::sse42::detected(), crc32c::sse42::append),
    ];
    let data = bytes(3 * 4096 + 600, 5);
    let mut ran = 0;
    for (name, present, kernel) in kernels {
        if !present {
            continue;
        }
        ran += 1;
        for len in [
            0,
            1,
            255,
            256,
            257,
            511,
            512,
            1000,
            4096,
            4097,
            8192 + 300,
            3 * 4096 + 513,
        ] {
            for start in [0, 3, 64] {
                let d = &data[start..start + len];
                for init in [0u32, 0xFFFF_FFFF, 0x89AB_CDEF] {
                    // SAFETY: the kernel's features are present (checked above).
                    let got = unsafe { kernel(init, d) };
                    assert_eq!(
                        got,
                        reference::crc32c_append(init, d),
                        "{name}: len {len} start {start} init {init:#x}"
                    );
                }
            }
        }
    }
    // Any x86_64 this runs on has SSE 4.2 (the project's floor).
    assert!(ran >= 1, "no CRC-32C kernel ran");
}
