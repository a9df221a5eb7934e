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

/// Where a simulated result came from: enough, with the configuration and
/// seeds printed beside it, to run it again and get the same numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Provenance {
    /// The hetraid version.
    pub hetraid: &'static str,
    /// The git commit built from ("unknown" outside a clone).
    pub commit: &'static str,
}

/// This build's [`Provenance`].
pub fn provenance() -> Provenance {
    Provenance {
        hetraid: env!("CARGO_PKG_VERSION"),
        commit: env!("HETRAID_COMMIT"),
    }
}

impl std::fmt::Display for Provenance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "hetraid {} (commit {})", self.hetraid, self.commit)
    }
}
