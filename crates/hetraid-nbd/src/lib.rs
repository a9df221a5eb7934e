//! NBD server for hetraid arrays: fixed newstyle handshake (OPT_GO, OPT_INFO,
//! OPT_EXPORT_NAME, OPT_LIST, OPT_ABORT), READ, WRITE (FUA), FLUSH, TRIM,
//! WRITE_ZEROES, DISC, pipelined requests answered out of order, several
//! connections at once. `proto` is pure (fuzzed); `server` does the I/O.

pub mod control;
pub mod fdpass;
pub mod memory;
pub mod metrics;
pub mod proto;
pub mod request;
pub mod server;
pub mod stop;

pub use server::{serve, Config, Listen, Stats};
pub use stop::Stop;
