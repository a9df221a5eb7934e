//! Members: the storage a RAID array is made of. One small trait; a file/block
//! device backend, an in-memory backend with fault injection and crash simulation,
//! and a wrapper that delays I/O by a device model's service time.

pub mod checksum;
mod fault;
mod file;
mod hazard;
mod region;
mod slot;
mod slow;

pub use checksum::ChecksumMember;
pub use fault::{Death, FaultConfig, FaultMember};
pub use file::FileMember;
pub use region::RegionMember;
pub use slot::Slot;
pub use slow::SlowMember;

use std::io;

/// Positioned I/O on one member. Implementations are shared between threads.
pub trait Member: Send + Sync {
    /// Fill `buf` from byte offset `off`.
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()>;
    /// Write `buf` at byte offset `off`.
    fn write_at(&self, buf: &[u8], off: u64) -> io::Result<()>;
    /// Make every completed write durable.
    /// Write `parts` back to back at `off`, as one operation. The default joins
    /// them into one buffer; file members hand them to `pwritev` (no copy).
    fn write_vectored_at(&self, parts: &[&[u8]], off: u64) -> io::Result<()> {
        write_joined(self, parts, off)
    }
    fn flush(&self) -> io::Result<()>;
    /// Size in bytes.
    fn len(&self) -> u64;
    /// Never empty (a member has a superblock); present for clippy's sake.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// What to call it in messages (a path).
    fn name(&self) -> String;
    /// Block checksums: recompute the entries of data-area bytes
    /// [off, off + len) from the data (crash recovery). No-op without them.
    fn rehash(&self, _off: u64, _len: u64) -> io::Result<()> {
        Ok(())
    }
    /// Make `[off, off + len)` read as zeroes, giving the space back where
    /// the storage can (a hole punched in a file, a zeroing discard on a
    /// device). Returns whether space was given back. The default writes
    /// zeroes: right for every member, frees nothing.
    fn discard(&self, off: u64, len: u64) -> io::Result<bool> {
        write_zeroes(self, off, len)?;
        Ok(false)
    }
    /// Does the member store anything in `[off, off + len)`? True when it
    /// cannot tell (the default): only a member that knows its holes (a
    /// sparse file) says false.
    fn stored(&self, _off: u64, _len: u64) -> bool {
        true
    }
    /// A file read as it is, with nothing in between (a [`FileMember`], not
    /// a wrapper): its descriptor, size and whether it is O_DIRECT. The slot
    /// reads such a member with one `pread` and no virtual call.
    fn plain_file(&self) -> Option<PlainFile> {
        None
    }

    /// The checksum area's bytes, when this member is wrapped in block
    /// checksums already (an array reassembled from its own members keeps
    /// the wrapper and its entries, instead of wrapping it twice).
    fn checksum_area(&self) -> Option<u64> {
        None
    }
}

/// See [`Member::plain_file`]. The descriptor lives as long as the member.
#[derive(Clone, Copy, Debug)]
pub struct PlainFile {
    pub fd: std::os::fd::RawFd,
    pub len: u64,
    pub direct: bool,
}

/// Write zeroes over `[off, off + len)`, a MiB at a time.
pub(crate) fn write_zeroes<M: Member + ?Sized>(m: &M, off: u64, len: u64) -> io::Result<()> {
    let zero = AlignedBuf::zeroed(len.min(1 << 20) as usize);
    let mut at = 0;
    // Bounded: every round writes up to a MiB of the range.
    while at < len {
        let n = (len - at).min(zero.len() as u64) as usize;
        m.write_at(&zero[..n], off + at)?;
        at += n as u64;
    }
    Ok(())
}

/// Join `parts` into one pooled buffer and write it with `write_at`.
pub(crate) fn write_joined<M: Member + ?Sized>(m: &M, parts: &[&[u8]], off: u64) -> io::Result<()> {
    if let [one] = parts {
        return m.write_at(one, off);
    }
    let len = parts.iter().map(|p| p.len()).sum();
    let mut b = AlignedBuf::pooled(len);
    let mut at = 0;
    for p in parts {
        b[at..at + p.len()].copy_from_slice(p);
        at += p.len();
    }
    let r = m.write_at(&b, off);
    b.recycle();
    r
}

/// A page-aligned heap buffer (O_DIRECT needs aligned memory).
pub struct AlignedBuf {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
}

// SAFETY: AlignedBuf owns its allocation exclusively, like Vec<u8>.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared access only hands out &[u8].
unsafe impl Sync for AlignedBuf {}

pub const ALIGN: usize = 4096;

impl AlignedBuf {
    pub fn zeroed(len: usize) -> Self {
        let layout = std::alloc::Layout::from_size_align(len.max(1), ALIGN).expect("buffer size");
        // SAFETY: layout has non-zero size.
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr =
            std::ptr::NonNull::new(p).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        Self { ptr, len }
    }
}

/// Recycled buffers of common sizes (rebuild and scrub move megabytes per batch;
/// fresh zeroed allocations cost page faults and memory bandwidth every time).
static POOL: std::sync::Mutex<Vec<AlignedBuf>> = std::sync::Mutex::new(Vec::new());
const POOL_MAX: usize = 64;

impl AlignedBuf {
    /// A buffer of `len` bytes with unspecified (but initialised) contents, from the
    /// pool when one of that size is free.
    pub fn pooled(len: usize) -> Self {
        let mut p = POOL.lock().unwrap();
        if let Some(i) = p.iter().position(|b| b.len == len) {
            return p.swap_remove(i);
        }
        drop(p);
        Self::zeroed(len)
    }

    /// Give a buffer back to the pool.
    pub fn recycle(self) {
        if self.len >= 64 << 10 {
            let mut p = POOL.lock().unwrap();
            if p.len() < POOL_MAX {
                p.push(self);
            }
        }
    }
}

impl std::ops::Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: ptr is valid for len bytes for the buffer's lifetime.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl std::ops::DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above, and &mut self guarantees exclusivity.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        let layout =
            std::alloc::Layout::from_size_align(self.len.max(1), ALIGN).expect("buffer size");
        // SAFETY: allocated in `zeroed` with this layout.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), layout) }
    }
}
