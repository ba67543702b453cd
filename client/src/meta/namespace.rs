//! Namespace procedures: lookup, getattr, mknod, symlink, readlink, link, unlink, rmdir, rename, readdir.
use super::{attr_from_row, check_errno, Attr, Meta, Result};

/// One directory entry of a readdir(plus) page.
#[derive(Debug, Clone)]
pub struct DirEntry {
    pub cookie: u64,
    pub name: Vec<u8>,
    pub attr: Attr,
}

/// What a rename moved and replaced.
#[derive(Debug, Clone)]
pub struct RenameResult {
    /// The replaced (or exchanged) inode, 0 if none, with its nlink after the call.
    pub replaced: u64,
    pub replaced_nlink: u32,
}

impl Meta {
    pub async fn lookup(&self, parent: u64, name: &[u8]) -> Result<Attr> {
        let row = self
            .call_one(
                "SELECT * FROM jfs.lookup($1, $2)",
                &[&(parent as i64), &name],
            )
            .await?;
        attr_from_row(&row)
    }

    pub async fn getattr(&self, inode: u64) -> Result<Attr> {
        let row = self
            .call_one("SELECT * FROM jfs.getattr($1)", &[&(inode as i64)])
            .await?;
        attr_from_row(&row)
    }

    /// Creates a node with an inode id from a range this client reserved.
    /// `umask` applies unless the parent has a default ACL (then `mode` is
    /// masked by that ACL instead).
    #[allow(clippy::too_many_arguments)]
    pub async fn mknod(
        &self,
        parent: u64,
        name: &[u8],
        kind: i32,
        mode: u32,
        umask: u32,
        uid: u32,
        gid: u32,
        rdev: u32,
        target: Option<&[u8]>,
        inode: u64,
    ) -> Result<Attr> {
        let row = self
            .call_one(
                "SELECT * FROM jfs.mknod($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
                &[
                    &(parent as i64),
                    &name,
                    &kind,
                    &(mode as i32),
                    &(uid as i64),
                    &(gid as i64),
                    &(rdev as i64),
                    &target,
                    &(inode as i64),
                    &(umask as i32 & 0o7777),
                ],
            )
            .await?;
        attr_from_row(&row)
    }

    pub async fn readlink(&self, inode: u64) -> Result<Vec<u8>> {
        let row = self
            .call_one("SELECT * FROM jfs.readlink($1)", &[&(inode as i64)])
            .await?;
        check_errno(&row)?;
        Ok(row.try_get("target")?)
    }

    pub async fn link(&self, inode: u64, parent: u64, name: &[u8]) -> Result<Attr> {
        let row = self
            .call_one(
                "SELECT * FROM jfs.link($1, $2, $3)",
                &[&(inode as i64), &(parent as i64), &name],
            )
            .await?;
        attr_from_row(&row)
    }

    /// Removes a name; `open` lists the inodes this session has open, so an
    /// unlinked file that is still open here stays until released.
    pub async fn unlink(&self, parent: u64, name: &[u8], sid: i64, open: &[i64]) -> Result<Attr> {
        let row = self
            .call_one(
                "SELECT * FROM jfs.unlink($1, $2, $3, $4)",
                &[&(parent as i64), &name, &sid, &open],
            )
            .await?;
        attr_from_row(&row)
    }

    pub async fn rmdir(&self, parent: u64, name: &[u8]) -> Result<Attr> {
        let row = self
            .call_one(
                "SELECT * FROM jfs.rmdir($1, $2)",
                &[&(parent as i64), &name],
            )
            .await?;
        attr_from_row(&row)
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
            replaced: row.try_get::<_, Option<i64>>("replaced")?.unwrap_or(0) as u64,
            replaced_nlink: row
                .try_get::<_, Option<i32>>("replaced_nlink")?
                .unwrap_or(0) as u32,
        })
    }

    /// One page of a directory with attributes, after `cookie` (0 = start).
    pub async fn readdirplus(&self, dir: u64, cookie: u64, limit: i32) -> Result<Vec<DirEntry>> {
        let rows = self
            .call(
                "SELECT * FROM jfs.readdirplus($1, $2, $3)",
                &[&(dir as i64), &(cookie as i64), &limit],
            )
            .await?;
        let mut entries = Vec::with_capacity(rows.len());
        for row in rows {
            let attr = attr_from_row(&row)?;
            entries.push(DirEntry {
                cookie: row.try_get::<_, i64>("cookie")? as u64,
                name: row.try_get("name")?,
                attr,
            });
        }
        Ok(entries)
    }

    /// Changes attributes; `set` is the bit mask of `jfs.setattr`.
    #[allow(clippy::too_many_arguments)]
    pub async fn setattr(
        &self,
        inode: u64,
        set: i32,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        atime: Option<i64>,
        mtime: Option<i64>,
        length: Option<u64>,
    ) -> Result<Attr> {
        let row = self
            .call_one(
                "SELECT * FROM jfs.setattr($1, $2, $3, $4, $5, $6, $7, NULL, $8)",
                &[
                    &(inode as i64),
                    &set,
                    &mode.map(|m| m as i32),
                    &uid.map(|u| u as i64),
                    &gid.map(|g| g as i64),
                    &atime,
                    &mtime,
                    &length.map(|l| l as i64),
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
