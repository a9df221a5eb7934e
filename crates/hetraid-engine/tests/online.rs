//! An online rebuild: users keep writing while the new member is rebuilt (several
//! parallel streams for S2-RAID, one for RAID5/RAID6). Afterwards the rebuilt
//! member must hold every write, including those made to stripes the rebuild had
//! already passed. Checked by failing *another* member and reading everything
//! back, which forces reconstruction through the rebuilt one. Also: a rebuild
//! stopped part-way resumes from its checkpoint after reassembly.

mod common;
use common::*;
use hetraid_engine::member::{FaultMember, Member};
use hetraid_engine::{Array, RebuildOptions};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

fn online(name: &str, n: usize, group: Option<usize>, seed: u64) {
    let chunk = 4096;
    let size = MIB + chunk * 9 * 16;
    let (_, members) = fault_members(n, size, seed);
    let mut o = opts(name, chunk);
    o.layout.group = group;
    let array = Array::create(members.clone(), &o).unwrap();
    let cap = array.capacity();
    let mut rng = Rng(seed);
    let reference = Mutex::new(rng.bytes(cap as usize));
    array.write(0, &reference.lock().unwrap()).unwrap();
    array.fail(2).unwrap();
    let blank: Arc<dyn Member> = Arc::new(FaultMember::new("new2", size, 5));
    array.replace(2, blank.clone(), false).unwrap();
    array.close().unwrap();
    drop(array);
    let mut slots = members.clone();
    slots[2] = blank;
    let array = Array::assemble(slots.clone()).unwrap();
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            // `done` is set when this thread ends, panicking or not.
            let _done = common::SetOnDrop(&done);
            let speed = 4 * MIB; // slow enough that writes interleave with it
            let r = array
                .rebuild(
                    RebuildOptions {
                        min_speed: speed,
                        max_speed: speed,
                        stop_after: None,
                        ..Default::default()
                    },
                    &|_| {},
                )
                .unwrap();
            assert!(r.completed);
        });
        s.spawn(|| {
            let mut rng = Rng(seed ^ 0xabc);
            let mut k = 0;
            while !done.load(Ordering::SeqCst) || k < 50 {
                let off = rng.below(cap - 9000);
                let len = 1 + rng.below(9000);
                let d = rng.bytes(len as usize);
                array.write(off, &d).unwrap();
                reference.lock().unwrap()[off as usize..(off + len) as usize].copy_from_slice(&d);
                k += 1;
            }
        });
    });
    assert_eq!(array.status().state, "optimal");
    let reference = reference.into_inner().unwrap();
    // Reconstruct through the rebuilt member: fail a different one.
    array.fail(0).unwrap();
    let mut all = vec![0u8; cap as usize];
    array.read(0, &mut all).unwrap();
    assert!(
        all == reference,
        "{name}: writes made during the rebuild are missing on the rebuilt member"
    );
}

#[test]
fn writes_during_an_online_rebuild_reach_the_new_member() {
    online("raid5", 5, None, 1);
    online("raid6", 6, None, 2);
    online("s2raid5", 9, Some(3), 3);
}

#[test]
fn a_stopped_rebuild_resumes_from_its_checkpoint() {
    let chunk = 4096;
    let size = MIB + chunk * 256;
    let (_, members) = fault_members(5, size, 11);
    let array = Array::create(members.clone(), &opts("raid5", chunk)).unwrap();
    let cap = array.capacity();
    let data = Rng(12).bytes(cap as usize);
    array.write(0, &data).unwrap();
    array.fail(3).unwrap();
    let blank: Arc<dyn Member> = Arc::new(FaultMember::new("new3", size, 13));
    array.replace(3, blank.clone(), false).unwrap();
    array.close().unwrap();
    drop(array);
    let mut slots = members.clone();
    slots[3] = blank;
    let array = Array::assemble(slots.clone()).unwrap();
    let r = array
        .rebuild(
            RebuildOptions {
                max_speed: 0,
                stop_after: Some(100),
                ..Default::default()
            },
            &|_| {},
        )
        .unwrap();
    assert!(!r.completed);
    drop(array);
    // Restart: the checkpoint survived in the superblocks.
    let array = Array::assemble(slots.clone()).unwrap();
    let st = array.status();
    assert_eq!(st.member_states[3].state, "rebuilding");
    let ckpt = st.member_states[3].rebuild_checkpoint.unwrap();
    assert!(
        ckpt >= 64,
        "checkpoint {ckpt} should cover the finished batches"
    );
    let r = array
        .rebuild(
            RebuildOptions {
                max_speed: 0,
                ..Default::default()
            },
            &|_| {},
        )
        .unwrap();
    assert!(r.completed);
    assert_eq!(
        r.stripes,
        256 - ckpt,
        "the resumed rebuild starts at the checkpoint"
    );
    array.fail(0).unwrap();
    let mut all = vec![0u8; cap as usize];
    array.read(0, &mut all).unwrap();
    assert!(all == data);
}

/// A served rebalance (`ArrayCell::copy_back`) while users write: every
/// write reaches the replacement, those that land on a chunk already copied
/// too (the core's watch copies it again). Checked by reading everything
/// back, then by failing another member so reads reconstruct through the
/// replacement, and by a scrub.
#[test]
fn writes_during_a_served_copy_back_reach_the_replacement() {
    use hetraid_engine::{ArrayCell, ChangeOptions};
    const FAILED: usize = 3;
    for seed in [11u64, 12] {
        let chunk = 16384;
        let size = MIB + chunk * 64;
        let (_, members) = fault_members(9, size, seed);
        let mut o = opts("declustered", chunk);
        o.layout = declustered(4, 1, 1);
        let array = Array::create(members.clone(), &o).unwrap();
        let cap = array.capacity();
        let mut rng = Rng(seed);
        let reference = Mutex::new(rng.bytes(cap as usize));
        array.write(0, &reference.lock().unwrap()).unwrap();
        array.fail(FAILED).unwrap();
        let (array, _) = array.rebuild_to_spare(Default::default(), &|_| {}).unwrap();
        let survivors: Vec<Arc<dyn Member>> = members
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != FAILED)
            .map(|(_, m)| m.clone())
            .collect();
        let cell = ArrayCell::new(Arc::new(array), survivors, Box::new(|_| Ok(())));
        let new: Arc<dyn Member> = Arc::new(FaultMember::new("new", size, 77));
        let done = AtomicBool::new(false);
        let report = std::thread::scope(|s| {
            s.spawn(|| {
                let mut rng = Rng(seed ^ 0xabc);
                let mut k = 0;
                // Bounded by the copy-back's end and at least 200 writes.
                while !done.load(Ordering::SeqCst) || k < 200 {
                    let off = rng.below(cap - 9000);
                    let len = 1 + rng.below(9000);
                    let d = rng.bytes(len as usize);
                    let g = cell.get();
                    g.write(off, &d).unwrap();
                    reference.lock().unwrap()[off as usize..(off + len) as usize]
                        .copy_from_slice(&d);
                    drop(g);
                    k += 1;
                }
            });
            let _done = common::SetOnDrop(&done);
            // Slow enough that writes land on chunks already copied.
            let speed = MIB / 2;
            cell.copy_back(
                new.clone(),
                false,
                ChangeOptions {
                    min_speed: speed,
                    max_speed: speed,
                },
                &|_| {},
            )
            .unwrap()
        });
        assert_eq!(report.member, FAILED);
        assert!(
            report.recopied > 0,
            "seed {seed}: no write landed on a copied chunk; the test shows nothing"
        );
        let a = cell.current();
        assert_eq!(a.status().state, "optimal");
        let reference = reference.into_inner().unwrap();
        let mut all = vec![0u8; cap as usize];
        a.read(0, &mut all).unwrap();
        assert!(
            all == reference,
            "seed {seed}: a write made during the copy-back is lost"
        );
        let sc = a.scrub(None).unwrap();
        assert_eq!(sc.mismatches, 0, "seed {seed}: scrub after the copy-back");
        // Reads that reconstruct through the replacement.
        a.fail(0).unwrap();
        a.read(0, &mut all).unwrap();
        assert!(
            all == reference,
            "seed {seed}: the replacement does not hold what users wrote"
        );
        eprintln!(
            "seed {seed}: {} chunks copied back, {} copied again, {:.2} s",
            report.chunks, report.recopied, report.seconds
        );
    }
}

/// The hot-spare watch as the engine runs it (`ArrayCell::run_spare_watch`,
/// `serve`'s thread, driven here without a server): a member fails while it
/// watches; the spare takes the slot and is rebuilt, and every byte reads
/// back with another member out.
#[test]
fn the_spare_watch_puts_a_spare_in_a_failed_slot_and_rebuilds_it() {
    use hetraid_engine::ArrayCell;
    let chunk = 16384;
    let size = MIB + chunk * 64;
    let (_, members) = fault_members(5, size, 31);
    let array = Array::create(members.clone(), &opts("raid5", chunk)).unwrap();
    let data = Rng(31).bytes(array.capacity() as usize);
    array.write(0, &data).unwrap();
    let spare: Arc<dyn Member> = Arc::new(FaultMember::new("spare", size, 32));
    array
        .add_spare(spare, hetraid_core::MemberKind::Hdd, false)
        .unwrap();
    let cell = ArrayCell::new(Arc::new(array), members.clone(), Box::new(|_| Ok(())));
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let watch = s.spawn(|| {
            // Looks every 20 ms here (serve waits on the change descriptor).
            let wait = |_| {
                std::thread::sleep(std::time::Duration::from_millis(20));
                stop.load(Ordering::SeqCst)
            };
            cell.run_spare_watch(&wait, &|| stop.load(Ordering::SeqCst));
        });
        let _stop = common::SetOnDrop(&stop);
        cell.get().fail(1).unwrap();
        // Bounded: 10 s for the spare to be taken and rebuilt.
        let t0 = std::time::Instant::now();
        loop {
            let st = cell.get().status();
            if st.state == "optimal" && st.spares.is_empty() {
                break;
            }
            assert!(t0.elapsed().as_secs() < 10, "{st:?}");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        stop.store(true, Ordering::SeqCst);
        watch.join().unwrap();
    });
    let a = cell.get();
    a.fail(3).unwrap();
    let mut back = vec![0u8; data.len()];
    a.read(0, &mut back).unwrap();
    assert!(back == data, "data read through the rebuilt spare differs");
}
