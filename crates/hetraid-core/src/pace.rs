//! The rebuild and scrub pacer: MD's two speed limits as one pure function,
//! so the engine (wall-clock time) and the simulator (simulated time) wait
//! exactly as long before each batch.
//!
//! MD's rule (`md_do_sync`): below `speed_limit_min` a resync never waits;
//! above `speed_limit_max` it waits; in between it waits while user I/O is
//! active. Here the wait is computed, not polled: just long enough for the
//! average rate since the start to fall to the limit that applies.

/// Nanoseconds per second.
const NS: u128 = 1_000_000_000;
/// Longest wait for the minimum speed while users are busy: users may stop,
/// and then the rebuild runs at the maximum again (MD re-checks likewise).
pub const USER_WAIT_NS_MAX: u64 = 500_000_000;

/// How long after the last user request users still count as active. MD
/// asks "any I/O since the last check" (`is_mddev_idle`); executors look at
/// different moments (the engine between batches, the simulator at event
/// times), so a window makes the answer the same in both.
pub const USER_ACTIVE_WINDOW_NS: u64 = 500_000_000;

/// Are users active for the pacer: requests in flight, or the last one seen
/// less than `USER_ACTIVE_WINDOW_NS` ago (`last_seen_age_ns`, None: never)?
pub fn users_active(in_flight: bool, last_seen_age_ns: Option<u64>) -> bool {
    in_flight || last_seen_age_ns.is_some_and(|a| a < USER_ACTIVE_WINDOW_NS)
}

/// MD's `speed_limit_min` / `speed_limit_max`, in bytes per second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PaceLimits {
    /// Rate kept even while users do I/O.
    pub min_bps: u64,
    /// Rate never exceeded; 0 = unlimited.
    pub max_bps: u64,
}

/// MD's defaults, the one pair every executor and command uses:
/// `/proc/sys/dev/raid/speed_limit_min` 1000 and `speed_limit_max` 200000,
/// in KiB/s (1,024,000 and 204,800,000 bytes a second).
pub const MD_DEFAULT: PaceLimits = PaceLimits {
    min_bps: 1000 << 10,
    max_bps: 200_000 << 10,
};
/// The same defaults as command-line sizes (`--min-speed`, `--max-speed`).
pub const MD_DEFAULT_MIN_ARG: &str = "1000K";
pub const MD_DEFAULT_MAX_ARG: &str = "200000K";

/// What one pair of limits governs. MD paces each md device on its own;
/// S²-RAID's prototype ran every subRAID as an md device of its own, so each
/// parallel rebuild stream had its own `speed_limit_min`/`speed_limit_max`
/// ([Wan 2010]). `Array` (the default, MD on one device) holds the whole
/// rebuild to the limits; `Stream` holds every stream to them apart, so
/// streams running at once add up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PaceScope {
    #[default]
    Array,
    Stream,
}

impl PaceScope {
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "array" => Ok(Self::Array),
            "stream" => Ok(Self::Stream),
            _ => Err(format!(
                "unknown pace scope '{s}'; use array (one pair of limits for the whole rebuild, as MD on one device) or stream (each rebuild stream its own, as one md device per S2-RAID subRAID)"
            )),
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Array => "array",
            Self::Stream => "stream",
        }
    }
    /// The bytes the limits are measured against: the whole rebuild's, or
    /// the stream's own.
    pub fn bytes(self, array_bytes: u64, stream_bytes: u64) -> u64 {
        match self {
            Self::Array => array_bytes,
            Self::Stream => stream_bytes,
        }
    }
}

/// How long to wait before the next batch, given `bytes_done` since the start,
/// `elapsed_ns` since the start, and whether user I/O ran recently.
pub fn wait_ns(limits: PaceLimits, bytes_done: u64, elapsed_ns: u64, user_io_recent: bool) -> u64 {
    // When the average rate reaches `bps` after these bytes.
    let due = |bps: u64| (bytes_done as u128 * NS / bps.max(1) as u128) as u64;
    if limits.max_bps > 0 && due(limits.max_bps) > elapsed_ns {
        return due(limits.max_bps) - elapsed_ns;
    }
    if user_io_recent && due(limits.min_bps) > elapsed_ns {
        return (due(limits.min_bps) - elapsed_ns).min(USER_WAIT_NS_MAX);
    }
    0
}

/// Bytes per member one batch may carry under `max_bps`: a quarter second of
/// work, so a slow limit is met smoothly rather than in 8 MiB bursts (the
/// engine and the simulator size their batches by it).
pub fn batch_bytes_max(max_bps: u64) -> u64 {
    if max_bps == 0 {
        u64::MAX
    } else {
        (max_bps / 4).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: PaceLimits = PaceLimits {
        min_bps: 1_000_000,
        max_bps: 10_000_000,
    };

    #[test]
    fn the_command_line_defaults_are_mds() {
        assert_eq!(
            crate::units::parse_size(MD_DEFAULT_MIN_ARG),
            Ok(MD_DEFAULT.min_bps)
        );
        assert_eq!(
            crate::units::parse_size(MD_DEFAULT_MAX_ARG),
            Ok(MD_DEFAULT.max_bps)
        );
    }

    #[test]
    fn the_maximum_is_an_average_over_the_whole_run() {
        // 10 MB done after 0.5 s at a 10 MB/s limit: wait 0.5 s, no cap.
        assert_eq!(wait_ns(L, 10_000_000, 500_000_000, false), 500_000_000);
        assert_eq!(wait_ns(L, 10_000_000, 1_000_000_000, false), 0);
        // 100 KB/s is honoured too: 1 MB done after 1 s waits 9 s.
        let slow = PaceLimits {
            min_bps: 0,
            max_bps: 100_000,
        };
        assert_eq!(
            wait_ns(slow, 1_000_000, 1_000_000_000, false),
            9_000_000_000
        );
    }

    #[test]
    fn users_slow_it_to_the_minimum_in_steps() {
        // 2 MB after 1 s with users busy: the minimum rate (1 MB/s) is due at
        // 2 s; the wait is capped so the rule is looked at again.
        assert_eq!(wait_ns(L, 2_000_000, 1_000_000_000, true), USER_WAIT_NS_MAX);
        assert_eq!(wait_ns(L, 2_000_000, 1_800_000_000, true), 200_000_000);
        // Below the minimum: never waits.
        assert_eq!(wait_ns(L, 500_000, 1_000_000_000, true), 0);
        // Unlimited and idle: never waits.
        let open = PaceLimits {
            min_bps: 0,
            max_bps: 0,
        };
        assert_eq!(wait_ns(open, u64::MAX / 4, 1, false), 0);
    }

    #[test]
    fn per_stream_limits_count_each_streams_bytes() {
        // Three streams, 2 MB each after 1 s at a 2 MB/s maximum: held to the
        // array's limits the rebuild has done 6 MB and waits 2 s; each stream
        // held to its own has done exactly its share and goes on.
        let l = PaceLimits {
            min_bps: 0,
            max_bps: 2_000_000,
        };
        let (array, stream) = (6_000_000, 2_000_000);
        let wait = |scope: PaceScope| wait_ns(l, scope.bytes(array, stream), 1_000_000_000, false);
        assert_eq!(wait(PaceScope::Array), 2_000_000_000);
        assert_eq!(wait(PaceScope::Stream), 0);
        assert_eq!(PaceScope::parse("stream"), Ok(PaceScope::Stream));
        assert!(PaceScope::parse("disk").unwrap_err().contains("array"));
    }

    #[test]
    fn batches_shrink_under_slow_limits() {
        assert_eq!(batch_bytes_max(2_000_000), 500_000);
        assert_eq!(batch_bytes_max(0), u64::MAX);
    }
}
