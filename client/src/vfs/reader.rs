//! Read path: the visible slices of each chunk, block ranges fetched in
//! parallel, whole blocks cached in memory for sequential readers.
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures_util::future::try_join_all;
use tokio::sync::Notify;

use super::{OpenFile, Vfs};
use crate::metrics::{self, MEMORY_CACHE, METRICS};
use crate::object::with_retries;
use crate::volume::layout::{
    block_count, block_key, block_len, block_reads, inline_block, split_by_chunk, visible, Source,
    CHUNK_SIZE,
};

/// Whole blocks recently read, up to a byte budget, oldest dropped first.
/// Cloning shares the cache.
#[derive(Clone)]
pub struct BlockCache {
    capacity: usize,
    inner: Arc<Mutex<CacheInner>>,
}

#[derive(Default)]
struct CacheInner {
    blocks: HashMap<String, Bytes>,
    order: VecDeque<String>,
    bytes: usize,
    /// Blocks a prefetch is loading now, and who waits for them.
    loading: HashMap<String, Arc<Notify>>,
}

/// Bytes of readahead a sequential reader keeps in flight.
const READAHEAD_BYTES: u64 = 32 << 20;

impl BlockCache {
    pub fn new(capacity: usize) -> BlockCache {
        BlockCache {
            capacity,
            inner: Arc::new(Mutex::new(CacheInner::default())),
        }
    }

    /// false if someone is loading `key` already.
    fn start_loading(&self, key: &str) -> bool {
        let mut c = self.inner.lock().unwrap();
        if c.loading.contains_key(key) {
            return false;
        }
        c.loading.insert(key.to_string(), Arc::new(Notify::new()));
        true
    }

    /// Waits until nobody is loading `key` (at most `limit`).
    async fn wait_loaded(&self, key: &str, limit: std::time::Duration) {
        let Some(done) = self.inner.lock().unwrap().loading.get(key).cloned() else {
            return;
        };
        let notified = done.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if !self.inner.lock().unwrap().loading.contains_key(key) {
            return;
        }
        let _ = tokio::time::timeout(limit, notified).await;
    }

    fn done_loading(&self, key: &str) {
        if let Some(done) = self.inner.lock().unwrap().loading.remove(key) {
            done.notify_waiters();
        }
    }

    fn get(&self, key: &str) -> Option<Bytes> {
        self.inner.lock().unwrap().blocks.get(key).cloned()
    }

    fn put(&self, key: String, data: Bytes) {
        if data.len() > self.capacity {
            return;
        }
        let mut c = self.inner.lock().unwrap();
        if c.blocks.contains_key(&key) {
            return;
        }
        c.bytes += data.len();
        c.order.push_back(key.clone());
        c.blocks.insert(key, data);
        while c.bytes > self.capacity {
            let Some(old) = c.order.pop_front() else {
                break;
            };
            if let Some(b) = c.blocks.remove(&old) {
                c.bytes -= b.len();
            }
        }
        METRICS
            .cache_bytes
            .with_label_values(&[MEMORY_CACHE])
            .set(c.bytes as i64);
    }
}

/// One piece of the answer: `len` bytes at `off` of block `index` of slice
/// `id` (stored size `size`) go to `dest`.
struct Fetch {
    /// The file read (for messages).
    inode: u64,
    dest: usize,
    key: String,
    id: u64,
    size: u32,
    index: u32,
    block_len: u32,
    off: u32,
    len: u32,
    /// The block as stored, kept in the database (it has no object).
    inline: Option<Bytes>,
}

/// `len` bytes at `off` of block `key` kept in the database as `stored`
/// (decoded as the store decodes its objects); EIO, logged, when it does
/// not open.
pub(super) fn inline_range(
    store: &dyn crate::object::ObjectStore,
    key: &str,
    stored: &Bytes,
    off: u32,
    len: u32,
) -> Result<Bytes, i32> {
    let block = store.decode_block(key, stored.clone()).map_err(|e| {
        tracing::error!("block {key}, kept in the database: {e}");
        libc::EIO
    })?;
    let end = ((off + len) as usize).min(block.len());
    Ok(block.slice((off as usize).min(end)..end))
}

impl Vfs {
    /// Reads up to `size` bytes at `offset` of an open file. Pending writes
    /// of this mount are committed first, so a reader sees them.
    pub(super) async fn read_file(
        &self,
        file: &OpenFile,
        offset: u64,
        size: u32,
        sequential: bool,
    ) -> Result<Bytes, i32> {
        let length = {
            let mut state = file.state.lock().await;
            state.usable()?;
            if !state.writer.is_empty() {
                self.flush_locked(file.inode, &mut state).await?;
            }
            state.length
        };
        if offset >= length || size == 0 {
            return Ok(Bytes::new());
        }
        let end = (offset + size as u64).min(length);
        let wanted = (end - offset) as usize;
        let block_size = self.volume.block_size;
        let mut fetches = Vec::new();
        let pieces = split_by_chunk(offset, wanted);
        if let Some(last) = pieces.last().filter(|_| sequential) {
            if (last.pos + last.len) as u64 + self.readahead_bytes() > CHUNK_SIZE {
                self.read_ahead_next_chunk(file, last.chunk, length).await;
            }
        }
        for piece in pieces {
            let slices = self.chunk_slices(file, piece.chunk).await?;
            let any_inline = slices.iter().any(|s| s.inline.is_some());
            for seg in visible(&slices, piece.pos, piece.pos + piece.len) {
                let Source::Slice { id, size, off } = seg.source else {
                    continue;
                };
                let inline = any_inline.then(|| inline_block(&slices, id)).flatten();
                let mut dest = piece.range_off + (seg.start - piece.pos) as usize;
                for br in block_reads(size, block_size, off, seg.end - seg.start) {
                    fetches.push(Fetch {
                        inode: file.inode,
                        dest,
                        key: block_key(&self.volume.name, id, br.index, br.block_len),
                        id,
                        size,
                        index: br.index,
                        block_len: br.block_len,
                        off: br.off,
                        len: br.len,
                        inline: inline.clone(),
                    });
                    dest += br.len as usize;
                }
            }
        }
        let parts = try_join_all(fetches.iter().map(|f| self.fetch(f, sequential))).await?;
        if let ([f], [data]) = (&fetches[..], &parts[..]) {
            // the whole answer from one block (the usual sequential read): no copy
            if f.dest == 0 && f.len as usize == wanted && data.len() >= wanted {
                return Ok(data.slice(..wanted));
            }
        }
        let mut buf = vec![0u8; wanted];
        for (f, data) in fetches.iter().zip(parts) {
            if data.len() < f.len as usize {
                tracing::error!(
                    "object {} in {} is shorter than its slice says ({} < {}): the bucket lost data",
                    f.key,
                    self.store.describe(),
                    f.off as usize + data.len(),
                    f.off + f.len
                );
                return Err(libc::EIO);
            }
            buf[f.dest..f.dest + f.len as usize].copy_from_slice(&data[..f.len as usize]);
        }
        Ok(Bytes::from(buf))
    }

    async fn fetch(&self, f: &Fetch, sequential: bool) -> Result<Bytes, i32> {
        if let Some(stored) = &f.inline {
            return inline_range(self.store.as_ref(), &f.key, stored, f.off, f.len);
        }
        let cached = |block: Bytes| {
            block.slice(f.off as usize..(f.off + f.len).min(block.len() as u32) as usize)
        };
        let memory_hit = |block: Bytes| {
            metrics::cache_read(MEMORY_CACHE, true);
            if sequential {
                self.read_ahead(f);
            }
            Ok(cached(block))
        };
        if let Some(block) = self.cache.get(&f.key) {
            return memory_hit(block);
        }
        // a readahead of this block is on its way: wait for it rather than read twice
        self.cache
            .wait_loaded(&f.key, std::time::Duration::from_secs(30))
            .await;
        if let Some(block) = self.cache.get(&f.key) {
            return memory_hit(block);
        }
        metrics::cache_read(MEMORY_CACHE, false);
        let disk = self.config.disk_cache.clone();
        // with a disk cache every miss fetches (and keeps) the whole block;
        // so does one of a store that reads objects whole (compressed or
        // sealed), which keeps it in memory too
        let decoded_whole = self.store.whole_objects();
        let whole = sequential || disk.is_some() || decoded_whole;
        if let Some(disk) = &disk {
            if let Some(block) = disk.get(&f.key, 0, f.block_len as usize).await {
                if block.len() == f.block_len as usize {
                    if sequential {
                        self.cache.put(f.key.clone(), block.clone());
                        self.read_ahead(f);
                    }
                    return Ok(cached(block));
                }
            }
        }
        let (off, len) = if whole {
            (0, f.block_len)
        } else {
            (f.off, f.len)
        };
        let got = with_retries(&format!("get {}", f.key), || {
            self.store.get(&f.key, off as u64, len as usize)
        })
        .await;
        let data = match got {
            Ok(data) => data,
            Err(e) if e.to_string().contains("InvalidObjectState") => {
                let path = match self.ns.path_of(f.inode).await {
                    Ok(Some(p)) => p,
                    _ => format!("inode {}", f.inode),
                };
                tracing::error!(
                    "{path}: block {} is in an archive storage class and not restored; \
                     run `jfs tier restore META_URL {path}` and read again once it is done",
                    f.key
                );
                return Err(libc::EIO);
            }
            Err(e) => {
                tracing::error!("reading {} from {}: {e}", f.key, self.store.describe());
                return Err(libc::EIO);
            }
        };
        if !whole {
            return Ok(data);
        }
        if let Some(disk) = disk {
            if data.len() == f.block_len as usize {
                let (key, block) = (f.key.clone(), data.clone());
                self.runtime
                    .spawn(async move { disk.put(&key, block).await });
            }
        }
        if sequential || decoded_whole {
            self.cache.put(f.key.clone(), data.clone());
        }
        if sequential {
            self.read_ahead(f);
        }
        let end = ((f.off + f.len) as usize).min(data.len());
        Ok(data.slice((f.off as usize).min(end)..end))
    }

    /// Readahead for a sequential reader at `f`: the blocks of its slice in
    /// the next READAHEAD_BYTES (at least two, at most a quarter of the
    /// block cache), loading in parallel.
    fn read_ahead(&self, f: &Fetch) {
        let bs = self.volume.block_size.max(1) as u64;
        let blocks = (self.readahead_bytes() / bs).max(2) as u32;
        for i in 1..=blocks {
            self.prefetch(f.id, f.size, f.index + i);
        }
    }

    fn readahead_bytes(&self) -> u64 {
        READAHEAD_BYTES.min(self.cache.capacity as u64 / 4)
    }

    /// Near the end of chunk `chunk`, a sequential reader's readahead goes
    /// on into the next chunk (its slices are read once, then kept with the
    /// file), so the reader does not stall at every 64 MiB.
    async fn read_ahead_next_chunk(&self, file: &OpenFile, chunk: u32, length: u64) {
        let next = chunk + 1;
        if next as u64 * CHUNK_SIZE >= length {
            return;
        }
        let Ok(slices) = self.chunk_slices(file, next).await else {
            return;
        };
        let end = self
            .readahead_bytes()
            .min(length - next as u64 * CHUNK_SIZE) as u32;
        for seg in visible(&slices, 0, end) {
            if let Source::Slice { id, size, off } = seg.source {
                for br in block_reads(size, self.volume.block_size, off, seg.end - seg.start) {
                    self.prefetch(id, size, br.index);
                }
            }
        }
    }

    /// Readahead: loads block `index` of a slice into the cache in the
    /// background, so a sequential reader finds it there.
    fn prefetch(&self, id: u64, size: u32, index: u32) {
        let bs = self.volume.block_size;
        if index >= block_count(size, bs) {
            return;
        }
        let key = block_key(&self.volume.name, id, index, block_len(size, bs, index));
        if self.cache.get(&key).is_some() || !self.cache.start_loading(&key) {
            return;
        }
        let (store, cache) = (self.store.clone(), self.cache.clone());
        let disk = self.config.disk_cache.clone();
        let len = block_len(size, bs, index);
        self.runtime.spawn(async move {
            let mut data = None;
            if let Some(disk) = &disk {
                data = disk.get(&key, 0, len as usize).await;
            }
            if data.as_ref().map(|d| d.len()) != Some(len as usize) {
                data = store.get(&key, 0, len as usize).await.ok();
                if let (Some(disk), Some(d)) = (&disk, &data) {
                    if d.len() == len as usize {
                        disk.put(&key, d.clone()).await;
                    }
                }
            }
            if let Some(d) = data {
                if d.len() == len as usize {
                    cache.put(key.clone(), d);
                }
            }
            cache.done_loading(&key);
        });
    }

    /// The slices of a chunk, from the file's cache or the database. A list
    /// read from the database is cached only if the file did not change
    /// here while it was read (see [`super::FileState`]).
    async fn chunk_slices(
        &self,
        file: &OpenFile,
        chunk: u32,
    ) -> Result<Arc<Vec<crate::meta::SliceRow>>, i32> {
        let generation = {
            let state = file.state.lock().await;
            if let Some(s) = state.chunks.get(&chunk) {
                return Ok(s.clone());
            }
            state.generation
        };
        let slices = Arc::new(
            self.ns
                .meta_of(file.inode)
                .read_chunk(file.inode, chunk)
                .await
                .map_err(|e| e.errno())?,
        );
        let mut state = file.state.lock().await;
        if state.generation == generation {
            state.chunks.insert(chunk, slices.clone());
        }
        drop(state);
        if self.config.compact_at > 0 && slices.len() >= self.config.compact_at {
            self.queue_compaction(file.inode, chunk);
        }
        Ok(slices)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_keeps_within_its_budget() {
        let c = BlockCache::new(10);
        c.put("a".into(), Bytes::from_static(b"12345"));
        c.put("b".into(), Bytes::from_static(b"12345"));
        assert!(c.get("a").is_some() && c.get("b").is_some());
        c.put("c".into(), Bytes::from_static(b"123"));
        assert!(c.get("a").is_none());
        assert!(c.get("b").is_some() && c.get("c").is_some());
        c.put("huge".into(), Bytes::from(vec![0u8; 11]));
        assert!(c.get("huge").is_none());
    }
}
