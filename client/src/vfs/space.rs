//! Space limits at write(): a write past the largest file
//! ([`MAX_FILE_SIZE`](crate::volume::layout::MAX_FILE_SIZE)) fails with EFBIG and one across it is short; a
//! write that would make a file longer than the
//! volume's capacity or a quota over it allows is cut at the limit (a short
//! write, as a local file system does) or, at the limit, fails at once with
//! ENOSPC or EDQUOT, before anything is buffered, so what was written before
//! it is kept (the commit checks again, exactly; only writers racing for the
//! last bytes can still be refused there).
use std::time::{Duration, Instant};

use super::handles::FileState;
use super::{errno, Vfs, VfsResult};
use crate::volume::layout::fits_in_file;

/// How long an answer about space limits is trusted before a growing write
/// asks again (a write past the answered length always asks again).
const SPACE_ANSWER_TTL: Duration = Duration::from_secs(1);

impl Vfs {
    /// How many of the `len` bytes written at `offset` of `inode` the
    /// largest file size and the space limits over the file let in: all, the part below the limit, or none
    /// (the errno); the caller holds the file's state.
    pub(super) async fn writable_len(
        &self,
        inode: u64,
        state: &mut FileState,
        offset: u64,
        len: usize,
    ) -> VfsResult<usize> {
        // past the largest file, EFBIG; across it, a short write
        let len = fits_in_file(offset, len).ok_or(libc::EFBIG)?;
        let end = offset + len as u64;
        if end <= state.length || !self.space_limited().await? {
            return Ok(len);
        }
        if let Some((at, limit)) = state.space_limit {
            if at.elapsed() < SPACE_ANSWER_TTL && limit.max_length.is_none_or(|max| end <= max) {
                return Ok(len);
            }
        }
        let limit = self
            .ns
            .meta_of_mount()
            .space_limit(inode)
            .await
            .map_err(errno)?;
        state.space_limit = Some((Instant::now(), limit));
        let Some(max) = limit.max_length else {
            return Ok(len);
        };
        // what the file already holds may be rewritten whatever the limit
        let allowed_end = max.max(state.length);
        if end <= allowed_end {
            Ok(len)
        } else if allowed_end > offset {
            Ok((allowed_end - offset) as usize)
        } else {
            tracing::debug!("inode {inode}: a write to {end} refused, the limit is {max}");
            Err(limit.errno)
        }
    }

    /// Whether the volume has any space limit (asked at most once per
    /// [`SPACE_ANSWER_TTL`]): without one, writes need not ask.
    async fn space_limited(&self) -> VfsResult<bool> {
        if let Some((at, limited)) = *self.space_limited.lock().unwrap() {
            if at.elapsed() < SPACE_ANSWER_TTL {
                return Ok(limited);
            }
        }
        let limited = self
            .ns
            .meta_of_mount()
            .space_limited()
            .await
            .map_err(errno)?;
        *self.space_limited.lock().unwrap() = Some((Instant::now(), limited));
        Ok(limited)
    }
}
