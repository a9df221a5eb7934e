//! Arrays by name: the configuration file (mdadm.conf's DEVICE and ARRAY
//! lines, zpool.cache's role) and the resolution of a name or UUID given in
//! place of a member list.
//!
//! The file is TOML (`docs/OPERATING.md` documents it; `hetraid assemble
//! --scan --print-config` writes it):
//!
//! ```toml
//! # Where scans look for members: directories (read one level), files,
//! # block devices, and globs of them (mdadm's DEVICE lines).
//! devices = ["/srv/hetraid", "/dev/sd*"]
//!
//! [[array]]
//! name = "tank"
//! uuid = "5d0c8d8e-..."
//! # Optional: the devices, spares and log devices by path. Without them
//! # the devices above are scanned for the array's UUID.
//! members = ["/srv/hetraid/a.img", "/srv/hetraid/b.img"]
//! # Optional: what `hetraid serve tank` listens on.
//! listen = "unix:/run/hetraid/tank.sock"
//! ```
//!
//! Which file: `--config PATH`, else `$HETRAID_CONFIG`, else
//! `/etc/hetraid/hetraid.conf` (absent: no arrays by name, scans look at the
//! block devices of /proc/partitions).

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The system-wide configuration file.
pub const CONFIG_PATH_DEFAULT: &str = "/etc/hetraid/hetraid.conf";

/// Arrays named in one configuration file, and where scans look.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Where scans look for members (paths, directories, globs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<String>,
    #[serde(default, rename = "array", skip_serializing_if = "Vec::is_empty")]
    pub arrays: Vec<ArrayEntry>,
}

/// One array of the configuration file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArrayEntry {
    /// `create --name` (optional: an array may be known by UUID only).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    pub uuid: String,
    /// Members, spares and log devices by path; empty: found by a scan.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<String>,
    /// `serve NAME`'s `--listen` when none is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen: Option<String>,
}

/// The configuration a command reads: the file's path (for messages) and
/// what it says (empty when the default file is absent).
#[derive(Debug, Clone)]
pub struct Loaded {
    pub path: PathBuf,
    pub config: Config,
    /// The file exists (the default one may not).
    pub found: bool,
}

impl Config {
    /// Parse a configuration file's text; `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Config, String> {
        let c: Config = toml::from_str(text).map_err(|e| {
            format!(
                "{}: {}",
                path.display(),
                e.to_string().lines().collect::<Vec<_>>().join(" ")
            )
        })?;
        for (i, a) in c.arrays.iter().enumerate() {
            if uuid_of(&a.uuid).is_none() {
                return Err(format!(
                    "{}: array {} has uuid '{}', not a UUID; copy it from hetraid status or write the file with hetraid assemble --scan --print-config",
                    path.display(),
                    i + 1,
                    a.uuid
                ));
            }
            let clash = c.arrays[..i].iter().find(|b| {
                b.uuid.eq_ignore_ascii_case(&a.uuid) || (!a.name.is_empty() && b.name == a.name)
            });
            if let Some(b) = clash {
                return Err(format!(
                    "{}: arrays {} and {} share a name or UUID ({}); each array once, with its own name",
                    path.display(),
                    c.arrays.iter().position(|x| x == b).map_or(0, |p| p + 1),
                    i + 1,
                    if a.name == b.name { &a.name } else { &a.uuid }
                ));
            }
        }
        Ok(c)
    }

    /// Read the file `given` names, or the default one: an explicit file
    /// must exist, the default one may not.
    pub fn load(given: Option<&Path>) -> Result<Loaded, String> {
        let env = std::env::var_os("HETRAID_CONFIG").map(PathBuf::from);
        let (path, explicit) = match (given, env) {
            (Some(p), _) => (p.to_path_buf(), true),
            (None, Some(p)) if !p.as_os_str().is_empty() => (p, true),
            _ => (PathBuf::from(CONFIG_PATH_DEFAULT), false),
        };
        if let Ok(m) = std::fs::metadata(&path) {
            trusted(&path, &m)?;
        }
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(Loaded {
                config: Config::parse(&text, &path)?,
                path,
                found: true,
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !explicit => Ok(Loaded {
                path,
                config: Config::default(),
                found: false,
            }),
            Err(e) => Err(format!(
                "configuration file {}: {e}; give an existing file with --config or write one with hetraid assemble --scan --print-config",
                path.display()
            )),
        }
    }

    /// The entry named `word` (its name, or its UUID in any case).
    pub fn find(&self, word: &str) -> Option<&ArrayEntry> {
        self.arrays
            .iter()
            .find(|a| (!a.name.is_empty() && a.name == word) || a.uuid.eq_ignore_ascii_case(word))
    }

    /// The file's text (`--print-config`).
    pub fn to_text(&self) -> String {
        toml::to_string(self).unwrap_or_default()
    }
}

/// May this file name the devices a command opens? It says which devices
/// are an array's members, so a file another user could write would let
/// them point root's `hetraid fail tank` at their choice: it must belong to
/// root or to this user and be writable by nobody else (as sudo and ssh
/// check their files).
fn trusted(path: &Path, m: &std::fs::Metadata) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let me = rustix::process::geteuid().as_raw();
    if (m.uid() != 0 && m.uid() != me) || m.mode() & 0o022 != 0 {
        return Err(format!(
            "configuration file {} is not used: it belongs to uid {} with mode {:o}; it must belong to root or to this user and be writable by nobody else (chmod go-w)",
            path.display(),
            m.uid(),
            m.mode() & 0o7777
        ));
    }
    Ok(())
}

/// `s` as a canonical (lower-case, hyphenated) UUID, if it is one.
pub fn uuid_of(s: &str) -> Option<String> {
    uuid::Uuid::parse_str(s)
        .ok()
        .map(|u| u.hyphenated().to_string())
}

/// Where a scan looks when the configuration names no `devices`: the block
/// devices of /proc/partitions (mdadm's `DEVICE partitions`).
pub fn partitions() -> Vec<String> {
    let Ok(text) = std::fs::read_to_string("/proc/partitions") else {
        return Vec::new();
    };
    text.lines()
        .skip(2)
        .filter_map(|l| l.split_whitespace().nth(3))
        .map(|name| format!("/dev/{name}"))
        .filter(|p| Path::new(p).exists())
        .collect()
}

/// `devices` with globs expanded (a pattern matching nothing is dropped; a
/// plain path is kept as given, for its error to name it).
pub fn expand(devices: &[String]) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for d in devices {
        if !d.contains(['*', '?', '[']) {
            out.push(d.clone());
            continue;
        }
        let paths = glob::glob(d).map_err(|e| format!("devices pattern '{d}': {e}"))?;
        for p in paths.flatten() {
            out.push(p.display().to_string());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const U1: &str = "5d0c8d8e-1a2b-4c3d-8e9f-0123456789ab";
    const U2: &str = "6e1d9e9f-2b3c-4d4e-9f0a-123456789abc";

    #[test]
    fn a_config_round_trips_and_finds_by_name_or_uuid() {
        let c = Config {
            devices: vec!["/srv/hetraid".into(), "/dev/sd*".into()],
            arrays: vec![
                ArrayEntry {
                    name: "tank".into(),
                    uuid: U1.into(),
                    members: vec!["/srv/hetraid/a.img".into()],
                    listen: Some("unix:/run/hetraid/tank.sock".into()),
                },
                ArrayEntry {
                    uuid: U2.into(),
                    ..Default::default()
                },
            ],
        };
        let text = c.to_text();
        let back = Config::parse(&text, Path::new("t.conf")).unwrap();
        assert_eq!(back, c, "{text}");
        assert_eq!(back.find("tank").unwrap().uuid, U1);
        assert_eq!(back.find(&U2.to_uppercase()).unwrap().uuid, U2);
        assert!(back.find("pool").is_none());
    }

    #[test]
    fn bad_files_are_refused_with_the_file_named() {
        let p = Path::new("/etc/hetraid/hetraid.conf");
        let e = Config::parse("[[array]]\nuuid = \"tank\"\n", p).unwrap_err();
        assert!(
            e.contains("not a UUID") && e.contains("hetraid.conf"),
            "{e}"
        );
        let e = Config::parse("devices = 3\n", p).unwrap_err();
        assert!(e.starts_with("/etc/hetraid/hetraid.conf: "), "{e}");
        let e = Config::parse("[[array]]\nuuid = \"x\"\nmembrs = []\n", p).unwrap_err();
        assert!(e.contains("membrs"), "{e}");
        let twice = format!(
            "[[array]]\nname = \"tank\"\nuuid = \"{U1}\"\n[[array]]\nname = \"tank\"\nuuid = \"{U2}\"\n"
        );
        let e = Config::parse(&twice, p).unwrap_err();
        assert!(e.contains("arrays 1 and 2 share"), "{e}");
    }

    #[test]
    fn uuids_are_recognised_and_nothing_else() {
        assert_eq!(uuid_of(&U1.to_uppercase()).as_deref(), Some(U1));
        assert!(uuid_of("tank").is_none());
        assert!(uuid_of("5d0c8d8e-1a2b-4c3d-8e9f-0123456789a").is_none());
        assert!(uuid_of("5d0c8d8e-1a2b-4c3d-8e9f-0123456789ag").is_none());
    }
}
