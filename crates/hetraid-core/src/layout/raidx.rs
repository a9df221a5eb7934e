//! RAIDX ([Fekete, Varki]): bundles of c chunks, at most one per member, anywhere on that
//! member, so members of different sizes are used in full.

use super::{ChunkLoc, Layout, Redundancy, Stripe};
use crate::error::LayoutError;

/// Redundancy inside a bundle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RaidXLevel {
    X0,
    X1,
    X5,
    X6,
    X10,
}

impl RaidXLevel {
    pub fn parse(s: &str) -> Result<Self, LayoutError> {
        match s.trim() {
            "0" => Ok(Self::X0),
            "1" => Ok(Self::X1),
            "5" => Ok(Self::X5),
            "6" => Ok(Self::X6),
            "10" => Ok(Self::X10),
            _ => Err(LayoutError::Invalid(format!(
                "--raidx-level '{s}' is unknown; use 0, 1, 5, 6 or 10"
            ))),
        }
    }

    pub fn min_chunks(self) -> usize {
        match self {
            Self::X0 => 1,
            Self::X1 => 2,
            Self::X5 => 3,
            Self::X6 | Self::X10 => 4,
        }
    }

    pub fn number(self) -> u32 {
        match self {
            Self::X0 => 0,
            Self::X1 => 1,
            Self::X5 => 5,
            Self::X6 => 6,
            Self::X10 => 10,
        }
    }

    pub fn default_for(c: usize) -> Self {
        match c {
            1 => Self::X0,
            2 => Self::X1,
            _ => Self::X5,
        }
    }
}

/// The largest number of bundles of `c` chunks on distinct members that members of
/// `sizes` chunks can hold: the largest B with sum(min(s_i, B)) >= c*B (a member can
/// give at most one chunk per bundle).
pub fn max_bundles(sizes: &[u64], c: usize) -> u64 {
    if c == 0 || sizes.len() < c {
        return 0;
    }
    let c = c as u64;
    let (mut lo, mut hi) = (0u64, sizes.iter().sum::<u64>() / c);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        let cap: u64 = sizes.iter().map(|&s| s.min(mid)).sum();
        if cap >= c * mid {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    lo
}

/// Most bundles one table may hold (the table is materialised in memory).
pub const MAX_BUNDLES: u64 = 64 << 20;

#[derive(Debug, Clone)]
pub struct RaidX {
    n: usize,
    /// Chunks per bundle; with variable widths the widest bundle's.
    c: usize,
    chunk: u64,
    level: RaidXLevel,
    /// bundles * c entries: bundle b's chunks, members ascending.
    table: Vec<ChunkLoc>,
    /// RAIDX5/6 with weights: per bundle, the position of P within it (Q
    /// is the next position); empty: P rotates (`w - 1 - b % w`, `w` the
    /// bundle's width).
    parity_at: Vec<u8>,
    /// Widths chosen per bundle ([`super::raidx_widths`]): where each bundle
    /// starts in `table` and its first logical chunk, one entry past the
    /// last bundle (empty: every bundle is `c` wide).
    starts: Vec<u64>,
    data_starts: Vec<u64>,
    /// Bundles widened by a grow after they were placed: their new data
    /// chunks, in logical order after the data placed before them.
    widened: Option<Box<Widened>>,
    /// After a member left a variable-width table (`raidx_widths::plan_remove`):
    /// every data chunk's logical chunk, given explicitly.
    labeled: Option<Box<Labeled>>,
}

/// Marks a position that holds no logical chunk of its own (P, Q) in a
/// table's labels (`Table::labels`).
pub const NO_LABEL: u64 = u64::MAX;

/// An explicit logical map: a shrink of a variable-width table evacuates
/// chunks into the places of chunks cut off the end, so the order is no
/// longer the bundles' (with widenings); it is kept per position instead.
#[derive(Debug, Clone, Default)]
struct Labeled {
    /// Logical chunk -> (bundle, data index).
    home: Vec<(u64, u32)>,
    /// Per bundle, where its data chunks' logical chunks start in `flat`.
    first: Vec<u64>,
    /// Logical chunks of the data chunks, bundle by bundle, data index order.
    flat: Vec<u64>,
}

/// Data chunks bundles gained after they were placed (a grow of a
/// variable-width RAIDX, `raidx_widths::plan_grow`). Each took the next
/// logical chunk when it was added, so no byte the array held moves: the
/// logical order is the bundles' first data (`data_starts`, counted with
/// the widenings before them) interleaved with these.
#[derive(Debug, Clone, Default)]
struct Widened {
    /// Per bundle, its data chunks when it was placed.
    base_data: Vec<u32>,
    /// In logical order: (logical chunk, bundle, data index).
    chunks: Vec<(u64, u64, u32)>,
    /// (bundle, data index) -> logical chunk.
    logical: std::collections::HashMap<(u64, u32), u64>,
}

/// A bundle's data chunk a grow added, as a table keeps it: taken after the
/// first `after_bundles` bundles' data (and the widenings before it), by
/// bundle `bundle`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Widening {
    pub after_bundles: u64,
    pub bundle: u64,
}

impl RaidX {
    pub fn new(
        sizes: &[u64],
        chunk: u64,
        c: usize,
        level: Option<RaidXLevel>,
    ) -> Result<Self, LayoutError> {
        if c == 0 {
            return Err(LayoutError::Invalid(
                "--chunks-per-bundle must be at least 1".into(),
            ));
        }
        let level = level.unwrap_or(RaidXLevel::default_for(c));
        if c < level.min_chunks() {
            return Err(LayoutError::Invalid(format!(
                "RAIDX{} needs at least {} chunks per bundle, got {c}",
                level.number(),
                level.min_chunks()
            )));
        }
        if level == RaidXLevel::X10 && !c.is_multiple_of(2) {
            return Err(LayoutError::Invalid(format!(
                "RAIDX10 needs an even number of chunks per bundle, got {c}"
            )));
        }
        super::need_members("raidx", sizes.len(), c)?;
        let chunks: Vec<u64> = sizes.iter().map(|s| s / chunk).collect();
        let target = max_bundles(&chunks, c);
        if target > MAX_BUNDLES {
            return Err(LayoutError::Invalid(format!(
                "{target} bundles exceed the {MAX_BUNDLES} limit of the in-memory table; use a larger chunk"
            )));
        }
        if target == 0 {
            return Err(LayoutError::Invalid(format!(
                "the members cannot hold a single bundle of {c} chunks of {chunk} bytes; use larger members or a smaller chunk"
            )));
        }
        let table = allocate(&chunks, c, target, chunk);
        Ok(Self {
            n: sizes.len(),
            c,
            chunk,
            level,
            table,
            parity_at: Vec::new(),
            starts: Vec::new(),
            data_starts: Vec::new(),
            widened: None,
            labeled: None,
        })
    }

    /// A RAIDX whose bundles are as wide as each can be where it is placed
    /// ([`super::raidx_widths::place`]): the capacity bound for any member
    /// sizes (one parity: all but the largest member; two: all but the two
    /// largest; mirrors: half, at most all but the largest). `level`
    /// defaults to 5; RAIDX1 and RAIDX10 bundles are pairs.
    pub fn variable(
        sizes: &[u64],
        chunk: u64,
        level: Option<RaidXLevel>,
    ) -> Result<Self, LayoutError> {
        let level = level.unwrap_or(RaidXLevel::X5);
        let min = super::raidx_widths::width_min(level);
        super::need_members("raidx", sizes.len(), min)?;
        let chunks: Vec<u64> = sizes.iter().map(|s| s / chunk).collect();
        let bound = super::raidx_widths::capacity_bound(&chunks, level);
        if bound == 0 {
            return Err(LayoutError::Invalid(format!(
                "the members cannot hold a single RAIDX{} bundle of {chunk}-byte chunks; use larger members or a smaller chunk",
                level.number()
            )));
        }
        let places = super::raidx_widths::place(&chunks, level);
        if places.len() as u64 > MAX_BUNDLES {
            return Err(LayoutError::Invalid(format!(
                "{} bundles exceed the {MAX_BUNDLES} limit of the in-memory table; use a larger chunk",
                places.len()
            )));
        }
        let mut x = Self {
            n: sizes.len(),
            c: min,
            chunk,
            level,
            table: Vec::new(),
            parity_at: Vec::new(),
            starts: Vec::new(),
            data_starts: Vec::new(),
            widened: None,
            labeled: None,
        };
        x.place_variable(&places);
        Ok(x)
    }

    /// Take `places` as the table, bundle widths as they come.
    fn place_variable(&mut self, places: &[Vec<super::raidx_grow::Place>]) {
        let min = super::raidx_widths::width_min(self.level);
        self.c = places.iter().map(Vec::len).max().unwrap_or(min);
        self.table.clear();
        (self.starts, self.data_starts) = (vec![0], vec![0]);
        for b in places {
            self.table.extend(b.iter().map(|&(member, slot)| ChunkLoc {
                member,
                offset: slot * self.chunk,
            }));
            self.starts.push(self.table.len() as u64);
            let data = super::raidx_widths::data_in_bundle(self.level, b.len()) as u64;
            let before = *self.data_starts.last().expect("starts at 0");
            self.data_starts.push(before + data);
        }
    }

    /// Bundles widened after they were placed: `widenings` in logical order
    /// (each one data chunk of its bundle, the bundle's last data chunks in
    /// order). Replaces the logical order [`RaidX::place_variable`] made.
    pub fn with_widenings(mut self, widenings: &[Widening]) -> Result<Self, LayoutError> {
        self.widen(widenings)?;
        Ok(self)
    }

    fn widen(&mut self, widenings: &[Widening]) -> Result<(), LayoutError> {
        if widenings.is_empty() {
            self.widened = None;
            return Ok(());
        }
        let bundles = self.stripe_count();
        let mut extra = vec![0u32; bundles as usize];
        for w in widenings {
            if w.bundle >= bundles || w.after_bundles > bundles {
                return Err(LayoutError::Invalid(format!(
                    "a widening of bundle {} after {} bundles, of {bundles}",
                    w.bundle, w.after_bundles
                )));
            }
            extra[w.bundle as usize] += 1;
        }
        let mut base_data = Vec::with_capacity(bundles as usize);
        for b in 0..bundles {
            let data = super::raidx_widths::data_in_bundle(self.level, self.width(b)) as u32;
            let base = data.checked_sub(extra[b as usize]).filter(|&d| d > 0);
            base_data.push(base.ok_or_else(|| {
                LayoutError::Invalid(format!("bundle {b} was widened more than it holds"))
            })?);
        }
        let mut w = Widened {
            base_data,
            ..Default::default()
        };
        let mut next_index = w.base_data.clone();
        let (mut logical, mut wi) = (0u64, 0usize);
        self.data_starts = Vec::with_capacity(bundles as usize + 1);
        for b in 0..=bundles {
            // Widenings taken after b bundles' data.
            while let Some(x) = widenings.get(wi).filter(|x| x.after_bundles == b) {
                let i = &mut next_index[x.bundle as usize];
                w.chunks.push((logical, x.bundle, *i));
                w.logical.insert((x.bundle, *i), logical);
                *i += 1;
                logical += 1;
                wi += 1;
            }
            self.data_starts.push(logical);
            if b < bundles {
                logical += w.base_data[b as usize] as u64;
            }
        }
        if wi != widenings.len() {
            return Err(LayoutError::Invalid(
                "widenings out of logical order".into(),
            ));
        }
        // `data_starts`' last entry is the capacity in chunks.
        *self.data_starts.last_mut().expect("an entry") = logical;
        self.widened = Some(Box::new(w));
        Ok(())
    }

    /// The logical chunk of every position, bundle by bundle ([`NO_LABEL`]
    /// for P and Q; a copy carries its data chunk's): the map made explicit,
    /// as [`RaidX::with_labels`] takes it.
    pub fn labels(&self) -> Vec<Vec<u64>> {
        (0..self.stripe_count())
            .map(|b| {
                self.roles(b)
                    .into_iter()
                    .map(|r| match r {
                        PositionRole::Data(i) | PositionRole::Copy(i) => self.logical_chunk(b, i),
                        PositionRole::P | PositionRole::Q => NO_LABEL,
                    })
                    .collect()
            })
            .collect()
    }

    /// The logical map given position by position (as [`RaidX::labels`]
    /// gives it; empty: keep the bundles' order). Checked: data positions
    /// carry labels, copies their data's, P and Q none, and the labels are
    /// every logical chunk from 0 once.
    pub fn with_labels(mut self, labels: &[Vec<u64>]) -> Result<Self, LayoutError> {
        if labels.is_empty() {
            return Ok(self);
        }
        let bundles = self.stripe_count();
        if labels.len() as u64 != bundles {
            return Err(LayoutError::Invalid(format!(
                "labels for {} bundles of {bundles}",
                labels.len()
            )));
        }
        let mut l = Labeled::default();
        let total: usize = (0..bundles).map(|b| self.data_in_stripe(b)).sum();
        let mut home: Vec<Option<(u64, u32)>> = vec![None; total];
        for (b, ls) in labels.iter().enumerate() {
            let roles = self.roles(b as u64);
            if ls.len() != roles.len() {
                return Err(LayoutError::Invalid(format!(
                    "bundle {b} has {} chunks but {} labels",
                    roles.len(),
                    ls.len()
                )));
            }
            l.first.push(l.flat.len() as u64);
            let data = super::raidx_widths::data_in_bundle(self.level, roles.len());
            let mut of = vec![NO_LABEL; data];
            for (&r, &x) in roles.iter().zip(ls) {
                let bad = || LayoutError::Invalid(format!("bundle {b}: label {x} for {r:?}"));
                match r {
                    PositionRole::Data(i) => {
                        let slot = home.get_mut(x as usize).ok_or_else(bad)?;
                        if slot.replace((b as u64, i as u32)).is_some() {
                            return Err(LayoutError::Invalid(format!(
                                "logical chunk {x} is labelled twice"
                            )));
                        }
                        of[i] = x;
                    }
                    PositionRole::P | PositionRole::Q if x != NO_LABEL => return Err(bad()),
                    _ => {}
                }
            }
            for (&r, &x) in roles.iter().zip(ls) {
                if let PositionRole::Copy(i) = r {
                    if of[i] != x {
                        return Err(LayoutError::Invalid(format!(
                            "bundle {b}: a copy labelled {x}, its data {}",
                            of[i]
                        )));
                    }
                }
            }
            l.flat.extend(of);
        }
        // As many labels as data chunks, none twice: each chunk has one.
        l.home = home.into_iter().map(|h| h.expect("a bijection")).collect();
        l.first.push(l.flat.len() as u64);
        self.widened = None;
        self.labeled = Some(Box::new(l));
        Ok(self)
    }

    /// [`RaidX::variable`] with parity weights (see [`RaidX::with_weights`]).
    pub fn variable_with_weights(
        sizes: &[u64],
        chunk: u64,
        level: Option<RaidXLevel>,
        weights: &[u64],
    ) -> Result<Self, LayoutError> {
        let x = Self::variable(sizes, chunk, level)?;
        if weights.is_empty() {
            return Ok(x);
        }
        Self::weigh(x, weights)
    }

    /// Whether bundle widths vary (chosen per bundle).
    pub fn variable_widths(&self) -> bool {
        !self.starts.is_empty()
    }

    /// Chunks in bundle `b`.
    pub fn width(&self, b: u64) -> usize {
        match self.starts.get(b as usize + 1) {
            Some(&end) => (end - self.starts[b as usize]) as usize,
            None => self.c,
        }
    }

    /// [`RaidX::new`] with parity weights (RAIDX5/6): each bundle's parity
    /// goes to the member of the bundle with the highest weight per parity
    /// chunk it already holds, `w / (held + 1)` (D'Hondt: members get parity
    /// in proportion to their weights where the bundles allow); weight 0
    /// takes parity only where no member of the bundle weighs more. RAIDX6's
    /// Q goes to the bundle's next position after P. Empty weights: rotation.
    pub fn with_weights(
        sizes: &[u64],
        chunk: u64,
        c: usize,
        level: Option<RaidXLevel>,
        weights: &[u64],
    ) -> Result<Self, LayoutError> {
        let x = Self::new(sizes, chunk, c, level)?;
        if weights.is_empty() {
            return Ok(x);
        }
        Self::weigh(x, weights)
    }

    /// Parity positions by `weights` over the table `x` has.
    fn weigh(mut x: Self, weights: &[u64]) -> Result<Self, LayoutError> {
        if weights.len() != x.n {
            return Err(LayoutError::Invalid(format!(
                "--weights lists {} weights for {} members; give one per member",
                weights.len(),
                x.n
            )));
        }
        if !matches!(x.level, RaidXLevel::X5 | RaidXLevel::X6) {
            return Err(LayoutError::Invalid(
                "--weights places parity: it applies to raidx at levels 5 and 6".into(),
            ));
        }
        let mut held = vec![0u64; x.n];
        let bundles = x.stripe_count() as usize;
        let mut parity_at = Vec::with_capacity(bundles);
        for b in 0..bundles {
            let members = x.bundle(b as u64);
            let c = members.len();
            let rotation = c - 1 - b % c;
            // Highest quotient; ties to the rotation's position, then the
            // lowest position (deterministic).
            let pos = (0..c)
                .max_by(|&i, &j| {
                    let (mi, mj) = (members[i].member, members[j].member);
                    // w_i / (h_i + 1) vs w_j / (h_j + 1), in integers.
                    let l = weights[mi] as u128 * (held[mj] + 1) as u128;
                    let r = weights[mj] as u128 * (held[mi] + 1) as u128;
                    l.cmp(&r)
                        .then((i == rotation).cmp(&(j == rotation)))
                        .then(j.cmp(&i))
                })
                .expect("a bundle has chunks");
            held[members[pos].member] += 1;
            parity_at.push(pos as u8);
        }
        x.parity_at = parity_at;
        Ok(x)
    }

    /// The bundle table as (member, slot) places, positions in order (what
    /// a grow plans from, `raidx_grow`).
    pub fn places(&self) -> Vec<Vec<super::raidx_grow::Place>> {
        (0..self.stripe_count())
            .map(|b| {
                self.bundle(b)
                    .iter()
                    .map(|l| (l.member, l.offset / self.chunk))
                    .collect()
            })
            .collect()
    }

    /// Each bundle's P position (empty: the rotation, `c - 1 - b % c`).
    /// Positions, not members: a chunk moved by a grow keeps its role, so
    /// these are stored with the table and never recomputed for existing
    /// bundles.
    pub fn parity_positions(&self) -> &[u8] {
        &self.parity_at
    }

    /// A RAIDX over the members of capacities `caps` (in chunks) from a
    /// bundle table (a grown array's, as stored), checked: `c` chunks a
    /// bundle on distinct members, each slot inside its member and used
    /// once; `parity_at` as [`RaidX::parity_positions`] gives them.
    pub fn from_places(
        places: &[Vec<super::raidx_grow::Place>],
        caps: &[u64],
        chunk: u64,
        c: usize,
        level: Option<RaidXLevel>,
        parity_at: Vec<u8>,
    ) -> Result<Self, LayoutError> {
        super::raidx_grow::check_table(places, caps, c).map_err(LayoutError::Invalid)?;
        if !parity_at.is_empty()
            && (parity_at.len() != places.len()
                || parity_at
                    .iter()
                    .zip(places)
                    .any(|(&p, b)| p as usize >= b.len()))
        {
            return Err(LayoutError::Invalid(format!(
                "{} parity positions for {} bundles of {c}",
                parity_at.len(),
                places.len()
            )));
        }
        let sizes: Vec<u64> = caps.iter().map(|c| c * chunk).collect();
        if c == 0 {
            // Widths per bundle (a table `RaidX::variable` placed).
            let level = level.unwrap_or(RaidXLevel::X5);
            let min = super::raidx_widths::width_min(level);
            if let Some(b) = places.iter().position(|b| b.len() < min) {
                return Err(LayoutError::Invalid(format!(
                    "bundle {b} has {} chunks; RAIDX{} needs at least {min}",
                    places[b].len(),
                    level.number()
                )));
            }
            let mut x = Self::variable(&sizes, chunk, Some(level))?;
            x.place_variable(places);
            x.parity_at = parity_at;
            return Ok(x);
        }
        // A fresh layout for the parameter checks; its table is replaced.
        let mut x = Self::new(&sizes, chunk, c, level)?;
        x.table = places
            .iter()
            .flatten()
            .map(|&(member, slot)| ChunkLoc {
                member,
                offset: slot * chunk,
            })
            .collect();
        x.parity_at = parity_at;
        Ok(x)
    }

    /// Where bundle `s`'s P is (its position in the bundle).
    fn p_at(&self, s: u64) -> usize {
        match self.parity_at.get(s as usize) {
            Some(&p) => p as usize,
            None => {
                let w = self.width(s);
                w - 1 - (s % w as u64) as usize
            }
        }
    }

    pub fn level(&self) -> RaidXLevel {
        self.level
    }

    /// bundle -> its chunks (members ascending).
    pub fn bundle(&self, b: u64) -> &[ChunkLoc] {
        match self.starts.get(b as usize + 1) {
            Some(&end) => &self.table[self.starts[b as usize] as usize..end as usize],
            None => {
                let i = b as usize * self.c;
                &self.table[i..i + self.c]
            }
        }
    }
}

/// What a bundle position holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PositionRole {
    /// Data chunk i of the bundle (logical order).
    Data(usize),
    P,
    Q,
    /// A copy of data chunk i.
    Copy(usize),
}

/// The role of every position of a bundle of `c` at `level` whose P is at
/// `p_at` (ignored without parity): what [`Layout::stripe`] says of a RAIDX
/// bundle, position by position (a chunk rebuilt elsewhere keeps its role).
pub fn position_roles(level: RaidXLevel, c: usize, p_at: usize) -> Vec<PositionRole> {
    use PositionRole::*;
    match level {
        RaidXLevel::X0 => (0..c).map(Data).collect(),
        RaidXLevel::X1 => (0..c)
            .map(|i| if i == 0 { Data(0) } else { Copy(0) })
            .collect(),
        RaidXLevel::X5 => (0..c)
            .map(|i| match i.cmp(&p_at) {
                std::cmp::Ordering::Less => Data(i),
                std::cmp::Ordering::Equal => P,
                std::cmp::Ordering::Greater => Data(i - 1),
            })
            .collect(),
        RaidXLevel::X6 => {
            let q = (p_at + 1) % c;
            (0..c)
                .map(|i| {
                    if i == p_at {
                        P
                    } else if i == q {
                        Q
                    } else {
                        Data((i + c - q - 1) % c)
                    }
                })
                .collect()
        }
        RaidXLevel::X10 => (0..c)
            .map(|i| if i % 2 == 0 { Data(i / 2) } else { Copy(i / 2) })
            .collect(),
    }
}

impl RaidX {
    /// Each position's role in bundle `b`.
    pub fn roles(&self, b: u64) -> Vec<PositionRole> {
        position_roles(self.level, self.width(b), self.p_at(b))
    }
}

/// Greedy: each bundle takes the c members with the most free chunks (ties: lowest
/// index). Taking from the fullest members first keeps the largest ones from being
/// left alone, and reaches `max_bundles` (checked against brute force in tests).
fn allocate(chunks: &[u64], c: usize, bundles: u64, chunk: u64) -> Vec<ChunkLoc> {
    let n = chunks.len();
    let mut free = chunks.to_vec();
    let mut next = vec![0u64; n];
    let mut table = Vec::with_capacity(bundles as usize * c);
    let mut idx: Vec<usize> = (0..n).collect();
    for _ in 0..bundles {
        idx.sort_by(|&a, &b| free[b].cmp(&free[a]).then(a.cmp(&b)));
        let mut pick: Vec<usize> = idx[..c].to_vec();
        pick.sort_unstable();
        for &m in &pick {
            debug_assert!(free[m] > 0, "allocator ran past a member's end");
            table.push(ChunkLoc {
                member: m,
                offset: next[m] * chunk,
            });
            next[m] += 1;
            free[m] -= 1;
        }
    }
    table
}

impl Layout for RaidX {
    fn name(&self) -> String {
        "raidx".into()
    }
    fn members(&self) -> usize {
        self.n
    }
    fn chunk_bytes(&self) -> u64 {
        self.chunk
    }
    fn stripe_count(&self) -> u64 {
        match self.starts.len() {
            0 => (self.table.len() / self.c) as u64,
            n => n as u64 - 1,
        }
    }
    fn data_per_stripe(&self) -> usize {
        match self.level {
            RaidXLevel::X0 => self.c,
            RaidXLevel::X1 => 1,
            RaidXLevel::X5 => self.c - 1,
            RaidXLevel::X6 => self.c - 2,
            RaidXLevel::X10 => self.c / 2,
        }
    }
    fn redundancy(&self) -> Redundancy {
        match self.level {
            RaidXLevel::X0 => Redundancy::None,
            RaidXLevel::X1 => Redundancy::Mirror { copies: self.c },
            RaidXLevel::X5 => Redundancy::Parity { count: 1 },
            RaidXLevel::X6 => Redundancy::Parity { count: 2 },
            RaidXLevel::X10 => Redundancy::Mirror { copies: 2 },
        }
    }
    fn bundles(&self) -> Option<u64> {
        Some(self.stripe_count())
    }
    fn data_in_stripe(&self, s: u64) -> usize {
        if self.widened.is_some() || self.labeled.is_some() || !self.starts.is_empty() {
            return super::raidx_widths::data_in_bundle(self.level, self.width(s));
        }
        match self.data_starts.get(s as usize + 1) {
            Some(&end) => (end - self.data_starts[s as usize]) as usize,
            None => self.data_per_stripe(),
        }
    }
    fn locate_chunk(&self, logical_chunk: u64) -> (u64, usize) {
        if let Some(l) = &self.labeled {
            let (b, i) = l.home[logical_chunk as usize];
            return (b, i as usize);
        }
        if self.data_starts.is_empty() {
            let (q, r) = super::divmod(logical_chunk, self.data_per_stripe() as u64);
            return (q, r as usize);
        }
        if let Some(w) = &self.widened {
            let i = w.chunks.partition_point(|x| x.0 < logical_chunk);
            if let Some(&(_, b, d)) = w.chunks.get(i).filter(|x| x.0 == logical_chunk) {
                return (b, d as usize);
            }
        }
        // The last bundle starting at or before the chunk.
        let s = self.data_starts.partition_point(|&d| d <= logical_chunk) - 1;
        (s as u64, (logical_chunk - self.data_starts[s]) as usize)
    }
    fn logical_chunk(&self, stripe: u64, data_index: usize) -> u64 {
        if let Some(l) = &self.labeled {
            return l.flat[(l.first[stripe as usize] + data_index as u64) as usize];
        }
        if let Some(w) = &self.widened {
            if data_index as u32 >= w.base_data[stripe as usize] {
                return w.logical[&(stripe, data_index as u32)];
            }
        }
        match self.data_starts.get(stripe as usize) {
            Some(&d) => d + data_index as u64,
            None => stripe * self.data_per_stripe() as u64 + data_index as u64,
        }
    }
    fn capacity_bytes(&self) -> u64 {
        if let Some(l) = &self.labeled {
            return l.home.len() as u64 * self.chunk;
        }
        match self.data_starts.last() {
            Some(&d) => d * self.chunk,
            None => self.stripe_count() * self.data_per_stripe() as u64 * self.chunk,
        }
    }
    fn stripe(&self, s: u64) -> Stripe {
        let b = self.bundle(s);
        let c = b.len();
        let (data, parity, mirrors) = match self.level {
            RaidXLevel::X0 => (b.to_vec(), vec![], vec![]),
            RaidXLevel::X1 => (vec![b[0]], vec![], vec![b[1..].to_vec()]),
            RaidXLevel::X5 => {
                let p = self.p_at(s);
                (
                    b.iter()
                        .enumerate()
                        .filter(|(i, _)| *i != p)
                        .map(|(_, l)| *l)
                        .collect(),
                    vec![b[p]],
                    vec![],
                )
            }
            RaidXLevel::X6 => {
                let p = self.p_at(s);
                let q = (p + 1) % c;
                let data = (0..c - 2).map(|i| b[(q + 1 + i) % c]).collect();
                (data, vec![b[p], b[q]], vec![])
            }
            RaidXLevel::X10 => (
                (0..c / 2).map(|i| b[2 * i]).collect(),
                vec![],
                (0..c / 2).map(|i| vec![b[2 * i + 1]]).collect(),
            ),
        };
        Stripe {
            index: s,
            data,
            parity,
            mirrors,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GB: u64 = 1 << 30;

    #[test]
    fn position_roles_say_what_stripe_says() {
        let sizes = vec![64 * 4096u64; 6];
        for (level, c) in [
            (RaidXLevel::X0, 3),
            (RaidXLevel::X1, 3),
            (RaidXLevel::X5, 4),
            (RaidXLevel::X6, 5),
            (RaidXLevel::X10, 4),
        ] {
            let x = RaidX::new(&sizes, 4096, c, Some(level)).unwrap();
            for b in 0..x.stripe_count() {
                let st = x.stripe(b);
                let locs = x.bundle(b);
                for (pos, role) in x.roles(b).into_iter().enumerate() {
                    let l = locs[pos];
                    let ok = match role {
                        PositionRole::Data(i) => st.data[i] == l,
                        PositionRole::P => st.parity[0] == l,
                        PositionRole::Q => st.parity[1] == l,
                        PositionRole::Copy(i) => st.mirrors[i].contains(&l),
                    };
                    assert!(ok, "{level:?} bundle {b} position {pos}: {role:?}");
                }
            }
        }
    }

    #[test]
    fn paper_capacity_example() {
        // 4 x 148.5, 139.2, 297.5, 74 GB in chunks of 0.1 GB (keeps counts small).
        let unit = GB / 10 / 4096 * 4096;
        let sizes: Vec<u64> = [1485u64, 1485, 1485, 1485, 1392, 2975, 740]
            .iter()
            .map(|s| s * unit)
            .collect();
        let chunks: Vec<u64> = sizes.iter().map(|s| s / unit).collect();
        let raw: u64 = chunks.iter().sum();
        for c in [2usize, 3] {
            assert_eq!(
                max_bundles(&chunks, c) * c as u64,
                raw - raw % c as u64,
                "c = {c} uses every chunk"
            );
        }
        // c = 4: the 297.5 GB disk can only join as many bundles as there are.
        let b4 = max_bundles(&chunks, 4);
        assert_eq!(b4 * 4, 10760, "c = 4 places 1076 GB as published");
        // A classic 7-wide array: 7 x the smallest.
        assert_eq!(7 * 74, 518);
        // 1 TB + 2 x 250 GB at c = 2: 500 GB of bundles at most.
        assert_eq!(max_bundles(&[1000, 250, 250], 2), 500);
        let l = RaidX::new(&sizes, unit, 3, Some(RaidXLevel::X0)).unwrap();
        assert_eq!(l.stripe_count(), max_bundles(&chunks, 3));
    }

    #[test]
    fn weights_put_parity_where_they_say() {
        // Five members, bundles of 3 (RAIDX5): member 4 is an SSD with all
        // the weight; every bundle it is in puts its parity there, the
        // others rotate among the disks (weight 0: ties go to the rotation).
        let sizes = vec![8 * 4096u64; 5];
        let w = [0, 0, 0, 0, 1];
        let x = RaidX::with_weights(&sizes, 4096, 3, Some(RaidXLevel::X5), &w).unwrap();
        let mut parity = [0u64; 5];
        for s in 0..x.stripe_count() {
            let st = x.stripe(s);
            let p = st.parity[0].member;
            parity[p] += 1;
            if st.all().any(|c| c.member == 4) {
                assert_eq!(p, 4, "bundle {s} holds the SSD but put parity on {p}");
            }
            assert!(!st.data.iter().any(|c| c.member == p));
        }
        let with_ssd = (0..x.stripe_count())
            .filter(|&s| x.stripe(s).all().any(|c| c.member == 4))
            .count() as u64;
        assert_eq!(parity[4], with_ssd);
        // Equal weights spread parity evenly (within one per member).
        let x = RaidX::with_weights(&sizes, 4096, 3, Some(RaidXLevel::X5), &[1; 5]).unwrap();
        let mut parity = [0u64; 5];
        (0..x.stripe_count()).for_each(|s| parity[x.stripe(s).parity[0].member] += 1);
        let (lo, hi) = (parity.iter().min().unwrap(), parity.iter().max().unwrap());
        assert!(hi - lo <= 1, "{parity:?}");
        // Wrong counts and levels without parity are refused.
        assert!(RaidX::with_weights(&sizes, 4096, 3, Some(RaidXLevel::X5), &[1; 4]).is_err());
        assert!(RaidX::with_weights(&sizes, 4096, 2, Some(RaidXLevel::X1), &[1; 5]).is_err());
        // Kinds give the weights at create (SSDs 1, disks 0), and only there.
        use crate::member::MemberKind::{Hdd, Ssd};
        let kind = crate::layout::LayoutKind::RaidX {
            chunks_per_bundle: 3,
            level: Some(RaidXLevel::X5),
            weights: vec![],
        };
        assert_eq!(
            crate::layout::weights_from_kinds(&kind, &[Hdd, Hdd, Hdd, Hdd, Ssd]),
            Some(vec![0, 0, 0, 0, 1])
        );
        assert_eq!(crate::layout::weights_from_kinds(&kind, &[Hdd; 5]), None);
    }

    #[test]
    fn a_table_round_trips_and_a_grown_one_keeps_its_data_in_place() {
        let sizes = vec![6 * 4096u64, 6 * 4096, 9 * 4096, 3 * 4096];
        let caps: Vec<u64> = sizes.iter().map(|s| s / 4096).collect();
        let x = RaidX::with_weights(&sizes, 4096, 3, Some(RaidXLevel::X5), &[1, 0, 2, 0]).unwrap();
        let y = RaidX::from_places(
            &x.places(),
            &caps,
            4096,
            3,
            Some(RaidXLevel::X5),
            x.parity_positions().to_vec(),
        )
        .unwrap();
        for s in 0..x.stripe_count() {
            assert_eq!(x.stripe(s), y.stripe(s));
        }
        // Grown by a member: existing bundles keep their roles (each data
        // chunk's logical place), only where a moved chunk lives changes.
        let grown = vec![6u64, 6, 9, 3, 8];
        let plan = super::super::raidx_grow::plan_grow(&x.places(), &grown, 3).unwrap();
        let after = plan.apply(&x.places());
        let mut parity = x.parity_positions().to_vec();
        parity.extend((x.stripe_count()..after.len() as u64).map(|b| (2 - b % 3) as u8));
        let z = RaidX::from_places(&after, &grown, 4096, 3, Some(RaidXLevel::X5), parity).unwrap();
        assert_eq!(z.stripe_count(), max_bundles(&grown, 3));
        for s in 0..x.stripe_count() {
            let (a, b) = (x.stripe(s), z.stripe(s));
            assert_eq!(a.data.len(), b.data.len());
            for (i, (da, db)) in a.data.iter().zip(&b.data).enumerate() {
                let moved = plan
                    .moves
                    .iter()
                    .any(|m| m.bundle == s && m.to == (db.member, db.offset / 4096));
                assert!(
                    da == db || moved,
                    "bundle {s} data {i} changed without a move"
                );
            }
        }
        // A table that puts two chunks of a bundle on one member is refused.
        let mut bad = x.places();
        bad[0][1] = (bad[0][0].0, 5);
        assert!(RaidX::from_places(&bad, &caps, 4096, 3, Some(RaidXLevel::X5), vec![]).is_err());
    }
}
