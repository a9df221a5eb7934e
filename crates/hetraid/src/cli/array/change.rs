//! `change`'s options (clap only): the verb is `crate::ops::array::change`.

use super::*;

#[derive(Debug, Args)]
pub struct GrowCmd {
    /// The array's member files.
    #[arg(required = true)]
    pub members: Vec<String>,
    /// Run without the array's members that are not given: they are
    /// recorded missing (mdadm's --run). Without it a command given only
    /// some of a healthy array's members refuses and changes nothing.
    #[arg(long)]
    pub degraded: bool,
    /// The new member (PATH[:hdd|ssd|nvram]): RAIDX moves chunks onto it so
    /// the array holds the most bundles the members allow (a RAIDX of
    /// varying widths widens its bundles onto it instead, to the capacity
    /// bound, moving nothing). Without --add, a grow or shrink cut short (a
    /// crash) is finished.
    #[arg(long, value_name = "NEW")]
    pub add: Option<String>,
    /// RAIDH: the parity weights after the grow, one per member (a member
    /// added included): the array restripes to them. Also how a member
    /// replaced by a faster one gets a larger share of parity.
    #[arg(long, value_delimiter = ',')]
    pub weights: Option<Vec<u64>>,
    /// Overwrite a new member that holds another array's member.
    #[arg(long)]
    pub force: bool,
    /// `max`: RAIDX members with room for more chunk slots than they use
    /// (replaced by larger ones) get them, chunks moving onto them.
    #[arg(long, value_name = "max")]
    pub size: Option<String>,
    /// Stop after N batches, the change left recorded (tests of resuming:
    /// `assemble`, `serve` or `grow` finish it).
    #[arg(long, hide = true)]
    pub batches: Option<u64>,
    #[command(flatten)]
    pub speed: ChangeSpeed,
    #[arg(long)]
    pub json: bool,
}

/// MD's two speed limits for a change on a served array.
#[derive(Debug, Args)]
pub struct ChangeSpeed {
    /// Bytes a second of chunk moves (per member) kept while clients do
    /// I/O (MD's speed_limit_min; a served array's requests run between
    /// batches). Default MD's 1000K served.
    #[arg(long, value_parser = size)]
    pub min_speed: Option<u64>,
    /// Bytes a second at most when idle (MD's speed_limit_max); 0 =
    /// unlimited. Default MD's 200000K served, unlimited offline.
    #[arg(long, value_parser = size)]
    pub max_speed: Option<u64>,
}

#[derive(Debug, Args)]
pub struct ShrinkCmd {
    /// The array's member files (the member being removed may be left out
    /// when it is gone).
    #[arg(required = true)]
    pub members: Vec<String>,
    /// Run without the array's members that are not given: they are
    /// recorded missing (mdadm's --run). Without it a command given only
    /// some of a healthy array's members refuses and changes nothing.
    #[arg(long)]
    pub degraded: bool,
    /// The slot whose chunks are re-placed on the other members: a member
    /// failed or missing (its chunks are rebuilt), or one leaving (copied).
    #[arg(long, value_name = "SLOT|PATH")]
    pub member: String,
    /// The array's new size, after what sits on it (a filesystem) has been
    /// shrunk to fit: a whole number of bundles the other members hold.
    #[arg(long, value_parser = size)]
    pub size: u64,
    /// Shrink even past data written on the array, or by more than half.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub speed: ChangeSpeed,
    #[arg(long)]
    pub json: bool,
}
