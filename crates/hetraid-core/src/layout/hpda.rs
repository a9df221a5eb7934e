//! HPDA ([Mao 2010]) geometry: n SSD data members + HDD-1 (parity, then log) + HDD-2
//! (log mirror). The RAID4 part is exposed as the stripes; the log regions are
//! described by [`LogRegion`] for the log writer (a later issue).

use super::{ChunkLoc, Layout, Redundancy, Stripe};
use crate::error::LayoutError;
use crate::member::MemberKind;
use serde::Serialize;

/// One copy of the mirrored write log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LogRegion {
    #[serde(rename = "device")]
    pub member: usize,
    pub offset: u64,
    pub length: u64,
}

#[derive(Debug, Clone)]
pub struct Hpda {
    ssds: Vec<usize>,
    hdd1: usize,
    hdd2: usize,
    chunk: u64,
    rows: u64,
    log_bytes: u64,
}

/// HPDA's members: at least two SSDs (the RAID4's data) and exactly two
/// disks (parity and a log copy; the other log copy). One sentence when the
/// counts do not fit.
pub fn kinds_fit(ssds: usize, hdds: usize) -> Result<(), String> {
    if hdds != 2 || ssds < 2 {
        return Err(format!(
            "hpda needs at least two SSDs and exactly two HDDs, got {ssds} SSDs and {hdds} HDDs; give member kinds that match (--kinds or PATH:ssd, or the devices in --members when simulating)"
        ));
    }
    Ok(())
}

impl Hpda {
    /// Members: the SSDs (by kind) hold data, the first HDD parity and a log copy,
    /// the second HDD the other log copy. Without kinds: all but the last two
    /// members are SSDs.
    pub fn new(sizes: &[u64], chunk: u64, kinds: &[MemberKind]) -> Result<Self, LayoutError> {
        let n = sizes.len();
        super::need_members("hpda", n, 4)?;
        let all_hdd = kinds.iter().all(|k| *k == MemberKind::Hdd);
        let is_ssd = |m: usize| {
            if all_hdd {
                m < n - 2
            } else {
                kinds[m] != MemberKind::Hdd
            }
        };
        let ssds: Vec<usize> = (0..n).filter(|&m| is_ssd(m)).collect();
        let hdds: Vec<usize> = (0..n).filter(|&m| !is_ssd(m)).collect();
        kinds_fit(ssds.len(), hdds.len()).map_err(LayoutError::Invalid)?;
        let rows = ssds.iter().map(|&m| sizes[m]).min().unwrap() / chunk;
        let (hdd1, hdd2) = (hdds[0], hdds[1]);
        let raid4 = rows * chunk;
        if rows == 0 {
            return Err(LayoutError::Invalid(format!(
                "hpda's SSDs must each hold at least one {chunk}-byte chunk of data; use larger SSDs"
            )));
        }
        // The smallest log: one record of a whole stripe update, a quarter
        // of the ring at most (as any write log).
        let log_min = crate::journal::log_bytes_min(n, chunk, &crate::journal::Reserve::hpda(n))
            .div_ceil(chunk)
            * chunk;
        if sizes[hdd1] < raid4 + log_min {
            return Err(LayoutError::Invalid(format!(
                "HDD-1 (member {hdd1}) holds the RAID4's parity ({raid4} bytes, as much as each SSD's data) and a copy of the write log past it, so its data area must be at least {} bytes ({raid4} + {log_min} of log); it is {}: use a larger HDD-1 or smaller SSDs",
                raid4 + log_min,
                sizes[hdd1]
            )));
        }
        if sizes[hdd2] < log_min {
            return Err(LayoutError::Invalid(format!(
                "HDD-2 (member {hdd2}) holds the log's mirror: its data area must be at least {log_min} bytes; it is {}",
                sizes[hdd2]
            )));
        }
        let log_bytes = (sizes[hdd1] - raid4).min(sizes[hdd2]) / chunk * chunk;
        Ok(Self {
            ssds,
            hdd1,
            hdd2,
            chunk,
            rows,
            log_bytes,
        })
    }
}

impl Layout for Hpda {
    fn parity_cycle(&self) -> u64 {
        1
    }
    fn name(&self) -> String {
        "hpda".into()
    }
    fn members(&self) -> usize {
        self.ssds.len() + 2
    }
    fn chunk_bytes(&self) -> u64 {
        self.chunk
    }
    fn stripe_count(&self) -> u64 {
        self.rows
    }
    fn data_per_stripe(&self) -> usize {
        self.ssds.len()
    }
    fn redundancy(&self) -> Redundancy {
        Redundancy::Parity { count: 1 }
    }
    fn stripe(&self, s: u64) -> Stripe {
        let off = s * self.chunk;
        Stripe {
            index: s,
            data: self
                .ssds
                .iter()
                .map(|&m| ChunkLoc {
                    member: m,
                    offset: off,
                })
                .collect(),
            parity: vec![ChunkLoc {
                member: self.hdd1,
                offset: off,
            }],
            mirrors: vec![],
        }
    }
    fn log_regions(&self) -> Vec<LogRegion> {
        vec![
            LogRegion {
                member: self.hdd1,
                offset: self.rows * self.chunk,
                length: self.log_bytes,
            },
            LogRegion {
                member: self.hdd2,
                offset: 0,
                length: self.log_bytes,
            },
        ]
    }
}
