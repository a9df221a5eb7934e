//! A member slot of a running array: the member in it can be swapped (a
//! replacement attached while the array is served) without stopping I/O. Loads
//! are lock-free (arc-swap), so the hot path pays no lock.

use super::Member;
use arc_swap::ArcSwapOption;
use std::io;
use std::sync::Arc;

struct Held(Arc<dyn Member>);

pub struct Slot {
    index: usize,
    inner: ArcSwapOption<Held>,
}

impl Slot {
    pub fn new(index: usize, m: Option<Arc<dyn Member>>) -> Self {
        Self {
            index,
            inner: ArcSwapOption::new(m.map(|m| Arc::new(Held(m)))),
        }
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
            Some(h) => h.0.read_at(buf, off),
            None => Err(self.empty()),
        }
    }
    fn write_at(&self, buf: &[u8], off: u64) -> io::Result<()> {
        match self.inner.load().as_ref() {
            Some(h) => h.0.write_at(buf, off),
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
