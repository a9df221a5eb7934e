//! CRC-32C (Castagnoli), the block checksum of hetraid members.
//!
//! Why our own kernel next to the `crc32c` crate: that crate runs the SSE 4.2
//! `crc32` instruction three streams wide but joins the streams with table
//! lookups every 256 bytes, about 280 ns per 4 KiB block on our machines,
//! a sixth of a 4 KiB read from a fast member. [`sse42`] joins them once per
//! 4 KiB with a carry-less multiply, as ISA-L's `crc32_iscsi` does (measured
//! against it by `scripts/bench-parity.sh`). Pure PCLMULQDQ folding (Intel's
//! "Fast CRC Computation for Generic Polynomials") was tried and measured at
//! half the crate's speed on AMD Zen 3, where `pclmulqdq` issues every other
//! cycle. The crate stays as the fallback for other CPUs.
//!
//! * [`crc32c`] / [`crc32c_append`]: the checksum, the same values as the
//!   `crc32c` crate (the tests check both kernels against a bitwise reference).
//! * [`constants`]: the join constants, computed at compile time from the
//!   polynomial rather than copied, so they cannot be mistyped.

#[cfg(target_arch = "x86_64")]
pub mod avx512;
pub mod constants;
pub mod reference;
#[cfg(target_arch = "x86_64")]
pub mod sse42;
#[cfg(target_arch = "x86_64")]
pub mod vpclmul;

/// CRC-32C of `data`.
pub fn crc32c(data: &[u8]) -> u32 {
    crc32c_append(0, data)
}

/// CRC-32C of the bytes behind `crc` followed by `data` (`crc` is the finished
/// CRC-32C of what came before, 0 for nothing).
pub fn crc32c_append(crc: u32, data: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        if data.len() >= 512 && avx512::detected() {
            // SAFETY: the CPU has what the kernel needs (checked just above).
            return unsafe { avx512::append(crc, data) };
        }
        if data.len() >= 4096 && vpclmul::detected() {
            // SAFETY: the CPU has what the kernel needs (checked just above).
            return unsafe { vpclmul::append(crc, data) };
        }
        if sse42::detected() {
            // SAFETY: the CPU has SSE 4.2 and PCLMULQDQ (checked just above).
            return unsafe { sse42::append(crc, data) };
        }
    }
    ::crc32c::crc32c_append(crc, data)
}

/// Name of the kernel [`crc32c`] uses for long inputs on this CPU.
pub fn kernel_name() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    {
        if avx512::detected() {
            return "avx512";
        }
        if vpclmul::detected() {
            return "vpclmul";
        }
        if sse42::detected() {
            return "sse42";
        }
    }
    "crc32c-crate"
}
