//! The command-line contract: JSON shapes other tools parse, and bad input giving
//! one sentence on stderr with exit status 2.

mod common;
use common::{hetraid, json};

#[test]
fn layout_json_shape() {
    let v = json(&[
        "layout",
        "--layout",
        "raid5",
        "--devices",
        "5",
        "--chunk",
        "64K",
        "--stripes",
        "2",
        "--json",
    ]);
    assert_eq!(v["layout"], "raid5");
    assert_eq!(v["devices"], 5);
    assert_eq!(v["chunk_bytes"], 65536);
    assert_eq!(v["capacity_bytes"], 4u64 << 30);
    assert_eq!(v["stripe_count"], 16384);
    let s = &v["stripes"];
    assert_eq!(s.as_array().unwrap().len(), 2);
    assert_eq!(s[0]["stripe"], 0);
    assert_eq!(s[0]["parity"][0]["device"], 4);
    assert_eq!(s[1]["parity"][0]["device"], 3);
    assert_eq!(
        s[1]["data"][0]["device"], 4,
        "left-symmetric: data starts after parity"
    );
    assert_eq!(s[1]["data"][0]["offset"], 65536);
    assert!(s[0]["mirrors"].as_array().unwrap().is_empty());
    assert!(v.get("bundles").is_none());
    let none = json(&[
        "layout",
        "--layout",
        "raid5",
        "--devices",
        "5",
        "--stripes",
        "0",
        "--json",
    ]);
    assert!(none["stripes"].as_array().unwrap().is_empty());
}

#[test]
fn layout_json_for_mirrors_raidh_s2_raidx() {
    let r1 = json(&[
        "layout",
        "--layout",
        "raid10",
        "--devices",
        "4",
        "--stripes",
        "2",
        "--json",
    ]);
    assert_eq!(r1["stripes"][1]["data"][0]["device"], 2);
    assert_eq!(r1["stripes"][1]["mirrors"][0][0]["device"], 3);
    let h = json(&[
        "layout",
        "--layout",
        "raidh",
        "--devices",
        "5",
        "--weights",
        "0,0,0,0,5",
        "--stripes",
        "3",
        "--json",
    ]);
    for s in h["stripes"].as_array().unwrap() {
        assert_eq!(s["parity"][0]["device"], 4);
    }
    let s2 = json(&[
        "layout",
        "--layout",
        "s2raid5",
        "--devices",
        "9",
        "--group",
        "3",
        "--sizes",
        "9M,9M,9M,9M,9M,9M,9M,9M,9M",
        "--json",
    ]);
    assert_eq!(s2["stripe_count"], 9 * 48);
    let x = json(&[
        "layout",
        "--layout",
        "raidx",
        "--devices",
        "3",
        "--sizes",
        "1G,256M,256M",
        "--chunks-per-bundle",
        "2",
        "--stripes",
        "0",
        "--json",
    ]);
    assert_eq!(
        x["bundles"], 8192,
        "1G + 2 x 256M at c = 2: 512M of mirrored bundles"
    );
    assert_eq!(x["capacity_bytes"], 512u64 << 20);
    // The mirror bound on 1G + 2 x 256M: all but the largest member's bytes.
    assert_eq!(x["capacity_bound_bytes"], 512u64 << 20);
    // Issue 41's set: 4T, 4T, 6T, 6T, 12T, 12T at RAIDX5 is bound by 32T;
    // bundles of 4 hold 30T of it.
    let sizes = ["4T", "4T", "6T", "6T", "12T", "12T"].join(",");
    let x5 = json(&[
        "layout",
        "--layout",
        "raidx",
        "--devices",
        "6",
        "--sizes",
        &sizes,
        "--raidx-level",
        "5",
        "--chunks-per-bundle",
        "4",
        "--chunk",
        "1G",
        "--stripes",
        "0",
        "--json",
    ]);
    assert_eq!(x5["capacity_bound_bytes"], 32u64 << 40);
    assert_eq!(x5["capacity_bytes"], 30u64 << 40);
    assert!(r1.get("capacity_bound_bytes").is_none(), "raidx only");
}

#[test]
fn plan_json_shape_and_modthresh() {
    let base = [
        "plan",
        "--layout",
        "raid4s",
        "--devices",
        "5",
        "--chunk",
        "64K",
        "--write",
        "0+128K",
        "--json",
    ];
    let md = json(&base);
    assert_eq!(md["rows"][0]["mode"], "rcw");
    assert_eq!(md["rows"][0]["stripe"], 0);
    let m = &md["members"];
    assert_eq!(m.as_array().unwrap().len(), 5);
    for key in [
        "device",
        "read_bytes",
        "write_bytes",
        "read_pages",
        "write_pages",
    ] {
        assert!(m[0].get(key).is_some(), "members[] lacks {key}");
    }
    assert_eq!(m[2]["read_bytes"], 65536);
    let mut mt: Vec<&str> = base.to_vec();
    mt.extend(["--policy", "modthresh"]);
    let mt = json(&mt);
    assert_eq!(mt["rows"][0]["mode"], "rmw");
    assert_eq!(mt["members"][4]["read_pages"], 16);
    let deg = json(&[
        "plan",
        "--layout",
        "raid5",
        "--devices",
        "4",
        "--failed",
        "0",
        "--read",
        "0+4K",
        "--json",
    ]);
    assert_eq!(deg["rows"][0]["mode"], "degraded");
    assert_eq!(deg["members"][0]["read_bytes"], 0);
}

#[test]
fn loadmap_json_shape() {
    let v = json(&[
        "loadmap",
        "--layout",
        "raid4",
        "--devices",
        "5",
        "--write-chunks",
        "1",
        "--json",
    ]);
    let m = v["members"].as_array().unwrap();
    assert_eq!(m.len(), 5);
    let ws: Vec<f64> = m
        .iter()
        .map(|x| x["write_share"].as_f64().unwrap())
        .collect();
    assert!(
        (ws[4] - 0.5).abs() < 1e-9,
        "RAID4 parity takes half of small-write traffic: {ws:?}"
    );
    let raide = json(&[
        "loadmap",
        "--layout",
        "raide",
        "--devices",
        "5",
        "--write-chunks",
        "5",
        "--sizes",
        "1M,1M,1M,1M,1M",
        "--json",
    ]);
    let rs: Vec<f64> = raide["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["read_share"].as_f64().unwrap())
        .collect();
    assert!(
        rs[0] > rs[2] && rs[4] > rs[2],
        "edges read more than the middle: {rs:?}"
    );
}

#[test]
fn bad_input_is_one_sentence_and_exit_2() {
    let cases: &[&[&str]] = &[
        &[
            "layout",
            "--layout",
            "s2raid5",
            "--devices",
            "9",
            "--group",
            "4",
        ],
        &[
            "layout",
            "--layout",
            "s2raid5",
            "--devices",
            "8",
            "--group",
            "3",
        ],
        &[
            "layout",
            "--layout",
            "s2raid5",
            "--devices",
            "8",
            "--group",
            "2",
        ],
        &[
            "layout",
            "--layout",
            "raidh",
            "--devices",
            "5",
            "--weights",
            "1,1,1",
        ],
        &[
            "layout",
            "--layout",
            "raidh",
            "--devices",
            "5",
            "--weights",
            "0,0,0,0,0",
        ],
        &[
            "layout",
            "--layout",
            "raid5",
            "--devices",
            "5",
            "--chunk",
            "6K",
        ],
        &["layout", "--layout", "raid6", "--devices", "3"],
        &["layout", "--layout", "raid5", "--devices", "1"],
        &["layout", "--layout", "nosuch", "--devices", "4"],
        &[
            "layout",
            "--layout",
            "raid5",
            "--devices",
            "3",
            "--sizes",
            "1G,1G",
        ],
        &[
            "layout",
            "--layout",
            "raid5",
            "--devices",
            "3",
            "--sizes",
            "1G,1G,1X",
        ],
        &[
            "plan",
            "--layout",
            "raid5",
            "--devices",
            "4",
            "--write",
            "9G+4K",
        ],
        &[
            "plan",
            "--layout",
            "raid5",
            "--devices",
            "4",
            "--write",
            "12",
        ],
        &[
            "plan",
            "--layout",
            "raid5",
            "--devices",
            "4",
            "--failed",
            "0,1",
            "--read",
            "0+1M",
        ],
        &[
            "loadmap",
            "--layout",
            "raid5",
            "--devices",
            "4",
            "--write-chunks",
            "0",
        ],
    ];
    for args in cases {
        let (code, out, err) = hetraid(args);
        assert_eq!(code, 2, "{args:?} should exit 2; stderr: {err}");
        assert!(out.is_empty(), "{args:?} printed to stdout: {out}");
        assert!(
            !err.trim().is_empty() && err.trim().lines().count() <= 3,
            "{args:?}: {err}"
        );
        assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
    }
}

/// RAIDX5/6 place parity by weights, or by member kinds when no weights are
/// given (parity on the SSDs, issue 14); `--kinds` where they would not move
/// a chunk is an error.
#[test]
fn raidx_parity_follows_kinds_or_weights_and_idle_kinds_are_refused() {
    let v = json(&[
        "layout",
        "--layout",
        "raidx",
        "--devices",
        "5",
        "--chunks-per-bundle",
        "3",
        "--raidx-level",
        "5",
        "--kinds",
        "hdd,hdd,hdd,hdd,ssd",
        "--stripes",
        "200",
        "--json",
    ]);
    let mut with_ssd = 0;
    for s in v["stripes"].as_array().unwrap() {
        let has_ssd = s["data"]
            .as_array()
            .unwrap()
            .iter()
            .chain(s["parity"].as_array().unwrap())
            .any(|c| c["device"] == 4);
        if has_ssd {
            with_ssd += 1;
            assert_eq!(s["parity"][0]["device"], 4, "{s}");
        }
    }
    assert!(with_ssd > 50, "{with_ssd} bundles hold the SSD");
    for bad in [
        &[
            "layout",
            "--layout",
            "raid5",
            "--devices",
            "4",
            "--kinds",
            "hdd,hdd,hdd,ssd",
        ][..],
        &[
            "layout",
            "--layout",
            "raidx",
            "--devices",
            "4",
            "--chunks-per-bundle",
            "2",
            "--kinds",
            "hdd,hdd,hdd,ssd",
        ][..],
        &[
            "layout",
            "--layout",
            "raidx",
            "--devices",
            "4",
            "--chunks-per-bundle",
            "2",
            "--weights",
            "1,1,1,1",
        ][..],
    ] {
        let (code, _, err) = hetraid(bad);
        assert_eq!(code, 2, "{bad:?}: {err}");
        assert!(
            err.contains("--kinds") || err.contains("--weights"),
            "{err}"
        );
    }
}

/// Issue 38, row 1: one MD speed default (1000 and 200000 KiB/s) in the
/// engine's rebuild and served changes, the simulator and every command.
#[test]
fn one_md_speed_default_everywhere() {
    let md = hetraid_core::pace::MD_DEFAULT;
    assert_eq!((md.min_bps, md.max_bps), (1_024_000, 204_800_000));
    let r = hetraid_engine::RebuildOptions::default();
    assert_eq!((r.min_speed, r.max_speed), (md.min_bps, md.max_bps));
    let c = hetraid_engine::ChangeOptions::default();
    assert_eq!((c.min_speed, c.max_speed), (md.min_bps, md.max_bps));
    let s: hetraid_sim::RunConfig =
        toml::from_str("layout = \"raid5\"\nmembers = \"x*3\"").unwrap();
    assert_eq!((s.min_speed.0, s.max_speed.0), (md.min_bps, md.max_bps));
    for verb in ["rebuild", "scrub"] {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_hetraid"))
            .args([verb, "--help"])
            .output()
            .unwrap();
        let help = String::from_utf8_lossy(&o.stdout);
        assert!(
            help.contains("[default: 1000K]") && help.contains("[default: 200000K]"),
            "{verb} --help: {help}"
        );
    }
}

/// Issue 38, row 3: the write-back "log full" loop gives up after the same
/// number of reclaim rounds in the engine and the simulator: both take the
/// core's bound, neither a number of its own.
#[test]
fn one_log_full_retry_bound() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../");
    for f in [
        "hetraid-engine/src/array/writeback.rs",
        "hetraid-sim/src/sim/log.rs",
    ] {
        let src = std::fs::read_to_string(format!("{root}{f}")).unwrap();
        assert!(src.contains("LOG_FULL_RECLAIMS_MAX"), "{f}");
    }
    assert_eq!(hetraid_core::journal::LOG_FULL_RECLAIMS_MAX, 1);
}

/// Issue 38, row 11: the batch sizes and bounds procedures run in come from
/// core (`hetraid_core::limits`), not from numbers in the engine or the CLI.
#[test]
fn batch_sizes_are_the_cores() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../");
    for (f, name) in [
        (
            "hetraid-engine/src/array/living.rs",
            "CHANGE_BATCH_MOVES_MAX",
        ),
        (
            "hetraid-engine/src/array/restripe.rs",
            "restripe_window_rows",
        ),
        (
            "hetraid-engine/src/array/cell.rs",
            "SERVED_BATCHES_PER_SWAP",
        ),
        (
            "hetraid/src/ops/array/change.rs",
            "OFFLINE_BATCHES_PER_SWAP",
        ),
    ] {
        let src = std::fs::read_to_string(format!("{root}{f}")).unwrap();
        assert!(src.contains(&format!("limits::{name}")), "{f}: {name}");
        assert!(
            !src.contains(&format!("const {name}")),
            "{f} defines {name}"
        );
    }
    let failure =
        std::fs::read_to_string(format!("{root}hetraid-engine/src/array/failure.rs")).unwrap();
    assert!(failure.contains("= hetraid_core::limits::MAX_READ_ERRORS;"));
    // Issue 38: one PAGE constant (core `units::PAGE`), no copy of 4096.
    fn sources(d: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() && !p.ends_with("tests") {
                sources(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut all = Vec::new();
    sources(std::path::Path::new(root), &mut all);
    for f in all
        .iter()
        .filter(|f| !f.ends_with("hetraid-core/src/units.rs"))
    {
        let src = std::fs::read_to_string(f).unwrap();
        assert!(
            !src.contains("const PAGE: u64 = 4096") && !src.contains("const PAGE: usize = 4096"),
            "{} defines its own PAGE",
            f.display()
        );
    }
    // Issue 38, row 9: the write buffer drains by one queue and one count
    // (core `wbuf::DrainQueue`); neither executor picks writes itself.
    for (f, what) in [
        ("hetraid-engine/src/array/wbuf.rs", "wbuf::DrainQueue"),
        ("hetraid-sim/src/sim/mod.rs", "wbuf::DrainQueue"),
        ("hetraid-sim/src/sim/mod.rs", "wbuf::DRAINERS"),
        ("hetraid/src/ops/serve.rs", "wbuf::DRAINERS"),
    ] {
        let src = std::fs::read_to_string(format!("{root}{f}")).unwrap();
        assert!(src.contains(what), "{f}: {what}");
    }
    for f in [
        "hetraid-engine/src/array/wbuf.rs",
        "hetraid-sim/src/sim/user.rs",
        "hetraid-sim/src/sim/jobs.rs",
    ] {
        let src = std::fs::read_to_string(format!("{root}{f}")).unwrap();
        assert!(!src.contains("next_to_drain("), "{f} picks writes itself");
    }
}

/// Issue 38: every command the README shows runs as typed. The two quick
/// start commands are what CI runs itself (`.ci/run`); every other `sh`
/// block runs here, with `set -euo pipefail`, in an empty directory, with
/// this build's `hetraid` first on the PATH.
#[test]
fn the_readme_commands_run_as_typed() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    assert!(
        readme.lines().count() <= 150,
        "the README is over 150 lines"
    );
    let mut blocks: Vec<String> = Vec::new();
    let mut cur: Option<String> = None;
    for l in readme.lines() {
        match (&mut cur, l.trim_start()) {
            (None, "```sh") => cur = Some(String::new()),
            (Some(b), "```") => {
                blocks.push(std::mem::take(b));
                cur = None;
            }
            (Some(b), _) => {
                b.push_str(l);
                b.push('\n');
            }
            _ => {}
        }
    }
    let ci = [
        "cargo run --release -q -- demo\n",
        "cargo test --workspace\n",
    ];
    let ci_script =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../.ci/run")).unwrap();
    for c in ci {
        assert!(
            blocks.iter().any(|b| b == c),
            "the README lost `{}`",
            c.trim()
        );
        assert!(
            ci_script.contains(c.trim()),
            ".ci/run does not run `{}`",
            c.trim()
        );
    }
    let runnable: Vec<&String> = blocks
        .iter()
        .filter(|b| !ci.contains(&b.as_str()))
        .collect();
    assert!(!runnable.is_empty());
    if !common::have("nbdinfo") || !common::have("nbdcopy") {
        return;
    }
    let bin_dir = std::path::Path::new(env!("CARGO_BIN_EXE_hetraid"))
        .parent()
        .unwrap()
        .to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for b in runnable {
        let d = tempfile::tempdir().unwrap();
        let o = std::process::Command::new("bash")
            .args(["-euo", "pipefail", "-c", b])
            .current_dir(d.path())
            .env("PATH", &path)
            .env("XDG_RUNTIME_DIR", d.path())
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "a README block failed:\n{b}\nstdout:\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

/// Issue 38: docs/ARCHITECTURE.md is drawn from the code: every source file
/// it names (`name.rs`, `dir/name.rs`, `crates/...`) exists, and every crate
/// of the workspace is named.
#[test]
fn the_architecture_names_what_exists() {
    let root = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    let doc = std::fs::read_to_string(root.join("docs/ARCHITECTURE.md")).unwrap();
    let mut files: Vec<String> = Vec::new();
    fn walk(d: &std::path::Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() && p.file_name().is_some_and(|n| n != "target") {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p.display().to_string());
            }
        }
    }
    walk(&root.join("crates"), &mut files);
    let mut missing = Vec::new();
    for piece in doc.split('`').skip(1).step_by(2) {
        if !piece.ends_with(".rs") || piece.contains(' ') {
            continue;
        }
        let suffix = format!("/{}", piece.trim_start_matches("crates/"));
        if !files.iter().any(|f| f.ends_with(&suffix)) {
            missing.push(piece.to_string());
        }
    }
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names files that do not exist: {missing:?}"
    );
    for c in std::fs::read_dir(root.join("crates")).unwrap().flatten() {
        let name = c.file_name().to_string_lossy().to_string();
        assert!(
            doc.contains(&format!("`{name}`")),
            "ARCHITECTURE.md never names `{name}`"
        );
    }
}

/// The simulator's refusal of a RAID5 run on `members` changed by `set`.
fn sim_refusal(members: &str, set: &dyn Fn(&mut hetraid_sim::RunConfig)) -> String {
    let mut c = hetraid_sim::RunConfig::new("raid5", members);
    set(&mut c);
    hetraid_sim::run(&c).unwrap_err()
}

/// Create options the engine's `check_create` takes: `layout` of 64 KiB
/// chunks, MD's policy, no log.
fn create_options(layout: &str) -> hetraid_engine::CreateOptions {
    hetraid_engine::CreateOptions {
        layout: hetraid_core::layout::LayoutOptions::named(layout),
        chunk_bytes: 64 << 10,
        policy: hetraid_core::WritePolicy::Md,
        kinds: vec![],
        assume_clean: true,
        force: false,
        checksums: false,
        log: None,
        read_policy: None,
    }
}

/// Issue 38, row 6: the write log's rules (which options go together, the
/// default size, the smallest log) are the core's `logconfig`: `hetraid
/// create`, the simulator and the engine refuse alike, each in its own
/// option names, and ask for the same minimum.
#[test]
fn one_log_rule_in_engine_simulator_and_cli() {
    use hetraid_core::logconfig::{self as lc, LogConfigError as E};
    let d = tempfile::tempdir().unwrap();
    let m: Vec<String> = (0..3)
        .map(|i| d.path().join(format!("m{i}")).display().to_string())
        .collect();
    let create = |extra: &[&str]| {
        let layout = match extra.first() {
            Some(&"hpda") => "hpda",
            _ => "raid5",
        };
        let extra = extra.strip_prefix(&["hpda"]).unwrap_or(extra);
        let mut a = vec!["create", "--layout", layout, "--size", "8M"];
        a.extend(m.iter().map(|s| s.as_str()));
        a.extend(extra);
        let (code, _, err) = hetraid(&a);
        assert_eq!(code, 2, "{a:?}: {err}");
        err
    };
    let sim = |set: &dyn Fn(&mut hetraid_sim::RunConfig)| sim_refusal("x25e-64*3", set);
    // A size without a log.
    let err = create(&["--log-size", "8M"]);
    assert!(err.contains(&E::SizeWithoutLog.sentence(&lc::CLI)), "{err}");
    let err = sim(&|c| c.log_size = Some(hetraid_sim::Size(8 << 20)));
    assert_eq!(err, E::SizeWithoutLog.sentence(&lc::SIM));
    // A mode that is not known.
    let log = d.path().join("log").display().to_string();
    let err = create(&["--log", &log, "--log-mode", "fast"]);
    assert!(
        err.contains(&E::UnknownMode("fast".into()).sentence(&lc::CLI)),
        "{err}"
    );
    let err = sim(&|c| {
        c.log = Some("x25e-64".into());
        c.log_mode = Some("fast".into());
    });
    assert_eq!(err, E::UnknownMode("fast".into()).sentence(&lc::SIM));
    // Too small: the same minimum in both.
    let need = lc::bytes_min_any(3, 64 << 10);
    let err = create(&["--chunk", "64K", "--log", &log, "--log-size", "64K"]);
    assert!(err.contains(&format!("at least {need}")), "{err}");
    let err = sim(&|c| {
        c.chunk = hetraid_sim::Size(64 << 10);
        c.log = Some("x25e-64".into());
        c.log_size = Some(hetraid_sim::Size(64 << 10));
    });
    assert!(err.contains(&format!("at least {need}")), "{err}");
    // HPDA's log is write-back, in the engine too.
    let err = create(&["hpda", "--log-mode", "journal"]);
    assert!(
        err.contains(&E::HpdaNotWriteBack.sentence(&lc::CLI)),
        "{err}"
    );
    assert!(std::fs::read_dir(d.path()).unwrap().next().is_none());
    let opts = hetraid_engine::CreateOptions {
        log: Some(hetraid_engine::LogSpec {
            devices: vec![],
            kinds: vec![],
            mode: lc::LogMode::Journal,
            region: None,
        }),
        ..create_options("hpda")
    };
    let err = hetraid_engine::Array::check_create(&[1 << 30; 4], &opts).unwrap_err();
    assert_eq!(err.to_string(), E::HpdaNotWriteBack.sentence(&lc::CLI));
    // No front end keeps a default or a rule of its own.
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../");
    for f in [
        "hetraid/src/ops/array/create.rs",
        "hetraid-sim/src/setup.rs",
        "hetraid-engine/src/array/create.rs",
    ] {
        let src = std::fs::read_to_string(format!("{root}{f}")).unwrap();
        assert!(src.contains("logconfig::"), "{f}");
        for rule in ["one device or two", "not known; use journal", "64 << 20"] {
            assert!(!src.contains(rule), "{f} words the rule '{rule}' itself");
        }
    }
}

/// Issue 38: one `ArraySpec` in core decides whether an array can exist;
/// `hetraid create`, `hetraid layout`, the engine's create and the
/// simulator refuse alike, each in its own option names, and none of them
/// words the rules itself.
#[test]
fn one_array_rule_in_engine_simulator_and_cli() {
    use hetraid_core::spec::{self, SpecError as E};
    let d = tempfile::tempdir().unwrap();
    let m: Vec<String> = (0..4)
        .map(|i| d.path().join(format!("m{i}")).display().to_string())
        .collect();
    let refused = |a: &[&str]| {
        let (code, _, err) = hetraid(a);
        assert_eq!(code, 2, "{a:?}: {err}");
        err
    };
    let create = |extra: &[&str]| {
        let mut a = vec!["create", "--size", "8M"];
        a.extend(m.iter().map(|s| s.as_str()));
        a.extend(extra);
        refused(&a)
    };
    let sim = |set: &dyn Fn(&mut hetraid_sim::RunConfig)| sim_refusal("x25e-64*4", set);
    let engine = |o: &dyn Fn(&mut hetraid_engine::CreateOptions)| {
        let mut opts = create_options("raid5");
        o(&mut opts);
        hetraid_engine::Array::check_create(&[64 << 20; 4], &opts)
            .unwrap_err()
            .to_string()
    };
    // A chunk that is not a power of two.
    let want = E::Chunk(12 << 10);
    let err = create(&["--layout", "raid5", "--chunk", "12K"]);
    assert!(err.contains(&want.sentence(&spec::CLI)), "{err}");
    let err = refused(&[
        "layout",
        "--layout",
        "raid5",
        "--devices",
        "4",
        "--chunk",
        "12K",
    ]);
    assert!(err.contains(&want.sentence(&spec::CLI)), "{err}");
    assert_eq!(
        engine(&|o| o.chunk_bytes = 12 << 10),
        want.sentence(&spec::CLI)
    );
    assert_eq!(
        sim(&|c| c.chunk = hetraid_sim::Size(12 << 10)),
        want.sentence(&spec::SIM)
    );
    // A read policy on a layout without copies.
    let err = create(&["--layout", "raid5", "--read-policy", "first"]);
    assert!(
        err.contains("--read-policy applies to layouts that keep copies"),
        "{err}"
    );
    assert!(
        engine(&|o| o.read_policy = Some(hetraid_core::readbalance::ReadPolicy::First))
            .starts_with("--read-policy applies to layouts that keep copies")
    );
    assert!(sim(&|c| c.read_policy = Some("first".into()))
        .starts_with("read_policy applies to layouts that keep copies"));
    // Kinds that do not match the members.
    let want = E::KindsCount {
        kinds: 3,
        members: 4,
    };
    assert_eq!(
        engine(&|o| o.kinds = vec![hetraid_core::MemberKind::Ssd; 3]),
        want.sentence(&spec::CLI)
    );
    // A write buffer in front of a write log.
    assert_eq!(
        sim(&|c| {
            c.write_buffer = Some(hetraid_sim::Size(1 << 20));
            c.log = Some("x25e-64".into());
        }),
        E::WriteBufferWithLog.sentence(&spec::SIM)
    );
    assert!(std::fs::read_dir(d.path()).unwrap().next().is_none());
    // No front end words the rules itself.
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../");
    for f in [
        "hetraid/src/ops/array/create.rs",
        "hetraid/src/args.rs",
        "hetraid-sim/src/setup.rs",
        "hetraid-engine/src/array/create.rs",
    ] {
        let src = std::fs::read_to_string(format!("{root}{f}")).unwrap();
        for rule in [
            "is not a power of two",
            "do not go together: the log decides",
            "kinds for {n} members",
            "weights_from_kinds",
        ] {
            assert!(!src.contains(rule), "{f} words the rule '{rule}' itself");
        }
    }
}

/// Issue 38: `src/cli/` is clap only (option structs, and the dispatch in
/// `cli/mod.rs`), `src/ops/` the verbs' code with no clap definition.
#[test]
fn clap_lives_in_cli_and_the_verbs_in_cmd() {
    fn files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                files(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let src = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/src"));
    let (mut ops, mut cli) = (Vec::new(), Vec::new());
    files(&src.join("ops"), &mut ops);
    files(&src.join("cli"), &mut cli);
    assert!(ops.len() > 10 && cli.len() > 10, "{ops:?} {cli:?}");
    for f in &ops {
        let text = std::fs::read_to_string(f).unwrap();
        for clap in ["#[arg(", "#[command(", "clap::Args", "derive(Debug, Args)"] {
            assert!(
                !text.contains(clap),
                "{} defines options ({clap})",
                f.display()
            );
        }
    }
    for f in cli.iter().filter(|f| !f.ends_with("cli/mod.rs")) {
        let text = std::fs::read_to_string(f).unwrap();
        assert!(
            !text.contains("fn ") && !text.contains("impl "),
            "{} holds code, not only options",
            f.display()
        );
    }
}

/// Issue 38: the CLI is a library; a command line parses in-process, and
/// the same definitions refuse a wrong one.
#[test]
fn the_cli_is_a_library() {
    use clap::Parser;
    let ok = hetraid::cli::Cli::try_parse_from([
        "hetraid",
        "layout",
        "--layout",
        "raid5",
        "--devices",
        "4",
    ])
    .unwrap();
    assert!(matches!(ok.command, hetraid::cli::Command::Layout(_)));
    assert!(hetraid::cli::Cli::try_parse_from(["hetraid", "layout", "--no-such"]).is_err());
    let opts = hetraid::args::LayoutParamArgs::default().options("raid10", None);
    assert_eq!(
        opts.kind().unwrap(),
        hetraid_core::layout::LayoutKind::Raid10 { copies: 2 }
    );
}

/// Issue 38: modules small enough to read in one sitting — no source file
/// over 1,000 lines and no function over 150 outside tests (inline test
/// modules and `*_tests.rs` files aside).
#[test]
fn sources_stay_readable() {
    const FILE_LINES_MAX: usize = 1000;
    const FN_LINES_MAX: usize = 150;
    let root = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    fn walk(d: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(d).unwrap().flatten() {
            let p = e.path();
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            if p.is_dir() && name != "tests" && name != "benches" && name != "target" {
                walk(&p, out);
            } else if name.ends_with(".rs") && !name.ends_with("_tests.rs") {
                out.push(p);
            }
        }
    }
    // Code only: string and char literals and line comments blanked, so
    // braces in format strings do not count.
    fn code(line: &str) -> String {
        let mut out = String::new();
        let mut chars = line.chars().peekable();
        let mut in_str = false;
        while let Some(c) = chars.next() {
            match (in_str, c) {
                (true, '\\') => {
                    chars.next();
                }
                (true, '"') => in_str = false,
                (true, _) => {}
                (false, '"') => in_str = true,
                (false, '/') if chars.peek() == Some(&'/') => break,
                (false, '\'') => {
                    // A char literal ('{', '\n') or a lifetime ('a).
                    let rest: String = chars.clone().take(3).collect();
                    if rest.starts_with('\\') || rest.chars().nth(1) == Some('\'') {
                        for _ in 0..if rest.starts_with('\\') { 3 } else { 2 } {
                            chars.next();
                        }
                    }
                }
                (false, _) => out.push(c),
            }
        }
        out
    }
    let mut files = Vec::new();
    walk(root, &mut files);
    let mut long = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let end = lines
            .iter()
            .position(|l| l.starts_with("#[cfg(test)]"))
            .unwrap_or(lines.len());
        if end > FILE_LINES_MAX {
            long.push(format!("{} has {end} lines", f.display()));
        }
        for (i, l) in lines[..end].iter().enumerate() {
            let t = l.trim_start();
            let is_fn = [
                "fn ",
                "pub fn ",
                "pub(crate) fn ",
                "pub(super) fn ",
                "unsafe fn ",
            ]
            .iter()
            .any(|p| t.starts_with(p));
            if !is_fn || t.ends_with(';') {
                continue;
            }
            let (mut depth, mut opened) = (0i64, false);
            for (j, body) in lines[i..end].iter().enumerate() {
                for c in code(body).chars() {
                    match c {
                        '{' => {
                            depth += 1;
                            opened = true;
                        }
                        '}' => depth -= 1,
                        _ => {}
                    }
                }
                if opened && depth <= 0 {
                    if j + 1 > FN_LINES_MAX {
                        long.push(format!(
                            "{}:{} {} is {} lines",
                            f.display(),
                            i + 1,
                            t,
                            j + 1
                        ));
                    }
                    break;
                }
            }
        }
    }
    assert!(long.is_empty(), "split these: {long:#?}");
}
