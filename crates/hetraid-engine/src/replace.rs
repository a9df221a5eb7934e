//! Putting a device into a slot: replace, re-add (only the regions the
//! bitmap marks are rebuilt), remove, and the checks a replacement passes
//! before anything is written.

use crate::array::Array;
use crate::error::{EngineError, Result};
use crate::format::{RoleState, Superblock, SB_SIZE};
use crate::member::{AlignedBuf, Member};
use hetraid_core::ErrorKind;
use std::sync::Arc;

impl Array {
    /// Put `new` in slot `i` (faulty, removed or missing) as a device to
    /// rebuild, on an assembled or a running (served) array alike; I/O goes on
    /// meanwhile and [`Array::rebuild`] fills it. `new` must be empty or a member
    /// that left this array; anything else (another array's member, a file with
    /// data) is refused unless `force`.
    /// A slot whose chunks were rebuilt into distributed spare space
    /// (declustered) is refused: its data lives in the spare homes and goes
    /// back with [`Array::copy_back`] (`hetraid rebalance`).
    pub fn replace(&self, i: usize, new: Arc<dyn Member>, force: bool) -> Result<()> {
        let sb = self.superblock();
        if sb
            .relocations
            .iter()
            .any(|r| r.len == 0 && r.from_member as usize == i)
        {
            let last = self.layout().restored().map(|(m, _)| m);
            return Err(EngineError::Refused(format!(
                "slot {i} ({}) was rebuilt into distributed spare space; its data goes back onto a new device with hetraid rebalance MEMBERS... --with NEW{}",
                self.path_of(i).unwrap_or_default(),
                match last {
                    Some(m) if m != i => format!(
                        " (member {m}, rebuilt into spare space after it, goes back first)"
                    ),
                    _ => String::new(),
                }
            )));
        }
        self.replace_editing(i, new, force, &|_| {})
    }

    /// Bytes a device needs to hold slot `i`: the data offset, its data
    /// area, a log region on it, a RAIDX bundle table.
    pub(crate) fn slot_need(&self, sb: &Superblock, i: usize) -> u64 {
        sb.data_offset
            + match sb.log.and_then(|l| l.region) {
                Some(r)
                    if r.slots[..sb.log.map_or(0, |l| l.copies as usize)]
                        .iter()
                        .any(|&s| s as usize == i) =>
                {
                    crate::array::region_start(self.layout(), i, sb.roles[i].data_size) + r.bytes
                }
                _ => sb.roles[i].data_size,
            }
            + if sb.bundle_table {
                crate::bundles::table_bytes(sb.roles[i].data_size / sb.chunk_bytes)
            } else {
                0
            }
    }

    /// [`Array::replace`], with `edit` applied to the superblock the attach
    /// writes (a spare taken off the spare list in the same update).
    pub(crate) fn replace_editing(
        &self,
        i: usize,
        new: Arc<dyn Member>,
        force: bool,
        edit: &dyn Fn(&mut Superblock),
    ) -> Result<()> {
        // The new device's superblock is written on its own, built on the
        // table: what assembly decided is on the members first.
        self.commit()?;
        let sb = self.superblock();
        self.check_slot_takes(&sb, i, new.as_ref())?;
        self.check_replacement(new.as_ref(), &sb, force)?;
        let readd = self.is_readd(new.as_ref(), &sb, i);
        let mark = move |s: &mut Superblock| s.roles[i].resync = readd;
        let edit = &|s: &mut Superblock| {
            edit(s);
            mark(s);
        };
        let raw = new.clone();
        let new = crate::array::with_checksums(new, &sb);
        // The new device's bitmap area is zeroed first; then one superblock
        // update (the state machine's Attach) reaches it and every live member.
        let zero = AlignedBuf::zeroed(
            (crate::format::DATA_OFFSET - crate::format::BITMAP_OFFSET) as usize,
        );
        new.write_at(&zero, crate::format::BITMAP_OFFSET)
            .and_then(|_| new.flush())
            .map_err(|e| EngineError::Io {
                member: new.name(),
                source: e,
            })?;
        // Then the new device gets the new table on its own, before the
        // others: a crash between the two leaves it the freshest (events e+1)
        // and the others one behind — all accepted, the array rebuilding.
        let device = crate::array::new_device_id();
        let survives = |out: &[usize]| hetraid_core::layout::survives(self.layout(), out);
        let next = sb
            .table()
            .apply(
                hetraid_core::membership::Transition::Attach { slot: i, device },
                &survives,
            )
            .map_err(|f| EngineError::Kind(f.kind, f.message))?;
        let mut first = sb.clone();
        edit(&mut first);
        first.set_table(&next);
        first.member = i as u32;
        first.clean = false;
        let mut b = AlignedBuf::zeroed(SB_SIZE);
        b.copy_from_slice(&first.encode());
        new.write_at(&b, 0)
            .and_then(|_| new.flush())
            .map_err(|e| EngineError::Io {
                member: new.name(),
                source: e,
            })?;
        // RAIDX: the new device gets the slot's bundle table first.
        if sb.bundle_table {
            let size = sb.roles[i].data_size;
            let places = self.layout_places()?;
            let entries = crate::bundles::entries_of(&places, i, size / sb.chunk_bytes);
            crate::bundles::write_table(
                raw.as_ref(),
                sb.data_offset + size,
                sb.uuid,
                i as u32,
                &entries,
            )
            .map_err(|e| EngineError::Io {
                member: raw.name(),
                source: e,
            })?;
        }
        let old = self.member(i);
        self.set_slot(i, new);
        let r = self.transitions(
            &[hetraid_core::membership::Transition::Attach { slot: i, device }],
            edit,
        );
        if r.is_err() {
            self.put_back(i, old);
            return r;
        }
        self.remember_path(i, raw.as_ref());
        if readd {
            // Its bitmap copy is the array's again (it was zeroed above).
            let bm = self.bitmap.lock().unwrap();
            let pages: Vec<u64> = (0..bm.bits.len() as u64).step_by(4096).collect();
            self.write_bitmap_pages(&bm, &pages)?;
            let regions = bm.dirty().len() as u64;
            drop(bm);
            self.record_member(crate::annex::EventKind::ReAdded, i, [regions, 0, 0]);
        } else {
            self.record_member(crate::annex::EventKind::Attached, i, [0; 3]);
        }
        self.take_log_region_copy(&sb, i, raw)?;
        Ok(())
    }

    /// Slot `i` can take `new`: it exists, is out (failed, removed or
    /// missing), was not emptied by a shrink, and `new` is large enough.
    pub(crate) fn check_slot_takes(
        &self,
        sb: &Superblock,
        i: usize,
        new: &dyn Member,
    ) -> Result<()> {
        if i >= sb.roles.len() {
            return Err(EngineError::Kind(
                ErrorKind::NotFound,
                format!(
                    "member {i} does not exist; members are 0 to {}",
                    sb.roles.len() - 1
                ),
            ));
        }
        if sb.roles[i].state.is_in() {
            return Err(EngineError::Refused(format!(
                "member {i}{} is {}; fail it first (hetraid fail ... --member {i})",
                self.member(i)
                    .map(|m| format!(" ({})", m.name()))
                    .unwrap_or_default(),
                sb.roles[i].state.as_str()
            )));
        }
        // RAIDX: a slot a shrink emptied holds nothing any more; a device
        // joins the array as a new slot (grow --add), where chunks move to it.
        let emptied = sb
            .raidx_history
            .as_ref()
            .is_some_and(|h| h.changes.iter().any(|c| matches!(c, hetraid_core::layout::raidx_history::Change::Remove { slot, .. } if *slot == i)));
        if emptied {
            return Err(EngineError::Refused(format!(
                "slot {i} was emptied by a shrink: its chunks live on the other members now; add {} with hetraid grow MEMBERS... --add {} instead",
                new.name(),
                new.name()
            )));
        }
        let need = self.slot_need(sb, i);
        if new.len() < need {
            return Err(EngineError::Kind(
                ErrorKind::TooSmall,
                format!(
                    "replacement {} is {} bytes; slot {i} needs at least {need}",
                    new.name(),
                    new.len()
                ),
            ));
        }
        Ok(())
    }

    /// A log region on slot `i`: the new device `raw` takes the log's copy,
    /// with its live records, at once.
    fn take_log_region_copy(&self, sb: &Superblock, i: usize, raw: Arc<dyn Member>) -> Result<()> {
        if let Some((copy, region)) = sb.log.and_then(|l| {
            let r = l.region?;
            r.slots[..l.copies as usize]
                .iter()
                .position(|&s| s as usize == i)
                .map(|c| (c, r))
        }) {
            if let Some(log) = &self.log {
                log.drop_copy(copy);
                let dev: Arc<dyn Member> = Arc::new(crate::member::RegionMember::new(
                    raw,
                    sb.data_offset
                        + crate::array::region_start(self.layout(), i, sb.roles[i].data_size),
                    region.bytes,
                ));
                // HPDA, HDD-2 replaced (it holds no chunk): the log is
                // emptied onto the RAID4 first ([Mao 2010]), so the new mirror
                // starts from an empty log.
                if self.hpda_status().is_some() && !self.holds_chunks(i) {
                    self.reclaim()?;
                }
                self.replace_log_copy(copy, dev, true)?;
            }
        }
        Ok(())
    }

    /// Is `new` the device that left slot `i` intact, with the array's
    /// bitmap kept ever since (mdadm --re-add)? Then only the regions the
    /// bitmap marks need rebuilding. Its superblock must be this array's,
    /// name slot `i` and the device id the slot still records, and the
    /// array must have kept its layout (no grow, restripe or relocation
    /// since): anything else is rebuilt whole.
    pub(crate) fn is_readd(&self, new: &dyn Member, sb: &Superblock, i: usize) -> bool {
        let Ok(crate::identity::Identity::Member(theirs)) = crate::identity::Identity::of(new)
        else {
            return false;
        };
        let id = sb.roles[i].device;
        theirs.uuid == sb.uuid
            && theirs.member as usize == i
            && theirs.roles.len() == sb.roles.len()
            && id != 0
            && theirs.roles[i].device == id
            // It was in sync when it left (its own superblock, last written
            // while it was in the array, says active): a device that left
            // in the middle of its own rebuild is not intact.
            && theirs.roles[i].state == RoleState::Active
            && !sb.roles[i].state.is_in()
            && theirs.events < sb.events
            // Every region written since it left is still marked: bits were
            // last cleared in a generation it saw (a copy put back from
            // before is resynced whole).
            && theirs.generation >= sb.generation_cleared
            && theirs.layout == sb.layout
            && theirs.relocations == sb.relocations
            && theirs.raidx_history == sb.raidx_history
            && theirs.reshape.is_none()
            && sb.reshape.is_none()
            && theirs.data_offset == sb.data_offset
            && theirs.chunk_bytes == sb.chunk_bytes
            && theirs.bitmap_stripes == sb.bitmap_stripes
            && theirs.checksums == sb.checksums
            && theirs.roles[i].data_size == sb.roles[i].data_size
            && sb.log.is_none()
            && self.layout().redundancy() != hetraid_core::Redundancy::None
    }

    /// Refuse to overwrite anything but an empty device or a member that left
    /// this array (MD wants --zero-superblock first; `force` is ours).
    pub(crate) fn check_replacement(
        &self,
        new: &dyn Member,
        sb: &Superblock,
        force: bool,
    ) -> Result<()> {
        for j in 0..self.slot_count() {
            if self.member(j).is_some_and(|m| m.name() == new.name()) && sb.roles[j].state.is_in() {
                return Err(EngineError::Kind(
                    ErrorKind::WouldLoseData,
                    format!("{} is already member {j} of this array", new.name()),
                ));
            }
        }
        if force {
            return Ok(());
        }
        use crate::identity::Identity;
        let id = Identity::of(new).map_err(|e| EngineError::Io {
            member: new.name(),
            source: e,
        })?;
        match id {
            Identity::Member(theirs) if theirs.uuid == sb.uuid => {
                let own = theirs.member as usize;
                // A hot spare's superblock names an index past the table.
                let d = match theirs.roles.get(own) {
                    Some(r) => r.device,
                    None => {
                        let d = theirs
                            .spares
                            .get(own - theirs.roles.len())
                            .map_or(0, |r| r.device);
                        if d != 0 && sb.spares.iter().any(|r| r.device == d) {
                            return Err(EngineError::Refused(format!(
                                "{} is a hot spare of this array: hetraid rebuild puts it into a failed slot, or take it off first (hetraid remove ... --member {})",
                                new.name(),
                                new.name()
                            )));
                        }
                        d
                    }
                };
                if let Some(j) = (0..sb.roles.len())
                    .find(|&j| sb.roles[j].state.is_in() && sb.roles[j].device == d && d != 0)
                {
                    return Err(EngineError::Kind(
                        ErrorKind::WouldLoseData,
                        format!(
                            "{} is member {j} of this array and in use; give another device",
                            new.name()
                        ),
                    ));
                }
                Ok(())
            }
            Identity::Blank => Ok(()),
            other => Err(EngineError::Kind(
                ErrorKind::Foreign,
                format!(
                    "{} {}; it is not overwritten without --force",
                    new.name(),
                    other.describe()
                ),
            )),
        }
    }

    /// Undo `set_slot` after a refused attach.
    pub(crate) fn put_back(&self, i: usize, old: Option<Arc<dyn Member>>) {
        self.restore_slot(i, old);
    }

    /// Mark member `i` removed (MD's --remove): a faulty or missing member is
    /// detached; its slot stays empty until `replace` or `add` fills it.
    pub fn remove(&self, i: usize) -> Result<()> {
        self.transition(hetraid_core::membership::Transition::Remove { slot: i })?;
        self.restore_slot(i, None);
        Ok(())
    }
}
