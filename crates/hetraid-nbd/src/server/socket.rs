//! Socket helpers: the Unix socket bound private, a stale socket removed,
//! the send buffer grown, and a reply sent within the stall timeout.

#[allow(unused_imports)]
use super::*;

/// Make room for a Unix socket at `p`: nothing there, or a socket nobody
/// answers on (left by a killed server) is removed. Anything else — a file, a
/// directory, a link, a live socket — is an error and is left alone (a member
/// of the array could be at that path).
pub fn remove_stale_socket(p: &std::path::Path) -> io::Result<()> {
    use std::os::unix::fs::FileTypeExt;
    let m = match std::fs::symlink_metadata(p) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    if !m.file_type().is_socket() {
        return Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            format!(
                "{} exists and is not a socket; give a path where nothing is, it is not removed",
                p.display()
            ),
        ));
    }
    if UnixStream::connect(p).is_ok() {
        return Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            format!("{} is in use by a running server", p.display()),
        ));
    }
    std::fs::remove_file(p)
}

/// Bytes of replies a Unix connection may have queued before a send blocks.
pub(super) const UNIX_SEND_BUFFER: usize = 4 << 20;

/// Let a Unix connection queue several whole read replies (the kernel caps this at
/// `net.core.wmem_max`). With the default of about 200 KiB a 1 MiB reply is sent in
/// five rounds, each waiting for the client to drain the socket while the sending
/// worker holds the reply lock; queued at once, the worker is free as soon as it is
/// copied. TCP connections keep the kernel's autotuning, which setting the size
/// would turn off.
pub(super) fn grow_send_buffer(s: &UnixStream) {
    // A refusal only leaves the default size, so the result is ignored.
    let _ = rustix::net::sockopt::set_socket_send_buffer_size(s, UNIX_SEND_BUFFER);
}

/// Bind a Unix socket at `p` that has `mode` from its first moment,
/// whatever the umask, with no window in which another local user could
/// connect: it is bound inside a fresh directory only this user can enter,
/// given its mode there, then renamed into place. (The umask is the
/// process's: changing it around the bind raced with the control thread
/// making its own directory.)
pub(crate) fn bind_private(p: &std::path::Path, mode: u32) -> io::Result<UnixListener> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let parent = p
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    let name = p
        .file_name()
        .ok_or_else(|| invalid("the socket path has no file name"))?;
    let tmp = parent.join(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    std::fs::DirBuilder::new().mode(0o700).create(&tmp)?;
    let r = (|| {
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o700))?;
        let inner = tmp.join("s");
        let u = UnixListener::bind(&inner)?;
        std::fs::set_permissions(&inner, std::fs::Permissions::from_mode(mode))?;
        std::fs::rename(&inner, p)?;
        Ok(u)
    })();
    let _ = std::fs::remove_dir_all(&tmp);
    r
}

/// Send a reply whole within `stall` of its first byte going out: a client
/// that stopped reading (or reads at a trickle) is dropped then. Sends do
/// not block: each takes what the socket holds now, and the wait for room
/// is a poll bounded by what is left of the deadline. (A blocking send
/// with the socket's write timeout restarted the timeout with every bit of
/// room the client made: with a 5 s stall timeout such a client was held
/// 12-15 s, and one draining a little every second forever.)
pub(super) fn send_within(
    fd: std::os::fd::BorrowedFd<'_>,
    buf: &[u8],
    stall: Duration,
) -> io::Result<()> {
    use rustix::net::SendFlags;
    let mut at = 0;
    // The stall clock starts at the first wait: a reply the socket takes
    // at once reads no clock.
    let mut deadline: Option<std::time::Instant> = None;
    // Bounded: every round sends bytes, or waits at most until the deadline
    // and fails there.
    while at < buf.len() {
        let rest = &buf[at..];
        match rustix::net::send(fd, rest, SendFlags::DONTWAIT | SendFlags::NOSIGNAL) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                at += n;
                continue;
            }
            Err(rustix::io::Errno::INTR) => continue,
            Err(rustix::io::Errno::AGAIN) => {}
            Err(e) => return Err(e.into()),
        }
        let now = std::time::Instant::now();
        let left = deadline
            .get_or_insert(now + stall)
            .saturating_duration_since(now);
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client stopped reading its replies (--stall-timeout)",
            ));
        }
        let _ = super::poll_within(fd, rustix::event::PollFlags::OUT, left);
    }
    Ok(())
}
