//! Names in directories: stat, listing, making (mkdir, symlink) and
//! reading links, unlinking, removing directories, renaming, and syncing
//! a directory.
use super::paths::{trailing_slash, Dots, PATH_MAX};
use super::{Direct, DirectResult};
use crate::meta::{Attr, NodeType};
use crate::vfs::{ListedEntry, Need, NewNode};

impl Direct {
    /// The attributes of `path` (of the link itself when `follow` is false).
    pub async fn stat(&self, path: &[u8], follow: bool) -> DirectResult<Attr> {
        self.resolve(path, follow).await
    }

    /// The entries of directory `path` with their attributes.
    pub async fn list(&self, path: &[u8]) -> DirectResult<Vec<(Vec<u8>, Attr)>> {
        let dir = self.resolve(path, true).await?;
        let fh = self
            .vfs
            .checked(
                &self.who,
                Need::List(dir.inode),
                self.vfs.opendir(dir.inode),
            )
            .await?;
        // (a fill that always takes an entry makes one call read them all)
        let mut entries = Vec::new();
        let listed = self
            .vfs
            .readdir(fh, 0, |e: &ListedEntry| {
                if e.name != b"." && e.name != b".." {
                    entries.push((e.name.clone(), e.attr.clone()));
                }
                true
            })
            .await;
        self.vfs.releasedir(fh);
        listed.map(|()| entries)
    }

    /// mkdir(2) of `path` with `mode` (the umask applied).
    pub async fn mkdir(&self, path: &[u8], mode: u32) -> DirectResult<Attr> {
        self.make(path, NodeType::Dir, mode, None).await
    }

    /// mkdir of `path` as a directory of shard `shard` (mode 0700, the
    /// client's user's): the gateway's own there, in its directory
    /// `.jfs-gateway` (the database refuses it anywhere else).
    pub async fn mkdir_on_shard(&self, path: &[u8], shard: u16) -> DirectResult<Attr> {
        let (parent, name) = self.parent_of(path, Dots::MAKE).await?;
        let owner = (self.who.uid, self.who.gid);
        let make = self.vfs.mkdir_for_gateway(parent, name, shard, owner);
        self.vfs
            .checked(&self.who, Need::Create(parent), make)
            .await
    }

    /// symlink(2): `path` made a link to `target`.
    pub async fn symlink(&self, target: &[u8], path: &[u8]) -> DirectResult<Attr> {
        // (Linux takes the target in first: empty is ENOENT, PATH_MAX
        // bytes or more ENAMETOOLONG, whatever the path)
        if target.is_empty() {
            return Err(libc::ENOENT);
        }
        if target.len() >= PATH_MAX {
            return Err(libc::ENAMETOOLONG);
        }
        self.make(path, NodeType::Symlink, 0o777, Some(target))
            .await
    }

    /// The target of symlink `path`.
    pub async fn readlink(&self, path: &[u8]) -> DirectResult<Vec<u8>> {
        let attr = self.resolve(path, false).await?;
        if attr.kind != NodeType::Symlink {
            return Err(libc::EINVAL);
        }
        self.vfs.readlink(attr.inode).await
    }

    async fn make(
        &self,
        path: &[u8],
        kind: NodeType,
        mode: u32,
        target: Option<&[u8]>,
    ) -> DirectResult<Attr> {
        let (parent, name) = self.parent_of(path, Dots::MAKE).await?;
        // a trailing slash asks for a directory: only mkdir makes one
        if kind != NodeType::Dir && trailing_slash(path) {
            return match self.lookup(parent, name).await {
                Ok(_) => Err(libc::EEXIST),
                Err(libc::ENOENT) => Err(libc::ENOENT),
                Err(e) => Err(e),
            };
        }
        let node = self.new_node(kind, mode, target);
        let make = self.vfs.mknod(parent, name, &node);
        match self
            .vfs
            .checked(&self.who, Need::Create(parent), make)
            .await
        {
            // an existing name is EEXIST even in a directory the caller
            // may not write, as Linux says (makedirs relies on it)
            Err(libc::EACCES) if self.lookup(parent, name).await.is_ok() => Err(libc::EEXIST),
            made => made,
        }
    }

    pub(super) fn new_node<'a>(
        &self,
        kind: NodeType,
        mode: u32,
        target: Option<&'a [u8]>,
    ) -> NewNode<'a> {
        NewNode {
            kind,
            mode: mode & 0o7777,
            umask: if kind == NodeType::Symlink {
                0
            } else {
                self.umask
            },
            uid: self.who.uid,
            gid: self.who.gid,
            rdev: 0,
            target,
        }
    }

    /// unlink(2) of `path` (EISDIR for a directory, as Linux says EISDIR).
    pub async fn unlink(&self, path: &[u8]) -> DirectResult<()> {
        let (parent, name) = self.parent_of(path, Dots::UNLINK).await?;
        if trailing_slash(path) {
            let found = self.lookup(parent, name).await?;
            return Err(match found.kind {
                NodeType::Dir => libc::EISDIR,
                _ => libc::ENOTDIR,
            });
        }
        let need = Need::Remove { parent, name };
        self.vfs
            .checked(&self.who, need, self.vfs.unlink(parent, name))
            .await
    }

    /// rmdir(2) of `path`.
    pub async fn rmdir(&self, path: &[u8]) -> DirectResult<()> {
        let (parent, name) = self.parent_of(path, Dots::RMDIR).await?;
        let need = Need::Remove { parent, name };
        self.vfs
            .checked(&self.who, need, self.vfs.rmdir(parent, name))
            .await
    }

    /// rename(2) of `from` to `to` (replacing what `to` names, atomically).
    pub async fn rename(&self, from: &[u8], to: &[u8]) -> DirectResult<()> {
        let (parent, name) = self.parent_of(from, Dots::RENAME).await?;
        let (new_parent, new_name) = self.parent_of(to, Dots::RENAME).await?;
        // a trailing slash on either side asks for a directory to move
        if (trailing_slash(from) || trailing_slash(to))
            && self.lookup(parent, name).await?.kind != NodeType::Dir
        {
            return Err(libc::ENOTDIR);
        }
        let need = Need::moving(parent, name, new_parent, new_name);
        let op = self.vfs.rename(parent, name, new_parent, new_name, 0);
        self.vfs.checked(&self.who, need, op).await
    }

    /// fsync(2) of directory `path`: every change committed before it
    /// (its entries', and any other) is durable when this returns.
    pub async fn sync_dir(&self, path: &[u8]) -> DirectResult<()> {
        let inode = self.resolve(path, true).await?.inode;
        let fh = self.vfs.opendir(inode).await?;
        let synced = self.vfs.fsync(fh).await;
        self.vfs.releasedir(fh);
        synced
    }
}
