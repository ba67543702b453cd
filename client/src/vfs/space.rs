//! Space limits at write(): a write that would make a file longer than the
//! volume's capacity or a quota over it allows fails at once with ENOSPC or
//! EDQUOT, before it is buffered, so what was written before it is kept
//! (the commit checks again, exactly; only writers racing for the last
//! bytes can still be refused there).
use std::time::{Duration, Instant};

use super::handles::FileState;
use super::{errno, Vfs, VfsResult};

/// How long an answer about space limits is trusted before a growing write
/// asks again (a write past the answered length always asks again).
const SPACE_ANSWER_TTL: Duration = Duration::from_secs(1);

impl Vfs {
    /// Refuses a write to `inode` ending at `end` when the space limits over
    /// the file do not let it grow that far (the caller holds its state).
    pub(super) async fn check_growth(
        &self,
        inode: u64,
        state: &mut FileState,
        end: u64,
    ) -> VfsResult<()> {
        if end <= state.length || !self.space_limited().await? {
            return Ok(());
        }
        if let Some((at, limit)) = state.space_limit {
            if at.elapsed() < SPACE_ANSWER_TTL && limit.max_length.is_none_or(|max| end <= max) {
                return Ok(());
            }
        }
        let limit = self.meta.space_limit(inode).await.map_err(errno)?;
        state.space_limit = Some((Instant::now(), limit));
        match limit.max_length {
            Some(max) if end > max => {
                tracing::debug!("inode {inode}: a write to {end} refused, the limit is {max}");
                Err(limit.errno)
            }
            _ => Ok(()),
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
        let limited = self.meta.space_limited().await.map_err(errno)?;
        *self.space_limited.lock().unwrap() = Some((Instant::now(), limited));
        Ok(limited)
    }
}
