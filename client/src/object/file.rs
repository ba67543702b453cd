//! The `file` backend: objects as files under a local directory.
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use bytes::Bytes;

use super::{ObjectInfo, ObjectStore};

pub struct FileStore {
    root: PathBuf,
    tmp_counter: AtomicU64,
}

impl FileStore {
    /// A store rooted at `dir`, created if missing.
    pub fn new(dir: &str) -> anyhow::Result<FileStore> {
        let root = PathBuf::from(dir);
        if !root.is_absolute() {
            anyhow::bail!("--bucket for file storage must be an absolute directory, not {dir:?}");
        }
        std::fs::create_dir_all(&root)
            .map_err(|e| anyhow::anyhow!("cannot create the block directory {dir}: {e}"))?;
        Ok(FileStore {
            root,
            tmp_counter: AtomicU64::new(0),
        })
    }

    fn path(&self, key: &str) -> io::Result<PathBuf> {
        if key.is_empty() || key.starts_with('/') || key.split('/').any(|p| p == "..") {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("bad object key {key:?}"),
            ));
        }
        Ok(self.root.join(key))
    }
}

#[async_trait]
impl ObjectStore for FileStore {
    async fn put(&self, key: &str, data: Bytes) -> io::Result<()> {
        let path = self.path(key)?;
        let tmp = path.with_extension(format!(
            "tmp.{}.{}",
            std::process::id(),
            self.tmp_counter.fetch_add(1, Ordering::Relaxed)
        ));
        tokio::task::spawn_blocking(move || {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            // write then rename: a reader never sees half an object
            std::fs::write(&tmp, &data)?;
            std::fs::rename(&tmp, &path).inspect_err(|_| {
                let _ = std::fs::remove_file(&tmp);
            })
        })
        .await
        .map_err(io::Error::other)?
    }

    async fn get(&self, key: &str, off: u64, len: usize) -> io::Result<Bytes> {
        let path = self.path(key)?;
        tokio::task::spawn_blocking(move || super::read_range(&path, off, len))
            .await
            .map_err(io::Error::other)?
    }

    async fn delete(&self, key: &str) -> io::Result<()> {
        let path = self.path(key)?;
        match tokio::fs::remove_file(&path).await {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn list(&self, prefix: &str) -> io::Result<Vec<ObjectInfo>> {
        let root = self.root.clone();
        let prefix = prefix.to_string();
        tokio::task::spawn_blocking(move || {
            // walk from the deepest directory the prefix names
            let start = match prefix.rfind('/') {
                Some(i) => root.join(&prefix[..i]),
                None => root.clone(),
            };
            let mut out = Vec::new();
            let mut dirs = vec![start];
            while let Some(dir) = dirs.pop() {
                let entries = match std::fs::read_dir(&dir) {
                    Ok(e) => e,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(e),
                };
                for entry in entries {
                    let entry = entry?;
                    let meta = entry.metadata()?;
                    if meta.is_dir() {
                        dirs.push(entry.path());
                        continue;
                    }
                    let Ok(rel) = entry.path().strip_prefix(&root).map(|p| p.to_path_buf()) else {
                        continue;
                    };
                    let key = rel.to_string_lossy().to_string();
                    if key.starts_with(&prefix) {
                        out.push(ObjectInfo {
                            key,
                            size: meta.len(),
                            modified: meta.modified()?,
                        });
                    }
                }
            }
            Ok(out)
        })
        .await
        .map_err(io::Error::other)?
    }

    fn describe(&self) -> String {
        format!("file://{}", self.root.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn put_get_ranges_delete() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileStore::new(dir.path().to_str().unwrap()).unwrap();
        store
            .put("v/chunks/0/0/1_0_5", Bytes::from_static(b"hello"))
            .await
            .unwrap();
        assert_eq!(
            &store.get("v/chunks/0/0/1_0_5", 1, 3).await.unwrap()[..],
            b"ell"
        );
        assert_eq!(
            &store.get("v/chunks/0/0/1_0_5", 3, 10).await.unwrap()[..],
            b"lo"
        );
        store.delete("v/chunks/0/0/1_0_5").await.unwrap();
        store.delete("v/chunks/0/0/1_0_5").await.unwrap();
        assert!(store.get("v/chunks/0/0/1_0_5", 0, 1).await.is_err());
    }

    #[tokio::test]
    async fn refuses_keys_outside_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileStore::new(dir.path().to_str().unwrap()).unwrap();
        assert!(store.put("../x", Bytes::new()).await.is_err());
        assert!(store.put("/abs", Bytes::new()).await.is_err());
        assert!(FileStore::new("relative/dir").is_err());
    }
}
