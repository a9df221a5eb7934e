//! The controller's background wake-ups: HPDA's reclaimer and the idle
//! reclaim of a write-back log, both by the core's rules.

use super::*;

impl Runner<'_> {
    /// Every RAID4 member (HPDA: the SSDs and HDD-1) in sync.
    pub(super) fn raid4_whole(&self) -> bool {
        self.s
            .layout
            .stripe(0)
            .all()
            .all(|c| self.state.members[c.member] == MemberState::InSync)
    }

    /// HPDA: ask the reclaimer's policy once the monitor would call the
    /// array idle (a request arriving meanwhile moves the moment on).
    pub(super) fn hpda_wake_later(&mut self, now: Ns) {
        let at = now + hetraid_core::hpda::MonitorConfig::default().idle_ns;
        if self.hpda_wake_at.is_none_or(|t| t < at) {
            if self.hpda_wake_at.is_none() {
                self.k.at(at, Ev::HpdaWake);
            }
            self.hpda_wake_at = Some(at);
        }
    }

    /// HPDA: a reclaim batch ended; ask the policy again now.
    pub(super) fn hpda_wake_now(&mut self) {
        let now = self.k.now();
        if self.hpda_wake_at.is_none() {
            self.k.at(now, Ev::HpdaWake);
        }
        self.hpda_wake_at = Some(self.hpda_wake_at.map_or(now, |t| t.min(now)));
    }

    /// HPDA: the reclaimer's policy (core `hpda::reclaim_step`), one batch
    /// at a time as the engine's background reclaimer runs it. Nothing
    /// after the last request (the run is over).
    pub(super) fn hpda_wake(&mut self) -> Result<(), String> {
        let now = self.k.now();
        let Some(at) = self.hpda_wake_at else {
            return Ok(());
        };
        if at > now {
            // Moved on by a later request: wait until then.
            self.k.at(at, Ev::HpdaWake);
            return Ok(());
        }
        self.hpda_wake_at = None;
        let more_to_come = match &self.source {
            Source::Closed(_) => self.inflight > 0,
            Source::Replay(r) => r.next < r.records.len() || self.inflight > 0,
        };
        let whole = self.raid4_whole();
        let (Some(m), Some(log)) = (self.hpda.as_ref(), self.log.as_mut()) else {
            return Ok(());
        };
        if !more_to_come || log.reclaiming() {
            return Ok(());
        }
        let copies = self.s.log.as_ref().map_or(2, |l| l.on_members.len());
        let lost = whole && log.devs.len() < copies;
        if let Some(target) = hetraid_core::hpda::reclaim_step(m.idle(now), &log.fill(lost)) {
            log.start_reclaim_batches(target, 1);
            self.log_pump()?;
        }
        Ok(())
    }

    /// A user request arrived: the idle reclaimer of a write-back log looks
    /// again once the array has been quiet for the core's idle time.
    pub(super) fn log_idle_later(&mut self, now: Ns) {
        self.last_user_arrival = now;
        if self.hpda.is_some() || !self.log.as_ref().is_some_and(|l| l.write_back) {
            return;
        }
        let at = now + hetraid_core::journal::RECLAIM_IDLE_NS_DEFAULT;
        if self.log_idle_at.is_none() {
            self.k.at(at, Ev::LogIdle);
        }
        self.log_idle_at = Some(at);
    }

    /// The idle reclaimer, as the engine's (`Array::run_idle_reclaimer`):
    /// quiet for the idle time with writes in the log, it writes them all to
    /// the members. Nothing after the last request (the run is over).
    pub(super) fn log_idle(&mut self) -> Result<(), String> {
        let now = self.k.now();
        let Some(at) = self.log_idle_at else {
            return Ok(());
        };
        if at > now {
            // Moved on by a later request: wait until then.
            self.k.at(at, Ev::LogIdle);
            return Ok(());
        }
        self.log_idle_at = None;
        let more_to_come = match &self.source {
            Source::Closed(_) => self.inflight > 0,
            Source::Replay(r) => r.next < r.records.len() || self.inflight > 0,
        };
        let quiet = now.saturating_sub(self.last_user_arrival);
        let Some(log) = self.log.as_mut() else {
            return Ok(());
        };
        let pending = log.fill(false).holds_data;
        if more_to_come
            && !log.reclaiming()
            && hetraid_core::journal::idle_reclaim_due(
                quiet,
                hetraid_core::journal::RECLAIM_IDLE_NS_DEFAULT,
                pending,
            )
        {
            log.start_reclaim(0);
            self.log_idle_reclaims += 1;
            self.log_pump()?;
        }
        Ok(())
    }
}
