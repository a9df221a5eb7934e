//! Slow-member sit-out on a served array: every
//! [`SitOutRule::interval_ns`] the members' read counters (the iostat ones
//! a served array keeps: operations, and the time they took) go to core's
//! `sitout::SitOut` — the simulator runs the same rule — and the members it
//! sits out are left out of reads (the planner reads their chunks from
//! copies or rebuilds them from the rest of the stripe) while they keep
//! taking writes. Each change is an event (`sat_out`, `sat_in`) and shows
//! in `status`.

use super::*;
use hetraid_core::sitout::{ReadCounters, SatOut, SitOut, SitOutChange, SitOutRule};

/// The sit-out state of an array: the rule's, and when it started looking.
pub(crate) struct SitOutState {
    rule: SitOut,
    since: std::time::Instant,
}

impl Array {
    /// Members reads leave out now.
    #[inline]
    pub(crate) fn sat_out(&self) -> SatOut {
        if !self.hot.sat_out_any.load(Ordering::Relaxed) {
            return SatOut::NONE;
        }
        let [lo, hi] = &self.sat_out_mask;
        SatOut(lo.load(Ordering::Relaxed) as u128 | (hi.load(Ordering::Relaxed) as u128) << 64)
    }

    fn set_sat_out(&self, s: SatOut) {
        let [lo, hi] = &self.sat_out_mask;
        lo.store(s.0 as u64, Ordering::Relaxed);
        hi.store((s.0 >> 64) as u64, Ordering::Relaxed);
        self.hot.sat_out_any.store(!s.is_empty(), Ordering::Relaxed);
    }

    /// How often [`Array::sit_out_look`] wants to run.
    pub fn sit_out_interval(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(SitOutRule::default().interval_ns)
    }

    /// One look of the sit-out rule at the members' reads (counted while
    /// the array measures its I/O: a served array; nothing otherwise).
    /// Records an event per change and returns the changes.
    pub fn sit_out_look(&self) -> Vec<SitOutChange> {
        let tolerance = self.layout.redundancy().tolerance();
        if self.measuring_since.get().is_none() || tolerance == 0 || self.read_only {
            return Vec::new();
        }
        let counters: Vec<ReadCounters> = self
            .hot
            .slots
            .iter()
            .map(|s| {
                let io = s.io_stats();
                ReadCounters {
                    read_ops: io.read_ops,
                    read_ns: io.read_ns,
                }
            })
            .collect();
        let state = self.state();
        let (changes, sat_out, rule) = {
            let mut g = self.sit_out.lock().unwrap();
            let st = g.get_or_insert_with(|| SitOutState {
                rule: SitOut::new(
                    SitOutRule::default(),
                    (0..counters.len())
                        .map(|i| {
                            let kind = self.kinds.get(i).copied().unwrap_or(MemberKind::Hdd);
                            let model = self.service.get(i).copied();
                            hetraid_core::sitout::expected_read_ns(
                                &model.unwrap_or_else(|| kind.default_service()),
                            )
                        })
                        .collect(),
                    tolerance,
                ),
                since: std::time::Instant::now(),
            });
            let now = st.since.elapsed().as_nanos() as u64;
            let changes = st.rule.look(now, &counters, &state);
            (changes, st.rule.sat_out(), st.rule.rule())
        };
        self.set_sat_out(sat_out);
        for c in &changes {
            match *c {
                SitOutChange::Out {
                    member,
                    latency_ns,
                    reference_ns,
                    ..
                } => self.record_member(
                    crate::annex::EventKind::SatOut,
                    member,
                    [latency_ns, reference_ns, rule.hold_ns / 1_000_000_000],
                ),
                SitOutChange::In { member } => {
                    self.record_member(crate::annex::EventKind::SatIn, member, [0; 3])
                }
            }
        }
        changes
    }

    /// Nothing to look at until users do I/O again: no member read since the
    /// last call and none sat out. When so, the looker is woken by the
    /// next user request (`changes::io_fd` becomes readable): an idle
    /// server's sit-out thread sleeps without a timer.
    pub fn sit_out_idle(&self) -> bool {
        let reads: u64 = self.hot.slots.iter().map(|s| s.io_stats().read_ops).sum();
        let before = self.sit_out_reads_seen.swap(reads, Ordering::Relaxed);
        let idle = reads == before && self.sat_out().is_empty();
        if idle {
            crate::changes::drain_io();
            self.hot.sit_out_waits.store(true, Ordering::Relaxed);
        }
        idle
    }

    /// User I/O came while the looker waits: wake it (once).
    #[cold]
    #[inline(never)]
    pub(crate) fn wake_sit_out(&self) {
        if self.hot.sit_out_waits.swap(false, Ordering::Relaxed) {
            crate::changes::io_resumed();
        }
    }

    /// [`Array::sit_out_of`] for slots `0..n` (what `status` shows).
    pub(crate) fn sit_out_states(&self, n: usize) -> Vec<(Option<u64>, Option<u64>)> {
        (0..n).map(|i| self.sit_out_of(i)).collect()
    }

    /// Member `m` sits out reads: for how many more ms, and its mean read
    /// latency in µs when it was last measured.
    pub fn sit_out_of(&self, m: usize) -> (Option<u64>, Option<u64>) {
        let g = self.sit_out.lock().unwrap();
        let Some(st) = g.as_ref() else {
            return (None, None);
        };
        let now = st.since.elapsed().as_nanos() as u64;
        (
            st.rule
                .until_ns(m)
                .map(|u| u.saturating_sub(now) / 1_000_000),
            st.rule.recent_ns(m).map(|n| n / 1000),
        )
    }
}
