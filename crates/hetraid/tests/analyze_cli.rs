//! `hetraid analyze`: numbers checked against closed forms and against each other,
//! and bad input refused in one sentence.

mod common;
use common::{hetraid, json};

const L: f64 = 1.0 / 50_000.0;

#[test]
fn mttdl_of_raid5_is_the_closed_form() {
    let v = json(&[
        "analyze",
        "mttdl",
        "--layout",
        "raid5",
        "--members",
        "caviar-black-640*4",
        "--member-size",
        "64M",
        "--mttr-h",
        "24",
        "--json",
    ]);
    let mu = 1.0 / 24.0;
    let want = (7.0 * L + mu) / (12.0 * L * L);
    let got = v["mttdl_h"].as_f64().unwrap();
    assert!((got / want - 1.0).abs() < 1e-9, "{got} vs {want}");
    assert!((v["closed_form_h"].as_f64().unwrap() / want - 1.0).abs() < 1e-12);
    assert_eq!(v["states"], 5);
    assert_eq!(v["stripes_complete"], true);
    assert!((v["mttdl_years"].as_f64().unwrap() - got / 8766.0).abs() < 1e-6);
}

#[test]
fn mttdl_follows_kinds_parity_wear_and_redundancy() {
    let run = |layout: &str, members: &str, extra: &[&str]| {
        let mut a = vec![
            "analyze",
            "mttdl",
            "--layout",
            layout,
            "--members",
            members,
            "--member-size",
            "64M",
            "--json",
        ];
        a.extend_from_slice(extra);
        json(&a)
    };
    // RAID4S: the SSD holds all parity, so parity wear halves its MTBF.
    let r4s = run("raid4s", "caviar-black-640*4,x25e-64", &[]);
    assert_eq!(r4s["members"][4]["holds_parity"], true);
    assert_eq!(r4s["members"][4]["mtbf_h"], 100_000.0);
    assert_eq!(r4s["members"][0]["holds_parity"], false);
    let no_wear = run(
        "raid4s",
        "caviar-black-640*4,x25e-64",
        &["--ssd-parity-wear", "1"],
    );
    assert!(no_wear["mttdl_h"].as_f64().unwrap() > r4s["mttdl_h"].as_f64().unwrap());
    // A 5-member array with one more reliable member beats 5 HDDs.
    let r5 = run("raid5", "caviar-black-640*5", &[]);
    assert!(no_wear["mttdl_h"].as_f64().unwrap() > r5["mttdl_h"].as_f64().unwrap());
    // RAID6 and RAID10 survive more than RAID5 on the same six disks.
    let six = "caviar-black-640*6";
    let (r5, r10, r6) = (
        run("raid5", six, &[]),
        run("raid10", six, &[]),
        run("raid6", six, &[]),
    );
    let h = |v: &serde_json::Value| v["mttdl_h"].as_f64().unwrap();
    assert!(h(&r5) < h(&r10) && h(&r10) < h(&r6));
    assert_eq!(r10["max_survivable_failures"], 3);
    assert!(r10.get("closed_form_h").is_none());
}

#[test]
fn mttr_from_the_simulator_ranks_s2raid_above_raid5() {
    let run = |extra: &[&str]| {
        let mut a = vec![
            "analyze",
            "mttdl",
            "--members",
            "caviar-black-640*9",
            "--member-size",
            "256M",
            "--mttr-from-sim",
            "--json",
        ];
        a.extend_from_slice(extra);
        json(&a)
    };
    let r5 = run(&["--layout", "raid5", "--replace-h", "0"]);
    let s2 = run(&[
        "--layout",
        "s2raid5",
        "--group",
        "3",
        "--spare-partitions",
        "1",
    ]);
    let rebuild = |v: &serde_json::Value, i: usize| v["members"][i]["rebuild_s"].as_f64().unwrap();
    for i in 0..9 {
        let m = &r5["members"][i];
        let want = rebuild(&r5, i) / 3600.0;
        assert!((m["mttr_h"].as_f64().unwrap() - want).abs() < 1e-12);
        // Parallel streams into spare space: every member rebuilds faster.
        assert!(rebuild(&s2, i) * 1.5 < rebuild(&r5, i), "member {i}");
    }
    // RAID5's members are alike, so the closed form applies with the simulated μ.
    // (A 3.4 s repair of 256 MiB members makes μ/λ about 5e9: the chain's
    // solve in f64 carries a few 1e-9 of that conditioning.)
    let got = r5["mttdl_h"].as_f64().unwrap();
    let err = (r5["closed_form_h"].as_f64().unwrap() / got - 1.0).abs();
    assert!(
        err < 1e-8,
        "chain {got} h, closed form {} ({err:e})",
        r5["closed_form_h"]
    );
    // S2-RAID5 survives some double failures (a second failure is fatal on 6 of
    // the 8 survivors, not all 8) and repairs faster.
    assert!(s2["max_survivable_failures"].as_u64().unwrap() > 1);
    assert!(s2["mttdl_h"].as_f64().unwrap() > 2.0 * got);
}

#[test]
fn raidh_model_is_the_spec_example() {
    let v = json(&[
        "analyze",
        "raidh-model",
        "--devices",
        "5",
        "--faster",
        "3",
        "--json",
    ]);
    assert!((v["work_reduction"].as_f64().unwrap() - 0.375).abs() < 1e-12);
    assert!((v["throughput_gain"].as_f64().unwrap() - 0.6).abs() < 1e-12);
    let (code, out, _) = hetraid(&["analyze", "raidh-model", "--devices", "5", "--faster", "3"]);
    assert_eq!(code, 0);
    assert!(out.contains("+60.0 %"), "{out}");
}

#[test]
fn cost_uses_preset_prices_and_simulated_iops() {
    let args = |layout: &'static str, members: &'static str| {
        vec![
            "analyze",
            "cost",
            "--layout",
            layout,
            "--members",
            members,
            "--total",
            "4M",
            "--json",
        ]
    };
    let v = json(&args("raid5", "wd2500yd*5"));
    // The thesis's $69.99 disk, five of them; RAID5 keeps 4 of 5 for data.
    assert!((v["price_usd"].as_f64().unwrap() - 5.0 * 69.99).abs() < 1e-9);
    let usable = v["usable_gb"].as_f64().unwrap();
    assert!((usable / 1000.0 - 1.0).abs() < 0.01, "{usable}");
    let per_gb = v["usd_per_usable_gb"].as_f64().unwrap();
    assert!((per_gb - 5.0 * 69.99 / usable).abs() < 1e-9);
    let w = v["write_iops"].as_f64().unwrap();
    let r = v["read_iops"].as_f64().unwrap();
    // Small writes cost four disk operations, reads one.
    assert!(w > 0.0 && r > 2.0 * w, "{w} {r}");
    assert!((v["usd_per_write_iops"].as_f64().unwrap() * w - 5.0 * 69.99).abs() < 1e-6);
    // The SSD parity of RAID4S raises write IOPS per dollar's worth of disks.
    let s = json(&args("raid4s", "wd2500yd*4,x25e-64"));
    assert!((s["price_usd"].as_f64().unwrap() - (4.0 * 69.99 + 729.99)).abs() < 1e-9);
    assert!(s["write_iops"].as_f64().unwrap() > 1.5 * w);
    // A --price given on the command line wins over the preset's.
    let o = json(&[
        "analyze",
        "cost",
        "--layout",
        "raid5",
        "--members",
        "wd2500yd*5",
        "--total",
        "4M",
        "--price",
        "wd2500yd=10",
        "--json",
    ]);
    assert_eq!(o["price_usd"], 50.0);
}

#[test]
fn power_adds_up_the_presets() {
    let v = json(&[
        "analyze",
        "power",
        "--layout",
        "raid5",
        "--members",
        "wd2500yd*5",
        "--total",
        "4M",
        "--json",
    ]);
    // WD2500YD: idle 7.5 W, read/write 8.75 W.
    assert!((v["idle_w"].as_f64().unwrap() - 37.5).abs() < 1e-9);
    assert!((v["active_w"].as_f64().unwrap() - 43.75).abs() < 1e-9);
    let mean = v["write_mean_w"].as_f64().unwrap();
    assert!((37.5..=43.75).contains(&mean), "{mean}");
    assert!(v["write_mj_per_op"].as_f64().unwrap() > v["read_mj_per_op"].as_f64().unwrap());
}

#[test]
fn bad_input_is_one_sentence() {
    let cases: &[(&[&str], &str)] = &[
        (
            &[
                "analyze",
                "cost",
                "--layout",
                "raid5",
                "--members",
                "caviar-black-640*4",
            ],
            "has no price; pass --price caviar-black-640=USD",
        ),
        (
            &[
                "analyze",
                "cost",
                "--layout",
                "raid5",
                "--members",
                "wd2500yd*4",
                "--price",
                "wd2500yd",
            ],
            "must be NAME=USD",
        ),
        (
            &[
                "analyze",
                "mttdl",
                "--layout",
                "raid5",
                "--members",
                "wd2500yd*4",
                "--mttr-h",
                "0",
            ],
            "--mttr-h 0 must be a positive number of hours",
        ),
        (
            &[
                "analyze",
                "mttdl",
                "--layout",
                "raid5",
                "--members",
                "nosuch*4",
            ],
            "device preset 'nosuch' is unknown",
        ),
        (
            &["analyze", "raidh-model", "--devices", "1", "--faster", "3"],
            "at least 2 devices",
        ),
    ];
    for (args, want) in cases {
        let (code, out, err) = hetraid(args);
        assert_eq!(code, 2, "{args:?}: {out}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(out.is_empty());
    }
}
