//! Device presets are data: `presets/*.toml` at the repository root (embedded in the
//! binary), or any file a user names. `--members caviar-black-640*4,x25e-64` lists
//! presets in member order; `*n` repeats one.

use crate::device::hdd::{Hdd, HddParams};
use crate::device::ram::{Ram, RamParams};
use crate::device::ssd::{Ssd, SsdParams};
use crate::device::{Device, Power};
use hetraid_core::units::parse_size;
use hetraid_core::MemberKind;
use serde::{Deserialize, Serialize};

/// The shipped presets: (name, TOML text).
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "caviar-black-640",
        include_str!("../../../presets/caviar-black-640.toml"),
    ),
    ("x25e-64", include_str!("../../../presets/x25e-64.toml")),
    (
        "samsung-slc-64",
        include_str!("../../../presets/samsung-slc-64.toml"),
    ),
    ("wd20eads", include_str!("../../../presets/wd20eads.toml")),
    (
        "cheetah-15k5",
        include_str!("../../../presets/cheetah-15k5.toml"),
    ),
    (
        "cheetah-9lp",
        include_str!("../../../presets/cheetah-9lp.toml"),
    ),
    ("atlas-3", include_str!("../../../presets/atlas-3.toml")),
    (
        "disksim-ssd-32g",
        include_str!("../../../presets/disksim-ssd-32g.toml"),
    ),
    (
        "st3500320as",
        include_str!("../../../presets/st3500320as.toml"),
    ),
    (
        "ocz-core-v2-120",
        include_str!("../../../presets/ocz-core-v2-120.toml"),
    ),
    ("wd2500yd", include_str!("../../../presets/wd2500yd.toml")),
    ("nvram-1g", include_str!("../../../presets/nvram-1g.toml")),
    (
        "raidx-297g",
        include_str!("../../../presets/raidx-297g.toml"),
    ),
    (
        "raidx-148g-a",
        include_str!("../../../presets/raidx-148g-a.toml"),
    ),
    (
        "raidx-148g-b",
        include_str!("../../../presets/raidx-148g-b.toml"),
    ),
    (
        "raidx-148g-c",
        include_str!("../../../presets/raidx-148g-c.toml"),
    ),
    (
        "raidx-148g-d",
        include_str!("../../../presets/raidx-148g-d.toml"),
    ),
    (
        "raidx-139g",
        include_str!("../../../presets/raidx-139g.toml"),
    ),
    ("raidx-74g", include_str!("../../../presets/raidx-74g.toml")),
];

/// One device description.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceSpec {
    pub name: String,
    pub kind: MemberKind,
    /// Exported bytes (disks and RAM; an SSD's follows from its geometry).
    #[serde(default)]
    pub capacity: Option<String>,
    #[serde(default)]
    pub hdd: Option<HddParams>,
    #[serde(default)]
    pub ssd: Option<SsdParams>,
    #[serde(default)]
    pub ram: Option<RamParams>,
    /// What `hetraid probe` measured: the model for any kind, in place of
    /// the [hdd]/[ssd]/[ram] tables.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured: Option<crate::device::measured::MeasuredParams>,
    pub power: Power,
    /// Street price in US dollars where a source gives one (`hetraid analyze cost`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_usd: Option<f64>,
}

/// Seek tables shipped with the presets (`seek_table = "NAME"`).
const SEEK_TABLES: &[(&str, &str)] = &[(
    "cheetah-15k5-seeks.csv",
    include_str!("../../../presets/cheetah-15k5-seeks.csv"),
)];

impl DeviceSpec {
    pub fn parse(text: &str, origin: &str) -> Result<Self, String> {
        let mut spec: DeviceSpec =
            toml::from_str(text).map_err(|e| format!("device file {origin}: {}", e.message()))?;
        if let Some(h) = spec.hdd.as_mut() {
            if let Some(name) = h.seek_table.clone() {
                let text = match SEEK_TABLES.iter().find(|(n, _)| *n == name) {
                    Some((_, t)) => t.to_string(),
                    None => {
                        let dir = std::path::Path::new(origin)
                            .parent()
                            .unwrap_or(std::path::Path::new("."));
                        let path = dir.join(&name);
                        std::fs::read_to_string(&path).map_err(|e| {
                            format!("device file {origin}: seek_table {}: {e}", path.display())
                        })?
                    }
                };
                h.seek_points = crate::device::hdd::parse_seek_table(&text, &name)
                    .map_err(|e| format!("device file {origin}: {e}"))?;
            }
        }
        spec.validate()
            .map_err(|e| format!("device file {origin}: {e}"))?;
        Ok(spec)
    }

    fn validate(&self) -> Result<(), String> {
        if let Some(p) = self.price_usd {
            if !(p.is_finite() && p > 0.0) {
                return Err(format!(
                    "price_usd {p} must be a positive number of dollars"
                ));
            }
        }
        let need_cap = || -> Result<(), String> {
            let c = self
                .capacity
                .as_deref()
                .ok_or("capacity is missing (e.g. capacity = \"640G\")")?;
            match parse_size(c)? {
                0 => Err("capacity must be above zero".into()),
                _ => Ok(()),
            }
        };
        if let Some(m) = &self.measured {
            if self.hdd.is_some() || self.ssd.is_some() || self.ram.is_some() {
                return Err("a [measured] device has no [hdd], [ssd] or [ram] table: the measurements are its model".into());
            }
            need_cap()?;
            return m.validate();
        }
        match self.kind {
            MemberKind::Hdd => {
                need_cap()?;
                self.hdd
                    .as_ref()
                    .ok_or("an hdd needs an [hdd] table")?
                    .validate()
            }
            MemberKind::Ssd => self
                .ssd
                .as_ref()
                .ok_or("an ssd needs an [ssd] table")?
                .validate(),
            MemberKind::Nvram => {
                need_cap()?;
                self.ram
                    .as_ref()
                    .ok_or("an nvram device needs a [ram] table")?
                    .validate()
            }
        }
    }

    /// Bytes the device exports.
    pub fn capacity(&self) -> u64 {
        match self.kind {
            MemberKind::Ssd if self.measured.is_none() => {
                self.ssd.as_ref().map(|s| s.capacity()).unwrap_or(0)
            }
            _ => self
                .capacity
                .as_deref()
                .and_then(|c| parse_size(c).ok())
                .unwrap_or(0),
        }
    }

    /// A fresh device model.
    pub fn build(&self) -> Box<dyn Device> {
        if let Some(m) = &self.measured {
            return Box::new(crate::device::measured::Measured::new(
                m.clone(),
                self.capacity(),
            ));
        }
        match self.kind {
            MemberKind::Hdd => Box::new(Hdd::new(self.hdd.clone().unwrap(), self.capacity())),
            MemberKind::Ssd => Box::new(Ssd::new(self.ssd.clone().unwrap())),
            MemberKind::Nvram => Box::new(Ram::new(self.ram.clone().unwrap(), self.capacity())),
        }
    }

    /// The preset named `name`, or the device file at that path.
    pub fn lookup(name: &str) -> Result<Self, String> {
        if let Some((_, text)) = BUILTIN.iter().find(|(n, _)| *n == name) {
            return Self::parse(text, &format!("presets/{name}.toml"));
        }
        if name.ends_with(".toml") || name.contains('/') {
            let text = std::fs::read_to_string(name)
                .map_err(|e| format!("cannot read device file {name}: {e}"))?;
            return Self::parse(&text, name);
        }
        Err(format!(
            "device preset '{name}' is unknown; use one of {} or a path to a .toml device file",
            BUILTIN
                .iter()
                .map(|(n, _)| *n)
                .collect::<Vec<_>>()
                .join(", ")
        ))
    }
}

/// Parse `caviar-black-640*4,x25e-64` into one spec per member, in member order.
pub fn parse_members(s: &str) -> Result<Vec<DeviceSpec>, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim) {
        if part.is_empty() {
            return Err(format!(
                "--members '{s}' has an empty entry; write it like caviar-black-640*4,x25e-64"
            ));
        }
        let (name, n) = match part.rsplit_once('*') {
            Some((name, n)) => (
                name.trim(),
                n.trim().parse::<usize>().ok().filter(|&n| (1..=hetraid_core::layout::MAX_MEMBERS).contains(&n)).ok_or_else(|| {
                    format!("--members entry '{part}' repeats a bad count; write NAME*n with n from 1 to 128")
                })?,
            ),
            None => (part, 1),
        };
        let spec = DeviceSpec::lookup(name)?;
        out.extend(std::iter::repeat_n(spec, n));
    }
    let max = hetraid_core::layout::MAX_MEMBERS;
    if out.len() > max {
        return Err(format!(
            "--members lists {} devices; at most {max} are supported",
            out.len()
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_preset_parses_and_builds() {
        for (name, text) in BUILTIN {
            let s = DeviceSpec::parse(text, name).unwrap();
            assert_eq!(&s.name, name);
            assert!(s.capacity() > 0, "{name}");
        }
    }

    #[test]
    fn member_lists_expand_and_bad_ones_are_explained() {
        let m = parse_members("caviar-black-640*4,x25e-64").unwrap();
        assert_eq!(m.len(), 5);
        assert_eq!(m[4].kind, MemberKind::Ssd);
        for bad in ["", "nope", "x25e-64*0", "x25e-64*", "a,,b"] {
            let e = parse_members(bad).unwrap_err();
            assert!(e.contains("members") || e.contains("unknown"), "{bad}: {e}");
        }
    }
}
