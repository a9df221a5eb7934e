//! Copy-back: the chunks a rebuild put into spare space go back onto a
//! replacement, in the core's batches, crash-safe at every step.

use crate::annex::EventKind;
use crate::array::Array;
use crate::error::{EngineError, Result};
use crate::format::{RoleState, Superblock};
use crate::member::{AlignedBuf, Member};
use crate::rebuild::*;
use hetraid_core::membership::Transition;
use hetraid_core::plan::{ArrayState, MemberState};
use std::sync::Arc;

impl Array {
    /// Copy the member rebuilt into distributed spare space last back onto
    /// `new`, put in its slot ("rebalance", as dRAID calls it): each of its
    /// chunks is read from its spare home (one read, where a rebuild reads
    /// the rest of the group) and written to its own place on `new`, and
    /// the spare chunks are free again. Offline (the array is consumed and
    /// returned reassembled). Crash-safe: the attach records the slot as
    /// rebuilding with the relocation dropped, in one superblock update, so
    /// a copy cut short leaves a member to rebuild (`hetraid rebuild`
    /// reconstructs it from parity; the spare homes are never trusted
    /// after that), and the activation is one more update.
    pub fn copy_back(
        self,
        new: Arc<dyn Member>,
        force: bool,
        progress: &(dyn Fn(RebuildProgress) + Sync),
    ) -> Result<(Array, CopyBackReport)> {
        let plan = hetraid_core::rebuild::copy_back_moves(self.layout())
            .map_err(|e| EngineError::Refused(e.to_string()))?;
        let f = plan.member;
        let sb = self.superblock();
        let state = self.state();
        check_copy_back(&self, &plan, &sb, &state)?;
        let t0 = std::time::Instant::now();
        let old_path = self.path_of(f).unwrap_or_default();
        // One update: the slot takes `new` (rebuilding from stripe 0) and the
        // last relocation is dropped, so the layout in force is the restored
        // one from here on.
        let drop_last = |s: &mut Superblock| {
            if let Some(k) = s
                .relocations
                .iter()
                .rposition(|r| r.len == 0 && r.from_member as usize == f)
            {
                s.relocations.remove(k);
            }
        };
        self.replace_editing(f, new, force, &drop_last)?;
        let target = self.member(f).ok_or_else(|| {
            EngineError::Refused(format!("slot {f} holds no device after the attach"))
        })?;
        let chunk = self.layout().chunk_bytes();
        let total = plan.moves.len() as u64;
        self.copy_moves(&plan, target.as_ref(), progress, t0)?;
        target.flush().map_err(|e| EngineError::Io {
            member: target.name(),
            source: e,
        })?;
        let device = self.superblock().roles[f].device;
        self.transition(Transition::FinishRebuild { slot: f, device })?;
        self.record_member(
            EventKind::RebuildFinished,
            f,
            [
                total,
                (t0.elapsed().as_secs_f64() * 1000.0) as u64,
                total * chunk,
            ],
        );
        let path = self.path_of(f).unwrap_or_default();
        let members: Vec<Arc<dyn Member>> = (0..self.slot_count())
            .filter(|&i| self.superblock().roles[i].state.is_in())
            .filter_map(|i| self.member(i))
            .collect();
        drop(self);
        let array = Array::assemble(members)?;
        Ok((
            array,
            CopyBackReport {
                member: f,
                path,
                old_path,
                chunks: total,
                bytes: total * chunk,
                seconds: t0.elapsed().as_secs_f64(),
            },
        ))
    }

    /// Copy the moves of `plan` onto `target` in the core's batches,
    /// `COPY_BACK_BATCHES_IN_FLIGHT` at once: this thread reads a batch into
    /// a free buffer while a writer thread writes the one before.
    fn copy_moves(
        &self,
        plan: &hetraid_core::rebuild::CopyBack,
        target: &dyn Member,
        progress: &(dyn Fn(RebuildProgress) + Sync),
        t0: std::time::Instant,
    ) -> Result<()> {
        let chunk = self.layout().chunk_bytes();
        let total = plan.moves.len() as u64;
        let f = plan.member;
        let stripes_total = self.layout().stripe_count();
        // The core's batches, COPY_BACK_BATCHES_IN_FLIGHT at once as the
        // simulator runs them: this thread reads a batch into a free buffer
        // while a writer thread writes the one before onto the replacement.
        let in_flight = hetraid_core::rebuild::COPY_BACK_BATCHES_IN_FLIGHT.max(1);
        let batch_max = plan.batches().map(|b| b.len()).max().unwrap_or(0);
        let batches: Vec<&[hetraid_core::layout::Move]> = plan.batches().collect();
        let cb = chunk as usize;
        let read_batch =
            |batch: &[hetraid_core::layout::Move], buf: &mut AlignedBuf| -> Result<()> {
                for (k, mv) in batch.iter().enumerate() {
                    let src = self.member(mv.from.member).ok_or_else(|| {
                        EngineError::Refused(format!(
                            "member {} is gone; the copy-back stopped (run hetraid rebuild)",
                            mv.from.member
                        ))
                    })?;
                    src.read_at(
                        &mut buf[k * cb..(k + 1) * cb],
                        crate::format::DATA_OFFSET + mv.from.offset,
                    )
                    .map_err(|e| EngineError::Io {
                        member: src.name(),
                        source: e,
                    })?;
                }
                Ok(())
            };
        let write_batch = |batch: &[hetraid_core::layout::Move], buf: &AlignedBuf| -> Result<()> {
            for (k, mv) in batch.iter().enumerate() {
                debug_assert_eq!(mv.to.member, f);
                target
                    .write_at(
                        &buf[k * cb..(k + 1) * cb],
                        crate::format::DATA_OFFSET + mv.to.offset,
                    )
                    .map_err(|e| EngineError::Io {
                        member: target.name(),
                        source: e,
                    })?;
            }
            Ok(())
        };
        std::thread::scope(|sc| -> Result<()> {
            use std::sync::mpsc::sync_channel;
            let (full_tx, full_rx) = sync_channel::<(usize, AlignedBuf)>(in_flight);
            let (free_tx, free_rx) = sync_channel::<AlignedBuf>(in_flight);
            for _ in 0..in_flight {
                free_tx
                    .send(AlignedBuf::zeroed(batch_max * cb))
                    .expect("the channel holds every buffer");
            }
            let (batches, write_batch) = (&batches, &write_batch);
            let writer = sc.spawn(move || -> Result<()> {
                let mut done = 0u64;
                // Bounded by the batches the reader sends.
                for (i, buf) in full_rx {
                    write_batch(batches[i], &buf)?;
                    done += batches[i].len() as u64;
                    progress(RebuildProgress {
                        stripes_done: done * stripes_total / total.max(1),
                        stripes_total,
                        bytes_done: done * chunk,
                        elapsed_s: t0.elapsed().as_secs_f64(),
                    });
                    // The reader may have stopped (an error): nothing waits.
                    let _ = free_tx.send(buf);
                }
                Ok(())
            });
            let mut read = Ok(());
            for (i, batch) in batches.iter().enumerate() {
                // A free buffer, or the writer stopped (its error follows).
                let Ok(mut buf) = free_rx.recv() else { break };
                if let Err(e) = read_batch(batch, &mut buf) {
                    read = Err(e);
                    break;
                }
                if full_tx.send((i, buf)).is_err() {
                    break;
                }
            }
            drop(full_tx);
            let written = writer.join().expect("the copy-back writer does not panic");
            read.and(written)
        })
    }
}

/// A copy-back is refused, before anything is written, unless the slot was
/// retired into spare space and every spare home can be read.
fn check_copy_back(
    a: &Array,
    plan: &hetraid_core::rebuild::CopyBack,
    sb: &Superblock,
    state: &ArrayState,
) -> Result<()> {
    let f = plan.member;
    // Every spare home read must be readable; another member failed
    // meanwhile may wait (its rebuild can use the spare space this
    // frees).
    let mut sources: Vec<usize> = plan.moves.iter().map(|m| m.from.member).collect();
    sources.sort_unstable();
    sources.dedup();
    if let Some(&i) = sources
        .iter()
        .find(|&&i| state.members[i] != MemberState::InSync)
    {
        return Err(EngineError::Refused(format!(
            "member {i} ({}) holds spare chunks of member {f} and is {}; rebuild it first",
            a.path_of(i).unwrap_or_default(),
            sb.roles[i].state.as_str()
        )));
    }
    if sb.roles[f].state != RoleState::Removed {
        return Err(EngineError::Refused(format!(
            "slot {f} is {}, not retired into spare space; nothing to copy back",
            sb.roles[f].state.as_str()
        )));
    }
    Ok(())
}
