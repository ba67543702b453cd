//! The S3 operations of the gateway: buckets (top-level directories),
//! objects (files written aside and renamed onto their keys), listings,
//! multipart uploads (parts joined by copy_file_range) and copies.
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::StreamExt;
use md5::{Digest, Md5};
use s3s::dto::*;
use s3s::{s3_error, S3Error, S3ErrorCode, S3Request, S3Response, S3Result, S3};

use super::{
    derived_etag, hex, is_file, kept_etag, key_of_token, list, modified, object_path, s3_error,
    token_of_key, xml_char, Gateway, ETAG_XATTR, MAX_KEYS, READ_PIECE, TMP_DIR, UPLOADS_DIR,
    UPLOAD_KEY_XATTR, WRITE_PIECE,
};
use crate::direct::{Direct, OpenFlags};
use crate::meta::{Attr, NodeType};

/// Parts a multipart upload may have (S3's limit).
const MAX_PARTS: i32 = 10_000;

/// A response body read by a task of its own (a Sync stream, as s3s asks).
struct Chunks(tokio::sync::mpsc::Receiver<Result<Bytes, std::io::Error>>);

impl futures_util::Stream for Chunks {
    type Item = Result<Bytes, std::io::Error>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0.poll_recv(cx)
    }
}

fn new_name() -> String {
    format!("{:032x}", rand::random::<u128>())
}

fn create_new() -> OpenFlags {
    OpenFlags {
        write: true,
        create: true,
        exclusive: true,
        ..OpenFlags::default()
    }
}

impl Gateway {
    /// The attributes of bucket `bucket` (NoSuchBucket if it is no directory).
    async fn bucket(&self, bucket: &str) -> S3Result<Attr> {
        match self.d.stat(format!("/{bucket}").as_bytes(), true).await {
            Ok(attr) if attr.kind == NodeType::Dir => Ok(attr),
            Ok(_) | Err(libc::ENOENT) => Err(s3_error!(NoSuchBucket, "no bucket {bucket}")),
            Err(e) => Err(s3_error(e, bucket)),
        }
    }

    /// The file of `key`, its bucket checked first, with its attributes as
    /// committed now (opened and closed: what another client changed a
    /// moment ago shows, as a GET's open shows it).
    async fn object(&self, bucket: &str, key: &str) -> S3Result<(String, Attr)> {
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
    async fn etag(&self, path: &str, attr: &Attr) -> ETag {
        let kept = self.d.get_xattr(path.as_bytes(), ETAG_XATTR).await;
        match kept.ok().and_then(|v| kept_etag(&v, attr)) {
            Some(e_tag) => ETag::Strong(e_tag),
            None => derived_etag(attr),
        }
    }

    /// Keeps `e_tag` as the ETag of the file at `path` as it is now.
    async fn keep_etag(&self, path: &str, e_tag: &str) -> Result<(), i32> {
        let attr = self.d.stat(path.as_bytes(), false).await?;
        let kept = format!("{e_tag} {} {}", attr.length, attr.mtime);
        self.d
            .set_xattr(path.as_bytes(), ETAG_XATTR, kept.as_bytes())
            .await
    }

    /// A key ending in "/" (a directory marker): the directory's attributes,
    /// which S3 clients see as an empty object.
    async fn marker(&self, bucket: &str, key: &str) -> S3Result<Attr> {
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
    async fn store_tagged(
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
    async fn place(&self, tmp: &str, bucket: &str, key: &str) -> S3Result<()> {
        let path = object_path(bucket, key)?;
        let placed = async {
            self.bucket(bucket).await?;
            let mut renamed = self.d.rename(tmp.as_bytes(), path.as_bytes()).await;
            if renamed == Err(libc::ENOENT) {
                self.make_dirs(bucket, key).await?;
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

    /// Makes the directories `key` lies in, below its bucket.
    async fn make_dirs(&self, bucket: &str, key: &str) -> S3Result<()> {
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

    /// The directory of upload `id`, and the bucket and key it is for.
    async fn upload(&self, id: &str) -> S3Result<(String, String)> {
        let valid = id.len() == 32 && id.bytes().all(|c| c.is_ascii_hexdigit());
        let dir = format!("{UPLOADS_DIR}/{id}");
        let target = match valid {
            true => self.d.get_xattr(dir.as_bytes(), UPLOAD_KEY_XATTR).await,
            false => Err(libc::ENOENT),
        };
        match target {
            Ok(target) => Ok((dir, String::from_utf8_lossy(&target).into_owned())),
            Err(libc::ENOENT | libc::ENODATA) => Err(s3_error!(NoSuchUpload, "no upload {id}")),
            Err(e) => Err(s3_error(e, id)),
        }
    }

    /// The multipart uploads there are: their ids and their directories'
    /// attributes (made when the upload was).
    async fn uploads(&self) -> S3Result<Vec<(String, Attr)>> {
        let listed = self
            .d
            .list(UPLOADS_DIR.as_bytes())
            .await
            .map_err(|e| s3_error(e, "the gateway's uploads"))?;
        Ok(listed
            .into_iter()
            .filter_map(|(name, attr)| Some((String::from_utf8(name).ok()?, attr)))
            .collect())
    }

    /// Removes multipart uploads begun, and files written aside (by a
    /// gateway that crashed mid-PUT, say), longer than `expiry` ago: what
    /// they are removed (S3's lifecycle rule AbortIncompleteMultipartUpload
    /// does the same for uploads).
    pub async fn expire(&self, expiry: std::time::Duration) -> (usize, usize) {
        let cutoff = crate::meta::time_to_ns(std::time::SystemTime::now())
            .saturating_sub(expiry.as_nanos().min(i64::MAX as u128) as i64);
        let mut removed = (0, 0);
        for (id, attr) in self.uploads().await.unwrap_or_default() {
            if attr.ctime < cutoff && attr.mtime < cutoff {
                self.remove_upload(&format!("{UPLOADS_DIR}/{id}")).await;
                removed.0 += 1;
            }
        }
        if let Ok(files) = self.d.list(TMP_DIR.as_bytes()).await {
            for (name, attr) in files {
                if attr.mtime < cutoff && attr.ctime < cutoff {
                    let mut path = format!("{TMP_DIR}/").into_bytes();
                    path.extend_from_slice(&name);
                    if self.d.unlink(&path).await.is_ok() {
                        removed.1 += 1;
                    }
                }
            }
        }
        removed
    }

    async fn remove_upload(&self, dir: &str) {
        if let Ok(parts) = self.d.list(dir.as_bytes()).await {
            for (name, _) in parts {
                let mut path = format!("{dir}/").into_bytes();
                path.extend_from_slice(&name);
                let _ = self.d.unlink(&path).await;
            }
        }
        let _ = self.d.rmdir(dir.as_bytes()).await;
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

#[async_trait::async_trait]
impl S3 for Gateway {
    async fn list_buckets(
        &self,
        _req: S3Request<ListBucketsInput>,
    ) -> S3Result<S3Response<ListBucketsOutput>> {
        let entries = self.d.list(b"/").await.map_err(|e| s3_error(e, "/"))?;
        let mut buckets: Vec<Bucket> = entries
            .into_iter()
            .filter(|(name, attr)| attr.kind == NodeType::Dir && !name.starts_with(b"."))
            .filter_map(|(name, attr)| {
                let name = String::from_utf8(name).ok()?;
                Some(Bucket {
                    name: Some(name),
                    creation_date: Some(Timestamp::from(crate::meta::ns_to_time(attr.ctime))),
                    ..Default::default()
                })
            })
            .collect();
        buckets.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(S3Response::new(ListBucketsOutput {
            buckets: Some(buckets),
            ..Default::default()
        }))
    }

    async fn head_bucket(
        &self,
        req: S3Request<HeadBucketInput>,
    ) -> S3Result<S3Response<HeadBucketOutput>> {
        self.bucket(&req.input.bucket).await?;
        Ok(S3Response::new(HeadBucketOutput::default()))
    }

    async fn create_bucket(
        &self,
        req: S3Request<CreateBucketInput>,
    ) -> S3Result<S3Response<CreateBucketOutput>> {
        let bucket = &req.input.bucket;
        match self.d.mkdir(format!("/{bucket}").as_bytes(), 0o755).await {
            Ok(_) => Ok(S3Response::new(CreateBucketOutput {
                location: Some(format!("/{bucket}")),
            })),
            Err(libc::EEXIST) => Err(s3_error!(BucketAlreadyOwnedByYou, "{bucket} exists")),
            Err(e) => Err(s3_error(e, bucket)),
        }
    }

    async fn delete_bucket(
        &self,
        req: S3Request<DeleteBucketInput>,
    ) -> S3Result<S3Response<DeleteBucketOutput>> {
        let bucket = &req.input.bucket;
        self.bucket(bucket).await?;
        match self.d.rmdir(format!("/{bucket}").as_bytes()).await {
            Ok(()) => Ok(S3Response::new(DeleteBucketOutput {})),
            Err(libc::ENOTEMPTY) => Err(s3_error!(BucketNotEmpty, "{bucket} is not empty")),
            Err(e) => Err(s3_error(e, bucket)),
        }
    }

    async fn head_object(
        &self,
        req: S3Request<HeadObjectInput>,
    ) -> S3Result<S3Response<HeadObjectOutput>> {
        if req.input.key.ends_with('/') {
            let attr = self.marker(&req.input.bucket, &req.input.key).await?;
            return Ok(S3Response::new(HeadObjectOutput {
                content_length: Some(0),
                e_tag: Some(empty_etag()),
                last_modified: Some(modified(&attr)),
                ..Default::default()
            }));
        }
        let (path, attr) = self.object(&req.input.bucket, &req.input.key).await?;
        Ok(S3Response::new(HeadObjectOutput {
            content_length: Some(attr.length as i64),
            e_tag: Some(self.etag(&path, &attr).await),
            last_modified: Some(modified(&attr)),
            accept_ranges: Some("bytes".into()),
            content_type: Some("application/octet-stream".into()),
            ..Default::default()
        }))
    }

    async fn get_object(
        &self,
        req: S3Request<GetObjectInput>,
    ) -> S3Result<S3Response<GetObjectOutput>> {
        let GetObjectInput {
            bucket, key, range, ..
        } = req.input;
        if key.ends_with('/') {
            let attr = self.marker(&bucket, &key).await?;
            return Ok(S3Response::new(GetObjectOutput {
                body: Some(StreamingBlob::from(s3s::Body::empty())),
                content_length: Some(0),
                e_tag: Some(empty_etag()),
                last_modified: Some(modified(&attr)),
                ..Default::default()
            }));
        }
        let path = object_path(&bucket, &key)?;
        self.bucket(&bucket).await?;
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
            Err(e) => return Err(s3_error(e, &key)),
        };
        let len = attr.length;
        let (start, end, content_range) = match range {
            Some(r) => match r.check(len) {
                // (an empty object has no byte to name)
                Ok(rg) if rg.is_empty() => {
                    let _ = self.d.close_handle(fh).await;
                    return Err(s3_error!(InvalidRange, "{key} is empty"));
                }
                Ok(rg) => (
                    rg.start,
                    rg.end,
                    Some(format!("bytes {}-{}/{len}", rg.start, rg.end - 1)),
                ),
                Err(e) => {
                    let _ = self.d.close_handle(fh).await;
                    return Err(e.into());
                }
            },
            None => (0, len, None),
        };
        let e_tag = self.etag(&path, &attr).await;
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
        Ok(S3Response::new(GetObjectOutput {
            body: Some(StreamingBlob::wrap(Chunks(rx))),
            content_length: Some((end - start) as i64),
            content_range,
            accept_ranges: Some("bytes".into()),
            e_tag: Some(e_tag),
            last_modified: Some(modified(&attr)),
            content_type: Some("application/octet-stream".into()),
            ..Default::default()
        }))
    }

    async fn put_object(
        &self,
        req: S3Request<PutObjectInput>,
    ) -> S3Result<S3Response<PutObjectOutput>> {
        let PutObjectInput {
            bucket,
            key,
            body,
            content_length,
            ..
        } = req.input;
        object_path(&bucket, &key)?;
        self.bucket(&bucket).await?;
        if key.ends_with('/') {
            // a directory marker: the directory itself, which holds no bytes
            if content_length.unwrap_or(0) > 0 {
                return Err(s3_error!(
                    InvalidArgument,
                    "{key}: a key ending in \"/\" is a directory here and holds no bytes"
                ));
            }
            self.make_dirs(&bucket, &format!("{key}x")).await?;
            self.marker(&bucket, &key)
                .await
                .map_err(|_| s3_error(libc::ENOTDIR, &key))?;
            return Ok(S3Response::new(PutObjectOutput {
                e_tag: Some(empty_etag()),
                ..Default::default()
            }));
        }
        let tmp = format!("{TMP_DIR}/{}", new_name());
        let (e_tag, len) = self.store_tagged(&tmp, body).await?;
        self.place(&tmp, &bucket, &key).await?;
        Ok(S3Response::new(PutObjectOutput {
            e_tag: Some(ETag::Strong(e_tag)),
            size: Some(len as i64),
            ..Default::default()
        }))
    }

    async fn delete_object(
        &self,
        req: S3Request<DeleteObjectInput>,
    ) -> S3Result<S3Response<DeleteObjectOutput>> {
        let DeleteObjectInput { bucket, key, .. } = req.input;
        self.delete_key(&bucket, &key).await?;
        Ok(S3Response::new(DeleteObjectOutput::default()))
    }

    async fn delete_objects(
        &self,
        req: S3Request<DeleteObjectsInput>,
    ) -> S3Result<S3Response<DeleteObjectsOutput>> {
        let DeleteObjectsInput { bucket, delete, .. } = req.input;
        self.bucket(&bucket).await?;
        let quiet = delete.quiet.unwrap_or(false);
        let (mut deleted, mut errors) = (Vec::new(), Vec::new());
        for object in delete.objects {
            match self.delete_key(&bucket, &object.key).await {
                Ok(()) if quiet => {}
                Ok(()) => deleted.push(DeletedObject {
                    key: Some(object.key),
                    ..Default::default()
                }),
                Err(e) => errors.push(Error {
                    code: Some(e.code().as_str().to_string()),
                    key: Some(object.key),
                    message: e.message().map(str::to_string),
                    ..Default::default()
                }),
            }
        }
        Ok(S3Response::new(DeleteObjectsOutput {
            deleted: Some(deleted),
            errors: Some(errors),
            ..Default::default()
        }))
    }

    async fn list_objects_v2(
        &self,
        req: S3Request<ListObjectsV2Input>,
    ) -> S3Result<S3Response<ListObjectsV2Output>> {
        let ListObjectsV2Input {
            bucket,
            prefix,
            delimiter,
            continuation_token,
            max_keys,
            start_after,
            ..
        } = req.input;
        let after = match continuation_token.as_deref() {
            Some(token) => Some(key_of_token(token)?),
            None => start_after.clone(),
        };
        let (page, max) = self
            .page(
                &bucket,
                prefix.as_deref(),
                delimiter.as_deref(),
                after.as_deref(),
                max_keys,
            )
            .await?;
        let key_count = (page.objects.len() + page.prefixes.len()) as i32;
        let (contents, common_prefixes) = listed(page.objects, page.prefixes);
        Ok(S3Response::new(ListObjectsV2Output {
            name: Some(bucket),
            prefix,
            delimiter,
            max_keys: Some(max),
            key_count: Some(key_count),
            continuation_token,
            start_after,
            is_truncated: Some(page.next.is_some()),
            next_continuation_token: page.next.as_deref().map(token_of_key),
            contents: Some(contents),
            common_prefixes: Some(common_prefixes),
            ..Default::default()
        }))
    }

    async fn list_objects(
        &self,
        req: S3Request<ListObjectsInput>,
    ) -> S3Result<S3Response<ListObjectsOutput>> {
        let ListObjectsInput {
            bucket,
            prefix,
            delimiter,
            marker,
            max_keys,
            ..
        } = req.input;
        let (page, max) = self
            .page(
                &bucket,
                prefix.as_deref(),
                delimiter.as_deref(),
                marker.as_deref(),
                max_keys,
            )
            .await?;
        let (contents, common_prefixes) = listed(page.objects, page.prefixes);
        Ok(S3Response::new(ListObjectsOutput {
            name: Some(bucket),
            prefix,
            delimiter,
            marker,
            max_keys: Some(max),
            is_truncated: Some(page.next.is_some()),
            next_marker: page.next,
            contents: Some(contents),
            common_prefixes: Some(common_prefixes),
            ..Default::default()
        }))
    }

    async fn create_multipart_upload(
        &self,
        req: S3Request<CreateMultipartUploadInput>,
    ) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
        let CreateMultipartUploadInput { bucket, key, .. } = req.input;
        object_path(&bucket, &key)?;
        self.bucket(&bucket).await?;
        let id = new_name();
        let dir = format!("{UPLOADS_DIR}/{id}");
        self.d
            .mkdir(dir.as_bytes(), 0o700)
            .await
            .map_err(|e| s3_error(e, &key))?;
        let target = format!("{bucket}/{key}");
        if let Err(e) = self
            .d
            .set_xattr(dir.as_bytes(), UPLOAD_KEY_XATTR, target.as_bytes())
            .await
        {
            let _ = self.d.rmdir(dir.as_bytes()).await;
            return Err(s3_error(e, &key));
        }
        Ok(S3Response::new(CreateMultipartUploadOutput {
            bucket: Some(bucket),
            key: Some(key),
            upload_id: Some(id),
            ..Default::default()
        }))
    }

    async fn list_multipart_uploads(
        &self,
        req: S3Request<ListMultipartUploadsInput>,
    ) -> S3Result<S3Response<ListMultipartUploadsOutput>> {
        let ListMultipartUploadsInput {
            bucket,
            prefix,
            key_marker,
            upload_id_marker,
            max_uploads,
            ..
        } = req.input;
        self.bucket(&bucket).await?;
        let max = max_uploads.unwrap_or(1000).clamp(0, 1000) as usize;
        let mut uploads = Vec::new();
        for (id, attr) in self.uploads().await? {
            let Ok((_, target)) = self.upload(&id).await else {
                continue;
            };
            let Some(key) = target.strip_prefix(&format!("{bucket}/")) else {
                continue;
            };
            let after = match (&key_marker, &upload_id_marker) {
                (None, _) => true,
                (Some(k), None) => key > k.as_str(),
                (Some(k), Some(i)) => (key, id.as_str()) > (k.as_str(), i.as_str()),
            };
            if after && key.starts_with(prefix.as_deref().unwrap_or("")) {
                uploads.push((key.to_string(), id, attr));
            }
        }
        uploads.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        let truncated = uploads.len() > max;
        uploads.truncate(max);
        let last = uploads.last().map(|(k, i, _)| (k.clone(), i.clone()));
        Ok(S3Response::new(ListMultipartUploadsOutput {
            bucket: Some(bucket),
            prefix,
            key_marker,
            upload_id_marker,
            max_uploads: Some(max as i32),
            is_truncated: Some(truncated),
            next_key_marker: last.as_ref().filter(|_| truncated).map(|l| l.0.clone()),
            next_upload_id_marker: last.filter(|_| truncated).map(|l| l.1),
            uploads: Some(
                uploads
                    .into_iter()
                    .map(|(key, id, attr)| MultipartUpload {
                        key: Some(key),
                        upload_id: Some(id),
                        initiated: Some(modified(&attr)),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        }))
    }

    async fn upload_part(
        &self,
        req: S3Request<UploadPartInput>,
    ) -> S3Result<S3Response<UploadPartOutput>> {
        let UploadPartInput {
            upload_id,
            part_number,
            body,
            ..
        } = req.input;
        if !(1..=MAX_PARTS).contains(&part_number) {
            return Err(s3_error!(
                InvalidArgument,
                "part numbers are 1 to {MAX_PARTS}"
            ));
        }
        let (dir, _) = self.upload(&upload_id).await?;
        // written aside and renamed: a part sent again replaces the old whole
        let tmp = format!("{dir}/{}.tmp", new_name());
        let (e_tag, _) = self.store_tagged(&tmp, body).await?;
        let part = format!("{dir}/{part_number:05}");
        if let Err(e) = self.d.rename(tmp.as_bytes(), part.as_bytes()).await {
            let _ = self.d.unlink(tmp.as_bytes()).await;
            return Err(s3_error(e, &part));
        }
        Ok(S3Response::new(UploadPartOutput {
            e_tag: Some(ETag::Strong(e_tag)),
            ..Default::default()
        }))
    }

    async fn list_parts(
        &self,
        req: S3Request<ListPartsInput>,
    ) -> S3Result<S3Response<ListPartsOutput>> {
        let ListPartsInput {
            bucket,
            key,
            upload_id,
            ..
        } = req.input;
        let (dir, _) = self.upload(&upload_id).await?;
        let entries = self
            .d
            .list(dir.as_bytes())
            .await
            .map_err(|e| s3_error(e, &upload_id))?;
        let mut parts = Vec::new();
        for (name, attr) in entries {
            let Some(number) = std::str::from_utf8(&name)
                .ok()
                .and_then(|n| n.parse::<i32>().ok())
            else {
                continue;
            };
            let path = format!("{dir}/{number:05}");
            parts.push(Part {
                part_number: Some(number),
                size: Some(attr.length as i64),
                e_tag: Some(self.etag(&path, &attr).await),
                last_modified: Some(modified(&attr)),
                ..Default::default()
            });
        }
        parts.sort_by_key(|p| p.part_number);
        Ok(S3Response::new(ListPartsOutput {
            bucket: Some(bucket),
            key: Some(key),
            upload_id: Some(upload_id),
            parts: Some(parts),
            is_truncated: Some(false),
            ..Default::default()
        }))
    }

    async fn abort_multipart_upload(
        &self,
        req: S3Request<AbortMultipartUploadInput>,
    ) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
        let (dir, _) = self.upload(&req.input.upload_id).await?;
        self.remove_upload(&dir).await;
        Ok(S3Response::new(AbortMultipartUploadOutput::default()))
    }

    async fn complete_multipart_upload(
        &self,
        req: S3Request<CompleteMultipartUploadInput>,
    ) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
        let CompleteMultipartUploadInput {
            bucket,
            key,
            upload_id,
            multipart_upload,
            ..
        } = req.input;
        let (dir, target) = self.upload(&upload_id).await?;
        if target != format!("{bucket}/{key}") {
            return Err(s3_error!(
                NoSuchUpload,
                "upload {upload_id} is for {target}"
            ));
        }
        let parts = multipart_upload.and_then(|m| m.parts).unwrap_or_default();
        if parts.is_empty() {
            return Err(s3_error!(MalformedXML, "a multipart upload needs a part"));
        }
        // every part as listed, in ascending order, with its ETag
        let mut paths = Vec::with_capacity(parts.len());
        let mut joined_md5 = Md5::new();
        let mut previous = 0;
        for part in &parts {
            let number = part.part_number.unwrap_or(0);
            if number <= previous {
                return Err(s3_error!(InvalidPartOrder, "parts must ascend"));
            }
            previous = number;
            let path = format!("{dir}/{number:05}");
            let stored = match self.d.stat(path.as_bytes(), false).await {
                Ok(attr) => self.etag(&path, &attr).await.into_value(),
                Err(_) => return Err(s3_error!(InvalidPart, "no part {number}")),
            };
            if part.e_tag.as_ref().map(|e| e.value()) != Some(stored.as_str()) {
                return Err(s3_error!(InvalidPart, "part {number} has another ETag"));
            }
            let raw: Vec<u8> = (0..stored.len() / 2)
                .filter_map(|i| u8::from_str_radix(&stored[2 * i..2 * i + 2], 16).ok())
                .collect();
            joined_md5.update(&raw);
            paths.push(path);
        }
        let e_tag = format!("{}-{}", hex(&joined_md5.finalize()), parts.len());
        // the parts joined as metadata: the object shares their slices
        let tmp = format!("{TMP_DIR}/{}", new_name());
        let (fh, _) = self
            .d
            .open(tmp.as_bytes(), create_new(), 0o644)
            .await
            .map_err(|e| s3_error(e, &key))?;
        let mut offset = 0;
        let mut joined = Ok(());
        for path in &paths {
            match self.d.copy_into(path.as_bytes(), fh, offset).await {
                Ok(n) => offset += n,
                Err(e) => {
                    joined = Err(s3_error(e, path));
                    break;
                }
            }
        }
        let closed = self.d.close_handle(fh).await.map_err(|e| s3_error(e, &key));
        let tagged = async {
            joined?;
            closed?;
            self.keep_etag(&tmp, &e_tag)
                .await
                .map_err(|e| s3_error(e, &key))
        };
        if let Err(e) = tagged.await {
            let _ = self.d.unlink(tmp.as_bytes()).await;
            return Err(e);
        }
        self.place(&tmp, &bucket, &key).await?;
        self.remove_upload(&dir).await;
        Ok(S3Response::new(CompleteMultipartUploadOutput {
            bucket: Some(bucket),
            key: Some(key),
            e_tag: Some(ETag::Strong(e_tag)),
            ..Default::default()
        }))
    }

    async fn copy_object(
        &self,
        req: S3Request<CopyObjectInput>,
    ) -> S3Result<S3Response<CopyObjectOutput>> {
        let (src_bucket, src_key) = match &req.input.copy_source {
            CopySource::Bucket { bucket, key, .. } => (bucket.to_string(), key.to_string()),
            _ => return Err(s3_error!(NotImplemented, "copies from access points")),
        };
        let (bucket, key) = (req.input.bucket.clone(), req.input.key.clone());
        object_path(&bucket, &key)?;
        let (src, attr) = self.object(&src_bucket, &src_key).await?;
        let e_tag = self.etag(&src, &attr).await;
        let tmp = format!("{TMP_DIR}/{}", new_name());
        let copied = async {
            self.d.copy(src.as_bytes(), tmp.as_bytes()).await?;
            self.keep_etag(&tmp, e_tag.value()).await
        };
        if let Err(e) = copied.await {
            let _ = self.d.unlink(tmp.as_bytes()).await;
            return Err(s3_error(e, &src_key));
        }
        self.place(&tmp, &bucket, &key).await?;
        let (_, copy) = self.object(&bucket, &key).await?;
        Ok(S3Response::new(CopyObjectOutput {
            copy_object_result: Some(CopyObjectResult {
                e_tag: Some(e_tag),
                last_modified: Some(modified(&copy)),
                ..Default::default()
            }),
            ..Default::default()
        }))
    }
}

impl Gateway {
    /// Deletes `key` (a missing key is no error, as in S3) and the
    /// directories it leaves empty.
    async fn delete_key(&self, bucket: &str, key: &str) -> S3Result<()> {
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

    /// A listing page of `bucket` (delimiter "/" or none) after `after`.
    async fn page(
        &self,
        bucket: &str,
        prefix: Option<&str>,
        delimiter: Option<&str>,
        after: Option<&str>,
        max_keys: Option<i32>,
    ) -> S3Result<(list::Page, i32)> {
        let by_directory = match delimiter {
            None | Some("") => false,
            Some("/") => true,
            Some(other) => {
                return Err(s3_error!(
                    NotImplemented,
                    "delimiter {other:?}: only \"/\" is (keys are paths)"
                ))
            }
        };
        for (what, text) in [("prefix", prefix), ("start point", after)] {
            if let Some(bad) = text.and_then(|t| t.chars().find(|&c| !xml_char(c))) {
                // (an answer echoes them, in XML, which cannot carry them)
                return Err(s3_error!(
                    InvalidArgument,
                    "the listing's {what} holds {bad:?}, which no key of this gateway does"
                ));
            }
        }
        self.bucket(bucket).await?;
        let max = max_keys
            .unwrap_or(MAX_KEYS as i32)
            .clamp(0, MAX_KEYS as i32);
        let prefix = prefix.unwrap_or("");
        let page = list::page(
            &self.d,
            bucket,
            prefix,
            by_directory,
            after.unwrap_or(""),
            max as usize,
        )
        .await
        .map_err(|e| s3_error(e, prefix))?;
        Ok((page, max))
    }
}

/// The ETag of no bytes (a directory marker's).
fn empty_etag() -> ETag {
    ETag::Strong(hex(&Md5::digest(b"")))
}

/// A page's objects and prefixes as S3 lists them (ETags are left out:
/// finding them would cost a call per key).
fn listed(objects: Vec<(String, Attr)>, prefixes: Vec<String>) -> (Vec<Object>, Vec<CommonPrefix>) {
    let contents = objects
        .into_iter()
        .map(|(key, attr)| Object {
            key: Some(key),
            size: Some(attr.length as i64),
            last_modified: Some(modified(&attr)),
            storage_class: Some(ObjectStorageClass::from_static(
                ObjectStorageClass::STANDARD,
            )),
            ..Default::default()
        })
        .collect();
    let prefixes = prefixes
        .into_iter()
        .map(|p| CommonPrefix { prefix: Some(p) })
        .collect();
    (contents, prefixes)
}
