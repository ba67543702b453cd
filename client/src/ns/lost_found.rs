//! Creates answered under a lease and refused at their commit (the lease
//! was lost and the name taken meanwhile, or a quota limit was set): the
//! file is kept in `/lost+found` (root's, mode 0700, made when missing),
//! its data committed there as it would have been under its name, and
//! every later fsync and close of it answers EIO, as does the next fsync
//! of any directory: what was answered as done is never only logged. On a
//! volume over shards, a node of a shard other than the root's is kept in
//! `lost+found` of its shard root (the directory below which its shard
//! begins): a node never leaves its shard.
use super::{errno, Namespace, NsResult, VOLUME_ROOT};
use crate::meta::{LeasedCreate, NewNode, NodeType};

/// The directory in the volume's root that keeps refused creates.
pub const LOST_FOUND: &[u8] = b"lost+found";

/// The name a refused create of `name` (inode `inode`) in directory `dir`
/// is kept under: unique by its inode, at most 255 bytes.
pub fn lost_name(dir: u64, inode: u64, name: &[u8]) -> Vec<u8> {
    let mut kept = format!("{dir}-{inode}-").into_bytes();
    let room = 255 - kept.len();
    kept.extend_from_slice(&name[..name.len().min(room)]);
    kept
}

impl Namespace {
    /// Create `create` in `dir`, answered here, was refused at its commit
    /// with `refused`: the node is made in `/lost+found` instead (so that
    /// its data, still to be committed, is kept), its handles answer EIO
    /// at every fsync and close, and the mount counts a loss.
    pub(super) async fn keep_refused_create(&self, dir: u64, create: &LeasedCreate, refused: i32) {
        self.meta_of(dir).lost_an_answer();
        self.attrs.forget_entry(dir, &create.name);
        self.attrs.forget(create.inode);
        if let Some(mount) = self.mount() {
            mount.create_lost(create.inode);
        }
        let name = String::from_utf8_lossy(&create.name).into_owned();
        match self.make_in_lost_found(dir, create).await {
            Ok(kept) => tracing::error!(
                "directory {dir}: the create of {name:?} (inode {}) answered here was refused \
                 at its commit (errno {refused}: its name was taken by another mount after \
                 the lease was lost, or a quota limit was set): kept as /lost+found/{}; its \
                 open handles get EIO at fsync and close",
                create.inode,
                String::from_utf8_lossy(&kept)
            ),
            Err(e) => tracing::error!(
                "directory {dir}: the create of {name:?} (inode {}) answered here was refused \
                 at its commit (errno {refused}) and could not be kept in /lost+found either \
                 (errno {e}): the file and its data are lost; its open handles get EIO",
                create.inode
            ),
        }
    }

    /// Makes `create`'s node in `/lost+found`; the name it got there.
    async fn make_in_lost_found(&self, dir: u64, create: &LeasedCreate) -> NsResult<Vec<u8>> {
        let lost_found = self.lost_found_dir(dir).await?;
        let kept = lost_name(dir, create.inode, &create.name);
        self.meta_of(lost_found)
            .mknod(lost_found, &kept, &create.node(), create.inode)
            .await
            .map_err(errno)?;
        Ok(kept)
    }

    /// The directory that keeps `lost+found` for nodes of `dir`'s shard:
    /// the volume's root, or the shard root `dir` is below.
    async fn lost_found_home(&self, dir: u64) -> NsResult<u64> {
        let mut at = dir;
        // (a shard root's depth is bounded by PATH_MAX's worth of names)
        for _ in 0..4096 {
            if self.parts.same(at, VOLUME_ROOT) {
                return Ok(VOLUME_ROOT);
            }
            let parent = self.meta_of(at).getattr(at).await.map_err(errno)?.parent;
            if !self.parts.same(at, parent) {
                return Ok(at);
            }
            at = parent;
        }
        Err(libc::ELOOP)
    }

    /// The inode of `lost+found` for nodes of `dir`'s shard, made (root's,
    /// 0700) when missing. One that is not a directory of root's, mode
    /// 0700, is not used: what it keeps would be readable by others than
    /// the files' owners.
    async fn lost_found_dir(&self, dir: u64) -> NsResult<u64> {
        let home = self.lost_found_home(dir).await?;
        let meta = self.meta_of(home);
        let attr = match meta.lookup(home, LOST_FOUND).await {
            Ok(attr) => attr,
            Err(crate::meta::MetaError::Errno(libc::ENOENT)) => {
                let inode = self.new_inode(home).await?;
                let node = NewNode {
                    kind: NodeType::Dir,
                    mode: 0o700,
                    umask: 0,
                    uid: 0,
                    gid: 0,
                    rdev: 0,
                    target: None,
                };
                let made = meta.mknod(home, LOST_FOUND, &node, inode).await;
                let attr = match made {
                    Ok(attr) => attr,
                    // (made meanwhile by another mount)
                    Err(crate::meta::MetaError::Errno(libc::EEXIST)) => {
                        meta.lookup(home, LOST_FOUND).await.map_err(errno)?
                    }
                    Err(e) => return Err(errno(e)),
                };
                self.attrs.forget_entry(home, LOST_FOUND);
                self.leased_entry_made(home, LOST_FOUND, &attr);
                attr
            }
            Err(e) => return Err(errno(e)),
        };
        if attr.kind != NodeType::Dir || attr.uid != 0 || attr.mode & 0o7777 != 0o700 {
            tracing::error!(
                "lost+found of directory {home} is not root's directory of mode 0700 (uid {}, \
                 mode {:o}): refused creates are not kept there",
                attr.uid,
                attr.mode
            );
            return Err(libc::EACCES);
        }
        Ok(attr.inode)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_name_is_unique_by_inode_and_fits_a_name() {
        assert_eq!(lost_name(7, 42, b"file"), b"7-42-file".to_vec());
        let long = vec![b'n'; 255];
        let kept = lost_name(u64::MAX, u64::MAX, &long);
        assert_eq!(kept.len(), 255);
        assert!(kept.starts_with(format!("{}-{}-n", u64::MAX, u64::MAX).as_bytes()));
    }
}
