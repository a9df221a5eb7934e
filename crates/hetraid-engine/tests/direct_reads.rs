//! Large reads that need no parity work go straight from the members into the
//! caller's buffer. On members that answer fast they run in the caller's
//! thread (a thread per member cost half the server's CPU on 1 MiB reads
//! from memory-speed members); on slow members (disks) they run on several
//! threads at once, where waiting on several actuators together saves time.

mod common;
use common::*;
use hetraid_engine::member::Member;
use hetraid_engine::Array;
use std::collections::HashSet;
use std::io;
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::Duration;

/// A member that notes which threads read it, and can take its time.
struct Spy {
    inner: Arc<dyn Member>,
    readers: Mutex<HashSet<ThreadId>>,
    delay: Mutex<Duration>,
}

impl Member for Spy {
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        self.readers
            .lock()
            .unwrap()
            .insert(std::thread::current().id());
        let d = *self.delay.lock().unwrap();
        if !d.is_zero() {
            std::thread::sleep(d);
        }
        self.inner.read_at(buf, off)
    }
    fn write_at(&self, buf: &[u8], off: u64) -> io::Result<()> {
        self.inner.write_at(buf, off)
    }
    fn flush(&self) -> io::Result<()> {
        self.inner.flush()
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn name(&self) -> String {
        self.inner.name()
    }
}

/// Threads that read the members during `n` 1 MiB reads of the array.
fn readers_of(a: &Array, spies: &[Arc<Spy>], n: u64) -> HashSet<ThreadId> {
    let mut buf = vec![0u8; MIB as usize];
    for i in 0..n {
        spies.iter().for_each(|s| s.readers.lock().unwrap().clear());
        a.read(i % 4 * MIB, &mut buf).unwrap();
    }
    spies
        .iter()
        .flat_map(|s| s.readers.lock().unwrap().clone())
        .collect()
}

#[test]
fn large_reads_stay_in_the_callers_thread_only_on_fast_members() {
    let (_, raw) = fault_members(5, MIB + 4 * MIB, 3);
    let spies: Vec<Arc<Spy>> = raw
        .into_iter()
        .map(|m| {
            Arc::new(Spy {
                inner: m,
                readers: Mutex::new(HashSet::new()),
                delay: Mutex::new(Duration::ZERO),
            })
        })
        .collect();
    let members: Vec<Arc<dyn Member>> =
        spies.iter().map(|s| s.clone() as Arc<dyn Member>).collect();
    let a = Array::create(members, &opts("raid5", 64 << 10)).unwrap();
    let data = Rng(4).bytes(4 * MIB as usize);
    a.write(0, &data).unwrap();
    // Fast members: every member read in this thread.
    let me = std::thread::current().id();
    let seen = readers_of(&a, &spies, 100);
    assert_eq!(
        seen,
        HashSet::from([me]),
        "fast members read on other threads"
    );
    // Slow members (a millisecond a read): after a window of reads teaches
    // that, a 1 MiB read waits on several members at once.
    spies
        .iter()
        .for_each(|s| *s.delay.lock().unwrap() = Duration::from_millis(1));
    let seen = readers_of(&a, &spies, 100);
    assert!(
        !seen.contains(&me) && seen.len() > 1,
        "slow members read in the caller's thread: {} threads",
        seen.len()
    );
    // And the bytes are right either way.
    let mut back = vec![0u8; data.len()];
    a.read(0, &mut back).unwrap();
    assert!(back == data);
}
