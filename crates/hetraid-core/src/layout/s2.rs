//! S2-RAID ([Wan 2010]): skewed sub-arrays whose survivors, for any single failed
//! member, are pairwise disjoint, so their rebuilds run in parallel.

use super::{need_members, ChunkLoc, Layout, ParityOrder, Redundancy, Stripe};
use crate::error::LayoutError;

/// Is `g` prime (S²-RAID's group size must be).
pub fn is_prime(g: usize) -> bool {
    g >= 2
        && (2..g)
            .take_while(|d| d * d <= g)
            .all(|d| !g.is_multiple_of(d))
}

/// The partition (offset, length) holding `lost`: it moves as a unit into spare space.
fn partition_extent(lost: ChunkLoc, partition_bytes: u64) -> (u64, u64) {
    (
        lost.offset / partition_bytes * partition_bytes,
        partition_bytes,
    )
}

/// Where `lost` lands in spare slot `slot` of member `target`, for layouts of
/// `(partition_bytes, data partitions k, spare partitions, members)`: spare
/// partitions follow the k data partitions on every member.
fn spare_partition_location(
    lost: ChunkLoc,
    target: usize,
    slot: usize,
    (partition_bytes, k, spare, members): (u64, usize, usize, usize),
) -> Option<ChunkLoc> {
    if slot >= spare || target >= members {
        return None;
    }
    Some(ChunkLoc {
        member: target,
        offset: (k + slot) as u64 * partition_bytes + lost.offset % partition_bytes,
    })
}

/// The partition count K an S2-RAID array gets when none is asked for.
///
/// Without spare space the paper's K = G (S2-RAID5) or K = m (S2-RAID10, m
/// data members): the most streams. With spare partitions reserved, a rebuild
/// writes every stream into spare space on a member that stream does not read,
/// and K = G cannot do that without one member being both read by one stream
/// and written by another: K streams of N members need K·N = R members where
/// R − 1 survive. That member then carries two streams' worth of I/O and the
/// rebuild takes about twice its streams' time; no spreading of the writes helps
/// enough (K·N disk-loads of work over R − 1 disks is at best (R − 1)/(K·N) of
/// the ideal: 8/9 on 9 disks). So with spare space the default is the largest K
/// whose streams (N − 1 members read, one written, each) fit in the survivors:
/// K·N ≤ N·G − 1, K = G − 1 for S2-RAID5; 2K ≤ 2m − 1, K = m − 1 for
/// S2-RAID10 (pass m as `group`); at least 1.
/// `tests::default_partitions_share_no_disk` checks this against the scheduler.
pub fn default_partitions(group: usize, spare_partitions: usize) -> usize {
    if spare_partitions > 0 {
        group.saturating_sub(1).max(1)
    } else {
        group
    }
}

/// S2-RAID5 over R = N*G members: G prime, N groups of G consecutive members, each
/// member cut into K partitions (plus optional spare partitions at the end).
///
/// subRAID x (0 <= x < K*G) lives in partition j = x / G of every group; in group i it
/// sits at position ((x mod G) + i*j) mod G — group 0's row j shifted right by j per
/// group, the construction of the paper. Its member in group i is its logical disk i;
/// it is a small left-symmetric RAID5 of N members.
///
/// Stripes are numbered band-major: band j (= partition j), then row r inside the
/// partition, then g = x mod G. User chunks interleave over the G subRAIDs of a band
/// (like RAID50): unit u of band j goes to subRAID jG + (u mod G).
#[derive(Debug, Clone)]
pub struct S2Raid5 {
    r: usize,
    g: usize,
    n: usize,
    k: usize,
    spare: usize,
    chunk: u64,
    /// Chunks per partition (rows per subRAID).
    part_chunks: u64,
}

impl S2Raid5 {
    pub fn new(
        sizes: &[u64],
        chunk: u64,
        g: usize,
        k: Option<usize>,
        spare: usize,
    ) -> Result<Self, LayoutError> {
        let r = sizes.len();
        if !is_prime(g) {
            return Err(LayoutError::NotPrime(g));
        }
        if !r.is_multiple_of(g) || r == 0 {
            return Err(LayoutError::NotMultiple {
                members: r,
                group: g,
            });
        }
        let n = r / g;
        need_members("s2raid5", r, 2 * g)?;
        if n > g {
            return Err(LayoutError::TooManyGroups {
                groups: n,
                group: g,
            });
        }
        let k = k.unwrap_or(g);
        if k == 0 || k > g {
            return Err(LayoutError::BadPartitions {
                partitions: k,
                group: g,
            });
        }
        let min = *sizes.iter().min().unwrap();
        let part_chunks = min / chunk / (k + spare) as u64;
        if part_chunks == 0 {
            let m = sizes.iter().position(|s| *s == min).unwrap();
            return Err(LayoutError::MemberTooSmall {
                member: m,
                size: min,
                need: chunk * (k + spare) as u64,
            });
        }
        Ok(Self {
            r,
            g,
            n,
            k,
            spare,
            chunk,
            part_chunks,
        })
    }

    pub fn group(&self) -> usize {
        self.g
    }
    pub fn groups(&self) -> usize {
        self.n
    }
    pub fn partitions(&self) -> usize {
        self.k
    }
    pub fn partition_bytes(&self) -> u64 {
        self.part_chunks * self.chunk
    }

    /// Member holding subRAID `x`'s logical disk `i` (its member in group i).
    pub fn member_of(&self, x: usize, i: usize) -> usize {
        let j = x / self.g;
        i * self.g + ((x % self.g) + i * j) % self.g
    }

    /// The subRAID that partition `j` of member `d` belongs to.
    pub fn subraid_at(&self, d: usize, j: usize) -> usize {
        let (i, pos) = (d / self.g, d % self.g);
        // pos = (x mod G + i*j) mod G  =>  x mod G = pos - i*j mod G.
        let xm = (pos + self.g * self.g - (i * j) % self.g) % self.g;
        j * self.g + xm
    }

    /// The partition matrix: rows = partitions, columns = members, entries = subRAID.
    pub fn matrix(&self) -> Vec<Vec<usize>> {
        (0..self.k)
            .map(|j| (0..self.r).map(|d| self.subraid_at(d, j)).collect())
            .collect()
    }

    fn split(&self, s: u64) -> (usize, u64, usize) {
        let per_band = self.part_chunks * self.g as u64;
        let j = (s / per_band) as usize;
        let rem = s % per_band;
        (j, rem / self.g as u64, (rem % self.g as u64) as usize)
    }
}

impl Layout for S2Raid5 {
    fn name(&self) -> String {
        "s2raid5".into()
    }
    fn members(&self) -> usize {
        self.r
    }
    fn chunk_bytes(&self) -> u64 {
        self.chunk
    }
    fn stripe_count(&self) -> u64 {
        self.k as u64 * self.part_chunks * self.g as u64
    }
    fn data_per_stripe(&self) -> usize {
        self.n - 1
    }
    fn redundancy(&self) -> Redundancy {
        Redundancy::Parity { count: 1 }
    }
    fn stripe(&self, s: u64) -> Stripe {
        let (j, row, g) = self.split(s);
        let x = j * self.g + g;
        let (pd, data) = ParityOrder::LeftSymmetric.place(row, self.n);
        let off = j as u64 * self.partition_bytes() + row * self.chunk;
        let at = |i: usize| ChunkLoc {
            member: self.member_of(x, i),
            offset: off,
        };
        Stripe {
            index: s,
            data: data.into_iter().map(at).collect(),
            parity: vec![at(pd)],
            mirrors: vec![],
        }
    }
    fn locate_chunk(&self, l: u64) -> (u64, usize) {
        let d = (self.n - 1) as u64;
        let g = self.g as u64;
        let per_band = self.part_chunks * d * g;
        let (j, u) = (l / per_band, l % per_band);
        let (gi, t) = (u % g, u / g);
        let (row, idx) = (t / d, t % d);
        (j * self.part_chunks * g + row * g + gi, idx as usize)
    }
    fn logical_chunk(&self, s: u64, idx: usize) -> u64 {
        let (j, row, gi) = self.split(s);
        let d = (self.n - 1) as u64;
        let g = self.g as u64;
        let t = row * d + idx as u64;
        j as u64 * self.part_chunks * d * g + t * g + gi as u64
    }
    fn spare_slots(&self) -> usize {
        self.spare
    }
    fn spare_extent(&self, lost: ChunkLoc) -> Option<(u64, u64)> {
        Some(partition_extent(lost, self.partition_bytes()))
    }
    fn spare_location(&self, lost: ChunkLoc, target: usize, slot: usize) -> Option<ChunkLoc> {
        let p = (self.partition_bytes(), self.k, self.spare, self.r);
        spare_partition_location(lost, target, slot, p)
    }
}

/// S2-RAID10: data members D0..Dm-1, mirror members Dm..D2m-1; partition j of data
/// member d is mirrored on member m + ((d + j) mod m), so a failed data member is
/// read back from all m mirror members at once. Stripe = one data chunk + its copy;
/// user chunks stripe across the data members like RAID0. Optional spare partitions
/// at the end of every member take a lost partition in a rebuild into spare space,
/// as S2-RAID5's do.
#[derive(Debug, Clone)]
pub struct S2Raid10 {
    m: usize,
    k: usize,
    spare: usize,
    chunk: u64,
    part_chunks: u64,
}

impl S2Raid10 {
    pub fn new(
        sizes: &[u64],
        chunk: u64,
        k: Option<usize>,
        spare: usize,
    ) -> Result<Self, LayoutError> {
        need_members("s2raid10", sizes.len(), 4)?;
        if !sizes.len().is_multiple_of(2) {
            return Err(LayoutError::Invalid(format!(
                "s2raid10 needs an even member count (data + mirror halves), got {}",
                sizes.len()
            )));
        }
        let m = sizes.len() / 2;
        let k = k.unwrap_or(m);
        if k == 0 || k > m {
            return Err(LayoutError::BadPartitions {
                partitions: k,
                group: m,
            });
        }
        let min = *sizes.iter().min().unwrap();
        let part_chunks = min / chunk / (k + spare) as u64;
        if part_chunks == 0 {
            let mm = sizes.iter().position(|s| *s == min).unwrap();
            return Err(LayoutError::MemberTooSmall {
                member: mm,
                size: min,
                need: chunk * (k + spare) as u64,
            });
        }
        Ok(Self {
            m,
            k,
            spare,
            chunk,
            part_chunks,
        })
    }

    fn partition_bytes(&self) -> u64 {
        self.part_chunks * self.chunk
    }
}

impl Layout for S2Raid10 {
    fn parity_cycle(&self) -> u64 {
        self.stripe_count()
    }
    fn name(&self) -> String {
        "s2raid10".into()
    }
    fn members(&self) -> usize {
        2 * self.m
    }
    fn chunk_bytes(&self) -> u64 {
        self.chunk
    }
    fn stripe_count(&self) -> u64 {
        self.k as u64 * self.part_chunks * self.m as u64
    }
    fn data_per_stripe(&self) -> usize {
        1
    }
    fn redundancy(&self) -> Redundancy {
        Redundancy::Mirror { copies: 2 }
    }
    fn stripe(&self, s: u64) -> Stripe {
        let d = (s % self.m as u64) as usize;
        let row = s / self.m as u64;
        let j = (row / self.part_chunks) as usize;
        let off = row * self.chunk;
        Stripe {
            index: s,
            data: vec![ChunkLoc {
                member: d,
                offset: off,
            }],
            parity: vec![],
            mirrors: vec![vec![ChunkLoc {
                member: self.m + (d + j) % self.m,
                offset: off,
            }]],
        }
    }
    fn spare_slots(&self) -> usize {
        self.spare
    }
    fn spare_extent(&self, lost: ChunkLoc) -> Option<(u64, u64)> {
        Some(partition_extent(lost, self.partition_bytes()))
    }
    fn spare_location(&self, lost: ChunkLoc, target: usize, slot: usize) -> Option<ChunkLoc> {
        let p = (self.partition_bytes(), self.k, self.spare, 2 * self.m);
        spare_partition_location(lost, target, slot, p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nine_disk_matrix_and_d4_failure() {
        let l = S2Raid5::new(&[9 << 20; 9], 4096, 3, None, 0).unwrap();
        assert_eq!(
            l.matrix(),
            vec![
                vec![0, 1, 2, 0, 1, 2, 0, 1, 2],
                vec![3, 4, 5, 5, 3, 4, 4, 5, 3],
                vec![6, 7, 8, 7, 8, 6, 8, 6, 7],
            ]
        );
        let lost: Vec<usize> = (0..3).map(|j| l.subraid_at(4, j)).collect();
        assert_eq!(lost, vec![1, 3, 8]);
        let survivors: Vec<Vec<usize>> = lost
            .iter()
            .map(|&x| {
                (0..3)
                    .map(|i| l.member_of(x, i))
                    .filter(|&d| d != 4)
                    .collect()
            })
            .collect();
        assert_eq!(survivors, vec![vec![1, 7], vec![0, 8], vec![2, 6]]);
    }

    #[test]
    fn bad_parameters_are_refused() {
        let s = [1 << 30; 9];
        assert_eq!(
            S2Raid5::new(&s, 65536, 4, None, 0).unwrap_err(),
            LayoutError::NotPrime(4)
        );
        assert!(matches!(
            S2Raid5::new(&s[..8], 65536, 3, None, 0),
            Err(LayoutError::NotMultiple { .. })
        ));
        assert!(matches!(
            S2Raid5::new(&[1 << 30; 8], 65536, 2, None, 0),
            Err(LayoutError::TooManyGroups { .. })
        ));
        assert!(matches!(
            S2Raid5::new(&s, 65536, 3, Some(4), 0),
            Err(LayoutError::BadPartitions { .. })
        ));
    }
}
