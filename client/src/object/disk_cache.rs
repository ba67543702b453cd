//! A local disk cache of whole blocks in front of the object store, bounded in size,
//! least recently used blocks evicted first. Blocks never change, so a cached
//! block is always valid.
use std::collections::{HashMap, VecDeque};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use bytes::Bytes;

use crate::metrics::{self, DISK_CACHE, METRICS};

/// Puts the bytes cached into the metrics.
fn show_used(used: u64) {
    METRICS
        .cache_bytes
        .with_label_values(&[DISK_CACHE])
        .set(used as i64);
}

pub struct DiskCache {
    root: PathBuf,
    capacity: u64,
    index: Mutex<Index>,
}

#[derive(Default)]
struct Index {
    sizes: HashMap<String, u64>,
    order: VecDeque<String>,
    used: u64,
}

impl Index {
    fn touch(&mut self, key: &str) {
        if let Some(pos) = self.order.iter().position(|k| k == key) {
            let k = self.order.remove(pos).expect("position is valid");
            self.order.push_back(k);
        }
    }
}

fn scan(dir: &Path, root: &Path, found: &mut Vec<(String, u64, std::time::SystemTime)>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let path = e.path();
        let Ok(md) = e.metadata() else { continue };
        if md.is_dir() {
            scan(&path, root, found);
        } else if let Ok(rel) = path.strip_prefix(root) {
            let key = rel.to_string_lossy().to_string();
            if key.contains(".tmp.") {
                let _ = std::fs::remove_file(&path);
            } else {
                found.push((
                    key,
                    md.len(),
                    md.modified().unwrap_or(std::time::UNIX_EPOCH),
                ));
            }
        }
    }
}

impl DiskCache {
    /// Opens (and indexes) the cache in `dir`, keeping at most `capacity` bytes.
    pub fn open(dir: &Path, capacity: u64) -> anyhow::Result<DiskCache> {
        std::fs::create_dir_all(dir).map_err(|e| {
            anyhow::anyhow!("cannot create the cache directory {}: {e}", dir.display())
        })?;
        let mut found = Vec::new();
        scan(dir, dir, &mut found);
        found.sort_by_key(|f| f.2);
        let mut index = Index::default();
        for (key, size, _) in found {
            index.used += size;
            index.sizes.insert(key.clone(), size);
            index.order.push_back(key);
        }
        let cache = DiskCache {
            root: dir.to_path_buf(),
            capacity,
            index: Mutex::new(index),
        };
        cache.evict();
        Ok(cache)
    }

    fn path(&self, key: &str) -> PathBuf {
        self.root.join(key)
    }

    /// `len` bytes at `off` of a cached block, if it is cached.
    pub async fn get(&self, key: &str, off: u64, len: usize) -> Option<Bytes> {
        let found = self.read(key, off, len).await;
        metrics::cache_read(metrics::DISK_CACHE, found.is_some());
        found
    }

    async fn read(&self, key: &str, off: u64, len: usize) -> Option<Bytes> {
        if !self.index.lock().unwrap().sizes.contains_key(key) {
            return None;
        }
        self.index.lock().unwrap().touch(key);
        let path = self.path(key);
        let read = tokio::task::spawn_blocking(move || super::read_range(&path, off, len)).await;
        match read {
            Ok(Ok(b)) => Some(b),
            _ => {
                self.forget(key);
                None
            }
        }
    }

    /// Stores a whole block (in the background of the caller's read).
    pub async fn put(&self, key: &str, data: Bytes) {
        if data.len() as u64 > self.capacity || self.index.lock().unwrap().sizes.contains_key(key) {
            return;
        }
        let path = self.path(key);
        let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
        let size = data.len() as u64;
        let written = tokio::task::spawn_blocking(move || -> io::Result<()> {
            if let Some(p) = path.parent() {
                std::fs::create_dir_all(p)?;
            }
            std::fs::write(&tmp, &data)?;
            std::fs::rename(&tmp, &path)
        })
        .await;
        if let Ok(Ok(())) = written {
            {
                let mut ix = self.index.lock().unwrap();
                ix.used += size;
                ix.sizes.insert(key.to_string(), size);
                ix.order.push_back(key.to_string());
            }
            self.evict();
        }
    }

    fn forget(&self, key: &str) {
        let mut ix = self.index.lock().unwrap();
        if let Some(size) = ix.sizes.remove(key) {
            ix.used -= size;
            ix.order.retain(|k| k != key);
        }
        show_used(ix.used);
    }

    /// Deletes the least recently used blocks until the cache fits.
    fn evict(&self) {
        let mut victims = Vec::new();
        {
            let mut ix = self.index.lock().unwrap();
            while ix.used > self.capacity {
                let Some(key) = ix.order.pop_front() else {
                    break;
                };
                if let Some(size) = ix.sizes.remove(&key) {
                    ix.used -= size;
                }
                victims.push(key);
            }
            show_used(ix.used);
        }
        for key in victims {
            let _ = std::fs::remove_file(self.path(&key));
        }
    }

    /// Bytes cached now.
    #[cfg(test)]
    fn used(&self) -> u64 {
        self.index.lock().unwrap().used
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn caches_evicts_and_reindexes() {
        let dir = tempfile::tempdir().unwrap();
        let c = DiskCache::open(dir.path(), 10).unwrap();
        c.put("v/chunks/0/0/1_0_4", Bytes::from_static(b"abcd"))
            .await;
        c.put("v/chunks/0/0/2_0_4", Bytes::from_static(b"efgh"))
            .await;
        assert_eq!(&c.get("v/chunks/0/0/1_0_4", 1, 2).await.unwrap()[..], b"bc");
        // 1 was used last: 2 goes first when 3 arrives
        c.put("v/chunks/0/0/3_0_4", Bytes::from_static(b"ijkl"))
            .await;
        assert!(c.get("v/chunks/0/0/2_0_4", 0, 4).await.is_none());
        assert!(c.get("v/chunks/0/0/1_0_4", 0, 4).await.is_some());
        assert_eq!(c.used(), 8);
        assert!(!dir.path().join("v/chunks/0/0/2_0_4").exists());
        // a new process finds what is on disk
        let again = DiskCache::open(dir.path(), 10).unwrap();
        assert_eq!(again.used(), 8);
        assert_eq!(
            &again.get("v/chunks/0/0/3_0_4", 0, 4).await.unwrap()[..],
            b"ijkl"
        );
        // a smaller limit evicts at open
        let small = DiskCache::open(dir.path(), 4).unwrap();
        assert_eq!(small.used(), 4);
    }
}
