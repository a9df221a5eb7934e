//! A window of a member: bytes `[start, start + len)` of it seen as a device
//! of its own. A write log kept on the members (`create --log-region`) lives
//! in such a window past the data area of two members.

use super::Member;
use std::io;
use std::sync::Arc;

pub struct RegionMember {
    inner: Arc<dyn Member>,
    start: u64,
    len: u64,
}

impl RegionMember {
    pub fn new(inner: Arc<dyn Member>, start: u64, len: u64) -> Self {
        Self { inner, start, len }
    }

    fn check(&self, off: u64, n: usize) -> io::Result<u64> {
        match off.checked_add(n as u64) {
            Some(end) if end <= self.len => Ok(self.start + off),
            _ => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "{} bytes at {off} reach past the end of the log region of {} ({} bytes)",
                    n,
                    self.inner.name(),
                    self.len
                ),
            )),
        }
    }
}

impl Member for RegionMember {
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        let at = self.check(off, buf.len())?;
        self.inner.read_at(buf, at)
    }

    fn write_at(&self, buf: &[u8], off: u64) -> io::Result<()> {
        let at = self.check(off, buf.len())?;
        self.inner.write_at(buf, at)
    }

    fn write_vectored_at(&self, parts: &[&[u8]], off: u64) -> io::Result<()> {
        let at = self.check(off, parts.iter().map(|p| p.len()).sum())?;
        self.inner.write_vectored_at(parts, at)
    }

    fn flush(&self) -> io::Result<()> {
        self.inner.flush()
    }

    fn discard(&self, off: u64, len: u64) -> io::Result<bool> {
        let at = self.check(off, len as usize)?;
        self.inner.discard(at, len)
    }

    fn stored(&self, off: u64, len: u64) -> bool {
        self.inner.stored(self.start + off, len)
    }

    fn len(&self) -> u64 {
        // Shorter when the member was truncated.
        self.len.min(self.inner.len().saturating_sub(self.start))
    }

    fn name(&self) -> String {
        format!("{} (log region)", self.inner.name())
    }
}
