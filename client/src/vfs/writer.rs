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

    /// Uploads what is left (blocks that failed before again), waits for
    /// every upload, then commits the slices in the order they were written
    /// (those stored, up to [`COMMIT_BATCH`] in one call), the last of them
    /// with the deferred attribute change (alone if no slice is left to
    /// carry it). Returns the file's attributes after the last commit (None
    /// if nothing was pending); a refused attribute change is dropped and
    /// its errno returned once the slices are committed. A failed upload, or a commit that failed for want of
    /// the database, stops there and keeps that slice and the later ones
    /// pending, to be tried again; an answer that they cannot be committed
    /// (the file is gone, no space) drops them all. The errno is returned
    /// ([`store_errno`] for the store's errors). With `durable` the last
    /// commit waits for the WAL flush (a close or fsync in 'fsync' mode:
    /// no sync of its own follows; see [`Writer::take_durable_in`]).
    ///
    /// `create`: the file's creation, made here under its directory's lease
    /// and not yet committed, which goes with the first commit; taken
    /// (None) once made.
    pub async fn flush(
        &mut self,
        t: &WriteTarget<'_>,
        inode: u64,
        durable: bool,
        create: &mut Option<CreateWithData>,
    ) -> Result<Option<Attr>, i32> {
        self.durable_in = None;
        self.flush_slices(t, inode, true, durable, create).await
    }

    /// Uploads what is pending, as a flush does before its first commit,
    /// and waits for it (a flush that follows commits at once).
    pub async fn store(&mut self, t: &WriteTarget<'_>) {
        self.stored_ahead(t).await;
    }

    /// Uploads the rest of the next slices (a window ahead of the commits)
    /// and waits for the first ones' blocks: how many slices from the first
    /// are stored whole (at most a commit's batch).
    async fn stored_ahead(&mut self, t: &WriteTarget<'_>) -> usize {
        // the rest of the next slices goes to the store together
        for s in self.slices.iter_mut().take(FLUSH_WINDOW) {
            if !s.sealed || !s.failed.is_empty() {
                s.upload_rest(t);
            }
        }
        let mut ready = 0;
        while ready < self.slices.len().min(COMMIT_BATCH) {
            let slice = &mut self.slices[ready];
            if !slice.sealed {
                break; // (past the upload window)
            }
            for handle in std::mem::take(&mut slice.uploads) {
                slice.note(join(handle).await);
            }
            if !slice.failed.is_empty() || slice.broken {
                break;
            }
            ready += 1;
        }
        ready
    }

    /// [`Writer::flush`]; the attribute change goes along only when
    /// `with_attrs`, the last commit is durable only when `durable`.
    async fn flush_slices(
        &mut self,
        t: &WriteTarget<'_>,
        inode: u64,
        with_attrs: bool,
        durable: bool,
        create: &mut Option<CreateWithData>,
    ) -> Result<Option<Attr>, i32> {
        let mut attr = None;
        let mut answers_lost = 0;
        while !self.slices.is_empty() {
            let ready = self.stored_ahead(t).await;
            if ready == 0 {
                return Err(self.unstored(t, inode).await);
            }
            let batch: Vec<(u32, SliceRow)> = self.slices[..ready]
                .iter()
                .map(|s| (s.chunk, s.row()))
                .collect();
            // the attribute change goes with the last slices
            let last = ready == self.slices.len();
            let attrs = self.deferred().filter(|_| with_attrs && last);
            let durable = durable && last;
            let committed_slices = |w: CommittedSlices| {
                let sent_in = Some(w.sent_in);
                (w.committed, w.attr, w.attrs_errno, sent_in, w.durable)
            };
            let result = match (ready, attrs, durable, create.as_ref()) {
                (1, None, false, None) => {
                    match t.meta.write_slice(inode, batch[0].0, batch[0].1).await {
                        Ok((a, sent_in)) => Ok((1, Ok(a), None, Some(sent_in), false)),
                        Err(MetaError::Errno(errno)) => Ok((0, Err(errno), None, None, false)),
                        Err(e) => Err(e),
                    }
                }
                (_, _, _, None) => t
                    .meta
                    .write_slices(inode, &batch, attrs.as_ref(), durable)
                    .await
                    .map(committed_slices),
                (_, _, _, Some(made)) => t
                    .meta
                    .mknod_with_slices(made, &batch, attrs.as_ref(), durable)
                    .await
                    .map(committed_slices),
            };
            match result {
                Ok((committed, outcome, attrs_errno, sent_in, made_durable)) => {
                    // (the file was made, in the same transaction)
                    *create = None;
                    if committed > 0 {
                        if let Some(sent_in) = sent_in {
                            self.committed_in.get_or_insert(sent_in);
                            if made_durable {
                                self.durable_in = Some(sent_in);
                            }
                        }
                        self.slices.drain(..committed);
                    }
                    if let Some(errno) = attrs_errno {
                        self.clear_attrs();
                        if errno != 0 {
                            self.attrs_refused = Some(errno);
                            tracing::error!(
                                "inode {inode}: the attribute change {:?} made while its writes \
                                 were pending was refused at their commit: {}",
                                attrs.map(|d| d.change).unwrap_or_default(),
                                MetaError::Errno(errno)
                            );
                        }
                    }
                    match outcome {
                        Ok(a) => attr = Some(a),
                        Err(errno) => {
                            self.refused(t, inode, errno).await;
                            if with_attrs {
                                // the change needs no slice: made alone
                                let _ = self.commit_attrs_alone(t, inode).await;
                            }
                            return Err(errno);
                        }
                    }
                }
                Err(e) if e.may_have_committed() => {
                    // ask the database what happened (the answer waits out an outage)
                    answers_lost += 1;
                    let settled = match answers_lost <= MAX_ANSWERS_LOST {
                        true => t
                            .meta
                            .settle_slices(inode, &batch, attrs.as_ref(), create.as_ref())
                            .await
                            .ok(),
                        false => None,
                    };
                    if let Some((committed, seen_in)) = settled {
                        tracing::warn!(
                            "inode {inode}: the answer to a commit of {ready} slice(s) was lost ({e}); \
                             the database has {committed} of them, the others are sent again"
                        );
                        if committed > 0 {
                            self.committed_in.get_or_insert(seen_in);
                            self.slices.drain(..committed);
                            *create = None;
                        }
                        if committed == ready && attrs.is_some() {
                            // made with the last slice, in its transaction
                            self.clear_attrs();
                        }
                        continue;
                    }
                    for slice in self.slices.drain(..ready).collect::<Vec<_>>() {
                        tracing::error!(
                            "inode {inode}: the answer to the commit of slice {} (bytes {}) was lost: {e}",
                            slice.id,
                            slice.range()
                        );
                        forget_blocks(t, slice.id, slice.len, &e).await;
                    }
                    return Err(e.errno());
                }
                Err(e) => {
                    tracing::error!(
                        "inode {inode}: committing slice {} failed: {e}; it and {} later \
                         slice(s) are kept to try again",
                        self.slices[0].id,
                        self.slices.len() - 1
                    );
                    return Err(e.errno());
                }
            }
        }
        if !with_attrs {
            return Ok(attr);
        }
        match self.commit_attrs_alone(t, inode).await? {
            Some(a) => {
                self.durable_in = None; // (a commit after the durable one)
                Ok(Some(a))
            }
            None => Ok(attr),
        }
    }

    /// The deferred attribute change with no slice left to carry it (those
    /// it waited for were refused): made alone. A refusal drops it (its
    /// errno is kept for the next close or fsync); a failure for want of
    /// the database keeps it to try again.
    async fn commit_attrs_alone(
        &mut self,
        t: &WriteTarget<'_>,
        inode: u64,
    ) -> Result<Option<Attr>, i32> {
        let Some(mut change) = self.attrs else {
            return Ok(None);
        };
        if let (Some(_), Some(base)) = (change.mode, self.base_mode) {
            // as write_slices does: a mode someone else set meanwhile stands
            match t.meta.getattr(inode).await {
                Ok(now) if now.mode != base & 0o7777 => change.mode = None,
                Ok(_) => {}
                Err(MetaError::Errno(errno)) => {
                    self.clear_attrs();
                    self.attrs_refused = Some(errno);
                    return Ok(None);
                }
                Err(e) => return Err(e.errno()),
            }
        }
        if change.mask() == 0 {
            self.clear_attrs();
            return Ok(None);
        }
        // (a commit of the file, which the next sync of it must cover)
        self.committed_in.get_or_insert(t.meta.epoch());
        match t.meta.setattr(inode, &change).await {
            Ok(a) => {
                self.clear_attrs();
                Ok(Some(a))
            }
            Err(e) => {
                tracing::error!(
                    "inode {inode}: the attribute change {change:?} made while its writes \
                     were pending: {e}"
                );
                if let MetaError::Errno(errno) = e {
                    self.clear_attrs();
                    self.attrs_refused = Some(errno);
                    return Ok(None);
                }
                Err(e.errno())
            }
        }
    }

    /// The first pending slice could not be stored: its errno, with the
    /// cause in the log (a failed upload is kept to try again; a slice that
    /// lost a block is given up).
    async fn unstored(&mut self, t: &WriteTarget<'_>, inode: u64) -> i32 {
        let slice = &self.slices[0];
        if let Some(f) = slice.failed.first() {
            tracing::error!(
                "inode {inode}: storing slice {} in {} failed: {}; {} block(s) kept to try again",
                slice.id,
                t.store.describe(),
                f.error,
                slice.failed.len()
            );
            return store_errno(&f.error);
        }
        tracing::error!(
            "inode {inode}: slice {} lost a block; bytes {} lost",
            slice.id,
            slice.range()
        );
        let slice = self.slices.remove(0);
        delete_blocks(t, slice.id, slice.len).await;
        libc::EIO
    }

    /// The database refused the first pending slice (`errno`: the file is
    /// gone, no space or quota left): it and every later one are given up,
    /// with their byte ranges in the log, and their blocks deleted.
    async fn refused(&mut self, t: &WriteTarget<'_>, inode: u64, errno: i32) {
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
    }
}

impl PendingSlice {
    /// Where its buffered part starts in the chunk (the blocks before it
    /// are uploading or stored).
    fn tail_start(&self, block_size: u32) -> u32 {
        self.pos + self.next_block * block_size
    }

    /// How it is committed: all of it, from its first byte.
    fn row(&self) -> SliceRow {
        SliceRow {
            pos: self.pos,
            id: self.id,
            size: self.len,
            off: 0,
            len: self.len,
        }
    }

    /// Seals it (nothing more goes into it) and starts uploading what is
    /// not in the store yet: its last block, and blocks that failed before.
    fn upload_rest(&mut self, t: &WriteTarget<'_>) {
        self.sealed = true;
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

    fn pending(chunk: u32, pos: u32, len: u32, next_block: u32) -> PendingSlice {
        let mut tail = BlockBuf::default();
        let buffered = len - next_block * 4096;
        tail.put(0, &vec![0u8; buffered as usize], 4096);
        PendingSlice {
            chunk,
            pos,
            len,
            id: 1,
            next_block,
            tail,
            uploads: Vec::new(),
            failed: Vec::new(),
            broken: false,
            sealed: false,
        }
    }

    #[test]
    fn a_write_goes_into_the_newest_pending_slice_it_lands_on_unless_shadowed() {
        const BS: u32 = 4096;
        let mut w = Writer::default();
        w.slices.push(pending(0, 0, 3000, 0)); // [0, 3000)
        w.slices.push(pending(0, 10_000, 100, 0)); // [10000, 10100)
        w.slices.push(pending(1, 0, 100, 0)); // another chunk
                                              // over a slice, inside it, right after it
        assert_eq!(w.writable_slice(0, 100, 10, BS), Some(0));
        assert_eq!(w.writable_slice(0, 3000, 10, BS), Some(0));
        assert_eq!(w.writable_slice(0, 10_050, 500, BS), Some(1));
        assert_eq!(w.writable_slice(1, 50, 10, BS), Some(2));
        // a gap: a new slice
        assert_eq!(w.writable_slice(0, 5000, 10, BS), None);
        // slice 0 would take a write that slice 1 (newer) overlaps: no
        assert_eq!(w.writable_slice(0, 2900, 7200, BS), None);
        // bytes already uploading (its first block) cannot change
        w.slices.push(pending(0, 20_000, 5000, 1)); // block 0 of it uploading
        assert_eq!(w.writable_slice(0, 20_100, 10, BS), None);
        assert_eq!(w.writable_slice(0, 24_100, 10, BS), Some(3));
        // sealed (a flush began): nothing more goes in
        w.slices[0].sealed = true;
        assert_eq!(w.writable_slice(0, 100, 10, BS), None);
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

    #[test]
    fn deferred_changes_merge_in_order_and_show_on_the_attributes() {
        let mut w = Writer::default();
        let base = Attr {
            inode: 5,
            kind: crate::meta::NodeType::File,
            mode: 0o600,
            uid: 1,
            gid: 2,
            atime: 10,
            mtime: 20,
            ctime: 30,
            nlink: 1,
            length: 100,
            rdev: 0,
            parent: 1,
            tier: 0,
            used: 100,
        };
        assert!(w.is_empty());
        let same = w.show_deferred(base.clone());
        assert_eq!((same.mode, same.mtime, same.ctime), (0o600, 20, 30));
        w.defer_attrs(
            &SetAttr {
                mode: Some(0o100644),
                mtime: Some(TimeSet::At(7)),
                ..SetAttr::default()
            },
            0o600,
        );
        w.defer_attrs(
            &SetAttr {
                mode: Some(0o4755),
                atime: Some(TimeSet::Now),
                ..SetAttr::default()
            },
            0o644,
        );
        assert!(
            !w.is_empty() && !w.has_slices(),
            "a change waits without slices"
        );
        let change = w.deferred_attrs().unwrap();
        assert_eq!(change.mode, Some(0o4755), "the later mode wins");
        assert!(
            matches!(change.mtime, Some(TimeSet::At(7))),
            "the earlier mtime stays"
        );
        let shown = w.show_deferred(base.clone());
        assert_eq!((shown.mode, shown.uid, shown.gid), (0o4755, 1, 2));
        assert_eq!(shown.mtime, 7);
        assert_eq!(shown.atime, w.attrs_at);
        assert!(shown.ctime >= w.attrs_at && shown.length == 100);
    }
}
