//! FUSE adapter (fuser): the `Filesystem` impl, one short method per kind of kernel request (most of it signature) that calls the VFS and replies.
//! Running a request (on the FUSE thread that read it, with its runtime;
//! who it acts as; the kernel's inode numbers) is in `request`, answering
//! it in `reply`, the session (mount options, threads, kernel
//! notifications) in `session`, mount points in `mountpoint`, the
//! conversions between the kernel's types and the VFS's in `convert`.
mod convert;
pub mod mountpoint;
mod reply;
mod request;
pub mod session;

use convert::{caller, data_op, lock_range, new_node, node_type_of_mode, opening, set_attr};
use reply::{nul_terminated, reply_lookup, reply_xattr, Answer};
pub use request::JfsFuse;

use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::SystemTime;

use fuser::{
    AccessFlags, CopyFileRangeFlags, Errno, FileHandle, Filesystem, FopenFlags, INodeNo,
    KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyLock, ReplyLseek, ReplyOpen,
    ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};

use crate::metrics::METRICS;

use crate::vfs::{Need, NewNode, NodeType, CONTROL_INODE};

impl Filesystem for JfsFuse {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> io::Result<()> {
        session::offer(&self.vfs, config);
        Ok(())
    }

    fn destroy(&mut self) {
        let vfs = self.vfs.clone();
        self.rt.block_on(async move { vfs.flush_all().await });
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let (who, parent, name) = (self.who(req), self.ino(parent), name.as_bytes());
        if name == b"." || name == b".." {
            // (asked only to decode a file handle: see Vfs::lookup_by_handle)
            self.run_here("lookup", move |vfs| async move {
                reply.answer(&vfs, vfs.lookup_by_handle(parent, name).await)
            });
            return;
        }
        self.run_here("lookup", move |vfs| async move {
            let r = vfs.checked(&who, Need::Search(parent), vfs.lookup(parent, name));
            reply_lookup(&vfs, reply, parent, name, r.await)
        });
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let ino = self.ino(ino);
        self.run_here("getattr", move |vfs| async move {
            reply.answer(&vfs, vfs.getattr(ino).await)
        });
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let (who, inode) = (self.who(req), self.ino(ino));
        let change = set_attr(mode, uid, gid, size, atime, mtime);
        self.run_here("setattr", move |vfs| async move {
            let need = Need::set_attr(inode, &change);
            let op = vfs.setattr(inode, &change);
            reply.answer_checked(&vfs, &who, need, op).await
        });
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let ino = self.ino(ino);
        self.run_here("readlink", move |vfs| async move {
            reply.answer(&vfs, vfs.readlink(ino).await.map(bytes::Bytes::from))
        });
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let Some(kind) = node_type_of_mode(mode) else {
            return reply.error(Errno::EINVAL);
        };
        let who = self.who(req);
        let node = NewNode {
            rdev,
            ..new_node(&who, kind, mode, umask)
        };
        self.make("mknod", who, parent, name.as_bytes(), node, reply);
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let who = self.who(req);
        let node = new_node(&who, NodeType::Dir, mode, umask);
        self.make("mkdir", who, parent, name.as_bytes(), node, reply);
    }

    fn symlink(&self, req: &Request, parent: INodeNo, name: &OsStr, to: &Path, reply: ReplyEntry) {
        let who = self.who(req);
        let target = Some(to.as_os_str().as_bytes());
        let node = NewNode {
            target,
            ..new_node(&who, NodeType::Symlink, 0o777, 0)
        };
        self.make("symlink", who, parent, name.as_bytes(), node, reply);
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let (who, parent, name) = (self.who(req), self.ino(parent), name.as_bytes());
        self.run_here("unlink", move |vfs| async move {
            let need = Need::Remove { parent, name };
            let op = vfs.unlink(parent, name);
            reply.answer_checked(&vfs, &who, need, op).await
        });
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let (who, parent, name) = (self.who(req), self.ino(parent), name.as_bytes());
        self.run_here("rmdir", move |vfs| async move {
            let need = Need::Remove { parent, name };
            let op = vfs.rmdir(parent, name);
            reply.answer_checked(&vfs, &who, need, op).await
        });
    }

    fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        new_parent: INodeNo,
        new_name: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let (who, parent, name) = (self.who(req), self.ino(parent), name.as_bytes());
        let (new_parent, new_name) = (self.ino(new_parent), new_name.as_bytes());
        self.run_here("rename", move |vfs| async move {
            let need = Need::moving(parent, name, new_parent, new_name);
            let rename = vfs.rename(parent, name, new_parent, new_name, flags.bits());
            reply.answer_checked(&vfs, &who, need, rename).await
        });
    }

    fn link(&self, req: &Request, ino: INodeNo, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let (who, ino, name) = (self.who(req), self.ino(ino), name.as_bytes());
        let parent = self.ino(parent);
        self.run_here("link", move |vfs| async move {
            let link = vfs.link(ino, parent, name);
            let need = Need::Create(parent);
            reply.answer_checked(&vfs, &who, need, link).await
        });
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let (who, control, inode) = (self.who(req), ino.0 == CONTROL_INODE, self.ino(ino));
        let (write, need, how) = opening(inode, flags, control);
        self.run_here("open", move |vfs| async move {
            let open = async { vfs.open(inode, write).await.map(|(fh, _)| (fh, how)) };
            match control {
                true => reply.answer(&vfs, open.await),
                false => reply.answer_checked(&vfs, &who, need, open).await,
            }
        });
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let (who, parent, name) = (self.who(req), self.ino(parent), name.as_bytes());
        let node = new_node(&who, NodeType::File, mode, umask);
        self.run_here("create", move |vfs| async move {
            let create = vfs.create(parent, name, &node);
            let need = Need::Create(parent);
            reply.answer_checked(&vfs, &who, need, create).await
        });
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let (control, op) = data_op(ino, "read");
        self.run_here(op, move |vfs| async move {
            let r = vfs.read(fh.0, offset, size).await;
            if let (Ok(data), false) = (&r, control) {
                METRICS.fuse_read_bytes.inc_by(data.len() as u64);
            }
            reply.answer(&vfs, r)
        });
    }

    fn write(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let caller = caller(req);
        let (control, op) = data_op(ino, "write");
        self.run_here(op, move |vfs| async move {
            // the request's buffer is borrowed: the write completes on this thread
            let r = vfs.write(fh.0, offset, data, caller).await;
            if let (Ok(n), false) = (&r, control) {
                METRICS.fuse_written_bytes.inc_by(u64::from(*n));
            }
            reply.answer(&vfs, r)
        });
    }

    /// A close(2): the pending writes are committed, then the closing
    /// process's locks of the file go (POSIX: any close drops them).
    fn flush(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        let ino = self.ino(ino);
        self.run_here("flush", move |vfs| async move {
            let flushed = vfs.flush(fh.0).await;
            let unlocked = vfs.unlock_owner(ino, owner.0).await;
            reply.answer(&vfs, flushed.and(unlocked))
        });
    }

    /// The last close of an open file; one that was flock'd names its
    /// lock owner, whose locks go.
    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let ino = self.ino(ino);
        self.run_here("release", move |vfs| async move {
            let unlocked = match lock_owner {
                Some(owner) => vfs.unlock_owner(ino, owner.0).await,
                None => Ok(()),
            };
            let released = vfs.release(fh.0).await;
            reply.answer(&vfs, released.and(unlocked))
        });
    }

    fn getlk(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        pid: u32,
        reply: ReplyLock,
    ) {
        let (ino, range) = (self.ino(ino), lock_range(typ, start, end, pid));
        self.run_here("getlk", move |vfs| async move {
            reply.answer(&vfs, vfs.getlk(ino, owner.0, &range).await)
        });
    }

    fn setlk(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        pid: u32,
        sleep: bool,
        reply: ReplyEmpty,
    ) {
        let range = lock_range(typ, start, end, pid);
        self.set_lock(ino, fh, owner, range, sleep, req.pid(), reply);
    }

    fn fsync(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, _data: bool, reply: ReplyEmpty) {
        self.run_here("fsync", move |vfs| async move {
            reply.answer(&vfs, vfs.fsync(fh.0).await)
        });
    }

    fn opendir(&self, req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let (who, dir) = (self.who(req), self.ino(ino));
        self.run_here("opendir", move |vfs| async move {
            let open = async { vfs.opendir(dir).await.map(|fh| (fh, FopenFlags::empty())) };
            reply
                .answer_checked(&vfs, &who, Need::List(dir), open)
                .await
        });
    }

    fn readdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        at: u64,
        reply: ReplyDirectory,
    ) {
        self.list("readdir", fh, at, reply);
    }

    fn readdirplus(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        at: u64,
        reply: ReplyDirectoryPlus,
    ) {
        self.list("readdirplus", fh, at, reply);
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.vfs.releasedir(fh.0);
        reply.ok();
    }

    fn fsyncdir(&self, req: &Request, ino: INodeNo, fh: FileHandle, data: bool, reply: ReplyEmpty) {
        self.fsync(req, ino, fh, data, reply);
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        self.run_here("statfs", move |vfs| async move {
            reply.answer(&vfs, vfs.statfs().await)
        });
    }

    fn setxattr(
        &self,
        req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        let Some(reply) = self.xattrs_served("setxattr", reply, ReplyEmpty::error) else {
            return;
        };
        let (who, inode, name) = (self.who(req), self.ino(ino), name.as_bytes());
        let caller = caller(req);
        self.run_here("setxattr", move |vfs| async move {
            let set = vfs.setxattr(caller, inode, name, value, flags);
            let need = Need::xattr(inode, name, true);
            reply.answer_checked(&vfs, &who, need, set).await
        });
    }

    fn getxattr(&self, req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let Some(reply) = self.xattrs_served("getxattr", reply, ReplyXattr::error) else {
            return;
        };
        let (who, inode, name) = (self.who(req), self.ino(ino), name.as_bytes());
        self.run_here("getxattr", move |vfs| async move {
            let need = Need::xattr(inode, name, false);
            let got = vfs.checked(&who, need, vfs.getxattr(inode, name)).await;
            reply_xattr(reply, size, got)
        });
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let Some(reply) = self.xattrs_served("listxattr", reply, ReplyXattr::error) else {
            return;
        };
        let ino = self.ino(ino);
        self.run_here("listxattr", move |vfs| async move {
            reply_xattr(reply, size, vfs.listxattr(ino).await.map(nul_terminated))
        });
    }

    fn removexattr(&self, req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let Some(reply) = self.xattrs_served("removexattr", reply, ReplyEmpty::error) else {
            return;
        };
        let (who, inode, name) = (self.who(req), self.ino(ino), name.as_bytes());
        self.run_here("removexattr", move |vfs| async move {
            let remove = vfs.removexattr(inode, name);
            let need = Need::xattr(inode, name, true);
            reply.answer_checked(&vfs, &who, need, remove).await
        });
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        // the kernel checks permissions itself (default_permissions)
        reply.ok();
    }

    fn fallocate(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        self.run_here("fallocate", move |vfs| async move {
            reply.answer(&vfs, vfs.fallocate(fh.0, offset, length, mode).await)
        });
    }

    /// SEEK_DATA and SEEK_HOLE (the kernel handles the other whences).
    fn lseek(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        at: i64,
        whence: i32,
        reply: ReplyLseek,
    ) {
        self.run_here("lseek", move |vfs| async move {
            reply.answer(&vfs, vfs.seek_data(fh.0, at, whence).await)
        });
    }

    /// copy_file_range as metadata: the copy shares the source's slices.
    fn copy_file_range(
        &self,
        _req: &Request,
        _ino_in: INodeNo,
        fh_in: FileHandle,
        offset_in: u64,
        _ino_out: INodeNo,
        fh_out: FileHandle,
        offset_out: u64,
        len: u64,
        _flags: CopyFileRangeFlags,
        reply: ReplyWrite,
    ) {
        self.run_here("copy_file_range", move |vfs| async move {
            let copy = vfs.copy_file_range(fh_in.0, offset_in, fh_out.0, offset_out, len);
            reply.answer(&vfs, copy.await)
        });
    }
}
