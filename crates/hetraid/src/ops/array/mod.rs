//! Lifecycle and data verbs on real members (mdadm-like).

use hetraid_core::units::format_size;
use hetraid_core::{ErrorKind, Failure, MemberKind, WritePolicy};
use hetraid_engine::error::IntoFailure;
use hetraid_engine::member::{FileMember, Member};
use hetraid_engine::{Access, Array, AssembleOptions, CreateOptions, RebuildOptions};
pub use hetraid_nbd::request::{Request, Speed};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

mod change;
mod create;
mod data;
mod members;
pub mod names;
mod repair;
#[allow(unused_imports)]
pub(crate) use crate::render::{rebuild_command, utc};
#[allow(unused_imports)]
pub(crate) use change::*;
#[allow(unused_imports)]
pub(crate) use create::*;
#[allow(unused_imports)]
pub(crate) use data::*;
#[allow(unused_imports)]
pub(crate) use members::*;
#[allow(unused_imports)]
pub(crate) use repair::*;

/// `PATH` or `PATH:kind` (decided once, for `advise` too).
pub use hetraid_advise::probe::split_member;

/// The kind of block device `p` from the kernel's `queue/rotational` (md
/// reads the same flag): `None` for a file, or when sysfs does not say.
/// With the sysfs file read, for the note that says so.
pub fn detected_kind(p: &Path) -> Option<(MemberKind, PathBuf)> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let m = std::fs::metadata(p).ok()?;
    if !m.file_type().is_block_device() {
        return None;
    }
    let rdev = m.rdev();
    let (major, minor) = (libc::major(rdev), libc::minor(rdev));
    let dev = std::fs::canonicalize(format!("/sys/dev/block/{major}:{minor}")).ok()?;
    // A partition's queue is its disk's.
    let file = [
        dev.join("queue/rotational"),
        dev.join("../queue/rotational"),
    ]
    .into_iter()
    .find(|f| f.exists())?;
    let flag = std::fs::read_to_string(&file).ok()?;
    let kind = match flag.trim() {
        "0" => MemberKind::Ssd,
        "1" => MemberKind::Hdd,
        _ => return None,
    };
    Some((kind, file))
}

/// The kind of a new member at `p`: the one given, else the kernel's for a
/// block device, else a disk.
pub fn kind_of(p: &Path, given: Option<MemberKind>) -> MemberKind {
    given
        .or_else(|| detected_kind(p).map(|(k, _)| k))
        .unwrap_or(MemberKind::Hdd)
}

/// `--log` and `--log-mode` as given: paths, kinds, mode.
type LogArgs = (
    Vec<PathBuf>,
    Vec<MemberKind>,
    hetraid_engine::format::LogMode,
);

/// Do two paths name one file (or, when one does not exist yet, are they equal)?
fn same_path(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

/// What a device already is, if it is part of an array or a log.
fn belongs_to(m: &dyn Member) -> Option<String> {
    use hetraid_engine::identity::Identity;
    match Identity::of(m).ok()? {
        i @ (Identity::Member(_) | Identity::LogDevice(_)) => Some(i.describe()),
        Identity::Blank | Identity::Data => None,
    }
}

pub fn open_member(path: &Path) -> Result<Arc<dyn Member>, Failure> {
    open_member_for(path, true)
}

/// A member that is not there is `NotFound`, one another process holds
/// `Busy` (its lock, or a block device in use: EBUSY), any other failure to
/// open it `Io`.
fn open_member_for(path: &Path, writable: bool) -> Result<Arc<dyn Member>, Failure> {
    if !path.exists() {
        return Err(not_there(path));
    }
    let m = if writable {
        FileMember::open(path)
    } else {
        FileMember::open_read_only(path)
    };
    m.map(|m| Arc::new(m) as Arc<dyn Member>).map_err(|e| {
        let kind = match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::ResourceBusy => ErrorKind::Busy,
            std::io::ErrorKind::NotFound => ErrorKind::NotFound,
            _ => ErrorKind::Io,
        };
        Failure::new(kind, format!("cannot open member {}: {e}", path.display()))
    })
}

fn not_there(path: &Path) -> Failure {
    Failure::new(
        ErrorKind::NotFound,
        format!("member {} does not exist; check the path", path.display()),
    )
}

/// The member paths, each checked to exist and to be listed once (a file
/// given twice, or once through a link, is the same member).
pub fn member_paths(paths: &[String]) -> Result<Vec<PathBuf>, Failure> {
    use std::os::unix::fs::MetadataExt;
    let mut seen: Vec<((u64, u64), String)> = Vec::new();
    let mut out = Vec::new();
    for p in paths {
        let path = split_member(p)?.0;
        let meta = std::fs::metadata(&path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => not_there(&path),
            _ => Failure::new(ErrorKind::Io, format!("member {}: {e}", path.display())),
        })?;
        let id = (meta.dev(), meta.ino());
        if let Some((_, first)) = seen.iter().find(|(i, _)| *i == id) {
            return Err(format!(
                "members {first} and {} are the same file (listed twice, or through a link); give each member once",
                path.display()
            )
            .into());
        }
        seen.push((id, path.display().to_string()));
        out.push(path);
    }
    Ok(out)
}

/// Assemble for writing; members not given are refused unless `degraded`.
pub fn assemble(paths: &[String], degraded: bool) -> Result<Array, Failure> {
    assemble_with(
        paths,
        AssembleOptions {
            degraded,
            ..AssembleOptions::default()
        },
    )
}

pub fn assemble_with(paths: &[String], opts: AssembleOptions) -> Result<Array, Failure> {
    if paths.is_empty() {
        return Err(Failure::new(
            ErrorKind::Usage,
            "give the array's member files",
        ));
    }
    let writable = opts.access == Access::ReadWrite;
    let mut members = Vec::new();
    for p in member_paths(paths)? {
        members.push(open_member_for(&p, writable)?);
    }
    Array::assemble_with(members, opts).map_err(IntoFailure::failure)
}

fn print_warnings(a: &Array) {
    for w in a.warnings() {
        eprintln!("hetraid: warning: {w}");
    }
}

/// What `annex::read_member` says of a device: its superblock and annex.
type MemberRead = (
    hetraid_engine::format::Superblock,
    Option<hetraid_engine::annex::Annex>,
);

/// The exit code of `status --test` for an array in `state`.
pub fn health_code(state: &str) -> i32 {
    match state {
        "optimal" => 0,
        "degraded" | "rebuilding" => 1,
        // Members not given: this command cannot read the array.
        "incomplete" => 4,
        _ => 2,
    }
}

/// Exit now with `code` when it is not 0 (what was printed is flushed).
pub fn exit_with(code: i32) -> Result<(), String> {
    use std::io::Write;
    if code != 0 {
        let _ = std::io::stdout().flush();
        std::process::exit(code);
    }
    Ok(())
}

/// `--member SLOT|PATH`: a slot number, or the path of a member of the
/// array `members` belong to (its superblock says its slot; read without
/// taking its lock, so it works on a served array too).
pub fn slot_of(arg: &str, members: &[String]) -> Result<usize, String> {
    if let Ok(n) = arg.parse::<usize>() {
        return Ok(n);
    }
    let path = split_member(arg)?.0;
    let first = members
        .first()
        .map(|m| split_member(m).map(|x| x.0))
        .transpose()?
        .ok_or("give the array's members")?;
    let want = hetraid_nbd::control::array_uuid(&first);
    let sb = hetraid_engine::identity::Identity::of_path(&path)
        .ok()
        .and_then(|i| i.superblock().cloned())
        .ok_or_else(|| {
            format!(
                "--member {arg}: {} has no hetraid superblock; give the member's slot number instead",
                path.display()
            )
        })?;
    if Some(sb.uuid_string()) != want {
        return Err(format!(
            "--member {arg}: {} belongs to array {}, not to the array of {}",
            path.display(),
            sb.uuid_string(),
            first.display()
        ));
    }
    Ok(sb.member as usize)
}

/// When the array of `members` is being served, run `request` in the server.
pub fn remote(
    members: &[String],
    request: Request,
) -> Option<Result<serde_json::Value, hetraid_core::Failure>> {
    remote_passing(members, request, None)
}

/// When the array of `members` is being served (or held by another
/// command), its status as that process answers it.
pub fn remote_status(
    members: &[String],
) -> Option<Result<hetraid_nbd::control::HeldStatus, hetraid_core::Failure>> {
    remote(members, Request::Status).map(|r| {
        serde_json::from_value(r?)
            .map_err(|e| format!("the server's status: {e}; is it an older hetraid?").into())
    })
}

/// [`remote`], passing the server the new member at `new` as this user
/// opens it (read-write, locked, exclusively for a block device): the
/// server never opens a path on the caller's behalf.
pub fn remote_passing(
    members: &[String],
    request: Request,
    new: Option<&Path>,
) -> Option<Result<serde_json::Value, hetraid_core::Failure>> {
    let first = split_member(members.first()?).ok()?.0;
    let uuid = hetraid_nbd::control::array_uuid(&first)?;
    match hetraid_nbd::control::is_served(&uuid) {
        Ok(false) => return None,
        Ok(true) => {}
        Err(e) => return Some(Err(e.into())),
    }
    // Every path given must be a member of the served array, each once: a
    // verb never acts on the served array because of the first path alone.
    let check = || -> Result<(), String> {
        for p in member_paths(members)? {
            match hetraid_nbd::control::array_uuid(&p) {
                Some(u) if u == uuid => {}
                Some(u) => {
                    return Err(format!(
                        "member {} belongs to array {u}, not to the served array {uuid}",
                        p.display()
                    ))
                }
                None => {
                    return Err(format!(
                    "{} has no hetraid superblock: it is not a member of the served array {uuid}",
                    p.display()
                ))
                }
            }
        }
        Ok(())
    };
    if let Err(e) = check() {
        return Some(Err(e.into()));
    }
    let opened = match new.map(|p| {
        hetraid_engine::member::FileMember::open(p)
            .map_err(|e| format!("cannot open new member {}: {e}", p.display()))
    }) {
        Some(Err(e)) => return Some(Err(e.into())),
        Some(Ok(m)) => Some(m),
        None => None,
    };
    hetraid_nbd::control::remote(
        &first,
        &request.to_value(),
        opened.as_ref().map(|m| m.file()),
    )
}

/// The given paths opened as members (each once).
pub fn open_all(paths: &[String]) -> Result<Vec<Arc<dyn Member>>, Failure> {
    member_paths(paths)?
        .iter()
        .map(|p| open_member(p))
        .collect()
}

fn open_all_read_only(paths: &[String]) -> Result<Vec<Arc<dyn Member>>, Failure> {
    member_paths(paths)?
        .iter()
        .map(|p| open_member_for(p, false))
        .collect()
}

/// `paths` without `p` (a device named by --with is not one of the members
/// the command opens, even when listed among them).
fn without(paths: &[String], p: &Path) -> Vec<String> {
    paths
        .iter()
        .filter(|m| !split_member(m).is_ok_and(|x| same_path(&x.0, p)))
        .cloned()
        .collect()
}

/// Refuse, writing nothing, when members of the array are not among
/// `paths` and `degraded` was not said; `with` (a device that was a member
/// of this array, coming back) and `slot` (named by --member) count as
/// given.
fn check_given_with(
    paths: &[String],
    with: Option<&Path>,
    slot: Option<usize>,
    degraded: bool,
) -> Result<(), String> {
    if degraded {
        return Ok(());
    }
    let given = open_all_read_only(paths)?;
    let a = Array::assemble_with(
        given.clone(),
        AssembleOptions {
            access: Access::Inspect,
            degraded: true,
            force: false,
        },
    )
    .map_err(|e| e.to_string())?;
    let uuid = a.superblock().uuid;
    // The slot a device named by --with held in this array, read from its
    // own superblock (it is not assembled: it may have run apart).
    let returning = with
        .and_then(|p| hetraid_engine::annex::read_member(p).ok())
        .filter(|(sb, _)| sb.uuid == uuid)
        .map(|(sb, _)| sb.member as usize);
    if a.not_given()
        .iter()
        .all(|&s| Some(s) == slot || Some(s) == returning)
    {
        return Ok(());
    }
    Array::check_given(&given, false).map_err(|e| e.to_string())
}

/// [`open_all`] for a command that hands the members to a procedure that
/// assembles them itself: refused, writing nothing, when members of the
/// array were not given and `degraded` was not said.
pub fn open_given(paths: &[String], degraded: bool) -> Result<Vec<Arc<dyn Member>>, Failure> {
    let members = open_all(paths)?;
    Array::check_given(&members, degraded).map_err(IntoFailure::failure)?;
    Ok(members)
}

#[cfg(test)]
mod tests {
    #[test]
    fn utc_dates() {
        assert_eq!(super::utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(super::utc(951_782_400), "2000-02-29 00:00:00 UTC");
        assert_eq!(super::utc(1_795_398_302), "2026-11-23 01:45:02 UTC");
    }
}
