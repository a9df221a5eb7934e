//! How a filesystem on the array lines up with its stripes: mkfs's
//! stride and stripe width (ext4) or stripe unit and width (xfs), from the
//! chunk and the data chunks of a full stripe. A filesystem that writes
//! whole stripes spares the array its read-modify-writes; through NBD and a
//! loop device the kernel reports no optimal I/O size, so mkfs must be told.

use serde::{Deserialize, Serialize};

/// Bytes of a filesystem block the options assume (ext4's and xfs's default).
const FS_BLOCK_BYTES: u64 = 4096;

/// The array's stripe geometry as mkfs takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FsAlignment {
    pub chunk_bytes: u64,
    /// Data chunks in a full stripe (parity and copies excluded).
    pub data_chunks: usize,
}

impl FsAlignment {
    /// `mkfs.ext4`'s options: `-E stride=` (chunk in blocks) and
    /// `stripe_width=` (a full stripe's data, in blocks).
    pub fn ext4(&self) -> String {
        let stride = (self.chunk_bytes / FS_BLOCK_BYTES).max(1);
        format!(
            "-b {FS_BLOCK_BYTES} -E stride={stride},stripe_width={}",
            stride * self.data_chunks.max(1) as u64
        )
    }

    /// `mkfs.xfs`'s options: `-d su=` (the chunk) and `sw=` (data chunks).
    pub fn xfs(&self) -> String {
        format!(
            "-d su={}k,sw={}",
            self.chunk_bytes / 1024,
            self.data_chunks.max(1)
        )
    }

    /// The options for `fs` (ext4, ext3, ext2 or xfs).
    pub fn options(&self, fs: &str) -> Result<String, String> {
        match fs {
            "ext4" | "ext3" | "ext2" => Ok(self.ext4()),
            "xfs" => Ok(self.xfs()),
            _ => Err(format!(
                "--mkfs {fs}: give ext4 or xfs (btrfs takes no stripe geometry)"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raid5_of_five_with_64k_chunks() {
        let a = FsAlignment {
            chunk_bytes: 64 << 10,
            data_chunks: 4,
        };
        assert_eq!(a.ext4(), "-b 4096 -E stride=16,stripe_width=64");
        assert_eq!(a.xfs(), "-d su=64k,sw=4");
        assert_eq!(a.options("ext3").unwrap(), a.ext4());
        assert!(a.options("btrfs").unwrap_err().contains("ext4 or xfs"));
    }
}
