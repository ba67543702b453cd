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
use crate::meta::Statfs;
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
        if end <= state.length || !self.space_limited(inode).await? {
            return Ok(len);
        }
        if let Some((at, limit)) = state.space_limit {
            if at.elapsed() < SPACE_ANSWER_TTL && limit.max_length.is_none_or(|max| end <= max) {
                return Ok(len);
            }
        }
        let limit = self
            .ns
            .meta_of(inode)
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

    /// Whether the shard of `inode` has any space limit (asked at most once
    /// per [`SPACE_ANSWER_TTL`]): without one, writes need not ask.
    async fn space_limited(&self, inode: u64) -> VfsResult<bool> {
        let shard = self.ns.parts().of(inode).number;
        if let Some((at, limited)) = self.space_limited.lock().unwrap().get(&shard) {
            if at.elapsed() < SPACE_ANSWER_TTL {
                return Ok(*limited);
            }
        }
        let meta = self.ns.meta_of(inode);
        let limited = meta.space_limited().await.map_err(errno)?;
        (self.space_limited.lock().unwrap()).insert(shard, (Instant::now(), limited));
        Ok(limited)
    }
}

/// The whole volume's space and inodes from its root database's (`root`:
/// the capacity, if any, is the volume's) and its other shards' (each
/// counts what it holds): what is used is summed; a volume without a
/// capacity (whose databases show 1 PiB, doubled while use passes 80%:
/// sql/volume.sql `statfs`) shows room that doubles as theirs does.
pub fn statfs_over_shards(root: Statfs, shards: &[Statfs]) -> Statfs {
    const CAP: u64 = 1 << 62;
    const UNCAPPED: u64 = 1 << 50;
    let capped = !(root.total_space.is_power_of_two() && root.total_space >= UNCAPPED);
    let used_space = shards
        .iter()
        .fold(root.total_space - root.avail_space, |sum, s| {
            sum.saturating_add(s.total_space.saturating_sub(s.avail_space))
        });
    let used_inodes =
        (shards.iter()).fold(root.used_inodes, |sum, s| sum.saturating_add(s.used_inodes));
    let mut total_space = root.total_space;
    while !capped && total_space < CAP && (total_space as u128) * 8 < (used_space as u128) * 10 {
        total_space *= 2;
    }
    let mut room_inodes = root.used_inodes + root.avail_inodes;
    while room_inodes < CAP && (used_inodes as u128) * 10 > (room_inodes as u128) * 8 {
        room_inodes *= 2;
    }
    Statfs {
        total_space,
        avail_space: total_space.saturating_sub(used_space),
        used_inodes,
        avail_inodes: room_inodes.saturating_sub(used_inodes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fs(total: u64, avail: u64, used_inodes: u64, avail_inodes: u64) -> Statfs {
        Statfs {
            total_space: total,
            avail_space: avail,
            used_inodes,
            avail_inodes,
        }
    }

    #[test]
    fn a_volume_over_shards_shows_what_every_shard_uses() {
        let pib = 1u64 << 50;
        let root = fs(pib, pib - 100, 3, 10_000_000);
        let shards = [
            fs(pib, pib - 50, 7, 10_000_000),
            fs(pib, pib, 0, 10_000_000),
        ];
        let all = statfs_over_shards(root, &shards);
        assert_eq!(all.total_space, pib);
        assert_eq!(all.avail_space, pib - 150);
        assert_eq!(all.used_inodes, 10);
        assert_eq!(all.used_inodes + all.avail_inodes, 10_000_003);
        // together past 80% of the room shown: it doubles, as one database's does
        let big = fs(pib, pib / 2, 0, 10);
        let all = statfs_over_shards(big, &[fs(pib, pib / 2, 9, 1)]);
        assert_eq!(all.total_space, 2 * pib);
        assert_eq!(all.avail_space, pib);
        assert!(all.used_inodes * 10 <= (all.used_inodes + all.avail_inodes) * 8);
        // a capacity set with jfs config is the volume's: never doubled
        let capped = statfs_over_shards(fs(1000, 400, 1, 9), &[fs(pib, pib - 500, 1, 9)]);
        assert_eq!((capped.total_space, capped.avail_space), (1000, 0));
        // no shards: the root's own answer
        let alone = statfs_over_shards(root, &[]);
        assert_eq!((alone.total_space, alone.avail_space), (pib, pib - 100));
    }
}
