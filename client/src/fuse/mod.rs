//! FUSE adapter (fuser): decodes each kernel request, hands it to a tokio task that calls
//! the VFS, and replies from there, so a slow request never blocks a fast one.
//! The session (mount options, threads, kernel notifications) is in
//! `session`, mount points (is mounted, unmount) in `mountpoint`, the
//! conversions between the kernel's types and the VFS's in `convert`. This
//! file is long for a reason: the `Filesystem` impl is one block (a trait
//! impl cannot be split), one short method per kind of request.
mod convert;
pub mod mountpoint;
pub mod session;

use convert::{
    err, file_attr, kind, measured, new_node, node_type_of_mode, reply_empty, reply_entry,
    reply_lookup, reply_xattr, time_arg,
};

use std::ffi::OsStr;
use std::future::Future;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use fuser::{
    AccessFlags, CopyFileRangeFlags, Errno, FileHandle, Filesystem, FopenFlags, Generation,
    INodeNo, InitFlags, KernelConfig, LockOwner, OpenAccMode, OpenFlags, RenameFlags, ReplyAttr,
    ReplyCreate, ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyLock,
    ReplyLseek, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};

use crate::meta::LockRange;
use crate::metrics::{CONTROL_OP, METRICS};

use crate::vfs::{Caller, Need, NewNode, NodeType, SetAttr, Vfs, Who, CONTROL_INODE};

pub struct JfsFuse {
    vfs: Arc<Vfs>,
    rt: tokio::runtime::Handle,
}

impl JfsFuse {
    pub fn new(vfs: Arc<Vfs>, rt: tokio::runtime::Handle) -> JfsFuse {
        JfsFuse { vfs, rt }
    }

    /// Runs one request to completion on this FUSE thread, on a runtime and
    /// with a database connection of the thread's own: the request wakes no
    /// other thread of ours, which halves its latency on a small machine (a
    /// metadata request is one round trip to PostgreSQL, a sequential read
    /// mostly a copy from the block cache). The kernel sends requests on
    /// several threads, so others proceed meanwhile; uploads and readahead
    /// run on the mount's shared runtime (`rt`), which also runs a request
    /// if this thread could get no runtime of its own. The future may borrow
    /// the request (a write's data is not copied). `f` replies. The
    /// request is counted in the metrics as operation `op`.
    /// The identity a request acts as (`--root-squash`, `--all-squash`).
    fn who(&self, req: &Request) -> Who {
        self.vfs.who(req.uid(), req.gid())
    }

    fn run_here<F, Fut>(&self, op: &'static str, f: F)
    where
        F: FnOnce(Arc<Vfs>) -> Fut,
        Fut: Future<Output = ()>,
    {
        let fut = measured(op, f(self.vfs.clone()));
        THREAD_RUNTIME.with(|cell| {
            let mut cell = cell.borrow_mut();
            if cell.is_none() {
                match thread_runtime(&self.vfs) {
                    Ok(rt) => *cell = Some(rt),
                    Err(e) => tracing::warn!(
                        "no runtime of this FUSE thread's own ({e}): using the shared one"
                    ),
                }
            }
            match cell.as_ref() {
                Some(rt) => rt.block_on(fut),
                None => self.rt.block_on(fut),
            }
        })
    }
}

thread_local! {
    /// This FUSE thread's runtime for [`JfsFuse::run_here`].
    static THREAD_RUNTIME: std::cell::RefCell<Option<tokio::runtime::Runtime>> =
        const { std::cell::RefCell::new(None) };
}

fn thread_runtime(vfs: &Vfs) -> anyhow::Result<tokio::runtime::Runtime> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    vfs.use_thread_connection()?;
    Ok(rt)
}

impl Filesystem for JfsFuse {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> io::Result<()> {
        for flag in [
            InitFlags::FUSE_DO_READDIRPLUS,
            InitFlags::FUSE_READDIRPLUS_AUTO,
            InitFlags::FUSE_BIG_WRITES,
            InitFlags::FUSE_ASYNC_READ,
            InitFlags::FUSE_PARALLEL_DIROPS,
            InitFlags::FUSE_MAX_PAGES,
            // fcntl and flock locks come here, to be shared by every mount
            InitFlags::FUSE_POSIX_LOCKS,
            InitFlags::FUSE_FLOCK_LOCKS,
        ] {
            let _ = config.add_capabilities(flag);
        }
        if self.vfs.volume.enable_acl {
            // the kernel checks permissions with the ACLs it reads through
            // getxattr, and leaves the umask to mknod (a directory's
            // default ACL replaces it)
            for flag in [InitFlags::FUSE_POSIX_ACL, InitFlags::FUSE_DONT_MASK] {
                if config.add_capabilities(flag).is_err() {
                    tracing::warn!(
                        "the kernel does not offer {flag:?}: POSIX ACLs are not enforced"
                    );
                }
            }
        }
        let _ = config.set_max_write(1 << 20);
        let _ = config.set_max_readahead(1 << 20);
        let _ = config.set_max_background(64);
        Ok(())
    }

    fn destroy(&mut self) {
        let vfs = self.vfs.clone();
        self.rt.block_on(async move { vfs.flush_all().await });
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let name = name.as_bytes();
        let who = self.who(req);
        self.run_here("lookup", move |vfs| async move {
            let parent = vfs.inode_of(parent.0);
            let r = async {
                vfs.permit(&who, Need::Search(parent)).await?;
                vfs.lookup(parent, name).await
            }
            .await;
            reply_lookup(&vfs, reply, parent, name, r)
        });
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        self.run_here("getattr", move |vfs| async move {
            match vfs.getattr(vfs.inode_of(ino.0)).await {
                Ok(a) => reply.attr(&vfs.config.attr_ttl, &file_attr(&vfs, &a)),
                Err(e) => reply.error(err(e)),
            }
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
        let who = self.who(req);
        self.run_here("setattr", move |vfs| async move {
            let change = SetAttr {
                mode,
                uid,
                gid,
                length: size,
                atime: time_arg(atime),
                mtime: time_arg(mtime),
            };
            let inode = vfs.inode_of(ino.0);
            let r = async {
                vfs.permit(
                    &who,
                    Need::SetAttr {
                        inode,
                        change: &change,
                    },
                )
                .await?;
                vfs.setattr(inode, &change).await
            }
            .await;
            match r {
                Ok(a) => reply.attr(&vfs.config.attr_ttl, &file_attr(&vfs, &a)),
                Err(e) => reply.error(err(e)),
            }
        });
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        self.run_here("readlink", move |vfs| async move {
            match vfs.readlink(vfs.inode_of(ino.0)).await {
                Ok(t) => reply.data(&t),
                Err(e) => reply.error(err(e)),
            }
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
        let name = name.as_bytes();
        let Some(kind) = node_type_of_mode(mode) else {
            return reply.error(Errno::EINVAL);
        };
        let who = self.who(req);
        let node = NewNode {
            rdev,
            ..new_node(&who, kind, mode, umask)
        };
        self.run_here("mknod", move |vfs| async move {
            let r = vfs
                .mknod_as(&who, vfs.inode_of(parent.0), name, &node)
                .await;
            reply_entry(&vfs, reply, r)
        });
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
        let name = name.as_bytes();
        let who = self.who(req);
        let node = new_node(&who, NodeType::Dir, mode, umask);
        self.run_here("mkdir", move |vfs| async move {
            let r = vfs
                .mknod_as(&who, vfs.inode_of(parent.0), name, &node)
                .await;
            reply_entry(&vfs, reply, r)
        });
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let name = name.as_bytes();
        let who = self.who(req);
        self.run_here("unlink", move |vfs| async move {
            let parent = vfs.inode_of(parent.0);
            let r = async {
                vfs.permit(&who, Need::Remove { parent, name }).await?;
                vfs.unlink(parent, name).await
            }
            .await;
            reply_empty(reply, r)
        });
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let name = name.as_bytes();
        let who = self.who(req);
        self.run_here("rmdir", move |vfs| async move {
            let parent = vfs.inode_of(parent.0);
            let r = async {
                vfs.permit(&who, Need::Remove { parent, name }).await?;
                vfs.rmdir(parent, name).await
            }
            .await;
            reply_empty(reply, r)
        });
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let name = link_name.as_bytes();
        let target = target.as_os_str().as_bytes();
        let who = self.who(req);
        let node = NewNode {
            target: Some(target),
            ..new_node(&who, NodeType::Symlink, 0o777, 0)
        };
        self.run_here("symlink", move |vfs| async move {
            let r = vfs
                .mknod_as(&who, vfs.inode_of(parent.0), name, &node)
                .await;
            reply_entry(&vfs, reply, r)
        });
    }

    fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let name = name.as_bytes();
        let newname = newname.as_bytes();
        let who = self.who(req);
        self.run_here("rename", move |vfs| async move {
            let (parent, new_parent) = (vfs.inode_of(parent.0), vfs.inode_of(newparent.0));
            let r = async {
                let need = Need::Move {
                    parent,
                    name,
                    new_parent,
                    new_name: newname,
                };
                vfs.permit(&who, need).await?;
                vfs.rename(parent, name, new_parent, newname, flags.bits())
                    .await
            }
            .await;
            reply_empty(reply, r)
        });
    }

    fn link(
        &self,
        req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let name = newname.as_bytes();
        let who = self.who(req);
        self.run_here("link", move |vfs| async move {
            let new_parent = vfs.inode_of(newparent.0);
            let r = async {
                vfs.permit(&who, Need::Create(new_parent)).await?;
                vfs.link(vfs.inode_of(ino.0), new_parent, name).await
            }
            .await;
            reply_entry(&vfs, reply, r)
        });
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let write = flags.acc_mode() != OpenAccMode::O_RDONLY;
        let read = flags.acc_mode() != OpenAccMode::O_WRONLY;
        let truncate = flags.0 & libc::O_TRUNC != 0;
        let who = self.who(req);
        // the control file's answers have no length: read them past the page cache
        let flags = if ino.0 == CONTROL_INODE {
            FopenFlags::FOPEN_DIRECT_IO
        } else {
            FopenFlags::empty()
        };
        self.run_here("open", move |vfs| async move {
            let inode = vfs.inode_of(ino.0);
            let r = async {
                let need = Need::Open {
                    inode,
                    read,
                    write: write || truncate,
                };
                if ino.0 != CONTROL_INODE {
                    vfs.permit(&who, need).await?;
                }
                vfs.open(inode, write).await
            }
            .await;
            match r {
                Ok((fh, _)) => reply.opened(FileHandle(fh), flags),
                Err(e) => reply.error(err(e)),
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
        let name = name.as_bytes();
        let who = self.who(req);
        let node = new_node(&who, NodeType::File, mode, umask);
        self.run_here("create", move |vfs| async move {
            let parent = vfs.inode_of(parent.0);
            let r = async {
                vfs.permit(&who, Need::Create(parent)).await?;
                vfs.create(parent, name, &node).await
            }
            .await;
            match r {
                Ok((fh, a)) => reply.created(
                    &vfs.config.entry_ttl_of(a.kind),
                    &file_attr(&vfs, &a),
                    Generation(0),
                    FileHandle(fh),
                    FopenFlags::empty(),
                ),
                Err(e) => reply.error(err(e)),
            }
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
        let control = ino.0 == CONTROL_INODE;
        self.run_here(
            if control { CONTROL_OP } else { "read" },
            move |vfs| async move {
                match vfs.read(fh.0, offset, size).await {
                    Ok(data) => {
                        if !control {
                            METRICS.fuse_read_bytes.inc_by(data.len() as u64);
                        }
                        reply.data(&data)
                    }
                    Err(e) => reply.error(err(e)),
                }
            },
        );
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
        let caller = Caller {
            uid: req.uid(),
            gid: req.gid(),
            pid: req.pid(),
        };
        let control = ino.0 == CONTROL_INODE;
        self.run_here(
            if control { CONTROL_OP } else { "write" },
            move |vfs| async move {
                // the request's buffer is borrowed: the write completes on this thread
                match vfs.write(fh.0, offset, data, caller).await {
                    Ok(n) => {
                        if !control {
                            METRICS.fuse_written_bytes.inc_by(n as u64);
                        }
                        reply.written(n)
                    }
                    Err(e) => reply.error(err(e)),
                }
            },
        );
    }

    /// A close(2): the pending writes are committed, then the closing
    /// process's locks of the file go (POSIX: any close drops them).
    fn flush(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        self.run_here("flush", move |vfs| async move {
            let flushed = vfs.flush(fh.0).await;
            let unlocked = vfs.unlock_owner(vfs.inode_of(ino.0), lock_owner.0).await;
            reply_empty(reply, flushed.and(unlocked))
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
        self.run_here("release", move |vfs| async move {
            let unlocked = match lock_owner {
                Some(owner) => vfs.unlock_owner(vfs.inode_of(ino.0), owner.0).await,
                None => Ok(()),
            };
            let released = vfs.release(fh.0).await;
            reply_empty(reply, released.and(unlocked))
        });
    }

    fn getlk(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        pid: u32,
        reply: ReplyLock,
    ) {
        let range = LockRange {
            typ,
            start,
            end,
            pid,
        };
        self.run_here("getlk", move |vfs| async move {
            match vfs.getlk(vfs.inode_of(ino.0), lock_owner.0, &range).await {
                Ok(l) => reply.locked(l.start, l.end, l.typ, l.pid),
                Err(e) => reply.error(err(e)),
            }
        });
    }

    /// A lock taken, changed or dropped; one that waits (F_SETLKW, flock
    /// without LOCK_NB) waits on the mount's shared runtime, not on one of
    /// the few FUSE threads.
    fn setlk(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        pid: u32,
        sleep: bool,
        reply: ReplyEmpty,
    ) {
        let range = LockRange {
            typ,
            start,
            end,
            pid,
        };
        let tid = req.pid();
        let set = move |vfs: Arc<Vfs>| async move {
            let r = vfs
                .setlk(vfs.inode_of(ino.0), lock_owner.0, &range, sleep, tid)
                .await;
            reply_empty(reply, r)
        };
        if sleep {
            // apart from setlk: its time is mostly the wait for the lock
            self.rt.spawn(measured("setlkw", set(self.vfs.clone())));
        } else {
            self.run_here("setlk", set);
        }
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.run_here("fsync", move |vfs| async move {
            reply_empty(reply, vfs.fsync(fh.0).await)
        });
    }

    fn opendir(&self, req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let who = self.who(req);
        self.run_here("opendir", move |vfs| async move {
            let dir = vfs.inode_of(ino.0);
            let r = async {
                vfs.permit(&who, Need::List(dir)).await?;
                vfs.opendir(dir).await
            }
            .await;
            match r {
                Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
                Err(e) => reply.error(err(e)),
            }
        });
    }

    fn readdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        self.run_here("readdir", move |vfs| async move {
            let r = vfs
                .readdir(fh.0, offset, |e| {
                    !reply.add(
                        INodeNo(vfs.kernel_ino(e.attr.inode)),
                        e.offset,
                        kind(e.attr.kind),
                        OsStr::from_bytes(&e.name),
                    )
                })
                .await;
            match r {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(err(e)),
            }
        });
    }

    fn readdirplus(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        self.run_here("readdirplus", move |vfs| async move {
            let r = vfs
                .readdir(fh.0, offset, |e| {
                    !reply.add(
                        INodeNo(vfs.kernel_ino(e.attr.inode)),
                        e.offset,
                        OsStr::from_bytes(&e.name),
                        &vfs.config.entry_ttl_of(e.attr.kind),
                        &file_attr(&vfs, &e.attr),
                        Generation(0),
                    )
                })
                .await;
            match r {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(err(e)),
            }
        });
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

    fn fsyncdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.run_here("fsyncdir", move |vfs| async move {
            reply_empty(reply, vfs.fsync(fh.0).await)
        });
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        self.run_here("statfs", move |vfs| async move {
            match vfs.statfs().await {
                Ok(s) => reply.statfs(
                    s.total_space / 4096,
                    s.avail_space / 4096,
                    s.avail_space / 4096,
                    s.used_inodes + s.avail_inodes,
                    s.avail_inodes,
                    4096,
                    crate::vfs::NAME_MAX as u32,
                    4096,
                ),
                Err(e) => reply.error(err(e)),
            }
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
        let name = name.as_bytes();
        let who = self.who(req);
        self.run_here("setxattr", move |vfs| async move {
            let inode = vfs.inode_of(ino.0);
            let r = async {
                vfs.permit(&who, Need::xattr(inode, name, true)).await?;
                vfs.setxattr(inode, name, value, flags).await
            }
            .await;
            reply_empty(reply, r)
        });
    }

    fn getxattr(&self, req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let name = name.as_bytes();
        let who = self.who(req);
        self.run_here("getxattr", move |vfs| async move {
            let inode = vfs.inode_of(ino.0);
            let r = async {
                vfs.permit(&who, Need::xattr(inode, name, false)).await?;
                vfs.getxattr(inode, name).await
            }
            .await;
            reply_xattr(reply, size, r)
        });
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        self.run_here("listxattr", move |vfs| async move {
            let r = vfs.listxattr(vfs.inode_of(ino.0)).await.map(|names| {
                let mut out = Vec::new();
                for n in names {
                    out.extend_from_slice(&n);
                    out.push(0);
                }
                out
            });
            reply_xattr(reply, size, r)
        });
    }

    fn removexattr(&self, req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let name = name.as_bytes();
        let who = self.who(req);
        self.run_here("removexattr", move |vfs| async move {
            let inode = vfs.inode_of(ino.0);
            let r = async {
                vfs.permit(&who, Need::xattr(inode, name, true)).await?;
                vfs.removexattr(inode, name).await
            }
            .await;
            reply_empty(reply, r)
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
            reply_empty(reply, vfs.fallocate(fh.0, offset, length, mode).await)
        });
    }

    /// SEEK_DATA and SEEK_HOLE (the kernel handles the other whences).
    fn lseek(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: i64,
        whence: i32,
        reply: ReplyLseek,
    ) {
        self.run_here("lseek", move |vfs| async move {
            match vfs.seek_data(fh.0, offset, whence).await {
                Ok(at) => reply.offset(at),
                Err(e) => reply.error(err(e)),
            }
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
            match vfs
                .copy_file_range(fh_in.0, offset_in, fh_out.0, offset_out, len)
                .await
            {
                Ok(n) => reply.written(n),
                Err(e) => reply.error(err(e)),
            }
        });
    }
}
