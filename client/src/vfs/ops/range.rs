//! Byte ranges of open files: fallocate (grow, punch a hole, zero a range),
//! lseek SEEK_DATA/SEEK_HOLE and copy_file_range, each one metadata call
//! after the files' pending writes are committed.
use std::sync::Arc;

use crate::meta::{Attr, SetAttr};
use crate::ns::attrs::Ticket;
use crate::vfs::handles::{FileState, Handle, OpenFile};
use crate::vfs::{errno, Caller, Vfs, VfsResult};

/// The most one copy_file_range call copies: its reply counts bytes in 32
/// bits (whole pages, as the kernel asks).
const MAX_COPY: u64 = (u32::MAX as u64) & !4095;

/// The most one copy between shards moves in one call (read, then written).
const BYTES_COPIED_AT_ONCE: u64 = 4 << 20;

impl Vfs {
    /// fallocate(2): mode 0 grows the file (the new range reads as zeros;
    /// with FALLOC_FL_KEEP_SIZE nothing needs storing), PUNCH_HOLE (with
    /// KEEP_SIZE, as Linux requires) and ZERO_RANGE make the range read as
    /// zeros and free what only it used; COLLAPSE_RANGE, INSERT_RANGE and
    /// the rest are EOPNOTSUPP.
    pub async fn fallocate(&self, fh: u64, offset: u64, length: u64, mode: i32) -> VfsResult<()> {
        self.writable()?;
        let file = self.open_file_of(fh)?;
        let keep_size = mode & libc::FALLOC_FL_KEEP_SIZE != 0;
        match mode & !libc::FALLOC_FL_KEEP_SIZE {
            0 if keep_size => Ok(()),
            0 => self.grow(&file, offset + length).await,
            libc::FALLOC_FL_PUNCH_HOLE if keep_size => {
                self.zero_range(&file, offset, length, true).await
            }
            libc::FALLOC_FL_ZERO_RANGE => self.zero_range(&file, offset, length, keep_size).await,
            _ => Err(libc::EOPNOTSUPP),
        }
    }

    /// fallocate mode 0: the file is at least `end` bytes long.
    async fn grow(&self, file: &OpenFile, end: u64) -> VfsResult<()> {
        // the length is compared and set under the file's lock, after its
        // pending writes (which may already reach past `end`)
        let mut state = file.state.lock().await;
        if end <= state.length {
            return Ok(());
        }
        self.flush_locked(file.inode, &mut state).await?;
        if end <= state.length {
            return Ok(());
        }
        let ticket = self.ns.attrs.ticket();
        state.committed_in(self.ns.meta_of(file.inode).epoch());
        let attr = self.ns.setattr(file.inode, &SetAttr::length(end)).await;
        self.size_changed(&mut state, attr, ticket)
    }

    /// The result of a call that changed an open file's size or data
    /// (`ticket` taken before it): cached attributes, length and slice lists
    /// follow it.
    fn size_changed(
        &self,
        state: &mut FileState,
        attr: crate::meta::Result<Attr>,
        ticket: Ticket,
    ) -> VfsResult<()> {
        let attr = attr.map_err(errno)?;
        self.ns.attrs.replace(&attr, ticket);
        state.length = attr.length;
        state.changed();
        Ok(())
    }

    /// PUNCH_HOLE and ZERO_RANGE: after the file's pending writes (they
    /// came first), the range gets hole slices in one call. The kernel
    /// drops the range from its page cache itself.
    async fn zero_range(
        &self,
        file: &OpenFile,
        offset: u64,
        length: u64,
        keep_size: bool,
    ) -> VfsResult<()> {
        let mut state = file.state.lock().await;
        self.flush_locked(file.inode, &mut state).await?;
        let ticket = self.ns.attrs.ticket();
        state.committed_in(self.ns.meta_of(file.inode).epoch());
        let attr = self
            .ns
            .zero_range(file.inode, offset, length, keep_size)
            .await;
        self.size_changed(&mut state, attr, ticket)
    }

    /// lseek(2) SEEK_DATA and SEEK_HOLE (the kernel answers the other
    /// whences itself), from the file's slices once its pending writes are
    /// committed.
    pub async fn seek_data(&self, fh: u64, offset: i64, whence: i32) -> VfsResult<i64> {
        let file = self.open_file_of(fh)?;
        let hole = match whence {
            libc::SEEK_DATA => false,
            libc::SEEK_HOLE => true,
            _ => return Err(libc::EINVAL),
        };
        let offset = u64::try_from(offset).map_err(|_| libc::ENXIO)?;
        let mut state = file.state.lock().await;
        self.flush_locked(file.inode, &mut state).await?;
        drop(state);
        let at = self
            .ns
            .seek_data(file.inode, offset, hole)
            .await
            .map_err(errno)?;
        i64::try_from(at).map_err(|_| libc::EOVERFLOW)
    }

    /// copy_file_range(2) as metadata: the destination's range points at
    /// the source's slices (one call, no bytes moved), after both files'
    /// pending writes are committed. Returns the bytes copied (fewer at the
    /// source's end; at most what one FUSE reply can say). Between files
    /// of two shards, whose slices one database cannot share with the
    /// other, the bytes are read and written.
    pub async fn copy_file_range(
        &self,
        fh_in: u64,
        offset_in: u64,
        fh_out: u64,
        offset_out: u64,
        length: u64,
    ) -> VfsResult<u32> {
        self.writable()?;
        let src = self.open_file_of(fh_in)?;
        let dst = self.open_file_of(fh_out)?;
        if !self.ns.parts().same(src.inode, dst.inode) {
            let length = length.min(BYTES_COPIED_AT_ONCE);
            return self
                .copy_bytes(fh_in, offset_in, fh_out, offset_out, length)
                .await;
        }
        let length = length.min(MAX_COPY);
        // both files' locks, in inode order (one lock when they are one file)
        let (mut src_state, mut dst_state) = if src.inode == dst.inode {
            (None, dst.state.lock().await)
        } else if src.inode < dst.inode {
            let first = src.state.lock().await;
            (Some(first), dst.state.lock().await)
        } else {
            let first = dst.state.lock().await;
            (Some(src.state.lock().await), first)
        };
        if let Some(state) = src_state.as_mut() {
            self.flush_locked(src.inode, state).await?;
        }
        self.flush_locked(dst.inode, &mut dst_state).await?;
        dst_state.committed_in(self.ns.meta_of(dst.inode).epoch());
        let copied = self
            .ns
            .copy_range(src.inode, offset_in, dst.inode, offset_out, length)
            .await
            .map_err(errno)?;
        self.ns.attrs.forget(dst.inode);
        dst_state.length = copied.length;
        dst_state.changed();
        Ok(copied.bytes as u32)
    }

    /// Copies up to `length` bytes of open file `fh_in` at `offset_in` to
    /// open file `fh_out` at `offset_out` by reading and writing them;
    /// the bytes copied (fewer at the source's end).
    async fn copy_bytes(
        &self,
        fh_in: u64,
        offset_in: u64,
        fh_out: u64,
        offset_out: u64,
        length: u64,
    ) -> VfsResult<u32> {
        let data = self.read(fh_in, offset_in, length as u32).await?;
        // (only a control request's answer depends on who writes)
        let nobody = Caller {
            uid: u32::MAX,
            gid: u32::MAX,
            pid: 0,
        };
        let mut written = 0;
        while written < data.len() {
            let at = offset_out + written as u64;
            match self.write(fh_out, at, &data[written..], nobody).await {
                Ok(n) if n > 0 => written += n as usize,
                // (a short copy says how far it got; the next call, the error)
                _ if written > 0 => break,
                Ok(_) => return Err(libc::EIO),
                Err(e) => return Err(e),
            }
        }
        Ok(written as u32)
    }

    /// The open regular file behind handle `fh`.
    fn open_file_of(&self, fh: u64) -> VfsResult<Arc<OpenFile>> {
        let handle = self.file_handle(fh)?;
        match &*handle {
            Handle::File { file, .. } => Ok(file.clone()),
            Handle::Dir { .. } => Err(libc::EISDIR),
            Handle::Control { .. } => Err(libc::EINVAL),
        }
    }
}
