//! `probe`'s options (clap only): the verb is `crate::ops::probe`.

use clap::Args;
use hetraid_core::MemberKind;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct ProbeCmd {
    /// Files or block devices to measure.
    #[arg(required = true)]
    pub members: Vec<String>,
    /// Also measure writes: random and sequential writes overwrite the
    /// member's contents.
    #[arg(long)]
    pub destructive: bool,
    /// Seconds per measurement (five measurements; three without
    /// --destructive).
    #[arg(long, default_value = "2")]
    pub seconds: f64,
    /// Directory for the device files (probe-NAME.toml).
    #[arg(long, default_value = ".")]
    pub out: PathBuf,
    /// The kind to record (default: hdd when a random read takes over 1 ms,
    /// else ssd).
    #[arg(long, value_parser = MemberKind::parse)]
    pub kind: Option<MemberKind>,
    /// --destructive: overwrite a device that holds a hetraid member or
    /// other data in its first MiB.
    #[arg(long)]
    pub force: bool,
}
