//! Members changed in the middle of random I/O (issue 14), as a served
//! array does it: requests run through an `ArrayCell`, between the batches
//! of a change (a random number of them before each batch) while a member
//! is added (RAIDX0/1/5/6/10 by moving chunks, RAID5/6 by
//! restriping), RAIDH changes its weights, or a lost member's chunks are
//! re-placed (RAIDX1/5/6/10 shrunk first). Every read is checked against a
//! plain model of the bytes written, during and after the change; the array
//! ends consistent (scrub) and reassembles to the same bytes. Each case
//! replays from its seed.

mod common;
use common::*;
use hetraid_core::MemberKind;
use hetraid_engine::format::LayoutRecord;
use hetraid_engine::member::Member;
use hetraid_engine::{Array, ArrayCell};
use std::sync::{Arc, Mutex};

const CHUNK: u64 = 16384;

enum What {
    Add,
    Weights(Vec<u64>),
    /// Remove slot 1, its member gone.
    Remove,
}

struct Case {
    layout: LayoutRecord,
    chunks: Vec<u64>,
    what: What,
}

fn raidx(level: &str, c: usize) -> LayoutRecord {
    LayoutRecord {
        name: "raidx".into(),
        chunks_per_bundle: Some(c),
        raidx_level: Some(level.into()),
        ..Default::default()
    }
}

fn named(name: &str, weights: Vec<u64>) -> LayoutRecord {
    LayoutRecord {
        name: name.into(),
        weights,
        ..Default::default()
    }
}

fn cases() -> Vec<Case> {
    let mixed = vec![160, 140, 120, 120, 100];
    let mut v = Vec::new();
    for (level, c) in [("0", 3), ("1", 2), ("5", 3), ("6", 4), ("10", 4)] {
        v.push(Case {
            layout: raidx(level, c),
            chunks: mixed.clone(),
            what: What::Add,
        });
        if level != "0" {
            v.push(Case {
                layout: raidx(level, c),
                chunks: mixed.clone(),
                what: What::Remove,
            });
        }
    }
    v.push(Case {
        layout: named("raid5", vec![]),
        chunks: vec![200; 5],
        what: What::Add,
    });
    v.push(Case {
        layout: named("raid6", vec![]),
        chunks: vec![200; 6],
        what: What::Add,
    });
    v.push(Case {
        layout: named("raidh", vec![1, 1, 1, 1, 1]),
        chunks: vec![200; 5],
        what: What::Weights(vec![3, 0, 0, 1, 1]),
    });
    v
}

fn run(case: &Case, seed: u64) {
    let sizes: Vec<u64> = case
        .chunks
        .iter()
        .map(|c| MIB + c * CHUNK + 8 * 4096)
        .collect();
    let (_f, mut devs) =
        fault_members_sized(&format!("o{seed}-"), &sizes, |i| seed ^ (i as u64 * 13));
    let new = matches!(case.what, What::Add).then(|| devs.pop().unwrap());
    let mut o = opts(&case.layout.name, CHUNK);
    o.layout = case.layout.clone();
    let a = Array::create(devs.clone(), &o).unwrap();
    let cap0 = a.capacity();
    let mut rng = Rng(seed);
    let model = Arc::new(Mutex::new(rng.bytes(cap0 as usize)));
    a.write(0, &model.lock().unwrap()).unwrap();
    let bundle_bytes = CHUNK * a.layout().data_per_stripe() as u64;
    // A remove keeps what the survivors hold.
    let keep = matches!(case.what, What::Remove).then(|| {
        let c = case.layout.chunks_per_bundle.unwrap();
        let caps: Vec<u64> = (0..case.chunks.len())
            .map(|i| if i == 1 { 0 } else { case.chunks[i] - 1 })
            .collect();
        hetraid_core::layout::max_bundles(&caps, c).min(a.layout().stripe_count()) * bundle_bytes
    });
    if keep.is_some() {
        a.fail(1).unwrap();
    }
    a.close().unwrap();
    drop(a);
    let given: Vec<Arc<dyn Member>> = devs
        .iter()
        .enumerate()
        .filter(|(i, _)| keep.is_none() || *i != 1)
        .map(|(_, d)| d.clone())
        .collect();
    let first = Arc::new(Array::assemble(given.clone()).unwrap());
    let cell = Arc::new(ArrayCell::new(first, given.clone(), Box::new(|_| Ok(()))));
    // I/O below what the array holds throughout, a random number of
    // requests before and between the change's batches (each batch runs
    // with no request in flight, as the server's do).
    let span = keep.unwrap_or(cap0);
    let io = |rng: &mut Rng, count: u64| {
        let a = cell.get();
        for _ in 0..count {
            let len = 1 + rng.below(3 * CHUNK);
            let off = rng.below(span - len);
            if rng.below(2) == 0 {
                let d = rng.bytes(len as usize);
                a.write(off, &d)
                    .unwrap_or_else(|e| panic!("seed {seed}: write: {e}"));
                model.lock().unwrap()[off as usize..(off + len) as usize].copy_from_slice(&d);
            } else {
                let mut b = vec![0u8; len as usize];
                a.read(off, &mut b)
                    .unwrap_or_else(|e| panic!("seed {seed}: read: {e}"));
                assert!(
                    b[..] == model.lock().unwrap()[off as usize..(off + len) as usize],
                    "seed {seed}: read at {off} differs during the change"
                );
            }
        }
    };
    io(&mut rng, 20);
    match &case.what {
        What::Add => cell.begin_grow(Some((new.clone().unwrap(), MemberKind::Hdd)), None, false),
        What::Weights(w) => cell.begin_grow(None, Some(w.clone()), false),
        What::Remove => cell.begin_shrink(1, keep.unwrap()),
    }
    .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    let mut batches = 0;
    // Bounded: a change has at most a batch per chunk.
    let r = loop {
        let k = rng.below(30);
        io(&mut rng, k);
        batches += 1;
        assert!(batches < 100_000, "seed {seed}: the change does not end");
        if let Some(r) = cell.step().unwrap_or_else(|e| panic!("seed {seed}: {e}")) {
            break r;
        }
    };
    io(&mut rng, 20);
    let a = cell.current();
    let model = model.lock().unwrap();
    let n = (span as usize).min(a.capacity() as usize);
    let mut got = vec![0u8; n];
    a.read(0, &mut got).unwrap();
    assert!(
        got[..] == model[..n],
        "seed {seed}: data differs after {:?}",
        r.change
    );
    assert_eq!(a.scrub(None).unwrap().mismatches, 0, "seed {seed}");
    a.close().unwrap();
    let mut all = given.clone();
    all.extend(new);
    let b = Array::assemble(all).unwrap();
    let mut again = vec![0u8; n];
    b.read(0, &mut again).unwrap();
    assert!(again == got, "seed {seed}: reassembled bytes differ");
    assert_eq!(b.out_members(true), 0);
}

#[test]
fn members_change_in_the_middle_of_random_io() {
    for (i, c) in cases().iter().enumerate() {
        for round in 0..2u64 {
            let seed = 1000 + 10 * i as u64 + round;
            if std::panic::catch_unwind(|| run(c, seed)).is_err() {
                panic!(
                    "case {i} ({}) failed: replay with seed {seed}",
                    c.layout.name
                );
            }
        }
    }
}
