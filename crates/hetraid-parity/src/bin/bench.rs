//! Throughput of hetraid's kernels for `scripts/bench-parity.sh`:
//! `hetraid-parity-bench xor|pq|recover|pq-update|memcpy|crc32c|crc32c-crate K CHUNK_BYTES WORKING_SET_BYTES MILLIS`
//! prints "<GB/s of source data processed> <kernel set name>": the K data
//! blocks of a stripe per step, except pq-update (one block per step).
//! recover rebuilds data blocks 0 and 1 of a K+2 row; pq-update folds data
//! block 1's change (old: block 0's bytes, new: block 2's) into P and Q. The crc32c modes
//! checksum K blocks of CHUNK_BYTES per step (crc32c-crate: the `crc32c` crate,
//! the kernel ours replaced).
//! The C harness in scripts/ measures ISA-L the same way.

use std::alloc::{alloc, Layout};
use std::time::Instant;

fn arg(args: &[String], i: usize, what: &str) -> u64 {
    args.get(i).and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        eprintln!("usage: hetraid-parity-bench xor|pq|recover|pq-update|memcpy|crc32c|crc32c-crate K CHUNK_BYTES WORKING_SET_BYTES MILLIS ({what} missing or not a number)");
        std::process::exit(2)
    })
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).cloned().unwrap_or_default();
    let k = arg(&args, 2, "K") as usize;
    let chunk = arg(&args, 3, "CHUNK_BYTES") as usize;
    let ws = arg(&args, 4, "WORKING_SET_BYTES") as usize;
    let millis = arg(&args, 5, "MILLIS");
    let parity = match mode.as_str() {
        "xor" => 1,
        "pq" | "recover" | "pq-update" => 2,
        "memcpy" => 1,
        "crc32c" | "crc32c-crate" => 0,
        _ => {
            eprintln!("mode must be xor, pq, recover, pq-update, memcpy, crc32c or crc32c-crate");
            std::process::exit(2)
        }
    };
    let per_stripe = (k + parity) * chunk;
    let stripes = (ws / per_stripe).max(1);
    let total = stripes * per_stripe;
    // In 2 MiB huge pages (both harnesses): with 4 KiB pages the physical
    // pages under a stripe, and so its L2 set conflicts, change from process to
    // process, and a 64 KiB-in-cache figure moved by 10 % between runs of the
    // same kernel. Not zeroed by the allocator: `alloc_zeroed` touched every
    // page before the advice below, so with THP in "madvise" mode this side
    // ran on 4 KiB pages while the C harness (advice, then first touch) ran
    // on huge pages (AnonHugePages 0 kB against 492 MiB for the 512 MiB
    // working set). The loop after the advice is the first touch; a warning
    // says when the kernel gave fewer huge pages. Never freed (process exits).
    const HUGE: usize = 2 << 20;
    let base =
        unsafe { alloc(Layout::from_size_align(total.div_ceil(HUGE) * HUGE, HUGE).unwrap()) };
    assert!(!base.is_null(), "out of memory");
    // SAFETY: the range is the allocation just made; advice only.
    unsafe {
        libc::madvise(
            base as *mut libc::c_void,
            total.div_ceil(HUGE) * HUGE,
            libc::MADV_HUGEPAGE,
        )
    };
    let buf: &mut [u8] = unsafe { std::slice::from_raw_parts_mut(base, total) };
    for (i, b) in buf.iter_mut().enumerate() {
        *b = (i as u32).wrapping_mul(2654435761).to_le_bytes()[1];
    }
    let mapped = total.div_ceil(HUGE) * HUGE;
    if let Some(huge) = anon_huge_bytes() {
        if huge < mapped as u64 / 2 {
            eprintln!(
                "hetraid-parity-bench: only {} of {} MiB in huge pages (transparent_hugepage off?); figures are not comparable with the C harness's",
                huge >> 20,
                mapped >> 20
            );
        }
    }
    let recover = mode == "recover";
    // Per step only what the C harness does too: point at the stripe's blocks
    // (k pointer stores), then call the kernel.
    let mut arr: [&[u8]; 64] = [&[]; 64];
    let mut ops = 0u64;
    let start = Instant::now();
    let deadline = std::time::Duration::from_millis(millis);
    let mut s = 0usize;
    while start.elapsed() < deadline {
        for _ in 0..16 {
            if recover {
                // The row's blocks on the stack, as the C harness's pointers.
                let st = unsafe { base.add(s * per_stripe) };
                let mut blocks: [&mut [u8]; 64] = std::array::from_fn(|i| {
                    if i < k + parity {
                        // SAFETY: block i of the stripe, inside `buf`; blocks do not overlap.
                        unsafe { std::slice::from_raw_parts_mut(st.add(i * chunk), chunk) }
                    } else {
                        &mut []
                    }
                });
                hetraid_parity::recover(&mut blocks[..k + parity], k, &[0, 1])
                    .expect("a valid row");
                ops += 1;
                s = (s + 1) % stripes;
                continue;
            }
            // SAFETY: the stripe lies inside `buf`; the k data blocks and the
            // parity blocks after them do not overlap.
            let st = unsafe { base.add(s * per_stripe) };
            for (i, slot) in arr[..k].iter_mut().enumerate() {
                *slot = unsafe { std::slice::from_raw_parts(st.add(i * chunk), chunk) };
            }
            let par = unsafe { std::slice::from_raw_parts_mut(st.add(k * chunk), parity * chunk) };
            let srcs = &arr[..k];
            match mode.as_str() {
                "xor" => hetraid_parity::xor_gen(&mut par[..chunk], srcs),
                "pq" => {
                    let (p, q) = par.split_at_mut(chunk);
                    hetraid_parity::pq_gen(srcs, p, q);
                }
                "pq-update" => {
                    let (p, q) = par.split_at_mut(chunk);
                    hetraid_parity::pq_update(1, srcs[0], srcs[2 % k], p, Some(q));
                }
                "crc32c" => {
                    for src in srcs {
                        std::hint::black_box(hetraid_parity::crc32c::crc32c(src));
                    }
                }
                "crc32c-crate" => {
                    for src in srcs {
                        std::hint::black_box(crc32c::crc32c(src));
                    }
                }
                _ => {
                    for (i, src) in srcs.iter().enumerate() {
                        // memcpy baseline: copy every source once (k * chunk bytes).
                        let dst = &mut par[..chunk];
                        dst.copy_from_slice(src);
                        std::hint::black_box(i);
                    }
                }
            }
            std::hint::black_box(par.first());
            ops += 1;
            s = (s + 1) % stripes;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let per_op = if mode == "pq-update" {
        chunk
    } else {
        k * chunk
    };
    let gbps = (ops as f64 * per_op as f64) / secs / 1e9;
    let name = if mode == "crc32c-crate" {
        "crc32c-crate"
    } else if parity == 0 {
        hetraid_parity::crc32c::kernel_name()
    } else {
        hetraid_parity::kernels::best().name()
    };
    println!("{gbps:.2} {name}");
}

/// This process's anonymous memory in transparent huge pages (None when
/// /proc does not say).
fn anon_huge_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/smaps_rollup").ok()?;
    let line = text.lines().find(|l| l.starts_with("AnonHugePages:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}
