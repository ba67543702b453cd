//! Multipart uploads: a directory each below the gateway's own, its parts
//! files in it; found by id, listed, joined into their objects (the parts'
//! slices shared, by copy_file_range) and removed when aborted, completed
//! or expired.
use md5::{Digest, Md5};
use s3s::dto::{CompletedMultipartUpload, Part};
use s3s::{s3_error, S3Result};

use super::object_io::create_new;
use super::{hex, modified, s3_error, Gateway, UPLOADS_DIR, UPLOAD_KEY_XATTR};
use crate::meta::Attr;

/// Parts a multipart upload may have (S3's limit).
pub(super) const MAX_PARTS: i32 = 10_000;

impl Gateway {
    /// The directory of upload `id`, and the bucket and key it is for.
    pub(super) async fn upload(&self, id: &str) -> S3Result<(String, String)> {
        let dir = super::staging::upload_dir(id);
        let target = match &dir {
            Some(dir) => self.d.get_xattr(dir.as_bytes(), UPLOAD_KEY_XATTR).await,
            None => Err(libc::ENOENT),
        };
        let dir = dir.unwrap_or_default();
        match target {
            Ok(target) => Ok((dir, String::from_utf8_lossy(&target).into_owned())),
            Err(libc::ENOENT | libc::ENODATA) => Err(s3_error!(NoSuchUpload, "no upload {id}")),
            Err(e) => Err(s3_error(e, id)),
        }
    }

    /// The multipart uploads there are: their ids and their directories'
    /// attributes (made when the upload was), on every shard.
    async fn uploads(&self) -> S3Result<Vec<(String, Attr)>> {
        let mut uploads = Vec::new();
        for dir in self.upload_dirs() {
            let listed = match self.d.list(dir.as_bytes()).await {
                Ok(listed) => listed,
                // (a shard where the gateway never wrote)
                Err(libc::ENOENT) if dir != UPLOADS_DIR => continue,
                Err(e) => return Err(s3_error(e, "the gateway's uploads")),
            };
            uploads.extend(
                listed
                    .into_iter()
                    .filter_map(|(name, attr)| Some((String::from_utf8(name).ok()?, attr))),
            );
        }
        Ok(uploads)
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
            let dir = super::staging::upload_dir(&id);
            if let Some(dir) = dir.filter(|_| attr.ctime < cutoff && attr.mtime < cutoff) {
                self.remove_upload(&dir).await;
                removed.0 += 1;
            }
        }
        for aside in self.aside_dirs() {
            let Ok(files) = self.d.list(aside.as_bytes()).await else {
                continue;
            };
            for (name, attr) in files {
                if attr.mtime < cutoff && attr.ctime < cutoff {
                    let mut path = format!("{aside}/").into_bytes();
                    path.extend_from_slice(&name);
                    if self.d.unlink(&path).await.is_ok() {
                        removed.1 += 1;
                    }
                }
            }
        }
        removed
    }

    pub(super) async fn remove_upload(&self, dir: &str) {
        if let Ok(parts) = self.d.list(dir.as_bytes()).await {
            for (name, _) in parts {
                let mut path = format!("{dir}/").into_bytes();
                path.extend_from_slice(&name);
                let _ = self.d.unlink(&path).await;
            }
        }
        let _ = self.d.rmdir(dir.as_bytes()).await;
    }

    /// The uploads of `bucket` after the markers, of keys that start with
    /// `prefix`, sorted by key and id: their keys, ids and directories'
    /// attributes.
    pub(super) async fn uploads_of(
        &self,
        bucket: &str,
        prefix: Option<&str>,
        key_marker: Option<&str>,
        upload_id_marker: Option<&str>,
    ) -> S3Result<Vec<(String, String, Attr)>> {
        let mut uploads = Vec::new();
        for (id, attr) in self.uploads().await? {
            let Ok((_, target)) = self.upload(&id).await else {
                continue;
            };
            let Some(key) = target.strip_prefix(&format!("{bucket}/")) else {
                continue;
            };
            let after = match (key_marker, upload_id_marker) {
                (None, _) => true,
                (Some(k), None) => key > k,
                (Some(k), Some(i)) => (key, id.as_str()) > (k, i),
            };
            if after && key.starts_with(prefix.unwrap_or("")) {
                uploads.push((key.to_string(), id, attr));
            }
        }
        uploads.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        Ok(uploads)
    }

    /// The parts of the upload in `dir` (upload `upload_id`), by number.
    pub(super) async fn parts(&self, dir: &str, upload_id: &str) -> S3Result<Vec<Part>> {
        let entries = self
            .d
            .list(dir.as_bytes())
            .await
            .map_err(|e| s3_error(e, upload_id))?;
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
        Ok(parts)
    }

    /// Joins the parts `multipart_upload` lists (in ascending order, each
    /// with its ETag) of upload `upload_id` into `key` of `bucket`, and
    /// removes the upload: the object's ETag.
    pub(super) async fn complete_upload(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
        multipart_upload: Option<CompletedMultipartUpload>,
    ) -> S3Result<String> {
        let (dir, target) = self.upload(upload_id).await?;
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
        let tmp = self.aside_for(bucket, key).await?;
        let (fh, _) = self
            .d
            .open(tmp.as_bytes(), create_new(), 0o644)
            .await
            .map_err(|e| s3_error(e, key))?;
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
        let closed = self.d.close_handle(fh).await.map_err(|e| s3_error(e, key));
        let tagged = async {
            joined?;
            closed?;
            self.keep_etag(&tmp, &e_tag)
                .await
                .map_err(|e| s3_error(e, key))
        };
        if let Err(e) = tagged.await {
            let _ = self.d.unlink(tmp.as_bytes()).await;
            return Err(e);
        }
        self.place(&tmp, bucket, key).await?;
        self.remove_upload(&dir).await;
        Ok(e_tag)
    }
}
