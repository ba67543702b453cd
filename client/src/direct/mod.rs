//! A volume used without FUSE, by path: what the Python package calls. It
//! attaches as a mount does (a session, the change log followed, heartbeats,
//! commits and gc in the background) and serves one identity, whose every
//! request the `Vfs` checks by the permission bits (no kernel checks them
//! here). Paths are relative to the volume's root (or `subdir`); symlinks
//! are followed inside the volume, absolute ones from its root.
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::meta::{Attr, NodeType, SetAttr};
use crate::object;
use crate::vfs::background::BackgroundConfig;
use crate::vfs::{Caller, ListedEntry, LockRange, Need, NewNode, Vfs, VfsConfig, Who};
use crate::volume::attach::{self, session_timeout};
use crate::volume::{open_volume, BucketCheck, OpenVolume};

/// The result of a request: a value, or the errno it failed with.
pub type DirectResult<T> = Result<T, i32>;

/// Symlinks followed in one path before it fails with ELOOP (as Linux).
const MAX_LINKS: usize = 40;

/// Bytes read or written per `Vfs` call.
const IO_PIECE: usize = 4 << 20;

/// How a direct client attaches; the defaults are a mount's.
#[derive(Debug, Clone)]
pub struct DirectOptions {
    pub read_only: bool,
    /// The directory of the volume that is this client's root.
    pub subdir: Option<String>,
    pub max_connections: usize,
    /// MiB of memory for uploads in flight and recently read blocks.
    pub buffer_mib: usize,
    /// A local disk cache of blocks, and the MiB it may hold.
    pub cache_dir: Option<PathBuf>,
    pub cache_mib: u64,
    /// How often the change log is read (zero: never).
    pub changes_poll: Duration,
    pub commit_after: Duration,
    pub heartbeat: Duration,
    pub session_timeout: Duration,
    pub meta_retry: Duration,
    /// The identity requests act as, and the umask of what they make.
    pub uid: u32,
    pub gid: u32,
    /// Its supplementary groups; None: the process's own when `uid` and
    /// `gid` are the process's, else none.
    pub groups: Option<Vec<u32>>,
    pub umask: u32,
    /// What `jfs status` shows of this client (merged into its session's info).
    pub describe: String,
}

impl Default for DirectOptions {
    fn default() -> DirectOptions {
        DirectOptions {
            read_only: false,
            subdir: None,
            max_connections: attach::DEFAULT_MAX_CONNECTIONS,
            buffer_mib: attach::DEFAULT_BUFFER_MIB,
            cache_dir: None,
            cache_mib: 10240,
            changes_poll: Duration::from_secs_f64(attach::DEFAULT_CHANGES_POLL_SECS),
            commit_after: Duration::from_secs_f64(attach::DEFAULT_COMMIT_AFTER_SECS),
            heartbeat: Duration::from_secs(attach::DEFAULT_HEARTBEAT_SECS),
            session_timeout: session_timeout(attach::DEFAULT_SESSION_TIMEOUT_SECS),
            meta_retry: crate::meta::DEFAULT_META_RETRY,
            uid: nix::unistd::geteuid().as_raw(),
            gid: nix::unistd::getegid().as_raw(),
            groups: None,
            umask: 0o022,
            describe: "direct".to_string(),
        }
    }
}

/// What `open` does (the O_* flags a Python `os.open` takes).
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenFlags {
    pub read: bool,
    pub write: bool,
    pub create: bool,
    pub exclusive: bool,
    pub truncate: bool,
}

impl OpenFlags {
    /// The flags of `os.open`-style `flags` (O_ACCMODE, O_CREAT, O_EXCL, O_TRUNC).
    pub fn of(flags: i32) -> OpenFlags {
        let access = flags & libc::O_ACCMODE;
        OpenFlags {
            read: access != libc::O_WRONLY,
            write: access != libc::O_RDONLY,
            create: flags & libc::O_CREAT != 0,
            exclusive: flags & libc::O_EXCL != 0,
            truncate: flags & libc::O_TRUNC != 0,
        }
    }
}

/// A volume attached to by this process.
pub struct Direct {
    vfs: Arc<Vfs>,
    who: Who,
    umask: u32,
    /// What each handle this client opened is of and may do.
    handles: std::sync::Mutex<std::collections::HashMap<u64, Opened>>,
    /// An entry of the root that paths reach by the inode this client
    /// checked, not by its name (see [`Direct::pin`]).
    pinned: std::sync::OnceLock<(Vec<u8>, u64)>,
}

/// An open handle: its file and how it was opened.
#[derive(Debug, Clone, Copy)]
struct Opened {
    inode: u64,
    read: bool,
    write: bool,
}

impl Direct {
    /// Attaches to the volume of `meta_url`: call it inside the runtime
    /// that is to run the client's background work.
    pub async fn attach(meta_url: &str, o: &DirectOptions) -> anyhow::Result<Direct> {
        let OpenVolume {
            mut meta,
            volume,
            store,
            ..
        } = open_volume(meta_url, o.max_connections, BucketCheck::WhenReachable).await?;
        meta.set_retry_for(o.meta_retry);
        object::set_retries(object::DEFAULT_OBJECT_RETRY, object::DEFAULT_OBJECT_TIMEOUT);
        meta.require_client_grants().await?;
        let (read_only, squash) = attach::limits_applied(&meta, o.read_only, None).await?;
        let standby = meta.in_recovery().await?;
        anyhow::ensure!(
            !standby || read_only,
            "{} is a hot standby, which takes no writes: open it read-only",
            crate::meta::redact_url(meta_url)
        );
        let root = match &o.subdir {
            Some(path) => attach::subdir_inode(&meta, &volume.name, path).await?,
            None => 1,
        };
        let disk_cache = match &o.cache_dir {
            Some(dir) => Some(Arc::new(object::DiskCache::open(
                dir,
                o.cache_mib << 20,
                0.1,
            )?)),
            None => None,
        };
        let info = serde_json::json!({
            "client": o.describe,
            "version": env!("CARGO_PKG_VERSION"),
        })
        .to_string();
        let (meta, sid) = attach::register(meta, standby, &info, o.session_timeout).await?;
        let config = VfsConfig {
            root,
            attr_ttl: Duration::from_secs(30),
            entry_ttl: Duration::from_secs(30),
            dir_entry_ttl: Duration::from_secs(30),
            follow_changes: !o.changes_poll.is_zero(),
            buffer_size: o.buffer_mib << 20,
            read_only,
            squash,
            disk_cache,
            compact_at: crate::vfs::COMPACT_AT,
            lookup_ahead: crate::vfs::LOOKUP_AHEAD,
            defer_attrs: !o.commit_after.is_zero(),
            atime: crate::vfs::AtimeMode::Noatime,
            // (the gateway is a direct client: it makes it)
            reserve_gateway_dir: false,
        };
        let vfs = Vfs::new(meta, store, volume, config, sid);
        attach::start(&vfs, o.changes_poll).await?;
        attach::spawn_background(
            vfs.clone(),
            BackgroundConfig {
                heartbeat: o.heartbeat,
                session_timeout: o.session_timeout,
                gc_interval: Duration::from_secs(attach::DEFAULT_GC_INTERVAL_SECS),
                gc_delay: Duration::from_secs(attach::DEFAULT_GC_DELAY_SECS),
                backup_meta: Duration::ZERO,
                backup_keep: 0,
                commit_after: o.commit_after,
            },
            info,
        );
        // no kernel checks the permission bits here: the Vfs does, always
        // (with the ACLs, and the groups the kernel would use)
        let base = Who::of(squash, o.uid, o.gid);
        let groups = match &o.groups {
            _ if base.squashed => None,
            Some(given) => Some(given.clone()),
            None => process_groups(o.uid, o.gid),
        };
        let who = Who {
            squashed: true,
            groups: groups.map(Into::into),
            ..base
        };
        Ok(Direct {
            vfs,
            who,
            umask: o.umask & 0o777,
            handles: Default::default(),
            pinned: Default::default(),
        })
    }

    /// Commits what is pending and closes the session.
    pub async fn close(&self) {
        self.vfs.flush_all().await;
        if let Err(e) = self.vfs.close_session().await {
            tracing::warn!("closing session {}: {e}", self.vfs.sid());
        }
    }

    /// The user requests act as (what they make is theirs).
    pub fn uid(&self) -> u32 {
        self.who.uid
    }

    /// Makes paths through entry `name` of the root reach directory
    /// `inode`, whatever that name holds later (once; the gateway pins its
    /// own directory, which a local user could otherwise move aside and
    /// replace with one of theirs). A pinned node that is gone is ENOENT.
    pub fn pin(&self, name: &[u8], inode: u64) {
        let _ = self.pinned.set((name.to_vec(), inode));
    }

    /// The session this client registered.
    pub fn session(&self) -> i64 {
        self.vfs.sid()
    }

    fn caller(&self) -> Caller {
        Caller {
            uid: self.who.uid,
            gid: self.who.gid,
            pid: std::process::id(),
        }
    }

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

    fn new_node<'a>(&self, kind: NodeType, mode: u32, target: Option<&'a [u8]>) -> NewNode<'a> {
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

    /// Changes attributes of `path` (chmod, truncate, utimes; owners change
    /// through [`Direct::chown`], which also clears set-id bits: ids here
    /// are EINVAL). A setgid bit in a chmod by a caller outside the node's
    /// group is cleared, as the kernel clears it.
    pub async fn set_attr(&self, path: &[u8], change: &SetAttr) -> DirectResult<Attr> {
        if change.uid.is_some() || change.gid.is_some() {
            return Err(libc::EINVAL);
        }
        let attr = self.resolve(path, true).await?;
        let mut change = *change;
        if let Some(mode) = change.mode.filter(|m| m & libc::S_ISGID != 0) {
            // (its group as it is now: another client may have changed it)
            let now = self.vfs.getattr_fresh(attr.inode).await?;
            if !self.vfs.may_keep_setgid(&self.who, now.gid) {
                change.mode = Some(mode & !libc::S_ISGID);
            }
        }
        let need = Need::set_attr(attr.inode, &change);
        self.vfs
            .checked(&self.who, need, self.vfs.setattr(attr.inode, &change))
            .await
    }

    /// chown(2) of `path` (None leaves an id as it is). As in Linux, a chown
    /// of anything but a directory, by anyone, also clears its setuid bit,
    /// and its setgid bit where group execution is on: in the same change,
    /// which needs only what the chown needs.
    pub async fn chown(
        &self,
        path: &[u8],
        uid: Option<u32>,
        gid: Option<u32>,
    ) -> DirectResult<Attr> {
        let attr = self.resolve(path, true).await?;
        let chown = SetAttr {
            uid,
            gid,
            ..SetAttr::default()
        };
        let need = Need::set_attr(attr.inode, &chown);
        let mut change = chown;
        if attr.kind != NodeType::Dir {
            let mode = self.vfs.getattr_fresh(attr.inode).await?.mode & 0o7777;
            let group_exec = mode & libc::S_IXGRP != 0;
            let kill = (mode & libc::S_ISUID) | if group_exec { mode & libc::S_ISGID } else { 0 };
            if kill != 0 {
                change.mode = Some(mode & !kill);
            }
        }
        self.vfs
            .checked(&self.who, need, self.vfs.setattr(attr.inode, &change))
            .await
    }

    /// Opens (and with `create`, makes with `mode`) file `path`: a handle
    /// for `read`, `write`, `flush`, `fsync` and `close`, and its attributes.
    pub async fn open(&self, path: &[u8], f: OpenFlags, mode: u32) -> DirectResult<(u64, Attr)> {
        let (fh, attr) = self.open_file(path, f, mode).await?;
        let opened = Opened {
            inode: attr.inode,
            read: f.read,
            write: f.write,
        };
        self.handles.lock().unwrap().insert(fh, opened);
        Ok((fh, attr))
    }

    async fn open_file(&self, path: &[u8], f: OpenFlags, mode: u32) -> DirectResult<(u64, Attr)> {
        // (a path ending in "." or ".." names a directory: Dots::OPEN)
        let last = self.parent_of(path, Dots::OPEN).await;
        if trailing_slash(path) {
            if let Ok((parent, name)) = last {
                // a directory is asked for: O_CREAT is EISDIR whatever the
                // name holds (Linux checks it before looking), else it
                // must be one
                if f.create {
                    return Err(libc::EISDIR);
                }
                return match self.lookup_following(parent, name, true).await? {
                    attr if attr.kind != NodeType::Dir => Err(libc::ENOTDIR),
                    attr => self.open_found(attr, f).await,
                };
            }
        }
        let found = match last {
            Err(libc::EISDIR) => self.resolve(path, true).await,
            Err(e) => return Err(e),
            // (a create need not confirm a miss: the database refuses a
            // name another client made, and the file is opened then)
            Ok((parent, name)) => self.lookup_following(parent, name, !f.create).await,
        };
        let attr = match found {
            Ok(_) if f.create && f.exclusive => return Err(libc::EEXIST),
            Ok(attr) => attr,
            Err(libc::ENOENT) if f.create => {
                let Ok((parent, name)) = last else {
                    return Err(libc::ENOENT);
                };
                // (without O_EXCL a dangling symlink's target is made, as
                // Linux makes it; with it the link itself is EEXIST)
                let (parent, name) = match f.exclusive {
                    true => (parent, name.to_vec()),
                    false => self.creation_target(parent, name).await?,
                };
                let name = name.as_slice();
                let node = self.new_node(NodeType::File, mode, None);
                let create = self.vfs.create(parent, name, &node);
                match self
                    .vfs
                    .checked(&self.who, Need::Create(parent), create)
                    .await
                {
                    Err(libc::EEXIST) if !f.exclusive => {
                        self.lookup_following(parent, name, true).await?
                    }
                    made => return made,
                }
            }
            Err(e) => return Err(e),
        };
        self.open_found(attr, f).await
    }

    /// Opens the node `attr` an open of `f` found (O_CREAT on a directory
    /// is EISDIR even for reading, as in Linux).
    async fn open_found(&self, attr: Attr, f: OpenFlags) -> DirectResult<(u64, Attr)> {
        if attr.kind == NodeType::Dir && (f.write || f.create) {
            return Err(libc::EISDIR);
        }
        let need = Need::Open {
            inode: attr.inode,
            read: f.read,
            write: f.write || f.truncate,
        };
        self.vfs.permit(&self.who, need).await?;
        let (fh, attr) = self.vfs.open(attr.inode, f.write).await?;
        if f.truncate && f.write && attr.length > 0 {
            if let Err(e) = self.vfs.setattr(attr.inode, &SetAttr::length(0)).await {
                let _ = self.vfs.release(fh).await;
                return Err(e);
            }
            let attr = self.vfs.getattr(attr.inode).await?;
            return Ok((fh, attr));
        }
        Ok((fh, attr))
    }

    /// Handle `fh` of this client, if it was opened to `read` or `write`
    /// as asked (EBADF otherwise, as read(2) and write(2) say).
    fn opened(&self, fh: u64, read: bool, write: bool) -> DirectResult<Opened> {
        match self.handles.lock().unwrap().get(&fh) {
            Some(o) if (o.read || !read) && (o.write || !write) => Ok(*o),
            _ => Err(libc::EBADF),
        }
    }

    /// Up to `size` bytes of handle `fh` from `offset` (fewer at the end).
    pub async fn read(&self, fh: u64, offset: u64, size: usize) -> DirectResult<Vec<u8>> {
        self.opened(fh, true, false)?;
        file_range(offset, size)?;
        let mut data = Vec::with_capacity(size.min(64 << 20));
        while data.len() < size {
            let want = (size - data.len()).min(IO_PIECE);
            let piece = self
                .vfs
                .read(fh, offset + data.len() as u64, want as u32)
                .await?;
            data.extend_from_slice(&piece);
            if piece.len() < want {
                break;
            }
        }
        Ok(data)
    }

    /// Writes `data` to handle `fh` at `offset`, as pwrite(2) does: the
    /// count written, short only where the largest file ends (the rest
    /// would be EFBIG, which the call answers when nothing was written).
    pub async fn write(&self, fh: u64, offset: u64, data: &[u8]) -> DirectResult<usize> {
        self.opened(fh, false, true)?;
        file_range(offset, data.len())?;
        let mut done = 0;
        while done < data.len() {
            let end = (done + IO_PIECE).min(data.len());
            let at = offset + done as u64;
            let n = match self
                .vfs
                .write(fh, at, &data[done..end], self.caller())
                .await
            {
                Ok(n) => n as usize,
                Err(libc::EFBIG) if done > 0 => break,
                Err(e) => return Err(e),
            };
            if n == 0 {
                return Err(libc::EIO);
            }
            done += n;
        }
        Ok(done)
    }

    /// Writes all of `data` to handle `fh` at `offset` (EFBIG if the
    /// largest file ends before it does).
    pub async fn write_all(&self, fh: u64, offset: u64, data: &[u8]) -> DirectResult<()> {
        match self.write(fh, offset, data).await? {
            n if n == data.len() => Ok(()),
            _ => Err(libc::EFBIG),
        }
    }

    /// Commits the pending writes of handle `fh` (close-to-open: other
    /// clients see them once this returns).
    pub async fn flush(&self, fh: u64) -> DirectResult<()> {
        self.opened(fh, false, false)?;
        self.vfs.flush(fh).await
    }

    /// Commits and makes durable the writes of handle `fh`.
    pub async fn fsync(&self, fh: u64) -> DirectResult<()> {
        self.opened(fh, false, false)?;
        self.vfs.fsync(fh).await
    }

    /// Closes handle `fh`: its writes committed first, its locks dropped
    /// (as a close(2) drops the descriptor's fcntl locks).
    pub async fn close_handle(&self, fh: u64) -> DirectResult<()> {
        let Some(opened) = self.handles.lock().unwrap().remove(&fh) else {
            return Err(libc::EBADF);
        };
        let flushed = self.vfs.flush(fh).await;
        let unlocked = self.vfs.unlock_owner(opened.inode, fh).await;
        let released = self.vfs.release(fh).await;
        flushed.and(unlocked).and(released)
    }

    /// The attributes of handle `fh`'s file as this client sees them (its
    /// pending writes included).
    pub async fn handle_attr(&self, fh: u64) -> DirectResult<Attr> {
        let inode = self.opened(fh, false, false)?.inode;
        self.vfs.getattr(inode).await
    }

    /// Copies file `from` to `to` (made or truncated) as metadata: the new
    /// file shares the source's slices, no bytes move.
    pub async fn copy(&self, from: &[u8], to: &[u8]) -> DirectResult<()> {
        let source = self.stat(from, true).await?;
        if self.stat(to, true).await.map(|a| a.inode) == Ok(source.inode) {
            // (truncating the destination would empty the source)
            return Ok(());
        }
        // (set-user-id and set-group-id bits go, as a write by anyone but
        // root clears them; root's copy keeps them, as cp does)
        let mode = match self.who.uid {
            0 => source.mode & 0o7777,
            _ => source.mode & 0o1777,
        };
        let write = OpenFlags {
            write: true,
            create: true,
            truncate: true,
            ..OpenFlags::default()
        };
        let (dst, _) = self.open(to, write, mode).await?;
        let copied = self.copy_into(from, dst, 0).await;
        let closed = self.close_handle(dst).await;
        copied.and(closed).map(drop)
    }

    /// Copies all of file `from` into open handle `dst` at `offset` as
    /// metadata (shared slices); the bytes copied.
    pub async fn copy_into(&self, from: &[u8], dst: u64, offset: u64) -> DirectResult<u64> {
        let read = OpenFlags {
            read: true,
            ..OpenFlags::default()
        };
        let (src, attr) = self.open_file(from, read, 0).await?;
        let mut copied = 0;
        let mut result = Ok(());
        while copied < attr.length {
            let left = attr.length - copied;
            match self
                .vfs
                .copy_file_range(src, copied, dst, offset + copied, left)
                .await
            {
                Ok(0) => break,
                Ok(n) => copied += n as u64,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        let _ = self.vfs.release(src).await;
        result.map(|()| copied)
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

    /// The value of extended attribute `name` of `path` (ENODATA: none).
    pub async fn get_xattr(&self, path: &[u8], name: &[u8]) -> DirectResult<Vec<u8>> {
        let inode = self.resolve(path, true).await?.inode;
        let need = Need::xattr(inode, name, false);
        self.vfs
            .checked(&self.who, need, self.vfs.getxattr(inode, name))
            .await
    }

    /// Sets extended attribute `name` of `path` to `value`.
    pub async fn set_xattr(&self, path: &[u8], name: &[u8], value: &[u8]) -> DirectResult<()> {
        let inode = self.resolve(path, true).await?.inode;
        let need = Need::xattr(inode, name, true);
        self.vfs
            .checked(
                &self.who,
                need,
                self.vfs.setxattr(self.caller(), inode, name, value, 0),
            )
            .await
    }

    /// Takes (`typ` F_RDLCK or F_WRLCK) or drops (F_UNLCK) a whole-file
    /// lock of handle `fh`'s file, owned by the handle, as fcntl(F_SETLK[W])
    /// on a mount does (mounts and direct clients see each other's locks);
    /// `wait` waits for a lock held elsewhere. A read lock needs a handle
    /// open for reading, a write lock one open for writing, as fcntl says.
    pub async fn lock(&self, fh: u64, typ: i32, wait: bool) -> DirectResult<()> {
        let (read, write) = (typ == libc::F_RDLCK, typ == libc::F_WRLCK);
        let (inode, owner) = (self.opened(fh, read, write)?.inode, fh);
        let pid = std::process::id();
        let whole = LockRange {
            typ,
            start: 0,
            end: i64::MAX as u64,
            pid,
        };
        self.vfs.setlk(inode, fh, owner, &whole, wait, pid).await
    }

    /// The volume's size and use (of `subdir`'s quota when it has one).
    pub async fn statfs(&self) -> DirectResult<crate::meta::Statfs> {
        self.vfs.statfs().await
    }

    /// Entry `name` of directory `dir`, searched as this client. A miss is
    /// confirmed against the change log: a name another client made before
    /// this request is found (reads after writes, as S3 promises them; a
    /// mount's kernel caches misses instead).
    async fn lookup(&self, dir: u64, name: &[u8]) -> DirectResult<Attr> {
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
    async fn lookup_following(
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
    async fn parent_of<'p>(&self, path: &'p [u8], dots: Dots) -> DirectResult<(u64, &'p [u8])> {
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
    async fn creation_target(&self, parent: u64, name: &[u8]) -> DirectResult<(u64, Vec<u8>)> {
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
    async fn resolve(&self, path: &[u8], follow: bool) -> DirectResult<Attr> {
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

/// The process's supplementary groups if `uid` and `gid` are its own
/// effective ids (a process acting as another user has none of them).
fn process_groups(uid: u32, gid: u32) -> Option<Vec<u32>> {
    use nix::unistd::{getegid, geteuid, getgroups};
    if (uid, gid) != (geteuid().as_raw(), getegid().as_raw()) {
        return None;
    }
    getgroups()
        .ok()
        .map(|groups| groups.into_iter().map(|g| g.as_raw()).collect())
}

/// `path` without leading and trailing slashes.
/// A read or write range whose end is past the largest file offset Linux
/// has (2^63 - 1) is EINVAL, as the kernel answers it before any file
/// system sees it.
fn file_range(offset: u64, len: usize) -> DirectResult<()> {
    match offset.checked_add(len as u64) {
        Some(end) if end <= i64::MAX as u64 => Ok(()),
        _ => Err(libc::EINVAL),
    }
}

/// Linux's longest path argument, its NUL included (longer: ENAMETOOLONG).
const PATH_MAX: usize = libc::PATH_MAX as usize;

/// What a call answers when its path ends in "." (`dot`) or ".." (`dotdot`)
/// or names the root (`root`), as Linux answers it.
#[derive(Debug, Clone, Copy)]
struct Dots {
    dot: i32,
    dotdot: i32,
    root: i32,
}

impl Dots {
    /// mkdir, mknod, symlink, link: the name exists.
    const MAKE: Dots = Dots::all(libc::EEXIST);
    /// unlink: it is a directory.
    const UNLINK: Dots = Dots::all(libc::EISDIR);
    /// rmdir: "." is invalid, ".." is not empty, the root is busy.
    const RMDIR: Dots = Dots {
        dot: libc::EINVAL,
        dotdot: libc::ENOTEMPTY,
        root: libc::EBUSY,
    };
    /// rename, from or to: busy.
    const RENAME: Dots = Dots::all(libc::EBUSY);
    /// open: a directory (opened by walking the whole path).
    const OPEN: Dots = Dots::all(libc::EISDIR);

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
fn trailing_slash(path: &[u8]) -> bool {
    path.last() == Some(&b'/') && !trim_slashes(path).is_empty()
}

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

    #[test]
    fn open_flags_follow_the_access_mode() {
        let f = OpenFlags::of(libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC);
        assert!(!f.read && f.write && f.create && f.truncate && !f.exclusive);
        let f = OpenFlags::of(libc::O_RDONLY);
        assert!(f.read && !f.write && !f.create);
        let f = OpenFlags::of(libc::O_RDWR | libc::O_CREAT | libc::O_EXCL);
        assert!(f.read && f.write && f.exclusive);
    }
}
