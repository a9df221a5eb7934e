//! The handshake: the fixed-newstyle greeting and option haggling (plain or
//! over TLS), its deadline and bounds, refusals with a reason, and TLS
//! transmission (one request at a time).

#[allow(unused_imports)]
use super::*;

/// A connection in its handshake: every read waits at most until one
/// deadline for the whole handshake. (A read timeout alone restarts with
/// every byte: 16 clients sending a byte every 5 s held every slot.)
pub(super) struct Handshaking {
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
pub(super) struct HandshakeSlot<'a>(pub(super) Option<&'a std::sync::atomic::AtomicUsize>);

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
/// Option payload bytes read and thrown away to answer ERR_TOO_BIG; a
/// larger one closes the connection.
pub(super) const OPTION_DISCARD_MAX: u64 = 32 << 20;
pub(super) fn read_u32<R: Read>(c: &mut R) -> io::Result<u32> {
    let mut b = [0u8; 4];
    c.read_exact(&mut b)?;
    Ok(u32::from_be_bytes(b))
}

pub(super) fn discard(c: &mut impl Read, mut n: u64) -> io::Result<()> {
    let mut b = [0u8; 8192];
    while n > 0 {
        let k = n.min(b.len() as u64) as usize;
        c.read_exact(&mut b[..k])?;
        n -= k as u64;
    }
    Ok(())
}

/// What option haggling ended with.
pub(super) enum Outcome {
    /// Transmission, with the export as negotiated.
    Go,
    /// The client asked for TLS and it was granted: haggle again over it.
    StartTls,
    /// The client went away politely.
    Abort,
}

/// What a connection is offered, and what it negotiated so far.
pub(super) struct Offer {
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
pub(super) fn connection(
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

/// One option's header: (option, payload length); a bad magic closes.
fn read_option_header<S: Read>(c: &mut S) -> io::Result<(u32, u32)> {
    let mut h = [0u8; 16];
    c.read_exact(&mut h)?;
    if u64::from_be_bytes(h[0..8].try_into().unwrap()) != proto::IHAVEOPT {
        return Err(invalid("bad option magic"));
    }
    Ok((
        u32::from_be_bytes(h[8..12].try_into().unwrap()),
        u32::from_be_bytes(h[12..16].try_into().unwrap()),
    ))
}

/// A refused client: every option is answered NBD_REP_ERR_POLICY with the
/// reason (libnbd and qemu print it), ABORT is acknowledged, EXPORT_NAME
/// (which has no error reply) closes.
pub(super) fn refuse_options<S: Read + Write>(c: &mut S, why: &str) -> io::Result<()> {
    let msg = format!("hetraid serve: refused: {why}");
    // Bounded: at most HANDSHAKE_OPTIONS_MAX options, within the deadline.
    for _ in 0..HANDSHAKE_OPTIONS_MAX {
        let (opt, len) = read_option_header(c)?;
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
pub(super) fn negotiate<S: Read + Write>(c: &mut S, o: &mut Offer) -> io::Result<Outcome> {
    // Bounded: at most HANDSHAKE_OPTIONS_MAX options, each read before
    // the handshake's deadline.
    for _ in 0..=HANDSHAKE_OPTIONS_MAX {
        let (opt, len) = read_option_header(c)?;
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
                let out = info_replies(opt, o, &name, &infos);
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
                let out = meta_context_replies(opt, list, selected);
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

/// The replies to NBD_OPT_INFO or NBD_OPT_GO for export `name`: the
/// export's size and flags, block sizes (always: clients that did not ask
/// may ignore them), and the description and name when asked; then ACK.
fn info_replies(opt: u32, o: &Offer, name: &str, infos: &[u16]) -> Vec<u8> {
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
    out
}

/// The replies to a meta context option: base:allocation when the queries
/// select it (a list names it without selecting it: id 0, as nbdkit), then
/// ACK.
fn meta_context_replies(opt: u32, list: bool, selected: bool) -> Vec<u8> {
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
    out
}

/// Transmission over TLS: one request at a time on one thread (reads and
/// writes share the TLS state), replies in order.
pub(super) fn transmission_serial(
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
