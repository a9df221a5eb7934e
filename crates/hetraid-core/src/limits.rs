//! The sizes procedures run in, and the bounds they keep: decided here, once,
//! so the engine, the simulator and the command line take the same numbers
//! (issue 38: they lived as constants in each).

/// Read errors a member may return before it is failed (MD's
/// `max_read_errors`); each one below it is corrected by rewriting the data.
pub const MAX_READ_ERRORS: u32 = 20;

/// Chunk moves of a grow or shrink per batch at most: one superblock update
/// records each batch, so a crash loses no more than one batch's progress.
pub const CHANGE_BATCH_MOVES_MAX: usize = 64;

/// Batches of a change run between two assemblies of a served array: one, so
/// client requests wait at most one batch.
pub const SERVED_BATCHES_PER_SWAP: u64 = 1;

/// Batches of an offline grow or shrink between two assemblies: few enough
/// that `status` from another shell sees progress, many enough that the
/// assemblies cost little. With speed limits given, the served rule applies
/// (the pacer waits between batches).
pub const OFFLINE_BATCHES_PER_SWAP: u64 = 32;

/// Bytes of new rows a restripe moves per window (one backup and one
/// superblock update each).
pub const RESTRIPE_WINDOW_BYTES: u64 = 8 << 20;

/// Rows of `members` chunks of `chunk` bytes in one restripe window (at least
/// one).
pub fn restripe_window_rows(chunk: u64, members: usize) -> u64 {
    (RESTRIPE_WINDOW_BYTES / (chunk * members as u64).max(1)).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restripe_window_is_about_8_mib_of_rows_and_never_empty() {
        assert_eq!(restripe_window_rows(64 << 10, 4), 32);
        assert_eq!(restripe_window_rows(16 << 20, 4), 1);
    }
}
