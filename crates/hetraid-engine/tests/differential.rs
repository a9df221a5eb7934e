//! Randomized differential test: every layout driven with random reads, writes,
//! flushes, member failures, replacements and rebuilds, every byte checked against
//! a plain reference disk. Seeds are printed; replay one with HETRAID_SEED=N.

mod common;
use common::*;
use hetraid_engine::member::{FaultMember, Member};
use hetraid_engine::{Array, RebuildOptions};
use std::sync::Arc;

/// Bytes every trim of the run discarded (the trims must do something).
static DISCARDED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

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
        if what < 6 {
            // A trim: whole stripes read as zeroes afterwards, every other
            // byte keeps its value; the reference takes what reads back.
            let off = rng.below(cap);
            let len = 1 + rng.below((cap - off).min(6 * chunk * n as u64));
            let t = array
                .trim(off, len)
                .unwrap_or_else(|e| panic!("{}: trim {off}+{len}: {e}", ctx()));
            assert_eq!(t.discarded_bytes + t.kept_bytes, len, "{}", ctx());
            let mut out = vec![0u8; len as usize];
            array.read(off, &mut out).unwrap();
            let old = &mut reference[off as usize..(off + len) as usize];
            let mut zeroed = 0u64;
            for (i, (&o, &r)) in out.iter().zip(old.iter()).enumerate() {
                assert!(
                    o == r || o == 0,
                    "{}: trim {off}+{len} changed byte {i} to {o}, not 0",
                    ctx()
                );
                zeroed += (o == 0) as u64;
            }
            assert!(
                zeroed >= t.discarded_bytes,
                "{}: trim {off}+{len} said {} bytes discarded, {zeroed} read as zero",
                ctx(),
                t.discarded_bytes
            );
            old.copy_from_slice(&out);
            DISCARDED.fetch_add(t.discarded_bytes, std::sync::atomic::Ordering::Relaxed);
        } else if what < 10 {
            let off = rng.below(cap);
            let len = 1 + rng.below((cap - off).min(6 * chunk * n as u64));
            array
                .write_zeroes(off, len, rng.below(2) == 0)
                .unwrap_or_else(|e| panic!("{}: write zeroes {off}+{len}: {e}", ctx()));
            reference[off as usize..(off + len) as usize].fill(0);
        } else if what < 45 {
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
    if std::env::var("HETRAID_SEED").is_err() {
        assert!(
            DISCARDED.load(std::sync::atomic::Ordering::Relaxed) > 0,
            "no trim discarded a stripe"
        );
    }
}
