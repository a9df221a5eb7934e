//! "Something about an array changed": a process-wide eventfd the engine
//! writes whenever it records an event (a member failed or came back, a
//! spare was added or taken, a rebuild or a change finished, ...). A
//! server's watchers block on it instead of polling the array's state on a
//! timer; they drain it, then look at the state, so an event between the
//! two is never lost (the fd stays readable until drained). Process-wide
//! because the watchers outlive any one `Array` (a change swaps it); more
//! arrays in one process only cost a watcher a spurious look.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::OnceLock;

static CHANGES: OnceLock<Option<OwnedFd>> = OnceLock::new();

fn efd() -> Option<&'static OwnedFd> {
    CHANGES
        .get_or_init(|| {
            // SAFETY: eventfd returns a new descriptor or -1.
            let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
            // SAFETY: `fd` is new and owned by nothing else.
            (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
        })
        .as_ref()
}

/// The descriptor that is readable after a change (None: no eventfd could
/// be made; watchers then fall back to looking on a timer).
pub fn fd() -> Option<RawFd> {
    efd().map(|f| f.as_raw_fd())
}

/// Note a change.
pub(crate) fn changed() {
    if let Some(f) = efd() {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64; a full counter is still
        // readable, which is all a watcher needs.
        unsafe { libc::write(f.as_raw_fd(), &one as *const u64 as *const libc::c_void, 8) };
    }
}

/// Take the changes noted so far (a watcher does this before it looks).
pub fn drain() {
    if let Some(f) = efd() {
        let mut n: u64 = 0;
        // SAFETY: reads at most 8 bytes into a live u64; EAGAIN when empty.
        unsafe { libc::read(f.as_raw_fd(), &mut n as *mut u64 as *mut libc::c_void, 8) };
    }
}
