//! `hetraid events` (zpool events), and what `hetraid monitor` (mdadm
//! --monitor, `monitor.rs`) shares with it: both read the events every member keeps (`hetraid_engine::annex`), without
//! assembling the array or taking its members' locks, so they work while the
//! array is served, rebuilt or scrubbed by another process.

pub use crate::cli::events::*;
use crate::render::events::{EventRecord, EventsReport};
use hetraid_engine::annex::{read_member, Annex};
use std::path::PathBuf;

/// The array behind `members`: its UUID, the freshest superblock, the
/// freshest annex. One sentence when none of them can be read.
pub(crate) struct Seen {
    pub uuid: String,
    pub sb: hetraid_engine::format::Superblock,
    pub annex: Option<Annex>,
}

pub(crate) fn look(members: &[PathBuf]) -> Result<Seen, String> {
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

pub(crate) fn paths(members: &[String]) -> Result<Vec<PathBuf>, String> {
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
