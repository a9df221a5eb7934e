//! Where the log goes: `tracing` events on stderr, either as the lines
//! hetraid always printed (`hetraid: ...`, `hetraid: warning: ...`) or as
//! one JSON object per line (`serve --log-format json`) for log shippers.
//!
//! The engine records array events (`hetraid::event`: failures, rebuilds,
//! scrubs, spares) and progress (`hetraid::progress`) through `tracing`.
//! `serve` prints them — that is its job; the other verbs print their own
//! results and leave those two targets out.

use std::fmt;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::fmt::{format::Writer, FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::prelude::*;
use tracing_subscriber::registry::LookupSpan;

/// `hetraid: MESSAGE` (warnings: `hetraid: warning: MESSAGE`), the fields
/// left out: the message says it all for people.
struct Human;

struct Message(String);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0 = value.to_string();
        }
    }
}

impl<S, N> FormatEvent<S, N> for Human
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut w: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut m = Message(String::new());
        event.record(&mut m);
        let level = *event.metadata().level();
        let warn = if level == Level::WARN && !m.0.starts_with("warning: ") {
            "warning: "
        } else {
            ""
        };
        writeln!(w, "hetraid: {warn}{}", m.0)
    }
}

/// Install the subscriber for this process. `events`: print the engine's
/// array events and progress too (serve).
pub fn init(json: bool, events: bool) {
    // rustls warns of every client that puts an IP address in SNI (libnbd
    // does when given one): noise, one line per connection. Its other
    // warnings (alerts received) stay.
    let mut filter = Targets::new()
        .with_default(LevelFilter::INFO)
        .with_target("rustls::msgs::handshake", LevelFilter::ERROR);
    if !events {
        filter = filter
            .with_target("hetraid::event", LevelFilter::OFF)
            .with_target("hetraid::progress", LevelFilter::OFF);
    }
    let r = if json {
        tracing_subscriber::registry()
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .flatten_event(true)
                    .with_current_span(false)
                    .with_span_list(false)
                    .with_writer(std::io::stderr)
                    .with_filter(filter),
            )
            .try_init()
    } else {
        tracing_subscriber::registry()
            .with(
                tracing_subscriber::fmt::layer()
                    .event_format(Human)
                    .with_writer(std::io::stderr)
                    .with_filter(filter),
            )
            .try_init()
    };
    // Only fails when a subscriber is set already: keep that one.
    let _ = r;
}
