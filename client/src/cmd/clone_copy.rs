//! `jfs clone` where one transaction cannot clone: a source on another shard than the destination, or a tree holding a shard root, is copied through the mount (files by copy_file_range, which shares slices within a shard and copies bytes across), keeping modes, times, xattrs, hard links and, for root with --preserve, owners.
use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::Context;

/// What the copy made so far: nodes, and the first copy of each node
/// with several names (device, inode), whose other names become links.
#[derive(Default)]
pub struct Copy {
    pub nodes: u64,
    linked: HashMap<(u64, u64), PathBuf>,
}

impl Copy {
    /// Copies `src` (any type) to the new path `dst`; with `preserve`,
    /// owners too (as the caller may).
    pub fn tree(&mut self, src: &Path, dst: &Path, preserve: bool) -> anyhow::Result<()> {
        let meta =
            std::fs::symlink_metadata(src).with_context(|| format!("reading {}", src.display()))?;
        let kind = meta.file_type();
        if !kind.is_dir() && meta.nlink() > 1 {
            if let Some(first) = self.linked.get(&(meta.dev(), meta.ino())) {
                return std::fs::hard_link(first, dst)
                    .with_context(|| format!("linking {} to {}", dst.display(), first.display()));
            }
            self.linked
                .insert((meta.dev(), meta.ino()), dst.to_path_buf());
        }
        let made =
            |e: std::io::Error| anyhow::Error::from(e).context(format!("making {}", dst.display()));
        if kind.is_dir() {
            std::fs::create_dir(dst).map_err(made)?;
            let mut names: Vec<_> = std::fs::read_dir(src)
                .with_context(|| format!("listing {}", src.display()))?
                .map(|e| e.map(|e| e.file_name()))
                .collect::<Result<_, _>>()
                .with_context(|| format!("listing {}", src.display()))?;
            names.sort();
            for name in names {
                self.tree(&src.join(&name), &dst.join(&name), preserve)?;
            }
        } else if kind.is_file() {
            // (synced before it is counted: a write the mount reports lost
            // at fsync fails the clone instead of vanishing with a close)
            let mut from =
                std::fs::File::open(src).with_context(|| format!("reading {}", src.display()))?;
            let mut to = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(dst)
                .map_err(made)?;
            std::io::copy(&mut from, &mut to)
                .and_then(|_| to.sync_all())
                .map_err(made)?;
        } else if kind.is_symlink() {
            let target =
                std::fs::read_link(src).with_context(|| format!("reading {}", src.display()))?;
            std::os::unix::fs::symlink(target, dst).map_err(made)?;
        } else {
            // a fifo, socket or device node
            rustix::fs::mknodat(
                rustix::fs::CWD,
                dst,
                rustix::fs::FileType::from_raw_mode(meta.mode()),
                rustix::fs::Mode::from_raw_mode(meta.mode() & 0o7777),
                meta.rdev(),
            )
            .map_err(|e| made(e.into()))?;
        }
        self.nodes += 1;
        keep_attributes(src, dst, &meta, preserve)
    }
}

/// Gives `dst` what `src` (`meta`) has: its owners (with `preserve`),
/// mode, extended attributes (ACLs among them) and times, in that order
/// (a chown clears setuid bits; writing them would move the times).
fn keep_attributes(
    src: &Path,
    dst: &Path,
    meta: &std::fs::Metadata,
    preserve: bool,
) -> anyhow::Result<()> {
    if preserve {
        std::os::unix::fs::lchown(dst, Some(meta.uid()), Some(meta.gid()))
            .with_context(|| format!("giving {} its owners", dst.display()))?;
    }
    if !meta.file_type().is_symlink() {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dst, std::fs::Permissions::from_mode(meta.mode() & 0o7777))
            .with_context(|| format!("giving {} its mode", dst.display()))?;
    }
    copy_xattrs(src, dst)?;
    let at = |sec, nsec| rustix::fs::Timespec {
        tv_sec: sec,
        tv_nsec: nsec as _,
    };
    let times = rustix::fs::Timestamps {
        last_access: at(meta.atime(), meta.atime_nsec()),
        last_modification: at(meta.mtime(), meta.mtime_nsec()),
    };
    rustix::fs::utimensat(
        rustix::fs::CWD,
        dst,
        &times,
        rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
    )
    .map_err(std::io::Error::from)
    .with_context(|| format!("giving {} its times", dst.display()))
}

/// Copies every extended attribute of `src` to `dst` (neither followed
/// when a symlink).
fn copy_xattrs(src: &Path, dst: &Path) -> anyhow::Result<()> {
    let names = sized(|buf| match buf {
        None => rustix::fs::llistxattr_query(src),
        Some(buf) => rustix::fs::llistxattr(src, buf),
    })
    .with_context(|| format!("listing the extended attributes of {}", src.display()))?;
    for name in names.split(|&b| b == 0).filter(|n| !n.is_empty()) {
        let shown = String::from_utf8_lossy(name);
        let name = std::ffi::OsStr::from_bytes(name);
        let value = sized(|buf| match buf {
            None => rustix::fs::lgetxattr_query(src, name),
            Some(buf) => rustix::fs::lgetxattr(src, name, buf),
        })
        .with_context(|| format!("reading {shown} of {}", src.display()))?;
        rustix::fs::lsetxattr(dst, name, &value, rustix::fs::XattrFlags::empty())
            .map_err(std::io::Error::from)
            .with_context(|| format!("setting {shown} of {}", dst.display()))?;
    }
    Ok(())
}

/// What `call` fills in: asked first for its size (`None`), then into a
/// buffer of it (again if it grew meanwhile). A node or file system
/// without extended attributes answers empty.
fn sized(
    call: impl Fn(Option<&mut [u8]>) -> rustix::io::Result<usize>,
) -> std::io::Result<Vec<u8>> {
    loop {
        let size = match call(None) {
            Err(rustix::io::Errno::NOTSUP) => return Ok(Vec::new()),
            other => other?,
        };
        let mut buf = vec![0u8; size];
        match call(Some(&mut buf)) {
            Ok(got) => {
                buf.truncate(got);
                return Ok(buf);
            }
            Err(rustix::io::Errno::RANGE) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}
