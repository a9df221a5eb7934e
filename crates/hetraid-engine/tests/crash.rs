//! Crash safety: seeded cycles of writes -> power loss (unflushed pages dropped or
//! torn page by page) -> assemble (bitmap resync) -> verify. Every byte written
//! before the last completed flush reads back, and scrub finds no parity mismatch.
//! Replay one cycle with HETRAID_SEED=N.

mod common;
use common::*;
use hetraid_engine::format::LayoutOptions;
use hetraid_engine::member::FaultConfig;
use hetraid_engine::Array;

fn layouts() -> Vec<(LayoutOptions, usize)> {
    all_layouts()
        .into_iter()
        .filter(|(r, _)| r.name != "raid0")
        .collect()
}

fn cycle(seed: u64) {
    cycle_with(seed, false)
}

/// A crash cycle; with `checksums`, block checksums are on: after the crash no
/// block may be reported corrupt (the bitmap's regions are rehashed).
fn cycle_with(seed: u64, checksums: bool) {
    let mut rng = Rng(seed);
    let ls = layouts();
    let (rec, n) = ls[(seed % ls.len() as u64) as usize].clone();
    let chunk = 8192;
    let mut sizes = vec![MIB + chunk * 32 + if checksums { MIB } else { 0 }; n];
    if rec.name == "hpda" {
        hpda_room(&mut sizes);
    }
    let (faults, members) = fault_members_sized("m", &sizes, |i| seed * 7 + i as u64);
    let mut o = opts(&rec.name, chunk);
    o.layout = rec.clone();
    o.checksums = checksums;
    let array = Array::create(members.clone(), &o).unwrap();
    let cap = array.capacity();
    let mut durable = vec![0u8; cap as usize];
    let mut current = durable.clone();
    // Byte ranges written since the last flush: their content after a crash may be old or new.
    let mut unsure: Vec<(u64, u64)> = Vec::new();
    for _ in 0..30 + rng.below(30) {
        if rng.below(5) == 0 {
            array.flush().unwrap();
            durable.copy_from_slice(&current);
            unsure.clear();
        } else if rng.below(6) == 0 {
            // A trim (issue 37): whole stripes discarded, marked in the
            // bitmap like a write, so a crash part-way is resynced.
            let off = rng.below(cap);
            let len = 1 + rng.below((cap - off).min(12 * chunk));
            array.trim(off, len).unwrap();
            array
                .read(off, &mut current[off as usize..(off + len) as usize])
                .unwrap();
            unsure.push((off, len));
        } else {
            let off = rng.below(cap);
            let len = 1 + rng.below((cap - off).min(5 * chunk));
            let data = rng.bytes(len as usize);
            array.write(off, &data).unwrap();
            current[off as usize..(off + len) as usize].copy_from_slice(&data);
            unsure.push((off, len));
        }
    }
    let torn = rng.below(2) == 0;
    drop(array); // no close: power is lost
    for f in &faults {
        f.crash(torn);
    }
    let array = Array::assemble(members)
        .unwrap_or_else(|e| panic!("seed {seed} ({}): assemble after crash: {e}", rec.name));
    let mut now = vec![0u8; cap as usize];
    array.read(0, &mut now).unwrap();
    if checksums {
        assert_eq!(
            checksum_errors(&array),
            0,
            "seed {seed} ({}): a crash left blocks that fail their checksum",
            rec.name
        );
    }
    let mut expect = now.clone();
    let mut sure = vec![true; cap as usize];
    for (o, l) in &unsure {
        sure[*o as usize..(*o + *l) as usize]
            .iter_mut()
            .for_each(|b| *b = false);
    }
    for i in 0..cap as usize {
        if sure[i] {
            expect[i] = durable[i];
        }
    }
    if let Some(i) = (0..cap as usize).find(|&i| now[i] != expect[i]) {
        panic!(
            "seed {seed} ({}, torn {torn}): flushed byte {i} lost after crash",
            rec.name
        );
    }
    let s = array.scrub(None).unwrap();
    assert_eq!(
        s.mismatches, 0,
        "seed {seed} ({}, torn {torn}): stale redundancy after recovery: {:?}",
        rec.name, s.mismatched_stripes
    );
}

/// The same crash cycles with block checksums on: a write cut between a block
/// and its checksum is never reported as corruption (dm-integrity's bitmap
/// mode), and flushed data and parity survive as without checksums.
#[test]
fn crash_with_checksums_reports_no_false_corruption() {
    let seeds: Vec<u64> = match std::env::var("HETRAID_SEED") {
        Ok(s) => vec![s.parse().expect("HETRAID_SEED is a number")],
        Err(_) => (0..40).map(|i| 0xc5c5_0000 + i).collect(),
    };
    for seed in seeds {
        if std::panic::catch_unwind(|| cycle_with(seed, true)).is_err() {
            panic!("checksum crash test failed; replay with HETRAID_SEED={seed}");
        }
    }
}

#[test]
fn crash_at_any_point_keeps_flushed_data_and_parity() {
    let seeds: Vec<u64> = match std::env::var("HETRAID_SEED") {
        Ok(s) => vec![s.parse().expect("HETRAID_SEED is a number")],
        Err(_) => (0..60).map(|i| 0xc4a5_0000 + i).collect(),
    };
    for seed in seeds {
        if std::panic::catch_unwind(|| cycle(seed)).is_err() {
            panic!("crash test failed; replay with HETRAID_SEED={seed}");
        }
    }
}

/// A member that starts failing I/O is marked faulty, the request is planned again
/// degraded and succeeds with the right bytes.
#[test]
fn io_errors_fail_the_member_and_requests_still_succeed() {
    for name in ["raid5", "raid6", "raid10", "raid1", "raid4s"] {
        let n = if name == "raid6" {
            6
        } else {
            4 + (name == "raid4s") as usize
        };
        let (faults, members) = fault_members(n, MIB + 64 * 4096, 99);
        let array = Array::create(members, &opts(name, 4096)).unwrap();
        let cap = array.capacity();
        let mut rng = Rng(5);
        let data = rng.bytes(cap as usize);
        array.write(0, &data).unwrap();
        faults[1].set_faults(FaultConfig {
            fail_reads: true,
            fail_writes: true,
            ..Default::default()
        });
        let mut out = vec![0u8; cap as usize];
        array.read(0, &mut out).unwrap();
        assert!(out == data, "{name}: degraded read after an I/O error");
        let more = rng.bytes(50_000);
        array.write(12_345, &more).unwrap();
        let mut back = vec![0u8; 50_000];
        array.read(12_345, &mut back).unwrap();
        assert_eq!(back, more, "{name}");
        let st = array.status();
        assert_eq!(
            st.member_states[1].state, "faulty",
            "{name}: the member is marked faulty"
        );
        assert_eq!(st.state, "degraded");
        // A second failure beyond RAID5's redundancy stops writes with an error.
        if name == "raid5" {
            faults[2].set_faults(FaultConfig {
                fail_reads: true,
                fail_writes: true,
                ..Default::default()
            });
            assert!(
                array.write(0, &more).is_err(),
                "writes beyond the redundancy must fail"
            );
            assert!(
                array.read(0, &mut back).is_err(),
                "reads of lost ranges fail, never wrong bytes"
            );
        }
    }
}

#[test]
fn assembly_refuses_foreign_stale_and_damaged_members() {
    let (_, a) = fault_members(4, MIB + 16 * 4096, 1);
    let (_, b) = fault_members(4, MIB + 16 * 4096, 2);
    let arr_a = Array::create(a.clone(), &opts("raid5", 4096)).unwrap();
    Array::create(b.clone(), &opts("raid5", 4096)).unwrap();
    // Foreign member.
    let mixed = vec![a[0].clone(), a[1].clone(), a[2].clone(), b[3].clone()];
    let e = Array::assemble(mixed).err().unwrap().to_string();
    assert!(e.contains("belongs to array"), "{e}");
    // Stale member: fail member 3, then assemble with it: it is left out, by name.
    arr_a.fail(3).unwrap();
    drop(arr_a);
    let arr = Array::assemble(a.clone()).unwrap();
    let w = arr.warnings().join("\n");
    assert!(
        w.contains("mem3 is left out") && w.contains("faulty"),
        "{w}"
    );
    assert_eq!(arr.status().state, "degraded");
    drop(arr);
    // Damaged superblock.
    let mut sb = vec![0u8; 4096];
    a[1].read_at(&mut sb, 0).unwrap();
    sb[100] ^= 1;
    a[1].write_at(&sb, 0).unwrap();
    let e = Array::assemble(a[..3].to_vec()).err().unwrap().to_string();
    assert!(e.contains("mem1") && e.contains("checksum"), "{e}");
    // Creating over a member of another array is refused without --force.
    let e = Array::create(b.clone(), &opts("raid5", 4096))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("already belongs"), "{e}");
}

/// S2-RAID5 with spare partitions: a failed member's chunks are rebuilt into spare
/// space on other members in parallel streams; the array is whole again without a
/// replacement, survives a second failure, and reassembles from its members.
/// The default partition count with spare space (K = G - 1: two streams) and
/// the paper's K = G (three, one disk shared).
#[test]
fn s2raid5_rebuilds_into_spare_space() {
    for (partitions, streams) in [(None, 2), (Some(3), 3)] {
        s2raid5_rebuild_into_spare_space(partitions, streams);
    }
}

fn s2raid5_rebuild_into_spare_space(partitions: Option<usize>, streams: usize) {
    let chunk = 4096;
    let size = MIB + chunk * 4 * 32;
    let (_, members) = fault_members(9, size, 77);
    let mut o = opts("s2raid5", chunk);
    o.layout.group = Some(3);
    o.layout.spare_partitions = 1;
    o.layout.partitions = partitions;
    let array = Array::create(members.clone(), &o).unwrap();
    let cap = array.capacity();
    let mut rng = Rng(8);
    let data = rng.bytes(cap as usize);
    array.write(0, &data).unwrap();
    array.fail(4).unwrap();
    let (array, report) = array.rebuild_to_spare(Default::default(), &|_| {}).unwrap();
    assert_eq!(report.streams, streams);
    assert!(report.completed);
    let st = array.status();
    assert_eq!(st.state, "optimal", "{st:?}");
    assert_eq!(st.member_states[4].state, "removed");
    let mut out = vec![0u8; cap as usize];
    array.read(0, &mut out).unwrap();
    assert!(out == data);
    assert_eq!(array.scrub(None).unwrap().mismatches, 0);
    // A second failure is survivable again.
    array.fail(0).unwrap();
    array.read(0, &mut out).unwrap();
    assert!(out == data);
    drop(array);
    let live: Vec<_> = members
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 4 && *i != 0)
        .map(|(_, m)| m.clone())
        .collect();
    let array = Array::assemble(live).unwrap();
    array.read(0, &mut out).unwrap();
    assert!(out == data, "after reassembly with the relocations");
}

/// S2-RAID10 with spare partitions: the lost member's partitions are rebuilt from
/// their mirrors into spare space on members that do not hold their other copy,
/// one stream per partition; then any one further failure is survivable.
#[test]
fn s2raid10_rebuilds_into_spare_space() {
    let chunk = 4096;
    let size = MIB + chunk * 4 * 32;
    // A data member and a mirror member fail first; every other member second;
    // the default partition count with spare space (m - 1 = 2 streams) and m.
    for (partitions, streams) in [(None, 2), (Some(3), 3)] {
        for failed in [1usize, 4] {
            for second in (0..6).filter(|&m| m != failed) {
                let (_, members) = fault_members(6, size, 78 + failed as u64);
                let mut o = opts("s2raid10", chunk);
                o.layout.spare_partitions = 1;
                o.layout.partitions = partitions;
                let array = Array::create(members, &o).unwrap();
                let cap = array.capacity();
                let data = Rng(9).bytes(cap as usize);
                array.write(0, &data).unwrap();
                array.fail(failed).unwrap();
                let (array, report) = array.rebuild_to_spare(Default::default(), &|_| {}).unwrap();
                assert_eq!(report.streams, streams, "member {failed}");
                assert!(report.completed);
                let st = array.status();
                assert_eq!(st.state, "optimal", "{st:?}");
                assert_eq!(st.member_states[failed].state, "removed");
                let mut out = vec![0u8; cap as usize];
                array.read(0, &mut out).unwrap();
                assert!(out == data);
                assert_eq!(array.scrub(None).unwrap().mismatches, 0);
                array.fail(second).unwrap();
                array.read(0, &mut out).unwrap();
                assert!(out == data, "failed {failed}, then {second}");
            }
        }
    }
}

/// Declustered with distributed spare space (issue 20): a failed member's
/// chunks are rebuilt into spare chunks of their own rows on every other
/// member; the array is whole again without a replacement, survives the next
/// failure and a second rebuild into the next spare, reassembles from its
/// members, and with two parities reads through two failures.
#[test]
fn declustered_rebuilds_into_distributed_spare_space() {
    let chunk = 4096;
    let size = MIB + chunk * 10 * 64;
    let (_, members) = fault_members(10, size, 91);
    let mut o = opts("declustered", chunk);
    o.layout = declustered(4, 1, 2);
    let array = Array::create(members.clone(), &o).unwrap();
    let cap = array.capacity();
    let data = Rng(21).bytes(cap as usize);
    array.write(0, &data).unwrap();
    array.fail(2).unwrap();
    let (array, report) = array.rebuild_to_spare(Default::default(), &|_| {}).unwrap();
    assert!(report.completed);
    assert_eq!(array.status().state, "optimal");
    let mut out = vec![0u8; cap as usize];
    array.read(0, &mut out).unwrap();
    assert!(out == data);
    assert_eq!(array.scrub(None).unwrap().mismatches, 0);
    // The next failure, and the second spare.
    array.fail(7).unwrap();
    array.read(0, &mut out).unwrap();
    assert!(out == data, "degraded after the first relocation");
    let (array, _) = array.rebuild_to_spare(Default::default(), &|_| {}).unwrap();
    assert_eq!(array.status().state, "optimal");
    array.read(0, &mut out).unwrap();
    assert!(out == data, "after the second relocation");
    assert_eq!(array.scrub(None).unwrap().mismatches, 0);
    // No spare left: refused in one sentence, nothing changed.
    array.fail(0).unwrap();
    let e = array
        .rebuild_to_spare(Default::default(), &|_| {})
        .err()
        .expect("no spare space left")
        .to_string();
    assert!(e.contains("spare"), "{e}");
    let live: Vec<_> = members
        .iter()
        .enumerate()
        .filter(|(i, _)| ![2, 7, 0].contains(i))
        .map(|(_, m)| m.clone())
        .collect();
    let array = Array::assemble(live).unwrap();
    array.read(0, &mut out).unwrap();
    assert!(out == data, "reassembled, one member still failed");

    // Two parities: two members out at once still read.
    let (_, members) = fault_members(9, size, 92);
    let mut o = opts("declustered", chunk);
    o.layout = declustered(5, 2, 1);
    let array = Array::create(members, &o).unwrap();
    let cap = array.capacity();
    let data = Rng(22).bytes(cap as usize);
    array.write(0, &data).unwrap();
    array.fail(1).unwrap();
    array.fail(6).unwrap();
    let mut out = vec![0u8; cap as usize];
    array.read(0, &mut out).unwrap();
    assert!(out == data, "two parities, two failures");
}

/// A declustered rig: 10 members (and a replacement), G = 4, one parity,
/// two spare chunks a row, all dying together with `death`; data written,
/// members 2 then 7 rebuilt into spare space.
/// The rig's fault handles, its members (the replacement last) and the data.
type Rig = (
    Vec<std::sync::Arc<hetraid_engine::member::FaultMember>>,
    Vec<std::sync::Arc<dyn hetraid_engine::member::Member>>,
    Vec<u8>,
);

fn relocated_rig(death: &std::sync::Arc<hetraid_engine::member::Death>) -> Rig {
    let chunk = 4096;
    let size = MIB + chunk * 10 * 32;
    let (faults, members) = fault_members(11, size, 93);
    for f in &faults {
        f.set_faults(FaultConfig {
            death: Some(death.clone()),
            ..Default::default()
        });
    }
    let mut o = opts("declustered", chunk);
    o.layout = declustered(4, 1, 2);
    let array = Array::create(members[..10].to_vec(), &o).unwrap();
    let data = Rng(23).bytes(array.capacity() as usize);
    array.write(0, &data).unwrap();
    array.fail(2).unwrap();
    let (array, _) = array.rebuild_to_spare(Default::default(), &|_| {}).unwrap();
    array.fail(7).unwrap();
    let (array, _) = array.rebuild_to_spare(Default::default(), &|_| {}).unwrap();
    array.close().unwrap();
    (faults, members, data)
}

/// The members that assemble after a crash: the ten minus the retired
/// ones, and the replacement when its superblock landed.
fn survivors(members: &[std::sync::Arc<dyn hetraid_engine::member::Member>]) -> Array {
    let live: Vec<_> = members
        .iter()
        .enumerate()
        .filter(|(i, _)| ![2, 7].contains(i))
        .map(|(_, m)| m.clone())
        .collect();
    Array::assemble(live.clone()).unwrap_or_else(|_| Array::assemble(live[..8].to_vec()).unwrap())
}

/// Copy-back ("rebalance", issue 20): the last member rebuilt into spare
/// space (7) goes home onto a replacement; the data reads back, parity
/// scrubs clean, one spare chunk a row is free again (a third failure
/// rebuilds into it). Then kill -9 at every write of a copy-back: after
/// the crash the array assembles, rebuilds whatever the attach left
/// rebuilding (from parity, never from spare homes), and every byte reads
/// back with clean parity.
#[test]
fn declustered_copies_back_onto_a_replacement_and_survives_a_kill_at_every_step() {
    use hetraid_engine::member::Death;
    use std::sync::Arc;
    let death = Arc::new(Death::never());
    let (_, members, data) = relocated_rig(&death);
    let array = survivors(&members);
    let (array, r) = array
        .copy_back(members[10].clone(), false, &|_| {})
        .unwrap();
    assert_eq!(r.member, 7, "the last relocated member goes home first");
    assert!(r.chunks > 0);
    assert_eq!(array.status().state, "optimal");
    let mut out = vec![0u8; data.len()];
    array.read(0, &mut out).unwrap();
    assert!(out == data);
    assert_eq!(array.scrub(None).unwrap().mismatches, 0);
    assert_eq!(
        array.layout().spare_slots(),
        1,
        "one spare chunk a row free again"
    );
    array.fail(4).unwrap();
    let (array, _) = array.rebuild_to_spare(Default::default(), &|_| {}).unwrap();
    array.read(0, &mut out).unwrap();
    assert!(out == data, "a third failure into the freed spare");
    // Nothing left to copy back is refused in a sentence.
    let (_, members2, _) = relocated_rig(&Arc::new(Death::never()));
    let a = survivors(&members2);
    let (a, _) = a.copy_back(members2[10].clone(), false, &|_| {}).unwrap();
    let (a, _) = a.copy_back(members2[7].clone(), true, &|_| {}).unwrap();
    assert_eq!(a.layout().spare_slots(), 2);
    let e = a
        .copy_back(members2[2].clone(), true, &|_| {})
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("nothing to copy back"), "{e}");

    // kill -9 after k writes, for every k until a copy-back completes.
    let mut k = 0;
    loop {
        let death = Arc::new(Death::never());
        let (faults, members, data) = relocated_rig(&death);
        let array = survivors(&members);
        death.after(k);
        let done = array.copy_back(members[10].clone(), false, &|_| {}).is_ok()
            && death
                .first_lost_offset
                .load(std::sync::atomic::Ordering::SeqCst)
                == u64::MAX;
        for f in &faults {
            f.crash(k % 2 == 1);
        }
        death.revive();
        let array = survivors(&members);
        let rebuilding = array.status().state != "optimal";
        array.rebuild(Default::default(), &|_| {}).unwrap();
        let mut out = vec![0u8; data.len()];
        array.read(0, &mut out).unwrap();
        assert!(
            out == data,
            "kill after {k} writes (rebuilding: {rebuilding})"
        );
        assert_eq!(array.scrub(None).unwrap().mismatches, 0, "kill after {k}");
        if done {
            break;
        }
        k += if k < 40 { 1 } else { 37 };
        assert!(k < 100_000, "the copy-back never finished");
    }
}
