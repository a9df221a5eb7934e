//! Regression tests for the ways issue 10 found to lose data, one per case (the
//! numbers are the issue's). Each failed on the code before the member-state
//! machine; the command-line cases are in `crates/hetraid/tests/data_safety.rs`.

mod common;
use common::*;
use hetraid_engine::format::{Superblock, SB_SIZE};
use hetraid_engine::member::{FaultConfig, FaultMember, Member};
use hetraid_engine::{Access, Array, AssembleOptions, RebuildOptions};
use std::sync::Arc;
use std::time::Duration;

fn read_sb(m: &dyn Member) -> Superblock {
    let mut b = vec![0u8; SB_SIZE];
    m.read_at(&mut b, 0).unwrap();
    Superblock::decode(&b).unwrap()
}

fn write_sb(m: &dyn Member, sb: &Superblock) {
    m.write_at(&sb.encode(), 0).unwrap();
    m.flush().unwrap();
}

fn all(array: &Array) -> Vec<u8> {
    let mut v = vec![0u8; array.capacity() as usize];
    array.read(0, &mut v).unwrap();
    v
}

/// Case 1: an online rebuild whose target is failed, then replaced, while it
/// runs stops and never activates either device; the second device is rebuilt
/// by a second rebuild and the data is intact.
#[test]
fn case01_rebuild_never_activates_a_member_failed_or_replaced_meanwhile() {
    for replace_too in [false, true] {
        let chunk = 4096;
        let size = MIB + chunk * 256;
        let (_, members) = fault_members(4, size, 11);
        let array = Array::create(members.clone(), &opts("raid5", chunk)).unwrap();
        let data = Rng(3).bytes(array.capacity() as usize);
        array.write(0, &data).unwrap();
        array.fail(1).unwrap();
        let new1: Arc<dyn Member> = Arc::new(FaultMember::new("new1", size, 5));
        array.replace(1, new1, false).unwrap();
        let new2: Arc<dyn Member> = Arc::new(FaultMember::new("new2", size, 6));
        let slow = RebuildOptions {
            // 768 stripes of 4 KiB at 1 MB/s: about three seconds.
            max_speed: 1_000_000,
            min_speed: 1_000_000,
            stop_after: None,
            ..Default::default()
        };
        let r = std::thread::scope(|s| {
            let h = s.spawn(|| array.rebuild(slow, &|_| {}));
            std::thread::sleep(Duration::from_millis(300));
            array.fail(1).unwrap();
            if replace_too {
                array.replace(1, new2.clone(), false).unwrap();
            }
            h.join().unwrap()
        });
        let e = r.expect_err("the rebuild must stop").to_string();
        assert!(e.contains("failed or replaced"), "{e}");
        let st = array.status();
        let want = if replace_too { "rebuilding" } else { "faulty" };
        assert_eq!(st.member_states[1].state, want, "replace_too {replace_too}");
        assert_eq!(all(&array), data, "reads after the stopped rebuild");
        if replace_too {
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
            assert_eq!(array.status().state, "optimal");
            // Reassembled with new2 and without member 1's old devices: intact.
            array.close().unwrap();
            drop(array);
            let live = vec![
                members[0].clone(),
                new2.clone(),
                members[2].clone(),
                members[3].clone(),
            ];
            let array = Array::assemble(live).unwrap();
            assert_eq!(all(&array), data);
            assert_eq!(array.scrub(None).unwrap().mismatches, 0);
        }
    }
}

/// Case 6: ENOSPC on members fails the request, never the members; once space
/// is back the array works and reassembles with every member.
#[test]
fn case06_a_full_filesystem_fails_requests_not_members() {
    let (faults, members) = fault_members(4, MIB + 64 * 4096, 21);
    let array = Array::create(members.clone(), &opts("raid5", 4096)).unwrap();
    let data = Rng(1).bytes(array.capacity() as usize);
    array.write(0, &data).unwrap();
    array.flush().unwrap();
    let full = FaultConfig {
        fail_writes: true,
        errno: Some(libc::ENOSPC),
        ..Default::default()
    };
    // Every member's filesystem fills, one after another.
    for f in &faults {
        f.set_faults(full.clone());
        // Four full stripes: every member takes a write.
        let e = array.write(0, &[7u8; 4 * 3 * 4096]);
        assert!(e.is_err(), "a write that cannot land must fail");
    }
    let st = array.status();
    assert!(
        st.member_states.iter().all(|m| m.state == "active"),
        "ENOSPC failed a member: {:?}",
        st.member_states
    );
    for f in &faults {
        f.set_faults(FaultConfig::default());
    }
    let more = Rng(2).bytes(70_000);
    array.write(4096, &more).unwrap();
    array.close().unwrap();
    drop(array);
    let array = Array::assemble(members).unwrap();
    assert_eq!(array.status().state, "optimal");
    let mut back = vec![0u8; more.len()];
    array.read(4096, &mut back).unwrap();
    assert_eq!(back, more);
    assert_eq!(array.scrub(None).unwrap().mismatches, 0);
}

/// Case 7: failing a member beyond the redundancy is refused with nothing
/// changed (not even the event counter); --force insists.
#[test]
fn case07_fail_beyond_redundancy_changes_nothing() {
    for (name, n) in [("raid5", 4), ("raid0", 3), ("raid1", 2), ("raid6", 5)] {
        let (_, members) = fault_members(n, MIB + 32 * 4096, 31);
        let array = Array::create(members.clone(), &opts(name, 4096)).unwrap();
        let tol = array.layout().redundancy().tolerance();
        for i in 0..tol {
            array.fail(i).unwrap();
        }
        let before: Vec<Superblock> = members.iter().map(|m| read_sb(m.as_ref())).collect();
        let e = array.fail(tol).expect_err(name).to_string();
        assert!(
            e.contains("nothing was changed") && e.contains("--force"),
            "{e}"
        );
        let after: Vec<Superblock> = members.iter().map(|m| read_sb(m.as_ref())).collect();
        assert_eq!(before, after, "{name}: a refused fail wrote a superblock");
        assert_eq!(array.status().member_states[tol].state, "active");
        array.fail_with(tol, true).unwrap();
        assert_eq!(array.status().state, "failed");
    }
}

/// Case 8: members one event behind (a kill between superblock writes) are
/// accepted, whichever side is the majority; two behind are left out.
#[test]
fn case08_members_one_event_behind_are_accepted() {
    let (_, members) = fault_members(4, MIB + 32 * 4096, 41);
    let array = Array::create(members.clone(), &opts("raid5", 4096)).unwrap();
    let data = Rng(4).bytes(array.capacity() as usize);
    array.write(0, &data).unwrap();
    array.close().unwrap();
    drop(array);
    for behind in [vec![2, 3], vec![1, 2, 3], vec![0]] {
        for &i in &behind {
            let mut sb = read_sb(members[i].as_ref());
            sb.events -= 1;
            write_sb(members[i].as_ref(), &sb);
        }
        let array =
            Array::assemble(members.clone()).unwrap_or_else(|e| panic!("behind {behind:?}: {e}"));
        assert_eq!(array.status().state, "optimal", "behind {behind:?}");
        assert!(array.warnings().is_empty(), "{:?}", array.warnings());
        assert_eq!(all(&array), data);
        array.close().unwrap();
        let evs: Vec<u64> = members.iter().map(|m| read_sb(m.as_ref()).events).collect();
        assert!(evs.iter().all(|&e| e == evs[0]), "resynchronised: {evs:?}");
    }
    // Two events behind: stale, left out by name, the array runs degraded.
    for m in &members[..3] {
        let mut sb = read_sb(m.as_ref());
        sb.events += 2;
        write_sb(m.as_ref(), &sb);
    }
    let array = Array::assemble(members.clone()).unwrap();
    let w = array.warnings().join("\n");
    assert!(w.contains("mem3 is left out") && w.contains("stale"), "{w}");
    assert_eq!(all(&array), data);
}

/// Case 9: the halves of a RAID1 written apart never merge silently.
#[test]
fn case09_split_brain_is_refused() {
    let (_, m) = fault_members(2, MIB + 32 * 4096, 51);
    let array = Array::create(m.clone(), &opts("raid1", 4096)).unwrap();
    array.close().unwrap();
    drop(array);
    for (i, byte) in [(0usize, 0xaau8), (1, 0x55)] {
        let a = Array::assemble(vec![m[i].clone()]).unwrap();
        assert!(a.warnings().join(" ").contains("missing"));
        a.write(0, &[byte; 4096]).unwrap();
        a.close().unwrap();
    }
    let e = Array::assemble(m.clone()).err().unwrap().to_string();
    assert!(
        e.contains("mem0") && e.contains("mem1") && e.contains("run apart"),
        "{e}"
    );
    // The user chooses: one side alone starts; the other is re-added and rebuilt.
    let a = Array::assemble(vec![m[1].clone()]).unwrap();
    a.replace(0, m[0].clone(), false).unwrap();
    a.rebuild(Default::default(), &|_| {}).unwrap();
    a.close().unwrap();
    drop(a);
    let a = Array::assemble(m.clone()).unwrap();
    let mut b = vec![0u8; 4096];
    a.read(0, &mut b).unwrap();
    assert_eq!(b, vec![0x55; 4096]);
    assert_eq!(a.scrub(None).unwrap().mismatches, 0);
}

/// Case 10: a crash with writes in flight on a degraded array (RAID5 with one
/// member out, RAID6 with one out) is refused without --force; status shows it.
#[test]
fn case10_dirty_degraded_start_is_refused() {
    for (name, n) in [("raid5", 4), ("raid6", 5)] {
        let (faults, members) = fault_members(n, MIB + 64 * 4096, 61);
        let array = Array::create(members.clone(), &opts(name, 4096)).unwrap();
        array.write(0, &Rng(6).bytes(200_000)).unwrap();
        array.fail(1).unwrap();
        array.flush().unwrap();
        array.write(4096, &Rng(7).bytes(30_000)).unwrap();
        drop(array); // killed: no close
        for f in &faults {
            f.crash(true);
        }
        let e = Array::assemble(members.clone()).err().unwrap().to_string();
        assert!(
            e.contains("degraded") && e.contains("--force"),
            "{name}: {e}"
        );
        let st = Array::assemble_with(
            members.clone(),
            AssembleOptions {
                degraded: true,
                force: false,
                access: Access::Inspect,
            },
        )
        .unwrap();
        assert!(st.warnings().join(" ").contains("write hole"), "{name}");
        drop(st);
        let forced = Array::assemble_with(
            members.clone(),
            AssembleOptions {
                degraded: true,
                force: true,
                access: Access::ReadWrite,
            },
        )
        .unwrap();
        assert!(forced.warnings().join(" ").contains("--force"));
        forced.close().unwrap();
        drop(forced);
        // Started once by force: the next start needs nothing.
        Array::assemble(members.clone()).unwrap();
    }
}

/// Case 11: a superblock with a valid checksum but absurd fields is refused in
/// one sentence, never a panic or a huge allocation.
#[test]
fn case11_absurd_superblock_fields_are_refused() {
    let (_, members) = fault_members(3, MIB + 32 * 4096, 71);
    Array::create(members.clone(), &opts("raid5", 4096))
        .unwrap()
        .close()
        .unwrap();
    let good = read_sb(members[0].as_ref());
    // (field, byte offset, little-endian u64 written there)
    let edits = [
        ("member data size", 376 + 8, 1u64 << 62),
        ("chunk size", 56, 0),
        ("data offset", 48, 7),
    ];
    for (field, at, v) in edits {
        let mut b = good.encode().to_vec();
        b[at..at + 8].copy_from_slice(&v.to_le_bytes());
        let crc = crc32c::crc32c(&b[..SB_SIZE - 4]);
        b[SB_SIZE - 4..].copy_from_slice(&crc.to_le_bytes());
        members[0].write_at(&b, 0).unwrap();
        let e = Array::assemble(members.clone()).err().unwrap().to_string();
        assert!(e.contains("mem0") && e.contains(field), "{field}: {e}");
    }
}

/// Case 12: a transient read error is corrected (reconstructed, written back)
/// and costs no member; errors past the threshold fail the member.
#[test]
fn case12_transient_read_errors_are_corrected() {
    let (faults, members) = fault_members(4, MIB + 64 * 4096, 81);
    let array = Array::create(members.clone(), &opts("raid5", 4096)).unwrap();
    let data = Rng(8).bytes(array.capacity() as usize);
    array.write(0, &data).unwrap();
    array.flush().unwrap();
    for m in [1usize, 2] {
        // The member's next operation fails, once.
        faults[m].set_faults(FaultConfig {
            fail_op: Some(0),
            ..Default::default()
        });
        faults[m].reset_ops();
        assert_eq!(all(&array), data, "member {m}");
        let st = array.status();
        assert_eq!(st.state, "optimal", "one transient error on member {m}");
        assert!(array.warnings().join(" ").contains("written back"));
    }
    // A member whose reads keep failing is failed after the threshold.
    faults[3].set_faults(FaultConfig {
        fail_reads: true,
        ..Default::default()
    });
    for _ in 0..30 {
        assert_eq!(all(&array), data);
    }
    assert_eq!(array.status().member_states[3].state, "faulty");
}

/// Case 2, while running: a member file truncated under a running array is
/// failed on the first read past its end (data reconstructed), and no write
/// extends it again (the gap would read back as zeros).
#[test]
fn case02_a_member_truncated_while_running_is_failed_not_regrown() {
    use hetraid_engine::member::FileMember;
    let d = tempfile::tempdir().unwrap();
    let paths: Vec<_> = (0..4).map(|i| d.path().join(format!("f{i}"))).collect();
    let members: Vec<Arc<dyn Member>> = paths
        .iter()
        .map(|p| Arc::new(FileMember::create(p, 9 << 20).unwrap()) as Arc<dyn Member>)
        .collect();
    let array = Array::create(members, &opts("raid5", 65536)).unwrap();
    let data = Rng(12).bytes(array.capacity() as usize);
    array.write(0, &data).unwrap();
    array.flush().unwrap();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&paths[2])
        .unwrap();
    f.set_len(4 << 20).unwrap();
    assert_eq!(all(&array), data, "reads reconstruct what was cut off");
    array
        .write(0, &Rng(13).bytes(array.capacity() as usize))
        .unwrap();
    assert_eq!(std::fs::metadata(&paths[2]).unwrap().len(), 4 << 20);
    assert_eq!(array.status().member_states[2].state, "faulty");
    assert!(array.warnings().join(" ").contains("truncated"));
}

/// One rebuild at a time: a second request while one runs is refused (on a
/// served array, two `hetraid rebuild` calls would otherwise race).
#[test]
fn a_second_rebuild_is_refused_while_one_runs() {
    let size = MIB + 4096 * 256;
    let (_, members) = fault_members(4, size, 91);
    let array = Array::create(members, &opts("raid5", 4096)).unwrap();
    array.fail(2).unwrap();
    array
        .replace(2, Arc::new(FaultMember::new("new", size, 3)), false)
        .unwrap();
    let slow = RebuildOptions {
        max_speed: 2_000_000,
        min_speed: 2_000_000,
        stop_after: None,
        ..Default::default()
    };
    std::thread::scope(|s| {
        let h = s.spawn(|| array.rebuild(slow, &|_| {}));
        std::thread::sleep(Duration::from_millis(100));
        let e = array.rebuild(slow, &|_| {}).unwrap_err().to_string();
        assert!(e.contains("already running"), "{e}");
        assert!(h.join().unwrap().unwrap().completed);
    });
    assert_eq!(array.status().state, "optimal");
}
