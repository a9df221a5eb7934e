//! `hetraid serve`: export an assembled array over NBD until SIGINT/SIGTERM, then
//! finish in-flight requests, flush every member and mark the array clean.

pub use crate::cli::serve::*;
use hetraid_core::{ErrorKind, Failure};
use hetraid_engine::error::IntoFailure;
use hetraid_nbd::{serve, Config, Listen, Stats};
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl ServeCmd {
    /// `--listen`, or the configuration's for `serve NAME` (checked given
    /// by `check_options` first).
    fn listen_str(&self) -> &str {
        self.listen.as_deref().unwrap_or("")
    }

    /// `--socket-mode`: octal permission bits, no more than 0777.
    fn socket_mode(&self) -> Result<u32, String> {
        let Some(m) = &self.socket_mode else {
            return Ok(0o600);
        };
        u32::from_str_radix(m.trim_start_matches("0o"), 8)
            .ok()
            .filter(|&v| v <= 0o777)
            .ok_or_else(|| format!("--socket-mode {m} is not an octal mode (e.g. 600 or 660)"))
    }

    pub fn run(&self) -> Result<(), Failure> {
        // Every option is checked before the array is touched: a refusal
        // changes nothing.
        let (listen, tls) = self.check_options()?;
        // Bound before the array is touched: an address in use refuses here.
        let metrics = match &self.metrics {
            Some(m) => Some(
                hetraid_nbd::metrics::MetricsListener::bind(
                    &Listen::parse(m)?,
                    self.socket_mode()?,
                )
                .map_err(|e| format!("--metrics {m}: {e}"))?,
            ),
            None => None,
        };
        let read_policy = self
            .read_policy
            .as_deref()
            .map(hetraid_core::readbalance::ReadPolicy::parse)
            .transpose()?;
        let members = super::array::open_given(&self.members, self.degraded)?;
        let first = Arc::new(
            hetraid_engine::Array::assemble(members.clone()).map_err(IntoFailure::failure)?,
        );
        // Options that do not apply are refused before anything is written.
        if !first.has_write_back_log() {
            for (given, name) in [
                (self.reclaim_idle.is_some(), "--reclaim-idle"),
                (self.log_memory.is_some(), "--log-memory"),
            ] {
                if given {
                    return Err(format!(
                        "{name} applies to arrays with a write-back log only; this array has none"
                    )
                    .into());
                }
            }
        }
        if self.sit_out.is_some() && first.layout().redundancy().tolerance() == 0 {
            return Err(format!(
                "--sit-out applies to arrays with redundancy (reads around a member need it); this {} array has none",
                first.layout().name()
            )
            .into());
        }
        // Start as decided: members not given (with --degraded) recorded
        // missing before any client writes.
        first.commit().map_err(IntoFailure::failure)?;
        // What every assembly of the served array gets (a change of members
        // assembles it again, batch by batch).
        let write_buffer = self.write_buffer;
        let log_memory = self.log_memory;
        let reopen: hetraid_engine::Reopen = Box::new(move |a: &Arc<hetraid_engine::Array>| {
            // Counted for iostat and the metrics, from the first request.
            a.measure_io();
            if let Some(m) = log_memory {
                a.set_log_memory(m);
            }
            if let Some(p) = read_policy {
                a.set_read_policy(p, false)?;
            }
            if let Some(b) = write_buffer {
                a.start_write_buffer(b, hetraid_core::wbuf::DRAINERS)?;
            }
            Ok(())
        });
        reopen(&first).map_err(IntoFailure::failure)?;
        let cell = Arc::new(hetraid_engine::ArrayCell::new(first, members, reopen));
        let array = cell.current();
        for w in array.warnings() {
            tracing::warn!("{w}");
        }
        // Every serving thread blocks on its descriptor and this stop's:
        // an idle server uses no CPU, and SIGINT/SIGTERM wakes them all.
        let stop =
            hetraid_nbd::Stop::new().map_err(|e| format!("cannot make a stop signal: {e}"))?;
        stop.on_signals()
            .map_err(|e| format!("cannot handle signals: {e}"))?;
        let st = array.status();
        tracing::info!(
            "serving {} array {} ({} bytes, {}) on {}{}",
            st.layout,
            st.uuid,
            st.capacity_bytes,
            st.state,
            self.listen_str(),
            if self.read_only { " read-only" } else { "" }
        );
        let mut services = self.start_services(&cell, &array, &stop, &st.uuid);
        if let Some(l) = metrics {
            let (cell, stop) = (cell.clone(), stop.clone());
            services.threads.push(std::thread::spawn(move || {
                hetraid_nbd::metrics::serve_metrics(l, cell, stop, |st| {
                    crate::render::metrics::prometheus(st)
                })
            }));
        }
        let stats = Arc::new(Stats::default());
        let mut cfg = self.config(tls)?;
        cfg.ready = Some(tell_systemd_when_ready(format!(
            "serving {} array {} ({}) on {}",
            st.layout,
            if st.name.is_empty() {
                &st.uuid
            } else {
                &st.name
            },
            st.state,
            self.listen_str()
        )));
        protect_from_reclaim();
        drop(array);
        serve(cell.clone(), &listen, cfg, stop.clone(), stats.clone()).map_err(|e| {
            Failure::new(
                ErrorKind::Io,
                format!("cannot serve on {}: {e}", self.listen_str()),
            )
        })?;
        cell.stop();
        cell.current().cancel_long_operations();
        services.join();
        cell.current().close().map_err(IntoFailure::failure)?;
        tracing::info!(
            "stopped after {} connections ({} refused) and {} requests ({} failed); members flushed, array clean",
            stats.connections.load(Ordering::Relaxed),
            stats.refused.load(Ordering::Relaxed),
            stats.requests.load(Ordering::Relaxed),
            stats.errors.load(Ordering::Relaxed)
        );
        Ok(())
    }

    /// The options, every one checked before anything is opened: where to
    /// listen (a stale socket removed, nothing else) and TLS.
    fn check_options(&self) -> Result<(Listen, Option<hetraid_nbd::server::TlsConfig>), String> {
        if self.listen.is_none() {
            return Err("serve needs --listen unix:PATH or tcp:HOST:PORT (or, for serve NAME, a listen line in the array's configuration entry)".into());
        }
        let listen = Listen::parse(self.listen_str())?;
        self.socket_mode()?;
        if !(self.handshake_timeout.is_finite()
            && self.handshake_timeout >= 0.1
            && self.handshake_timeout <= 3600.0)
        {
            return Err(format!(
                "--handshake-timeout {} is not a number of seconds between 0.1 and 3600",
                self.handshake_timeout
            ));
        }
        if let Some(m) = self.memory_limit {
            let min = hetraid_nbd::memory::MEMORY_LIMIT_MIN;
            if m < min {
                return Err(format!(
                    "--memory-limit {m} is below {}M: one largest request (32M) and its reply must fit; give at least 64M",
                    min >> 20
                ));
            }
        }
        let unix_metrics = self
            .metrics
            .as_deref()
            .is_some_and(|m| m.starts_with("unix:"));
        if self.socket_mode.is_some() && !matches!(listen, Listen::Unix(_)) && !unix_metrics {
            return Err("--socket-mode applies to a Unix socket (--listen unix:PATH or --metrics unix:PATH) only".into());
        }
        let tls = match (&self.tls_cert, &self.tls_key) {
            (Some(c), Some(k)) => Some(hetraid_nbd::server::tls_config(c, k)?),
            _ => None,
        };
        if let Listen::Tcp(addr) = &listen {
            if tls.is_none()
                && !self.insecure_allow_remote
                && !hetraid_nbd::server::loopback_only(addr)?
            {
                return Err(format!(
                    "--listen tcp:{addr} reaches beyond this machine and there is no TLS: anyone who reaches it could read and write the array; give --tls-cert and --tls-key, listen on 127.0.0.1, or say --insecure-allow-remote"
                ));
            }
        }
        let remote = match &listen {
            Listen::Tcp(addr) => !hetraid_nbd::server::loopback_only(addr)?,
            Listen::Unix(_) => false,
        };
        if self.insecure_allow_remote && !remote {
            return Err("--insecure-allow-remote applies to --listen tcp: on an address beyond this machine".into());
        }
        if self.insecure_allow_remote && tls.is_some() {
            return Err(
                "--insecure-allow-remote does not go with TLS: the clients must use TLS anyway"
                    .into(),
            );
        }
        // The socket path is checked before the array is touched: whatever is
        // there (a member, a user's file) is never removed.
        if let Listen::Unix(p) = &listen {
            hetraid_nbd::server::remove_stale_socket(p)
                .map_err(|e| format!("cannot serve on {}: {e}", self.listen_str()))?;
        }
        if let Some(s) = self.reclaim_idle {
            if !(s.is_finite() && s > 0.0 && s <= 86_400.0) {
                return Err(format!(
                    "--reclaim-idle {s} is not a number of seconds between 0 and 86400"
                ));
            }
        }
        if self.max_connections == Some(0) {
            return Err("--max-connections 0 would refuse every client; give at least 1".into());
        }
        if !(self.stall_timeout.is_finite()
            && self.stall_timeout > 0.0
            && self.stall_timeout <= 86_400.0)
        {
            return Err(format!(
                "--stall-timeout {} is not a number of seconds between 0 and 86400",
                self.stall_timeout
            ));
        }
        if self.workers == 0 {
            return Err("--workers needs at least 1".into());
        }
        if let Some(m) = self.log_memory {
            if !(1 << 20..=1 << 40).contains(&m) {
                return Err(format!("--log-memory {m} is out of range: give 1M to 1T"));
            }
        }
        Ok((listen, tls))
    }

    /// The background services of a served array, started: the control
    /// socket, HPDA's reclaimer, the idle reclaimer of a write-back log, a
    /// change cut short, hot spares and md's safe mode.
    fn start_services(
        &self,
        cell: &Arc<hetraid_engine::ArrayCell>,
        array: &Arc<hetraid_engine::Array>,
        stop: &Arc<hetraid_nbd::Stop>,
        uuid: &str,
    ) -> Services {
        // The control socket: lifecycle verbs given these members reach this process.
        let ctl_thread = {
            let (cell, stop, uuid) = (cell.clone(), stop.clone(), uuid.to_string());
            std::thread::spawn(move || {
                if let Err(e) = hetraid_nbd::control::serve_control(cell, &uuid, stop) {
                    tracing::info!("control socket: {e}; lifecycle verbs cannot reach this server");
                }
            })
        };
        // HPDA: the reclaimer's policy is core's (idle per the monitor, or
        // the log past its high-water mark, or a copy lost), one batch at a
        // time so user I/O arriving stops it.
        let hpda = array.hpda_status().is_some();
        if hpda {
            let default_s = hetraid_core::hpda::MonitorConfig::default().idle_ns as f64 / 1e9;
            array.set_hpda_idle(self.reclaim_idle.unwrap_or(default_s));
        }
        // The log's background reclaimer (HPDA's policy, or a write-back
        // log's idle rule): the engine's, by the core's procedure.
        let reclaim_thread = array.has_write_back_log().then(|| {
            let (cell, stop) = (cell.clone(), stop.clone());
            let idle = match self.reclaim_idle {
                Some(s) => std::time::Duration::from_secs_f64(s),
                None => {
                    std::time::Duration::from_nanos(hetraid_core::journal::RECLAIM_IDLE_NS_DEFAULT)
                }
            };
            std::thread::spawn(move || {
                cell.run_reclaimer(idle, &|d| {
                    stop.sleep(d);
                    !stop.is_set()
                })
            })
        });
        // A change cut short continues in the background, as MD resumes a
        // reshape: batch by batch between client requests.
        let change_thread = cell.current().change_progress().map(|p| {
            tracing::info!(
                "the {} in progress ({} of {} done) continues",
                p.change,
                p.moves_done,
                p.moves
            );
            let cell = cell.clone();
            std::thread::spawn(move || match cell.resume(Default::default()) {
                Ok(Some(r)) => tracing::info!(
                    "the {} finished: capacity {} bytes (new connections see it)",
                    r.change,
                    r.capacity_after
                ),
                Ok(None) => {}
                Err(e) => tracing::info!("the change in progress stopped: {e}"),
            })
        });
        // Hot spares: a member that fails (or a slot found failed at start)
        // gets a spare and its rebuild at once, as MD does.
        let spare_thread = {
            let (cell, stop) = (cell.clone(), stop.clone());
            std::thread::spawn(move || {
                // Woken by the engine's change descriptor (or every 500 ms
                // where none could be made), and by the stop.
                let wait = |timeout| {
                    match hetraid_engine::changes::fd() {
                        Some(fd) => {
                            hetraid_nbd::stop::wait_readable(&[fd], &stop, Some(timeout));
                        }
                        None => {
                            stop.sleep(std::time::Duration::from_millis(500));
                        }
                    }
                    stop.is_set()
                };
                cell.run_spare_watch(&wait, &|| stop.is_set())
            })
        };
        // md's safe mode: a degraded array idle for a second is marked clean.
        let safe_mode_thread = {
            let (cell, stop) = (cell.clone(), stop.clone());
            std::thread::spawn(move || cell.run_safe_mode(&|d| stop.sleep(d)))
        };
        // Slow-member sit-out: core's rule looks at the members' reads.
        let sit_out_thread = (self.sit_out.as_deref() != Some("off")).then(|| {
            let (cell, stop) = (cell.clone(), stop.clone());
            std::thread::spawn(move || {
                let wait_io = || match hetraid_engine::changes::io_fd() {
                    Some(fd) => {
                        hetraid_nbd::stop::wait_readable(&[fd], &stop, None);
                        stop.is_set()
                    }
                    None => stop.sleep(std::time::Duration::from_secs(1)),
                };
                cell.run_sit_out(&|d| stop.sleep(d), &wait_io)
            })
        });
        Services {
            threads: [
                Some(ctl_thread),
                Some(spare_thread),
                Some(safe_mode_thread),
                sit_out_thread,
            ]
            .into_iter()
            .chain([change_thread, reclaim_thread])
            .flatten()
            .collect(),
        }
    }

    /// The server's configuration from the options (checked already).
    fn config(&self, tls: Option<hetraid_nbd::server::TlsConfig>) -> Result<Config, String> {
        Ok(Config {
            threads: self
                .threads
                .unwrap_or_else(hetraid_nbd::server::default_threads),
            name: self.name.clone(),
            tls,
            stall_timeout: std::time::Duration::from_secs_f64(self.stall_timeout),
            max_connections: self
                .max_connections
                .unwrap_or_else(hetraid_nbd::server::default_max_connections),
            read_only: self.read_only,
            workers: self.workers.max(1),
            payload_spin: std::time::Duration::from_micros(self.payload_spin_us),
            socket_mode: self.socket_mode()?,
            handshake_timeout: std::time::Duration::from_secs_f64(self.handshake_timeout),
            memory_limit: self
                .memory_limit
                .unwrap_or_else(hetraid_nbd::memory::default_memory_limit),
            ready: None,
        })
    }
}

/// The background services' threads, joined once the server stops.
struct Services {
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Services {
    fn join(self) {
        for t in self.threads {
            let _ = t.join();
        }
    }
}

/// Under systemd (`Type=notify`): READY=1 with a status line once clients
/// can connect. A channel the server tells when it listens; the thread
/// waiting on it ends then (or when the server ends first).
fn tell_systemd_when_ready(status: String) -> std::sync::mpsc::SyncSender<()> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    if std::env::var_os("NOTIFY_SOCKET").is_some() {
        let _ = std::thread::Builder::new()
            .name("sd-notify".into())
            .spawn(move || {
                if rx.recv().is_ok() {
                    let states = [
                        sd_notify::NotifyState::Ready,
                        sd_notify::NotifyState::Status(&status),
                    ];
                    if let Err(e) = sd_notify::notify(false, &states) {
                        tracing::warn!("cannot tell systemd the server is ready: {e}");
                    }
                }
            });
    }
    tx
}

/// A filesystem on an NBD device of this host writes back through this
/// process: were the server to wait for memory the kernel frees by
/// writing to that device, both would wait forever. PR_SET_IO_FLUSHER
/// (Linux 5.6) lets the kernel's reclaim not recurse into I/O for this
/// process; locking its memory (when RLIMIT_MEMLOCK allows all of it, as
/// the systemd unit sets) keeps it from being paged out — pages as they
/// are touched (MCL_ONFAULT), so idle thread stacks cost nothing. Each is a
/// warning when refused (an unprivileged user), not a failure.
fn protect_from_reclaim() {
    const PR_SET_IO_FLUSHER: libc::c_int = 57;
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(PR_SET_IO_FLUSHER, 1, 0, 0, 0) } != 0 {
        tracing::info!(
            "PR_SET_IO_FLUSHER not set ({}): a filesystem on an NBD device of this same host may deadlock under memory pressure; run serve as root (CAP_SYS_RESOURCE) for that",
            std::io::Error::last_os_error()
        );
    }
    let unlimited = rustix::process::getrlimit(rustix::process::Resource::Memlock)
        .current
        .is_none();
    if !unlimited {
        tracing::info!(
            "memory not locked: RLIMIT_MEMLOCK is limited (the systemd unit sets LimitMEMLOCK=infinity)"
        );
        return;
    }
    // SAFETY: mlockall takes flags only.
    if unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE | libc::MCL_ONFAULT) } != 0 {
        tracing::info!(
            "memory not locked: mlockall: {}",
            std::io::Error::last_os_error()
        );
    }
}
