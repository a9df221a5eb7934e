use thiserror::Error;

/// Engine errors: each message names the member or request and says what to do.
#[derive(Debug, Error)]
pub enum EngineError {
    #[error("{0}")]
    Refused(String),
    /// Another operation of the kind runs on the array (a rebuild): this
    /// one changed nothing; try again once it ends.
    #[error("{0}")]
    Busy(String),
    #[error("member {member}: {source}")]
    Io {
        member: String,
        source: std::io::Error,
    },
    /// A write log device's I/O failed (named as a log device, not a member).
    #[error("log device {device}: {source}")]
    LogIo {
        device: String,
        source: std::io::Error,
    },
    #[error("{0}")]
    Plan(#[from] hetraid_core::PlanError),
    #[error("{0}")]
    Layout(String),
    #[error(
        "the array has lost more members than its redundancy covers ({0}); writes are stopped"
    )]
    TooManyFailures(String),
    /// Write-back: the log's free room is kept for the reclaimer; the
    /// writer reclaims and tries again (`Array::write_now`).
    #[error(
        "the write log has no room for this write until what it holds is written to the members"
    )]
    LogFull,
}

pub type Result<T> = std::result::Result<T, EngineError>;
