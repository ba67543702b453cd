//! Write buffers: a file's pending slices, uploaded block by block while writing goes on,
//! committed to the metadata in write order on flush.
use std::io;
use std::sync::Arc;

use bytes::Bytes;
use tokio::task::JoinHandle;

use super::layout::{block_key, slice_blocks, split_by_chunk, CHUNK_SIZE};
use crate::meta::{Attr, Epoch, Meta, MetaError, SliceRow};
use crate::metrics::Charge;
use crate::object::{with_retries, ObjectStore};

/// What a writer needs from the mount.
pub struct WriteTarget<'a> {
    pub meta: &'a Meta,
    pub store: &'a Arc<dyn ObjectStore>,
    pub volume: &'a str,
    pub block_size: u32,
    /// Uploads in flight per file before a write waits for the oldest.
    pub max_inflight: usize,
    /// The storage class of the file's tier ("" = the bucket's default).
    pub class: String,
    /// The runtime uploads run on (the mount's shared one, whichever
    /// thread the write came in on).
    pub runtime: &'a tokio::runtime::Handle,
}

/// A slice being written: `len` bytes at `pos` of `chunk`; full blocks are
/// already uploading, `tail` holds the bytes after the last full block.
struct PendingSlice {
    chunk: u32,
    pos: u32,
    len: u32,
    id: u64,
    next_block: u32,
    tail: BlockBuf,
    uploads: Vec<Upload>,
    /// Blocks whose upload failed, kept to be uploaded again.
    failed: Vec<FailedUpload>,
    /// A block of it is gone (its upload task died): it cannot be committed.
    broken: bool,
    /// Its last block went to the store (a flush began): nothing more may
    /// be appended to it.
    sealed: bool,
}

/// A block upload in flight.
type Upload = JoinHandle<Result<(), FailedUpload>>;

/// A block whose upload failed (after the store's retries), with its bytes.
struct FailedUpload {
    key: String,
    data: Bytes,
    charge: Charge,
    error: io::Error,
}

/// Where a block's bytes start in its buffer: a 4 KiB boundary, so a whole
/// block can be stored with direct I/O (see the file store).
const BLOCK_ALIGN: usize = 4096;

/// The bytes of one block being assembled, starting at an aligned address
/// inside their allocation (as long as they stay within its capacity).
#[derive(Default)]
struct BlockBuf {
    vec: Vec<u8>,
    start: usize,
    /// The allocation, counted in the metrics' write buffer bytes until
    /// the block is uploaded.
    charge: Charge,
}

impl BlockBuf {
    fn with_capacity(capacity: usize) -> BlockBuf {
        let mut vec: Vec<u8> = Vec::with_capacity(capacity + BLOCK_ALIGN);
        let start = vec.as_ptr().align_offset(BLOCK_ALIGN).min(BLOCK_ALIGN);
        vec.resize(start, 0);
        let charge = Charge::write_buffer(vec.capacity());
        BlockBuf { vec, start, charge }
    }

    fn is_allocated(&self) -> bool {
        self.vec.capacity() > 0
    }

    fn len(&self) -> usize {
        self.vec.len() - self.start
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn data(&self) -> &[u8] {
        &self.vec[self.start..]
    }

    fn extend(&mut self, bytes: &[u8]) {
        self.vec.extend_from_slice(bytes);
    }

    fn truncate(&mut self, len: usize) {
        self.vec.truncate(self.start + len);
    }

    /// The bytes, without a copy, and their charge (dropped once uploaded).
    fn freeze(self) -> (Bytes, Charge) {
        let start = self.start;
        (Bytes::from(self.vec).slice(start..), self.charge)
    }
}

/// The not yet committed writes of one file in this mount. A failed upload
/// or commit keeps them (with their bytes) to be tried again by the next
/// flush; only an answer that they can never be committed (the file is
/// gone, no space) drops them.
#[derive(Default)]
pub struct Writer {
    slices: Vec<PendingSlice>,
    /// When the oldest write not yet committed came (while slices are pending).
    dirty_since: Option<std::time::Instant>,
    /// The epoch the oldest commit not yet taken by the file was sent in.
    committed_in: Option<Epoch>,
}

fn upload(t: &WriteTarget<'_>, key: String, (data, charge): (Bytes, Charge)) -> Upload {
    let store = t.store.clone();
    let class = t.class.clone();
    t.runtime.spawn(async move {
        // the charge is held until the block is stored (or handed back)
        match with_retries(&format!("put {key}"), || {
            store.put(&key, data.clone(), &class)
        })
        .await
        {
            Ok(()) => Ok(()),
            Err(error) => Err(FailedUpload {
                key,
                data,
                charge,
                error,
            }),
        }
    })
}

/// What waiting for an upload found.
enum Uploaded {
    Stored,
    /// Failed: the block, to upload again.
    Failed(FailedUpload),
    /// Its task died (a panic): the bytes are gone.
    Gone(String),
}

async fn join(handle: Upload) -> Uploaded {
    match handle.await {
        Ok(Ok(())) => Uploaded::Stored,
        Ok(Err(failed)) => Uploaded::Failed(failed),
        Err(e) => Uploaded::Gone(e.to_string()),
    }
}

impl Writer {
    pub fn is_empty(&self) -> bool {
        self.slices.is_empty()
    }

    /// The file byte ranges of the pending writes, for the log.
    pub fn pending_ranges(&self) -> String {
        let ranges: Vec<String> = self.slices.iter().map(PendingSlice::range).collect();
        ranges.join(", ")
    }

    /// How long the oldest write not yet committed has waited.
    pub fn pending_for(&self) -> Option<std::time::Duration> {
        match self.slices.is_empty() {
            true => None,
            false => self.dirty_since.map(|t| t.elapsed()),
        }
    }

    /// The epoch the oldest slice committed since the last call was sent
    /// in (what a sync of the file must cover), if any was committed.
    pub fn take_committed_in(&mut self) -> Option<Epoch> {
        self.committed_in.take()
    }

    /// How many slices are pending in each chunk.
    pub fn slices_per_chunk(&self) -> Vec<(u32, usize)> {
        let mut out: Vec<(u32, usize)> = Vec::new();
        for s in &self.slices {
            match out.iter_mut().find(|(c, _)| *c == s.chunk) {
                Some((_, n)) => *n += 1,
                None => out.push((s.chunk, 1)),
            }
        }
        out
    }

    /// Buffers `data` written at `offset` of file `inode`. `next_slice_id`
    /// hands out slice ids. Writing into another chunk first commits what
    /// is pending (so a sequential writer commits every 64 MiB, and a full
    /// quota stops it there with the errno, not only at close).
    pub async fn write<F, Fut>(
        &mut self,
        t: &WriteTarget<'_>,
        inode: u64,
        offset: u64,
        data: &[u8],
        mut next_slice_id: F,
    ) -> Result<(), i32>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<u64, i32>>,
    {
        if self.slices.is_empty() {
            self.dirty_since = Some(std::time::Instant::now());
        }
        for piece in split_by_chunk(offset, data.len()) {
            let bytes = &data[piece.range_off..piece.range_off + piece.len as usize];
            let appends = matches!(self.slices.last(),
                Some(s) if !s.sealed && s.chunk == piece.chunk && s.pos + s.len == piece.pos);
            if !appends {
                if self.slices.last().is_some_and(|s| s.chunk != piece.chunk) {
                    self.flush(t, inode).await?;
                }
                let id = next_slice_id().await?;
                self.slices.push(PendingSlice {
                    chunk: piece.chunk,
                    pos: piece.pos,
                    len: 0,
                    id,
                    next_block: 0,
                    tail: BlockBuf::default(),
                    uploads: Vec::new(),
                    failed: Vec::new(),
                    broken: false,
                    sealed: false,
                });
            }
            let slice = self.slices.last_mut().expect("a slice was just ensured");
            if !slice.tail.is_allocated() {
                slice.tail = BlockBuf::with_capacity((t.block_size as usize).max(bytes.len()));
            }
            slice.tail.extend(bytes);
            slice.len += piece.len;
            while slice.tail.len() >= t.block_size as usize {
                let mut rest = BlockBuf::with_capacity(t.block_size as usize);
                rest.extend(&slice.tail.data()[t.block_size as usize..]);
                slice.tail.truncate(t.block_size as usize);
                let block = std::mem::replace(&mut slice.tail, rest).freeze();
                let key = block_key(t.volume, slice.id, slice.next_block, t.block_size);
                slice.uploads.push(upload(t, key, block));
                slice.next_block += 1;
            }
            self.bound_inflight(t.max_inflight).await;
        }
        Ok(())
    }

    /// Waits for the oldest uploads while more than `max` are in flight
    /// (a failed one is kept for the flush to try again).
    async fn bound_inflight(&mut self, max: usize) {
        loop {
            let inflight: usize = self.slices.iter().map(|s| s.uploads.len()).sum();
            if inflight <= max {
                return;
            }
            let Some(slice) = self.slices.iter_mut().find(|s| !s.uploads.is_empty()) else {
                return;
            };
            let handle = slice.uploads.remove(0);
            slice.note(join(handle).await);
        }
    }

    /// Uploads what is left (blocks that failed before again), waits for
    /// every upload, then commits the slices in the order they were written.
    /// Returns the file's attributes after the last commit (None if nothing
    /// was pending). A failed upload, or a commit that failed for want of
    /// the database, stops there and keeps that slice and the later ones
    /// pending, to be tried again; an answer that they cannot be committed
    /// (the file is gone, no space) drops them all. The errno is returned
    /// ([`store_errno`] for the store's errors).
    pub async fn flush(&mut self, t: &WriteTarget<'_>, inode: u64) -> Result<Option<Attr>, i32> {
        let mut attr = None;
        while !self.slices.is_empty() {
            let slice = &mut self.slices[0];
            slice.sealed = true;
            if !slice.tail.is_empty() {
                let block = std::mem::take(&mut slice.tail).freeze();
                let key = block_key(t.volume, slice.id, slice.next_block, block.0.len() as u32);
                slice.uploads.push(upload(t, key, block));
                slice.next_block += 1;
            }
            for f in std::mem::take(&mut slice.failed) {
                slice.uploads.push(upload(t, f.key, (f.data, f.charge)));
            }
            for handle in std::mem::take(&mut slice.uploads) {
                slice.note(join(handle).await);
            }
            if let Some(f) = slice.failed.first() {
                tracing::error!(
                    "inode {inode}: storing slice {} in {} failed: {}; {} block(s) kept to try again",
                    slice.id,
                    t.store.describe(),
                    f.error,
                    slice.failed.len()
                );
                return Err(store_errno(&f.error));
            }
            if slice.broken {
                tracing::error!(
                    "inode {inode}: slice {} lost a block; bytes {} lost",
                    slice.id,
                    slice.range()
                );
                let slice = self.slices.remove(0);
                delete_blocks(t, slice.id, slice.len).await;
                return Err(libc::EIO);
            }
            let row = SliceRow {
                pos: slice.pos,
                id: slice.id,
                size: slice.len,
                off: 0,
                len: slice.len,
            };
            match t.meta.write_slice(inode, slice.chunk, row).await {
                Ok((a, sent_in)) => {
                    attr = Some(a);
                    self.committed_in.get_or_insert(sent_in);
                    self.slices.remove(0);
                }
                Err(MetaError::Errno(errno)) => {
                    let e = MetaError::Errno(errno);
                    let level_warn = errno == libc::EDQUOT || errno == libc::ENOSPC;
                    for slice in std::mem::take(&mut self.slices) {
                        if level_warn {
                            tracing::warn!(
                                "inode {inode}: slice {} not committed ({e}): bytes {} not written",
                                slice.id,
                                slice.range()
                            );
                        } else {
                            tracing::error!(
                                "inode {inode}: committing slice {} failed ({e}): bytes {} lost",
                                slice.id,
                                slice.range()
                            );
                        }
                        slice.discard(t).await;
                    }
                    return Err(errno);
                }
                Err(e) if e.may_have_committed() => {
                    tracing::error!(
                        "inode {inode}: the answer to the commit of slice {} (bytes {}) was lost: {e}",
                        slice.id,
                        slice.range()
                    );
                    let slice = self.slices.remove(0);
                    forget_blocks(t, slice.id, slice.len, &e).await;
                    return Err(e.errno());
                }
                Err(e) => {
                    let id = slice.id;
                    tracing::error!(
                        "inode {inode}: committing slice {id} failed: {e}; it and {} later \
                         slice(s) are kept to try again",
                        self.slices.len() - 1
                    );
                    return Err(e.errno());
                }
            }
        }
        Ok(attr)
    }
}

impl PendingSlice {
    /// Notes how one of its uploads ended.
    fn note(&mut self, uploaded: Uploaded) {
        match uploaded {
            Uploaded::Stored => {}
            Uploaded::Failed(f) => self.failed.push(f),
            Uploaded::Gone(why) => {
                tracing::error!("slice {}: a block upload died: {why}", self.id);
                self.broken = true;
            }
        }
    }

    /// The file bytes it covers, as text for the log.
    fn range(&self) -> String {
        let start = self.chunk as u64 * CHUNK_SIZE + self.pos as u64;
        format!("[{start}, {})", start + self.len as u64)
    }

    /// Gives it up: waits for its uploads, then deletes its blocks (never
    /// committed, nothing references them).
    async fn discard(self, t: &WriteTarget<'_>) {
        for handle in self.uploads {
            join(handle).await;
        }
        if self.next_block > 0 {
            delete_blocks(t, self.id, self.len).await;
        }
    }
}

/// After the commit of slice `id` (`size` bytes) failed with `e`: deletes
/// its blocks when the failure proves that nothing references them, and
/// keeps them when the commit may have happened (its answer was lost):
/// deleting them then could take the bytes of a committed file. Blocks
/// kept and not referenced are `jfs gc --delete`'s.
pub(super) async fn forget_blocks(t: &WriteTarget<'_>, id: u64, size: u32, e: &MetaError) {
    if e.may_have_committed() {
        tracing::warn!(
            "slice {id}: the commit's answer was lost ({e}); its blocks are kept \
             (if it was not committed, `jfs gc --delete` removes them)"
        );
        return;
    }
    delete_blocks(t, id, size).await;
}

/// Deletes the blocks of slice `id` (`size` bytes), stored but not
/// committed: nothing references them, so they go now rather than wait
/// for `jfs gc`.
pub(super) async fn delete_blocks(t: &WriteTarget<'_>, id: u64, size: u32) {
    for (_, _, key) in slice_blocks(t.volume, id, size, t.block_size) {
        if let Err(e) = t.store.delete(&key).await {
            tracing::warn!("deleting uncommitted block {key}: {e} (jfs gc will find it)");
        }
    }
}

/// The errno a failed block upload reports to the writer: a full or
/// over-quota store file system as itself (ENOSPC, EDQUOT), anything else EIO.
pub(super) fn store_errno(e: &io::Error) -> i32 {
    match e.raw_os_error() {
        Some(errno @ (libc::ENOSPC | libc::EDQUOT)) => errno,
        _ => match e.kind() {
            io::ErrorKind::StorageFull => libc::ENOSPC,
            io::ErrorKind::QuotaExceeded => libc::EDQUOT,
            _ => libc::EIO,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_buffers_are_aligned_and_keep_their_bytes() {
        let mut b = BlockBuf::with_capacity(3 * BLOCK_ALIGN);
        b.extend(&[1u8; 5000]);
        b.extend(&[2u8; 5000]);
        assert_eq!(b.len(), 10_000);
        b.truncate(6000);
        assert_eq!(&b.data()[4998..5002], &[1, 1, 2, 2]);
        let (frozen, _charge) = b.freeze();
        assert_eq!(frozen.len(), 6000);
        assert!((frozen.as_ptr() as usize).is_multiple_of(BLOCK_ALIGN));
        assert!(!BlockBuf::default().is_allocated());
    }

    #[test]
    fn a_full_store_is_enospc_and_other_failures_eio() {
        let full = io::Error::from_raw_os_error(libc::ENOSPC);
        assert_eq!(store_errno(&full), libc::ENOSPC);
        let wrapped = io::Error::new(io::ErrorKind::StorageFull, "bucket full");
        assert_eq!(store_errno(&wrapped), libc::ENOSPC);
        assert_eq!(
            store_errno(&io::Error::from_raw_os_error(libc::EDQUOT)),
            libc::EDQUOT
        );
        assert_eq!(store_errno(&io::Error::other("timeout")), libc::EIO);
    }
}
