//! Hazard pointers with asymmetric fences, for the member slots' read path.
//!
//! Why: a 4 KiB read from a memory-speed member costs about 0.9 µs, and
//! `arc-swap`'s load (a sequentially consistent store into a per-thread debt
//! slot, then a compare-and-swap to pay it back) was 11 of the engine's 25 ns
//! per read (`engine_bench read-overhead`), most of what kept random reads
//! below 0.95 of raw `pread`. Slots change a few times in an array's life
//! (a member failed, replaced, removed) and are read millions of times a
//! second, so the cost belongs on the writer: a reader announces the member
//! it is about to use in its thread's hazard record with a plain store and
//! a compiler fence; the writer, after swapping the pointer, runs
//! `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)` (every running thread of
//! the process executes a full barrier) and then scans the records: an old
//! member that some reader still announces is kept until a later scan finds
//! it free. This is folly's hazard pointers with asymmetric fences; the
//! `haphazard` crate ports folly but uses a full fence on both sides (no
//! gain here), and the `membarrier` crate (0.2, 2019) adds an `mprotect`
//! trick and three dependencies for what is one system call with a fence as
//! the fallback.
//!
//! Where `membarrier` is not available (old kernels, seccomp), both sides
//! use a sequentially consistent fence: correct, as fast as `arc-swap`.

use std::sync::atomic::{compiler_fence, fence, AtomicBool, AtomicPtr, Ordering};
use std::sync::{Mutex, OnceLock};

/// One thread's announcement: the object it is using, or null. Two stores
/// per read: a record of its own cache lines (128 bytes, the pair the
/// prefetcher fetches together), so threads on other cores announcing at
/// the same time do not take the line from each other (records are made
/// by whichever thread needs one, and small heap objects sit together).
#[repr(align(128))]
struct Record {
    ptr: AtomicPtr<()>,
    owned: AtomicBool,
}

/// Every record ever made (leaked, reused by later threads: a process has
/// at most as many as it ever had threads reading at once).
static RECORDS: Mutex<Vec<&'static Record>> = Mutex::new(Vec::new());

/// This thread's record, given back when the thread ends.
struct Owner(&'static Record);

impl Owner {
    fn acquire() -> Self {
        let mut list = RECORDS.lock().unwrap_or_else(|e| e.into_inner());
        for r in list.iter() {
            if r.owned
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                return Owner(r);
            }
        }
        let r: &'static Record = Box::leak(Box::new(Record {
            ptr: AtomicPtr::new(std::ptr::null_mut()),
            owned: AtomicBool::new(true),
        }));
        list.push(r);
        Owner(r)
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        // This thread stops using the record before another may take it
        // (RECORD has no destructor, so it is still there).
        let _ = RECORD.try_with(|c| c.set(None));
        self.0.ptr.store(std::ptr::null_mut(), Ordering::Release);
        self.0.owned.store(false, Ordering::Release);
    }
}

thread_local! {
    /// This thread's record once it has one: a plain pointer, so the read
    /// path's access is one thread-local load (no lazy-init check)...
    static RECORD: std::cell::Cell<Option<&'static Record>> = const { std::cell::Cell::new(None) };
    /// ...and the owner that gives it back when the thread ends.
    static MINE: Owner = Owner::acquire();
}

/// This thread's record (None while the thread is ending).
#[inline]
fn record() -> Option<&'static Record> {
    if let Some(r) = RECORD.with(|c| c.get()) {
        return Some(r);
    }
    let r = MINE.try_with(|o| o.0).ok()?;
    RECORD.with(|c| c.set(Some(r)));
    Some(r)
}

/// Whether `membarrier` serves the heavy side (decided once, before any
/// reader relies on it).
fn expedited() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| {
        const QUERY: libc::c_int = 0;
        const PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
        const REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;
        // SAFETY: membarrier takes two integers and touches no memory.
        let cmds = unsafe { libc::syscall(libc::SYS_membarrier, QUERY, 0) };
        if cmds < 0 || cmds & PRIVATE_EXPEDITED == 0 || cmds & REGISTER_PRIVATE_EXPEDITED == 0 {
            return false;
        }
        // SAFETY: as above.
        unsafe {
            libc::syscall(
                libc::SYS_membarrier,
                REGISTER_PRIVATE_EXPEDITED as libc::c_int,
                0,
            ) == 0
        }
    })
}

/// The reader's side of the fence.
#[inline]
fn light() {
    if expedited() {
        compiler_fence(Ordering::SeqCst);
    } else {
        fence(Ordering::SeqCst);
    }
}

/// The writer's side: after it, every reader's announcement made before is
/// visible, and every reader that announces later sees what was stored
/// before.
pub(crate) fn heavy() {
    if expedited() {
        const PRIVATE_EXPEDITED: libc::c_int = 1 << 3;
        // SAFETY: as in `expedited`.
        let r = unsafe { libc::syscall(libc::SYS_membarrier, PRIVATE_EXPEDITED, 0) };
        // Registered at start-up, so this cannot fail; if it did, readers
        // that relied on it could use freed memory: stop.
        assert!(r == 0, "membarrier failed after registration");
    } else {
        fence(Ordering::SeqCst);
    }
}

/// Is `p` announced by any thread? (After [`heavy`] when `p` was just made
/// unreachable; later scans need no barrier, as no reader can newly reach it.)
pub(crate) fn announced(p: *const ()) -> bool {
    RECORDS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .any(|r| std::ptr::eq(r.ptr.load(Ordering::Acquire), p))
}

/// Run `f` on what `src` points to (None when it is null), protected from
/// reclamation until `f` returns. Returns None without running `f` when this
/// thread already protects something (a nested use) or is ending: the
/// caller takes its slower path.
#[inline]
pub(crate) fn protect<T, R>(src: &AtomicPtr<T>, f: impl FnOnce(Option<&T>) -> R) -> Option<R> {
    {
        let rec = record()?;
        if !rec.ptr.load(Ordering::Relaxed).is_null() {
            return None;
        }
        // Clears the announcement however `f` ends.
        struct Clear(&'static Record);
        impl Drop for Clear {
            fn drop(&mut self) {
                self.0.ptr.store(std::ptr::null_mut(), Ordering::Release);
            }
        }
        let _clear = Clear(rec);
        let mut p = src.load(Ordering::Acquire);
        // Bounded in practice: a retry needs the slot to change between two
        // loads a few nanoseconds apart.
        loop {
            if p.is_null() {
                return Some(f(None));
            }
            rec.ptr.store(p as *mut (), Ordering::Relaxed);
            light();
            let again = src.load(Ordering::Acquire);
            if again == p {
                break;
            }
            p = again;
        }
        // SAFETY: `p` is announced and was still in `src` after the
        // announcement (fenced): the writer's scan after its barrier sees
        // it and keeps the object alive until the announcement is cleared.
        Some(f(Some(unsafe { &*p })))
    }
}
