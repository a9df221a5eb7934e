//! hetraid's discrete-event simulator.
//!
//! The controller executes the plans `hetraid-core` makes — the same dispatch the
//! engine uses — on HDD, SSD and RAM models in integer-nanosecond simulated time.
//! The same config and seed give byte-identical output.

pub mod config;
pub mod device;
pub mod estimate;
pub mod kernel;
mod memory;
pub mod plot;
pub mod preset;
pub mod report;
pub mod setup;
pub mod sim;
pub mod sweep;
pub mod trace;
pub mod workload;

pub use config::{RunConfig, Size};
pub use report::Report;
pub use sim::run;
