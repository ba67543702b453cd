//! A jfs volume as a sync endpoint, used without a mount through `direct`.
use std::sync::Arc;

use anyhow::Context;
use async_trait::async_trait;
use bytes::Bytes;

use super::{joined, temp_name, Endpoint, Entry, Kind, Reader, Writer, PIECE};
use crate::direct::{Direct, DirectOptions, OpenFlags};
use crate::meta::{redact_url, Attr, NodeType, SetAttr, TimeSet};

pub struct JfsTree {
    direct: Arc<Direct>,
    /// The directory in the volume ("" for its root).
    root: String,
    /// The endpoint as named, its password hidden.
    name: String,
}

/// An errno as an error.
fn errno(e: i32) -> std::io::Error {
    std::io::Error::from_raw_os_error(e)
}

impl JfsTree {
    pub async fn attach(meta_url: &str, root: &str, read_only: bool) -> anyhow::Result<JfsTree> {
        let name = format!("jfs+{}#/{root}", redact_url(meta_url));
        let options = DirectOptions {
            read_only,
            // the source's modes are set as they are
            umask: 0,
            describe: "jfs sync".to_string(),
            ..DirectOptions::default()
        };
        let direct = Direct::attach(meta_url, &options)
            .await
            .with_context(|| format!("cannot open the volume of {name}"))?;
        Ok(JfsTree {
            direct: Arc::new(direct),
            root: root.to_string(),
            name,
        })
    }

    fn at(&self, path: &str) -> String {
        joined(&self.root, path)
    }

    /// What `path` names, in the words of a message.
    fn shown(&self, path: &str) -> String {
        format!("{}/{}", self.name.trim_end_matches('/'), path)
    }
}

fn entry_of(path: String, attr: &Attr) -> Option<Entry> {
    let kind = match attr.kind {
        NodeType::File => Kind::File,
        NodeType::Dir => Kind::Dir,
        NodeType::Symlink => Kind::Symlink,
        _ => return None,
    };
    Some(Entry {
        path,
        kind,
        size: if kind == Kind::File { attr.length } else { 0 },
        mtime: attr.mtime,
        mode: attr.mode & super::KEPT_MODE,
        target: None,
    })
}

#[async_trait]
impl Endpoint for JfsTree {
    fn describe(&self) -> String {
        self.name.clone()
    }

    fn keeps_attrs(&self) -> bool {
        true
    }

    fn keeps_tree(&self) -> bool {
        true
    }

    async fn prepare(&self, create: bool) -> anyhow::Result<()> {
        match self.direct.stat(self.root.as_bytes(), true).await {
            Ok(a) if a.kind == NodeType::Dir => return Ok(()),
            Ok(_) => anyhow::bail!("{} is not a directory", self.name),
            Err(libc::ENOENT) if create => {}
            Err(e) => return Err(errno(e)).with_context(|| self.name.clone()),
        }
        let mut made = String::new();
        for part in self.root.split('/').filter(|p| !p.is_empty()) {
            made = joined(&made, part);
            match self.direct.mkdir(made.as_bytes(), 0o755).await {
                Ok(_) | Err(libc::EEXIST) => {}
                Err(e) => {
                    return Err(errno(e)).with_context(|| format!("cannot make {}", self.name))
                }
            }
        }
        Ok(())
    }

    async fn list(&self) -> anyhow::Result<Vec<Entry>> {
        let mut out = Vec::new();
        let mut pending = vec![String::new()];
        while let Some(dir) = pending.pop() {
            let listed = self
                .direct
                .list(self.at(&dir).as_bytes())
                .await
                .map_err(errno)
                .with_context(|| format!("cannot list {}", self.shown(&dir)))?;
            for (name, attr) in listed {
                let Ok(name) = String::from_utf8(name) else {
                    tracing::warn!("{}: a name that is not UTF-8, left out", self.shown(&dir));
                    continue;
                };
                let path = joined(&dir, &name);
                let Some(mut entry) = entry_of(path.clone(), &attr) else {
                    tracing::warn!(
                        "{}: not a file, directory or symlink, left out",
                        self.shown(&path)
                    );
                    continue;
                };
                match entry.kind {
                    Kind::Dir => pending.push(path),
                    Kind::Symlink => {
                        let target = self
                            .direct
                            .readlink(self.at(&path).as_bytes())
                            .await
                            .map_err(errno)
                            .with_context(|| format!("cannot read link {}", self.shown(&path)))?;
                        entry.target = Some(target);
                    }
                    Kind::File => {}
                }
                out.push(entry);
            }
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }

    async fn open(&self, path: &str) -> anyhow::Result<Box<dyn Reader>> {
        let read = OpenFlags {
            read: true,
            ..OpenFlags::default()
        };
        let (fh, attr) = self
            .direct
            .open(self.at(path).as_bytes(), read, 0)
            .await
            .map_err(errno)
            .with_context(|| format!("cannot open {}", self.shown(path)))?;
        Ok(Box::new(JfsReader {
            direct: self.direct.clone(),
            fh: Some(fh),
            offset: 0,
            size: attr.length,
            shown: self.shown(path),
        }))
    }

    async fn create(&self, path: &str, source: &Entry) -> anyhow::Result<Box<dyn Writer>> {
        let temp = self.at(&temp_name(path));
        // a new file of its own: whatever has the name (an earlier run's
        // temporary, a symlink) goes, and is never written through
        let _ = self.direct.unlink(temp.as_bytes()).await;
        let write = OpenFlags {
            write: true,
            create: true,
            exclusive: true,
            ..OpenFlags::default()
        };
        let (fh, _) = self
            .direct
            .open(temp.as_bytes(), write, 0o600)
            .await
            .map_err(errno)
            .with_context(|| format!("cannot create {}", self.shown(&temp_name(path))))?;
        Ok(Box::new(JfsWriter {
            direct: self.direct.clone(),
            fh: Some(fh),
            offset: 0,
            temp,
            at: self.at(path),
            shown: self.shown(path),
            mode: source.mode,
            mtime: source.mtime,
        }))
    }

    async fn mkdir(&self, path: &str, mode: u32) -> anyhow::Result<()> {
        let at = self.at(path);
        match self.direct.mkdir(at.as_bytes(), mode | 0o700).await {
            Ok(_) => Ok(()),
            Err(libc::EEXIST) => self
                .direct
                .set_attr(at.as_bytes(), &SetAttr::mode(mode | 0o700))
                .await
                .map(drop)
                .map_err(errno)
                .with_context(|| format!("cannot chmod {}", self.shown(path))),
            Err(e) => Err(errno(e)).with_context(|| format!("cannot make {}", self.shown(path))),
        }
    }

    async fn set_dir_attrs(&self, path: &str, mode: u32, mtime: i64) -> anyhow::Result<()> {
        let change = SetAttr {
            mode: Some(mode),
            mtime: Some(TimeSet::At(mtime)),
            ..SetAttr::default()
        };
        self.direct
            .set_attr(self.at(path).as_bytes(), &change)
            .await
            .map(drop)
            .map_err(errno)
            .with_context(|| format!("cannot set the mode and mtime of {}", self.shown(path)))
    }

    async fn symlink(&self, path: &str, target: &[u8]) -> anyhow::Result<()> {
        let temp = self.at(&temp_name(path));
        let _ = self.direct.unlink(temp.as_bytes()).await;
        self.direct
            .symlink(target, temp.as_bytes())
            .await
            .map_err(errno)
            .with_context(|| format!("cannot make symlink {}", self.shown(path)))?;
        self.direct
            .rename(temp.as_bytes(), self.at(path).as_bytes())
            .await
            .map_err(errno)
            .with_context(|| format!("cannot put symlink {} in place", self.shown(path)))
    }

    async fn remove(&self, entry: &Entry) -> anyhow::Result<()> {
        let at = self.at(&entry.path);
        let removed = match entry.kind {
            Kind::Dir => self.direct.rmdir(at.as_bytes()).await,
            _ => self.direct.unlink(at.as_bytes()).await,
        };
        match removed {
            Ok(()) | Err(libc::ENOENT) => Ok(()),
            Err(e) => {
                Err(errno(e)).with_context(|| format!("cannot remove {}", self.shown(&entry.path)))
            }
        }
    }

    async fn close(&self) {
        self.direct.close().await;
    }
}

/// A handle left open by an error is closed in the background.
fn close_later(direct: &Arc<Direct>, fh: u64) {
    let direct = direct.clone();
    tokio::spawn(async move {
        let _ = direct.close_handle(fh).await;
    });
}

struct JfsReader {
    direct: Arc<Direct>,
    fh: Option<u64>,
    offset: u64,
    /// The file's length when opened: pieces are asked for up to it (a
    /// small file gets a small buffer), then one more read finds the end
    /// (the file may have grown).
    size: u64,
    shown: String,
}

#[async_trait]
impl Reader for JfsReader {
    async fn next_piece(&mut self) -> anyhow::Result<Option<Bytes>> {
        let Some(fh) = self.fh else {
            return Ok(None);
        };
        let want = self.size.saturating_sub(self.offset).clamp(1, PIECE as u64) as usize;
        let data = self
            .direct
            .read(fh, self.offset, want)
            .await
            .map_err(errno)
            .with_context(|| format!("cannot read {}", self.shown))?;
        self.offset += data.len() as u64;
        if data.is_empty() {
            self.fh = None;
            let _ = self.direct.close_handle(fh).await;
            return Ok(None);
        }
        Ok(Some(Bytes::from(data)))
    }
}

impl Drop for JfsReader {
    fn drop(&mut self) {
        if let Some(fh) = self.fh.take() {
            close_later(&self.direct, fh);
        }
    }
}

struct JfsWriter {
    direct: Arc<Direct>,
    fh: Option<u64>,
    offset: u64,
    temp: String,
    at: String,
    shown: String,
    mode: u32,
    mtime: i64,
}

#[async_trait]
impl Writer for JfsWriter {
    async fn write(&mut self, data: Bytes) -> anyhow::Result<()> {
        let fh = self.fh.expect("a writer writes until it finishes");
        self.direct
            .write_all(fh, self.offset, &data)
            .await
            .map_err(errno)
            .with_context(|| format!("cannot write {}", self.shown))?;
        self.offset += data.len() as u64;
        Ok(())
    }

    async fn finish(mut self: Box<Self>) -> anyhow::Result<()> {
        let done = self.put_in_place().await;
        if done.is_err() {
            let _ = self.direct.unlink(self.temp.as_bytes()).await;
        }
        done
    }

    async fn abort(mut self: Box<Self>) {
        if let Some(fh) = self.fh.take() {
            let _ = self.direct.close_handle(fh).await;
        }
        let _ = self.direct.unlink(self.temp.as_bytes()).await;
    }
}

impl JfsWriter {
    /// The temporary made durable, given the source's mode and mtime, and
    /// renamed onto the file's name.
    async fn put_in_place(&mut self) -> anyhow::Result<()> {
        let fh = self.fh.take().expect("a writer finishes once");
        let synced = self.direct.fsync(fh).await;
        let closed = self.direct.close_handle(fh).await;
        synced
            .and(closed)
            .map_err(errno)
            .with_context(|| format!("cannot write {}", self.shown))?;
        let change = SetAttr {
            mode: Some(self.mode),
            mtime: Some(TimeSet::At(self.mtime)),
            ..SetAttr::default()
        };
        self.direct
            .set_attr(self.temp.as_bytes(), &change)
            .await
            .map_err(errno)
            .with_context(|| format!("cannot set the mode and mtime of {}", self.shown))?;
        self.direct
            .rename(self.temp.as_bytes(), self.at.as_bytes())
            .await
            .map_err(errno)
            .with_context(|| format!("cannot put {} in place", self.shown))
    }
}

impl Drop for JfsWriter {
    fn drop(&mut self) {
        if let Some(fh) = self.fh.take() {
            close_later(&self.direct, fh);
        }
    }
}
