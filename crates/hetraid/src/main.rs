//! `hetraid`: the one binary. Everything is in the library (`lib.rs`).

fn main() {
    hetraid::cli::main()
}
