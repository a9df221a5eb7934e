//! What an array is made of, as one value, and the one home of the rules
//! that say whether it can exist.
//!
//! An [`ArraySpec`] names the layout and its parameters, the chunk, the
//! members' kinds, the write log, block checksums, the write buffer and the
//! read policy. [`ArraySpec::validate`] checks it against the members' data
//! areas and builds the layout: `hetraid create` (through the engine's
//! create), `hetraid layout` and the simulator's configuration all ask it,
//! so an array the simulator accepts is one the engine would create, and the
//! other way round. Its errors are values; each front end words them with its
//! own option names ([`Spelling`]). The superblock records the spec's layout
//! options (`LayoutOptions`, docs/FORMAT.md bytes 72..120).

use crate::layout::{
    build, weights_from_kinds, DeclusterParams, Layout, LayoutKind, LayoutOptions, LayoutSpec,
};
use crate::logconfig::{self, LogChoice, LogConfigError, LogOptions};
use crate::readbalance::ReadPolicy;
use crate::{LayoutError, MemberKind};

/// The smallest chunk: one page.
pub const CHUNK_BYTES_MIN: u64 = crate::units::PAGE;
/// The largest chunk.
pub const CHUNK_BYTES_MAX: u64 = 1 << 30;

/// A chunk size an array can have: a power of two from 4 KiB to 1 GiB.
pub fn chunk_ok(chunk: u64) -> bool {
    chunk.is_power_of_two() && (CHUNK_BYTES_MIN..=CHUNK_BYTES_MAX).contains(&chunk)
}

/// An array as a user asks for it (before the members' sizes are known).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ArraySpec {
    /// The layout by name and its parameters.
    pub layout: LayoutOptions,
    pub chunk_bytes: u64,
    /// One per member, or empty: every member a disk.
    pub kinds: Vec<MemberKind>,
    /// The write log's options (none given: no log, except HPDA's own).
    pub log: LogOptions,
    /// A crc32c per 4 KiB block, verified on every read.
    pub checksums: bool,
    /// Writes acknowledged from memory and drained to the members.
    pub write_buffer: bool,
    /// How reads choose a copy (layouts with copies only).
    pub read_policy: Option<ReadPolicy>,
}

/// A spec that holds for its members: the layout built on their data areas.
pub struct ValidSpec {
    /// The layout kind, RAIDX5/6 parity weights taken from the kinds where
    /// none were given.
    pub kind: LayoutKind,
    /// One per member.
    pub kinds: Vec<MemberKind>,
    pub layout: Box<dyn Layout>,
    /// Where the log goes and how it is used (None: no log).
    pub log: Option<LogChoice>,
}

/// Why a spec cannot be an array, as a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpecError {
    NoMembers,
    KindsCount {
        kinds: usize,
        members: usize,
    },
    Chunk(u64),
    /// The options name no layout (unknown, a missing or inapplicable
    /// parameter).
    Options(LayoutError),
    /// The layout cannot be built on these members (sizes, count).
    Layout(LayoutError),
    Log(LogConfigError),
    WriteBufferWithLog,
    WriteBufferHpda,
    /// The read policy's layout keeps no copies.
    ReadPolicy(String),
}

/// A front end's names for the spec's options.
#[derive(Debug, Clone, Copy)]
pub struct Spelling {
    pub chunk: &'static str,
    pub kinds: &'static str,
    pub write_buffer: &'static str,
    pub read_policy: &'static str,
    pub log: &'static logconfig::Spelling,
}

/// `hetraid create`'s and `serve`'s options.
pub const CLI: Spelling = Spelling {
    chunk: "--chunk",
    kinds: "--kinds",
    write_buffer: "--write-buffer",
    read_policy: "--read-policy",
    log: &logconfig::CLI,
};

/// The simulator's configuration keys.
pub const SIM: Spelling = Spelling {
    chunk: "chunk",
    kinds: "kinds",
    write_buffer: "write_buffer",
    read_policy: "read_policy",
    log: &logconfig::SIM,
};

impl SpecError {
    /// One sentence that says what is wrong and how to fix it.
    pub fn sentence(&self, s: &Spelling) -> String {
        match self {
            Self::NoMembers => "give at least one member".into(),
            Self::KindsCount { kinds, members } => format!(
                "{} lists {kinds} kinds for {members} members; give one per member",
                s.kinds
            ),
            Self::Chunk(c) => format!(
                "{} {c} is not a power of two between 4K and 1G",
                s.chunk
            ),
            Self::Options(e) | Self::Layout(e) => e.to_string(),
            Self::Log(e) => e.sentence(s.log),
            Self::WriteBufferWithLog => format!(
                "{} and a write log do not go together: the log decides when a write is acknowledged",
                s.write_buffer
            ),
            Self::WriteBufferHpda => format!(
                "{} does not apply to hpda: its log decides when a write is acknowledged",
                s.write_buffer
            ),
            Self::ReadPolicy(e) => format!("{} {e}", s.read_policy),
        }
    }

    /// The layout's own error, for front ends that report it as such.
    pub fn layout_error(&self) -> Option<&LayoutError> {
        match self {
            Self::Options(e) | Self::Layout(e) => Some(e),
            _ => None,
        }
    }
}

impl ArraySpec {
    /// The layout options an array of members of `kinds` records: the
    /// defaults its layout resolves written down (S2-RAID's partition count,
    /// RAIDX5/6 parity weights from the kinds where none were given, no
    /// empty weight list), so an array never depends on a later default or
    /// a later reading of its kinds.
    pub fn stored_layout(&self, kinds: &[MemberKind]) -> Result<LayoutOptions, SpecError> {
        let named = self.layout.kind().map_err(SpecError::Options)?;
        let mut o = self.layout.clone();
        if o.partitions.is_none() {
            o.partitions = named
                .clone()
                .with_default_partitions(kinds.len())
                .partitions();
        }
        if let Some(w) = weights_from_kinds(&named, kinds) {
            o.weights = Some(w);
        }
        if o.weights.as_ref().is_some_and(|w| w.is_empty()) {
            o.weights = None;
        }
        if let LayoutKind::Declustered {
            width,
            parity,
            spares,
        } = named
        {
            o.name = "declustered".into();
            o.declustered = DeclusterParams {
                width: Some(width),
                parity: Some(parity),
                spares: Some(spares),
            };
        }
        if let LayoutKind::Raid5 { order } = named {
            o.parity_order = o.parity_order.map(|_| order.as_str().to_string());
        }
        Ok(o)
    }

    /// The layout kind an array of members of `kinds` is built with (the
    /// kind its stored options name).
    pub fn kind(&self, kinds: &[MemberKind]) -> Result<LayoutKind, SpecError> {
        self.stored_layout(kinds)?
            .kind()
            .map_err(SpecError::Options)
    }

    /// Check the spec against members with these data-area sizes (bytes
    /// each member gives the layout) and build the layout. The checks run
    /// in the order a user fixes them: members, kinds, chunk, layout
    /// options, log options, the layout on these sizes, then what depends
    /// on the layout.
    pub fn validate(&self, sizes: &[u64]) -> Result<ValidSpec, SpecError> {
        let n = sizes.len();
        if n == 0 {
            return Err(SpecError::NoMembers);
        }
        if !self.kinds.is_empty() && self.kinds.len() != n {
            return Err(SpecError::KindsCount {
                kinds: self.kinds.len(),
                members: n,
            });
        }
        if !chunk_ok(self.chunk_bytes) {
            return Err(SpecError::Chunk(self.chunk_bytes));
        }
        let kinds = match self.kinds.is_empty() {
            true => vec![MemberKind::Hdd; n],
            false => self.kinds.clone(),
        };
        let kind = self.kind(&kinds)?;
        let hpda = kind == LayoutKind::Hpda;
        let log = logconfig::choose(hpda, &self.log).map_err(SpecError::Log)?;
        let layout = build(&LayoutSpec {
            kind: kind.clone(),
            chunk_bytes: self.chunk_bytes,
            sizes: sizes.to_vec(),
            kinds: kinds.clone(),
        })
        .map_err(SpecError::Layout)?;
        if self.write_buffer && hpda {
            return Err(SpecError::WriteBufferHpda);
        }
        if self.write_buffer && log.is_some() {
            return Err(SpecError::WriteBufferWithLog);
        }
        if self.read_policy.is_some() {
            crate::readbalance::applies(layout.as_ref()).map_err(SpecError::ReadPolicy)?;
        }
        Ok(ValidSpec {
            kind,
            kinds,
            layout,
            log,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raid5() -> ArraySpec {
        ArraySpec {
            layout: LayoutOptions::named("raid5"),
            chunk_bytes: 64 << 10,
            ..Default::default()
        }
    }

    #[test]
    fn a_plain_raid5_builds_on_its_sizes() {
        let v = raid5().validate(&[1 << 30; 4]).unwrap();
        assert_eq!(v.layout.members(), 4);
        assert_eq!(v.kinds, vec![MemberKind::Hdd; 4]);
        assert!(v.log.is_none());
        assert_eq!(v.layout.capacity_bytes(), 3 << 30);
    }

    #[test]
    fn each_rule_refuses_with_its_own_error() {
        let sizes = [1u64 << 30; 4];
        assert_eq!(raid5().validate(&[]).err(), Some(SpecError::NoMembers));
        let mut s = raid5();
        s.kinds = vec![MemberKind::Ssd; 3];
        assert_eq!(
            s.validate(&sizes).err(),
            Some(SpecError::KindsCount {
                kinds: 3,
                members: 4
            })
        );
        for c in [0, 2048, 12 << 10, 2 << 30] {
            let mut s = raid5();
            s.chunk_bytes = c;
            assert_eq!(s.validate(&sizes).err(), Some(SpecError::Chunk(c)), "{c}");
        }
        let mut s = raid5();
        s.layout = LayoutOptions::named("raid7");
        assert!(matches!(s.validate(&sizes), Err(SpecError::Options(_))));
        let mut s = raid5();
        s.log.mode = Some("journal".into());
        assert_eq!(
            s.validate(&sizes).err(),
            Some(SpecError::Log(LogConfigError::ModeWithoutLog))
        );
        assert!(matches!(
            raid5().validate(&[1 << 30]),
            Err(SpecError::Layout(_))
        ));
        let mut s = raid5();
        s.write_buffer = true;
        s.log.devices = 1;
        assert_eq!(
            s.validate(&sizes).err(),
            Some(SpecError::WriteBufferWithLog)
        );
        let mut s = raid5();
        s.read_policy = Some(ReadPolicy::First);
        assert!(matches!(s.validate(&sizes), Err(SpecError::ReadPolicy(_))));
        s.layout = LayoutOptions::named("raid10");
        assert!(s.validate(&sizes).is_ok());
    }

    #[test]
    fn hpda_keeps_its_own_log_and_no_write_buffer() {
        let mut s = raid5();
        s.layout = LayoutOptions::named("hpda");
        s.kinds = vec![
            MemberKind::Ssd,
            MemberKind::Ssd,
            MemberKind::Ssd,
            MemberKind::Hdd,
            MemberKind::Hdd,
        ];
        // HDD-1 holds the parity and the log past it; HDD-2 the log.
        let sizes = [1 << 30, 1 << 30, 1 << 30, 2 << 30, 1 << 30];
        let v = s.validate(&sizes).unwrap();
        assert_eq!(v.log.unwrap().mode, logconfig::LogMode::WriteBack);
        s.write_buffer = true;
        assert_eq!(s.validate(&sizes).err(), Some(SpecError::WriteBufferHpda));
    }

    #[test]
    fn raidx5_takes_its_parity_weights_from_the_kinds() {
        let mut s = raid5();
        s.layout = LayoutOptions {
            raidx_level: Some("5".into()),
            chunks_per_bundle: Some(3),
            ..LayoutOptions::named("raidx")
        };
        s.kinds = vec![MemberKind::Hdd, MemberKind::Hdd, MemberKind::Ssd];
        let v = s.validate(&[1 << 30; 3]).unwrap();
        let LayoutKind::RaidX { weights, .. } = &v.kind else {
            panic!("{:?}", v.kind)
        };
        assert_eq!(weights, &vec![0, 0, 1]);
        // Weights given are kept.
        s.layout.weights = Some(vec![1, 0, 0]);
        let v = s.validate(&[1 << 30; 3]).unwrap();
        let LayoutKind::RaidX { weights, .. } = &v.kind else {
            panic!("{:?}", v.kind)
        };
        assert_eq!(weights, &vec![1, 0, 0]);
    }

    #[test]
    fn sentences_use_the_front_ends_names() {
        let e = SpecError::Chunk(12 << 10);
        assert!(e.sentence(&CLI).starts_with("--chunk 12288 "));
        assert!(e.sentence(&SIM).starts_with("chunk 12288 "));
        let e = SpecError::WriteBufferWithLog;
        assert!(e.sentence(&SIM).starts_with("write_buffer and a write log"));
    }
}
