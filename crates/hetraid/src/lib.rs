//! `hetraid` as a library: the command line (`cli`), its arguments
//! (`args`), the verbs (`ops`), how their reports are shown (`render`: one
//! text and one JSON renderer per report) and the server's logging. The binary
//! (`main.rs`) only calls [`cli::main`]; tests and other tools can parse a
//! command line and run a verb in-process. Parsing and printing only: every
//! decision is made in `hetraid-core`.

pub mod args;
pub mod cli;
pub mod config;
pub mod logging;
pub mod ops;
pub mod render;
