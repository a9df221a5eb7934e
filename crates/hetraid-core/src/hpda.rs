//! HPDA's monitor (SPEC §9), the first of its decisions: which writes are
//! sequential, and when the array is idle. Pure: time is an input in
//! nanoseconds, never read from a clock. The director and the reclaimer
//! policy build on it (issue 13).
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

    /// No request for `idle_ns` (or none yet).
    pub fn idle(&self, now_ns: u64) -> bool {
        self.last_request_ns
            .is_none_or(|t| now_ns.saturating_sub(t) >= self.cfg.idle_ns)
    }
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
}
