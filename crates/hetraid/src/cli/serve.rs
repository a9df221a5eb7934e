//! `serve`'s options (clap only): the verb is `crate::ops::serve`.

use clap::Args;

#[derive(Debug, Args)]
pub struct ServeCmd {
    /// The array's member files.
    #[arg(required = true)]
    pub members: Vec<String>,
    /// Serve without the array's members that are not given: they are
    /// recorded missing (mdadm's --run). Without it `serve` given only some
    /// of a healthy array's members refuses and changes nothing.
    #[arg(long)]
    pub degraded: bool,
    /// unix:PATH or tcp:HOST:PORT (default for `serve NAME`: the
    /// configuration's `listen` for the array).
    #[arg(long)]
    pub listen: Option<String>,
    /// Serve the array's metrics for Prometheus (GET /metrics) on
    /// tcp:HOST:PORT or unix:PATH: state, per member I/O and error counters,
    /// a rebuild's, scrub's or change's progress.
    #[arg(long, value_name = "ADDRESS")]
    pub metrics: Option<String>,
    /// Refuse writes (clients get EPERM).
    #[arg(long)]
    pub read_only: bool,
    /// Requests served at once per connection.
    #[arg(long, default_value_t = 8)]
    pub workers: usize,
    /// Worker threads shared by all connections beyond one each (default:
    /// eight per CPU, 16..256); an idle connection holds one thread.
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Clients served at once; more are refused at connect (every option
    /// answered NBD_REP_ERR_POLICY with the reason) and logged, the server
    /// goes on. Default: what the open-file limit leaves, two descriptors a
    /// connection (16..1024); a client the descriptors left cannot take is
    /// refused the same way whatever this says.
    #[arg(long, value_name = "N")]
    pub max_connections: Option<usize>,
    /// The export's name; clients asking for another name are refused
    /// (default: the empty name, what clients ask for without one).
    #[arg(long, default_value = "")]
    pub name: String,
    /// TLS certificate chain (PEM): clients must STARTTLS (nbds://).
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    pub tls_cert: Option<std::path::PathBuf>,
    /// TLS private key (PEM) for --tls-cert.
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,
    /// Serve TCP on a non-loopback address without TLS: anyone who reaches
    /// it reads and writes the array.
    #[arg(long)]
    pub insecure_allow_remote: bool,
    /// A client must end its whole handshake (options included) within this
    /// many seconds, or it is dropped.
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    pub handshake_timeout: f64,
    /// A client whose replies make no progress for this many seconds (it
    /// stopped reading them) is dropped.
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    pub stall_timeout: f64,
    /// Layouts with copies: how reads choose a copy while served (md,
    /// first, raidx1..raidx4); the superblock's otherwise.
    #[arg(long, value_name = "POLICY")]
    pub read_policy: Option<String>,
    /// Acknowledge writes once in SIZE of memory and write them to the
    /// members meanwhile (the RAIDX paper's write buffer); a flush waits for
    /// them. Not with a write log.
    #[arg(long, value_name = "SIZE", value_parser = crate::args::size)]
    pub write_buffer: Option<u64>,
    /// While a write payload is arriving, poll for the rest this long before
    /// sleeping (microseconds; 0 = always sleep).
    #[arg(long, default_value_t = 50)]
    pub payload_spin_us: u64,
    /// Write-back arrays: write the log's data to the members after this
    /// many seconds without user I/O (default 5; it is also written when the
    /// log passes half full, and at shutdown).
    #[arg(long, value_name = "SECONDS")]
    pub reclaim_idle: Option<f64>,
    /// The NBD Unix socket's mode, octal (default 600: only this user; 660
    /// lets the group in). Set explicitly, whatever the umask.
    #[arg(long, value_name = "OCTAL")]
    pub socket_mode: Option<String>,
    /// Write-back arrays: the most bytes of logged writes kept in memory
    /// (reads and the reclaimer use them; the log is reclaimed to stay under
    /// it, whatever its size). Default 256M.
    #[arg(long, value_name = "SIZE", value_parser = crate::args::size)]
    pub log_memory: Option<u64>,
    /// Bytes of write payloads and read replies held for every client
    /// together; a request that finds no room waits for it (default: an
    /// eighth of the machine's memory, 64M..4G; at least 64M).
    #[arg(long, value_name = "SIZE", value_parser = crate::args::size)]
    pub memory_limit: Option<u64>,
    /// Slow-member sit-out (default on): a member whose reads are far
    /// slower than a reconstruction from the others is left out of reads
    /// for a minute (it keeps taking writes; events and status say so).
    #[arg(long, value_name = "on|off", value_parser = ["on", "off"])]
    pub sit_out: Option<String>,
    /// The log on stderr: human lines, or one JSON object per line (with
    /// the fields of each event: array, event, slot, path, seq).
    #[arg(long, default_value = "human", value_parser = ["human", "json"])]
    pub log_format: String,
}
