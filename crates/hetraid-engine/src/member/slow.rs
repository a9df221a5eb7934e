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
    /// Byte offset where the last operation ended (the "head").
    head: Mutex<u64>,
}

impl SlowMember {
    pub fn new(inner: Arc<dyn Member>, model: ServiceModel) -> Self {
        Self {
            inner,
            model,
            head: Mutex::new(u64::MAX),
        }
    }

    fn delay(&self, head: &mut u64, off: u64, len: usize) {
        let mut ns = self.model.service_ns(len as u64);
        if *head == off {
            ns -= self.model.position_ns;
        }
        *head = off + len as u64;
        std::thread::sleep(Duration::from_nanos(ns));
    }
}

impl Member for SlowMember {
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        let mut h = self.head.lock().unwrap();
        self.delay(&mut h, off, buf.len());
        self.inner.read_at(buf, off)
    }

    fn write_at(&self, buf: &[u8], off: u64) -> io::Result<()> {
        let mut h = self.head.lock().unwrap();
        self.delay(&mut h, off, buf.len());
        self.inner.write_at(buf, off)
    }

    fn flush(&self) -> io::Result<()> {
        self.inner.flush()
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn name(&self) -> String {
        self.inner.name()
    }
}
