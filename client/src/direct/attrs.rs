//! Attributes: changes (chmod, truncate, utimes, chown), extended
//! attributes, and the volume's size and use.
use super::{Direct, DirectResult};
use crate::meta::{Attr, NodeType, SetAttr};
use crate::vfs::Need;

impl Direct {
    /// Changes attributes of `path` (chmod, truncate, utimes; owners change
    /// through [`Direct::chown`], which also clears set-id bits: ids here
    /// are EINVAL). A setgid bit in a chmod by a caller outside the node's
    /// group is cleared, as the kernel clears it.
    pub async fn set_attr(&self, path: &[u8], change: &SetAttr) -> DirectResult<Attr> {
        if change.uid.is_some() || change.gid.is_some() {
            return Err(libc::EINVAL);
        }
        let attr = self.resolve(path, true).await?;
        let mut change = *change;
        if let Some(mode) = change.mode.filter(|m| m & libc::S_ISGID != 0) {
            // (its group as it is now: another client may have changed it)
            let now = self.vfs.getattr_fresh(attr.inode).await?;
            if !self.vfs.may_keep_setgid(&self.who, now.gid) {
                change.mode = Some(mode & !libc::S_ISGID);
            }
        }
        let need = Need::set_attr(attr.inode, &change);
        self.vfs
            .checked(&self.who, need, self.vfs.setattr(attr.inode, &change))
            .await
    }

    /// chown(2) of `path` (None leaves an id as it is). As in Linux, a chown
    /// of anything but a directory, by anyone, also clears its setuid bit,
    /// and its setgid bit where group execution is on: in the same change,
    /// which needs only what the chown needs.
    pub async fn chown(
        &self,
        path: &[u8],
        uid: Option<u32>,
        gid: Option<u32>,
    ) -> DirectResult<Attr> {
        let attr = self.resolve(path, true).await?;
        let chown = SetAttr {
            uid,
            gid,
            ..SetAttr::default()
        };
        let need = Need::set_attr(attr.inode, &chown);
        let mut change = chown;
        if attr.kind != NodeType::Dir {
            let mode = self.vfs.getattr_fresh(attr.inode).await?.mode & 0o7777;
            let group_exec = mode & libc::S_IXGRP != 0;
            let kill = (mode & libc::S_ISUID) | if group_exec { mode & libc::S_ISGID } else { 0 };
            if kill != 0 {
                change.mode = Some(mode & !kill);
            }
        }
        self.vfs
            .checked(&self.who, need, self.vfs.setattr(attr.inode, &change))
            .await
    }

    /// The value of extended attribute `name` of `path` (ENODATA: none).
    pub async fn get_xattr(&self, path: &[u8], name: &[u8]) -> DirectResult<Vec<u8>> {
        let inode = self.resolve(path, true).await?.inode;
        let need = Need::xattr(inode, name, false);
        self.vfs
            .checked(&self.who, need, self.vfs.getxattr(inode, name))
            .await
    }

    /// Sets extended attribute `name` of `path` to `value`.
    pub async fn set_xattr(&self, path: &[u8], name: &[u8], value: &[u8]) -> DirectResult<()> {
        let inode = self.resolve(path, true).await?.inode;
        let need = Need::xattr(inode, name, true);
        self.vfs
            .checked(
                &self.who,
                need,
                self.vfs.setxattr(self.caller(), inode, name, value, 0),
            )
            .await
    }

    /// The volume's size and use (of `subdir`'s quota when it has one).
    pub async fn statfs(&self) -> DirectResult<crate::meta::Statfs> {
        self.vfs.statfs().await
    }
}
