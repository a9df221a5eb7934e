//! `hetraid-parity-bench --versus-isal`, the harness `scripts/bench-parity.sh`
//! holds our kernels against ISA-L with: every mode runs, the ISA-L side
//! computes the same bytes as ours (the bench refuses to time otherwise), and
//! its output has the fields the script reads; the control (`--isal-vs-isal`)
//! runs. Timing is not checked.

use std::process::Command;

const BENCH: &str = env!("CARGO_BIN_EXE_hetraid-parity-bench");

/// Run the bench: its exit code (None: killed by a signal), stdout, stderr.
fn bench<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> (Option<i32>, String, String) {
    let out = Command::new(BENCH)
        .args(args)
        .output()
        .expect("run the bench");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// ISA-L is there (`libisal.so.2`); skips locally without it, fails in CI.
fn isal_present() -> bool {
    let (code, _, err) = bench(&["--versus-isal", "xor", "2", "4096", "0", "1"]);
    if code != Some(0) && err.contains("cannot load ISA-L") {
        if std::env::var_os("CI").is_some() {
            panic!("CI is set and ISA-L is not installed (apt-get install libisal-dev): {err}");
        }
        eprintln!("skipping: ISA-L is not installed (apt-get install libisal-dev)");
        return false;
    }
    true
}

#[test]
fn every_mode_agrees_with_isal_and_prints_four_fields() {
    if !isal_present() {
        return;
    }
    for (mode, k) in [
        ("xor", 2),
        ("xor", 4),
        ("xor", 16),
        ("pq", 2),
        ("pq", 4),
        ("pq", 16),
        ("recover", 2),
        ("recover", 4),
        ("recover", 9),
        ("pq-update", 2),
        ("pq-update", 4),
        ("crc32c", 1),
        ("crc32c", 3),
    ] {
        // Lengths with and without tails past the kernels' steps (pq_gen in
        // ISA-L takes multiples of 32 only).
        for chunk in [4096usize, 4000, 96] {
            if mode == "pq" && chunk % 32 != 0 {
                continue;
            }
            let args = [
                "--versus-isal".to_string(),
                mode.into(),
                k.to_string(),
                chunk.to_string(),
                "0".into(),
                "2".into(),
            ];
            let (code, stdout, stderr) = bench(&args);
            assert_eq!(code, Some(0), "{args:?}: {stderr}");
            let fields: Vec<&str> = stdout.split_whitespace().collect();
            assert_eq!(fields.len(), 4, "{args:?}: {stdout:?}");
            let nums: Vec<f64> = fields[..3]
                .iter()
                .map(|f| f.parse().expect("a number"))
                .collect();
            // The ratio is the median of per-round ratios, not the first
            // figure over the second (medians of each side).
            assert!(
                nums.iter().all(|n| n.is_finite() && *n > 0.0),
                "{args:?}: {stdout:?}"
            );
        }
    }
}

/// A working set that cannot be allocated is an error, not a crash (a
/// wrapped size once made the bench write past a small allocation).
#[test]
fn a_working_set_too_big_is_refused() {
    for args in [
        ["xor", "4", "65536", "18446744073709551615", "1"],
        ["pq", "4", "65536", "4611686018427387904", "1"],
        ["pq", "62", "2147483647", "0", "1"],
    ] {
        let (code, stdout, err) = bench(&args);
        assert_eq!(code, Some(1), "{args:?}: {err}");
        assert!(
            err.contains("cannot allocate a working set") || err.contains("does not fit in the"),
            "{args:?}: {err}"
        );
        assert!(stdout.is_empty(), "{args:?}");
    }
}

/// The control runs ISA-L on both sides and names itself.
#[test]
fn the_control_runs_isal_on_both_sides() {
    if !isal_present() {
        return;
    }
    let (code, stdout, err) = bench(&["--isal-vs-isal", "pq", "4", "4096", "0", "2"]);
    assert_eq!(code, Some(0), "{err}");
    let fields: Vec<&str> = stdout.split_whitespace().collect();
    assert_eq!(fields.len(), 4, "{stdout:?}");
    assert_eq!(fields[3], "isa-l", "{stdout:?}");
}

/// Cases ISA-L cannot run, and bad arguments: exit 2, one line naming the
/// bench, nothing on standard output.
#[test]
fn bad_arguments_are_refused_with_a_reason() {
    let cases: [&[&str]; 9] = [
        &["--versus-isal", "xor", "1", "4096", "0", "1"],
        &["--versus-isal", "pq", "4", "100", "0", "1"],
        &["--versus-isal", "memcpy", "4", "4096", "0", "1"],
        &["--versus-isal", "nonsense", "4", "4096", "0", "1"],
        &["--versus-isal", "pq", "0", "4096", "0", "1"],
        &["--versus-isal", "xor", "4", "4096", "0", "0"],
        &["xor", "4", "4096", "0", "0"],
        &["xor", "4", "0", "0", "1"],
        &["xor", "4", "4096", "-1", "1"],
    ];
    for args in cases {
        let (code, stdout, err) = bench(args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.starts_with("hetraid-parity-bench: "), "{args:?}: {err}");
        assert!(stdout.is_empty(), "{args:?}");
    }
}

/// `--versus-rusty`: every parity mode runs against `rusty_erasure`, which
/// computes the same bytes (the bench refuses to time otherwise), with the
/// four fields the script reads; CRC-32C, which the crate lacks, is refused
/// in one sentence with exit 2.
#[test]
fn every_parity_mode_agrees_with_rusty_erasure() {
    for (mode, k) in [
        ("xor", 2),
        ("xor", 8),
        ("pq", 2),
        ("pq", 8),
        ("recover", 2),
        ("recover", 6),
        ("pq-update", 3),
    ] {
        let (code, out, err) = bench(&["--versus-rusty", mode, &k.to_string(), "4096", "0", "2"]);
        assert_eq!(code, Some(0), "{mode} {k}: {err}");
        let f: Vec<&str> = out.split_whitespace().collect();
        assert_eq!(f.len(), 4, "{mode} {k}: {out}");
        for v in &f[..3] {
            let x: f64 = v.parse().unwrap_or_else(|_| panic!("{mode} {k}: {out}"));
            assert!(x > 0.0, "{mode} {k}: {out}");
        }
    }
    let (code, _, err) = bench(&["--versus-rusty", "crc32c", "1", "4096", "0", "2"]);
    assert_eq!(code, Some(2));
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("rusty_erasure has no CRC-32C"), "{err}");
}
