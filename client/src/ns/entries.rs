//! The procedures that change or list a directory's entries, as the
//! operations call them: each takes the guard of the operation on that
//! directory ([`InDir`]: a [`super::DirOp`] from `settle_dir`,
//! `unlink_begins` or `create_begins`, or a [`super::MakeInDir`] from
//! `make_begins`), so no entry changes or listing goes to PostgreSQL while
//! this mount holds the directory's lease with answers not committed, and
//! no lease is taken while it is in flight. The types keep the rule.
use super::leases::InDir;
use super::Namespace;
use crate::meta::{Attr, DirEntry, MetaError, NewNode, RenameResult, Result};

/// Checks that `guard` is of `dir` (debug builds).
fn guards(guard: &(impl InDir + ?Sized), dir: u64) {
    debug_assert_eq!(
        guard.dir(),
        dir,
        "an operation guarded by another directory's guard"
    );
}

impl Namespace {
    /// Makes `node` (inode `inode`) as entry `name` of `parent`.
    pub async fn mknod(
        &self,
        guard: &dyn InDir,
        parent: u64,
        name: &[u8],
        node: &NewNode<'_>,
        inode: u64,
    ) -> Result<Attr> {
        guards(guard, parent);
        self.meta_of(parent).mknod(parent, name, node, inode).await
    }

    /// A new name for `inode` in `parent` (settled first).
    pub async fn link(
        &self,
        guard: &impl InDir,
        inode: u64,
        parent: u64,
        name: &[u8],
    ) -> Result<Attr> {
        guards(guard, parent);
        self.same_shard(inode, parent)?;
        self.settled(inode).await?;
        self.meta_of(parent).link(inode, parent, name).await
    }

    /// Removes entry `name` of `parent`; a file open here that loses its
    /// last name is kept by this session until closed.
    pub async fn unlink(
        &self,
        guard: &impl InDir,
        parent: u64,
        name: &[u8],
    ) -> Result<Option<Attr>> {
        guards(guard, parent);
        if let Some(inode) = self.created_as(parent, name) {
            // made here (and open), not committed yet
            self.settled(inode).await?;
        }
        let open = self.open_inodes();
        self.meta_of(parent)
            .unlink(parent, name, self.sid_of(parent).await, &open)
            .await
    }

    /// Removes directory `name` of `parent` (which may be leased here: every
    /// lease is committed and given up first).
    pub async fn rmdir(
        &self,
        guard: &impl InDir,
        parent: u64,
        name: &[u8],
    ) -> Result<Option<Attr>> {
        guards(guard, parent);
        self.settled_shard(parent).await?;
        match self.meta_of(parent).rmdir(parent, name).await {
            Err(MetaError::Errno(libc::EXDEV)) => self.rmdir_shard_root(parent, name).await,
            removed => removed,
        }
    }

    /// Removes entry `name` of `parent`, a shard root (its node on another
    /// shard): see `meta::remove_shard_root`. EXDEV when this role may not
    /// (granted before 0.2.29: jfs.grant_client again gives it).
    async fn rmdir_shard_root(&self, parent: u64, name: &[u8]) -> Result<Option<Attr>> {
        let here = self.meta_of(parent);
        let inode = match here.lookup_placed(parent, name).await? {
            Err(inode) if self.parts.index_of(inode).is_some() => inode,
            _ => return Err(MetaError::Errno(libc::EXDEV)),
        };
        let shard = self.meta_of(inode);
        if !here.may_call("shard_root_unlink") || !shard.may_call("shard_root_remove") {
            return Err(MetaError::Errno(libc::EXDEV));
        }
        // (unlinks answered in it under its lease go first: it is empty
        // only once they are committed)
        self.settled_shard(inode).await?;
        crate::meta::remove_shard_root(here, parent, name, shard, inode).await?;
        self.attrs.forget(inode);
        Ok(None)
    }

    /// Moves entry `name` of `parent` to `new_name` of `new_parent` (a
    /// directory it replaces may be leased here: every lease is committed
    /// and given up first).
    #[allow(clippy::too_many_arguments)]
    pub async fn rename(
        &self,
        from: &impl InDir,
        to: &impl InDir,
        parent: u64,
        name: &[u8],
        new_parent: u64,
        new_name: &[u8],
        flags: u32,
    ) -> Result<RenameResult> {
        guards(from, parent);
        guards(to, new_parent);
        self.same_shard(parent, new_parent)?;
        self.settled_shard(parent).await?;
        let open = self.open_inodes();
        let sid = self.sid_of(parent).await;
        self.meta_of(parent)
            .rename(parent, name, new_parent, new_name, flags, sid, &open)
            .await
    }

    /// A page of `dir`'s listing after `cookie`.
    pub async fn readdirplus(
        &self,
        guard: &impl InDir,
        dir: u64,
        cookie: u64,
        limit: i32,
    ) -> Result<Vec<DirEntry>> {
        guards(guard, dir);
        let mut cookie = cookie;
        loop {
            let mut page = self.meta_of(dir).readdirplus(dir, cookie, limit).await?;
            let Some(last) = page.last().map(|e| e.cookie) else {
                return Ok(page);
            };
            let mut gone = Vec::new();
            for entry in page.iter_mut().filter(|e| e.elsewhere) {
                // a shard root: its attributes are its own shard's to give
                match self.attr_elsewhere(entry.attr.inode).await {
                    Ok(attr) => entry.attr = attr,
                    // (a name left by a crash in the middle of its removal:
                    // no entry, as lookups answer)
                    Err(libc::ENOENT) => gone.push(entry.cookie),
                    Err(e) => return Err(MetaError::Errno(e)),
                }
                entry.elsewhere = false;
            }
            page.retain(|e| !gone.contains(&e.cookie));
            if !page.is_empty() {
                return Ok(page);
            }
            // (an empty page ends a listing: the next one, then)
            cookie = last;
        }
    }

    /// Removes up to `step` entries of the tree at entry `name` of
    /// `parent`; how many, and whether it is gone.
    pub async fn rmr(
        &self,
        guard: &impl InDir,
        parent: u64,
        name: &[u8],
        step: i32,
    ) -> Result<(u64, bool)> {
        guards(guard, parent);
        self.settled_shard(parent).await?;
        let open = self.open_inodes();
        self.meta_of(parent)
            .rmr(parent, name, step, self.sid_of(parent).await, &open)
            .await
    }

    /// Clones `src` (settled first) as entry `name` of `parent`; the new
    /// inode, the nodes made and the space they take.
    pub async fn clone_node(
        &self,
        guard: &impl InDir,
        src: u64,
        parent: u64,
        name: &[u8],
        owner: Option<(u32, u32)>,
    ) -> Result<(u64, u64, u64)> {
        guards(guard, parent);
        self.same_shard(src, parent)?;
        self.settled_shard(parent).await?;
        self.meta_of(parent)
            .clone_node(src, parent, name, owner)
            .await
    }

    /// Entry `name` of `parent` as the database has it now.
    pub async fn lookup_now(&self, guard: &impl InDir, parent: u64, name: &[u8]) -> Result<Attr> {
        guards(guard, parent);
        match self.meta_of(parent).lookup(parent, name).await {
            Err(MetaError::Errno(libc::EXDEV)) => self
                .lookup_elsewhere(parent, name)
                .await
                .map_err(MetaError::Errno),
            attr => attr,
        }
    }

    /// Makes entry `name` of `parent` (on the root's shard) a directory of
    /// the gateway's own on shard `shard`, mode 0700, owned by `uid`:`gid`:
    /// its node there first, then the entry, so a crash between leaves an
    /// orphan for `jfs shard fsck`, never a name of nothing; the node goes
    /// again when the entry is refused.
    pub async fn make_gateway_dir(
        &self,
        guard: &dyn InDir,
        parent: u64,
        name: &[u8],
        shard: u16,
        (uid, gid): (u32, u32),
    ) -> Result<Attr> {
        guards(guard, parent);
        let part = self.parts.all().iter().find(|p| p.number == shard);
        let part = part.ok_or(MetaError::Errno(libc::ENXIO))?;
        // (databases of a release before 0.2.31 have neither procedure)
        if !part.meta.may_call("gateway_dir_make")
            || !self.meta_of(parent).may_call("gateway_dir_link")
        {
            return Err(MetaError::Errno(libc::ENOSYS));
        }
        let inode = part.meta.gateway_dir_make(parent, uid, gid).await?;
        if let Err(e) = self
            .meta_of(parent)
            .gateway_dir_link(parent, name, inode)
            .await
        {
            if let Err(left) = part.meta.shard_root_remove(inode).await {
                tracing::warn!(
                    "directory {inode} of shard {shard}, made for the gateway and not linked \
                     ({e}), could not be removed ({left}): `jfs shard fsck --repair` removes it"
                );
            }
            return Err(e);
        }
        self.attr_elsewhere(inode).await.map_err(MetaError::Errno)
    }
}
