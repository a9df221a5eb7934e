//! An in-memory member for tests: injects I/O errors on chosen or random
//! operations, and simulates a crash — every write since the last flush is
//! dropped, or, with torn writes, kept or dropped page by page (4 KiB).
//! Randomness comes from a seed, so every failure replays.

use super::Member;
use std::io;
use std::sync::Mutex;

#[derive(Debug, Clone, Default)]
pub struct FaultConfig {
    /// Fail every read / write.
    pub fail_reads: bool,
    pub fail_writes: bool,
    /// Fail this fraction (parts per million) of operations at random.
    pub error_ppm: u32,
    /// Fail the N-th operation (0-based), once.
    pub fail_op: Option<u64>,
    /// Injected errors carry this OS error number (e.g. libc::ENOSPC)
    /// instead of a generic error.
    pub errno: Option<i32>,
    /// A process death shared by several members: each write or flush counts
    /// it down, and once it reaches zero no write of any member sharing it
    /// lands any more (they return Ok, as writes queued by a killed process
    /// never reach the disk). `crash()` then drops what was not flushed.
    pub death: Option<std::sync::Arc<Death>>,
}

/// A process death shared by members (see [`FaultConfig::death`]).
#[derive(Debug)]
pub struct Death {
    /// Writes (and flushes) that still land.
    pub countdown: std::sync::atomic::AtomicI64,
    /// Byte offset of the first write that did not land (u64::MAX: none yet):
    /// tells a death in a superblock update (offset 0) from others.
    pub first_lost_offset: std::sync::atomic::AtomicU64,
}

impl Death {
    /// No death scheduled.
    pub fn never() -> Self {
        Self {
            countdown: std::sync::atomic::AtomicI64::new(i64::MAX),
            first_lost_offset: std::sync::atomic::AtomicU64::new(u64::MAX),
        }
    }

    /// Die after `writes` more writes.
    pub fn after(&self, writes: i64) {
        use std::sync::atomic::Ordering::SeqCst;
        self.first_lost_offset.store(u64::MAX, SeqCst);
        self.countdown.store(writes, SeqCst);
    }

    /// Live again (a restarted process).
    pub fn revive(&self) {
        self.countdown
            .store(i64::MAX, std::sync::atomic::Ordering::SeqCst);
    }
}

struct State {
    durable: Vec<u8>,
    current: Vec<u8>,
    /// Pages written since the last flush.
    dirty_pages: std::collections::BTreeSet<u64>,
    cfg: FaultConfig,
    ops: u64,
    rng: u64,
}

pub struct FaultMember {
    name: String,
    len: u64,
    state: Mutex<State>,
}

use hetraid_core::units::PAGE;

impl FaultMember {
    pub fn new(name: &str, len: u64, seed: u64) -> Self {
        Self {
            name: name.into(),
            len,
            state: Mutex::new(State {
                durable: vec![0; len as usize],
                current: vec![0; len as usize],
                dirty_pages: Default::default(),
                cfg: FaultConfig::default(),
                ops: 0,
                rng: seed | 1,
            }),
        }
    }

    pub fn set_faults(&self, cfg: FaultConfig) {
        self.state.lock().unwrap().cfg = cfg;
    }

    /// Count operations from zero again (for `fail_op`).
    pub fn reset_ops(&self) {
        self.state.lock().unwrap().ops = 0;
    }

    /// Lose power: unflushed pages revert (torn: each independently, at random).
    pub fn crash(&self, torn: bool) {
        let mut s = self.state.lock().unwrap();
        let pages: Vec<u64> = std::mem::take(&mut s.dirty_pages).into_iter().collect();
        for p in pages {
            let keep = torn && next(&mut s.rng).is_multiple_of(2);
            let r = (p * PAGE) as usize..((p + 1) * PAGE).min(s.current.len() as u64) as usize;
            if keep {
                let v = s.current[r.clone()].to_vec();
                s.durable[r].copy_from_slice(&v);
            } else {
                let v = s.durable[r.clone()].to_vec();
                s.current[r].copy_from_slice(&v);
            }
        }
    }

    /// A copy of the durable contents.
    pub fn durable(&self) -> Vec<u8> {
        self.state.lock().unwrap().durable.clone()
    }

    fn check(&self, s: &mut State, write: bool) -> io::Result<()> {
        let op = s.ops;
        s.ops += 1;
        let random = s.cfg.error_ppm > 0 && next(&mut s.rng) % 1_000_000 < s.cfg.error_ppm as u64;
        if (write && s.cfg.fail_writes)
            || (!write && s.cfg.fail_reads)
            || s.cfg.fail_op == Some(op)
            || random
        {
            if let Some(errno) = s.cfg.errno {
                return Err(io::Error::from_raw_os_error(errno));
            }
            return Err(io::Error::other(format!(
                "injected I/O error on {} (operation {op})",
                self.name
            )));
        }
        Ok(())
    }

    /// Is the process dead (writes no longer land)? Counts this write (at
    /// `off`; None for a flush) down.
    fn dead(s: &State, off: Option<u64>) -> bool {
        use std::sync::atomic::Ordering::SeqCst;
        s.cfg.death.as_ref().is_some_and(|d| {
            let dead = d.countdown.fetch_sub(1, SeqCst) <= 0;
            if dead {
                if let Some(o) = off {
                    let _ = d
                        .first_lost_offset
                        .compare_exchange(u64::MAX, o, SeqCst, SeqCst);
                }
            }
            dead
        })
    }
}

fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

fn bounds(len: u64, off: u64, n: usize) -> io::Result<std::ops::Range<usize>> {
    if off.checked_add(n as u64).is_none_or(|e| e > len) {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "I/O beyond the end of the member",
        ));
    }
    Ok(off as usize..off as usize + n)
}

impl Member for FaultMember {
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        let mut s = self.state.lock().unwrap();
        self.check(&mut s, false)?;
        let r = bounds(self.len, off, buf.len())?;
        buf.copy_from_slice(&s.current[r]);
        Ok(())
    }

    fn write_at(&self, buf: &[u8], off: u64) -> io::Result<()> {
        let mut s = self.state.lock().unwrap();
        self.check(&mut s, true)?;
        let r = bounds(self.len, off, buf.len())?;
        if Self::dead(&s, Some(off)) {
            return Ok(());
        }
        s.current[r].copy_from_slice(buf);
        for p in off / PAGE..(off + buf.len() as u64).div_ceil(PAGE) {
            s.dirty_pages.insert(p);
        }
        Ok(())
    }

    fn flush(&self) -> io::Result<()> {
        let mut s = self.state.lock().unwrap();
        self.check(&mut s, true)?;
        if Self::dead(&s, None) {
            return Ok(());
        }
        let pages: Vec<u64> = std::mem::take(&mut s.dirty_pages).into_iter().collect();
        for p in pages {
            let r = (p * PAGE) as usize..((p + 1) * PAGE).min(s.current.len() as u64) as usize;
            let v = s.current[r.clone()].to_vec();
            s.durable[r].copy_from_slice(&v);
        }
        Ok(())
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn name(&self) -> String {
        self.name.clone()
    }
}
