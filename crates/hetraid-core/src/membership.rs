//! The member-state machine: what each slot of an array is doing, every change
//! the engine may make to it, and which members an assembly accepts.
//!
//! The engine never edits a member table by hand. It asks [`MemberTable::apply`]
//! for the table after a [`Transition`], writes that table to the members in the
//! order `docs/ARCHITECTURE.md` gives, and only then acts on it; at start-up it
//! asks [`assemble`] which of the given members may be used. Both are pure, so a
//! property test can drive random histories against a plain model
//! (`tests/membership.rs`).
//!
//! Two ideas carry the safety rules:
//! - **Device ids.** Every time a device enters a slot (create, replace, add,
//!   re-add) it gets a fresh random id, stored in its slot record. A rebuild,
//!   a checkpoint or an assembly that names a slot also names the device it
//!   expects there, so a member failed or replaced meanwhile is never mistaken
//!   for the one that was being rebuilt, and a copy or an old occupant of a slot
//!   is told apart from the current one.
//! - **Events.** Each transition bumps the event counter by one and is written to
//!   every live member before the next begins, so a crash leaves live members at
//!   most one event apart: members within one event of the freshest are accepted
//!   (as MD does). Clean/dirty changes do not bump it at all.

use crate::error::{ErrorKind, Failure};

/// What a slot of the array is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotState {
    /// In sync: every stripe on it is valid.
    Active,
    /// A device being rebuilt: stripes below `checkpoint` are valid on it.
    Rebuilding { checkpoint: u64 },
    /// Failed (by `hetraid fail` or by I/O errors): its data is not used.
    Faulty,
    /// Failed and detached (`hetraid remove`), or retired after its chunks
    /// moved into spare space: the slot stays empty until a device is added.
    Removed,
    /// Absent when the array was started degraded: the survivors say so, so a
    /// device coming back later is known to have missed writes.
    Missing,
}

impl SlotState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Rebuilding { .. } => "rebuilding",
            Self::Faulty => "faulty",
            Self::Removed => "removed",
            Self::Missing => "missing",
        }
    }

    /// Does a device in this state belong to the running array (it gets the
    /// superblock updates and, in stripes it holds valid, the writes)?
    pub fn is_in(self) -> bool {
        matches!(self, Self::Active | Self::Rebuilding { .. })
    }
}

/// One slot: its state and the id of the device that holds (or held) it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotRecord {
    pub state: SlotState,
    /// Random id given to the device when it entered the slot; 0 = unknown
    /// (arrays written before ids existed): matches any device.
    pub device: u64,
}

/// The member table every superblock carries, with its event counter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberTable {
    pub events: u64,
    pub slots: Vec<SlotRecord>,
}

/// A change to the member table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// Mark a member faulty. Without `force`, refused when the array would not
    /// survive it (nothing changes).
    Fail { slot: usize, force: bool },
    /// Put a new device (or a returning one, under a fresh id) into a slot that
    /// is faulty, removed or missing, to be rebuilt from stripe 0.
    Attach { slot: usize, device: u64 },
    /// Record rebuild progress of the device `device` in `slot`.
    Checkpoint {
        slot: usize,
        device: u64,
        stripe: u64,
    },
    /// The rebuild of `device` in `slot` completed: the member becomes active.
    /// Refused when the slot no longer holds that device in the rebuilding state
    /// (it was failed or replaced while the rebuild ran).
    FinishRebuild { slot: usize, device: u64 },
    /// Detach a faulty or missing member (MD's --remove), or retire a slot whose
    /// chunks were moved into spare space.
    Remove { slot: usize },
}

/// Ids equal, or one of them unknown (0).
pub fn same_device(a: u64, b: u64) -> bool {
    a == b || a == 0 || b == 0
}

/// Slots whose data is not readable (not active), given a table.
pub fn out_slots(slots: &[SlotRecord]) -> Vec<usize> {
    (0..slots.len())
        .filter(|&i| slots[i].state != SlotState::Active)
        .collect()
}

impl MemberTable {
    pub fn new(devices: &[u64]) -> Self {
        Self {
            events: 1,
            slots: devices
                .iter()
                .map(|&device| SlotRecord {
                    state: SlotState::Active,
                    device,
                })
                .collect(),
        }
    }

    fn slot(&self, slot: usize) -> Result<&SlotRecord, Failure> {
        self.slots.get(slot).ok_or_else(|| {
            Failure::new(
                ErrorKind::NotFound,
                format!(
                    "member {slot} does not exist; members are 0 to {}",
                    self.slots.len().saturating_sub(1)
                ),
            )
        })
    }

    /// The table after `t`, with the event counter bumped; or why `t` is refused
    /// (the table is then unchanged). `survives(out)` says whether the array
    /// still reads all its data with the slots `out` unreadable.
    pub fn apply(
        &self,
        t: Transition,
        survives: &dyn Fn(&[usize]) -> bool,
    ) -> Result<MemberTable, Failure> {
        let mut next = self.clone();
        match t {
            Transition::Fail { slot, force } => {
                let r = self.slot(slot)?;
                if !r.state.is_in() {
                    return Err(format!("member {slot} is already {}", r.state.as_str()).into());
                }
                next.slots[slot].state = SlotState::Faulty;
                if !force && !survives(&out_slots(&next.slots)) {
                    return Err(Failure::new(
                        ErrorKind::WouldLoseData,
                        format!(
                            "failing member {slot} would leave the array unable to read its data; nothing was changed (use --force to fail it anyway)"
                        ),
                    ));
                }
            }
            Transition::Attach { slot, device } => {
                let r = self.slot(slot)?;
                if r.state.is_in() {
                    return Err(format!(
                        "member {slot} is {}; fail it first (hetraid fail ... --member {slot})",
                        r.state.as_str()
                    )
                    .into());
                }
                if device == 0 {
                    return Err("a device id must not be 0".into());
                }
                next.slots[slot] = SlotRecord {
                    state: SlotState::Rebuilding { checkpoint: 0 },
                    device,
                };
            }
            Transition::Checkpoint {
                slot,
                device,
                stripe,
            } => {
                let r = self.slot(slot)?;
                match r.state {
                    SlotState::Rebuilding { .. } if r.device == device => {
                        next.slots[slot].state = SlotState::Rebuilding { checkpoint: stripe };
                    }
                    _ => return Err(Self::gone(slot, r).into()),
                }
            }
            Transition::FinishRebuild { slot, device } => {
                let r = self.slot(slot)?;
                match r.state {
                    SlotState::Rebuilding { .. } if r.device == device => {
                        next.slots[slot].state = SlotState::Active;
                    }
                    _ => return Err(Self::gone(slot, r).into()),
                }
            }
            Transition::Remove { slot } => {
                let r = self.slot(slot)?;
                match r.state {
                    SlotState::Faulty | SlotState::Missing => {
                        next.slots[slot].state = SlotState::Removed
                    }
                    SlotState::Removed => {
                        return Err(format!("member {slot} is already removed").into())
                    }
                    s => {
                        return Err(format!(
                            "member {slot} is {}; fail it first (hetraid fail ... --member {slot})",
                            s.as_str()
                        )
                        .into())
                    }
                }
            }
        }
        next.events = self.events + 1;
        Ok(next)
    }

    fn gone(slot: usize, r: &SlotRecord) -> String {
        format!(
            "member {slot} was failed or replaced while it was being rebuilt (it is now {}); the rebuild stopped without activating it",
            r.state.as_str()
        )
    }
}

/// What assembly knows of one given member: its superblock's table, its slot
/// and device id, and whether it is large enough for its slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub table: MemberTable,
    pub slot: usize,
    pub clean: bool,
    /// False when the member is shorter than its slot's data needs (truncated).
    pub size_ok: bool,
    /// Its write generation (bumped at every clean -> dirty transition on
    /// every live member; 0: written before generations).
    pub generation: u64,
    /// Its superblock says its generation started: the update that began
    /// it reached every live member (a second update, made before any data
    /// write of the generation).
    pub generation_started: bool,
}

impl Candidate {
    pub fn device(&self) -> u64 {
        self.table.slots[self.slot].device
    }
}

/// How to assemble.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AssembleMode {
    /// Bring back the freshest left-out members when the array would otherwise
    /// not start (MD's --force).
    pub force: bool,
    /// The array will be written: record absent members as missing.
    pub writable: bool,
    /// The operator said the array may run without members that were not
    /// given (mdadm's `--run`). Without it, a slot the table holds in the
    /// array that no given member claims is refused ([`AssembleError::NotGiven`]):
    /// a forgotten path must not degrade a healthy array.
    pub degraded: bool,
}

/// Why a given member is not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftOut {
    pub candidate: usize,
    pub reason: String,
}

/// Why an assembly is refused; the engine names the members by path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AssembleError {
    NoMembers,
    /// Candidate `candidate`'s table has another slot count than the freshest.
    Incarnation {
        candidate: usize,
    },
    /// Candidates `a` and `b` each record the other as out: run apart.
    Split {
        a: usize,
        b: usize,
        detail: String,
    },
    /// Candidates `a` and `b` hold the same slot with the same device id.
    Copies {
        a: usize,
        b: usize,
        slot: usize,
    },
    /// These slots are unreadable and the array cannot do without them.
    Unreadable {
        slots: Vec<usize>,
    },
    /// These slots are in the array, but no given member claims them, and
    /// the operator did not say `degraded`.
    NotGiven {
        slots: Vec<usize>,
    },
}

/// Which members an assembly uses and the table it starts with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assembly {
    /// The table to run with (and, when `changed`, to write to every member used).
    pub table: MemberTable,
    /// Per slot, the candidate used in it.
    pub used: Vec<Option<usize>>,
    pub left_out: Vec<LeftOut>,
    /// Candidates brought back by force, with what may be lost on them.
    pub forced: Vec<LeftOut>,
    /// Slots recorded as missing by this assembly.
    pub recorded_missing: Vec<usize>,
    /// Slots in the array that no given member claims (with `degraded`;
    /// without it the assembly is refused).
    pub not_given: Vec<usize>,
    /// Every member used was clean.
    pub clean: bool,
    /// The table differs from some used member's: write it to all of them.
    pub changed: bool,
}

/// Decide which of `cands` to use. The freshest table is the truth; a member is
/// used when that table has its device in its slot (active or rebuilding), its
/// events are within one of the freshest, and it is large enough. The others are
/// left out with the reason. Members that each record the other as out were run
/// apart (split brain): refused, naming both. `survives(out)` as in
/// [`MemberTable::apply`].
pub fn assemble(
    cands: &[Candidate],
    mode: AssembleMode,
    survives: &dyn Fn(&[usize]) -> bool,
) -> Result<Assembly, AssembleError> {
    let Some(fresh_i) = (0..cands.len()).max_by_key(|&i| (cands[i].table.events, usize::MAX - i))
    else {
        return Err(AssembleError::NoMembers);
    };
    let fresh = &cands[fresh_i];
    let n = fresh.table.slots.len();
    for (i, c) in cands.iter().enumerate() {
        if c.table.slots.len() != n || c.slot >= n {
            return Err(AssembleError::Incarnation { candidate: i });
        }
    }
    let mut table = fresh.table.clone();
    refuse_split_brain(cands, fresh_i, &table)?;
    // The write generation of the array: the newest among the members it
    // would take. One older than that missed writes (a copy put back, a
    // snapshot, a rolled-back VM), whatever its event counter says.
    let generation = cands
        .iter()
        .filter(|c| {
            let r = table.slots[c.slot];
            c.size_ok
                && same_device(r.device, c.device())
                && r.state.is_in()
                && c.table.events + 1 >= table.events
        })
        .map(|c| c.generation)
        .max()
        .unwrap_or(0);
    // A member one generation behind missed only the update that began the
    // newest generation (a crash in it) when no member says that generation
    // started: no data of it was written, so nothing is lost on the member.
    // It was clean then (generations begin at clean -> dirty). Otherwise it
    // was put back from an earlier state.
    let started = cands
        .iter()
        .any(|c| c.generation == generation && c.generation_started);
    let trails = |c: &Candidate| !started && c.clean && c.generation + 1 == generation;
    let mut used: Vec<Option<usize>> = vec![None; n];
    let mut left_out = Vec::new();
    for (i, c) in cands.iter().enumerate() {
        let r = table.slots[c.slot];
        let reason = if !c.size_ok {
            Some("it is shorter than its slot's data (truncated?)".to_string())
        } else if !same_device(r.device, c.device()) {
            Some(format!(
                "slot {} now holds another device (this one was replaced)",
                c.slot
            ))
        } else if !r.state.is_in() {
            Some(format!(
                "the array marks it {} (event {} < {})",
                r.state.as_str(),
                c.table.events,
                table.events
            ))
        } else if c.table.events + 1 < table.events {
            Some(format!(
                "it is stale (event {} < {})",
                c.table.events, table.events
            ))
        } else if c.generation < generation && !trails(c) {
            Some(format!(
                "it is older than the array (write generation {} < {}): a copy or snapshot of an earlier state was put back, and it lacks writes made since",
                c.generation, generation
            ))
        } else if let Some(j) = used[c.slot] {
            return Err(AssembleError::Copies {
                a: j,
                b: i,
                slot: c.slot,
            });
        } else {
            used[c.slot] = Some(i);
            None
        };
        if let Some(reason) = reason {
            left_out.push(LeftOut {
                candidate: i,
                reason,
            });
        }
    }
    let absent = |t: &MemberTable, used: &[Option<usize>]| -> Vec<usize> {
        (0..n)
            .filter(|&s| t.slots[s].state.is_in() && used[s].is_none())
            .collect()
    };
    let unreadable = |t: &MemberTable, used: &[Option<usize>]| -> Vec<usize> {
        let mut out = out_slots(&t.slots);
        out.extend(absent(t, used));
        out.sort_unstable();
        out.dedup();
        out
    };
    let forced = if !survives(&unreadable(&table, &used)) && mode.force {
        bring_back(cands, &mut table, &mut used, &mut left_out, &|t, u| {
            survives(&unreadable(t, u))
        })
    } else {
        Vec::new()
    };
    // Slots no given member claims (a stale or truncated member given for
    // its slot is the operator's choice, left out with its reason).
    let not_given: Vec<usize> = absent(&table, &used)
        .into_iter()
        .filter(|&s| !cands.iter().any(|c| c.slot == s))
        .collect();
    if !mode.degraded && !not_given.is_empty() {
        return Err(AssembleError::NotGiven { slots: not_given });
    }
    let not_given_slots = not_given;
    if !survives(&unreadable(&table, &used)) {
        return Err(AssembleError::Unreadable {
            slots: unreadable(&table, &used),
        });
    }
    let mut recorded_missing = Vec::new();
    if mode.writable {
        for s in absent(&table, &used) {
            table.slots[s].state = SlotState::Missing;
            recorded_missing.push(s);
        }
    }
    let bumped = !recorded_missing.is_empty() || !forced.is_empty();
    if bumped {
        table.events += 1;
    }
    let changed = bumped || used.iter().flatten().any(|&i| cands[i].table != table);
    Ok(Assembly {
        clean: used.iter().flatten().all(|&i| cands[i].clean),
        table,
        used,
        left_out,
        forced,
        recorded_missing,
        not_given: not_given_slots,
        changed,
    })
}

/// Split brain: a member that records the freshest member's device as out,
/// while the freshest records it as out too (each ran without the other).
fn refuse_split_brain(
    cands: &[Candidate],
    fresh_i: usize,
    table: &MemberTable,
) -> Result<(), AssembleError> {
    let fresh = &cands[fresh_i];
    for (i, c) in cands.iter().enumerate() {
        if i == fresh_i {
            continue;
        }
        let theirs = c.table.slots[fresh.slot];
        let ours = table.slots[c.slot];
        let c_says_fresh_out = !theirs.state.is_in() && same_device(theirs.device, fresh.device());
        let fresh_says_c_out = !ours.state.is_in() && same_device(ours.device, c.device());
        // However far apart their event counters are: the side that ran
        // longer is not thereby the right one.
        if c_says_fresh_out && fresh_says_c_out {
            return Err(AssembleError::Split {
                a: i,
                b: fresh_i,
                detail: format!(
                    "the first (event {}) records slot {} as {}, the second (event {}) records slot {} as {}",
                    c.table.events,
                    fresh.slot,
                    theirs.state.as_str(),
                    fresh.table.events,
                    c.slot,
                    ours.state.as_str()
                ),
            });
        }
    }
    Ok(())
}

/// `--force`: bring back the freshest left-out members whose slot is free,
/// one at a time, until the array can read its data (`readable`). Returns
/// those brought back; they leave `left_out`.
fn bring_back(
    cands: &[Candidate],
    table: &mut MemberTable,
    used: &mut [Option<usize>],
    left_out: &mut Vec<LeftOut>,
    readable: &dyn Fn(&MemberTable, &[Option<usize>]) -> bool,
) -> Vec<LeftOut> {
    let mut forced = Vec::new();
    // Bring back the freshest left-out members whose slot is free, one at a
    // time, until the array can read its data.
    let mut order: Vec<&LeftOut> = left_out
        .iter()
        .filter(|l| cands[l.candidate].size_ok)
        .collect();
    order.sort_by_key(|l| std::cmp::Reverse(cands[l.candidate].table.events));
    for l in order {
        let c = &cands[l.candidate];
        if used[c.slot].is_some()
            || table.slots[c.slot].state.is_in()
                && !same_device(table.slots[c.slot].device, c.device())
        {
            continue;
        }
        used[c.slot] = Some(l.candidate);
        table.slots[c.slot] = SlotRecord {
            state: SlotState::Active,
            device: c.device(),
        };
        forced.push(LeftOut {
            candidate: l.candidate,
            reason: format!(
                "it was left at event {} of {}: writes made after it left are not on it",
                c.table.events, table.events
            ),
        });
        if readable(table, used) {
            break;
        }
    }
    left_out.retain(|l| !forced.iter().any(|f| f.candidate == l.candidate));
    forced
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tolerance(k: usize) -> impl Fn(&[usize]) -> bool {
        move |out: &[usize]| out.len() <= k
    }

    fn cand(t: &MemberTable, slot: usize) -> Candidate {
        Candidate {
            table: t.clone(),
            slot,
            clean: true,
            size_ok: true,
            generation: 0,
            generation_started: false,
        }
    }

    #[test]
    fn fail_beyond_redundancy_is_refused_unless_forced() {
        let t = MemberTable::new(&[1, 2, 3]);
        let s = tolerance(1);
        let t1 = t
            .apply(
                Transition::Fail {
                    slot: 0,
                    force: false,
                },
                &s,
            )
            .unwrap();
        assert_eq!(t1.events, 2);
        assert!(t1
            .apply(
                Transition::Fail {
                    slot: 1,
                    force: false
                },
                &s
            )
            .is_err());
        let t2 = t1
            .apply(
                Transition::Fail {
                    slot: 1,
                    force: true,
                },
                &s,
            )
            .unwrap();
        assert_eq!(t2.slots[1].state, SlotState::Faulty);
    }

    #[test]
    fn a_rebuild_cannot_activate_a_replaced_or_failed_device() {
        let s = tolerance(1);
        let t = MemberTable::new(&[1, 2, 3])
            .apply(
                Transition::Fail {
                    slot: 1,
                    force: false,
                },
                &s,
            )
            .unwrap()
            .apply(
                Transition::Attach {
                    slot: 1,
                    device: 10,
                },
                &s,
            )
            .unwrap();
        // Failed again and replaced while the rebuild of device 10 ran.
        let t2 = t
            .apply(
                Transition::Fail {
                    slot: 1,
                    force: false,
                },
                &s,
            )
            .unwrap();
        assert!(t2
            .apply(
                Transition::FinishRebuild {
                    slot: 1,
                    device: 10
                },
                &s
            )
            .is_err());
        let t3 = t2
            .apply(
                Transition::Attach {
                    slot: 1,
                    device: 11,
                },
                &s,
            )
            .unwrap();
        assert!(t3
            .apply(
                Transition::FinishRebuild {
                    slot: 1,
                    device: 10
                },
                &s
            )
            .is_err());
        assert!(t3
            .apply(
                Transition::Checkpoint {
                    slot: 1,
                    device: 10,
                    stripe: 5
                },
                &s
            )
            .is_err());
        let done = t3
            .apply(
                Transition::FinishRebuild {
                    slot: 1,
                    device: 11,
                },
                &s,
            )
            .unwrap();
        assert_eq!(done.slots[1].state, SlotState::Active);
    }

    #[test]
    fn members_one_event_behind_are_accepted() {
        let t = MemberTable::new(&[1, 2, 3, 4]);
        let mut newer = t.clone();
        newer.events += 1;
        let cands = vec![cand(&newer, 0), cand(&newer, 1), cand(&t, 2), cand(&t, 3)];
        let a = assemble(&cands, AssembleMode::default(), &tolerance(1)).unwrap();
        assert_eq!(a.used, vec![Some(0), Some(1), Some(2), Some(3)]);
        assert!(a.changed);
    }

    #[test]
    fn a_member_not_given_is_refused_unless_degraded() {
        let t = MemberTable::new(&[1, 2, 3, 4]);
        let cands = vec![cand(&t, 0), cand(&t, 1), cand(&t, 2)];
        for writable in [false, true] {
            let mode = AssembleMode {
                writable,
                ..AssembleMode::default()
            };
            let e = assemble(&cands, mode, &tolerance(1)).unwrap_err();
            assert_eq!(e, AssembleError::NotGiven { slots: vec![3] });
        }
        let mode = AssembleMode {
            writable: true,
            degraded: true,
            force: false,
        };
        let a = assemble(&cands, mode, &tolerance(1)).unwrap();
        assert_eq!(a.recorded_missing, vec![3]);
        // A stale member given for its slot is the operator's choice: left
        // out with its reason, no `degraded` needed.
        let mut newer = t.clone();
        newer.events += 2;
        let cands = vec![
            cand(&newer, 0),
            cand(&newer, 1),
            cand(&newer, 2),
            cand(&t, 3),
        ];
        let mode = AssembleMode {
            writable: true,
            ..AssembleMode::default()
        };
        let a = assemble(&cands, mode, &tolerance(1)).unwrap();
        assert_eq!(a.left_out.len(), 1);
        assert_eq!(a.recorded_missing, vec![3]);
        // A slot already out needs no member.
        let out = t
            .apply(
                Transition::Fail {
                    slot: 3,
                    force: false,
                },
                &tolerance(1),
            )
            .unwrap();
        let cands = vec![cand(&out, 0), cand(&out, 1), cand(&out, 2)];
        assert!(assemble(&cands, mode, &tolerance(1)).is_ok());
    }

    #[test]
    fn a_member_of_an_older_generation_is_left_out() {
        let t = MemberTable::new(&[1, 2, 3, 4]);
        let mut cands: Vec<Candidate> = (0..4).map(|s| cand(&t, s)).collect();
        for c in &mut cands {
            c.generation = 7;
            c.generation_started = true;
        }
        cands[2].generation = 6;
        let mode = AssembleMode {
            writable: true,
            ..AssembleMode::default()
        };
        let a = assemble(&cands, mode, &tolerance(1)).unwrap();
        assert_eq!(a.used, vec![Some(0), Some(1), None, Some(3)]);
        assert_eq!(a.left_out[0].candidate, 2);
        assert!(a.left_out[0].reason.contains("generation 6 < 7"));
        assert_eq!(a.recorded_missing, vec![2]);
        // One behind while nothing of the newest generation can be missing
        // on it (a crash while the generation started): taken. Two behind:
        // never.
        for c in &mut cands {
            c.generation_started = false;
        }
        let ok = mode;
        let a = assemble(&cands, ok, &tolerance(1)).unwrap();
        assert_eq!(a.used, vec![Some(0), Some(1), Some(2), Some(3)]);
        cands[2].generation = 5;
        let a = assemble(&cands, ok, &tolerance(1)).unwrap();
        assert_eq!(a.used[2], None);
        // Alone, it is the array's newest: nothing to compare with.
        let a = assemble(&cands[2..3], AssembleMode::default(), &|_: &[usize]| true).unwrap_err();
        assert_eq!(
            a,
            AssembleError::NotGiven {
                slots: vec![0, 1, 3]
            }
        );
    }

    #[test]
    fn halves_run_apart_are_refused() {
        let t = MemberTable::new(&[1, 2]);
        let s = tolerance(1);
        let w = AssembleMode {
            writable: true,
            degraded: true,
            force: false,
        };
        let a = assemble(&[cand(&t, 0)], w, &s).unwrap().table;
        let b = assemble(&[cand(&t, 1)], w, &s).unwrap().table;
        assert_eq!(a.slots[1].state, SlotState::Missing);
        let e = assemble(&[cand(&a, 0), cand(&b, 1)], w, &s).unwrap_err();
        assert!(matches!(e, AssembleError::Split { .. }), "{e:?}");
        // One half alone is fine; the other, given later, is left out.
        let a2 = assemble(&[cand(&a, 0), cand(&t, 1)], w, &s).unwrap();
        assert_eq!(a2.used, vec![Some(0), None]);
        assert_eq!(a2.left_out.len(), 1);
    }

    #[test]
    fn force_brings_back_the_freshest_left_out_members() {
        let s = tolerance(1);
        let mut t = MemberTable::new(&[1, 2, 3, 4]);
        let mut hist = vec![t.clone()];
        for slot in [0, 2, 3] {
            t = t.apply(Transition::Fail { slot, force: true }, &s).unwrap();
            hist.push(t.clone());
        }
        // Member 0 left at event 1, 2 at 2, 3 at 3; member 1 is at 4.
        let cands = vec![
            cand(&hist[0], 0),
            cand(&hist[3], 1),
            cand(&hist[1], 2),
            cand(&hist[2], 3),
        ];
        assert!(assemble(&cands, AssembleMode::default(), &s).is_err());
        let a = assemble(
            &cands,
            AssembleMode {
                force: true,
                writable: true,
                degraded: true,
            },
            &s,
        )
        .unwrap();
        assert_eq!(a.forced.len(), 2);
        assert_eq!(a.used, vec![None, Some(1), Some(2), Some(3)]);
        assert_eq!(a.recorded_missing, Vec::<usize>::new());
        assert_eq!(a.table.slots[0].state, SlotState::Faulty);
    }
}

#[cfg(test)]
mod split_tests {
    use super::*;

    /// A RAID1 half that was failed, then started alone (its own superblock
    /// never learned it was failed) and run for longer than the other: still a
    /// split, not a win for the side with more events.
    #[test]
    fn the_longer_running_half_does_not_win() {
        let s = |out: &[usize]| out.len() <= 1;
        let t = MemberTable::new(&[1, 2]);
        // B records A faulty.
        let b = t
            .apply(
                Transition::Fail {
                    slot: 0,
                    force: false,
                },
                &s,
            )
            .unwrap();
        // A, alone from the old table, records B missing, then runs on.
        let w = AssembleMode {
            writable: true,
            degraded: true,
            force: false,
        };
        let mut a = assemble(
            &[Candidate {
                table: t.clone(),
                slot: 0,
                clean: true,
                size_ok: true,
                generation: 0,
                generation_started: false,
            }],
            w,
            &s,
        )
        .unwrap()
        .table;
        a.events += 5;
        let both = [
            Candidate {
                table: a,
                slot: 0,
                clean: true,
                size_ok: true,
                generation: 0,
                generation_started: false,
            },
            Candidate {
                table: b,
                slot: 1,
                clean: true,
                size_ok: true,
                generation: 0,
                generation_started: false,
            },
        ];
        assert!(matches!(
            assemble(&both, w, &s),
            Err(AssembleError::Split { .. })
        ));
    }
}
