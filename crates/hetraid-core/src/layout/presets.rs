//! The thesis's device-placement family ([Wacha 2012] ch. 3): each name is a base layout plus
//! a member order derived from member kinds. [`Permuted`] applies the order.

use super::{ChunkLoc, Layout, LogRegion, ParityOrder, Raid4, Raid5, Redundancy, Stripe};
use crate::error::LayoutError;
use crate::member::MemberKind;

/// A base layout seen through a position -> member map.
#[derive(Debug)]
pub struct Permuted {
    name: String,
    inner: Box<dyn Layout>,
    /// order[position] = member.
    order: Vec<usize>,
}

impl Permuted {
    pub fn new(name: &str, inner: Box<dyn Layout>, order: Vec<usize>) -> Self {
        debug_assert_eq!(inner.members(), order.len());
        Self {
            name: name.into(),
            inner,
            order,
        }
    }

    /// order[position] = member.
    pub fn order(&self) -> &[usize] {
        &self.order
    }

    fn map(&self, c: ChunkLoc) -> ChunkLoc {
        ChunkLoc {
            member: self.order[c.member],
            offset: c.offset,
        }
    }
}

impl Layout for Permuted {
    fn data_loc(&self, s: u64, idx: usize) -> ChunkLoc {
        self.map(self.inner.data_loc(s, idx))
    }
    fn parity_cycle(&self) -> u64 {
        self.inner.parity_cycle()
    }
    fn name(&self) -> String {
        self.name.clone()
    }
    fn members(&self) -> usize {
        self.inner.members()
    }
    fn chunk_bytes(&self) -> u64 {
        self.inner.chunk_bytes()
    }
    fn stripe_count(&self) -> u64 {
        self.inner.stripe_count()
    }
    fn data_per_stripe(&self) -> usize {
        self.inner.data_per_stripe()
    }
    fn redundancy(&self) -> Redundancy {
        self.inner.redundancy()
    }
    fn stripe(&self, s: u64) -> Stripe {
        let st = self.inner.stripe(s);
        Stripe {
            index: st.index,
            data: st.data.into_iter().map(|c| self.map(c)).collect(),
            parity: st.parity.into_iter().map(|c| self.map(c)).collect(),
            mirrors: st
                .mirrors
                .into_iter()
                .map(|v| v.into_iter().map(|c| self.map(c)).collect())
                .collect(),
        }
    }
    fn locate_chunk(&self, l: u64) -> (u64, usize) {
        self.inner.locate_chunk(l)
    }
    fn capacity_bytes(&self) -> u64 {
        self.inner.capacity_bytes()
    }
    fn data_in_stripe(&self, s: u64) -> usize {
        self.inner.data_in_stripe(s)
    }
    fn logical_chunk(&self, s: u64, i: usize) -> u64 {
        self.inner.logical_chunk(s, i)
    }
    fn log_regions(&self) -> Vec<LogRegion> {
        self.inner.log_regions()
    }
}

/// [Wacha 2012] ch. 3's named placements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    /// RAID4, parity on the SSD, data on HDDs.
    Raid4S,
    /// RAID4, parity on an HDD, one data member is the SSD.
    Raid4N,
    /// RAID5 with one SSD member.
    Raid5S,
    /// RAID5 of SSDs only.
    RaidF5,
    /// RAID5 (non-rotating data order) with SSDs at the edge positions.
    RaidE,
    /// RAID5 (non-rotating data order) with two SSDs in the middle positions.
    Raid5NSS,
}

impl Preset {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "raid4s" => Self::Raid4S,
            "raid4n" => Self::Raid4N,
            "raid5s" => Self::Raid5S,
            "raidf5" => Self::RaidF5,
            "raide" => Self::RaidE,
            "raid5nss" => Self::Raid5NSS,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Raid4S => "raid4s",
            Self::Raid4N => "raid4n",
            Self::Raid5S => "raid5s",
            Self::RaidF5 => "raidf5",
            Self::RaidE => "raide",
            Self::Raid5NSS => "raid5nss",
        }
    }

    /// Member kinds in the preset's canonical order, used when none are given.
    pub fn default_kinds(self, n: usize) -> Vec<MemberKind> {
        use MemberKind::{Hdd, Ssd};
        let mut k = vec![Hdd; n];
        match self {
            Self::Raid4S | Self::Raid5S => k[n - 1] = Ssd,
            Self::Raid4N => k[0] = Ssd,
            Self::RaidF5 => k = vec![Ssd; n],
            Self::RaidE => {
                k[0] = Ssd;
                k[n - 1] = Ssd;
            }
            Self::Raid5NSS => {
                k[n / 2 - 1] = Ssd;
                k[n / 2] = Ssd;
            }
        }
        k
    }

    /// Kinds given by the operator that contradict what the preset is:
    /// one sentence saying what it needs and what was given. (Kinds not
    /// given at all take `default_kinds`.)
    pub fn check_kinds(self, kinds: &[MemberKind]) -> Result<(), String> {
        let fast = kinds.iter().filter(|k| **k != MemberKind::Hdd).count();
        let slow = kinds.len() - fast;
        let (ok, need) = match self {
            Self::Raid4S => (fast == 1, "exactly one SSD (it holds all the parity)"),
            Self::Raid4N => (
                fast == 1 && slow >= 2,
                "exactly one SSD (a data member) and HDDs (one holds the parity)",
            ),
            Self::Raid5S => (fast == 1, "exactly one SSD among HDDs"),
            Self::RaidF5 => (slow == 0, "SSDs only"),
            Self::RaidE => (fast == 2, "exactly two SSDs (the edge positions)"),
            Self::Raid5NSS => (fast == 2, "exactly two SSDs (the middle positions)"),
        };
        if ok {
            return Ok(());
        }
        Err(format!(
            "{} needs {need}, but the kinds given have {fast} SSD{} and {slow} HDD{}; give kinds that match (--kinds or PATH:ssd), or another layout",
            self.name(),
            if fast == 1 { "" } else { "s" },
            if slow == 1 { "" } else { "s" }
        ))
    }

    fn min_members(self) -> usize {
        match self {
            Self::RaidE | Self::Raid5NSS => 4,
            _ => 3,
        }
    }

    /// Resolve to a base layout and a member order.
    pub fn build(
        self,
        sizes: &[u64],
        chunk: u64,
        kinds: &[MemberKind],
    ) -> Result<Box<dyn Layout>, LayoutError> {
        let n = sizes.len();
        super::need_members(self.name(), n, self.min_members())?;
        let all_hdd = kinds.iter().all(|k| *k == MemberKind::Hdd);
        // All-HDD kinds mean "not given": assume the preset's canonical order.
        let kinds: Vec<MemberKind> = if all_hdd {
            self.default_kinds(n)
        } else {
            kinds.to_vec()
        };
        let fast: Vec<usize> = (0..n).filter(|&m| kinds[m] != MemberKind::Hdd).collect();
        let slow: Vec<usize> = (0..n).filter(|&m| kinds[m] == MemberKind::Hdd).collect();
        let want = |cond: bool, what: &str| {
            if cond {
                Ok(())
            } else {
                Err(LayoutError::Invalid(format!(
                    "{} needs {what}; set member kinds with --kinds",
                    self.name()
                )))
            }
        };
        let order: Vec<usize> = match self {
            Self::Raid4S => {
                want(!fast.is_empty(), "one SSD member for parity")?;
                let p = fast[0];
                (0..n).filter(|&m| m != p).chain([p]).collect()
            }
            Self::Raid4N => {
                want(
                    !fast.is_empty() && !slow.is_empty(),
                    "one SSD data member and an HDD for parity",
                )?;
                let p = *slow.last().unwrap();
                (0..n).filter(|&m| m != p).chain([p]).collect()
            }
            Self::Raid5S => {
                want(!fast.is_empty(), "one SSD member")?;
                (0..n).collect()
            }
            Self::RaidF5 => {
                want(slow.is_empty(), "SSD members only")?;
                (0..n).collect()
            }
            Self::RaidE => {
                want(fast.len() >= 2, "two SSD members for the edge positions")?;
                let mut o = vec![fast[0]];
                o.extend(slow.iter().copied());
                o.extend(fast[2..].iter().copied());
                o.push(fast[1]);
                o
            }
            Self::Raid5NSS => {
                want(fast.len() >= 2, "two SSD members for the middle positions")?;
                let mut rest: Vec<usize> = slow.clone();
                rest.extend(fast[2..].iter().copied());
                let mid = n / 2 - 1;
                let mut o = rest[..mid].to_vec();
                o.push(fast[0]);
                o.push(fast[1]);
                o.extend(rest[mid..].iter().copied());
                o
            }
        };
        let psizes: Vec<u64> = order.iter().map(|&m| sizes[m]).collect();
        let inner: Box<dyn Layout> = match self {
            Self::Raid4S | Self::Raid4N => Box::new(Raid4::new(&psizes, chunk)?),
            Self::Raid5S | Self::RaidF5 => {
                Box::new(Raid5::new(&psizes, chunk, ParityOrder::LeftSymmetric)?)
            }
            // Edges only mean something when the data order does not rotate.
            Self::RaidE | Self::Raid5NSS => {
                Box::new(Raid5::new(&psizes, chunk, ParityOrder::LeftAsymmetric)?)
            }
        };
        Ok(Box::new(Permuted::new(self.name(), inner, order)))
    }
}
