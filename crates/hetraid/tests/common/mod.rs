//! Running the binary from tests: from the repository root (so the shipped
//! `traces/`, `experiments/` and `docs/` paths resolve), capturing everything.
#![allow(dead_code)]

use serde_json::Value;
use std::process::Command;

/// (exit status, stdout, stderr) of `hetraid ARGS`.
pub fn hetraid(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_hetraid"))
        .args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .output()
        .expect("run hetraid");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

/// The JSON document `hetraid ARGS` prints; the test fails if it fails.
pub fn json(args: &[&str]) -> Value {
    let (code, out, err) = hetraid(args);
    assert_eq!(code, 0, "hetraid {args:?} failed: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}
