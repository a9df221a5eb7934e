//! "Something about an array changed": a process-wide eventfd the engine
//! writes whenever it records an event (a member failed or came back, a
//! spare was added or taken, a rebuild or a change finished, ...). A
//! server's watchers block on it instead of polling the array's state on a
//! timer; they drain it, then look at the state, so an event between the
//! two is never lost (the fd stays readable until drained). Process-wide
//! because the watchers outlive any one `Array` (a change swaps it); more
//! arrays in one process only cost a watcher a spurious look.

use rustix::event::{eventfd, EventfdFlags};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::OnceLock;

static CHANGES: OnceLock<Option<OwnedFd>> = OnceLock::new();

fn efd() -> Option<&'static OwnedFd> {
    CHANGES
        .get_or_init(|| eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK).ok())
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
        // A full counter (EAGAIN) is still readable, which is all a watcher
        // needs.
        let _ = rustix::io::write(f, &one.to_ne_bytes());
    }
}

/// Take the changes noted so far (a watcher does this before it looks).
pub fn drain() {
    if let Some(f) = efd() {
        // EAGAIN when empty.
        let _ = rustix::io::read(f, &mut [0u8; 8]);
    }
}

/// "User I/O came after an idle spell": a second process-wide eventfd, for
/// watchers that only matter while users do I/O (the slow-member sit-out
/// looker) and wait on it instead of waking on a timer while idle.
static IO: OnceLock<Option<OwnedFd>> = OnceLock::new();

fn io_efd() -> Option<&'static OwnedFd> {
    IO.get_or_init(|| eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK).ok())
        .as_ref()
}

/// The descriptor that is readable once user I/O came after a watcher
/// said it waits (None: no eventfd; watchers then look on a timer).
pub fn io_fd() -> Option<RawFd> {
    io_efd().map(|f| f.as_raw_fd())
}

/// Note user I/O to a waiting watcher.
pub(crate) fn io_resumed() {
    if let Some(f) = io_efd() {
        let _ = rustix::io::write(f, &1u64.to_ne_bytes());
    }
}

/// Take what [`io_resumed`] noted (a watcher does this before it waits).
pub fn drain_io() {
    if let Some(f) = io_efd() {
        let _ = rustix::io::read(f, &mut [0u8; 8]);
    }
}
