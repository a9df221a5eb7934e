//! Per-member load maps by exhaustive enumeration (thesis ch. 3–5): every
//! chunk-aligned start position of one placement cycle is written once with a
//! write of K chunks; the shares of page reads and writes per member show which
//! members a layout loads (RAID4's parity member, RAIDE's edges, ...).

use crate::error::PlanError;
use crate::layout::Layout;
use crate::plan::{ArrayState, Planner, Request};
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct MemberLoad {
    pub device: usize,
    pub read_share: f64,
    pub write_share: f64,
    pub read_pages: u64,
    pub write_pages: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct LoadMap {
    pub starts: u64,
    pub write_chunks: u64,
    pub members: Vec<MemberLoad>,
}

/// Enumerate writes of `write_chunks` chunks from every start chunk of one cycle.
pub fn loadmap(
    planner: &Planner,
    state: &ArrayState,
    write_chunks: u64,
) -> Result<LoadMap, PlanError> {
    let l: &dyn Layout = planner.layout;
    let chunk = l.chunk_bytes();
    let starts = l.parity_cycle() * l.data_per_stripe() as u64;
    let total_chunks = l.capacity_bytes() / chunk;
    if write_chunks == 0 || write_chunks > total_chunks {
        return Err(PlanError::Invalid(format!(
            "--write-chunks must be between 1 and the array's {total_chunks} chunks"
        )));
    }
    let n = l.members();
    let (mut rp, mut wp) = (vec![0u64; n], vec![0u64; n]);
    for s in 0..starts {
        // Wrap around at the end of a small array so every start counts once.
        let start = s.min(total_chunks - write_chunks);
        let plan = planner.plan(&Request::write(start * chunk, write_chunks * chunk), state)?;
        for io in plan.member_io(n) {
            rp[io.device] += io.read_pages;
            wp[io.device] += io.write_pages;
        }
    }
    let (tr, tw) = (
        rp.iter().sum::<u64>().max(1) as f64,
        wp.iter().sum::<u64>().max(1) as f64,
    );
    Ok(LoadMap {
        starts,
        write_chunks,
        members: (0..n)
            .map(|d| MemberLoad {
                device: d,
                read_share: rp[d] as f64 / tr,
                write_share: wp[d] as f64 / tw,
                read_pages: rp[d],
                write_pages: wp[d],
            })
            .collect(),
    })
}
