//! `hetraid ceph`: hetraid's placement ideas for a Ceph cluster. The devices
//! are measured on the simulator's models here; `hetraid-ceph` decides and
//! writes the texts (CRUSH map, profile, commands, predictions).

pub use crate::cli::ceph::*;
use hetraid_ceph::cluster::{ClusterDescription, Host, Osd};
use hetraid_ceph::load::{client_load, recovery, ClientLoad, Recovery};
use hetraid_ceph::placement::{plan, EcProfile, Placement, PlacementPlan};
use hetraid_ceph::{crush, Cluster, DeviceFigures, EcWrites, Workload};
use hetraid_core::units::format_size;
use hetraid_sim::{RunConfig, Size};
use std::fmt::Write;

/// Queue depth recovery keeps per device (Ceph's osd_recovery_max_active
/// for HDDs is 3; a few more in flight from backfills).
const RECOVERY_QD: u32 = 4;
const FILES: [&str; 4] = ["crushmap.txt", "apply.sh", "report.txt", "report.json"];

impl CephCmd {
    fn description(&self) -> Result<ClusterDescription, String> {
        match (&self.cluster, self.hosts.is_empty()) {
            (Some(_), false) => {
                Err("give the hosts either with --host or in --cluster FILE, not both".into())
            }
            (None, true) => Err(
                "describe the cluster: --host NAME=DEVICES (once per host) or --cluster FILE"
                    .into(),
            ),
            (Some(path), true) => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    format!("cannot read cluster description {}: {e}", path.display())
                })?;
                let d = ClusterDescription::parse_toml(&text, &path.display().to_string())?;
                if d.failure_domain.is_some() && self.failure_domain.is_some() {
                    return Err(format!(
                        "{} sets failure_domain already; drop --failure-domain or the file's line",
                        path.display()
                    ));
                }
                Ok(ClusterDescription {
                    failure_domain: d.failure_domain.clone().or(self.failure_domain.clone()),
                    ..d
                })
            }
            (None, false) => {
                ClusterDescription::from_host_args(&self.hosts, self.failure_domain.clone())
            }
        }
    }

    fn read_fraction(&self) -> Result<f64, String> {
        match (self.workload.as_str(), self.read_fraction) {
            ("random-write", None) => Ok(0.0),
            ("random-read", None) => Ok(1.0),
            ("mixed", Some(f)) if (0.0..=1.0).contains(&f) => Ok(f),
            ("mixed", Some(f)) => Err(format!("--read-fraction {f} is not between 0 and 1")),
            ("mixed", None) => Err("--workload mixed needs --read-fraction F".into()),
            ("random-write" | "random-read", Some(_)) => Err(format!(
                "--read-fraction applies to --workload mixed, not {}",
                self.workload
            )),
            (other, _) => Err(format!(
                "--workload '{other}' is unknown here; use random-write, random-read or mixed"
            )),
        }
    }

    /// The cluster with every device's figures from the simulator's models.
    fn cluster(&self, d: &ClusterDescription, shard: u64) -> Result<Cluster, String> {
        let mut osds = Vec::new();
        let mut measured: Vec<(String, DeviceFigures)> = Vec::new();
        for (h, host) in d.host.iter().enumerate() {
            let specs = hetraid_sim::preset::parse_members(&host.devices)
                .map_err(|e| format!("host '{}': {e}", host.name))?;
            // Specs checked the list; the entries name each device as given
            // (a device file's path, not its name field).
            for (spec, token) in specs.into_iter().zip(hetraid_advise::expand(&host.devices)) {
                if osds.len() >= hetraid_ceph::cluster::OSDS_MAX {
                    return Err(format!(
                        "the description has more than {} OSDs; describe at most that many",
                        hetraid_ceph::cluster::OSDS_MAX
                    ));
                }
                let figures = match measured.iter().find(|(n, _)| *n == token) {
                    Some((_, f)) => *f,
                    None => {
                        let f = figures(&token, self.size, shard)?;
                        measured.push((token.clone(), f));
                        f
                    }
                };
                osds.push(Osd {
                    id: osds.len(),
                    host: h,
                    device: spec.name.clone(),
                    kind: spec.kind,
                    capacity_bytes: spec.capacity(),
                    figures,
                });
            }
        }
        Ok(Cluster {
            hosts: d
                .host
                .iter()
                .map(|h| Host {
                    name: h.name.clone(),
                })
                .collect(),
            osds,
            failure_domain: d.failure_domain(),
        })
    }

    /// The options checked before anything is measured or written.
    fn check_options(&self, placement_given: bool) -> Result<(), String> {
        if !["throughput", "capacity"].contains(&self.objective.as_str()) {
            return Err(format!(
                "--objective '{}' is unknown here; use throughput or capacity",
                self.objective
            ));
        }
        if placement_given && self.objective != "throughput" {
            return Err("--objective ranks the placements auto chooses from; drop it or use --placement auto".into());
        }
        if !(self.fill > 0.0 && self.fill <= 1.0) {
            return Err(format!(
                "--fill {} is not in (0, 1]; give the pool's used share",
                self.fill
            ));
        }
        let pool_ok = !self.pool.is_empty()
            && self.pool.len() <= 64
            && self
                .pool
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
        if !pool_ok {
            return Err(format!(
                "--pool '{}' is not a pool name; use 1-64 letters, digits, '-', '_' or '.'",
                self.pool
            ));
        }
        if self.size == 0 || self.size > 1 << 20 {
            return Err("--size must be from 512 bytes to 1M (one stripe unit or less)".into());
        }
        if self.object_size < 4096 * self.k as u64 || self.object_size > 1 << 30 {
            return Err(format!(
                "--object-size must be from {} (4K per data shard) to 1G",
                format_size(4096 * self.k as u64)
            ));
        }
        // Refuse before measuring anything: nothing is written over.
        if let Some(dir) = &self.out {
            for f in FILES {
                if dir.join(f).exists() {
                    return Err(format!(
                        "{} exists; remove it or choose another --out",
                        dir.join(f).display()
                    ));
                }
            }
        }
        Ok(())
    }

    pub fn run(&self) -> Result<(), String> {
        let profile = EcProfile::new(self.k, self.m)?;
        let wanted = Placement::parse(&self.placement)?;
        let ec_writes = EcWrites::parse(&self.ec_writes)?;
        let read_fraction = self.read_fraction()?;
        self.check_options(wanted.is_some())?;
        let shard = self
            .object_size
            .div_ceil(self.k as u64)
            .next_multiple_of(4096);
        let desc = self.description()?;
        let cluster = self.cluster(&desc, shard)?;
        let workload = Workload {
            read_fraction,
            ec_writes,
        };

        // Every placement that applies, with its load; the chosen one.
        let mut rows: Vec<(PlacementPlan, ClientLoad, u64)> = Vec::new();
        let mut refused: Vec<(Placement, String)> = Vec::new();
        for p in Placement::ALL {
            match plan(&cluster, p, profile, read_fraction) {
                Ok(pl) => {
                    let load = client_load(&cluster, &pl, workload);
                    let usable = pl.usable_bytes(&cluster);
                    rows.push((pl, load, usable));
                }
                Err(e) => refused.push((p, e)),
            }
        }
        let chosen = match wanted {
            Some(p) => match rows.iter().position(|r| r.0.placement == p) {
                Some(i) => i,
                None => {
                    let why = &refused.iter().find(|r| r.0 == p).expect("refused").1;
                    return Err(why.clone());
                }
            },
            None => {
                if rows.is_empty() {
                    return Err(refused.first().map(|r| r.1.clone()).unwrap_or_default());
                }
                let score = |r: &(PlacementPlan, ClientLoad, u64)| match self.objective.as_str() {
                    "capacity" => r.2 as f64,
                    _ => r.1.ops_per_s_max,
                };
                // The simplest placement wins unless another beats it by 1 %:
                // rows are in order spread, coding-on-fast, weighted.
                let mut best = 0;
                for i in 1..rows.len() {
                    if score(&rows[i]) > score(&rows[best]) * 1.01 {
                        best = i;
                    }
                }
                best
            }
        };
        let (pl, load, usable) = &rows[chosen];
        let recoveries: Vec<Recovery> = (0..cluster.osds.len())
            .map(|i| recovery(&cluster, pl, i, self.fill))
            .collect::<Result<_, _>>()?;
        let affinity = (read_fraction >= 0.5).then(|| crush::primary_affinity(&cluster));
        let map = crush::crush_map(&cluster, pl);
        let apply = crush::apply_script(&cluster, pl, &self.pool, affinity.as_deref());
        let (profile_name, profile_args) = crush::ec_profile(&cluster, pl);

        let json = serde_json::json!({
            "cluster": {
                "hosts": cluster.hosts.iter().map(|h| &h.name).collect::<Vec<_>>(),
                "osds": cluster.osds.len(),
                "failure_domain": cluster.failure_domain.as_str(),
            },
            "profile": {"name": profile_name, "k": self.k, "m": self.m, "args": profile_args, "shard_bytes": shard},
            "workload": {"read_fraction": read_fraction, "size": self.size, "ec_writes": ec_writes.as_str()},
            "placement": {
                "chosen": pl.placement.as_str(),
                "data_class": pl.data_class,
                "coding_class": pl.coding_class,
                "candidates": rows.iter().map(|(p, l, u)| serde_json::json!({
                    "placement": p.placement.as_str(),
                    "ops_per_s_max": l.ops_per_s_max,
                    "bottleneck_osd": l.bottleneck,
                    "usable_bytes": u,
                })).collect::<Vec<_>>(),
                "refused": refused.iter().map(|(p, e)| serde_json::json!({"placement": p.as_str(), "why": e})).collect::<Vec<_>>(),
            },
            "osds": cluster.osds.iter().map(|o| serde_json::json!({
                "id": o.id,
                "host": cluster.hosts[o.host].name,
                "device": o.device,
                "class": o.class(),
                "capacity_bytes": o.capacity_bytes,
                "crush_weight": pl.crush_weights[o.id],
                "data_shards_per_pg": pl.data_shards[o.id],
                "coding_shards_per_pg": pl.coding_shards[o.id],
                "figures": o.figures,
                "load": load.per_osd[o.id],
                "primary_affinity": affinity.as_ref().map(|a| a[o.id]),
            })).collect::<Vec<_>>(),
            "usable_bytes": usable,
            "ops_per_s_max": load.ops_per_s_max,
            "recovery": {"fill": self.fill, "per_lost_osd": recoveries},
            "rules": {"ec": {"name": crush::EC_RULE, "id": crush::EC_RULE_ID}, "hybrid": {"name": crush::HYBRID_RULE, "id": crush::HYBRID_RULE_ID}},
        });
        let text = self.report_text(
            &cluster,
            &rows,
            &refused,
            chosen,
            &recoveries,
            affinity.as_deref(),
            shard,
        );
        if let Some(dir) = &self.out {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot make --out {}: {e}", dir.display()))?;
            let json_text = serde_json::to_string_pretty(&json).map_err(|e| e.to_string())?;
            for (name, body) in FILES.iter().zip([&map, &apply, &text, &json_text]) {
                write_new(&dir.join(name), body)?;
            }
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                let _ = std::fs::set_permissions(
                    dir.join("apply.sh"),
                    std::fs::Permissions::from_mode(0o755),
                );
            }
        }
        if self.json {
            super::print_json(&json)
        } else {
            print!("{text}");
            match &self.out {
                Some(dir) => println!(
                    "written: {}",
                    FILES.map(|f| dir.join(f).display().to_string()).join(" ")
                ),
                None => println!(
                    "add --out DIR to write the CRUSH map (crushmap.txt), apply.sh and the report"
                ),
            }
            Ok(())
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn report_text(
        &self,
        cluster: &Cluster,
        rows: &[(PlacementPlan, ClientLoad, u64)],
        refused: &[(Placement, String)],
        chosen: usize,
        recoveries: &[Recovery],
        affinity: Option<&[f64]>,
        shard: u64,
    ) -> String {
        let (pl, load, _) = &rows[chosen];
        let mut t = String::new();
        let count = |c: &str| cluster.osds.iter().filter(|o| o.class() == c).count();
        let classes: Vec<String> = ["hdd", "ssd", "nvme"]
            .iter()
            .filter(|c| count(c) > 0)
            .map(|c| format!("{} {c}", count(c)))
            .collect();
        let _ = writeln!(
            t,
            "cluster: {} OSDs on {} host(s) ({}), failure domain {}; erasure code {}+{}, {} {} ({} writes)",
            cluster.osds.len(),
            cluster.hosts.len(),
            classes.join(", "),
            cluster.failure_domain.as_str(),
            self.k,
            self.m,
            format_size(self.size),
            if self.workload == "mixed" {
                format!("mixed, {:.0} % reads", self.read_fraction.unwrap_or(0.0) * 100.0)
            } else {
                self.workload.clone()
            },
            self.ec_writes
        );
        let _ = writeln!(
            t,
            "placement          client ops/s (bound)  busiest OSD          usable"
        );
        for (i, (p, l, u)) in rows.iter().enumerate() {
            let b = &cluster.osds[l.bottleneck];
            let _ = writeln!(
                t,
                "{:<16} {} {:>20.0}  {:<20} {:>8}",
                p.placement.as_str(),
                if i == chosen { "*" } else { " " },
                l.ops_per_s_max,
                format!("osd.{} ({})", b.id, b.class()),
                human(*u)
            );
        }
        for (p, e) in refused {
            let _ = writeln!(t, "{:<16}   not possible: {e}", p.as_str());
        }
        let spread = rows.iter().find(|r| r.0.placement == Placement::Spread);
        let _ = writeln!(
            t,
            "chosen: {}{}{}",
            pl.placement.as_str(),
            match (pl.data_class, pl.coding_class) {
                (Some(d), Some(c)) => format!(": data shards on {d}, coding shards on {c}"),
                _ => ": every shard over every OSD by capacity".into(),
            },
            match spread {
                Some(s) if s.0.placement != pl.placement && s.1.ops_per_s_max > 0.0 => format!(
                    "; {:.2}x spread's client bound, {:.2}x its capacity",
                    load.ops_per_s_max / s.1.ops_per_s_max,
                    rows[chosen].2 as f64 / s.2.max(1) as f64
                ),
                _ => String::new(),
            }
        );
        if pl.placement != Placement::Spread && cluster.failure_domain.as_str() == "host" {
            let _ = writeln!(
                t,
                "note: the two steps pick hosts apart, so a host can hold a data and a coding shard of one PG: {} host failure(s) are always survived",
                self.m / 2
            );
        }
        let _ = writeln!(
            t,
            "\nosd      host         device              class  weight   data/PG  coding/PG  reads/op  writes/op  busy ms/op  util{}",
            if affinity.is_some() { "  affinity" } else { "" }
        );
        for o in &cluster.osds {
            let l = &load.per_osd[o.id];
            let _ = writeln!(
                t,
                "osd.{:<4} {:<12} {:<19} {:<6} {:>7.4} {:>8.3} {:>10.3} {:>9.3} {:>10.3} {:>11.3} {:>5.2}{}",
                o.id,
                cluster.hosts[o.host].name,
                o.device,
                o.class(),
                pl.crush_weights[o.id],
                pl.data_shards[o.id],
                pl.coding_shards[o.id],
                l.reads_per_op,
                l.writes_per_op,
                l.busy_ms_per_op,
                l.utilization,
                affinity.map(|a| format!("  {:>8.2}", a[o.id])).unwrap_or_default()
            );
        }
        if affinity.is_none() {
            t.push_str("primary affinity: left at 1 (the workload is not read-heavy)\n");
        }
        let _ = writeln!(
            t,
            "\nrecovery of one lost OSD (pool {:.0} % full, {} shards, device-bound: recovery throttles opened)",
            self.fill * 100.0,
            format_size(shard)
        );
        let _ = writeln!(
            t,
            "lost     class  bytes      predicted  hot spare  speedup  busiest survivor"
        );
        // The slowest recovery in each class.
        for c in ["hdd", "ssd", "nvme"] {
            let worst = recoveries
                .iter()
                .filter(|r| cluster.osds[r.lost_osd].class() == c && r.lost_bytes > 0)
                .max_by(|a, b| a.predicted_s.total_cmp(&b.predicted_s));
            if let Some(r) = worst {
                let _ = writeln!(
                    t,
                    "osd.{:<4} {:<6} {:>9} {:>9.1} s {:>8.1} s {:>7.1}x  osd.{} ({}){}",
                    r.lost_osd,
                    c,
                    human(r.lost_bytes),
                    r.predicted_s,
                    r.hot_spare_s,
                    r.speedup,
                    r.bottleneck,
                    cluster.osds[r.bottleneck].class(),
                    if r.re_placed {
                        ""
                    } else {
                        "  no other OSD can take its shards: degraded until replaced (the time is the replacement's backfill)"
                    }
                );
            }
        }
        t
    }
}

/// Bytes for people: 1.2 TB, 44.8 GB (decimal, as drives are sold).
fn human(b: u64) -> String {
    let b = b as f64;
    match b {
        b if b >= 1e12 => format!("{:.1} TB", b / 1e12),
        b if b >= 1e9 => format!("{:.1} GB", b / 1e9),
        b => format!("{:.1} MB", b / 1e6),
    }
}

/// Create `path` with `body`, never over an existing file.
fn write_new(path: &std::path::Path, body: &str) -> Result<(), String> {
    use std::io::Write as _;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    f.write_all(body.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// One device's figures from its simulator model: small random reads and
/// writes at one outstanding (service time), shard-sized random reads and
/// writes at recovery's queue depth (rate).
fn figures(device: &str, size: u64, shard: u64) -> Result<DeviceFigures, String> {
    let run = |workload: &str, size: u64, qd: u32, count: u64| {
        let mut c = RunConfig::new("raid0", device);
        c.workload = workload.into();
        c.size = Size(size);
        c.qd = qd;
        c.total = Some(Size(size * count));
        hetraid_sim::run(&c).map_err(|e| format!("simulating device {device}: {e}"))
    };
    Ok(DeviceFigures {
        read_ms: run("random-read", size, 1, 400)?.mean_response_ms,
        write_ms: run("random-write", size, 1, 400)?.mean_response_ms,
        recovery_read_mbps: run("random-read", shard, RECOVERY_QD, 64)?.throughput_mbps,
        recovery_write_mbps: run("random-write", shard, RECOVERY_QD, 64)?.throughput_mbps,
    })
}
