//! What `hetraid status` reports.

#[allow(unused_imports)]
use super::*;

/// `hetraid status` data.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Status {
    pub uuid: String,
    /// `create --name` ("" when none).
    pub name: String,
    pub layout: String,
    /// RAID5's parity rotation (mdadm's "Layout : left-symmetric").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parity_order: Option<crate::Word>,
    /// S²-RAID: partitions per member and spare partitions (as stored at
    /// create; old arrays that stored none have K = G, or m for S²-RAID10).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partitions: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spare_partitions: Option<usize>,
    pub members: usize,
    pub chunk_bytes: u64,
    pub capacity_bytes: u64,
    pub stripe_count: u64,
    pub policy: crate::Word,
    /// Layouts with copies: how reads choose one (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_policy: Option<crate::Word>,
    pub events: u64,
    pub clean: bool,
    pub state: crate::Word,
    pub dirty_regions: usize,
    pub member_states: Vec<MemberStatus>,
    pub warnings: Vec<String>,
    /// The last completed scrub, if any.
    pub last_scrub: Option<crate::format::ScrubRecord>,
    /// Block checksums are kept (format version 2).
    pub checksums: bool,
    /// What keeps stripes consistent across a crash: "journal" (the write
    /// log), "bitmap" (write-intent bitmap resync) or "none" (no redundancy).
    pub consistency: crate::Word,
    /// The write log, when the array has one.
    pub log: Option<LogStatus>,
    /// HPDA: the director and the monitor.
    pub hpda: Option<super::HpdaStatus>,
    /// RAIDX: the bundle table each member keeps past its data area (bytes
    /// on all members together), when it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bundle_table_bytes: Option<u64>,
    /// RAIDX: the most any placement could hold on these members at this
    /// level (`hetraid_core::layout::raidx_widths::spec_bound`), and what
    /// it is in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity_bound_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity_bound: Option<String>,
    /// RAIDX: a member being added or removed (`grow`, `shrink`) whose
    /// chunk moves are not all done.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change: Option<super::ChangeProgress>,
    /// A rebuild or scrub running now: percentage, rate, ETA.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress: Option<super::OpProgress>,
    /// Hot spares given with the members (and how many listed were not).
    pub spares: Vec<super::SpareStatus>,
    pub spares_missing: usize,
    /// Devices that failed out of a slot another device is being rebuilt
    /// into (mdadm --detail lists them as faulty): from the events.
    pub departed: Vec<Departed>,
    /// The users' I/O (the server's requests) since measuring started,
    /// and how long ago that was: iostat's and the metrics' source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io: Option<crate::iostat::IoStats>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_seconds: Option<f64>,
    /// The stripe geometry mkfs wants, and its options for ext4 and xfs
    /// (`hetraid status --mkfs ext4|xfs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fs_alignment: Option<hetraid_core::layout::FsAlignment>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mkfs: Option<Mkfs>,
}

/// mkfs's options for this array's stripes.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Mkfs {
    pub ext4: String,
    pub xfs: String,
}

#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Departed {
    pub slot: usize,
    pub path: String,
    /// The event that recorded the failure.
    pub event_seq: u64,
    pub time_unix_ms: u64,
}

#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct LogStatus {
    pub mode: crate::Word,
    /// "optimal", or "degraded" when a copy is missing or failed.
    pub state: crate::Word,
    pub devices: Vec<LogDeviceStatus>,
    pub ring_bytes: u64,
    pub used_bytes: u64,
    /// Stripe updates (and pads) logged since the last checkpoint.
    pub records: u64,
    /// Write-back: bytes of logged writes not yet on the members.
    pub unreclaimed_bytes: u64,
    /// Write-back: pieces of logged writes not yet on the members (the
    /// log list's entries).
    pub entries: u64,
    /// Write-back: bytes the reclaimer wrote to the members since assembly.
    pub reclaimed_bytes: u64,
}

#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct LogDeviceStatus {
    pub copy: usize,
    pub path: String,
    pub kind: crate::Word,
    pub state: crate::Word,
}

#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct MemberStatus {
    pub device: usize,
    pub path: Option<String>,
    /// Where the slot's device was last seen (absolute; kept after it failed,
    /// was removed or went missing).
    pub last_path: Option<String>,
    pub state: crate::Word,
    pub kind: crate::Word,
    pub data_bytes: u64,
    pub rebuild_checkpoint: Option<u64>,
    /// Rebuilding a member that came back intact (re-add): only the regions
    /// the bitmap marks are rebuilt.
    pub readd: bool,
    /// Bytes of its data area the layout places chunks in, and the rest
    /// (members larger than the layout uses).
    pub used_bytes: u64,
    pub unused_bytes: u64,
    /// Share of its chunks that hold parity or copies.
    pub redundancy_share: f64,
    /// Since the last `hetraid clear` (kept on the members across
    /// assemblies): read errors (checksum mismatches included), write
    /// errors and checksum mismatches (zpool status's READ, WRITE and CKSUM
    /// columns).
    pub read_errors: u32,
    #[serde(default)]
    pub write_errors: u32,
    pub checksum_errors: u32,
    /// I/O since measuring started (a served array), for iostat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io: Option<crate::iostat::IoStats>,
    /// Sat out for reads (slow-member sit-out): for how many more ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sat_out_ms_left: Option<u64>,
    /// Its mean read latency when the sit-out rule last measured it, µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_latency_us: Option<u64>,
}

impl Array {
    /// The array's health for `status`: optimal, degraded, rebuilding,
    /// incomplete (members not here that the superblock calls active) or
    /// failed.
    fn health(&self, sb: &Superblock) -> &'static str {
        let st = self.state();
        let failed = self.out_members(false);
        let rebuilding = st
            .members
            .iter()
            .any(|s| matches!(s, MemberState::Rebuilding { .. }));
        // Not in sync (failed, absent, or rebuilt only in part): if the array
        // cannot read everything without them, data is lost.
        let unreadable: Vec<usize> = (0..st.members.len())
            .filter(|&i| self.holds[i] && st.members[i] != MemberState::InSync)
            .collect();
        let tolerance = self.layout.redundancy().tolerance();
        if failed > tolerance || !hetraid_core::layout::survives(self.layout(), &unreadable) {
            // Members the superblock calls active that are not here (not
            // given): the array is incomplete, not failed, unless what is
            // known to be out is already too much (mdadm: inactive).
            let known_out: Vec<usize> = unreadable
                .iter()
                .copied()
                .filter(|&i| self.hot.slots[i].present() || sb.roles[i].state != RoleState::Active)
                .collect();
            let absent = unreadable.len() > known_out.len();
            if absent
                && known_out.len() <= tolerance
                && hetraid_core::layout::survives(self.layout(), &known_out)
            {
                "incomplete"
            } else {
                "failed"
            }
        } else if rebuilding {
            "rebuilding"
        } else if failed > 0 {
            "degraded"
        } else {
            "optimal"
        }
    }

    /// The stripe geometry a filesystem should line up with.
    pub fn fs_alignment(&self) -> hetraid_core::layout::FsAlignment {
        hetraid_core::layout::FsAlignment {
            chunk_bytes: self.layout.chunk_bytes(),
            data_chunks: self.layout.data_per_stripe(),
        }
    }

    pub fn status(&self) -> Status {
        let sb = self.superblock();
        let state = self.health(&sb);
        let sit_out = self.sit_out_states(sb.roles.len());
        let usage = self
            .usage
            .get_or_init(|| hetraid_core::layout::member_usage(self.layout()));
        let s2 = self.layout.name().starts_with("s2raid");
        let bound = capacity_bound(&sb);
        Status {
            uuid: sb.uuid_string(),
            name: self.name(),
            parity_order: (sb.layout.name == "raid5").then(|| {
                sb.layout
                    .parity_order
                    .as_deref()
                    .and_then(|o| hetraid_core::layout::ParityOrder::parse(o).ok())
                    .unwrap_or(hetraid_core::layout::ParityOrder::LeftSymmetric)
                    .as_str()
                    .into()
            }),
            layout: self.layout.name(),
            // What the layout was built with: a stored count, or the old
            // default K = G (m) for arrays that stored none.
            partitions: s2.then(|| {
                sb.layout
                    .partitions
                    .unwrap_or(sb.layout.group.unwrap_or(sb.roles.len() / 2))
            }),
            spare_partitions: s2.then_some(sb.layout.spare_partitions),
            members: sb.roles.len(),
            chunk_bytes: sb.chunk_bytes,
            capacity_bytes: self.capacity(),
            stripe_count: self.layout.stripe_count(),
            policy: sb.policy.as_str().into(),
            read_policy: self
                .keeps_copies()
                .then(|| self.read_policy().name().into()),
            events: sb.events,
            clean: sb.clean,
            state: state.into(),
            dirty_regions: self.bitmap.lock().unwrap().dirty().len(),
            member_states: sb
                .roles
                .iter()
                .enumerate()
                .map(|(i, r)| MemberStatus {
                    device: i,
                    path: self.hot.slots[i].get().map(|m| m.name()),
                    last_path: self.last_path(i),
                    state: if !self.hot.slots[i].present() && r.state == RoleState::Active {
                        "missing".into()
                    } else {
                        r.state.as_str().into()
                    },
                    kind: r.kind.as_str().into(),
                    data_bytes: r.data_size,
                    rebuild_checkpoint: (r.state == RoleState::Rebuilding)
                        .then_some(r.rebuild_checkpoint),
                    readd: r.resync,
                    used_bytes: usage.get(i).map_or(0, |u| u.chunks() * sb.chunk_bytes),
                    unused_bytes: r
                        .data_size
                        .saturating_sub(usage.get(i).map_or(0, |u| u.chunks() * sb.chunk_bytes)),
                    redundancy_share: usage.get(i).map_or(0.0, |u| u.redundancy_share()),
                    read_errors: self.error_counts(i).read,
                    write_errors: self.error_counts(i).write,
                    checksum_errors: self.error_counts(i).checksum,
                    io: self
                        .measuring_since
                        .get()
                        .map(|_| self.hot.slots[i].io_stats()),
                    sat_out_ms_left: sit_out[i].0,
                    read_latency_us: sit_out[i].1,
                })
                .collect(),
            warnings: {
                let mut w = self.warnings.lock().unwrap().clone();
                if let Some(l) = &self.log {
                    w.extend(l.warnings());
                }
                w
            },
            last_scrub: sb.last_scrub,
            checksums: sb.checksums,
            consistency: if let Some(l) = sb.log {
                l.mode.name().into()
            } else if self.layout.redundancy() != hetraid_core::Redundancy::None || sb.checksums {
                "bitmap".into()
            } else {
                "none".into()
            },
            log: self.log.as_ref().map(|l| {
                let devices: Vec<LogDeviceStatus> = l
                    .devices()
                    .into_iter()
                    .enumerate()
                    .map(|(copy, (path, kind, live))| LogDeviceStatus {
                        copy,
                        path,
                        kind: kind.as_str().into(),
                        state: if live { "active" } else { "faulty" }.into(),
                    })
                    .collect();
                let (ring_bytes, used_bytes, records) = l.usage();
                LogStatus {
                    mode: l.mode().name().into(),
                    state: if devices.iter().all(|d| d.state == "active") {
                        "optimal"
                    } else {
                        "degraded"
                    }
                    .into(),
                    devices,
                    ring_bytes,
                    used_bytes,
                    records,
                    unreclaimed_bytes: l.unreclaimed_bytes(),
                    entries: l.entries(),
                    reclaimed_bytes: l.reclaimed_bytes(),
                }
            }),
            hpda: self.hpda_status(),
            bundle_table_bytes: sb.bundle_table.then(|| {
                sb.roles
                    .iter()
                    .filter(|r| r.state != crate::format::RoleState::Removed)
                    .map(|r| crate::bundles::table_bytes(r.data_size / sb.chunk_bytes))
                    .sum()
            }),
            capacity_bound_bytes: bound.map(|b| b.0),
            capacity_bound: bound.map(|b| b.1.to_string()),
            change: self.change_progress(),
            progress: self.progress(),
            spares: self.spare_status(),
            spares_missing: self.spares_missing(),
            departed: self.departed(),
            fs_alignment: Some(self.fs_alignment()),
            mkfs: Some(Mkfs {
                ext4: self.fs_alignment().ext4(),
                xfs: self.fs_alignment().xfs(),
            }),
            io: self.user_io().map(|c| c.snapshot()),
            io_seconds: self
                .measuring_since
                .get()
                .map(|t| t.elapsed().as_secs_f64()),
        }
    }
}

impl Array {
    /// The last failure of each slot whose device is no longer there while
    /// a replacement or a spare is being rebuilt into it (afterwards the
    /// events keep it).
    fn departed(&self) -> Vec<Departed> {
        use crate::annex::EventKind;
        let events = self.events();
        let sb = self.superblock();
        let mut out = Vec::new();
        for slot in 0..self.slot_count() {
            if sb.roles[slot].state != RoleState::Rebuilding {
                continue;
            }
            let Some(e) = events
                .iter()
                .rev()
                .find(|e| e.kind == EventKind::Failed && e.slot == Some(slot as u16))
            else {
                continue;
            };
            let now = self.path_of(slot).unwrap_or_default();
            let back = events.iter().any(|x| {
                x.seq > e.seq
                    && x.slot == Some(slot as u16)
                    && matches!(x.kind, EventKind::ReAdded | EventKind::Attached)
                    && x.detail == e.detail
            });
            if !e.detail.is_empty() && e.detail != now && !back {
                out.push(Departed {
                    slot,
                    path: e.detail.clone(),
                    event_seq: e.seq,
                    time_unix_ms: e.time_unix_ms,
                });
            }
        }
        out
    }
}

/// RAIDX: the capacity bound over the members as they are now (a removed
/// slot holds nothing), and what it is in words.
fn capacity_bound(sb: &crate::format::Superblock) -> Option<(u64, &'static str)> {
    let mut spec = super::assemble::spec_of(sb).ok()?;
    for (size, r) in spec.sizes.iter_mut().zip(&sb.roles) {
        if r.state == crate::format::RoleState::Removed {
            *size = 0;
        }
    }
    hetraid_core::layout::raidx_widths::spec_bound(&spec)
}
