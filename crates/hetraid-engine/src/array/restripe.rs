//! Restriping a classic array (issue 14): RAID5, RAID6 and RAIDH gain a
//! member (mdadm `--grow --raid-devices`), RAIDH changes its weights. The
//! steps are core's (`layout::reshape::reshape_steps`); the superblock's
//! reshape record says how many new-layout rows are written, and between
//! steps the array runs on `layout::reshape::Reshaping` (new layout below
//! the mark, old above). A step that overwrites data it has not copied
//! (MD's critical section) first saves every member's chunk of that row in
//! the member's backup area (below) and records the row; after a crash the
//! chunks are put back before the step runs again.
//!
//! Backup area: bytes [`BACKUP_AT`, 1 MiB) of each member, past the
//! write-intent bitmap's first 256 KiB: a header page (magic `HETRBKP1`,
//! array UUID, row, chunk bytes, CRC-32C of the chunk, CRC-32C of the
//! header) and the chunk.

use super::*;
use crate::format::ReshapeRecord;
use hetraid_core::layout::reshape::{reshape_steps, Reshaping};

pub const BACKUP_AT: u64 = BITMAP_OFFSET + (256 << 10);
const BACKUP_MAGIC: &[u8; 8] = b"HETRBKP1";
/// Largest chunk a backup area holds.
pub const BACKUP_CHUNK_MAX: u64 = DATA_OFFSET - BACKUP_AT - PAGE;

/// The layouts before and after a restripe.
pub(crate) fn layouts(sb: &Superblock) -> Result<(Box<dyn Layout>, Box<dyn Layout>)> {
    let r = sb
        .reshape
        .as_ref()
        .ok_or_else(|| EngineError::Refused("no restripe in progress".into()))?;
    let kind = sb.layout.kind().map_err(EngineError::layout)?;
    let old_kind = match kind.clone() {
        hetraid_core::layout::LayoutKind::RaidH { .. } => hetraid_core::layout::LayoutKind::RaidH {
            weights: r.old_weights.clone(),
        },
        k => k,
    };
    let spec = |kind, n: usize| LayoutSpec {
        kind,
        chunk_bytes: sb.chunk_bytes,
        sizes: sb.roles[..n].iter().map(|r| r.data_size).collect(),
        kinds: sb.roles[..n].iter().map(|r| r.kind).collect(),
    };
    let b = |s: &LayoutSpec| build(s).map_err(|e| EngineError::Layout(e.to_string()));
    Ok((
        b(&spec(old_kind, r.old_members))?,
        b(&spec(kind, sb.roles.len()))?,
    ))
}

/// The layout an array runs on while it restripes.
pub(crate) fn reshaping_layout(sb: &Superblock) -> Result<Box<dyn Layout>> {
    let (old, new) = layouts(sb)?;
    let mark = sb.reshape.as_ref().map_or(0, |r| r.mark_rows);
    Ok(Box::new(Reshaping::new(old, new, mark)))
}

fn backup_header(uuid: [u8; 16], row: u64, data: &[u8]) -> AlignedBuf {
    let mut h = AlignedBuf::zeroed(PAGE as usize);
    h[0..8].copy_from_slice(BACKUP_MAGIC);
    h[8..24].copy_from_slice(&uuid);
    h[24..32].copy_from_slice(&row.to_le_bytes());
    h[32..40].copy_from_slice(&(data.len() as u64).to_le_bytes());
    h[40..44].copy_from_slice(&hetraid_parity::crc32c::crc32c(data).to_le_bytes());
    let crc = hetraid_parity::crc32c::crc32c(&h[..4092]);
    h[4092..4096].copy_from_slice(&crc.to_le_bytes());
    h
}

/// Why a restripe cannot run on this array, if it cannot.
fn check_restripable(a: &Array, sb: &Superblock) -> Result<()> {
    // A write log is drained before every step (the array is closed:
    // write-back data reclaimed, the journal checkpointed), so no record
    // names member extents a step moves; see docs/FORMAT.md ("Restripe").
    if sb.reshape.is_some() {
        return Err(EngineError::Refused(
            "a restripe is in progress: finish it first with hetraid grow and the same members (no --add or --weights)".into(),
        ));
    }
    if sb.chunk_bytes > BACKUP_CHUNK_MAX {
        return Err(EngineError::Refused(format!(
            "chunks of {} bytes do not fit the {} bytes of backup room each member keeps for a restripe; restriping needs chunks of at most 512 KiB",
            sb.chunk_bytes, BACKUP_CHUNK_MAX
        )));
    }
    let bitmap_bytes = a
        .layout()
        .stripe_count()
        .div_ceil(sb.bitmap_stripes as u64)
        .div_ceil(8);
    if BITMAP_OFFSET + bitmap_bytes > BACKUP_AT {
        return Err(EngineError::Refused(format!(
            "the write-intent bitmap ({bitmap_bytes} bytes) reaches into the room a restripe backs up chunks in; arrays this large cannot restripe yet"
        )));
    }
    let st = a.state();
    if let Some(i) =
        (0..sb.roles.len()).find(|&i| !a.present(i) || st.members[i] != MemberState::InSync)
    {
        return Err(EngineError::Refused(format!(
            "slot {i} is missing, failed or rebuilding: an array restripes whole (replace and rebuild first)"
        )));
    }
    Ok(())
}

impl Array {
    /// Put back the chunks a crash left in the members' backup areas
    /// (read-write assembly, a restripe step recorded as backed up).
    pub(crate) fn restore_reshape_backup(&self) -> Result<()> {
        let sb = self.superblock();
        let Some(row) = sb.reshape.as_ref().and_then(|r| r.backup_row) else {
            return Ok(());
        };
        self.commit()?;
        let chunk = sb.chunk_bytes as usize;
        let mut restored = 0;
        for (i, slot) in self.hot.slots.iter().enumerate() {
            if !self.present(i) {
                continue;
            }
            let mut h = AlignedBuf::zeroed(PAGE as usize);
            slot.read_at(&mut h, BACKUP_AT)
                .map_err(|e| io_err(slot.as_ref(), e))?;
            let mut d = AlignedBuf::zeroed(chunk);
            slot.read_at(&mut d, BACKUP_AT + PAGE)
                .map_err(|e| io_err(slot.as_ref(), e))?;
            if h[..] != backup_header(sb.uuid, row, &d)[..] {
                return Err(EngineError::Refused(format!(
                    "the restripe backup of row {row} on {} is damaged or missing: the step it guards cannot be redone; assemble without that member (its chunks are rebuilt) or restore the member",
                    slot.name()
                )));
            }
            slot.write_at(&d, self.data_off() + row * chunk as u64)
                .and_then(|_| slot.flush())
                .map_err(|e| io_err(slot.as_ref(), e))?;
            restored += 1;
        }
        let mut sb = self.sb.lock().unwrap();
        if let Some(r) = sb.reshape.as_mut() {
            r.backup_row = None;
        }
        sb.events += 1;
        self.persist(&mut sb)?;
        self.warnings.lock().unwrap().push(format!(
            "a restripe was cut in the step at row {row}: that row's chunks were put back from {restored} members' backups; hetraid grow with the same members finishes the restripe"
        ));
        Ok(())
    }

    /// Run restripe steps from the mark (at most `batches_max` of them);
    /// `Some` when the restripe is done.
    pub(crate) fn run_restripe(&self, batches_max: Option<u64>) -> Result<Option<ChangeReport>> {
        let start = std::time::Instant::now();
        let sb0 = self.superblock();
        let Some(r0) = sb0.reshape.clone() else {
            return Ok(None);
        };
        check_restripable_running(self, &sb0)?;
        let (old, new) = layouts(&sb0)?;
        let steps = reshape_steps(old.as_ref(), new.as_ref(), r0.window_rows);
        let chunk = sb0.chunk_bytes;
        let k = new.data_per_stripe() as u64;
        let row_bytes = chunk * k;
        let n = new.members();
        let mut ran = 0u64;
        for st in steps.iter().filter(|s| s.rows.start >= r0.mark_rows) {
            if batches_max.is_some_and(|m| ran >= m) {
                return Ok(None);
            }
            let rows = st.rows.end - st.rows.start;
            // The step's bytes, through the array (old layout above the mark).
            let mut src = vec![0u8; (rows * row_bytes) as usize];
            let len = (st.bytes.end - st.bytes.start) as usize;
            if len > 0 {
                self.read(st.bytes.start, &mut src[..len])?;
            }
            if st.backup {
                assert_eq!(rows, 1, "backed-up steps are one row");
                let mut d = AlignedBuf::zeroed(chunk as usize);
                for i in 0..n {
                    let m = &self.hot.slots[i];
                    if (st.rows.start + 1) * chunk > sb0.roles[i].data_size {
                        continue;
                    }
                    m.read_at(&mut d, self.data_off() + st.rows.start * chunk)
                        .map_err(|e| io_err(m.as_ref(), e))?;
                    m.write_at(&backup_header(sb0.uuid, st.rows.start, &d), BACKUP_AT)
                        .and_then(|_| m.write_at(&d, BACKUP_AT + PAGE))
                        .and_then(|_| m.flush())
                        .map_err(|e| io_err(m.as_ref(), e))?;
                }
                let mut sb = self.sb.lock().unwrap();
                if let Some(r) = sb.reshape.as_mut() {
                    r.backup_row = Some(st.rows.start);
                }
                sb.events += 1;
                self.persist(&mut sb)?;
            }
            self.write_new_rows(new.as_ref(), st.rows.clone(), &src)?;
            for m in &self.hot.slots {
                m.flush().map_err(|e| io_err(m.as_ref(), e))?;
            }
            let mut sb = self.sb.lock().unwrap();
            if let Some(r) = sb.reshape.as_mut() {
                r.mark_rows = st.rows.end;
                r.backup_row = None;
            }
            sb.events += 1;
            self.persist(&mut sb)?;
            ran += 1;
        }
        // Done: the new layout alone.
        let mut sb = self.sb.lock().unwrap();
        if sb.reshape.take().is_none() {
            return Ok(None);
        }
        let spb = Bitmap::stripes_per_bit(new.stripe_count(), row_bytes);
        sb.bitmap_stripes = (spb as u32).max(sb.bitmap_stripes);
        sb.events += 1;
        self.persist(&mut sb)?;
        Ok(Some(ChangeReport {
            change: "restripe".into(),
            slot: n - 1,
            moves: new.stripe_count() - r0.mark_rows.min(new.stripe_count()),
            rebuilt: 0,
            bundles_before: old.stripe_count(),
            bundles_after: new.stripe_count(),
            capacity_before: old.capacity_bytes(),
            capacity_after: new.capacity_bytes(),
            seconds: start.elapsed().as_secs_f64(),
            shrink: None,
        }))
    }

    /// Write new-layout rows `rows` whole: data from `src` (the rows'
    /// logical bytes in order), parity computed.
    fn write_new_rows(
        &self,
        new: &dyn Layout,
        rows: std::ops::Range<u64>,
        src: &[u8],
    ) -> Result<()> {
        let chunk = new.chunk_bytes() as usize;
        let k = new.data_per_stripe();
        let mut p = AlignedBuf::zeroed(chunk);
        let mut q = AlignedBuf::zeroed(chunk);
        let mut ops: Vec<(usize, IoOp)> = Vec::new();
        for (j, s) in rows.clone().enumerate() {
            let st = new.stripe(s);
            let base = j * k * chunk;
            let data: Vec<&[u8]> = (0..st.data.len())
                .map(|i| &src[base + i * chunk..base + (i + 1) * chunk])
                .collect();
            for (i, loc) in st.data.iter().enumerate() {
                let mut b = AlignedBuf::zeroed(chunk);
                b.copy_from_slice(data[i]);
                ops.push((
                    loc.member,
                    IoOp::Write {
                        off: self.data_off() + loc.offset,
                        buf: b,
                    },
                ));
            }
            match st.parity.len() {
                0 => {}
                1 => hetraid_parity::xor_gen(&mut p, &data),
                _ => hetraid_parity::pq_gen(&data, &mut p, &mut q),
            }
            for (pi, loc) in st.parity.iter().enumerate() {
                let mut b = AlignedBuf::zeroed(chunk);
                b.copy_from_slice(if pi == 0 { &p } else { &q });
                ops.push((
                    loc.member,
                    IoOp::Write {
                        off: self.data_off() + loc.offset,
                        buf: b,
                    },
                ));
            }
        }
        let idx: Vec<usize> = ops.iter().map(|(i, _)| *i).collect();
        for (r, i) in run_batch(&self.queues, ops).into_iter().zip(idx) {
            r.map_err(|e| io_err(self.hot.slots[i].as_ref(), e))?;
        }
        Ok(())
    }

    /// `grow --add` on RAID5/6/RAIDH (and `--weights` for RAIDH): record
    /// the restripe (the new member's superblock first, then the others'),
    /// no row written yet. Returns the members, any new one last.
    pub fn prepare_restripe(
        given: Vec<Arc<dyn Member>>,
        new: Option<(Arc<dyn Member>, MemberKind)>,
        weights: Option<Vec<u64>>,
        force: bool,
    ) -> Result<Vec<Arc<dyn Member>>> {
        // Run again after a crash: the new member may hold its slot already.
        let mut all = given.clone();
        if let Some((m, _)) = &new {
            let first = given.first().map(|g| read_sb(g.as_ref())).transpose()?;
            let uuid = first.and_then(|f| f.ok()).map(|f| f.uuid);
            if matches!(read_sb(m.as_ref())?, Ok(s) if Some(s.uuid) == uuid) {
                all.push(m.clone());
            }
        }
        let a = Self::assemble(all.clone())?;
        let sb = a.superblock();
        if sb.reshape.is_some() {
            a.close()?;
            return Ok(all);
        }
        if all.len() > given.len() {
            a.close()?;
            return Err(EngineError::Refused(format!(
                "{} is already a member of this array and no restripe is in progress",
                all.last().map_or(String::new(), |m| m.name())
            )));
        }
        check_restripable(&a, &sb)?;
        let raidh = check_restripe_request(&a, &sb, new.is_some(), weights.as_ref())?;
        let n = sb.roles.len();
        let n_new = n + usize::from(new.is_some());
        let mut next = sb.clone();
        if let Some((m, kind)) = &new {
            super::living::check_new_member(&given, m.as_ref(), force)?;
            let size = sb.roles.iter().map(|r| r.data_size).min().unwrap_or(0);
            if m.len() < sb.data_offset + size {
                return Err(EngineError::Refused(format!(
                    "{} is {} bytes; joining this array it needs at least {} ({} of data past {} of metadata)",
                    m.name(),
                    m.len(),
                    sb.data_offset + size,
                    size,
                    sb.data_offset
                )));
            }
            next.roles.push(MemberRole {
                state: RoleState::Active,
                kind: *kind,
                data_size: size,
                rebuild_checkpoint: 0,
                device: new_device_id(),
                resync: false,
            });
        }
        let old_weights = sb.layout.weights.clone();
        if let Some(w) = weights {
            if w.len() != n_new {
                return Err(EngineError::Refused(format!(
                    "--weights lists {} weights for {n_new} members; give one per member",
                    w.len()
                )));
            }
            next.layout.weights = Some(w);
        }
        let chunk = sb.chunk_bytes;
        next.reshape = Some(ReshapeRecord {
            old_members: n,
            old_weights: if raidh {
                old_weights.unwrap_or_default()
            } else {
                Vec::new()
            },
            mark_rows: 0,
            window_rows: 1,
            backup_row: None,
        });
        let (old_l, new_l) = layouts(&next).map_err(|e| EngineError::Refused(e.to_string()))?;
        check_new_layout(&a, &sb, old_l.as_ref(), new_l.as_ref())?;
        let window = hetraid_core::limits::restripe_window_rows(chunk, new_l.members());
        if let Some(r) = next.reshape.as_mut() {
            r.window_rows = window;
        }
        a.close()?;
        // The close drained the log (its position moved): the superblock
        // written next says so.
        next.log = a.superblock().log;
        drop(a);
        next.events = sb.events + 1;
        next.clean = true;
        let write_sb = |m: &Arc<dyn Member>, slot: usize| {
            super::living::write_superblock(m.as_ref(), &next, slot)
        };
        let mut all = given.clone();
        if let Some((m, _)) = &new {
            init_new_member(m.as_ref(), &sb)?;
            write_sb(m, n)?;
            all.push(m.clone());
        }
        for (m, s) in given.iter().zip(given.iter().map(|g| read_sb(g.as_ref()))) {
            if let Ok(Ok(s)) = s {
                if s.uuid == sb.uuid && (s.member as usize) < n {
                    write_sb(m, s.member as usize)?;
                }
            }
        }
        Ok(all)
    }
}

/// What a restripe is asked to do, checked against the array: weights for
/// raidh only (and needed when it gains a member), something to do, room
/// for one more member. Returns whether the layout is raidh.
fn check_restripe_request(
    a: &Array,
    sb: &Superblock,
    adding: bool,
    weights: Option<&Vec<u64>>,
) -> Result<bool> {
    let kind = sb.layout.kind().map_err(EngineError::layout)?;
    let raidh = matches!(kind, hetraid_core::layout::LayoutKind::RaidH { .. });
    if weights.is_some() && !raidh {
        return Err(EngineError::Refused(format!(
            "--weights applies to raidh, not to {}",
            sb.layout.name
        )));
    }
    let n = sb.roles.len();
    let n_new = n + usize::from(adding);
    if raidh && adding && weights.is_none() {
        return Err(EngineError::Refused(format!(
            "a raidh array gaining a member needs --weights with {n_new} parity weights, one per member after the grow"
        )));
    }
    if !adding && weights.is_none() {
        return Err(EngineError::Refused(
            "give --add NEW (a member) or --weights (raidh) to restripe".into(),
        ));
    }
    if n_new > crate::format::MAX_MEMBERS {
        return Err(EngineError::Refused(format!(
            "the array has {n} members, the most it can have"
        )));
    }
    if !adding && weights.is_some() && weights == sb.layout.weights.as_ref() {
        a.close()?;
        return Err(EngineError::Refused(
            "the array has these weights already: nothing to restripe".into(),
        ));
    }
    Ok(raidh)
}

/// The layout after a restripe must hold what the array holds, and the log
/// must take its largest stripe update (and, write-back, keep the
/// reclaimer its room) as `create` checks.
fn check_new_layout(
    a: &Array,
    sb: &Superblock,
    old_l: &dyn Layout,
    new_l: &dyn Layout,
) -> Result<()> {
    let chunk = sb.chunk_bytes;
    // The log must take the new layout's largest stripe update (and,
    // write-back, keep the reclaimer its room) as `create` checks.
    if let (Some(rec), Some(l)) = (sb.log, a.status().log) {
        let need = Array::log_bytes_min(new_l, rec.mode);
        let have = crate::log::RING_OFFSET + l.ring_bytes;
        if have < need {
            return Err(EngineError::Kind(
                hetraid_core::ErrorKind::TooSmall,
                format!(
                "the write log ({have} bytes) is too small for the array after the restripe ({} members of {chunk}-byte chunks need {need}); replace its copies with larger devices first (hetraid replace ... --log-copy I --with DEV)",
                new_l.members()
            )));
        }
    }
    if new_l.capacity_bytes() < old_l.capacity_bytes() {
        return Err(EngineError::Refused(format!(
            "the new layout holds {} bytes, less than the {} the array holds",
            new_l.capacity_bytes(),
            old_l.capacity_bytes()
        )));
    }
    Ok(())
}

/// A member joining by a restripe: an empty bitmap, and (with checksums)
/// an empty checksum area (zero: no block checked yet).
fn init_new_member(m: &dyn Member, sb: &Superblock) -> Result<()> {
    let zero = AlignedBuf::zeroed((DATA_OFFSET - BITMAP_OFFSET) as usize);
    m.write_at(&zero, BITMAP_OFFSET).map_err(|e| io_err(m, e))?;
    if sb.checksums {
        // The new member's checksum area starts empty (zero: no
        // block checked yet).
        let area = sb.data_offset - DATA_OFFSET;
        let z = AlignedBuf::zeroed((1u64 << 20).min(area) as usize);
        let mut at = 0;
        while at < area {
            let len = (area - at).min(z.len() as u64) as usize;
            m.write_at(&z[..len], DATA_OFFSET + at)
                .map_err(|e| io_err(m, e))?;
            at += len as u64;
        }
    }
    Ok(())
}

/// A restripe continues on a whole array only.
fn check_restripable_running(a: &Array, sb: &Superblock) -> Result<()> {
    let st = a.state();
    if let Some(i) =
        (0..sb.roles.len()).find(|&i| !a.present(i) || st.members[i] != MemberState::InSync)
    {
        return Err(EngineError::Refused(format!(
            "slot {i} is missing, failed or rebuilding: the restripe continues on a whole array (replace and rebuild first)"
        )));
    }
    Ok(())
}
