//! `data`'s options (clap only): the verb is `crate::ops::array::data`.

use super::*;

#[derive(Debug, Args)]
pub struct DataCmd {
    #[arg(required = true)]
    pub members: Vec<String>,
    /// Run without the array's members that are not given: they are
    /// recorded missing (mdadm's --run). Without it a command given only
    /// some of a healthy array's members refuses and changes nothing.
    #[arg(long)]
    pub degraded: bool,
    /// Byte offset in the array.
    #[arg(long, value_parser = size)]
    pub offset: u64,
    /// Bytes (read: required; write: at most this many from stdin).
    #[arg(long, value_parser = size)]
    pub length: Option<u64>,
}
