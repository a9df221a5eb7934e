//! hetraid's placement ideas at cluster scale, in Ceph's own terms (issue 20).
//!
//! A [`Cluster`] is hosts with devices (OSDs), each carrying the figures the
//! simulator's device models give it ([`DeviceFigures`]); the CLI measures
//! them, this crate only decides and writes text:
//!
//! - [`placement`]: where an erasure-coded pool's shards go — spread by
//!   capacity (plain Ceph), coding shards on the fast class (RAID4S at
//!   cluster scale), or coding shards on the fast class by service rate
//!   (RAIDH) — and which one the load model prefers;
//! - [`load`]: per-OSD load under a client workload and the recovery of one
//!   lost OSD, predicted from the placement's shard shares;
//! - [`crush`]: the CRUSH map text (`crushtool -c` compiles it), the
//!   erasure-code profile, and the commands that apply them.
//!
//! Pure functions: no files, no clocks, no processes.

pub mod cluster;
pub mod crush;
pub mod load;
pub mod placement;

pub use cluster::{Cluster, DeviceFigures, FailureDomain, Host, Osd};
pub use load::{ClientLoad, EcWrites, Recovery, Workload};
pub use placement::{EcProfile, Placement, PlacementPlan};
