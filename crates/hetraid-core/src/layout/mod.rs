//! Layouts: pure maps from logical chunks to (member, member offset).
//!
//! Every layout is described as a sequence of *stripes* (redundancy groups): the
//! data chunks in logical order, their parity chunks (P, then Q) and, for mirrored
//! layouts, the extra copies of each data chunk. The planner only ever looks at a
//! layout through [`Layout`], so a new layout needs no planner change.

/// The accessors of layouts made of `rows` equal rows across `n` members.
macro_rules! row_accessors {
    () => {
        fn members(&self) -> usize {
            self.n
        }
        fn chunk_bytes(&self) -> u64 {
            self.chunk
        }
        fn stripe_count(&self) -> u64 {
            self.rows
        }
    };
}

mod classic;
mod declustered;
mod direct;
mod fs_alignment;
mod hpda;
mod presets;
mod raidh;
mod raidx;
pub mod raidx_grow;
pub mod raidx_history;
pub mod raidx_widths;
mod remap;
pub mod reshape;
mod s2;

pub use classic::{ParityOrder, Raid0, Raid1, Raid10, Raid4, Raid5, Raid6};
pub use declustered::Declustered;
pub use direct::{DirectMap, Placement};
pub use fs_alignment::FsAlignment;
pub use hpda::{Hpda, LogRegion};
pub use presets::{Permuted, Preset};
pub use raidh::{swrr_cycle, swrr_pairs, RaidH, RaidH6};
pub use raidx::{max_bundles, position_roles, PositionRole, RaidX, RaidXLevel, NO_LABEL};
pub use remap::{Move, Remapped};
pub use s2::{default_partitions, is_prime, S2Raid10, S2Raid5};

use crate::error::LayoutError;
use crate::member::MemberKind;
use crate::units::PAGE;
use serde::Serialize;

/// Most members one array may have (stripe column sets are 64-bit masks).
/// Members a layout may have (the engine's superblock holds 64; the
/// simulator models up to this many, a 90-disk declustered shelf).
pub const MAX_MEMBERS: usize = 128;

/// One chunk's place: member index and byte offset in that member's data area.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct ChunkLoc {
    #[serde(rename = "device")]
    pub member: usize,
    pub offset: u64,
}

/// What protects a stripe's data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Redundancy {
    None,
    /// Every data chunk has `copies` copies in all (data + mirrors).
    Mirror {
        copies: usize,
    },
    /// 1 = XOR parity (P), 2 = P + Q.
    Parity {
        count: usize,
    },
}

impl Redundancy {
    /// Member failures any stripe survives.
    pub fn tolerance(self) -> usize {
        match self {
            Self::None => 0,
            Self::Mirror { copies } => copies - 1,
            Self::Parity { count } => count,
        }
    }
}

/// One redundancy group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Stripe {
    #[serde(rename = "stripe")]
    pub index: u64,
    /// Data chunks in logical order.
    pub data: Vec<ChunkLoc>,
    /// P, then Q.
    pub parity: Vec<ChunkLoc>,
    /// For each data chunk, its extra copies (empty for parity layouts).
    pub mirrors: Vec<Vec<ChunkLoc>>,
}

impl Stripe {
    /// Every chunk of the stripe.
    pub fn all(&self) -> impl Iterator<Item = ChunkLoc> + '_ {
        self.data
            .iter()
            .chain(self.parity.iter())
            .chain(self.mirrors.iter().flatten())
            .copied()
    }
}

/// A layout: geometry only. Implementations are cheap to query and deterministic.
pub trait Layout: Send + Sync + std::fmt::Debug {
    /// Canonical name (`raid5`, `raidh`, `s2raid5`, ...).
    fn name(&self) -> String;
    fn members(&self) -> usize;
    fn chunk_bytes(&self) -> u64;
    fn stripe_count(&self) -> u64;
    /// Data chunks per stripe (constant for a layout).
    fn data_per_stripe(&self) -> usize;
    fn redundancy(&self) -> Redundancy;
    /// Geometry of stripe `s < stripe_count()`.
    fn stripe(&self, s: u64) -> Stripe;

    /// Where data chunk `idx` of stripe `s` lives (layouts override this to skip
    /// building the whole stripe on the read fast path).
    fn data_loc(&self, s: u64, idx: usize) -> ChunkLoc {
        self.stripe(s).data[idx]
    }

    /// Logical chunk -> (stripe, data index). Default: stripes hold consecutive chunks.
    fn locate_chunk(&self, logical_chunk: u64) -> (u64, usize) {
        let (q, r) = divmod(logical_chunk, self.data_per_stripe() as u64);
        (q, r as usize)
    }

    /// Inverse of [`Layout::locate_chunk`].
    fn logical_chunk(&self, stripe: u64, data_index: usize) -> u64 {
        stripe * self.data_per_stripe() as u64 + data_index as u64
    }

    fn capacity_bytes(&self) -> u64 {
        self.stripe_count() * self.data_per_stripe() as u64 * self.chunk_bytes()
    }

    /// Data chunks of stripe `s`: [`Layout::data_per_stripe`] for every
    /// stripe except where widths vary (RAIDX placed to its capacity
    /// bound), where that is the widest stripe's.
    fn data_in_stripe(&self, _s: u64) -> usize {
        self.data_per_stripe()
    }

    /// The read fast path's arithmetic ([`DirectMap`]), for layouts that
    /// are plain striping; None (the default) leaves reads to the planner.
    /// A wrapper (relocations) must not pass its inner layout's map on.
    fn direct_map(&self) -> Option<DirectMap> {
        None
    }

    /// Stripes after which the placement pattern repeats (RAID5: n, RAIDH: sum of
    /// weights). Used to enumerate every distinct start position once.
    fn parity_cycle(&self) -> u64 {
        self.stripe_count()
    }

    /// RAIDX: number of bundles allocated.
    fn bundles(&self) -> Option<u64> {
        None
    }

    /// HPDA: the mirrored log regions.
    fn log_regions(&self) -> Vec<LogRegion> {
        Vec::new()
    }

    /// Spare space: where the lost chunk `lost` is rebuilt when redirected to spare
    /// slot `slot` on member `target`; `None` when the layout reserves no spare space
    /// (then rebuilds go to a replacement member in place).
    fn spare_location(&self, _lost: ChunkLoc, _target: usize, _slot: usize) -> Option<ChunkLoc> {
        None
    }

    /// The extent (offset, length) that moves as a unit when the chunk at `lost` is
    /// rebuilt into spare space: its whole partition for S2-RAID.
    fn spare_extent(&self, _lost: ChunkLoc) -> Option<(u64, u64)> {
        None
    }

    /// Spare slots per member (0 = none).
    fn spare_slots(&self) -> usize {
        0
    }

    /// A layout part-way through a reshape (its mark moves between steps);
    /// None for every other.
    fn as_reshaping(&self) -> Option<&reshape::Reshaping> {
        None
    }

    /// Spare space the layout places itself, chunk by chunk (declustered:
    /// in every row), rather than on a member the rebuild scheduler picks.
    fn distributed_spare(&self) -> bool {
        false
    }

    /// How many times a RAID5's stripes per rebuild batch this layout takes
    /// so each member still sees about one batch-sized operation: a
    /// declustered group touches G of N members (core `batch_stripes`).
    fn rebuild_spread(&self) -> u64 {
        1
    }

    /// The layout once `failed` members (in that order) have been rebuilt
    /// into its distributed spare space, when it computes that itself rather
    /// than from a list of moved extents.
    fn relocated(&self, _failed: &[usize]) -> Option<Box<dyn Layout>> {
        None
    }

    /// The member rebuilt into distributed spare space last, and the layout
    /// with its chunks home again (on a replacement in its slot): what a
    /// copy-back ("rebalance", as dRAID calls it) changes to. Only the last
    /// one: an earlier member's removal would move the chunks of those that
    /// failed after it, whose spare homes depended on it.
    fn restored(&self) -> Option<(usize, Box<dyn Layout>)> {
        None
    }
}

/// Which layout, with its own parameters.
#[derive(Debug, Clone, PartialEq)]
pub enum LayoutKind {
    Raid0,
    Raid1,
    Raid10 {
        copies: usize,
    },
    Raid4,
    Raid5 {
        order: ParityOrder,
    },
    Raid6,
    RaidH {
        weights: Vec<u64>,
    },
    /// Weighted RAID6: P and Q both placed by weights.
    RaidH6 {
        weights: Vec<u64>,
    },
    S2Raid5 {
        group: usize,
        partitions: Option<usize>,
        spare_partitions: usize,
    },
    S2Raid10 {
        partitions: Option<usize>,
        spare_partitions: usize,
    },
    RaidX {
        /// Chunks per bundle; 0: each bundle as wide as it can be where it
        /// is placed (the capacity bound, [`raidx_widths`]).
        chunks_per_bundle: usize,
        level: Option<RaidXLevel>,
        /// RAIDX5/6: parity weight per member (empty: parity rotates within
        /// each bundle).
        weights: Vec<u64>,
    },
    Hpda,
    /// Parity declustering with distributed spare space (issue 20).
    Declustered {
        width: usize,
        parity: usize,
        spares: usize,
    },
    Preset(Preset),
}

impl LayoutKind {
    /// This kind with S2-RAID's partition count made explicit for `members`
    /// members ([`s2::default_partitions`]: K = G, or G − 1 with spare space).
    /// The engine stores the result, so an array never depends on a later
    /// default; other kinds are returned as they are.
    pub fn with_default_partitions(self, members: usize) -> Self {
        match self {
            LayoutKind::S2Raid5 {
                group,
                partitions: None,
                spare_partitions,
            } => LayoutKind::S2Raid5 {
                group,
                partitions: Some(s2::default_partitions(group, spare_partitions)),
                spare_partitions,
            },
            LayoutKind::S2Raid10 {
                partitions: None,
                spare_partitions,
            } => LayoutKind::S2Raid10 {
                partitions: Some(s2::default_partitions(members / 2, spare_partitions)),
                spare_partitions,
            },
            other => other,
        }
    }

    /// S2-RAID's partition count, when this kind has one and it is set.
    pub fn partitions(&self) -> Option<usize> {
        match self {
            LayoutKind::S2Raid5 { partitions, .. } | LayoutKind::S2Raid10 { partitions, .. } => {
                *partitions
            }
            _ => None,
        }
    }

    /// Parse a layout name (parameters come from [`LayoutSpec`]'s other fields).
    pub fn names() -> &'static [&'static str] {
        &[
            "raid0",
            "raid1",
            "raid10",
            "raid4",
            "raid5",
            "raid6",
            "raidh",
            "raidh6",
            "s2raid5",
            "s2raid10",
            "raidx",
            "hpda",
            "declustered",
            "raid4s",
            "raid4n",
            "raid5s",
            "raidf5",
            "raide",
            "raid5nss",
        ]
    }
}

/// Everything needed to build a layout.
#[derive(Debug, Clone, PartialEq)]
pub struct LayoutSpec {
    pub kind: LayoutKind,
    pub chunk_bytes: u64,
    /// Data-area size of each member in bytes (defines the member count).
    pub sizes: Vec<u64>,
    /// Member kinds (for presets, HPDA and the cost policy); empty = all HDD.
    pub kinds: Vec<MemberKind>,
}

impl LayoutSpec {
    /// Member kinds, defaulting to all HDD.
    pub fn kinds_or_default(&self) -> Vec<MemberKind> {
        if self.kinds.is_empty() {
            vec![MemberKind::Hdd; self.sizes.len()]
        } else {
            self.kinds.clone()
        }
    }
}

/// Chunks of `chunk` bytes that fit in the smallest member.
pub(crate) fn min_chunks(sizes: &[u64], chunk: u64) -> u64 {
    sizes.iter().copied().min().unwrap_or(0) / chunk
}

pub(crate) fn need_members(layout: &str, got: usize, min: usize) -> Result<(), LayoutError> {
    if got < min {
        return Err(LayoutError::TooFewMembers {
            layout: layout.to_string(),
            min,
            got,
        });
    }
    Ok(())
}

/// Build a layout from its spec, validating every parameter.
pub fn build(spec: &LayoutSpec) -> Result<Box<dyn Layout>, LayoutError> {
    let n = spec.sizes.len();
    let c = spec.chunk_bytes;
    if c == 0 || !c.is_multiple_of(PAGE) {
        return Err(LayoutError::BadChunk(c));
    }
    if n > MAX_MEMBERS {
        return Err(LayoutError::TooManyMembers {
            max: MAX_MEMBERS,
            got: n,
        });
    }
    if !spec.kinds.is_empty() && spec.kinds.len() != n {
        return Err(LayoutError::CountMismatch {
            what: "--kinds".into(),
            got: spec.kinds.len(),
            members: n,
        });
    }
    let sizes = &spec.sizes;
    let layout: Box<dyn Layout> = match &spec.kind {
        LayoutKind::Raid0 => Box::new(Raid0::new(sizes, c)?),
        LayoutKind::Raid1 => Box::new(Raid1::new(sizes, c)?),
        LayoutKind::Raid10 { copies } => Box::new(Raid10::new(sizes, c, *copies)?),
        LayoutKind::Raid4 => Box::new(Raid4::new(sizes, c)?),
        LayoutKind::Raid5 { order } => Box::new(Raid5::new(sizes, c, *order)?),
        LayoutKind::Raid6 => Box::new(Raid6::new(sizes, c)?),
        LayoutKind::RaidH { weights } => Box::new(RaidH::new(sizes, c, weights)?),
        LayoutKind::RaidH6 { weights } => Box::new(RaidH6::new(sizes, c, weights)?),
        LayoutKind::S2Raid5 {
            group,
            partitions,
            spare_partitions,
        } => Box::new(S2Raid5::new(
            sizes,
            c,
            *group,
            *partitions,
            *spare_partitions,
        )?),
        LayoutKind::S2Raid10 {
            partitions,
            spare_partitions,
        } => Box::new(S2Raid10::new(sizes, c, *partitions, *spare_partitions)?),
        LayoutKind::RaidX {
            chunks_per_bundle,
            level,
            weights,
        } if *chunks_per_bundle == 0 => {
            Box::new(RaidX::variable_with_weights(sizes, c, *level, weights)?)
        }
        LayoutKind::RaidX {
            chunks_per_bundle,
            level,
            weights,
        } => Box::new(RaidX::with_weights(
            sizes,
            c,
            *chunks_per_bundle,
            *level,
            weights,
        )?),
        LayoutKind::Hpda => Box::new(Hpda::new(sizes, c, &spec.kinds_or_default())?),
        LayoutKind::Declustered {
            width,
            parity,
            spares,
        } => Box::new(Declustered::new(sizes, c, *width, *parity, *spares)?),
        LayoutKind::Preset(p) => p.build(sizes, c, &spec.kinds_or_default())?,
    };
    Ok(layout)
}

/// The declustered layout's options as given (`--width`, `--parity`,
/// `--spares`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeclusterParams {
    pub width: Option<usize>,
    pub parity: Option<usize>,
    pub spares: Option<usize>,
}

/// A layout as a user names it: its name and every layout option, None
/// where not given. [`LayoutOptions::kind`] checks which options apply and
/// builds the kind: the one home of these rules, which `hetraid create` and
/// `layout`, the simulator's config and the superblock's record all fill in
/// (a ten-argument function did, positionally, before).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LayoutOptions {
    pub name: String,
    /// Parity weights (raidh, raidh6, raidx5/6).
    pub weights: Option<Vec<u64>>,
    /// RAID5's parity rotation by name.
    pub parity_order: Option<String>,
    /// RAID10's copies.
    pub copies: Option<usize>,
    /// S²-RAID5's group (a prime).
    pub group: Option<usize>,
    /// S²-RAID's partitions per member, and spare partitions.
    pub partitions: Option<usize>,
    pub spare_partitions: usize,
    /// RAIDX's bundle width and level.
    pub chunks_per_bundle: Option<usize>,
    pub raidx_level: Option<String>,
    /// The declustered layout's width, parity and spares.
    pub declustered: DeclusterParams,
}

impl LayoutOptions {
    /// The layout `name` with no option given.
    pub fn named(name: &str) -> Self {
        Self {
            name: name.to_string(),
            ..Default::default()
        }
    }

    /// Is this the declustered layout (dRAID), by either of its names?
    pub fn is_declustered(&self) -> bool {
        matches!(
            self.name.to_ascii_lowercase().as_str(),
            "declustered" | "draid"
        )
    }

    /// The kind these options name, or why they name none (an unknown
    /// layout, a missing parameter, an option that does not apply).
    pub fn kind(&self) -> Result<LayoutKind, LayoutError> {
        let LayoutOptions {
            name,
            weights,
            parity_order,
            copies,
            group,
            partitions,
            spare_partitions,
            chunks_per_bundle,
            raidx_level,
            declustered: decl,
        } = self;
        let (weights, order, copies, group, partitions, spare_partitions) = (
            weights.clone(),
            parity_order.as_deref(),
            *copies,
            *group,
            *partitions,
            *spare_partitions,
        );
        let (chunks_per_bundle, raidx_level, decl) =
            (*chunks_per_bundle, raidx_level.as_deref(), *decl);
        let has_weights = weights.is_some();
        let lname = name.to_ascii_lowercase().replace(['-', '_', '²'], "");
        let kind = match lname.as_str() {
        "raid0" => LayoutKind::Raid0,
        "raid1" => LayoutKind::Raid1,
        "raid10" => LayoutKind::Raid10 {
            copies: copies.unwrap_or(2),
        },
        "raid4" => LayoutKind::Raid4,
        "raid5" => LayoutKind::Raid5 {
            order: ParityOrder::parse(order.unwrap_or("left-symmetric"))?,
        },
        "raid6" => LayoutKind::Raid6,
        "raidh" => LayoutKind::RaidH {
            weights: weights.ok_or_else(|| {
                LayoutError::Invalid(
                    "raidh needs --weights w0,w1,... with one parity weight per member".into(),
                )
            })?,
        },
        "raidh6" => LayoutKind::RaidH6 {
            weights: weights.ok_or_else(|| {
                LayoutError::Invalid(
                    "raidh6 needs --weights w0,w1,... with one parity weight per member (P and Q both follow them)".into(),
                )
            })?,
        },
        "s2raid5" | "sraid5" => LayoutKind::S2Raid5 {
            group: group.ok_or_else(|| {
                LayoutError::Invalid("s2raid5 needs --group G (a prime, e.g. 3)".into())
            })?,
            partitions,
            spare_partitions,
        },
        "s2raid10" | "sraid10" => LayoutKind::S2Raid10 {
            partitions,
            spare_partitions,
        },
        "raidx" => {
            // Without c: widths chosen per bundle, to the capacity bound.
            let c = chunks_per_bundle.unwrap_or(0);
            if chunks_per_bundle == Some(0) {
                return Err(LayoutError::Invalid(
                    "--chunks-per-bundle must be at least 1 (leave it out for widths chosen per bundle)".into(),
                ));
            }
            let level = raidx_level.map(RaidXLevel::parse).transpose()?;
            let parity = matches!(
                level.unwrap_or(RaidXLevel::default_for(c)),
                RaidXLevel::X5 | RaidXLevel::X6
            );
            if weights.is_some() && !parity {
                return Err(LayoutError::Invalid(
                    "--weights places parity: it applies to raidh and to raidx at levels 5 and 6, not to this raidx".into(),
                ));
            }
            LayoutKind::RaidX {
                chunks_per_bundle: c,
                level,
                weights: weights.clone().unwrap_or_default(),
            }
        }
        "hpda" => LayoutKind::Hpda,
        "declustered" | "draid" => LayoutKind::Declustered {
            width: decl.width.ok_or_else(|| {
                LayoutError::Invalid(
                    "declustered needs --width G (members per redundancy group, parity included)".into(),
                )
            })?,
            parity: decl.parity.unwrap_or(1),
            spares: decl.spares.unwrap_or(1),
        },
        other => match Preset::parse(other) {
            Some(p) => LayoutKind::Preset(p),
            None => {
                return Err(LayoutError::Invalid(format!(
                    "layout '{name}' is unknown; choose one of {}",
                    LayoutKind::names().join(", ")
                )))
            }
        },
    };
        self.refuse_what_does_not_apply(&kind, has_weights)?;
        Ok(kind)
    }

    /// An option that does not apply to the layout is an error, not a
    /// different run (or array) than the one asked for.
    fn refuse_what_does_not_apply(
        &self,
        kind: &LayoutKind,
        has_weights: bool,
    ) -> Result<(), LayoutError> {
        let (name, order, copies, group, partitions, spare_partitions) = (
            &self.name,
            self.parity_order.as_deref(),
            self.copies,
            self.group,
            self.partitions,
            self.spare_partitions,
        );
        let (chunks_per_bundle, raidx_level, decl) = (
            self.chunks_per_bundle,
            self.raidx_level.as_deref(),
            self.declustered,
        );
        if has_weights
            && !matches!(
                *kind,
                LayoutKind::RaidH { .. } | LayoutKind::RaidH6 { .. } | LayoutKind::RaidX { .. }
            )
        {
            return Err(LayoutError::Invalid(format!(
                "--weights applies to raidh, raidh6 and raidx5/6 only, not to '{name}'"
            )));
        }
        // An option that does not apply to the layout is an error, not a
        // different run (or array) than the one asked for.
        let refuse = |given: bool, what: &str, applies: &str| {
            if given {
                Err(LayoutError::Invalid(format!(
                "{what} applies to {applies}, not to '{name}'; leave it out or choose that layout"
            )))
            } else {
                Ok(())
            }
        };
        refuse(
            order.is_some() && !matches!(kind, LayoutKind::Raid5 { .. }),
            "--parity-order",
            "raid5",
        )?;
        refuse(
            copies.is_some() && !matches!(kind, LayoutKind::Raid10 { .. }),
            "--copies",
            "raid10",
        )?;
        refuse(
            group.is_some() && !matches!(kind, LayoutKind::S2Raid5 { .. }),
            "--group",
            "s2raid5",
        )?;
        let s2 = matches!(
            kind,
            LayoutKind::S2Raid5 { .. } | LayoutKind::S2Raid10 { .. }
        );
        refuse(
            partitions.is_some() && !s2,
            "--partitions",
            "s2raid5 and s2raid10",
        )?;
        refuse(
            spare_partitions > 0 && !s2,
            "--spare-partitions",
            "s2raid5 and s2raid10",
        )?;
        let raidx = matches!(kind, LayoutKind::RaidX { .. });
        refuse(
            chunks_per_bundle.is_some() && !raidx,
            "--chunks-per-bundle",
            "raidx",
        )?;
        refuse(raidx_level.is_some() && !raidx, "--raidx-level", "raidx")?;
        let declustered = matches!(kind, LayoutKind::Declustered { .. });
        refuse(
            decl.width.is_some() && !declustered,
            "--width",
            "declustered",
        )?;
        refuse(
            decl.parity.is_some() && !declustered,
            "--parity",
            "declustered",
        )?;
        refuse(
            decl.spares.is_some() && !declustered,
            "--spares",
            "declustered",
        )?;
        Ok(())
    }
}

impl LayoutKind {
    /// Does where chunks and parity go depend on the member kinds? (The
    /// presets put parity on SSDs; HPDA needs SSDs and HDDs; RAIDX5/6 take
    /// their parity weights from the kinds at create, see
    /// [`weights_from_kinds`].) Elsewhere kinds are recorded (status, read
    /// balancing, the cost policy) but do not move a byte.
    pub fn geometry_uses_kinds(&self) -> bool {
        match self {
            LayoutKind::Preset(_) | LayoutKind::Hpda => true,
            LayoutKind::RaidX {
                chunks_per_bundle,
                level,
                weights,
            } => {
                weights.is_empty()
                    && matches!(
                        level.unwrap_or(RaidXLevel::default_for(*chunks_per_bundle)),
                        RaidXLevel::X5 | RaidXLevel::X6
                    )
            }
            _ => false,
        }
    }
}

/// RAIDX5/6 created with member kinds and no `--weights`: parity goes to
/// the solid-state members where a bundle has one (weight 1 for ssd and
/// nvram, 0 for hdd), as RAID4S and RAIDH put it on the SSD. None when the
/// kinds say nothing (all disks) or the layout is not RAIDX5/6. Called at
/// create (and by the simulator's setup), and the result stored as the
/// array's weights: an array's layout never changes with a later reading of
/// its kinds.
pub fn weights_from_kinds(kind: &LayoutKind, kinds: &[MemberKind]) -> Option<Vec<u64>> {
    if !matches!(kind, LayoutKind::RaidX { .. }) || !kind.geometry_uses_kinds() {
        return None;
    }
    kinds.iter().any(|k| *k != MemberKind::Hdd).then(|| {
        kinds
            .iter()
            .map(|k| u64::from(*k != MemberKind::Hdd))
            .collect()
    })
}

/// Stripes [`survives`] reads at most before it answers "no" to be safe.
pub const SURVIVAL_SCAN_MAX: u64 = 1 << 20;

/// Kinds an operator gave that contradict the layout (a preset or HPDA,
/// whose geometry the kinds decide): one sentence. Kinds not given at all
/// are not checked here (the layout takes its canonical order and says so).
pub fn check_given_kinds(kind: &LayoutKind, kinds: &[MemberKind]) -> Result<(), String> {
    match kind {
        LayoutKind::Preset(p) => p.check_kinds(kinds),
        LayoutKind::Hpda => {
            let ssds = kinds.iter().filter(|k| **k != MemberKind::Hdd).count();
            hpda::kinds_fit(ssds, kinds.len() - ssds)
        }
        _ => Ok(()),
    }
}

/// How one member's chunks are used: data, and redundancy (parity or
/// copies). `status` shows the redundancy share per member; heterogeneous
/// layouts exist to put it where it costs least (RAID4S: all on the SSD).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct MemberUsage {
    pub data_chunks: u64,
    pub redundancy_chunks: u64,
}

impl MemberUsage {
    pub fn chunks(&self) -> u64 {
        self.data_chunks + self.redundancy_chunks
    }

    /// Redundancy chunks among the member's chunks (0 when it holds none).
    pub fn redundancy_share(&self) -> f64 {
        self.redundancy_chunks as f64 / self.chunks().max(1) as f64
    }
}

/// Stripes counted one by one at most; beyond, one parity cycle is counted
/// and scaled (layouts without bundles repeat it exactly).
pub const USAGE_SCAN_MAX: u64 = 1 << 20;

/// Per member, the chunks of every stripe it holds, by role.
pub fn member_usage(layout: &dyn Layout) -> Vec<MemberUsage> {
    let mut u = vec![MemberUsage::default(); layout.members()];
    let total = layout.stripe_count();
    let (scan, scale) = if total <= USAGE_SCAN_MAX || layout.bundles().is_some() {
        (total, 1.0)
    } else {
        let c = layout.parity_cycle().clamp(1, total);
        (c, total as f64 / c as f64)
    };
    for s in 0..scan {
        let st = layout.stripe(s);
        for c in &st.data {
            u[c.member].data_chunks += 1;
        }
        for c in st.parity.iter().chain(st.mirrors.iter().flatten()) {
            u[c.member].redundancy_chunks += 1;
        }
    }
    if scale != 1.0 {
        for x in &mut u {
            x.data_chunks = (x.data_chunks as f64 * scale) as u64;
            x.redundancy_chunks = (x.redundancy_chunks as f64 * scale) as u64;
        }
    }
    u
}

/// Can every byte of the array still be read with the members `out` unreadable?
/// Within the redundancy's tolerance (counting only members that hold chunks)
/// the answer is yes; beyond it, every stripe is looked at (RAID10 survives two
/// failures that are not mirror partners; S²-RAID two in different sub-arrays).
/// A layout with more than [`SURVIVAL_SCAN_MAX`] stripes answers no beyond the
/// tolerance: a refusal the operator can override, never a wrong yes.
pub fn survives(layout: &dyn Layout, out: &[usize]) -> bool {
    let n = layout.members();
    let mut is_out = vec![false; n];
    out.iter()
        .filter(|&&m| m < n)
        .for_each(|&m| is_out[m] = true);
    let tol = layout.redundancy().tolerance();
    if out.iter().filter(|&&m| m < n).count() <= tol {
        return true;
    }
    if layout.stripe_count() > SURVIVAL_SCAN_MAX {
        return false;
    }
    (0..layout.stripe_count()).all(|s| {
        let st = layout.stripe(s);
        match layout.redundancy() {
            Redundancy::Mirror { .. } => st.data.iter().enumerate().all(|(i, d)| {
                !is_out[d.member]
                    || st
                        .mirrors
                        .get(i)
                        .is_some_and(|m| m.iter().any(|c| !is_out[c.member]))
            }),
            r => st.all().filter(|c| is_out[c.member]).count() <= r.tolerance(),
        }
    })
}

/// `(a / b, a % b)`, with a 32-bit division when both fit (about half the
/// latency of a 64-bit one on current x86; the read fast path divides on
/// every read).
#[inline]
pub(crate) fn divmod(a: u64, b: u64) -> (u64, u64) {
    if (a | b) >> 32 == 0 {
        let (a, b) = (a as u32, b as u32);
        ((a / b) as u64, (a % b) as u64)
    } else {
        (a / b, a % b)
    }
}

#[cfg(test)]
mod usage_tests {
    use super::*;

    #[test]
    fn raid4s_puts_all_parity_on_the_ssd_and_raid5_spreads_it() {
        let sizes = vec![64 << 20; 4];
        let kinds = vec![
            MemberKind::Hdd,
            MemberKind::Hdd,
            MemberKind::Hdd,
            MemberKind::Ssd,
        ];
        let r4s = build(&LayoutSpec {
            kind: LayoutKind::Preset(Preset::Raid4S),
            chunk_bytes: 64 << 10,
            sizes: sizes.clone(),
            kinds: kinds.clone(),
        })
        .unwrap();
        let u = member_usage(r4s.as_ref());
        assert_eq!(u[3].redundancy_share(), 1.0);
        assert!(u[..3].iter().all(|x| x.redundancy_chunks == 0));
        let r5 = build(&LayoutSpec {
            kind: LayoutKind::Raid5 {
                order: ParityOrder::LeftSymmetric,
            },
            chunk_bytes: 64 << 10,
            sizes,
            kinds,
        })
        .unwrap();
        for x in member_usage(r5.as_ref()) {
            assert!((x.redundancy_share() - 0.25).abs() < 0.01, "{x:?}");
        }
    }
}
