//! A member slot of a running array: the member in it can be swapped (a
//! replacement attached while the array is served) without stopping I/O. Loads
//! are lock-free (arc-swap), so the hot path pays no lock.

use super::Member;
use arc_swap::ArcSwapOption;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

struct Held(Arc<dyn Member>);

pub struct Slot {
    index: usize,
    inner: ArcSwapOption<Held>,
    /// Reads balance over copies (a layout with copies): count operations
    /// in flight and where the last one ends, for the read policy.
    track: AtomicBool,
    pending: AtomicU32,
    head: AtomicU64,
}

impl Slot {
    pub fn new(index: usize, m: Option<Arc<dyn Member>>) -> Self {
        Self {
            index,
            inner: ArcSwapOption::new(m.map(|m| Arc::new(Held(m)))),
            track: AtomicBool::new(false),
            pending: AtomicU32::new(0),
            head: AtomicU64::new(0),
        }
    }

    /// Count operations and positions from now on (read balancing).
    pub fn track(&self, on: bool) {
        self.track.store(on, Ordering::Relaxed);
    }

    /// Operations in flight, and where the last one started ends (raw
    /// member offset; 0 before any: heads start at the outer edge).
    pub fn load(&self) -> (u32, u64) {
        (
            self.pending.load(Ordering::Relaxed),
            self.head.load(Ordering::Relaxed),
        )
    }

    /// Run `op` counted as in flight when tracking.
    fn counted<T>(&self, off: u64, len: usize, op: impl FnOnce() -> T) -> T {
        if !self.track.load(Ordering::Relaxed) {
            return op();
        }
        self.pending.fetch_add(1, Ordering::Relaxed);
        self.head.store(off + len as u64, Ordering::Relaxed);
        let r = op();
        self.pending.fetch_sub(1, Ordering::Relaxed);
        r
    }

    pub fn get(&self) -> Option<Arc<dyn Member>> {
        self.inner.load_full().map(|h| h.0.clone())
    }

    pub fn present(&self) -> bool {
        self.inner.load().is_some()
    }

    pub fn set(&self, m: Option<Arc<dyn Member>>) {
        self.inner.store(m.map(|m| Arc::new(Held(m))));
    }

    fn empty(&self) -> io::Error {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("member slot {} is empty", self.index),
        )
    }
}

impl Member for Slot {
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        match self.inner.load().as_ref() {
            Some(h) => self.counted(off, buf.len(), || h.0.read_at(buf, off)),
            None => Err(self.empty()),
        }
    }
    fn write_at(&self, buf: &[u8], off: u64) -> io::Result<()> {
        match self.inner.load().as_ref() {
            Some(h) => self.counted(off, buf.len(), || h.0.write_at(buf, off)),
            None => Err(self.empty()),
        }
    }
    fn write_vectored_at(&self, parts: &[&[u8]], off: u64) -> io::Result<()> {
        match self.inner.load().as_ref() {
            Some(h) => h.0.write_vectored_at(parts, off),
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
    fn name(&self) -> String {
        self.inner
            .load()
            .as_ref()
            .map_or_else(|| format!("slot {}", self.index), |h| h.0.name())
    }
}
