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
