//! Living RAIDX arrays on real bytes (issue 14): a member added (`grow
//! --add`) and a member removed with re-redundancy (`shrink --member`), at
//! every level, checked byte for byte against what was written; and both
//! killed at random writes (power lost, torn pages), run again, losing
//! nothing. Every case replays from its seed (printed on failure).

mod common;
use common::*;
use hetraid_core::MemberKind;
use hetraid_engine::format::LayoutOptions;
use hetraid_engine::member::{Death, FaultConfig, FaultMember, Member};
use hetraid_engine::Array;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;

const CHUNK: u64 = 16384;

fn raidx(level: &str, c: usize) -> hetraid_engine::CreateOptions {
    let mut o = opts("raidx", CHUNK);
    o.layout = LayoutOptions {
        name: "raidx".into(),
        // 0: widths chosen per bundle (no --chunks-per-bundle).
        chunks_per_bundle: (c > 0).then_some(c),
        raidx_level: Some(level.into()),
        ..Default::default()
    };
    o
}

/// Levels with their bundle size.
const LEVELS: [(&str, usize); 5] = [("0", 3), ("1", 2), ("5", 3), ("6", 4), ("10", 4)];

/// Members of mixed sizes (in chunks past the metadata), seeded.
fn rig(
    seed: u64,
    chunks: &[u64],
    death: &Arc<Death>,
) -> (Vec<Arc<FaultMember>>, Vec<Arc<dyn Member>>) {
    let sizes: Vec<u64> = chunks.iter().map(|c| MIB + c * CHUNK + 8 * 4096).collect();
    let (f, d) = fault_members_sized(&format!("s{seed}-m"), &sizes, |i| seed ^ (i as u64 * 77));
    for m in &f {
        m.set_faults(FaultConfig {
            death: Some(death.clone()),
            ..Default::default()
        });
    }
    (f, d)
}

fn read_all(a: &Array) -> Vec<u8> {
    let mut out = vec![0u8; a.capacity() as usize];
    a.read(0, &mut out).unwrap();
    out
}

#[test]
fn adding_a_member_keeps_every_byte_and_grows_to_the_most_bundles() {
    for (li, (level, c)) in LEVELS.iter().enumerate() {
        let seed = 100 + li as u64;
        let death = Arc::new(Death::never());
        let (_f, mut devs) = rig(seed, &[40, 30, 30, 24, 60], &death);
        let new = devs.pop().unwrap();
        let a = Array::create(devs.clone(), &raidx(level, *c)).unwrap();
        let cap0 = a.capacity();
        let data = Rng(seed).bytes(cap0 as usize);
        a.write(0, &data).unwrap();
        a.close().unwrap();
        drop(a);
        let r = Array::grow_add(devs.clone(), new.clone(), MemberKind::Ssd, false)
            .unwrap_or_else(|e| panic!("raidx{level}: {e}"));
        assert_eq!(r.capacity_before, cap0);
        assert!(r.capacity_after > cap0, "raidx{level}: {r:?}");
        let mut all = devs.clone();
        all.push(new.clone());
        let a = Array::assemble(all.clone()).unwrap();
        assert_eq!(a.capacity(), r.capacity_after);
        // The most bundles the five members allow.
        let caps = chunk_caps(&a, CHUNK);
        assert_eq!(
            a.layout().stripe_count(),
            hetraid_core::layout::max_bundles(&caps, *c),
            "raidx{level}"
        );
        let got = read_all(&a);
        assert!(
            got[..cap0 as usize] == data[..],
            "raidx{level}: data moved wrong"
        );
        assert!(
            got[cap0 as usize..].iter().all(|&b| b == 0),
            "raidx{level}: new space not zero"
        );
        assert_eq!(a.scrub(None).unwrap().mismatches, 0, "raidx{level}");
        // The new room takes writes, and everything survives reassembly.
        let more = Rng(seed + 1).bytes((a.capacity() - cap0) as usize);
        a.write(cap0, &more).unwrap();
        a.close().unwrap();
        drop(a);
        let a = Array::assemble(all.clone()).unwrap();
        assert!(a.warnings().is_empty(), "{:?}", a.warnings());
        let got = read_all(&a);
        assert!(got[..cap0 as usize] == data[..] && got[cap0 as usize..] == more[..]);
        // A member lost after the grow (not the redundancy-less level).
        if *level != "0" {
            a.fail(4).unwrap();
            let got = read_all(&a);
            assert!(
                got[..cap0 as usize] == data[..],
                "raidx{level} without the new member"
            );
        }
    }
}

#[test]
fn removing_a_lost_member_restores_redundancy_then_a_second_may_fail() {
    for (li, (level, c)) in LEVELS.iter().enumerate().skip(1) {
        let seed = 200 + li as u64;
        let death = Arc::new(Death::never());
        let (_f, devs) = rig(seed, &[40, 40, 36, 30, 30], &death);
        let a = Array::create(devs.clone(), &raidx(level, *c)).unwrap();
        let data = Rng(seed).bytes(a.capacity() as usize);
        a.write(0, &data).unwrap();
        let bundle_bytes = CHUNK * a.layout().data_per_stripe() as u64;
        a.fail(1).unwrap();
        a.close().unwrap();
        drop(a);
        let given: Vec<Arc<dyn Member>> = devs
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != 1)
            .map(|(_, d)| d.clone())
            .collect();
        // Too large: refused with the largest size that fits.
        let e = Array::shrink_remove(
            given.clone(),
            1,
            data.len() as u64 / bundle_bytes * bundle_bytes,
            true,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("at most"), "raidx{level}: {e}");
        let most: u64 = e
            .split("at most ")
            .nth(1)
            .and_then(|s| s.split(' ').next())
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no size in: {e}"));
        let r = Array::shrink_remove(given.clone(), 1, most, true)
            .unwrap_or_else(|e| panic!("raidx{level}: {e}"));
        assert_eq!(r.capacity_after, most);
        assert!(r.rebuilt > 0, "{r:?}");
        let a = Array::assemble(given.clone()).unwrap();
        assert_eq!(a.capacity(), most);
        assert_eq!(a.out_members(true), 0, "raidx{level}: still degraded");
        assert_eq!(a.scrub(None).unwrap().mismatches, 0, "raidx{level}");
        assert!(
            read_all(&a) == data[..most as usize],
            "raidx{level}: data differs"
        );
        // Fully redundant again: another member may go.
        a.fail(3).unwrap();
        assert!(
            read_all(&a) == data[..most as usize],
            "raidx{level}: second failure lost data"
        );
        a.close().unwrap();
    }
}

#[test]
fn removing_a_present_member_copies_its_chunks_away() {
    let death = Arc::new(Death::never());
    let (_f, devs) = rig(300, &[40, 40, 40, 40], &death);
    let a = Array::create(devs.clone(), &raidx("0", 2)).unwrap();
    let bundle_bytes = CHUNK * 2;
    let data = Rng(300).bytes(a.capacity() as usize);
    a.write(0, &data).unwrap();
    a.close().unwrap();
    drop(a);
    let keep = 60 * bundle_bytes;
    let r = Array::shrink_remove(devs.clone(), 2, keep, true).unwrap();
    assert_eq!(r.rebuilt, 0);
    let given: Vec<Arc<dyn Member>> = devs
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 2)
        .map(|(_, d)| d.clone())
        .collect();
    let a = Array::assemble(given).unwrap();
    assert!(read_all(&a) == data[..keep as usize]);
    drop(a);
    // The removed member is not taken back.
    let a = Array::assemble(devs.clone()).unwrap();
    assert!(!a.present(2));
    assert!(
        a.warnings().iter().any(|w| w.contains("m2")),
        "{:?}",
        a.warnings()
    );
    assert!(read_all(&a) == data[..keep as usize]);
}

/// Kill at a random write of a grow or a remove (power lost, torn pages),
/// run the same command again: every byte written before is there, the
/// change completes, the array is consistent.
#[test]
fn changes_killed_at_any_write_resume_and_lose_nothing() {
    let cycles = 160u64;
    for seed in 0..cycles {
        let r = std::panic::catch_unwind(|| crash_cycle(seed));
        if r.is_err() {
            panic!("crash cycle failed: replay with seed {seed}");
        }
    }
}

/// The same for RAIDX whose bundle widths vary (issue 41): a grow widens
/// bundles and places new ones (mirrors: moves chunks onto the new member
/// and pairs); killed anywhere, run again, it reaches the bound of the new
/// member set with every byte in place.
#[test]
fn variable_width_grows_killed_at_any_write_resume_and_lose_nothing() {
    let mut died = 0;
    for seed in 0..60u64 {
        let r = std::panic::catch_unwind(|| crash_cycle_with(seed, true, true));
        match r {
            Ok(d) => died += d as u32,
            Err(_) => panic!("crash cycle failed: replay with seed {seed} (variable widths)"),
        }
    }
    assert!(died >= 30, "only {died} of 60 grows were killed part-way");
}

/// And a member leaving such an array (present: its chunks are moved off
/// it or its bundles narrowed, the chunks that frees evacuated past the new
/// end): killed anywhere, run again, every byte of the size asked for is
/// in place, parity agrees, and the capacity is at the new set's bound.
#[test]
fn variable_width_shrinks_killed_at_any_write_resume_and_lose_nothing() {
    let mut died = 0;
    for seed in 0..60u64 {
        let r = std::panic::catch_unwind(|| crash_cycle_with(seed, true, false));
        match r {
            Ok(d) => died += d as u32,
            Err(_) => {
                panic!("crash cycle failed: replay with seed {seed} (variable widths, shrink)")
            }
        }
    }
    assert!(died >= 30, "only {died} of 60 shrinks were killed part-way");
}

fn crash_cycle(seed: u64) {
    crash_cycle_with(seed, false, seed.is_multiple_of(2));
}

/// One cycle (a grow, or a remove); whether the kill came before the
/// change ended.
fn crash_cycle_with(seed: u64, variable: bool, grow: bool) -> bool {
    let mut rng = Rng(seed * 7919 + 1);
    let (level, c) = match variable {
        true => (["5", "6", "0", "1", "10"][(seed % 5) as usize], 0),
        false => LEVELS[1 + (seed % 4) as usize],
    };
    let death = Arc::new(Death::never());
    let chunks = [30u64, 30, 24, 24, 24, 50];
    let (f, mut devs) = rig(seed, &chunks, &death);
    let new = devs.pop().unwrap();
    let a = Array::create(devs.clone(), &raidx(level, c)).unwrap();
    let data = rng.bytes(a.capacity() as usize);
    a.write(0, &data).unwrap();
    let bundle_bytes = CHUNK * a.layout().data_per_stripe() as u64;
    let bundles = a.layout().stripe_count();
    a.close().unwrap();
    drop(a);
    // What the survivors of a remove hold (the data area is a little
    // smaller than the chunks asked for: the bundle table's room).
    let caps: Vec<u64> = (0..5)
        .map(|i| if i == 2 { 0 } else { chunks[i] - 1 })
        .collect();
    let keep = match (grow, variable) {
        (true, _) => 0,
        (false, false) => hetraid_core::layout::max_bundles(&caps, c).min(bundles) * bundle_bytes,
        // What the plan keeps (as `shrink` says when --size is too large).
        (false, true) => {
            use hetraid_core::layout::raidx_history::{plan_change, Change, History, Params};
            let p = Params {
                chunk: CHUNK,
                c: 0,
                level: hetraid_core::layout::RaidXLevel::parse(level).ok(),
                weights: &[],
            };
            let live: Vec<u64> = (0..5).map(|i| chunks[i] - 1).collect();
            let t = History::new(live).completed(&p).unwrap();
            let plan = plan_change(
                &t,
                Change::Remove {
                    slot: 2,
                    keep_bundles: 0,
                },
                &p,
            )
            .unwrap();
            plan.shrinking.unwrap().kept * CHUNK
        }
    };
    let torn = rng.below(2) == 0;
    // Die somewhere in the change (most changes take a few hundred writes).
    // (A variable-width grow zeroes the chunks it adds and writes the
    // tables, and mirrors move a few chunks: tens of writes.)
    death.after(1 + rng.below(if variable && grow { 60 } else { 200 }) as i64);
    let lost_slot = 2;
    // A remove re-places the chunks of a member that is gone (varying
    // widths: of one that is here).
    let given: Vec<Arc<dyn Member>> = devs
        .iter()
        .enumerate()
        .filter(|(i, _)| grow || variable || *i != lost_slot)
        .map(|(_, d)| d.clone())
        .collect();
    let run = |given: &Vec<Arc<dyn Member>>| -> Result<(), String> {
        if grow {
            Array::grow_add(given.clone(), new.clone(), MemberKind::Hdd, false)
                .map(|_| ())
                .map_err(|e| e.to_string())
        } else {
            Array::shrink_remove(given.clone(), lost_slot, keep, true)
                .map(|_| ())
                .map_err(|e| e.to_string())
        }
    };
    let first = run(&given);
    let died = death.countdown.load(SeqCst) <= 0;
    for m in &f {
        m.crash(torn);
    }
    death.revive();
    if !died {
        first.unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    } else if let Err(e) = run(&given) {
        // Run again; a grow whose new member already holds its slot resumes
        // (or says it is done, when the kill came after its end).
        if !e.contains("no grow is in progress") && !e.contains("already removed") {
            panic!("seed {seed}: the change run again failed: {e}");
        }
    }
    let members: Vec<Arc<dyn Member>> = if grow {
        let mut v = devs.clone();
        v.push(new.clone());
        v
    } else {
        devs.iter()
            .enumerate()
            .filter(|(i, _)| *i != lost_slot)
            .map(|(_, d)| d.clone())
            .collect()
    };
    let a = Array::assemble(members).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    assert!(a.change_progress().is_none(), "seed {seed}: still pending");
    let n = (a.capacity() as usize).min(data.len());
    let n = if grow { n } else { keep as usize };
    assert!(read_all(&a)[..n] == data[..n], "seed {seed}: data lost");
    assert_eq!(a.scrub(None).unwrap().mismatches, 0, "seed {seed}");
    assert_eq!(a.out_members(true), 0, "seed {seed}");
    if variable {
        let mut caps = chunk_caps(&a, CHUNK);
        if !grow {
            caps[lost_slot] = 0;
        }
        let lvl = hetraid_core::layout::RaidXLevel::parse(level).unwrap();
        let bound = hetraid_core::layout::raidx_widths::capacity_bound(&caps, lvl);
        // At the bound (a remove: within a chunk a member of it).
        let slack = if grow { 0 } else { 4 * CHUNK };
        assert!(
            a.capacity() <= bound * CHUNK && a.capacity() + slack >= bound * CHUNK,
            "seed {seed}: RAIDX{level} holds {} of its bound {}",
            a.capacity(),
            bound * CHUNK
        );
        // The bytes past what was kept read back as written now.
        let from = n as u64;
        let more = rng.bytes((a.capacity() - from) as usize);
        a.write(from, &more).unwrap();
        let all = read_all(&a);
        assert!(all[..n] == data[..n], "seed {seed}: kept bytes");
        assert!(all[n..] == more[..], "seed {seed}: new space");
    }
    died
}

/// A member fails part-way through a RAIDX grow: the array reads every byte
/// on the half-moved table, the grow stops saying which slot to replace, the
/// member is replaced and rebuilt, and the grow finishes.
#[test]
fn a_member_failing_mid_grow_is_replaced_and_the_grow_finishes() {
    let death = Arc::new(Death::never());
    let (_f, mut devs) = rig(400, &[40, 30, 30, 24, 60, 40], &death);
    let spare = devs.pop().unwrap();
    let new = devs.pop().unwrap();
    let a = Array::create(devs.clone(), &raidx("5", 3)).unwrap();
    let cap0 = a.capacity();
    let data = Rng(400).bytes(cap0 as usize);
    a.write(0, &data).unwrap();
    a.close().unwrap();
    drop(a);
    let all = Array::prepare_grow(
        devs.clone(),
        Some((new.clone(), MemberKind::Ssd)),
        None,
        false,
    )
    .unwrap();
    assert!(Array::resume_change(all.clone(), Some(1))
        .unwrap()
        .is_none());
    let a = Array::assemble(all.clone()).unwrap();
    let p = a.change_progress().unwrap();
    assert!(p.moves_done > 0 && p.moves_done < p.moves, "{p:?}");
    a.fail(0).unwrap();
    assert!(read_all(&a) == data[..], "degraded read mid-grow");
    a.close().unwrap();
    drop(a);
    let e = Array::resume_change(all.clone(), None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("slot 0"), "{e}");
    let a = Array::assemble(all.clone()).unwrap();
    a.replace(0, spare.clone(), false).unwrap();
    a.rebuild(Default::default(), &|_| {}).unwrap();
    a.close().unwrap();
    drop(a);
    let mut all2 = all.clone();
    all2[0] = spare.clone();
    let r = Array::resume_change(all2.clone(), None).unwrap().unwrap();
    assert!(r.capacity_after > cap0);
    let a = Array::assemble(all2).unwrap();
    assert!(read_all(&a)[..cap0 as usize] == data[..]);
    assert_eq!(a.scrub(None).unwrap().mismatches, 0);
}

/// A member replaced by a larger one, then `grow --size max`: chunks move
/// onto its new room until the array holds the most bundles the members
/// allow; killed at random writes and run again, nothing is lost.
#[test]
fn a_member_replaced_by_a_larger_one_grows_into_its_room() {
    for seed in 0..40u64 {
        let r = std::panic::catch_unwind(|| {
            let mut rng = Rng(seed + 900);
            let death = Arc::new(Death::never());
            let (f, mut devs) = rig(600 + seed, &[30, 30, 24, 24, 20, 70], &death);
            let big = devs.pop().unwrap();
            let (level, c) = [("1", 2), ("5", 3), ("10", 4)][(seed % 3) as usize];
            let a = Array::create(devs.clone(), &raidx(level, c)).unwrap();
            let cap0 = a.capacity();
            let data = rng.bytes(cap0 as usize);
            a.write(0, &data).unwrap();
            a.fail(0).unwrap();
            a.replace(0, big.clone(), false).unwrap();
            a.rebuild(Default::default(), &|_| {}).unwrap();
            a.close().unwrap();
            drop(a);
            let mut all = devs.clone();
            all[0] = big.clone();
            let grow = |all: &Vec<Arc<dyn Member>>| -> Result<(), String> {
                for _ in 0..8 {
                    if Array::prepare_enlarge(all.clone())
                        .map_err(|e| e.to_string())?
                        .is_none()
                    {
                        return Ok(());
                    }
                    Array::resume_change(all.clone(), None).map_err(|e| e.to_string())?;
                }
                Ok(())
            };
            if seed % 2 == 1 {
                death.after(1 + rng.below(300) as i64);
            }
            let first = grow(&all);
            if death.countdown.load(SeqCst) <= 0 {
                for m in &f {
                    m.crash(rng.below(2) == 0);
                }
                death.revive();
                grow(&all).unwrap_or_else(|e| panic!("run again: {e}"));
            } else {
                first.unwrap();
            }
            let a = Array::assemble(all.clone()).unwrap();
            assert!(a.change_progress().is_none());
            let caps: Vec<u64> = a
                .superblock()
                .roles
                .iter()
                .map(|r| r.data_size / CHUNK)
                .collect();
            assert_eq!(
                a.layout().stripe_count(),
                hetraid_core::layout::max_bundles(&caps, c)
            );
            assert!(a.capacity() > cap0, "the larger member's room is used");
            assert!(read_all(&a)[..cap0 as usize] == data[..], "data lost");
            assert_eq!(a.scrub(None).unwrap().mismatches, 0);
        });
        if r.is_err() {
            panic!("enlarge cycle failed: replay with seed {seed}");
        }
    }
}
