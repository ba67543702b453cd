//! Warming a mount's disk cache (`jfs warmup`): the blocks of one file
//! fetched into it from the object store, dropped from it, or counted.
use futures_util::stream::{self, StreamExt};

use super::Vfs;
use crate::meta::Attr;
use crate::object::with_retries;
use crate::volume::layout::{block_key, block_len, CHUNK_SIZE};

/// What a warmup request does with a file's blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Warmup {
    /// Fetch those not cached yet.
    Fetch,
    /// Drop them from the cache.
    Evict,
    /// Count those cached.
    Check,
}

impl Vfs {
    /// Does `what` with the blocks of file `attr`, `parallel` fetches at
    /// once; answers "blocks TOTAL CACHED bytes TOTAL CACHED" (cached
    /// after the request: none after an eviction).
    pub(super) async fn warmup_file(
        &self,
        attr: &Attr,
        what: Warmup,
        parallel: usize,
    ) -> Result<String, String> {
        let text = |e: i32| std::io::Error::from_raw_os_error(e).to_string();
        let Some(disk) = self.config.disk_cache.clone() else {
            return Err("this mount keeps no disk cache (mount it with --cache-dir)".into());
        };
        let bs = self.volume.block_size.max(1);
        let mut blocks: Vec<(String, u32)> = Vec::new();
        for chunk in 0..attr.length.div_ceil(CHUNK_SIZE) as u32 {
            let slices = self
                .ns
                .meta_of(attr.inode)
                .read_chunk(attr.inode, chunk)
                .await
                .map_err(|e| text(e.errno()))?;
            // (a slice kept in the database has no object to warm)
            for s in slices
                .iter()
                .filter(|s| s.id != 0 && s.len > 0 && s.inline.is_none())
            {
                for index in s.off / bs..=(s.off + s.len - 1) / bs {
                    let len = block_len(s.size, bs, index);
                    blocks.push((block_key(&self.volume.name, s.id, index, len), len));
                }
            }
        }
        blocks.sort();
        blocks.dedup();
        let total_bytes: u64 = blocks.iter().map(|b| b.1 as u64).sum();
        let cached = |blocks: &[(String, u32)]| {
            let hits: Vec<_> = blocks.iter().filter(|b| disk.contains(&b.0)).collect();
            (hits.len(), hits.iter().map(|b| b.1 as u64).sum::<u64>())
        };
        match what {
            Warmup::Check => {}
            Warmup::Evict => blocks.iter().for_each(|b| disk.remove(&b.0)),
            Warmup::Fetch => {
                let missing: Vec<(String, u32)> = blocks
                    .iter()
                    .filter(|b| !disk.contains(&b.0))
                    .cloned()
                    .collect();
                // (owned items: the future stays Send for every caller)
                let fetched = stream::iter(missing)
                    .map(|(key, len)| {
                        let (disk, store) = (disk.clone(), self.store.clone());
                        async move {
                            let data = with_retries(&format!("get {key}"), || {
                                store.get(&key, 0, len as usize)
                            })
                            .await
                            .map_err(|e| format!("{key}: {e:#}"))?;
                            if data.len() != len as usize {
                                return Err(format!("{key}: {} bytes, not {len}", data.len()));
                            }
                            disk.put(&key, data).await;
                            Ok(())
                        }
                    })
                    .buffer_unordered(parallel.clamp(1, 64))
                    .collect::<Vec<Result<(), String>>>()
                    .await;
                if let Some(Err(e)) = fetched.into_iter().find(Result::is_err) {
                    return Err(format!("fetching a block: {e}"));
                }
            }
        }
        let (n, bytes) = cached(&blocks);
        Ok(format!(
            "blocks {} {n} bytes {total_bytes} {bytes}\n",
            blocks.len()
        ))
    }
}
