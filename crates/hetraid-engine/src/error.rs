use thiserror::Error;

/// Engine errors: each message names the member or request and says what to do.
#[derive(Debug, Error)]
pub enum EngineError {
    #[error("{0}")]
    Refused(String),
    #[error("member {member}: {source}")]
    Io {
        member: String,
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
}

pub type Result<T> = std::result::Result<T, EngineError>;
