//! A pending slice's blocks: their uploads, waited for, retried or
//! discarded, and the blocks of slices that will never be committed.
use super::*;

pub(super) fn upload(t: &WriteTarget<'_>, key: String, (data, charge): (Bytes, Charge)) -> Upload {
    let store = t.store.clone();
    let class = t.class.clone();
    t.runtime.spawn(async move {
        // the charge is held until the block is stored (or handed back)
        match with_retries(&format!("put {key}"), || {
            store.put_block(&key, data.clone(), &class)
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
pub(super) enum Uploaded {
    Stored,
    /// Failed: the block, to upload again.
    Failed(FailedUpload),
    /// Its task died (a panic): the bytes are gone.
    Gone(String),
}

pub(super) async fn join(handle: Upload) -> Uploaded {
    match handle.await {
        Ok(Ok(())) => Uploaded::Stored,
        Ok(Err(failed)) => Uploaded::Failed(failed),
        Err(e) => Uploaded::Gone(e.to_string()),
    }
}

impl PendingSlice {
    /// Where its buffered part starts in the chunk (the blocks before it
    /// are uploading or stored).
    pub(super) fn tail_start(&self, block_size: u32) -> u32 {
        self.pos + self.next_block * block_size
    }

    /// How it is committed: all of it, from its first byte.
    pub(super) fn row(&self) -> SliceRow {
        SliceRow {
            pos: self.pos,
            id: self.id,
            size: self.len,
            off: 0,
            len: self.len,
            inline: self.inline.clone(),
        }
    }

    /// Whether it can be kept in the database: all of it in its buffer,
    /// within chunk 0's first `inline_max` bytes.
    fn fits_inline(&self, inline_max: u32) -> bool {
        self.chunk == 0
            && self.next_block == 0
            && self.failed.is_empty()
            && !self.tail.is_empty()
            && self.tail.len() == self.len as usize
            && self.pos as u64 + self.len as u64 <= inline_max as u64
    }

    /// Seals it (nothing more goes into it) and starts uploading what is
    /// not in the store yet: its last block, and blocks that failed before.
    /// A slice that [fits](PendingSlice::fits_inline) `t.inline_max` is
    /// encoded to be kept in the database instead (its bytes stay in
    /// `tail` until it is committed).
    pub(super) fn upload_rest(&mut self, t: &WriteTarget<'_>) {
        self.seal(t, t.inline_max);
    }

    /// [`PendingSlice::upload_rest`], kept in the database only if it fits
    /// `inline_max`.
    fn seal(&mut self, t: &WriteTarget<'_>, inline_max: u32) {
        self.sealed = true;
        if self.inline.is_none() && self.fits_inline(inline_max) {
            let key = block_key(t.volume, self.id, 0, self.len);
            let plain = Bytes::copy_from_slice(self.tail.data());
            match t.store.encode_block(&key, plain) {
                Ok(stored) => {
                    self.inline = Some(stored);
                    return;
                }
                Err(e) => tracing::warn!(
                    "slice {}: encoding it failed ({e}): stored as an object",
                    self.id
                ),
            }
        }
        if self.inline.is_some() {
            return;
        }
        if !self.tail.is_empty() {
            let block = std::mem::take(&mut self.tail).freeze();
            let key = block_key(t.volume, self.id, self.next_block, block.0.len() as u32);
            self.uploads.push(upload(t, key, block));
            self.next_block += 1;
        }
        for f in std::mem::take(&mut self.failed) {
            self.uploads.push(upload(t, f.key, (f.data, f.charge)));
        }
    }

    /// Notes how one of its uploads ended.
    pub(super) fn note(&mut self, uploaded: Uploaded) {
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
    pub(super) fn range(&self) -> String {
        let start = self.chunk as u64 * CHUNK_SIZE + self.pos as u64;
        format!("[{start}, {})", start + self.len as u64)
    }

    /// The database would not keep it (the file is longer than its
    /// inline_max now): it is stored as an object instead, from its bytes.
    pub(super) fn store_instead(&mut self, t: &WriteTarget<'_>) {
        if self.inline.take().is_some() {
            self.seal(t, 0);
        }
    }

    /// Gives it up: waits for its uploads, then deletes its blocks (never
    /// committed, nothing references them).
    pub(super) async fn discard(self, t: &WriteTarget<'_>) {
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
pub(in crate::vfs) async fn forget_blocks(t: &WriteTarget<'_>, id: u64, size: u32, e: &MetaError) {
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
pub(in crate::vfs) async fn delete_blocks(t: &WriteTarget<'_>, id: u64, size: u32) {
    for (_, _, key) in slice_blocks(t.volume, id, size, t.block_size) {
        if let Err(e) = t.store.delete(&key).await {
            tracing::warn!("deleting uncommitted block {key}: {e} (jfs gc will find it)");
        }
    }
}

/// The errno a failed block upload reports to the writer: a full or
/// over-quota store file system as itself (ENOSPC, EDQUOT), anything else EIO.
pub(in crate::vfs) fn store_errno(e: &io::Error) -> i32 {
    match e.raw_os_error() {
        Some(errno @ (libc::ENOSPC | libc::EDQUOT)) => errno,
        _ => match e.kind() {
            io::ErrorKind::StorageFull => libc::ENOSPC,
            io::ErrorKind::QuotaExceeded => libc::EDQUOT,
            _ => libc::EIO,
        },
    }
}
