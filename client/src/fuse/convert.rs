//! Conversions between the kernel's types (fuser) and the VFS's: node
//! types and attributes, errno values, times, new nodes (replies: `reply`).
use std::time::{SystemTime, UNIX_EPOCH};

use fuser::{Errno, FileAttr, FileType, INodeNo, TimeOrNow};

use fuser::{FopenFlags, OpenAccMode, OpenFlags, Request};

use crate::metrics::CONTROL_OP;
use crate::vfs::{
    ns_to_time, time_to_ns, Attr, Caller, LockRange, Need, NewNode, NodeType, SetAttr, TimeSet,
    Vfs, Who, CONTROL_INODE,
};

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

/// The change a setattr request asks for.
pub(super) fn set_attr(
    mode: Option<u32>,
    uid: Option<u32>,
    gid: Option<u32>,
    length: Option<u64>,
    atime: Option<TimeOrNow>,
    mtime: Option<TimeOrNow>,
) -> SetAttr {
    let (atime, mtime) = (time_arg(atime), time_arg(mtime));
    SetAttr {
        mode,
        uid,
        gid,
        length,
        atime,
        mtime,
    }
}

/// The process that sent a request (for the control file).
pub(super) fn caller(req: &Request) -> Caller {
    Caller {
        uid: req.uid(),
        gid: req.gid(),
        pid: req.pid(),
    }
}

/// Whether a read or write (`op`) is of the control file, and the
/// operation the metrics count it as.
pub(super) fn data_op(ino: INodeNo, op: &'static str) -> (bool, &'static str) {
    match ino.0 == CONTROL_INODE {
        true => (true, CONTROL_OP),
        false => (false, op),
    }
}

/// A lock's range as the kernel gives it.
pub(super) fn lock_range(typ: i32, start: u64, end: u64, pid: u32) -> LockRange {
    LockRange {
        typ,
        start,
        end,
        pid,
    }
}

/// How an open of `inode` with `flags` goes: whether it writes, what it
/// needs of a squashed caller (O_TRUNC writes), and the open flags given back
/// (the control file's answers have no length: read past the page cache).
pub(super) fn opening(
    inode: u64,
    flags: OpenFlags,
    control: bool,
) -> (bool, Need<'static>, FopenFlags) {
    let write = flags.acc_mode() != OpenAccMode::O_RDONLY;
    let read = flags.acc_mode() != OpenAccMode::O_WRONLY;
    let truncate = flags.0 & libc::O_TRUNC != 0;
    let how = if control {
        FopenFlags::FOPEN_DIRECT_IO
    } else {
        FopenFlags::empty()
    };
    (
        write,
        Need::Open {
            inode,
            read,
            write: write || truncate,
        },
        how,
    )
}

fn time_arg(t: Option<TimeOrNow>) -> Option<TimeSet> {
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
            // (in i128: -2^63 ns is -9223372037 s + 145224192 ns, whose
            // seconds alone are past an i64 of nanoseconds)
            let d = e.duration();
            let ns = -(d.as_secs() as i128) * 1_000_000_000 + i128::from(d.subsec_nanos());
            ns.clamp(i64::MIN as i128, i64::MAX as i128) as i64
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

/// What the kernel takes for "no such name": an entry of inode 0.
pub(super) fn missing_name() -> FileAttr {
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
        // the earliest time an i64 of nanoseconds holds, as utimensat
        // sends it: (-9223372037 s, 145224192 ns)
        let earliest = UNIX_EPOCH - Duration::new(9_223_372_037, 145_224_192);
        assert_eq!(kernel_time_to_ns(earliest), i64::MIN);
        let before = UNIX_EPOCH - Duration::new(9_223_372_038, 0);
        assert_eq!(kernel_time_to_ns(before), i64::MIN, "clamped");
    }
}
