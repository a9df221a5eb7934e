//! `serve --metrics`: the array's metrics over HTTP for Prometheus (`GET
//! /metrics`), on a TCP address or a Unix socket, by one thread that answers
//! one client at a time.
//!
//! Why not an HTTP crate: one path, one method, a reply of a few KiB and
//! nothing else is the whole protocol here; the bounds that matter (request
//! size, time to send it, one client at a time) are a dozen lines, where a
//! server crate brings a thread pool and its own limits to configure.

use crate::server::Listen;
use crate::Stop;
use hetraid_engine::ArrayCell;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Duration;

/// A request line and headers larger than this are refused.
const REQUEST_BYTES_MAX: usize = 8 << 10;
/// A client must send its request, and take the reply, within this.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);

/// The listener, bound before the array is served (an address in use is
/// an error at start, not later). A Unix socket has `mode` (the server's
/// `--socket-mode`, 0600 by default) from its first moment, as the NBD
/// socket does. A TCP address may reach beyond this machine: the metrics
/// carry counts, states and member paths, never array data, and
/// Prometheus scrapes from elsewhere (as node_exporter is scraped).
pub enum MetricsListener {
    Tcp(std::net::TcpListener),
    Unix(std::os::unix::net::UnixListener, std::path::PathBuf),
}

impl MetricsListener {
    pub fn bind(listen: &Listen, mode: u32) -> std::io::Result<Self> {
        Ok(match listen {
            Listen::Tcp(a) => Self::Tcp(std::net::TcpListener::bind(a)?),
            Listen::Unix(p) => {
                crate::server::remove_stale_socket(p)?;
                let l = crate::server::bind_private(p, mode)?;
                Self::Unix(l, p.clone())
            }
        })
    }

    fn fd(&self) -> std::os::fd::RawFd {
        match self {
            Self::Tcp(l) => l.as_raw_fd(),
            Self::Unix(l, _) => l.as_raw_fd(),
        }
    }
}

/// The answer to one request line: status line, content type, body.
pub fn answer(request: &str, body: impl FnOnce() -> String) -> (u16, &'static str, String) {
    let mut words = request.split_whitespace();
    match (words.next(), words.next()) {
        (Some("GET"), Some("/metrics")) => {
            (200, "text/plain; version=0.0.4; charset=utf-8", body())
        }
        (Some("GET"), Some(_)) => (404, "text/plain", "only /metrics is here\n".into()),
        _ => (405, "text/plain", "GET /metrics\n".into()),
    }
}

/// Serve `GET /metrics` until `stop`, the body from `render` of the
/// array's status at the time of each request.
pub fn serve_metrics(
    l: MetricsListener,
    cell: Arc<ArrayCell>,
    stop: Arc<Stop>,
    render: impl Fn(&hetraid_engine::Status) -> String,
) {
    let fd = l.fd();
    while !stop.is_set() {
        if !crate::stop::wait_readable(&[fd], &stop, None)[0] {
            continue;
        }
        let r = match &l {
            MetricsListener::Tcp(t) => t.accept().map(|(s, _)| reply(s, &cell, &render)),
            MetricsListener::Unix(u, _) => u.accept().map(|(s, _)| reply(s, &cell, &render)),
        };
        if let Err(e) = r {
            tracing::info!("metrics: {e}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    if let MetricsListener::Unix(_, p) = &l {
        let _ = std::fs::remove_file(p);
    }
}

/// One client: its request (bounded in size and time), one reply, closed.
fn reply<S: Read + Write + SetTimeouts>(
    mut s: S,
    cell: &ArrayCell,
    render: &impl Fn(&hetraid_engine::Status) -> String,
) {
    s.timeouts(CLIENT_TIMEOUT);
    let mut req = Vec::new();
    let mut buf = [0u8; 1024];
    // Bounded: REQUEST_BYTES_MAX bytes, or CLIENT_TIMEOUT per read.
    while !req.windows(4).any(|w| w == b"\r\n\r\n") && !req.windows(2).any(|w| w == b"\n\n") {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => req.extend_from_slice(&buf[..n]),
        }
        if req.len() > REQUEST_BYTES_MAX {
            let _ = s.write_all(b"HTTP/1.0 431 Request Header Fields Too Large\r\n\r\n");
            return;
        }
    }
    let first = String::from_utf8_lossy(&req);
    let line = first.lines().next().unwrap_or("");
    let (code, kind, body) = answer(line, || render(&cell.status()));
    let reason = match code {
        200 => "OK",
        404 => "Not Found",
        _ => "Method Not Allowed",
    };
    let head = format!(
        "HTTP/1.0 {code} {reason}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = s
        .write_all(head.as_bytes())
        .and_then(|_| s.write_all(body.as_bytes()));
}

trait SetTimeouts {
    fn timeouts(&self, t: Duration);
}

impl SetTimeouts for std::net::TcpStream {
    fn timeouts(&self, t: Duration) {
        let _ = self.set_read_timeout(Some(t));
        let _ = self.set_write_timeout(Some(t));
    }
}

impl SetTimeouts for std::os::unix::net::UnixStream {
    fn timeouts(&self, t: Duration) {
        let _ = self.set_read_timeout(Some(t));
        let _ = self.set_write_timeout(Some(t));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_get_metrics_is_answered() {
        assert_eq!(answer("GET /metrics HTTP/1.1", || "x 1\n".into()).0, 200);
        assert_eq!(answer("GET / HTTP/1.1", || unreachable!()).0, 404);
        assert_eq!(answer("POST /metrics HTTP/1.1", || unreachable!()).0, 405);
        assert_eq!(answer("", || unreachable!()).0, 405);
    }
}
