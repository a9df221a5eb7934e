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
    /// A regular file (not a block device): its size can change under us.
    regular: bool,
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
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    const RAMFS_MAGIC: i64 = 0x8584_58f6;
    // f_type's width differs between targets (an i64 here).
    #[allow(clippy::unnecessary_cast)]
    let is = |f_type| matches!(f_type as i64, TMPFS_MAGIC | RAMFS_MAGIC);
    rustix::fs::statfs(path).is_ok_and(|st| is(st.f_type))
}

fn aligned(x: u64) -> bool {
    x.is_multiple_of(ALIGN as u64)
}

impl FileMember {
    /// Open an existing file or block device read-write.
    pub fn open(path: &Path) -> io::Result<Self> {
        Self::open_with(path, true)
    }

    /// Open read-only (`status`, `read`): a member the user may only read
    /// is usable, and nothing can be written to it. The lock is shared, so
    /// readers exclude a writer but not each other.
    pub fn open_read_only(path: &Path) -> io::Result<Self> {
        Self::open_with(path, false)
    }

    fn open_with(path: &Path, writable: bool) -> io::Result<Self> {
        let meta = std::fs::metadata(path)?;
        let block = meta.file_type().is_block_device();
        if !block && !meta.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a regular file or block device",
            ));
        }
        // A block device is opened exclusively for writing (as mdadm does):
        // one that is mounted or in use elsewhere is refused (EBUSY).
        let excl = if block && writable { libc::O_EXCL } else { 0 };
        // tmpfs and ramfs are the page cache itself: O_DIRECT would only add a copy.
        let direct = if in_memory_fs(path) {
            Err(io::Error::other("in-memory filesystem"))
        } else {
            OpenOptions::new()
                .read(true)
                .write(writable)
                .custom_flags(libc::O_DIRECT | excl)
                .open(path)
        };
        let (file, mut is_direct) = match direct {
            Ok(f) => (f, true),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                return Err(io::Error::new(
                    io::ErrorKind::ResourceBusy,
                    "the device is mounted or in use (opened exclusively elsewhere)",
                ))
            }
            Err(_) => (
                OpenOptions::new()
                    .read(true)
                    .write(writable)
                    .custom_flags(excl)
                    .open(path)?,
                false,
            ),
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
            drop(file);
            OpenOptions::new()
                .read(true)
                .write(writable)
                .custom_flags(excl)
                .open(path)?
        };
        // One process at a time: a served array's members cannot be assembled
        // again behind the server's back.
        use rustix::fs::FlockOperation;
        let lock = if writable {
            FlockOperation::NonBlockingLockExclusive
        } else {
            FlockOperation::NonBlockingLockShared
        };
        // A writer waits up to 2 s for readers (`status`, `read` of a
        // moment, whose shared locks are short) before it gives up; a server
        // holds its lock for good and is reported at once after that.
        let tries = if writable { 20 } else { 1 };
        // Bounded: at most `tries` attempts, 100 ms apart.
        for t in 0..tries {
            if rustix::fs::flock(&file, lock).is_ok() {
                break;
            }
            if t + 1 == tries {
                return Err(io::Error::new(
                    io::ErrorKind::WouldBlock,
                    "in use by another hetraid process (is the array being served?)",
                ));
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }

        Ok(Self {
            file,
            path: path.to_path_buf(),
            len,
            direct: is_direct,
            regular: !block,
        })
    }

    /// Create (or truncate) a regular file of `len` bytes, all zero, and open it.
    /// A new file is readable and writable by its owner only (mode 0600): it
    /// will hold array data or a write log, not for other local users.
    pub fn create(path: &Path, len: u64) -> io::Result<Self> {
        use std::os::unix::fs::OpenOptionsExt;
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)?;
        if rustix::fs::flock(&f, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_err() {
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

    /// The open file (to pass it to a server over the control socket).
    pub fn file(&self) -> &File {
        &self.file
    }

    /// A member from a file another process opened and passed over the
    /// control socket (`SCM_RIGHTS`): the server uses the caller's access,
    /// never a path opened on the caller's behalf. It must be open for
    /// reading and writing; it is locked as [`FileMember::open`] locks
    /// (the passing process already holds that lock on the same open file).
    pub fn from_passed(file: File, path: PathBuf) -> io::Result<Self> {
        let meta = file.metadata()?;
        let block = meta.file_type().is_block_device();
        if !block && !meta.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a regular file or block device",
            ));
        }
        use rustix::fs::OFlags;
        let flags = rustix::fs::fcntl_getfl(&file)?;
        if flags & OFlags::ACCMODE != OFlags::RDWR {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "the file passed is not open for reading and writing",
            ));
        }
        if flags.contains(OFlags::APPEND) {
            // pwrite on an O_APPEND descriptor appends on Linux: every write
            // would land at the end, not where the array puts it.
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the file passed is open for appending (O_APPEND), where writes land at its end; open it without O_APPEND",
            ));
        }
        if !block {
            // F_GET_SEALS succeeds only on a memfd.
            let memfd = rustix::fs::fcntl_get_seals(&file).is_ok();
            if memfd || std::os::unix::fs::MetadataExt::nlink(&meta) == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "the file passed has no name (a memfd or an unlinked file): the array would lose the member when the server stops; pass a file or block device on a filesystem",
                ));
            }
        }
        if rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_err() {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "in use by another hetraid process",
            ));
        }
        let len = if block {
            Self::block_len(&file)?
        } else {
            meta.len()
        };
        Ok(Self {
            direct: flags.contains(OFlags::DIRECT),
            file,
            path,
            len,
            regular: !block,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// I/O must stay inside the member's size as opened: a write past it would
/// extend a file (a truncated member would silently grow back sparse), a read
/// past the end of a file truncated meanwhile returns an error, never zeros.
pub(crate) fn inside(len: u64, off: u64, n: usize) -> io::Result<()> {
    if off.checked_add(n as u64).is_some_and(|e| e <= len) {
        return Ok(());
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("I/O at {off}+{n} reaches past the member's end ({len} bytes)"),
    ))
}

impl FileMember {
    /// A write must not extend a regular file that was truncated under us (the
    /// gap would read back as zeros, silently): the file's size now, one
    /// `lseek(SEEK_END)` (cheaper than `fstat`, which fills a whole `statx`;
    /// the file position it moves is unused: I/O is pread/pwrite).
    fn check_not_truncated(&self, off: u64, n: usize) -> io::Result<()> {
        if !self.regular {
            return Ok(());
        }
        let now = rustix::fs::seek(&self.file, rustix::fs::SeekFrom::End(0))?;
        if off + n as u64 > now {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "the member file is {now} bytes, shorter than when it was opened ({}): truncated? the write is refused",
                    self.len
                ),
            ));
        }
        Ok(())
    }

    /// `buf` at `off`, in range and the file checked not truncated.
    fn write_checked(&self, buf: &[u8], off: u64) -> io::Result<()> {
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
}

impl Member for FileMember {
    fn plain_file(&self) -> Option<super::PlainFile> {
        use std::os::fd::AsRawFd;
        Some(super::PlainFile {
            fd: self.file.as_raw_fd(),
            len: self.len,
            direct: self.direct,
        })
    }

    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        inside(self.len, off, buf.len())?;
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
        inside(self.len, off, buf.len())?;
        self.check_not_truncated(off, buf.len())?;
        self.write_checked(buf, off)
    }

    fn write_vectored_at(&self, parts: &[&[u8]], off: u64) -> io::Result<()> {
        let n = parts.iter().map(|p| p.len()).sum();
        inside(self.len, off, n)?;
        self.check_not_truncated(off, n)?;
        if let [one] = parts {
            return self.write_checked(one, off);
        }
        let ok = |p: &&[u8]| aligned(p.len() as u64) && aligned(p.as_ptr() as u64);
        if self.direct && !(aligned(off) && parts.iter().all(ok)) {
            // O_DIRECT with unaligned pieces: one joined write (write_at bounces the
            // edges itself, so the join must not use the bounce buffer).
            return super::write_joined(self, parts, off);
        }
        pwritev_all(&self.file, parts, off)
    }

    fn flush(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    /// A hole punched (`fallocate(PUNCH_HOLE | KEEP_SIZE)`): a file gives the
    /// blocks back, a block device gets a discard that reads back as zeroes
    /// (the kernel's zeroing unmap). Where neither is supported, zeroes are
    /// written.
    fn discard(&self, off: u64, len: u64) -> io::Result<bool> {
        use rustix::fs::FallocateFlags as F;
        use rustix::io::Errno;
        inside(self.len, off, len as usize)?;
        self.check_not_truncated(off, len as usize)?;
        match rustix::fs::fallocate(&self.file, F::PUNCH_HOLE | F::KEEP_SIZE, off, len) {
            Ok(()) => Ok(true),
            Err(Errno::OPNOTSUPP | Errno::NOSYS | Errno::INVAL) => {
                super::write_zeroes(self, off, len)?;
                Ok(false)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Regular files know their holes (`SEEK_DATA`); devices say stored.
    fn stored(&self, off: u64, len: u64) -> bool {
        if !self.regular {
            return true;
        }
        // The file position it moves is unused: I/O is pread/pwrite.
        match rustix::fs::seek(&self.file, rustix::fs::SeekFrom::Data(off)) {
            Ok(at) => at < off + len,
            // ENXIO: no data at or after `off`. Anything else: cannot tell.
            Err(e) => e != rustix::io::Errno::NXIO,
        }
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn name(&self) -> String {
        self.path.display().to_string()
    }
}

/// `pwritev` until every byte of `parts` is written at `off` (short writes and
/// EINTR resume; at most IOV_MAX pieces per call).
fn pwritev_all(file: &File, parts: &[&[u8]], mut off: u64) -> io::Result<()> {
    use std::io::IoSlice;
    const IOV_MAX: usize = 1024;
    let (mut i, mut skip) = (0usize, 0usize);
    // Each pass writes at least one byte or returns; bounded by the total length.
    while i < parts.len() {
        let iov: Vec<IoSlice<'_>> = parts[i..]
            .iter()
            .take(IOV_MAX)
            .enumerate()
            .map(|(k, p)| IoSlice::new(if k == 0 { &p[skip..] } else { p }))
            .collect();
        let n = match rustix::io::pwritev(file, &iov, off) {
            Ok(n) => n,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        };
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "pwritev wrote nothing",
            ));
        }
        off += n as u64;
        let mut n = n as usize;
        while n > 0 && i < parts.len() {
            let left = parts[i].len() - skip;
            if n >= left {
                n -= left;
                i += 1;
                skip = 0;
            } else {
                skip += n;
                n = 0;
            }
        }
        while i < parts.len() && parts[i].len() == skip {
            i += 1;
            skip = 0;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 37: a descriptor passed for a new member is refused, with a
    /// sentence, when it appends (pwrite would land at the end: a rebuild
    /// onto it read back 21.6 MB wrong) or has no name (a memfd, an
    /// unlinked file); a plain read-write file is taken.
    #[test]
    fn passed_descriptors_that_append_or_have_no_name_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("m");
        std::fs::File::create(&p).unwrap().set_len(1 << 20).unwrap();
        let appending = std::fs::OpenOptions::new()
            .read(true)
            .append(true)
            .open(&p)
            .unwrap();
        let e = FileMember::from_passed(appending, p.clone()).err().unwrap();
        assert!(e.to_string().contains("O_APPEND"), "{e}");
        let memfd = File::from(
            rustix::fs::memfd_create("hetraid-test", rustix::fs::MemfdFlags::ALLOW_SEALING)
                .unwrap(),
        );
        memfd.set_len(1 << 20).unwrap();
        let e = FileMember::from_passed(memfd, "memfd".into())
            .err()
            .unwrap();
        assert!(e.to_string().contains("no name"), "{e}");
        let q = d.path().join("gone");
        let gone = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&q)
            .unwrap();
        gone.set_len(1 << 20).unwrap();
        std::fs::remove_file(&q).unwrap();
        let e = FileMember::from_passed(gone, q).err().unwrap();
        assert!(e.to_string().contains("no name"), "{e}");
        let fine = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&p)
            .unwrap();
        assert!(FileMember::from_passed(fine, p).is_ok());
    }

    /// Vectored writes land byte for byte where one joined write would, with
    /// aligned and unaligned pieces, and with more pieces than one pwritev takes.
    #[test]
    fn vectored_writes_equal_joined_writes() {
        // /var/tmp is usually disk-backed (O_DIRECT); the current directory is a
        // second, possibly different, filesystem.
        for dir in [std::path::PathBuf::from("/var/tmp"), std::env::temp_dir()] {
            let Ok(d) = tempfile::tempdir_in(&dir) else {
                continue;
            };
            let p = d.path().join("m");
            let m = FileMember::create(&p, 16 << 20).unwrap();
            let mut seed = 7u64;
            let mut next = || {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed
            };
            let mut model = vec![0u8; 16 << 20];
            for round in 0..40 {
                let aligned_pieces = round % 2 == 0;
                let count = if round == 5 {
                    1500
                } else {
                    1 + (next() % 20) as usize
                };
                let mut bufs: Vec<AlignedBuf> = Vec::new();
                for _ in 0..count {
                    let len = if aligned_pieces {
                        4096 * (1 + (next() % 4) as usize)
                    } else {
                        1 + (next() % 9000) as usize
                    };
                    let mut b = AlignedBuf::zeroed(len);
                    b.iter_mut().for_each(|x| *x = next() as u8);
                    bufs.push(b);
                }
                let total: usize = bufs.iter().map(|b| b.len()).sum();
                let off = if aligned_pieces {
                    4096 * (next() % 64)
                } else {
                    next() % 4096
                };
                if off as usize + total > model.len() {
                    continue;
                }
                let parts: Vec<&[u8]> = bufs.iter().map(|b| &b[..]).collect();
                m.write_vectored_at(&parts, off).unwrap();
                let mut at = off as usize;
                for p in &parts {
                    model[at..at + p.len()].copy_from_slice(p);
                    at += p.len();
                }
            }
            let mut back = vec![0u8; model.len()];
            m.read_at(&mut back, 0).unwrap();
            assert!(
                back == model,
                "vectored writes differ from the model in {}",
                dir.display()
            );
        }
    }
}
