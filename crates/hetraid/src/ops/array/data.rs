//! `read` and `write` of array bytes.

#[allow(unused_imports)]
use super::*;
pub use crate::cli::array::data::*;
use hetraid_engine::error::IntoFailure;

pub(crate) const IO_STEP: usize = 4 << 20;

impl DataCmd {
    pub fn write(&self) -> Result<(), hetraid_core::Failure> {
        let a = assemble(&self.members, self.degraded)?;
        let cap = a.capacity();
        let mut stdin = std::io::stdin().lock();
        let mut off = self.offset;
        let limit = self.length.unwrap_or(u64::MAX);
        let mut done = 0u64;
        if off > cap {
            return Err(
                format!("offset {off} is beyond the end of the array ({cap} bytes)").into(),
            );
        }
        let mut buf = vec![0u8; IO_STEP];
        while done < limit {
            let want = (limit - done).min(IO_STEP as u64) as usize;
            let mut got = 0;
            while got < want {
                match stdin.read(&mut buf[got..want]) {
                    Ok(0) => break,
                    Ok(k) => got += k,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(format!("reading standard input: {e}").into()),
                }
            }
            if got == 0 {
                break;
            }
            if off + got as u64 > cap {
                return Err(format!(
                    "the input reaches beyond the end of the array ({cap} bytes) at offset {}; {} bytes were written before it",
                    off + got as u64,
                    done
                ).into());
            }
            a.write(off, &buf[..got]).map_err(IntoFailure::failure)?;
            off += got as u64;
            done += got as u64;
        }
        a.close().map_err(IntoFailure::failure)?;
        print_warnings(&a);
        eprintln!("wrote {done} bytes at offset {}", self.offset);
        Ok(())
    }

    pub fn read(&self) -> Result<(), hetraid_core::Failure> {
        let len = self.length.ok_or("read needs --length")?;
        if self.degraded {
            return Err("--degraded applies to commands that write; read reads any array it can and never records a member missing".into());
        }
        // Writable members let a read heal what it finds (a bad block is
        // rewritten from the redundancy); members the user may only read are
        // opened read-only, and nothing is written. So are they when some
        // member was not given: a read never records one missing.
        let writable = member_paths(&self.members)?
            .iter()
            .all(|p| std::fs::OpenOptions::new().write(true).open(p).is_ok())
            && Array::check_given(&open_all_read_only(&self.members)?, false).is_ok();
        let a = assemble_with(
            &self.members,
            AssembleOptions {
                force: false,
                access: if writable {
                    Access::ReadWrite
                } else {
                    Access::ReadOnly
                },
                degraded: !writable,
            },
        )?;
        let cap = a.capacity();
        if self.offset.checked_add(len).is_none_or(|e| e > cap) {
            return Err(format!(
                "{}+{len} reaches beyond the end of the array ({cap} bytes)",
                self.offset
            )
            .into());
        }
        let mut out = std::io::stdout().lock();
        let mut off = self.offset;
        let end = self.offset + len;
        let mut buf = vec![0u8; IO_STEP];
        while off < end {
            let n = ((end - off) as usize).min(IO_STEP);
            a.read(off, &mut buf[..n]).map_err(IntoFailure::failure)?;
            out.write_all(&buf[..n])
                .map_err(|e| format!("writing standard output: {e}"))?;
            off += n as u64;
        }
        out.flush().map_err(IntoFailure::failure)?;
        a.keep_uncommitted();
        a.close().map_err(IntoFailure::failure)?;
        print_warnings(&a);
        Ok(())
    }
}
