//! Conversions between the kernel's types (fuser) and the VFS's: node
//! types and attributes, errno values, times, new nodes; reply helpers.
use std::time::{SystemTime, UNIX_EPOCH};

use fuser::{
    Errno, FileAttr, FileType, Generation, INodeNo, ReplyEmpty, ReplyEntry, ReplyXattr, TimeOrNow,
};

use crate::vfs::{ns_to_time, time_to_ns, Attr, NewNode, NodeType, TimeSet, Vfs, Who};

pub(super) fn kind(t: NodeType) -> FileType {
    match t {
        NodeType::File => FileType::RegularFile,
        NodeType::Dir => FileType::Directory,
        NodeType::Symlink => FileType::Symlink,
        NodeType::Fifo => FileType::NamedPipe,
        NodeType::BlockDev => FileType::BlockDevice,
        NodeType::CharDev => FileType::CharDevice,
        NodeType::Socket => FileType::Socket,
    }
}

pub(super) fn file_attr(vfs: &Vfs, a: &Attr) -> FileAttr {
    let size = if a.kind == NodeType::Dir {
        4096
    } else {
        a.length
    };
    // 512-byte units: what a file's data covers (4 KiB units, as a local
    // file system allocates), so sparse files show their holes to du
    let blocks = if a.kind == NodeType::File {
        a.used.div_ceil(4096) * 8
    } else {
        size.div_ceil(512)
    };
    FileAttr {
        ino: INodeNo(vfs.kernel_ino(a.inode)),
        size,
        blocks,
        atime: ns_to_time(a.atime),
        mtime: ns_to_time(a.mtime),
        ctime: ns_to_time(a.ctime),
        crtime: ns_to_time(a.ctime),
        kind: kind(a.kind),
        perm: (a.mode & 0o7777) as u16,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: a.rdev,
        blksize: 65536,
        flags: 0,
    }
}

tokio::task_local! {
    /// Whether the request being run answered with an errno (for the
    /// metrics; see `measured`).
    static ANSWERED_ERROR: std::cell::Cell<bool>;
}

/// The errno to answer with; every error reply goes through here, so the
/// request is counted as failed.
pub(super) fn err(e: i32) -> Errno {
    let _ = ANSWERED_ERROR.try_with(|failed| failed.set(true));
    Errno::from_i32(e)
}

/// Runs request `op` (which replies), recording in the metrics how long it
/// took and whether it answered with an errno.
pub(super) async fn measured(op: &'static str, request: impl std::future::Future<Output = ()>) {
    let started = std::time::Instant::now();
    let failed = ANSWERED_ERROR
        .scope(std::cell::Cell::new(false), async {
            request.await;
            ANSWERED_ERROR.with(|failed| failed.get())
        })
        .await;
    let m = &crate::metrics::METRICS;
    m.fuse_ops
        .with_label_values(&[op])
        .observe(started.elapsed().as_secs_f64());
    if failed {
        m.fuse_errors.with_label_values(&[op]).inc();
    }
}

pub(super) fn time_arg(t: Option<TimeOrNow>) -> Option<TimeSet> {
    t.map(|t| match t {
        TimeOrNow::SpecificTime(t) => TimeSet::At(kernel_time_to_ns(t)),
        TimeOrNow::Now => TimeSet::Now,
    })
}

/// Nanoseconds since the epoch of a time the kernel sent. fuser 0.18 turns
/// the kernel's (seconds, nanoseconds) into a `SystemTime` as epoch −
/// (|seconds| + nanoseconds) when the seconds are negative, where the time
/// is seconds + nanoseconds: 1960-02-03 04:05:06.789 (−312753294 s +
/// 0.789 s) would be kept as 04:05:05.211. Undone here.
fn kernel_time_to_ns(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(_) => time_to_ns(t),
        Err(e) => {
            let d = e.duration();
            -(d.as_secs() as i64).saturating_mul(1_000_000_000) + i64::from(d.subsec_nanos())
        }
    }
}

/// A node the kernel asked for, made by `req`'s caller.
/// A node `who` makes.
pub(super) fn new_node<'a>(who: &Who, kind: NodeType, mode: u32, umask: u32) -> NewNode<'a> {
    NewNode {
        kind,
        mode: mode & 0o7777,
        umask,
        uid: who.uid,
        gid: who.gid,
        rdev: 0,
        target: None,
    }
}

pub(super) fn node_type_of_mode(mode: u32) -> Option<NodeType> {
    match mode & libc::S_IFMT {
        libc::S_IFREG | 0 => Some(NodeType::File),
        libc::S_IFIFO => Some(NodeType::Fifo),
        libc::S_IFCHR => Some(NodeType::CharDev),
        libc::S_IFBLK => Some(NodeType::BlockDev),
        libc::S_IFSOCK => Some(NodeType::Socket),
        _ => None,
    }
}

pub(super) fn reply_entry(vfs: &Vfs, reply: ReplyEntry, r: Result<Attr, i32>) {
    match r {
        Ok(a) => reply.entry_with_ttls(
            &vfs.config.attr_ttl,
            &vfs.config.entry_ttl_of(a.kind),
            &file_attr(vfs, &a),
            Generation(0),
        ),
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
    r: Result<Attr, i32>,
) {
    match (r, vfs.missing_name_ttl(parent, name)) {
        (Err(libc::ENOENT), Some(ttl)) => reply.entry(&ttl, &missing_name(), Generation(0)),
        (r, _) => reply_entry(vfs, reply, r),
    }
}

/// What the kernel takes for "no such name": an entry of inode 0.
fn missing_name() -> FileAttr {
    let never = std::time::UNIX_EPOCH;
    FileAttr {
        ino: INodeNo(0),
        size: 0,
        blocks: 0,
        atime: never,
        mtime: never,
        ctime: never,
        crtime: never,
        kind: FileType::RegularFile,
        perm: 0,
        nlink: 0,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: 0,
        flags: 0,
    }
}

pub(super) fn reply_empty(reply: ReplyEmpty, r: Result<(), i32>) {
    match r {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(err(e)),
    }
}

pub(super) fn reply_xattr(reply: ReplyXattr, size: u32, r: Result<Vec<u8>, i32>) {
    match r {
        Ok(v) if size == 0 => reply.size(v.len() as u32),
        Ok(v) if v.len() > size as usize => reply.error(err(libc::ERANGE)),
        Ok(v) => reply.data(&v),
        Err(e) => reply.error(err(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn times_before_1970_keep_their_fraction() {
        // what fuser 0.18 makes of the kernel's (-312753294 s, 789000000 ns)
        let sent = UNIX_EPOCH - Duration::new(312_753_294, 789_000_000);
        assert_eq!(kernel_time_to_ns(sent), -312_753_293_211_000_000);
        let whole = UNIX_EPOCH - Duration::new(5, 0);
        assert_eq!(kernel_time_to_ns(whole), -5_000_000_000);
        let after = UNIX_EPOCH + Duration::new(5, 7);
        assert_eq!(kernel_time_to_ns(after), 5_000_000_007);
    }
}
