//! Running a request: on the FUSE thread that read it, with a runtime and a database connection of that thread's own; who it acts as; the kernel's inode numbers translated.
use std::future::Future;
use std::sync::Arc;

use fuser::{FileHandle, INodeNo, LockOwner, ReplyEmpty, ReplyEntry, Request};

use super::convert::measured;
use super::reply::{Answer, Listing};
use crate::vfs::{LockRange, Need, NewNode, Vfs, Who};

pub struct JfsFuse {
    pub(super) vfs: Arc<Vfs>,
    pub(super) rt: tokio::runtime::Handle,
    /// Extended attributes are served (`--no-xattrs` turns them off).
    pub(super) xattrs: bool,
}

impl JfsFuse {
    pub fn new(vfs: Arc<Vfs>, rt: tokio::runtime::Handle, xattrs: bool) -> JfsFuse {
        JfsFuse { vfs, rt, xattrs }
    }

    /// Gives back the reply of xattr request `op` to be served; with
    /// `--no-xattrs` answers it ENOSYS through `refuse` instead (counted in
    /// the metrics like any request): the kernel then answers EOPNOTSUPP
    /// itself and sends no more of that kind, not even the check of
    /// security.capability before each write.
    pub(super) fn xattrs_served<R>(
        &self,
        op: &'static str,
        reply: R,
        refuse: fn(R, fuser::Errno),
    ) -> Option<R> {
        if self.xattrs {
            return Some(reply);
        }
        self.run_here(
            op,
            move |_| async move { refuse(reply, fuser::Errno::ENOSYS) },
        );
        None
    }

    /// The identity a request acts as (`--root-squash`, `--all-squash`).
    pub(super) fn who(&self, req: &Request) -> Who {
        self.vfs.who(req.uid(), req.gid())
    }

    /// The VFS's inode for the kernel's `ino` (the one translation: the
    /// kernel's inode 1 is the mount's `--subdir`).
    pub(super) fn ino(&self, ino: INodeNo) -> u64 {
        self.vfs.inode_of(ino.0)
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
    pub(super) fn run_here<F, Fut>(&self, op: &'static str, f: F)
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

impl JfsFuse {
    /// mknod, mkdir or symlink: node `node` as entry `name` of `parent`.
    pub(super) fn make(
        &self,
        op: &'static str,
        who: Who,
        parent: INodeNo,
        name: &[u8],
        node: NewNode<'_>,
        reply: ReplyEntry,
    ) {
        let parent = self.ino(parent);
        self.run_here(op, move |vfs| async move {
            let make = vfs.mknod(parent, name, &node);
            reply
                .answer_checked(&vfs, &who, Need::Create(parent), make)
                .await
        });
    }

    /// A lock taken, changed or dropped (setlk); one that waits (F_SETLKW,
    /// flock without LOCK_NB) waits on the mount's shared runtime, not on
    /// one of the few FUSE threads.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn set_lock(
        &self,
        ino: INodeNo,
        fh: FileHandle,
        owner: LockOwner,
        range: LockRange,
        sleep: bool,
        tid: u32,
        reply: ReplyEmpty,
    ) {
        let ino = self.ino(ino);
        let set = move |vfs: Arc<Vfs>| async move {
            let r = vfs.setlk(ino, fh.0, owner.0, &range, sleep, tid).await;
            reply.answer(&vfs, r)
        };
        if sleep {
            // apart from setlk: its time is mostly the wait for the lock
            self.rt.spawn(measured("setlkw", set(self.vfs.clone())));
        } else {
            self.run_here("setlk", set);
        }
    }

    /// A page of directory handle `fh` from offset `at`, plain or with
    /// attributes (readdirplus).
    pub(super) fn list(&self, op: &'static str, fh: FileHandle, at: u64, mut reply: impl Listing) {
        self.run_here(op, move |vfs| async move {
            let r = vfs.readdir(fh.0, at, |e| reply.take(&vfs, e)).await;
            reply.finish(r)
        });
    }
}
