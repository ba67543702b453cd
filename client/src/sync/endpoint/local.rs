//! A local directory as a sync endpoint (std::fs on tokio's blocking pool).
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::Context;
use async_trait::async_trait;
use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{temp_name, Endpoint, Entry, Kind, Reader, Writer, PIECE};
use crate::meta::ns_to_time;

pub struct LocalTree {
    root: PathBuf,
}

impl LocalTree {
    pub fn new(root: PathBuf) -> LocalTree {
        LocalTree { root }
    }

    fn at(&self, path: &str) -> PathBuf {
        if path.is_empty() {
            self.root.clone()
        } else {
            self.root.join(path)
        }
    }
}

/// Runs blocking file work on tokio's blocking pool.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> anyhow::Result<T> + Send + 'static,
) -> anyhow::Result<T> {
    tokio::task::spawn_blocking(f).await?
}

/// Nanoseconds since the epoch (a date past what they count, 2262, is
/// held at the last one).
fn mtime_of(m: &std::fs::Metadata) -> i64 {
    m.mtime()
        .saturating_mul(1_000_000_000)
        .saturating_add(m.mtime_nsec())
}

/// The tree under `root`, depth first; entries that are neither files,
/// directories nor symlinks, or whose names are not UTF-8, are left out
/// with a warning.
fn walk(root: &Path) -> anyhow::Result<Vec<Entry>> {
    let mut out = Vec::new();
    let mut pending = vec![String::new()];
    while let Some(dir) = pending.pop() {
        let at = if dir.is_empty() {
            root.to_path_buf()
        } else {
            root.join(&dir)
        };
        let listing =
            std::fs::read_dir(&at).with_context(|| format!("cannot list {}", at.display()))?;
        for item in listing {
            let item = item.with_context(|| format!("cannot list {}", at.display()))?;
            let Some(name) = item.file_name().to_str().map(str::to_string) else {
                tracing::warn!("{}: the name is not UTF-8, left out", item.path().display());
                continue;
            };
            let path = super::joined(&dir, &name);
            let m = std::fs::symlink_metadata(item.path())
                .with_context(|| format!("cannot stat {}", item.path().display()))?;
            let kind = if m.is_dir() {
                Kind::Dir
            } else if m.is_file() {
                Kind::File
            } else if m.file_type().is_symlink() {
                Kind::Symlink
            } else {
                tracing::warn!(
                    "{}: not a file, directory or symlink, left out",
                    item.path().display()
                );
                continue;
            };
            let target = match kind {
                Kind::Symlink => Some(
                    std::fs::read_link(item.path())
                        .with_context(|| format!("cannot read link {}", item.path().display()))?
                        .as_os_str()
                        .as_bytes()
                        .to_vec(),
                ),
                _ => None,
            };
            if kind == Kind::Dir {
                pending.push(path.clone());
            }
            out.push(Entry {
                path,
                kind,
                size: if kind == Kind::File { m.len() } else { 0 },
                mtime: mtime_of(&m),
                mode: m.mode() & super::KEPT_MODE,
                target,
            });
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

#[async_trait]
impl Endpoint for LocalTree {
    fn describe(&self) -> String {
        self.root.display().to_string()
    }

    fn keeps_attrs(&self) -> bool {
        true
    }

    fn keeps_tree(&self) -> bool {
        true
    }

    async fn prepare(&self, create: bool) -> anyhow::Result<()> {
        let root = self.root.clone();
        blocking(move || {
            match std::fs::metadata(&root) {
                Ok(m) if m.is_dir() => return Ok(()),
                Ok(_) => anyhow::bail!("{} is not a directory", root.display()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && create => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    anyhow::bail!("{} does not exist", root.display())
                }
                Err(e) => return Err(e).with_context(|| format!("cannot stat {}", root.display())),
            }
            std::fs::create_dir_all(&root)
                .with_context(|| format!("cannot make directory {}", root.display()))
        })
        .await
    }

    async fn list(&self) -> anyhow::Result<Vec<Entry>> {
        let root = self.root.clone();
        blocking(move || walk(&root)).await
    }

    async fn open(&self, path: &str) -> anyhow::Result<Box<dyn Reader>> {
        let at = self.at(path);
        let file = tokio::fs::File::open(&at)
            .await
            .with_context(|| format!("cannot open {}", at.display()))?;
        let size = file.metadata().await.map_or(0, |m| m.len());
        Ok(Box::new(LocalReader { file, at, size }))
    }

    async fn create(&self, path: &str, source: &Entry) -> anyhow::Result<Box<dyn Writer>> {
        let temp = self.at(&temp_name(path));
        // a new file of its own: whatever has the name (an earlier run's
        // temporary, a symlink someone put there) goes, and is never
        // written through
        match tokio::fs::remove_file(&temp).await {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(e).with_context(|| format!("cannot remove {}", temp.display()))
            }
            _ => {}
        }
        let file = tokio::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW)
            .mode(0o600)
            .open(&temp)
            .await
            .with_context(|| format!("cannot create {}", temp.display()))?;
        Ok(Box::new(LocalWriter {
            file,
            temp,
            at: self.at(path),
            mode: source.mode,
            mtime: source.mtime,
        }))
    }

    async fn mkdir(&self, path: &str, mode: u32) -> anyhow::Result<()> {
        let at = self.at(path);
        blocking(move || {
            match std::fs::create_dir(&at) {
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && at.is_dir() => {}
                made => made.with_context(|| format!("cannot make directory {}", at.display()))?,
            }
            // writable by the owner while the copy fills it; the source's
            // mode is set when it is done
            std::fs::set_permissions(&at, std::fs::Permissions::from_mode(mode | 0o700))
                .with_context(|| format!("cannot chmod {}", at.display()))
        })
        .await
    }

    async fn set_dir_attrs(&self, path: &str, mode: u32, mtime: i64) -> anyhow::Result<()> {
        let at = self.at(path);
        blocking(move || {
            let dir = std::fs::File::open(&at)
                .with_context(|| format!("cannot open {}", at.display()))?;
            dir.set_times(std::fs::FileTimes::new().set_modified(ns_to_time(mtime)))
                .with_context(|| format!("cannot set the mtime of {}", at.display()))?;
            std::fs::set_permissions(&at, std::fs::Permissions::from_mode(mode))
                .with_context(|| format!("cannot chmod {}", at.display()))
        })
        .await
    }

    async fn symlink(&self, path: &str, target: &[u8]) -> anyhow::Result<()> {
        let (temp, at) = (self.at(&temp_name(path)), self.at(path));
        let target = PathBuf::from(std::ffi::OsStr::from_bytes(target));
        blocking(move || {
            let _ = std::fs::remove_file(&temp);
            std::os::unix::fs::symlink(&target, &temp)
                .with_context(|| format!("cannot make symlink {}", temp.display()))?;
            std::fs::rename(&temp, &at)
                .with_context(|| format!("cannot rename {} to {}", temp.display(), at.display()))
        })
        .await
    }

    async fn remove(&self, entry: &Entry) -> anyhow::Result<()> {
        let at = self.at(&entry.path);
        let dir = entry.kind == Kind::Dir;
        blocking(move || {
            let removed = if dir {
                std::fs::remove_dir(&at)
            } else {
                std::fs::remove_file(&at)
            };
            match removed {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                r => r.with_context(|| format!("cannot remove {}", at.display())),
            }
        })
        .await
    }

    async fn close(&self) {}
}

struct LocalReader {
    file: tokio::fs::File,
    at: PathBuf,
    /// The file's size when opened: what a piece's buffer is sized by
    /// (small files get small buffers, not PIECE zeroed bytes).
    size: u64,
}

#[async_trait]
impl Reader for LocalReader {
    async fn next_piece(&mut self) -> anyhow::Result<Option<Bytes>> {
        // (one more byte than the size: the read that finds the end
        // needs no room of its own)
        let room = (self.size + 1).min(PIECE as u64) as usize;
        let mut buf = BytesMut::with_capacity(room);
        while buf.len() < PIECE {
            let n = self
                .file
                .read_buf(&mut buf)
                .await
                .with_context(|| format!("cannot read {}", self.at.display()))?;
            if n == 0 {
                break;
            }
        }
        self.size = self.size.saturating_sub(buf.len() as u64);
        Ok((!buf.is_empty()).then(|| buf.freeze()))
    }
}

struct LocalWriter {
    file: tokio::fs::File,
    temp: PathBuf,
    at: PathBuf,
    mode: u32,
    mtime: i64,
}

#[async_trait]
impl Writer for LocalWriter {
    async fn write(&mut self, data: Bytes) -> anyhow::Result<()> {
        self.file
            .write_all(&data)
            .await
            .with_context(|| format!("cannot write {}", self.temp.display()))
    }

    async fn finish(self: Box<Self>) -> anyhow::Result<()> {
        let LocalWriter {
            mut file,
            temp,
            at,
            mode,
            mtime,
        } = *self;
        if let Err(e) = file.flush().await {
            let _ = tokio::fs::remove_file(&temp).await;
            return Err(e).with_context(|| format!("cannot write {}", temp.display()));
        }
        let file = file.into_std().await;
        blocking(move || {
            // durable before it takes the name: a copy the next run skips
            // (same size and mtime) must hold its bytes after a crash
            let done = file
                .sync_data()
                .with_context(|| format!("cannot fsync {}", temp.display()))
                .and_then(|()| {
                    let modified: SystemTime = ns_to_time(mtime);
                    file.set_times(std::fs::FileTimes::new().set_modified(modified))
                        .with_context(|| format!("cannot set the mtime of {}", temp.display()))
                })
                .and_then(|()| {
                    file.set_permissions(std::fs::Permissions::from_mode(mode))
                        .with_context(|| format!("cannot chmod {}", temp.display()))
                })
                .and_then(|()| {
                    std::fs::rename(&temp, &at).with_context(|| {
                        format!("cannot rename {} to {}", temp.display(), at.display())
                    })
                });
            if done.is_err() {
                let _ = std::fs::remove_file(&temp);
            }
            done
        })
        .await
    }

    async fn abort(self: Box<Self>) {
        let LocalWriter { file, temp, .. } = *self;
        drop(file);
        let _ = tokio::fs::remove_file(&temp).await;
    }
}
