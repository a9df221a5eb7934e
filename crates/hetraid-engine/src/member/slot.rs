//! A member slot of a running array: the member in it can be swapped (a
//! replacement attached while the array is served) without stopping I/O. Loads
//! are lock-free (arc-swap), so the hot path pays no lock; reads, the hottest
//! path, go through a hazard pointer instead (`hazard.rs`: no atomic
//! read-modify-write and no fence on the reader's side).

use super::Member;
use arc_swap::ArcSwapOption;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, Ordering};

/// `Slot::watch` bits.
const TRACK: u8 = 1;
const MEASURE: u8 = 2;
use std::sync::{Arc, Mutex};

struct Held(Arc<dyn Member>, Option<super::PlainFile>);

impl Held {
    fn new(m: Arc<dyn Member>) -> Self {
        let plain = m.plain_file();
        Held(m, plain)
    }

    /// Read through the plain file when there is one and the request suits
    /// it (O_DIRECT wants aligned offset, length and memory), else through
    /// the member.
    #[inline(always)]
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        match self.1 {
            Some(p)
                if !p.direct
                    || (off | buf.len() as u64 | buf.as_ptr() as u64)
                        .is_multiple_of(super::ALIGN as u64) =>
            {
                super::file::inside(p.len, off, buf.len())?;
                // The descriptor belongs to the member this `Held` keeps alive.
                pread_exact(p.fd, buf, off)
            }
            _ => self.0.read_at(buf, off),
        }
    }
}

pub struct Slot {
    index: usize,
    inner: ArcSwapOption<Held>,
    /// What to count around each operation (one load on the hot path):
    /// `TRACK` operations in flight and where the last one ends (reads
    /// balancing over copies), `MEASURE` operations, bytes and time.
    watch: AtomicU8,
    /// I/O statistics while measuring (`MEASURE`).
    io: crate::iostat::IoCounters,
    pending: AtomicU32,
    head: AtomicU64,
    /// The same member as `inner`, for reads under a hazard pointer: one
    /// strong count owned by this pointer (`Arc::into_raw`).
    raw: AtomicPtr<Held>,
    /// Members swapped out while a reader still announced them (each one
    /// strong count), freed by a later scan; and whether there are any.
    retired: Mutex<Retired>,
    retired_any: AtomicBool,
}

/// Raw strong counts of retired members (only this slot touches them).
struct Retired(Vec<*mut Held>);
// SAFETY: the pointers are `Arc<Held>` strong counts, and `Held` holds an
// `Arc<dyn Member>`, which is Send and Sync.
unsafe impl Send for Retired {}

impl Slot {
    pub fn new(index: usize, m: Option<Arc<dyn Member>>) -> Self {
        let held = m.map(|m| Arc::new(Held::new(m)));
        Self {
            index,
            raw: AtomicPtr::new(into_raw(held.clone())),
            inner: ArcSwapOption::new(held),
            watch: AtomicU8::new(0),
            io: Default::default(),
            pending: AtomicU32::new(0),
            head: AtomicU64::new(0),
            retired: Mutex::new(Retired(Vec::new())),
            retired_any: AtomicBool::new(false),
        }
    }

    /// Count operations and positions from now on (read balancing).
    pub fn track(&self, on: bool) {
        self.set_watch(TRACK, on);
    }

    /// Count operations, bytes and time from now on (iostat).
    pub fn measure(&self, on: bool) {
        self.set_watch(MEASURE, on);
    }

    fn set_watch(&self, bit: u8, on: bool) {
        match on {
            true => self.watch.fetch_or(bit, Ordering::Relaxed),
            false => self.watch.fetch_and(!bit, Ordering::Relaxed),
        };
    }

    /// What was counted while measuring.
    pub fn io_stats(&self) -> crate::iostat::IoStats {
        self.io.snapshot()
    }

    /// Operations in flight, and where the last one started ends (raw
    /// member offset; 0 before any: heads start at the outer edge).
    pub fn load(&self) -> (u32, u64) {
        (
            self.pending.load(Ordering::Relaxed),
            self.head.load(Ordering::Relaxed),
        )
    }

    /// Run `op` counted as in flight when tracking, and its bytes and time
    /// when measuring.
    #[inline(always)]
    fn counted<T>(&self, write: bool, off: u64, len: usize, op: impl FnOnce() -> T) -> T {
        let watch = self.watch.load(Ordering::Relaxed);
        if watch == 0 {
            return op();
        }
        self.watched(watch, write, off, len, op)
    }

    #[inline(never)]
    fn watched<T>(
        &self,
        watch: u8,
        write: bool,
        off: u64,
        len: usize,
        op: impl FnOnce() -> T,
    ) -> T {
        let track = watch & TRACK != 0;
        if track {
            self.pending.fetch_add(1, Ordering::Relaxed);
            self.head.store(off + len as u64, Ordering::Relaxed);
        }
        let r = match watch & MEASURE != 0 {
            true => self.io.timed(write, len as u64, op),
            false => op(),
        };
        if track {
            self.pending.fetch_sub(1, Ordering::Relaxed);
        }
        r
    }

    pub fn get(&self) -> Option<Arc<dyn Member>> {
        self.inner.load_full().map(|h| h.0.clone())
    }

    pub fn present(&self) -> bool {
        self.inner.load().is_some()
    }

    pub fn set(&self, m: Option<Arc<dyn Member>>) {
        let held = m.map(|m| Arc::new(Held::new(m)));
        self.inner.store(held.clone());
        let old = self.raw.swap(into_raw(held), Ordering::AcqRel);
        let mut r = self.retired.lock().unwrap_or_else(|e| e.into_inner());
        if !old.is_null() {
            r.0.push(old);
        }
        // Readers that loaded `old` before the swap are announced by now.
        super::hazard::heavy();
        self.reclaim(&mut r);
    }

    /// Free the retired members no reader announces.
    fn reclaim(&self, r: &mut Retired) {
        r.0.retain(|&p| {
            if super::hazard::announced(p as *const ()) {
                return true;
            }
            // SAFETY: `p` is a strong count this slot owns (from
            // `into_raw`), unreachable from `raw` and announced by nobody.
            drop(unsafe { Arc::from_raw(p) });
            false
        });
        self.retired_any.store(!r.0.is_empty(), Ordering::Release);
    }

    /// A reader done with a member: free what it may have held up.
    #[cold]
    fn reclaim_after_read(&self) {
        if let Ok(mut r) = self.retired.try_lock() {
            self.reclaim(&mut r);
        }
    }

    fn empty(&self) -> io::Error {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("member slot {} is empty", self.index),
        )
    }
}

fn into_raw(h: Option<Arc<Held>>) -> *mut Held {
    h.map_or(std::ptr::null_mut(), |a| Arc::into_raw(a) as *mut Held)
}

impl Drop for Slot {
    fn drop(&mut self) {
        // No reader can be inside (they borrow the slot).
        let p = *self.raw.get_mut();
        if !p.is_null() {
            // SAFETY: the strong count `raw` owns.
            drop(unsafe { Arc::from_raw(p) });
        }
        let r = self.retired.get_mut().unwrap_or_else(|e| e.into_inner());
        for p in r.0.drain(..) {
            // SAFETY: the strong counts the retired list owns.
            drop(unsafe { Arc::from_raw(p) });
        }
    }
}

/// `pread` until `buf` is full (std's `read_exact_at`, inlined).
///
/// Why not std's: its `read_exact_at` and `read_at` are out-of-line
/// functions, and every return after a system call mispredicts (the
/// kernel's own calls have overwritten the return stack buffer): perf put
/// a fifth of the engine's read path on the instructions right after such
/// returns. Raw `pread` in the benchmark pays three returns a read; the
/// engine paid nine. This one inlines into the slot's read.
#[inline(always)]
pub(crate) fn pread_exact(
    fd: std::os::fd::RawFd,
    mut buf: &mut [u8],
    mut off: u64,
) -> io::Result<()> {
    while !buf.is_empty() {
        let Ok(at) = libc::off_t::try_from(off) else {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        };
        // SAFETY: `buf` is valid for writes of its length; the caller
        // keeps `fd` open for the call.
        let n = unsafe { libc::pread(fd, buf.as_mut_ptr().cast(), buf.len(), at) };
        match n {
            0 => return Err(io::Error::from(io::ErrorKind::UnexpectedEof)),
            n if n > 0 => {
                buf = &mut buf[n as usize..];
                off += n as u64;
            }
            _ => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
    Ok(())
}

impl Slot {
    /// The member's read, under a hazard pointer (the read path: one
    /// inlined body from the array's read down to the system call).
    #[inline(always)]
    pub(crate) fn read_fast(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        let len = buf.len();
        let hazard = super::hazard::protect(&self.raw, |h| match h {
            Some(h) => self.counted(false, off, len, || h.read_at(&mut *buf, off)),
            None => Err(self.empty()),
        });
        if self.retired_any.load(Ordering::Relaxed) {
            self.reclaim_after_read();
        }
        match hazard {
            Some(r) => r,
            // Nested, or the thread is ending: the arc-swap guard.
            None => match self.inner.load().as_ref() {
                Some(h) => self.counted(false, off, len, || h.read_at(buf, off)),
                None => Err(self.empty()),
            },
        }
    }
}

impl Member for Slot {
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        self.read_fast(buf, off)
    }
    fn write_at(&self, buf: &[u8], off: u64) -> io::Result<()> {
        match self.inner.load().as_ref() {
            Some(h) => self.counted(true, off, buf.len(), || h.0.write_at(buf, off)),
            None => Err(self.empty()),
        }
    }
    fn write_vectored_at(&self, parts: &[&[u8]], off: u64) -> io::Result<()> {
        match self.inner.load().as_ref() {
            Some(h) => {
                let len = parts.iter().map(|p| p.len()).sum();
                self.counted(true, off, len, || h.0.write_vectored_at(parts, off))
            }
            None => Err(self.empty()),
        }
    }
    fn flush(&self) -> io::Result<()> {
        match self.inner.load().as_ref() {
            Some(h) => h.0.flush(),
            None => Err(self.empty()),
        }
    }
    fn len(&self) -> u64 {
        self.inner.load().as_ref().map_or(0, |h| h.0.len())
    }
    fn rehash(&self, off: u64, len: u64) -> io::Result<()> {
        match self.inner.load().as_ref() {
            Some(h) => h.0.rehash(off, len),
            None => Err(self.empty()),
        }
    }
    fn discard(&self, off: u64, len: u64) -> io::Result<bool> {
        match self.inner.load().as_ref() {
            // Tracked as in flight, not measured: a discard moves no bytes.
            Some(h) => {
                let watch = self.watch.load(Ordering::Relaxed) & TRACK;
                self.watched(watch, true, off, len as usize, || h.0.discard(off, len))
            }
            None => Err(self.empty()),
        }
    }
    fn stored(&self, off: u64, len: u64) -> bool {
        self.inner
            .load()
            .as_ref()
            .is_none_or(|h| h.0.stored(off, len))
    }
    fn name(&self) -> String {
        self.inner
            .load()
            .as_ref()
            .map_or_else(|| format!("slot {}", self.index), |h| h.0.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// Live readers and drops per member id, outside the members (so a
    /// check never reads a freed member).
    static IN_USE: [AtomicUsize; 64] = [const { AtomicUsize::new(0) }; 64];
    static DROPPED: [AtomicBool; 64] = [const { AtomicBool::new(false) }; 64];

    /// Set when a member was read after it was freed, or freed while a
    /// read was inside it (checked at the end: a panic inside `Drop` or a
    /// reader would abort the test instead of failing it).
    static FREED_IN_USE: AtomicBool = AtomicBool::new(false);

    struct Probe(usize);

    impl Member for Probe {
        fn read_at(&self, buf: &mut [u8], _off: u64) -> io::Result<()> {
            IN_USE[self.0].fetch_add(1, Ordering::SeqCst);
            if DROPPED[self.0].load(Ordering::SeqCst) {
                FREED_IN_USE.store(true, Ordering::SeqCst);
            }
            buf.fill(self.0 as u8);
            // Long enough that swaps land while reads are inside.
            for _ in 0..500 {
                std::hint::spin_loop();
            }
            IN_USE[self.0].fetch_sub(1, Ordering::SeqCst);
            Ok(())
        }
        fn write_at(&self, _: &[u8], _: u64) -> io::Result<()> {
            Ok(())
        }
        fn flush(&self) -> io::Result<()> {
            Ok(())
        }
        fn len(&self) -> u64 {
            1 << 20
        }
        fn name(&self) -> String {
            format!("probe{}", self.0)
        }
    }

    impl Drop for Probe {
        fn drop(&mut self) {
            if IN_USE[self.0].load(Ordering::SeqCst) != 0 {
                FREED_IN_USE.store(true, Ordering::SeqCst);
            }
            DROPPED[self.0].store(true, Ordering::SeqCst);
        }
    }

    /// Readers on four threads while the slot is swapped 60 times (and
    /// emptied now and then): every read sees a whole member or an empty
    /// slot, no member is freed while a read is inside it or read after,
    /// and every member swapped out is freed by the end (nothing leaks, so
    /// a replaced disk is closed).
    #[test]
    fn members_swapped_under_readers_are_freed_once_no_reader_holds_them() {
        let slot = Slot::new(0, Some(Arc::new(Probe(0))));
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    let mut buf = [0u8; 64];
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        match slot.read_at(&mut buf, 0) {
                            Ok(()) => assert!(buf.iter().all(|&b| b == buf[0])),
                            Err(e) => assert_eq!(e.kind(), io::ErrorKind::NotFound),
                        }
                        n += 1;
                    }
                    assert!(n > 0);
                });
            }
            // Readers stop however the writer ends (a failed check panics).
            struct Stop<'a>(&'a AtomicBool);
            impl Drop for Stop<'_> {
                fn drop(&mut self) {
                    self.0.store(true, Ordering::Relaxed);
                }
            }
            let _stop = Stop(&stop);
            for id in 1..=60 {
                std::thread::sleep(std::time::Duration::from_micros(200));
                let m: Option<Arc<dyn Member>> = if id % 10 == 0 {
                    None
                } else {
                    Some(Arc::new(Probe(id)))
                };
                slot.set(m);
            }
        });
        // One more swap after the readers are gone frees whatever was
        // still retired.
        slot.set(None);
        assert!(
            !FREED_IN_USE.load(Ordering::SeqCst),
            "a member was freed while a read was inside it, or read after"
        );
        for (id, dropped) in DROPPED.iter().enumerate().take(60) {
            // Every tenth swap emptied the slot: no member of that id.
            if id == 0 || id % 10 != 0 {
                assert!(
                    dropped.load(Ordering::SeqCst),
                    "member {id} was never freed"
                );
            }
        }
    }
}
