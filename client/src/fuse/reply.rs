//! Answers to the kernel: each kind of reply takes the VFS's result, and errors become errnos in one place.
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use fuser::{
    FileHandle, FopenFlags, Generation, INodeNo, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory,
    ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyLock, ReplyLseek, ReplyOpen, ReplyStatfs,
    ReplyWrite, ReplyXattr,
};

use super::convert::{err, file_attr, kind};
use crate::vfs::{Attr, ListedEntry, LockRange, Need, Statfs, Vfs, VfsResult, Who};

/// A reply that answers with a value of the VFS, or with its errno.
pub(super) trait Answer: Sized {
    type Value;
    /// The answer when the request succeeded.
    fn give(self, vfs: &Vfs, value: Self::Value);
    fn refuse(self, errno: fuser::Errno);

    /// Answers with `r`: its value, or its errno (counted as a failed request).
    fn answer(self, vfs: &Vfs, r: VfsResult<Self::Value>) {
        match r {
            Ok(value) => self.give(vfs, value),
            Err(e) => self.refuse(err(e)),
        }
    }

    /// Answers with what `op` gives once `who` may do it (`Vfs::checked`:
    /// a squashed caller is checked for its squashed identity).
    async fn answer_checked(
        self,
        vfs: &Vfs,
        who: &Who,
        need: Need<'_>,
        op: impl std::future::Future<Output = VfsResult<Self::Value>>,
    ) {
        self.answer(vfs, vfs.checked(who, need, op).await)
    }
}

/// `Answer` for a reply type: what its value is and how it is given.
macro_rules! answer {
    ($reply:ty, $value:ty, |$this:ident, $vfs:ident, $v:ident| $give:expr) => {
        impl Answer for $reply {
            type Value = $value;
            fn give(self, $vfs: &Vfs, $v: $value) {
                let $this = self;
                $give
            }
            fn refuse(self, errno: fuser::Errno) {
                self.error(errno)
            }
        }
    };
}

answer!(ReplyAttr, Attr, |r, vfs, a| r
    .attr(&vfs.config.attr_ttl, &file_attr(vfs, &a)));
answer!(ReplyEntry, Attr, |r, vfs, a| r.entry_with_ttls(
    &vfs.config.attr_ttl,
    &vfs.config.entry_ttl_of(a.kind),
    &file_attr(vfs, &a),
    Generation(0),
));
answer!(ReplyCreate, (u64, Attr), |r, vfs, opened| {
    let (fh, a) = opened;
    r.created(
        &vfs.config.entry_ttl_of(a.kind),
        &file_attr(vfs, &a),
        Generation(0),
        FileHandle(fh),
        FopenFlags::empty(),
    )
});
answer!(ReplyEmpty, (), |r, _vfs, _nothing| r.ok());
answer!(ReplyData, bytes::Bytes, |r, _vfs, data| r.data(&data));
answer!(ReplyWrite, u32, |r, _vfs, n| r.written(n));
answer!(ReplyLseek, i64, |r, _vfs, at| r.offset(at));
answer!(ReplyOpen, (u64, FopenFlags), |r, _vfs, opened| r
    .opened(FileHandle(opened.0), opened.1));
answer!(ReplyLock, LockRange, |r, _vfs, l| r
    .locked(l.start, l.end, l.typ, l.pid));
answer!(ReplyStatfs, Statfs, |r, _vfs, s| r.statfs(
    s.total_space / 4096,
    s.avail_space / 4096,
    s.avail_space / 4096,
    s.used_inodes + s.avail_inodes,
    s.avail_inodes,
    4096,
    crate::vfs::NAME_MAX as u32,
    4096,
));

/// A page of a directory.
pub(super) trait Listing {
    /// Adds entry `e`; false when the reply is full (fuser's `add` says
    /// true then, and leaves the entry out): the listing stops there.
    fn take(&mut self, vfs: &Vfs, e: &ListedEntry) -> bool;
    fn finish(self, r: VfsResult<()>);
}

impl Listing for ReplyDirectory {
    fn take(&mut self, vfs: &Vfs, e: &ListedEntry) -> bool {
        !self.add(
            INodeNo(vfs.kernel_ino(e.attr.inode)),
            e.offset,
            kind(e.attr.kind),
            OsStr::from_bytes(&e.name),
        )
    }
    fn finish(self, r: VfsResult<()>) {
        match r {
            Ok(()) => self.ok(),
            Err(e) => self.error(err(e)),
        }
    }
}

impl Listing for ReplyDirectoryPlus {
    fn take(&mut self, vfs: &Vfs, e: &ListedEntry) -> bool {
        !self.add(
            INodeNo(vfs.kernel_ino(e.attr.inode)),
            e.offset,
            OsStr::from_bytes(&e.name),
            // (one time for the name and the attributes: the shorter)
            &vfs.config
                .entry_ttl_of(e.attr.kind)
                .min(vfs.config.attr_ttl),
            &file_attr(vfs, &e.attr),
            Generation(0),
        )
    }
    fn finish(self, r: VfsResult<()>) {
        match r {
            Ok(()) => self.ok(),
            Err(e) => self.error(err(e)),
        }
    }
}

/// An extended attribute's value (or list): its size when the caller asks
/// for that (size 0), ERANGE when it does not fit.
/// Extended attribute names as listxattr(2) gives them: each ending in NUL.
pub(super) fn nul_terminated(names: Vec<Vec<u8>>) -> Vec<u8> {
    names
        .iter()
        .flat_map(|n| n.iter().copied().chain([0]))
        .collect()
}

pub(super) fn reply_xattr(reply: ReplyXattr, size: u32, r: VfsResult<Vec<u8>>) {
    match r {
        Ok(v) if size == 0 => reply.size(v.len() as u32),
        Ok(v) if v.len() > size as usize => reply.error(err(libc::ERANGE)),
        Ok(v) => reply.data(&v),
        Err(e) => reply.error(err(e)),
    }
}

/// A lookup's answer: a missing name is an entry with inode 0, which the
/// kernel keeps as missing for the TTL, when the mount follows the change
/// log (it then makes the kernel forget the name when another mount makes it).
pub(super) fn reply_lookup(
    vfs: &Vfs,
    reply: ReplyEntry,
    parent: u64,
    name: &[u8],
    r: VfsResult<Attr>,
) {
    match (r, vfs.missing_name_ttl(parent, name)) {
        (Err(libc::ENOENT), Some(ttl)) => {
            reply.entry(&ttl, &super::convert::missing_name(), Generation(0))
        }
        (r, _) => reply.answer(vfs, r),
    }
}
