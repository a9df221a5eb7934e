//! `hetraid monitor` (mdadm --monitor): watch arrays' events on their
//! members and report each — printed, to syslog, by mail, to a program —
//! with array-level notices when an array becomes degraded or failed (at
//! start, or after). `--scan` watches every array of the configuration
//! file and every array its devices hold.

pub use crate::cli::events::MonitorCmd;
use crate::render::events::EventRecord;
use hetraid_engine::annex::now_ms;
use std::path::PathBuf;
use std::time::Duration;

use super::events::{look, paths};

/// Where `--mail` hands its messages when no `sendmail` is on the PATH
/// (mdadm's choice).
const SENDMAIL: &str = "/usr/sbin/sendmail";

/// The `sendmail` to run: the first on the PATH, else SENDMAIL.
fn sendmail() -> Option<PathBuf> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join("sendmail"))
        .chain(std::iter::once(PathBuf::from(SENDMAIL)))
        .find(|p| p.is_file())
}
/// A program or sendmail that runs longer is killed.
const CHILD_SECONDS_MAX: u64 = 60;

/// One array watched: where its members are, and what was seen of it.
struct Watched {
    members: Vec<PathBuf>,
    uuid: String,
    name: String,
    /// The last event number reported.
    last_seq: u64,
    /// The health last seen (`recorded_health`).
    health: &'static str,
    /// Unreadable members were said once (until they read again).
    warned: bool,
    /// The superblock of the first look (the notices at start).
    sb: hetraid_engine::format::Superblock,
}

impl Watched {
    fn label(&self) -> &str {
        match self.name.as_str() {
            "" => &self.uuid,
            n => n,
        }
    }

    fn notice(&self, event: &str, text: String) -> EventRecord {
        EventRecord::notice(&self.uuid, &self.name, event, text, now_ms())
    }
}

/// The array-level notice for a health, if it needs one (mdadm's
/// DegradedArray; hetraid says failed apart), naming the slots out.
fn health_notice(
    health: &str,
    sb: &hetraid_engine::format::Superblock,
) -> Option<(&'static str, String)> {
    let out: Vec<String> = sb
        .roles
        .iter()
        .enumerate()
        .filter(|(_, r)| r.state != hetraid_engine::format::RoleState::Active)
        .map(|(i, r)| format!("{i} {}", r.state.as_str()))
        .collect();
    let out = out.join(", ");
    match health {
        "degraded" | "rebuilding" => Some((
            "degraded_array",
            format!("array is degraded: members out of service: {out}"),
        )),
        "failed" => Some((
            "failed_array",
            format!("array has failed: more members are out than it can do without: {out}"),
        )),
        _ => None,
    }
}

/// Does this record call for a mail (mdadm mails Fail, DegradedArray,
/// TestMessage and the like, not every rebuild step)?
fn mail_worthy(r: &EventRecord) -> bool {
    r.kind.is_some_and(|k| k.is_alarm())
        || matches!(
            r.event.as_str(),
            "degraded_array" | "failed_array" | "test_message"
        )
}

impl MonitorCmd {
    fn check_options(&self) -> Result<(), String> {
        if !(0.05..=86_400.0).contains(&self.delay) {
            return Err(format!(
                "--delay {} is out of range: give 0.05 to 86400 seconds",
                self.delay
            ));
        }
        if let Some(p) = &self.program {
            if !p.exists() {
                return Err(format!(
                    "--program {} does not exist; give the path of an executable",
                    p.display()
                ));
            }
        }
        if let Some(a) = &self.mail {
            if a.is_empty() || a.contains(char::is_whitespace) || a.starts_with('-') {
                return Err(format!("--mail {a} is not a mail address"));
            }
            if sendmail().is_none() {
                return Err(format!(
                    "--mail needs sendmail (on the PATH or {SENDMAIL}: install a mail transfer agent, e.g. postfix or msmtp-mta), which is absent"
                ));
            }
        }
        if self.daemonise && self.oneshot {
            return Err(
                "--daemonise applies to a monitor that keeps running, not to --oneshot".into(),
            );
        }
        match (self.scan, self.members.is_empty()) {
            (true, false) => Err(
                "--scan watches the arrays of the configuration file; give no members with it"
                    .into(),
            ),
            (false, true) => Err("give the array's members, its name, or --scan".into()),
            _ => Ok(()),
        }
    }

    /// The arrays to watch: the members given, or with `--scan` every array
    /// of the configuration file and of its devices.
    fn arrays(&self) -> Result<Vec<Vec<PathBuf>>, String> {
        if !self.scan {
            return Ok(vec![paths(&self.members)?]);
        }
        let loaded = crate::config::Config::load(self.config.as_deref())?;
        let places = super::array::names::scan_places(&loaded)?;
        let mut arrays: Vec<(String, Vec<PathBuf>)> = Vec::new();
        for e in &loaded.config.arrays {
            if !e.members.is_empty() {
                arrays.push((
                    e.uuid.to_ascii_lowercase(),
                    e.members.iter().map(PathBuf::from).collect(),
                ));
            }
        }
        for a in super::array::names::scan_arrays(&places) {
            if !arrays.iter().any(|(u, _)| u.eq_ignore_ascii_case(&a.uuid)) {
                arrays.push((a.uuid, a.paths.iter().map(PathBuf::from).collect()));
            }
        }
        if arrays.is_empty() {
            return Err(format!(
                "no array to watch: {} lists none with members and none was found in {}",
                loaded.path.display(),
                match loaded.config.devices.is_empty() {
                    true => "the block devices of /proc/partitions".to_string(),
                    false => loaded.config.devices.join(", "),
                }
            ));
        }
        Ok(arrays.into_iter().map(|(_, m)| m).collect())
    }

    pub fn run(&self) -> Result<(), String> {
        self.check_options()?;
        let mut watched = Vec::new();
        for members in self.arrays()? {
            let seen = look(&members)?;
            let name = seen
                .annex
                .as_ref()
                .map_or_else(String::new, |a| a.name.clone());
            watched.push(Watched {
                // Only events from now on; what happened before is `hetraid events`.
                last_seq: seen
                    .annex
                    .as_ref()
                    .map_or(0, |a| a.next_seq.saturating_sub(1)),
                health: hetraid_engine::array::recorded_health(&seen.sb)
                    .map_err(|e| e.to_string())?,
                uuid: seen.uuid,
                name,
                members,
                warned: false,
                sb: seen.sb,
            });
        }
        for w in &watched {
            if self.test {
                let r = w.notice("test_message", "test message from hetraid monitor".into());
                self.report(w.label(), &r)?;
            }
            if let Some((event, text)) = health_notice(w.health, &w.sb) {
                self.report(w.label(), &w.notice(event, text))?;
            }
        }
        if self.oneshot {
            return Ok(());
        }
        if self.daemonise {
            daemonise()?;
        }
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            signal_hook::flag::register(sig, stop.clone()).map_err(|e| e.to_string())?;
        }
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let step = Duration::from_millis(50);
            let mut waited = Duration::ZERO;
            while waited < Duration::from_secs_f64(self.delay)
                && !stop.load(std::sync::atomic::Ordering::Relaxed)
            {
                std::thread::sleep(step);
                waited += step;
            }
            for w in &mut watched {
                self.look_again(w)?;
            }
        }
        Ok(())
    }

    /// One look at an array: its new events, and a notice when its health
    /// turned degraded or failed since the last look.
    fn look_again(&self, w: &mut Watched) -> Result<(), String> {
        let seen = match look(&w.members) {
            Ok(s) => s,
            Err(e) => {
                if !w.warned {
                    eprintln!(
                        "hetraid: monitor: {}: {e}; trying again every {} s",
                        w.label(),
                        self.delay
                    );
                    w.warned = true;
                }
                return Ok(());
            }
        };
        w.warned = false;
        if let Some(a) = &seen.annex {
            let first = a.events.front().map_or(0, |e| e.seq);
            if first > w.last_seq + 1 && w.last_seq > 0 {
                eprintln!(
                    "hetraid: monitor: {}: events {} to {} were dropped before they were seen (more than {} events between looks)",
                    w.label(),
                    w.last_seq + 1,
                    first - 1,
                    hetraid_engine::annex::EVENTS_MAX
                );
            }
            let since = w.last_seq;
            for e in a.events.iter().filter(|e| e.seq > since) {
                self.report(w.label(), &EventRecord::new(&seen.uuid, &a.name, e))?;
                w.last_seq = e.seq;
            }
        }
        if let Ok(h) = hetraid_engine::array::recorded_health(&seen.sb) {
            if h != w.health {
                w.health = h;
                if let Some((event, text)) = health_notice(h, &seen.sb) {
                    self.report(w.label(), &w.notice(event, text))?;
                }
            }
        }
        Ok(())
    }

    /// Report one event: printed, and to syslog, mail and the program when
    /// asked.
    fn report(&self, label: &str, r: &EventRecord) -> Result<(), String> {
        let v = serde_json::to_value(r).map_err(|e| e.to_string())?;
        match self.json {
            true => println!("{v}"),
            false => println!("{}", r.monitor_line(label)),
        }
        use std::io::Write;
        let _ = std::io::stdout().flush();
        if self.syslog {
            syslog(mail_worthy(r), &format!("{label} {}: {}", r.event, r.text));
        }
        if let Some(to) = self.mail.as_deref().filter(|_| mail_worthy(r)) {
            let subject = format!("hetraid: {} on {label}", r.event);
            let body = format!(
                "To: {to}\nSubject: {subject}\n\n{}\n\nArray {} ({}), event {}.\n\n{v}\n",
                r.text, label, r.array, r.event
            );
            let mut cmd =
                std::process::Command::new(sendmail().unwrap_or_else(|| PathBuf::from(SENDMAIL)));
            cmd.arg("-t");
            run_bounded(cmd, Some(body.as_bytes()), "sendmail");
        }
        let Some(p) = &self.program else {
            return Ok(());
        };
        let path = match r.slot {
            Some(_) => r.detail.as_str(),
            None => "",
        };
        let mut cmd = std::process::Command::new(p);
        cmd.arg(&r.event).arg(label);
        if !path.is_empty() {
            cmd.arg(path);
        }
        cmd.env("HETRAID_EVENT", &r.event)
            .env("HETRAID_ARRAY", &r.array)
            .env("HETRAID_NAME", &r.name)
            .env(
                "HETRAID_SLOT",
                r.slot.map_or_else(String::new, |s| s.to_string()),
            )
            .env("HETRAID_PATH", path)
            .env("HETRAID_TEXT", &r.text)
            .env("HETRAID_EVENT_JSON", v.to_string());
        run_bounded(cmd, None, &format!("{} {}", p.display(), r.event));
        Ok(())
    }
}

/// Run `cmd` with `stdin` (or none), waiting at most CHILD_SECONDS_MAX: a
/// failure is said on stderr, never stops the monitor.
fn run_bounded(mut cmd: std::process::Command, stdin: Option<&[u8]>, what: &str) {
    use std::io::Write;
    use std::process::Stdio;
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("hetraid: monitor: cannot run {what}: {e}");
            return;
        }
    };
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        let _ = pipe.write_all(text);
    }
    let t0 = std::time::Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(st)) if !st.success() => {
                eprintln!("hetraid: monitor: {what} exited with {st}");
                return;
            }
            Ok(Some(_)) => return,
            Ok(None) if t0.elapsed() > Duration::from_secs(CHILD_SECONDS_MAX) => {
                let _ = child.kill();
                let _ = child.wait();
                eprintln!("hetraid: monitor: {what} ran over {CHILD_SECONDS_MAX} s and was killed");
                return;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => {
                eprintln!("hetraid: monitor: {what}: {e}");
                return;
            }
        }
    }
}

/// One line to the system log (facility daemon; alarms as warnings).
/// libc's syslog(3): the one interface every syslog daemon and journald
/// take, no crate needed for one call.
fn syslog(alarm: bool, line: &str) {
    static OPEN: std::sync::Once = std::sync::Once::new();
    OPEN.call_once(|| {
        // SAFETY: the ident is a 'static NUL-terminated string, as openlog
        // keeps the pointer.
        unsafe { libc::openlog(c"hetraid".as_ptr(), libc::LOG_PID, libc::LOG_DAEMON) };
    });
    let Ok(msg) = std::ffi::CString::new(line.replace('\0', " ")) else {
        return;
    };
    let prio = if alarm {
        libc::LOG_WARNING
    } else {
        libc::LOG_INFO
    };
    // SAFETY: a "%s" format with one NUL-terminated argument that outlives
    // the call.
    unsafe { libc::syslog(prio, c"%s".as_ptr(), msg.as_ptr()) };
}

/// Go to the background (mdadm --daemonise): fork, the parent prints the
/// child's pid and exits, the child leaves the terminal's session and its
/// standard streams go to /dev/null. Called before any thread starts.
fn daemonise() -> Result<(), String> {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    // SAFETY: the process has one thread here (no signal handler thread,
    // no pool), so the child may go on running Rust code after fork.
    match unsafe { libc::fork() } {
        -1 => Err(format!(
            "--daemonise: fork failed: {}",
            std::io::Error::last_os_error()
        )),
        0 => {
            rustix::process::setsid().map_err(|e| format!("--daemonise: setsid: {e}"))?;
            let null = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open("/dev/null")
                .map_err(|e| format!("--daemonise: /dev/null: {e}"))?;
            for dup in [
                rustix::stdio::dup2_stdin::<&std::fs::File>,
                rustix::stdio::dup2_stdout::<&std::fs::File>,
                rustix::stdio::dup2_stderr::<&std::fs::File>,
            ] {
                dup(&null).map_err(|e| format!("--daemonise: {e}"))?;
            }
            Ok(())
        }
        child => {
            println!("{child}");
            std::process::exit(0);
        }
    }
}
