//! Files through handles: open (and O_CREAT), read, write, flush, fsync,
//! close, whole-file locks, and copies as metadata (shared slices).
use super::paths::{trailing_slash, Dots};
use super::{Direct, DirectResult, OpenFlags, Opened};
use crate::meta::{Attr, NodeType, SetAttr};
use crate::vfs::{LockRange, Need};

/// Bytes read or written per `Vfs` call.
const IO_PIECE: usize = 4 << 20;

impl Direct {
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
}

/// A read or write range whose end is past the largest file offset Linux
/// has (2^63 - 1) is EINVAL, as the kernel answers it before any file
/// system sees it.
fn file_range(offset: u64, len: usize) -> DirectResult<()> {
    match offset.checked_add(len as u64) {
        Some(end) if end <= i64::MAX as u64 => Ok(()),
        _ => Err(libc::EINVAL),
    }
}
