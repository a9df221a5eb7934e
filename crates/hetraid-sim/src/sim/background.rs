//! The controller's background reclaimers: HPDA's and the idle reclaim of
//! a write-back log, by the core's procedure (`control::reclaimer`).

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

    /// More user requests to come (or in flight): the reclaimers look only
    /// while the load runs (after it, the run is over).
    fn load_goes_on(&self) -> bool {
        match &self.source {
            Source::Closed(_) => self.inflight > 0,
            Source::Replay(r) => r.more() || self.inflight > 0,
        }
    }

    /// The reclaimers' look (core `control::reclaimer`), every `LOOK_NS`
    /// while the load runs, as the engine's reclaimer thread looks: HPDA's
    /// policy batch by batch, or a write-back log's idle rule.
    pub(super) fn reclaim_look(&mut self) -> Result<(), String> {
        use hetraid_core::control::reclaimer::{HpdaLook, LOOK_NS};
        if !self.load_goes_on() {
            return Ok(());
        }
        let now = self.k.now();
        self.k.at(now + LOOK_NS, Ev::ReclaimLook);
        let activity = std::mem::take(&mut self.user_seen);
        if self.hpda.is_some() {
            if self.hpda_look.is_none() {
                self.hpda_look = Some(HpdaLook::default());
            }
            return self.hpda_step();
        }
        let Some(log) = self.log.as_mut() else {
            return Ok(());
        };
        if !log.write_back || log.reclaiming() {
            return Ok(());
        }
        let pending = log.fill(false).holds_data;
        if self.wb_idle.look(now, activity, pending) {
            log.start_reclaim(0);
            self.log_idle_reclaims += 1;
            self.log_pump()?;
        }
        Ok(())
    }

    /// HPDA: the look's next batch, if the policy says so (asked again when
    /// the batch ends); the look ends when it says wait.
    pub(super) fn hpda_step(&mut self) -> Result<(), String> {
        let now = self.k.now();
        let whole = self.raid4_whole();
        let copies = self.s.log.as_ref().map_or(2, |l| l.on_members.len());
        let (Some(m), Some(log), Some(look)) = (
            self.hpda.as_ref(),
            self.log.as_mut(),
            self.hpda_look.as_mut(),
        ) else {
            return Ok(());
        };
        if log.reclaiming() {
            return Ok(());
        }
        let lost = whole && log.devs.len() < copies;
        match look.next(m.idle(now), &log.fill(lost)) {
            Some(target) => {
                log.start_reclaim_batches(target, 1);
                self.log_pump()
            }
            None => {
                self.hpda_look = None;
                Ok(())
            }
        }
    }
}
