//! `ceph`'s options (clap only): the verb is `crate::ops::ceph`.

use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct CephCmd {
    /// A host and its devices, NAME=DEVICES (presets, device files such as
    /// probe's): --host node1=caviar-black-640*4,x25e-64. Repeat per host.
    #[arg(long = "host")]
    pub hosts: Vec<String>,
    /// A cluster description instead of --host: TOML with [[host]] tables
    /// (name, devices) and an optional failure_domain.
    #[arg(long)]
    pub cluster: Option<PathBuf>,
    /// What shards of one PG are kept apart on: host (default) or osd (a
    /// single host).
    #[arg(long)]
    pub failure_domain: Option<String>,
    /// Data shards per object.
    #[arg(long, default_value = "4")]
    pub k: usize,
    /// Coding shards per object.
    #[arg(long, default_value = "2")]
    pub m: usize,
    /// auto (the load model's choice by --objective), spread (plain Ceph),
    /// coding-on-fast (RAID4S: k shards from the slow class, m from the
    /// fast one), weighted (RAIDH: as coding-on-fast, fast devices weighted
    /// by service rate).
    #[arg(long, default_value = "auto")]
    pub placement: String,
    /// What auto ranks by: throughput (the busiest OSD's bound on client
    /// operations) or capacity (usable bytes).
    #[arg(long, default_value = "throughput")]
    pub objective: String,
    /// random-write, random-read or mixed (with --read-fraction).
    #[arg(long, default_value = "random-write")]
    pub workload: String,
    /// Share of reads, for --workload mixed.
    #[arg(long)]
    pub read_fraction: Option<f64>,
    /// Client request size (one stripe unit or less).
    #[arg(long, default_value = "4K", value_parser = crate::args::size)]
    pub size: u64,
    /// How the pool writes less than a stripe: partial (Ceph's optimized EC
    /// pools: the data shard and the m coding shards) or full-stripe (Ceph
    /// Pacific and earlier: every shard).
    #[arg(long, default_value = "partial")]
    pub ec_writes: String,
    /// RADOS object size (a shard is object / k).
    #[arg(long, default_value = "4M", value_parser = crate::args::size)]
    pub object_size: u64,
    /// The pool's used share, for the recovery prediction.
    #[arg(long, default_value = "0.7")]
    pub fill: f64,
    /// The erasure-coded pool's name in the commands.
    #[arg(long, default_value = "hetraid-ec")]
    pub pool: String,
    /// Write crushmap.txt, apply.sh, report.txt and report.json here (made
    /// if missing; existing files are never overwritten).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print the report as one JSON document.
    #[arg(long)]
    pub json: bool,
}
