//! `hetraid serve`: export an assembled array over NBD until SIGINT/SIGTERM, then
//! finish in-flight requests, flush every member and mark the array clean.

use clap::Args;
use hetraid_nbd::{serve, Config, Listen, Stats};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[derive(Debug, Args)]
pub struct ServeCmd {
    /// The array's member files.
    #[arg(required = true)]
    pub members: Vec<String>,
    /// unix:PATH or tcp:HOST:PORT.
    #[arg(long)]
    pub listen: String,
    /// Refuse writes (clients get EPERM).
    #[arg(long)]
    pub read_only: bool,
    /// Requests served at once per connection.
    #[arg(long, default_value_t = 8)]
    pub workers: usize,
    /// While a write payload is arriving, poll for the rest this long before
    /// sleeping (microseconds; 0 = always sleep).
    #[arg(long, default_value_t = 50)]
    pub payload_spin_us: u64,
}

impl ServeCmd {
    pub fn run(&self) -> Result<(), String> {
        let listen = Listen::parse(&self.listen)?;
        // The socket path is checked before the array is touched: whatever is
        // there (a member, a user's file) is never removed.
        if let Listen::Unix(p) = &listen {
            hetraid_nbd::server::remove_stale_socket(p)
                .map_err(|e| format!("cannot serve on {}: {e}", self.listen))?;
        }
        let array = Arc::new(super::array::assemble(&self.members)?);
        for w in array.warnings() {
            eprintln!("hetraid: warning: {w}");
        }
        let stop = Arc::new(AtomicBool::new(false));
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            signal_hook::flag::register(sig, stop.clone())
                .map_err(|e| format!("cannot handle signals: {e}"))?;
        }
        let st = array.status();
        eprintln!(
            "hetraid: serving {} array {} ({} bytes, {}) on {}{}",
            st.layout,
            st.uuid,
            st.capacity_bytes,
            st.state,
            self.listen,
            if self.read_only { " read-only" } else { "" }
        );
        // The control socket: lifecycle verbs given these members reach this process.
        let ctl = hetraid_nbd::control::socket_path(&st.uuid);
        let ctl_thread = {
            let (array, stop, ctl) = (array.clone(), stop.clone(), ctl.clone());
            std::thread::spawn(move || {
                if let Err(e) = hetraid_nbd::control::serve_control(array, &ctl, stop) {
                    eprintln!("hetraid: control socket {}: {e}", ctl.display());
                }
            })
        };
        let stats = Arc::new(Stats::default());
        let cfg = Config {
            read_only: self.read_only,
            workers: self.workers.max(1),
            payload_spin: std::time::Duration::from_micros(self.payload_spin_us),
        };
        serve(array.clone(), &listen, cfg, stop.clone(), stats.clone())
            .map_err(|e| format!("cannot serve on {}: {e}", self.listen))?;
        let _ = ctl_thread.join();
        array.close().map_err(|e| e.to_string())?;
        eprintln!(
            "hetraid: stopped after {} connections and {} requests ({} failed); members flushed, array clean",
            stats.connections.load(Ordering::Relaxed),
            stats.requests.load(Ordering::Relaxed),
            stats.errors.load(Ordering::Relaxed)
        );
        Ok(())
    }
}
