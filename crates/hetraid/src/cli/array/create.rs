//! `create`'s options (clap only): the verb is `crate::ops::array::create`.

use super::*;

#[derive(Debug, Args)]
pub struct CreateCmd {
    #[command(flatten)]
    pub layout: LayoutOpts,
    /// Write selection: md, modthresh, modthresh-stripe (the threshold decided per stripe), rmw-always, cost.
    #[arg(long, default_value = "md")]
    pub policy: String,
    /// Create member files of this size (they must not exist yet).
    #[arg(long, value_parser = size)]
    pub size: Option<u64>,
    /// Overwrite members that belong to another array.
    #[arg(long)]
    pub force: bool,
    /// Block checksums: `crc32c` (the default) keeps a checksum per 4 KiB
    /// block of every member (0.1 % of its size) and verifies every read: a
    /// bad block is rebuilt from the redundancy and rewritten, never
    /// returned; `none` does not.
    #[arg(long, default_value = "crc32c", value_name = "crc32c|none")]
    pub checksums: String,
    /// Layouts with copies (raid1, raid10, s2raid10, raidx1/10): how reads
    /// choose a copy: md (MD's read_balance, default), first, or the RAIDX
    /// paper's raidx1..raidx4. Stored in the superblock.
    #[arg(long, value_name = "POLICY")]
    pub read_policy: Option<String>,
    /// A write log on its own device(s): PATH, or two mirrored PATH,PATH
    /// (each optionally PATH:kind; default ssd). Created with --log-size when
    /// the file does not exist. List the log devices with the members in
    /// every later command.
    #[arg(long, value_delimiter = ',', value_name = "PATH[:kind]")]
    pub log: Option<Vec<String>>,
    /// How the log is used: journal (write-through: every stripe update is
    /// durable in the log before the members are written, which closes the
    /// RAID5 write hole) or write-back (a write is acknowledged once in the
    /// log; a reclaimer writes it to the members later, always at close).
    #[arg(long, value_name = "journal|write-back")]
    pub log_mode: Option<String>,
    /// Size of log files this command creates (default 64M).
    #[arg(long, value_parser = size)]
    pub log_size: Option<u64>,
    /// Or: keep the write log on the members, SIZE bytes past the data area
    /// of the two fastest (two copies; the members need that much room).
    #[arg(long, value_parser = size, value_name = "SIZE")]
    pub log_region: Option<u64>,
    /// A name for the array (at most 64 bytes), kept on every member:
    /// status shows it, `assemble --scan` and `events` name the array by it.
    #[arg(long)]
    pub name: Option<String>,
    /// Member files or block devices, optionally PATH:kind (hdd, ssd, nvram).
    #[arg(required = true)]
    pub members: Vec<String>,
}
