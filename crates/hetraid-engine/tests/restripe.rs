//! Classic arrays restriped on real bytes (issue 14): RAID5 and RAID6 gain a
//! member, RAIDH changes its weights and gains a member, byte for byte
//! against what was written; and every case killed at random writes (power
//! lost, torn pages), assembled and run again, losing nothing. Every case
//! replays from its seed (printed on failure).

mod common;
use common::*;
use hetraid_core::MemberKind;
use hetraid_engine::format::LayoutOptions;
use hetraid_engine::member::{Death, FaultConfig};
use hetraid_engine::Array;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;

const CHUNK: u64 = 16384;

/// (layout, members before, weights before, weights after, add a member).
struct Case {
    name: &'static str,
    n: usize,
    before: Vec<u64>,
    after: Option<Vec<u64>>,
    add: bool,
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "raid5",
            n: 4,
            before: vec![],
            after: None,
            add: true,
        },
        Case {
            name: "raid6",
            n: 5,
            before: vec![],
            after: None,
            add: true,
        },
        Case {
            name: "raidh",
            n: 5,
            before: vec![1, 1, 1, 1, 1],
            after: Some(vec![0, 0, 1, 1, 3]),
            add: false,
        },
        Case {
            name: "raidh",
            n: 4,
            before: vec![1, 1, 1, 1],
            after: Some(vec![0, 0, 0, 1, 2]),
            add: true,
        },
    ]
}

fn options(c: &Case) -> hetraid_engine::CreateOptions {
    let mut o = opts(c.name, CHUNK);
    o.layout = LayoutOptions {
        name: c.name.into(),
        weights: (!c.before.is_empty()).then(|| c.before.clone()),
        ..Default::default()
    };
    o
}

fn read_all(a: &Array) -> Vec<u8> {
    let mut out = vec![0u8; a.capacity() as usize];
    a.read(0, &mut out).unwrap();
    out
}

/// One case: create, fill, restripe (killed after `die_after` writes when
/// given, then run again), check every byte and the redundancy.
fn run_case(c: &Case, seed: u64, die_after: Option<i64>, torn: bool) {
    let death = Arc::new(Death::never());
    let rows = 40;
    let size = MIB + rows * CHUNK;
    let (f, mut devs) =
        fault_members_sized(&format!("{}-{seed}-", c.name), &vec![size; c.n + 1], |i| {
            seed ^ (i as u64 * 31)
        });
    for m in &f {
        m.set_faults(FaultConfig {
            death: Some(death.clone()),
            ..Default::default()
        });
    }
    let new = devs.pop().unwrap();
    let a = Array::create(devs.clone(), &options(c)).unwrap();
    let cap0 = a.capacity();
    let data = Rng(seed).bytes(cap0 as usize);
    a.write(0, &data).unwrap();
    a.close().unwrap();
    drop(a);
    let grow = || {
        Array::grow(
            devs.clone(),
            c.add.then(|| (new.clone(), MemberKind::Ssd)),
            c.after.clone(),
            false,
        )
        .map(|_| ())
        .map_err(|e| e.to_string())
    };
    if let Some(k) = die_after {
        death.after(k);
    }
    let first = grow();
    let died = death.countdown.load(SeqCst) <= 0;
    if died {
        for m in &f {
            m.crash(torn);
        }
        death.revive();
        if let Err(e) = grow() {
            assert!(
                e.contains("already a member") || e.contains("weights already"),
                "{} seed {seed}: run again: {e}",
                c.name
            );
        }
    } else {
        first.unwrap_or_else(|e| panic!("{} seed {seed}: {e}", c.name));
    }
    let mut all = devs.clone();
    if c.add {
        all.push(new.clone());
    }
    let a = Array::assemble(all).unwrap_or_else(|e| panic!("{} seed {seed}: {e}", c.name));
    assert!(
        a.change_progress().is_none(),
        "{} seed {seed}: still restriping",
        c.name
    );
    if let Some(w) = &c.after {
        assert_eq!(a.superblock().layout.weights.as_ref(), Some(w));
    }
    let got = read_all(&a);
    assert!(
        got[..cap0 as usize] == data[..],
        "{} seed {seed}: data differs",
        c.name
    );
    assert!(
        got[cap0 as usize..].iter().all(|&b| b == 0),
        "{} seed {seed}: new room not zero",
        c.name
    );
    assert_eq!(
        a.scrub(None).unwrap().mismatches,
        0,
        "{} seed {seed}",
        c.name
    );
    // Redundancy holds: a member fails, every byte still reads.
    a.fail(1).unwrap();
    assert!(
        read_all(&a)[..cap0 as usize] == data[..],
        "{} seed {seed}: degraded read",
        c.name
    );
}

#[test]
fn restripes_keep_every_byte() {
    for (i, c) in cases().iter().enumerate() {
        run_case(c, 500 + i as u64, None, false);
    }
}

#[test]
fn restripes_killed_at_any_write_resume_and_lose_nothing() {
    let cases = cases();
    for seed in 0..120u64 {
        let c = &cases[(seed % cases.len() as u64) as usize];
        let mut rng = Rng(seed * 31 + 7);
        let die = 1 + rng.below(400) as i64;
        let torn = rng.below(2) == 0;
        if std::panic::catch_unwind(|| run_case(c, seed, Some(die), torn)).is_err() {
            panic!("restripe crash cycle failed: replay with seed {seed} ({} after {die} writes, torn {torn})", c.name);
        }
    }
}

/// A member fails part-way through a restripe: the restripe stops saying
/// why, the array still reads every byte (degraded, on the half-restriped
/// layout), the member is replaced and rebuilt on that layout, and the
/// restripe then finishes with every byte in place.
#[test]
fn a_member_failing_mid_restripe_is_replaced_and_the_restripe_finishes() {
    let c = &cases()[0];
    let size = MIB + 40 * CHUNK;
    let (_f, mut devs) = fault_members_sized("mid-", &vec![size; c.n + 2], |i| i as u64);
    let spare = devs.pop().unwrap();
    let new = devs.pop().unwrap();
    let a = Array::create(devs.clone(), &options(c)).unwrap();
    let cap0 = a.capacity();
    let data = Rng(9).bytes(cap0 as usize);
    a.write(0, &data).unwrap();
    a.close().unwrap();
    drop(a);
    let all = Array::prepare_grow(
        devs.clone(),
        Some((new.clone(), MemberKind::Hdd)),
        None,
        false,
    )
    .unwrap();
    assert!(Array::resume_change(all.clone(), Some(2))
        .unwrap()
        .is_none());
    let a = Array::assemble(all.clone()).unwrap();
    let p = a.change_progress().unwrap();
    assert!(p.moves_done > 0 && p.moves_done < p.moves, "{p:?}");
    a.fail(2).unwrap();
    assert!(read_all(&a) == data[..], "degraded read mid-restripe");
    a.close().unwrap();
    drop(a);
    let e = Array::resume_change(all.clone(), None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("slot 2") && e.contains("replace"), "{e}");
    let mut all2 = all.clone();
    all2[2] = spare.clone();
    let a = Array::assemble(all.clone()).unwrap();
    a.replace(2, spare.clone(), false).unwrap();
    a.rebuild(Default::default(), &|_| {}).unwrap();
    assert!(read_all(&a) == data[..]);
    a.close().unwrap();
    drop(a);
    let r = Array::resume_change(all2.clone(), None).unwrap().unwrap();
    assert!(r.capacity_after > cap0);
    let a = Array::assemble(all2).unwrap();
    let got = read_all(&a);
    assert!(got[..cap0 as usize] == data[..]);
    assert_eq!(a.scrub(None).unwrap().mismatches, 0);
}
