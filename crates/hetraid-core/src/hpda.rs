//! HPDA's decisions ([Mao 2010]): the monitor (which writes are sequential,
//! when the array is idle), the director (where a write goes: the mirrored
//! log or the RAID4), how a RAID4 write is made crash-safe, and the
//! reclaimer's policy. Pure: time is an input in nanoseconds, never read
//! from a clock; the engine and the simulator both call these.
//!
//! A write is sequential when it continues one of the recent streams: it
//! starts within `tolerance_bytes` after where one of them ended (MD's and
//! the block layer's readahead use the same idea). [`STREAMS`] streams are
//! tracked, least recently used first out, so up to that many interleaved
//! sequential writers are each recognised. The first write of a stream is
//! random until a second one continues it.
//!
//! Intensity is the number of requests in a sliding window, kept as a ring of
//! buckets; the array is idle when no request arrived for `idle_ns`.

/// Streams tracked at once.
pub const STREAMS: usize = 8;
/// Buckets of the intensity window.
const BUCKETS: usize = 16;

/// How a write is classified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteKind {
    Sequential,
    Random,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stream {
    /// Where the stream's last write ended.
    end: u64,
    /// When it was last used (for LRU replacement).
    last_ns: u64,
    /// Writes seen in the stream.
    writes: u64,
}

/// The monitor's configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MonitorConfig {
    /// A write continues a stream when it starts at most this far after its end.
    pub tolerance_bytes: u64,
    /// Length of the intensity window.
    pub window_ns: u64,
    /// No request for this long: idle.
    pub idle_ns: u64,
}

impl Default for MonitorConfig {
    fn default() -> Self {
        Self {
            tolerance_bytes: 64 << 10,
            window_ns: 1_000_000_000,
            idle_ns: 500_000_000,
        }
    }
}

/// Sequential-stream detection and I/O intensity.
#[derive(Debug, Clone)]
pub struct Monitor {
    cfg: MonitorConfig,
    streams: Vec<Stream>,
    /// Requests per bucket, and the bucket index the last request fell in.
    buckets: [u64; BUCKETS],
    bucket_at: u64,
    last_request_ns: Option<u64>,
}

impl Monitor {
    pub fn new(cfg: MonitorConfig) -> Self {
        assert!(
            cfg.window_ns >= BUCKETS as u64,
            "the window must be at least {BUCKETS} ns"
        );
        Self {
            cfg,
            streams: Vec::with_capacity(STREAMS),
            buckets: [0; BUCKETS],
            bucket_at: 0,
            last_request_ns: None,
        }
    }

    fn bucket_ns(&self) -> u64 {
        self.cfg.window_ns / BUCKETS as u64
    }

    /// Count a request at `now_ns` in the intensity window.
    fn count(&mut self, now_ns: u64) {
        let b = now_ns / self.bucket_ns();
        // Buckets that fell out of the window since the last request are
        // cleared (at most the whole ring: bounded).
        let gap = b.saturating_sub(self.bucket_at).min(BUCKETS as u64);
        for k in 1..=gap {
            self.buckets[((self.bucket_at + k) % BUCKETS as u64) as usize] = 0;
        }
        if b > self.bucket_at || self.last_request_ns.is_none() {
            self.bucket_at = b;
        }
        self.buckets[(self.bucket_at % BUCKETS as u64) as usize] += 1;
        self.last_request_ns = Some(self.last_request_ns.map_or(now_ns, |t| t.max(now_ns)));
    }

    /// Note a read at `now_ns` (it counts towards intensity only).
    pub fn read(&mut self, now_ns: u64) {
        self.count(now_ns);
    }

    /// Classify a write of `len` bytes at `offset`, arriving at `now_ns`.
    pub fn write(&mut self, offset: u64, len: u64, now_ns: u64) -> WriteKind {
        self.count(now_ns);
        let end = offset.saturating_add(len);
        let hit = self
            .streams
            .iter()
            .position(|s| offset >= s.end && offset - s.end <= self.cfg.tolerance_bytes);
        match hit {
            Some(i) => {
                let s = &mut self.streams[i];
                s.end = end;
                s.last_ns = now_ns;
                s.writes += 1;
                WriteKind::Sequential
            }
            None => {
                let s = Stream {
                    end,
                    last_ns: now_ns,
                    writes: 1,
                };
                if self.streams.len() < STREAMS {
                    self.streams.push(s);
                } else {
                    let lru = (0..self.streams.len())
                        .min_by_key(|&i| self.streams[i].last_ns)
                        .expect("streams are tracked");
                    self.streams[lru] = s;
                }
                WriteKind::Random
            }
        }
    }

    /// Requests in the window ending at `now_ns`.
    pub fn intensity(&self, now_ns: u64) -> u64 {
        let b = now_ns / self.bucket_ns();
        if b >= self.bucket_at + BUCKETS as u64 {
            return 0;
        }
        // Buckets older than the window ending now are not counted.
        let stale = b.saturating_sub(self.bucket_at);
        (0..BUCKETS as u64)
            .filter(|&k| k + stale < BUCKETS as u64)
            .map(|k| {
                self.buckets[((self.bucket_at + BUCKETS as u64 - k) % BUCKETS as u64) as usize]
            })
            .sum()
    }

    /// Idle after `idle_ns` without a request from now on.
    pub fn set_idle_ns(&mut self, idle_ns: u64) {
        self.cfg.idle_ns = idle_ns;
    }

    /// Streams tracked now.
    pub fn streams(&self) -> usize {
        self.streams.len()
    }

    /// No request for `idle_ns` (or none yet).
    pub fn idle(&self, now_ns: u64) -> bool {
        self.last_request_ns
            .is_none_or(|t| now_ns.saturating_sub(t) >= self.cfg.idle_ns)
    }
}

/// Where the director sends a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// Appended to the mirrored log (a write-back data record); the
    /// reclaimer moves it to the RAID4 later.
    Log,
    /// Written in place on the RAID4 (SSD data, HDD-1 parity).
    Raid4,
}

/// What the director needs to know of the array when a write arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Condition {
    /// Every RAID4 member (the SSDs and HDD-1) is in sync.
    pub raid4_whole: bool,
    /// Log copies that can be written, of how many the log has.
    pub log_copies_live: usize,
    pub log_copies: usize,
    /// The log holds a newer copy of some byte the write covers.
    pub overlaps_log: bool,
}

/// The director ([Mao 2010]): random writes go to the log, sequential ones to
/// the RAID4; and, in order:
/// - the RAID4 degraded (an SSD or HDD-1 failed or rebuilding): every write
///   goes to the log, so no write waits for reconstruction or risks the
///   write hole while the RAID4 rebuilds;
/// - a write over bytes the log holds goes to the log too: the newest copy
///   of every byte stays in one place, and the log's order alone says which
///   copy is newest after a crash (the paper invalidates the log entries
///   instead; in a persistent log that would need a record of its own, made
///   durable after the RAID4 write, on every such write);
/// - a log copy lost (HDD-2, or HDD-1's copy) while the RAID4 is whole:
///   everything goes to the RAID4 — nothing new is kept on one copy alone —
///   and the reclaimer empties the log ([`reclaim_step`]);
/// - no log copy left: the RAID4.
pub fn route_write(kind: WriteKind, c: &Condition) -> Route {
    if c.log_copies_live == 0 {
        return Route::Raid4;
    }
    if !c.raid4_whole || c.overlaps_log {
        return Route::Log;
    }
    if c.log_copies_live < c.log_copies {
        return Route::Raid4;
    }
    match kind {
        WriteKind::Sequential => Route::Raid4,
        WriteKind::Random => Route::Log,
    }
}

/// How a write to the RAID4 (the director's, or the reclaimer's) is made
/// crash-safe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Raid4Guard {
    /// An intent record (one page naming the stripes) in the log before the
    /// member writes; after a crash those stripes' parity is recomputed from
    /// their data. Parity updates then cost the HDDs one page of log, never
    /// a second copy of the data.
    Intent,
    /// The stripe updates themselves in the log (data and parity), replayed
    /// after a crash: with a member absent, parity recomputed from the data
    /// would be wrong for the absent member (the write hole).
    Journal,
}

/// The guard for a RAID4 write: an intent while the RAID4 is whole, the
/// journal while it is degraded.
pub fn raid4_guard(raid4_whole: bool) -> Raid4Guard {
    if raid4_whole {
        Raid4Guard::Intent
    } else {
        Raid4Guard::Journal
    }
}

/// The intent records a RAID4 write of `stripes` needs: runs of
/// consecutive stripes (first, count), at most `journal::ENTRIES_MAX` per
/// record (one record for any write of consecutive stripes).
pub fn intent_records(stripes: impl IntoIterator<Item = u64>) -> Vec<Vec<(u64, u64)>> {
    let mut v: Vec<u64> = stripes.into_iter().collect();
    v.sort_unstable();
    v.dedup();
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for s in v {
        match runs.last_mut() {
            Some((first, count)) if *first + *count == s && *count < u32::MAX as u64 => *count += 1,
            _ => runs.push((s, 1)),
        }
    }
    runs.chunks(crate::journal::ENTRIES_MAX)
        .map(|c| c.to_vec())
        .collect()
}

/// Stripes an intent record names at least, from the first stripe of each
/// run a RAID4 write touches: a stream's next writes then find their stripes
/// named already and log nothing (as MD's write-intent bitmap sets a bit for
/// a region once). After a crash, at most this many stripes per record are
/// resynced.
pub const INTENT_AHEAD_STRIPES: u64 = 256;

/// The stripes intent records named since the last checkpoint (which saw
/// every write before it on the flushed members, and clears this). A RAID4
/// write whose stripes are all named needs no record of its own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Announced {
    /// first stripe -> end (exclusive); disjoint, merged.
    runs: std::collections::BTreeMap<u64, u64>,
}

impl Announced {
    fn covered(&self, s: u64) -> bool {
        self.runs
            .range(..=s)
            .next_back()
            .is_some_and(|(_, &end)| s < end)
    }

    /// The intent records a RAID4 write of `stripes` needs (none when every
    /// stripe is named already), with each run widened to
    /// [`INTENT_AHEAD_STRIPES`] (within `stripe_count`); what they name is
    /// noted as named. The caller makes them durable before any member
    /// write, under the same lock as this call.
    pub fn intents_for(
        &mut self,
        stripes: impl IntoIterator<Item = u64>,
        stripe_count: u64,
    ) -> Vec<Vec<(u64, u64)>> {
        let runs: Vec<(u64, u64)> = intent_records(stripes).into_iter().flatten().collect();
        let missing: Vec<(u64, u64)> = runs
            .into_iter()
            .filter(|&(f, c)| (f..f + c).any(|s| !self.covered(s)))
            .map(|(f, c)| {
                (
                    f,
                    c.max(INTENT_AHEAD_STRIPES)
                        .min(stripe_count.saturating_sub(f))
                        .max(c),
                )
            })
            .collect();
        for &(f, c) in &missing {
            self.insert(f, f + c);
        }
        intent_records(missing.iter().flat_map(|&(f, c)| f..f + c))
    }

    fn insert(&mut self, mut start: u64, mut end: u64) {
        // Merge with every run it touches (bounded by the runs present).
        let touching: Vec<(u64, u64)> = self
            .runs
            .range(..=end)
            .filter(|(_, &e)| e >= start)
            .map(|(&s, &e)| (s, e))
            .collect();
        for (s, e) in touching {
            self.runs.remove(&s);
            start = start.min(s);
            end = end.max(e);
        }
        self.runs.insert(start, end);
    }

    /// A checkpoint: every write so far is on the flushed members.
    pub fn clear(&mut self) {
        self.runs.clear();
    }
}

/// HPDA's log by default: at most this much of the room on HDD-1 and HDD-2
/// (the engine's write-back index keeps what the log holds in memory, at
/// most three quarters of it); `--log-size` sets another size.
pub const LOG_BYTES_DEFAULT: u64 = 256 << 20;

/// The size of HPDA's log: `requested` (rounded up to a page) or the
/// default, at most the `room` HDD-1 has past the parity (and HDD-2 has),
/// at least `min` (a record of a whole stripe update, a quarter of the
/// ring). The engine and the simulator both size the log with it.
pub fn log_bytes(room: u64, requested: Option<u64>, min: u64) -> Result<u64, String> {
    use crate::units::PAGE;
    let room = room / PAGE * PAGE;
    match requested {
        Some(b) if b.div_ceil(PAGE) * PAGE > room => Err(format!(
            "a log of {b} bytes is more than the {room} bytes HDD-1 has past the parity (and HDD-2 has); give at most {room}, or a larger HDD-1"
        )),
        Some(b) if b < min => Err(format!(
            "a log of {b} bytes is too small: this array's log needs at least {min}"
        )),
        Some(b) => Ok(b.div_ceil(PAGE) * PAGE),
        None => Ok(room.min(LOG_BYTES_DEFAULT)),
    }
}

/// HPDA's log for `layout`: its size in bytes (`log_bytes` over the room the
/// layout's log regions leave and the smallest log its records need) and the
/// regions (member, offset) that hold its two copies. The engine and the
/// simulator both take the log from here.
pub fn log_region(
    layout: &dyn crate::Layout,
    requested: Option<u64>,
) -> Result<(u64, Vec<(usize, u64)>), String> {
    let regions = layout.log_regions();
    let room = regions.iter().map(|r| r.length).min().unwrap_or(0);
    let min = crate::journal::log_bytes_min(
        layout.members(),
        layout.chunk_bytes(),
        &crate::journal::Reserve::new(layout.members(), layout.redundancy()),
    );
    let bytes = log_bytes(room, requested, min)?;
    Ok((
        bytes,
        regions.iter().map(|r| (r.member, r.offset)).collect(),
    ))
}

/// The log's state as the reclaimer's policy sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogFill {
    /// Ring bytes in use, and the ring's length.
    pub used_bytes: u64,
    pub ring_bytes: u64,
    /// The index holds data not yet on the RAID4.
    pub holds_data: bool,
    /// A log copy is lost while the RAID4 is whole (HDD-2 failed): empty
    /// the log so nothing stays on one copy.
    pub copy_lost: bool,
}

/// The reclaimer's policy ([Mao 2010]), asked before each batch, so a reclaim
/// that user I/O interrupts stops after the batch in progress (user I/O
/// keeps priority). Returns the ring usage to reclaim down to (0:
/// everything), or None to wait:
/// - a copy lost: everything, even while busy;
/// - past the high-water mark (half the ring, as the write path's trigger,
///   `journal::reclaim_before_write`): down to a quarter, even while busy;
/// - idle (the monitor): everything;
/// - otherwise: wait.
pub fn reclaim_step(idle: bool, fill: &LogFill) -> Option<u64> {
    if !fill.holds_data {
        return None;
    }
    if fill.copy_lost {
        return Some(0);
    }
    if fill.used_bytes > fill.ring_bytes / 2 {
        return Some(fill.ring_bytes / 4);
    }
    idle.then_some(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m() -> Monitor {
        Monitor::new(MonitorConfig::default())
    }

    #[test]
    fn a_run_is_sequential_after_its_first_write() {
        let mut m = m();
        let kinds: Vec<WriteKind> = (0..5).map(|i| m.write(i * 4096, 4096, i)).collect();
        assert_eq!(kinds[0], WriteKind::Random);
        assert!(kinds[1..].iter().all(|&k| k == WriteKind::Sequential));
        // A small gap is tolerated; a jump is not.
        assert_eq!(m.write(5 * 4096 + 8192, 4096, 6), WriteKind::Sequential);
        assert_eq!(m.write(1 << 30, 4096, 7), WriteKind::Random);
        // Backwards is not a continuation.
        assert_eq!(m.write(0, 4096, 8), WriteKind::Random);
    }

    #[test]
    fn interleaved_streams_are_each_recognised_up_to_the_limit() {
        let mut m = m();
        let base = |s: u64| s << 32;
        for s in 0..STREAMS as u64 {
            assert_eq!(m.write(base(s), 4096, s), WriteKind::Random);
        }
        for round in 1..4u64 {
            for s in 0..STREAMS as u64 {
                let k = m.write(base(s) + round * 4096, 4096, round * 100 + s);
                assert_eq!(k, WriteKind::Sequential, "stream {s} round {round}");
            }
        }
        // One stream more pushes out the least recently used (stream 0).
        assert_eq!(m.write(base(99), 4096, 1000), WriteKind::Random);
        assert_eq!(m.write(base(0) + 4 * 4096, 4096, 1001), WriteKind::Random);
        assert_eq!(m.write(base(1) + 4 * 4096, 4096, 1002), WriteKind::Random);
    }

    #[test]
    fn random_offsets_stay_random() {
        let mut m = m();
        let mut x = 0x9E37_79B9u64;
        let mut seq = 0;
        for t in 0..10_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if m.write((x % (1 << 40)) / 4096 * 4096, 4096, t) == WriteKind::Sequential {
                seq += 1;
            }
        }
        assert!(
            seq < 10,
            "{seq} of 10000 random writes taken for sequential"
        );
    }

    #[test]
    fn intensity_and_idle_follow_time() {
        let mut m = m();
        assert!(m.idle(0), "idle before any request");
        let ms = 1_000_000u64;
        for i in 0..400 {
            m.write(i * 4096, 4096, i * 5 * ms); // 200 per second for 2 s
        }
        let now = 399 * 5 * ms;
        let n = m.intensity(now);
        // The window is whole buckets of 62.5 ms: 188 to 200 of the last second's.
        assert!((185..=200).contains(&n), "{n} requests in the last second");
        assert!(!m.idle(now + 100 * ms));
        assert!(m.idle(now + 600 * ms));
        assert_eq!(m.intensity(now + 2_000 * ms), 0, "the window has passed");
        // Reads count too.
        m.read(now + 3_000 * ms);
        assert_eq!(m.intensity(now + 3_000 * ms), 1);
        assert!(!m.idle(now + 3_000 * ms));
    }

    fn cond(whole: bool, live: usize, overlaps: bool) -> Condition {
        Condition {
            raid4_whole: whole,
            log_copies_live: live,
            log_copies: 2,
            overlaps_log: overlaps,
        }
    }

    #[test]
    fn the_director_follows_the_paper_and_the_failure_cases() {
        use Route::*;
        use WriteKind::*;
        // Normal state.
        assert_eq!(route_write(Random, &cond(true, 2, false)), Log);
        assert_eq!(route_write(Sequential, &cond(true, 2, false)), Raid4);
        // Over logged bytes: the log, so the newest copy stays in one place.
        assert_eq!(route_write(Sequential, &cond(true, 2, true)), Log);
        // RAID4 degraded (SSD or HDD-1): everything to the log, even with
        // one copy left (HDD-1's copy lost with HDD-1).
        for live in [1, 2] {
            assert_eq!(route_write(Sequential, &cond(false, live, false)), Log);
            assert_eq!(route_write(Random, &cond(false, live, false)), Log);
        }
        // HDD-2 lost, RAID4 whole: nothing new on one copy.
        assert_eq!(route_write(Random, &cond(true, 1, false)), Raid4);
        assert_eq!(route_write(Random, &cond(true, 1, true)), Log);
        // No log at all.
        assert_eq!(route_write(Random, &cond(false, 0, true)), Raid4);
        assert_eq!(raid4_guard(true), Raid4Guard::Intent);
        assert_eq!(raid4_guard(false), Raid4Guard::Journal);
    }

    #[test]
    fn a_stream_names_its_stripes_once_until_a_checkpoint() {
        let mut a = Announced::default();
        let total = 1000;
        // The first write names 256 stripes from its own.
        let r = a.intents_for([10, 11], total);
        assert_eq!(r, vec![vec![(10, INTENT_AHEAD_STRIPES)]]);
        // The stream's next writes are covered.
        for s in 12..10 + INTENT_AHEAD_STRIPES {
            assert!(a.intents_for([s], total).is_empty(), "stripe {s}");
        }
        // Past the run: a new record, merged with the first.
        assert_eq!(a.intents_for([266], total), vec![vec![(266, 256)]]);
        assert_eq!(a.runs.len(), 1);
        // Near the end of the array the run stops at the last stripe.
        assert_eq!(a.intents_for([990, 991], total), vec![vec![(990, 10)]]);
        // A write partly covered names its uncovered run whole.
        assert_eq!(a.intents_for([9, 10], total), vec![vec![(9, 256)]]);
        a.clear();
        assert_eq!(a.intents_for([12], total), vec![vec![(12, 256)]]);
    }

    #[test]
    fn intents_name_runs_of_stripes() {
        assert_eq!(intent_records([5, 3, 4, 9, 4]), vec![vec![(3, 3), (9, 1)]]);
        assert!(intent_records([]).is_empty());
        let many = intent_records((0..600).map(|i| i * 2));
        assert_eq!(many.len(), 3);
        assert_eq!(many[0].len(), crate::journal::ENTRIES_MAX);
        assert_eq!(many.iter().map(Vec::len).sum::<usize>(), 600);
    }

    #[test]
    fn the_reclaimer_waits_for_idle_unless_the_log_fills_or_loses_a_copy() {
        let ring = 1 << 30;
        let fill = |used: u64, data: bool, lost: bool| LogFill {
            used_bytes: used,
            ring_bytes: ring,
            holds_data: data,
            copy_lost: lost,
        };
        assert_eq!(reclaim_step(false, &fill(ring / 4, true, false)), None);
        assert_eq!(reclaim_step(true, &fill(ring / 4, true, false)), Some(0));
        assert_eq!(
            reclaim_step(false, &fill(ring / 2 + 4096, true, false)),
            Some(ring / 4)
        );
        assert_eq!(reclaim_step(false, &fill(4096, true, true)), Some(0));
        assert_eq!(reclaim_step(true, &fill(ring, false, true)), None);
    }
}
