//! Transmission: workers that read a request, run it against the array and
//! send its reply; payloads received in budgeted pieces.

#[allow(unused_imports)]
use super::*;

pub(super) struct Job {
    pub(super) req: Request,
    pub(super) action: Action,
    /// A write's payload.
    pub(super) data: Option<ChargedBuf>,
}

/// A read reply's bytes beyond its data: alignment room and the header.
pub(super) const REPLY_ROOM: usize = 4096 + 32;

/// A payload read that timed out says why the client was dropped.
pub(super) fn payload_stalled(e: io::Error) -> io::Error {
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
pub(super) enum Next {
    Job(Job),
    /// Disconnect requested or the client went away: finish and close.
    Done,
}

/// A write payload is received in pieces of this much: memory is committed
/// as bytes arrive, not when the header announces them.
pub(super) const PAYLOAD_PIECE: usize = 1 << 20;

/// Make `v` exactly `len` bytes long, zeroing only what it did not hold before.
pub(super) fn fit(v: &mut Vec<u8>, len: usize) {
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
pub(super) fn read_payload(
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
    // The stall clock starts at the first wait (a payload already in the
    // buffer or the socket reads no clock at all).
    let mut deadline: Option<std::time::Instant> = None;
    let mut at = have;
    let mut idle_since: Option<std::time::Instant> = None;
    // Bounded: every round receives bytes, fails, spins at most `spin`, or
    // waits at most until the deadline and fails there.
    while at < buf.len() {
        let rest = &mut buf[at..];
        match rustix::net::recv(fd, rest, rustix::net::RecvFlags::DONTWAIT) {
            Ok((0, _)) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok((n, _)) => {
                at += n;
                idle_since = None;
                continue;
            }
            Err(rustix::io::Errno::AGAIN) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
        let idle = *idle_since.get_or_insert_with(std::time::Instant::now);
        if idle.elapsed() < spin {
            std::hint::spin_loop();
            continue;
        }
        let now = std::time::Instant::now();
        let left = deadline
            .get_or_insert(now + stall)
            .saturating_duration_since(now);
        if left.is_zero() {
            return Err(payload_stalled(io::ErrorKind::TimedOut.into()));
        }
        let _ = super::poll_within(fd, PollFlags::IN | PollFlags::RDHUP, left);
    }
    Ok(())
}

/// What `read_next` needs besides the socket.
pub(super) struct Intake<'a> {
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
pub(super) fn read_next(c: &mut io::BufReader<Conn>, i: &Intake<'_>) -> io::Result<Next> {
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

/// One connection in transmission, shared by its workers.
pub(super) struct Transmission<'a> {
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
    /// How long small reads and writes took to execute lately (a moving
    /// average, ns): while they are quick, the worker that read one runs it
    /// without bringing in another to read the next (see [`hands_off`]).
    small_ns: AtomicU64,
    /// Workers executing a request now.
    executing: std::sync::atomic::AtomicUsize,
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

    /// A small request started at `started` is done: into the moving
    /// average (races between workers lose a sample at worst).
    fn note_small(&self, started: std::time::Instant) {
        let ns = started.elapsed().as_nanos().min(u64::MAX as u128) as u64;
        let old = self.small_ns.load(Ordering::Relaxed);
        self.small_ns.store(averaged(old, ns), Ordering::Relaxed);
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
pub(super) fn worker<'scope, 'env>(
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
    // Replies held back, and the read lock kept for the request already
    // buffered behind them (see [`HeldReplies`]).
    let mut held = HeldReplies::default();
    let mut carried: Option<std::sync::MutexGuard<'_, io::BufReader<Conn>>> = None;
    // Bounded by the client: every round serves a request or ends.
    loop {
        if t.done.load(Ordering::SeqCst) {
            // Replies of requests served go out if the socket still takes them.
            drop(carried.take());
            let _ = held.send(t);
            return leave();
        }
        // About to wait (for the read lock, or the client): what is held
        // goes out first.
        if carried.is_none() {
            if let Err(e) = held.send(t) {
                t.finish(Some(e));
                return leave();
            }
        }
        // Alone, nothing in flight, nothing buffered, and a second without
        // a request: the connection is parked with the idler and this
        // thread ends (a quiet client holds no thread).
        if carried.is_none() && !borrowed && t.workers.load(Ordering::SeqCst) == 1 {
            let empty = t.reader.lock().unwrap().buffer().is_empty();
            if empty && !readable_within(t.closer.fd(), IDLE_PARK) {
                t.parking.store(true, Ordering::SeqCst);
                return leave();
            }
        }
        t.reading.fetch_add(1, Ordering::SeqCst);
        let job = {
            let mut r = match carried.take() {
                Some(r) => r,
                None => t.reader.lock().unwrap(),
            };
            if t.done.load(Ordering::SeqCst) {
                t.reading.fetch_sub(1, Ordering::SeqCst);
                return leave();
            }
            // The end is marked before the read lock is let go, so no other
            // worker starts a read on a finished connection.
            match next_request(t, &mut r) {
                Ok(Next::Job(j)) => {
                    let queued = queued_behind(t, &r, &j);
                    (j, queued)
                }
                Ok(Next::Done) => {
                    t.done.store(true, Ordering::SeqCst);
                    t.parked.1.notify_all();
                    drop(r);
                    if let Err(e) = held.send(t) {
                        t.finish(Some(e));
                    }
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
        // bring in one — unless this request is small and they run quick,
        // and no other waits for a free CPU.
        let (job, queued) = job;
        let small = is_small(&job.action);
        if !small || hands_off(t) || queued {
            bring_in_worker(t, s);
        }
        let started = std::time::Instant::now();
        let room = match job.action {
            Action::Read { len, .. } => (len as u64).min(REPLY_BYTES_MAX),
            _ => 0,
        };
        if room > 0 && !take_room(t, room) {
            return leave();
        }
        let Ok(mut spare) = reply_buffer(t, &job.action) else {
            give_room(t, room);
            return leave();
        };
        let out = spare.as_mut().map(|b| std::mem::take(&mut b.buf));
        // Held for the request: a change of members waits for it.
        t.executing.fetch_add(1, Ordering::SeqCst);
        let (reply, start, failed) =
            execute(&t.cell.get(), &t.export, &job, out.unwrap_or_default());
        t.executing.fetch_sub(1, Ordering::SeqCst);
        if small {
            t.note_small(started);
        }
        t.stats.requests.fetch_add(1, Ordering::Relaxed);
        if failed {
            t.stats.errors.fetch_add(1, Ordering::Relaxed);
        }
        carried = held.hold_for_next(t, small && spare.is_none());
        let sent = if spare.is_some() {
            // A read's reply (its data) goes as it is, after what is held.
            held.send(t).and_then(|()| {
                let _one_at_a_time = t.writer.lock().unwrap();
                send_within(t.closer.fd(), &reply[start..], t.cfg.stall_timeout)
            })
        } else {
            held.bytes.extend_from_slice(&reply[start..]);
            held.count += 1;
            match carried {
                Some(_) => Ok(()),
                None => held.send(t),
            }
        };
        give_room(t, room);
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
        // A borrowed worker not needed parks; parked a second with nothing
        // to do, it goes home. (Not while it holds replies and the read
        // lock: it serves the buffered request first.)
        if carried.is_none() && borrowed && not_needed(t) && !park(t) {
            return leave();
        }
    }
}

/// The next request, read under the read lock `r` (this worker counted
/// among those reading until it is read).
fn next_request(t: &Transmission<'_>, r: &mut io::BufReader<Conn>) -> io::Result<Next> {
    let reserve = |b: &mut ChargedBuf, cap: usize| t.reserve(b, cap);
    let intake = Intake {
        export: &t.export,
        free: &t.free,
        spin: t.cfg.payload_spin,
        stall: t.cfg.stall_timeout,
        reserve: &reserve,
        memory: t.memory,
    };
    let next = read_next(r, &intake);
    t.reading.fetch_sub(1, Ordering::SeqCst);
    next
}

/// The buffer a read builds its reply in (charged to the shared budget);
/// None for other requests, whose replies are 16 bytes and must not take
/// (and then drop) a payload buffer. Err: the connection ended while it
/// waited for memory.
fn reply_buffer(t: &Transmission<'_>, action: &Action) -> Result<Option<ChargedBuf>, ()> {
    let Action::Read { len, .. } = *action else {
        return Ok(None);
    };
    let mut b = t
        .free_replies
        .lock()
        .unwrap()
        .pop()
        .unwrap_or_else(|| ChargedBuf::new(t.memory));
    match t.reserve(&mut b, REPLY_ROOM + len as usize) {
        true => Ok(Some(b)),
        false => Err(()),
    }
}

/// Read-reply room taken by [`take_room`] given back.
fn give_room(t: &Transmission<'_>, room: u64) {
    if room > 0 {
        *t.room.0.lock().unwrap() += room;
        t.room.1.notify_all();
    }
}

/// Replies held back: while the next request is already in the read
/// buffer (the client keeps several in flight), a worker on quick small
/// requests keeps their short replies and the read lock, and sends them
/// together when the buffer runs dry, before it waits for anything, or
/// at [`HELD_REPLIES_MAX`]. A client that waits for replies is woken once
/// per batch instead of once per reply: on memory-speed RAID5 each 4 KiB
/// write's reply woke fio, a third of the server's CPU per write went to
/// the send. Nothing waits on a held reply but the requests already
/// buffered, served by the worker holding it.
#[derive(Default)]
struct HeldReplies {
    bytes: Vec<u8>,
    count: usize,
}

impl HeldReplies {
    /// A small write's reply while the next request is already buffered
    /// and small requests run quick: held, and this worker reads that
    /// request with the read lock it checked under (returned).
    fn hold_for_next<'a>(
        &self,
        t: &'a Transmission<'_>,
        small_write: bool,
    ) -> Option<std::sync::MutexGuard<'a, io::BufReader<Conn>>> {
        if !small_write || self.count + 1 >= HELD_REPLIES_MAX || hands_off(t) {
            return None;
        }
        t.reader.try_lock().ok().filter(|r| !r.buffer().is_empty())
    }

    /// Send what is held (nothing to do when empty).
    fn send(&mut self, t: &Transmission<'_>) -> io::Result<()> {
        if self.count == 0 {
            return Ok(());
        }
        let r = {
            let _one_at_a_time = t.writer.lock().unwrap();
            send_within(t.closer.fd(), &self.bytes, t.cfg.stall_timeout)
        };
        self.bytes.clear();
        self.count = 0;
        r
    }
}

/// Most replies held back at once (the wait a held reply can see: this
/// many quick requests).
const HELD_REPLIES_MAX: usize = 8;

/// Another request already waits behind `j` in the read buffer (a client
/// that sends faster than one worker serves) while a CPU is free: worth a
/// second worker even when small requests run quick. (Asking the socket as
/// well brought one in for nearly every request through a filesystem, and
/// the hand-offs cost more than the second CPU gave.)
fn queued_behind(t: &Transmission<'_>, r: &io::BufReader<Conn>, j: &Job) -> bool {
    is_small(&j.action)
        && !hands_off(t)
        && !r.buffer().is_empty()
        && cpu_for_another(t.executing.load(Ordering::SeqCst), cpus())
}

/// Whether a CPU is left for one more worker on quick small requests with
/// `executing` running, one CPU kept for the client and the kernel's side
/// of the socket. On two CPUs that is never: the second worker's wake-up
/// and park cost more than it served (fio's 4 KiB writes at QD 16 on a
/// one-member array: 0.78x nbdkit's IOPS at 6.1 us per write with it,
/// 0.83x at 5.5 us without; ext4 on RAID5, 0.87x and 0.95x).
fn cpu_for_another(executing: usize, cpus: usize) -> bool {
    executing + 1 < cpus.saturating_sub(1)
}

/// A borrowed worker is not needed with two others already waiting for the
/// next request — or one, while small requests run quick (it would only
/// take turns on the read lock).
fn not_needed(t: &Transmission<'_>) -> bool {
    let waiting = t.reading.load(Ordering::SeqCst);
    waiting >= 2 || (waiting >= 1 && !hands_off(t))
}

/// Requests that run in the reading worker's own time when small ones run
/// quick: reads and writes of at most 64 KiB.
fn is_small(a: &Action) -> bool {
    match *a {
        Action::Read { len, .. } | Action::Write { len, .. } => len <= SMALL_REQUEST_BYTES_MAX,
        _ => false,
    }
}

/// Whether a worker that took a small request brings in another to read
/// the next one meanwhile. Each hand-off wakes a thread twice (to read,
/// and the one blocked behind it on the read lock): on memory-speed members
/// that was most of a 4 KiB write's server CPU, and with requests that take
/// a few microseconds one worker serves the queue faster than threads
/// taking turns. Requests that take longer (disks, a busy array) are
/// overlapped as before: a flush, a trim and large requests always are.
fn hands_off(t: &Transmission<'_>) -> bool {
    hands_off_at(t.small_ns.load(Ordering::Relaxed))
}

/// The policy of [`hands_off`] on the average time of small requests.
fn hands_off_at(small_ns: u64) -> bool {
    small_ns > SMALL_REQUEST_NS_INLINE_MAX
}

/// The moving average of small requests' time after one took `ns`: over
/// about eight requests, so a slow spell (a bitmap page written and
/// flushed) hands off at once and a few quick ones bring it back.
fn averaged(old: u64, ns: u64) -> u64 {
    old - old / 8 + ns / 8
}

/// CPUs this process may run on: quick small requests keep at most that
/// many workers executing (more only take turns).
fn cpus() -> usize {
    static CPUS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CPUS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// See [`hands_off`].
const SMALL_REQUEST_BYTES_MAX: u32 = 64 << 10;
const SMALL_REQUEST_NS_INLINE_MAX: u64 = 50_000;

/// Wake a parked worker of the connection to read the next request, or
/// bring in one more (up to `--workers`, while the shared budget allows),
/// when nobody else is waiting to read it.
fn bring_in_worker<'scope, 'env>(
    t: &'env Transmission<'env>,
    s: &'scope std::thread::Scope<'scope, 'env>,
) {
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
}

/// Take `room` bytes of the connection's reply room, waiting for replies
/// in flight to go out; false when the connection ended meanwhile.
fn take_room(t: &Transmission<'_>, room: u64) -> bool {
    let mut b = t.room.0.lock().unwrap();
    // Bounded by the connection's end: finish() wakes it.
    while *b < room {
        if t.done.load(Ordering::SeqCst) {
            return false;
        }
        b = t
            .room
            .1
            .wait_timeout(b, Duration::from_millis(100))
            .unwrap()
            .0;
    }
    *b -= room;
    true
}

/// A borrowed worker parks (one waiting behind the reader hands over at
/// once when the request comes); true when it is woken to go on, false
/// when it waited a second with nothing to do and goes home.
fn park(t: &Transmission<'_>) -> bool {
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
        return false;
    }
    true
}

/// Transmission phase: workers as `worker` says, the first one this thread.
pub(super) fn transmission(
    c: Conn,
    ctx: &Ctx,
    export: Export,
    id: u64,
) -> io::Result<Option<(Conn, Export)>> {
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
        small_ns: AtomicU64::new(0),
        executing: std::sync::atomic::AtomicUsize::new(0),
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
pub(super) fn errno_of(_e: &hetraid_engine::EngineError) -> u32 {
    proto::EIO
}

/// Run one request against the array; returns the reply bytes (reads are built in
/// `out`) and whether it reports an error. With structured replies negotiated,
/// reads and block status answer in structured chunks; other commands keep simple
/// replies, as the protocol allows.
pub(super) fn execute(
    array: &Array,
    export: &Export,
    job: &Job,
    mut out: Vec<u8>,
) -> (Vec<u8>, usize, bool) {
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
            let buf = &mut out[data..];
            let read = match array.user_io() {
                Some(io) => io.timed(false, len as u64, || array.read(offset, buf)),
                None => array.read(offset, buf),
            };
            match read {
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
            let write = || {
                array
                    .write(offset, data)
                    .and_then(|_| if fua { array.flush() } else { Ok(()) })
            };
            done(match array.user_io() {
                Some(io) => io.timed(true, data.len() as u64, write),
                None => write(),
            })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_requests_hand_off_only_while_they_run_slow() {
        let small = |len| {
            is_small(&Action::Write {
                offset: 0,
                len,
                fua: false,
            })
        };
        assert!(small(4096) && small(64 << 10) && !small((64 << 10) + 1));
        assert!(!is_small(&Action::Flush));
        // Quick 4 KiB writes (about 10 us each): no hand-off.
        let mut avg = 0;
        for _ in 0..100 {
            avg = averaged(avg, 10_000);
        }
        assert!(!hands_off_at(avg), "{avg}");
        // One slow one (a 5 ms flush of a bitmap page): hand off at once,
        // and back within a few dozen quick ones.
        avg = averaged(avg, 5_000_000);
        assert!(hands_off_at(avg), "{avg}");
        let back = (1..100)
            .find(|_| {
                avg = averaged(avg, 10_000);
                !hands_off_at(avg)
            })
            .unwrap();
        assert!((10..40).contains(&back), "{back}");
        // A disk (5 ms a request) always hands off.
        let mut disk = 0;
        for _ in 0..10 {
            disk = averaged(disk, 5_000_000);
        }
        assert!(hands_off_at(disk));
    }

    #[test]
    fn a_second_worker_takes_a_cpu_only_when_one_is_left_for_the_client() {
        // One or two CPUs: the worker that read a request runs it alone.
        for cpus in [1, 2] {
            assert!(!cpu_for_another(0, cpus), "{cpus} CPUs");
        }
        // Four: up to three workers on quick requests, one CPU left over.
        assert!(cpu_for_another(0, 4) && cpu_for_another(1, 4));
        assert!(!cpu_for_another(2, 4) && !cpu_for_another(3, 4));
    }
}
