//! `hetraid events` (zpool events) and `hetraid monitor` (mdadm --monitor):
//! both read the events every member keeps (`hetraid_engine::annex`), without
//! assembling the array or taking its members' locks, so they work while the
//! array is served, rebuilt or scrubbed by another process.

pub use crate::cli::events::*;
use crate::render::events::{EventRecord, EventsReport};
use hetraid_engine::annex::{read_member, Annex};
use std::path::PathBuf;
use std::time::Duration;

/// The array behind `members`: its UUID, the freshest superblock, the
/// freshest annex. One sentence when none of them can be read.
struct Seen {
    uuid: String,
    sb: hetraid_engine::format::Superblock,
    annex: Option<Annex>,
}

fn look(members: &[PathBuf]) -> Result<Seen, String> {
    let mut best: Option<Seen> = None;
    let mut errors = Vec::new();
    for p in members {
        match read_member(p) {
            Ok((sb, annex)) => {
                if let Some(b) = &best {
                    if b.sb.uuid != sb.uuid {
                        return Err(format!(
                            "{} belongs to array {}, not to array {} of the other members; give the members of one array",
                            p.display(),
                            sb.uuid_string(),
                            b.uuid
                        ));
                    }
                }
                let fresher = best.as_ref().is_none_or(|b| sb.events > b.sb.events);
                let annex = Annex::freshest(
                    best.as_mut()
                        .and_then(|b| b.annex.take())
                        .into_iter()
                        .chain(annex),
                );
                if fresher {
                    best = Some(Seen {
                        uuid: sb.uuid_string(),
                        sb,
                        annex,
                    });
                } else if let Some(b) = best.as_mut() {
                    b.annex = annex;
                }
            }
            Err(e) => errors.push(format!("{}: {e}", p.display())),
        }
    }
    best.ok_or_else(|| {
        format!(
            "no member could be read ({}); check the paths",
            errors.join("; ")
        )
    })
}

fn paths(members: &[String]) -> Result<Vec<PathBuf>, String> {
    members
        .iter()
        .map(|m| super::array::split_member(m).map(|x| x.0))
        .collect()
}

impl EventsCmd {
    pub fn run(&self) -> Result<(), String> {
        let seen = look(&paths(&self.members)?)?;
        let Some(a) = &seen.annex else {
            return Err(format!(
                "array {} keeps no events (created by an older hetraid, or its bitmap fills the metadata zone); they are kept from its next read-write assembly on",
                seen.uuid
            ));
        };
        let report = EventsReport {
            events: a
                .events
                .iter()
                .filter(|e| e.seq > self.since)
                .map(|e| EventRecord::new(&seen.uuid, &a.name, e))
                .collect(),
            uuid: seen.uuid.clone(),
            name: a.name.clone(),
            kept: a.events.len(),
            last_seq: a.next_seq.saturating_sub(1),
        };
        crate::render::emit(&report, self.json)
    }
}

impl MonitorCmd {
    pub fn run(&self) -> Result<(), String> {
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
        let members = paths(&self.members)?;
        let seen = look(&members)?;
        let name = seen
            .annex
            .as_ref()
            .map_or_else(String::new, |a| a.name.clone());
        let label = if name.is_empty() {
            seen.uuid.clone()
        } else {
            name.clone()
        };
        // Only events from now on; what happened before is `hetraid events`.
        let mut last = seen
            .annex
            .as_ref()
            .map_or(0, |a| a.next_seq.saturating_sub(1));
        let synthetic = |kind: &str, text: String| {
            EventRecord::notice(
                &seen.uuid,
                &name,
                kind,
                text,
                hetraid_engine::annex::now_ms(),
            )
        };
        if self.test {
            self.report(
                &label,
                &synthetic("test_message", "test message from hetraid monitor".into()),
            )?;
        }
        let out: Vec<usize> = seen
            .sb
            .roles
            .iter()
            .enumerate()
            .filter(|(_, r)| r.state != hetraid_engine::format::RoleState::Active)
            .map(|(i, _)| i)
            .collect();
        if !out.is_empty() {
            self.report(
                &label,
                &synthetic(
                    "degraded_array",
                    format!("array is degraded: members {out:?} are not active"),
                ),
            )?;
        }
        if self.oneshot {
            return Ok(());
        }
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            signal_hook::flag::register(sig, stop.clone()).map_err(|e| e.to_string())?;
        }
        let mut warned = false;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let step = Duration::from_millis(50);
            let mut waited = Duration::ZERO;
            while waited < Duration::from_secs_f64(self.delay)
                && !stop.load(std::sync::atomic::Ordering::Relaxed)
            {
                std::thread::sleep(step);
                waited += step;
            }
            let seen = match look(&members) {
                Ok(s) => s,
                Err(e) => {
                    if !warned {
                        eprintln!("hetraid: monitor: {e}; trying again every {} s", self.delay);
                        warned = true;
                    }
                    continue;
                }
            };
            warned = false;
            let Some(a) = &seen.annex else { continue };
            if a.events.front().is_some_and(|e| e.seq > last + 1) && last > 0 {
                eprintln!(
                    "hetraid: monitor: events {} to {} were dropped before they were seen (more than {} events between looks)",
                    last + 1,
                    a.events.front().unwrap().seq - 1,
                    hetraid_engine::annex::EVENTS_MAX
                );
            }
            let since = last;
            for e in a.events.iter().filter(|e| e.seq > since) {
                self.report(&label, &EventRecord::new(&seen.uuid, &a.name, e))?;
                last = e.seq;
            }
        }
        Ok(())
    }

    /// Print one event and run the program for it.
    fn report(&self, label: &str, r: &EventRecord) -> Result<(), String> {
        let kind = r.event.as_str();
        let path = match r.slot {
            Some(_) => r.detail.as_str(),
            None => "",
        };
        let v = serde_json::to_value(r).map_err(|e| e.to_string())?;
        match self.json {
            true => println!("{v}"),
            false => println!("{}", r.monitor_line(label)),
        }
        use std::io::Write;
        let _ = std::io::stdout().flush();
        let Some(p) = &self.program else {
            return Ok(());
        };
        let mut cmd = std::process::Command::new(p);
        cmd.arg(kind).arg(label);
        if !path.is_empty() {
            cmd.arg(path);
        }
        cmd.env("HETRAID_EVENT", kind)
            .env("HETRAID_ARRAY", &r.array)
            .env("HETRAID_NAME", &r.name)
            .env(
                "HETRAID_SLOT",
                r.slot.map_or_else(String::new, |s| s.to_string()),
            )
            .env("HETRAID_PATH", path)
            .env("HETRAID_TEXT", &r.text)
            .env("HETRAID_EVENT_JSON", v.to_string())
            .stdin(std::process::Stdio::null());
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                eprintln!("hetraid: monitor: cannot run {}: {e}", p.display());
                return Ok(());
            }
        };
        // Bounded: a program that hangs is killed after a minute.
        let t0 = std::time::Instant::now();
        loop {
            match child.try_wait() {
                Ok(Some(st)) if !st.success() => {
                    eprintln!("hetraid: monitor: {} {kind} exited with {st}", p.display());
                    break;
                }
                Ok(Some(_)) => break,
                Ok(None) if t0.elapsed() > Duration::from_secs(60) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    eprintln!(
                        "hetraid: monitor: {} {kind} ran over 60 s and was killed",
                        p.display()
                    );
                    break;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(e) => {
                    eprintln!("hetraid: monitor: {}: {e}", p.display());
                    break;
                }
            }
        }
        Ok(())
    }
}
