//! The array's name, last known member paths and events (the annex,
//! `crate::annex`): kept on every live member, logged through `tracing` as
//! they happen (`hetraid serve` prints them; `hetraid monitor` and
//! `hetraid events` read them back from the members).

#[allow(unused_imports)]
use super::*;
use crate::annex::{now_ms, Annex, Event, EventKind, ANNEX_AT, ANNEX_BYTES, BITMAP_ROOM};
use serde::Serialize;

/// How a member is named in the annex: its absolute path when it has one
/// (so `events` and `status` run from elsewhere still find it).
pub fn absolute(name: &str) -> String {
    std::fs::canonicalize(name)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| name.to_string())
}

/// The annex each of `members` holds for array `uuid` (damaged or foreign
/// copies skipped), the freshest first.
pub(crate) fn read_annex(members: &[Arc<dyn Member>], uuid: [u8; 16]) -> Option<Annex> {
    let copies = members.iter().filter_map(|m| {
        if m.len() < DATA_OFFSET {
            return None;
        }
        let mut b = AlignedBuf::zeroed(ANNEX_BYTES as usize);
        m.read_at(&mut b, ANNEX_AT).ok()?;
        Annex::decode(&b).filter(|a| a.uuid == uuid)
    });
    Annex::freshest(copies)
}

impl Array {
    /// Does this array have room for an annex (a bitmap that leaves it)?
    pub(crate) fn annex_room(sb: &Superblock, stripes: u64) -> bool {
        stripes
            .div_ceil(sb.bitmap_stripes.max(1) as u64)
            .div_ceil(8)
            <= BITMAP_ROOM
    }

    /// The annex as assembly finds it (or a new one for arrays written
    /// before it), with the present members' paths.
    pub(crate) fn load_annex(&self, given: &[Arc<dyn Member>]) {
        let sb = self.superblock();
        if !Self::annex_room(&sb, self.layout.stripe_count()) {
            return;
        }
        let mut a = read_annex(given, sb.uuid).unwrap_or_else(|| Annex::new(sb.uuid, "", vec![]));
        let mut changed = false;
        for i in 0..self.hot.slots.len() {
            if let Some(m) = self.member(i) {
                let p = absolute(&m.name());
                if a.paths.get(i) != Some(&crate::annex::tail(&p, crate::annex::PATH_MAX)) {
                    a.set_path(i, &p);
                    changed = true;
                }
            }
        }
        *self.errors_before.lock().unwrap() = a.errors.clone();
        *self.annex.lock().unwrap() = Some(a);
        if changed {
            self.write_annex();
        }
    }

    /// Write the annex to every live member (after the superblock, which it
    /// never contradicts). A member that cannot take it keeps its old copy:
    /// the annex decides nothing, so the error is a warning, not a failure.
    pub(crate) fn write_annex(&self) {
        if self.read_only {
            return;
        }
        // Nothing before the assembly's decisions are written (`commit`).
        if self.uncommitted.load(Ordering::Acquire) {
            self.annex_due.store(true, Ordering::Release);
            return;
        }
        let sb = self.superblock();
        let Some(mut a) = self.annex.lock().unwrap().clone() else {
            return;
        };
        a.sb_events = sb.events;
        a.errors = (0..self.hot.slots.len())
            .map(|i| self.error_counts(i))
            .collect();
        while a
            .errors
            .last()
            .is_some_and(crate::annex::ErrorCounts::is_zero)
        {
            a.errors.pop();
        }
        for (i, slot) in self.hot.slots.iter().enumerate() {
            let Some(m) = slot.get() else { continue };
            if !sb.roles[i].state.is_in() {
                continue;
            }
            let bytes = a.encode(i as u32);
            let mut b = AlignedBuf::zeroed(bytes.len());
            b.copy_from_slice(&bytes);
            if let Err(e) = m.write_at(&b, ANNEX_AT).and_then(|_| m.flush()) {
                self.warnings.lock().unwrap().push(format!(
                    "member {i} ({}): its event log could not be written: {e}",
                    m.name()
                ));
            }
        }
        if let Some(x) = self.annex.lock().unwrap().as_mut() {
            x.sb_events = sb.events;
        }
    }

    /// Record an event: kept in the annex of every live member and logged.
    pub(crate) fn record(
        &self,
        kind: EventKind,
        slot: Option<usize>,
        values: [u64; 3],
        detail: &str,
    ) {
        let uuid = self.superblock().uuid;
        let e = {
            let mut g = self.annex.lock().unwrap();
            let a = g.get_or_insert_with(|| Annex::new(uuid, "", vec![]));
            a.push(now_ms(), kind, slot, values, detail)
        };
        log_event(&self.superblock().uuid_string(), &self.name(), &e);
        self.write_annex();
        crate::changes::changed();
    }

    /// Record an event about member `slot`, named by its path (the device
    /// in the slot, or its last known path).
    pub(crate) fn record_member(&self, kind: EventKind, slot: usize, values: [u64; 3]) {
        let path = self.path_of(slot).unwrap_or_default();
        self.record(kind, Some(slot), values, &path);
    }

    /// Slot `slot`'s device now is `m`: its path becomes the last known one.
    pub(crate) fn remember_path(&self, slot: usize, m: &dyn Member) {
        if let Some(a) = self.annex.lock().unwrap().as_mut() {
            a.set_path(slot, &absolute(&m.name()));
        }
    }

    /// The path of the device in `slot`, or where it was last seen.
    pub fn path_of(&self, slot: usize) -> Option<String> {
        if let Some(m) = self.member(slot) {
            return Some(absolute(&m.name()));
        }
        self.last_path(slot)
    }

    /// Where the device of `slot` was last seen (the annex).
    pub fn last_path(&self, slot: usize) -> Option<String> {
        self.annex
            .lock()
            .unwrap()
            .as_ref()
            .and_then(|a| a.paths.get(slot).filter(|p| !p.is_empty()).cloned())
    }

    /// The array's name ("" when it has none).
    pub fn name(&self) -> String {
        self.annex
            .lock()
            .unwrap()
            .as_ref()
            .map_or_else(String::new, |a| a.name.clone())
    }

    /// Name the array (`create --name`); kept on every member.
    pub fn set_name(&self, name: &str) -> Result<()> {
        if name.len() > crate::annex::NAME_MAX || name.chars().any(|c| c.is_control()) {
            return Err(EngineError::Refused(format!(
                "the name {name:?} is not usable: give at most {} bytes without control characters",
                crate::annex::NAME_MAX
            )));
        }
        let sb = self.superblock();
        if !Self::annex_room(&sb, self.layout.stripe_count()) {
            return Err(EngineError::Refused(
                "this array's bitmap fills the metadata zone and leaves no room for a name or events".into(),
            ));
        }
        self.annex
            .lock()
            .unwrap()
            .get_or_insert_with(|| Annex::new(sb.uuid, "", vec![]))
            .name = name.to_string();
        self.write_annex();
        Ok(())
    }

    /// The events kept (oldest first).
    pub fn events(&self) -> Vec<Event> {
        self.annex
            .lock()
            .unwrap()
            .as_ref()
            .map_or_else(Vec::new, |a| a.events.iter().cloned().collect())
    }

    /// Member `slot`'s errors since the last `clear`: those kept on the
    /// members before this assembly, and this run's.
    pub fn error_counts(&self, slot: usize) -> crate::annex::ErrorCounts {
        let before = self
            .errors_before
            .lock()
            .unwrap()
            .get(slot)
            .copied()
            .unwrap_or_default();
        before.plus(crate::annex::ErrorCounts {
            read: self.read_errors[slot].load(Ordering::Relaxed),
            write: self.write_errors[slot].load(Ordering::Relaxed),
            checksum: self.checksum_errors[slot].load(Ordering::Relaxed),
        })
    }

    /// `hetraid clear`: the error counts of `slot` (every member when None)
    /// set back to zero, kept so on the members, and an event saying what
    /// was cleared. Returns the counts cleared, added up.
    pub fn clear_errors(&self, slot: Option<usize>) -> Result<crate::annex::ErrorCounts> {
        let n = self.hot.slots.len();
        if let Some(s) = slot.filter(|&s| s >= n) {
            return Err(EngineError::Refused(format!(
                "member {s} is not a slot of this array (slots 0 to {})",
                n - 1
            )));
        }
        if self.read_only {
            return Err(EngineError::Refused(
                "the array is assembled read-only: counts cannot be cleared".into(),
            ));
        }
        let sb = self.superblock();
        if !Self::annex_room(&sb, self.layout.stripe_count()) {
            return Err(EngineError::Refused(
                "this array's bitmap fills the metadata zone and leaves no room for error counts"
                    .into(),
            ));
        }
        let slots: Vec<usize> = match slot {
            Some(s) => vec![s],
            None => (0..n).collect(),
        };
        let mut cleared = crate::annex::ErrorCounts::default();
        for &i in &slots {
            cleared = cleared.plus(self.error_counts(i));
            if let Some(b) = self.errors_before.lock().unwrap().get_mut(i) {
                *b = Default::default();
            }
            self.read_errors[i].store(0, Ordering::Relaxed);
            self.write_errors[i].store(0, Ordering::Relaxed);
            self.checksum_errors[i].store(0, Ordering::Relaxed);
        }
        let values = [
            cleared.read as u64,
            cleared.write as u64,
            cleared.checksum as u64,
        ];
        match slot {
            Some(s) => self.record_member(EventKind::Cleared, s, values),
            None => self.record(EventKind::Cleared, None, values, ""),
        }
        Ok(cleared)
    }

    /// The last checksum-error count recorded for `slot` in this run.
    pub(crate) fn checksum_errors_recorded(&self, slot: usize) -> u32 {
        self.events()
            .iter()
            .rev()
            .find(|e| e.kind == EventKind::ChecksumErrors && e.slot == Some(slot as u16))
            .map_or(0, |e| e.values[0] as u32)
    }

    /// Events for the transitions just written: members failed or removed.
    pub(crate) fn record_transitions(&self, ts: &[Transition]) {
        for &t in ts {
            match t {
                Transition::Fail { slot, .. } => {
                    self.record_member(EventKind::Failed, slot, [0; 3])
                }
                Transition::Remove { slot } => self.record_member(EventKind::Removed, slot, [0; 3]),
                _ => {}
            }
        }
    }
}

/// Log an event through `tracing` (a warning for alarms), with its fields
/// for `--log-format json`.
pub fn log_event(uuid: &str, name: &str, e: &Event) {
    let text = e.text();
    let slot = e.slot.map_or(-1, i64::from);
    if e.kind.is_alarm() {
        tracing::warn!(target: "hetraid::event", array = uuid, name, event = e.kind.as_str(), seq = e.seq, slot, path = e.detail.as_str(), "{text}");
    } else {
        tracing::info!(target: "hetraid::event", array = uuid, name, event = e.kind.as_str(), seq = e.seq, slot, path = e.detail.as_str(), "{text}");
    }
}

/// A long operation running on the array (rebuild, scrub): where it is,
/// how fast it goes, when it ends. `status` shows it, served or not.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct OpProgress {
    /// "rebuild" or "scrub".
    pub op: crate::Word,
    pub stripes_done: u64,
    pub stripes_total: u64,
    pub percent: f64,
    pub bytes_done: u64,
    pub elapsed_s: f64,
    /// Since the operation started.
    pub rate_bytes_per_s: f64,
    /// At that rate; None before anything is done.
    pub eta_s: Option<f64>,
}

/// Seconds an operation runs before its rate and time left are told: the
/// first batch goes at once and the pacer waits after it, so a rate over
/// less than this says how fast one batch went, not the operation.
pub const RATE_SETTLE_S: f64 = 1.0;

impl OpProgress {
    pub fn of(op: &'static str, p: &crate::rebuild::RebuildProgress, start_stripe: u64) -> Self {
        let rate = p.bytes_done as f64 / p.elapsed_s.max(1e-6);
        let done_now = p.stripes_done.saturating_sub(start_stripe);
        let left = p.stripes_total.saturating_sub(p.stripes_done);
        Self {
            op: op.into(),
            stripes_done: p.stripes_done,
            stripes_total: p.stripes_total,
            percent: p.stripes_done as f64 * 100.0 / p.stripes_total.max(1) as f64,
            bytes_done: p.bytes_done,
            elapsed_s: p.elapsed_s,
            rate_bytes_per_s: rate,
            eta_s: (done_now > 0 && p.elapsed_s >= RATE_SETTLE_S)
                .then(|| p.elapsed_s / done_now as f64 * left as f64),
        }
    }

    /// "29.0 % (stripe 144 of 496), 52.1 MB/s, 3 s left" (the one wording:
    /// the server's log and `status` both say it).
    pub fn text(&self) -> String {
        if self.elapsed_s < RATE_SETTLE_S {
            return format!(
                "{:.1} % (stripe {} of {}), starting",
                self.percent, self.stripes_done, self.stripes_total
            );
        }
        format!(
            "{:.1} % (stripe {} of {}), {:.1} MB/s, {}",
            self.percent,
            self.stripes_done,
            self.stripes_total,
            self.rate_bytes_per_s / 1e6,
            match self.eta_s {
                Some(s) if s < 3600.0 => format!("{:.0} s left", s.ceil()),
                Some(s) => format!("{:.1} h left", s / 3600.0),
                None => "time left unknown yet".into(),
            }
        )
    }
}

impl Array {
    /// The long operation running now, if any.
    pub fn progress(&self) -> Option<OpProgress> {
        self.progress.lock().unwrap().clone()
    }

    /// Note where `op` is; every tenth of the way is logged.
    pub(crate) fn note_progress(
        &self,
        op: &'static str,
        p: &crate::rebuild::RebuildProgress,
        start_stripe: u64,
    ) {
        let now = OpProgress::of(op, p, start_stripe);
        let mut g = self.progress.lock().unwrap();
        let tenth = |x: &OpProgress| (x.percent / 10.0) as u64;
        let log = g
            .as_ref()
            .is_none_or(|old| tenth(old) != tenth(&now) || old.op != op);
        *g = Some(now.clone());
        drop(g);
        if log {
            tracing::info!(target: "hetraid::progress", op, percent = now.percent, stripes_done = now.stripes_done, stripes_total = now.stripes_total, rate_bytes_per_s = now.rate_bytes_per_s, eta_s = now.eta_s.unwrap_or(-1.0), "{op}: {}", now.text());
        }
    }

    pub(crate) fn end_progress(&self) {
        *self.progress.lock().unwrap() = None;
    }

    /// Clears the progress when dropped (the operation ended, or failed).
    pub(crate) fn progress_guard(&self) -> ProgressGuard<'_> {
        ProgressGuard(self)
    }
}

pub(crate) struct ProgressGuard<'a>(&'a Array);

impl Drop for ProgressGuard<'_> {
    fn drop(&mut self) {
        self.0.end_progress();
    }
}
