//! The classic levels: RAID0, RAID1 (n-way), RAID10 (MD "near"), RAID4 (parity on
//! the last member, as MD does), RAID5 (MD's four parity orders), RAID6 (MD's
//! left-symmetric P+Q rotation).

use super::direct::{DirectMap, Placement};
use super::{min_chunks, need_members, ChunkLoc, Layout, Redundancy, Stripe};

use crate::error::LayoutError;

fn loc(member: usize, row: u64, chunk: u64) -> ChunkLoc {
    ChunkLoc {
        member,
        offset: row * chunk,
    }
}

/// Member count and chunk rows of a layout over the smallest member.
pub(crate) fn uniform_rows(
    layout: &str,
    sizes: &[u64],
    chunk: u64,
    min: usize,
) -> Result<(usize, u64), LayoutError> {
    need_members(layout, sizes.len(), min)?;
    Ok((
        sizes.len(),
        nonempty(min_chunks(sizes, chunk), sizes, chunk)?,
    ))
}

fn nonempty(rows: u64, sizes: &[u64], chunk: u64) -> Result<u64, LayoutError> {
    if rows == 0 {
        let (m, &s) = sizes
            .iter()
            .enumerate()
            .min_by_key(|(_, s)| **s)
            .expect("members checked");
        return Err(LayoutError::MemberTooSmall {
            member: m,
            size: s,
            need: chunk,
        });
    }
    Ok(rows)
}

#[derive(Debug, Clone)]
pub struct Raid0 {
    n: usize,
    chunk: u64,
    rows: u64,
}

impl Raid0 {
    pub fn new(sizes: &[u64], chunk: u64) -> Result<Self, LayoutError> {
        let (n, rows) = uniform_rows("raid0", sizes, chunk, 1)?;
        Ok(Self { n, chunk, rows })
    }
}

impl Layout for Raid0 {
    fn data_loc(&self, s: u64, idx: usize) -> ChunkLoc {
        loc(idx, s, self.chunk)
    }
    fn direct_map(&self) -> Option<DirectMap> {
        DirectMap::new(
            Placement::Fixed,
            self.n,
            self.n,
            self.chunk,
            self.capacity_bytes(),
        )
    }
    fn parity_cycle(&self) -> u64 {
        1
    }
    fn name(&self) -> String {
        "raid0".into()
    }
    row_accessors!();
    fn data_per_stripe(&self) -> usize {
        self.n
    }
    fn redundancy(&self) -> Redundancy {
        Redundancy::None
    }
    fn stripe(&self, s: u64) -> Stripe {
        Stripe {
            index: s,
            data: (0..self.n).map(|d| loc(d, s, self.chunk)).collect(),
            parity: vec![],
            mirrors: vec![],
        }
    }
}

/// n-way mirror: member 0 holds the data, every other member a copy.
#[derive(Debug, Clone)]
pub struct Raid1 {
    n: usize,
    chunk: u64,
    rows: u64,
}

impl Raid1 {
    pub fn new(sizes: &[u64], chunk: u64) -> Result<Self, LayoutError> {
        let (n, rows) = uniform_rows("raid1", sizes, chunk, 2)?;
        Ok(Self { n, chunk, rows })
    }
}

impl Layout for Raid1 {
    fn parity_cycle(&self) -> u64 {
        1
    }
    fn name(&self) -> String {
        "raid1".into()
    }
    row_accessors!();
    fn data_per_stripe(&self) -> usize {
        1
    }
    fn redundancy(&self) -> Redundancy {
        Redundancy::Mirror { copies: self.n }
    }
    fn stripe(&self, s: u64) -> Stripe {
        Stripe {
            index: s,
            data: vec![loc(0, s, self.chunk)],
            parity: vec![],
            mirrors: vec![(1..self.n).map(|d| loc(d, s, self.chunk)).collect()],
        }
    }
}

/// MD's "near" RAID10: the `copies` copies of logical chunk i sit at raster
/// positions i*copies .. i*copies+copies-1, raster position p being member p % n,
/// row p / n. A stripe here is one data chunk with its copies.
#[derive(Debug, Clone)]
pub struct Raid10 {
    n: usize,
    chunk: u64,
    copies: usize,
    chunks: u64,
}

impl Raid10 {
    pub fn new(sizes: &[u64], chunk: u64, copies: usize) -> Result<Self, LayoutError> {
        if copies < 2 {
            return Err(LayoutError::Invalid(
                "raid10 needs --copies of at least 2".into(),
            ));
        }
        let (n, rows) = uniform_rows("raid10", sizes, chunk, copies.max(2))?;
        Ok(Self {
            n,
            chunk,
            copies,
            chunks: rows * n as u64 / copies as u64,
        })
    }
}

impl Layout for Raid10 {
    fn parity_cycle(&self) -> u64 {
        {
            let (n, c) = (self.n as u64, self.copies as u64);
            let g = (1..=n.min(c))
                .rev()
                .find(|d| n % d == 0 && c % d == 0)
                .unwrap_or(1);
            n / g
        }
    }
    fn name(&self) -> String {
        "raid10".into()
    }
    fn members(&self) -> usize {
        self.n
    }
    fn chunk_bytes(&self) -> u64 {
        self.chunk
    }
    fn stripe_count(&self) -> u64 {
        self.chunks
    }
    fn data_per_stripe(&self) -> usize {
        1
    }
    fn redundancy(&self) -> Redundancy {
        Redundancy::Mirror {
            copies: self.copies,
        }
    }
    fn stripe(&self, s: u64) -> Stripe {
        let n = self.n as u64;
        let pos = |j: usize| {
            let p = s * self.copies as u64 + j as u64;
            loc((p % n) as usize, p / n, self.chunk)
        };
        Stripe {
            index: s,
            data: vec![pos(0)],
            parity: vec![],
            mirrors: vec![(1..self.copies).map(pos).collect()],
        }
    }
}

/// RAID4: data on members 0..n-1, parity on the last member.
#[derive(Debug, Clone)]
pub struct Raid4 {
    n: usize,
    chunk: u64,
    rows: u64,
}

impl Raid4 {
    pub fn new(sizes: &[u64], chunk: u64) -> Result<Self, LayoutError> {
        let (n, rows) = uniform_rows("raid4", sizes, chunk, 2)?;
        Ok(Self { n, chunk, rows })
    }
}

impl Layout for Raid4 {
    fn data_loc(&self, s: u64, idx: usize) -> ChunkLoc {
        loc(idx, s, self.chunk)
    }
    fn direct_map(&self) -> Option<DirectMap> {
        DirectMap::new(
            Placement::Fixed,
            self.n,
            self.n - 1,
            self.chunk,
            self.capacity_bytes(),
        )
    }
    fn parity_cycle(&self) -> u64 {
        1
    }
    fn name(&self) -> String {
        "raid4".into()
    }
    row_accessors!();
    fn data_per_stripe(&self) -> usize {
        self.n - 1
    }
    fn redundancy(&self) -> Redundancy {
        Redundancy::Parity { count: 1 }
    }
    fn stripe(&self, s: u64) -> Stripe {
        Stripe {
            index: s,
            data: (0..self.n - 1).map(|d| loc(d, s, self.chunk)).collect(),
            parity: vec![loc(self.n - 1, s, self.chunk)],
            mirrors: vec![],
        }
    }
}

/// MD's RAID5 parity orders (drivers/md/raid5.c, `raid5_compute_sector`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParityOrder {
    LeftAsymmetric,
    RightAsymmetric,
    LeftSymmetric,
    RightSymmetric,
}

impl ParityOrder {
    pub fn parse(s: &str) -> Result<Self, LayoutError> {
        match s.to_ascii_lowercase().replace('_', "-").as_str() {
            "left-asymmetric" | "la" => Ok(Self::LeftAsymmetric),
            "right-asymmetric" | "ra" => Ok(Self::RightAsymmetric),
            "left-symmetric" | "ls" => Ok(Self::LeftSymmetric),
            "right-symmetric" | "rs" => Ok(Self::RightSymmetric),
            _ => Err(LayoutError::Invalid(format!(
                "parity order '{s}' is unknown; use left-symmetric, left-asymmetric, right-symmetric or right-asymmetric"
            ))),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::LeftAsymmetric => "left-asymmetric",
            Self::RightAsymmetric => "right-asymmetric",
            Self::LeftSymmetric => "left-symmetric",
            Self::RightSymmetric => "right-symmetric",
        }
    }

    /// (parity member, data members in logical order) for stripe `s` of `n` members.
    pub fn place(self, s: u64, n: usize) -> (usize, Vec<usize>) {
        let k = n - 1;
        let r = (s % n as u64) as usize;
        let pd = match self {
            Self::LeftAsymmetric | Self::LeftSymmetric => k - r,
            Self::RightAsymmetric | Self::RightSymmetric => r,
        };
        let data = (0..k)
            .map(|dd| match self {
                Self::LeftAsymmetric | Self::RightAsymmetric => {
                    if dd >= pd {
                        dd + 1
                    } else {
                        dd
                    }
                }
                Self::LeftSymmetric | Self::RightSymmetric => (pd + 1 + dd) % n,
            })
            .collect();
        (pd, data)
    }
}

/// The member of RAID5 data chunk `idx` in stripe `s` of `n` members (the
/// read fast path runs this on every read: one division, 32-bit while the
/// stripe number fits, no second one).
#[inline]
pub(crate) fn raid5_data_member(order: ParityOrder, n: usize, s: u64, idx: usize) -> usize {
    let k = n - 1;
    let r = super::divmod(s, n as u64).1 as usize;
    let pd = match order {
        ParityOrder::LeftAsymmetric | ParityOrder::LeftSymmetric => k - r,
        ParityOrder::RightAsymmetric | ParityOrder::RightSymmetric => r,
    };
    match order {
        ParityOrder::LeftAsymmetric | ParityOrder::RightAsymmetric => {
            if idx >= pd {
                idx + 1
            } else {
                idx
            }
        }
        // pd + 1 + idx < 2n: (pd + 1 + idx) % n without dividing.
        ParityOrder::LeftSymmetric | ParityOrder::RightSymmetric => {
            let d = pd + 1 + idx;
            if d >= n {
                d - n
            } else {
                d
            }
        }
    }
}

/// The member of RAID6 data chunk `idx` in stripe `s` of `n` members (MD's
/// left-symmetric rotation: P, Q, then data).
#[inline]
pub(crate) fn raid6_data_member(n: usize, s: u64, idx: usize) -> usize {
    let pd = n - 1 - super::divmod(s, n as u64).1 as usize;
    (pd + 2 + idx) % n
}

#[derive(Debug, Clone)]
pub struct Raid5 {
    n: usize,
    chunk: u64,
    rows: u64,
    order: ParityOrder,
}

impl Raid5 {
    pub fn new(sizes: &[u64], chunk: u64, order: ParityOrder) -> Result<Self, LayoutError> {
        let (n, rows) = uniform_rows("raid5", sizes, chunk, 2)?;
        Ok(Self {
            n,
            chunk,
            rows,
            order,
        })
    }
}

impl Layout for Raid5 {
    fn data_loc(&self, s: u64, idx: usize) -> ChunkLoc {
        loc(raid5_data_member(self.order, self.n, s, idx), s, self.chunk)
    }
    fn direct_map(&self) -> Option<DirectMap> {
        let p = Placement::Raid5(self.order);
        DirectMap::new(p, self.n, self.n - 1, self.chunk, self.capacity_bytes())
    }
    fn parity_cycle(&self) -> u64 {
        self.n as u64
    }
    fn name(&self) -> String {
        "raid5".into()
    }
    row_accessors!();
    fn data_per_stripe(&self) -> usize {
        self.n - 1
    }
    fn redundancy(&self) -> Redundancy {
        Redundancy::Parity { count: 1 }
    }
    fn stripe(&self, s: u64) -> Stripe {
        let (pd, data) = self.order.place(s, self.n);
        Stripe {
            index: s,
            data: data.into_iter().map(|d| loc(d, s, self.chunk)).collect(),
            parity: vec![loc(pd, s, self.chunk)],
            mirrors: vec![],
        }
    }
}

/// RAID6 with MD's left-symmetric rotation: P at n-1-(s mod n), Q right after it,
/// data following Q.
#[derive(Debug, Clone)]
pub struct Raid6 {
    n: usize,
    chunk: u64,
    rows: u64,
}

impl Raid6 {
    pub fn new(sizes: &[u64], chunk: u64) -> Result<Self, LayoutError> {
        let (n, rows) = uniform_rows("raid6", sizes, chunk, 4)?;
        Ok(Self { n, chunk, rows })
    }
}

impl Layout for Raid6 {
    fn data_loc(&self, s: u64, idx: usize) -> ChunkLoc {
        loc(raid6_data_member(self.n, s, idx), s, self.chunk)
    }
    fn direct_map(&self) -> Option<DirectMap> {
        DirectMap::new(
            Placement::Raid6,
            self.n,
            self.n - 2,
            self.chunk,
            self.capacity_bytes(),
        )
    }
    fn parity_cycle(&self) -> u64 {
        self.n as u64
    }
    fn name(&self) -> String {
        "raid6".into()
    }
    row_accessors!();
    fn data_per_stripe(&self) -> usize {
        self.n - 2
    }
    fn redundancy(&self) -> Redundancy {
        Redundancy::Parity { count: 2 }
    }
    fn stripe(&self, s: u64) -> Stripe {
        let n = self.n;
        let pd = n - 1 - (s % n as u64) as usize;
        let qd = (pd + 1) % n;
        Stripe {
            index: s,
            data: (0..n - 2)
                .map(|dd| loc((pd + 2 + dd) % n, s, self.chunk))
                .collect(),
            parity: vec![loc(pd, s, self.chunk), loc(qd, s, self.chunk)],
            mirrors: vec![],
        }
    }
}
