//! Write buffers: a file's pending slices, uploaded block by block while writing goes on,
//! committed to the metadata in write order on flush.
//!
//! A slice's buffer grows with what is written into it (a 4 KiB write holds
//! about 4 KiB, not a block), and a write that lands in the part of a
//! pending slice not uploaded yet (over it or right after it) goes into that
//! slice's buffer instead of opening a new slice, unless a later slice
//! covers the same bytes (it would shadow the write at commit). A flush
//! uploads the slices' last blocks a window ahead of the commits, so many
//! small slices do not wait for one upload each in turn.
use std::io;
use std::sync::Arc;

use bytes::Bytes;

use super::block_buf::BlockBuf;
use tokio::task::JoinHandle;

use crate::meta::{
    time_to_ns, Attr, CommittedSlices, CreateWithData, DeferredAttrs, Epoch, Meta, MetaError,
    SetAttr, SliceRow, TimeSet, MAX_ANSWERS_LOST,
};
use crate::metrics::Charge;
use crate::object::{with_retries, ObjectStore};
use crate::volume::layout::{block_key, slice_blocks, split_by_chunk, CHUNK_SIZE};

mod commit;
mod slice;
#[cfg(test)]
mod tests;

pub(super) use slice::{delete_blocks, forget_blocks, store_errno};
use slice::{join, upload};

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
    /// A slice of a file no longer than this (the volume's inline_max),
    /// all of it in one block not yet stored, is kept in the database
    /// with its commit instead of stored as an object (0: never).
    pub inline_max: u32,
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
    /// Sealed to be kept in the database: its one block as its object
    /// would hold it (`tail` keeps the plain bytes, to be stored as an
    /// object after all if the database says the file is too long now).
    inline: Option<Bytes>,
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

/// How many of the latest pending slices a write looks through for one to
/// go into.
const MERGE_WINDOW: usize = 4096;

/// How many slices ahead of the one being committed a flush uploads.
const FLUSH_WINDOW: usize = 256;

/// How many stored slices a flush commits in one call (`jfs.write_slices`).
const COMMIT_BATCH: usize = 256;

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
    /// The epoch of the last flush's durable commit (see [`Writer::flush`]).
    durable_in: Option<Epoch>,
    /// Attribute changes (mode, owner, times; never the length) answered
    /// while writes were pending, merged in order: made in the transaction
    /// of the last slices' commit (cp -a's utimens and chmod cost no round
    /// trip of their own).
    attrs: Option<SetAttr>,
    /// The mode shown before a deferred chmod: the database keeps a mode
    /// someone else set meanwhile (their chmod came later).
    base_mode: Option<u32>,
    /// When the last of them was answered (ns since the epoch): the ctime
    /// this mount shows until the commit.
    attrs_at: i64,
    /// The errno of a deferred change the database refused at a commit
    /// whose slices it took: for the next close or fsync to report.
    attrs_refused: Option<i32>,
}

impl Writer {
    /// Nothing waits to be committed: no slice, no attribute change.
    pub fn is_empty(&self) -> bool {
        self.slices.is_empty() && self.attrs.is_none()
    }

    /// Whether slices wait to be committed (an attribute change can then
    /// go with them).
    pub fn has_slices(&self) -> bool {
        !self.slices.is_empty()
    }

    /// The attribute change waiting for the commit, if any.
    pub fn deferred_attrs(&self) -> Option<&SetAttr> {
        self.attrs.as_ref()
    }

    /// Adds `change` (no length) to the attribute change made with the
    /// commit of the pending slices; later fields replace earlier ones. A
    /// time set to now is now as the mount answers it (as it shows it, and
    /// as a replay after a server crash makes it again).
    /// `shown_mode`: the file's mode as this mount showed it before.
    pub fn defer_attrs(&mut self, change: &SetAttr, shown_mode: u32) {
        debug_assert!(change.length.is_none(), "a length is never deferred");
        if change.mode.is_some() && self.base_mode.is_none() {
            self.base_mode = Some(shown_mode);
        }
        self.attrs_at = time_to_ns(std::time::SystemTime::now());
        let at = |t: TimeSet| match t {
            TimeSet::Now => TimeSet::At(self.attrs_at),
            t => t,
        };
        let merged = self.attrs.get_or_insert_with(SetAttr::default);
        merged.mode = change.mode.or(merged.mode);
        merged.uid = change.uid.or(merged.uid);
        merged.gid = change.gid.or(merged.gid);
        merged.atime = change.atime.map(at).or(merged.atime);
        merged.mtime = change.mtime.map(at).or(merged.mtime);
    }

    /// The deferred change, as sent with a commit.
    fn deferred(&self) -> Option<DeferredAttrs> {
        self.attrs.map(|change| DeferredAttrs {
            change,
            base_mode: self.base_mode,
        })
    }

    fn clear_attrs(&mut self) {
        self.attrs = None;
        self.base_mode = None;
    }

    /// The errno of a deferred attribute change the database refused, once.
    pub fn take_attrs_refused(&mut self) -> Option<i32> {
        self.attrs_refused.take()
    }

    /// `attr` as it is once the deferred attribute change is made.
    pub fn show_deferred(&self, mut attr: Attr) -> Attr {
        let Some(change) = &self.attrs else {
            return attr;
        };
        let time = |t: TimeSet| match t {
            TimeSet::At(ns) => ns,
            TimeSet::Now => self.attrs_at, // (never kept: made At when deferred)
        };
        attr.mode = change.mode.map_or(attr.mode, |m| m & 0o7777);
        attr.uid = change.uid.unwrap_or(attr.uid);
        attr.gid = change.gid.unwrap_or(attr.gid);
        attr.atime = change.atime.map_or(attr.atime, time);
        attr.mtime = change.mtime.map_or(attr.mtime, time);
        attr.ctime = attr.ctime.max(self.attrs_at);
        attr
    }

    /// The file byte ranges of the pending writes, for the log.
    pub fn pending_ranges(&self) -> String {
        let ranges: Vec<String> = self.slices.iter().map(PendingSlice::range).collect();
        ranges.join(", ")
    }

    /// How long the oldest write not yet committed has waited.
    pub fn pending_for(&self) -> Option<std::time::Duration> {
        match self.is_empty() {
            true => None,
            false => self.dirty_since.map(|t| t.elapsed()),
        }
    }

    /// The epoch the oldest slice committed since the last call was sent
    /// in (what a sync of the file must cover), if any was committed.
    pub fn take_committed_in(&mut self) -> Option<Epoch> {
        self.committed_in.take()
    }

    /// The epoch the last flush's commit was durable in, if it was (asked
    /// for with `durable`, and the server did not change since).
    pub fn take_durable_in(&mut self) -> Option<Epoch> {
        self.durable_in.take()
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
    /// hands out slice ids. Writing on from the end of a chunk into the next
    /// first commits what is pending (so a sequential writer commits every
    /// 64 MiB, and a full quota stops it there with the errno, not only at
    /// close).
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
        let block_size = t.block_size as usize;
        for piece in split_by_chunk(offset, data.len()) {
            let bytes = &data[piece.range_off..piece.range_off + piece.len as usize];
            let index = match self.writable_slice(piece.chunk, piece.pos, piece.len, t.block_size) {
                Some(i) => i,
                None => {
                    // a writer going on into the next chunk commits what it wrote
                    // (one commit per 64 MiB of a sequential file; a full quota
                    // stops it there); writes here and there stay pending
                    if self.slices.last().is_some_and(|s| {
                        piece.pos == 0
                            && piece.chunk == s.chunk + 1
                            && s.pos + s.len == CHUNK_SIZE as u32
                    }) {
                        // (an attribute change waits for the close: its
                        // caller shows it, and this commit tells nobody)
                        self.flush_slices(t, inode, false, false, &mut None).await?;
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
                        inline: None,
                    });
                    self.slices.len() - 1
                }
            };
            let slice = &mut self.slices[index];
            let at = (piece.pos - slice.tail_start(t.block_size)) as usize;
            slice.tail.put(at, bytes, block_size);
            slice.len = slice.len.max(piece.pos + piece.len - slice.pos);
            while slice.tail.len() >= block_size {
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

    /// The pending slice a write of `len` bytes at `pos` of `chunk` can go
    /// into: not sealed, the write starts in its buffered (not yet
    /// uploaded) part or right after it, and no later slice overlaps the
    /// write (its bytes would shadow the write's at commit). Looks through
    /// the latest [`MERGE_WINDOW`] slices, newest first.
    fn writable_slice(&self, chunk: u32, pos: u32, len: u32, block_size: u32) -> Option<usize> {
        let first = self.slices.len().saturating_sub(MERGE_WINDOW);
        for i in (first..self.slices.len()).rev() {
            let s = &self.slices[i];
            if s.chunk != chunk {
                continue;
            }
            let writable = !s.sealed && s.tail_start(block_size) <= pos && pos <= s.pos + s.len;
            let overlaps = s.pos < pos + len && pos < s.pos + s.len;
            if writable {
                return Some(i);
            } else if overlaps {
                return None; // the newest slice under the write cannot take it
            }
        }
        None
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
}
