//! The control socket beside a served array, so lifecycle verbs act on the running
//! array the way mdadm acts on a running md device. One JSON request line in, one
//! JSON reply line out: `{"verb":"status"}`, `{"verb":"fail","member":2}`,
//! `{"verb":"scrub","repair":false}`, `{"verb":"reclaim"}`, `{"verb":"replace","member":2}`
//! with the new member's open file passed along (`SCM_RIGHTS`, `fdpass`),
//! `{"verb":"rebuild","min_speed":1024000,"max_speed":204800000}` (online, clients
//! keep going), `{"verb":"grow",...}`, `{"verb":"shrink",...}`,
//! `{"verb":"rebalance",...}`: every request decodes into the typed
//! [`Request`] (`request.rs`, which the command line builds its requests
//! from too). Replies: `{"ok":true,"result":...}` or
//! `{"ok":false,"error":"...","kind":"busy"}` (core `ErrorKind`).
//!
//! Who may use it (issue 15): the socket lives in a private directory
//! (`$XDG_RUNTIME_DIR/hetraid`, or `/tmp/hetraid-UID`, created 0700 and
//! checked: a directory, not a link, owned by the user, no access for
//! others), is made 0600, and the server checks every peer's credentials
//! (`SO_PEERCRED`): root or the server's own user, anyone else is refused
//! and logged. The command line checks the directory and the socket the
//! same way, and the server's credentials once connected, before it sends
//! anything; every call has a timeout. A new member is never opened by the
//! server: the command opens it with the caller's rights and passes it.

use crate::request::{Request, Speed};
use hetraid_core::Failure;
use hetraid_engine::error::IntoFailure;
use hetraid_engine::{Array, ArrayCell};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The user running this process.
fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// The directory control sockets live in: `$XDG_RUNTIME_DIR/hetraid` when
/// that is set, else `/tmp/hetraid-UID` (per user: a server run by root and
/// a command run by another user never meet).
pub fn control_dir() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d).join("hetraid"),
        _ => std::env::temp_dir().join(format!("hetraid-{}", euid())),
    }
}

/// Is `dir` private to this user: a directory (not a link), owned by us,
/// no permission for group or others? Why not, if not.
fn check_private_dir(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(dir)
        .map_err(|e| format!("control directory {}: {e}", dir.display()))?;
    if m.file_type().is_symlink() || !m.is_dir() {
        return Err(format!(
            "the control directory {} is not a directory (a link or a file): hetraid does not use it; remove it",
            dir.display()
        ));
    }
    if m.uid() != euid() || m.mode() & 0o077 != 0 {
        return Err(format!(
            "the control directory {} is not private (owner uid {}, mode {:o}; it must be uid {} and 0700): hetraid does not use it; remove it",
            dir.display(),
            m.uid(),
            m.mode() & 0o7777,
            euid()
        ));
    }
    Ok(())
}

/// The control directory, created 0700 if missing, checked.
fn private_dir() -> Result<PathBuf, String> {
    let dir = control_dir();
    if let Some(parent) = dir.parent() {
        if !parent.exists() {
            return Err(format!("{} does not exist", parent.display()));
        }
    }
    use std::os::unix::fs::DirBuilderExt;
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("cannot create {}: {e}", dir.display())),
    }
    check_private_dir(&dir)?;
    Ok(dir)
}

/// Where the control socket of array `uuid` lives.
pub fn socket_path(uuid: &str) -> PathBuf {
    control_dir().join(format!("{uuid}.ctl"))
}

/// The credentials (uid, pid) of the process at the other end of `s`.
fn peer(s: &UnixStream) -> std::io::Result<(u32, i32)> {
    use std::os::fd::AsRawFd;
    let mut c = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `c` and `len` outlive the call; the buffer is a ucred.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut c as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((c.uid, c.pid))
}

/// May a peer of uid `uid` use a server run by `server`? Root, or the same user.
fn allowed(uid: u32, server: u32) -> bool {
    uid == 0 || uid == server
}

/// Connect to the control socket of array `uuid`: `None` when it is not
/// served (no socket, or a stale one nobody answers), an error when what is
/// there is not to be trusted (then nothing is sent, and the caller must
/// not go on as if the array were not served).
fn connect(uuid: &str) -> Option<Result<UnixStream, String>> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let dir = control_dir();
    if !dir.exists() && std::fs::symlink_metadata(&dir).is_err() {
        return None;
    }
    if let Err(e) = check_private_dir(&dir) {
        return Some(Err(e));
    }
    let path = socket_path(uuid);
    let m = std::fs::symlink_metadata(&path).ok()?;
    if !m.file_type().is_socket() || !allowed(m.uid(), euid()) || m.mode() & 0o077 != 0 {
        return Some(Err(format!(
            "{} is not a control socket this user can trust (owner uid {}, mode {:o}): it is not used; remove it",
            path.display(),
            m.uid(),
            m.mode() & 0o7777
        )));
    }
    let s = UnixStream::connect(&path).ok()?;
    match peer(&s) {
        Ok((uid, _)) if allowed(uid, euid()) => Some(Ok(s)),
        Ok((uid, pid)) => Some(Err(format!(
            "the server answering on {} runs as uid {uid} (pid {pid}), neither root nor this user: nothing was sent",
            path.display()
        ))),
        Err(e) => Some(Err(format!("control socket {}: {e}", path.display()))),
    }
}

/// How long a control call may take: verbs that work through the whole
/// array may run for hours; the others answer at once.
fn reply_timeout(req: &Value) -> Duration {
    let long = serde_json::from_value::<Request>(req.clone()).is_ok_and(|r| r.is_long());
    if long {
        Duration::from_secs(7 * 86_400)
    } else {
        Duration::from_secs(60)
    }
}

/// The UUID of the array `member` belongs to (a member's or a write log
/// device's), read without taking its lock.
pub fn array_uuid(member: &Path) -> Option<String> {
    hetraid_engine::identity::Identity::of_path(member)
        .ok()?
        .array_uuid()
}

/// Is array `uuid` being served? An error when its control socket is not
/// to be trusted.
pub fn is_served(uuid: &str) -> Result<bool, String> {
    match connect(uuid) {
        None => Ok(false),
        Some(Ok(_)) => Ok(true),
        Some(Err(e)) => Err(e),
    }
}

/// If the array of `member` (or of a log device) is being served, send
/// `request` to its server, with `file` passed along when given.
pub fn remote(
    member: &Path,
    request: &Value,
    file: Option<&std::fs::File>,
) -> Option<Result<Value, Failure>> {
    let uuid = array_uuid(member)?;
    let s = match connect(&uuid)? {
        Ok(s) => s,
        Err(e) => return Some(Err(e.into())),
    };
    let r = (|| -> Result<Value, Failure> {
        use std::os::fd::AsRawFd;
        s.set_write_timeout(Some(Duration::from_secs(10)))
            .and_then(|_| s.set_read_timeout(Some(reply_timeout(request))))
            .map_err(|e| e.to_string())?;
        let mut line = request.to_string();
        line.push('\n');
        // A server that refuses at once may close before our request is
        // sent (EPIPE): its reply, already written, still says why.
        match crate::fdpass::send(&s, line.as_bytes(), file.map(|f| f.as_raw_fd())) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
            Err(e) => return Err(format!("control socket: {e}").into()),
        }
        let mut reply = String::new();
        BufReader::new(&s)
            .take(16 << 20)
            .read_line(&mut reply)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                    "the server did not answer in time".to_string()
                }
                _ => e.to_string(),
            })?;
        if reply.is_empty() {
            return Err(
                "the server closed the control connection without a reply (it stopped or was killed): what the request changed is recorded on the members; hetraid status says where the array is"
                    .into(),
            );
        }
        let v: Value =
            serde_json::from_str(&reply).map_err(|e| format!("bad reply from the server: {e}"))?;
        if v["ok"] == true {
            Ok(v["result"].clone())
        } else {
            // The kind the server gave (older servers give none: refused).
            let kind = v["kind"]
                .as_str()
                .and_then(hetraid_core::ErrorKind::parse)
                .unwrap_or(hetraid_core::ErrorKind::Refused);
            Err(Failure::new(
                kind,
                v["error"].as_str().unwrap_or("the server refused"),
            ))
        }
    })();
    Some(r)
}

/// Serve control requests for `array` (uuid `uuid`) until `stop`: the
/// socket in the private control directory, made 0600; each peer checked
/// and each request logged on stderr with the peer's uid and pid.
pub fn serve_control(
    array: Arc<ArrayCell>,
    uuid: &str,
    stop: Arc<crate::Stop>,
) -> Result<(), String> {
    serve_control_for(array, uuid, stop, "serve")
}

/// [`serve_control`] for a process running `role` ("serve", or an offline
/// "rebuild", "scrub", ...): `status` from another shell reaches it and says
/// which process holds the array.
pub fn serve_control_for(
    array: Arc<ArrayCell>,
    uuid: &str,
    stop: Arc<crate::Stop>,
    role: &'static str,
) -> Result<(), String> {
    let dir = private_dir()?;
    let path = dir.join(format!("{uuid}.ctl"));
    crate::server::remove_stale_socket(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let l = UnixListener::bind(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    l.set_nonblocking(true).map_err(|e| e.to_string())?;
    let me = euid();
    use std::os::fd::AsRawFd;
    while !stop.is_set() {
        match l.accept() {
            Ok((s, _)) => {
                let _ = s.set_nonblocking(false);
                let (uid, pid) = match peer(&s) {
                    Ok(p) => p,
                    Err(e) => {
                        tracing::info!("control: a connection without credentials refused: {e}");
                        continue;
                    }
                };
                if !allowed(uid, me) {
                    tracing::info!(
                        "control: refused uid {uid} (pid {pid}): only root and uid {me} may control this array"
                    );
                    let reply = json!({"ok": false, "error": format!("uid {uid} may not control this array (served by uid {me})")});
                    // Take the request first (bounded: 250 ms, 64 KiB), so the
                    // client's write does not meet a closed socket (EPIPE)
                    // before it reads why.
                    let _ = s.set_read_timeout(Some(Duration::from_millis(250)));
                    let _ = crate::fdpass::recv_line(&s, 1 << 16);
                    let mut w = &s;
                    let _ = s.set_write_timeout(Some(Duration::from_secs(1)));
                    let _ = w.write_all(format!("{reply}\n").as_bytes());
                    continue;
                }
                let cell = array.clone();
                // A refused thread refuses this request, not the server.
                let spawned = std::thread::Builder::new()
                    .name("hetraid-control".into())
                    .spawn(move || handle(&cell, s, uid, pid, role));
                if let Err(e) = spawned {
                    tracing::info!("control: request from uid {uid} dropped: {e}");
                }
            }
            // Block until a request or the stop: no CPU while idle.
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                crate::stop::wait_readable(&[l.as_raw_fd()], &stop, None);
            }
            // Out of descriptors and the like: try again shortly.
            Err(_) => {
                stop.sleep(Duration::from_millis(20));
            }
        }
    }
    if std::fs::symlink_metadata(&path).is_ok_and(|m| {
        use std::os::unix::fs::FileTypeExt;
        m.file_type().is_socket()
    }) {
        let _ = std::fs::remove_file(&path);
    }
    Ok(())
}

/// `status` as the process holding an array answers it: the array's status
/// (with a running change's pace) and who holds it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct HeldStatus {
    #[serde(flatten)]
    pub status: hetraid_engine::Status,
    /// "serve", or the verb of the command holding the array.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
}

fn handle(cell: &ArrayCell, s: UnixStream, uid: u32, pid: i32, role: &'static str) {
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    let (line, fd) = match crate::fdpass::recv_line(&s, 1 << 16) {
        Ok(x) => x,
        // A command checking whether the array is served connects and goes.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return,
        Err(e) => {
            tracing::info!("control: uid {uid} (pid {pid}): unreadable request: {e}");
            let reply = json!({"ok": false, "error": format!("unreadable control request: {e}")});
            let mut w = &s;
            let _ = w.write_all(format!("{reply}\n").as_bytes());
            return;
        }
    };
    let file = fd.map(std::fs::File::from);
    let reply = match serde_json::from_str::<Value>(&line) {
        Ok(req) => {
            let r = match serde_json::from_value::<Request>(req.clone()) {
                Ok(Request::Status) => to_json(HeldStatus {
                    status: cell.status(),
                    process: Some(role.into()),
                    pid: Some(std::process::id()),
                }),
                Ok(typed) => change(cell, &typed, file).unwrap_or_else(|f| run(cell, &typed, f)),
                Err(e) => Err(Failure::new(
                    hetraid_core::ErrorKind::Usage,
                    format!("malformed control request: {e}"),
                )),
            };
            // A command holding the array offline logs what changes it
            // (its own output stays readable); a server logs everything.
            let quiet = role != "serve" && req["verb"] == "status" && r.is_ok();
            if !quiet {
                tracing::info!(
                    "control: uid {uid} (pid {pid}): {}: {}",
                    describe(&req),
                    match &r {
                        Ok(_) => "done".to_string(),
                        Err(e) => format!("refused: {e}"),
                    }
                );
            }
            match r {
                Ok(v) => json!({"ok": true, "result": v}),
                Err(e) => json!({"ok": false, "error": e.message, "kind": e.kind.as_str()}),
            }
        }
        Err(e) => {
            json!({"ok": false, "error": format!("malformed control request: {e}"), "kind": "usage"})
        }
    };
    let mut w = &s;
    let _ = s.set_write_timeout(Some(Duration::from_secs(10)));
    let _ = w.write_all(format!("{reply}\n").as_bytes());
}

/// A request as the log shows it (status requests too: who looked).
fn describe(req: &Value) -> String {
    let verb = req["verb"].as_str().unwrap_or("?");
    let mut parts = vec![verb.to_string()];
    for k in [
        "member", "with", "add", "size", "weights", "repair", "force",
    ] {
        if !req[k].is_null() {
            parts.push(format!("{k}={}", req[k]));
        }
    }
    parts.join(" ")
}

/// The new member a request passed (its open file), as a member named by
/// the path the request gives for it.
fn passed_member(
    file: Option<std::fs::File>,
    name: &str,
    verb: &str,
) -> Result<hetraid_engine::member::FileMember, String> {
    let file = file.ok_or_else(|| {
        format!(
            "{verb} through the server takes the new member as the hetraid command opened it (passed with the request); a path alone is not opened on the caller's behalf"
        )
    })?;
    hetraid_engine::member::FileMember::from_passed(file, PathBuf::from(name))
        .map_err(|e| format!("new member {name}: {e}"))
}

/// A reply's value as JSON (an encoding error is a refusal).
fn to_json<T: serde::Serialize>(v: T) -> Result<Value, Failure> {
    serde_json::to_value(v).map_err(|e| Failure::from(e.to_string()))
}

/// The limits a request asks for, MD's defaults where it gives none.
fn change_options(speed: &Speed) -> hetraid_engine::ChangeOptions {
    let d = hetraid_engine::ChangeOptions::default();
    hetraid_engine::ChangeOptions {
        min_speed: speed.min_speed.unwrap_or(d.min_speed),
        max_speed: speed.max_speed.unwrap_or(d.max_speed),
    }
}

/// A member kind named in a request (absent: a disk).
fn kind_of(kind: &Option<String>) -> Result<hetraid_core::MemberKind, Failure> {
    match kind {
        None => Ok(hetraid_core::MemberKind::Hdd),
        Some(k) => hetraid_core::MemberKind::parse(k).map_err(Failure::from),
    }
}

/// The verbs that change the members: they take the array from the cell
/// batch by batch (`Err`: another verb, the passed file handed back).
fn change(
    cell: &ArrayCell,
    req: &Request,
    file: Option<std::fs::File>,
) -> Result<Result<Value, Failure>, Option<std::fs::File>> {
    let report = |r: hetraid_engine::Result<hetraid_engine::ChangeReport>| {
        r.map_err(IntoFailure::failure).and_then(to_json)
    };
    Ok(match req {
        Request::Grow {
            add,
            kind,
            weights,
            size,
            force,
            speed,
        } => (|| {
            let opts = change_options(speed);
            let new = match add {
                None => None,
                Some(path) => {
                    let kind = kind_of(kind)?;
                    let m = passed_member(file, path, "grow --add")?;
                    Some((Arc::new(m) as Arc<dyn hetraid_engine::member::Member>, kind))
                }
            };
            if size.as_deref() == Some("max") {
                let rs = cell.enlarge(opts).map_err(IntoFailure::failure)?;
                return to_json(rs);
            }
            if let Some(other) = size {
                return Err(Failure::new(
                    hetraid_core::ErrorKind::Usage,
                    format!("grow takes \"size\": \"max\" or no size, not {other:?}"),
                ));
            }
            if new.is_none() && weights.is_none() {
                return match cell.resume(opts) {
                    Ok(Some(r)) => report(Ok(r)),
                    Ok(None) => Err(
                        "no grow or shrink is in progress: give --add NEW to add a member".into(),
                    ),
                    Err(e) => Err(e.into()),
                };
            }
            report(cell.grow(new, weights.clone(), *force, opts))
        })(),
        Request::Rebalance { with, force, speed } => (|| {
            let new = passed_member(file, with, "rebalance --with")?;
            let r = cell
                .copy_back(Arc::new(new), *force, change_options(speed), &|_| {})
                .map_err(IntoFailure::failure)?;
            to_json(r)
        })(),
        Request::Shrink {
            member,
            size,
            force,
            speed,
        } => report(cell.shrink_remove(*member, *size, *force, change_options(speed))),
        _ => return Err(file),
    })
}

/// `fail`: the member failed (refused beyond the redundancy unless
/// forced), and its device let go.
fn verb_fail(cell: &ArrayCell, array: &Array, slot: usize, force: bool) -> Result<Value, Failure> {
    let dev = array.member(slot).map(|d| d.name());
    array.fail_with(slot, force).map_err(IntoFailure::failure)?;
    array.flush().map_err(IntoFailure::failure)?;
    // The failed device is closed and its lock dropped: it can be
    // inspected, or re-added with `add --with`, while clients go on.
    // A hot spare may have taken the slot already (the server's
    // spare watcher runs on the failure's event): the device left
    // the array then, and is let go all the same.
    if let Some(d) = dev {
        let detached = array.detach_failed(slot, &d).is_some();
        if detached || array.member(slot).is_none_or(|m| m.name() != d) {
            cell.release(&d);
        }
    }
    Ok(json!({"state": array.status().state}))
}

/// `scrub`: every stripe checked (repaired as the request trusts), paced.
fn verb_scrub(
    array: &Array,
    repair: bool,
    trust_data: bool,
    trust_member: Option<usize>,
    speed: &Speed,
) -> Result<Value, Failure> {
    let trust = array
        .scrub_trust(repair, trust_data, trust_member)
        .map_err(IntoFailure::failure)?;
    let d = hetraid_engine::ScrubOptions::default();
    let opts = hetraid_engine::ScrubOptions {
        min_speed: speed.min_speed.unwrap_or(d.min_speed),
        max_speed: speed.max_speed.unwrap_or(d.max_speed),
    };
    let r = array
        .scrub_with(trust, opts, &|_| {})
        .map_err(IntoFailure::failure)?;
    to_json(r)
}

/// `replace --log-copy`: a copy of the write log, replaced while clients
/// write: the live records are copied to it (appends wait meanwhile).
fn verb_replace_log_copy(
    cell: &ArrayCell,
    array: &Array,
    copy: usize,
    with: &str,
    force: bool,
    file: Option<std::fs::File>,
) -> Result<Value, Failure> {
    let new: Arc<dyn hetraid_engine::member::Member> =
        Arc::new(passed_member(file, with, "replace")?);
    let old = array
        .status()
        .log
        .and_then(|l| l.devices.get(copy).map(|d| d.path.clone()));
    array
        .replace_log_copy(copy, new.clone(), force)
        .map_err(IntoFailure::failure)?;
    if let Some(old) = old {
        cell.release(&old);
    }
    cell.adopt(new);
    Ok(json!({"state": array.status().state, "log": array.status().log.map(|l| l.state)}))
}

/// `rebuild`: onto the replacements attached, at the speeds asked (MD's
/// defaults otherwise).
fn verb_rebuild(
    array: &Array,
    to_spare: bool,
    pace: &Option<String>,
    speed: &Speed,
) -> Result<Value, Failure> {
    if to_spare {
        // The relocation changes the layout, which a served array cannot
        // switch under its clients yet.
        return Err("rebuild --to-spare runs on an array that is not served: stop hetraid serve (SIGTERM), rebuild, and serve again; a served array rebuilds onto a replacement (hetraid replace, then hetraid rebuild)".into());
    }
    let pace = match pace {
        Some(p) => hetraid_core::pace::PaceScope::parse(p)?,
        None => hetraid_core::pace::PaceScope::Array,
    };
    let opts = hetraid_engine::RebuildOptions {
        min_speed: speed
            .min_speed
            .unwrap_or(hetraid_core::pace::MD_DEFAULT.min_bps),
        max_speed: speed
            .max_speed
            .unwrap_or(hetraid_core::pace::MD_DEFAULT.max_bps),
        stop_after: None,
        pace,
    };
    let r = array.rebuild(opts, &|_| {}).map_err(IntoFailure::failure)?;
    to_json(r)
}

/// `replace` of a slot, `add_spare`, `remove_spare`, `remove`: the device
/// passed joins (adopted by the cell) or the one named leaves (let go).
fn verb_members(
    cell: &ArrayCell,
    array: &Array,
    req: &Request,
    file: Option<std::fs::File>,
) -> Result<Value, Failure> {
    match req {
        Request::Replace {
            member: Some(slot),
            with,
            force,
            ..
        } => {
            let new: Arc<dyn hetraid_engine::member::Member> =
                Arc::new(passed_member(file, with, "replace")?);
            array
                .replace(*slot, new.clone(), *force)
                .map_err(IntoFailure::failure)?;
            cell.adopt(new);
            Ok(json!({"state": array.status().state}))
        }
        Request::Replace { member: None, .. } => Err(Failure::new(
            hetraid_core::ErrorKind::Usage,
            "replace needs \"member\" (a slot) or \"log_copy\"",
        )),
        Request::AddSpare { with, kind, force } => {
            let kind = kind_of(kind)?;
            let new: Arc<dyn hetraid_engine::member::Member> =
                Arc::new(passed_member(file, with, "add")?);
            array
                .add_spare(new.clone(), kind, *force)
                .map_err(IntoFailure::failure)?;
            cell.adopt(new);
            Ok(json!({"state": array.status().state, "spares": array.spare_status().len()}))
        }
        Request::RemoveSpare { with } => {
            array.remove_spare(with).map_err(IntoFailure::failure)?;
            // No longer the array's: the server lets the device go.
            cell.release(with);
            Ok(json!({"state": array.status().state}))
        }
        Request::Remove { member } => {
            let dev = array.member(*member);
            array.remove(*member).map_err(IntoFailure::failure)?;
            // Detached: the server closes the device and drops its lock, so
            // it can be re-added (`add --with`) while clients keep going.
            if let Some(d) = dev {
                cell.release(&d.name());
            }
            Ok(json!({"state": array.status().state}))
        }
        other => unreachable!("{} is not a member verb", other.verb()),
    }
}

fn run(cell: &ArrayCell, req: &Request, file: Option<std::fs::File>) -> Result<Value, Failure> {
    // A rebuild or scrub waits for a change moving chunks (and a change for
    // them: `ArrayCell::grow`): one at a time, the running one named.
    if let (Request::Rebuild { .. } | Request::Scrub { .. }, Some(p)) = (req, cell.change_running())
    {
        return Err(Failure::new(
            hetraid_core::ErrorKind::Busy,
            format!(
                "a {} is running on this array ({} of {} chunk moves done): {} changes nothing until it ends; run it again then",
                p.change,
                p.moves_done,
                p.moves,
                req.verb()
            ),
        ));
    }
    let array = cell.get();
    let array: &Array = &array;
    match req {
        Request::Status => to_json(cell.status()),
        Request::Clear { member } => {
            to_json(array.clear_errors(*member).map_err(IntoFailure::failure)?)
        }
        Request::Fail { member, force } => verb_fail(cell, array, *member, *force),
        Request::Reclaim => {
            if !array.has_write_back_log() {
                return Err("reclaim applies to arrays with a write-back log (hpda, --log-mode write-back); this array has none".into());
            }
            let bytes = array.reclaim().map_err(IntoFailure::failure)?;
            Ok(json!({"reclaimed_bytes": bytes}))
        }
        Request::Scrub {
            repair,
            trust_data,
            trust_member,
            speed,
        } => verb_scrub(array, *repair, *trust_data, *trust_member, speed),
        Request::Replace {
            log_copy: Some(copy),
            with,
            force,
            ..
        } => verb_replace_log_copy(cell, array, *copy, with, *force, file),
        Request::Replace { .. }
        | Request::AddSpare { .. }
        | Request::RemoveSpare { .. }
        | Request::Remove { .. } => verb_members(cell, array, req, file),
        Request::Rebuild {
            to_spare,
            pace,
            speed,
        } => verb_rebuild(array, *to_spare, pace, speed),
        Request::Grow { .. } | Request::Shrink { .. } | Request::Rebalance { .. } => {
            unreachable!("{} runs as a change", req.verb())
        }
    }
}
