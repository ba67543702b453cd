//! The S3 operations of the gateway: buckets (top-level directories),
//! objects (files written aside and renamed onto their keys), listings,
//! multipart uploads (parts joined by copy_file_range) and copies.
use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Response, S3Result, S3};

use super::listing::listed;
use super::multipart::MAX_PARTS;
use super::object_io::{empty_etag, new_name};
use super::{
    key_of_token, modified, object_path, s3_error, token_of_key, Gateway, UPLOAD_KEY_XATTR,
};
use crate::meta::NodeType;

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
        let (path, fh, attr) = self.open_object(&bucket, &key).await?;
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
        let body = self.read_body(fh, start, end);
        Ok(S3Response::new(GetObjectOutput {
            body: Some(body),
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
        let tmp = self.aside_for(&bucket, &key).await?;
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
        let (id, dir) = self.upload_for(&bucket, &key).await?;
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
        let mut uploads = self
            .uploads_of(
                &bucket,
                prefix.as_deref(),
                key_marker.as_deref(),
                upload_id_marker.as_deref(),
            )
            .await?;
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
        let parts = self.parts(&dir, &upload_id).await?;
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
        let e_tag = self
            .complete_upload(&bucket, &key, &upload_id, multipart_upload)
            .await?;
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
        let tmp = self.aside_for(&bucket, &key).await?;
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
