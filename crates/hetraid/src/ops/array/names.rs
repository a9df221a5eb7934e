//! Arrays by name or UUID: the members of each array a scan finds, and a
//! name given in place of a member list resolved to the array's members
//! (from the configuration file, or by a scan of its `devices`).

use super::*;
use crate::config::{self, Loaded};

/// One array a scan found: its UUID, the paths of its members (spares and
/// log devices included) of its freshest incarnation, its name.
#[derive(Debug, Clone)]
pub(crate) struct FoundArray {
    pub uuid: String,
    pub paths: Vec<String>,
    pub name: String,
}

/// Group what [`scan_devices`] found by array. A member retired from an
/// earlier incarnation (whose member table has another size) is left out
/// with a warning, as assembly leaves out stale ones; so is the older of
/// two copies of one slot's device.
pub(crate) fn group_found(found: &[(String, PathBuf)]) -> Vec<FoundArray> {
    let mut uuids: Vec<String> = found.iter().map(|(u, _)| u.clone()).collect();
    uuids.sort();
    uuids.dedup();
    let mut arrays = Vec::new();
    for u in &uuids {
        let read: Vec<(String, Option<MemberRead>)> = found
            .iter()
            .filter(|(x, _)| x == u)
            .map(|(_, p)| {
                (
                    p.display().to_string(),
                    hetraid_engine::annex::read_member(p).ok(),
                )
            })
            .collect();
        let fresh = read
            .iter()
            .filter_map(|(_, r)| r.as_ref())
            .max_by_key(|(sb, _)| sb.events)
            .map(|(sb, a)| (sb.roles.len(), a.as_ref().map(|a| a.name.clone())));
        let (n, name) = match fresh {
            Some((n, name)) => (Some(n), name.unwrap_or_default()),
            None => (None, String::new()),
        };
        let mut paths = Vec::new();
        for (p, r) in &read {
            match (r, n) {
                (Some((sb, _)), Some(n)) if sb.roles.len() != n => eprintln!(
                    "hetraid: warning: {p} is left out: it belongs to an earlier incarnation of array {u} ({} slots, now {n})",
                    sb.roles.len()
                ),
                // Two copies of one slot's device (a copy kept beside it):
                // the newer is taken, the other left out.
                (Some((sb, _)), _)
                    if read.iter().any(|(q, r2)| {
                        r2.as_ref().is_some_and(|(o, _)| {
                            q != p
                                && o.member == sb.member
                                && (o.events, o.generation, q.as_str())
                                    > (sb.events, sb.generation, p.as_str())
                        })
                    }) =>
                {
                    eprintln!(
                        "hetraid: warning: {p} is left out: slot {} is held by a newer device beside it (its replacement, or a newer copy of it)",
                        sb.member
                    )
                }
                _ => paths.push(p.clone()),
            }
        }
        arrays.push(FoundArray {
            uuid: u.clone(),
            paths,
            name,
        });
    }
    arrays
}

/// Where a scan looks: the configuration's `devices` (globs expanded), or
/// the block devices of /proc/partitions when it names none.
pub(crate) fn scan_places(loaded: &Loaded) -> Result<Vec<String>, String> {
    match loaded.config.devices.is_empty() {
        true => Ok(config::partitions()),
        false => config::expand(&loaded.config.devices),
    }
}

/// The arrays under `places` (unreadable places are skipped: a scan of
/// every partition meets devices this user cannot open).
pub(crate) fn scan_arrays(places: &[String]) -> Vec<FoundArray> {
    let found: Vec<(String, PathBuf)> = places
        .iter()
        .filter_map(|p| scan_devices(std::slice::from_ref(p)).ok())
        .flatten()
        .collect();
    group_found(&found)
}

/// A member list given as one word that is no path — an array's name or
/// UUID — replaced by the array's members: the configuration's list, or
/// what a scan of its `devices` finds. Returns the configuration's entry
/// when the word named one (`serve` takes its `listen`). A path, or more
/// than one word, is left as given.
pub fn resolve_members(
    members: &mut Vec<String>,
    loaded: &Loaded,
) -> Result<Option<config::ArrayEntry>, Failure> {
    let [word] = members.as_slice() else {
        return Ok(None);
    };
    if word.contains('/') || Path::new(&split_member(word)?.0).exists() {
        return Ok(None);
    }
    let entry = loaded.config.find(word).cloned();
    let where_config = match loaded.found {
        true => loaded.path.display().to_string(),
        false => format!("{} (absent)", loaded.path.display()),
    };
    if let Some(e) = entry.as_ref().filter(|e| !e.members.is_empty()) {
        *members = e.members.clone();
        return Ok(entry);
    }
    let uuid = entry
        .as_ref()
        .map(|e| e.uuid.to_ascii_lowercase())
        .or_else(|| config::uuid_of(word));
    let places = scan_places(loaded)?;
    let arrays = scan_arrays(&places);
    let hits: Vec<&FoundArray> = arrays
        .iter()
        .filter(|a| match &uuid {
            Some(u) => a.uuid.eq_ignore_ascii_case(u),
            None => a.name == *word,
        })
        .collect();
    let scanned = if loaded.config.devices.is_empty() {
        "the block devices of /proc/partitions".to_string()
    } else {
        format!("devices {}", loaded.config.devices.join(", "))
    };
    match hits.as_slice() {
        [a] => {
            *members = a.paths.clone();
            Ok(entry)
        }
        [] => Err(Failure::new(
            ErrorKind::NotFound,
            format!(
                "{word}: no such file, and no array {} in {where_config} nor among {scanned}; give the members' paths, or list the array in the configuration (hetraid assemble --scan --print-config DIRS writes its lines)",
                match &uuid {
                    Some(u) if entry.is_some() => format!("named {word} ({u}) has a member"),
                    Some(u) => u.to_string(),
                    None => format!("named {word}"),
                },
            ),
        )),
        many => Err(format!(
            "{} arrays named {word} were found in {scanned} ({}): name one by its UUID",
            many.len(),
            many.iter().map(|a| a.uuid.as_str()).collect::<Vec<_>>().join(", ")
        )
        .into()),
    }
}

/// `assemble --scan --print-config`: the configuration's lines for the
/// arrays found (mdadm --detail --scan).
pub(crate) fn print_config(places: &[String], arrays: &[FoundArray]) -> String {
    let c = config::Config {
        devices: places.to_vec(),
        arrays: arrays
            .iter()
            .map(|a| config::ArrayEntry {
                name: a.name.clone(),
                uuid: a.uuid.clone(),
                members: a
                    .paths
                    .iter()
                    .map(|p| {
                        std::path::absolute(p)
                            .map_or_else(|_| p.clone(), |x| x.display().to_string())
                    })
                    .collect(),
                listen: None,
            })
            .collect(),
    };
    format!(
        "# hetraid configuration: arrays by name (hetraid assemble --scan --print-config)\n{}",
        c.to_text()
    )
}
