//! Plain or non-temporal stores, by where a kernel's sources are.
//!
//! Non-temporal stores skip the read-for-ownership of each output line and
//! keep the output out of the cache: streaming a 4+1 XOR from memory they
//! write 5 units of traffic instead of 6 (measured here: 16.6 against 13.4
//! GB/s). When the sources are in cache they are the wrong choice: every
//! output line goes to memory (the store bandwidth becomes the limit, 64
//! against 69 GB/s for 4+1 at 64 KiB), and the caller reads the output next
//! (a `pwrite` copies parity out of it; recovered data goes to a client).
//! The size of a call does not tell the two apart (a 64 KiB stripe just
//! written by a client and one streamed from memory are the same size), so
//! the kernel asks the hardware: it times its first [`PROBE`] bytes, run with
//! plain stores, against the same work found in cache. When the first pass
//! took over [`Kind::slower`] times as long, the sources came from memory and the
//! rest of the call streams. The cached time is measured by running the
//! probe a second time (everything is in cache then), on a thread's first
//! call of each kind and every [`RECALIBRATE`]th probe after, and kept per thread
//! per kernel kind, per stream (inputs plus outputs). Both passes write the
//! same bytes (the kernels using this compute their outputs from inputs they
//! do not overwrite), so the probe costs time only. A wrong guess (an
//! interrupt during the first pass) costs speed on one call, never
//! correctness.
//!
//! The probe is not free: the fence that ends its timing drains the loads
//! in flight, and its plain stores read their lines for ownership. From
//! memory that is 3 % of a 64 KiB 4+1 or 8+1 XOR (measured in-process
//! against the same kernel always streaming, 40 interleaved rounds). Work
//! comes in runs (a rebuild or scrub streams stripe after stripe, a client's
//! writes hit stripes it just filled), so after [`STEADY`] calls of a kind
//! decided the same way the probe runs on one call in [`SAMPLE`] only and
//! the others take the same stores; any call that decides differently ends
//! the run. A change of residency costs at most `SAMPLE - 1` calls at the
//! wrong store kind (10-25 % slower each), never correctness.

use std::cell::Cell;

/// Outputs shorter than this always take plain stores (a 4 KiB update's
/// working set stays in cache, and the probe would be a large share).
pub const STREAM_MIN: usize = 16 * 1024;
/// Inputs plus outputs above which a call always streams its output: the
/// ways of a set in L1 and L2 (8 on the AMD and Intel cores measured). A
/// stripe's blocks sit a chunk apart, so their lines at one offset share a
/// set; with more of them than ways, a cached output line evicts an input
/// the next step reads. 8+1 XOR of 64 KiB blocks in one huge page (the
/// bench's layout) in cache: 0.977 of ISA-L with plain stores, 1.019 with
/// non-temporal ones (in-process, 30 interleaved rounds); ISA-L streams
/// always.
pub const WAYS: usize = 8;
/// Bytes of output timed (a multiple of every kernel's step).
pub const PROBE: usize = 2048;

/// Probed calls between two measurements of the cached time.
pub const RECALIBRATE: u32 = 64;
/// Decisions in a row that make a run.
pub const STEADY: u32 = 4;
/// In a run, one call in this many probes.
pub const SAMPLE: u32 = 8;

/// The kernels that choose their stores here (their cached speeds differ).
#[derive(Clone, Copy)]
pub enum Kind {
    Xor = 0,
    Pq = 1,
    Solve = 2,
}

impl Kind {
    /// First pass against the cached one above which the sources came from
    /// memory. Measured on a 2-core AVX2 EPYC (bench, 64 KiB blocks, every
    /// probe's ratio over 200 ms): in cache XOR's first pass is under 2
    /// times the cached one in 80-97 % of probes and under 4 in 99.6 %,
    /// from memory (512 MiB) it is 4-20 times. P+Q and recovery compute
    /// more per byte, so memory shows less: from memory 3-6 times (2-3 in
    /// 1-9 % of probes, under 2 in 0.5 %), in cache under 2 in 99 %. With
    /// 4 for them too, P+Q from memory took plain stores on up to 58 % of
    /// its calls (a read for ownership per output line, 15 against 18 GB/s).
    pub fn slower(self) -> u64 {
        match self {
            Kind::Xor => 4,
            Kind::Pq | Kind::Solve => 2,
        }
    }
}

/// What a thread knows about one kind of kernel.
#[derive(Clone, Copy)]
struct Seen {
    /// Ticks of a cached probe pass per stream (0: not measured yet).
    cached: u64,
    /// Probed calls since `cached` was measured.
    probes: u32,
    /// The last decision, and how many calls in a row took it.
    stream: bool,
    run: u32,
}

thread_local! {
    static SEEN: Cell<[Seen; 3]> = const {
        Cell::new(
            [Seen {
                cached: 0,
                probes: 0,
                stream: false,
                run: 0,
            }; 3],
        )
    };
}

#[inline]
fn ticks() -> u64 {
    // SAFETY: RDTSC and LFENCE exist on every x86_64 CPU; the fence keeps
    // the read after the work before it.
    unsafe {
        std::arch::x86_64::_mm_lfence();
        std::arch::x86_64::_rdtsc()
    }
}

/// Run a kernel `run(from, to, stream)` of kind `kind` with `streams`
/// inputs and outputs over bytes `0..len` of an output at `out`: plain
/// stores under [`STREAM_MIN`] or when `out` is not 32-byte aligned,
/// otherwise the store kind the probe picks.
pub fn run(
    kind: Kind,
    streams: usize,
    out: *const u8,
    len: usize,
    run: impl FnMut(usize, usize, bool),
) {
    run_aligned(kind, streams, (out as usize).is_multiple_of(32), len, run)
}

/// [`run`] for kernels whose streaming stores need more alignment than 32
/// bytes (512-bit ones: 64): `aligned` says whether every output has it;
/// plain stores when not.
pub fn run_aligned(
    kind: Kind,
    streams: usize,
    aligned: bool,
    len: usize,
    mut run: impl FnMut(usize, usize, bool),
) {
    if len < STREAM_MIN || !aligned {
        return run(0, len, false);
    }
    if streams > WAYS {
        // More streams than a cache set has ways: blocks a chunk apart map
        // to the same sets, and a cached output line evicts an input.
        return run(0, len, true);
    }
    let mut all = SEEN.get();
    let seen = &mut all[kind as usize];
    if seen.run >= STEADY && !seen.run.is_multiple_of(SAMPLE) {
        // In a run: the same stores as the calls before, unprobed.
        seen.run = seen.run.wrapping_add(1);
        let stream = seen.stream;
        SEEN.set(all);
        return run(0, len, stream);
    }
    let streams = streams.max(1) as u64;
    let t0 = ticks();
    run(0, PROBE, false);
    let t1 = ticks();
    if seen.cached == 0 || seen.probes >= RECALIBRATE {
        run(0, PROBE, false);
        let per_stream = (ticks() - t1) / streams;
        seen.cached = if seen.cached == 0 {
            per_stream.max(1)
        } else {
            ((3 * seen.cached + per_stream) / 4).max(1)
        };
        seen.probes = 0;
    } else {
        seen.probes += 1;
    }
    let stream = t1 - t0 > kind.slower() * seen.cached * streams;
    if stream == seen.stream {
        // A run of 2^32 calls wraps to a short one (a few more probes).
        seen.run = seen.run.wrapping_add(1);
    } else {
        seen.stream = stream;
        seen.run = 1;
    }
    SEEN.set(all);
    run(PROBE, len, stream);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every call covers its output exactly once past the probe (the probe
    /// may run its bytes twice, both times with plain stores), and a run of
    /// like decisions skips most probes.
    #[test]
    fn calls_cover_the_output_and_runs_skip_the_probe() {
        let len = 64 * 1024;
        // A 32-byte aligned output (an unaligned one is never probed).
        #[derive(Clone, Copy)]
        #[repr(align(32))]
        struct Ymm(#[allow(dead_code)] [u8; 32]);
        let out = vec![Ymm([0; 32]); len / 32];
        let (mut probed, calls) = (0, 200);
        for call in 0..calls {
            let mut ranges = Vec::new();
            run(
                Kind::Xor,
                5,
                out.as_ptr() as *const u8,
                len,
                |from, to, stream| {
                    // Fixed work per byte, so the first pass and the cached one
                    // take about as long (plain stores).
                    let mut x = 0u64;
                    for i in from..to {
                        x = x.wrapping_mul(31).wrapping_add(i as u64);
                    }
                    std::hint::black_box(x);
                    ranges.push((from, to, stream));
                },
            );
            let probes = ranges.iter().filter(|r| **r == (0, PROBE, false)).count();
            assert!(probes <= 2, "call {call}: {ranges:?}");
            let rest: Vec<_> = ranges[probes..].to_vec();
            let expect_from = if probes > 0 { PROBE } else { 0 };
            assert_eq!(rest.len(), 1, "call {call}: {ranges:?}");
            assert_eq!((rest[0].0, rest[0].1), (expect_from, len), "call {call}");
            probed += usize::from(probes > 0);
        }
        assert!(probed > 0, "no call probed");
        assert!(probed < calls, "every one of {calls} calls probed");
        // Under the minimum size nothing is probed.
        let mut ranges = Vec::new();
        run(
            Kind::Xor,
            5,
            out.as_ptr() as *const u8,
            STREAM_MIN - 32,
            |f, t, s| ranges.push((f, t, s)),
        );
        assert_eq!(ranges, [(0, STREAM_MIN - 32, false)]);
        // More streams than ways: streamed whole, unprobed.
        let mut ranges = Vec::new();
        run(
            Kind::Xor,
            WAYS + 1,
            out.as_ptr() as *const u8,
            len,
            |f, t, s| ranges.push((f, t, s)),
        );
        assert_eq!(ranges, [(0, len, true)]);
    }
}
