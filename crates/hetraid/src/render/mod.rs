//! How reports are shown: one text and one JSON renderer per report. A verb
//! computes a typed report (the engine's `ChangeReport`, `RebuildReport`,
//! `CopyBackReport`, a status); this module turns it into the lines a user
//! reads or the JSON a script parses (serde's, so the fields are the
//! report's). Renderers are pure: they return the text, and tests read it.

pub mod advise;
pub mod analyze;
pub mod events;
pub mod iostat;
pub mod layout;
pub mod metrics;
pub mod plan;
pub mod reports;
pub mod sim;
pub mod status;
pub mod trace;

pub use status::{progress_line, rebuild_command, status_text, utc};

/// Writing a line into a `String` cannot fail.
macro_rules! say {
    ($out:expr, $($arg:tt)*) => {{
        use std::fmt::Write as _;
        let _ = writeln!($out, $($arg)*);
    }};
}
pub(crate) use say;

/// A report a verb prints: its text renderer (JSON is its serde form).
pub trait Report: serde::Serialize {
    /// The lines a user reads, each ending in a newline.
    fn text(&self) -> String;
}

/// Print `r` as text, or as one pretty JSON document with `json`.
pub fn emit<R: Report + ?Sized>(r: &R, json: bool) -> Result<(), String> {
    match json {
        true => print_json(&serde_json::to_value(r).map_err(|e| e.to_string())?),
        false => {
            print!("{}", r.text());
            Ok(())
        }
    }
}

/// Print `r` as text, or as one pretty JSON document with its fields in the
/// order the report declares them (`emit` sorts them).
pub fn emit_in_order<R: Report + ?Sized>(r: &R, json: bool) -> Result<(), String> {
    match json {
        true => println!(
            "{}",
            serde_json::to_string_pretty(r).map_err(|e| e.to_string())?
        ),
        false => print!("{}", r.text()),
    }
    Ok(())
}

/// One JSON document, pretty-printed.
pub fn print_json(v: &serde_json::Value) -> Result<(), String> {
    println!(
        "{}",
        serde_json::to_string_pretty(v).map_err(|e| e.to_string())?
    );
    Ok(())
}
