//! Compaction: a chunk written as many slices is read once, stored again as
//! one slice, and swapped in by `jfs.compact_chunk` if it did not change.
//!
//! Every committed write is a slice, and a read of a chunk merges all of
//! its slices, so a file rewritten in small pieces (a database file, a log
//! appended with fsync) gets slower to read with every write. A mount
//! compacts a chunk in the background once it counts [`COMPACT_AT`] slices
//! (when it reads the chunk, or after as many commits to it); `jfs compact`
//! does a whole tree. The swap checks the chunk's last slice, so a write,
//! truncate or another compaction in between makes it give up (the new
//! slice's blocks are deleted) rather than lose anything.
use bytes::Bytes;
use futures_util::stream::{self, StreamExt, TryStreamExt};

use std::collections::HashSet;
use std::sync::Mutex;

use super::reader::inline_range;
use super::writer::{delete_blocks, forget_blocks, WriteTarget};
use super::{errno, Vfs, VfsResult};
use crate::metrics::METRICS;
use crate::object::with_retries;
use crate::volume::layout::{
    block_key, block_reads, inline_block, slice_blocks, visible, Source, CHUNK_SIZE,
};

/// Slices in one chunk from which a mount compacts it in the background
/// (`jfs mount --compact-at`).
pub const COMPACT_AT: usize = 100;

/// Object reads or writes one compaction keeps in flight.
const PARALLEL_IO: usize = 16;

/// What compacting one chunk did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compacted {
    /// `slices` slices became one.
    Done { slices: usize },
    /// The chunk changed while it was rewritten; nothing was swapped.
    Changed,
    /// Nothing to do: the chunk has fewer than two slices, or none within
    /// the file's length.
    Nothing,
}

/// Compacts chunk `chunk` of file `inode` (new blocks go where `t` says).
pub async fn compact_chunk<F, Fut>(
    t: &WriteTarget<'_>,
    inode: u64,
    chunk: u32,
    next_slice_id: F,
) -> Result<Compacted, i32>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Result<u64, i32>>,
{
    let found = t
        .meta
        .compaction_slices(inode, chunk)
        .await
        .map_err(|e| e.errno())?;
    let Some((rows, last_seq, length)) = found else {
        return Ok(Compacted::Nothing);
    };
    // bytes past the file's length read as zeros when it grows again: the
    // new slice stops at the length, and whatever lies beyond goes
    let chunk_len = length
        .saturating_sub(chunk as u64 * CHUNK_SIZE)
        .min(CHUNK_SIZE) as u32;
    let start = rows.iter().map(|r| r.pos).min().unwrap_or(0);
    let end = rows
        .iter()
        .map(|r| r.pos + r.len)
        .max()
        .unwrap_or(0)
        .min(chunk_len);
    if rows.len() < 2 || end <= start {
        return Ok(Compacted::Nothing);
    }

    let mut fetches = Vec::new();
    for seg in visible(&rows, start, end) {
        let Source::Slice { id, size, off } = seg.source else {
            continue;
        };
        let mut dest = (seg.start - start) as usize;
        let inline = inline_block(&rows, id);
        for br in block_reads(size, t.block_size, off, seg.end - seg.start) {
            let key = block_key(t.volume, id, br.index, br.block_len);
            fetches.push((dest, key, br, inline.clone()));
            dest += br.len as usize;
        }
    }
    let reads: Vec<_> = fetches
        .iter()
        .map(|(_, key, br, inline)| {
            let (store, key, off, len) =
                (t.store.clone(), key.clone(), br.off as u64, br.len as usize);
            let inline = inline.clone();
            async move {
                match inline {
                    Some(stored) => {
                        inline_range(store.as_ref(), &key, &stored, off as u32, len as u32).map_err(
                            |_| {
                                std::io::Error::other(format!(
                                    "{key}: kept in the database, does not open"
                                ))
                            },
                        )
                    }
                    None => with_retries(&format!("get {key}"), || store.get(&key, off, len)).await,
                }
            }
        })
        .collect();
    let parts: Vec<Bytes> = stream::iter(reads)
        .buffered(PARALLEL_IO)
        .try_collect()
        .await
        .map_err(|e| {
            tracing::error!("compacting chunk {chunk} of inode {inode}: {e}");
            libc::EIO
        })?;
    let mut buf = vec![0u8; (end - start) as usize];
    for ((dest, key, br, _), data) in fetches.iter().zip(parts) {
        if data.len() < br.len as usize {
            tracing::error!(
                "compacting inode {inode}: object {key} is shorter than its slice says"
            );
            return Err(libc::EIO);
        }
        buf[*dest..*dest + br.len as usize].copy_from_slice(&data[..br.len as usize]);
    }

    let id = next_slice_id().await?;
    let size = end - start;
    let data = Bytes::from(buf);
    let bs = t.block_size;
    let writes: Vec<_> = slice_blocks(t.volume, id, size, bs)
        .map(|(index, len, key)| {
            let from = index as usize * bs as usize;
            let block = data.slice(from..from + len as usize);
            let (store, class) = (t.store.clone(), t.class.clone());
            async move {
                with_retries(&format!("put {key}"), || {
                    store.put_block(&key, block.clone(), &class)
                })
                .await
            }
        })
        .collect();
    let stored = stream::iter(writes)
        .buffer_unordered(PARALLEL_IO)
        .try_collect::<Vec<()>>()
        .await;
    if let Err(e) = stored {
        tracing::error!("compacting chunk {chunk} of inode {inode}: storing the new slice: {e}");
        delete_blocks(t, id, size).await;
        return Err(libc::EIO);
    }
    match t
        .meta
        .compact_chunk(inode, chunk, rows.len(), last_seq, id, size, start)
        .await
    {
        Ok(()) => {
            METRICS.compactions.inc();
            METRICS.compacted_slices.inc_by(rows.len() as u64);
            Ok(Compacted::Done { slices: rows.len() })
        }
        Err(e) => {
            forget_blocks(t, id, size, &e).await;
            match e.errno() {
                libc::EAGAIN | libc::ENOENT => Ok(Compacted::Changed),
                errno => {
                    tracing::error!("compacting chunk {chunk} of inode {inode}: {e}");
                    Err(errno)
                }
            }
        }
    }
}

/// Chunks waiting for a background compaction (each queued once), taken
/// one at a time by the job `background::spawn` starts.
pub(super) struct CompactionQueue {
    tx: tokio::sync::mpsc::UnboundedSender<(u64, u32)>,
    rx: Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<(u64, u32)>>>,
    queued: Mutex<HashSet<(u64, u32)>>,
}

impl CompactionQueue {
    pub(super) fn new() -> CompactionQueue {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        CompactionQueue {
            tx,
            rx: Mutex::new(Some(rx)),
            queued: Mutex::new(HashSet::new()),
        }
    }
}

impl Vfs {
    /// Queues chunk `chunk` of `inode` for a background compaction (once).
    pub(super) fn queue_compaction(&self, inode: u64, chunk: u32) {
        if self.config.read_only || self.config.compact_at == 0 {
            return;
        }
        if self
            .compactions
            .queued
            .lock()
            .unwrap()
            .insert((inode, chunk))
        {
            let _ = self.compactions.tx.send((inode, chunk));
        }
    }

    /// The queue of background compactions, for the job that runs them.
    pub fn take_compaction_queue(
        &self,
    ) -> Option<tokio::sync::mpsc::UnboundedReceiver<(u64, u32)>> {
        self.compactions.rx.lock().unwrap().take()
    }

    /// Compacts one chunk of a file now (a queued one: it leaves the queue).
    pub async fn compact(&self, inode: u64, chunk: u32) -> VfsResult<Compacted> {
        self.writable()?;
        let result = self.compact_now(inode, chunk).await;
        self.compactions
            .queued
            .lock()
            .unwrap()
            .remove(&(inode, chunk));
        result
    }

    async fn compact_now(&self, inode: u64, chunk: u32) -> VfsResult<Compacted> {
        let file = self.open_file(inode);
        let tier = match &file {
            Some(f) => f.state.lock().await.tier,
            None => self.ns.getattr_now(inode).await.map_err(errno)?.tier,
        };
        let target = self.target(inode, tier);
        let done = compact_chunk(&target, inode, chunk, || self.ns.new_slice(inode)).await?;
        if let (Compacted::Done { .. }, Some(f)) = (done, file) {
            // the slice lists kept here name the old slices
            f.state.lock().await.changed();
        }
        Ok(done)
    }
}
