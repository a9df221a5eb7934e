//! Slow-member sit-out in the simulator (issue 41): RAID5 and RAIDX5 of five
//! disks, one of them 10 times slower for reads, 4 KiB random reads at
//! queue depth 8. With sit-out the 99th-percentile read latency is at least
//! 3 times lower than without; with every member healthy the rule changes
//! nothing (the same run to the nanosecond).

use hetraid_sim::{run, RunConfig, Size};

fn cfg(layout: &str, slow: Option<&str>, sit_out: bool) -> RunConfig {
    let mut c = RunConfig::new(layout, "caviar-black-640*5");
    if layout == "raidx" {
        c.raidx_level = Some("5".into());
    }
    c.workload = "random-read".into();
    c.size = Size(4096);
    c.qd = 8;
    c.total = Some(Size(16 << 20));
    c.seed = 7;
    c.slow = slow.map(str::to_string);
    c.sit_out = Some(sit_out);
    c
}

#[test]
fn a_member_slow_for_reads_is_read_around_and_p99_drops_threefold() {
    for layout in ["raid5", "raidx"] {
        let off = run(&cfg(layout, Some("2:10"), false)).unwrap();
        let on = run(&cfg(layout, Some("2:10"), true)).unwrap();
        let ratio = off.read.p99_ms / on.read.p99_ms;
        eprintln!(
            "{layout}: p99 read {:.1} ms without sit-out, {:.1} ms with: {ratio:.1}x; IOPS {:.0} -> {:.0}",
            off.read.p99_ms, on.read.p99_ms, off.iops, on.iops
        );
        assert!(ratio >= 3.0, "{layout}: p99 only {ratio:.2}x better");
        let so = on.sit_out.as_ref().expect("a sit-out report");
        assert_eq!(so.events[0].member, 2, "{layout}: {:?}", so.events);
        assert!(so.events[0].latency_ms > 4.0 * so.events[0].reference_ms);
        // Without sit-out the report still says a member was slowed, and
        // nothing sat out.
        assert!(off.sit_out.is_none(), "off: {:?}", off.sit_out);
    }
}

#[test]
fn healthy_members_are_never_sat_out_and_the_run_is_unchanged() {
    for layout in ["raid5", "raidx"] {
        let off = run(&cfg(layout, None, false)).unwrap();
        let on = run(&cfg(layout, None, true)).unwrap();
        assert!(on.sit_out.is_none(), "{layout}: {:?}", on.sit_out);
        assert_eq!(off.sim_time_s, on.sim_time_s, "{layout}");
        assert_eq!(off.read.p99_ms, on.read.p99_ms, "{layout}");
    }
}

#[test]
fn bad_slow_settings_are_refused_with_the_fix() {
    let mut c = cfg("raid0", None, true);
    c.members = "caviar-black-640*2".into();
    let Err(e) = run(&c) else {
        panic!("sit_out on raid0 was taken")
    };
    assert!(e.contains("applies to layouts with redundancy"), "{e}");
    for (bad, says) in [
        ("9:10", "members are 0 to 4"),
        ("2:0.5", "MEMBER:FACTOR"),
        ("2", "MEMBER:FACTOR"),
        ("x:3", "MEMBER:FACTOR"),
    ] {
        let Err(e) = run(&cfg("raid5", Some(bad), true)) else {
            panic!("{bad} was taken")
        };
        assert!(e.contains(says), "{bad}: {e}");
    }
}
