//! Member failures: `hetraid fail`, I/O errors and read-error correction.
//!
//! As MD does: a write error fails the member (its copy of the data is now
//! wrong) when the array survives without it; a read error is corrected
//! (the data is reconstructed from the others and written back) and fails the
//! member only when the rewrite fails or its read errors pass
//! [`MAX_READ_ERRORS`]. An error that would take the array beyond its
//! redundancy fails the request, not the member: the last members holding the
//! data are never marked faulty by an I/O error, so a full disk or a cable
//! pulled for a moment cannot make an intact array unassemblable. A full
//! filesystem (ENOSPC, EDQUOT) is an error of that request only.

#[allow(unused_imports)]
use super::*;

/// Read errors a member may return before it is failed (MD's
/// max_read_errors; the core's).
pub const MAX_READ_ERRORS: u32 = hetraid_core::limits::MAX_READ_ERRORS;

/// Is `e` "no space left" (the member's backing store is full, not broken)?
pub(crate) fn is_no_space(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT))
}

impl Array {
    /// Let the failed device `name` of slot `i` go (a served array closes
    /// it, so it can be re-added): its slot stays failed, its path the last
    /// seen. The device's name when it was let go.
    pub fn detach_failed(&self, i: usize, name: &str) -> Option<String> {
        // Under the superblock's lock, and only that device: a spare put
        // in the slot meanwhile is never detached.
        let sb = self.sb.lock().unwrap();
        if sb.roles.get(i).map(|r| r.state) != Some(RoleState::Faulty) {
            return None;
        }
        let dev = self.member(i).filter(|d| d.name() == name)?;
        self.remember_path(i, dev.as_ref());
        self.restore_slot(i, None);
        drop(sb);
        Some(dev.name())
    }

    /// Mark member `i` faulty (`hetraid fail`): refused, with nothing changed,
    /// when the array would then lose data.
    pub fn fail(&self, i: usize) -> Result<()> {
        self.fail_with(i, false)
    }

    /// [`Array::fail`]; with `force`, even beyond the redundancy.
    pub fn fail_with(&self, i: usize, force: bool) -> Result<()> {
        self.transition(Transition::Fail { slot: i, force })?;
        self.member_out_of_log(i);
        self.record_log_copies(false)?;
        // HPDA: intents logged before the failure are on the members once
        // flushed; a checkpoint records that, so a crash now does not take
        // them for writes cut by the crash on a degraded RAID4.
        if self.hpda.is_some() {
            if let Some(log) = self.live_log() {
                log.checkpoint(&|| self.flush_members())?;
            }
        }
        let failed = self.out_members(true);
        if failed > self.layout.redundancy().tolerance() {
            self.warnings.lock().unwrap().push(format!(
                "{failed} members are out: data beyond the redundancy is lost"
            ));
        }
        Ok(())
    }

    /// A member that failed takes the log copy it holds (a log region on
    /// it) with it: the log goes on with the other copy.
    fn member_out_of_log(&self, i: usize) {
        let (Some(log), Some(rec)) = (&self.log, self.sb.lock().unwrap().log) else {
            return;
        };
        if let Some(r) = rec.region {
            if let Some(copy) = r.slots[..rec.copies as usize]
                .iter()
                .position(|&s| s as usize == i)
            {
                log.drop_copy(copy);
            }
        }
    }

    /// A write to member `i` failed. The member is failed when the array can do
    /// without it; returns whether it was (false: the request must fail).
    pub(crate) fn member_error(&self, i: usize, e: &std::io::Error) -> bool {
        self.write_errors[i].fetch_add(1, Ordering::Relaxed);
        self.fail_on_error(i, e)
    }

    /// Member `i` gave error `e` (a write, or reads it cannot go on with):
    /// failed when the array can do without it.
    fn fail_on_error(&self, i: usize, e: &std::io::Error) -> bool {
        let name = self.hot.slots[i].name();
        if is_no_space(e) {
            self.warnings.lock().unwrap().push(format!(
                "member {i} ({name}): {e}; the write failed, the member stays in the array (free space on its filesystem)"
            ));
            return false;
        }
        match self.transition(Transition::Fail {
            slot: i,
            force: false,
        }) {
            Ok(()) => {
                self.warnings
                    .lock()
                    .unwrap()
                    .push(format!("member {i} ({name}) failed: {e}"));
                self.member_out_of_log(i);
                true
            }
            Err(_) if !self.state().members[i].eq(&MemberState::Failed) => {
                self.warnings.lock().unwrap().push(format!(
                    "member {i} ({name}): {e}; it is not failed because the array cannot do without it: the request failed"
                ));
                false
            }
            Err(_) => true,
        }
    }

    /// A read from member `i` failed: count it. Returns true when the member
    /// is to be failed (too many errors); the caller then reconstructs the data
    /// and writes it back (`repair_member`).
    pub(crate) fn read_error(&self, i: usize, e: &std::io::Error) -> bool {
        let name = self.hot.slots[i].name();
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            // A read past the end: the member was truncated. Rewriting would
            // extend it with a gap of zeros; it is failed instead.
            self.warnings.lock().unwrap().push(format!(
                "member {i} ({name}) is shorter than the array needs (truncated?): {e}"
            ));
            return self.fail_on_error(i, e);
        }
        if e.kind() == std::io::ErrorKind::InvalidData {
            // A block that fails its checksum: a bad sector, corrected alike.
            if self.checksum_errors[i].fetch_add(1, Ordering::Relaxed) == 0 {
                // The first of a member is an event at once; the count at close.
                self.record_member(crate::annex::EventKind::ChecksumErrors, i, [1, 0, 0]);
            }
        }
        let n = self.read_errors[i].fetch_add(1, Ordering::Relaxed) + 1;
        if n > MAX_READ_ERRORS {
            self.warnings.lock().unwrap().push(format!(
                "member {i} ({name}): {n} read errors (more than {MAX_READ_ERRORS}): {e}"
            ));
            return self.fail_on_error(i, &std::io::Error::other("too many read errors"));
        }
        self.warnings.lock().unwrap().push(format!(
            "member {i} ({name}): read error {n} of at most {MAX_READ_ERRORS}: {e}; the data is reconstructed and written back"
        ));
        false
    }
}
