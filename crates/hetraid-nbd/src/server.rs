//! The NBD transport: listeners (Unix, TCP), the fixed-newstyle handshake, and the
//! transmission phase with requests served concurrently and answered out of order.

use crate::memory::{ChargedBuf, MemoryBudget};
use crate::proto::{self, Action, Export, Request};
use hetraid_engine::{Array, ArrayCell};
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Where to listen: `unix:PATH` or `tcp:HOST:PORT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    Unix(PathBuf),
    Tcp(String),
}

impl Listen {
    pub fn parse(s: &str) -> Result<Self, String> {
        if let Some(p) = s.strip_prefix("unix:") {
            if p.is_empty() {
                return Err("unix: needs a socket path, e.g. unix:/tmp/hetraid.sock".into());
            }
            return Ok(Self::Unix(PathBuf::from(p)));
        }
        if let Some(a) = s.strip_prefix("tcp:") {
            if !a.contains(':') {
                return Err(format!("tcp:{a} needs HOST:PORT, e.g. tcp:127.0.0.1:10809"));
            }
            return Ok(Self::Tcp(a.to_string()));
        }
        Err(format!("--listen '{s}' must be unix:PATH or tcp:HOST:PORT"))
    }
}

/// One client connection, Unix or TCP.
enum Conn {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Conn {
    fn try_clone(&self) -> io::Result<Self> {
        Ok(match self {
            Self::Unix(s) => Self::Unix(s.try_clone()?),
            Self::Tcp(s) => Self::Tcp(s.try_clone()?),
        })
    }
    fn shutdown(&self, how: std::net::Shutdown) {
        let _ = match self {
            Self::Unix(s) => s.shutdown(how),
            Self::Tcp(s) => s.shutdown(how),
        };
    }
    fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Self::Unix(s) => s.set_read_timeout(t),
            Self::Tcp(s) => s.set_read_timeout(t),
        }
    }
    fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Self::Unix(s) => s.set_write_timeout(t),
            Self::Tcp(s) => s.set_write_timeout(t),
        }
    }
    /// Who is at the other end, for the log.
    fn peer(&self) -> String {
        match self {
            Self::Unix(_) => "a local client".into(),
            Self::Tcp(s) => s
                .peer_addr()
                .map_or_else(|_| "a TCP client".into(), |a| a.to_string()),
        }
    }
}

/// A client must finish its whole handshake within this (default of
/// `--handshake-timeout`).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Options one handshake may send (nbdkit closes a client past its own
/// bound too); real clients send a handful.
pub const HANDSHAKE_OPTIONS_MAX: usize = 64;
/// Connections still in their handshake, counted apart from established
/// ones: slow handshakes cannot take the slots of real clients (and each
/// ends at its deadline).
pub const HANDSHAKES_MAX: usize = 128;

/// A connection in its handshake: every read waits at most until one
/// deadline for the whole handshake. (A read timeout alone restarts with
/// every byte: 16 clients sending a byte every 5 s held every slot.)
struct Handshaking {
    c: Conn,
    deadline: Option<std::time::Instant>,
}

impl Read for Handshaking {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some(d) = self.deadline {
            let left = d.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the handshake took longer than --handshake-timeout",
                ));
            }
            self.c.set_read_timeout(Some(left))?;
        }
        self.c.read(buf)
    }
}

impl Write for Handshaking {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.c.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.c.flush()
    }
}

/// One connection counted as handshaking until dropped.
struct HandshakeSlot<'a>(Option<&'a std::sync::atomic::AtomicUsize>);

impl HandshakeSlot<'_> {
    fn done(&mut self) {
        if let Some(n) = self.0.take() {
            n.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl Drop for HandshakeSlot<'_> {
    fn drop(&mut self) {
        self.done();
    }
}
/// A reply that makes no progress for this long (the client stopped
/// reading) ends the connection.
pub const REPLY_STALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Bytes of read replies a connection may have in flight: a client that
/// stops reading holds at most this much of the server's memory.
pub const REPLY_BYTES_MAX: u64 = 64 << 20;
/// Option payload bytes read and thrown away to answer ERR_TOO_BIG; a
/// larger one closes the connection.
const OPTION_DISCARD_MAX: u64 = 32 << 20;
/// After a stop, clients get this long to finish before their connections
/// are closed.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

impl Conn {
    fn fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        match self {
            Self::Unix(s) => s.as_raw_fd(),
            Self::Tcp(s) => s.as_raw_fd(),
        }
    }
}

impl Read for Conn {
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        match self {
            Self::Unix(s) => s.read(b),
            Self::Tcp(s) => s.read(b),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        match self {
            Self::Unix(s) => s.write(b),
            Self::Tcp(s) => s.write(b),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Self::Unix(s) => s.flush(),
            Self::Tcp(s) => s.flush(),
        }
    }
}

/// Server settings.
#[derive(Debug, Clone)]
pub struct Config {
    pub read_only: bool,
    /// The export's name (`serve --name`, default empty): a client asking
    /// for another is refused.
    pub name: String,
    /// TLS (`serve --tls-cert/--tls-key`): required of every client.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Connections served at once; more are refused (closed at once).
    pub max_connections: usize,
    /// A reply that makes no progress this long ends its connection.
    pub stall_timeout: Duration,
    /// Requests of one connection served at once.
    pub workers: usize,
    /// Worker threads shared by every connection beyond one each.
    pub threads: usize,
    /// How long a worker polls for the rest of a write payload before sleeping.
    pub payload_spin: Duration,
    /// The Unix socket's mode (`serve --socket-mode`, default 0600): set
    /// explicitly, whatever the umask.
    pub socket_mode: u32,
    /// The whole handshake must end within this (`--handshake-timeout`).
    pub handshake_timeout: Duration,
    /// Bytes of write payloads, read replies and reused buffers every
    /// connection holds together (`--memory-limit`); a request that finds
    /// no room waits.
    pub memory_limit: u64,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            read_only: false,
            name: String::new(),
            tls: None,
            max_connections: default_max_connections(),
            stall_timeout: REPLY_STALL_TIMEOUT,
            workers: 8,
            threads: default_threads(),
            payload_spin: Duration::from_micros(50),
            socket_mode: 0o600,
            handshake_timeout: HANDSHAKE_TIMEOUT,
            memory_limit: crate::memory::default_memory_limit(),
        }
    }
}

/// The TLS configuration from a certificate chain and a private key, both
/// PEM files (`serve --tls-cert/--tls-key`).
pub fn tls_config(
    cert: &std::path::Path,
    key: &std::path::Path,
) -> Result<Arc<rustls::ServerConfig>, String> {
    let open = |p: &std::path::Path| {
        std::fs::File::open(p)
            .map(io::BufReader::new)
            .map_err(|e| format!("{}: {e}", p.display()))
    };
    let certs: Vec<_> = rustls_pemfile::certs(&mut open(cert)?)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{}: not a PEM certificate file: {e}", cert.display()))?;
    if certs.is_empty() {
        return Err(format!("{} holds no certificate", cert.display()));
    }
    let key_der = rustls_pemfile::private_key(&mut open(key)?)
        .map_err(|e| format!("{}: not a PEM key file: {e}", key.display()))?
        .ok_or_else(|| format!("{} holds no private key", key.display()))?;
    for w in certificate_warnings(&certs[0], std::time::SystemTime::now()) {
        tracing::warn!("{}: {w}", cert.display());
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(certs, key_der)
        .map_err(|e| {
            format!(
                "{} and {} do not make a TLS identity: {e}",
                cert.display(),
                key.display()
            )
        })?;
    Ok(Arc::new(cfg))
}

/// What is wrong with the server's certificate at `now`: expired, not yet
/// valid, or unreadable. Clients refuse such a certificate, so the server
/// says so at start (it still serves: the clock may be what is wrong).
pub fn certificate_warnings(
    der: &rustls::pki_types::CertificateDer<'_>,
    now: std::time::SystemTime,
) -> Vec<String> {
    let (_, c) = match x509_parser::parse_x509_certificate(der.as_ref()) {
        Ok(c) => c,
        Err(e) => {
            return vec![format!(
                "the certificate cannot be read to check its dates ({e})"
            )]
        }
    };
    let secs = match now.duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => d.as_secs() as i64,
        Err(_) => 0,
    };
    let v = c.validity();
    let (from, until) = (v.not_before.timestamp(), v.not_after.timestamp());
    let mut w = Vec::new();
    if secs > until {
        w.push(format!(
            "the certificate expired on {} ({} days ago): TLS clients will refuse it; renew it",
            v.not_after,
            (secs - until) / 86_400
        ));
    }
    if secs < from {
        w.push(format!(
            "the certificate is not valid before {}: TLS clients will refuse it until then (or this machine's clock is wrong)",
            v.not_before
        ));
    }
    w
}

/// Does `addr` (HOST:PORT) name only loopback addresses?
pub fn loopback_only(addr: &str) -> Result<bool, String> {
    use std::net::ToSocketAddrs;
    let addrs: Vec<_> = addr
        .to_socket_addrs()
        .map_err(|e| format!("tcp:{addr}: {e}"))?
        .collect();
    Ok(!addrs.is_empty() && addrs.iter().all(|a| a.ip().is_loopback()))
}

/// A connection without a request for this long is parked.
const IDLE_PARK: Duration = Duration::from_secs(1);

/// Does `fd` have something to read (or an end) within `wait`?
fn readable_within(fd: std::os::fd::RawFd, wait: Duration) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN | libc::POLLRDHUP,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the duration of the call.
    let n = unsafe { libc::poll(&mut p, 1, wait.as_millis() as i32) };
    // An error is taken as readable: the read that follows reports it.
    n != 0
}

/// Shared worker threads by default: eight per CPU, 16..256 (requests
/// block on member I/O, so more than the CPUs).
pub fn default_threads() -> usize {
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    (cpus * 8).clamp(16, 256)
}

/// Connections by default: as many as the descriptors left allow
/// (`descriptor_budget`, two each), at least 16, at most 1,024. Whatever
/// this says, a client is refused at connect, with the reason, when the
/// descriptors it would take are not there.
pub fn default_max_connections() -> usize {
    (descriptor_budget() / FDS_PER_CONNECTION).clamp(16, 1024)
}

/// Counters printed at shutdown.
#[derive(Debug, Default)]
pub struct Stats {
    pub connections: AtomicU64,
    pub requests: AtomicU64,
    pub errors: AtomicU64,
    /// Clients refused: over --max-connections, or no thread for them.
    pub refused: AtomicU64,
}

/// Serve `array` until `stop` becomes true; then finish in-flight requests, close
/// every connection and return (the caller flushes and closes the array).
pub fn serve(
    array: Arc<ArrayCell>,
    listen: &Listen,
    cfg: Config,
    stop: Arc<crate::Stop>,
    stats: Arc<Stats>,
) -> io::Result<()> {
    enum L {
        U(UnixListener),
        T(TcpListener),
    }
    let l = match listen {
        Listen::Unix(p) => {
            remove_stale_socket(p)?;
            let u = bind_private(p, cfg.socket_mode)?;
            u.set_nonblocking(true)?;
            L::U(u)
        }
        Listen::Tcp(a) => {
            let t = TcpListener::bind(a)?;
            t.set_nonblocking(true)?;
            L::T(t)
        }
    };
    // Open connections (a clone of each, to stop their readers at shutdown);
    // removed when the connection ends so the socket really closes.
    let open: Arc<Mutex<std::collections::HashMap<u64, Arc<Conn>>>> =
        Arc::new(Mutex::new(Default::default()));
    let ctx = Arc::new(Ctx {
        cell: array.clone(),
        cfg: cfg.clone(),
        stats: stats.clone(),
        budget: ThreadBudget::new(cfg.threads),
        memory: MemoryBudget::new(cfg.memory_limit.max(crate::memory::MEMORY_LIMIT_MIN)),
        open: open.clone(),
        idler: Idler::new()?,
        running: Mutex::new(Vec::new()),
        handshaking: Default::default(),
        refusing: Default::default(),
        fds_max: descriptor_budget(),
    });
    let idler_stop = crate::Stop::new()?;
    ctx.idler.watch_stop(&idler_stop)?;
    let idler_thread = {
        let (ctx, stop) = (ctx.clone(), idler_stop.clone());
        std::thread::Builder::new()
            .name("nbd-idler".into())
            .spawn(move || run_idler(&ctx, &stop))?
    };
    let mut next_id = 0u64;
    while !stop.is_set() {
        let accepted = match &l {
            L::U(u) => u.accept().map(|(s, _)| Conn::Unix(s)),
            L::T(t) => t.accept().map(|(s, _)| {
                let _ = s.set_nodelay(true);
                Conn::Tcp(s)
            }),
        };
        match accepted {
            Ok(conn) => {
                let nonblocking = match &conn {
                    Conn::Unix(s) => s.set_nonblocking(false),
                    Conn::Tcp(s) => s.set_nonblocking(false),
                };
                if nonblocking.is_err() {
                    continue;
                }
                let who = conn.peer();
                // Handshakes are counted apart: they end at their deadline,
                // and never take an established client's slot.
                let handshaking = ctx.handshaking.load(Ordering::Acquire);
                let total = open.lock().unwrap().len();
                let established = total.saturating_sub(handshaking);
                if handshaking >= HANDSHAKES_MAX {
                    stats.refused.fetch_add(1, Ordering::Relaxed);
                    tracing::info!(
                        "serve: {who} refused: {HANDSHAKES_MAX} clients are in their handshake already"
                    );
                    conn.shutdown(std::net::Shutdown::Both);
                    continue;
                }
                // Over a limit: the client is told why (every option it
                // sends is answered NBD_REP_ERR_POLICY with the reason),
                // logged, and the server goes on.
                let over = if (total + 1) * FDS_PER_CONNECTION > ctx.fds_max {
                    Some(format!(
                        "the server has no descriptors left for another client ({total} connected; raise its open-file limit, ulimit -n)"
                    ))
                } else if established >= cfg.max_connections {
                    Some(format!(
                        "{} clients are connected already (--max-connections)",
                        cfg.max_connections
                    ))
                } else {
                    None
                };
                if let Some(why) = over {
                    stats.refused.fetch_add(1, Ordering::Relaxed);
                    tracing::info!("serve: {who} refused: {why}");
                    refuse(&ctx, conn, why);
                    continue;
                }
                ctx.handshaking.fetch_add(1, Ordering::AcqRel);
                if let Conn::Unix(s) = &conn {
                    grow_send_buffer(s);
                }
                next_id += 1;
                let id = next_id;
                match conn.try_clone() {
                    Ok(c) => {
                        open.lock().unwrap().insert(id, Arc::new(c));
                    }
                    Err(_) => continue,
                }
                stats.connections.fetch_add(1, Ordering::Relaxed);
                if matches!(conn, Conn::Tcp(_)) {
                    tracing::info!("serve: connection from {who}");
                }
                let ctx2 = ctx.clone();
                let spawned =
                    std::thread::Builder::new()
                        .name("nbd-conn".into())
                        .spawn(move || {
                            let slot = HandshakeSlot(Some(&ctx2.handshaking));
                            let r = connection(conn, &ctx2, slot, id, None);
                            end_or_park(&ctx2, r, id);
                        });
                match spawned {
                    Ok(t) => ctx.keep(t),
                    Err(e) => {
                        // No thread for this client: refuse it, keep serving.
                        ctx.handshaking.fetch_sub(1, Ordering::AcqRel);
                        stats.refused.fetch_add(1, Ordering::Relaxed);
                        tracing::info!("serve: {who} refused: no thread for it ({e})");
                        if let Some(c) = open.lock().unwrap().remove(&id) {
                            c.shutdown(std::net::Shutdown::Both);
                        }
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                // Block until the next client or the stop: an idle server
                // uses no CPU.
                use std::os::fd::AsRawFd;
                let fd = match &l {
                    L::U(u) => u.as_raw_fd(),
                    L::T(t) => t.as_raw_fd(),
                };
                crate::stop::wait_readable(&[fd], &stop, None);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // Out of descriptors (EMFILE/ENFILE), a client gone before we
            // took it (ECONNABORTED), out of memory: that client is lost,
            // the server goes on.
            Err(e) => {
                tracing::info!("serve: accept failed: {e}; still serving");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
    // Stop reading new requests; in-flight ones finish and are answered.
    for c in open.lock().unwrap().values() {
        c.shutdown(std::net::Shutdown::Read);
    }
    // Clients that do not take their replies get a grace period, then
    // their connections are closed (the array is still closed clean).
    // (Parked connections wake up to their end of file and finish too.)
    let t = std::time::Instant::now();
    let busy = || {
        !open.lock().unwrap().is_empty()
            || ctx.running.lock().unwrap().iter().any(|t| !t.is_finished())
    };
    while busy() && t.elapsed() < SHUTDOWN_GRACE {
        std::thread::sleep(Duration::from_millis(20));
    }
    for c in open.lock().unwrap().values() {
        c.shutdown(std::net::Shutdown::Both);
    }
    // Bounded: every connection thread ends once its socket is shut down;
    // the idler resumes what is still parked.
    let t = std::time::Instant::now();
    while busy() && t.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(20));
    }
    idler_stop.stop();
    let _ = idler_thread.join();
    for t in std::mem::take(&mut *ctx.running.lock().unwrap()) {
        let _ = t.join();
    }
    if let Listen::Unix(p) = listen {
        // Only our own socket: whatever replaced it meanwhile is not ours.
        if let Ok(m) = std::fs::symlink_metadata(p) {
            use std::os::unix::fs::FileTypeExt;
            if m.file_type().is_socket() {
                let _ = std::fs::remove_file(p);
            }
        }
    }
    Ok(())
}

/// Tell a client why it is refused, on a thread of its own within the
/// handshake deadline; at most REFUSALS_MAX at once, past that it is
/// closed at once.
fn refuse(ctx: &Arc<Ctx>, conn: Conn, why: String) {
    if ctx.refusing.load(Ordering::Acquire) >= REFUSALS_MAX {
        conn.shutdown(std::net::Shutdown::Both);
        return;
    }
    ctx.refusing.fetch_add(1, Ordering::AcqRel);
    let ctx2 = ctx.clone();
    let spawned = std::thread::Builder::new()
        .name("nbd-refuse".into())
        .spawn(move || {
            let slot = HandshakeSlot(Some(&ctx2.refusing));
            let _ = connection(conn, &ctx2, slot, 0, Some(why));
        });
    if spawned.is_err() {
        ctx.refusing.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Descriptors a connection holds, from accept to its end: its socket and
/// one duplicate to shut it down with (the handshake, transmission and the
/// idler use only these).
pub const FDS_PER_CONNECTION: usize = 2;
/// Descriptors kept for everything else while serving: control
/// connections, a replacement member, log copies.
pub const FDS_RESERVE: usize = 32;
/// Refused clients being told why at once.
pub const REFUSALS_MAX: usize = 16;

/// Descriptors that connections may take: the open-file limit less what is
/// open now, `FDS_RESERVE` and `REFUSALS_MAX`.
pub fn descriptor_budget() -> usize {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` outlives the call.
    let limit = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } == 0 {
        r.rlim_cur.min(1 << 20) as usize
    } else {
        1024
    };
    let open_now = std::fs::read_dir("/proc/self/fd").map_or(16, |d| d.count());
    limit.saturating_sub(open_now + FDS_RESERVE + REFUSALS_MAX)
}

/// What connection threads share: to serve a connection, and to resume one
/// that was parked.
struct Ctx {
    cell: Arc<ArrayCell>,
    cfg: Config,
    stats: Arc<Stats>,
    budget: ThreadBudget,
    memory: Arc<MemoryBudget>,
    /// Each connection's second descriptor: shut down to end it (at stop,
    /// or by its own workers).
    open: Arc<Mutex<std::collections::HashMap<u64, Arc<Conn>>>>,
    /// Descriptors connections may hold in all (`descriptor_budget`).
    fds_max: usize,
    idler: Idler,
    /// Connection threads (joined at shutdown; finished ones dropped).
    running: Mutex<Vec<std::thread::JoinHandle<()>>>,
    /// Connections in their handshake (`HANDSHAKES_MAX`).
    handshaking: std::sync::atomic::AtomicUsize,
    /// Refused clients being told why (`REFUSALS_MAX`).
    refusing: std::sync::atomic::AtomicUsize,
}

impl Ctx {
    fn keep(&self, t: std::thread::JoinHandle<()>) {
        let mut r = self.running.lock().unwrap();
        r.retain(|t| !t.is_finished());
        r.push(t);
    }
}

/// A quiet connection: no thread of its own until its next request.
struct Parked {
    conn: Conn,
    export: Export,
    id: u64,
}

/// Quiet connections wait here (one `epoll` set for all of them), so an
/// idle client holds no thread; the first byte of its next request brings
/// a thread back for it.
struct Idler {
    epfd: std::os::fd::OwnedFd,
    parked: Mutex<std::collections::HashMap<u64, Parked>>,
}

/// The idler's epoll key for the stop's eventfd (connection ids count up
/// from 0 and never reach it).
const STOP_EVENT: u64 = u64::MAX;

impl Idler {
    /// Put `stop`'s eventfd in the epoll set (level-triggered: it stays
    /// readable once the stop is asked).
    fn watch_stop(&self, stop: &crate::Stop) -> io::Result<()> {
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

    fn new() -> io::Result<Self> {
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

    fn park(&self, p: Parked) -> Result<(), Parked> {
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
fn end_or_park(ctx: &Arc<Ctx>, r: io::Result<Option<(Conn, Export)>>, id: u64) {
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
fn run_idler(ctx: &Arc<Ctx>, stop: &crate::Stop) {
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
const UNIX_SEND_BUFFER: libc::c_int = 4 << 20;

/// Let a Unix connection queue several whole read replies (the kernel caps this at
/// `net.core.wmem_max`). With the default of about 200 KiB a 1 MiB reply is sent in
/// five rounds, each waiting for the client to drain the socket while the sending
/// worker holds the reply lock; queued at once, the worker is free as soon as it is
/// copied. TCP connections keep the kernel's autotuning, which setting the size
/// would turn off.
fn grow_send_buffer(s: &UnixStream) {
    use std::os::fd::AsRawFd;
    let v = UNIX_SEND_BUFFER;
    // SAFETY: `v` outlives the call and the length passed is its size; the socket
    // is open. A refusal only leaves the default size, so the result is ignored.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

fn read_u32<R: Read>(c: &mut R) -> io::Result<u32> {
    let mut b = [0u8; 4];
    c.read_exact(&mut b)?;
    Ok(u32::from_be_bytes(b))
}

fn discard(c: &mut impl Read, mut n: u64) -> io::Result<()> {
    let mut b = [0u8; 8192];
    while n > 0 {
        let k = n.min(b.len() as u64) as usize;
        c.read_exact(&mut b[..k])?;
        n -= k as u64;
    }
    Ok(())
}

fn invalid(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.to_string())
}

/// What option haggling ended with.
enum Outcome {
    /// Transmission, with the export as negotiated.
    Go,
    /// The client asked for TLS and it was granted: haggle again over it.
    StartTls,
    /// The client went away politely.
    Abort,
}

/// What a connection is offered, and what it negotiated so far.
struct Offer {
    export: Export,
    flags: u16,
    preferred: u32,
    layout: String,
    no_zeroes: bool,
    /// The export's name (`serve --name`); other names are refused.
    name: String,
    /// TLS is configured: nothing but STARTTLS (or ABORT) before it.
    tls_required: bool,
    tls_active: bool,
}

/// Handshake then transmission for one client.
fn connection(
    c: Conn,
    ctx: &Ctx,
    mut slot: HandshakeSlot<'_>,
    id: u64,
    refuse: Option<String>,
) -> io::Result<Option<(Conn, Export)>> {
    let (cell, cfg) = (&ctx.cell, &ctx.cfg);
    // The size and geometry this connection is offered: the array's now (a
    // change completed later is seen by connections opened after it).
    let array = cell.current();
    // A client that connects and says nothing, or says it slowly, does not
    // hold a slot past the handshake's deadline.
    c.set_write_timeout(Some(cfg.stall_timeout))?;
    let mut c = Handshaking {
        c,
        deadline: Some(std::time::Instant::now() + cfg.handshake_timeout),
    };
    let mut flags = proto::TF_HAS_FLAGS
        | proto::TF_SEND_FLUSH
        | proto::TF_SEND_FUA
        | proto::TF_SEND_TRIM
        | proto::TF_SEND_WRITE_ZEROES
        // A flush makes every completed write durable on every member, whichever
        // connection wrote it: multi-connection is safe.
        | proto::TF_CAN_MULTI_CONN;
    if cfg.read_only {
        flags |= proto::TF_READ_ONLY;
    }
    if array.trim_unsupported().is_none() {
        // Zeroes are made by discarding whole stripes: faster than writing.
        flags |= proto::TF_SEND_FAST_ZERO;
    }
    let l = array.layout();
    // The NBD protocol wants a power of two: the largest one within a full
    // stripe (3 data chunks of 16K: 32K; qemu refuses 48K).
    let stripe = (l.chunk_bytes() * l.data_per_stripe() as u64).min(proto::MAX_PAYLOAD as u64);
    let preferred = (1u64 << (63 - stripe.max(1).leading_zeros())) as u32;
    let mut offer = Offer {
        export: Export {
            size: array.capacity(),
            read_only: cfg.read_only,
            structured: false,
            base_allocation: false,
            fast_zero: array.trim_unsupported().is_none(),
        },
        flags,
        preferred,
        layout: l.name(),
        no_zeroes: false,
        name: cfg.name.clone(),
        tls_required: cfg.tls.is_some(),
        tls_active: false,
    };
    drop(array);
    // Fixed newstyle greeting.
    let mut g = Vec::with_capacity(18);
    g.extend_from_slice(&proto::NBDMAGIC.to_be_bytes());
    g.extend_from_slice(&proto::IHAVEOPT.to_be_bytes());
    g.extend_from_slice(&(proto::FLAG_FIXED_NEWSTYLE | proto::FLAG_NO_ZEROES).to_be_bytes());
    c.write_all(&g)?;
    let client = read_u32(&mut c)?;
    if client & !(proto::CLIENT_FIXED_NEWSTYLE | proto::CLIENT_NO_ZEROES) != 0 {
        return Err(invalid("client sent unknown handshake flags"));
    }
    offer.no_zeroes = client & proto::CLIENT_NO_ZEROES != 0;
    if let Some(why) = refuse {
        return refuse_options(&mut c, &why).map(|_| None);
    }
    match negotiate(&mut c, &mut offer)? {
        Outcome::Abort => Ok(None),
        Outcome::Go => {
            // Transmission: an idle client may stay (a mounted filesystem is
            // idle for hours); a client that stops taking its replies is
            // dropped.
            slot.done();
            c.c.set_read_timeout(None)?;
            transmission(c.c, ctx, offer.export, id)
        }
        Outcome::StartTls => {
            let tls = cfg
                .tls
                .clone()
                .expect("STARTTLS is granted only with TLS set up");
            let conn = rustls::ServerConnection::new(tls).map_err(io::Error::other)?;
            let mut s = rustls::StreamOwned::new(conn, c);
            offer.tls_active = true;
            match negotiate(&mut s, &mut offer)? {
                Outcome::Go => {
                    slot.done();
                    s.sock.deadline = None;
                    s.sock.c.set_read_timeout(None)?;
                    transmission_serial(s, ctx, offer.export).map(|_| None)
                }
                _ => Ok(None),
            }
        }
    }
}

/// A refused client: every option is answered NBD_REP_ERR_POLICY with the
/// reason (libnbd and qemu print it), ABORT is acknowledged, EXPORT_NAME
/// (which has no error reply) closes.
fn refuse_options<S: Read + Write>(c: &mut S, why: &str) -> io::Result<()> {
    let msg = format!("hetraid serve: refused: {why}");
    // Bounded: at most HANDSHAKE_OPTIONS_MAX options, within the deadline.
    for _ in 0..HANDSHAKE_OPTIONS_MAX {
        let mut h = [0u8; 16];
        c.read_exact(&mut h)?;
        if u64::from_be_bytes(h[0..8].try_into().unwrap()) != proto::IHAVEOPT {
            return Err(invalid("bad option magic"));
        }
        let opt = u32::from_be_bytes(h[8..12].try_into().unwrap());
        let len = u32::from_be_bytes(h[12..16].try_into().unwrap());
        if len > proto::MAX_OPTION {
            return Err(invalid("option payload too large"));
        }
        discard(c, len as u64)?;
        match opt {
            proto::OPT_ABORT => {
                c.write_all(&proto::option_reply(opt, proto::REP_ACK, &[]))?;
                return c.flush();
            }
            proto::OPT_EXPORT_NAME => return Err(invalid("refused")),
            _ => {
                c.write_all(&proto::option_reply(
                    opt,
                    proto::REP_ERR_POLICY,
                    msg.as_bytes(),
                ))?;
                c.flush()?;
            }
        }
    }
    Err(invalid("too many options in one handshake"))
}

/// Option haggling on `c` (the socket, or TLS over it).
fn negotiate<S: Read + Write>(c: &mut S, o: &mut Offer) -> io::Result<Outcome> {
    // Bounded: at most HANDSHAKE_OPTIONS_MAX options, each read before
    // the handshake's deadline.
    for _ in 0..=HANDSHAKE_OPTIONS_MAX {
        let mut h = [0u8; 16];
        c.read_exact(&mut h)?;
        if u64::from_be_bytes(h[0..8].try_into().unwrap()) != proto::IHAVEOPT {
            return Err(invalid("bad option magic"));
        }
        let opt = u32::from_be_bytes(h[8..12].try_into().unwrap());
        let len = u32::from_be_bytes(h[12..16].try_into().unwrap());
        if len > proto::MAX_OPTION {
            // Answered, not a reset: the payload is read and dropped (up to
            // a bound; past it the connection is closed).
            if len as u64 > OPTION_DISCARD_MAX {
                return Err(invalid("option payload too large to skip"));
            }
            discard(c, len as u64)?;
            c.write_all(&proto::option_reply(opt, proto::REP_ERR_TOO_BIG, &[]))?;
            continue;
        }
        let mut data = vec![0u8; len as usize];
        c.read_exact(&mut data)?;
        // TLS required and not yet on: nothing else is answered.
        if o.tls_required && !o.tls_active && !matches!(opt, proto::OPT_STARTTLS | proto::OPT_ABORT)
        {
            if opt == proto::OPT_EXPORT_NAME {
                // No error reply exists for it: the spec says close.
                return Err(invalid(
                    "NBD_OPT_EXPORT_NAME before STARTTLS on a TLS server",
                ));
            }
            c.write_all(&proto::option_reply(opt, proto::REP_ERR_TLS_REQD, &[]))?;
            continue;
        }
        match opt {
            proto::OPT_STARTTLS => {
                if len != 0 {
                    c.write_all(&proto::option_reply(opt, proto::REP_ERR_INVALID, &[]))?;
                } else if !o.tls_required {
                    // This server was started without a certificate: a
                    // policy, as nbdkit answers (the option is known).
                    c.write_all(&proto::option_reply(opt, proto::REP_ERR_POLICY, &[]))?;
                } else if o.tls_active {
                    c.write_all(&proto::option_reply(opt, proto::REP_ERR_INVALID, &[]))?;
                } else {
                    c.write_all(&proto::option_reply(opt, proto::REP_ACK, &[]))?;
                    c.flush()?;
                    return Ok(Outcome::StartTls);
                }
            }
            proto::OPT_EXPORT_NAME => {
                if String::from_utf8_lossy(&data) != o.name {
                    return Err(invalid("unknown export name"));
                }
                let mut r = Vec::with_capacity(134);
                r.extend_from_slice(&o.export.size.to_be_bytes());
                r.extend_from_slice(&o.flags.to_be_bytes());
                if !o.no_zeroes {
                    r.extend_from_slice(&[0u8; 124]);
                }
                c.write_all(&r)?;
                c.flush()?;
                return Ok(Outcome::Go);
            }
            proto::OPT_ABORT => {
                c.write_all(&proto::option_reply(opt, proto::REP_ACK, &[]))?;
                c.flush()?;
                return Ok(Outcome::Abort);
            }
            proto::OPT_LIST => {
                if len != 0 {
                    c.write_all(&proto::option_reply(opt, proto::REP_ERR_INVALID, &[]))?;
                    continue;
                }
                let name = o.name.as_bytes();
                let mut d = (name.len() as u32).to_be_bytes().to_vec();
                d.extend_from_slice(name);
                c.write_all(&proto::option_reply(opt, proto::REP_SERVER, &d))?;
                c.write_all(&proto::option_reply(opt, proto::REP_ACK, &[]))?;
            }
            proto::OPT_INFO | proto::OPT_GO => {
                let Some((name, infos)) = proto::parse_go(&data) else {
                    c.write_all(&proto::option_reply(opt, proto::REP_ERR_INVALID, &[]))?;
                    continue;
                };
                if name != o.name {
                    c.write_all(&proto::option_reply(opt, proto::REP_ERR_UNKNOWN, &[]))?;
                    continue;
                }
                let mut out = proto::option_reply(
                    opt,
                    proto::REP_INFO,
                    &proto::info_export(o.export.size, o.flags),
                );
                // Block sizes are always sent: clients that did not ask may ignore them.
                out.extend(proto::option_reply(
                    opt,
                    proto::REP_INFO,
                    &proto::info_block_size(1, o.preferred, proto::MAX_PAYLOAD),
                ));
                if infos.contains(&proto::INFO_DESCRIPTION) {
                    let mut d = proto::INFO_DESCRIPTION.to_be_bytes().to_vec();
                    d.extend_from_slice(format!("hetraid {} array", o.layout).as_bytes());
                    out.extend(proto::option_reply(opt, proto::REP_INFO, &d));
                }
                if infos.contains(&proto::INFO_NAME) {
                    let mut d = proto::INFO_NAME.to_be_bytes().to_vec();
                    d.extend_from_slice(name.as_bytes());
                    out.extend(proto::option_reply(opt, proto::REP_INFO, &d));
                }
                out.extend(proto::option_reply(opt, proto::REP_ACK, &[]));
                c.write_all(&out)?;
                if opt == proto::OPT_GO {
                    c.flush()?;
                    return Ok(Outcome::Go);
                }
            }
            proto::OPT_STRUCTURED_REPLY => {
                if len != 0 {
                    c.write_all(&proto::option_reply(opt, proto::REP_ERR_INVALID, &[]))?;
                    continue;
                }
                o.export.structured = true;
                c.write_all(&proto::option_reply(opt, proto::REP_ACK, &[]))?;
            }
            proto::OPT_LIST_META_CONTEXT | proto::OPT_SET_META_CONTEXT => {
                let list = opt == proto::OPT_LIST_META_CONTEXT;
                // Meta contexts ride on structured replies (spec: SET without them
                // is invalid).
                let parsed = proto::parse_meta_context(&data);
                let Some((_name, queries)) = parsed.filter(|_| o.export.structured || list) else {
                    c.write_all(&proto::option_reply(opt, proto::REP_ERR_INVALID, &[]))?;
                    continue;
                };
                let selected = proto::meta_matches(&queries, list);
                if !list {
                    o.export.base_allocation = selected;
                }
                let mut out = Vec::new();
                if selected {
                    // A list names contexts without selecting them: id 0
                    // (spec), as nbdkit.
                    let id = if list {
                        0
                    } else {
                        proto::META_BASE_ALLOCATION_ID
                    };
                    let mut d = id.to_be_bytes().to_vec();
                    d.extend_from_slice(proto::META_BASE_ALLOCATION.as_bytes());
                    out.extend(proto::option_reply(opt, proto::REP_META_CONTEXT, &d));
                }
                out.extend(proto::option_reply(opt, proto::REP_ACK, &[]));
                c.write_all(&out)?;
            }
            _ => {
                // Unknown or unsupported (extended headers): say so and carry on.
                c.write_all(&proto::option_reply(opt, proto::REP_ERR_UNSUP, &[]))?;
            }
        }
        c.flush()?;
    }
    Err(invalid("too many options in one handshake"))
}

/// Transmission over TLS: one request at a time on one thread (reads and
/// writes share the TLS state), replies in order.
fn transmission_serial(
    mut c: rustls::StreamOwned<rustls::ServerConnection, Handshaking>,
    ctx: &Ctx,
    export: Export,
) -> io::Result<()> {
    let never = || false;
    // Bounded by the client: every round reads a request or ends.
    loop {
        let mut hdr = [0u8; proto::REQUEST_LEN];
        match c.read_exact(&mut hdr) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e),
        }
        let req = proto::parse_request(&hdr).map_err(|f| invalid(&f.to_string()))?;
        let action = proto::decide(&req, &export);
        let data = match action {
            Action::Close(f) => return Err(invalid(&f.to_string())),
            Action::Disconnect => return Ok(()),
            Action::Write { len, .. } => {
                // In pieces, each within the budget and the stall timeout.
                let mut d = ChargedBuf::new(&ctx.memory);
                let len = len as usize;
                // Bounded: every round receives a piece or fails.
                while d.buf.len() < len {
                    let at = d.buf.len();
                    let step = (len - at).min(PAYLOAD_PIECE);
                    d.reserve_total(at + step, never);
                    d.buf.resize(at + step, 0);
                    c.sock.deadline = Some(std::time::Instant::now() + ctx.cfg.stall_timeout);
                    let r = c.read_exact(&mut d.buf[at..]);
                    c.sock.deadline = None;
                    c.sock.c.set_read_timeout(None)?;
                    r.map_err(payload_stalled)?;
                }
                Some(d)
            }
            Action::Error { discard: n, .. } => {
                discard(&mut c, n as u64)?;
                None
            }
            _ => None,
        };
        let job = Job { req, action, data };
        let mut reply = ChargedBuf::new(&ctx.memory);
        if let Action::Read { len, .. } = job.action {
            reply.reserve_total(REPLY_ROOM + len as usize, never);
        }
        let out = std::mem::take(&mut reply.buf);
        let (out, start, failed) = execute(&ctx.cell.get(), &export, &job, out);
        reply.buf = out;
        reply.settle();
        drop(job);
        ctx.stats.requests.fetch_add(1, Ordering::Relaxed);
        if failed {
            ctx.stats.errors.fetch_add(1, Ordering::Relaxed);
        }
        c.write_all(&reply.buf[start..])?;
        c.flush()?;
    }
}

struct Job {
    req: Request,
    action: Action,
    /// A write's payload.
    data: Option<ChargedBuf>,
}

/// A read reply's bytes beyond its data: alignment room and the header.
const REPLY_ROOM: usize = 4096 + 32;

/// A payload read that timed out says why the client was dropped.
fn payload_stalled(e: io::Error) -> io::Error {
    if matches!(
        e.kind(),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
    ) {
        io::Error::new(
            io::ErrorKind::TimedOut,
            "the client stopped sending a write's payload (--stall-timeout)",
        )
    } else {
        e
    }
}

/// What the reader half of a connection hands a worker.
enum Next {
    Job(Job),
    /// Disconnect requested or the client went away: finish and close.
    Done,
}

/// Make `v` exactly `len` bytes long, zeroing only what it did not hold before.
/// Bind a Unix socket at `p` that has `mode` from its first moment,
/// whatever the umask, with no window in which another local user could
/// connect: it is bound inside a fresh directory only this user can enter,
/// given its mode there, then renamed into place. (The umask is the
/// process's: changing it around the bind raced with the control thread
/// making its own directory.)
fn bind_private(p: &std::path::Path, mode: u32) -> io::Result<UnixListener> {
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
fn send_within(fd: std::os::fd::RawFd, buf: &[u8], stall: Duration) -> io::Result<()> {
    let mut at = 0;
    let deadline = std::time::Instant::now() + stall;
    // Bounded: every round sends bytes, or waits at most until the deadline
    // and fails there.
    while at < buf.len() {
        let rest = &buf[at..];
        // SAFETY: send on a socket this connection owns, from a live buffer
        // of `rest.len()` bytes.
        let n = unsafe {
            libc::send(
                fd,
                rest.as_ptr().cast(),
                rest.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        if n > 0 {
            at += n as usize;
            continue;
        }
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::Interrupted => continue,
            io::ErrorKind::WouldBlock => {}
            _ => return Err(e),
        }
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client stopped reading its replies (--stall-timeout)",
            ));
        }
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLOUT,
            revents: 0,
        };
        let ms = left.as_millis().clamp(1, i32::MAX as u128) as i32;
        // SAFETY: one pollfd, valid for the call.
        unsafe { libc::poll(&mut p, 1, ms) };
    }
    Ok(())
}

/// A write payload is received in pieces of this much: memory is committed
/// as bytes arrive, not when the header announces them.
const PAYLOAD_PIECE: usize = 1 << 20;

fn fit(v: &mut Vec<u8>, len: usize) {
    if v.len() < len {
        v.resize(len, 0);
    } else {
        v.truncate(len);
    }
}

/// Receive a payload piece whole, within `stall` of its start: first what the
/// buffered reader holds, then straight from the socket. While the rest is
/// arriving it is polled for up to `spin` since the last bytes before the worker
/// sleeps: the client is in the middle of sending it, and on a local socket a
/// sleep and wake-up per socket buffer's worth (about 200 KiB, the client's send
/// buffer) costs more than the wait. Measured on 1 MiB writes: 4 context
/// switches per request instead of 7, +7 % against the same build with spinning
/// off. A client that sends a piece slower than `stall` is dropped: it holds
/// memory from the shared budget.
fn read_payload(
    c: &mut io::BufReader<Conn>,
    buf: &mut [u8],
    spin: Duration,
    stall: Duration,
) -> io::Result<()> {
    use std::io::BufRead;
    let have = c.buffer().len().min(buf.len());
    buf[..have].copy_from_slice(&c.buffer()[..have]);
    c.consume(have);
    let fd = c.get_ref().fd();
    let deadline = std::time::Instant::now() + stall;
    let mut at = have;
    let mut idle_since: Option<std::time::Instant> = None;
    // Bounded: every round receives bytes, fails, spins at most `spin`, or
    // waits at most until the deadline and fails there.
    while at < buf.len() {
        let rest = &mut buf[at..];
        // SAFETY: `rest` is valid for writes of `rest.len()` bytes and `fd` is the
        // connection's open socket for the duration of the call.
        let n = unsafe { libc::recv(fd, rest.as_mut_ptr().cast(), rest.len(), libc::MSG_DONTWAIT) };
        if n > 0 {
            at += n as usize;
            idle_since = None;
            continue;
        }
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::WouldBlock => {}
            io::ErrorKind::Interrupted => continue,
            _ => return Err(e),
        }
        let idle = *idle_since.get_or_insert_with(std::time::Instant::now);
        if idle.elapsed() < spin {
            std::hint::spin_loop();
            continue;
        }
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(payload_stalled(io::ErrorKind::TimedOut.into()));
        }
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN | libc::POLLRDHUP,
            revents: 0,
        };
        let ms = left.as_millis().clamp(1, i32::MAX as u128) as i32;
        // SAFETY: one pollfd, valid for the call.
        unsafe { libc::poll(&mut p, 1, ms) };
    }
    Ok(())
}

/// What `read_next` needs besides the socket.
struct Intake<'a> {
    export: &'a Export,
    free: &'a Mutex<Vec<ChargedBuf>>,
    spin: Duration,
    stall: Duration,
    /// Room for a buffer of this many bytes in all, from the shared budget
    /// (false: the connection ended while it waited).
    reserve: &'a dyn Fn(&mut ChargedBuf, usize) -> bool,
    memory: &'a Arc<MemoryBudget>,
}

/// Read one request (header and payload) from the connection.
fn read_next(c: &mut io::BufReader<Conn>, i: &Intake<'_>) -> io::Result<Next> {
    let mut hdr = [0u8; proto::REQUEST_LEN];
    match c.read_exact(&mut hdr) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(Next::Done),
        Err(e) => return Err(e),
    }
    let req = proto::parse_request(&hdr).map_err(|f| invalid(&f.to_string()))?;
    let action = proto::decide(&req, i.export);
    let data = match action {
        Action::Close(f) => return Err(invalid(&f.to_string())),
        Action::Disconnect => return Ok(Next::Done),
        Action::Write { len, .. } => {
            // The buffer grows as the payload arrives, a piece at a time, each
            // piece's memory taken from the shared budget first: a client that
            // announces 32 MiB and sends a byte now and then commits no more
            // than one piece, and is dropped when a piece takes longer than
            // the stall timeout. A reused buffer keeps its capacity.
            let mut d = i
                .free
                .lock()
                .unwrap()
                .pop()
                .unwrap_or_else(|| ChargedBuf::new(i.memory));
            d.buf.clear();
            let len = len as usize;
            // Bounded: every round receives a piece or fails.
            while d.buf.len() < len {
                let at = d.buf.len();
                let step = (len - at).min(PAYLOAD_PIECE);
                if !(i.reserve)(&mut d, at + step) {
                    return Ok(Next::Done);
                }
                d.buf.resize(at + step, 0);
                read_payload(c, &mut d.buf[at..], i.spin, i.stall)?;
            }
            Some(d)
        }
        Action::Error { discard: n, .. } => {
            discard(c, n as u64)?;
            None
        }
        _ => None,
    };
    Ok(Next::Job(Job { req, action, data }))
}

/// Worker threads the server may run beyond one per connection, shared by
/// every connection (`serve --threads`): a connection borrows one for each
/// request it serves at once past the first, and gives it back when it
/// has nothing more to do. Idle connections hold one thread each (waiting
/// for their next request) and none from here.
pub struct ThreadBudget {
    available: std::sync::atomic::AtomicUsize,
}

impl ThreadBudget {
    pub fn new(n: usize) -> Self {
        Self {
            available: std::sync::atomic::AtomicUsize::new(n),
        }
    }

    fn take(&self) -> bool {
        self.available
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok()
    }

    fn give(&self) {
        self.available.fetch_add(1, Ordering::AcqRel);
    }
}

/// One connection in transmission, shared by its workers.
struct Transmission<'a> {
    reader: Mutex<io::BufReader<Conn>>,
    /// Held while a reply is sent (the socket is `closer`'s).
    writer: Mutex<()>,
    /// The connection's second descriptor (also in `Ctx::open`).
    closer: Arc<Conn>,
    export: Export,
    cfg: &'a Config,
    stats: &'a Stats,
    cell: &'a Arc<ArrayCell>,
    threads: &'a ThreadBudget,
    memory: &'a Arc<MemoryBudget>,
    // Buffers reused across requests: write payloads, and read replies (kept
    // apart so a big read never grows, and zeroes, a small payload buffer).
    // Their bytes stay charged to the shared budget while kept.
    free: Mutex<Vec<ChargedBuf>>,
    free_replies: Mutex<Vec<ChargedBuf>>,
    done: AtomicBool,
    error: Mutex<Option<io::Error>>,
    /// Read replies in flight, bounded: a client that stops reading holds
    /// at most REPLY_BYTES_MAX (then its writes stall and it is dropped).
    room: (Mutex<u64>, std::sync::Condvar),
    /// Workers waiting for or reading the next request.
    reading: std::sync::atomic::AtomicUsize,
    /// Workers of this connection (the first one included).
    workers: std::sync::atomic::AtomicUsize,
    /// The connection went quiet: its socket goes to the idler.
    parking: AtomicBool,
    /// Borrowed workers parked with nothing to do (idle count, wake-up
    /// tickets): woken before a new one is brought in, gone after a second
    /// parked, so a busy connection keeps its threads instead of spawning
    /// one per request.
    parked: (Mutex<(usize, usize)>, std::sync::Condvar),
}

impl Transmission<'_> {
    /// Room for `cap` bytes in `b`. Short of room, this connection's own
    /// kept buffers go back first; then it waits for others to give back.
    fn reserve(&self, b: &mut ChargedBuf, cap: usize) -> bool {
        if b.buf.capacity() >= cap {
            return true;
        }
        let more = (cap - b.buf.capacity()) as u64;
        if self.memory.used() + more > self.memory.limit() {
            self.free.lock().unwrap().clear();
            self.free_replies.lock().unwrap().clear();
        }
        b.reserve_total(cap, || self.done.load(Ordering::SeqCst))
    }

    /// Keep `b` for reuse, unless others wait for memory.
    fn keep(&self, pool: &Mutex<Vec<ChargedBuf>>, b: ChargedBuf) {
        if b.buf.capacity() > 0 && !self.memory.pressed() {
            let mut f = pool.lock().unwrap();
            if f.len() < 64 {
                f.push(b);
            }
        }
    }

    /// The end of the connection wakes every worker: one blocked reading the
    /// next request, others waiting for reply room.
    fn finish(&self, e: Option<io::Error>) {
        self.done.store(true, Ordering::SeqCst);
        if let Some(e) = e {
            self.error.lock().unwrap().get_or_insert(e);
        }
        self.closer.shutdown(std::net::Shutdown::Both);
        self.room.1.notify_all();
        self.parked.1.notify_all();
    }
}

/// One worker: takes the read half, reads one request, lets go, executes it
/// and writes its reply under the write lock — no hand-off between a reader
/// and the workers (nbdkit's way). When it takes a request and no other
/// worker is left waiting for the next one, it brings one in (up to
/// `--workers` for the connection, while the shared budget allows); a
/// borrowed worker leaves when it finds another one already waiting.
fn worker<'scope, 'env>(
    t: &'env Transmission<'env>,
    s: &'scope std::thread::Scope<'scope, 'env>,
    borrowed: bool,
) {
    let leave = || {
        t.workers.fetch_sub(1, Ordering::SeqCst);
        if borrowed {
            t.threads.give();
        }
    };
    // Bounded by the client: every round serves a request or ends.
    loop {
        if t.done.load(Ordering::SeqCst) {
            return leave();
        }
        // Alone, nothing in flight, nothing buffered, and a second without
        // a request: the connection is parked with the idler and this
        // thread ends (a quiet client holds no thread).
        if !borrowed && t.workers.load(Ordering::SeqCst) == 1 {
            let empty = t.reader.lock().unwrap().buffer().is_empty();
            if empty && !readable_within(t.closer.fd(), IDLE_PARK) {
                t.parking.store(true, Ordering::SeqCst);
                return leave();
            }
        }
        t.reading.fetch_add(1, Ordering::SeqCst);
        let job = {
            let mut r = t.reader.lock().unwrap();
            if t.done.load(Ordering::SeqCst) {
                t.reading.fetch_sub(1, Ordering::SeqCst);
                return leave();
            }
            // The end is marked before the read lock is let go, so no other
            // worker starts a read on a finished connection.
            let reserve = |b: &mut ChargedBuf, cap: usize| t.reserve(b, cap);
            let intake = Intake {
                export: &t.export,
                free: &t.free,
                spin: t.cfg.payload_spin,
                stall: t.cfg.stall_timeout,
                reserve: &reserve,
                memory: t.memory,
            };
            let next = read_next(&mut r, &intake);
            t.reading.fetch_sub(1, Ordering::SeqCst);
            match next {
                Ok(Next::Job(j)) => j,
                Ok(Next::Done) => {
                    t.done.store(true, Ordering::SeqCst);
                    t.parked.1.notify_all();
                    return leave();
                }
                Err(e) => {
                    t.done.store(true, Ordering::SeqCst);
                    drop(r);
                    t.finish(Some(e));
                    return leave();
                }
            }
        };
        // Nobody left to read the next request: wake a parked worker, or
        // bring in one.
        let woke = t.reading.load(Ordering::SeqCst) < 2 && {
            let mut p = t.parked.0.lock().unwrap();
            if p.0 > p.1 {
                p.1 += 1;
                t.parked.1.notify_one();
                true
            } else {
                false
            }
        };
        if !woke
            && t.reading.load(Ordering::SeqCst) < 2
            && t.workers.load(Ordering::SeqCst) < t.cfg.workers.max(1)
            && t.threads.take()
        {
            t.workers.fetch_add(1, Ordering::SeqCst);
            let spawned = std::thread::Builder::new()
                .name("nbd-worker".into())
                .spawn_scoped(s, move || worker(t, s, true));
            if spawned.is_err() {
                // No thread: this connection goes on with the ones it has.
                t.workers.fetch_sub(1, Ordering::SeqCst);
                t.threads.give();
            }
        }
        let room = match job.action {
            Action::Read { len, .. } => (len as u64).min(REPLY_BYTES_MAX),
            _ => 0,
        };
        if room > 0 {
            let mut b = t.room.0.lock().unwrap();
            // Bounded by the connection's end: finish() wakes it.
            while *b < room {
                if t.done.load(Ordering::SeqCst) {
                    return leave();
                }
                b = t
                    .room
                    .1
                    .wait_timeout(b, Duration::from_millis(100))
                    .unwrap()
                    .0;
            }
            *b -= room;
        }
        // Only reads build their reply in a big buffer, its room taken from
        // the shared budget first; other replies are 16 bytes and must not
        // take (and then drop) a payload buffer.
        let mut spare = match job.action {
            Action::Read { len, .. } => {
                let mut b = t
                    .free_replies
                    .lock()
                    .unwrap()
                    .pop()
                    .unwrap_or_else(|| ChargedBuf::new(t.memory));
                if !t.reserve(&mut b, REPLY_ROOM + len as usize) {
                    if room > 0 {
                        *t.room.0.lock().unwrap() += room;
                        t.room.1.notify_all();
                    }
                    return leave();
                }
                Some(b)
            }
            _ => None,
        };
        let out = spare.as_mut().map(|b| std::mem::take(&mut b.buf));
        // Held for the request: a change of members waits for it.
        let (reply, start, failed) =
            execute(&t.cell.get(), &t.export, &job, out.unwrap_or_default());
        t.stats.requests.fetch_add(1, Ordering::Relaxed);
        if failed {
            t.stats.errors.fetch_add(1, Ordering::Relaxed);
        }
        let sent = {
            let _one_at_a_time = t.writer.lock().unwrap();
            send_within(t.closer.fd(), &reply[start..], t.cfg.stall_timeout)
        };
        if room > 0 {
            *t.room.0.lock().unwrap() += room;
            t.room.1.notify_all();
        }
        if let Err(e) = sent {
            // Gone, or stalled past the stall timeout: dropped.
            t.finish(Some(e));
            return leave();
        }
        if let Some(mut b) = spare {
            b.buf = reply;
            b.settle();
            t.keep(&t.free_replies, b);
        }
        if let Some(b) = job.data {
            t.keep(&t.free, b);
        }
        // A borrowed worker with two others already waiting for the next
        // request parks (one waiting behind the reader hands over at once
        // when the request comes); parked a second with nothing to do, it
        // goes home.
        if borrowed && t.reading.load(Ordering::SeqCst) >= 2 {
            let mut p = t.parked.0.lock().unwrap();
            p.0 += 1;
            let (mut p, _) = t
                .parked
                .1
                .wait_timeout_while(p, Duration::from_secs(1), |p| {
                    p.1 == 0 && !t.done.load(Ordering::SeqCst)
                })
                .unwrap();
            p.0 -= 1;
            if p.1 > 0 {
                p.1 -= 1;
            } else {
                return leave();
            }
        }
    }
}

/// Transmission phase: workers as `worker` says, the first one this thread.
fn transmission(c: Conn, ctx: &Ctx, export: Export, id: u64) -> io::Result<Option<(Conn, Export)>> {
    // Its second descriptor, taken at accept: a connection never opens
    // another, so it can never be dropped for want of one.
    let Some(closer) = ctx.open.lock().unwrap().get(&id).cloned() else {
        return Ok(None);
    };
    let t = Transmission {
        writer: Mutex::new(()),
        closer,
        // Buffered: with many requests in flight one read() brings in several
        // small requests (header and payload) instead of two system calls
        // each; payloads larger than the buffer are read straight into their
        // own buffer.
        reader: Mutex::new(io::BufReader::with_capacity(16 << 10, c)),
        export,
        cfg: &ctx.cfg,
        stats: &ctx.stats,
        cell: &ctx.cell,
        threads: &ctx.budget,
        memory: &ctx.memory,
        free: Mutex::new(Vec::new()),
        free_replies: Mutex::new(Vec::new()),
        done: AtomicBool::new(false),
        error: Mutex::new(None),
        room: (Mutex::new(REPLY_BYTES_MAX), std::sync::Condvar::new()),
        reading: std::sync::atomic::AtomicUsize::new(0),
        workers: std::sync::atomic::AtomicUsize::new(1),
        parked: (Mutex::new((0, 0)), std::sync::Condvar::new()),
        parking: AtomicBool::new(false),
    };
    std::thread::scope(|s| worker(&t, s, false));
    if let Some(e) = t.error.into_inner().unwrap() {
        return Err(e);
    }
    if t.parking.load(Ordering::SeqCst) {
        let conn = t.reader.into_inner().unwrap().into_inner();
        return Ok(Some((conn, t.export)));
    }
    Ok(None)
}

/// Every engine failure reaching a client is an I/O error: ranges were checked
/// before, so what is left is lost data or failed members.
fn errno_of(_e: &hetraid_engine::EngineError) -> u32 {
    proto::EIO
}

/// Run one request against the array; returns the reply bytes (reads are built in
/// `out`) and whether it reports an error. With structured replies negotiated,
/// reads and block status answer in structured chunks; other commands keep simple
/// replies, as the protocol allows.
fn execute(array: &Array, export: &Export, job: &Job, mut out: Vec<u8>) -> (Vec<u8>, usize, bool) {
    let handle = job.req.handle;
    let structured =
        export.structured && matches!(job.req.typ, proto::CMD_READ | proto::CMD_BLOCK_STATUS);
    let error = |errno: u32| {
        let b = if structured {
            proto::structured_error(errno, handle)
        } else {
            proto::simple_reply(errno, handle).to_vec()
        };
        (b, 0, true)
    };
    let done = |r: Result<(), hetraid_engine::EngineError>| match r {
        Ok(()) => (proto::simple_reply(0, handle).to_vec(), 0, false),
        Err(e) => {
            tracing::info!("serve: request failed: {e}");
            error(errno_of(&e))
        }
    };
    match job.action {
        Action::Read { offset, len } => {
            // One chunk: header (structured: plus the offset), then the data.
            let head = if structured {
                let mut h = proto::structured_header(
                    proto::REPLY_FLAG_DONE,
                    proto::REPLY_TYPE_OFFSET_DATA,
                    handle,
                    8 + len,
                )
                .to_vec();
                h.extend_from_slice(&offset.to_be_bytes());
                h
            } else {
                proto::simple_reply(0, handle).to_vec()
            };
            // The data lands 4 KiB-aligned (members opened with O_DIRECT read
            // straight into it, and copies run aligned); the header sits just
            // before it, and the reply is sent from `lead`.
            const ALIGN: usize = 4096;
            fit(&mut out, ALIGN + head.len() + len as usize);
            let lead = (ALIGN - (out.as_ptr() as usize + head.len()) % ALIGN) % ALIGN;
            let data = lead + head.len();
            out[lead..data].copy_from_slice(&head);
            out.truncate(data + len as usize);
            match array.read(offset, &mut out[data..]) {
                Ok(()) => (out, lead, false),
                Err(e) => {
                    tracing::info!("serve: read failed: {e}");
                    error(errno_of(&e))
                }
            }
        }
        Action::BlockStatus { offset, len, one } => match array.allocation(offset, len as u64) {
            Ok(runs) => (proto::block_status_reply(handle, len, &runs, one), 0, false),
            Err(e) => {
                tracing::info!("serve: block status failed: {e}");
                error(errno_of(&e))
            }
        },
        Action::Write { offset, fua, .. } => {
            let data = job.data.as_ref().map_or(&[][..], |d| &d.buf[..]);
            done(
                array
                    .write(offset, data)
                    .and_then(|_| if fua { array.flush() } else { Ok(()) }),
            )
        }
        Action::WriteZeroes {
            offset,
            len,
            fua,
            may_hole,
        } => done(
            array
                .write_zeroes(offset, len as u64, may_hole)
                .and_then(|_| if fua { array.flush() } else { Ok(()) }),
        ),
        Action::Flush => done(array.flush()),
        // Whole stripes are discarded on the members; the rest is kept, as
        // the protocol allows.
        Action::Trim { offset, len, fua } => {
            done(array.trim(offset, len as u64).map(|_| ()).and_then(|_| {
                if fua {
                    array.flush()
                } else {
                    Ok(())
                }
            }))
        }
        Action::Error { errno, .. } => error(errno),
        Action::Disconnect | Action::Close(_) => error(proto::ESHUTDOWN),
    }
}
