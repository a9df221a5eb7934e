//! A stop request that blocking waits see: a flag and an eventfd. A served
//! array's threads block in `poll`/`epoll_wait` on their own descriptor plus
//! [`Stop::fd`] with no timeout, so an idle server uses no CPU at all, and a
//! stop (SIGINT/SIGTERM, or a command finishing) wakes every one of them at
//! once. The eventfd is never read: once written it stays readable, so no
//! waiter can miss it.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub struct Stop {
    flag: Arc<AtomicBool>,
    efd: OwnedFd,
}

impl Stop {
    pub fn new() -> io::Result<Arc<Self>> {
        use rustix::event::{eventfd, EventfdFlags};
        Ok(Arc::new(Self {
            flag: Arc::new(AtomicBool::new(false)),
            efd: eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?,
        }))
    }

    /// Ask every waiter to stop.
    pub fn stop(&self) {
        self.flag.store(true, Ordering::SeqCst);
        signal_eventfd(self.efd.as_raw_fd());
    }

    pub fn is_set(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }

    /// The descriptor that becomes readable at the stop (for a caller's own
    /// poll or epoll set).
    pub fn fd(&self) -> RawFd {
        self.efd.as_raw_fd()
    }

    /// [`Stop::fd`], borrowed.
    pub fn as_fd(&self) -> BorrowedFd<'_> {
        self.efd.as_fd()
    }

    /// Stop on SIGINT and SIGTERM: the handler sets the flag and writes the
    /// eventfd (both async-signal-safe). The handlers stay for the life of
    /// the process, which owns this `Stop` until it exits.
    pub fn on_signals(self: &Arc<Self>) -> io::Result<()> {
        for sig in [libc::SIGINT, libc::SIGTERM] {
            let (flag, fd) = (self.flag.clone(), self.efd.as_raw_fd());
            // SAFETY: the closure only stores an atomic and calls write(2),
            // both allowed in a signal handler; `fd` outlives the process's
            // serving (the Stop is held until exit).
            unsafe {
                signal_hook::low_level::register(sig, move || {
                    flag.store(true, Ordering::SeqCst);
                    signal_eventfd(fd);
                })
            }?;
        }
        Ok(())
    }

    /// Sleep up to `d`, returning early (true) at a stop.
    pub fn sleep(&self, d: Duration) -> bool {
        wait_readable(&[], self, Some(d));
        self.is_set()
    }
}

fn signal_eventfd(fd: RawFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a live u64; a full counter (EAGAIN)
    // already reads as readable, which is all a waiter needs.
    unsafe { libc::write(fd, &one as *const u64 as *const libc::c_void, 8) };
}

/// Block until one of `fds` is readable or `stop` is set (or `timeout`
/// passes). Returns which of `fds` are readable.
pub fn wait_readable(fds: &[RawFd], stop: &Stop, timeout: Option<Duration>) -> Vec<bool> {
    let mut p: Vec<libc::pollfd> = fds
        .iter()
        .chain(std::iter::once(&stop.fd()))
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ms = timeout.map_or(-1, |d| d.as_millis().min(i32::MAX as u128) as i32);
    // SAFETY: `p` holds `p.len()` valid pollfds for the duration of the call.
    let n = unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, ms) };
    if n <= 0 {
        return vec![false; fds.len()];
    }
    p[..fds.len()].iter().map(|x| x.revents != 0).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_wakes_a_blocked_waiter_and_every_later_one() {
        let s = Stop::new().unwrap();
        let s2 = s.clone();
        let t = std::thread::spawn(move || {
            let t0 = std::time::Instant::now();
            wait_readable(&[], &s2, None);
            t0.elapsed()
        });
        std::thread::sleep(Duration::from_millis(50));
        s.stop();
        assert!(t.join().unwrap() < Duration::from_secs(5));
        // Level-triggered: later waits return at once.
        assert!(s.sleep(Duration::from_secs(10)));
        assert!(s.is_set());
    }
}
