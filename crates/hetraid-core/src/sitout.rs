//! Slow-member sit-out (OpenZFS 2.3's "slow child sit-out" for raidz): a
//! member whose recent reads take far longer than a reconstruction from the
//! others would is left out of reads for a while — its chunks are read
//! from the copies or rebuilt from the rest of the stripe — while it keeps
//! taking writes; it comes back by itself when the hold ends, and is sat
//! out again at once if it is still slow.
//!
//! The rule is one procedure both executors run: every
//! [`SitOutRule::interval_ns`] they hand [`SitOut::look`] each member's
//! cumulative read counters (operations, and the time they took added up —
//! the engine's iostat counters; the simulator's integral of reads in
//! flight, which is the same sum), and apply the members it returns to
//! their planner ([`crate::plan::Planner::sat_out`]). Nothing here reads a
//! clock.
//!
//! Each member is measured over a window: once it holds `min_reads` reads
//! (or one read and `window_ns_max`, for a member that reads few), the mean
//! latency of its reads there is its measure, and a new window starts. A
//! member is an outlier in a window when that mean is at least `floor_ns`
//! and `ratio` times the reference: the slowest of the other live members
//! (their last measure, or what their kind should deliver when they read
//! too little) — a reconstruction waits for the slowest column it reads,
//! so this is "reconstructing is cheaper", and the mean includes the time
//! reads queued, so a queue far deeper than the others' counts too. After
//! `strikes` outlying windows in a row it is sat out for `hold_ns`; a
//! member that comes back and is an outlier in its first window goes out
//! again without waiting for the strikes. At most as many members
//! sit out as the layout tolerates failures beyond those already failed,
//! worst first; a failure ends the sit-outs that would leave a stripe
//! unreadable without them.

use crate::plan::{ArrayState, MemberState};

/// What a member's kind should deliver for a read, from its service model:
/// a random read of `EXPECTED_READ_BYTES` (the reference for a member that
/// read too little in an interval to measure; both executors use it).
pub fn expected_read_ns(model: &crate::ServiceModel) -> u64 {
    model.service_ns(EXPECTED_READ_BYTES)
}

/// The read size [`expected_read_ns`] prices (a typical chunk-sized read).
pub const EXPECTED_READ_BYTES: u64 = 64 << 10;

/// When a member is sat out, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct SitOutRule {
    /// How often the members are looked at.
    pub interval_ns: u64,
    /// Reads a member's window must hold for its mean to count...
    pub min_reads: u64,
    /// ...or, for a member that reads few, one read and this long.
    pub window_ns_max: u64,
    /// Mean latency, as a multiple of the reference, that is an outlier.
    pub ratio: u64,
    /// Latencies below this never are (memory-speed members jitter by
    /// multiples without it mattering).
    pub floor_ns: u64,
    /// Outlying intervals in a row before a member sits out.
    pub strikes: u32,
    /// How long it sits out.
    pub hold_ns: u64,
}

impl Default for SitOutRule {
    fn default() -> Self {
        Self {
            interval_ns: 100_000_000,
            min_reads: 8,
            window_ns_max: 1_000_000_000,
            ratio: 4,
            floor_ns: 250_000,
            strikes: 3,
            hold_ns: 60_000_000_000,
        }
    }
}

/// A member's reads so far (cumulative; counters that go back — a member
/// replaced — start a new interval).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReadCounters {
    pub read_ops: u64,
    /// Their latencies added up.
    pub read_ns: u64,
}

/// What a look changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum SitOutChange {
    /// `member` reads no more until `until_ns`: its mean read latency
    /// against the reference it was measured against.
    Out {
        member: usize,
        latency_ns: u64,
        reference_ns: u64,
        until_ns: u64,
    },
    /// `member` reads again (its hold ended, or a failure needs it).
    In { member: usize },
}

/// The members sat out now (bit `m` for member `m`; at most
/// [`crate::layout::MAX_MEMBERS`] members).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SatOut(pub u128);

impl SatOut {
    pub const NONE: SatOut = SatOut(0);

    #[inline]
    pub fn contains(self, member: usize) -> bool {
        member < 128 && self.0 >> member & 1 == 1
    }

    #[inline]
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub fn members(self) -> impl Iterator<Item = usize> {
        (0..128).filter(move |&m| self.contains(m))
    }
}

/// One member's standing.
#[derive(Debug, Clone, Copy, Default)]
struct Standing {
    strikes: u32,
    /// Sat out until then.
    until_ns: Option<u64>,
    /// Came back from a sit-out and has not read a full interval since.
    returned: bool,
    /// Its mean read latency in the last window it read enough in.
    recent_ns: Option<u64>,
    /// Its current window: the counters and time it began at.
    since: ReadCounters,
    since_ns: u64,
}

/// The sit-out state of one array.
#[derive(Debug, Clone)]
pub struct SitOut {
    rule: SitOutRule,
    /// What each member's kind should deliver for a read (its reference
    /// when it read too little in an interval).
    expected_ns: Vec<u64>,
    /// Failures any stripe survives.
    tolerance: usize,
    last_at: Option<u64>,
    members: Vec<Standing>,
}

impl SitOut {
    /// For an array whose members should read in `expected_ns` each and
    /// whose layout survives `tolerance` failures (no sit-out at 0).
    pub fn new(rule: SitOutRule, expected_ns: Vec<u64>, tolerance: usize) -> Self {
        let n = expected_ns.len();
        Self {
            rule,
            expected_ns,
            tolerance,
            last_at: None,
            members: vec![Standing::default(); n],
        }
    }

    pub fn rule(&self) -> SitOutRule {
        self.rule
    }

    /// Is a look due at `now_ns`?
    pub fn due(&self, now_ns: u64) -> bool {
        self.last_at
            .is_none_or(|t| now_ns >= t.saturating_add(self.rule.interval_ns))
    }

    /// The members sat out.
    pub fn sat_out(&self) -> SatOut {
        let mut s = SatOut::NONE;
        for (m, st) in self.members.iter().enumerate().take(128) {
            if st.until_ns.is_some() {
                s.0 |= 1 << m;
            }
        }
        s
    }

    /// Until when member `m` sits out, if it does.
    pub fn until_ns(&self, m: usize) -> Option<u64> {
        self.members.get(m).and_then(|s| s.until_ns)
    }

    /// Member `m`'s mean read latency in the last interval it read enough in.
    pub fn recent_ns(&self, m: usize) -> Option<u64> {
        self.members.get(m).and_then(|s| s.recent_ns)
    }

    /// Look at the members at `now_ns` given their cumulative `counters`
    /// (by member) and the array's `state`; returns what changed.
    pub fn look(
        &mut self,
        now_ns: u64,
        counters: &[ReadCounters],
        state: &ArrayState,
    ) -> Vec<SitOutChange> {
        let n = self.members.len();
        assert!(counters.len() >= n, "read counters for every member");
        let first = self.last_at.is_none();
        self.last_at = Some(now_ns);
        // Each member's mean over its window, once the window holds
        // `min_reads` reads (or one read and `window_ns_max`: a slow member
        // reads few), then a new window.
        let mut means: Vec<Option<u64>> = vec![None; n];
        for (m, st) in self.members.iter_mut().enumerate() {
            let (a, b) = (st.since, counters[m]);
            if first || b.read_ops < a.read_ops || b.read_ns < a.read_ns {
                (st.since, st.since_ns) = (b, now_ns);
                continue;
            }
            let ops = b.read_ops - a.read_ops;
            let long = now_ns.saturating_sub(st.since_ns) >= self.rule.window_ns_max;
            if ops >= self.rule.min_reads || (ops >= 1 && long) {
                means[m] = Some((b.read_ns - a.read_ns) / ops);
                (st.since, st.since_ns) = (b, now_ns);
            } else if long && ops == 0 {
                st.since_ns = now_ns;
            }
        }
        let mut changes = Vec::new();
        // Holds that ended.
        for (m, st) in self.members.iter_mut().enumerate() {
            if st.until_ns.is_some_and(|u| now_ns >= u) {
                *st = Standing {
                    returned: true,
                    since: counters[m],
                    since_ns: now_ns,
                    ..Standing::default()
                };
                changes.push(SitOutChange::In { member: m });
            }
        }
        let live = |m: usize| state.members.get(m) == Some(&MemberState::InSync);
        let failed = (0..state.members.len()).filter(|&m| !live(m)).count();
        let budget = self.tolerance.saturating_sub(failed);
        // A failure takes the room sit-outs had: the latest first back.
        let mut out: Vec<usize> = (0..n)
            .filter(|&m| self.members[m].until_ns.is_some())
            .collect();
        while out.len() > budget {
            let m = out.pop().expect("more than the budget");
            self.members[m].until_ns = None;
            changes.push(SitOutChange::In { member: m });
        }
        // Outliers, worst first.
        let refs: Vec<u64> = (0..n)
            .map(|m| {
                (0..n)
                    .filter(|&j| j != m && live(j) && self.members[j].until_ns.is_none())
                    .map(|j| {
                        means[j]
                            .or(self.members[j].recent_ns)
                            .unwrap_or(self.expected_ns[j])
                    })
                    .max()
                    .unwrap_or(u64::MAX)
            })
            .collect();
        let mut candidates: Vec<(u64, u64, usize)> = Vec::new();
        for m in 0..n {
            if self.members[m].until_ns.is_some() {
                continue;
            }
            let st = &mut self.members[m];
            if !live(m) {
                st.strikes = 0;
                continue;
            }
            // Not measured this look: its standing waits for its window.
            let Some(lat) = means[m] else {
                continue;
            };
            st.recent_ns = Some(lat);
            let r = refs[m];
            if lat >= self.rule.floor_ns && lat / self.rule.ratio.max(1) >= r.max(1) {
                st.strikes += 1;
                let needed = if st.returned { 1 } else { self.rule.strikes };
                if st.strikes >= needed {
                    candidates.push((lat / r.max(1), lat, m));
                }
            } else {
                st.strikes = 0;
                st.returned = false;
            }
        }
        candidates.sort_unstable_by(|a, b| b.cmp(a));
        for (_, lat, m) in candidates {
            if out.len() >= budget {
                break;
            }
            let until = now_ns.saturating_add(self.rule.hold_ns);
            let reference_ns = refs[m];
            let st = &mut self.members[m];
            st.until_ns = Some(until);
            st.strikes = 0;
            st.returned = false;
            out.push(m);
            changes.push(SitOutChange::Out {
                member: m,
                latency_ns: lat,
                reference_ns,
                until_ns: until,
            });
        }
        changes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// Counters after `ops` more reads of `lat` each on every member.
    fn advance(c: &mut [ReadCounters], lat: &[u64], ops: u64) {
        for (c, &l) in c.iter_mut().zip(lat).filter(|x| *x.1 > 0) {
            c.read_ops += ops;
            c.read_ns += ops * l;
        }
    }

    fn run(
        s: &mut SitOut,
        c: &mut [ReadCounters],
        lat: &[u64],
        state: &ArrayState,
        from: u64,
        looks: u64,
    ) -> Vec<(u64, SitOutChange)> {
        let mut out = Vec::new();
        for i in 0..looks {
            let t = from + i * s.rule().interval_ns;
            advance(c, lat, 50);
            out.extend(s.look(t, c, state).into_iter().map(|x| (t, x)));
        }
        out
    }

    #[test]
    fn a_slow_member_sits_out_after_its_strikes_and_comes_back_after_the_hold() {
        let rule = SitOutRule::default();
        let mut s = SitOut::new(rule, vec![8 * MS; 5], 1);
        let mut c = vec![ReadCounters::default(); 5];
        let state = ArrayState::healthy(5);
        let lat = [10 * MS, 10 * MS, 100 * MS, 10 * MS, 10 * MS];
        let ch = run(&mut s, &mut c, &lat, &state, 0, 3);
        assert!(
            ch.is_empty(),
            "first look sets the baseline, then 2 strikes: {ch:?}"
        );
        let ch = run(&mut s, &mut c, &lat, &state, 3 * rule.interval_ns, 1);
        assert_eq!(ch.len(), 1, "{ch:?}");
        assert!(
            matches!(ch[0].1, SitOutChange::Out { member: 2, latency_ns, reference_ns, .. }
            if latency_ns == 100 * MS && reference_ns == 10 * MS)
        );
        assert_eq!(s.sat_out(), SatOut(1 << 2));
        // While out it reads nothing (its mean does not count), the others go on.
        let quiet = [10 * MS, 10 * MS, 0, 10 * MS, 10 * MS];
        let t = 4 * rule.interval_ns;
        let mut looks = 0;
        let mut back = None;
        while back.is_none() {
            advance(&mut c, &quiet, 50);
            let now = t + looks * rule.interval_ns;
            if let Some(x) = s.look(now, &c, &state).into_iter().next() {
                back = Some((now, x));
            }
            looks += 1;
            assert!(looks < 1000, "the hold ends");
        }
        let (now, x) = back.unwrap();
        assert_eq!(x, SitOutChange::In { member: 2 });
        assert!(now >= 3 * rule.interval_ns + rule.hold_ns);
        // Still slow: out again after one interval, not three.
        let ch = run(&mut s, &mut c, &lat, &state, now + rule.interval_ns, 1);
        assert!(
            matches!(ch[..], [(_, SitOutChange::Out { member: 2, .. })]),
            "{ch:?}"
        );
    }

    #[test]
    fn equal_members_with_jitter_never_sit_out() {
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut s = SitOut::new(SitOutRule::default(), vec![8 * MS; 6], 2);
        let mut c = vec![ReadCounters::default(); 6];
        let state = ArrayState::healthy(6);
        for i in 0..10_000u64 {
            let lat: Vec<u64> = (0..6)
                .map(|_| {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    5 * MS + rng % (10 * MS)
                })
                .collect();
            let ch = run(&mut s, &mut c, &lat, &state, i * 100 * MS, 1);
            assert!(ch.is_empty(), "look {i}: {ch:?}");
        }
    }

    #[test]
    fn fast_members_under_the_floor_never_sit_out() {
        let mut s = SitOut::new(SitOutRule::default(), vec![2_000; 4], 1);
        let mut c = vec![ReadCounters::default(); 4];
        let state = ArrayState::healthy(4);
        let ch = run(
            &mut s,
            &mut c,
            &[2_000, 2_000, 200_000, 2_000],
            &state,
            0,
            20,
        );
        assert!(ch.is_empty(), "{ch:?}");
    }

    #[test]
    fn no_more_sit_out_than_the_layout_tolerates_and_a_failure_ends_one() {
        let rule = SitOutRule::default();
        // RAID5: two slow members, only the worse sits out.
        let mut s = SitOut::new(rule, vec![8 * MS; 5], 1);
        let mut c = vec![ReadCounters::default(); 5];
        let mut state = ArrayState::healthy(5);
        // Member 2 against member 1 (the slowest other), then member 1
        // against the rest once 2 is out: RAID6 takes both, RAID5 one.
        let lat = [10 * MS, 50 * MS, 250 * MS, 10 * MS, 10 * MS];
        let mut s6 = SitOut::new(rule, vec![8 * MS; 5], 2);
        let mut c6 = vec![ReadCounters::default(); 5];
        run(&mut s6, &mut c6, &lat, &state, 0, 8);
        assert_eq!(s6.sat_out(), SatOut(0b110));
        let ch = run(&mut s, &mut c, &lat, &state, 0, 8);
        let outs: Vec<usize> = ch
            .iter()
            .filter_map(|x| match x.1 {
                SitOutChange::Out { member, .. } => Some(member),
                _ => None,
            })
            .collect();
        assert_eq!(outs, vec![2]);
        // Member 0 fails: the sit-out ends (member 2 is needed to read).
        state.members[0] = MemberState::Failed;
        advance(&mut c, &lat, 50);
        let ch = s.look(4 * rule.interval_ns, &c, &state);
        assert_eq!(ch, vec![SitOutChange::In { member: 2 }]);
        assert!(s.sat_out().is_empty());
        // And none starts while degraded.
        let ch = run(&mut s, &mut c, &lat, &state, 5 * rule.interval_ns, 10);
        assert!(ch.is_empty(), "{ch:?}");
        // No redundancy: never.
        let mut s = SitOut::new(rule, vec![8 * MS; 5], 0);
        let ch = run(&mut s, &mut c, &lat, &ArrayState::healthy(5), 0, 10);
        assert!(ch.is_empty(), "{ch:?}");
    }

    #[test]
    fn a_disk_among_ssds_sits_out_when_its_kind_is_the_reason() {
        // RAIDX-like: one disk at 8 ms among SSDs at 0.1 ms, the SSDs
        // reading too little to measure: the reference is their kind's.
        let rule = SitOutRule::default();
        let mut s = SitOut::new(rule, vec![100_000, 100_000, 100_000, 8 * MS], 1);
        let mut c = vec![ReadCounters::default(); 4];
        let state = ArrayState::healthy(4);
        s.look(0, &c, &state);
        let mut got = Vec::new();
        for i in 1..=3 {
            c[3].read_ops += 20;
            c[3].read_ns += 20 * 8 * MS;
            got.extend(s.look(i * rule.interval_ns, &c, &state));
        }
        assert!(
            matches!(
                got[..],
                [SitOutChange::Out {
                    member: 3,
                    reference_ns: 100_000,
                    ..
                }]
            ),
            "{got:?}"
        );
    }
}
