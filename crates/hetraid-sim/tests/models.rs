//! Device models against the numbers they are built from, and the simulator against
//! [Rajaei Salmasi 2013]'s page counts.

use hetraid_sim::device::hdd::Hdd;
use hetraid_sim::device::ssd::{Ssd, SsdParams};
use hetraid_sim::device::{DevIo, Device};
use hetraid_sim::kernel::Rng;
use hetraid_sim::preset::DeviceSpec;
use hetraid_sim::{RunConfig, Size};

/// Random 4 KiB reads one at a time on an idle disk: the mean service time is
/// overhead + average seek + half a rotation + transfer, within 5 %.
#[test]
fn hdd_random_read_service_time_matches_its_parameters() {
    for name in ["caviar-black-640", "cheetah-15k5", "wd20eads", "atlas-3"] {
        let spec = DeviceSpec::lookup(name).unwrap();
        let p = spec.hdd.clone().unwrap();
        let mut d = Hdd::new(p.clone(), spec.capacity());
        let mut rng = Rng::new(3);
        let (mut now, mut sum, n) = (0u64, 0u64, 20_000u64);
        let mut started = Vec::new();
        for i in 0..n {
            let off = rng.below(spec.capacity() / 4096 - 1) * 4096;
            // An idle gap of random length so the platter angle is random too.
            now += rng.below(d.rotation_ns());
            d.submit(
                now,
                DevIo {
                    tag: i,
                    write: false,
                    offset: off,
                    len: 4096,
                },
                &mut started,
            );
            let (_, end) = started.pop().unwrap();
            sum += end - now;
            now = end;
            d.complete(now, &mut started);
            assert!(started.is_empty());
        }
        let mean_ms = sum as f64 / n as f64 / 1e6;
        let expect_ms = p.overhead_ms
            + p.seek_avg_ms
            + d.rotation_ns() as f64 / 2e6
            + 4096.0 / (p.media_mbps * 1e6) * 1e3;
        let err = (mean_ms - expect_ms).abs() / expect_ms;
        assert!(
            err < 0.05,
            "{name}: mean {mean_ms:.3} ms, expected {expect_ms:.3} ms"
        );
    }
}

#[test]
fn hdd_seek_curve_passes_through_the_datasheet_points() {
    let spec = DeviceSpec::lookup("caviar-black-640").unwrap();
    let p = spec.hdd.clone().unwrap();
    let d = Hdd::new(p.clone(), spec.capacity());
    let c = d.seek_curve();
    let ms = |ns: u64| ns as f64 / 1e6;
    assert!((ms(c.seek_ns(1)) - p.seek_single_ms).abs() < 0.01);
    assert!((ms(c.seek_ns(d.cylinders())) - p.seek_full_ms).abs() < 0.01);
    assert_eq!(c.seek_ns(0), 0);
    // Monotone.
    let mut last = 0;
    for x in (1..d.cylinders()).step_by(97) {
        assert!(c.seek_ns(x) >= last, "seek curve falls at {x}");
        last = c.seek_ns(x);
    }
}

/// Sequential reads ride the read-ahead cache; a write-back cache reports writes
/// at interface speed.
#[test]
fn hdd_caches_change_what_they_should() {
    let spec = DeviceSpec::lookup("caviar-black-640").unwrap();
    let mut p = spec.hdd.clone().unwrap();
    let seq = |p: &hetraid_sim::device::hdd::HddParams, write: bool| {
        let mut d = Hdd::new(p.clone(), spec.capacity());
        let (mut now, mut started) = (0u64, Vec::new());
        for i in 0..256u64 {
            d.submit(
                now,
                DevIo {
                    tag: i,
                    write,
                    offset: i * 4096,
                    len: 4096,
                },
                &mut started,
            );
            let (_, end) = started.iter().copied().find(|s| s.0 == i).unwrap();
            started.clear();
            now = end;
            d.complete(now, &mut started);
            started.clear();
        }
        now
    };
    let cached_reads = seq(&p, false);
    p.cache_segments = 0;
    let uncached_reads = seq(&p, false);
    assert!(
        cached_reads * 5 < uncached_reads,
        "{cached_reads} vs {uncached_reads}"
    );
    let through = seq(&p, true);
    p.write_cache = true;
    let back = seq(&p, true);
    assert!(back * 5 < through, "{back} vs {through}");
}

fn small_ssd() -> SsdParams {
    SsdParams {
        channels: 2,
        packages_per_channel: 1,
        dies_per_package: 1,
        planes_per_die: 2,
        blocks_per_plane: 64,
        pages_per_block: 32,
        page_bytes: 4096,
        read_ms: 0.025,
        program_ms: 0.2,
        erase_ms: 1.5,
        channel_mbps: 40.0,
        read_overhead_ms: 0.0,
        write_overhead_ms: 0.0,
        overprovision: 0.15,
        gc_free_blocks: 2,
        gc_free_percent: None,
        gc_occupies: Default::default(),
        multiplane: Default::default(),
        interface_mbps: None,
    }
}

/// Multi-plane restrictions (`multiplane = "same-op"`, the default): a die
/// runs one command at a time, so a read on one plane waits for a program
/// on another plane of its die, while programs on two planes of a die run
/// together (a multi-plane program). `independent` lets the read through.
#[test]
fn planes_of_a_die_share_it_by_operation() {
    use hetraid_sim::device::ssd::Multiplane;
    let xfer = (4096.0 / 40e6 * 1e9) as u64;
    let io = |tag: u64, write: bool, page: u64| DevIo {
        tag,
        write,
        offset: page * 4096,
        len: 4096,
    };
    for (mode, read_waits) in [(Multiplane::SameOp, true), (Multiplane::Independent, false)] {
        let mut p = small_ssd();
        p.multiplane = mode;
        let mut d = Ssd::new(p);
        let mut st = Vec::new();
        // Page 0 is programmed on plane 0 (die 0); page 2, never written,
        // reads from plane 2, the other plane of die 0.
        d.submit(0, io(0, true, 0), &mut st);
        d.submit(0, io(1, false, 2), &mut st);
        let program_end = xfer + 200_000;
        let read_end = st[1].1;
        if read_waits {
            assert_eq!(read_end, program_end + 25_000 + xfer, "{mode:?}");
        } else {
            // Only the channel is shared: the read's transfer follows the
            // write's, long before the program ends.
            assert_eq!(read_end, 2 * xfer, "{mode:?}");
            assert!(read_end < program_end);
        }
    }
    // Programs on planes 0 and 2 (die 0) overlap: pages 0, 1, 2 go to
    // planes 0, 1, 2 in turn; page 2's program waits only for its transfer
    // (channel 0 carries pages 0 and 2).
    let mut d = Ssd::new(small_ssd());
    let mut st = Vec::new();
    for pg in 0..3 {
        d.submit(0, io(pg, true, pg), &mut st);
    }
    assert_eq!(st[2].1, 2 * xfer + 200_000);
}

/// At steady state, random overwrites make garbage collection copy pages: write
/// amplification above 1, and every erase accounts for one block of programmed
/// pages.
#[test]
fn ssd_steady_state_write_amplification_and_erases_agree() {
    let p = small_ssd();
    let mut d = Ssd::new(p.clone());
    d.precondition();
    let pages = p.capacity() / 4096;
    let mut rng = Rng::new(9);
    let mut started = Vec::new();
    let mut now = 0;
    let writes = pages * 8;
    for i in 0..writes {
        let lpn = rng.below(pages);
        d.submit(
            now,
            DevIo {
                tag: i,
                write: true,
                offset: lpn * 4096,
                len: 4096,
            },
            &mut started,
        );
        now = started.pop().unwrap().1;
    }
    let w = d.wear().unwrap();
    assert!(w.write_amplification > 1.2, "WA {}", w.write_amplification);
    assert!(w.write_amplification < 15.0, "WA {}", w.write_amplification);
    let programmed = (writes as f64 * w.write_amplification).round() as u64;
    // Pages programmed = pages erased + free pages used up: at most the
    // over-provisioned space free after preconditioning, plus one open block per
    // plane, minus what GC keeps free at the end.
    let slack = p.raw_pages() - pages + p.planes() * p.pages_per_block as u64;
    let erased_pages = w.erases * p.pages_per_block as u64;
    assert!(
        erased_pages.abs_diff(programmed) <= slack,
        "{} erases x {} pages vs {programmed} programmed",
        w.erases,
        p.pages_per_block
    );
    assert_eq!(d.counters().erases, w.erases);
    assert_eq!(
        d.erase_counts().iter().map(|&e| e as u64).sum::<u64>(),
        w.erases
    );
    // Greedy GC spreads wear: no block erased more than a few times the mean.
    let mean = w.erases as f64 / d.erase_counts().len() as f64;
    assert!(
        (w.erase_max as f64) < mean * 4.0 + 2.0,
        "max {} mean {mean}",
        w.erase_max
    );
}

/// A fresh SSD writes each page once (no GC), and reads of one page cost a read
/// plus a transfer.
#[test]
fn fresh_ssd_timing_is_read_or_program_plus_transfer() {
    let p = small_ssd();
    let mut d = Ssd::new(p.clone());
    let mut st = Vec::new();
    d.submit(
        0,
        DevIo {
            tag: 0,
            write: false,
            offset: 0,
            len: 4096,
        },
        &mut st,
    );
    let xfer = 4096.0 / 40e6 * 1e9;
    assert_eq!(st[0].1, (25_000.0 + xfer) as u64);
    st.clear();
    d.submit(
        1_000_000,
        DevIo {
            tag: 1,
            write: true,
            offset: 0,
            len: 4096,
        },
        &mut st,
    );
    assert_eq!(st[0].1 - 1_000_000, (200_000.0 + xfer) as u64);
    assert_eq!(d.wear().unwrap().write_amplification, 1.0);
}

/// A write smaller than a flash page, onto a page that holds data, costs
/// a page read first (read-modify-write); onto a page never written, or a
/// whole page, it does not.
#[test]
fn sub_page_writes_read_the_page_first() {
    let p = small_ssd();
    let mut d = Ssd::new(p.clone());
    let mut st = Vec::new();
    let mut write = |d: &mut Ssd, at: u64, offset: u64, len: u64| {
        st.clear();
        d.submit(
            at,
            DevIo {
                tag: 0,
                write: true,
                offset,
                len,
            },
            &mut st,
        );
        st[0].1 - at
    };
    let xfer = (4096.0 / 40e6 * 1e9) as u64;
    // Never written: a program only.
    assert_eq!(write(&mut d, 0, 0, 512), 200_000 + xfer);
    // Whole page: a program only.
    assert_eq!(write(&mut d, 10_000_000, 0, 4096), 200_000 + xfer);
    // 2 KiB into a written page: read (25 us + transfer), then program.
    let t = write(&mut d, 20_000_000, 1024, 2048);
    assert_eq!(t, 25_000 + xfer + xfer + 200_000);
    // Unaligned 8 KiB: three pages, the two at the ends partial (page 1 is
    // written, page 2 was never: one read).
    write(&mut d, 30_000_000, 4096, 4096);
    let w0 = d.wear().unwrap().sub_page_rmw;
    write(&mut d, 40_000_000, 4096 + 512, 8192);
    assert_eq!(d.wear().unwrap().sub_page_rmw - w0, 1);
}

fn raid4(chunk: u64, size: u64) -> hetraid_sim::Report {
    let mut c = RunConfig::new("raid4", "disksim-ssd-32g*5");
    c.chunk = Size(chunk);
    c.size = Size(size);
    c.qd = 10;
    c.total = Some(Size(256 << 20));
    hetraid_sim::run(&c).unwrap()
}

/// [Rajaei Salmasi 2013]: with 128 KiB chunks the RAID4 parity SSD takes about twice the page
/// writes of a data SSD (here: random 384 KiB writes, three chunks each), and 4 KiB
/// chunks bring it back to about one.
#[test]
fn raid4_parity_page_writes_follow_the_chunk_size() {
    let ratio = |r: &hetraid_sim::Report| {
        let data: f64 = r.members[..4]
            .iter()
            .map(|m| m.write_pages as f64)
            .sum::<f64>()
            / 4.0;
        r.members[4].write_pages as f64 / data
    };
    let big = raid4(128 << 10, 384 << 10);
    assert!(
        (1.7..2.3).contains(&ratio(&big)),
        "128K chunks: {}",
        ratio(&big)
    );
    let small = raid4(4 << 10, 384 << 10);
    assert!(
        (0.95..1.15).contains(&ratio(&small)),
        "4K chunks: {}",
        ratio(&small)
    );
    assert!(small.throughput_mbps > big.throughput_mbps);
}

#[test]
fn same_seed_same_bytes_other_seed_other_run() {
    let mut c = RunConfig::new("raid5", "caviar-black-640*4,x25e-64");
    c.workload = "mixed".into();
    c.read_fraction = Some(0.3);
    c.qd = 10;
    c.total = Some(Size(8 << 20));
    let a = serde_json::to_string(&hetraid_sim::run(&c).unwrap()).unwrap();
    let b = serde_json::to_string(&hetraid_sim::run(&c).unwrap()).unwrap();
    assert_eq!(a, b);
    c.seed = 2;
    let d = serde_json::to_string(&hetraid_sim::run(&c).unwrap()).unwrap();
    assert_ne!(a, d);
}

fn rebuild_run(layout: &str, max_speed: u64, min_speed: u64, total: u64) -> hetraid_sim::Report {
    let mut c = RunConfig::new(layout, "caviar-black-640*9");
    if layout == "s2raid5" {
        c.group = Some(3);
    }
    c.member_size = Some(Size(192 << 20));
    c.failed = Some(4.into());
    c.rebuild = true;
    c.max_speed = Size(max_speed);
    c.min_speed = Size(min_speed);
    c.total = Some(Size(total));
    c.qd = 4;
    hetraid_sim::run(&c).unwrap()
}

/// S²-RAID's rebuild runs one stream per affected sub-array on disjoint disks
/// ([Wan 2010]); RAID5's is one stream over all of them.
#[test]
fn s2raid5_rebuilds_in_parallel_streams_faster_than_raid5() {
    let r5 = rebuild_run("raid5", 1 << 40, 1 << 40, 4096);
    let s2 = rebuild_run("s2raid5", 1 << 40, 1 << 40, 4096);
    let (a, b) = (r5.rebuild.unwrap(), s2.rebuild.unwrap());
    assert_eq!(a.streams, 1);
    assert_eq!(b.streams, 3);
    // Every chunk of the failed member is rebuilt (S²-RAID5 keeps parity of its
    // partitions on the same member, so the bytes are the member's used space).
    assert_eq!(a.rebuilt_bytes, 192 << 20);
    assert!(b.rebuilt_bytes > 180 << 20, "{}", b.rebuilt_bytes);
    // In place, both write one replacement disk, and with two batches in flight
    // per stream RAID5's single stream already writes it near the media rate: the
    // parallel streams only gain what RAID5 loses reading eight disks per stripe.
    let ratio = a.rebuild_time_s / b.rebuild_time_s;
    assert!(
        ratio > 1.1,
        "raid5 {} s, s2raid5 {} s",
        a.rebuild_time_s,
        b.rebuild_time_s
    );
    // Reads and writes overlap: the replacement disk is busy most of the time (a
    // batch's read waits for the slowest of eight disks plus its parity
    // arithmetic, so writes still wait now and then; it was under half before).
    let busy = r5.members[4].busy_s / a.rebuild_time_s;
    assert!(busy > 0.7, "replacement busy {busy}");

    // Into spare space: two targets instead of one replacement disk (with spare
    // partitions K defaults to G - 1 = 2, so no disk is both read and written),
    // nothing written to the failed member, and afterwards the relocated layout
    // is used.
    let mut c = RunConfig::new("s2raid5", "caviar-black-640*9");
    c.group = Some(3);
    c.spare_partitions = 1;
    c.to_spare = true;
    c.member_size = Some(Size(192 << 20));
    c.failed = Some(4.into());
    c.rebuild = true;
    c.max_speed = Size(1 << 40);
    c.min_speed = Size(1 << 40);
    // A load that outlasts the rebuild: most requests run on the relocated layout.
    c.total = Some(Size(8 << 20));
    let sp = hetraid_sim::run(&c).unwrap();
    assert!(sp.rebuild.as_ref().unwrap().requests_during < sp.requests / 2);
    let rb = sp.rebuild.clone().unwrap();
    assert!(
        rb.rebuild_time_s < b.rebuild_time_s * 0.75,
        "{} vs {}",
        rb.rebuild_time_s,
        b.rebuild_time_s
    );
    assert!(
        a.rebuild_time_s / rb.rebuild_time_s > 2.0,
        "raid5 {} s, s2raid5 into spare space {} s",
        a.rebuild_time_s,
        rb.rebuild_time_s
    );
    assert_eq!((sp.members[4].reads, sp.members[4].writes), (0, 0));
    // Issue 18's ideal: every stream at RAID5's in-place rate (no disk is
    // both read by one stream and written by another). The engine's
    // `rebuild_race` measures the same.
    assert_eq!(rb.streams, 2);
    let raid5_bps = a.rebuilt_bytes as f64 / a.rebuild_time_s;
    for (i, (b, t)) in rb.stream_bytes.iter().zip(&rb.stream_time_s).enumerate() {
        let of_ideal = *b as f64 / t / raid5_bps;
        assert!(of_ideal > 0.9, "stream {i}: {of_ideal:.2} of raid5's rate");
    }
    let targets = sp.members.iter().filter(|m| m.write_pages > 1000).count();
    assert_eq!(
        targets,
        2,
        "{:?}",
        sp.members.iter().map(|m| m.write_pages).collect::<Vec<_>>()
    );
    // No spare space: refused.
    c.spare_partitions = 0;
    assert!(hetraid_sim::run(&c)
        .unwrap_err()
        .contains("reserves no spare space"));
}

/// MD's knobs: an idle array rebuilds at speed_limit_max; a busy one at
/// speed_limit_min.
#[test]
fn rebuild_speed_follows_md_limits() {
    let bytes = 192u64 << 20;
    let idle = rebuild_run("raid5", 8 << 20, 1 << 20, 4096)
        .rebuild
        .unwrap();
    let want = bytes as f64 / (8 << 20) as f64;
    assert!(
        (idle.rebuild_time_s - want).abs() / want < 0.05,
        "{} s vs {want} s",
        idle.rebuild_time_s
    );
    // Under a load that outlasts the rebuild at the minimum speed.
    let busy = rebuild_run("raid5", 100 << 20, 4 << 20, 96 << 20);
    let rb = busy.rebuild.unwrap();
    let at_min = bytes as f64 / (4 << 20) as f64;
    assert!(
        (at_min * 0.9..at_min * 1.2).contains(&rb.rebuild_time_s),
        "{} s, at min speed {at_min} s",
        rb.rebuild_time_s
    );
    assert!(rb.requests_during > 0 && rb.mean_response_during_ms > 0.0);
}

/// What one pair of limits holds (core `pace::PaceScope`): under a load that
/// outlasts the rebuild, S2-RAID5's three streams held to the array's
/// minimum rebuild at it in all; each held to its own (one md device per
/// subRAID, the paper's prototype) they rebuild three times as fast, every
/// stream at the minimum. RAID5's one stream is the same either way.
#[test]
fn per_stream_limits_let_parallel_streams_add_up() {
    let run = |layout: &str, pace: Option<&str>| {
        let mut c = RunConfig::new(layout, "caviar-black-640*9");
        if layout == "s2raid5" {
            c.group = Some(3);
        }
        c.member_size = Some(Size(96 << 20));
        c.failed = Some(4.into());
        c.rebuild = true;
        c.max_speed = Size(100 << 20);
        c.min_speed = Size(2 << 20);
        c.workload = "random-write".into();
        c.duration_s = Some(200.0);
        c.qd = 2;
        c.pace = pace.map(String::from);
        hetraid_sim::run(&c).unwrap().rebuild.unwrap()
    };
    let array = run("s2raid5", None);
    let stream = run("s2raid5", Some("stream"));
    assert_eq!(array.streams, 3);
    let bytes = array.rebuilt_bytes as f64;
    let at_min = bytes / (2 << 20) as f64;
    assert!(
        (at_min * 0.9..at_min * 1.2).contains(&array.rebuild_time_s),
        "one pair of limits: {} s, the minimum gives {at_min} s",
        array.rebuild_time_s
    );
    let ratio = array.rebuild_time_s / stream.rebuild_time_s;
    assert!(
        (2.7..3.3).contains(&ratio),
        "per-stream limits: {} s vs {} s (ratio {ratio:.2}), three streams",
        stream.rebuild_time_s,
        array.rebuild_time_s
    );
    for (t, b) in stream.stream_time_s.iter().zip(&stream.stream_bytes) {
        let own_min = *b as f64 / (2 << 20) as f64;
        assert!(
            (own_min * 0.9..own_min * 1.2).contains(t),
            "a stream of {b} bytes took {t} s, its minimum {own_min} s"
        );
    }
    let r5a = run("raid5", None);
    let r5s = run("raid5", Some("stream"));
    assert_eq!(
        r5a.rebuild_time_s, r5s.rebuild_time_s,
        "one stream: the same"
    );
    // Without a rebuild the option does not apply.
    let mut c = RunConfig::new("raid5", "caviar-black-640*4");
    c.pace = Some("stream".into());
    let e = hetraid_sim::run(&c).unwrap_err();
    assert!(e.contains("applies to a rebuild"), "{e}");
    c.rebuild = true;
    c.failed = Some(1.into());
    c.pace = Some("disk".into());
    let e = hetraid_sim::run(&c).unwrap_err();
    assert!(e.contains("unknown pace scope"), "{e}");
}

/// `align_to_size` (fio's default blockalign = bs): a 32 KiB write at a
/// multiple of 32 KiB never crosses a 64 KiB chunk, so RAID0 sends each to
/// one member; at 4 KiB multiples 7 in 16 cross and are split in two.
#[test]
fn size_aligned_offsets_keep_writes_inside_a_chunk() {
    let run = |to_size: bool| {
        let mut c = RunConfig::new("raid0", "x25e-64*2");
        c.workload = "random-write".into();
        c.size = Size(32 << 10);
        c.total = Some(Size(64 << 20));
        c.align_to_size = to_size;
        let r = hetraid_sim::run(&c).unwrap();
        let ops: u64 = r.members.iter().map(|m| m.writes).sum();
        ops as f64 / r.requests as f64
    };
    assert_eq!(run(true), 1.0);
    let split = run(false) - 1.0;
    assert!(
        (split - 7.0 / 16.0).abs() < 0.03,
        "{split} of writes split, 7/16 expected"
    );
    let mut c = RunConfig::new("raid0", "x25e-64*2");
    c.align_to_size = true;
    c.align = Some(Size(4096));
    assert!(hetraid_sim::run(&c).unwrap_err().contains("not both"));
}

/// `weights = "auto"` (core `weights::auto_weights` from the devices'
/// models): on the thesis's RAIDH hardware (3 HDD + 2 SSD, small random
/// writes) the weights put all parity on the SSDs and do at least as well
/// as the thesis's hand-chosen 0,0,0,1,1, well ahead of RAID5; the TOML
/// key takes "auto" or a list.
#[test]
fn auto_weights_match_the_hand_chosen_raidh() {
    let run = |layout: &str, w: Option<hetraid_sim::config::Weights>| {
        let mut c = RunConfig::new(layout, "caviar-black-640*3,x25e-64*2");
        c.weights = w;
        c.size = Size(4096);
        c.qd = 10;
        c.total = Some(Size(32 << 20));
        hetraid_sim::run(&c).unwrap().throughput_mbps
    };
    use hetraid_sim::config::Weights;
    let auto = run("raidh", Some(Weights::Auto));
    let hand = run("raidh", Some(Weights::List(vec![0, 0, 0, 1, 1])));
    let raid5 = run("raid5", None);
    assert!(auto >= hand * 0.99, "auto {auto} MB/s, hand {hand}");
    assert!(auto > raid5 * 1.3, "auto {auto} MB/s, raid5 {raid5}");
    let c = RunConfig::parse(
        "layout = \"raidh\"\nmembers = \"x25e-64*3\"\nweights = \"auto\"\n",
        "t",
    )
    .unwrap();
    assert_eq!(c.weights, Some(Weights::Auto));
    let c = RunConfig::parse(
        "layout = \"raidh\"\nmembers = \"x25e-64*3\"\nweights = [1, 2, 3]\n",
        "t",
    )
    .unwrap();
    assert_eq!(c.weights, Some(Weights::List(vec![1, 2, 3])));
    assert!(RunConfig::parse(
        "layout = \"raidh\"\nmembers = \"x\"\nweights = \"fast\"\n",
        "t"
    )
    .is_err());
}

/// A looped trace replays its records back to back at the trace's own
/// arrival rate; 0 loops and loops past the bound are refused.
#[test]
fn trace_loops_replay_the_trace_again_at_its_rate() {
    let dir = std::env::temp_dir().join(format!("hetraid-loops-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("t.spc");
    // Four reads 10 ms apart.
    std::fs::write(
        &path,
        "0,0,4096,r,0.00\n0,8,4096,r,0.01\n0,16,4096,r,0.02\n0,24,4096,r,0.03\n",
    )
    .unwrap();
    let mut c = RunConfig::new("raid0", "x25e-64*2");
    c.workload = "trace".into();
    c.trace = Some(path.display().to_string());
    c.replay = "timed".into();
    let once = hetraid_sim::run(&c).unwrap();
    c.trace_loops = Some(3);
    let thrice = hetraid_sim::run(&c).unwrap();
    assert_eq!(once.requests, 4);
    assert_eq!(thrice.requests, 12);
    // Three passes of 40 ms (30 ms and one mean gap), the last ending at 110 ms.
    assert!(
        (0.110..0.112).contains(&thrice.sim_time_s),
        "{} s",
        thrice.sim_time_s
    );
    c.trace_loops = Some(0);
    assert!(hetraid_sim::run(&c).unwrap_err().contains("at least 1"));
    c.trace_loops = Some(u32::MAX);
    assert!(hetraid_sim::run(&c).unwrap_err().contains("fewer loops"));
    c.workload = "random-read".into();
    c.trace = None;
    c.trace_loops = Some(2);
    assert!(hetraid_sim::run(&c).unwrap_err().contains("trace workload"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Sequential reads run at the media rate whatever the request size and queue
/// depth (read-ahead streams, never faster than the platter), and random reads are
/// not slowed by read-ahead (it is aborted).
#[test]
fn hdd_sequential_reads_stream_at_the_media_rate() {
    let media = DeviceSpec::lookup("caviar-black-640")
        .unwrap()
        .hdd
        .unwrap()
        .media_mbps;
    for (size, qd) in [
        (1u64 << 20, 1u32),
        (1 << 20, 4),
        (64 << 10, 1),
        (4 << 10, 8),
    ] {
        let mut c = RunConfig::new("raid0", "caviar-black-640");
        c.workload = "seq-read".into();
        c.size = Size(size);
        c.qd = qd;
        c.total = Some(Size(64 << 20));
        let r = hetraid_sim::run(&c).unwrap();
        assert!(
            r.throughput_mbps <= media * 1.05,
            "{size} B qd{qd}: {} MB/s above the media rate {media}",
            r.throughput_mbps
        );
        if size >= 64 << 10 {
            assert!(
                r.throughput_mbps >= media * 0.9,
                "{size} B qd{qd}: {} MB/s, media {media}",
                r.throughput_mbps
            );
        }
    }
}

/// Zoned recording: the media rate falls from the outer edge to the inner one,
/// every byte maps to a cylinder inside the disk, and random reads still cost
/// seek + half a rotation + transfer.
#[test]
fn hdd_zones_slow_the_inner_edge() {
    let spec = DeviceSpec::lookup("caviar-black-640").unwrap();
    let mut p = spec.hdd.clone().unwrap();
    p.media_mbps_inner = Some(60.0);
    p.cache_segments = 0;
    let cap = spec.capacity();
    // One long read: positioning (tens of ms) is under 2 % of it.
    const LEN: u64 = 256 << 20;
    let rate = |off: u64| {
        let mut d = Hdd::new(p.clone(), cap);
        let mut st = Vec::new();
        d.submit(
            0,
            DevIo {
                tag: 0,
                write: false,
                offset: off,
                len: LEN,
            },
            &mut st,
        );
        LEN as f64 / (st.pop().unwrap().1 as f64 / 1e9) / 1e6
    };
    let outer = rate(0);
    let inner = rate(cap - LEN);
    assert!(
        (outer - p.media_mbps).abs() / p.media_mbps < 0.03,
        "outer {outer} MB/s"
    );
    assert!((inner - 60.0).abs() / 60.0 < 0.05, "inner {inner} MB/s");
    let d = Hdd::new(p.clone(), cap);
    assert!(d.cylinders() > 2);
}

/// A disk's write cache reports writes at once while it has room, but the
/// media writes them at its own rate: sustained writes run at the media
/// rate, not faster (an immediate report must not free the disk).
#[test]
fn a_write_cache_does_not_outrun_the_media() {
    let run = |cache: bool| {
        let mut c = RunConfig::new("raid0", "wd2500yd*2");
        c.workload = "seq-write".into();
        c.size = Size(1 << 20);
        c.qd = 16;
        c.total = Some(Size(256 << 20));
        c.write_cache = Some(cache);
        hetraid_sim::run(&c).unwrap().throughput_mbps
    };
    let (on, off) = (run(true), run(false));
    // Two disks of 75 MB/s media rate (the preset's outer zones are faster).
    assert!(on < 2.0 * 100.0, "{on} MB/s with the write cache");
    assert!(
        on > off * 0.9 && on < off * 1.5,
        "cache {on} vs none {off} MB/s"
    );
}

/// Read balancing (issue 14): a 4-way RAID1 under random 4 KiB reads at QD 8
/// spreads them over its members within 10 % (MD's read_balance, the
/// default), where reading the first copy sends all to member 0; every
/// policy spreads them, and spreading is faster.
#[test]
fn raid1_random_reads_spread_over_the_copies() {
    let run = |policy: Option<&str>| {
        let mut c = RunConfig::new("raid1", "caviar-black-640*4");
        c.workload = "random-read".into();
        c.size = Size(4096);
        c.qd = 8;
        c.total = Some(Size(16 << 20));
        c.read_policy = policy.map(String::from);
        // The policies alone: sit-out would send `first`'s queue (all on
        // member 0, eight deep) to another copy.
        c.sit_out = Some(false);
        hetraid_sim::run(&c).unwrap()
    };
    let first = run(Some("first"));
    assert_eq!(first.members[0].reads, first.requests);
    for policy in [
        None,
        Some("raidx1"),
        Some("raidx2"),
        Some("raidx3"),
        Some("raidx4"),
    ] {
        let r = run(policy);
        let mean = r.requests as f64 / 4.0;
        for m in &r.members {
            let off = (m.reads as f64 / mean - 1.0).abs();
            let tol = if policy.is_none() { 0.10 } else { 0.35 };
            assert!(
                off < tol,
                "{policy:?}: member {} read {} of {}",
                m.device,
                m.reads,
                r.requests
            );
        }
        assert!(
            r.iops > 3.0 * first.iops,
            "{policy:?}: {} vs {} IOPS",
            r.iops,
            first.iops
        );
    }
    // A layout without copies refuses the option.
    let mut c = RunConfig::new("raid5", "caviar-black-640*4");
    c.read_policy = Some("md".into());
    assert!(hetraid_sim::run(&c).unwrap_err().contains("keep copies"));
}

/// The write buffer (issue 14): writes are acknowledged once buffered, the
/// members still receive every byte, the run ends when the buffer drained
/// (no free throughput), and one writer of 1 MiB requests on mixed members
/// gains (the next request starts while the slowest member finishes).
#[test]
fn the_write_buffer_acknowledges_early_and_drains_everything() {
    let run = |buffer: Option<u64>| {
        let mut c = RunConfig::new("raidx", "caviar-black-640*3,wd20eads*2,x25e-64*2");
        c.chunks_per_bundle = Some(2);
        c.workload = "random-write".into();
        c.size = Size(1 << 20);
        c.qd = 1;
        c.member_size = Some(Size(20 << 30));
        c.total = Some(Size(128 << 20));
        c.write_buffer = buffer.map(Size);
        hetraid_sim::run(&c).unwrap()
    };
    let (plain, buffered) = (run(None), run(Some(64 << 20)));
    let written = |r: &hetraid_sim::Report| r.members.iter().map(|m| m.write_bytes).sum::<u64>();
    assert_eq!(
        written(&plain),
        written(&buffered),
        "every byte reaches the members"
    );
    assert!(buffered.mean_response_ms < plain.mean_response_ms);
    assert!(
        buffered.throughput_mbps > plain.throughput_mbps * 1.02,
        "{} vs {} MB/s",
        buffered.throughput_mbps,
        plain.throughput_mbps
    );
    // Not more than the members can write: the drain is counted.
    assert!(buffered.throughput_mbps < plain.throughput_mbps * 1.5);
    // With a write log the log decides when a write is acknowledged.
    let mut c = RunConfig::new("raid5", "caviar-black-640*4");
    c.log = Some("x25e-64".into());
    c.write_buffer = Some(Size(1 << 20));
    assert!(hetraid_sim::run(&c).unwrap_err().contains("write_buffer"));
}

/// The Cheetah 15K.5 seeks by its measured table (DiskSim's validated model):
/// the table's points exactly, and the figures DiskSim reports for it —
/// 1.13 / 1.51 / 2.65 / 6.914 ms at 0.1 / 1 / 10 / 100 % of the stroke, a
/// mean of 3.80 ms over uniformly random distances — within 2 %.
#[test]
fn cheetah_seeks_follow_the_measured_table() {
    let spec = DeviceSpec::lookup("cheetah-15k5").unwrap();
    let p = spec.hdd.clone().unwrap();
    assert!(p.seek_points.len() > 300, "the shipped table is loaded");
    let d = Hdd::new(p.clone(), spec.capacity());
    assert_eq!(d.cylinders(), 72_170);
    let c = d.seek_curve();
    let ms = |ns: u64| ns as f64 / 1e6;
    for &(dist, t) in &p.seek_points {
        assert!((ms(c.seek_ns(dist)) - t).abs() < 1e-5, "{dist}: {t}");
    }
    let stroke = d.cylinders();
    for (frac, want) in [(0.001, 1.13), (0.01, 1.51), (0.1, 2.65), (1.0, 6.914)] {
        let got = ms(c.seek_ns((stroke as f64 * frac) as u64));
        assert!(
            (got / want - 1.0).abs() < 0.02,
            "{frac}: {got:.3} ms, DiskSim {want}"
        );
    }
    // Uniformly random start and end cylinders.
    let mut rng = Rng::new(9);
    let n = 200_000;
    let mean = (0..n)
        .map(|_| ms(c.seek_ns(rng.below(stroke).abs_diff(rng.below(stroke)))))
        .sum::<f64>()
        / n as f64;
    assert!(
        (mean / 3.80 - 1.0).abs() < 0.02,
        "mean seek {mean:.3} ms, DiskSim 3.80"
    );
}

/// The cheap cases of the DiskSim validation (`scripts/validate-disksim.sh`
/// runs the trace ones): the Cheetah 15K.5 against DiskSim 4.0's validated
/// model — random 4 KiB reads one at a time 5.781 ms, sequential 64 KiB reads
/// at the outer zone 137 MB/s — within 5 %, and the random reads' seek,
/// rotation and transfer apart.
#[test]
fn cheetah_matches_disksim_on_random_and_sequential_reads() {
    let mut c = RunConfig::new("raid0", "cheetah-15k5");
    c.workload = "random-read".into();
    c.size = Size(4096);
    c.qd = 1;
    c.total = Some(Size(80 << 20)); // 20,480 reads, as scripts/validate-disksim.sh
    let r = hetraid_sim::run(&c).unwrap();
    assert!(
        (r.read.mean_ms / 5.781 - 1.0).abs() < 0.05,
        "random 4K reads: {:.3} ms, DiskSim 5.781",
        r.read.mean_ms
    );
    // DiskSim's breakdown of the same reads, each part within 5 %.
    let m = r.members[0]
        .mechanics
        .as_ref()
        .expect("a disk reports its mechanics");
    assert_eq!(m.media_ops, r.reads, "every random read goes to the media");
    for (part, ours, disksim) in [
        ("seek", m.seek_ms_mean, 3.761),
        ("rotation", m.rotation_ms_mean, 1.974),
        ("transfer", m.transfer_ms_mean, 0.041),
    ] {
        assert!(
            (ours / disksim - 1.0).abs() < 0.05,
            "random 4K reads' {part}: {ours:.3} ms, DiskSim {disksim}"
        );
    }
    c.workload = "seq-read".into();
    c.size = Size(64 << 10);
    c.total = Some(Size(512 << 20));
    let r = hetraid_sim::run(&c).unwrap();
    assert!(
        (r.throughput_mbps / 137.0 - 1.0).abs() < 0.05,
        "sequential 64K reads: {:.1} MB/s, DiskSim 137",
        r.throughput_mbps
    );
}

/// Issue 20: a declustered array rebuilds a failed member into spare chunks
/// spread over every survivor, so 20 disks with groups of 4 rebuild several
/// times as fast as a hot-spare RAID5 of 4 (the limit is (N - 1)/G = 4.75x);
/// nothing touches the failed member, every survivor takes a share of the
/// writes, and the relocated layout serves what comes after.
#[test]
fn declustered_rebuilds_into_spare_chunks_over_every_survivor() {
    let run = |layout: &str, members: &str, spare: bool, total: u64| {
        let mut c = RunConfig::new(layout, members);
        if layout == "declustered" {
            c.width = Some(4);
            c.spares = Some(1);
            c.to_spare = spare;
        }
        c.member_size = Some(Size(2 << 30));
        c.chunk = Size(4 << 20);
        c.failed = Some(2.into());
        c.rebuild = true;
        c.min_speed = Size(1 << 40);
        c.max_speed = Size(1 << 40);
        c.total = Some(Size(total));
        hetraid_sim::run(&c).unwrap()
    };
    let d = run("declustered", "wd20eads*20", true, 4096);
    let h = run("raid5", "wd20eads*4", false, 4096);
    let (dr, hr) = (d.rebuild.clone().unwrap(), h.rebuild.clone().unwrap());
    let gain = hr.rebuild_time_s / dr.rebuild_time_s;
    assert!(
        gain > 0.8 * 19.0 / 4.0,
        "{gain:.2}x ({} s vs {} s)",
        hr.rebuild_time_s,
        dr.rebuild_time_s
    );
    assert_eq!((d.members[2].reads, d.members[2].writes), (0, 0));
    let writers = d.members.iter().filter(|m| m.write_pages > 0).count();
    assert_eq!(writers, 19, "every survivor takes spare writes");
    // A load that outlasts the rebuild runs on the relocated layout.
    let after = run("declustered", "wd20eads*20", true, 64 << 20);
    assert!(after.rebuild.unwrap().requests_during < after.requests);
    assert_eq!((after.members[2].reads, after.members[2].writes), (0, 0));
    // Without --to-spare it rebuilds onto a replacement, as any layout.
    let inplace = run("declustered", "wd20eads*20", false, 4096);
    assert!(inplace.members[2].writes > 0);
}

/// TRIM in the SSD model (issue 37): at steady state, the same random
/// overwrites of the first half of the logical pages cost fewer garbage
/// collection copies and erases when the second half was discarded first
/// (its pages are no longer valid, so victims hold fewer), and the discard
/// is counted.
#[test]
fn discarded_pages_are_never_copied_by_garbage_collection() {
    let p = small_ssd();
    let pages = p.capacity() / 4096;
    let run = |discard: bool| {
        let mut d = Ssd::new(p.clone());
        d.precondition();
        if discard {
            d.discard(pages / 2 * 4096, pages / 2 * 4096);
        }
        let mut rng = Rng::new(11);
        let mut started = Vec::new();
        for i in 0..pages * 6 {
            let lpn = rng.below(pages / 2);
            d.submit(
                0,
                DevIo {
                    tag: i,
                    write: true,
                    offset: lpn * 4096,
                    len: 4096,
                },
                &mut started,
            );
        }
        (
            d.wear().unwrap(),
            d.counters().discards,
            d.counters().discard_bytes,
        )
    };
    let (kept, n0, _) = run(false);
    let (trimmed, n1, bytes) = run(true);
    assert_eq!((n0, n1, bytes), (0, 1, pages / 2 * 4096));
    assert_eq!(trimmed.discarded_pages, pages / 2);
    assert!(
        trimmed.gc_page_copies * 2 < kept.gc_page_copies,
        "gc copies: {} with half the pages discarded, {} without",
        trimmed.gc_page_copies,
        kept.gc_page_copies
    );
    assert!(
        trimmed.erases < kept.erases && trimmed.write_amplification < kept.write_amplification,
        "erases {} vs {}, WA {:.2} vs {:.2}",
        trimmed.erases,
        kept.erases,
        trimmed.write_amplification,
        kept.write_amplification
    );
}

/// blkparse discards (`D` in RWBS) are trims (issue 37): parsed as such,
/// counted by `trace stats`, and replayed: the whole stripes they cover are
/// discarded on the members.
#[test]
fn blkparse_discards_replay_as_trims() {
    use hetraid_core::plan::Op;
    use hetraid_sim::trace::{parse, stats, TraceFormat};
    let text = "\
  8,0    0        1     0.000000000  4242  Q  WS 0 + 2048 [fs]
  8,0    0        2     0.001000000  4242  Q   D 0 + 4096 [fs]
  8,0    0        3     0.002000000  4242  Q   R 8 + 8 [fs]
  8,0    0        4     0.003000000  4242  Q  DS 8192 + 1024 [fs]
";
    let recs = parse(text, TraceFormat::Blkparse, "t.blkparse").unwrap();
    let ops: Vec<Op> = recs.iter().map(|r| r.op).collect();
    assert_eq!(ops, vec![Op::Write, Op::Trim, Op::Read, Op::Trim]);
    assert_eq!(stats(&recs).trims, 2);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.blkparse");
    std::fs::write(&path, text).unwrap();
    let mut c = RunConfig::new("raid5", "nvram-1g*5");
    c.workload = "trace".into();
    c.trace = Some(path.display().to_string());
    c.chunk = Size(64 << 10);
    let r = hetraid_sim::run(&c).unwrap();
    assert_eq!((r.requests, r.trims), (2, 2));
    // 2 MiB from 0: 8 whole stripes of 256 KiB; 512 KiB from 4 MiB: 2.
    assert_eq!(r.trim_discarded_bytes, 10 * (256 << 10));
    let discarded: u64 = r.members.iter().map(|m| m.discard_bytes).sum();
    assert_eq!(
        discarded,
        10 * 5 * (64 << 10),
        "data and parity of 10 stripes"
    );
}

/// Issue 38, row 8: the write-back log's idle reclaimer in the simulator, by
/// the engine's rule (core `journal::idle_reclaim_due`, 5 s quiet). A timed
/// trace writes for half a second, is quiet for ten, then writes again: the
/// log is emptied once in the quiet stretch; with no gap, never.
#[test]
fn a_quiet_array_reclaims_its_write_back_log_once() {
    let dir = tempfile::tempdir().unwrap();
    let run = |gap_s: f64| {
        let mut lines = String::new();
        for i in 0..50u64 {
            lines += &format!("0,{},4096,w,{:.3}\n", i * 64, i as f64 * 0.01);
        }
        for i in 0..5u64 {
            lines += &format!(
                "0,{},4096,w,{:.3}\n",
                i * 64 + 8,
                0.5 + gap_s + i as f64 * 0.01
            );
        }
        let path = dir.path().join(format!("gap{gap_s}.spc"));
        std::fs::write(&path, lines).unwrap();
        let mut c = RunConfig::new("raid5", "caviar-black-640*4");
        c.workload = "trace".into();
        c.trace = Some(path.display().to_string());
        c.replay = "timed".into();
        c.log = Some("x25e-64".into());
        c.log_mode = Some("write-back".into());
        c.log_size = Some(Size(8 << 20));
        let r = hetraid_sim::run(&c).unwrap();
        let l = r.log.unwrap();
        (l.idle_reclaims, l.reclaimed_bytes)
    };
    let (quiet, bytes) = run(10.0);
    assert_eq!(quiet, 1, "one idle reclaim in a 10 s quiet stretch");
    assert!(bytes >= 50 * 4096, "{bytes} bytes reclaimed");
    assert_eq!(run(0.1).0, 0, "no idle reclaim without a quiet stretch");
}

/// The look-ahead's hints (`Device::prefetch`, every stage, on written,
/// unwritten and out-of-range pages, through garbage collection) change
/// no finish time and no wear figure.
#[test]
fn ssd_prefetch_hints_change_nothing() {
    let p = small_ssd();
    let pages = p.capacity() / 4096;
    let run = |hint: bool| {
        let mut d = Ssd::new(p.clone());
        let (mut rng, mut hints) = (Rng::new(5), Rng::new(6));
        let (mut started, mut now) = (Vec::new(), 0);
        for i in 0..pages * 6 {
            let lpn = rng.below(pages);
            if hint {
                for stage in 0..3 {
                    d.prefetch(hints.below(pages + 8) * 4096, stage);
                }
            }
            let io = DevIo {
                tag: i,
                write: true,
                offset: lpn * 4096,
                len: 4096,
            };
            d.submit(now, io, &mut started);
            now += 50_000;
        }
        (started, format!("{:?}", d.wear()))
    };
    let (plain, hinted) = (run(false), run(true));
    assert!(
        plain.1.contains("erases: ") && !plain.1.contains("erases: 0,"),
        "{}",
        plain.1
    );
    assert!(
        plain == hinted,
        "the hints changed the run: {} vs {}",
        plain.1,
        hinted.1
    );
}

/// Issue 42: an SSD's host interface (`interface_mbps`) caps what crosses
/// it: 1 MiB sequential writes then reads at eight outstanding run at the
/// interface's rate when the flash behind it is faster, and at the flash's
/// without the limit.
#[test]
fn an_ssd_interface_caps_sequential_transfers() {
    let run = |limit: Option<f64>| {
        let mut p = DeviceSpec::lookup("x25e-64").unwrap().ssd.unwrap();
        p.interface_mbps = limit;
        p.validate().unwrap();
        let mut d = Ssd::new(p);
        let mut rates = Vec::new();
        for write in [true, false] {
            let (n, len) = (64u64, 1u64 << 20);
            let mut started = Vec::new();
            // Reads long after the writes (the device idle again).
            let t0 = if write { 0 } else { 1_000_000_000_000u64 };
            for i in 0..n {
                d.submit(
                    t0,
                    DevIo {
                        tag: i,
                        write,
                        offset: i * len,
                        len,
                    },
                    &mut started,
                );
            }
            let end = started.iter().map(|s| s.1).max().unwrap();
            rates.push((n * len) as f64 / ((end - t0) as f64 / 1e9) / 1e6);
        }
        rates
    };
    let free = run(None);
    let capped = run(Some(100.0));
    eprintln!("x25e-64 writes/reads MB/s: {free:.0?} unlimited, {capped:.1?} at 100 MB/s");
    for (i, what) in ["writes", "reads"].iter().enumerate() {
        assert!(free[i] > 150.0, "{what}: {:.0} MB/s unlimited", free[i]);
        assert!(
            (90.0..=100.5).contains(&capped[i]),
            "{what}: {:.1} MB/s through a 100 MB/s interface ({:.0} unlimited)",
            capped[i],
            free[i]
        );
    }
    let mut bad = DeviceSpec::lookup("x25e-64").unwrap().ssd.unwrap();
    bad.interface_mbps = Some(0.0);
    assert!(bad.validate().unwrap_err().contains("interface_mbps"));
}
