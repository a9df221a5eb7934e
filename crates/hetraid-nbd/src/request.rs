//! The control protocol's requests, typed: one JSON object a line, `verb`
//! naming the request, its fields beside it. The server decodes every
//! request into [`Request`] (a field of the wrong type, a missing one or an
//! unknown verb is a usage error with serde's sentence), and the command
//! line builds its requests from it: one definition of the protocol for
//! both ends. Replies are `{"ok": true, "result": ...}` or `{"ok": false,
//! "error": SENTENCE, "kind": KIND}` (core `ErrorKind::as_str`).
//!
//! Fields are as they always were (scripts outside send them): counts and
//! sizes in bytes, speeds in bytes a second, `member` a slot number, paths
//! absolute.

use serde::{Deserialize, Serialize};

/// MD's two speed limits, bytes a second (absent: MD's defaults).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Speed {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_speed: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_speed: Option<u64>,
}

/// A control request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "verb", rename_all = "snake_case")]
pub enum Request {
    /// The array's status (`hetraid status`).
    Status,
    /// Mark a member faulty (refused beyond the redundancy unless forced).
    Fail {
        member: usize,
        #[serde(default)]
        force: bool,
    },
    /// Detach a faulty or missing member.
    Remove { member: usize },
    /// Write what the write-back log holds to the members.
    Reclaim,
    /// Set error counts back to zero (one member's, or every member's).
    Clear {
        #[serde(default)]
        member: Option<usize>,
    },
    /// Check every stripe (repair as trusted), paced.
    Scrub {
        #[serde(default)]
        repair: bool,
        #[serde(default)]
        trust_data: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        trust_member: Option<usize>,
        #[serde(flatten)]
        speed: Speed,
    },
    /// Put the device passed with the request (named by `with`) in slot
    /// `member`, or in place of copy `log_copy` of the write log.
    Replace {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        member: Option<usize>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        log_copy: Option<usize>,
        with: String,
        #[serde(default)]
        force: bool,
    },
    /// Add the device passed as a hot spare.
    AddSpare {
        with: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kind: Option<String>,
        #[serde(default)]
        force: bool,
    },
    /// Take a hot spare off the array.
    RemoveSpare { with: String },
    /// Rebuild onto the replacements attached, paced.
    Rebuild {
        #[serde(default)]
        to_spare: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pace: Option<String>,
        #[serde(flatten)]
        speed: Speed,
    },
    /// Add the device passed (`add`, with its `kind`), change RAIDH's
    /// `weights`, grow every member to its size (`size: "max"`), or resume
    /// a change in progress (none of them).
    Grow {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        add: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kind: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        weights: Option<Vec<u64>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        size: Option<String>,
        #[serde(default)]
        force: bool,
        #[serde(flatten)]
        speed: Speed,
    },
    /// Take member `member` out, its data moved to the others (RAIDX),
    /// keeping `size` bytes.
    Shrink {
        member: usize,
        size: u64,
        #[serde(default)]
        force: bool,
        #[serde(flatten)]
        speed: Speed,
    },
    /// Copy the member rebuilt into spare space back onto the device
    /// passed (`with`).
    Rebalance {
        with: String,
        #[serde(default)]
        force: bool,
        #[serde(flatten)]
        speed: Speed,
    },
}

impl Request {
    /// Its verb, as on the wire.
    pub fn verb(&self) -> &'static str {
        match self {
            Request::Status => "status",
            Request::Fail { .. } => "fail",
            Request::Remove { .. } => "remove",
            Request::Reclaim => "reclaim",
            Request::Clear { .. } => "clear",
            Request::Scrub { .. } => "scrub",
            Request::Replace { .. } => "replace",
            Request::AddSpare { .. } => "add_spare",
            Request::RemoveSpare { .. } => "remove_spare",
            Request::Rebuild { .. } => "rebuild",
            Request::Grow { .. } => "grow",
            Request::Shrink { .. } => "shrink",
            Request::Rebalance { .. } => "rebalance",
        }
    }

    /// The request on the wire.
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a request always encodes")
    }

    /// Verbs that work through the whole array and may run for hours.
    pub fn is_long(&self) -> bool {
        matches!(
            self,
            Request::Rebuild { .. }
                | Request::Scrub { .. }
                | Request::Grow { .. }
                | Request::Shrink { .. }
                | Request::Reclaim
                | Request::Rebalance { .. }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn requests_read_as_the_protocol_always_sent_them() {
        let cases = [
            (json!({"verb": "status"}), Request::Status),
            (
                json!({"verb": "fail", "member": 1}),
                Request::Fail {
                    member: 1,
                    force: false,
                },
            ),
            (
                json!({"verb": "rebuild", "min_speed": 1024000, "max_speed": 204800000, "to_spare": false, "pace": "array"}),
                Request::Rebuild {
                    to_spare: false,
                    pace: Some("array".into()),
                    speed: Speed {
                        min_speed: Some(1024000),
                        max_speed: Some(204800000),
                    },
                },
            ),
            (
                json!({"verb": "grow", "size": "max"}),
                Request::Grow {
                    add: None,
                    kind: None,
                    weights: None,
                    size: Some("max".into()),
                    force: false,
                    speed: Speed::default(),
                },
            ),
            (
                json!({"verb": "replace", "log_copy": 1, "with": "/x", "force": true}),
                Request::Replace {
                    member: None,
                    log_copy: Some(1),
                    with: "/x".into(),
                    force: true,
                },
            ),
        ];
        for (wire, want) in cases {
            let got: Request = serde_json::from_value(wire.clone()).unwrap();
            assert_eq!(got, want, "{wire}");
            // And back: what the command line sends reads the same.
            let again: Request = serde_json::from_value(got.to_value()).unwrap();
            assert_eq!(again, want);
            assert_eq!(got.to_value()["verb"], wire["verb"]);
        }
    }

    #[test]
    fn malformed_requests_are_refused_with_a_sentence() {
        for bad in [
            json!({"verb": "frobnicate"}),
            json!({"verb": "fail"}),
            json!({"verb": "fail", "member": "one"}),
            json!({"member": 1}),
            json!({"verb": "shrink", "member": 1, "size": "max"}),
        ] {
            let e = serde_json::from_value::<Request>(bad.clone()).unwrap_err();
            assert!(!e.to_string().is_empty(), "{bad}");
        }
    }
}
