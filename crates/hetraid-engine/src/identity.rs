//! What a device is, read from its head without taking its lock: the one
//! probe every command asks before it trusts, joins or overwrites a device
//! (is it a member of this array or another, a write log device, blank, or
//! someone's data?).

use crate::format::{Superblock, DATA_OFFSET, SB_SIZE};
use crate::log::LogHeader;
use crate::member::{AlignedBuf, Member};
use std::io;

/// What a device's head holds.
#[derive(Debug, Clone)]
pub enum Identity {
    /// A member (or a hot spare) of an array: its superblock.
    Member(Box<Superblock>),
    /// A write log device of an array: its newest header.
    LogDevice(LogHeader),
    /// Nothing of hetraid's, and its first MiB is zeroes.
    Blank,
    /// Nothing of hetraid's, but data (a filesystem, a partition table...).
    Data,
}

impl Identity {
    /// The device `m` (through its `Member`).
    pub fn of(m: &dyn Member) -> io::Result<Self> {
        Self::read(m.len(), &|buf, off| m.read_at(buf, off))
    }

    /// The device or file at `path`, opened read-only and unlocked (a
    /// served array's members too).
    pub fn of_path(path: &std::path::Path) -> io::Result<Self> {
        use std::os::unix::fs::FileExt;
        let f = std::fs::File::open(path)?;
        let len = std::io::Seek::seek(&mut &f, std::io::SeekFrom::End(0))?;
        Self::read(len, &|buf, off| f.read_exact_at(buf, off))
    }

    /// A superblock, else a log header, else the first MiB's bytes; the
    /// second read only when the first finds nothing.
    fn read(len: u64, read_at: &dyn Fn(&mut [u8], u64) -> io::Result<()>) -> io::Result<Self> {
        let first = (SB_SIZE as u64).max(2 * hetraid_core::units::PAGE).min(len) as usize;
        let mut b = AlignedBuf::zeroed(first);
        read_at(&mut b, 0)?;
        if b.len() >= SB_SIZE {
            if let Ok(sb) = Superblock::decode(&b[..SB_SIZE]) {
                return Ok(Self::Member(Box::new(sb)));
            }
        }
        if let Some(h) = crate::log::header_in(&b, len) {
            return Ok(Self::LogDevice(h));
        }
        let head = len.min(DATA_OFFSET) as usize;
        let mut rest = AlignedBuf::zeroed(head);
        read_at(&mut rest, 0)?;
        Ok(if rest.iter().all(|&x| x == 0) {
            Self::Blank
        } else {
            Self::Data
        })
    }

    /// The array the device belongs to (a member's or a log device's).
    pub fn array_uuid(&self) -> Option<String> {
        match self {
            Self::Member(sb) => Some(sb.uuid_string()),
            Self::LogDevice(h) => Some(h.uuid_string()),
            Self::Blank | Self::Data => None,
        }
    }

    pub fn superblock(&self) -> Option<&Superblock> {
        match self {
            Self::Member(sb) => Some(sb),
            _ => None,
        }
    }

    /// What it is, in words for a refusal ("belongs to array U (slot 3)").
    pub fn describe(&self) -> String {
        match self {
            Self::Member(sb) => {
                format!("belongs to array {} (slot {})", sb.uuid_string(), sb.member)
            }
            Self::LogDevice(h) => format!("holds the write log of array {}", h.uuid_string()),
            Self::Blank => "is blank".into(),
            Self::Data => {
                "is not empty (its first MiB holds data: a filesystem, a partition table, a file?)"
                    .into()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::array::{Array, CreateOptions, LogSpec};
    use crate::format::{LayoutOptions, LogMode};
    use crate::member::FaultMember;
    use std::sync::Arc;

    fn dev(name: &str, len: u64) -> Arc<dyn Member> {
        Arc::new(FaultMember::new(name, len, 1))
    }

    #[test]
    fn members_log_devices_blank_and_data_are_told_apart() {
        let members: Vec<Arc<dyn Member>> =
            (0..3).map(|i| dev(&format!("m{i}"), 4 << 20)).collect();
        let log = dev("log", 2 << 20);
        let a = Array::create(
            members.clone(),
            &CreateOptions {
                layout: LayoutOptions {
                    name: "raid5".into(),
                    ..Default::default()
                },
                chunk_bytes: 65536,
                policy: hetraid_core::WritePolicy::Md,
                kinds: vec![],
                assume_clean: true,
                force: false,
                checksums: false,
                read_policy: None,
                log: Some(LogSpec {
                    devices: vec![log.clone()],
                    kinds: vec![],
                    mode: LogMode::Journal,
                    region: None,
                }),
            },
        )
        .unwrap();
        let uuid = a.superblock().uuid_string();
        a.close().unwrap();
        let m = Identity::of(members[1].as_ref()).unwrap();
        assert_eq!(m.superblock().map(|s| s.member), Some(1));
        assert_eq!(m.array_uuid().as_deref(), Some(uuid.as_str()));
        assert!(m.describe().contains("(slot 1)"), "{}", m.describe());
        let l = Identity::of(log.as_ref()).unwrap();
        assert!(matches!(l, Identity::LogDevice(_)), "{l:?}");
        assert_eq!(l.array_uuid().as_deref(), Some(uuid.as_str()));
        let blank = dev("b", 2 << 20);
        assert!(matches!(
            Identity::of(blank.as_ref()).unwrap(),
            Identity::Blank
        ));
        // One byte of data deep in the first MiB: someone's data.
        blank.write_at(&[7], 700 << 10).unwrap();
        assert!(matches!(
            Identity::of(blank.as_ref()).unwrap(),
            Identity::Data
        ));
        // Past the first MiB it is not looked at; a device shorter than a
        // superblock is read as far as it goes.
        let tiny = dev("t", 4096);
        assert!(matches!(
            Identity::of(tiny.as_ref()).unwrap(),
            Identity::Blank
        ));
    }

    #[test]
    fn a_path_is_read_without_its_lock() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x");
        std::fs::write(&p, vec![0u8; 3 << 20]).unwrap();
        assert!(matches!(Identity::of_path(&p).unwrap(), Identity::Blank));
        std::fs::write(&p, b"#!/bin/sh\n").unwrap();
        assert!(matches!(Identity::of_path(&p).unwrap(), Identity::Data));
        assert!(Identity::of_path(&d.path().join("nope")).is_err());
    }
}
