//! The cluster: hosts, their OSDs, and what each device can do.

use hetraid_core::MemberKind;
use serde::{Deserialize, Serialize};

/// What the simulator's model of a device gives the load and recovery
/// predictions: one small client operation's service time each way, and the
/// rates of the shard-sized operations recovery issues.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct DeviceFigures {
    /// Mean service time of one small random read (the workload's size), ms.
    pub read_ms: f64,
    /// Mean service time of one small random write, ms.
    pub write_ms: f64,
    /// Random shard-sized reads at the queue depth recovery keeps, MB/s.
    pub recovery_read_mbps: f64,
    /// Random shard-sized writes at that queue depth, MB/s.
    pub recovery_write_mbps: f64,
}

/// Which CRUSH bucket type a placement rule keeps shards of one PG apart in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FailureDomain {
    Host,
    Osd,
}

impl FailureDomain {
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "host" => Ok(Self::Host),
            "osd" => Ok(Self::Osd),
            other => Err(format!(
                "failure domain '{other}' is unknown; use host (shards of a PG on different hosts) or osd (a single host)"
            )),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Host => "host",
            Self::Osd => "osd",
        }
    }
}

/// A host as the description names it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Host {
    pub name: String,
}

/// One OSD: a device on a host.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Osd {
    /// OSD id, in description order from 0 (`osd.N`).
    pub id: usize,
    /// Index into [`Cluster::hosts`].
    pub host: usize,
    /// The device preset or file it was described by.
    pub device: String,
    pub kind: MemberKind,
    pub capacity_bytes: u64,
    pub figures: DeviceFigures,
}

impl Osd {
    /// Ceph's device class for the kind (`nvme` for NVRAM-class devices).
    pub fn class(&self) -> &'static str {
        class_of(self.kind)
    }

    /// CRUSH weight by Ceph's convention: the capacity in TiB.
    pub fn capacity_weight(&self) -> f64 {
        self.capacity_bytes as f64 / (1u64 << 40) as f64
    }

    /// Mean time of one small client operation at `read_fraction` reads, ms.
    pub fn op_ms(&self, read_fraction: f64) -> f64 {
        read_fraction * self.figures.read_ms + (1.0 - read_fraction) * self.figures.write_ms
    }
}

pub fn class_of(kind: MemberKind) -> &'static str {
    match kind {
        MemberKind::Hdd => "hdd",
        MemberKind::Ssd => "ssd",
        MemberKind::Nvram => "nvme",
    }
}

/// Hosts with their OSDs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cluster {
    pub hosts: Vec<Host>,
    pub osds: Vec<Osd>,
    pub failure_domain: FailureDomain,
}

/// At most this many OSDs: a description beyond it is a typo, not a shelf.
pub const OSDS_MAX: usize = 4096;

impl Cluster {
    /// The device classes present, slowest first (by the mean small
    /// operation time of their devices at `read_fraction`).
    pub fn classes_by_speed(&self, read_fraction: f64) -> Vec<&'static str> {
        let mut classes: Vec<(&'static str, f64)> = Vec::new();
        for c in ["hdd", "ssd", "nvme"] {
            let times: Vec<f64> = self
                .osds
                .iter()
                .filter(|o| o.class() == c)
                .map(|o| o.op_ms(read_fraction))
                .collect();
            if !times.is_empty() {
                classes.push((c, times.iter().sum::<f64>() / times.len() as f64));
            }
        }
        classes.sort_by(|a, b| b.1.total_cmp(&a.1));
        classes.into_iter().map(|(c, _)| c).collect()
    }

    /// How many distinct failure domains hold an OSD of `class` (all
    /// classes with None).
    pub fn domains_with(&self, class: Option<&str>) -> usize {
        let osds = self
            .osds
            .iter()
            .filter(|o| class.is_none_or(|c| o.class() == c));
        match self.failure_domain {
            FailureDomain::Osd => osds.count(),
            FailureDomain::Host => {
                let mut hosts: Vec<usize> = osds.map(|o| o.host).collect();
                hosts.sort_unstable();
                hosts.dedup();
                hosts.len()
            }
        }
    }
}

/// A cluster description as a file or the command line gives it: hosts and
/// their devices by name (presets, device files, probed members).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterDescription {
    /// `host` (default) or `osd`.
    #[serde(default)]
    pub failure_domain: Option<String>,
    #[serde(default)]
    pub host: Vec<HostDescription>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostDescription {
    pub name: String,
    /// `caviar-black-640*4,x25e-64`, as `--members` elsewhere.
    pub devices: String,
}

impl ClusterDescription {
    /// Parse a TOML description (`[[host]] name = "node1" devices = "..."`).
    pub fn parse_toml(text: &str, origin: &str) -> Result<Self, String> {
        let d: Self = toml::from_str(text).map_err(|e| {
            format!(
                "{origin} is not a cluster description: {}; write [[host]] tables with name and devices",
                e.message()
            )
        })?;
        d.check(origin)?;
        Ok(d)
    }

    /// From `--host NAME=DEVICES` arguments.
    pub fn from_host_args(args: &[String], failure_domain: Option<String>) -> Result<Self, String> {
        let mut host = Vec::new();
        for a in args {
            let (name, devices) = a.split_once('=').ok_or_else(|| {
                format!("--host '{a}' has no '='; write it as NAME=DEVICES, like node1=caviar-black-640*4,x25e-64")
            })?;
            host.push(HostDescription {
                name: name.trim().to_string(),
                devices: devices.trim().to_string(),
            });
        }
        let d = Self {
            failure_domain,
            host,
        };
        d.check("--host")?;
        Ok(d)
    }

    fn check(&self, origin: &str) -> Result<(), String> {
        if self.host.is_empty() {
            return Err(format!(
                "{origin} describes no host; give at least one (NAME=DEVICES)"
            ));
        }
        for (i, h) in self.host.iter().enumerate() {
            let ok = !h.name.is_empty()
                && h.name.len() <= 64
                && h.name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
            if !ok {
                return Err(format!(
                    "host name '{}' in {origin} is not a CRUSH name; use 1-64 letters, digits, '-', '_' or '.'",
                    h.name
                ));
            }
            if self.host[..i].iter().any(|o| o.name == h.name) {
                return Err(format!(
                    "host '{}' is described twice in {origin}; give each host once",
                    h.name
                ));
            }
            if h.devices.trim().is_empty() {
                return Err(format!(
                    "host '{}' in {origin} has no devices; list them like caviar-black-640*4,x25e-64",
                    h.name
                ));
            }
        }
        if let Some(f) = &self.failure_domain {
            FailureDomain::parse(f)?;
        }
        Ok(())
    }

    pub fn failure_domain(&self) -> FailureDomain {
        self.failure_domain
            .as_deref()
            .map(|f| FailureDomain::parse(f).expect("checked at parse"))
            .unwrap_or(FailureDomain::Host)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_parse_and_bad_ones_are_explained() {
        let d = ClusterDescription::parse_toml(
            "failure_domain = \"osd\"\n[[host]]\nname = \"node1\"\ndevices = \"x25e-64*2\"\n",
            "c.toml",
        )
        .unwrap();
        assert_eq!(d.failure_domain(), FailureDomain::Osd);
        assert_eq!(d.host[0].devices, "x25e-64*2");
        let d =
            ClusterDescription::from_host_args(&["a=x25e-64".into(), "b=wd20eads*3".into()], None)
                .unwrap();
        assert_eq!(d.failure_domain(), FailureDomain::Host);
        for (text, want) in [
            ("", "no host"),
            ("[[host]]\nname = \"a b\"\ndevices = \"x\"\n", "CRUSH name"),
            (
                "[[host]]\nname = \"a\"\ndevices = \"x\"\n[[host]]\nname = \"a\"\ndevices = \"y\"\n",
                "twice",
            ),
            ("[[host]]\nname = \"a\"\ndevices = \"\"\n", "no devices"),
            ("failure_domain = \"rack\"\n[[host]]\nname = \"a\"\ndevices = \"x\"\n", "unknown"),
            ("[[host]]\nname = \"a\"\n", "not a cluster description"),
        ] {
            let e = ClusterDescription::parse_toml(text, "c.toml").unwrap_err();
            assert!(e.contains(want), "{text:?}: {e}");
        }
        let e = ClusterDescription::from_host_args(&["node1".into()], None).unwrap_err();
        assert!(e.contains("NAME=DEVICES"), "{e}");
    }
}

#[cfg(test)]
pub(crate) mod tests_support {
    use super::*;

    /// `hosts` hosts, each with `hdd` 640 GB disks and `ssd` 64 GB SSDs
    /// (figures of the caviar-black-640 and x25e-64 presets' class).
    pub fn cluster(hosts: usize, hdd: usize, ssd: usize, failure_domain: FailureDomain) -> Cluster {
        let mut osds = Vec::new();
        for h in 0..hosts {
            for j in 0..hdd + ssd {
                let disk = j < hdd;
                osds.push(Osd {
                    id: osds.len(),
                    host: h,
                    device: if disk { "caviar-black-640" } else { "x25e-64" }.into(),
                    kind: if disk {
                        MemberKind::Hdd
                    } else {
                        MemberKind::Ssd
                    },
                    capacity_bytes: if disk {
                        640_000_000_000
                    } else {
                        64_000_000_000
                    },
                    figures: if disk {
                        DeviceFigures {
                            read_ms: 12.7,
                            write_ms: 12.7,
                            recovery_read_mbps: 60.0,
                            recovery_write_mbps: 60.0,
                        }
                    } else {
                        DeviceFigures {
                            read_ms: 0.2,
                            write_ms: 0.3,
                            recovery_read_mbps: 200.0,
                            recovery_write_mbps: 150.0,
                        }
                    },
                });
            }
        }
        Cluster {
            hosts: (0..hosts)
                .map(|h| Host {
                    name: format!("node{h}"),
                })
                .collect(),
            osds,
            failure_domain,
        }
    }
}
