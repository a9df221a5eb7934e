//! `events`'s options (clap only): the verb is `crate::ops::events`.

use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
#[command(
    after_help = "Example:\n  hetraid events a.img b.img c.img d.img\n  hetraid events a.img b.img c.img d.img --json --since 12"
)]
pub struct EventsCmd {
    /// The array's members (any that can be read; a served array's too).
    #[arg(required = true)]
    pub members: Vec<String>,
    /// Only events after this sequence number.
    #[arg(long, value_name = "SEQ", default_value_t = 0)]
    pub since: u64,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Example:\n  hetraid monitor a.img b.img c.img d.img --program /usr/local/bin/raid-alert --delay 10\n\nThe program runs once per event as PROGRAM EVENT ARRAY [MEMBER-PATH], with\nHETRAID_EVENT, HETRAID_ARRAY, HETRAID_NAME, HETRAID_SLOT, HETRAID_PATH,\nHETRAID_TEXT and HETRAID_EVENT_JSON in its environment (mdadm --monitor's\nPROGRAM EVENT MD-DEVICE [COMPONENT]). An array degraded or failed, at start\nor later, is reported as degraded_array or failed_array (mdadm's\nDegradedArray).\n\n  hetraid monitor --scan --syslog --mail root@localhost"
)]
pub struct MonitorCmd {
    /// The array's members (any that can be read; a served array's too),
    /// or its name or UUID; none with --scan.
    pub members: Vec<String>,
    /// Watch every array of the configuration file and every array found
    /// on its devices (mdadm --monitor --scan).
    #[arg(long)]
    pub scan: bool,
    /// Also send every report to the system log (facility daemon; alarms as
    /// warnings).
    #[arg(long)]
    pub syslog: bool,
    /// Mail alarms (a member failed, a degraded or failed array, checksum
    /// errors, a test message) to this address through /usr/sbin/sendmail.
    #[arg(long, value_name = "ADDRESS")]
    pub mail: Option<String>,
    /// Run in the background: print the monitor's pid and return (mdadm
    /// --daemonise); a systemd unit runs it in the foreground instead.
    #[arg(long)]
    pub daemonise: bool,
    /// The top-level `--config` (set by the dispatch).
    #[arg(skip)]
    pub config: Option<PathBuf>,
    /// Run this program for every event.
    #[arg(long, value_name = "CMD")]
    pub program: Option<PathBuf>,
    /// Seconds between looks at the members (mdadm's --delay).
    #[arg(long, default_value_t = 5.0, value_name = "SECS")]
    pub delay: f64,
    /// Look once, report, and exit (mdadm's --oneshot).
    #[arg(long)]
    pub oneshot: bool,
    /// Report a test_message event at start (mdadm's --test).
    #[arg(long)]
    pub test: bool,
    /// Print each event as one JSON line.
    #[arg(long)]
    pub json: bool,
}
