//! Root squash and all squash: the identity a request acts as, and the permission checks the kernel cannot make for it.
//!
//! With `default_permissions` the kernel checks each request for the
//! calling process's own ids, and lets root do anything. A squashed request
//! acts as another uid and gid (`--root-squash UID:GID`: root's requests;
//! `--all-squash UID:GID`: everyone's, as JuiceFS's options of those
//! names): the nodes it makes are that identity's, and the mount checks it
//! again for that identity (permission bits, sticky bit, ownership rules of
//! chmod, chown and utimes) before it reaches the database. A role that
//! `jfs.grant_client` gave a squash squashes the owner ids of its calls in
//! the database too, so a client that skips these checks still makes
//! nothing root's. Direct clients (the Python package, the S3 gateway) are
//! checked here always, with their supplementary groups and, on a volume
//! with ACLs on, by the access ACL as the kernel evaluates it.

use super::control_auth::{Requester, READ, SEARCH, WRITE};
use super::{Caller, Vfs, VfsResult};
pub use crate::meta::Squash;
use crate::meta::{AclKind, Attr, SetAttr, TimeSet};

/// The identity a request acts as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Who {
    pub uid: u32,
    pub gid: u32,
    /// Squashed: the kernel checked other ids, so the mount checks these.
    pub squashed: bool,
    /// Its supplementary groups, where it has any (a direct client acting
    /// as its process's own user; a squashed mount request has none).
    pub groups: Option<std::sync::Arc<[u32]>>,
}

impl Who {
    /// The identity of a request from `uid`/`gid` under `squash`.
    pub fn of(squash: Option<Squash>, uid: u32, gid: u32) -> Who {
        match squash {
            Some(s) if s.all || uid == 0 => Who {
                uid: s.uid,
                gid: s.gid,
                squashed: (s.uid, s.gid) != (uid, gid),
                groups: None,
            },
            _ => Who {
                uid,
                gid,
                squashed: false,
                groups: None,
            },
        }
    }
}

/// What a request needs of the nodes it touches.
#[derive(Debug, Clone, Copy)]
pub enum Need<'a> {
    /// Search a directory (lookup).
    Search(u64),
    /// Read a directory's entries (opendir).
    List(u64),
    /// Open a file for reading and/or writing.
    Open { inode: u64, read: bool, write: bool },
    /// Add an entry to a directory (create, mknod, mkdir, symlink, link).
    Create(u64),
    /// Remove entry `name` of directory `parent` (unlink, rmdir).
    Remove { parent: u64, name: &'a [u8] },
    /// Move an entry (rename), replacing what the new name holds.
    Move {
        parent: u64,
        name: &'a [u8],
        new_parent: u64,
        new_name: &'a [u8],
    },
    /// Change attributes.
    SetAttr { inode: u64, change: &'a SetAttr },
    /// Read or change an extended attribute.
    Xattr {
        inode: u64,
        name: &'a [u8],
        write: bool,
    },
}

impl<'a> Need<'a> {
    /// Read (`write` false) or change extended attribute `name` of `inode`.
    pub fn xattr(inode: u64, name: &'a [u8], write: bool) -> Need<'a> {
        Need::Xattr { inode, name, write }
    }

    /// Change the attributes of `inode` as `change` says.
    pub fn set_attr(inode: u64, change: &'a SetAttr) -> Need<'a> {
        Need::SetAttr { inode, change }
    }

    /// Move entry `name` of `parent` to `new_name` of `new_parent`.
    pub fn moving(parent: u64, name: &'a [u8], new_parent: u64, new_name: &'a [u8]) -> Need<'a> {
        Need::Move {
            parent,
            name,
            new_parent,
            new_name,
        }
    }
}

impl Vfs {
    /// The identity a request from `uid`/`gid` acts as on this mount.
    pub fn who(&self, uid: u32, gid: u32) -> Who {
        Who::of(self.config.squash, uid, gid)
    }

    /// The identity a request from `caller` acts as, with its supplementary
    /// groups (none when squashed: the squashed identity has only its own).
    pub(super) fn requester(&self, caller: Caller) -> Requester {
        match self.who(caller.uid, caller.gid) {
            w if w.squashed => Requester::acting_as(w.uid, w.gid),
            _ => Requester::of(caller),
        }
    }

    /// Whether `who` may do what `need` says: always when it is not
    /// squashed (the kernel checked), else by the permission bits; EACCES
    /// or (ownership) EPERM.
    pub async fn permit(&self, who: &Who, need: Need<'_>) -> VfsResult<()> {
        if !who.squashed {
            return Ok(());
        }
        let groups = who.groups.as_deref().unwrap_or_default().to_vec();
        let me = Requester::with_groups(who.uid, who.gid, groups);
        match need {
            Need::Search(dir) => self.needs(&me, dir, SEARCH).await,
            Need::List(dir) => self.needs(&me, dir, READ).await,
            Need::Open { inode, read, write } => {
                let want = if read { READ } else { 0 } | if write { WRITE } else { 0 };
                self.needs(&me, inode, want).await
            }
            Need::Create(dir) => self.needs(&me, dir, WRITE | SEARCH).await,
            Need::Remove { parent, name } => self.may_remove(&me, parent, name).await,
            Need::Move {
                parent,
                name,
                new_parent,
                new_name,
            } => {
                self.may_remove(&me, parent, name).await?;
                match self.lookup(new_parent, new_name).await {
                    Ok(_) => self.may_remove(&me, new_parent, new_name).await,
                    Err(libc::ENOENT) => self.needs(&me, new_parent, WRITE | SEARCH).await,
                    Err(e) => Err(e),
                }
            }
            Need::SetAttr { inode, change } => self.may_set(&me, inode, change).await,
            Need::Xattr { inode, name, write } => {
                if name.starts_with(b"trusted.") && !me.is_root() {
                    // CAP_SYS_ADMIN's, as the kernel's xattr_permission:
                    // to others they do not exist
                    return Err(if write { libc::EPERM } else { libc::ENODATA });
                }
                let attr = self.getattr(inode).await?;
                if !name.starts_with(b"user.") && write {
                    // system (ACLs), trusted and security: the owner's, or root's
                    owner_only(&me, attr.uid)
                } else {
                    allowed(
                        self.allows(&me, &attr, if write { WRITE } else { READ })
                            .await?,
                    )
                }
            }
        }
    }

    /// Whether a chmod by `who` (not squashed: a direct client) may set
    /// the setgid bit of a node of group `gid`: the kernel clears it
    /// unless the caller is in the group or is root (`setattr_prepare`).
    pub fn may_keep_setgid(&self, who: &Who, gid: u32) -> bool {
        let groups = who.groups.as_deref().unwrap_or_default().to_vec();
        Requester::with_groups(who.uid, who.gid, groups).in_group_or_root(gid)
    }

    /// Runs `op` when `who` may do what `need` says (see `permit`).
    pub async fn checked<T>(
        &self,
        who: &Who,
        need: Need<'_>,
        op: impl std::future::Future<Output = VfsResult<T>>,
    ) -> VfsResult<T> {
        self.permit(who, need).await?;
        op.await
    }

    async fn needs(&self, me: &Requester, inode: u64, want: u32) -> VfsResult<()> {
        let attr = self.getattr(inode).await?;
        allowed(self.allows(me, &attr, want).await?)
    }

    /// Whether `me` has all of `want` on the node of `attr`: by its
    /// permission bits, or, on a volume with ACLs on, by its access ACL as
    /// the kernel evaluates it for a mount's callers (a call to the
    /// database unless `me` is root or the owner).
    pub(super) async fn allows(&self, me: &Requester, attr: &Attr, want: u32) -> VfsResult<bool> {
        if !self.volume.enable_acl || me.is_root() || me.uid == attr.uid {
            return Ok(me.may(attr, want));
        }
        match self.ns.get_acl(attr.inode, AclKind::Access).await {
            Ok(acl) => Ok(me.acl_allows(attr, &acl, want)),
            Err(e) if e.errno() == libc::ENODATA => Ok(me.may(attr, want)),
            Err(e) => Err(super::errno(e)),
        }
    }

    async fn may_remove(&self, me: &Requester, parent: u64, name: &[u8]) -> VfsResult<()> {
        let dir = self.getattr(parent).await?;
        allowed(self.allows(me, &dir, WRITE | SEARCH).await?)?;
        let entry = self.lookup(parent, name).await?;
        // (the sticky bit's refusal is EPERM, as the kernel's; the write
        // permission was the ACL's, checked above)
        match me.sticky_allows(&dir, &entry) {
            true => Ok(()),
            false => Err(libc::EPERM),
        }
    }

    /// chmod and utimes with a time are the owner's; chown another's;
    /// chgrp the owner's, to a group it is in (root's: to any); truncate
    /// and utimes to now need write permission (or ownership).
    async fn may_set(&self, me: &Requester, inode: u64, change: &SetAttr) -> VfsResult<()> {
        let attr = self.getattr(inode).await?;
        let owner = me.is_root() || me.uid == attr.uid;
        let gives = change.uid.is_some_and(|u| u != attr.uid);
        let regroups = change.gid.is_some_and(|g| g != attr.gid);
        let to_own_group = change.gid.is_some_and(|g| me.in_group(g));
        if !me.is_root() && (gives || (regroups && !(owner && to_own_group))) {
            return Err(libc::EPERM);
        }
        let sets_time = |t: Option<TimeSet>| matches!(t, Some(TimeSet::At(_)));
        if (change.mode.is_some() || sets_time(change.atime) || sets_time(change.mtime)) && !owner {
            return Err(libc::EPERM);
        }
        let touches = change.atime.is_some() || change.mtime.is_some();
        if (change.length.is_some() || (touches && !owner))
            && !self.allows(me, &attr, WRITE).await?
        {
            return Err(libc::EACCES);
        }
        Ok(())
    }
}

fn allowed(yes: bool) -> VfsResult<()> {
    if yes {
        Ok(())
    } else {
        Err(libc::EACCES)
    }
}

fn owner_only(me: &Requester, owner: u32) -> VfsResult<()> {
    if me.is_root() || me.uid == owner {
        Ok(())
    } else {
        Err(libc::EPERM)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_squash_maps_root_only_and_all_squash_everyone() {
        let root = Some(Squash {
            all: false,
            uid: 65534,
            gid: 65534,
        });
        let who = Who::of(root, 0, 0);
        assert_eq!((who.uid, who.gid, who.squashed), (65534, 65534, true));
        let who = Who::of(root, 1000, 1000);
        assert_eq!((who.uid, who.gid, who.squashed), (1000, 1000, false));
        let all = Some(Squash {
            all: true,
            uid: 1500,
            gid: 1500,
        });
        assert!(Who::of(all, 1000, 1000).squashed);
        assert!(!Who::of(all, 1500, 1500).squashed);
        assert!(!Who::of(None, 0, 0).squashed);
    }
}
