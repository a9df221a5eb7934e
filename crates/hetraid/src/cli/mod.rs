//! The command line: clap's definitions of every verb, and the dispatch
//! from a parsed command line to the verb's code in `ops/`.

pub mod advise;
pub mod analyze;
pub mod array;
pub mod ceph;
pub mod demo;
pub mod events;
pub mod iostat;
pub mod layout;
pub mod loadmap;
pub mod plan;
pub mod probe;
pub mod serve;
pub mod sim;
pub mod sweep;
pub mod trace;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "hetraid",
    version,
    about = "Software RAID for heterogeneous arrays, and a simulator that runs the same controller",
    after_help = "Exit status: 0 done; 1 status --test: degraded or rebuilding, scrub: a mismatch left unrepaired; 2 refused (bad input, an unsafe request) or status --test: failed; 4 status --test: the array cannot be read; 64 a command line of the wrong shape (unknown option, missing argument).\n\nExample:\n  hetraid demo"
)]
pub struct Cli {
    /// The configuration file naming arrays (default: $HETRAID_CONFIG, else
    /// /etc/hetraid/hetraid.conf): any verb then takes an array's name or
    /// UUID in place of its members.
    #[arg(
        long = "config",
        id = "config_file",
        global = true,
        value_name = "PATH"
    )]
    pub config: Option<std::path::PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

impl Command {
    /// The member list of an array verb, which may be a name or UUID.
    fn members_mut(&mut self) -> Option<&mut Vec<String>> {
        Some(match self {
            Command::Assemble(c) | Command::Status(c) if !c.scan => &mut c.members,
            Command::Fail(c) | Command::Replace(c) | Command::Remove(c) => &mut c.members,
            Command::Add(c) => &mut c.members,
            Command::Grow(c) => &mut c.members,
            Command::Shrink(c) => &mut c.members,
            Command::Rebuild(c) => &mut c.members,
            Command::Rebalance(c) => &mut c.members,
            Command::Scrub(c) => &mut c.members,
            Command::Reclaim(c) => &mut c.members,
            Command::Clear(c) => &mut c.members,
            Command::Write(c) | Command::Read(c) => &mut c.members,
            Command::Serve(c) => &mut c.members,
            Command::Events(c) => &mut c.members,
            Command::Monitor(c) => &mut c.members,
            _ => return None,
        })
    }

    /// An array's name or UUID given in place of its members replaced by
    /// them (`crate::ops::array::names`); `serve NAME` takes the
    /// configuration's `listen` when none is given.
    fn resolve_names(
        &mut self,
        config: Option<&std::path::Path>,
    ) -> Result<(), hetraid_core::Failure> {
        if let Command::Assemble(c) | Command::Status(c) = self {
            c.config = config.map(std::path::Path::to_path_buf);
        }
        if let Command::Iostat(c) = self {
            c.config = config.map(std::path::Path::to_path_buf);
        }
        // An option that does not apply is an error (`sim FILE` takes its
        // configuration as an argument, not as --config).
        if config.is_some()
            && !matches!(self, Command::Iostat(_) | Command::Monitor(_))
            && self.members_mut().is_none()
            && !matches!(self, Command::Assemble(c) | Command::Status(c) if c.scan)
        {
            return Err("--config names arrays for the array verbs (status, fail, serve, monitor, iostat, ...); this verb takes none (sim and sweep take their file as an argument)".into());
        }
        if let Command::Monitor(c) = self {
            c.config = config.map(std::path::Path::to_path_buf);
            if c.scan {
                return Ok(());
            }
        }
        let Some(members) = self.members_mut() else {
            return Ok(());
        };
        // Only a lone word that is no path is a name: nothing is read otherwise.
        if members.len() != 1
            || members[0].contains('/')
            || std::path::Path::new(&members[0]).exists()
        {
            return Ok(());
        }
        let loaded = crate::config::Config::load(config)?;
        let entry = crate::ops::array::names::resolve_members(members, &loaded)?;
        if let (Command::Serve(c), Some(e)) = (self, entry) {
            if c.listen.is_none() {
                c.listen = e.listen;
            }
        }
        Ok(())
    }
}

#[derive(Subcommand)]
pub enum Command {
    /// Print a layout's geometry: per stripe, data and parity members and offsets.
    #[command(
        after_help = "Example:\n  hetraid layout --layout s2raid5 --devices 9 --group 3 --stripes 9"
    )]
    Layout(crate::ops::layout::LayoutCmd),
    /// Print the I/O plan of one read or write: per member reads and writes, and the
    /// RMW/RCW/full choice per page row.
    #[command(
        after_help = "Example:\n  hetraid plan --layout raid6 --devices 6 --chunk 64K --failed 1,2 --read 0+256K --json"
    )]
    Plan(crate::ops::plan::PlanCmd),
    /// Enumerate a write of K chunks from every start position of one placement
    /// cycle and print each member's share of reads and writes.
    #[command(
        after_help = "Example:\n  hetraid loadmap --layout raide --devices 5 --write-chunks 5"
    )]
    Loadmap(crate::ops::loadmap::LoadmapCmd),
    /// Create an array from member files or block devices.
    #[command(
        after_help = "Example:\n  hetraid create --layout raid4s --size 1G --name tank a.img b.img c.img d.img:ssd"
    )]
    Create(crate::ops::array::CreateCmd),
    /// Assemble an array from its members (resyncing after a crash) and report it.
    #[command(
        after_help = "Example:\n  hetraid assemble a.img b.img c.img d.img\n  hetraid assemble --scan /srv/arrays"
    )]
    Assemble(crate::ops::array::MembersCmd),
    /// Show an array's state and members.
    #[command(
        after_help = "Example:\n  hetraid status a.img b.img c.img d.img\n  hetraid status --test a.img b.img c.img d.img || echo \"needs attention: $?\""
    )]
    Status(crate::ops::array::MembersCmd),
    /// Mark a member faulty.
    #[command(after_help = "Example:\n  hetraid fail a.img b.img c.img d.img --member b.img")]
    Fail(crate::ops::array::MemberOpCmd),
    /// Detach a failed member (its slot stays degraded until add or replace).
    #[command(after_help = "Example:\n  hetraid remove a.img b.img c.img d.img --member b.img")]
    Remove(crate::ops::array::MemberOpCmd),
    /// Put a new member in place of a failed one (then run rebuild).
    #[command(
        after_help = "Example:\n  hetraid replace a.img b.img c.img d.img --member b.img --with e.img\n  hetraid rebuild a.img e.img c.img d.img"
    )]
    Replace(crate::ops::array::MemberOpCmd),
    /// Add a new member into the first failed or missing slot (then run rebuild).
    #[command(
        after_help = "Example:\n  hetraid add a.img c.img d.img --with b.img        # b.img back (re-add) or into a failed slot\n  hetraid add a.img b.img c.img d.img --with s.img  # a healthy array: a hot spare"
    )]
    Add(crate::ops::array::AddCmd),
    /// Add a member (--add NEW): a RAIDX array moves chunks onto it, a
    /// RAID5, RAID6 or RAIDH array restripes onto it; the capacity grows by
    /// what it allows. --weights restripes RAIDH to new parity weights,
    /// --size max lets a RAIDX member replaced by a larger one bring its
    /// whole size. Without them, finish a grow, shrink or restripe cut
    /// short. Crash-safe: run it again after a kill.
    #[command(
        after_help = "Example:\n  hetraid grow a.img b.img c.img d.img --add e.img:ssd\n  hetraid grow a.img b.img c.img d.img --weights 1,1,1,3"
    )]
    Grow(crate::ops::array::GrowCmd),
    /// Shrink a RAIDX array to --size and re-place the chunks of slot
    /// --member on the other members: full redundancy again, before any
    /// replacement arrives. Shrink what sits on the array first.
    #[command(
        after_help = "Example:\n  hetraid shrink a.img c.img d.img e.img --member 1 --size 100M"
    )]
    Shrink(crate::ops::array::ShrinkCmd),
    /// Rebuild members being replaced, with MD-like speed limits and a progress bar.
    #[command(after_help = "Example:\n  hetraid rebuild a.img e.img c.img d.img --max-speed 100M")]
    Rebuild(crate::ops::array::RebuildCmd),
    /// Declustered: copy the member rebuilt into distributed spare space
    /// back onto a replacement (dRAID's rebalance): one read per chunk, and
    /// the spare space is free for the next failure. Offline; crash-safe
    /// (a copy cut short leaves a member for hetraid rebuild).
    #[command(
        after_help = "Example:\n  hetraid rebuild m0.img m1.img ... m11.img --to-spare\n  hetraid rebalance m0.img m2.img ... m11.img --with new.img"
    )]
    Rebalance(crate::ops::array::RebalanceCmd),
    /// Check redundancy of every stripe; --repair rewrites mismatches.
    #[command(after_help = "Example:\n  hetraid scrub a.img b.img c.img d.img --repair")]
    Scrub(crate::ops::array::ScrubCmd),
    /// Write everything a write-back log holds (hpda's, or --log-mode
    /// write-back) to the members and empty the log; online when served.
    #[command(after_help = "Example:\n  hetraid reclaim s1.img s2.img h1.img h2.img")]
    Reclaim(crate::ops::array::ReclaimCmd),
    /// Set members' error counts (status's read, write and cksum columns,
    /// kept on the members across assemblies) back to zero, as zpool clear.
    #[command(
        after_help = "Example:\n  hetraid clear tank\n  hetraid clear a.img b.img c.img d.img --member b.img"
    )]
    Clear(crate::ops::array::ClearCmd),
    /// Write standard input into the array at --offset (flushed before exit).
    #[command(
        after_help = "Example:\n  hetraid write a.img b.img c.img d.img --offset 1M < data.bin"
    )]
    Write(crate::ops::array::DataCmd),
    /// Read --length bytes at --offset to standard output.
    #[command(
        after_help = "Example:\n  hetraid read a.img b.img c.img d.img --offset 1M --length 4M > out.bin"
    )]
    Read(crate::ops::array::DataCmd),
    /// Export an array over NBD (unix:PATH or tcp:HOST:PORT) until SIGINT/SIGTERM.
    #[command(
        after_help = "Example:\n  hetraid serve a.img b.img c.img d.img s.img --listen unix:/run/tank.sock --log-format json\n  nbdcopy nbd+unix:///?socket=/run/tank.sock out.img"
    )]
    Serve(crate::ops::serve::ServeCmd),
    /// From the devices you have and your workload to the layout to build: candidates simulated, ranked, the Pareto front, the create command line.
    #[command(
        after_help = "Example:\n  hetraid advise --members 'caviar-black-640*4,x25e-64' --workload random-write --size 4K\n  hetraid advise --members 'wd2500yd*4,x25e-64*2' --redundancy 2 --objective p99 --json"
    )]
    Advise(crate::ops::advise::AdviseCmd),
    /// Measure files or block devices (random 4K and sequential, reads; writes with --destructive) and write device files the simulator takes.
    #[command(
        after_help = "Example:\n  hetraid probe /dev/nvme0n1 --out devices/\n  hetraid sim --layout raid5 --members 'devices/probe-nvme0n1.toml*4' --workload random-write"
    )]
    Probe(crate::ops::probe::ProbeCmd),
    /// hetraid's placements for a Ceph cluster: a CRUSH map with device classes, an erasure-code profile and rule (coding shards on the fast class when that pays: RAID4S at cluster scale), primary affinity, and predicted per-OSD load and recovery.
    #[command(
        after_help = "Example:\n  hetraid ceph --host node1=caviar-black-640*4,x25e-64 --host node2=caviar-black-640*4,x25e-64 --failure-domain osd --out ceph/\n  crushtool -c ceph/crushmap.txt -o ceph/crushmap.bin && crushtool -i ceph/crushmap.bin --test --rule 1 --num-rep 6 --show-mappings"
    )]
    Ceph(crate::ops::ceph::CephCmd),
    /// Simulate one run: a layout on HDD/SSD models under a workload or trace.
    #[command(
        after_help = "Example:\n  hetraid sim --layout raid5 --members 'caviar-black-640*5' --workload mixed --read-fraction 0.7 --size 64K --qd 10"
    )]
    Sim(Box<crate::ops::sim::SimCmd>),
    /// Run a grid of simulations from a TOML file: CSV, JSON, SVG plots, summary.md.
    #[command(
        after_help = "Example:\n  hetraid sweep experiments/1-raid4s-random-writes.toml --out results/1"
    )]
    Sweep(crate::ops::sweep::SweepCmd),
    /// Synthetic traces with published statistics, and trace statistics.
    #[command(
        after_help = "Example:\n  hetraid trace synth --profile financial1 > fin1.spc\n  hetraid trace stats fin1.spc"
    )]
    Trace(crate::ops::trace::TraceCmd),
    /// Reliability (MTTDL), cost, power and the RAIDH model of a configuration.
    #[command(
        after_help = "Example:\n  hetraid analyze mttdl --layout raid4s --members 'caviar-black-640*4,x25e-64'"
    )]
    Analyze(crate::ops::analyze::AnalyzeCmd),
    /// Show the events the members keep (failures, rebuilds, scrubs, spares;
    /// like zpool events), newest last; works on a served array too.
    Events(crate::ops::events::EventsCmd),
    /// Per array and per member: operations and MB a second, latency and
    /// queue depth, rebuild/scrub/grow progress (zpool iostat -v), from the
    /// process serving or holding the array.
    Iostat(crate::ops::iostat::IostatCmd),
    /// Watch an array's events and run a program for each (mdadm --monitor).
    Monitor(crate::ops::monitor::MonitorCmd),
    /// Print a shell completion script: hetraid completions bash >
    /// /etc/bash_completion.d/hetraid (bash, zsh, fish, elvish, powershell).
    #[command(
        after_help = "Example:\n  hetraid completions bash > /etc/bash_completion.d/hetraid"
    )]
    Completions { shell: clap_complete::Shell },
    /// Print the manual page (roff): hetraid man | man -l -
    #[command(after_help = "Example:\n  hetraid man > /usr/local/share/man/man1/hetraid.1")]
    Man,
    /// Send one raw JSON request to a control socket, without the command
    /// line's checks, and print the reply (tests of the server's own checks).
    #[command(hide = true)]
    CtlRaw {
        socket: std::path::PathBuf,
        request: String,
    },
    /// The whole life of an array in a temporary directory: create, write, fail,
    /// degraded I/O, rebuild, scrub, verify.
    #[command(after_help = "Example:\n  hetraid demo")]
    Demo(crate::ops::demo::DemoCmd),
}

fn ctl_raw(socket: &std::path::Path, request: &str) -> Result<(), hetraid_core::Failure> {
    use std::io::{BufRead, Write};
    let mut s = std::os::unix::net::UnixStream::connect(socket)
        .map_err(|e| format!("{}: {e}", socket.display()))?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .map_err(|e| e.to_string())?;
    // A refusal may close the socket before the request is written; its
    // reply is still there to read.
    match s.write_all(format!("{request}\n").as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => return Err(e.to_string().into()),
        _ => {}
    }
    let mut reply = String::new();
    std::io::BufReader::new(&s)
        .read_line(&mut reply)
        .map_err(|e| e.to_string())?;
    print!("{reply}");
    let v: serde_json::Value = serde_json::from_str(&reply).map_err(|e| e.to_string())?;
    if v["ok"] == true {
        Ok(())
    } else {
        // The reply's kind decides the exit code, as for every verb.
        let kind = v["kind"]
            .as_str()
            .and_then(hetraid_core::ErrorKind::parse)
            .unwrap_or(hetraid_core::ErrorKind::Refused);
        Err(hetraid_core::Failure::new(
            kind,
            v["error"].as_str().unwrap_or("refused"),
        ))
    }
}

/// The manual page: the top command's, then one section per verb, from the
/// same clap definitions `--help` prints.
fn man() -> Result<(), String> {
    use std::io::Write;
    let cmd = <Cli as clap::CommandFactory>::command();
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd.clone())
        .render(&mut out)
        .map_err(|e| e.to_string())?;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        writeln!(out, ".SH \"HETRAID {}\"", sub.get_name().to_uppercase()).ok();
        let page =
            clap_mangen::Man::new(sub.clone().bin_name(format!("hetraid {}", sub.get_name())));
        let mut body = Vec::new();
        page.render_description_section(&mut body).ok();
        page.render_synopsis_section(&mut body).ok();
        page.render_options_section(&mut body).ok();
        page.render_extra_section(&mut body).ok();
        // Each verb's sections become subsections of the one page.
        let body = String::from_utf8_lossy(&body).replace(".SH ", ".SS ");
        out.extend_from_slice(body.as_bytes());
    }
    std::io::stdout().write_all(&out).map_err(|e| e.to_string())
}

/// Exit code of a command line clap refuses (sysexits' EX_USAGE).
const USAGE_ERROR: i32 = 64;

/// The whole program: parse the command line, run the verb, exit with its
/// status (`main.rs` calls this and nothing else).
pub fn main() {
    // Die quietly on a closed pipe (`hetraid status ... | head`) like other Unix
    // tools, instead of panicking in println!.
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    // Usage errors (an unknown option, a missing argument) exit 64
    // (EX_USAGE), apart from the array's health codes (`status --test`:
    // 1, 2, 4) and refusals of bad input (2).
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            // A value that does not parse is bad input, refused as every
            // refusal is (2); a command line of the wrong shape (unknown
            // option, missing argument) is a usage error.
            let code = match e.kind() {
                _ if !e.use_stderr() => 0,
                ErrorKind::InvalidValue | ErrorKind::ValueValidation => 2,
                _ => USAGE_ERROR,
            };
            let _ = e.print();
            std::process::exit(code);
        }
    };
    let mut cli = cli;
    match &cli.command {
        Command::Serve(c) => crate::logging::init(c.log_format == "json", true),
        _ => crate::logging::init(false, false),
    }
    if let Err(e) = cli.command.resolve_names(cli.config.as_deref()) {
        eprintln!("hetraid: {e}");
        std::process::exit(e.kind.exit_code());
    }
    let result: Result<(), hetraid_core::Failure> = match cli.command {
        Command::Layout(c) => c.run().map_err(Into::into),
        Command::Plan(c) => c.run().map_err(Into::into),
        Command::Loadmap(c) => c.run().map_err(Into::into),
        Command::Create(c) => c.run(),
        Command::Assemble(c) => c.assemble(),
        Command::Status(c) => c.status(),
        Command::Fail(c) => c.fail(),
        Command::Replace(c) => c.replace(),
        Command::Remove(c) => c.remove(),
        Command::Add(c) => c.run(),
        Command::Grow(c) => c.run(),
        Command::Shrink(c) => c.run(),
        Command::Rebuild(c) => c.run(),
        Command::Scrub(c) => c.run(),
        Command::Reclaim(c) => c.run(),
        Command::Clear(c) => c.run(),
        Command::Write(c) => c.write(),
        Command::Read(c) => c.read(),
        Command::Demo(c) => c.run().map_err(Into::into),
        Command::Sim(c) => c.run().map_err(Into::into),
        Command::Probe(c) => c.run().map_err(Into::into),
        Command::Advise(c) => c.run().map_err(Into::into),
        Command::Ceph(c) => c.run().map_err(Into::into),
        Command::Rebalance(c) => c.run(),
        Command::Sweep(c) => c.run().map_err(Into::into),
        Command::Trace(c) => c.run().map_err(Into::into),
        Command::Analyze(c) => c.run().map_err(Into::into),
        Command::Serve(c) => c.run(),
        Command::CtlRaw { socket, request } => ctl_raw(&socket, &request),
        Command::Events(c) => c.run().map_err(Into::into),
        Command::Monitor(c) => c.run().map_err(Into::into),
        Command::Iostat(c) => c.run(),
        Command::Completions { shell } => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut cmd, "hetraid", &mut std::io::stdout());
            Ok(())
        }
        Command::Man => man().map_err(Into::into),
    };
    if let Err(e) = result {
        // One sentence; the exit code by the failure's kind (refusals 2,
        // busy 75, an I/O error 74, usage 64: `ErrorKind::exit_code`).
        eprintln!("hetraid: {e}");
        std::process::exit(e.kind.exit_code());
    }
}
