//! The NBD transport: listeners (Unix, TCP), the fixed-newstyle handshake, and the
//! transmission phase with requests served concurrently and answered out of order.

use crate::memory::{ChargedBuf, MemoryBudget};
use crate::proto::{self, Action, Export, Request};
use hetraid_engine::{Array, ArrayCell};
use rustix::event::{PollFd, PollFlags};
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod handshake;
mod idler;
mod socket;
mod transmission;

use handshake::*;
use idler::*;
pub(crate) use socket::bind_private;
pub use socket::remove_stale_socket;
use socket::*;
use transmission::*;

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

/// A reply that makes no progress for this long (the client stopped
/// reading) ends the connection.
pub const REPLY_STALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Bytes of read replies a connection may have in flight: a client that
/// stops reading holds at most this much of the server's memory.
pub const REPLY_BYTES_MAX: u64 = 64 << 20;
/// After a stop, clients get this long to finish before their connections
/// are closed.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

impl Conn {
    fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        match self {
            Self::Unix(s) => s.as_fd(),
            Self::Tcp(s) => s.as_fd(),
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
    /// Told once the socket is bound and connections are accepted (`serve`
    /// tells systemd READY=1).
    pub ready: Option<std::sync::mpsc::SyncSender<()>>,
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
            ready: None,
        }
    }
}

/// A server's TLS configuration.
pub type TlsConfig = Arc<rustls::ServerConfig>;

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
fn readable_within(fd: std::os::fd::BorrowedFd<'_>, wait: Duration) -> bool {
    // An error is taken as readable: the read that follows reports it.
    poll_within(fd, PollFlags::IN | PollFlags::RDHUP, wait) != Ok(0)
}

/// `poll` one descriptor for `events` for at most `wait` (at least 1 ms):
/// how many are ready (0 or 1).
fn poll_within(
    fd: std::os::fd::BorrowedFd<'_>,
    events: PollFlags,
    wait: Duration,
) -> rustix::io::Result<usize> {
    let mut p = [PollFd::new(&fd, events)];
    let t = rustix::event::Timespec::try_from(wait.max(Duration::from_millis(1))).unwrap_or(
        rustix::event::Timespec {
            tv_sec: i64::MAX,
            tv_nsec: 0,
        },
    );
    rustix::event::poll(&mut p, Some(&t))
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
    if let Some(r) = &cfg.ready {
        let _ = r.try_send(());
    }
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
            Ok(conn) => admit(&ctx, conn, &mut next_id),
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
    shut_down(&ctx, listen, &idler_stop, idler_thread);
    Ok(())
}

/// A client accepted: refused with the reason when the server is at a
/// limit (handshakes, descriptors, --max-connections), else given a thread
/// of its own for its handshake and requests.
fn admit(ctx: &Arc<Ctx>, conn: Conn, next_id: &mut u64) {
    let nonblocking = match &conn {
        Conn::Unix(s) => s.set_nonblocking(false),
        Conn::Tcp(s) => s.set_nonblocking(false),
    };
    if nonblocking.is_err() {
        return;
    }
    let who = conn.peer();
    // Handshakes are counted apart: they end at their deadline,
    // and never take an established client's slot.
    let handshaking = ctx.handshaking.load(Ordering::Acquire);
    let total = ctx.open.lock().unwrap().len();
    let established = total.saturating_sub(handshaking);
    if handshaking >= HANDSHAKES_MAX {
        ctx.stats.refused.fetch_add(1, Ordering::Relaxed);
        tracing::info!(
            "serve: {who} refused: {HANDSHAKES_MAX} clients are in their handshake already"
        );
        conn.shutdown(std::net::Shutdown::Both);
        return;
    }
    // Over a limit: the client is told why (every option it
    // sends is answered NBD_REP_ERR_POLICY with the reason),
    // logged, and the server goes on.
    let over = if (total + 1) * FDS_PER_CONNECTION > ctx.fds_max {
        Some(format!(
            "the server has no descriptors left for another client ({total} connected; raise its open-file limit, ulimit -n)"
        ))
    } else if established >= ctx.cfg.max_connections {
        Some(format!(
            "{} clients are connected already (--max-connections)",
            ctx.cfg.max_connections
        ))
    } else {
        None
    };
    if let Some(why) = over {
        ctx.stats.refused.fetch_add(1, Ordering::Relaxed);
        tracing::info!("serve: {who} refused: {why}");
        refuse(ctx, conn, why);
        return;
    }
    ctx.handshaking.fetch_add(1, Ordering::AcqRel);
    if let Conn::Unix(s) = &conn {
        grow_send_buffer(s);
    }
    *next_id += 1;
    let id = *next_id;
    match conn.try_clone() {
        Ok(c) => {
            ctx.open.lock().unwrap().insert(id, Arc::new(c));
        }
        // No second descriptor for it: the client is lost, and its
        // handshake slot with it (it was once kept, counted forever).
        Err(_) => {
            ctx.handshaking.fetch_sub(1, Ordering::AcqRel);
            return;
        }
    }
    ctx.stats.connections.fetch_add(1, Ordering::Relaxed);
    if matches!(conn, Conn::Tcp(_)) {
        tracing::info!("serve: connection from {who}");
    }
    let ctx2 = ctx.clone();
    let spawned = std::thread::Builder::new()
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
            ctx.stats.refused.fetch_add(1, Ordering::Relaxed);
            tracing::info!("serve: {who} refused: no thread for it ({e})");
            if let Some(c) = ctx.open.lock().unwrap().remove(&id) {
                c.shutdown(std::net::Shutdown::Both);
            }
        }
    }
}

/// Stop serving: no new requests are read, in-flight ones are answered, a
/// client that does not take its replies is cut after a grace period; the
/// idler and every connection thread end; our own socket file goes.
fn shut_down(
    ctx: &Arc<Ctx>,
    listen: &Listen,
    idler_stop: &Arc<crate::Stop>,
    idler_thread: std::thread::JoinHandle<()>,
) {
    // Stop reading new requests; in-flight ones finish and are answered.
    for c in ctx.open.lock().unwrap().values() {
        c.shutdown(std::net::Shutdown::Read);
    }
    // Clients that do not take their replies get a grace period, then
    // their connections are closed (the array is still closed clean).
    // (Parked connections wake up to their end of file and finish too.)
    let t = std::time::Instant::now();
    let busy = || {
        !ctx.open.lock().unwrap().is_empty()
            || ctx.running.lock().unwrap().iter().any(|t| !t.is_finished())
    };
    while busy() && t.elapsed() < SHUTDOWN_GRACE {
        std::thread::sleep(Duration::from_millis(20));
    }
    for c in ctx.open.lock().unwrap().values() {
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
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .map_or(1 << 20, |c| c.min(1 << 20) as usize);
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

fn invalid(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.to_string())
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
