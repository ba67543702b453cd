//! Extended attributes, and POSIX ACLs written and read as the
//! `system.posix_acl_*` xattrs (stored as ACL rows when the volume has
//! them on; see `vfs/acl.rs`).
use crate::meta::SetAttr;
use crate::vfs::{acl, errno, Caller, Vfs, VfsResult, CONTROL_INODE};

/// The xattr the kernel asks for before a file's first write (to strip
/// file capabilities), which a file this mount just made cannot have.
const CAPABILITY: &[u8] = b"security.capability";

/// How old this mount's knowledge of other mounts' changes may be for it to
/// answer that a file it made has no capabilities (the change log is read
/// every 50 ms, but a busy mount may read it late): as long as a deferred
/// chmod may be judged against its view.
const CAPABILITY_VIEW_AGE: std::time::Duration = std::time::Duration::from_secs(5);

impl Vfs {
    pub async fn getxattr(&self, inode: u64, name: &[u8]) -> VfsResult<Vec<u8>> {
        // (the control file is no node of the volume: it has no xattr, and
        // no ACL for the kernel to check beyond its mode)
        if inode == CONTROL_INODE {
            return Err(libc::ENODATA);
        }
        if acl::is_acl(name) {
            if !self.volume.enable_acl {
                // no ACL beyond the mode is kept (see acl.rs)
                return Err(libc::ENODATA);
            }
            // (an access ACL shows the mode, which may wait for a commit)
            self.commit_deferred_attrs(inode).await?;
            let entries = self
                .ns
                .get_acl(inode, acl::kind_of(name))
                .await
                .map_err(errno)?;
            return Ok(acl::to_xattr(&entries));
        }
        if self.known_xattr_free(inode, name).await {
            return Err(libc::ENODATA);
        }
        self.ns.getxattr(inode, name).await.map_err(errno)
    }

    /// Whether the node is known to have no xattr, so that getxattr of
    /// `name` is answered without asking: a listing showed none and its
    /// attributes still answer (see attrs.rs). The kernel asks for file
    /// capabilities before a write, to strip them: for those the view of
    /// other mounts must be fresh (the change log followed and read within
    /// [`CAPABILITY_VIEW_AGE`]), so that a write never keeps another mount's
    /// setcap; a file open here that this mount made is known too.
    async fn known_xattr_free(&self, inode: u64, name: &[u8]) -> bool {
        if name != CAPABILITY {
            return self.ns.attrs.xattr_free(inode);
        }
        if !self.config.follow_changes || !self.ns.attrs.log_read_within(CAPABILITY_VIEW_AGE) {
            return false;
        }
        self.ns.attrs.xattr_free(inode) || self.made_xattr_free(inode).await
    }

    /// Whether a file open here was made by this mount and nothing of it
    /// changed since (a setxattr here, tried or made, or by another mount
    /// makes the cache forget the file).
    async fn made_xattr_free(&self, inode: u64) -> bool {
        let Some(file) = self.open_file(inode) else {
            return false;
        };
        let made = file.state.lock().await.xattr_free;
        made.is_some_and(|t| !self.ns.attrs.forgot_since(inode, t))
    }

    /// Sets xattr `name` of `inode` for `caller` (whose groups decide
    /// whether an access ACL keeps the setgid bit).
    pub async fn setxattr(
        &self,
        caller: Caller,
        inode: u64,
        name: &[u8],
        value: &[u8],
        flags: i32,
    ) -> VfsResult<()> {
        self.writable()?;
        if inode == CONTROL_INODE {
            return Err(libc::EPERM);
        }
        if acl::is_acl(name) {
            return self.set_acl(caller, inode, name, value).await;
        }
        // (before the call too: its answer may be lost after it committed)
        self.ns.attrs.forget(inode);
        let set = self
            .committing(inode, self.ns.setxattr(inode, name, value, flags))
            .await;
        // its ctime moved, or may have (an answer lost after the commit)
        self.ns.attrs.forget(inode);
        set.map_err(errno)
    }

    /// An ACL written as an xattr (the kernel checked that the caller owns
    /// the node): stored when the volume has ACLs on; else a minimal access
    /// ACL sets the mode's permission bits and anything more is not
    /// supported. An access ACL sets the mode as chmod does, so the setgid
    /// bit goes unless the caller is in the node's group or is root (the
    /// kernel leaves that to the file system: fuser does not negotiate
    /// FUSE_SETXATTR_EXT, whose flag would say it; the caller's groups are
    /// read here as the kernel reads them).
    async fn set_acl(
        &self,
        caller: Caller,
        inode: u64,
        name: &[u8],
        value: &[u8],
    ) -> VfsResult<()> {
        if self.volume.enable_acl {
            let entries = acl::parse(value).ok_or(libc::EINVAL)?;
            // (a mode waiting for a commit is made first, then the ACL's)
            self.commit_deferred_attrs(inode).await?;
            if name == acl::ACCESS {
                // before the ACL: a failure between the two leaves the bit
                // gone (as a chmod by the owner could), never an ACL set
                // with it kept
                let attr = self.getattr(inode).await?;
                if self.setgid_killed(caller, &attr) {
                    let mode = SetAttr::mode(attr.mode & !libc::S_ISGID);
                    self.setattr(inode, &mode).await?;
                }
            }
            let set = self.ns.set_acl(inode, acl::kind_of(name), Some(&entries));
            self.committing(inode, set).await.map_err(errno)?;
            // its mode and ctime moved
            self.ns.attrs.forget(inode);
            self.forget_attributes(inode);
            return Ok(());
        }
        let Some(perm) = acl::minimal_acl_mode(value).filter(|_| name == acl::ACCESS) else {
            return Err(libc::EOPNOTSUPP);
        };
        // a file open here: as this mount shows it (its mode may wait for
        // the commit of its writes, and this change then goes with it)
        let attr = match self.open_file(inode) {
            Some(_) => self.getattr(inode).await?,
            None => self.ns.getattr_now(inode).await.map_err(errno)?,
        };
        let mut mode = (attr.mode & !0o777) | perm;
        if self.setgid_killed(caller, &attr) {
            mode &= !libc::S_ISGID;
        }
        self.setattr(inode, &SetAttr::mode(mode)).await?;
        // the kernel keeps the old mode otherwise: it does not know an
        // xattr changed it
        self.forget_attributes(inode);
        Ok(())
    }

    /// Whether an access ACL set by `caller` on a node with `attr` clears
    /// its setgid bit (a set bit, and a caller neither in its group nor
    /// root).
    fn setgid_killed(&self, caller: Caller, attr: &crate::meta::Attr) -> bool {
        attr.mode & libc::S_ISGID != 0 && !self.requester(caller).in_group_or_root(attr.gid)
    }

    /// Runs `commit`, a call that commits a change of `inode`: if the file
    /// is open here, its next fsync (and in 'fsync' durability mode its
    /// next close) makes the change durable or reports it lost. The file
    /// is marked before the call (a lost answer may hide a commit) and
    /// stays locked until it returns, so that no fsync in between clears
    /// the mark before the change is committed.
    async fn committing<T>(&self, inode: u64, commit: impl std::future::Future<Output = T>) -> T {
        let file = self.open_file(inode);
        let mut state = match &file {
            Some(f) => Some(f.state.lock().await),
            None => None,
        };
        if let Some(state) = state.as_mut() {
            state.committed_in(self.ns.meta_of(inode).epoch());
        }
        commit.await
    }

    /// Commits the pending writes of a file open here whose attribute
    /// change waits for them: ACL procedures read and set the mode.
    async fn commit_deferred_attrs(&self, inode: u64) -> VfsResult<()> {
        if let Some(file) = self.open_file(inode) {
            let mut state = file.state.lock().await;
            if state.writer.deferred_attrs().is_some() {
                self.flush_locked(inode, &mut state).await?;
            }
        }
        Ok(())
    }

    pub async fn listxattr(&self, inode: u64) -> VfsResult<Vec<Vec<u8>>> {
        if inode == CONTROL_INODE {
            return Ok(Vec::new());
        }
        // with ACLs on, the procedure lists the ACLs a node has
        self.ns.listxattr(inode).await.map_err(errno)
    }

    pub async fn removexattr(&self, inode: u64, name: &[u8]) -> VfsResult<()> {
        self.writable()?;
        if inode == CONTROL_INODE {
            return Err(libc::EPERM);
        }
        if acl::is_acl(name) && !self.volume.enable_acl {
            // there is none beyond the mode to remove
            return Ok(());
        }
        if acl::is_acl(name) {
            self.commit_deferred_attrs(inode).await?;
            let removed = self.ns.set_acl(inode, acl::kind_of(name), None);
            self.committing(inode, removed).await.map_err(errno)?;
        } else {
            // (before the call too: its answer may be lost after it committed)
            self.ns.attrs.forget(inode);
            let removed = self.ns.removexattr(inode, name);
            self.committing(inode, removed).await.map_err(errno)?;
        }
        // its ctime moved
        self.ns.attrs.forget(inode);
        Ok(())
    }
}
