//! hetraid's storage engine: executes `hetraid-core` plans with real bytes on real
//! members. It makes no layout decision of its own.

pub mod annex;
pub mod array;
pub mod bitmap;
pub mod bundles;
pub mod changes;
mod copyback;
pub mod error;
pub mod format;
pub mod identity;
pub mod iostat;
pub(crate) mod le;
pub mod log;
pub mod member;
pub mod queue;
pub mod rebuild;
mod replace;
pub mod scrub;

pub use array::{
    Access, Array, ArrayCell, AssembleOptions, ChangeOptions, ChangeProgress, ChangeReport,
    CreateOptions, LogSpec, Reopen, ShrinkSteps, Status,
};
pub use error::{EngineError, Result};

/// A word a report names a state or kind with: written from the engine's
/// constants, read back from a server's answer (serde), compared as a `str`.
pub type Word = std::borrow::Cow<'static, str>;
pub use rebuild::{CopyBackReport, RebuildOptions, RebuildProgress, RebuildReport};
pub use scrub::{ScrubMismatch, ScrubOptions, ScrubReport};
