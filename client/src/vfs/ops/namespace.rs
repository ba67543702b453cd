//! Namespace operations: lookup, getattr, mknod (files, directories,
//! symlinks, devices), link, unlink, rmdir, rename, setattr.
use crate::meta::{Attr, NewNode, NodeType, SetAttr};
use crate::vfs::{control, errno, Vfs, VfsResult, NAME_MAX};

/// How old this mount's knowledge of other mounts' changes may be for a
/// chmod, chown or utimens to wait for the commit of a file's writes
/// (judged against what the mount shows of the file): the change log is
/// read every 50 ms, but a busy mount may read it late.
const DEFER_VIEW_AGE: std::time::Duration = std::time::Duration::from_secs(5);

impl Vfs {
    pub async fn lookup(&self, parent: u64, name: &[u8]) -> VfsResult<Attr> {
        if parent == self.config.root && name == control::CONTROL_NAME {
            return Ok(control::control_attr());
        }
        // before any cache: a listing knows the name is not there, but not
        // that it cannot be
        if name.len() > NAME_MAX {
            return Err(libc::ENAMETOOLONG);
        }
        let attr = self.ns.lookup(parent, name).await?;
        Ok(self.overlay(attr).await)
    }

    /// "." and ".." of node `inode`, which the kernel asks for only to
    /// decode a file handle (open_by_handle_at, an NFS export of the
    /// mount) whose node it no longer holds: the node itself, whatever its
    /// type, and a directory's parent (the mount's root is its own).
    /// Decoding a handle takes CAP_DAC_READ_SEARCH, so no permission is
    /// checked here, as the kernel checks none for it on local file systems.
    pub async fn lookup_by_handle(&self, inode: u64, name: &[u8]) -> VfsResult<Attr> {
        let attr = self.getattr(inode).await?;
        if name == b"." {
            return Ok(attr);
        }
        if attr.kind != NodeType::Dir {
            return Err(libc::ENOTDIR);
        }
        if inode == self.config.root || attr.parent == 0 {
            return Ok(attr);
        }
        self.getattr(attr.parent).await
    }

    pub async fn getattr(&self, inode: u64) -> VfsResult<Attr> {
        if inode == control::CONTROL_INODE {
            return Ok(control::control_attr());
        }
        let attr = match self.ns.attr_of(inode).await {
            Err(libc::ENOENT) => return self.removed_dir_attr(inode),
            other => other?,
        };
        Ok(self.overlay(attr).await)
    }

    /// The attributes of `inode` as the database has them now (what this
    /// client cached forgotten first), for decisions another client's
    /// change must not escape.
    pub async fn getattr_fresh(&self, inode: u64) -> VfsResult<Attr> {
        self.ns.attrs.forget(inode);
        self.getattr(inode).await
    }

    /// fstat of a directory open here that is gone (rmdir, or replaced by
    /// a rename, on any mount): as it was opened, with no link and empty,
    /// as Linux answers it (xfstests generic/035); ENOENT for any other.
    fn removed_dir_attr(&self, inode: u64) -> VfsResult<Attr> {
        let mut attr = self.open_dir_attr(inode).ok_or(libc::ENOENT)?;
        attr.nlink = 0;
        attr.length = 0;
        Ok(attr)
    }

    /// Makes `node` as entry `name` of `parent`.
    pub async fn mknod(&self, parent: u64, name: &[u8], node: &NewNode<'_>) -> VfsResult<Attr> {
        self.writable()?;
        self.reserved_name(parent, name)?;
        if let Some(attr) = self.ns.create_leased(parent, name, node).await? {
            // answered here, committed with the next batch (see `leases`)
            self.ns.listings.added(parent, name);
            return Ok(attr);
        }
        let (in_parent, making) = match node.kind {
            NodeType::File => (Some(self.ns.create_begins(parent).await?), None),
            _ => (None, Some(self.ns.make_begins(parent, name).await?)),
        };
        let guard: &dyn crate::ns::InDir = match (&in_parent, &making) {
            (Some(op), _) => op,
            (_, Some(making)) => making,
            (None, None) => unreachable!("one guard or the other"),
        };
        let inode = self.ns.new_inode(parent).await?;
        let started = self.ns.listings.start();
        let ticket = self.ns.attrs.ticket();
        let attr = self
            .ns
            .mknod(guard, parent, name, node, inode)
            .await
            .map_err(|e| self.name_taken(parent, name, e))?;
        self.ns.listings.added(parent, name);
        if node.kind == NodeType::Dir {
            // its nlink grew
            self.ns.attrs.forget(parent);
            self.ns.attrs.put_entry(parent, name, &attr, ticket);
            // a new directory is known whole: empty
            self.ns.listings.install(attr.inode, parent, started, []);
        } else {
            self.ns.attrs.child_made(parent, name, &attr, ticket);
        }
        if let Some(making) = making {
            making.made(name, &attr);
        }
        drop(in_parent);
        if node.kind == NodeType::File {
            self.ns.created_directly(parent, name, attr.inode).await;
        }
        Ok(attr)
    }

    /// Makes directory `name` of `parent` on shard `shard`, the gateway's
    /// own there (mode 0700, the caller's): where it writes objects of
    /// that shard's keys aside before renaming them onto their keys.
    pub async fn mkdir_for_gateway(
        &self,
        parent: u64,
        name: &[u8],
        shard: u16,
        owner: (u32, u32),
    ) -> VfsResult<Attr> {
        self.writable()?;
        self.reserved_name(parent, name)?;
        let making = self.ns.make_begins(parent, name).await?;
        let ticket = self.ns.attrs.ticket();
        let attr = self
            .ns
            .make_gateway_dir(&making, parent, name, shard, owner)
            .await
            .map_err(|e| self.name_taken(parent, name, e))?;
        self.ns.listings.added(parent, name);
        // (its nlink grew)
        self.ns.attrs.forget(parent);
        self.ns.attrs.put_entry(parent, name, &attr, ticket);
        making.made(name, &attr);
        Ok(attr)
    }

    pub async fn readlink(&self, inode: u64) -> VfsResult<Vec<u8>> {
        self.ns.readlink(inode).await.map_err(errno)
    }

    pub async fn link(&self, inode: u64, parent: u64, name: &[u8]) -> VfsResult<Attr> {
        self.writable()?;
        self.reserved_name(parent, name)?;
        let in_parent = self.ns.settle_dir(parent).await?;
        let ticket = self.ns.attrs.ticket();
        let attr = self
            .ns
            .link(&in_parent, inode, parent, name)
            .await
            .map_err(|e| self.name_taken(parent, name, e))?;
        self.ns.listings.added(parent, name);
        // (its nlink and ctime moved: replaced by the procedure's answer)
        self.ns.attrs.child_made(parent, name, &attr, ticket);
        Ok(self.overlay(attr).await)
    }

    /// The errno of a failed call that makes entry `name` of `parent`; when
    /// the name was taken (by another mount, not yet read from the change
    /// log), the directory's listing learns it.
    fn name_taken(&self, parent: u64, name: &[u8], e: crate::meta::MetaError) -> i32 {
        let e = errno(e);
        if e == libc::EEXIST || e == libc::ENOTEMPTY {
            self.ns.listings.added(parent, name);
        }
        e
    }

    /// Marks an inode that lost its last name while open here.
    pub(in crate::vfs) async fn mark_unlinked(&self, inode: u64) {
        if let Some(file) = self.open_file(inode) {
            file.state.lock().await.unlinked = true;
        }
    }

    pub async fn unlink(&self, parent: u64, name: &[u8]) -> VfsResult<()> {
        self.writable()?;
        self.reserved_name(parent, name)?;
        let ticket = self.ns.attrs.ticket();
        if let Some(gone) = self.ns.unlink_leased(parent, name).await {
            // answered here, committed with the next batch (see `leases`)
            self.ns.listings.removed(parent, name);
            let now = crate::meta::time_to_ns(std::time::SystemTime::now());
            self.ns
                .attrs
                .child_removed_at(parent, name, gone.inode, now, ticket);
            return Ok(());
        }
        let in_parent = self.ns.unlink_begins(parent);
        let attr = self.ns.unlink(&in_parent, parent, name).await;
        let attr = attr.map_err(errno)?;
        self.ns.listings.removed(parent, name);
        match &attr {
            // its last name went: the directory's times moved to its new
            // ctime, and the kernel's question for them after the unlink
            // is answered here
            Some(attr) if attr.nlink == 0 => {
                self.ns.attrs.child_removed(parent, name, attr, ticket)
            }
            // its nlink and ctime moved, or it went to the trash (None:
            // the answer was lost, the name found gone, the inode not
            // known: a file open here that lost its last name is then
            // released when this mount's session ends)
            _ => {
                self.ns.attrs.forget_entry(parent, name);
                if let Some(attr) = &attr {
                    self.ns.attrs.forget(attr.inode);
                }
            }
        }
        if let Some(attr) = attr.filter(|a| a.nlink == 0) {
            self.mark_unlinked(attr.inode).await;
        }
        drop(in_parent);
        self.ns.unlinked_directly(parent, name).await;
        Ok(())
    }

    pub async fn rmdir(&self, parent: u64, name: &[u8]) -> VfsResult<()> {
        self.writable()?;
        self.reserved_name(parent, name)?;
        // (the directory removed may be leased here: its unlinks go first)
        let in_parent = self.ns.settle_dir(parent).await?;
        let attr = self.ns.rmdir(&in_parent, parent, name).await;
        let attr = attr.map_err(errno)?;
        self.ns.listings.removed(parent, name);
        // the parent's nlink and times, and the directory itself is gone
        self.ns.attrs.forget_entry(parent, name);
        if let Some(attr) = attr {
            self.ns.attrs.forget(attr.inode);
        }
        Ok(())
    }

    pub async fn rename(
        &self,
        parent: u64,
        name: &[u8],
        new_parent: u64,
        new_name: &[u8],
        flags: u32,
    ) -> VfsResult<()> {
        self.writable()?;
        self.reserved_name(parent, name)?;
        self.reserved_name(new_parent, new_name)?;
        let in_parent = self.ns.settle_dir(parent).await?;
        let in_new_parent = self.ns.settle_dir(new_parent).await?;
        let (from, to) = (&in_parent, &in_new_parent);
        let r = self
            .ns
            .rename(from, to, parent, name, new_parent, new_name, flags)
            .await
            .map_err(|e| self.name_taken(new_parent, new_name, e))?;
        if flags & libc::RENAME_EXCHANGE == 0 {
            self.ns.listings.removed(parent, name);
        }
        self.ns.listings.added(new_parent, new_name);
        // both entries and parents (times, nlink), the moved node (ctime,
        // a directory's ".."), the replaced or exchanged one
        self.ns.attrs.forget_entry(parent, name);
        self.ns.attrs.forget_entry(new_parent, new_name);
        self.ns.attrs.forget(r.moved);
        self.ns.attrs.forget(r.replaced);
        if r.replaced != 0 && r.replaced_nlink == 0 {
            self.mark_unlinked(r.replaced).await;
        }
        Ok(())
    }

    /// setattr; of a file open here, after its pending writes are committed.
    pub async fn setattr(&self, inode: u64, change: &SetAttr) -> VfsResult<Attr> {
        if inode == control::CONTROL_INODE {
            return Ok(control::control_attr());
        }
        self.writable()?;
        // any change of a file open here is ordered after its pending
        // writes: a size change must not be undone or cut by them, and times
        // set before close (futimens, as tar and cp -p do) must not be
        // overwritten by the mtime of their commit
        let file = self.open_file(inode);
        let mut state = match &file {
            Some(f) => Some(f.state.lock().await),
            None => None,
        };
        if let Some(state) = state.as_mut() {
            if let Some(attr) = self.defer_setattr(inode, state, change) {
                return Ok(attr);
            }
            self.flush_locked(inode, state).await?;
        }
        let ticket = self.ns.attrs.ticket();
        if let Some(state) = state.as_mut() {
            // (marked before the call: a lost answer may hide a commit)
            state.committed_in(self.ns.meta_of(inode).epoch());
        }
        let attr = self.ns.setattr(inode, change).await.map_err(errno)?;
        let raced = self.ns.attrs.forgot_since(inode, ticket);
        self.ns.attrs.replace(&attr, ticket);
        if let Some(state) = state.as_mut() {
            if !raced {
                state.saw(attr.clone(), self.ns.attrs.ticket(), &self.ns.attrs);
            }
            if change.length.is_some() {
                state.length = attr.length;
                state.changed();
            }
        }
        drop(state);
        Ok(self.overlay(attr).await)
    }

    /// A change of mode, owner or times of a file whose writes are pending
    /// here, answered at once and made in the transaction of their commit
    /// (close, fsync, a lock, the background commit, whichever comes
    /// first): cp -a's and tar's write, futimens, chmod, close then cost
    /// one round trip. Only what the database cannot refuse is deferred
    /// (the kernel checked the caller's right): no length, a valid mode, an
    /// owner and group that stay as they are (a new owner may be refused
    /// for quotas or a squash), which are then not sent at all (the
    /// commit moves the ctime: nothing undoes another mount's chown); and
    /// nothing that takes away a right of the group or others or a
    /// set-id or sticky bit, which other mounts must see at once. A mode
    /// is set at the commit only if nobody else set one meanwhile. Never
    /// without a background commit to bound the wait (`--commit-after 0`),
    /// nor unless the change log was read within [`DEFER_VIEW_AGE`] (what
    /// this mount shows of the file, against which the change is judged,
    /// is then at most that old).
    /// The answer is the file as this mount shows it, over the cache's copy
    /// or the attributes last read or committed here (while the cache
    /// forgot nothing of the file since); None when the change is made now.
    fn defer_setattr(
        &self,
        inode: u64,
        state: &mut crate::vfs::handles::FileState,
        change: &SetAttr,
    ) -> Option<Attr> {
        let mode_ok = |m: u32| m & !0o7777 == 0 || m & libc::S_IFMT == libc::S_IFREG;
        if !self.config.defer_attrs
            || !self.config.follow_changes
            || !self.ns.attrs.log_read_within(DEFER_VIEW_AGE)
            || !state.writer.has_slices()
            || change.mask() == 0
            || change.length.is_some()
            || !change.mode.is_none_or(mode_ok)
        {
            return None;
        }
        let seen = || state.fresh_seen(&self.ns.attrs).map(|(a, _)| a.clone());
        let cached = self.ns.attrs.get(inode).or_else(seen)?;
        let shown = state.view(cached.clone(), &self.ns.attrs);
        let takes_away = change.mode.is_some_and(|m| shown.mode & !m & 0o7077 != 0);
        if shown.kind != NodeType::File
            || takes_away
            || change.uid.is_some_and(|u| u != shown.uid)
            || change.gid.is_some_and(|g| g != shown.gid)
        {
            return None;
        }
        // an owner or group that stays: nothing to send
        let change = SetAttr {
            uid: None,
            gid: None,
            ..*change
        };
        if change.mask() != 0 {
            state.writer.defer_attrs(&change, shown.mode);
        }
        Some(state.view(cached, &self.ns.attrs))
    }
}
