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
use hetraid_engine::format::LayoutOptions;
use hetraid_engine::member::Member;
use hetraid_engine::{Array, ArrayCell};
use std::sync::{Arc, Mutex};

const CHUNK: u64 = 16384;

enum What {
    Add,
    /// A member added with new parity weights (RAIDH).
    AddWeighted(Vec<u64>),
    Weights(Vec<u64>),
    /// Remove slot 1, its member gone.
    Remove,
}

struct Case {
    layout: LayoutOptions,
    chunks: Vec<u64>,
    what: What,
}

fn raidx(level: &str, c: usize) -> LayoutOptions {
    LayoutOptions {
        name: "raidx".into(),
        chunks_per_bundle: Some(c),
        raidx_level: Some(level.into()),
        ..Default::default()
    }
}

fn named(name: &str, weights: Vec<u64>) -> LayoutOptions {
    LayoutOptions {
        name: name.into(),
        weights: (!weights.is_empty()).then_some(weights),
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
    v.push(Case {
        layout: named("raidh", vec![1, 1, 1, 1]),
        chunks: vec![200; 5],
        what: What::AddWeighted(vec![0, 0, 1, 1, 2]),
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
    let new = matches!(case.what, What::Add | What::AddWeighted(_)).then(|| devs.pop().unwrap());
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
        What::AddWeighted(w) => cell.begin_grow(
            Some((new.clone().unwrap(), MemberKind::Ssd)),
            Some(w.clone()),
            false,
        ),
        What::Remove => cell.begin_shrink(1, keep.unwrap(), true),
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

/// The same, killed: requests (writes, reads, flushes) and batches
/// interleave until a random member write, power is lost (torn pages at
/// random), and the change is finished from what the members hold. Every
/// byte that was flushed (by a flush, or by a batch: each closes the array)
/// and not written since is there; the array is consistent. Arrays that are
/// whole while they change (a member lost and re-placed is the write hole's
/// business, tested without requests in `living.rs`).
#[test]
fn changes_with_io_killed_at_any_write_keep_every_flushed_byte() {
    use hetraid_engine::member::{Death, FaultConfig};
    use std::sync::atomic::Ordering::SeqCst;
    let all_cases = cases();
    let whole: Vec<&Case> = all_cases
        .iter()
        .filter(|c| !matches!(c.what, What::Remove))
        .collect();
    for seed in 0..64u64 {
        let case = whole[(seed % whole.len() as u64) as usize];
        let r = std::panic::catch_unwind(|| {
            let sizes: Vec<u64> = case
                .chunks
                .iter()
                .map(|c| MIB + c * CHUNK + 8 * 4096)
                .collect();
            let (f, mut devs) =
                fault_members_sized(&format!("k{seed}-"), &sizes, |i| seed ^ (i as u64 * 7));
            let death = Arc::new(Death::never());
            for m in &f {
                m.set_faults(FaultConfig {
                    death: Some(death.clone()),
                    ..Default::default()
                });
            }
            let new =
                matches!(case.what, What::Add | What::AddWeighted(_)).then(|| devs.pop().unwrap());
            let mut o = opts(&case.layout.name, CHUNK);
            o.layout = case.layout.clone();
            let a = Array::create(devs.clone(), &o).unwrap();
            let span = a.capacity();
            let mut rng = Rng(seed + 77);
            let mut model = rng.bytes(span as usize);
            a.write(0, &model).unwrap();
            a.close().unwrap();
            drop(a);
            let cell = ArrayCell::new(
                Arc::new(Array::assemble(devs.clone()).unwrap()),
                devs.clone(),
                Box::new(|_| Ok(())),
            );
            match &case.what {
                What::Add => {
                    cell.begin_grow(Some((new.clone().unwrap(), MemberKind::Hdd)), None, false)
                }
                What::Weights(w) => cell.begin_grow(None, Some(w.clone()), false),
                What::AddWeighted(w) => cell.begin_grow(
                    Some((new.clone().unwrap(), MemberKind::Ssd)),
                    Some(w.clone()),
                    false,
                ),
                What::Remove => unreachable!(),
            }
            .unwrap();
            let mut flushed = model.clone();
            let mut doubt = vec![false; span as usize];
            death.after(1 + rng.below(1000) as i64);
            let dead = || death.countdown.load(SeqCst) <= 0;
            // Bounded: a change has at most a batch per chunk.
            for _ in 0..100_000 {
                if dead() {
                    break;
                }
                let a = cell.get();
                for _ in 0..rng.below(12) {
                    let len = 1 + rng.below(3 * CHUNK);
                    let off = rng.below(span - len);
                    match rng.below(5) {
                        0 => {
                            if a.flush().is_ok() && !dead() {
                                flushed.copy_from_slice(&model);
                                doubt.fill(false);
                            }
                        }
                        1 | 2 => {
                            let d = rng.bytes(len as usize);
                            let _ = a.write(off, &d);
                            model[off as usize..(off + len) as usize].copy_from_slice(&d);
                            doubt[off as usize..(off + len) as usize].fill(true);
                        }
                        _ => {
                            let mut b = vec![0u8; len as usize];
                            let ok = a.read(off, &mut b).is_ok();
                            if !dead() {
                                assert!(
                                    ok && b[..] == model[off as usize..(off + len) as usize],
                                    "read at {off}"
                                );
                            }
                        }
                    }
                }
                drop(a);
                match cell.step() {
                    Ok(Some(_)) => break,
                    Ok(None) => {}
                    Err(e) => assert!(dead(), "step failed alive: {e}"),
                }
                if !dead() {
                    // The batch closed the array: everything before is durable.
                    flushed.copy_from_slice(&model);
                    doubt.fill(false);
                }
            }
            drop(cell);
            for m in &f {
                m.crash(rng.below(2) == 0);
            }
            death.revive();
            let mut all = devs.clone();
            all.extend(new.clone());
            // A grow whose new slot was not yet recorded when it died runs
            // without the new member: assemble what the members say.
            let given: Vec<Arc<dyn Member>> = all
                .iter()
                .filter(|m| {
                    let mut b = hetraid_engine::member::AlignedBuf::zeroed(4096);
                    m.read_at(&mut b, 0).is_ok()
                        && hetraid_engine::format::Superblock::decode(&b).is_ok()
                })
                .cloned()
                .collect();
            let done =
                Array::resume_change(given.clone(), None).unwrap_or_else(|e| panic!("resume: {e}"));
            let _ = done;
            let a = Array::assemble(given).unwrap_or_else(|e| panic!("assemble: {e}"));
            assert!(a.change_progress().is_none(), "still changing");
            let mut got = vec![0u8; span as usize];
            a.read(0, &mut got).unwrap();
            let bad = (0..span as usize).find(|&i| !doubt[i] && got[i] != flushed[i]);
            assert!(bad.is_none(), "flushed byte {bad:?} lost");
            assert_eq!(
                a.scrub(None).unwrap().mismatches,
                0,
                "inconsistent after the crash"
            );
        });
        if r.is_err() {
            panic!("case {} killed: replay with seed {seed}", case.layout.name);
        }
    }
}
