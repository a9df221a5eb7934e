//! Errors as values. Every message is one sentence that says what is wrong and how
//! to fix it, because the CLI prints them as they are.

use thiserror::Error;

/// Invalid layout parameters.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LayoutError {
    #[error(
        "{layout} needs at least {min} members, got {got}; add members or pick another layout"
    )]
    TooFewMembers {
        layout: String,
        min: usize,
        got: usize,
    },
    #[error("at most {max} members are supported, got {got}")]
    TooManyMembers { max: usize, got: usize },
    #[error("chunk size {0} bytes is not a positive multiple of 4096; use e.g. 4K, 64K or 1M")]
    BadChunk(u64),
    #[error("{what} lists {got} values but the array has {members} members; give one per member")]
    CountMismatch {
        what: String,
        got: usize,
        members: usize,
    },
    #[error("all parity weights are zero; give at least one member a positive weight")]
    ZeroWeights,
    #[error("group size G = {0} is not prime; S2-RAID needs a prime G such as 2, 3, 5 or 7")]
    NotPrime(usize),
    #[error("{members} members are not a multiple of the group size G = {group}; use a member count that G divides")]
    NotMultiple { members: usize, group: usize },
    #[error("{groups} groups exceed the group size G = {group}; S2-RAID needs N = R/G <= G, so use a larger G")]
    TooManyGroups { groups: usize, group: usize },
    #[error("partitions K = {partitions} must be between 1 and the group size G = {group}")]
    BadPartitions { partitions: usize, group: usize },
    #[error("member {member} is {size} bytes, smaller than the {need} bytes this layout needs; use larger members or a smaller chunk")]
    MemberTooSmall { member: usize, size: u64, need: u64 },
    #[error("{0}")]
    Invalid(String),
}

/// A request the planner cannot turn into a plan.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PlanError {
    #[error("request {offset}+{len} reaches beyond the end of the array ({capacity} bytes); stay below the capacity")]
    OutOfRange {
        offset: u64,
        len: u64,
        capacity: u64,
    },
    #[error("stripe {stripe} has lost more members than its redundancy covers (failed: {failed:?}); the data there is gone")]
    DataLost { stripe: u64, failed: Vec<usize> },
    #[error("member {0} does not exist in this array")]
    NoSuchMember(usize),
    #[error("{0}")]
    Invalid(String),
}

/// What kind of failure an error is: what a caller acts on — a script by
/// the command's exit code, a client of the control socket by the reply's
/// `kind` — instead of matching on the sentence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// Refused because it would lose data (a failure beyond the redundancy,
    /// a member in use overwritten).
    WouldLoseData,
    /// Another operation of the kind runs: try again when it ends.
    Busy,
    /// A device, log or size too small for what was asked.
    TooSmall,
    /// A device that belongs to another array or holds someone's data.
    Foreign,
    /// A member, slot or device that is not there.
    NotFound,
    /// A device's I/O failed.
    Io,
    /// A request of the wrong shape (an option that does not apply).
    Usage,
    /// Refused for another reason; nothing was changed.
    Refused,
}

impl ErrorKind {
    pub const ALL: [ErrorKind; 8] = [
        ErrorKind::WouldLoseData,
        ErrorKind::Busy,
        ErrorKind::TooSmall,
        ErrorKind::Foreign,
        ErrorKind::NotFound,
        ErrorKind::Io,
        ErrorKind::Usage,
        ErrorKind::Refused,
    ];

    /// Its name in the control protocol's replies.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::WouldLoseData => "would-lose-data",
            ErrorKind::Busy => "busy",
            ErrorKind::TooSmall => "too-small",
            ErrorKind::Foreign => "foreign",
            ErrorKind::NotFound => "not-found",
            ErrorKind::Io => "io",
            ErrorKind::Usage => "usage",
            ErrorKind::Refused => "refused",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// The exit code of a command that fails so (sysexits where one fits):
    /// refusals 2, as they always were (nothing was changed), a usage error
    /// 64, busy 75 (EX_TEMPFAIL: try again), an I/O error 74 (EX_IOERR).
    pub fn exit_code(self) -> i32 {
        match self {
            ErrorKind::Usage => 64,
            ErrorKind::Busy => 75,
            ErrorKind::Io => 74,
            ErrorKind::WouldLoseData
            | ErrorKind::TooSmall
            | ErrorKind::Foreign
            | ErrorKind::NotFound
            | ErrorKind::Refused => 2,
        }
    }
}

/// A failure: its kind and its one sentence.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{message}")]
pub struct Failure {
    pub kind: ErrorKind,
    pub message: String,
}

impl Failure {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }
}

/// A sentence alone is a refusal.
impl From<String> for Failure {
    fn from(message: String) -> Self {
        Self::new(ErrorKind::Refused, message)
    }
}

impl From<&str> for Failure {
    fn from(message: &str) -> Self {
        Self::new(ErrorKind::Refused, message)
    }
}

/// Where only the sentence is wanted.
impl From<Failure> for String {
    fn from(f: Failure) -> Self {
        f.message
    }
}

#[cfg(test)]
mod kind_tests {
    use super::*;

    #[test]
    fn kinds_round_trip_by_name_and_refusals_keep_exit_2() {
        for k in ErrorKind::ALL {
            assert_eq!(ErrorKind::parse(k.as_str()), Some(k));
        }
        assert_eq!(ErrorKind::parse("nonsense"), None);
        assert_eq!(Failure::from("no").kind.exit_code(), 2);
        assert_eq!(ErrorKind::Busy.exit_code(), 75);
        assert_eq!(ErrorKind::Io.exit_code(), 74);
        assert_eq!(ErrorKind::Usage.exit_code(), 64);
        assert_eq!(ErrorKind::WouldLoseData.exit_code(), 2);
    }
}
