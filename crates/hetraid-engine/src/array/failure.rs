//! Member failures: `hetraid fail` and I/O errors.

#[allow(unused_imports)]
use super::*;

impl Array {
    /// Mark member `i` faulty (as `hetraid fail` and as an I/O error do).
    pub fn fail(&self, i: usize) -> Result<()> {
        let mut sb = self.sb.lock().unwrap();
        if i >= sb.roles.len() {
            return Err(EngineError::Refused(format!(
                "member {i} does not exist; members are 0 to {}",
                sb.roles.len() - 1
            )));
        }
        if sb.roles[i].state == RoleState::Faulty {
            return Ok(());
        }
        sb.roles[i].state = RoleState::Faulty;
        {
            let mut st = self.state.write().unwrap();
            st.members[i] = MemberState::Failed;
            self.refresh_in_sync(&st);
        }
        self.write_superblocks(&mut sb)?;
        drop(sb);
        let failed = self.out_members(true);
        if failed > self.layout.redundancy().tolerance() {
            self.warnings.lock().unwrap().push(format!(
                "{failed} members are out: data beyond the redundancy is lost"
            ));
        }
        Ok(())
    }

    /// Record a member I/O error: the member becomes faulty.
    pub(crate) fn member_error(&self, i: usize, e: &std::io::Error) {
        let name = self.slots[i].name();
        self.warnings
            .lock()
            .unwrap()
            .push(format!("member {i} ({name}) failed: {e}"));
        let _ = self.fail(i);
    }
}
