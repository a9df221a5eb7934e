//! DESIGN invariant: for the same workload the engine and the simulator issue the
//! same reads and writes to every member. The engine runs on real files (through a
//! counting wrapper); the simulator runs the same request stream in simulated time.

use hetraid_core::plan::{pages_touched, Op};
use hetraid_core::WritePolicy;
use hetraid_engine::format::{LayoutRecord, DATA_OFFSET};
use hetraid_engine::member::{FileMember, Member};
use hetraid_engine::{Array, CreateOptions};
use hetraid_sim::{RunConfig, Size};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// Counts data-area operations (the superblock and bitmap have no simulator
/// counterpart).
struct Counting {
    inner: Arc<dyn Member>,
    c: [AtomicU64; 6],
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
    fn get(&self) -> [u64; 6] {
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
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn name(&self) -> String {
        self.inner.name()
    }
}

fn check(cfg: RunConfig, members: usize, weights: Vec<u64>) {
    const MEMBER: u64 = 48 << 20;
    let dir = tempfile::tempdir().unwrap();
    let counting: Vec<Arc<Counting>> = (0..members)
        .map(|i| {
            let p = dir.path().join(format!("m{i}"));
            std::fs::File::create(&p).unwrap().set_len(MEMBER).unwrap();
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
    let array = Array::create(
        dyn_members,
        &CreateOptions {
            layout: LayoutRecord {
                name: cfg.layout.clone(),
                weights,
                ..Default::default()
            },
            chunk_bytes: cfg.chunk.0,
            policy: WritePolicy::parse(&cfg.policy).unwrap(),
            kinds: specs.iter().map(|s| s.kind).collect(),
            assume_clean: true,
            force: false,
            checksums: false,
            log: None,
        },
    )
    .unwrap();
    let data_size = (MEMBER - DATA_OFFSET) / cfg.chunk.0 * cfg.chunk.0;
    let cfg = RunConfig {
        member_size: Some(Size(data_size)),
        ..cfg
    };
    for &f in cfg.failed.iter().flat_map(|f| f.0.iter()) {
        array.fail(f).unwrap();
    }
    let before: Vec<[u64; 6]> = counting.iter().map(|c| c.get()).collect();
    let stream = hetraid_sim::sim::request_stream(&cfg).unwrap();
    assert!(stream.len() > 50, "{} requests", stream.len());
    let data = vec![0x5au8; cfg.size.0 as usize];
    let mut buf = vec![0u8; cfg.size.0 as usize];
    for r in &stream {
        match r.op {
            Op::Write => array.write(r.offset, &data[..r.len as usize]).unwrap(),
            Op::Read => array.read(r.offset, &mut buf[..r.len as usize]).unwrap(),
        }
    }
    let sim = hetraid_sim::run(&cfg).unwrap();
    assert_eq!(sim.requests as usize, stream.len());
    for (i, m) in sim.members.iter().enumerate() {
        let e = counting[i].get();
        let e: Vec<u64> = (0..6).map(|k| e[k] - before[i][k]).collect();
        let s = vec![
            m.reads,
            m.read_bytes,
            m.read_pages,
            m.writes,
            m.write_bytes,
            m.write_pages,
        ];
        assert_eq!(
            e, s,
            "member {i} of {} ({} {} qd{}), engine vs simulator [reads, read bytes, read pages, writes, write bytes, write pages]",
            cfg.layout, cfg.workload, cfg.size.0, cfg.qd
        );
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
    check(c.clone(), 5, vec![]);
    c.size = Size(200 << 10);
    c.total = Some(Size(200 << 10).0.checked_mul(200).map(Size).unwrap());
    c.chunk = Size(16 << 10);
    check(c, 5, vec![]);
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
    check(c.clone(), 5, vec![]);
    c.workload = "mixed".into();
    c.read_fraction = Some(0.5);
    c.size = Size(20 << 10);
    c.failed = Some(1.into());
    check(c, 5, vec![]);
}

#[test]
fn raid6_raid10_raid0_raidh() {
    let mut d = cfg("raid6", "wd20eads*6", "mixed", 20 << 10).with_rf(0.5);
    d.failed = Some(hetraid_sim::config::FailedSet(vec![1, 4]));
    check(d, 6, vec![]);
    check(
        cfg("raid6", "wd20eads*6", "random-write", 36 << 10),
        6,
        vec![],
    );
    check(
        cfg("raid10", "x25e-64*4", "mixed", 24 << 10).with_rf(0.5),
        4,
        vec![],
    );
    check(
        cfg("raid0", "x25e-64*3", "mixed", 100 << 10).with_rf(0.3),
        3,
        vec![],
    );
    let mut h = cfg(
        "raidh",
        "x25e-64,caviar-black-640*3,x25e-64",
        "random-write",
        8 << 10,
    );
    h.weights = Some(vec![2, 0, 0, 0, 2]);
    check(h, 5, vec![2, 0, 0, 0, 2]);
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
    use hetraid_engine::member::FaultMember;
    use hetraid_engine::RebuildOptions;
    const DATA: u64 = 6 << 20;
    const SPEED: u64 = 2_000_000;
    let chunk = 65536;
    let members: Vec<Arc<dyn Member>> = (0..4)
        .map(|i| Arc::new(FaultMember::new(&format!("m{i}"), DATA_OFFSET + DATA, i)) as _)
        .collect();
    let opts = CreateOptions {
        layout: LayoutRecord {
            name: "raid5".into(),
            ..Default::default()
        },
        chunk_bytes: chunk,
        policy: WritePolicy::Md,
        kinds: vec![],
        assume_clean: true,
        force: false,
        checksums: false,
        log: None,
    };
    let a = Array::create(members, &opts).unwrap();
    a.fail(1).unwrap();
    a.replace(
        1,
        Arc::new(FaultMember::new("new", DATA_OFFSET + DATA, 9)),
        false,
    )
    .unwrap();
    let engine = a
        .rebuild(
            RebuildOptions {
                min_speed: SPEED,
                max_speed: SPEED,
                stop_after: None,
            },
            &|_| {},
        )
        .unwrap();
    assert!(engine.completed);

    let mut c = RunConfig::new("raid5", "nvram-1g*4");
    c.chunk = Size(chunk);
    c.member_size = Some(Size(DATA));
    c.failed = Some(1.into());
    c.rebuild = true;
    c.min_speed = Size(SPEED);
    c.max_speed = Size(SPEED);
    c.total = Some(Size(4096));
    c.qd = 1;
    let sim = hetraid_sim::run(&c).unwrap().rebuild.unwrap();
    let ratio = engine.seconds / sim.rebuild_time_s;
    eprintln!(
        "rebuild of 6 MiB at 2 MB/s: engine {:.3} s, simulator {:.3} s, ratio {ratio:.3}",
        engine.seconds, sim.rebuild_time_s
    );
    assert!(
        (0.95..=1.05).contains(&ratio),
        "engine {:.3} s, simulator {:.3} s (ratio {ratio:.3})",
        engine.seconds,
        sim.rebuild_time_s
    );
    // And both honour the limit: 6 MiB at 2 MB/s is about 3.1 s.
    let want = DATA as f64 / SPEED as f64;
    assert!(
        (sim.rebuild_time_s / want - 1.0).abs() < 0.1,
        "simulator {:.3} s for {want:.3}",
        sim.rebuild_time_s
    );
}
