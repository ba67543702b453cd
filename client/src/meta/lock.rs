//! File locks shared by every mount (sql/lock.sql): setlk, getlk, unlock_owner, cancel_lock_wait.
use super::{check_errno, Meta, Result};

/// A lock range as fcntl gives it: type (`F_RDLCK`, `F_WRLCK`, `F_UNLCK`),
/// first and last byte, and the holder's pid (for F_GETLK).
#[derive(Debug, Clone, PartialEq)]
pub struct LockRange {
    pub typ: i32,
    pub start: u64,
    pub end: u64,
    pub pid: u32,
}

/// Who locks: the kernel's lock owner within a mount's session.
#[derive(Debug, Clone, Copy)]
pub struct Locker {
    pub sid: i64,
    pub owner: u64,
}

impl Meta {
    /// Locks or unlocks `range` of `inode` for `who`; `Errno(EAGAIN)` while
    /// another owner holds a conflicting lock, `Errno(EDEADLK)` when `wait`
    /// (the caller will wait and call again) and waiting would deadlock.
    pub async fn setlk(
        &self,
        inode: u64,
        who: Locker,
        range: &LockRange,
        wait: bool,
    ) -> Result<()> {
        let row = self
            .call_one(
                "SELECT jfs.setlk($1, $2, $3, $4, $5, $6, $7, $8) AS errno",
                &[
                    &(inode as i64),
                    &who.sid,
                    &(who.owner as i64),
                    &range.typ,
                    &(range.start as i64),
                    &(range.end as i64),
                    &(range.pid as i32),
                    &wait,
                ],
            )
            .await?;
        check_errno(&row)
    }

    /// The first lock of another owner that conflicts with `range`
    /// (`typ` `F_UNLCK` when none does).
    pub async fn getlk(&self, inode: u64, who: Locker, range: &LockRange) -> Result<LockRange> {
        let row = self
            .call_one(
                "SELECT * FROM jfs.getlk($1, $2, $3, $4, $5, $6)",
                &[
                    &(inode as i64),
                    &who.sid,
                    &(who.owner as i64),
                    &range.typ,
                    &(range.start as i64),
                    &(range.end as i64),
                ],
            )
            .await?;
        Ok(LockRange {
            typ: row.try_get("ltype")?,
            start: row.try_get::<_, i64>("lstart")? as u64,
            end: row.try_get::<_, i64>("lend")? as u64,
            pid: row.try_get::<_, i32>("pid")? as u32,
        })
    }

    /// Drops every lock `who` holds on `inode`; returns how many ranges went.
    pub async fn unlock_owner(&self, inode: u64, who: Locker) -> Result<i32> {
        let row = self
            .call_one(
                "SELECT jfs.unlock_owner($1, $2, $3) AS n",
                &[&(inode as i64), &who.sid, &(who.owner as i64)],
            )
            .await?;
        Ok(row.try_get("n")?)
    }

    /// `who` stopped waiting for a lock of `inode` (its wait was interrupted).
    pub async fn cancel_lock_wait(&self, inode: u64, who: Locker) -> Result<()> {
        self.call(
            "SELECT jfs.cancel_lock_wait($1, $2, $3)",
            &[&(inode as i64), &who.sid, &(who.owner as i64)],
        )
        .await?;
        Ok(())
    }
}
