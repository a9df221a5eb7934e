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
