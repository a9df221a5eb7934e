//! A member that takes as long as a modelled device: each operation waits for
//! positioning (skipped when it continues where the previous one ended) plus
//! transfer time, one operation at a time (one actuator). On tmpfs this makes real
//! runs show what heterogeneous hardware does.

use super::Member;
use hetraid_core::ServiceModel;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub struct SlowMember {
    inner: Arc<dyn Member>,
    model: ServiceModel,
    /// Positioning of a write, when it differs from a read's (an SSD's
    /// program and controller time).
    write_position_ns: Option<u64>,
    /// Byte offset where the last operation ended (the "head").
    head: Mutex<u64>,
}

impl SlowMember {
    pub fn new(inner: Arc<dyn Member>, model: ServiceModel) -> Self {
        Self {
            inner,
            model,
            write_position_ns: None,
            head: Mutex::new(u64::MAX),
        }
    }

    /// Writes position in `ns` (reads as the model says); a write that
    /// continues the previous operation still pays it (an SSD's program
    /// time does not go away for sequential writes).
    pub fn with_write_position(mut self, ns: u64) -> Self {
        self.write_position_ns = Some(ns);
        self
    }

    fn delay(&self, head: &mut u64, off: u64, len: usize, write: bool) {
        let mut ns = self.model.service_ns(len as u64);
        match self.write_position_ns.filter(|_| write) {
            Some(w) => ns = ns - self.model.position_ns + w,
            None if *head == off => ns -= self.model.position_ns,
            None => {}
        }
        *head = off + len as u64;
        std::thread::sleep(Duration::from_nanos(ns));
    }
}

impl Member for SlowMember {
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        let mut h = self.head.lock().unwrap();
        self.delay(&mut h, off, buf.len(), false);
        self.inner.read_at(buf, off)
    }

    fn write_at(&self, buf: &[u8], off: u64) -> io::Result<()> {
        let mut h = self.head.lock().unwrap();
        self.delay(&mut h, off, buf.len(), true);
        self.inner.write_at(buf, off)
    }

    fn flush(&self) -> io::Result<()> {
        self.inner.flush()
    }

    fn discard(&self, off: u64, len: u64) -> io::Result<bool> {
        self.inner.discard(off, len)
    }

    fn stored(&self, off: u64, len: u64) -> bool {
        self.inner.stored(off, len)
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn name(&self) -> String {
        self.inner.name()
    }
}
