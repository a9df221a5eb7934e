//! Randomized differential test: every layout driven with random reads, writes,
//! flushes, member failures, replacements and rebuilds, every byte checked against
//! a plain reference disk. Seeds are printed; replay one with HETRAID_SEED=N.

mod common;
use common::*;
use hetraid_engine::member::{FaultMember, Member};
use hetraid_engine::{Array, RebuildOptions};
use std::sync::Arc;

fn run(seed: u64) {
    let mut rng = Rng(seed);
    let layouts = all_layouts();
    let (rec, n) = layouts[(seed % layouts.len() as u64) as usize].clone();
    let chunk = [4096u64, 8192, 16384][rng.below(3) as usize];
    // Members of different sizes where the layout can use them.
    let size = MIB + chunk * (24 + rng.below(16));
    let mut sizes = vec![size; n];
    if rec.name == "raidx" || rec.name == "hpda" {
        for s in sizes.iter_mut() {
            *s += chunk * rng.below(8);
        }
        if rec.name == "hpda" {
            hpda_room(&mut sizes);
        }
    }
    let (_faults, members) = fault_members_sized("m", &sizes, |i| seed ^ i as u64);
    let mut o = opts(&rec.name, chunk);
    o.layout = rec.clone();
    let mut array = Array::create(members.clone(), &o)
        .unwrap_or_else(|e| panic!("seed {seed}: create {}: {e}", rec.name));
    let cap = array.capacity();
    let mut reference = vec![0u8; cap as usize];
    let tol = array.layout().redundancy().tolerance();
    let mut slots = members.clone();
    let mut failed: Vec<usize> = Vec::new();
    for step in 0..120 {
        let what = rng.below(100);
        let ctx = || format!("seed {seed} ({} chunk {chunk}) step {step}", rec.name);
        if what < 45 {
            let off = rng.below(cap);
            let len = 1 + rng.below((cap - off).min(3 * chunk * n as u64));
            let data = rng.bytes(len as usize);
            array
                .write(off, &data)
                .unwrap_or_else(|e| panic!("{}: write {off}+{len}: {e}", ctx()));
            reference[off as usize..(off + len) as usize].copy_from_slice(&data);
        } else if what < 85 {
            let off = rng.below(cap);
            let len = 1 + rng.below((cap - off).min(3 * chunk * n as u64));
            let mut out = vec![0u8; len as usize];
            array
                .read(off, &mut out)
                .unwrap_or_else(|e| panic!("{}: read {off}+{len}: {e}", ctx()));
            assert!(
                out == reference[off as usize..(off + len) as usize],
                "{}: read {off}+{len} differs",
                ctx()
            );
        } else if what < 90 {
            array.flush().unwrap();
        } else if what < 95 && failed.len() < tol {
            let v = rng.below(n as u64) as usize;
            if !failed.contains(&v) {
                array.fail(v).unwrap();
                failed.push(v);
            }
        } else if !failed.is_empty() {
            // Replace the first failed member with a blank one and rebuild.
            let v = failed.remove(0);
            let blank: Arc<dyn Member> = Arc::new(FaultMember::new(
                &format!("new{v}-{step}"),
                sizes[v],
                seed ^ step,
            ));
            array
                .replace(v, blank.clone(), false)
                .unwrap_or_else(|e| panic!("{}: replace {v}: {e}", ctx()));
            slots[v] = blank;
            let live: Vec<Arc<dyn Member>> = (0..n)
                .filter(|i| !failed.contains(i))
                .map(|i| slots[i].clone())
                .collect();
            array.close().unwrap();
            drop(array);
            array = Array::assemble(live)
                .unwrap_or_else(|e| panic!("{}: assemble after replace: {e}", ctx()));
            let r = array
                .rebuild(
                    RebuildOptions {
                        max_speed: 0,
                        ..Default::default()
                    },
                    &|_| {},
                )
                .unwrap();
            assert!(r.completed, "{}: rebuild incomplete", ctx());
        }
    }
    // Reassemble from the members alone and verify everything, then scrub.
    array.close().unwrap();
    drop(array);
    let live: Vec<Arc<dyn Member>> = (0..n)
        .rev()
        .filter(|i| !failed.contains(i))
        .map(|i| slots[i].clone())
        .collect();
    let array =
        Array::assemble(live).unwrap_or_else(|e| panic!("seed {seed}: final assemble: {e}"));
    let mut all = vec![0u8; cap as usize];
    array.read(0, &mut all).unwrap();
    assert!(
        all == reference,
        "seed {seed} ({}): final contents differ",
        rec.name
    );
    if failed.is_empty() && tol > 0 {
        let s = array.scrub(None).unwrap();
        assert_eq!(
            s.mismatches, 0,
            "seed {seed} ({}): scrub found mismatches",
            rec.name
        );
    }
}

#[test]
fn random_workloads_match_a_reference_disk() {
    let seeds: Vec<u64> = match std::env::var("HETRAID_SEED") {
        Ok(s) => vec![s.parse().expect("HETRAID_SEED is a number")],
        Err(_) => (0..42).map(|i| 0x5eed_0000 + i).collect(),
    };
    for seed in seeds {
        let r = std::panic::catch_unwind(|| run(seed));
        if r.is_err() {
            panic!("differential test failed; replay with HETRAID_SEED={seed}");
        }
    }
}
