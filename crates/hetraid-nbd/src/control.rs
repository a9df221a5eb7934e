//! The control socket beside a served array, so lifecycle verbs act on the running
//! array the way mdadm acts on a running md device. One JSON request line in, one
//! JSON reply line out: `{"verb":"status"}`, `{"verb":"fail","member":2}`,
//! `{"verb":"scrub","repair":false}`, `{"verb":"reclaim"}`, `{"verb":"replace","member":2,"with":"/abs/path"}`
//! (the new member is attached to the running array), `{"verb":"rebuild",
//! "min_speed":1000000,"max_speed":200000000}` (online, clients keep going).
//! Replies: `{"ok":true,"result":...}` or `{"ok":false,"error":"..."}`.

use hetraid_engine::format::{Superblock, SB_SIZE};
use hetraid_engine::{Array, ArrayCell};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Where the control socket of array `uuid` lives.
pub fn socket_path(uuid: &str) -> PathBuf {
    let dir = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    dir.join(format!("hetraid-{uuid}.ctl"))
}

/// The UUID of the array `member` belongs to, read without taking its lock.
pub fn array_uuid(member: &Path) -> Option<String> {
    let mut f = std::fs::File::open(member).ok()?;
    let mut b = vec![0u8; 2 * SB_SIZE];
    f.read_exact(&mut b[..SB_SIZE]).ok()?;
    if let Ok(s) = Superblock::decode(&b[..SB_SIZE]) {
        return Some(s.uuid_string());
    }
    // A write log device of the array: either header slot.
    f.read_exact(&mut b[SB_SIZE..]).ok()?;
    [0, 1]
        .iter()
        .filter_map(|&i| hetraid_engine::log::LogHeader::decode(&b[i * SB_SIZE..(i + 1) * SB_SIZE]))
        .max_by_key(|h| h.generation)
        .map(|h| h.uuid_string())
}

/// Is array `uuid` being served (does its control socket answer)?
pub fn is_served(uuid: &str) -> bool {
    UnixStream::connect(socket_path(uuid)).is_ok()
}

/// If the array of `member` (or of a log device) is being served, send `request` to its server.
pub fn remote(member: &Path, request: &Value) -> Option<Result<Value, String>> {
    let uuid = array_uuid(member)?;
    let mut s = UnixStream::connect(socket_path(&uuid)).ok()?;
    let r = (|| {
        let mut line = request.to_string();
        line.push('\n');
        s.write_all(line.as_bytes()).map_err(|e| e.to_string())?;
        let mut reply = String::new();
        BufReader::new(&s)
            .read_line(&mut reply)
            .map_err(|e| e.to_string())?;
        let v: Value =
            serde_json::from_str(&reply).map_err(|e| format!("bad reply from the server: {e}"))?;
        if v["ok"] == true {
            Ok(v["result"].clone())
        } else {
            Err(v["error"]
                .as_str()
                .unwrap_or("the server refused")
                .to_string())
        }
    })();
    Some(r)
}

/// Serve control requests for `array` until `stop`.
pub fn serve_control(
    array: Arc<ArrayCell>,
    path: &Path,
    stop: Arc<AtomicBool>,
) -> std::io::Result<()> {
    crate::server::remove_stale_socket(path)?;
    let l = UnixListener::bind(path)?;
    l.set_nonblocking(true)?;
    while !stop.load(Ordering::SeqCst) {
        match l.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false)?;
                let cell = array.clone();
                std::thread::spawn(move || handle(&cell, s));
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(_) => {}
        }
    }
    if std::fs::symlink_metadata(path).is_ok_and(|m| {
        use std::os::unix::fs::FileTypeExt;
        m.file_type().is_socket()
    }) {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

fn handle(cell: &ArrayCell, s: UnixStream) {
    let mut line = String::new();
    if BufReader::new(&s)
        .take(1 << 16)
        .read_line(&mut line)
        .is_err()
    {
        return;
    }
    let reply = match serde_json::from_str::<Value>(&line) {
        Ok(req) => match change(cell, &req).unwrap_or_else(|| run(&cell.get(), &req)) {
            Ok(v) => json!({"ok": true, "result": v}),
            Err(e) => json!({"ok": false, "error": e}),
        },
        Err(e) => json!({"ok": false, "error": format!("malformed control request: {e}")}),
    };
    let mut w = &s;
    let _ = w.write_all(format!("{reply}\n").as_bytes());
}

/// The verbs that change the members: they take the array from the cell
/// batch by batch (`None`: another verb).
fn change(cell: &ArrayCell, req: &Value) -> Option<Result<Value, String>> {
    let d = hetraid_engine::ChangeOptions::default();
    let opts = hetraid_engine::ChangeOptions {
        min_speed: req["min_speed"].as_u64().unwrap_or(d.min_speed),
        max_speed: req["max_speed"].as_u64().unwrap_or(d.max_speed),
    };
    let report = |r: hetraid_engine::Result<hetraid_engine::ChangeReport>| {
        r.map_err(|e| e.to_string())
            .and_then(|r| serde_json::to_value(r).map_err(|e| e.to_string()))
    };
    match req["verb"].as_str() {
        Some("grow") => Some((|| {
            let weights: Option<Vec<u64>> = match &req["weights"] {
                Value::Null => None,
                w => Some(
                    w.as_array()
                        .ok_or("\"weights\" is a list of numbers")?
                        .iter()
                        .map(|x| x.as_u64().ok_or("\"weights\" is a list of numbers"))
                        .collect::<Result<_, _>>()?,
                ),
            };
            let new = match req["add"].as_str() {
                None => None,
                Some(path) => {
                    let kind = match req["kind"].as_str() {
                        None => hetraid_core::MemberKind::Hdd,
                        Some(k) => hetraid_core::MemberKind::parse(k)?,
                    };
                    let m = hetraid_engine::member::FileMember::open(Path::new(path))
                        .map_err(|e| format!("cannot open member {path}: {e}"))?;
                    Some((Arc::new(m) as Arc<dyn hetraid_engine::member::Member>, kind))
                }
            };
            if req["size"].as_str() == Some("max") {
                let rs = cell.enlarge(opts).map_err(|e| e.to_string())?;
                return serde_json::to_value(rs).map_err(|e| e.to_string());
            }
            if new.is_none() && weights.is_none() {
                return match cell.resume(opts) {
                    Ok(Some(r)) => report(Ok(r)),
                    Ok(None) => Err(
                        "no grow or shrink is in progress: give --add NEW to add a member".into(),
                    ),
                    Err(e) => Err(e.to_string()),
                };
            }
            report(cell.grow(new, weights, req["force"].as_bool().unwrap_or(false), opts))
        })()),
        Some("shrink") => Some((|| {
            let slot = req["member"].as_u64().ok_or("shrink needs \"member\"")? as usize;
            let size = req["size"].as_u64().ok_or("shrink needs \"size\"")?;
            report(cell.shrink_remove(slot, size, opts))
        })()),
        _ => None,
    }
}

fn run(array: &Array, req: &Value) -> Result<Value, String> {
    let member = || {
        req["member"]
            .as_u64()
            .map(|m| m as usize)
            .ok_or("request needs \"member\"")
    };
    match req["verb"].as_str() {
        Some("status") => serde_json::to_value(array.status()).map_err(|e| e.to_string()),
        Some("fail") => {
            array
                .fail_with(member()?, req["force"].as_bool().unwrap_or(false))
                .map_err(|e| e.to_string())?;
            array.flush().map_err(|e| e.to_string())?;
            Ok(json!({"state": array.status().state}))
        }
        Some("reclaim") => {
            if !array.has_write_back_log() {
                return Err("reclaim applies to arrays with a write-back log (hpda, --log-mode write-back); this array has none".into());
            }
            let bytes = array.reclaim().map_err(|e| e.to_string())?;
            Ok(json!({"reclaimed_bytes": bytes}))
        }
        Some("scrub") => {
            let trust = array
                .scrub_trust(
                    req["repair"].as_bool().unwrap_or(false),
                    req["trust_data"].as_bool().unwrap_or(false),
                    req["trust_member"].as_u64().map(|m| m as usize),
                )
                .map_err(|e| e.to_string())?;
            let d = hetraid_engine::ScrubOptions::default();
            let opts = hetraid_engine::ScrubOptions {
                min_speed: req["min_speed"].as_u64().unwrap_or(d.min_speed),
                max_speed: req["max_speed"].as_u64().unwrap_or(d.max_speed),
            };
            let r = array
                .scrub_with(trust, opts, &|_| {})
                .map_err(|e| e.to_string())?;
            serde_json::to_value(r).map_err(|e| e.to_string())
        }
        Some("replace") => {
            let path = req["with"].as_str().ok_or("replace needs \"with\"")?;
            let new = hetraid_engine::member::FileMember::open(Path::new(path))
                .map_err(|e| format!("cannot open member {path}: {e}"))?;
            array
                .replace(
                    member()?,
                    Arc::new(new),
                    req["force"].as_bool().unwrap_or(false),
                )
                .map_err(|e| e.to_string())?;
            Ok(json!({"state": array.status().state}))
        }
        Some("remove") => {
            array.remove(member()?).map_err(|e| e.to_string())?;
            Ok(json!({"state": array.status().state}))
        }
        Some("rebuild") => {
            if req["to_spare"].as_bool().unwrap_or(false) {
                // The relocation changes the layout, which a served array cannot
                // switch under its clients yet.
                return Err("rebuild --to-spare runs on an array that is not served: stop hetraid serve (SIGTERM), rebuild, and serve again; a served array rebuilds onto a replacement (hetraid replace, then hetraid rebuild)".into());
            }
            let opts = hetraid_engine::RebuildOptions {
                min_speed: req["min_speed"].as_u64().unwrap_or(1_000_000),
                max_speed: req["max_speed"].as_u64().unwrap_or(200_000_000),
                stop_after: None,
            };
            let r = array.rebuild(opts, &|_| {}).map_err(|e| e.to_string())?;
            serde_json::to_value(r).map_err(|e| e.to_string())
        }
        other => Err(format!(
            "unknown control verb {other:?}; use status, fail, remove, scrub, replace, rebuild, reclaim, grow or shrink"
        )),
    }
}
