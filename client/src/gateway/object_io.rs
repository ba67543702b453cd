//! Objects as files: buckets and keys found, bodies written aside and
//! renamed onto their keys (the directories they need made), read back by
//! a task of their own, ETags kept, and keys deleted with the directories
//! they leave empty.
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::StreamExt;
use md5::{Digest, Md5};
use s3s::dto::{ETag, StreamingBlob};
use s3s::{s3_error, S3Error, S3ErrorCode, S3Result};

use super::{
    derived_etag, hex, is_file, kept_etag, object_path, s3_error, Gateway, ETAG_XATTR, READ_PIECE,
    WRITE_PIECE,
};
use crate::direct::{Direct, OpenFlags};
use crate::meta::{Attr, NodeType};

/// A response body read by a task of its own (a Sync stream, as s3s asks).
struct Chunks(tokio::sync::mpsc::Receiver<Result<Bytes, std::io::Error>>);

impl futures_util::Stream for Chunks {
    type Item = Result<Bytes, std::io::Error>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0.poll_recv(cx)
    }
}

pub(super) fn new_name() -> String {
    format!("{:032x}", rand::random::<u128>())
}

pub(super) fn create_new() -> OpenFlags {
    OpenFlags {
        write: true,
        create: true,
        exclusive: true,
        ..OpenFlags::default()
    }
}

impl Gateway {
    /// The attributes of bucket `bucket` (NoSuchBucket if it is no directory).
    pub(super) async fn bucket(&self, bucket: &str) -> S3Result<Attr> {
        match self.d.stat(format!("/{bucket}").as_bytes(), true).await {
            Ok(attr) if attr.kind == NodeType::Dir => Ok(attr),
            Ok(_) | Err(libc::ENOENT) => Err(s3_error!(NoSuchBucket, "no bucket {bucket}")),
            Err(e) => Err(s3_error(e, bucket)),
        }
    }

    /// The file of `key`, its bucket checked first, with its attributes as
    /// committed now (opened and closed: what another client changed a
    /// moment ago shows, as a GET's open shows it).
    pub(super) async fn object(&self, bucket: &str, key: &str) -> S3Result<(String, Attr)> {
        let path = object_path(bucket, key)?;
        self.bucket(bucket).await?;
        let read = OpenFlags {
            read: true,
            ..OpenFlags::default()
        };
        match self.d.open(path.as_bytes(), read, 0).await {
            Ok((fh, attr)) => {
                let _ = self.d.close_handle(fh).await;
                match is_file(&attr) {
                    true => Ok((path, attr)),
                    false => Err(s3_error!(NoSuchKey, "no key {key}")),
                }
            }
            Err(libc::ENOENT | libc::ENOTDIR | libc::EISDIR) => {
                Err(s3_error!(NoSuchKey, "no key {key}"))
            }
            Err(e) => Err(s3_error(e, key)),
        }
    }

    /// The ETag of the file at `path`: the one kept when the gateway wrote
    /// it, unless the file changed since (its length or mtime differ).
    pub(super) async fn etag(&self, path: &str, attr: &Attr) -> ETag {
        let kept = self.d.get_xattr(path.as_bytes(), ETAG_XATTR).await;
        match kept.ok().and_then(|v| kept_etag(&v, attr)) {
            Some(e_tag) => ETag::Strong(e_tag),
            None => derived_etag(attr),
        }
    }

    /// Keeps `e_tag` as the ETag of the file at `path` as it is now.
    pub(super) async fn keep_etag(&self, path: &str, e_tag: &str) -> Result<(), i32> {
        let attr = self.d.stat(path.as_bytes(), false).await?;
        let kept = format!("{e_tag} {} {}", attr.length, attr.mtime);
        self.d
            .set_xattr(path.as_bytes(), ETAG_XATTR, kept.as_bytes())
            .await
    }

    /// A key ending in "/" (a directory marker): the directory's attributes,
    /// which S3 clients see as an empty object.
    pub(super) async fn marker(&self, bucket: &str, key: &str) -> S3Result<Attr> {
        let path = object_path(bucket, key)?;
        self.bucket(bucket).await?;
        match self.d.stat(path.as_bytes(), true).await {
            Ok(attr) if attr.kind == NodeType::Dir => Ok(attr),
            Ok(_) | Err(libc::ENOENT | libc::ENOTDIR) => Err(s3_error!(NoSuchKey, "no key {key}")),
            Err(e) => Err(s3_error(e, key)),
        }
    }

    /// Writes `body` to a new file at `path`: its MD5 and length.
    async fn store(&self, path: &str, body: Option<StreamingBlob>) -> S3Result<([u8; 16], u64)> {
        let (fh, _) = self
            .d
            .open(path.as_bytes(), create_new(), 0o644)
            .await
            .map_err(|e| s3_error(e, path))?;
        let written = write_body(&self.d, fh, body).await;
        let closed = self.d.close_handle(fh).await.map_err(|e| s3_error(e, path));
        let (md5, len) = written?;
        closed?;
        Ok((md5, len))
    }

    /// Writes `body` to a new file at `tmp` with its ETag (the MD5) kept:
    /// the ETag and length; nothing is left at `tmp` if that fails.
    pub(super) async fn store_tagged(
        &self,
        tmp: &str,
        body: Option<StreamingBlob>,
    ) -> S3Result<(String, u64)> {
        let stored = async {
            let (md5, len) = self.store(tmp, body).await?;
            let e_tag = hex(&md5);
            self.keep_etag(tmp, &e_tag)
                .await
                .map_err(|e| s3_error(e, tmp))?;
            Ok((e_tag, len))
        };
        let result = stored.await;
        if result.is_err() {
            let _ = self.d.unlink(tmp.as_bytes()).await;
        }
        result
    }

    /// Renames the file at `tmp` onto `key` of `bucket` (making the key's
    /// directories) and syncs: the object is there, durable, when this
    /// returns. `tmp` is removed if it cannot be.
    pub(super) async fn place(&self, tmp: &str, bucket: &str, key: &str) -> S3Result<()> {
        let path = object_path(bucket, key)?;
        let mut tmp = tmp.to_string();
        let placed = async {
            self.bucket(bucket).await?;
            let mut renamed = self.d.rename(tmp.as_bytes(), path.as_bytes()).await;
            if renamed == Err(libc::ENOENT) {
                self.make_dirs(bucket, key).await?;
                renamed = self.d.rename(tmp.as_bytes(), path.as_bytes()).await;
            }
            if renamed == Err(libc::EXDEV) {
                // (the key's directory was placed on another shard since
                // the object was written aside: it is copied there)
                tmp = self.restage(&tmp, bucket, key).await?;
                renamed = self.d.rename(tmp.as_bytes(), path.as_bytes()).await;
            }
            renamed.map_err(|e| s3_error(e, key))?;
            let parent = &path[..path.rfind('/').unwrap_or(0).max(1)];
            self.d
                .sync_dir(parent.as_bytes())
                .await
                .map_err(|e| s3_error(e, key))
        };
        let result = placed.await;
        if result.is_err() {
            let _ = self.d.unlink(tmp.as_bytes()).await;
        }
        result
    }

    /// Copies the object written aside at `tmp` to the shard `key` of
    /// `bucket` lands on, with its ETag, and removes it: the new path.
    async fn restage(&self, tmp: &str, bucket: &str, key: &str) -> S3Result<String> {
        let attr = self.d.stat(tmp.as_bytes(), false).await;
        let attr = attr.map_err(|e| s3_error(e, key))?;
        let e_tag = self.etag(tmp, &attr).await;
        let moved = self.aside_for(bucket, key).await?;
        tracing::info!(
            "{bucket}/{key}: its directory was placed on another shard while the object was \
             written aside; copying it there ({} bytes)",
            attr.length
        );
        let copied = async {
            self.d.copy(tmp.as_bytes(), moved.as_bytes()).await?;
            self.keep_etag(&moved, e_tag.value()).await
        };
        let copied = copied.await;
        let _ = self.d.unlink(tmp.as_bytes()).await;
        if let Err(e) = copied {
            let _ = self.d.unlink(moved.as_bytes()).await;
            return Err(s3_error(e, key));
        }
        Ok(moved)
    }

    /// Makes the directories `key` lies in, below its bucket.
    pub(super) async fn make_dirs(&self, bucket: &str, key: &str) -> S3Result<()> {
        let mut path = format!("/{bucket}");
        let dirs: Vec<&str> = key.split('/').collect();
        for dir in &dirs[..dirs.len().saturating_sub(1)] {
            path.push('/');
            path.push_str(dir);
            match self.d.mkdir(path.as_bytes(), 0o755).await {
                Ok(_) | Err(libc::EEXIST) => {}
                Err(e) => return Err(s3_error(e, key)),
            }
        }
        Ok(())
    }

    /// Removes the directories `key` lay in that are empty now, deepest
    /// first (as S3 has no directories to leave behind).
    async fn remove_empty_dirs(&self, bucket: &str, key: &str) {
        let mut dirs: Vec<&str> = key.split('/').collect();
        dirs.pop();
        while !dirs.is_empty() {
            let path = format!("/{bucket}/{}", dirs.join("/"));
            if self.d.rmdir(path.as_bytes()).await.is_err() {
                return;
            }
            dirs.pop();
        }
    }

    /// Deletes `key` (a missing key is no error, as in S3) and the
    /// directories it leaves empty.
    pub(super) async fn delete_key(&self, bucket: &str, key: &str) -> S3Result<()> {
        let path = object_path(bucket, key)?;
        let removed = match key.ends_with('/') {
            true => self.d.rmdir(path.as_bytes()).await,
            false => self.d.unlink(path.as_bytes()).await,
        };
        match removed {
            Ok(()) => {
                self.remove_empty_dirs(bucket, key.trim_end_matches('/'))
                    .await
            }
            Err(libc::ENOENT | libc::ENOTDIR) => {}
            // a prefix of other keys, not an object; a directory marker
            // of keys still there goes when they do
            Err(libc::EISDIR | libc::ENOTEMPTY) => {}
            Err(e) => return Err(s3_error(e, key)),
        }
        Ok(())
    }

    /// The file of `key` opened for reading, its bucket checked first: its
    /// path, the handle and the file's attributes.
    pub(super) async fn open_object(
        &self,
        bucket: &str,
        key: &str,
    ) -> S3Result<(String, u64, Attr)> {
        let path = object_path(bucket, key)?;
        self.bucket(bucket).await?;
        let read = OpenFlags {
            read: true,
            ..OpenFlags::default()
        };
        let (fh, attr) = match self.d.open(path.as_bytes(), read, 0).await {
            Ok((fh, attr)) if is_file(&attr) => (fh, attr),
            Ok((fh, _)) => {
                let _ = self.d.close_handle(fh).await;
                return Err(s3_error!(NoSuchKey, "no key {key}"));
            }
            Err(libc::ENOENT | libc::ENOTDIR | libc::EISDIR) => {
                return Err(s3_error!(NoSuchKey, "no key {key}"))
            }
            Err(e) => return Err(s3_error(e, key)),
        };
        Ok((path, fh, attr))
    }

    /// Bytes `start..end` of handle `fh` as a response body, read by a task
    /// of its own, which closes the handle when done.
    pub(super) fn read_body(&self, fh: u64, start: u64, end: u64) -> StreamingBlob {
        let (tx, rx) = tokio::sync::mpsc::channel(2);
        let d = self.d.clone();
        tokio::spawn(async move {
            let mut at = start;
            while at < end {
                let want = (end - at).min(READ_PIECE as u64) as usize;
                let piece = match d.read(fh, at, want).await {
                    Ok(data) if data.is_empty() => break,
                    Ok(data) => Ok(Bytes::from(data)),
                    Err(e) => Err(std::io::Error::from_raw_os_error(e)),
                };
                let failed = piece.is_err();
                at += piece.as_ref().map_or(0, |p| p.len() as u64);
                if tx.send(piece).await.is_err() || failed {
                    break;
                }
            }
            let _ = d.close_handle(fh).await;
        });
        StreamingBlob::wrap(Chunks(rx))
    }
}

/// Writes a request body to handle `fh` in pieces of [`WRITE_PIECE`].
async fn write_body(d: &Direct, fh: u64, body: Option<StreamingBlob>) -> S3Result<([u8; 16], u64)> {
    let mut md5 = Md5::new();
    let mut offset = 0u64;
    let mut pending = Vec::with_capacity(WRITE_PIECE);
    if let Some(mut body) = body {
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| S3Error::with_source(S3ErrorCode::IncompleteBody, e))?;
            md5.update(&chunk);
            pending.extend_from_slice(&chunk);
            if pending.len() >= WRITE_PIECE {
                d.write_all(fh, offset, &pending)
                    .await
                    .map_err(|e| s3_error(e, "writing the object"))?;
                offset += pending.len() as u64;
                pending.clear();
            }
        }
    }
    if !pending.is_empty() {
        d.write_all(fh, offset, &pending)
            .await
            .map_err(|e| s3_error(e, "writing the object"))?;
        offset += pending.len() as u64;
    }
    Ok((md5.finalize().into(), offset))
}

/// The ETag of no bytes (a directory marker's).
pub(super) fn empty_etag() -> ETag {
    ETag::Strong(hex(&Md5::digest(b"")))
}
