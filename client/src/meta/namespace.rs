//! Namespace procedures: lookup, getattr, mknod, symlink, readlink, link, unlink, rmdir, rename, readdir.
use super::call::first_row;
use super::journal::Redo;
use super::{
    attr_from_row, check_errno, Attr, Epoch, Meta, MetaError, NodeType, Result, MAX_ANSWERS_LOST,
};

/// The bits of `jfs.setattr`'s mask, JuiceFS's values (`sql/setattr.sql`).
pub mod set_mask {
    pub const MODE: i32 = 1;
    pub const UID: i32 = 2;
    pub const GID: i32 = 4;
    pub const SIZE: i32 = 8;
    pub const ATIME: i32 = 16;
    pub const MTIME: i32 = 32;
    pub const ATIME_NOW: i32 = 128;
    pub const MTIME_NOW: i32 = 256;
}

/// A time to set: a given one (ns since the epoch) or the database's now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeSet {
    At(i64),
    Now,
}

/// What a setattr changes; `None` leaves an attribute as it is.
#[derive(Debug, Clone, Copy, Default)]
pub struct SetAttr {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub length: Option<u64>,
    pub atime: Option<TimeSet>,
    pub mtime: Option<TimeSet>,
}

impl SetAttr {
    /// The change of a file's length only (truncate, fallocate).
    pub fn length(length: u64) -> SetAttr {
        SetAttr {
            length: Some(length),
            ..SetAttr::default()
        }
    }

    /// The change of the permission bits only.
    pub fn mode(mode: u32) -> SetAttr {
        SetAttr {
            mode: Some(mode),
            ..SetAttr::default()
        }
    }

    /// `jfs.setattr`'s mask for this change.
    pub fn mask(&self) -> i32 {
        let bit = |present: bool, bit: i32| if present { bit } else { 0 };
        let time = |t: Option<TimeSet>, at: i32, now: i32| match t {
            Some(TimeSet::At(_)) => at,
            Some(TimeSet::Now) => now,
            None => 0,
        };
        bit(self.mode.is_some(), set_mask::MODE)
            | bit(self.uid.is_some(), set_mask::UID)
            | bit(self.gid.is_some(), set_mask::GID)
            | bit(self.length.is_some(), set_mask::SIZE)
            | time(self.atime, set_mask::ATIME, set_mask::ATIME_NOW)
            | time(self.mtime, set_mask::MTIME, set_mask::MTIME_NOW)
    }
}

/// The given time of a [`TimeSet`] (`None` for now: the procedure takes it).
pub(super) fn given_time(t: Option<TimeSet>) -> Option<i64> {
    match t {
        Some(TimeSet::At(ns)) => Some(ns),
        _ => None,
    }
}

/// A node to make (`jfs.mknod`).
#[derive(Debug, Clone, Copy)]
pub struct NewNode<'a> {
    pub kind: NodeType,
    /// Permission bits (07777); the type comes from `kind`.
    pub mode: u32,
    /// Applied unless the parent has a default ACL (which masks instead).
    pub umask: u32,
    pub uid: u32,
    pub gid: u32,
    /// Device number of a block or character device.
    pub rdev: u32,
    /// A symlink's target.
    pub target: Option<&'a [u8]>,
}

/// One directory entry of a readdir(plus) page.
#[derive(Debug, Clone)]
pub struct DirEntry {
    pub cookie: u64,
    pub name: Vec<u8>,
    pub attr: Attr,
    /// Whether the node has extended attributes.
    pub xattrs: bool,
    /// The node is on another shard (a shard root): `attr` holds only its
    /// inode and type, for the caller to complete from that shard.
    pub elsewhere: bool,
}

/// What a rename moved and replaced.
#[derive(Debug, Clone)]
pub struct RenameResult {
    /// The inode moved.
    pub moved: u64,
    /// The replaced (or exchanged) inode, 0 if none, with its nlink after the call.
    pub replaced: u64,
    pub replaced_nlink: u32,
}

impl Meta {
    /// The entry `name` of `parent`, from the primary (what settles whether
    /// a change whose answer was lost happened).
    pub async fn lookup(&self, parent: u64, name: &[u8]) -> Result<Attr> {
        let row = self
            .call_one(
                "SELECT * FROM jfs.lookup($1, $2)",
                &[&(parent as i64), &name],
            )
            .await?;
        attr_from_row(&row)
    }

    /// [`Meta::lookup`] for names this mount keeps: from the standby that
    /// serves reads when it has caught up (see `replica`).
    pub async fn lookup_replicable(
        &self,
        parent: u64,
        name: &[u8],
    ) -> Result<std::result::Result<Attr, u64>> {
        let rows = self
            .call_replicable(
                "SELECT * FROM jfs.lookup($1, $2)",
                &[&(parent as i64), &name],
            )
            .await?;
        super::shard::placed_from_row(first_row(&rows)?)
    }

    /// Entry `name` of `parent` and up to `limit` entries after it in
    /// listing order and in name order, each with its attributes
    /// (`jfs.lookup_ahead`; from the standby that serves reads when it has
    /// caught up). Empty when `name` is not there.
    pub async fn lookup_ahead(
        &self,
        parent: u64,
        name: &[u8],
        limit: i32,
    ) -> Result<Vec<(Vec<u8>, Attr)>> {
        let rows = self
            .call_replicable(
                "SELECT 0 AS errno, * FROM jfs.lookup_ahead($1, $2, $3)",
                &[&(parent as i64), &name, &limit],
            )
            .await?;
        rows.iter()
            .map(|row| Ok((row.try_get("name")?, attr_from_row(row)?)))
            .collect()
    }

    /// Node `inode`'s attributes, from the primary (what opening a file
    /// reads: another mount's close is seen at once).
    pub async fn getattr(&self, inode: u64) -> Result<Attr> {
        let row = self
            .call_one("SELECT * FROM jfs.getattr($1)", &[&(inode as i64)])
            .await?;
        attr_from_row(&row)
    }

    /// [`Meta::getattr`] for copies this mount keeps: from the standby that
    /// serves reads when it has caught up (see `replica`).
    pub async fn getattr_replicable(&self, inode: u64) -> Result<Attr> {
        let rows = self
            .call_replicable("SELECT * FROM jfs.getattr($1)", &[&(inode as i64)])
            .await?;
        attr_from_row(first_row(&rows)?)
    }

    /// Creates node `node` as entry `name` of `parent`, with an inode id
    /// from a range this client reserved. When the answer was lost, the
    /// entry tells what happened: the id is this call's alone, so the name
    /// pointing at it means it was made; a name that is not there means it
    /// was not, and it is made now.
    pub async fn mknod(
        &self,
        parent: u64,
        name: &[u8],
        node: &NewNode<'_>,
        inode: u64,
    ) -> Result<Attr> {
        let mut sent = self.mknod_once(parent, name, node, inode).await;
        let mut answers_lost = 0;
        let made = loop {
            let e = match sent {
                Err(e) if e.may_have_committed() && answers_lost < MAX_ANSWERS_LOST => e,
                other => break other,
            };
            // (a resend's answer may be lost too: the server went away again)
            answers_lost += 1;
            let asked_in = self.epoch();
            match self.lookup(parent, name).await {
                Ok(attr) if attr.inode == inode => {
                    tracing::warn!(
                        "mknod of inode {inode}: the answer was lost ({e}); it was made"
                    );
                    break Ok((attr, asked_in));
                }
                Err(MetaError::Errno(libc::ENOENT)) => {
                    tracing::warn!("mknod of inode {inode}: the answer was lost ({e}); made again");
                    sent = self.mknod_once(parent, name, node, inode).await;
                }
                found => {
                    tracing::error!(
                        "mknod of inode {inode}: the answer was lost ({e}), and the name says \
                         neither made nor missing: {:?}",
                        found.map(|a| a.inode)
                    );
                    break Err(e);
                }
            }
        };
        let (attr, sent_in) = made?;
        self.journal_redo(sent_in, Redo::mknod(parent, name, node, inode));
        Ok(attr)
    }

    /// One `jfs.mknod` call (not journaled): the node and the epoch it was
    /// sent in.
    pub(super) async fn mknod_once(
        &self,
        parent: u64,
        name: &[u8],
        node: &NewNode<'_>,
        inode: u64,
    ) -> Result<(Attr, Epoch)> {
        let (mut rows, sent_in) = self
            .call_journaled_by_caller(
                "SELECT * FROM jfs.mknod($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
                &[
                    &(parent as i64),
                    &name,
                    &(node.kind as i32),
                    &(node.mode as i32),
                    &(node.uid as i64),
                    &(node.gid as i64),
                    &(node.rdev as i64),
                    &node.target,
                    &(inode as i64),
                    &(node.umask as i32 & 0o7777),
                ],
            )
            .await?;
        let row = rows.pop().ok_or(MetaError::Errno(libc::EIO))?;
        Ok((attr_from_row(&row)?, sent_in))
    }

    pub async fn readlink(&self, inode: u64) -> Result<Vec<u8>> {
        let row = self
            .call_one("SELECT * FROM jfs.readlink($1)", &[&(inode as i64)])
            .await?;
        check_errno(&row)?;
        Ok(row.try_get("target")?)
    }

    pub async fn link(&self, inode: u64, parent: u64, name: &[u8]) -> Result<Attr> {
        let send = || async {
            let row = self
                .call_one(
                    "SELECT * FROM jfs.link($1, $2, $3)",
                    &[&(inode as i64), &(parent as i64), &name],
                )
                .await?;
            attr_from_row(&row)
        };
        match self.sent_again("link", send, libc::EEXIST).await? {
            Some(attr) => Ok(attr),
            // the name is there: made by the first link if it names the inode
            None => match self.lookup(parent, name).await? {
                attr if attr.inode == inode => Ok(attr),
                _ => Err(MetaError::Errno(libc::EEXIST)),
            },
        }
    }

    /// Removes a name; `open` lists the inodes this session has open, so an
    /// unlinked file that is still open here stays until released. None:
    /// the answer was lost and the name was gone when asked again (the
    /// removed inode is not known).
    pub async fn unlink(
        &self,
        parent: u64,
        name: &[u8],
        sid: i64,
        open: &[i64],
    ) -> Result<Option<Attr>> {
        let send = || async {
            let row = self
                .call_one(
                    "SELECT * FROM jfs.unlink($1, $2, $3, $4)",
                    &[&(parent as i64), &name, &sid, &open],
                )
                .await?;
            attr_from_row(&row)
        };
        self.sent_again("unlink", send, libc::ENOENT).await
    }

    /// Removes an empty directory (None: as [`Meta::unlink`]).
    pub async fn rmdir(&self, parent: u64, name: &[u8]) -> Result<Option<Attr>> {
        let send = || async {
            let row = self
                .call_one(
                    "SELECT * FROM jfs.rmdir($1, $2)",
                    &[&(parent as i64), &name],
                )
                .await?;
            attr_from_row(&row)
        };
        self.sent_again("rmdir", send, libc::ENOENT).await
    }

    /// Runs `send`, a change whose second run changes nothing more than its
    /// first (but may answer otherwise). If the answer was lost, it is sent
    /// again (up to [`MAX_ANSWERS_LOST`] times: the server may go away again),
    /// and the errno `happened` then means an earlier run did it: None (the
    /// caller may check further). An outage in between is waited out by the
    /// call sent again.
    pub(super) async fn sent_again<T, F, Fut>(
        &self,
        what: &str,
        send: F,
        happened: i32,
    ) -> Result<Option<T>>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        let mut answers_lost = 0;
        loop {
            match send().await {
                // (the answer to the call sent again may be lost too)
                Err(e) if e.may_have_committed() && answers_lost < MAX_ANSWERS_LOST => {
                    answers_lost += 1;
                    tracing::warn!("{what}: the answer was lost ({e}); asking again");
                }
                Err(MetaError::Errno(errno)) if errno == happened && answers_lost > 0 => {
                    return Ok(None)
                }
                other => return other.map(Some),
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub async fn rename(
        &self,
        parent: u64,
        name: &[u8],
        new_parent: u64,
        new_name: &[u8],
        flags: u32,
        sid: i64,
        open: &[i64],
    ) -> Result<RenameResult> {
        let send = || self.rename_once(parent, name, new_parent, new_name, flags, sid, open);
        if flags & libc::RENAME_EXCHANGE != 0 {
            return send().await; // a second exchange would undo the first
        }
        match self.sent_again("rename", send, libc::ENOENT).await? {
            Some(r) => Ok(r),
            // the source is gone: moved by the first rename if the target is there
            None => match self.lookup(new_parent, new_name).await {
                Ok(attr) => Ok(RenameResult {
                    moved: attr.inode,
                    replaced: 0,
                    replaced_nlink: 0,
                }),
                Err(_) => Err(MetaError::Errno(libc::ENOENT)),
            },
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn rename_once(
        &self,
        parent: u64,
        name: &[u8],
        new_parent: u64,
        new_name: &[u8],
        flags: u32,
        sid: i64,
        open: &[i64],
    ) -> Result<RenameResult> {
        let row = self
            .call_one(
                "SELECT * FROM jfs.rename($1, $2, $3, $4, $5, $6, $7)",
                &[
                    &(parent as i64),
                    &name,
                    &(new_parent as i64),
                    &new_name,
                    &(flags as i32),
                    &sid,
                    &open,
                ],
            )
            .await?;
        check_errno(&row)?;
        Ok(RenameResult {
            moved: row.try_get::<_, Option<i64>>("inode")?.unwrap_or(0) as u64,
            replaced: row.try_get::<_, Option<i64>>("replaced")?.unwrap_or(0) as u64,
            replaced_nlink: row
                .try_get::<_, Option<i32>>("replaced_nlink")?
                .unwrap_or(0) as u32,
        })
    }

    /// One page of a directory with attributes and whether each node has
    /// xattrs, after `cookie` (0 = start) (from the standby that serves
    /// reads when it has caught up).
    pub async fn readdirplus(&self, dir: u64, cookie: u64, limit: i32) -> Result<Vec<DirEntry>> {
        let rows = self
            .call_replicable(
                "SELECT * FROM jfs.readdirplus_xattrs($1, $2, $3)",
                &[&(dir as i64), &(cookie as i64), &limit],
            )
            .await?;
        let mut entries = Vec::with_capacity(rows.len());
        for row in rows {
            let elsewhere = row.try_get::<_, i32>("errno")? == libc::EXDEV
                && row.try_get::<_, Option<i64>>("cookie")?.is_some();
            let attr = match elsewhere {
                true => super::shard::placed_elsewhere(&row)?,
                false => attr_from_row(&row)?,
            };
            entries.push(DirEntry {
                cookie: row.try_get::<_, i64>("cookie")? as u64,
                name: row.try_get("name")?,
                attr,
                xattrs: row.try_get::<_, Option<bool>>("xattrs")?.unwrap_or(true),
                elsewhere,
            });
        }
        Ok(entries)
    }

    /// The newest cookie handed out so far (`jfs.listing_ceiling`), which
    /// bounds a listing past its first page; None when the database cannot
    /// say (an extension before 0.2.24, a role not granted it again since):
    /// the listing then goes on as long as it finds entries.
    pub async fn listing_ceiling(&self) -> Option<u64> {
        match self
            .call("SELECT jfs.listing_ceiling() AS ceiling", &[])
            .await
        {
            Ok(rows) => rows
                .first()
                .and_then(|r| r.get::<_, Option<i64>>("ceiling"))
                .map(|c| c as u64),
            Err(e) => {
                tracing::debug!("jfs.listing_ceiling: {e}");
                None
            }
        }
    }

    /// A read (or listing) of `inode`: its atime moves to now as
    /// strictatime (`strict`) or relatime says (`jfs.touch_atime`);
    /// returns the atime (None: no such node).
    pub async fn touch_atime(&self, inode: u64, strict: bool) -> Result<Option<i64>> {
        let row = self
            .call_one(
                "SELECT jfs.touch_atime($1, $2) AS atime",
                &[&(inode as i64), &strict],
            )
            .await?;
        Ok(row.try_get("atime")?)
    }

    /// Changes the attributes `change` gives.
    pub async fn setattr(&self, inode: u64, change: &SetAttr) -> Result<Attr> {
        let row = self
            .call_one(
                "SELECT * FROM jfs.setattr($1, $2, $3, $4, $5, $6, $7, NULL, $8)",
                &[
                    &(inode as i64),
                    &change.mask(),
                    &change.mode.map(|m| m as i32),
                    &change.uid.map(|u| u as i64),
                    &change.gid.map(|g| g as i64),
                    &given_time(change.atime),
                    &given_time(change.mtime),
                    &change.length.map(|l| l as i64),
                ],
            )
            .await?;
        attr_from_row(&row)
    }
}

impl Meta {
    /// One bounded step of removing the tree `name` of `parent`: (entries removed, done).
    pub async fn rmr(
        &self,
        parent: u64,
        name: &[u8],
        limit: i32,
        sid: i64,
        open: &[i64],
    ) -> Result<(u64, bool)> {
        let send = || async {
            let row = self
                .call_one(
                    "SELECT * FROM jfs.rmr($1, $2, $3, $4, $5)",
                    &[&(parent as i64), &name, &limit, &sid, &open],
                )
                .await?;
            check_errno(&row)?;
            Ok((
                row.try_get::<_, i64>("removed")? as u64,
                row.try_get("done")?,
            ))
        };
        // a step sent again removes what is left; the tree gone: the lost
        // step removed the last of it (how many is not known)
        Ok(self
            .sent_again("rmr", send, libc::ENOENT)
            .await?
            .unwrap_or((0, true)))
    }

    /// Clones node `src` (a file or a whole tree) to the new entry `name` of
    /// `dst_parent` in one transaction, owned by `owner` (uid, gid) or as the
    /// source: (new inode, nodes created, space charged).
    pub async fn clone_node(
        &self,
        src: u64,
        dst_parent: u64,
        name: &[u8],
        owner: Option<(u32, u32)>,
    ) -> Result<(u64, u64, u64)> {
        let uid = owner.map(|(u, _)| i64::from(u));
        let gid = owner.map(|(_, g)| i64::from(g));
        let row = self
            .call_one(
                "SELECT * FROM jfs.clone_node($1, $2, $3, $4, $5)",
                &[&(src as i64), &(dst_parent as i64), &name, &uid, &gid],
            )
            .await?;
        check_errno(&row)?;
        Ok((
            row.try_get::<_, i64>("inode")? as u64,
            row.try_get::<_, i64>("nodes")? as u64,
            row.try_get::<_, i64>("space")? as u64,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::{set_mask, SetAttr, TimeSet};

    #[test]
    fn a_change_sets_the_bits_of_what_it_changes() {
        assert_eq!(SetAttr::default().mask(), 0);
        assert_eq!(SetAttr::mode(0o644).mask(), set_mask::MODE);
        assert_eq!(SetAttr::length(0).mask(), set_mask::SIZE);
        let all = SetAttr {
            mode: Some(0o600),
            uid: Some(1),
            gid: Some(2),
            length: Some(3),
            atime: Some(TimeSet::At(4)),
            mtime: Some(TimeSet::Now),
        };
        // the values of sql/setattr.sql
        assert_eq!(all.mask(), 1 | 2 | 4 | 8 | 16 | 256);
        let now = SetAttr {
            atime: Some(TimeSet::Now),
            mtime: Some(TimeSet::At(5)),
            ..SetAttr::default()
        };
        assert_eq!(now.mask(), 128 | 32);
    }
}
