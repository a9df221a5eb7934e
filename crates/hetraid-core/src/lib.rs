//! hetraid's decision core.
//!
//! Everything a RAID controller decides — where a byte lives, which members a write
//! must read, RMW or RCW, how a degraded read is reconstructed, which stripes a rebuild
//! may run in parallel — is a pure function here. The engine and the simulator execute
//! the resulting plans; neither re-decides anything.
//!
//! This crate does no I/O, reads no clock and spawns no thread.

pub mod control;
pub mod decompose;
pub mod error;
pub mod exec;
pub mod hpda;
pub mod iomap;
pub mod journal;
pub mod layout;
pub mod limits;
pub mod loadmap;
pub mod logconfig;
pub mod member;
pub mod membership;
pub mod pace;
pub mod plan;
pub mod readbalance;
pub mod rebuild;
pub mod scrub;
pub mod sitout;
pub mod spec;
pub mod trim;
pub mod units;
pub mod wbuf;
pub mod weights;

pub use error::{ErrorKind, Failure, LayoutError, PlanError};
pub use layout::{build, ChunkLoc, Layout, LayoutKind, LayoutSpec, Redundancy, Stripe};
pub use member::{MemberKind, ServiceModel};
pub use plan::{ArrayState, Mode, Plan, Planner, Request, StripePlan, WritePolicy};
