//! DESIGN invariant: for the same workload the engine and the simulator issue the
//! same reads and writes to every member. The engine runs on real files (through a
//! counting wrapper); the simulator runs the same request stream in simulated time.

use hetraid_core::pace::PaceScope;
use hetraid_core::plan::{pages_touched, Op};
use hetraid_core::WritePolicy;
use hetraid_engine::format::{LayoutOptions, DATA_OFFSET};
use hetraid_engine::member::{FileMember, Member};
use hetraid_engine::{Array, CreateOptions};
use hetraid_sim::{RunConfig, Size};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// Counts data-area operations (the superblock and bitmap have no simulator
/// counterpart).
struct Counting {
    inner: Arc<dyn Member>,
    /// reads, read bytes, read pages, writes, write bytes, write pages,
    /// discards, discard bytes
    c: [AtomicU64; 8],
}

impl Counting {
    fn add(&self, write: bool, off: u64, len: u64) {
        if off < DATA_OFFSET {
            return;
        }
        let b = if write { 3 } else { 0 };
        self.c[b].fetch_add(1, Relaxed);
        self.c[b + 1].fetch_add(len, Relaxed);
        self.c[b + 2].fetch_add(pages_touched(off - DATA_OFFSET, len), Relaxed);
    }
    fn get(&self) -> [u64; 8] {
        std::array::from_fn(|i| self.c[i].load(Relaxed))
    }
}

impl Member for Counting {
    fn read_at(&self, buf: &mut [u8], off: u64) -> std::io::Result<()> {
        self.add(false, off, buf.len() as u64);
        self.inner.read_at(buf, off)
    }
    fn write_at(&self, buf: &[u8], off: u64) -> std::io::Result<()> {
        self.add(true, off, buf.len() as u64);
        self.inner.write_at(buf, off)
    }
    fn flush(&self) -> std::io::Result<()> {
        self.inner.flush()
    }
    fn discard(&self, off: u64, len: u64) -> std::io::Result<bool> {
        if off >= DATA_OFFSET {
            self.c[6].fetch_add(1, Relaxed);
            self.c[7].fetch_add(len, Relaxed);
        }
        self.inner.discard(off, len)
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn name(&self) -> String {
        self.inner.name()
    }
}

/// Counts a log device's writes: ring (records and pads) and headers.
struct LogCounting {
    inner: Arc<dyn Member>,
    /// ring ops, ring bytes, header ops
    c: [AtomicU64; 3],
}

impl Member for LogCounting {
    fn read_at(&self, buf: &mut [u8], off: u64) -> std::io::Result<()> {
        self.inner.read_at(buf, off)
    }
    fn write_at(&self, buf: &[u8], off: u64) -> std::io::Result<()> {
        if off >= hetraid_core::journal::RING_OFFSET {
            self.c[0].fetch_add(1, Relaxed);
            self.c[1].fetch_add(buf.len() as u64, Relaxed);
        } else {
            self.c[2].fetch_add(1, Relaxed);
        }
        self.inner.write_at(buf, off)
    }
    fn flush(&self) -> std::io::Result<()> {
        self.inner.flush()
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn name(&self) -> String {
        self.inner.name()
    }
}

fn check(cfg: RunConfig, members: usize) {
    check_with(cfg, members, None);
}

/// The log the engine-vs-simulator check puts in front of the array: device
/// bytes and mode.
#[derive(Clone, Copy)]
struct LogCfg(u64, hetraid_engine::format::LogMode);

/// As [`check`]; with `log` (log device bytes) a journal on one log device,
/// whose records, pads and checkpoints must match too.
fn check_with(cfg: RunConfig, members: usize, log: Option<LogCfg>) -> hetraid_sim::Report {
    const MEMBER: u64 = 48 << 20;
    let dir = tempfile::tempdir().unwrap();
    // HPDA: HDD-1 holds the parity and the log past it, HDD-2 the log
    // (the simulator sizes them so from member_size and log_size).
    let hpda = cfg.layout == "hpda";
    let hpda_log = cfg.log_size.map_or(0, |s| s.0);
    let counting: Vec<Arc<Counting>> = (0..members)
        .map(|i| {
            let p = dir.path().join(format!("m{i}"));
            let len = match i {
                _ if !hpda => MEMBER,
                i if i == members - 2 => MEMBER + hpda_log,
                i if i == members - 1 => DATA_OFFSET + hpda_log,
                _ => MEMBER,
            };
            std::fs::File::create(&p).unwrap().set_len(len).unwrap();
            let f: Arc<dyn Member> = Arc::new(FileMember::open(&p).unwrap());
            Arc::new(Counting {
                inner: f,
                c: Default::default(),
            })
        })
        .collect();
    let dyn_members: Vec<Arc<dyn Member>> = counting
        .iter()
        .map(|c| c.clone() as Arc<dyn Member>)
        .collect();
    let specs = hetraid_sim::preset::parse_members(&cfg.members).unwrap();
    let log_dev = log.map(|LogCfg(size, _)| {
        let p = dir.path().join("log");
        std::fs::File::create(&p).unwrap().set_len(size).unwrap();
        Arc::new(LogCounting {
            inner: Arc::new(FileMember::open(&p).unwrap()),
            c: Default::default(),
        })
    });
    let array = Array::create(
        dyn_members,
        &CreateOptions {
            // The simulator's options, as the simulator reads them.
            layout: hetraid_sim::setup::layout_options(&cfg).unwrap(),
            chunk_bytes: cfg.chunk.0,
            policy: WritePolicy::parse(&cfg.policy).unwrap(),
            kinds: specs.iter().map(|s| s.kind).collect(),
            assume_clean: true,
            force: false,
            checksums: false,
            read_policy: None,
            log: if hpda {
                Some(hetraid_engine::LogSpec {
                    devices: vec![],
                    kinds: vec![],
                    mode: hetraid_engine::format::LogMode::WriteBack,
                    region: Some(hpda_log),
                })
            } else {
                log_dev.as_ref().map(|d| hetraid_engine::LogSpec {
                    devices: vec![d.clone() as Arc<dyn Member>],
                    kinds: vec![],
                    mode: log.unwrap().1,
                    region: None,
                })
            },
        },
    )
    .unwrap();
    // Balanced reads depend on timing (which copy is busy when): the two
    // executors compare with the first copy always; core's own tests and the
    // simulator's balance test cover the policies.
    let copies = array.keeps_copies();
    if copies {
        array
            .set_read_policy(hetraid_core::readbalance::ReadPolicy::First, false)
            .unwrap();
    }
    let log_before: [u64; 3] = log_dev
        .as_ref()
        .map_or([0; 3], |d| std::array::from_fn(|i| d.c[i].load(Relaxed)));
    let data_size = (MEMBER - DATA_OFFSET) / cfg.chunk.0 * cfg.chunk.0;
    let cfg = RunConfig {
        member_size: Some(Size(data_size)),
        log: log.map(|_| "x25e-64".to_string()),
        log_size: log.map(|l| Size(l.0)).or(cfg.log_size),
        log_mode: log.map(|l| l.1.name().to_string()),
        read_policy: copies.then(|| "first".to_string()),
        ..cfg
    };
    for &f in cfg.failed.iter().flat_map(|f| f.0.iter()) {
        array.fail(f).unwrap();
    }
    let before: Vec<[u64; 8]> = counting.iter().map(|c| c.get()).collect();
    let stream = hetraid_sim::sim::request_stream(&cfg).unwrap();
    assert!(stream.len() > 50, "{} requests", stream.len());
    let data = vec![0x5au8; cfg.size.0 as usize];
    let mut buf = vec![0u8; cfg.size.0 as usize];
    for r in &stream {
        match r.op {
            Op::Write => array.write(r.offset, &data[..r.len as usize]).unwrap(),
            Op::Read => array.read(r.offset, &mut buf[..r.len as usize]).unwrap(),
            Op::Trim => {
                array.trim(r.offset, r.len).unwrap();
            }
        }
    }
    let sim = hetraid_sim::run(&cfg).unwrap();
    assert_eq!((sim.requests + sim.trims) as usize, stream.len());
    for (i, m) in sim.members.iter().enumerate() {
        let e = counting[i].get();
        let e: Vec<u64> = (0..8).map(|k| e[k] - before[i][k]).collect();
        let s = vec![
            m.reads,
            m.read_bytes,
            m.read_pages,
            m.writes,
            m.write_bytes,
            m.write_pages,
            m.discards,
            m.discard_bytes,
        ];
        assert_eq!(
            e, s,
            "member {i} of {} ({} {} qd{}), engine vs simulator [reads, read bytes, read pages, writes, write bytes, write pages, discards, discard bytes]",
            cfg.layout, cfg.workload, cfg.size.0, cfg.qd
        );
    }
    if let Some(d) = &log_dev {
        let l = sim.log.as_ref().expect("the simulator ran a log");
        let e: Vec<u64> = (0..3)
            .map(|i| d.c[i].load(Relaxed) - log_before[i])
            .collect();
        let s = vec![
            l.record_writes + l.pads,
            l.record_bytes + l.pads * hetraid_core::journal::PAGE,
            l.checkpoints,
        ];
        eprintln!(
            "log ({}): {} records, {} pads, {} checkpoints, {} bytes reclaimed; engine [ring writes, ring bytes, header writes] {e:?}",
            l.mode, l.records, l.pads, l.checkpoints, l.reclaimed_bytes
        );
        assert_eq!(
            e, s,
            "log device, engine vs simulator [ring writes, ring bytes, header writes]"
        );
        assert_eq!(l.devices[0].writes, s[0] + s[2]);
        assert!(
            l.checkpoints > 0 && l.pads > 0,
            "the run should wrap the ring: {l:?}"
        );
    }
    sim
}

/// The journal (issue 12): the simulator's log makes the engine's decisions —
/// the same records (whole stripe updates), pads where the ring wraps and
/// checkpoints when it is full — and the members see the same operations.
#[test]
fn a_journaled_raid5_logs_as_the_engine_does() {
    let mut c = cfg("raid5", "caviar-black-640*5", "mixed", 12 << 10).with_rf(0.3);
    c.qd = 1;
    c.chunk = Size(16 << 10);
    c.align = Some(Size(4096));
    let journal = |size| Some(LogCfg(size, hetraid_engine::format::LogMode::Journal));
    check_with(c, 5, journal(2 << 20));
    let mut d = cfg("raid6", "wd20eads*6", "random-write", 40 << 10);
    d.qd = 1;
    d.chunk = Size(16 << 10);
    check_with(d, 6, journal(2 << 20));
}

/// Write-back (issue 12): the simulator logs the same data records, reclaims
/// the same batches at the same points (half full, no room) as the same
/// journaled stripe updates, and checkpoints where the engine does; reads the
/// log holds entirely touch no member in either.
#[test]
fn a_write_back_raid5_logs_and_reclaims_as_the_engine_does() {
    let wb = |size| Some(LogCfg(size, hetraid_engine::format::LogMode::WriteBack));
    let mut c = cfg("raid5", "caviar-black-640*5", "mixed", 12 << 10).with_rf(0.3);
    c.qd = 1;
    c.chunk = Size(16 << 10);
    c.align = Some(Size(4096));
    c.span = Some(Size(4 << 20));
    check_with(c, 5, wb(2 << 20));
}

/// HPDA (issue 13): the director sends the same writes to the log (data
/// records on HDD-1 past the parity and on HDD-2) and to the RAID4 (intent
/// records, then the member writes); the reclaimer (the log passing half
/// full) writes the same batches; every member — the HDDs' log traffic
/// included — sees the same operations.
#[test]
fn hpda_directs_logs_and_reclaims_as_the_engine_does() {
    for (workload, size) in [("mixed", 12 << 10), ("seq-write", 16 << 10)] {
        let mut c = cfg("hpda", "x25e-64*3,caviar-black-640*2", workload, size);
        if workload == "mixed" {
            c = c.with_rf(0.3);
        }
        c.qd = 1;
        c.chunk = Size(16 << 10);
        c.align = Some(Size(4096));
        c.span = Some(Size(4 << 20));
        c.log_size = Some(Size(2 << 20));
        let r = check_with(c, 5, None);
        let l = r.log.as_ref().expect("hpda has a log");
        eprintln!(
            "hpda {workload}: {} records ({} bytes), {} pads, {} checkpoints, {} bytes reclaimed; HDD-1 {} writes, HDD-2 {} writes",
            l.records, l.record_bytes, l.pads, l.checkpoints, l.reclaimed_bytes,
            r.members[3].writes, r.members[4].writes
        );
        assert!(r.members[4].writes > 0, "HDD-2 holds the log's mirror");
        if workload == "mixed" {
            assert!(l.checkpoints > 0, "{workload}: the ring should fill");
            assert!(
                l.reclaimed_bytes > 0,
                "the log should pass half full and reclaim"
            );
        } else {
            // Sequential writes go to the RAID4: an intent record names a
            // run of 256 stripes, so the stream writes a handful.
            assert!(
                l.records < 10 && r.members[3].writes > 250,
                "{workload}: {l:?}"
            );
        }
    }
}

fn cfg(layout: &str, members: &str, workload: &str, size: u64) -> RunConfig {
    let mut c = RunConfig::new(layout, members);
    c.workload = workload.into();
    c.size = Size(size);
    c.total = Some(Size(size * 300));
    c.qd = 8;
    c.seed = 11;
    c
}

#[test]
fn raid5_mixed_small_and_unaligned() {
    let mut c = cfg("raid5", "caviar-black-640*5", "mixed", 12 << 10);
    c.read_fraction = Some(0.4);
    c.align = Some(Size(1024));
    check(c.clone(), 5);
    c.size = Size(200 << 10);
    c.total = Some(Size(200 << 10).0.checked_mul(200).map(Size).unwrap());
    c.chunk = Size(16 << 10);
    check(c, 5);
}

#[test]
fn raid4s_modthresh_medium_writes_and_degraded() {
    let mut c = cfg(
        "raid4s",
        "caviar-black-640*4,x25e-64",
        "random-write",
        128 << 10,
    );
    c.policy = "modthresh".into();
    check(c.clone(), 5);
    c.workload = "mixed".into();
    c.read_fraction = Some(0.5);
    c.size = Size(20 << 10);
    c.failed = Some(1.into());
    check(c, 5);
}

#[test]
fn raid6_raid10_raid0_raidh() {
    let mut d = cfg("raid6", "wd20eads*6", "mixed", 20 << 10).with_rf(0.5);
    d.failed = Some(hetraid_sim::config::FailedSet(vec![1, 4]));
    check(d, 6);
    check(cfg("raid6", "wd20eads*6", "random-write", 36 << 10), 6);
    check(
        cfg("raid10", "x25e-64*4", "mixed", 24 << 10).with_rf(0.5),
        4,
    );
    check(
        cfg("raid0", "x25e-64*3", "mixed", 100 << 10).with_rf(0.3),
        3,
    );
    let mut h = cfg(
        "raidh",
        "x25e-64,caviar-black-640*3,x25e-64",
        "random-write",
        8 << 10,
    );
    h.weights = Some(hetraid_sim::config::Weights::List(vec![2, 0, 0, 0, 2]));
    check(h, 5);
}

/// Declustered (issue 20): the same member I/O in both executors, healthy,
/// one parity with a member out, two parities with two out.
#[test]
fn declustered_healthy_and_degraded() {
    let mut d = cfg("declustered", "wd20eads*9", "mixed", 12 << 10).with_rf(0.4);
    d.width = Some(4);
    d.spares = Some(1);
    check(d.clone(), 9);
    d.failed = Some(hetraid_sim::config::FailedSet(vec![3]));
    check(d, 9);
    let mut d2 = cfg("declustered", "wd20eads*10", "random-write", 20 << 10);
    d2.width = Some(6);
    d2.parity = Some(2);
    d2.spares = Some(2);
    d2.failed = Some(hetraid_sim::config::FailedSet(vec![0, 7]));
    check(d2, 10);
}

trait WithRf {
    fn with_rf(self, f: f64) -> Self;
}
impl WithRf for RunConfig {
    fn with_rf(mut self, f: f64) -> Self {
        self.read_fraction = Some(f);
        self
    }
}

/// One pacer (issue 11): the same rebuild under `--max-speed 2M` takes the same
/// time in the engine (wall clock, in-memory members) and in the simulator
/// (simulated time, RAM devices), within 5 %: both wait as the core's
/// `pace::wait_ns` says, with batches sized by `rebuild::batch_stripes`.
#[test]
fn rebuild_pacing_is_the_same_in_engine_and_simulator() {
    const DATA: u64 = 6 << 20;
    const SPEED: u64 = 2_000_000;
    let (engine, sim) = paced_rebuild("raid5", 4, None, PaceScope::Array, SPEED, DATA);
    // And both honour the limit: 6 MiB at 2 MB/s is about 3.1 s.
    let want = DATA as f64 / SPEED as f64;
    assert!(
        (sim / want - 1.0).abs() < 0.1,
        "simulator {sim:.3} s for {want:.3} (engine {engine:.3} s)"
    );
}

/// Per-stream limits (`--pace stream`, one md device per S2-RAID subRAID):
/// S2-RAID5's three streams each held to 2 MB/s rebuild three times as fast
/// as one pair of limits allows, in the engine and the simulator alike.
#[test]
fn per_stream_pacing_is_the_same_in_engine_and_simulator() {
    const DATA: u64 = 6 << 20;
    const SPEED: u64 = 2_000_000;
    let (engine, sim) = paced_rebuild("s2raid5", 9, Some(3), PaceScope::Stream, SPEED, DATA);
    // The failed member's 6 MiB in three streams of 2 MiB, each at 2 MB/s.
    let want = DATA as f64 / 3.0 / SPEED as f64;
    assert!(
        (sim / want - 1.0).abs() < 0.1,
        "simulator {sim:.3} s for {want:.3} (engine {engine:.3} s)"
    );
}

/// Declustered (issue 20): a paced rebuild of a 9-member array takes the
/// same time in both executors (the batches and lanes of core
/// `batch_stripes`/`batches_in_flight`).
#[test]
fn declustered_pacing_is_the_same_in_engine_and_simulator() {
    const DATA: u64 = 6 << 20;
    const SPEED: u64 = 2_000_000;
    let (_, sim) = paced_rebuild("declustered", 9, Some(4), PaceScope::Array, SPEED, DATA);
    let want = DATA as f64 / SPEED as f64;
    assert!(
        (sim / want - 1.0).abs() < 0.15,
        "simulator {sim:.3} s for {want:.3}"
    );
}

/// Rebuild member 1 of `layout` (in place, onto a fresh member) at
/// `speed` in both executors; asserts they agree within 5 % and returns
/// (engine s, simulator s). `group` is S²-RAID5's group, or the
/// declustered width (one parity, one spare).
fn paced_rebuild(
    layout: &str,
    n: u64,
    group: Option<usize>,
    pace: PaceScope,
    speed: u64,
    data: u64,
) -> (f64, f64) {
    use hetraid_engine::member::FaultMember;
    use hetraid_engine::RebuildOptions;
    let chunk = 65536;
    let members: Vec<Arc<dyn Member>> = (0..n)
        .map(|i| Arc::new(FaultMember::new(&format!("m{i}"), DATA_OFFSET + data, i)) as _)
        .collect();
    let declustered = layout == "declustered";
    let opts = create_opts(
        match declustered {
            true => LayoutOptions {
                name: layout.into(),
                declustered: hetraid_core::layout::DeclusterParams {
                    width: group,
                    parity: Some(1),
                    spares: Some(1),
                },
                ..Default::default()
            },
            false => LayoutOptions {
                name: layout.into(),
                group,
                ..Default::default()
            },
        },
        chunk,
    );
    let a = Array::create(members, &opts).unwrap();
    a.fail(1).unwrap();
    a.replace(
        1,
        Arc::new(FaultMember::new("new", DATA_OFFSET + data, 99)),
        false,
    )
    .unwrap();
    let engine = a
        .rebuild(
            RebuildOptions {
                min_speed: speed,
                max_speed: speed,
                stop_after: None,
                pace,
            },
            &|_| {},
        )
        .unwrap();
    assert!(engine.completed);

    let mut c = RunConfig::new(layout, &format!("nvram-1g*{n}"));
    if declustered {
        c.width = group;
        c.parity = Some(1);
        c.spares = Some(1);
    } else {
        c.group = group;
    }
    c.chunk = Size(chunk);
    c.member_size = Some(Size(data));
    c.failed = Some(1.into());
    c.rebuild = true;
    c.min_speed = Size(speed);
    c.max_speed = Size(speed);
    c.pace = Some(pace.as_str().into());
    c.total = Some(Size(4096));
    c.qd = 1;
    let sim = hetraid_sim::run(&c).unwrap().rebuild.unwrap();
    let ratio = engine.seconds / sim.rebuild_time_s;
    eprintln!(
        "{layout} rebuild of {data} bytes at {speed} B/s, pace {}: engine {:.3} s, simulator {:.3} s, ratio {ratio:.3}",
        pace.as_str(),
        engine.seconds,
        sim.rebuild_time_s
    );
    assert!(
        (0.95..=1.05).contains(&ratio),
        "engine {:.3} s, simulator {:.3} s (ratio {ratio:.3})",
        engine.seconds,
        sim.rebuild_time_s
    );
    (engine.seconds, sim.rebuild_time_s)
}

/// Copy-back (issue 20, `hetraid rebalance`): after a rebuild into
/// distributed spare space, the engine's copy onto a replacement and the
/// simulator's issue the same reads and writes to every member (the core's
/// `copy_back_moves` in `CopyBack::batches`): one read per chunk from its
/// spare home, one write per chunk to its place on the replacement, and
/// nothing else. The simulator's share is its run with `copy_back` less
/// the same run without.
#[test]
fn declustered_copy_back_is_the_same_in_engine_and_simulator() {
    use hetraid_engine::member::FaultMember;
    const DATA: u64 = 6 << 20;
    const N: usize = 9;
    const FAILED: usize = 3;
    let chunk = 65536;
    let counting: Vec<Arc<Counting>> = (0..=N)
        .map(|i| {
            Arc::new(Counting {
                inner: Arc::new(FaultMember::new(
                    &format!("m{i}"),
                    DATA_OFFSET + DATA,
                    i as u64,
                )),
                c: Default::default(),
            })
        })
        .collect();
    let members: Vec<Arc<dyn Member>> = counting[..N]
        .iter()
        .map(|c| c.clone() as Arc<dyn Member>)
        .collect();
    let opts = create_opts(declustered_w4(), chunk);
    let a = Array::create(members, &opts).unwrap();
    a.fail(FAILED).unwrap();
    let (a, _) = a.rebuild_to_spare(Default::default(), &|_| {}).unwrap();
    let before: Vec<[u64; 8]> = counting.iter().map(|c| c.get()).collect();
    let (a, r) = a
        .copy_back(counting[N].clone() as Arc<dyn Member>, false, &|_| {})
        .unwrap();
    assert_eq!(r.member, FAILED);
    assert_eq!(a.status().state, "optimal");
    let mut engine: Vec<[u64; 6]> = counting
        .iter()
        .zip(&before)
        .map(|(c, b)| std::array::from_fn(|k| c.get()[k] - b[k]))
        .collect();
    // The replacement sits in the failed member's slot.
    engine.swap(FAILED, N);
    engine.truncate(N);

    let run = |copy_back: bool| {
        let mut c = sim_copy_back(N, FAILED, chunk, DATA);
        c.copy_back = copy_back;
        c.total = Some(Size(4096));
        c.qd = 1;
        hetraid_sim::run(&c).unwrap()
    };
    let (with, without) = (run(true), run(false));
    let cb = with.copy_back.as_ref().expect("a copy-back report");
    assert!(cb.completed);
    assert_eq!(cb.chunks, r.chunks);
    assert_eq!(cb.copied_bytes, r.bytes);
    let sim: Vec<[u64; 6]> = with
        .members
        .iter()
        .zip(&without.members)
        .map(|(w, o)| {
            [
                w.reads - o.reads,
                w.read_bytes - o.read_bytes,
                w.read_pages - o.read_pages,
                w.writes - o.writes,
                w.write_bytes - o.write_bytes,
                w.write_pages - o.write_pages,
            ]
        })
        .collect();
    for (m, (e, s)) in engine.iter().zip(&sim).enumerate() {
        assert_eq!(
            e, s,
            "member {m}: engine {e:?}, simulator {s:?} (reads, bytes, pages, writes, bytes, pages)"
        );
    }
    // Only the replacement is written, one chunk a write, and every
    // survivor reads some of its spare homes.
    assert_eq!(engine[FAILED][3], r.chunks);
    assert_eq!(engine[FAILED][0], 0);
    for (m, e) in engine.iter().enumerate().filter(|&(m, _)| m != FAILED) {
        assert_eq!(e[3], 0, "member {m} written by a copy-back");
        assert!(e[0] > 0, "member {m} read no spare home");
    }
    assert_eq!(engine.iter().map(|e| e[0]).sum::<u64>(), r.chunks);
}

/// The simulator's side of the copy-back checks: `declustered_w4` on `n`
/// RAM devices of `data` bytes, member `failed` rebuilt into spare space,
/// then copied back onto a replacement.
fn sim_copy_back(n: usize, failed: usize, chunk: u64, data: u64) -> RunConfig {
    let mut c = RunConfig::new("declustered", &format!("nvram-1g*{n}"));
    c.width = Some(4);
    c.parity = Some(1);
    c.spares = Some(1);
    c.chunk = Size(chunk);
    c.member_size = Some(Size(data));
    c.failed = Some(failed.into());
    c.rebuild = true;
    c.to_spare = true;
    c.copy_back = true;
    c
}

/// The copy-back checks' layout: declustered, groups of 4 with one parity,
/// one spare chunk a row.
fn declustered_w4() -> LayoutOptions {
    LayoutOptions {
        name: "declustered".into(),
        declustered: hetraid_core::layout::DeclusterParams {
            width: Some(4),
            parity: Some(1),
            spares: Some(1),
        },
        ..Default::default()
    }
}

/// Create options for the rebuild and copy-back checks: `layout` at
/// `chunk`, MD's write policy, assumed clean.
fn create_opts(layout: LayoutOptions, chunk: u64) -> CreateOptions {
    CreateOptions {
        layout,
        chunk_bytes: chunk,
        policy: WritePolicy::Md,
        kinds: vec![],
        assume_clean: true,
        force: false,
        checksums: false,
        read_policy: None,
        log: None,
    }
}

/// Trims (issue 37): the engine and the simulator discard the same member
/// extents (the core's whole-stripe rule), healthy and degraded, between the
/// same reads and writes.
#[test]
fn trims_discard_the_same_extents_in_engine_and_simulator() {
    for (layout, members, n) in [
        ("raid5", "caviar-black-640*5", 5),
        ("raid6", "wd20eads*6", 6),
        ("raid10", "wd20eads*4", 4),
    ] {
        let mut c = cfg(layout, members, "mixed", 16 << 10).with_rf(0.3);
        c.chunk = Size(16 << 10);
        c.trim_fraction = Some(0.25);
        c.trim_size = Some(Size(200 << 10));
        let sim = check_with(c.clone(), n, None);
        assert!(
            sim.trims > 0 && sim.trim_discarded_bytes > 0,
            "{layout}: {} trims discarded {} bytes",
            sim.trims,
            sim.trim_discarded_bytes
        );
        c.failed = Some(hetraid_sim::config::FailedSet(vec![1]));
        check(c, n);
    }
}

/// Issue 38, row 2: one "users are active" rule (core
/// `pace::users_active`) and one pacing procedure (after each batch, asked
/// again until it says go) under a user load. A reader issuing a 4 KiB read
/// every 50 ms keeps users active through the whole rebuild, so both
/// executors hold it to the minimum speed (1 MB/s, the maximum 8 MB/s):
/// 4 MiB take about 4.2 s in each, within 5 % of one another. (The engine
/// slept once per batch, at most 0.5 s: 0.53 s.)
#[test]
fn rebuild_pacing_under_user_load_is_the_same_in_engine_and_simulator() {
    use hetraid_engine::member::FaultMember;
    use hetraid_engine::RebuildOptions;
    const DATA: u64 = 4 << 20;
    const MIN: u64 = 1_000_000;
    const MAX: u64 = 8_000_000;
    let chunk = 65536;
    let n = 4;
    let a = memory_raid5(n, DATA, chunk);
    a.fail(1).unwrap();
    a.replace(
        1,
        Arc::new(FaultMember::new("new", DATA_OFFSET + DATA, 99)),
        false,
    )
    .unwrap();
    let engine = under_reads(&a, "rebuild under user load", || {
        a.rebuild(
            RebuildOptions {
                min_speed: MIN,
                max_speed: MAX,
                stop_after: None,
                pace: PaceScope::Array,
            },
            &|_| {},
        )
        .unwrap()
    });
    assert!(engine.completed);

    let dir = tempfile::tempdir().unwrap();
    let trace = read_trace(dir.path());
    let mut c = RunConfig::new("raid5", &format!("nvram-1g*{n}"));
    c.workload = "trace".into();
    c.trace = Some(trace);
    c.replay = "timed".into();
    c.chunk = Size(chunk);
    c.member_size = Some(Size(DATA));
    c.failed = Some(1.into());
    c.rebuild = true;
    c.min_speed = Size(MIN);
    c.max_speed = Size(MAX);
    let sim = hetraid_sim::run(&c).unwrap().rebuild.unwrap();
    let ratio = engine.seconds / sim.rebuild_time_s;
    let at_min = DATA as f64 / MIN as f64;
    eprintln!(
        "under user load: engine {:.3} s, simulator {:.3} s (ratio {ratio:.3}), {at_min:.2} s at the minimum speed",
        engine.seconds, sim.rebuild_time_s
    );
    assert!(
        (sim.rebuild_time_s / at_min - 1.0).abs() < 0.1,
        "the simulator's rebuild under load took {:.3} s, not about {at_min:.2}",
        sim.rebuild_time_s
    );
    assert!(
        (0.95..=1.05).contains(&ratio),
        "engine {:.3} s, simulator {:.3} s (ratio {ratio:.3})",
        engine.seconds,
        sim.rebuild_time_s
    );
}

/// A RAID5 of `n` in-memory members of `data` bytes of data each.
fn memory_raid5(n: u64, data: u64, chunk: u64) -> Array {
    use hetraid_engine::member::FaultMember;
    let members: Vec<Arc<dyn Member>> = (0..n)
        .map(|i| Arc::new(FaultMember::new(&format!("m{i}"), DATA_OFFSET + data, i)) as _)
        .collect();
    let record = LayoutOptions {
        name: "raid5".into(),
        ..Default::default()
    };
    Array::create(members, &create_opts(record, chunk)).unwrap()
}

/// The user load of the tests under load: a 4 KiB read every `LOAD_EVERY_MS`.
const LOAD_EVERY_MS: u64 = 50;

/// Run `work` on the engine array `a` while a reader does the user load;
/// a hang fails the test with a sentence (`what`) instead of holding CI.
fn under_reads<T: Send>(a: &Array, what: &'static str, work: impl FnOnce() -> T + Send) -> T {
    under_load(&|off, buf| a.read(off, buf).unwrap(), what, work)
}

/// As [`under_reads`], the reads made by `read` (a served array's cell).
fn under_load<T: Send>(
    read: &(dyn Fn(u64, &mut [u8]) + Sync),
    what: &'static str,
    work: impl FnOnce() -> T + Send,
) -> T {
    let done = std::sync::atomic::AtomicBool::new(false);
    let _watchdog = Watchdog::arm(what, 300);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut buf = vec![0u8; 4096];
            // Bounded by the work (it sets `done`, also when it panics) and
            // by a count far beyond the expected seconds of reads.
            for i in 0..20_000u64 {
                if done.load(Relaxed) {
                    break;
                }
                read((i * 7919 % 1000) * 4096, &mut buf);
                std::thread::sleep(std::time::Duration::from_millis(LOAD_EVERY_MS));
            }
        });
        // Set even when the work panics: the reader must not keep the scope.
        let _stop_reader = SetOnDrop(&done);
        work()
    })
}

/// The same load as a timed trace for the simulator (SPC: ASU, LBA, size,
/// opcode, seconds), 20 s of it.
fn read_trace(dir: &std::path::Path) -> String {
    let trace = dir.join("load.spc");
    let lines: String = (0..400u64)
        .map(|i| {
            format!(
                "0,{},4096,r,{:.3}\n",
                (i * 7919 % 1000) * 8,
                (i * LOAD_EVERY_MS) as f64 / 1000.0
            )
        })
        .collect();
    std::fs::write(&trace, lines).unwrap();
    trace.display().to_string()
}

/// Scrub pacing with user I/O running (issue 38): the engine's scrub and the
/// simulator's run the core's sweep; under a read every 50 ms both hold MD's
/// minimum, and take the same time within 5 %.
#[test]
fn scrub_pacing_under_user_load_is_the_same_in_engine_and_simulator() {
    use hetraid_engine::scrub::ScrubOptions;
    const DATA: u64 = 4 << 20;
    const MIN: u64 = 1_000_000;
    const MAX: u64 = 8_000_000;
    let chunk = 65536;
    let n = 4;
    let a = memory_raid5(n, DATA, chunk);
    let t0 = std::time::Instant::now();
    let report = under_reads(&a, "scrub under user load", || {
        a.scrub_with(
            None,
            ScrubOptions {
                min_speed: MIN,
                max_speed: MAX,
            },
            &|_| {},
        )
        .unwrap()
    });
    let engine_s = t0.elapsed().as_secs_f64();
    assert_eq!(report.mismatches, 0);
    let dir = tempfile::tempdir().unwrap();
    let mut c = RunConfig::new("raid5", &format!("nvram-1g*{n}"));
    c.workload = "trace".into();
    c.trace = Some(read_trace(dir.path()));
    c.replay = "timed".into();
    c.chunk = Size(chunk);
    c.member_size = Some(Size(DATA));
    c.scrub = true;
    c.min_speed = Size(MIN);
    c.max_speed = Size(MAX);
    let sim = hetraid_sim::run(&c).unwrap().scrub.unwrap();
    assert!(sim.completed);
    assert_eq!(sim.stripes, report.stripes_checked);
    let ratio = engine_s / sim.scrub_time_s;
    let at_min = DATA as f64 / MIN as f64;
    eprintln!(
        "scrub under user load: engine {engine_s:.3} s, simulator {:.3} s (ratio {ratio:.3}), {at_min:.2} s at the minimum speed",
        sim.scrub_time_s
    );
    assert!(
        (sim.scrub_time_s / at_min - 1.0).abs() < 0.1,
        "the simulator's scrub under load took {:.3} s, not about {at_min:.2}",
        sim.scrub_time_s
    );
    assert!(
        (0.95..=1.05).contains(&ratio),
        "engine {engine_s:.3} s, simulator {:.3} s (ratio {ratio:.3})",
        sim.scrub_time_s
    );
}

/// Copy-back with user I/O running (issue 38): the engine's served
/// rebalance (`ArrayCell::copy_back`: the spare homes stay the array's copy,
/// users go on) and the simulator's copy-back run the core's procedure
/// (`control::copyback`: the sweep of the core's batches, the pacer, the
/// watch) under a read every 50 ms: both hold MD's minimum and take the
/// same time within 5 %. Reads dirty nothing: neither copies a chunk twice.
#[test]
fn copy_back_pacing_under_user_load_is_the_same_in_engine_and_simulator() {
    use hetraid_engine::member::FaultMember;
    use hetraid_engine::{ArrayCell, ChangeOptions};
    const DATA: u64 = 3 << 20;
    const MIN: u64 = 1_000_000;
    const MAX: u64 = 8_000_000;
    const N: usize = 9;
    const FAILED: usize = 3;
    let chunk = 65536;
    let members: Vec<Arc<dyn Member>> = (0..N)
        .map(|i| {
            Arc::new(FaultMember::new(
                &format!("m{i}"),
                DATA_OFFSET + DATA,
                i as u64,
            )) as _
        })
        .collect();
    let opts = create_opts(declustered_w4(), chunk);
    let a = Array::create(members.clone(), &opts).unwrap();
    a.fail(FAILED).unwrap();
    let (a, _) = a.rebuild_to_spare(Default::default(), &|_| {}).unwrap();
    let survivors: Vec<Arc<dyn Member>> = members
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != FAILED)
        .map(|(_, m)| m.clone())
        .collect();
    let cell = ArrayCell::new(Arc::new(a), survivors, Box::new(|_| Ok(())));
    let new: Arc<dyn Member> = Arc::new(FaultMember::new("new", DATA_OFFSET + DATA, 99));
    let r = under_load(
        &|off, buf| cell.get().read(off, buf).unwrap(),
        "copy-back under user load",
        || {
            cell.copy_back(
                new.clone(),
                false,
                ChangeOptions {
                    min_speed: MIN,
                    max_speed: MAX,
                },
                &|_| {},
            )
            .unwrap()
        },
    );
    assert_eq!(r.member, FAILED);
    assert_eq!(r.recopied, 0, "reads dirty nothing");
    assert_eq!(cell.current().status().state, "optimal");

    let dir = tempfile::tempdir().unwrap();
    let mut c = sim_copy_back(N, FAILED, chunk, DATA);
    c.workload = "trace".into();
    c.trace = Some(read_trace(dir.path()));
    c.replay = "timed".into();
    c.min_speed = Size(MIN);
    c.max_speed = Size(MAX);
    let sim = hetraid_sim::run(&c).unwrap().copy_back.unwrap();
    assert!(sim.completed);
    assert_eq!((sim.chunks, sim.recopied), (r.chunks, 0));
    let ratio = r.seconds / sim.copy_back_time_s;
    let at_min = r.bytes as f64 / MIN as f64;
    eprintln!(
        "copy-back under user load: engine {:.3} s, simulator {:.3} s (ratio {ratio:.3}), {at_min:.2} s at the minimum speed; {} chunks",
        r.seconds, sim.copy_back_time_s, r.chunks
    );
    assert!(
        (sim.copy_back_time_s / at_min - 1.0).abs() < 0.1,
        "the simulator's copy-back under load took {:.3} s, not about {at_min:.2}",
        sim.copy_back_time_s
    );
    assert!(
        (0.95..=1.05).contains(&ratio),
        "engine {:.3} s, simulator {:.3} s (ratio {ratio:.3})",
        r.seconds,
        sim.copy_back_time_s
    );
}

/// Bursts of 4 KiB writes (`BURST` of them, 25 ms apart) with quiet gaps
/// of 1.2 s between them: SPC records (ASU, LBA, size, opcode, seconds),
/// and the same as (seconds, offset) for the engine. Offsets hop over the
/// first `span` bytes; some writes follow the one before (HPDA's director
/// sends runs to the RAID4). Far enough apart that a simulated disk's log
/// write ends before the next arrives: the simulator's group commit (one
/// device write for records that queued behind one in flight) then has
/// nothing to join, as the engine's writer, one at a time, has not.
fn bursts(dir: &std::path::Path, span: u64) -> (String, Vec<(f64, u64)>) {
    const BURST: u64 = 24;
    const EVERY_S: f64 = 0.025;
    let mut recs = Vec::new();
    for b in 0..3u64 {
        for i in 0..BURST {
            let t = b as f64 * (BURST as f64 * EVERY_S + 1.2) + i as f64 * EVERY_S;
            let k = b * BURST + i;
            let off = if i % 4 == 3 {
                recs.last().map_or(0, |&(_, o): &(f64, u64)| o + 4096)
            } else {
                (k * 7919 * 4096) % span
            };
            recs.push((t, off));
        }
    }
    let trace = dir.join("bursts.spc");
    let lines: String = recs
        .iter()
        .map(|&(t, off)| format!("0,{},4096,w,{t:.3}\n", off / 512))
        .collect();
    std::fs::write(&trace, lines).unwrap();
    (trace.display().to_string(), recs)
}

/// The log's background reclaimer with user writes running (issue 38): the
/// engine's (`Array::run_reclaimer`, a thread looking every 50 ms) and the
/// simulator's (a look event every 50 ms) run the core's procedure
/// (`control::reclaimer`) on the same timed load: bursts of writes with
/// quiet gaps longer than the idle time. Each gap's reclaim happens in both,
/// so every member and the log device see the same operations.
#[test]
fn write_back_idle_reclaim_under_a_timed_load_is_the_same_in_engine_and_simulator() {
    let (sim, engine, log) = timed_reclaim("raid5", "nvram-1g*4", 4);
    let l = sim.log.as_ref().unwrap();
    assert_eq!(
        l.idle_reclaims, 2,
        "one reclaim in each of the two gaps: {l:?}"
    );
    assert_eq!(log[0], l.record_writes + l.pads, "ring writes");
    assert_eq!(
        log[1],
        l.record_bytes + l.pads * hetraid_core::journal::PAGE,
        "ring bytes"
    );
    assert_eq!(log[2], l.checkpoints, "header writes");
    eprintln!("write-back under a timed load: {} records, {} checkpoints, {} idle reclaims; members {engine:?}", l.records, l.checkpoints, l.idle_reclaims);
}

/// HPDA's reclaimer with user writes running (issue 38): as above, the
/// monitor's idle time 0.3 s; the director sends the random writes to the
/// log and the runs to the RAID4, and each quiet gap empties the log onto
/// the RAID4 in both executors.
#[test]
fn hpda_reclaim_under_a_timed_load_is_the_same_in_engine_and_simulator() {
    let (sim, _, _) = timed_reclaim("hpda", "x25e-64*3,caviar-black-640*2", 5);
    let l = sim.log.as_ref().unwrap();
    assert!(l.reclaimed_bytes > 0, "the gaps reclaim: {l:?}");
    assert!(
        l.hpda_log_writes > 0 && l.hpda_raid4_writes > 0,
        "both routes: {l:?}"
    );
    eprintln!(
        "hpda under a timed load: {} records, {} bytes reclaimed, {} writes to the log, {} to the RAID4",
        l.records, l.reclaimed_bytes, l.hpda_log_writes, l.hpda_raid4_writes
    );
}

/// Run [`bursts`] on `layout` over `n` in-memory members (with a 2 MiB
/// write-back log device, or HPDA's own log) in the engine, its reclaimer
/// running with a 0.3 s idle time, and in the simulator; assert every
/// member's operations are equal. Returns the simulator's report, the
/// engine's member counts and its log device's (ring writes, ring bytes,
/// header writes).
fn timed_reclaim(
    layout: &str,
    devices: &str,
    n: usize,
) -> (hetraid_sim::Report, Vec<[u64; 6]>, [u64; 3]) {
    use hetraid_engine::member::FaultMember;
    const DATA: u64 = 8 << 20;
    const LOG: u64 = 2 << 20;
    const IDLE_S: f64 = 0.3;
    let hpda = layout == "hpda";
    let chunk = 16 << 10;
    let _watchdog = Watchdog::arm("reclaim under a timed load", 300);
    let counting: Vec<Arc<Counting>> = (0..n)
        .map(|i| {
            let len = match i {
                _ if !hpda => DATA_OFFSET + DATA,
                3 => DATA_OFFSET + DATA + LOG,
                4 => DATA_OFFSET + LOG,
                _ => DATA_OFFSET + DATA,
            };
            Arc::new(Counting {
                inner: Arc::new(FaultMember::new(&format!("m{i}"), len, i as u64)),
                c: Default::default(),
            })
        })
        .collect();
    let log_dev = Arc::new(LogCounting {
        inner: Arc::new(FaultMember::new("log", LOG, 50)),
        c: Default::default(),
    });
    let specs = hetraid_sim::preset::parse_members(devices).unwrap();
    let a = Array::create(
        counting
            .iter()
            .map(|c| c.clone() as Arc<dyn Member>)
            .collect(),
        &CreateOptions {
            kinds: specs.iter().map(|s| s.kind).collect(),
            log: Some(hetraid_engine::LogSpec {
                devices: if hpda {
                    vec![]
                } else {
                    vec![log_dev.clone() as Arc<dyn Member>]
                },
                kinds: vec![],
                mode: hetraid_engine::format::LogMode::WriteBack,
                region: hpda.then_some(LOG),
            }),
            ..create_opts(
                LayoutOptions {
                    name: layout.into(),
                    ..Default::default()
                },
                chunk,
            )
        },
    )
    .unwrap();
    a.set_hpda_idle(IDLE_S);
    let dir = tempfile::tempdir().unwrap();
    let (trace, recs) = bursts(dir.path(), DATA / 2);
    let before: Vec<[u64; 8]> = counting.iter().map(|c| c.get()).collect();
    let log_before: [u64; 3] = std::array::from_fn(|i| log_dev.c[i].load(Relaxed));
    let stop = std::sync::atomic::AtomicBool::new(false);
    let data = vec![0x5au8; 4096];
    std::thread::scope(|sc| {
        sc.spawn(|| {
            a.run_reclaimer(std::time::Duration::from_secs_f64(IDLE_S), &|d| {
                std::thread::sleep(d);
                !stop.load(Relaxed)
            })
        });
        let _stop = SetOnDrop(&stop);
        let t0 = std::time::Instant::now();
        for &(t, off) in &recs {
            let at = std::time::Duration::from_secs_f64(t);
            if let Some(d) = at.checked_sub(t0.elapsed()) {
                std::thread::sleep(d);
            }
            a.write(off, &data).unwrap();
        }
    });
    let engine: Vec<[u64; 6]> = counting
        .iter()
        .zip(&before)
        .map(|(c, b)| std::array::from_fn(|k| c.get()[k] - b[k]))
        .collect();
    let log: [u64; 3] = std::array::from_fn(|i| log_dev.c[i].load(Relaxed) - log_before[i]);

    let mut c = RunConfig::new(layout, devices);
    c.chunk = Size(chunk);
    c.member_size = Some(Size(DATA));
    c.workload = "trace".into();
    c.trace = Some(trace);
    c.replay = "timed".into();
    c.reclaim_idle = Some(IDLE_S);
    c.log_size = Some(Size(LOG));
    if !hpda {
        c.log = Some("x25e-64".into());
        c.log_mode = Some("write-back".into());
    }
    let sim = hetraid_sim::run(&c).unwrap();
    if std::env::var_os("HETRAID_VERBOSE").is_some() {
        for (m, e) in engine.iter().enumerate() {
            let s = &sim.members[m];
            eprintln!(
                "{layout} member {m}: engine {e:?}, simulator {:?}",
                [
                    s.reads,
                    s.read_bytes,
                    s.read_pages,
                    s.writes,
                    s.write_bytes,
                    s.write_pages
                ]
            );
        }
    }
    for (m, e) in engine.iter().enumerate() {
        let s = &sim.members[m];
        let s = [
            s.reads,
            s.read_bytes,
            s.read_pages,
            s.writes,
            s.write_bytes,
            s.write_pages,
        ];
        assert_eq!(
            *e, s,
            "{layout} member {m}: engine {e:?}, simulator {s:?} (reads, bytes, pages, writes, bytes, pages)"
        );
    }
    (sim, engine, log)
}

/// In-memory members for a grow: `n` of `data` bytes of data each, the
/// last of them the one added, each counted.
fn grow_members(n: usize, data: u64) -> Vec<Arc<Counting>> {
    use hetraid_engine::member::FaultMember;
    (0..n)
        .map(|i| {
            Arc::new(Counting {
                inner: Arc::new(FaultMember::new(
                    &format!("m{i}"),
                    DATA_OFFSET + data,
                    i as u64,
                )),
                c: Default::default(),
            })
        })
        .collect()
}

/// A RAID5 over all of `counting` but the last, and that last one added
/// (`grow --add`, recorded, nothing moved yet); the members, the new last.
fn grow_prepared(counting: &[Arc<Counting>], chunk: u64) -> Vec<Arc<dyn Member>> {
    let n = counting.len();
    let members: Vec<Arc<dyn Member>> = counting
        .iter()
        .map(|c| c.clone() as Arc<dyn Member>)
        .collect();
    let record = LayoutOptions {
        name: "raid5".into(),
        ..Default::default()
    };
    Array::create(members[..n - 1].to_vec(), &create_opts(record, chunk))
        .unwrap()
        .close()
        .unwrap();
    Array::prepare_grow(
        members[..n - 1].to_vec(),
        Some((members[n - 1].clone(), hetraid_core::MemberKind::Ssd)),
        None,
        false,
    )
    .unwrap()
}

/// The simulator's grow of a RAID5 of `n` RAM devices (the last added).
fn sim_grow(n: usize, data: u64, chunk: u64) -> RunConfig {
    let mut c = RunConfig::new("raid5", &format!("nvram-1g*{n}"));
    c.chunk = Size(chunk);
    c.member_size = Some(Size(data));
    c.grow = true;
    c
}

/// A grow (issue 38): the engine's restripe onto an added member and the
/// simulator's issue the same reads and writes to every member — the
/// core's steps (`reshape_steps`, the window of `limits`): each step's
/// bytes read through the array (the old layout above the mark), a
/// critical step's row read for its backup, the new rows written whole.
/// The simulator's share is its run less the same load on the array
/// before the grow (one 4 KiB read, done before the first step).
#[test]
fn a_grow_moves_the_same_chunks_in_engine_and_simulator() {
    const DATA: u64 = 4 << 20;
    const N: usize = 5;
    let chunk = 65536;
    let counting = grow_members(N, DATA);
    let all = grow_prepared(&counting, chunk);
    let before: Vec<[u64; 8]> = counting.iter().map(|c| c.get()).collect();
    let r = Array::resume_change(all, None)
        .unwrap()
        .expect("the restripe ends");
    assert_eq!(r.change, "restripe");
    let engine: Vec<[u64; 6]> = counting
        .iter()
        .zip(&before)
        .map(|(c, b)| std::array::from_fn(|k| c.get()[k] - b[k]))
        .collect();

    let load = |mut c: RunConfig| {
        c.total = Some(Size(4096));
        c.qd = 1;
        hetraid_sim::run(&c).unwrap()
    };
    let with = load(sim_grow(N, DATA, chunk));
    let mut without = sim_grow(N - 1, DATA, chunk);
    without.grow = false;
    let without = load(without);
    let g = with.grow.as_ref().expect("a grow report");
    assert!(g.completed && g.steps > 1 && g.backup_steps > 0, "{g:?}");
    assert_eq!(g.rows * chunk, r.moves * chunk);
    for (m, e) in engine.iter().enumerate() {
        let w = &with.members[m];
        let o = without.members.get(m);
        let less = |f: fn(&hetraid_sim::report::MemberReport) -> u64| f(w) - o.map_or(0, f);
        let s = [
            less(|x| x.reads),
            less(|x| x.read_bytes),
            less(|x| x.read_pages),
            less(|x| x.writes),
            less(|x| x.write_bytes),
            less(|x| x.write_pages),
        ];
        assert_eq!(
            *e, s,
            "member {m}: engine {e:?}, simulator {s:?} (reads, bytes, pages, writes, bytes, pages)"
        );
    }
    // Every row of the new layout is written on every member, once.
    let rows = DATA / chunk;
    for (m, e) in engine.iter().enumerate() {
        assert_eq!(e[3], rows, "member {m}");
    }
}

/// A grow with user I/O running (issue 38): the engine's served array
/// (`ArrayCell`, a step between two assemblies, requests held at its lock)
/// and the simulator's grow (requests held while a step runs) run the
/// core's paced change (`control::change`) under a read every 50 ms: both
/// hold MD's minimum, and take the same time within 5 %.
#[test]
fn grow_pacing_under_user_load_is_the_same_in_engine_and_simulator() {
    use hetraid_engine::{ArrayCell, ChangeOptions};
    const DATA: u64 = 4 << 20;
    const MIN: u64 = 1_000_000;
    const MAX: u64 = 8_000_000;
    const N: usize = 5;
    let chunk = 65536;
    let counting = grow_members(N, DATA);
    let given: Vec<Arc<dyn Member>> = counting[..N - 1]
        .iter()
        .map(|c| c.clone() as Arc<dyn Member>)
        .collect();
    let record = LayoutOptions {
        name: "raid5".into(),
        ..Default::default()
    };
    let first = Arc::new(Array::create(given.clone(), &create_opts(record, chunk)).unwrap());
    let cell = ArrayCell::new(first, given, Box::new(|_| Ok(())));
    let t0 = std::time::Instant::now();
    let r = under_load(
        &|off, buf| cell.get().read(off, buf).unwrap(),
        "grow under user load",
        || {
            cell.grow(
                Some((
                    counting[N - 1].clone() as Arc<dyn Member>,
                    hetraid_core::MemberKind::Ssd,
                )),
                None,
                false,
                ChangeOptions {
                    min_speed: MIN,
                    max_speed: MAX,
                },
            )
            .unwrap()
        },
    );
    let engine_s = t0.elapsed().as_secs_f64();
    assert_eq!(r.change, "restripe");
    assert_eq!(cell.current().status().state, "optimal");

    let dir = tempfile::tempdir().unwrap();
    let mut c = sim_grow(N, DATA, chunk);
    c.workload = "trace".into();
    c.trace = Some(read_trace(dir.path()));
    c.replay = "timed".into();
    c.min_speed = Size(MIN);
    c.max_speed = Size(MAX);
    let sim = hetraid_sim::run(&c).unwrap().grow.unwrap();
    assert!(sim.completed);
    assert_eq!(sim.rows, r.moves);
    let ratio = engine_s / sim.grow_time_s;
    let at_min = DATA as f64 / MIN as f64;
    eprintln!(
        "grow under user load: engine {engine_s:.3} s, simulator {:.3} s (ratio {ratio:.3}), {at_min:.2} s at the minimum speed; {} steps, {} requests held",
        sim.grow_time_s, sim.steps, sim.requests_held
    );
    // Held to the minimum, not the maximum (0.5 s): every step but the
    // last waits for it, and the last (a window of up to 25 of the 64
    // rows) ends the change at once.
    assert!(
        (0.6 * at_min..=1.05 * at_min).contains(&sim.grow_time_s),
        "the simulator's grow under load took {:.3} s, not about {at_min:.2} less its last window",
        sim.grow_time_s
    );
    assert!(
        (0.95..=1.05).contains(&ratio),
        "engine {engine_s:.3} s, simulator {:.3} s (ratio {ratio:.3})",
        sim.grow_time_s
    );
}

/// Sets its flag when dropped, also while a panic unwinds: a thread looping
/// until the flag is set then ends, and `thread::scope` can return the panic.
struct SetOnDrop<'a>(&'a std::sync::atomic::AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Relaxed);
    }
}

/// Aborts the test process with a sentence when not dropped within its time:
/// a deadlock fails the run at once, with its name, rather than holding CI to
/// its limit silently.
/// (Dropping the sender wakes the watchdog with Disconnected.)
struct Watchdog(#[allow(dead_code)] std::sync::mpsc::Sender<()>);

impl Watchdog {
    fn arm(what: &'static str, seconds: u64) -> Self {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                rx.recv_timeout(std::time::Duration::from_secs(seconds))
            {
                eprintln!("{what}: still running after {seconds} s; a deadlock or a lost wake-up, aborting the test process");
                std::process::abort();
            }
        });
        Self(tx)
    }
}
