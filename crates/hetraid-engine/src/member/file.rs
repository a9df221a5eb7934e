//! Regular files and block devices, with O_DIRECT where the filesystem supports
//! it; buffered I/O where it does not, and on tmpfs/ramfs, which are the page
//! cache themselves (`direct()` says which).

use super::{AlignedBuf, Member, ALIGN};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

pub struct FileMember {
    file: File,
    path: PathBuf,
    len: u64,
    direct: bool,
}

thread_local! {
    /// Per-thread bounce buffer for unaligned O_DIRECT I/O (no allocation per call).
    static BOUNCE: std::cell::RefCell<AlignedBuf> = std::cell::RefCell::new(AlignedBuf::zeroed(0));
}

/// Bounce buffers kept per thread up to this size; larger ones are allocated.
const BOUNCE_KEEP: usize = 1 << 20;

fn with_bounce<R>(len: usize, f: impl FnOnce(&mut [u8]) -> R) -> R {
    if len > BOUNCE_KEEP {
        let mut b = AlignedBuf::zeroed(len);
        return f(&mut b);
    }
    BOUNCE.with(|cell| {
        let mut b = cell.borrow_mut();
        if b.len() < len {
            *b = AlignedBuf::zeroed(len.next_power_of_two().min(BOUNCE_KEEP));
        }
        f(&mut b[..len])
    })
}

/// Is `path` on tmpfs or ramfs?
fn in_memory_fs(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    const RAMFS_MAGIC: i64 = 0x8584_58f6;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: statfs is plain data; all-zero is a valid value.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: c is a valid NUL-terminated path and st a valid out-parameter.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return false;
    }
    matches!(st.f_type as i64, TMPFS_MAGIC | RAMFS_MAGIC)
}

fn aligned(x: u64) -> bool {
    x.is_multiple_of(ALIGN as u64)
}

impl FileMember {
    /// Open an existing file or block device read-write.
    pub fn open(path: &Path) -> io::Result<Self> {
        let meta = std::fs::metadata(path)?;
        let block = meta.file_type().is_block_device();
        if !block && !meta.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a regular file or block device",
            ));
        }
        // tmpfs and ramfs are the page cache itself: O_DIRECT would only add a copy.
        let direct = if in_memory_fs(path) {
            Err(io::Error::other("in-memory filesystem"))
        } else {
            OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags(libc::O_DIRECT)
                .open(path)
        };
        let (file, mut is_direct) = match direct {
            Ok(f) => (f, true),
            Err(_) => (OpenOptions::new().read(true).write(true).open(path)?, false),
        };
        let len = if block {
            Self::block_len(&file)?
        } else {
            meta.len()
        };
        if is_direct {
            // Some filesystems accept the flag and fail the I/O: probe once.
            let mut probe = AlignedBuf::zeroed(ALIGN);
            if len >= ALIGN as u64 && file.read_exact_at(&mut probe, 0).is_err() {
                is_direct = false;
            }
        }
        let file = if is_direct {
            file
        } else {
            OpenOptions::new().read(true).write(true).open(path)?
        };
        // One process at a time: a served array's members cannot be assembled
        // again behind the server's back.
        use std::os::fd::AsRawFd;
        // SAFETY: flock on a valid descriptor we own.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "in use by another hetraid process (is the array being served?)",
            ));
        }

        Ok(Self {
            file,
            path: path.to_path_buf(),
            len,
            direct: is_direct,
        })
    }

    /// Create (or truncate) a regular file of `len` bytes, all zero, and open it.
    pub fn create(path: &Path, len: u64) -> io::Result<Self> {
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        use std::os::fd::AsRawFd;
        // SAFETY: flock on a valid descriptor we own.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "in use by another hetraid process",
            ));
        }
        f.set_len(0)?;
        f.set_len(len)?;
        drop(f);
        Self::open(path)
    }

    fn block_len(file: &File) -> io::Result<u64> {
        use std::io::{Seek, SeekFrom};
        let mut f = file.try_clone()?;
        f.seek(SeekFrom::End(0))
    }

    /// Is O_DIRECT in use?
    pub fn direct(&self) -> bool {
        self.direct
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Member for FileMember {
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        if !self.direct
            || (aligned(off) && aligned(buf.len() as u64) && aligned(buf.as_ptr() as u64))
        {
            return self.file.read_exact_at(buf, off);
        }
        // O_DIRECT needs aligned offset, length and memory: bounce.
        let start = off / ALIGN as u64 * ALIGN as u64;
        let end = (off + buf.len() as u64).div_ceil(ALIGN as u64) * ALIGN as u64;
        with_bounce((end - start) as usize, |b| {
            self.file.read_exact_at(b, start)?;
            let s = (off - start) as usize;
            buf.copy_from_slice(&b[s..s + buf.len()]);
            Ok(())
        })
    }

    fn write_at(&self, buf: &[u8], off: u64) -> io::Result<()> {
        if !self.direct
            || (aligned(off) && aligned(buf.len() as u64) && aligned(buf.as_ptr() as u64))
        {
            return self.file.write_all_at(buf, off);
        }
        let start = off / ALIGN as u64 * ALIGN as u64;
        let end = (off + buf.len() as u64).div_ceil(ALIGN as u64) * ALIGN as u64;
        with_bounce((end - start) as usize, |b| {
            if start != off || end != off + buf.len() as u64 {
                // Edge pages keep their other bytes (a sector-level detail, not a RAID decision).
                self.file.read_exact_at(b, start)?;
            }
            let s = (off - start) as usize;
            b[s..s + buf.len()].copy_from_slice(buf);
            self.file.write_all_at(b, start)
        })
    }

    fn flush(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn name(&self) -> String {
        self.path.display().to_string()
    }
}
