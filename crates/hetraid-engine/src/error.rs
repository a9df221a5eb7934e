use thiserror::Error;

/// Engine errors: each message names the member or request and says what to do.
#[derive(Debug, Error)]
pub enum EngineError {
    #[error("{0}")]
    Refused(String),
    /// Refused (or failed) with a kind the caller acts on (core
    /// `ErrorKind`: would lose data, too small, foreign, not found, ...).
    #[error("{1}")]
    Kind(hetraid_core::ErrorKind, String),
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

impl EngineError {
    /// A layout that cannot be built or named, as a sentence.
    pub fn layout(e: hetraid_core::LayoutError) -> Self {
        Self::Layout(e.to_string())
    }

    /// An array spec core refused (`ArraySpec::validate`), worded with the
    /// command line's option names.
    pub fn spec(e: hetraid_core::spec::SpecError) -> Self {
        match e.layout_error() {
            Some(l) => Self::layout(l.clone()),
            None => Self::Refused(e.sentence(&hetraid_core::spec::CLI)),
        }
    }

    /// What kind of failure this is (the exit code of a command, the `kind`
    /// of a control reply).
    pub fn kind(&self) -> hetraid_core::ErrorKind {
        use hetraid_core::ErrorKind as K;
        match self {
            EngineError::Refused(_) | EngineError::Plan(_) | EngineError::Layout(_) => K::Refused,
            EngineError::Kind(k, _) => *k,
            EngineError::Busy(_) | EngineError::LogFull => K::Busy,
            EngineError::Io { .. } | EngineError::LogIo { .. } => K::Io,
            EngineError::TooManyFailures(_) => K::WouldLoseData,
        }
    }
}

impl From<EngineError> for hetraid_core::Failure {
    fn from(e: EngineError) -> Self {
        hetraid_core::Failure::new(e.kind(), e.to_string())
    }
}

/// An error as a [`hetraid_core::Failure`], its kind kept: an engine error's
/// own, an I/O error's `Io`; a sentence alone is a refusal. (`map_err` with
/// it where a command returns failures with kinds.)
pub trait IntoFailure {
    fn failure(self) -> hetraid_core::Failure;
}

impl IntoFailure for EngineError {
    fn failure(self) -> hetraid_core::Failure {
        self.into()
    }
}

impl IntoFailure for std::io::Error {
    fn failure(self) -> hetraid_core::Failure {
        hetraid_core::Failure::new(hetraid_core::ErrorKind::Io, self.to_string())
    }
}

impl IntoFailure for String {
    fn failure(self) -> hetraid_core::Failure {
        self.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hetraid_core::ErrorKind;

    #[test]
    fn every_engine_error_has_its_kind() {
        let io = || std::io::Error::other("boom");
        let cases = [
            (EngineError::Refused("no".into()), ErrorKind::Refused),
            (EngineError::Busy("a rebuild runs".into()), ErrorKind::Busy),
            (
                EngineError::Io {
                    member: "m0".into(),
                    source: io(),
                },
                ErrorKind::Io,
            ),
            (
                EngineError::LogIo {
                    device: "log".into(),
                    source: io(),
                },
                ErrorKind::Io,
            ),
            (
                EngineError::TooManyFailures("2 of 4".into()),
                ErrorKind::WouldLoseData,
            ),
            (EngineError::LogFull, ErrorKind::Busy),
            (
                EngineError::Kind(ErrorKind::Foreign, "x".into()),
                ErrorKind::Foreign,
            ),
        ];
        for (e, k) in cases {
            let f: hetraid_core::Failure = e.into();
            assert_eq!(f.kind, k, "{}", f.message);
        }
        assert_eq!(io().failure().kind, ErrorKind::Io);
        assert_eq!("no".to_string().failure().kind, ErrorKind::Refused);
    }
}
