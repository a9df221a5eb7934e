//! `members`'s options (clap only): the verb is `crate::ops::array::members`.

use super::*;

#[derive(Debug, Args)]
pub struct MembersCmd {
    /// The array's member files, in any order; or its name or UUID (from
    /// the configuration file, or found by a scan of its devices).
    /// assemble --scan: the directories or devices to scan (default: the
    /// configuration's devices).
    #[arg(required_unless_present = "scan")]
    pub members: Vec<String>,
    /// Run without the array's members that are not given: they are
    /// recorded missing (mdadm's --run). Without it a command given only
    /// some of a healthy array's members refuses and changes nothing.
    #[arg(long)]
    pub degraded: bool,
    /// assemble: start even if some members are stale (the freshest are
    /// brought back: writes made after they left are lost on them) or the array
    /// is dirty and degraded (data in the regions being written may be wrong).
    #[arg(long)]
    pub force: bool,
    #[arg(long)]
    pub json: bool,
    /// status: exit with the array's health, as `mdadm --detail --test`:
    /// 0 optimal, 1 degraded or rebuilding, 2 failed, 4 when it cannot be
    /// read.
    #[arg(long)]
    pub test: bool,
    /// assemble: the paths are directories (their files and block devices
    /// are read) or devices; the members of each array found are grouped
    /// by UUID and each array is assembled (mdadm --assemble --scan).
    #[arg(long)]
    pub scan: bool,
    /// assemble --scan: only the array of this name (`create --name`).
    #[arg(long, requires = "scan")]
    pub name: Option<String>,
    /// assemble --scan: print the configuration file's lines for the arrays
    /// found (devices, names, UUIDs, members) instead of assembling them
    /// (mdadm --detail --scan): hetraid assemble --scan --print-config
    /// /srv/hetraid > /etc/hetraid/hetraid.conf
    #[arg(long, requires = "scan")]
    pub print_config: bool,
    /// status: print only the mkfs command line that lines a filesystem of
    /// type FS (ext4 or xfs) up with the stripes (stride and stripe width),
    /// for the device the array is served as: $(hetraid status tank --mkfs
    /// ext4) /dev/nbd0
    #[arg(long, value_name = "FS")]
    pub mkfs: Option<String>,
    /// The top-level `--config` (set by the dispatch).
    #[arg(skip)]
    pub config: Option<std::path::PathBuf>,
}

#[derive(Debug, Args)]
pub struct MemberOpCmd {
    /// The array's member files.
    #[arg(required = true)]
    pub members: Vec<String>,
    /// Run without the array's members that are not given: they are
    /// recorded missing (mdadm's --run). Without it a command given only
    /// some of a healthy array's members refuses and changes nothing.
    #[arg(long)]
    pub degraded: bool,
    /// The member: its slot (0-based) or its path (a member of this array).
    #[arg(long, value_name = "SLOT|PATH")]
    pub member: Option<String>,
    /// replace: the write log's copy (0 or 1) instead of a member; the new
    /// device receives the log's live records at once.
    #[arg(long, value_name = "I")]
    pub log_copy: Option<usize>,
    /// The new member file (replace).
    #[arg(long)]
    pub with: Option<String>,
    /// fail: even beyond the redundancy (data becomes unreadable); replace:
    /// overwrite a device that holds data or another array's member.
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Args)]
pub struct AddCmd {
    /// The array's member files.
    #[arg(required = true)]
    pub members: Vec<String>,
    /// Run without the array's members that are not given: they are
    /// recorded missing (mdadm's --run). Without it a command given only
    /// some of a healthy array's members refuses and changes nothing.
    #[arg(long)]
    pub degraded: bool,
    /// The new device (PATH[:hdd|ssd|nvram]): put in the first failed,
    /// missing or removed slot (then rebuild), or, when no slot wants one,
    /// added as a hot spare.
    #[arg(long, value_name = "PATH[:kind]")]
    pub with: String,
    /// Add it as a hot spare even when a slot is failed (it then waits;
    /// served, it takes the slot at once).
    #[arg(long)]
    pub spare: bool,
    /// Overwrite a device that holds data or another array's member.
    #[arg(long)]
    pub force: bool,
}
