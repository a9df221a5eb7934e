//! `repair`'s options (clap only): the verb is `crate::ops::array::repair`.

use super::*;

#[derive(Debug, Args)]
pub struct RebuildCmd {
    /// The array's member files, the new one included.
    #[arg(required = true)]
    pub members: Vec<String>,
    /// Run without the array's members that are not given: they are
    /// recorded missing (mdadm's --run). Without it a command given only
    /// some of a healthy array's members refuses and changes nothing.
    #[arg(long)]
    pub degraded: bool,
    /// Rebuild speed while user I/O runs (MD speed_limit_min).
    #[arg(long, default_value = hetraid_core::pace::MD_DEFAULT_MIN_ARG, value_parser = size)]
    pub min_speed: u64,
    /// Rebuild speed limit (MD speed_limit_max); 0 = unlimited.
    #[arg(long, default_value = hetraid_core::pace::MD_DEFAULT_MAX_ARG, value_parser = size)]
    pub max_speed: u64,
    /// Rebuild failed members into the layout's spare space (S2-RAID with
    /// --spare-partitions) instead of onto a replacement member.
    #[arg(long)]
    pub to_spare: bool,
    /// What the two limits hold: array (the whole rebuild, as MD on one
    /// device) or stream (each parallel rebuild stream apart, as one md
    /// device per S2-RAID subRAID, so the streams' rates add up).
    #[arg(long, default_value = "array", value_name = "SCOPE", value_parser = hetraid_core::pace::PaceScope::parse)]
    pub pace: hetraid_core::pace::PaceScope,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RebalanceCmd {
    /// The array's member files (a declustered array that rebuilt a member
    /// into its distributed spare space).
    #[arg(required = true)]
    pub members: Vec<String>,
    /// Run without the array's members that are not given: they are
    /// recorded missing (mdadm's --run). Without it a command given only
    /// some of a healthy array's members refuses and changes nothing.
    #[arg(long)]
    pub degraded: bool,
    /// The replacement (PATH[:hdd|ssd|nvram]): it takes the slot of the
    /// member rebuilt into spare space last, and that member's chunks are
    /// copied onto it from their spare homes.
    #[arg(long, value_name = "PATH[:kind]")]
    pub with: String,
    /// Overwrite a replacement that holds data or another array's member.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub speed: super::change::ChangeSpeed,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ScrubCmd {
    #[arg(required = true)]
    pub members: Vec<String>,
    /// Run without the array's members that are not given: they are
    /// recorded missing (mdadm's --run). Without it a command given only
    /// some of a healthy array's members refuses and changes nothing.
    #[arg(long)]
    pub degraded: bool,
    /// Rewrite what scrub shows to be wrong (RAID6 syndromes, a minority of
    /// three or more mirror copies). Where the layout cannot tell which member
    /// is wrong, nothing is written unless you say which side to trust.
    #[arg(long)]
    pub repair: bool,
    /// With --repair, on parity layouts: where the wrong member cannot be told,
    /// rewrite parity from the data (MD's repair).
    #[arg(long)]
    pub trust_data: bool,
    /// With --repair, on mirror layouts: where the wrong copy cannot be told,
    /// copy member I's content over the others.
    #[arg(long, value_name = "SLOT|PATH")]
    pub trust_member: Option<String>,
    /// Scrub speed while user I/O runs, per member (MD speed_limit_min).
    #[arg(long, default_value = hetraid_core::pace::MD_DEFAULT_MIN_ARG, value_parser = size)]
    pub min_speed: u64,
    /// Scrub speed limit per member (MD speed_limit_max); 0 = unlimited.
    #[arg(long, default_value = hetraid_core::pace::MD_DEFAULT_MAX_ARG, value_parser = size)]
    pub max_speed: u64,
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args)]
pub struct ReclaimCmd {
    /// The array's members (and log devices, if on their own).
    #[arg(required = true)]
    pub members: Vec<String>,
    /// Run without the array's members that are not given: they are
    /// recorded missing (mdadm's --run). Without it a command given only
    /// some of a healthy array's members refuses and changes nothing.
    #[arg(long)]
    pub degraded: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args)]
pub struct ClearCmd {
    /// The array's members, or its name or UUID.
    #[arg(required = true)]
    pub members: Vec<String>,
    /// Only this member's counts: its slot (0-based) or its path (default:
    /// every member's).
    #[arg(long, value_name = "SLOT|PATH")]
    pub member: Option<String>,
    /// Run without the array's members that are not given: they are
    /// recorded missing (mdadm's --run). Without it a command given only
    /// some of a healthy array's members refuses and changes nothing.
    #[arg(long)]
    pub degraded: bool,
    #[arg(long)]
    pub json: bool,
}
