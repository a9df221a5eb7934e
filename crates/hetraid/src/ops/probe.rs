//! `hetraid probe`: measure a real file or block device and write a device
//! file the simulator (and `--weights auto`) accept: random 4 KiB reads at
//! one outstanding and at eight, sequential 1 MiB reads, and — only with
//! `--destructive`, since they overwrite the member — the same for writes
//! (O_DSYNC: a write counts once durable). O_DIRECT where the file system
//! has it, so the page cache does not answer for the device.

pub use crate::cli::probe::*;
use std::path::Path;

/// The head of a device `--destructive` looks at for data.
const HEAD_BYTES: usize = 1 << 20;

/// `--destructive` overwrites the device: refused, as `add` and `replace`
/// refuse, when it holds a hetraid superblock or anything but zeros in its
/// first MiB (a partition table, a filesystem, another RAID's metadata).
fn refuse_holding_data(path: &Path) -> Result<(), String> {
    use std::io::Read;
    let m = path.display();
    if let Ok((sb, annex)) = hetraid_engine::annex::read_member(path) {
        let name = annex.map(|a| a.name).filter(|n| !n.is_empty());
        return Err(format!(
            "{m} is slot {} of hetraid array {}{}: --destructive would destroy it; give another device, or say --force",
            sb.member,
            sb.uuid_string(),
            name.map(|n| format!(" ({n})")).unwrap_or_default()
        ));
    }
    let mut head = Vec::with_capacity(HEAD_BYTES);
    std::fs::File::open(path)
        .and_then(|f| f.take(HEAD_BYTES as u64).read_to_end(&mut head))
        .map_err(|e| format!("{m}: {e}"))?;
    if let Some(at) = head.iter().position(|&b| b != 0) {
        return Err(format!(
            "{m} holds data in its first MiB (a byte that is not zero at offset {at}): --destructive would overwrite it; give an empty device, or say --force"
        ));
    }
    Ok(())
}

impl ProbeCmd {
    pub fn run(&self) -> Result<(), String> {
        if !(self.seconds > 0.0 && self.seconds <= 600.0) {
            return Err(format!(
                "--seconds {} must be above 0 and at most 600",
                self.seconds
            ));
        }
        if !self.out.is_dir() {
            return Err(format!(
                "--out {} is not a directory; create it or name another",
                self.out.display()
            ));
        }
        // Every member checked before any is measured (nothing is written
        // for a bad command line).
        let mut plan = Vec::new();
        for m in &self.members {
            let path = Path::new(m);
            let meta = std::fs::metadata(path).map_err(|e| format!("{m}: {e}"))?;
            if meta.is_dir() {
                return Err(format!("{m} is a directory; give a file or a block device"));
            }
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "device".into());
            if self.force && !self.destructive {
                return Err(
                    "--force applies to --destructive (a read-only probe overwrites nothing)"
                        .into(),
                );
            }
            if self.destructive && !self.force {
                refuse_holding_data(path)?;
            }
            let out = self.out.join(format!("probe-{name}.toml"));
            if out.exists() {
                return Err(format!(
                    "{} exists; remove it or give another --out",
                    out.display()
                ));
            }
            plan.push((m.clone(), name, out));
        }
        for (m, name, out) in plan {
            let (text, summary) = hetraid_advise::probe::probe_member(
                &m,
                &name,
                self.seconds,
                self.destructive,
                self.kind,
            )?;
            // The file must be one the simulator takes.
            hetraid_sim::preset::DeviceSpec::parse(&text, &out.display().to_string())?;
            // create_new: never through a symlink or over a file made since
            // the check above (O_CREAT | O_EXCL).
            {
                use std::io::Write;
                std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&out)
                    .and_then(|mut f| f.write_all(text.as_bytes()))
                    .map_err(|e| {
                        format!("{}: {e}; remove it or give another --out", out.display())
                    })?;
            }
            println!("{summary} -> {}", out.display());
        }
        Ok(())
    }
}
