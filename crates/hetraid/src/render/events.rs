//! `hetraid events` and `hetraid monitor`: an array's kept events as lines
//! and as JSON records (the event's fields plus its kind's name, its text and
//! the array it belongs to).

use super::{say, utc, Report};
use hetraid_engine::annex::{Event, EventKind, EVENTS_MAX};
use serde::Serialize;

/// One event as scripts read it: the event's fields, its kind's name and
/// text, and the array it belongs to. `monitor`'s own notices (a test message,
/// a degraded array at start) have no kind or values.
#[derive(Debug, Clone, Serialize)]
pub struct EventRecord {
    pub seq: u64,
    pub time_unix_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<EventKind>,
    pub slot: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub values: Option<[u64; 3]>,
    /// The member's path, or a short detail.
    pub detail: String,
    /// The kind's name (`member-failed`), or the notice's.
    pub event: String,
    /// `Event::text`.
    pub text: String,
    /// The array's UUID and name.
    pub array: String,
    pub name: String,
}

impl EventRecord {
    pub fn new(uuid: &str, name: &str, e: &Event) -> EventRecord {
        EventRecord {
            seq: e.seq,
            time_unix_ms: e.time_unix_ms,
            kind: Some(e.kind),
            slot: e.slot,
            values: Some(e.values),
            detail: e.detail.clone(),
            event: e.kind.as_str().to_string(),
            text: e.text(),
            array: uuid.to_string(),
            name: name.to_string(),
        }
    }

    /// A notice of `monitor`'s own (not an event kept on the members).
    pub fn notice(uuid: &str, name: &str, event: &str, text: String, time_unix_ms: u64) -> Self {
        EventRecord {
            seq: 0,
            time_unix_ms,
            kind: None,
            slot: None,
            values: None,
            detail: String::new(),
            event: event.to_string(),
            text,
            array: uuid.to_string(),
            name: name.to_string(),
        }
    }

    /// `hetraid monitor`'s line: `TIME LABEL KIND: TEXT`.
    pub fn monitor_line(&self, label: &str) -> String {
        format!(
            "{} {label} {}: {}",
            utc(self.time_unix_ms / 1000),
            self.event,
            self.text
        )
    }
}

/// The events kept on an array's members since a sequence number. Its JSON is
/// the list of records.
#[derive(Debug, Clone, Serialize)]
#[serde(transparent)]
pub struct EventsReport {
    pub events: Vec<EventRecord>,
    #[serde(skip)]
    pub uuid: String,
    #[serde(skip)]
    pub name: String,
    /// Events kept, and the last number given.
    #[serde(skip)]
    pub kept: usize,
    #[serde(skip)]
    pub last_seq: u64,
}

impl Report for EventsReport {
    fn text(&self) -> String {
        let mut out = String::new();
        say!(
            out,
            "array {}{}: {} events kept (at most {}), numbered up to {}",
            if self.name.is_empty() {
                String::new()
            } else {
                format!("{} ", self.name)
            },
            self.uuid,
            self.kept,
            EVENTS_MAX,
            self.last_seq
        );
        say!(
            out,
            "{:>5}  {:<23}  {:<16}  what",
            "seq",
            "time (UTC)",
            "event"
        );
        for r in &self.events {
            say!(
                out,
                "{:>5}  {}.{:03}  {:<16}  {}",
                r.seq,
                utc(r.time_unix_ms / 1000).trim_end_matches(" UTC"),
                r.time_unix_ms % 1000,
                r.event,
                r.text
            );
        }
        out
    }
}
