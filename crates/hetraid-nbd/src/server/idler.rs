//! Quiet connections wait in one `epoll` set with no thread of their own;
//! the first byte of their next request brings a thread back.

#[allow(unused_imports)]
use super::*;

/// A quiet connection: no thread of its own until its next request.
pub(super) struct Parked {
    conn: Conn,
    export: Export,
    id: u64,
}

/// Quiet connections wait here (one `epoll` set for all of them), so an
/// idle client holds no thread; the first byte of its next request brings
/// a thread back for it.
pub(super) struct Idler {
    epfd: std::os::fd::OwnedFd,
    parked: Mutex<std::collections::HashMap<u64, Parked>>,
}

/// The idler's epoll key for the stop's eventfd (connection ids count up
/// from 0 and never reach it).
pub(super) const STOP_EVENT: u64 = u64::MAX;

impl Idler {
    /// Put `stop`'s eventfd in the epoll set (level-triggered: it stays
    /// readable once the stop is asked).
    pub(super) fn watch_stop(&self, stop: &crate::Stop) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: STOP_EVENT,
        };
        // SAFETY: both descriptors are open; `ev` outlives the call.
        if unsafe {
            libc::epoll_ctl(
                self.epfd.as_raw_fd(),
                libc::EPOLL_CTL_ADD,
                stop.fd(),
                &mut ev,
            )
        } != 0
        {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    pub(super) fn new() -> io::Result<Self> {
        use std::os::fd::FromRawFd;
        // SAFETY: epoll_create1 returns a new descriptor or -1.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Self {
            // SAFETY: `fd` is a new descriptor nothing else owns.
            epfd: unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) },
            parked: Mutex::new(Default::default()),
        })
    }

    pub(super) fn park(&self, p: Parked) -> Result<(), Parked> {
        use std::os::fd::AsRawFd;
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLONESHOT) as u32,
            u64: p.id,
        };
        let fd = p.conn.fd();
        let mut parked = self.parked.lock().unwrap();
        // SAFETY: both descriptors are open; `ev` outlives the call.
        if unsafe { libc::epoll_ctl(self.epfd.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) } != 0
        {
            return Err(p);
        }
        parked.insert(p.id, p);
        Ok(())
    }
}

/// A connection's thread is done: parked (its socket goes to the idler) or
/// ended (closed and forgotten).
pub(super) fn end_or_park(ctx: &Arc<Ctx>, r: io::Result<Option<(Conn, Export)>>, id: u64) {
    match r {
        Ok(Some((conn, export))) => {
            if ctx.idler.park(Parked { conn, export, id }).is_ok() {
                return;
            }
        }
        Ok(None) => {}
        Err(e) => {
            if e.kind() != io::ErrorKind::UnexpectedEof {
                tracing::info!("serve: connection closed: {e}");
            }
        }
    }
    if let Some(c) = ctx.open.lock().unwrap().remove(&id) {
        c.shutdown(std::net::Shutdown::Both);
    }
}

/// The idler: wakes parked connections when their next request comes (or
/// their client goes), each on a thread of its own again.
pub(super) fn run_idler(ctx: &Arc<Ctx>, stop: &crate::Stop) {
    use std::os::fd::AsRawFd;
    let mut evs = [libc::epoll_event { events: 0, u64: 0 }; 64];
    // Bounded by the server's life: the stop's eventfd is in the epoll set,
    // so the wait needs no timeout.
    while !stop.is_set() {
        // SAFETY: `evs` holds 64 entries for the duration of the call.
        let n = unsafe { libc::epoll_wait(ctx.idler.epfd.as_raw_fd(), evs.as_mut_ptr(), 64, -1) };
        for ev in evs.iter().take(n.max(0) as usize) {
            let id = ev.u64;
            if id == STOP_EVENT {
                continue;
            }
            let Some(p) = ctx.idler.parked.lock().unwrap().remove(&id) else {
                continue;
            };
            // SAFETY: both descriptors are open.
            unsafe {
                libc::epoll_ctl(
                    ctx.idler.epfd.as_raw_fd(),
                    libc::EPOLL_CTL_DEL,
                    p.conn.fd(),
                    std::ptr::null_mut(),
                )
            };
            let ctx2 = ctx.clone();
            let spawned = std::thread::Builder::new()
                .name("nbd-conn".into())
                .spawn(move || {
                    let Parked { conn, export, id } = p;
                    let r = transmission(conn, &ctx2, export, id);
                    end_or_park(&ctx2, r, id);
                });
            match spawned {
                Ok(t) => ctx.keep(t),
                Err(e) => {
                    tracing::info!(
                        "serve: a client's request waits: no thread for it ({e}); closing it"
                    );
                    if let Some(c) = ctx.open.lock().unwrap().remove(&id) {
                        c.shutdown(std::net::Shutdown::Both);
                    }
                }
            }
        }
    }
}
