//! `iostat`'s options (clap only): the verb is `crate::ops::iostat`.

use clap::Args;

#[derive(Debug, Args)]
#[command(
    after_help = "Example:\n  hetraid iostat tank 1          # every second, until interrupted\n  hetraid iostat tank pool 5 3   # two arrays, three reports five seconds apart\n  hetraid iostat a.img b.img c.img d.img --json\n\nThe array must be served, or held by a command (a rebuild, a scrub): the\ncounters live in that process. The first report covers the time since it\nbegan counting; each next one the interval."
)]
pub struct IostatCmd {
    /// Arrays by name or UUID (default: every array of the configuration
    /// file), or one array's members; then [INTERVAL [COUNT]] in seconds, as
    /// zpool iostat takes them.
    pub args: Vec<String>,
    /// One JSON object per report, on one line.
    #[arg(long)]
    pub json: bool,
    /// The top-level `--config` (set by the dispatch).
    #[arg(skip)]
    pub config: Option<std::path::PathBuf>,
}
