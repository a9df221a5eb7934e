//! The rebuild-time estimator (`estimate::offline_rebuild`): its sample on
//! the real geometry against the whole rebuild, where the scaled-down array
//! it replaces was off.

use hetraid_sim::config::{RunConfig, Size};
use hetraid_sim::estimate::offline_rebuild;
use hetraid_sim::setup::Setup;

/// The whole rebuild of `member`, simulated stripe by stripe.
fn whole(cfg: &RunConfig, member: usize) -> f64 {
    let mut c = cfg.clone();
    c.failed = Some(member.into());
    c.rebuild = true;
    c.workload = "random-write".into();
    c.total = Some(Size(4096));
    c.to_spare = Setup::new(&c).unwrap().layout.spare_slots() > 0;
    hetraid_sim::run(&c)
        .unwrap()
        .rebuild
        .unwrap()
        .rebuild_time_s
}

fn shelf(layout: &str, members: &str, size: u64) -> RunConfig {
    let mut c = RunConfig::new(layout, members);
    c.member_size = Some(Size(size));
    c.chunk = Size(64 << 10);
    c.min_speed = Size(1 << 40);
    c.max_speed = Size(1 << 40);
    c
}

#[test]
fn a_sampled_rebuild_is_within_a_few_percent_of_the_whole() {
    let mut cases = vec![
        (shelf("raid5", "caviar-black-640*5", 320 << 30), 2),
        (shelf("raid6", "wd20eads*6", 320 << 30), 0),
    ];
    let mut s2 = shelf("s2raid5", "caviar-black-640*9", 320 << 30);
    s2.group = Some(3);
    s2.spare_partitions = 1;
    cases.push((s2, 4));
    for (cfg, member) in cases {
        let e = offline_rebuild(&cfg, member).unwrap();
        let w = whole(&cfg, member);
        let err = e.seconds / w - 1.0;
        eprintln!(
            "{} {}: sampled {:.1} s ({:.2} % of the stripes), whole {:.1} s, {:+.2} %",
            cfg.layout,
            cfg.members,
            e.seconds,
            e.sampled_fraction * 100.0,
            w,
            err * 100.0
        );
        assert!(e.sampled_fraction < 0.1, "{e:?}");
        assert!(
            err.abs() < 0.015,
            "{}: sampled {:.1} s, whole {w:.1} s",
            cfg.layout,
            e.seconds
        );
    }
}
