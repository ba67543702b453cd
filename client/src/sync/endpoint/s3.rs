//! An S3 prefix as a sync endpoint: objects listed by ListObjectsV2 pages,
//! read as streams, written by one PUT or, when large, a multipart upload
//! (atomic either way, so no temporary names). Directories are implicit in
//! keys, and objects keep no mode or mtime of their own.
use anyhow::Context;
use async_trait::async_trait;
use aws_sdk_s3::config::{
    BehaviorVersion, Region, RequestChecksumCalculation, ResponseChecksumValidation,
};
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};
use aws_sdk_s3::Client;
use bytes::{Bytes, BytesMut};

use super::{Endpoint, Entry, Kind, Reader, S3Options, Writer, PIECE};
use crate::meta::time_to_ns;

/// The part size of multipart uploads (raised for files of more than
/// 10,000 parts); a file up to this size is one PUT.
const PART: usize = 8 << 20;

/// Modes given to what S3 lists, which keeps none.
const FILE_MODE: u32 = 0o644;
const DIR_MODE: u32 = 0o755;

pub struct S3Tree {
    client: Client,
    bucket: String,
    /// The key prefix ("" or ending with '/').
    prefix: String,
    /// Where the server is, for messages.
    server: String,
}

/// An SDK error as a person reads it: the server's code and message, or
/// the transport's chain of causes (no credentials, no connection, ...).
fn sdk<E>(e: SdkError<E, aws_sdk_s3::config::http::HttpResponse>) -> anyhow::Error
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    if let SdkError::ServiceError(service) = &e {
        let status = service.raw().status().as_u16();
        let err = service.err();
        if let Some(code) = err.code() {
            return anyhow::anyhow!(
                "{code} (HTTP {status}){}",
                err.message().map(|m| format!(": {m}")).unwrap_or_default()
            );
        }
        return anyhow::anyhow!("HTTP {status}");
    }
    anyhow::Error::new(e)
}

impl S3Tree {
    pub async fn connect(bucket: &str, prefix: &str, o: &S3Options) -> anyhow::Result<S3Tree> {
        let region = std::env::var("AWS_REGION")
            .or_else(|_| std::env::var("AWS_DEFAULT_REGION"))
            .unwrap_or_else(|_| "us-east-1".into());
        let shared = aws_config::defaults(BehaviorVersion::latest())
            .region(Region::new(region))
            .load()
            .await;
        let mut b = aws_sdk_s3::config::Builder::from(&shared)
            .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
            .response_checksum_validation(ResponseChecksumValidation::WhenRequired);
        if let Some(endpoint) = &o.endpoint {
            anyhow::ensure!(
                endpoint.starts_with("http://") || endpoint.starts_with("https://"),
                "S3 endpoint {endpoint:?} must start with http:// or https://"
            );
            b = b.endpoint_url(endpoint).force_path_style(true);
        }
        Ok(S3Tree {
            client: Client::from_conf(b.build()),
            bucket: bucket.to_string(),
            prefix: prefix.to_string(),
            server: o.endpoint.clone().unwrap_or_else(|| "AWS".into()),
        })
    }

    fn key(&self, path: &str) -> String {
        format!("{}{path}", self.prefix)
    }

    fn shown(&self, path: &str) -> String {
        format!("s3://{}/{}", self.bucket, self.key(path))
    }
}

#[async_trait]
impl Endpoint for S3Tree {
    fn describe(&self) -> String {
        format!("s3://{}/{} (at {})", self.bucket, self.prefix, self.server)
    }

    fn keeps_attrs(&self) -> bool {
        false
    }

    fn keeps_tree(&self) -> bool {
        false
    }

    async fn prepare(&self, create: bool) -> anyhow::Result<()> {
        let head = self.client.head_bucket().bucket(&self.bucket).send().await;
        let missing = match &head {
            Ok(_) => return Ok(()),
            Err(e) => e.raw_response().map(|r| r.status().as_u16()) == Some(404),
        };
        if missing && create {
            return self
                .client
                .create_bucket()
                .bucket(&self.bucket)
                .send()
                .await
                .map(drop)
                .map_err(sdk)
                .with_context(|| {
                    format!("cannot create bucket {} at {}", self.bucket, self.server)
                });
        }
        let cause = sdk(head.unwrap_err());
        if missing {
            anyhow::bail!("bucket {} does not exist at {}", self.bucket, self.server);
        }
        Err(cause).with_context(|| {
            format!(
                "cannot reach bucket {} at {}: check --s3-endpoint (or AWS_ENDPOINT_URL), \
                 that the server is up, and AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY",
                self.bucket, self.server
            )
        })
    }

    async fn list(&self) -> anyhow::Result<Vec<Entry>> {
        let mut out = Vec::new();
        let mut dirs = std::collections::BTreeMap::<String, i64>::new();
        let mut token: Option<String> = None;
        loop {
            let page = self
                .client
                .list_objects_v2()
                .bucket(&self.bucket)
                .prefix(&self.prefix)
                .set_continuation_token(token.take())
                .send()
                .await
                .map_err(sdk)
                .with_context(|| format!("cannot list {}", self.describe()))?;
            for o in page.contents() {
                let Some(path) = o.key().and_then(|k| k.strip_prefix(self.prefix.as_str())) else {
                    continue;
                };
                let mtime = o
                    .last_modified()
                    .and_then(|t| std::time::SystemTime::try_from(*t).ok())
                    .map_or(0, time_to_ns);
                // a "dir/" marker: a directory, empty perhaps
                let (path, marker) = match path.strip_suffix('/') {
                    Some(dir) => (dir, true),
                    None => (path, false),
                };
                if path.is_empty() {
                    continue;
                }
                if !super::is_plain_path(path) {
                    tracing::warn!(
                        "{}: a key with an empty, . or .. part, left out",
                        self.shown(path)
                    );
                    continue;
                }
                // the directories a key implies
                let mut parent = path;
                while let Some((dir, _)) = parent.rsplit_once('/') {
                    dirs.entry(dir.to_string()).or_insert(mtime);
                    parent = dir;
                }
                if marker {
                    dirs.entry(path.to_string()).or_insert(mtime);
                    continue;
                }
                out.push(Entry {
                    path: path.to_string(),
                    kind: Kind::File,
                    size: o.size().unwrap_or(0).max(0) as u64,
                    mtime,
                    mode: FILE_MODE,
                    target: None,
                });
            }
            match page.next_continuation_token() {
                Some(t) if page.is_truncated() == Some(true) => token = Some(t.to_string()),
                _ => break,
            }
        }
        out.extend(dirs.into_iter().map(|(path, mtime)| Entry {
            path,
            kind: Kind::Dir,
            size: 0,
            mtime,
            mode: DIR_MODE,
            target: None,
        }));
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }

    async fn open(&self, path: &str) -> anyhow::Result<Box<dyn Reader>> {
        let out = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(self.key(path))
            .send()
            .await
            .map_err(sdk)
            .with_context(|| format!("cannot read {}", self.shown(path)))?;
        Ok(Box::new(S3Reader {
            body: out.body,
            shown: self.shown(path),
        }))
    }

    async fn create(&self, path: &str, source: &Entry) -> anyhow::Result<Box<dyn Writer>> {
        // at most 10,000 parts, as S3 allows
        let part = PART.max(source.size.div_ceil(9_999) as usize);
        Ok(Box::new(S3Writer {
            client: self.client.clone(),
            bucket: self.bucket.clone(),
            key: self.key(path),
            part,
            pending: BytesMut::new(),
            upload: None,
            parts: Vec::new(),
        }))
    }

    async fn mkdir(&self, _path: &str, _mode: u32) -> anyhow::Result<()> {
        Ok(())
    }

    async fn set_dir_attrs(&self, _path: &str, _mode: u32, _mtime: i64) -> anyhow::Result<()> {
        Ok(())
    }

    async fn symlink(&self, path: &str, _target: &[u8]) -> anyhow::Result<()> {
        anyhow::bail!("{}: S3 keeps no symlinks", self.shown(path))
    }

    async fn remove(&self, entry: &Entry) -> anyhow::Result<()> {
        if entry.kind == Kind::Dir {
            // implicit in its keys (a "dir/" marker, if any, goes too)
            let marker = format!("{}/", self.key(&entry.path));
            let _ = self
                .client
                .delete_object()
                .bucket(&self.bucket)
                .key(marker)
                .send()
                .await;
            return Ok(());
        }
        self.client
            .delete_object()
            .bucket(&self.bucket)
            .key(self.key(&entry.path))
            .send()
            .await
            .map(drop)
            .map_err(sdk)
            .with_context(|| format!("cannot delete {}", self.shown(&entry.path)))
    }

    async fn close(&self) {}
}

struct S3Reader {
    body: ByteStream,
    shown: String,
}

#[async_trait]
impl Reader for S3Reader {
    async fn next_piece(&mut self) -> anyhow::Result<Option<Bytes>> {
        // the stream's own pieces are small: gather up to PIECE
        let mut piece = BytesMut::new();
        while piece.len() < PIECE {
            match self
                .body
                .try_next()
                .await
                .with_context(|| format!("cannot read {}", self.shown))?
            {
                Some(data) => piece.extend_from_slice(&data),
                None => break,
            }
        }
        Ok((!piece.is_empty()).then(|| piece.freeze()))
    }
}

struct S3Writer {
    client: Client,
    bucket: String,
    key: String,
    part: usize,
    pending: BytesMut,
    /// The multipart upload, once the object outgrows one part.
    upload: Option<String>,
    parts: Vec<CompletedPart>,
}

impl S3Writer {
    fn shown(&self) -> String {
        format!("s3://{}/{}", self.bucket, self.key)
    }

    /// Uploads the first `len` pending bytes as the next part.
    async fn upload_part(&mut self, len: usize) -> anyhow::Result<()> {
        let upload = match &self.upload {
            Some(id) => id.clone(),
            None => {
                let made = self
                    .client
                    .create_multipart_upload()
                    .bucket(&self.bucket)
                    .key(&self.key)
                    .send()
                    .await
                    .map_err(sdk)
                    .with_context(|| format!("cannot start uploading {}", self.shown()))?;
                let id = made
                    .upload_id()
                    .with_context(|| format!("{}: the server gave no upload id", self.shown()))?
                    .to_string();
                self.upload = Some(id.clone());
                id
            }
        };
        let data = self.pending.split_to(len).freeze();
        let number = self.parts.len() as i32 + 1;
        let sent = self
            .client
            .upload_part()
            .bucket(&self.bucket)
            .key(&self.key)
            .upload_id(&upload)
            .part_number(number)
            .body(ByteStream::from(data))
            .send()
            .await
            .map_err(sdk)
            .with_context(|| format!("cannot upload part {number} of {}", self.shown()))?;
        self.parts.push(
            CompletedPart::builder()
                .set_e_tag(sent.e_tag().map(str::to_string))
                .part_number(number)
                .build(),
        );
        Ok(())
    }
}

#[async_trait]
impl Writer for S3Writer {
    async fn write(&mut self, data: Bytes) -> anyhow::Result<()> {
        self.pending.extend_from_slice(&data);
        while self.pending.len() > self.part {
            self.upload_part(self.part).await?;
        }
        Ok(())
    }

    async fn finish(mut self: Box<Self>) -> anyhow::Result<()> {
        let Some(upload) = self.upload.clone() else {
            let data = std::mem::take(&mut self.pending).freeze();
            return self
                .client
                .put_object()
                .bucket(&self.bucket)
                .key(&self.key)
                .body(ByteStream::from(data))
                .send()
                .await
                .map(drop)
                .map_err(sdk)
                .with_context(|| format!("cannot write {}", self.shown()));
        };
        if !self.pending.is_empty() {
            let len = self.pending.len();
            self.upload_part(len).await?;
        }
        let parts = CompletedMultipartUpload::builder()
            .set_parts(Some(std::mem::take(&mut self.parts)))
            .build();
        let completed = self
            .client
            .complete_multipart_upload()
            .bucket(&self.bucket)
            .key(&self.key)
            .upload_id(&upload)
            .multipart_upload(parts)
            .send()
            .await
            .map(drop)
            .map_err(sdk)
            .with_context(|| format!("cannot complete the upload of {}", self.shown()));
        if completed.is_err() {
            self.abort_upload(&upload).await;
        }
        completed
    }

    async fn abort(self: Box<Self>) {
        if let Some(upload) = &self.upload {
            self.abort_upload(upload).await;
        }
    }
}

impl S3Writer {
    async fn abort_upload(&self, upload: &str) {
        let _ = self
            .client
            .abort_multipart_upload()
            .bucket(&self.bucket)
            .key(&self.key)
            .upload_id(upload)
            .send()
            .await;
    }
}
