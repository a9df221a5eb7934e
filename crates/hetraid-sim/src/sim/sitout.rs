//! Slow-member sit-out in simulated time: each member's reads counted as
//! the engine's iostat counts them (operations, and their latencies added
//! up — here the integral of reads in flight, the same sum), handed to
//! core's `sitout::SitOut` when a look is due (at a read's planning: the
//! members only matter to reads), and its members set on the planner.

use super::*;
use hetraid_core::sitout::{ReadCounters, SatOut, SitOut, SitOutChange};

/// One member's reads so far.
#[derive(Debug, Clone, Copy, Default)]
struct ReadClock {
    in_flight: u32,
    /// Reads in flight integrated over time: their latencies added up.
    ns: u64,
    ops: u64,
    mark: Ns,
}

impl ReadClock {
    fn advance(&mut self, now: Ns) {
        self.ns += self.in_flight as u64 * now.saturating_sub(self.mark);
        self.mark = now;
    }
}

pub(super) struct SitOutRun {
    rule: SitOut,
    clocks: Vec<ReadClock>,
    pub(super) sat_out: SatOut,
    pub(super) events: Vec<crate::report::SitOutEvent>,
}

impl SitOutRun {
    /// For a run on `devices` (the members first) of `members` members; None
    /// when the run turned it off or the layout has no redundancy.
    pub(super) fn new(s: &Setup, devices: &[Box<dyn Device>], members: usize) -> Option<Self> {
        let tolerance = s.layout.redundancy().tolerance();
        if s.cfg.sit_out == Some(false) || tolerance == 0 {
            return None;
        }
        let expected = devices[..members]
            .iter()
            .map(|d| hetraid_core::sitout::expected_read_ns(&d.service_model()))
            .collect();
        Some(Self {
            rule: SitOut::new(Default::default(), expected, tolerance),
            clocks: vec![ReadClock::default(); members],
            sat_out: SatOut::NONE,
            events: Vec::new(),
        })
    }
}

impl Runner<'_> {
    /// A read was handed to device `d`.
    pub(super) fn read_started(&mut self, d: usize, now: Ns) {
        if let Some(c) = self.sit_out.as_mut().and_then(|r| r.clocks.get_mut(d)) {
            c.advance(now);
            c.in_flight += 1;
        }
    }

    /// A read on device `d` finished.
    pub(super) fn read_finished(&mut self, d: usize, now: Ns) {
        if let Some(c) = self.sit_out.as_mut().and_then(|r| r.clocks.get_mut(d)) {
            c.advance(now);
            c.in_flight -= 1;
            c.ops += 1;
        }
    }

    /// Look at the members if a look is due, and set the planner's
    /// sat-out members.
    pub(super) fn sit_out_look(&mut self) {
        let now = self.k.now();
        let Some(run) = self.sit_out.as_mut() else {
            return;
        };
        if run.rule.due(now) {
            let counters: Vec<ReadCounters> = run
                .clocks
                .iter_mut()
                .map(|c| {
                    c.advance(now);
                    ReadCounters {
                        read_ops: c.ops,
                        read_ns: c.ns,
                    }
                })
                .collect();
            let secs = |ns: Ns| ns as f64 / NS_PER_S as f64;
            for change in run.rule.look(now, &counters, &self.state) {
                match change {
                    SitOutChange::Out {
                        member,
                        latency_ns,
                        reference_ns,
                        ..
                    } => run.events.push(crate::report::SitOutEvent {
                        member,
                        out_at_s: secs(now),
                        back_at_s: None,
                        latency_ms: latency_ns as f64 / 1e6,
                        reference_ms: reference_ns as f64 / 1e6,
                    }),
                    SitOutChange::In { member } => {
                        if let Some(e) = run
                            .events
                            .iter_mut()
                            .rev()
                            .find(|e| e.member == member && e.back_at_s.is_none())
                        {
                            e.back_at_s = Some(secs(now));
                        }
                    }
                }
            }
            run.sat_out = run.rule.sat_out();
        }
        self.planner.sat_out = run.sat_out;
    }

    pub(super) fn sit_out_report(&self) -> Option<crate::report::SitOutReport> {
        let run = self.sit_out.as_ref()?;
        let slowed = self.s.slow_reads.iter().any(|&f| f > 1.0);
        (slowed || !run.events.is_empty()).then(|| crate::report::SitOutReport {
            rule: run.rule.rule(),
            events: run.events.clone(),
        })
    }
}
