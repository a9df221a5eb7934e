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
//! took over [`SLOWER`] times as long, the sources came from memory and the
//! rest of the call streams. The cached time is measured by running the
//! probe a second time (everything is in cache then), on a thread's first
//! call of each kind and every [`RECALIBRATE`]th after, and kept per thread
//! per kernel kind, per stream (inputs plus outputs). Both passes write the
//! same bytes (the kernels using this compute their outputs from inputs they
//! do not overwrite), so the probe costs time only. A wrong guess (an
//! interrupt during the first pass) costs speed on one call, never
//! correctness.

use std::cell::Cell;

/// Outputs shorter than this always take plain stores (a 4 KiB update's
/// working set stays in cache, and the probe would be a large share).
pub const STREAM_MIN: usize = 16 * 1024;
/// Bytes of output timed (a multiple of every kernel's step).
pub const PROBE: usize = 2048;
/// First pass against the cached one: from memory it is 5-20 times as
/// slow, from L2 or L3 at most 2-3 times.
pub const SLOWER: u64 = 4;
/// Calls between two measurements of the cached time.
pub const RECALIBRATE: u32 = 64;

/// The kernels that choose their stores here (their cached speeds differ).
#[derive(Clone, Copy)]
pub enum Kind {
    Xor = 0,
    Pq = 1,
    Solve = 2,
}

thread_local! {
    /// Per kind: ticks of a cached probe pass per stream (0: not measured
    /// yet), and calls since the last measurement.
    static CACHED: Cell<[(u64, u32); 3]> = const { Cell::new([(0, 0); 3]) };
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
    mut run: impl FnMut(usize, usize, bool),
) {
    if len < STREAM_MIN || !(out as usize).is_multiple_of(32) {
        return run(0, len, false);
    }
    let streams = streams.max(1) as u64;
    let t0 = ticks();
    run(0, PROBE, false);
    let t1 = ticks();
    let mut all = CACHED.get();
    let (cached, calls) = &mut all[kind as usize];
    if *cached == 0 || *calls >= RECALIBRATE {
        run(0, PROBE, false);
        let per_stream = (ticks() - t1) / streams;
        *cached = if *cached == 0 {
            per_stream.max(1)
        } else {
            ((3 * *cached + per_stream) / 4).max(1)
        };
        *calls = 0;
    } else {
        *calls += 1;
    }
    let stream = t1 - t0 > SLOWER * *cached * streams;
    CACHED.set(all);
    run(PROBE, len, stream);
}
