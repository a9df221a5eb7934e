//! Slow-member sit-out in the engine (issue 41), the simulator's rule
//! (core `sitout`): a RAID5 whose member 2 takes 2 ms per read (a
//! `SlowMember`) among members that answer in microseconds. Looked at every
//! interval while readers run, member 2 is sat out (an event says so),
//! reads then never touch it and return the same bytes (their p99 before
//! and after is printed); with every member healthy nothing is sat out.

mod common;
use common::*;
use hetraid_core::ServiceModel;
use hetraid_engine::member::{Member, SlowMember};
use hetraid_engine::Array;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SPAN: u64 = 8 * MIB;

fn array(slow: bool) -> Arc<Array> {
    let (_, mut members) = fault_members(5, 16 * MIB, 41);
    if slow {
        let model = ServiceModel {
            position_ns: 2_000_000,
            bytes_per_s: 10_000_000_000,
        };
        members[2] = Arc::new(SlowMember::new(members[2].clone(), model).with_write_position(0))
            as Arc<dyn Member>;
    }
    let a = Arc::new(Array::create(members, &opts("raid5", 64 << 10)).unwrap());
    a.write(0, &Rng(7).bytes(SPAN as usize)).unwrap();
    a.measure_io();
    a
}

/// Random 4 KiB reads from `threads` threads until `stop`, checked against
/// the pattern written; their latencies.
fn read_until(a: &Arc<Array>, threads: u64, stop: &AtomicBool) -> Vec<Duration> {
    let data = Rng(7).bytes(SPAN as usize);
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                let (a, data) = (a.clone(), &data);
                s.spawn(move || {
                    let mut rng = Rng(t + 100);
                    let mut lat = Vec::new();
                    let mut buf = vec![0u8; 4096];
                    while !stop.load(Ordering::Relaxed) {
                        let off = rng.below(SPAN / 4096) * 4096;
                        let t0 = Instant::now();
                        a.read(off, &mut buf).unwrap();
                        lat.push(t0.elapsed());
                        assert!(
                            buf[..] == data[off as usize..off as usize + 4096],
                            "at {off}"
                        );
                    }
                    lat
                })
            })
            .collect();
        hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
    })
}

fn p99(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[(v.len() * 99 / 100).min(v.len() - 1)]
}

/// Read while looking every interval for `looks` looks (or until `until`
/// says so); the latencies and whether `until` was met.
fn read_and_look(
    a: &Arc<Array>,
    looks: u32,
    until: impl Fn(&Array) -> bool,
) -> (Vec<Duration>, bool) {
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let reader = s.spawn(|| read_until(a, 4, &stop));
        let mut met = false;
        for _ in 0..looks {
            std::thread::sleep(a.sit_out_interval());
            a.sit_out_look();
            if until(a) {
                met = true;
                break;
            }
        }
        stop.store(true, Ordering::Relaxed);
        (reader.join().unwrap(), met)
    })
}

fn member_reads(a: &Array, m: usize) -> u64 {
    a.status().member_states[m].io.map_or(0, |io| io.read_ops)
}

#[test]
fn a_member_slow_for_reads_is_sat_out_and_read_around() {
    let a = array(true);
    let (before, met) = read_and_look(&a, 100, |a| a.sit_out_of(2).0.is_some());
    assert!(met, "member 2 was not sat out in 10 s");
    let ev = a.events();
    let e = ev
        .iter()
        .rev()
        .find(|e| e.kind.as_str() == "sat_out")
        .expect("a sat_out event");
    assert_eq!(e.slot, Some(2), "{}", e.text());
    eprintln!("{}", e.text());
    assert!(e.values[0] >= 4 * e.values[1], "{}", e.text());
    // Sat out: reads never reach it, and are as right as before.
    let reads_2 = member_reads(&a, 2);
    let stop = AtomicBool::new(false);
    let after = std::thread::scope(|s| {
        let h = s.spawn(|| read_until(&a, 4, &stop));
        std::thread::sleep(Duration::from_millis(500));
        stop.store(true, Ordering::Relaxed);
        h.join().unwrap()
    });
    assert_eq!(member_reads(&a, 2), reads_2, "sat-out member 2 was read");
    assert!(after.len() > 100, "{} reads", after.len());
    // For the record (not asserted: no timing thresholds in tests).
    let (b, f) = (p99(before), p99(after));
    eprintln!(
        "p99 read: {b:?} before the sit-out, {f:?} after ({:.1}x)",
        b.as_secs_f64() / f.as_secs_f64()
    );
    // It still takes writes.
    let writes_2 = a.status().member_states[2].io.map_or(0, |io| io.write_ops);
    a.write(0, &Rng(7).bytes(MIB as usize)).unwrap();
    assert!(a.status().member_states[2].io.map_or(0, |io| io.write_ops) > writes_2);
    // A failure takes the room: the sit-out ends so member 2 can be read.
    a.fail(0).unwrap();
    a.sit_out_look();
    assert_eq!(a.sit_out_of(2).0, None);
    assert!(a
        .events()
        .iter()
        .any(|e| e.kind.as_str() == "sat_in" && e.slot == Some(2)));
    let mut buf = vec![0u8; 4096];
    a.read(0, &mut buf).unwrap();
    assert!(buf == Rng(7).bytes(4096));
}

#[test]
fn healthy_members_are_never_sat_out() {
    let a = array(false);
    let (lat, met) = read_and_look(&a, 15, |a| (0..5).any(|m| a.sit_out_of(m).0.is_some()));
    assert!(
        !met,
        "a healthy member was sat out: {:?}",
        a.events().last().map(|e| e.text())
    );
    assert!(lat.len() > 1000, "{} reads", lat.len());
}
