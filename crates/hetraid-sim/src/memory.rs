//! Hints to the memory system for the models' large tables: where they
//! live (2 MiB pages), when they are mapped, which lines to fetch next.
//! None changes a value the simulation computes.

/// Ask for the cache line holding `v` (a hint; no effect on results).
#[inline(always)]
pub(crate) fn prefetch_line<T>(v: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch hint on a live reference.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(v as *const T as *const i8);
    }
    let _ = v;
}

/// A zeroed table of `n` entries, asked to live on 2 MiB pages where the
/// kernel has them (transparent huge pages on request, `madvise` mode): the
/// page maps are tens of MiB touched at random, one entry per host page
/// written, and with 4 KiB pages nearly every touch also missed the TLB.
/// Only a hint: without huge pages it is an ordinary zeroed vector.
pub(crate) fn huge_zeroed(n: usize) -> Vec<u32> {
    // calloc'd (untouched, mapped on first write): the advice comes first.
    let v = vec![0u32; n];
    advise(&v, 2 << 20, libc::MADV_HUGEPAGE);
    v
}

/// Map `v`'s pages now, writable (`MADV_POPULATE_WRITE`, Linux 5.14; 23 in
/// every architecture's headers, not yet in the libc crate), instead of
/// each page first read (the shared zero page) and then copied on write.
/// Only a hint: where the kernel refuses it, pages are mapped as they are
/// first touched.
pub(crate) fn populate_for_writes(v: &[u32]) {
    const MADV_POPULATE_WRITE: libc::c_int = 23;
    advise(v, hetraid_core::units::PAGE as usize, MADV_POPULATE_WRITE);
}

/// `madvise(advice)` on the whole `align`-sized pages inside `v`.
fn advise(v: &[u32], align: usize, advice: libc::c_int) {
    let (start, bytes) = (v.as_ptr() as usize, std::mem::size_of_val(v));
    let (a, end) = (
        start.next_multiple_of(align),
        (start + bytes) / align * align,
    );
    if end > a {
        // SAFETY: advice on pages inside the slice's own allocation; it
        // changes how and when they are backed, never their contents.
        unsafe {
            libc::madvise(a as *mut libc::c_void, end - a, advice);
        }
    }
}
