//! Block checksums (issue 11): a corrupted block is found on read, the right
//! bytes are returned and the block is rewritten; a degraded array that cannot
//! reconstruct says so instead of returning wrong bytes; with checksums, scrub
//! locates and repairs a corrupted block on every layout. Replay with
//! HETRAID_SEED=N.

mod common;
use common::*;
use hetraid_core::scrub::Trust;
use hetraid_engine::member::Member;
use hetraid_engine::Array;
use std::sync::Arc;

const CHUNK: u64 = 8192;
/// The checksum area of these small members (1 MiB).
const AREA: u64 = MIB;

/// Members of `n`, raw handles too, with room for the checksum area.
fn array(
    rec: &hetraid_engine::format::LayoutOptions,
    n: usize,
    seed: u64,
) -> (Vec<Arc<dyn Member>>, Array) {
    let mut sizes = vec![MIB + AREA + CHUNK * 24; n];
    if rec.name == "hpda" {
        hpda_room(&mut sizes);
    }
    let (_, members) = fault_members_sized("m", &sizes, |i| seed + i as u64);
    let mut o = opts(&rec.name, CHUNK);
    o.layout = rec.clone();
    o.checksums = true;
    let a = Array::create(members.clone(), &o).unwrap();
    (members, a)
}

/// Flip a byte of member `m`'s data area at `off` behind the array's back.
fn flip(members: &[Arc<dyn Member>], m: usize, off: u64) {
    let at = MIB + AREA + off;
    let mut b = [0u8; 1];
    members[m].read_at(&mut b, at).unwrap();
    b[0] ^= 0xa5;
    members[m].write_at(&b, at).unwrap();
}

fn raw(members: &[Arc<dyn Member>], m: usize, off: u64, len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len];
    members[m].read_at(&mut b, MIB + AREA + off).unwrap();
    b
}

#[test]
fn a_corrupted_block_is_found_returned_right_and_rewritten() {
    let rec = hetraid_engine::format::LayoutOptions {
        name: "raid5".into(),
        ..Default::default()
    };
    let (members, a) = array(&rec, 4, 1);
    let data = Rng(2).bytes(a.capacity() as usize);
    a.write(0, &data).unwrap();
    a.flush().unwrap();
    // Stripe 0: data chunk 0 on member 0.
    let before = raw(&members, 0, 0, 4096);
    flip(&members, 0, 100);
    let mut back = vec![0u8; 4096];
    a.read(0, &mut back).unwrap();
    assert_eq!(back, data[..4096], "the read returns the right bytes");
    assert_eq!(
        raw(&members, 0, 0, 4096),
        before,
        "the bad block was rewritten"
    );
    let st = a.status();
    assert_eq!(st.member_states[0].checksum_errors, 1);
    assert_eq!(st.state, "optimal");
}

#[test]
fn a_degraded_array_says_so_rather_than_return_wrong_bytes() {
    let rec = hetraid_engine::format::LayoutOptions {
        name: "raid5".into(),
        ..Default::default()
    };
    let (members, a) = array(&rec, 4, 3);
    let data = Rng(4).bytes(a.capacity() as usize);
    a.write(0, &data).unwrap();
    a.flush().unwrap();
    a.fail(3).unwrap();
    flip(&members, 1, 5);
    // Stripe 0 holds data on members 0, 1, 2 and parity on 3 (failed): member
    // 1's block cannot be rebuilt.
    let mut back = vec![0u8; CHUNK as usize * 3];
    let r = a.read(0, &mut back);
    assert!(r.is_err(), "wrong bytes were returned as good");
    // Everything else still reads.
    let mut rest = vec![0u8; (a.capacity() - 3 * CHUNK) as usize];
    a.read(3 * CHUNK, &mut rest).unwrap();
    assert!(rest == data[3 * CHUNK as usize..]);
}

/// With checksums every layout locates a corrupted block, parity and unused
/// copies included, and scrub --repair restores exactly the reference.
#[test]
fn scrub_with_checksums_repairs_every_layout() {
    let seeds: Vec<u64> = match std::env::var("HETRAID_SEED") {
        Ok(s) => vec![s.parse().expect("HETRAID_SEED is a number")],
        Err(_) => (0..60).map(|i| 0xcc5c_0000 + i).collect(),
    };
    for seed in seeds {
        let r = std::panic::catch_unwind(|| {
            let ls: Vec<_> = all_layouts()
                .into_iter()
                .filter(|(r, _)| r.name != "raid0")
                .collect();
            let (rec, n) = ls[(seed % ls.len() as u64) as usize].clone();
            let (members, a) = array(&rec, n, seed);
            let mut rng = Rng(seed);
            let data = rng.bytes(a.capacity() as usize);
            a.write(0, &data).unwrap();
            a.flush().unwrap();
            let reference: Vec<Vec<u8>> = (0..n)
                .map(|m| raw(&members, m, 0, (CHUNK * 24) as usize))
                .collect();
            // One to three chunks of distinct stripes, any column (data,
            // parity, copies): a byte of each is corrupted.
            let mut hit: Vec<(u64, usize)> = Vec::new();
            for _ in 0..1 + rng.below(3) {
                let s = rng.below(a.layout().stripe_count());
                if hit.iter().any(|h| h.0 == s) {
                    continue;
                }
                let chunks: Vec<_> = a.layout().stripe(s).all().collect();
                let c = chunks[rng.below(chunks.len() as u64) as usize];
                flip(&members, c.member, c.offset + rng.below(CHUNK));
                hit.push((s, c.member));
            }
            let r = a.scrub(Some(Trust::Located)).unwrap();
            let mut named: Vec<(u64, usize)> = r
                .details
                .iter()
                .map(|d| (d.stripe, d.member.expect("located")))
                .collect();
            named.sort();
            named.dedup();
            hit.sort();
            assert_eq!(named, hit, "seed {seed} {}: {r:?}", rec.name);
            for (m, want) in reference.iter().enumerate() {
                assert!(
                    raw(&members, m, 0, (CHUNK * 24) as usize) == *want,
                    "seed {seed} {}: member {m} differs after repair",
                    rec.name
                );
            }
            let mut back = vec![0u8; a.capacity() as usize];
            a.read(0, &mut back).unwrap();
            assert!(back == data, "seed {seed} {}", rec.name);
        });
        if r.is_err() {
            panic!("checksum scrub test failed; replay with HETRAID_SEED={seed}");
        }
    }
}

/// A read racing a write of the same block may see the new data with the old
/// checksum; that is not corruption, and must not be counted or "repaired".
#[test]
fn reads_racing_writes_of_the_same_block_are_not_corruption() {
    let rec = hetraid_engine::format::LayoutOptions {
        name: "raid5".into(),
        ..Default::default()
    };
    let (_members, a) = array(&rec, 4, 3);
    let (x, y) = (vec![0x11u8; 4096], vec![0x22u8; 4096]);
    a.write(0, &x).unwrap();
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                let mut back = vec![0u8; 4096];
                let mut reads = 0u64;
                while !done.load(std::sync::atomic::Ordering::Relaxed) || reads < 100 {
                    a.read(0, &mut back).unwrap();
                    assert!(back == x || back == y, "a read returned neither version");
                    reads += 1;
                }
            });
        }
        // `done` is set however the writes end, panicking or not.
        let _done = common::SetOnDrop(&done);
        for i in 0..3000 {
            a.write(0, if i % 2 == 0 { &y } else { &x }).unwrap();
        }
    });
    let st = a.status();
    for (i, m) in st.member_states.iter().enumerate() {
        assert_eq!(
            (m.checksum_errors, m.read_errors),
            (0, 0),
            "member {i} counted errors for reads that merely raced writes"
        );
    }
    assert_eq!(st.state, "optimal");
}

/// Writes that go straight to their member (RAID0: no redundancy to
/// update) still pair each block with its entry: writers of the same blocks
/// racing from several threads leave every block reading back as one
/// writer's bytes and no block failing its checksum.
#[test]
fn racing_writers_of_the_same_blocks_keep_data_and_entries_paired() {
    let rec = hetraid_engine::format::LayoutOptions {
        name: "raid0".into(),
        ..Default::default()
    };
    // Members that hold each write a while after placing its bytes (as a
    // slow device would): writers of one block then overlap between their
    // data and their entries.
    struct Jittery(Arc<dyn Member>, std::sync::atomic::AtomicU64);
    impl Member for Jittery {
        fn read_at(&self, buf: &mut [u8], off: u64) -> std::io::Result<()> {
            self.0.read_at(buf, off)
        }
        fn write_at(&self, buf: &[u8], off: u64) -> std::io::Result<()> {
            self.0.write_at(buf, off)?;
            let n = self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            std::thread::sleep(std::time::Duration::from_micros(n * 7919 % 5 * 40));
            Ok(())
        }
        fn flush(&self) -> std::io::Result<()> {
            self.0.flush()
        }
        fn len(&self) -> u64 {
            self.0.len()
        }
        fn name(&self) -> String {
            self.0.name()
        }
    }
    let sizes = vec![MIB + AREA + CHUNK * 24; 2];
    let (_, members) = fault_members_sized("m", &sizes, |i| 5 + i as u64);
    let members: Vec<Arc<dyn Member>> = members
        .into_iter()
        .map(|m| Arc::new(Jittery(m, Default::default())) as Arc<dyn Member>)
        .collect();
    let mut o = opts(&rec.name, CHUNK);
    o.layout = rec.clone();
    o.checksums = true;
    let a = Array::create(members, &o).unwrap();
    // Three blocks in one chunk, one straddling two chunks (planned path).
    // Each round, four writers hit one spot at once, then one reads it back:
    // a block whose bytes and entry came from different writers fails there.
    let spots = [0u64, 4096, CHUNK - 4096, CHUNK + 4096];
    // (Failures are kept, not panicked on: a panic would leave the other
    // writers waiting at the barrier.)
    let both = std::sync::Barrier::new(4);
    let failed = std::sync::Mutex::new(Vec::<String>::new());
    std::thread::scope(|s| {
        for t in 0..4u8 {
            let (a, both, failed) = (&a, &both, &failed);
            s.spawn(move || {
                for i in 0..150u32 {
                    let at = spots[i as usize % spots.len()];
                    let fill = t.wrapping_mul(50).wrapping_add(i as u8);
                    let len = if at == CHUNK - 4096 && t == 0 {
                        8192
                    } else {
                        4096
                    };
                    if let Err(e) = a.write(at, &vec![fill; len]) {
                        failed
                            .lock()
                            .unwrap()
                            .push(format!("round {i}: write at {at}: {e}"));
                    }
                    both.wait();
                    if t == 0 {
                        let mut back = vec![0u8; 4096];
                        match a.read(at, &mut back) {
                            Err(e) => failed
                                .lock()
                                .unwrap()
                                .push(format!("round {i}: block at {at}: {e}")),
                            Ok(()) if back.iter().any(|&b| b != back[0]) => failed
                                .lock()
                                .unwrap()
                                .push(format!("round {i}: block at {at} mixes two writes")),
                            Ok(()) => {}
                        }
                    }
                    both.wait();
                }
            });
        }
    });
    let failed = failed.into_inner().unwrap();
    assert!(
        failed.is_empty(),
        "{} failures, first: {}",
        failed.len(),
        failed[0]
    );
    let mut all = vec![0u8; a.capacity() as usize];
    a.read(0, &mut all).unwrap();
    assert_eq!(checksum_errors(&a), 0);
    assert_eq!(a.status().state, "optimal");
}

/// An array with checksums made on members that held other bytes (another
/// array, a filesystem): the checksum area's old bytes are not taken for
/// entries. Every block reads back and a scrub finds nothing. (Members
/// assumed clean are all zero by contract, as fresh files.)
#[test]
fn checksums_on_members_used_before_start_clean() {
    {
        let n = 4;
        let size = MIB + AREA + CHUNK * 24;
        let (_, members) = fault_members_sized("used", &vec![size; n], |i| 40 + i as u64);
        for (i, m) in members.iter().enumerate() {
            m.write_at(&Rng(50 + i as u64).bytes(size as usize), 0)
                .unwrap();
        }
        let mut o = opts("raid5", CHUNK);
        o.checksums = true;
        o.force = true;
        o.assume_clean = false;
        let a = Array::create(members.clone(), &o).unwrap();
        let mut back = vec![0u8; a.capacity() as usize];
        a.read(0, &mut back).unwrap();
        assert_eq!(checksum_errors(&a), 0, "old bytes read as bad blocks");
        assert_eq!(a.scrub(None).unwrap().mismatches, 0);
    }
}

/// A rebuild into spare space ends by assembling the array again from its
/// own (checksummed) members: they are not wrapped twice (which shifted
/// every offset and left every member out), and their entries not yet
/// written back stay in use. The same with a failed member rebuilt into a
/// declustered array's distributed spare.
#[test]
fn rebuild_to_spare_keeps_checksums_working() {
    let size = MIB + AREA + CHUNK * 96;
    let (_, members) = fault_members_sized("spare", &[size; 8], |i| 70 + i as u64);
    let mut o = opts("declustered", CHUNK);
    o.layout = declustered(4, 1, 1);
    o.checksums = true;
    let a = Array::create(members, &o).unwrap();
    let data = Rng(71).bytes(a.capacity() as usize);
    a.write(0, &data).unwrap();
    a.fail(5).unwrap();
    let (a, report) = a.rebuild_to_spare(Default::default(), &|_| {}).unwrap();
    assert!(report.completed);
    let st = a.status();
    assert_eq!(st.state, "optimal", "{st:?}");
    let mut back = vec![0u8; data.len()];
    a.read(0, &mut back).unwrap();
    assert!(back == data);
    assert_eq!(checksum_errors(&a), 0);
    assert_eq!(a.scrub(None).unwrap().mismatches, 0);
}
