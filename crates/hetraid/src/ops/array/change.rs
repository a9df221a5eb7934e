//! Changes that move data: `grow`, `shrink` (offline and served), their
//! speed, progress bars and reports.

#[allow(unused_imports)]
use super::*;
pub use crate::cli::array::change::*;
use hetraid_engine::error::IntoFailure;

impl ChangeSpeed {
    /// For a control request (MD's defaults where none is given).
    pub(crate) fn request(&self) -> Speed {
        let md = hetraid_core::pace::MD_DEFAULT;
        Speed {
            min_speed: Some(self.min_speed.unwrap_or(md.min_bps)),
            max_speed: Some(self.max_speed.unwrap_or(md.max_bps)),
        }
    }

    /// Offline, the limits do not apply to the hidden `--batches` path:
    /// an error when given.
    fn offline(&self) -> Result<(), String> {
        if self.min_speed.is_some() || self.max_speed.is_some() {
            return Err("--min-speed and --max-speed do not go with --batches".into());
        }
        Ok(())
    }

    /// Offline: no client I/O to yield to, so unlimited unless a limit is
    /// given.
    /// Batches per assembly offline: one when a limit is given (the pacer
    /// runs between assemblies), more otherwise.
    fn batches_per_swap(&self) -> u64 {
        if self.min_speed.is_some() || self.max_speed.is_some() {
            hetraid_core::limits::SERVED_BATCHES_PER_SWAP
        } else {
            hetraid_core::limits::OFFLINE_BATCHES_PER_SWAP
        }
    }

    pub(crate) fn offline_options(&self) -> hetraid_engine::ChangeOptions {
        hetraid_engine::ChangeOptions {
            min_speed: self.min_speed.unwrap_or(0),
            max_speed: self.max_speed.unwrap_or(0),
        }
    }
}

/// A change report from the server's JSON.
pub(crate) fn remote_change(v: serde_json::Value) -> Result<hetraid_engine::ChangeReport, String> {
    serde_json::from_value(v).map_err(|e| format!("the server's change report: {e}"))
}

impl GrowCmd {
    /// The resume of a grow (`grow MEMBERS...`) given the new device that
    /// a kill left without a superblock (before the grow began): the exact
    /// command that starts it again.
    fn new_member_without_superblock(&self) -> Result<(), String> {
        let Some((new, rest, fresh)) = one_blank_member(&self.members)? else {
            return Ok(());
        };
        // A grow writes the new device first, then records itself on the
        // others: a blank device beside members with nothing recorded is a
        // grow killed before it began.
        let changing = fresh.reshape.is_some()
            || fresh
                .raidx_history
                .as_ref()
                .is_some_and(|h| h.pending.is_some());
        if changing {
            return Ok(());
        }
        Err(format!(
            "{new} carries no hetraid superblock, and no grow is recorded on the other members: a grow adding it was cut short before it began; start it again with: hetraid grow {} --add {new}",
            rest.join(" ")
        ))
    }

    pub fn run(&self) -> Result<(), hetraid_core::Failure> {
        if let Some(add) = &self.add {
            let (p, _) = split_member(add)?;
            if self
                .members
                .iter()
                .any(|m| split_member(m).is_ok_and(|(q, _)| same_path(&q, &p)))
            {
                return Err(format!(
                    "{} is already listed as a member; --add takes a new device",
                    p.display()
                )
                .into());
            }
        }
        if self.force && self.add.is_none() {
            return Err("--force applies with --add only".into());
        }
        if self.add.is_none() && self.weights.is_none() && self.size.is_none() {
            self.new_member_without_superblock()?;
        }
        if let Some(sz) = &self.size {
            return self.grow_to_max(sz).map_err(Into::into);
        }
        if self.batches.is_some() && remote(&self.members, Request::Status).is_some() {
            return Err("--batches applies to an array that is not served".into());
        }
        let (mut add, mut add_kind) = (None, None);
        if let Some(new) = &self.add {
            let (p, kind) = split_member(new)?;
            if !p.exists() {
                return Err(hetraid_core::Failure::new(
                    hetraid_core::ErrorKind::NotFound,
                    format!("new member {} does not exist; check the path", p.display()),
                ));
            }
            add = Some(
                std::path::absolute(&p)
                    .map_err(IntoFailure::failure)?
                    .display()
                    .to_string(),
            );
            add_kind = Some(kind_of(&p, kind).as_str().to_string());
        }
        let req = Request::Grow {
            add,
            kind: add_kind,
            weights: self.weights.clone(),
            size: None,
            force: self.force,
            speed: self.speed.request(),
        };
        let new_path = match &self.add {
            Some(add) => {
                Some(std::path::absolute(split_member(add)?.0).map_err(IntoFailure::failure)?)
            }
            None => None,
        };
        let bar = StatusBar::start(&self.members, "change");
        let served = remote_passing(&self.members, req, new_path.as_deref());
        drop(bar);
        if let Some(r) = served {
            return crate::render::emit(&remote_change(r?)?, self.json).map_err(Into::into);
        }
        if self.batches.is_none() {
            return self.grow_held().map_err(Into::into);
        }
        self.speed.offline()?;
        let given = open_given(&self.members, self.degraded)?;
        let all = match (&self.add, &self.weights) {
            (None, None) => given,
            (add, weights) => {
                let new = add.as_deref().map(opened_new_member).transpose()?;
                Array::prepare_grow(given, new, weights.clone(), self.force)
                    .map_err(IntoFailure::failure)?
            }
        };
        let r = match Array::resume_change(all, self.batches).map_err(IntoFailure::failure)? {
            Some(r) => r,
            None if self.batches.is_some() => {
                println!(
                    "stopped after {} batches; the change stays recorded",
                    self.batches.unwrap_or(0)
                );
                return Ok(());
            }
            None => {
                return Err(
                    "no grow or shrink is in progress: give --add NEW to add a member".into(),
                )
            }
        };
        crate::render::emit(&r, self.json).map_err(Into::into)
    }

    /// `grow --size max`: every member used whole (the members grew under
    /// the array), served or not.
    fn grow_to_max(&self, sz: &str) -> Result<(), String> {
        if sz != "max" {
            return Err(format!(
                "--size {sz}: grow takes --size max (every member used whole)"
            ));
        }
        if self.add.is_some() || self.weights.is_some() || self.batches.is_some() {
            return Err(
                "--size max goes alone: give --add or --weights in a grow of their own".into(),
            );
        }
        let req = Request::Grow {
            add: None,
            kind: None,
            weights: None,
            size: Some("max".into()),
            force: false,
            speed: self.speed.request(),
        };
        let rs: Vec<hetraid_engine::ChangeReport> = match remote(&self.members, req) {
            Some(r) => match r? {
                serde_json::Value::Array(v) => {
                    v.into_iter().map(remote_change).collect::<Result<_, _>>()?
                }
                other => return Err(format!("unexpected reply from the server: {other}")),
            },
            None => {
                let held = Held::open(&self.members, "grow", self.degraded)?;
                held.cell
                    .set_batches_per_swap(self.speed.batches_per_swap());
                let r = held
                    .cell
                    .enlarge(self.speed.offline_options())
                    .map_err(|e| e.to_string());
                held.close()?;
                r?
            }
        };
        if rs.is_empty() {
            println!("every member is used whole already: nothing to grow");
        }
        if self.json {
            return crate::ops::print_json(&serde_json::to_value(&rs).map_err(|e| e.to_string())?);
        }
        for r in &rs {
            crate::render::emit(r, false)?;
        }
        Ok(())
    }

    /// A grow held with a control socket, run by the served path's code (a
    /// few batches per assembly): status from another shell sees it.
    fn grow_held(&self) -> Result<(), String> {
        // Held with a control socket, run by the served path's code (a
        // few batches per assembly): status from another shell sees it.
        let held = Held::open(&self.members, "grow", self.degraded)?;
        held.cell
            .set_batches_per_swap(self.speed.batches_per_swap());
        let opts = self.speed.offline_options();
        let bar = StatusBar::start(&self.members, "change");
        let r = match (&self.add, &self.weights) {
            (None, None) => held
                .cell
                .resume(opts)
                .map_err(|e| e.to_string())
                .and_then(|r| {
                    r.ok_or_else(|| {
                        "no grow or shrink is in progress: give --add NEW to add a member".into()
                    })
                }),
            (add, weights) => {
                let new = add.as_deref().map(opened_new_member).transpose()?;
                held.cell
                    .grow(new, weights.clone(), self.force, opts)
                    .map_err(|e| e.to_string())
            }
        };
        drop(bar);
        held.close()?;
        crate::render::emit(&r?, self.json)
    }
}

impl ShrinkCmd {
    pub fn run(&self) -> Result<(), hetraid_core::Failure> {
        let req = Request::Shrink {
            member: slot_of(&self.member, &self.members)?,
            size: self.size,
            force: self.force,
            speed: self.speed.request(),
        };
        let bar = StatusBar::start(&self.members, "change");
        let served = remote(&self.members, req);
        drop(bar);
        if let Some(r) = served {
            return crate::render::emit(&remote_change(r?)?, self.json).map_err(Into::into);
        }
        let slot = slot_of(&self.member, &self.members)?;
        let held = Held::open(&self.members, "shrink", self.degraded)?;
        held.cell
            .set_batches_per_swap(self.speed.batches_per_swap());
        let bar = StatusBar::start(&self.members, "change");
        let r = held
            .cell
            .shrink_remove(slot, self.size, self.force, self.speed.offline_options())
            .map_err(|e| e.to_string());
        drop(bar);
        held.close()?;
        crate::render::emit(&r?, self.json).map_err(Into::into)
    }
}

/// A progress bar with rate and ETA (per member bytes), on stderr.
pub(crate) fn progress_bar(what: &str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template(&format!(
            "{what} [{{bar:30}}] {{percent:>3}}% {{binary_bytes}}/{{binary_total_bytes}} {{binary_bytes_per_sec}} eta {{eta}}"
        ))
        .unwrap()
        .progress_chars("=> "),
    );
    bar
}

/// An array held by this command for a long operation, with a control
/// socket open meanwhile: `status` (progress, rate, ETA), `fail`,
/// `replace`... from another shell reach this process as they reach a
/// served array.
pub struct Held {
    pub cell: Arc<hetraid_engine::ArrayCell>,
    stop: Arc<hetraid_nbd::Stop>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Held {
    pub fn open(paths: &[String], role: &'static str, degraded: bool) -> Result<Self, String> {
        let members = open_given(paths, degraded)?;
        let a = Array::assemble(members.clone()).map_err(|e| e.to_string())?;
        // `iostat` from another shell sees the members work.
        a.measure_io();
        let uuid = a.status().uuid;
        let cell = Arc::new(hetraid_engine::ArrayCell::new(
            Arc::new(a),
            members,
            Box::new(|a| {
                a.measure_io();
                Ok(())
            }),
        ));
        let stop =
            hetraid_nbd::Stop::new().map_err(|e| format!("cannot make a stop signal: {e}"))?;
        let thread = {
            let (cell, stop) = (cell.clone(), stop.clone());
            std::thread::spawn(move || {
                if let Err(e) = hetraid_nbd::control::serve_control_for(cell, &uuid, stop, role) {
                    eprintln!("hetraid: warning: no control socket ({e}): status from another shell cannot see this {role}");
                }
            })
        };
        Ok(Self {
            cell,
            stop,
            thread: Some(thread),
        })
    }

    /// Close the control socket, then the array.
    pub fn close(mut self) -> Result<Arc<Array>, String> {
        self.stop.stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.cell.stop();
        let a = self.cell.current();
        a.close().map_err(|e| e.to_string())?;
        Ok(a)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.stop.stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Run a long `request` on a served array; on a terminal, draw a progress
/// bar from the server's status meanwhile (another control connection,
/// once a second).
pub(crate) fn remote_with_bar(
    members: &[String],
    request: Request,
    what: &'static str,
) -> Option<Result<serde_json::Value, hetraid_core::Failure>> {
    let first = split_member(members.first()?).ok()?.0;
    let uuid = hetraid_nbd::control::array_uuid(&first)?;
    if !matches!(hetraid_nbd::control::is_served(&uuid), Ok(true)) {
        return remote(members, request);
    }
    let bar = StatusBar::start(members, what);
    let r = remote(members, request);
    drop(bar);
    r
}

/// A progress bar on a terminal for a long operation another thread or
/// process runs: it polls the array's control socket (a server, or this
/// command's own `Held`) once a second. `what`: "rebuild", "scrub", or
/// "change" (a grow or shrink: chunk moves).
pub(crate) struct StatusBar {
    done: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl StatusBar {
    pub(crate) fn start(members: &[String], what: &'static str) -> Self {
        use std::io::IsTerminal;
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let thread = std::io::stderr().is_terminal().then(|| {
            let (done, members) = (done.clone(), members.to_vec());
            std::thread::spawn(move || {
                let bar = progress_bar(what);
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    if let Some(Ok(h)) = remote_status(&members) {
                        let chunk = h.status.chunk_bytes;
                        match (&h.status.progress, &h.status.change) {
                            (Some(p), _) if p.op == what => {
                                bar.set_length(p.stripes_total * chunk);
                                bar.set_position(p.bytes_done);
                            }
                            (_, Some(c)) if what == "change" => {
                                bar.set_length(c.moves * chunk);
                                bar.set_position(c.moves_done * chunk);
                            }
                            _ => {}
                        }
                    }
                    for _ in 0..20 {
                        if done.load(std::sync::atomic::Ordering::Relaxed) {
                            break;
                        }
                        std::thread::sleep(std::time::Duration::from_millis(50));
                    }
                }
                bar.finish_and_clear();
            })
        });
        Self { done, thread }
    }
}

impl Drop for StatusBar {
    fn drop(&mut self) {
        self.done.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The device `--add NEW[:kind]` names, opened, and its kind (as said, else
/// the kernel's, else a disk).
fn opened_new_member(add: &str) -> Result<(Arc<dyn Member>, MemberKind), Failure> {
    let (p, kind) = split_member(add)?;
    Ok((open_member(&p)?, kind_of(&p, kind)))
}
