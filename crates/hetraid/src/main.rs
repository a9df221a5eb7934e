//! `hetraid`: the one binary. Parsing and printing only; every decision is made in
//! `hetraid-core`.

mod args;
mod cmd;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "hetraid",
    version,
    about = "Software RAID for heterogeneous arrays, and a simulator that runs the same controller"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print a layout's geometry: per stripe, data and parity members and offsets.
    Layout(cmd::layout::LayoutCmd),
    /// Print the I/O plan of one read or write: per member reads and writes, and the
    /// RMW/RCW/full choice per page row.
    Plan(cmd::plan::PlanCmd),
    /// Enumerate a write of K chunks from every start position of one placement
    /// cycle and print each member's share of reads and writes.
    Loadmap(cmd::loadmap::LoadmapCmd),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Layout(c) => c.run(),
        Command::Plan(c) => c.run(),
        Command::Loadmap(c) => c.run(),
    };
    if let Err(e) = result {
        eprintln!("hetraid: {e}");
        std::process::exit(2);
    }
}
