//! Quiet connections wait in one `epoll` set with no thread of their own;
//! the first byte of their next request brings a thread back.

#[allow(unused_imports)]
use super::*;
use rustix::event::epoll;

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
        epoll::add(
            &self.epfd,
            stop.as_fd(),
            epoll::EventData::new_u64(STOP_EVENT),
            epoll::EventFlags::IN,
        )?;
        Ok(())
    }

    pub(super) fn new() -> io::Result<Self> {
        Ok(Self {
            epfd: epoll::create(epoll::CreateFlags::CLOEXEC)?,
            parked: Mutex::new(Default::default()),
        })
    }

    pub(super) fn park(&self, p: Parked) -> Result<(), Parked> {
        use epoll::EventFlags as F;
        let mut parked = self.parked.lock().unwrap();
        let events = F::IN | F::RDHUP | F::ONESHOT;
        if epoll::add(
            &self.epfd,
            p.conn.fd(),
            epoll::EventData::new_u64(p.id),
            events,
        )
        .is_err()
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
    let mut evs: Vec<epoll::Event> = Vec::with_capacity(64);
    // Bounded by the server's life: the stop's eventfd is in the epoll set,
    // so the wait needs no timeout.
    while !stop.is_set() {
        evs.clear();
        // EINTR and the like: look at the stop and wait again.
        let _ = epoll::wait(
            &ctx.idler.epfd,
            rustix::buffer::spare_capacity(&mut evs),
            None,
        );
        for ev in &evs {
            let id = ev.data.u64();
            if id == STOP_EVENT {
                continue;
            }
            let Some(p) = ctx.idler.parked.lock().unwrap().remove(&id) else {
                continue;
            };
            let _ = epoll::delete(&ctx.idler.epfd, p.conn.fd());
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
