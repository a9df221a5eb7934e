//! Hot spares (mdadm's spares): devices of the array that hold no slot and
//! take a failed member's place by themselves — at once under `serve`, at
//! the next `rebuild` offline.
//!
//! Every superblock lists the spares (entries past the member table, state
//! 5: `docs/FORMAT.md`); a spare's own superblock names an index past the
//! member table. Adding one writes the spare's superblock first, then the
//! members' (one event): a crash between leaves a device that says it is a
//! spare while the array does not list it, which assembly leaves out with a
//! warning (`add` takes it again). Taking one is a single superblock update:
//! the attach of the slot and the spare's removal from the list together.

#[allow(unused_imports)]
use super::*;
use crate::annex::EventKind;
use crate::format::SpareRole;

/// A spare device waiting for a slot.
#[derive(Clone)]
pub(crate) struct SpareDev {
    pub member: Arc<dyn Member>,
    pub device: u64,
}

/// A spare, for `status`.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct SpareStatus {
    pub path: String,
    pub kind: crate::Word,
    pub size_bytes: u64,
    /// Slots it is large enough to take.
    pub fits_slots: Vec<usize>,
}

impl Array {
    /// Add `m` as a hot spare of this (healthy or not) array.
    pub fn add_spare(&self, m: Arc<dyn Member>, kind: MemberKind, force: bool) -> Result<()> {
        self.commit()?;
        if self.read_only {
            return Err(EngineError::Refused("the array is open read-only".into()));
        }
        if self.change_progress().is_some() {
            return Err(EngineError::Refused(
                "a grow or shrink is in progress: finish it first (hetraid grow MEMBERS...)".into(),
            ));
        }
        let sb = self.superblock();
        if sb.roles.len() + sb.spares.len() >= crate::format::MAX_MEMBERS {
            return Err(EngineError::Refused(format!(
                "the array has {} members and {} spares: {} devices at most",
                sb.roles.len(),
                sb.spares.len(),
                crate::format::MAX_MEMBERS
            )));
        }
        if self
            .spares
            .lock()
            .unwrap()
            .iter()
            .any(|s| s.member.name() == m.name())
        {
            return Err(EngineError::Refused(format!(
                "{} is a spare of this array already",
                m.name()
            )));
        }
        let fits: Vec<usize> = (0..sb.roles.len())
            .filter(|&i| self.holds_chunks(i) && m.len() >= self.slot_need(&sb, i))
            .collect();
        if fits.is_empty() {
            let need = (0..sb.roles.len())
                .map(|i| self.slot_need(&sb, i))
                .min()
                .unwrap_or(0);
            return Err(EngineError::Kind(
                hetraid_core::ErrorKind::TooSmall,
                format!(
                "spare {} is {} bytes: too small to take any slot of this array (the smallest needs {need})",
                m.name(),
                m.len()
            )));
        }
        self.check_replacement(m.as_ref(), &sb, force)?;
        let device = new_device_id();
        let mut next = sb.clone();
        next.spares.push(SpareRole {
            kind,
            size: m.len(),
            device,
        });
        next.events = sb.events + 1;
        // The spare's own superblock first (its metadata zone cleared: no
        // stale bitmap or annex of an earlier life).
        let mut own = next.clone();
        own.member = (next.roles.len() + next.spares.len() - 1) as u32;
        own.clean = true;
        let zero = AlignedBuf::zeroed((DATA_OFFSET - BITMAP_OFFSET) as usize);
        let mut b = AlignedBuf::zeroed(SB_SIZE);
        b.copy_from_slice(&own.encode());
        m.write_at(&zero, BITMAP_OFFSET)
            .and_then(|_| m.write_at(&b, 0))
            .and_then(|_| m.flush())
            .map_err(|e| EngineError::Io {
                member: m.name(),
                source: e,
            })?;
        {
            let mut g = self.sb.lock().unwrap();
            g.spares = next.spares.clone();
            g.events = next.events;
            self.persist(&mut g)?;
        }
        self.spares.lock().unwrap().push(SpareDev {
            member: m.clone(),
            device,
        });
        self.record(
            EventKind::SpareAdded,
            None,
            [m.len(), fits.len() as u64, 0],
            &super::events::absolute(&m.name()),
        );
        Ok(())
    }

    /// Take spare `name` (a path) off the array: the others forget it and
    /// its superblock is cleared (MD's --remove of a spare).
    pub fn remove_spare(&self, name: &str) -> Result<()> {
        let spare = {
            let g = self.spares.lock().unwrap();
            g.iter()
                .find(|s| {
                    s.member.name() == name
                        || super::events::absolute(&s.member.name())
                            == super::events::absolute(name)
                })
                .cloned()
        };
        let Some(spare) = spare else {
            return Err(EngineError::Refused(format!(
                "{name} is not a spare of this array (give it with the members)"
            )));
        };
        {
            let mut g = self.sb.lock().unwrap();
            g.spares.retain(|r| r.device != spare.device);
            g.events += 1;
            self.persist(&mut g)?;
        }
        self.spares
            .lock()
            .unwrap()
            .retain(|s| s.device != spare.device);
        let zero = AlignedBuf::zeroed(SB_SIZE);
        spare
            .member
            .write_at(&zero, 0)
            .and_then(|_| spare.member.flush())
            .map_err(|e| EngineError::Io {
                member: spare.member.name(),
                source: e,
            })?;
        self.record(
            EventKind::Removed,
            None,
            [0; 3],
            &super::events::absolute(&spare.member.name()),
        );
        Ok(())
    }

    /// Refuse a change of members while the array has spares: a spare's
    /// superblock names an index past the member table, which a grow
    /// would move.
    pub(crate) fn refuse_spares(given: &[Arc<dyn Member>]) -> Result<()> {
        // The freshest superblocks say whether spares wait: a member that
        // failed or left keeps the list of its day (a spare that has since
        // taken a slot is no spare).
        let sbs: Vec<Superblock> = given
            .iter()
            .filter_map(|m| read_sb(m.as_ref()).ok().and_then(|r| r.ok()))
            .collect();
        let newest = sbs.iter().map(|s| s.events).max().unwrap_or(0);
        for sb in sbs.iter().filter(|s| s.events + 1 >= newest) {
            {
                if !sb.spares.is_empty() || sb.member as usize >= sb.roles.len() {
                    return Err(EngineError::Refused(format!(
                        "the array has hot spares ({} listed): take them off first (hetraid remove MEMBERS... --member SPARE-PATH), change the members, then add them again",
                        sb.spares.len().max(1)
                    )));
                }
            }
        }
        Ok(())
    }

    /// The spares waiting, for status.
    pub fn spare_status(&self) -> Vec<SpareStatus> {
        let sb = self.superblock();
        self.spares
            .lock()
            .unwrap()
            .iter()
            .filter_map(|s| {
                let r = sb.spares.iter().find(|r| r.device == s.device)?;
                Some(SpareStatus {
                    path: s.member.name(),
                    kind: r.kind.as_str().into(),
                    size_bytes: r.size,
                    fits_slots: (0..sb.roles.len())
                        .filter(|&i| r.size >= self.slot_need(&sb, i))
                        .collect(),
                })
            })
            .collect()
    }

    /// Spares listed by the array but not given (their paths are unknown).
    pub fn spares_missing(&self) -> usize {
        let sb = self.superblock();
        let have = self.spares.lock().unwrap();
        sb.spares
            .iter()
            .filter(|r| !have.iter().any(|s| s.device == r.device))
            .count()
    }

    /// Slots that hold data and are failed, missing or removed: what a
    /// spare is for.
    pub fn slots_wanting(&self) -> Vec<usize> {
        let sb = self.superblock();
        (0..sb.roles.len())
            .filter(|&i| !sb.roles[i].state.is_in() && self.holds_chunks(i))
            .filter(|&i| {
                // A slot a RAIDX shrink emptied takes nothing.
                !sb.raidx_history.as_ref().is_some_and(|h| {
                    h.changes.iter().any(|c| matches!(c, hetraid_core::layout::raidx_history::Change::Remove { slot, .. } if *slot == i))
                })
            })
            .collect()
    }

    /// Put a spare into every slot that wants one, as far as spares go
    /// (the largest slots first, each the smallest spare that fits).
    /// Returns (slot, spare path) for each taken; the slots are then
    /// rebuilding and `rebuild` fills them.
    pub fn activate_spares(&self) -> Result<Vec<(usize, String)>> {
        let mut taken = Vec::new();
        let mut wanting = self.slots_wanting();
        let sb = self.superblock();
        wanting.sort_by_key(|&i| std::cmp::Reverse(self.slot_need(&sb, i)));
        for slot in wanting {
            let sb = self.superblock();
            let need = self.slot_need(&sb, slot);
            let pick = {
                let spares = self.spares.lock().unwrap();
                spares
                    .iter()
                    .filter(|s| s.member.len() >= need)
                    .min_by_key(|s| s.member.len())
                    .cloned()
            };
            let Some(spare) = pick else { continue };
            let device = spare.device;
            self.replace_editing(slot, spare.member.clone(), true, &|sb: &mut Superblock| {
                sb.spares.retain(|r| r.device != device)
            })?;
            self.spares.lock().unwrap().retain(|s| s.device != device);
            let path = super::events::absolute(&spare.member.name());
            self.record(EventKind::SpareActivated, Some(slot), [0; 3], &path);
            taken.push((slot, path));
        }
        Ok(taken)
    }

    /// Assembly: the given devices whose superblocks say they are spares
    /// (an index past the member table). Those the array lists are kept;
    /// the others are named in a warning and left alone.
    pub(crate) fn take_spares(&self, given: Vec<(Arc<dyn Member>, Superblock)>) {
        let sb = self.superblock();
        for (m, own) in given {
            let idx = own.member as usize - own.roles.len();
            let device = own.spares.get(idx).map_or(0, |r| r.device);
            if own.uuid == sb.uuid && sb.spares.iter().any(|r| r.device == device) {
                self.spares
                    .lock()
                    .unwrap()
                    .push(SpareDev { member: m, device });
            } else {
                self.warnings.lock().unwrap().push(format!(
                    "{} says it is a spare of this array, but the array does not list it (it was taken into a slot, or an add was cut short): left out; hetraid add makes it a spare again",
                    m.name()
                ));
            }
        }
    }
}
