//! Passing an open file over the control socket (`SCM_RIGHTS`): `replace`
//! and `grow --add` on a served array hand the server the new member as the
//! calling user opened it, so the server — often root — never opens a path
//! on someone else's behalf: what the caller cannot open for writing, it
//! cannot make the array overwrite. Written on libc (two calls) rather than
//! pulling in `nix` for them.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

/// Room for one descriptor's control message.
const CMSG_SPACE: usize = 64;

/// Send `bytes` on `s`, with `fd` attached to the first byte when given.
pub fn send(s: &UnixStream, bytes: &[u8], fd: Option<RawFd>) -> io::Result<()> {
    let mut sent = 0;
    if let Some(fd) = fd {
        let mut iov = libc::iovec {
            iov_base: bytes.as_ptr() as *mut libc::c_void,
            iov_len: bytes.len(),
        };
        let mut cbuf = [0u8; CMSG_SPACE];
        // SAFETY: msghdr is plain data; every pointer set below outlives the
        // sendmsg call, and the control buffer is large enough for one fd
        // (CMSG_SPACE of an int is at most 24 bytes).
        unsafe {
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = cbuf.as_mut_ptr().cast();
            msg.msg_controllen = libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) as _;
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<RawFd>(), fd);
            let n = libc::sendmsg(s.as_raw_fd(), &msg, libc::MSG_NOSIGNAL);
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            sent = n as usize;
        }
    }
    use std::io::Write;
    let mut w = s;
    w.write_all(&bytes[sent..])
}

/// Read one line (up to `max` bytes, newline excluded) from `s`, and the
/// descriptor sent with it, if any. A line longer than `max` is an error.
pub fn recv_line(s: &UnixStream, max: usize) -> io::Result<(String, Option<OwnedFd>)> {
    let mut line = Vec::new();
    let mut fd: Option<OwnedFd> = None;
    let mut buf = [0u8; 4096];
    // Bounded: every round reads at least a byte, and the line is bounded.
    loop {
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: 1,
        };
        let mut cbuf = [0u8; CMSG_SPACE];
        // SAFETY: as in `send`; recvmsg fills at most the buffers given.
        // Reading one byte at a time keeps the bytes after the line in the
        // socket (there are none in this protocol) and is cheap at this size.
        let n = unsafe {
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = cbuf.as_mut_ptr().cast();
            msg.msg_controllen = CMSG_SPACE as _;
            let n = libc::recvmsg(s.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC);
            if n >= 0 {
                let mut c = libc::CMSG_FIRSTHDR(&msg);
                while !c.is_null() {
                    if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                        // Every descriptor of the message is ours now: the
                        // first is kept, every other one closed (dropped),
                        // however many a sender packs in.
                        let data = (*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                        let count = data / std::mem::size_of::<RawFd>();
                        let first = libc::CMSG_DATA(c).cast::<RawFd>();
                        for i in 0..count {
                            let got: RawFd = std::ptr::read_unaligned(first.add(i));
                            let owned = OwnedFd::from_raw_fd(got);
                            if fd.is_none() {
                                fd = Some(owned);
                            }
                        }
                    }
                    c = libc::CMSG_NXTHDR(&msg, c);
                }
            }
            n
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        if buf[0] == b'\n' {
            break;
        }
        line.push(buf[0]);
        if line.len() > max {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("control request longer than {max} bytes"),
            ));
        }
    }
    let line = String::from_utf8(line)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "control request is not UTF-8"))?;
    Ok((line, fd))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_descriptor_travels_with_its_line() {
        let (a, b) = UnixStream::pair().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, b"hello").unwrap();
        let f = std::fs::File::open(&p).unwrap();
        send(&a, b"{\"verb\":\"x\"}\n", Some(f.as_raw_fd())).unwrap();
        drop(f);
        let (line, fd) = recv_line(&b, 1 << 16).unwrap();
        assert_eq!(line, "{\"verb\":\"x\"}");
        let mut got = String::new();
        use std::io::Read;
        std::fs::File::from(fd.unwrap())
            .read_to_string(&mut got)
            .unwrap();
        assert_eq!(got, "hello");
        // Without a descriptor, and a line too long.
        send(&a, b"plain\n", None).unwrap();
        let (line, fd) = recv_line(&b, 100).unwrap();
        assert_eq!(line, "plain");
        assert!(fd.is_none());
        send(&a, &[b'x'; 300], None).unwrap();
        assert!(recv_line(&b, 100).is_err());
    }

    /// Descriptors of this process open on files under `dir` (other tests
    /// open and close descriptors meanwhile: only these are counted).
    fn open_under(dir: &std::path::Path) -> usize {
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
            .filter(|t| t.starts_with(dir))
            .count()
    }

    /// Issue 37: twelve descriptors in one message: one is kept, eleven
    /// closed (they leaked, a path to EMFILE).
    #[test]
    fn every_descriptor_received_is_closed_but_the_one_kept() {
        let (a, b) = UnixStream::pair().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let files: Vec<std::fs::File> = (0..12)
            .map(|i| {
                let p = dir.path().join(format!("f{i}"));
                std::fs::write(&p, b"x").unwrap();
                std::fs::File::open(&p).unwrap()
            })
            .collect();
        let fds: Vec<RawFd> = files.iter().map(|f| f.as_raw_fd()).collect();
        let bytes = b"{}\n";
        let mut iov = libc::iovec {
            iov_base: bytes.as_ptr() as *mut libc::c_void,
            iov_len: bytes.len(),
        };
        let mut cbuf = [0u8; 128];
        let size = std::mem::size_of_val(&fds[..]) as u32;
        // SAFETY: the control buffer holds one message of 12 descriptors
        // (16 + 48 bytes); every pointer outlives the call.
        unsafe {
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = cbuf.as_mut_ptr().cast();
            msg.msg_controllen = libc::CMSG_SPACE(size) as _;
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(size) as _;
            std::ptr::copy_nonoverlapping(fds.as_ptr(), libc::CMSG_DATA(c).cast::<RawFd>(), 12);
            assert!(libc::sendmsg(a.as_raw_fd(), &msg, 0) > 0);
        }
        drop(files);
        assert_eq!(open_under(dir.path()), 0, "in flight, held by the socket");
        let (line, kept) = recv_line(&b, 100).unwrap();
        assert_eq!(line, "{}");
        assert!(kept.is_some());
        assert_eq!(
            open_under(dir.path()),
            1,
            "only the descriptor kept is open"
        );
        drop(kept);
        assert_eq!(open_under(dir.path()), 0);
    }
}
