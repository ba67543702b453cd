//! The procedures that name a node, as the operations call them: each one
//! first settles the node ([`Namespace::settle_created`]: a file this mount
//! made under a lease and has not committed yet is committed), so that
//! PostgreSQL is never asked about a node it does not know yet; a change
//! of a directory first commits what its lease answered in it
//! ([`Namespace::settled_entries`]). The operations reach these procedures
//! only here.
use super::lease::Keep;
use super::{errno, Namespace, NsResult};
use crate::meta::{
    AclEntry, AclKind, Attr, Copied, LockRange, Locker, MetaError, Result, SetAttr, SpaceLimit,
    SummaryRow,
};

/// A settle that failed, as a procedure's error.
pub(super) fn unsettled(e: i32) -> MetaError {
    MetaError::Errno(e)
}

impl Namespace {
    /// Settles `inode` (see the module's documentation). The commit that
    /// settles it is boxed: every procedure that names a node awaits this,
    /// and a commit's future inlined into each of theirs overflowed the
    /// stack of the FUSE threads that block on them (debug builds).
    pub(super) async fn settled(&self, inode: u64) -> Result<()> {
        if self.leases.maker_of(inode).is_none() {
            return Ok(());
        }
        Box::pin(self.settle_created(inode))
            .await
            .map_err(unsettled)
    }

    /// The unlinks and creates answered in directory `inode` under its
    /// lease, committed before a change of the directory itself: their
    /// commit moves its times, which must not overwrite times set after
    /// them (tar and cp -a set a directory's once its files are in), and
    /// a new mode, group or default ACL applies only to creates answered
    /// after it. Boxed as [`Namespace::settled`] is.
    pub(super) async fn settled_entries(&self, inode: u64) -> Result<()> {
        if !self.leases.pending_in(inode) {
            return Ok(());
        }
        Box::pin(self.commit_lease(inode, Keep::Settle))
            .await
            .map_err(unsettled)
    }

    /// [`Namespace::settle_shard`] of `inode`'s shard, boxed as
    /// [`Namespace::settled`] is.
    pub(super) async fn settled_shard(&self, inode: u64) -> Result<()> {
        Box::pin(self.settle_shard(inode)).await.map_err(unsettled)
    }

    /// The attributes of `inode` as this mount knows them: a file made
    /// here under a lease and not committed yet, a copy in the cache, or
    /// read (and cached).
    pub async fn attr_of(&self, inode: u64) -> NsResult<Attr> {
        if let Some(attr) = self.created_attr(inode) {
            return Ok(attr);
        }
        if let Some(attr) = self.attrs.get(inode) {
            return Ok(attr);
        }
        let ticket = self.attrs.ticket();
        let attr = self
            .meta_of(inode)
            .getattr_replicable(inode)
            .await
            .map_err(errno)?;
        self.attrs.put(&attr, ticket);
        Ok(attr)
    }

    /// Entry `name` of `parent` as this mount knows it: under a lease held
    /// here, from the caches, read ahead when the directory is being walked
    /// name by name, or read (and cached).
    pub async fn lookup(&self, parent: u64, name: &[u8]) -> NsResult<Attr> {
        // (a lease's entries are the directory's: the unlinks answered here
        // gone, the creates answered here there)
        if let Some(answer) = self.lookup_leased(parent, name) {
            return answer;
        }
        if self.listings.absent(parent, name) {
            return Err(libc::ENOENT);
        }
        if let Some(attr) = self.attrs.lookup(parent, name) {
            return Ok(attr);
        }
        let ticket = self.attrs.ticket();
        // (not where unlinks are pending: it would bring them back)
        if !self.holds_lease(parent) {
            if let Some(attr) = self.lookup_ahead(parent, name, ticket).await {
                return Ok(attr);
            }
        }
        let placed = self.meta_of(parent).lookup_replicable(parent, name).await;
        let attr = match placed.map_err(errno)? {
            Ok(attr) => attr,
            // (a shard root: its node is on its own shard)
            Err(inode) => self.attr_elsewhere(inode).await?,
        };
        self.attrs.put_entry(parent, name, &attr, ticket);
        Ok(attr)
    }

    /// Entry `name` of `parent` whose node is on another shard (a shard
    /// root): its inode from the parent's database, its attributes from
    /// its own.
    pub(super) async fn lookup_elsewhere(&self, parent: u64, name: &[u8]) -> NsResult<Attr> {
        let placed = self.meta_of(parent).lookup_placed(parent, name).await;
        match placed.map_err(errno)? {
            Ok(attr) => Ok(attr),
            Err(inode) => self.attr_elsewhere(inode).await,
        }
    }

    /// The attributes of `inode`, a shard root named by an entry of another
    /// shard, from its own shard's database.
    pub(super) async fn attr_elsewhere(&self, inode: u64) -> NsResult<Attr> {
        if self.parts.index_of(inode).is_none() {
            tracing::error!(
                "inode {inode} is on shard {}, which this mount does not know (added after it \
                 started): mount again to reach it",
                inode >> crate::meta::SHARD_SHIFT
            );
            return Err(libc::EIO);
        }
        self.meta_of(inode)
            .getattr_replicable(inode)
            .await
            .map_err(errno)
    }

    /// `who` with this mount's session on the shard that holds `inode`.
    async fn locker_on_shard(&self, inode: u64, who: Locker) -> Locker {
        Locker {
            sid: self.sid_of(inode).await,
            ..who
        }
    }

    /// The attributes of `inode` as the primary has them now.
    pub async fn getattr_now(&self, inode: u64) -> Result<Attr> {
        self.settled(inode).await?;
        self.meta_of(inode).getattr(inode).await
    }

    pub async fn setattr(&self, inode: u64, change: &SetAttr) -> Result<Attr> {
        self.settled(inode).await?;
        self.settled_entries(inode).await?;
        self.meta_of(inode).setattr(inode, change).await
    }

    pub async fn readlink(&self, inode: u64) -> Result<Vec<u8>> {
        self.settled(inode).await?;
        self.meta_of(inode).readlink(inode).await
    }

    pub async fn zero_range(&self, inode: u64, offset: u64, len: u64, keep: bool) -> Result<Attr> {
        self.settled(inode).await?;
        self.meta_of(inode)
            .zero_range(inode, offset, len, keep)
            .await
    }

    pub async fn seek_data(&self, inode: u64, offset: u64, hole: bool) -> Result<u64> {
        self.settled(inode).await?;
        self.meta_of(inode).seek_data(inode, offset, hole).await
    }

    pub async fn copy_range(
        &self,
        src: u64,
        src_offset: u64,
        dst: u64,
        dst_offset: u64,
        length: u64,
    ) -> Result<Copied> {
        self.same_shard(src, dst)?;
        self.settled(src).await?;
        self.settled(dst).await?;
        self.meta_of(src)
            .copy_range(src, src_offset, dst, dst_offset, length)
            .await
    }

    pub async fn getlk(&self, inode: u64, who: Locker, range: &LockRange) -> Result<LockRange> {
        self.settled(inode).await?;
        self.meta_of(inode)
            .getlk(inode, self.locker_on_shard(inode, who).await, range)
            .await
    }

    pub async fn setlk(
        &self,
        inode: u64,
        who: Locker,
        range: &LockRange,
        wait: bool,
    ) -> Result<()> {
        self.settled(inode).await?;
        self.meta_of(inode)
            .setlk(inode, self.locker_on_shard(inode, who).await, range, wait)
            .await
    }

    pub async fn cancel_lock_wait(&self, inode: u64, who: Locker) -> Result<()> {
        self.settled(inode).await?;
        self.meta_of(inode)
            .cancel_lock_wait(inode, self.locker_on_shard(inode, who).await)
            .await
    }

    pub async fn unlock_owner(&self, inode: u64, who: Locker) -> Result<i32> {
        self.settled(inode).await?;
        self.meta_of(inode)
            .unlock_owner(inode, self.locker_on_shard(inode, who).await)
            .await
    }

    pub async fn getxattr(&self, inode: u64, name: &[u8]) -> Result<Vec<u8>> {
        self.settled(inode).await?;
        self.meta_of(inode).getxattr(inode, name).await
    }

    pub async fn setxattr(&self, inode: u64, name: &[u8], value: &[u8], flags: i32) -> Result<()> {
        self.settled(inode).await?;
        self.meta_of(inode)
            .setxattr(inode, name, value, flags)
            .await
    }

    pub async fn listxattr(&self, inode: u64) -> Result<Vec<Vec<u8>>> {
        self.settled(inode).await?;
        self.meta_of(inode).listxattr(inode).await
    }

    pub async fn removexattr(&self, inode: u64, name: &[u8]) -> Result<()> {
        self.settled(inode).await?;
        self.meta_of(inode).removexattr(inode, name).await
    }

    pub async fn get_acl(&self, inode: u64, kind: AclKind) -> Result<Vec<AclEntry>> {
        self.settled(inode).await?;
        self.meta_of(inode).get_acl(inode, kind).await
    }

    pub async fn set_acl(&self, inode: u64, kind: AclKind, acl: Option<&[AclEntry]>) -> Result<()> {
        self.settled(inode).await?;
        self.settled_entries(inode).await?;
        self.meta_of(inode).set_acl(inode, kind, acl).await
    }

    /// The attributes of `inode`, read where reads may go (a replica).
    pub async fn getattr_replicable(&self, inode: u64) -> Result<Attr> {
        self.settled(inode).await?;
        self.meta_of(inode).getattr_replicable(inode).await
    }

    /// Moves `inode`'s atime (`strict`: even where relatime would not);
    /// the atime set, if it moved.
    pub async fn touch_atime(&self, inode: u64, strict: bool) -> Result<Option<i64>> {
        self.settled(inode).await?;
        self.meta_of(inode).touch_atime(inode, strict).await
    }

    /// The space limits that apply to `inode`.
    pub async fn space_limit(&self, inode: u64) -> Result<SpaceLimit> {
        self.settled(inode).await?;
        self.meta_of(inode).space_limit(inode).await
    }

    /// The usage summary of the tree at `inode` to `depth` (every lease
    /// committed first: its files count).
    pub async fn summary_of(&self, inode: u64, depth: i32) -> Result<Vec<SummaryRow>> {
        self.settled_shard(inode).await?;
        self.meta_of(inode).summary_of(inode, depth).await
    }

    /// A path of `inode` (for messages).
    pub async fn path_of(&self, inode: u64) -> Result<Option<String>> {
        self.settled(inode).await?;
        self.meta_of(inode).path_of(inode).await
    }
}
