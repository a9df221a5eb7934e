//! The write log's configuration rules, decided once: which combinations of
//! log options make sense, the default sizes, and the smallest log a layout
//! needs. The engine's `create`, the simulator's setup and the CLI's `create`
//! all ask here (they held three copies that had begun to differ); each words
//! the answer with its own option names (`Spelling`).

use crate::journal::{log_bytes_min, Reserve};
use crate::Layout;

/// How the write log is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LogMode {
    /// Write-through: every stripe update (data and parity) is durable in
    /// the log before the members are written; replayed after a crash.
    Journal,
    /// Write-back: a write is acknowledged once durable in the log; a
    /// reclaimer writes the logged data to the members later (as journaled
    /// stripe updates).
    WriteBack,
}

impl LogMode {
    pub fn name(self) -> &'static str {
        match self {
            LogMode::Journal => "journal",
            LogMode::WriteBack => "write-back",
        }
    }

    /// A mode by its name; None names nothing (the default, journal).
    pub fn parse(name: Option<&str>) -> Result<Self, LogConfigError> {
        match name.unwrap_or("journal") {
            "journal" => Ok(LogMode::Journal),
            "write-back" => Ok(LogMode::WriteBack),
            other => Err(LogConfigError::UnknownMode(other.to_string())),
        }
    }

    /// What a log in this mode must keep room for (its minimum's reason).
    pub fn why_min(self) -> &'static str {
        match self {
            LogMode::Journal => "a record must hold the largest stripe update",
            LogMode::WriteBack => "beside the largest write it must keep room for the stripe updates that write everything it holds to the members, or it could fill and stop",
        }
    }
}

/// Size of a log device a command creates, or a simulated one, when none is
/// given (`--log-size`, `log_size`).
pub const LOG_DEVICE_BYTES_DEFAULT: u64 = 64 << 20;

/// Log options as a front end received them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogOptions {
    /// Log devices given (one, or two mirrored); 0: none.
    pub devices: usize,
    /// A log region of this many bytes on the members.
    pub region: Option<u64>,
    /// The size of the log (devices a command creates, or HPDA's log).
    pub size: Option<u64>,
    /// The mode asked for by name (None: the default).
    pub mode: Option<String>,
}

/// Where the log goes, once the options are checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogPlace {
    /// On `count` devices of their own, `size_bytes` each when created.
    Devices { count: usize, size_bytes: u64 },
    /// In a region of `bytes` past the data area of the members.
    Region { bytes: u64 },
    /// HPDA's own: past the parity on HDD-1 and mirrored on HDD-2, of the
    /// requested size (None: `hpda::LOG_BYTES_DEFAULT`, or what fits).
    Hpda { requested: Option<u64> },
}

/// A checked log configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogChoice {
    pub mode: LogMode,
    pub place: LogPlace,
}

/// A log configuration that does not make sense, as a value: each front end
/// words it with its own option names (`sentence`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogConfigError {
    /// HPDA's log is part of its layout.
    HpdaLogGiven,
    /// HPDA's log is write-back.
    HpdaNotWriteBack,
    DevicesAndRegion,
    SizeWithRegion,
    ModeWithoutLog,
    SizeWithoutLog,
    DeviceCount(usize),
    UnknownMode(String),
    /// `what` of `bytes` is below `need` for `members` members of
    /// `chunk`-byte chunks.
    TooSmall {
        what: Sized,
        bytes: u64,
        need: u64,
        members: usize,
        chunk: u64,
        mode: LogMode,
    },
}

/// What a log size was given for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sized {
    /// A log device, by name.
    Device(String),
    /// The size option (log devices to create, a simulated log).
    SizeOption,
    /// The region option.
    RegionOption,
}

/// A front end's names for the log options.
#[derive(Debug, Clone, Copy)]
pub struct Spelling {
    pub log: &'static str,
    /// What the log option takes (a path, a device model).
    pub device: &'static str,
    /// None: this front end has no log region.
    pub region: Option<&'static str>,
    pub size: &'static str,
    pub mode: &'static str,
}

/// `hetraid create`'s options.
pub const CLI: Spelling = Spelling {
    log: "--log",
    device: "PATH",
    region: Some("--log-region"),
    size: "--log-size",
    mode: "--log-mode",
};

/// The simulator's configuration keys.
pub const SIM: Spelling = Spelling {
    log: "log",
    device: "DEVICE",
    region: None,
    size: "log_size",
    mode: "log_mode",
};

impl LogConfigError {
    /// One sentence that says what is wrong and how to fix it.
    pub fn sentence(&self, s: &Spelling) -> String {
        let Spelling {
            log,
            device,
            region,
            size,
            mode,
        } = *s;
        // "--log PATH or --log-region SIZE", or the log alone.
        let log_or_region = match region {
            Some(r) => format!("{log} {device} (the log device) or {r} SIZE"),
            None => format!("{log} {device} (the log device)"),
        };
        let region = region.unwrap_or("a log region");
        match self {
            Self::HpdaLogGiven => format!(
                "hpda keeps its write log on HDD-1 (past the parity) and HDD-2 (the mirror): leave out {log} and {region} ({size} SIZE sets how much of that room it uses; default {}M)",
                crate::hpda::LOG_BYTES_DEFAULT >> 20
            ),
            Self::HpdaNotWriteBack => format!(
                "hpda's log is write-back (random writes are acknowledged from it): {mode} journal does not apply"
            ),
            Self::DevicesAndRegion => format!("give {log} {device} or {region} SIZE, not both"),
            Self::SizeWithRegion => {
                format!("{size} sizes {log} files; {region} SIZE sets the region's size")
            }
            Self::ModeWithoutLog => format!("{mode} needs {log_or_region}"),
            Self::SizeWithoutLog => format!("{size} needs {log} {device} (the log device)"),
            Self::DeviceCount(n) => {
                format!("{log} takes one device or two (mirrored), not {n}")
            }
            Self::UnknownMode(m) => {
                format!("{mode} {m} is not known; use journal or write-back")
            }
            Self::TooSmall {
                what,
                bytes,
                need,
                members,
                chunk,
                mode: m,
            } => {
                let what = match what {
                    Sized::Device(device) => format!("log device {device} of {bytes} bytes"),
                    Sized::SizeOption => format!("{size} {bytes}"),
                    Sized::RegionOption => format!("{region} {bytes}"),
                };
                format!(
                    "{what} is too small: with {members} members of {chunk}-byte chunks a {} log needs at least {need} ({})",
                    m.name(),
                    m.why_min()
                )
            }
        }
    }
}

/// Check the options and say where the log goes (None: no log). `hpda`:
/// the layout keeps its own log.
pub fn choose(hpda: bool, o: &LogOptions) -> Result<Option<LogChoice>, LogConfigError> {
    let mode = LogMode::parse(o.mode.as_deref())?;
    if hpda {
        if o.devices > 0 || o.region.is_some() {
            return Err(LogConfigError::HpdaLogGiven);
        }
        if o.mode.is_some() && mode != LogMode::WriteBack {
            return Err(LogConfigError::HpdaNotWriteBack);
        }
        return Ok(Some(LogChoice {
            mode: LogMode::WriteBack,
            place: LogPlace::Hpda { requested: o.size },
        }));
    }
    match (o.devices, o.region) {
        (1.., Some(_)) => Err(LogConfigError::DevicesAndRegion),
        (0, Some(_)) if o.size.is_some() => Err(LogConfigError::SizeWithRegion),
        (0, Some(bytes)) => Ok(Some(LogChoice {
            mode,
            place: LogPlace::Region { bytes },
        })),
        (0, None) if o.mode.is_some() => Err(LogConfigError::ModeWithoutLog),
        (0, None) if o.size.is_some() => Err(LogConfigError::SizeWithoutLog),
        (0, None) => Ok(None),
        (count @ 1..=2, None) => Ok(Some(LogChoice {
            mode,
            place: LogPlace::Devices {
                count,
                size_bytes: o.size.unwrap_or(LOG_DEVICE_BYTES_DEFAULT),
            },
        })),
        (n, None) => Err(LogConfigError::DeviceCount(n)),
    }
}

/// What a log in `mode` must keep room for beside its records.
fn reserve(members: usize, layout: Option<&dyn Layout>, mode: LogMode) -> Reserve {
    match (mode, layout) {
        (LogMode::WriteBack, Some(l)) => Reserve::new(members, l.redundancy()),
        _ => Reserve::none(members),
    }
}

/// The smallest log (device or region, header included) for `layout` in
/// `mode`.
pub fn bytes_min(layout: &dyn Layout, mode: LogMode) -> u64 {
    let n = layout.members();
    log_bytes_min(n, layout.chunk_bytes(), &reserve(n, Some(layout), mode))
}

/// The smallest log any mode needs for `members` members of `chunk`-byte
/// chunks (what can be checked before the layout is built; `check_size`
/// checks the mode's own minimum once it is).
pub fn bytes_min_any(members: usize, chunk: u64) -> u64 {
    log_bytes_min(members, chunk, &reserve(members, None, LogMode::Journal))
}

/// Is a log of `bytes` (`what` it was given for) large enough for `layout`
/// in `mode`?
pub fn check_size(
    layout: &dyn Layout,
    mode: LogMode,
    what: Sized,
    bytes: u64,
) -> Result<(), LogConfigError> {
    let (members, chunk) = (layout.members(), layout.chunk_bytes());
    at_least(bytes_min(layout, mode), members, chunk, mode, what, bytes)
}

/// `check_size` before the layout is built: against `bytes_min_any`.
pub fn check_size_any(
    members: usize,
    chunk: u64,
    what: Sized,
    bytes: u64,
) -> Result<(), LogConfigError> {
    let need = bytes_min_any(members, chunk);
    at_least(need, members, chunk, LogMode::Journal, what, bytes)
}

/// `bytes` against `need`, or why it is too small.
fn at_least(
    need: u64,
    members: usize,
    chunk: u64,
    mode: LogMode,
    what: Sized,
    bytes: u64,
) -> Result<(), LogConfigError> {
    if bytes >= need {
        return Ok(());
    }
    Err(LogConfigError::TooSmall {
        what,
        bytes,
        need,
        members,
        chunk,
        mode,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn o(devices: usize, region: Option<u64>, size: Option<u64>, mode: Option<&str>) -> LogOptions {
        LogOptions {
            devices,
            region,
            size,
            mode: mode.map(str::to_string),
        }
    }

    #[test]
    fn every_combination_is_decided_here() {
        use LogConfigError::*;
        let wb = Some("write-back");
        assert_eq!(choose(false, &o(0, None, None, None)), Ok(None));
        assert_eq!(
            choose(false, &o(1, None, None, None)).unwrap().unwrap(),
            LogChoice {
                mode: LogMode::Journal,
                place: LogPlace::Devices {
                    count: 1,
                    size_bytes: LOG_DEVICE_BYTES_DEFAULT
                }
            }
        );
        assert_eq!(
            choose(false, &o(2, None, Some(8 << 20), wb))
                .unwrap()
                .unwrap(),
            LogChoice {
                mode: LogMode::WriteBack,
                place: LogPlace::Devices {
                    count: 2,
                    size_bytes: 8 << 20
                }
            }
        );
        assert_eq!(
            choose(false, &o(0, Some(4 << 20), None, wb))
                .unwrap()
                .unwrap()
                .place,
            LogPlace::Region { bytes: 4 << 20 }
        );
        assert_eq!(choose(false, &o(3, None, None, None)), Err(DeviceCount(3)));
        assert_eq!(
            choose(false, &o(1, Some(1), None, None)),
            Err(DevicesAndRegion)
        );
        assert_eq!(
            choose(false, &o(0, Some(1), Some(1), None)),
            Err(SizeWithRegion)
        );
        assert_eq!(choose(false, &o(0, None, None, wb)), Err(ModeWithoutLog));
        assert_eq!(
            choose(false, &o(0, None, Some(1), None)),
            Err(SizeWithoutLog)
        );
        assert_eq!(
            choose(false, &o(1, None, None, Some("fast"))),
            Err(UnknownMode("fast".into()))
        );
        // HPDA: its own write-back log, sized by the size option.
        assert_eq!(
            choose(true, &o(0, None, Some(1 << 30), None))
                .unwrap()
                .unwrap(),
            LogChoice {
                mode: LogMode::WriteBack,
                place: LogPlace::Hpda {
                    requested: Some(1 << 30)
                }
            }
        );
        assert_eq!(choose(true, &o(1, None, None, None)), Err(HpdaLogGiven));
        assert_eq!(choose(true, &o(0, Some(1), None, None)), Err(HpdaLogGiven));
        assert_eq!(
            choose(true, &o(0, None, None, Some("journal"))),
            Err(HpdaNotWriteBack)
        );
    }

    #[test]
    fn each_front_end_words_it_with_its_own_names() {
        let e = LogConfigError::ModeWithoutLog;
        assert_eq!(
            e.sentence(&CLI),
            "--log-mode needs --log PATH (the log device) or --log-region SIZE"
        );
        assert_eq!(
            e.sentence(&SIM),
            "log_mode needs log DEVICE (the log device)"
        );
    }

    #[test]
    fn a_write_back_log_needs_at_least_what_a_journal_does() {
        let layout = crate::build(&crate::LayoutSpec {
            kind: crate::LayoutKind::Raid5 {
                order: crate::layout::ParityOrder::LeftSymmetric,
            },
            chunk_bytes: 64 << 10,
            sizes: vec![64 << 20; 4],
            kinds: vec![],
        })
        .unwrap();
        let j = bytes_min(layout.as_ref(), LogMode::Journal);
        let w = bytes_min(layout.as_ref(), LogMode::WriteBack);
        assert!(w >= j, "write-back {w} vs journal {j}");
        assert_eq!(j, bytes_min_any(4, 64 << 10));
        assert!(check_size(layout.as_ref(), LogMode::WriteBack, Sized::SizeOption, w).is_ok());
        let e = check_size(
            layout.as_ref(),
            LogMode::WriteBack,
            Sized::Device("l0".into()),
            w - 1,
        )
        .unwrap_err();
        let s = e.sentence(&CLI);
        assert!(
            s.starts_with("log device l0 of ") && s.contains(&format!("at least {w}")),
            "{s}"
        );
    }
}
