//! Paths resolved as Linux resolves them: split into names, walked from
//! the root with symlinks followed, the directory and name a call makes or
//! removes, and what calls answer for ".", ".." and the root.
use std::collections::VecDeque;

use super::{Direct, DirectResult};
use crate::meta::{Attr, NodeType};
use crate::vfs::Need;

/// Symlinks followed in one path before it fails with ELOOP (as Linux).
const MAX_LINKS: usize = 40;

/// Linux's longest path argument, its NUL included (longer: ENAMETOOLONG).
pub(super) const PATH_MAX: usize = libc::PATH_MAX as usize;

impl Direct {
    /// Entry `name` of directory `dir`, searched as this client. A miss is
    /// confirmed against the change log: a name another client made before
    /// this request is found (reads after writes, as S3 promises them; a
    /// mount's kernel caches misses instead).
    pub(super) async fn lookup(&self, dir: u64, name: &[u8]) -> DirectResult<Attr> {
        match self.lookup_cached(dir, name).await {
            Err(libc::ENOENT) => {
                self.vfs.ns.catch_up_with_log().await;
                self.lookup_cached(dir, name).await
            }
            found => found,
        }
    }

    /// Entry `name` of directory `dir` as this client's caches know it.
    async fn lookup_cached(&self, dir: u64, name: &[u8]) -> DirectResult<Attr> {
        let search = Need::Search(dir);
        self.vfs
            .checked(&self.who, search, self.vfs.lookup(dir, name))
            .await
    }

    /// Entry `name` of `parent`, its symlinks followed (a miss confirmed
    /// against the change log if `confirm`).
    pub(super) async fn lookup_following(
        &self,
        parent: u64,
        name: &[u8],
        confirm: bool,
    ) -> DirectResult<Attr> {
        let attr = match confirm {
            true => self.lookup(parent, name).await?,
            false => self.lookup_cached(parent, name).await?,
        };
        if attr.kind != NodeType::Symlink {
            return Ok(attr);
        }
        let target = self.vfs.readlink(attr.inode).await?;
        let start = match target.first() {
            Some(b'/') => self.vfs.config.root,
            _ => parent,
        };
        let start = self.vfs.getattr(start).await?;
        self.walk(vec![start], &target, true).await
    }

    /// The directory that holds `path`'s last component, and that name.
    /// A path ending in "." or "..", or naming the root, has no name to
    /// make or remove: once its directories are walked (their errors come
    /// first, as in Linux's walk), it answers what Linux answers that call.
    pub(super) async fn parent_of<'p>(
        &self,
        path: &'p [u8],
        dots: Dots,
    ) -> DirectResult<(u64, &'p [u8])> {
        if path.len() >= PATH_MAX {
            return Err(libc::ENAMETOOLONG);
        }
        let (dir, name) = split_last(path);
        let refusal = match name {
            b"" => Some(dots.root),
            b"." => Some(dots.dot),
            b".." => Some(dots.dotdot),
            _ if name.len() > 255 => Some(libc::ENAMETOOLONG),
            _ => None,
        };
        let dir = match name.is_empty() {
            true => self.resolve(b"", true).await?,
            false => self.resolve(dir, true).await?,
        };
        if dir.kind != NodeType::Dir {
            return Err(libc::ENOTDIR);
        }
        match refusal {
            Some(errno) => Err(errno),
            None => Ok((dir.inode, name)),
        }
    }

    /// Where an O_CREAT of `name` in `parent` makes its file: there, or
    /// where the symlinks it names lead (a dangling one's target).
    pub(super) async fn creation_target(
        &self,
        parent: u64,
        name: &[u8],
    ) -> DirectResult<(u64, Vec<u8>)> {
        let (mut parent, mut name) = (parent, name.to_vec());
        for _ in 0..MAX_LINKS {
            let attr = match self.lookup(parent, &name).await {
                Err(libc::ENOENT) => return Ok((parent, name)),
                found => found?,
            };
            if attr.kind != NodeType::Symlink {
                return Ok((parent, name));
            }
            let target = self.vfs.readlink(attr.inode).await?;
            let (dir, last) = split_last(&target);
            if matches!(last, b"" | b"." | b"..") {
                return Err(libc::EISDIR);
            }
            if last.len() > 255 {
                return Err(libc::ENAMETOOLONG);
            }
            let start = match target.first() {
                Some(b'/') => self.vfs.config.root,
                _ => parent,
            };
            let start = self.vfs.getattr(start).await?;
            let dir = self.walk(vec![start], dir, true).await?;
            if dir.kind != NodeType::Dir {
                return Err(libc::ENOTDIR);
            }
            (parent, name) = (dir.inode, last.to_vec());
        }
        Err(libc::ELOOP)
    }

    /// The node `path` names (from the root), symlinks followed on the
    /// way and, when `follow`, at the end.
    pub(super) async fn resolve(&self, path: &[u8], follow: bool) -> DirectResult<Attr> {
        if path.len() >= PATH_MAX {
            return Err(libc::ENAMETOOLONG);
        }
        let root = self.vfs.getattr(self.vfs.config.root).await?;
        // a trailing slash follows a last symlink and asks for a directory
        if trailing_slash(path) {
            let attr = self.walk(vec![root], path, true).await?;
            return match attr.kind {
                NodeType::Dir => Ok(attr),
                _ => Err(libc::ENOTDIR),
            };
        }
        self.walk(vec![root], path, follow).await
    }

    /// Walks `path` from the last directory of `stack` (the directories
    /// walked so far, the root first).
    async fn walk(&self, mut stack: Vec<Attr>, path: &[u8], follow: bool) -> DirectResult<Attr> {
        let root = self.vfs.config.root;
        let mut pending: VecDeque<Vec<u8>> = components(path).collect();
        let mut links = 0;
        while let Some(part) = pending.pop_front() {
            let dir = stack.last().expect("the walk keeps its root").clone();
            if dir.kind != NodeType::Dir {
                return Err(libc::ENOTDIR);
            }
            match part.as_slice() {
                b"." => continue,
                b".." => {
                    if dir.inode != root && stack.len() > 1 {
                        stack.pop();
                    } else if dir.inode != root {
                        let up = self.vfs.getattr(dir.parent).await?;
                        stack = vec![up];
                    }
                    continue;
                }
                _ => {}
            }
            let attr = match self.pinned.get() {
                Some((name, inode)) if dir.inode == root && *name == part => {
                    self.vfs.getattr(*inode).await?
                }
                _ => self.lookup(dir.inode, &part).await?,
            };
            if attr.kind == NodeType::Symlink && (follow || !pending.is_empty()) {
                links += 1;
                if links > MAX_LINKS {
                    return Err(libc::ELOOP);
                }
                let target = self.vfs.readlink(attr.inode).await?;
                if target.first() == Some(&b'/') {
                    stack = vec![self.vfs.getattr(root).await?];
                }
                for part in components(&target).collect::<Vec<_>>().into_iter().rev() {
                    pending.push_front(part);
                }
                continue;
            }
            stack.push(attr);
        }
        Ok(stack.pop().expect("the walk keeps its root"))
    }
}

/// What a call answers when its path ends in "." (`dot`) or ".." (`dotdot`)
/// or names the root (`root`), as Linux answers it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Dots {
    dot: i32,
    dotdot: i32,
    root: i32,
}

impl Dots {
    /// mkdir, mknod, symlink, link: the name exists.
    pub(super) const MAKE: Dots = Dots::all(libc::EEXIST);
    /// unlink: it is a directory.
    pub(super) const UNLINK: Dots = Dots::all(libc::EISDIR);
    /// rmdir: "." is invalid, ".." is not empty, the root is busy.
    pub(super) const RMDIR: Dots = Dots {
        dot: libc::EINVAL,
        dotdot: libc::ENOTEMPTY,
        root: libc::EBUSY,
    };
    /// rename, from or to: busy.
    pub(super) const RENAME: Dots = Dots::all(libc::EBUSY);
    /// open: a directory (opened by walking the whole path).
    pub(super) const OPEN: Dots = Dots::all(libc::EISDIR);

    const fn all(errno: i32) -> Dots {
        Dots {
            dot: errno,
            dotdot: errno,
            root: errno,
        }
    }
}

/// Whether `path` names something and ends in "/" (Linux then asks for a
/// directory).
pub(super) fn trailing_slash(path: &[u8]) -> bool {
    path.last() == Some(&b'/') && !trim_slashes(path).is_empty()
}

/// `path` without leading and trailing slashes.
fn trim_slashes(path: &[u8]) -> &[u8] {
    let start = path.iter().position(|&c| c != b'/').unwrap_or(path.len());
    let end = path
        .iter()
        .rposition(|&c| c != b'/')
        .map_or(start, |i| i + 1);
    &path[start..end.max(start)]
}

/// `path` (slashes around it trimmed) as the directory part and its last
/// name (empty for the root).
fn split_last(path: &[u8]) -> (&[u8], &[u8]) {
    let trimmed = trim_slashes(path);
    match trimmed.iter().rposition(|&c| c == b'/') {
        Some(i) => (&trimmed[..i], &trimmed[i + 1..]),
        None => (&b""[..], trimmed),
    }
}

/// The names along `path`, empty ones (repeated slashes) left out.
fn components(path: &[u8]) -> impl Iterator<Item = Vec<u8>> + '_ {
    path.split(|&c| c == b'/')
        .filter(|p| !p.is_empty())
        .map(<[u8]>::to_vec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_split_into_their_names() {
        assert_eq!(trim_slashes(b"//a/b//"), b"a/b");
        assert_eq!(trim_slashes(b"/"), b"");
        assert_eq!(trim_slashes(b""), b"");
        assert_eq!(split_last(b"/a//b/c/"), (&b"a//b"[..], &b"c"[..]));
        assert_eq!(split_last(b"c"), (&b""[..], &b"c"[..]));
        assert_eq!(split_last(b"///"), (&b""[..], &b""[..]));
        let names: Vec<_> = components(b"/a//b/./c/").collect();
        assert_eq!(
            names,
            vec![b"a".to_vec(), b"b".to_vec(), b".".to_vec(), b"c".to_vec()]
        );
    }
}
