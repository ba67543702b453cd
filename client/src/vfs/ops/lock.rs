//! File locks shared by every mount: fcntl record locks and flock locks
//! (which the kernel sends as whole-file records of the open file), kept in
//! PostgreSQL (sql/lock.sql) so that a lock taken on one machine holds
//! against every other. A lock is also a cache barrier, as applications
//! that share files through locks (SQLite, checkpoint writers) expect:
//! before a lock changes, this mount's pending writes of the file are
//! committed (the next holder reads them); once a lock is taken, every
//! change other mounts committed before is applied here (names, attributes)
//! and what this mount and its kernel cached of the file's data is dropped
//! (the holder sees what the previous one did).
use std::time::Duration;

use crate::meta::{LockRange, Locker, MetaError};
use crate::vfs::{errno, Forget, Vfs, VfsResult};

/// The first pause of a blocked lock before it asks again, and the longest.
const WAIT_FIRST: Duration = Duration::from_millis(2);
const WAIT_MAX: Duration = Duration::from_millis(100);

impl Vfs {
    pub(in crate::vfs) fn locker(&self, owner: u64) -> Locker {
        Locker {
            sid: self.sid(),
            owner,
        }
    }

    /// fcntl(F_GETLK): the first conflicting lock of another owner (on any
    /// mount), or `F_UNLCK`.
    pub async fn getlk(&self, inode: u64, owner: u64, range: &LockRange) -> VfsResult<LockRange> {
        self.ns
            .getlk(inode, self.locker(owner), range)
            .await
            .map_err(errno)
    }

    /// fcntl(F_SETLK/F_SETLKW, F_OFD_SETLK/F_OFD_SETLKW), flock(2) through
    /// handle `fh`: takes, changes or drops a lock. With `wait`, a lock
    /// held elsewhere is waited for (asking again with growing pauses); the
    /// wait ends with EINTR when thread `tid`, the caller, has a signal to
    /// handle or is gone, and with EDEADLK when the lock's holders wait,
    /// through others, for this owner.
    pub async fn setlk(
        &self,
        inode: u64,
        fh: u64,
        owner: u64,
        range: &LockRange,
        wait: bool,
        tid: u32,
    ) -> VfsResult<()> {
        let file = self.open_file(inode).ok_or(libc::EBADF)?;
        {
            // what was written under the lock reaches the next holder
            let mut state = file.state.lock().await;
            if range.typ == libc::F_UNLCK && state.locks_lost {
                return Ok(()); // nothing is left to unlock
            }
            state.usable()?;
            self.flush_locked(inode, &mut state).await?;
        }
        let mut pause = WAIT_FIRST;
        loop {
            match self.ns.setlk(inode, self.locker(owner), range, wait).await {
                Ok(()) => break,
                Err(MetaError::Errno(libc::EAGAIN)) if wait => {
                    if interrupted(tid) {
                        let _ = self.ns.cancel_lock_wait(inode, self.locker(owner)).await;
                        return Err(libc::EINTR);
                    }
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(WAIT_MAX);
                }
                Err(e) => return Err(errno(e)),
            }
        }
        if range.typ != libc::F_UNLCK {
            // what other mounts changed before (a file the last holder
            // removed, say) shows from now on
            self.ns.catch_up_with_log().await;
            {
                let mut state = file.state.lock().await;
                state.locked = true;
                state.lock_handles.insert(owner, fh);
                self.lock_barrier(inode, &mut state).await?;
            }
            // the kernel drops its pages of the file: not under the file's
            // lock, which a read holding one of those pages waits for
            self.tell_kernel(Forget::Data { inode });
        }
        Ok(())
    }

    /// This mount's session was ended by another mount (it was cut off from
    /// the database for longer than the session timeout) and a new one
    /// registered, or a crash of the database may have erased locks (`why`):
    /// the locks of files open here are gone (their handles get EIO until
    /// closed), and the files open here are held again: those of shard
    /// `part` (the session is the mount's on that shard's database).
    pub async fn session_lost(&self, part: &crate::ns::parts::Part, why: &str) {
        let files: Vec<_> = self.files.lock().unwrap().values().cloned().collect();
        let parts = self.ns.parts();
        for file in files
            .iter()
            .filter(|f| parts.of(f.inode).number == part.number)
        {
            let mut state = file.state.lock().await;
            if state.locked && !state.locks_lost {
                state.locks_lost = true;
                tracing::error!(
                    "inode {}: its locks {why}; its open handles get EIO until the file is closed",
                    file.inode
                );
            }
        }
        self.ns.hold_open_files(part).await;
    }

    /// A close by lock owner `owner` (flush, or the last close of an open
    /// file that was flock'd): its locks of the file go, on every mount.
    pub async fn unlock_owner(&self, inode: u64, owner: u64) -> VfsResult<()> {
        let Some(file) = self.open_file(inode) else {
            return Ok(());
        };
        if !file.state.lock().await.locked {
            // never locked through this mount while open: nothing to drop
            return Ok(());
        }
        self.ns
            .unlock_owner(inode, self.locker(owner))
            .await
            .map(|_| ())
            .map_err(errno)
    }

    /// A lock was taken: the file's data and length are read afresh here
    /// (the caller then tells the kernel to drop its pages).
    async fn lock_barrier(
        &self,
        inode: u64,
        state: &mut crate::vfs::handles::FileState,
    ) -> VfsResult<()> {
        self.ns.attrs.forget(inode);
        if state.writer.is_empty() {
            let attr = self.ns.getattr_now(inode).await.map_err(errno)?;
            state.length = attr.length;
        }
        // cached slice lists go
        state.changed();
        Ok(())
    }
}

/// Whether thread `tid` has an unblocked signal pending, or is gone: the
/// kernel would interrupt its wait (fuser passes no FUSE_INTERRUPT on).
fn interrupted(tid: u32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{tid}/status")) else {
        return true;
    };
    let mask = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            .unwrap_or(0)
    };
    (mask("SigPnd:") | mask("ShdPnd:")) & !mask("SigBlk:") != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_thread_without_signals_is_not_interrupted_and_a_gone_one_is() {
        assert!(!interrupted(std::process::id()));
        assert!(interrupted(u32::MAX));
    }
}
