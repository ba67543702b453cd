//! Permission checks: the identity a request acts as (root squash, all squash), who wrote a control request, and the checks the kernel cannot make for them.
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

use super::{Vfs, VfsResult};
pub use crate::meta::Squash;
use crate::meta::{
    AclEntry, AclKind, Attr, SetAttr, TimeSet, TAG_GROUP, TAG_GROUP_OBJ, TAG_MASK, TAG_OTHER,
    TAG_USER,
};

/// read, write, search (execute) bits.
pub(super) const READ: u32 = 4;
pub(super) const WRITE: u32 = 2;
pub(super) const SEARCH: u32 = 1;

/// Who wrote a control request (from the FUSE request, not from the
/// request text; see `control_auth`).
#[derive(Debug, Clone, Copy)]
pub struct Caller {
    pub uid: u32,
    pub gid: u32,
    pub pid: u32,
}

/// The writer of a control request, with its supplementary groups.
#[derive(Debug, Clone)]
pub(super) struct Requester {
    pub uid: u32,
    pub gid: u32,
    groups: Vec<u32>,
}

impl Requester {
    /// The writer of a request: its groups from `/proc/PID/status` (none if
    /// the process is gone: fewer rights, never more).
    pub fn of(caller: Caller) -> Requester {
        let status = std::fs::read_to_string(format!("/proc/{}/status", caller.pid));
        let groups = status
            .ok()
            .and_then(|s| {
                s.lines().find_map(|l| l.strip_prefix("Groups:")).map(|g| {
                    g.split_whitespace()
                        .filter_map(|n| n.parse().ok())
                        .collect()
                })
            })
            .unwrap_or_default();
        Requester {
            uid: caller.uid,
            gid: caller.gid,
            groups,
        }
    }

    /// A request acting as `uid`/`gid` alone (a squashed one: see `squash`).
    pub fn acting_as(uid: u32, gid: u32) -> Requester {
        Requester::with_groups(uid, gid, Vec::new())
    }

    /// A request acting as `uid`/`gid` with supplementary groups `groups`.
    pub fn with_groups(uid: u32, gid: u32, groups: Vec<u32>) -> Requester {
        Requester { uid, gid, groups }
    }

    /// Whether `gid` is its group or one of its supplementary groups.
    pub fn in_group(&self, gid: u32) -> bool {
        self.gid == gid || self.groups.contains(&gid)
    }

    pub fn is_root(&self) -> bool {
        self.uid == 0
    }

    /// Whether it is in group `gid` (its own or a supplementary one) or is
    /// root: what the kernel's `in_group_or_capable` asks before it lets a
    /// chmod, or an ACL that sets the mode, keep the setgid bit.
    pub fn in_group_or_root(&self, gid: u32) -> bool {
        self.is_root() || self.in_group(gid)
    }

    /// Whether it has all of `want` on a node with `attr` whose access ACL
    /// is `acl` (as `jfs.get_acl` gives it, the owner, mask and other
    /// entries from the mode), by POSIX.1e's algorithm as Linux applies it
    /// (`posix_acl_permission`): root always; the owner by its entry; a
    /// named user by its entry within the mask; then the owning group and
    /// named groups it is in, within the mask: any one granting all of
    /// `want` grants, and being in one that does not refuses; then other.
    pub fn acl_allows(&self, attr: &Attr, acl: &[AclEntry], want: u32) -> bool {
        if self.is_root() || self.uid == attr.uid {
            return self.may(attr, want);
        }
        let perm = |tag: u16| acl.iter().find(|e| e.tag == tag).map(|e| e.perm as u32);
        let mask = perm(TAG_MASK).unwrap_or(7);
        let grants = |p: u32| p & mask & want == want;
        if let Some(e) = acl
            .iter()
            .find(|e| e.tag == TAG_USER && e.id == Some(self.uid))
        {
            return grants(e.perm as u32);
        }
        let mut in_a_group = false;
        for e in acl {
            let member = match e.tag {
                TAG_GROUP_OBJ => self.in_group(attr.gid),
                TAG_GROUP => e.id.is_some_and(|g| self.in_group(g)),
                _ => false,
            };
            if member {
                if grants(e.perm as u32) {
                    return true;
                }
                in_a_group = true;
            }
        }
        !in_a_group && perm(TAG_OTHER).unwrap_or(attr.mode & 7) & want == want
    }

    /// Whether it has all of `want` on a node by its owner, group and
    /// other bits (root always).
    pub fn may(&self, attr: &Attr, want: u32) -> bool {
        let bits = if self.is_root() {
            return true;
        } else if self.uid == attr.uid {
            attr.mode >> 6
        } else if self.gid == attr.gid || self.groups.contains(&attr.gid) {
            attr.mode >> 3
        } else {
            attr.mode
        };
        bits & want == want
    }

    /// Whether the sticky bit's rule lets it remove or rename `entry` of
    /// `dir` (the directory not sticky, or it owns one of them, or root):
    /// the rule beside the permission check, which is the mode bits' or
    /// the ACL's.
    pub fn sticky_allows(&self, dir: &Attr, entry: &Attr) -> bool {
        dir.mode & 0o1000 == 0 || self.is_root() || self.uid == dir.uid || self.uid == entry.uid
    }
}

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
mod tests;
