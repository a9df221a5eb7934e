//! Throughput of hetraid's kernels for `scripts/bench-parity.sh`:
//!
//! `hetraid-parity-bench xor|pq|recover|pq-update|memcpy|crc32c|crc32c-crate K CHUNK_BYTES WORKING_SET_BYTES MILLIS`
//! prints "<GB/s of source data processed> <kernel set name>": the K data
//! blocks of a stripe per step, except pq-update (one block per step).
//! recover rebuilds data blocks 0 and 1 of a K+2 row; pq-update folds data
//! block 1's change (old: block 0's bytes, new: block 2's) into P and Q. The crc32c modes
//! checksum K blocks of CHUNK_BYTES per step (crc32c-crate: the `crc32c` crate,
//! the kernel ours replaced).
//!
//! `hetraid-parity-bench --versus-isal MODE K CHUNK_BYTES WORKING_SET_BYTES MILLIS`
//! (xor, pq, recover, pq-update, crc32c) runs the same steps with ISA-L
//! (loaded at run time from `libisal.so.2`) in the same process, on the same
//! buffers, interleaved in slices of about a millisecond in a random order
//! per round, until each side has run MILLIS ms; it prints
//! "<hetraid GB/s> <isa-l GB/s> <ratio> <kernel set name>": each side's
//! median GB/s over the rounds, and the median of the rounds' ratios.
//! Why in one process: on a shared machine the memory bandwidth a process
//! gets moves by 10-25 % from one second to the next (pq 4+2 from memory,
//! 11 pairs of 200 ms processes back to back: pair ratios 0.83-1.34), and
//! each process also gets other physical pages. Slices a millisecond apart
//! see the same machine; over a few hundred rounds the noise cancels.
//! The stripe cursor is shared, so with a working set larger than the
//! caches both sides read from memory.
//!
//! `hetraid-parity-bench --versus-rusty MODE ...` (xor, pq, recover,
//! pq-update): the same, against the `rusty_erasure` crate.
//!
//! `hetraid-parity-bench --isal-vs-isal MODE ...` is the control: ISA-L on
//! both sides, the same harness otherwise. Its ratio shows what the method
//! itself adds on a machine (0.994-1.004 in five runs of pq-update 4+2 4K
//! on the 2-core Zen 3 VM the figures in docs/BENCHMARKS.md come from; from memory,
//! 400 ms runs of pq 4+2: 0.994-1.020 over 8 runs, XOR 4+1 0.996-1.014).

use std::alloc::{alloc, Layout};
use std::time::{Duration, Instant};

fn arg(args: &[String], i: usize, what: &str) -> u64 {
    args.get(i).and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        eprintln!("hetraid-parity-bench: {what} missing or not a number; usage: hetraid-parity-bench [--versus-isal|--versus-rusty|--isal-vs-isal] xor|pq|recover|pq-update|memcpy|crc32c|crc32c-crate K CHUNK_BYTES WORKING_SET_BYTES MILLIS");
        std::process::exit(2)
    })
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Xor,
    Pq,
    Recover,
    PqUpdate,
    Memcpy,
    Crc32c,
    Crc32cCrate,
}

impl Mode {
    fn parse(s: &str) -> Option<Mode> {
        Some(match s {
            "xor" => Mode::Xor,
            "pq" => Mode::Pq,
            "recover" => Mode::Recover,
            "pq-update" => Mode::PqUpdate,
            "memcpy" => Mode::Memcpy,
            "crc32c" => Mode::Crc32c,
            "crc32c-crate" => Mode::Crc32cCrate,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Mode::Xor => "xor",
            Mode::Pq => "pq",
            Mode::Recover => "recover",
            Mode::PqUpdate => "pq-update",
            Mode::Memcpy => "memcpy",
            Mode::Crc32c => "crc32c",
            Mode::Crc32cCrate => "crc32c-crate",
        }
    }

    /// Parity blocks per stripe.
    fn parity(self) -> usize {
        match self {
            Mode::Xor | Mode::Memcpy => 1,
            Mode::Pq | Mode::Recover | Mode::PqUpdate => 2,
            Mode::Crc32c | Mode::Crc32cCrate => 0,
        }
    }
}

/// The buffers: `stripes` stripes of `k + parity` blocks of `chunk` bytes.
struct Stripes {
    mode: Mode,
    k: usize,
    chunk: usize,
    per_stripe: usize,
    stripes: usize,
    base: *mut u8,
}

impl Stripes {
    /// The buffers, or why they cannot be had (the caller checked `k` and
    /// `chunk`, so `per_stripe` fits).
    fn new(mode: Mode, k: usize, chunk: usize, ws: usize) -> Result<Stripes, String> {
        let per_stripe = (k + mode.parity()) * chunk;
        let stripes = (ws / per_stripe).max(1);
        let total = stripes * per_stripe;
        // In 2 MiB huge pages: with 4 KiB pages the physical pages under a
        // stripe, and so its L2 set conflicts, change from process to
        // process, and a 64 KiB-in-cache figure moved by 10 % between runs of
        // the same kernel. Not zeroed by the allocator: `alloc_zeroed`
        // touched every page before the advice below, so with THP in
        // "madvise" mode the buffers were on 4 KiB pages (AnonHugePages 0 kB
        // for the 512 MiB working set). The loop after the advice is the
        // first touch; a warning says when the kernel gave fewer huge pages.
        // Never freed (the process exits).
        const HUGE: usize = 2 << 20;
        let too_big = || {
            format!("cannot allocate a working set of {total} bytes; give WORKING_SET_BYTES that fits in memory")
        };
        let mapped = total.checked_next_multiple_of(HUGE).ok_or_else(too_big)?;
        // The first touch below would otherwise meet the OOM killer.
        if let Some(available) = mem_available_bytes() {
            if mapped as u64 > available {
                return Err(format!(
                    "a working set of {} MiB does not fit in the {} MiB of memory available; give a smaller WORKING_SET_BYTES or CHUNK_BYTES",
                    mapped >> 20,
                    available >> 20
                ));
            }
        }
        let layout = Layout::from_size_align(mapped, HUGE).map_err(|_| too_big())?;
        // SAFETY: a layout of non-zero size.
        let base = unsafe { alloc(layout) };
        if base.is_null() {
            return Err(too_big());
        }
        // SAFETY: the range is the allocation just made; advice only.
        unsafe { libc::madvise(base as *mut libc::c_void, mapped, libc::MADV_HUGEPAGE) };
        // SAFETY: the allocation is `mapped >= total` bytes, ours alone.
        let buf: &mut [u8] = unsafe { std::slice::from_raw_parts_mut(base, total) };
        for (i, b) in buf.iter_mut().enumerate() {
            *b = (i as u32).wrapping_mul(2654435761).to_le_bytes()[1];
        }
        if let Some(huge) = anon_huge_bytes() {
            if huge < mapped as u64 / 2 {
                eprintln!(
                    "hetraid-parity-bench: only {} of {} MiB in huge pages (transparent_hugepage off?); figures move from run to run",
                    huge >> 20,
                    mapped >> 20
                );
            }
        }
        Ok(Stripes {
            mode,
            k,
            chunk,
            per_stripe,
            stripes,
            base,
        })
    }

    /// Bytes one step counts.
    fn step_bytes(&self) -> usize {
        if self.mode == Mode::PqUpdate {
            self.chunk
        } else {
            self.k * self.chunk
        }
    }

    /// Block `i` of stripe `s`.
    fn block(&self, s: usize, i: usize) -> *mut u8 {
        debug_assert!(s < self.stripes && i < self.per_stripe / self.chunk);
        // SAFETY: inside the allocation (checked above).
        unsafe { self.base.add(s * self.per_stripe + i * self.chunk) }
    }

    /// One step of hetraid's kernels on stripe `s`. Per step only what the
    /// ISA-L side does too: point at the stripe's blocks (in `scratch`,
    /// which lives across steps), call the kernel.
    fn ours(&self, s: usize, scratch: &mut Scratch) {
        let (k, chunk) = (self.k, self.chunk);
        // SAFETY (all the slices below): blocks of stripe `s`, inside the
        // allocation, which is never freed; the blocks of a stripe do not
        // overlap, and each step replaces the previous step's slices.
        // SAFETY: as the comment above says for all these slices.
        let block = |i: usize| unsafe { std::slice::from_raw_parts(self.block(s, i), chunk) };
        // SAFETY: as the comment above says for all these slices.
        let block_mut =
            |i: usize| unsafe { std::slice::from_raw_parts_mut(self.block(s, i), chunk) };
        if self.mode == Mode::Recover {
            for (i, slot) in scratch.rows.0[..k + 2].iter_mut().enumerate() {
                *slot = block_mut(i);
            }
            hetraid_parity::recover(&mut scratch.rows.0[..k + 2], k, &[0, 1]).expect("a valid row");
            return;
        }
        for (i, slot) in scratch.srcs.0[..k].iter_mut().enumerate() {
            *slot = block(i);
        }
        let srcs = &scratch.srcs.0[..k];
        match self.mode {
            Mode::Xor => hetraid_parity::xor_gen(block_mut(k), srcs),
            Mode::Pq => hetraid_parity::pq_gen(srcs, block_mut(k), block_mut(k + 1)),
            Mode::PqUpdate => hetraid_parity::pq_update(
                1,
                srcs[0],
                srcs[2 % k],
                block_mut(k),
                Some(block_mut(k + 1)),
            ),
            Mode::Crc32c => {
                for src in srcs {
                    std::hint::black_box(hetraid_parity::crc32c::crc32c(src));
                }
            }
            Mode::Crc32cCrate => {
                for src in srcs {
                    std::hint::black_box(crc32c::crc32c(src));
                }
            }
            Mode::Memcpy => {
                // Copy every source once (k * chunk bytes).
                for src in srcs {
                    block_mut(k).copy_from_slice(src);
                    std::hint::black_box(block(k).first());
                }
            }
            Mode::Recover => unreachable!("handled above"),
        }
        std::hint::black_box(block(0).first());
    }
}

/// The block tables a step fills (built once: zeroing 64 entries per
/// step was 2-10 % of a 4 KiB step). Each table starts a page, in both
/// sides' scratch: the kernels reload source pointers from their table in
/// the inner loop, and where the table sits against the output addresses
/// (the low 12 bits: 4K aliasing with stores in flight) moved the control,
/// ISA-L against itself (pq 4+2 from memory, 400 ms), between 0.958 and
/// 1.054 from process to process with the tables on the stack at ASLR's
/// offsets; with ASLR off, 1.0016-1.0077.
struct Scratch {
    srcs: Box<Page<[&'static [u8]; 64]>>,
    rows: Box<Page<[&'static mut [u8]; 64]>>,
    ptrs: Box<Page<[*mut u8; 64]>>,
}

#[repr(align(4096))]
struct Page<T>(T);

impl Scratch {
    fn new() -> Scratch {
        Scratch {
            srcs: Box::new(Page([&[]; 64])),
            rows: Box::new(Page(std::array::from_fn(|_| <&mut [u8]>::default()))),
            ptrs: Box::new(Page([std::ptr::null_mut(); 64])),
        }
    }
}

fn stripes_or_exit(mode: Mode, k: usize, chunk: usize, ws: usize) -> Stripes {
    Stripes::new(mode, k, chunk, ws).unwrap_or_else(|e| {
        eprintln!("hetraid-parity-bench: {e}");
        std::process::exit(1)
    })
}

/// Run `calls` steps from stripe `*cursor` on, advancing it; the time taken.
fn slice(st: &Stripes, cursor: &mut usize, calls: u64, mut step: impl FnMut(usize)) -> Duration {
    let t = Instant::now();
    for _ in 0..calls {
        step(*cursor);
        *cursor = (*cursor + 1) % st.stripes;
    }
    t.elapsed()
}

fn main() {
    let mut args: Vec<String> = std::env::args().collect();
    let control = args.get(1).is_some_and(|a| a == "--isal-vs-isal");
    let rusty = args.get(1).is_some_and(|a| a == "--versus-rusty");
    let versus = control || rusty || args.get(1).is_some_and(|a| a == "--versus-isal");
    if versus {
        args.remove(1);
    }
    let Some(mode) = args.get(1).and_then(|m| Mode::parse(m)) else {
        eprintln!("hetraid-parity-bench: mode must be xor, pq, recover, pq-update, memcpy, crc32c or crc32c-crate");
        std::process::exit(2)
    };
    let k = arg(&args, 2, "K") as usize;
    let chunk = arg(&args, 3, "CHUNK_BYTES") as usize;
    let ws = arg(&args, 4, "WORKING_SET_BYTES") as usize;
    let millis = arg(&args, 5, "MILLIS");
    if millis == 0 || millis > 3_600_000 {
        eprintln!("hetraid-parity-bench: MILLIS must be 1..=3600000 (how long each side runs)");
        std::process::exit(2)
    }
    let k_max = if mode.parity() == 2 { 62 } else { 63 };
    if k == 0
        || k > k_max
        || (mode == Mode::Recover && k < 2)
        || chunk == 0
        || chunk > i32::MAX as usize
    {
        eprintln!("hetraid-parity-bench: K must be 1..={k_max} (2 or more for recover) and CHUNK_BYTES 1..=2^31-1");
        std::process::exit(2)
    }
    let name = match mode {
        _ if control => "isa-l",
        Mode::Crc32cCrate => "crc32c-crate",
        Mode::Crc32c => hetraid_parity::crc32c::kernel_name(),
        _ => hetraid_parity::kernels::best().name(),
    };
    if !versus {
        let st = stripes_or_exit(mode, k, chunk, ws);
        let (mut cursor, mut calls, mut took) = (0, 0u64, Duration::ZERO);
        let deadline = Duration::from_millis(millis);
        let mut scratch = Scratch::new();
        while took < deadline {
            took += slice(&st, &mut cursor, 16, |s| st.ours(s, &mut scratch));
            calls += 16;
        }
        let gbps = (calls as f64 * st.step_bytes() as f64) / took.as_secs_f64() / 1e9;
        println!("{gbps:.2} {name}");
        return;
    }
    if rusty && mode == Mode::Crc32c {
        eprintln!("hetraid-parity-bench: --versus-rusty takes xor, pq, recover or pq-update (rusty_erasure has no CRC-32C)");
        std::process::exit(2)
    }
    if matches!(mode, Mode::Memcpy | Mode::Crc32cCrate) {
        eprintln!(
            "hetraid-parity-bench: --versus-isal and --isal-vs-isal take xor, pq, recover, pq-update or crc32c"
        );
        std::process::exit(2)
    }
    if (k < 2 && mode != Mode::Crc32c) || (mode == Mode::Pq && !chunk.is_multiple_of(32)) {
        eprintln!("hetraid-parity-bench: ISA-L takes 2 or more data blocks (but for crc32c), and pq_gen lengths in multiples of 32 bytes; choose K and CHUNK_BYTES to fit");
        std::process::exit(2)
    }
    let loaded = match rusty {
        true => rusty::Rusty::new(k).map(Baseline::Rusty),
        false => isal::Isal::load(k).map(Baseline::Isal),
    };
    let isal = match loaded {
        Ok(isal) => isal,
        Err(e) => {
            eprintln!("hetraid-parity-bench: {e}");
            std::process::exit(1)
        }
    };
    let st = stripes_or_exit(mode, k, chunk, ws);
    if let Err(e) = same_results(&st, &isal) {
        eprintln!("hetraid-parity-bench: {e}; the comparison would be void");
        std::process::exit(1)
    }
    let (mut ours_scratch, mut their_scratch) = (Scratch::new(), Scratch::new());
    let isal_step = |s: usize, scratch: &mut Scratch| {
        for (i, p) in scratch.ptrs.0[..k + mode.parity()].iter_mut().enumerate() {
            *p = st.block(s, i);
        }
        // SAFETY: the pointers are the stripe's blocks of `chunk` bytes each.
        unsafe { isal.step(mode, k, chunk, &mut scratch.ptrs.0) }
    };
    let mut ours = |s: usize| {
        if control {
            isal_step(s, &mut ours_scratch)
        } else {
            st.ours(s, &mut ours_scratch)
        }
    };
    let mut theirs = |s: usize| isal_step(s, &mut their_scratch);
    // Warm both up (first calls set up tables and probes), then size each
    // side's slice to about a millisecond.
    let mut cursor = 0;
    let per_ms = |took: Duration, calls: u64| {
        (calls as f64 / took.as_secs_f64().max(1e-9) / 1e3).max(1.0) as u64
    };
    let mut warm = |step: &mut dyn FnMut(usize)| {
        let (mut calls, mut took) = (0, Duration::ZERO);
        while took < Duration::from_millis(20) {
            took += slice(&st, &mut cursor, 4, &mut *step);
            calls += 4;
        }
        per_ms(took, calls)
    };
    let slices = [warm(&mut ours), warm(&mut theirs)];
    let mut took = [Duration::ZERO; 2];
    let deadline = Duration::from_millis(millis);
    // Per round, each side's GB/s in its slice.
    let mut rounds: Vec<[f64; 2]> = Vec::new();
    // A fixed seed: the order differs from round to round, not from run to run.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    while took[0] < deadline || took[1] < deadline {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let order = if x & 1 == 0 { [0, 1] } else { [1, 0] };
        let mut round = [0.0; 2];
        for side in order {
            let t = if side == 0 {
                slice(&st, &mut cursor, slices[0], &mut ours)
            } else {
                slice(&st, &mut cursor, slices[1], &mut theirs)
            };
            took[side] += t;
            round[side] =
                (slices[side] * st.step_bytes() as u64) as f64 / t.as_secs_f64().max(1e-9) / 1e9;
        }
        rounds.push(round);
    }
    // Medians, not totals: a slice during which the hypervisor took the CPU
    // away for some milliseconds (steal time; this VM shows it) counts as one
    // slow round, not as 5 % of a side's total time. Totals made the control
    // (--isal-vs-isal, pq 4+2 from memory) range 0.92-1.08 over 9 runs of
    // 200 ms.
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let gbps = |side: usize| median(rounds.iter().map(|r| r[side]).collect());
    let ratio = median(rounds.iter().map(|r| r[0] / r[1]).collect());
    println!("{:.2} {:.2} {ratio:.4} {name}", gbps(0), gbps(1));
}

/// Both sides compute the same bytes (or checksums) on stripe 0, each from
/// the stripe's contents before either ran; the stripe is left as it was.
/// Guards the ISA-L side's setup (the RAID-6 decode matrix above all): a
/// baseline that computed something else would make every ratio meaningless.
fn same_results(st: &Stripes, isal: &Baseline) -> Result<(), String> {
    let (k, chunk) = (st.k, st.chunk);
    let blocks = st.per_stripe / chunk;
    // SAFETY: stripe 0 is the first `per_stripe` bytes of the allocation.
    let stripe = || unsafe { std::slice::from_raw_parts_mut(st.block(0, 0), st.per_stripe) };
    let before = stripe().to_vec();
    let mut ptrs = [std::ptr::null_mut(); 64];
    for (i, p) in ptrs[..blocks].iter_mut().enumerate() {
        *p = st.block(0, i);
    }
    let what = format!("{} {k} blocks of {chunk} bytes", st.mode.name());
    if st.mode == Mode::Crc32c {
        for (i, p) in ptrs[..k].iter().enumerate() {
            // SAFETY: block i of stripe 0.
            let block = unsafe { std::slice::from_raw_parts(*p, chunk) };
            let Baseline::Isal(isal) = isal else {
                unreachable!("crc32c is measured against ISA-L only")
            };
            // ISA-L's crc32_iscsi leaves out the final inversion.
            // SAFETY: ISA-L's crc32_iscsi reads `chunk` bytes of block i of stripe 0.
            let theirs = !unsafe { isal.crc32_iscsi(*p, chunk) };
            let ours = hetraid_parity::crc32c::crc32c(block);
            if ours != theirs {
                return Err(format!(
                    "{what}: block {i} checksums to {ours:#010x} here and {theirs:#010x} in ISA-L"
                ));
            }
        }
        return Ok(());
    }
    st.ours(0, &mut Scratch::new());
    let ours = stripe().to_vec();
    stripe().copy_from_slice(&before);
    // SAFETY: the pointers are stripe 0's blocks.
    unsafe { isal.step(st.mode, k, chunk, &mut ptrs) };
    let theirs = stripe().to_vec();
    stripe().copy_from_slice(&before);
    match (0..blocks)
        .find(|b| ours[b * chunk..(b + 1) * chunk] != theirs[b * chunk..(b + 1) * chunk])
    {
        Some(b) => Err(format!(
            "{what}: block {b} of the stripe differs between hetraid and ISA-L"
        )),
        None => Ok(()),
    }
}

/// MemAvailable from /proc/meminfo (None when it does not say).
fn mem_available_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// This process's anonymous memory in transparent huge pages (None when
/// /proc does not say).
fn anon_huge_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/smaps_rollup").ok()?;
    let line = text.lines().find(|l| l.starts_with("AnonHugePages:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// The RAID-6 rows both baselines are given: encoding (P all ones, Q the
/// powers of g = 2) and decoding data blocks 0 and 1 from data 2..K-1, P and
/// Q, as `k`-wide rows of coefficients, computed with the field's `mul` and
/// `inv` (ISA-L's own for ISA-L).
fn raid6_rows(k: usize, mul: impl Fn(u8, u8) -> u8, inv: impl Fn(u8) -> u8) -> (Vec<u8>, Vec<u8>) {
    let mut enc = vec![0u8; 2 * k];
    let mut g = 1u8;
    for i in 0..k {
        enc[i] = 1;
        enc[k + i] = g;
        g = mul(g, 2);
    }
    let mut dec = vec![0u8; 2 * k];
    if k >= 2 {
        let (inv3, mut gi) = (inv(3), 4u8); // g^2
        for i in 2..k {
            let d1 = mul(inv3, 1 ^ gi);
            dec[i - 2] = 1 ^ d1; // D0
            dec[k + i - 2] = d1; // D1
            gi = mul(gi, 2);
        }
        dec[k - 2] = 1 ^ inv3; // P into D0
        dec[k - 1] = inv3; // Q into D0
        dec[2 * k - 2] = inv3; // P into D1
        dec[2 * k - 1] = inv3; // Q into D1
    }
    (enc, dec)
}

/// `rusty_erasure` (crates.io, pure Rust, byte-identical to ISA-L by its
/// own account and checked here by `same_results`), the second baseline
/// (`--versus-rusty`): the same steps as [`isal::Isal::step`], through the
/// crate's ISA-L-shaped API. A dependency of this crate only for this
/// benchmark; the library never calls it.
mod rusty {
    use super::Mode;

    pub struct Rusty {
        enc_tables: Vec<u8>,
        dec_tables: Vec<u8>,
    }

    impl Rusty {
        pub fn new(k: usize) -> Result<Rusty, String> {
            let (enc, dec) = super::raid6_rows(k, hetraid_parity::gf::mul, hetraid_parity::gf::inv);
            let (mut enc_tables, mut dec_tables) = (vec![0u8; 32 * 2 * k], vec![0u8; 32 * 2 * k]);
            let init = |rows: &[u8], tables: &mut [u8]| {
                rusty_erasure::isal::ec_init_tables(k, 2, rows, tables)
                    .map_err(|e| format!("rusty_erasure refused the RAID-6 tables: {e:?}"))
            };
            init(&enc, &mut enc_tables)?;
            init(&dec, &mut dec_tables)?;
            Ok(Rusty {
                enc_tables,
                dec_tables,
            })
        }

        /// One step on a stripe whose blocks are `ptrs[..k + parity]`.
        ///
        /// # Safety
        /// As [`super::isal::Isal::step`].
        pub unsafe fn step(&self, mode: Mode, k: usize, chunk: usize, ptrs: &mut [*mut u8; 64]) {
            // SAFETY: the caller's contract: each pointer addresses `chunk`
            // bytes of its own block; a slice lives for this step only.
            let block = |i: usize| unsafe { std::slice::from_raw_parts(ptrs[i], chunk) };
            // SAFETY: as above; no two live mutable slices share a block.
            let block_mut = |i: usize| unsafe { std::slice::from_raw_parts_mut(ptrs[i], chunk) };
            let mut srcs: [&[u8]; 64] = [&[]; 64];
            let r = match mode {
                Mode::Xor => {
                    (0..k).for_each(|i| srcs[i] = block(i));
                    rusty_erasure::raid::xor_gen(&srcs[..k], block_mut(k))
                }
                Mode::Pq => {
                    (0..k).for_each(|i| srcs[i] = block(i));
                    rusty_erasure::raid::pq_gen(&srcs[..k], block_mut(k), block_mut(k + 1))
                }
                Mode::Recover => {
                    // Data 2..K-1, P and Q in; data 0 and 1 out.
                    (0..k).for_each(|i| srcs[i] = block(i + 2));
                    let mut out = [block_mut(0), block_mut(1)];
                    rusty_erasure::isal::ec_encode_data(
                        chunk,
                        k,
                        2,
                        &self.dec_tables,
                        &srcs[..k],
                        &mut out,
                    )
                }
                Mode::PqUpdate => {
                    // As ISA-L: two updates of block 1 (old = block 0's
                    // bytes, new = block 2's) into P and Q.
                    let t = &self.enc_tables;
                    let mut par = [block_mut(k), block_mut(k + 1)];
                    rusty_erasure::isal::ec_encode_data_update(
                        chunk,
                        k,
                        2,
                        1,
                        t,
                        block(0),
                        &mut par,
                    )
                    .and_then(|()| {
                        rusty_erasure::isal::ec_encode_data_update(
                            chunk,
                            k,
                            2,
                            1,
                            t,
                            block(2 % k),
                            &mut par,
                        )
                    })
                }
                Mode::Crc32c | Mode::Memcpy | Mode::Crc32cCrate => {
                    unreachable!("refused in main")
                }
            };
            r.expect("rusty_erasure takes the stripe (checked by same_results)");
            std::hint::black_box(ptrs[0]);
        }
    }
}

/// The baseline a `--versus-*` run measures against.
enum Baseline {
    Isal(isal::Isal),
    Rusty(rusty::Rusty),
}

impl Baseline {
    /// # Safety
    /// As [`isal::Isal::step`].
    unsafe fn step(&self, mode: Mode, k: usize, chunk: usize, ptrs: &mut [*mut u8; 64]) {
        // SAFETY: the caller's contract, passed on.
        unsafe {
            match self {
                Baseline::Isal(i) => i.step(mode, k, chunk, ptrs),
                Baseline::Rusty(r) => r.step(mode, k, chunk, ptrs),
            }
        }
    }
}

/// ISA-L, loaded with `dlopen` so that the bench builds and runs without
/// it (only `--versus-isal` needs it), and the steps the C harness this
/// replaces ran, call for call.
mod isal {
    use super::Mode;
    use std::ffi::{c_int, c_uchar, c_uint, c_void, CStr};

    type XorGen = unsafe extern "C" fn(c_int, c_int, *mut *mut c_void) -> c_int;
    type InitTables = unsafe extern "C" fn(c_int, c_int, *const c_uchar, *mut c_uchar);
    type Encode = unsafe extern "C" fn(
        c_int,
        c_int,
        c_int,
        *const c_uchar,
        *const *mut c_uchar,
        *const *mut c_uchar,
    );
    type EncodeUpdate = unsafe extern "C" fn(
        c_int,
        c_int,
        c_int,
        c_int,
        *const c_uchar,
        *mut c_uchar,
        *const *mut c_uchar,
    );
    type GfMul = unsafe extern "C" fn(c_uchar, c_uchar) -> c_uchar;
    type GfInv = unsafe extern "C" fn(c_uchar) -> c_uchar;
    type Crc = unsafe extern "C" fn(*const c_uchar, c_int, c_uint) -> c_uint;

    /// `vzeroupper`, which ISA-L's assembly never executes (the library has
    /// none): its AVX2 functions return with the upper halves of the ymm
    /// registers dirty, and on the Zen 3 measured the SSE instructions this
    /// harness runs between calls (compiled for baseline x86-64) then run
    /// slowly. ISA-L against itself in this process, one side with the
    /// instruction after each call: pq-update 4+2 of 4 KiB 1.21-1.32 times
    /// as fast with it; without it, ISA-L here ran at 0.84 of the C harness
    /// (median of 21 pairs), whose loop has no SSE code. Compiled AVX code
    /// (ours included) executes it before it returns, as the ABI expects.
    fn zero_upper() {
        #[target_feature(enable = "avx")]
        unsafe fn zero_upper_avx() {
            std::arch::x86_64::_mm256_zeroupper()
        }
        if is_x86_feature_detected!("avx") {
            // SAFETY: AVX is present.
            unsafe { zero_upper_avx() }
        }
    }

    pub struct Isal {
        xor_gen: XorGen,
        pq_gen: XorGen,
        encode: Encode,
        encode_update: EncodeUpdate,
        crc32_iscsi: Crc,
        /// RAID-6 encoding (P row all 1, Q row g^i), expanded.
        enc_tables: Vec<u8>,
        /// Decoding data blocks 0 and 1 from data 2..K-1, P and Q, expanded.
        dec_tables: Vec<u8>,
    }

    /// `dlsym` of `name` as a function pointer of type `T`.
    unsafe fn sym<T: Copy>(lib: *mut c_void, name: &CStr) -> Result<T, String> {
        // SAFETY: the caller keeps this function's contract (see its documentation).
        unsafe {
            let p = libc::dlsym(lib, name.as_ptr());
            if p.is_null() {
                return Err(format!(
                    "libisal has no symbol {name:?}; install libisal-dev 2.30 or newer"
                ));
            }
            assert_eq!(std::mem::size_of::<T>(), std::mem::size_of::<*mut c_void>());
            Ok(std::mem::transmute_copy(&p))
        }
    }

    impl Isal {
        pub fn load(k: usize) -> Result<Isal, String> {
            // SAFETY: dlopen/dlsym with NUL-terminated names; each symbol is
            // cast to its type in ISA-L's headers (erasure_code.h, raid.h, crc.h).
            unsafe {
                let mut lib = std::ptr::null_mut();
                for name in [c"libisal.so.2", c"libisal.so"] {
                    lib = libc::dlopen(name.as_ptr(), libc::RTLD_NOW);
                    if !lib.is_null() {
                        break;
                    }
                }
                if lib.is_null() {
                    return Err("cannot load ISA-L (libisal.so.2); install it with `apt-get install libisal-dev`".into());
                }
                let init: InitTables = sym(lib, c"ec_init_tables")?;
                let gf_mul: GfMul = sym(lib, c"gf_mul")?;
                let gf_inv: GfInv = sym(lib, c"gf_inv")?;
                let (enc, dec) = super::raid6_rows(k, |a, b| gf_mul(a, b), |a| gf_inv(a));
                let (mut enc_tables, mut dec_tables) =
                    (vec![0u8; 32 * 2 * k], vec![0u8; 32 * 2 * k]);
                init(k as c_int, 2, enc.as_ptr(), enc_tables.as_mut_ptr());
                init(k as c_int, 2, dec.as_ptr(), dec_tables.as_mut_ptr());
                Ok(Isal {
                    xor_gen: sym(lib, c"xor_gen")?,
                    pq_gen: sym(lib, c"pq_gen")?,
                    encode: sym(lib, c"ec_encode_data")?,
                    encode_update: sym(lib, c"ec_encode_data_update")?,
                    crc32_iscsi: sym(lib, c"crc32_iscsi")?,
                    enc_tables,
                    dec_tables,
                })
            }
        }

        /// ISA-L's CRC-32C of `len` bytes at `p` (initial value all ones,
        /// no final inversion).
        ///
        /// # Safety
        /// `p` addresses `len` readable bytes.
        pub unsafe fn crc32_iscsi(&self, p: *const u8, len: usize) -> u32 {
            // SAFETY: the caller keeps this function's contract (see its documentation).
            unsafe { (self.crc32_iscsi)(p, len as c_int, 0xffff_ffff) }
        }

        /// One step on a stripe whose blocks are `ptrs[..k + parity]`.
        ///
        /// # Safety
        /// Each of those pointers addresses `chunk` bytes, the blocks do not
        /// overlap, and `k` is the one given to [`Isal::load`].
        pub unsafe fn step(&self, mode: Mode, k: usize, chunk: usize, ptrs: &mut [*mut u8; 64]) {
            // SAFETY: the caller keeps this function's contract (see its documentation).
            unsafe {
                let (kc, len) = (k as c_int, chunk as c_int);
                let vp = ptrs.as_mut_ptr() as *mut *mut c_void;
                match mode {
                    Mode::Xor => {
                        (self.xor_gen)(kc + 1, len, vp);
                    }
                    Mode::Pq => {
                        (self.pq_gen)(kc + 2, len, vp);
                    }
                    Mode::Recover => {
                        // Data 2..K-1, P and Q in; data 0 and 1 out.
                        let out = [ptrs[0], ptrs[1]];
                        (self.encode)(
                            len,
                            kc,
                            2,
                            self.dec_tables.as_ptr(),
                            ptrs[2..].as_ptr(),
                            out.as_ptr(),
                        );
                    }
                    Mode::PqUpdate => {
                        // Old = block 0's bytes, new = block 2's, into P and Q of
                        // block 1: ISA-L has no fused delta, so two updates.
                        let par = [ptrs[k], ptrs[k + 1]];
                        let t = self.enc_tables.as_ptr();
                        (self.encode_update)(len, kc, 2, 1, t, ptrs[0], par.as_ptr());
                        (self.encode_update)(len, kc, 2, 1, t, ptrs[2 % k], par.as_ptr());
                    }
                    Mode::Crc32c => {
                        for p in &ptrs[..k] {
                            std::hint::black_box((self.crc32_iscsi)(*p, len, 0xffff_ffff));
                        }
                    }
                    Mode::Memcpy | Mode::Crc32cCrate => unreachable!("refused in main"),
                }
                std::hint::black_box(ptrs[0]);
                zero_upper();
            }
        }
    }
}
