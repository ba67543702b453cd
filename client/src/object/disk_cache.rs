//! A local disk cache of whole blocks in front of the object store: private to the mount's user, checked on every read, bounded in size and by free space, least recently used blocks evicted first.
//!
//! Blocks never change, so a cached block is valid as long as its bytes are
//! the ones stored. Each cache file holds a header (a magic number and the
//! block's length), a CRC-32 of every 32 KiB of the block, and the block; a
//! read checks the pieces it covers, and a mismatch (a bad disk, a file
//! changed behind the mount's back, an older cache format) is logged, the
//! file dropped, and the block read from the object store. Files are 0600 in
//! 0700 directories (the blocks are other users' file data), written to a
//! temporary name, flushed to disk and then renamed. A cache sealed with a
//! key ([`DiskCache::sealed_with`], `--cache-sealed`) holds each block as a
//! 12-byte nonce and its AES-256-GCM ciphertext and tag (the block's key as
//! associated data, so one cache file cannot pass for another): plain text
//! then exists only in the mount's memory.
use std::fs::{DirBuilder, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use lru::LruCache;

use crate::metrics::{self, DISK_CACHE, METRICS};

/// The first bytes of a cache file ("jfs cache, format 1").
const MAGIC: &[u8; 4] = b"jfc1";

/// The magic number of a sealed cache's files: a cache of plain blocks
/// never takes one for a block (nor the other way round).
const MAGIC_SEALED: &[u8; 4] = b"jfs1";
/// Bytes of block each checksum covers.
const PIECE: u64 = 32 << 10;
/// Magic, then the block's length (u64, little endian).
const HEADER: u64 = 12;

/// Puts the bytes cached into the metrics.
fn show_used(used: u64) {
    METRICS
        .cache_bytes
        .with_label_values(&[DISK_CACHE])
        .set(used as i64);
}

/// Checksums in a cache file of a block of `len` bytes.
fn pieces(len: u64) -> u64 {
    len.div_ceil(PIECE)
}

/// Where a block of `len` bytes starts in its cache file.
fn data_start(len: u64) -> u64 {
    HEADER + 4 * pieces(len)
}

/// The cache file of `block`: header (`magic`, length), checksums, block.
fn encode(magic: &[u8; 4], block: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data_start(block.len() as u64) as usize + block.len());
    out.extend_from_slice(magic);
    out.extend_from_slice(&(block.len() as u64).to_le_bytes());
    for piece in block.chunks(PIECE as usize) {
        out.extend_from_slice(&crc32fast::hash(piece).to_le_bytes());
    }
    out.extend_from_slice(block);
    out
}

/// Why a cache file could not give a range of its block.
#[derive(Debug)]
enum Unreadable {
    /// The file could not be opened (it went away).
    Gone,
    /// Not a cache file of this format, or a block shorter than asked.
    Format,
    /// The piece starting at this byte of the block has another checksum.
    Corrupt(u64),
    /// A sealed cache's block does not open with its key.
    Sealing,
}

/// Reads `len` bytes at `off` of the block cached in `path` (fewer at its
/// end) in a file of `magic`, checking every piece they touch.
fn read_checked(path: &Path, magic: &[u8; 4], off: u64, len: usize) -> Result<Bytes, Unreadable> {
    let file = std::fs::File::open(path).map_err(|_| Unreadable::Gone)?;
    let mut header = [0u8; HEADER as usize];
    file.read_exact_at(&mut header, 0)
        .map_err(|_| Unreadable::Format)?;
    if &header[..4] != magic {
        return Err(Unreadable::Format);
    }
    let block_len = u64::from_le_bytes(header[4..].try_into().expect("8 bytes"));
    if off >= block_len {
        return Ok(Bytes::new());
    }
    let end = (off + len as u64).min(block_len);
    let (first, last) = (off / PIECE, (end - 1) / PIECE);
    let mut sums = vec![0u8; 4 * (last - first + 1) as usize];
    file.read_exact_at(&mut sums, HEADER + 4 * first)
        .map_err(|_| Unreadable::Format)?;
    let from = first * PIECE;
    let to = ((last + 1) * PIECE).min(block_len);
    let mut data = vec![0u8; (to - from) as usize];
    file.read_exact_at(&mut data, data_start(block_len) + from)
        .map_err(|_| Unreadable::Format)?;
    for (i, (piece, sum)) in data.chunks(PIECE as usize).zip(sums.chunks(4)).enumerate() {
        if crc32fast::hash(piece).to_le_bytes() != sum {
            return Err(Unreadable::Corrupt(from + i as u64 * PIECE));
        }
    }
    let start = (off - from) as usize;
    Ok(Bytes::from(data).slice(start..start + (end - off) as usize))
}

/// Makes `dir` (and its parents) 0700.
fn private_dir(dir: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

/// Writes a cache file: 0600, flushed to disk before it takes its name.
fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    if let Some(parent) = path.parent() {
        private_dir(parent)?;
    }
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    file.write_all(bytes)?;
    file.sync_data()?;
    std::fs::rename(&tmp, path)
}

/// The share of the file system holding `dir` that is free for this user.
fn free_share(dir: &Path) -> Option<f64> {
    let st = nix::sys::statvfs::statvfs(dir).ok()?;
    (st.blocks() > 0).then(|| st.blocks_available() as f64 / st.blocks() as f64)
}

pub struct DiskCache {
    root: PathBuf,
    capacity: u64,
    /// Blocks are not cached while less than this share of the cache's
    /// file system is free.
    free_floor: f64,
    index: Mutex<Index>,
    /// Whether the free-space floor was said to be reached (said once).
    floor_said: AtomicBool,
    /// Blocks are kept sealed with this key (see the module's text).
    seal: Option<Arc<aes_gcm::Aes256Gcm>>,
}

/// Bytes of a sealed cache block's nonce.
const SEAL_NONCE: usize = 12;

/// `block` sealed with `cipher`, bound to `key`.
fn seal_block(cipher: &aes_gcm::Aes256Gcm, key: &str, block: &[u8]) -> Vec<u8> {
    use aes_gcm::aead::{Aead, Payload};
    use rand::RngCore;
    let mut nonce = [0u8; SEAL_NONCE];
    rand::rngs::OsRng.fill_bytes(&mut nonce);
    let sealed = cipher
        .encrypt(
            (&nonce).into(),
            Payload {
                msg: block,
                aad: key.as_bytes(),
            },
        )
        .expect("sealing a block never fails");
    [&nonce[..], &sealed].concat()
}

/// The block `stored` seals for `key` (None: not sealed so, or changed).
fn open_sealed(cipher: &aes_gcm::Aes256Gcm, key: &str, stored: &[u8]) -> Option<Vec<u8>> {
    use aes_gcm::aead::{Aead, Payload};
    let (nonce, sealed) = stored.split_at_checked(SEAL_NONCE)?;
    cipher
        .decrypt(
            nonce.into(),
            Payload {
                msg: sealed,
                aad: key.as_bytes(),
            },
        )
        .ok()
}

/// The cached blocks (key -> bytes on disk), least recently used first.
struct Index {
    blocks: LruCache<String, u64>,
    used: u64,
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
    /// Opens (and indexes) the cache in `dir`, keeping at most `capacity`
    /// bytes and caching nothing while less than `free_floor` of its file
    /// system is free. `dir` is made 0700; one that belongs to another user
    /// is refused.
    pub fn open(dir: &Path, capacity: u64, free_floor: f64) -> anyhow::Result<DiskCache> {
        let problem = |e: &dyn std::fmt::Display| {
            anyhow::anyhow!("the cache directory {}: {e}", dir.display())
        };
        private_dir(dir).map_err(|e| problem(&e))?;
        let md = std::fs::metadata(dir).map_err(|e| problem(&e))?;
        let me = nix::unistd::geteuid().as_raw();
        if md.uid() != me {
            return Err(problem(&format!(
                "belongs to uid {}, not to this mount's user (uid {me}): choose another",
                md.uid()
            )));
        }
        std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .map_err(|e| problem(&e))?;
        let mut found = Vec::new();
        scan(dir, dir, &mut found);
        found.sort_by_key(|f| f.2);
        let mut index = Index {
            blocks: LruCache::unbounded(),
            used: 0,
        };
        for (key, size, _) in found {
            index.used += size;
            index.blocks.put(key, size);
        }
        let cache = DiskCache {
            root: dir.to_path_buf(),
            capacity,
            free_floor,
            index: Mutex::new(index),
            floor_said: AtomicBool::new(false),
            seal: None,
        };
        cache.evict();
        Ok(cache)
    }

    /// The cache with its blocks sealed with `key` (AES-256-GCM). Files
    /// cached unsealed, or with another key, are dropped when read.
    pub fn sealed_with(mut self, key: [u8; 32]) -> DiskCache {
        use aes_gcm::KeyInit;
        self.seal = Some(Arc::new(aes_gcm::Aes256Gcm::new(&key.into())));
        self
    }

    fn path(&self, key: &str) -> PathBuf {
        self.root.join(key)
    }

    /// `len` bytes at `off` of a cached block, if it is cached (and its
    /// bytes are the block's).
    pub async fn get(&self, key: &str, off: u64, len: usize) -> Option<Bytes> {
        let found = self.read(key, off, len).await;
        metrics::cache_read(metrics::DISK_CACHE, found.is_some());
        found
    }

    async fn read(&self, key: &str, off: u64, len: usize) -> Option<Bytes> {
        // (a hit becomes the most recently used)
        self.index.lock().unwrap().blocks.get(key)?;
        let path = self.path(key);
        let (seal, owned_key) = (self.seal.clone(), key.to_string());
        let read = tokio::task::spawn_blocking(move || match seal {
            None => read_checked(&path, MAGIC, off, len),
            // a sealed block opens whole; the range is cut from it
            Some(cipher) => {
                let stored = read_checked(&path, MAGIC_SEALED, 0, usize::MAX)?;
                let block = open_sealed(&cipher, &owned_key, &stored).ok_or(Unreadable::Sealing)?;
                let start = (off as usize).min(block.len());
                let end = start.saturating_add(len).min(block.len());
                Ok(Bytes::from(block).slice(start..end))
            }
        })
        .await;
        match read {
            Ok(Ok(b)) => return Some(b),
            Ok(Err(Unreadable::Sealing)) => tracing::warn!(
                "disk cache: block {key} does not open with the cache's key (cached unsealed, \
                 with another key, or changed): dropped, read from the object store"
            ),
            Ok(Err(Unreadable::Corrupt(at))) => tracing::warn!(
                "disk cache: block {key} does not match its checksum at byte {at} (a bad disk, \
                 or a file changed behind the mount): dropped, read from the object store"
            ),
            Ok(Err(Unreadable::Format)) => tracing::warn!(
                "disk cache: {key} is not a cache file of this jfs (an older format, or cut \
                 short): dropped, read from the object store"
            ),
            _ => {}
        }
        self.forget(key);
        let _ = std::fs::remove_file(self.path(key));
        None
    }

    /// Whether block `key` is cached (as far as the index knows: a read
    /// still checks its bytes).
    pub fn contains(&self, key: &str) -> bool {
        self.index.lock().unwrap().blocks.contains(key)
    }

    /// Drops block `key` from the cache (`jfs warmup --evict`).
    pub fn remove(&self, key: &str) {
        self.forget(key);
        let _ = std::fs::remove_file(self.path(key));
    }

    /// Stores a whole block (in the background of the caller's read).
    pub async fn put(&self, key: &str, data: Bytes) {
        if data.len() as u64 > self.capacity || self.index.lock().unwrap().blocks.contains(key) {
            return;
        }
        if free_share(&self.root).is_some_and(|free| free < self.free_floor) {
            if !self.floor_said.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    "disk cache: less than {:.0}% of {} is free (--free-space-ratio): \
                     nothing more is cached until there is room",
                    self.free_floor * 100.0,
                    self.root.display()
                );
            }
            return;
        }
        self.floor_said.store(false, Ordering::Relaxed);
        let path = self.path(key);
        let (seal, owned_key) = (self.seal.clone(), key.to_string());
        let written = tokio::task::spawn_blocking(move || {
            let file = match seal {
                Some(cipher) => encode(MAGIC_SEALED, &seal_block(&cipher, &owned_key, &data)),
                None => encode(MAGIC, &data),
            };
            write_private(&path, &file).map(|()| file.len() as u64)
        })
        .await;
        if let Ok(Ok(size)) = written {
            {
                let mut ix = self.index.lock().unwrap();
                ix.used += size;
                if let Some(old) = ix.blocks.put(key.to_string(), size) {
                    ix.used -= old;
                }
            }
            self.evict();
        }
    }

    fn forget(&self, key: &str) {
        let mut ix = self.index.lock().unwrap();
        if let Some(size) = ix.blocks.pop(key) {
            ix.used -= size;
        }
        show_used(ix.used);
    }

    /// Deletes the least recently used blocks until the cache fits.
    fn evict(&self) {
        let mut victims = Vec::new();
        {
            let mut ix = self.index.lock().unwrap();
            while ix.used > self.capacity {
                let Some((key, size)) = ix.blocks.pop_lru() else {
                    break;
                };
                ix.used -= size;
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
    use std::os::unix::fs::PermissionsExt;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
    }

    #[tokio::test]
    async fn caches_evicts_and_reindexes() {
        let dir = tempfile::tempdir().unwrap();
        let size = encode(MAGIC, b"abcd").len() as u64;
        let c = DiskCache::open(dir.path(), 2 * size + 1, 0.0).unwrap();
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
        assert_eq!(c.used(), 2 * size);
        assert!(!dir.path().join("v/chunks/0/0/2_0_4").exists());
        // a new process finds what is on disk
        let again = DiskCache::open(dir.path(), 2 * size + 1, 0.0).unwrap();
        assert_eq!(again.used(), 2 * size);
        assert_eq!(
            &again.get("v/chunks/0/0/3_0_4", 0, 4).await.unwrap()[..],
            b"ijkl"
        );
        // a smaller limit evicts at open
        let small = DiskCache::open(dir.path(), size, 0.0).unwrap();
        assert_eq!(small.used(), size);
    }

    #[tokio::test]
    async fn cached_blocks_are_private_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("cache");
        let c = DiskCache::open(&root, 1 << 30, 0.0).unwrap();
        let block: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
        c.put("v/chunks/0/0/9_0_100000", Bytes::from(block.clone()))
            .await;
        let file = root.join("v/chunks/0/0/9_0_100000");
        assert_eq!(mode(&root), 0o700);
        assert_eq!(mode(&root.join("v/chunks/0")), 0o700);
        assert_eq!(mode(&file), 0o600);
        // a range across pieces, and one past the end
        let got = c
            .get("v/chunks/0/0/9_0_100000", 30_000, 40_000)
            .await
            .unwrap();
        assert_eq!(&got[..], &block[30_000..70_000]);
        let tail = c.get("v/chunks/0/0/9_0_100000", 99_990, 100).await.unwrap();
        assert_eq!(&tail[..], &block[99_990..]);
        // one byte changed behind the cache's back: not served, dropped
        let f = OpenOptions::new().write(true).open(&file).unwrap();
        f.write_all_at(b"X", data_start(100_000) + 50_000).unwrap();
        assert_eq!(
            &c.get("v/chunks/0/0/9_0_100000", 0, 10).await.unwrap()[..],
            &block[..10],
            "the pieces not touched are still good"
        );
        assert!(c
            .get("v/chunks/0/0/9_0_100000", 49_000, 2_000)
            .await
            .is_none());
        assert!(!file.exists());
        assert_eq!(c.used(), 0);
        // a file of another format is dropped too
        std::fs::write(root.join("v/chunks/0/0/8_0_4"), b"abcd").unwrap();
        let c = DiskCache::open(&root, 1 << 30, 0.0).unwrap();
        assert!(c.get("v/chunks/0/0/8_0_4", 0, 4).await.is_none());
    }

    #[tokio::test]
    async fn a_sealed_cache_holds_no_plain_text_and_opens_only_its_own_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("cache");
        let sealed = |key: u8| {
            DiskCache::open(&root, 1 << 30, 0.0)
                .unwrap()
                .sealed_with([key; 32])
        };
        let c = sealed(1);
        let text = "a line of plain text that must not reach the disk\n".repeat(2000);
        let (a, b) = ("v/chunks/0/0/9_0_102000", "v/chunks/0/0/10_0_102000");
        c.put(a, Bytes::from(text.clone())).await;
        c.put(b, Bytes::from(text.to_uppercase())).await;
        let file = std::fs::read(root.join(a)).unwrap();
        assert!(!file.windows(20).any(|w| w == &text.as_bytes()[..20]));
        assert_eq!(&c.get(a, 0, text.len()).await.unwrap()[..], text.as_bytes());
        let part = c.get(a, 50_000, 1_000).await.unwrap();
        assert_eq!(&part[..], &text.as_bytes()[50_000..51_000]);
        // one block's file under another's name does not open
        std::fs::copy(root.join(b), root.join(a)).unwrap();
        assert!(c.get(a, 0, 10).await.is_none());
        assert!(
            !root.join(a).exists(),
            "the file that did not open was kept"
        );
        // another key opens nothing; nor does a cache of plain blocks
        assert!(sealed(2).get(b, 0, 10).await.is_none());
        let plain = DiskCache::open(&root, 1 << 30, 0.0).unwrap();
        plain.put(a, Bytes::from(text.clone())).await;
        assert!(sealed(1).get(a, 0, 10).await.is_none());
        // and a cache of plain blocks never serves a sealed file as a block
        let c = sealed(1);
        c.put(b, Bytes::from(text.clone())).await;
        let plain = DiskCache::open(&root, 1 << 30, 0.0).unwrap();
        assert!(plain.get(b, 0, text.len()).await.is_none());
    }

    #[tokio::test]
    async fn nothing_is_cached_below_the_free_space_floor() {
        let dir = tempfile::tempdir().unwrap();
        let c = DiskCache::open(dir.path(), 1 << 30, 1.01).unwrap();
        c.put("k", Bytes::from_static(b"abcd")).await;
        assert_eq!(c.used(), 0);
        assert!(!dir.path().join("k").exists());
    }

    #[test]
    fn another_users_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let theirs = dir.path().join("theirs");
        std::fs::create_dir(&theirs).unwrap();
        std::os::unix::fs::chown(&theirs, Some(12345), None).unwrap();
        let e = DiskCache::open(&theirs, 1 << 20, 0.0).err().unwrap();
        assert!(e.to_string().contains("belongs to uid 12345"), "{e}");
    }
}
