//! The `s3` backend: objects in an S3-compatible bucket (aws-sdk-s3), path-style for
//! servers given as http(s)://host:port/bucket, virtual-hosted for AWS bucket URLs.
use std::io;

use async_trait::async_trait;
use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::config::retry::RetryConfig;
use aws_sdk_s3::config::{
    BehaviorVersion, Credentials, Region, RequestChecksumCalculation, ResponseChecksumValidation,
};
use aws_sdk_s3::error::SdkError;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{MetadataDirective, RestoreRequest, StorageClass};
use aws_sdk_s3::Client;
use bytes::Bytes;

use super::{is_archive_class, ObjectInfo, ObjectState, ObjectStore};

/// Where a bucket URL points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketAddress {
    /// None for AWS itself (the SDK knows its endpoints).
    pub endpoint: Option<String>,
    pub bucket: String,
    pub region: String,
    pub path_style: bool,
}

/// Parses `http(s)://host[:port]/bucket` (an S3-compatible server) or
/// `https://bucket.s3.region.amazonaws.com` (AWS).
pub fn parse_bucket_url(url: &str) -> anyhow::Result<BucketAddress> {
    let u = url::Url::parse(url).map_err(|e| {
        anyhow::anyhow!(
            "bad S3 bucket URL {url:?}: {e}; use http://host:port/bucket or https://bucket.s3.region.amazonaws.com"
        )
    })?;
    anyhow::ensure!(
        matches!(u.scheme(), "http" | "https"),
        "S3 bucket URL {url:?} must start with http:// or https://"
    );
    let host = u.host_str().unwrap_or_default().to_string();
    if let Some(rest) = host.strip_suffix(".amazonaws.com") {
        // bucket.s3.region or bucket.s3-region or bucket.s3
        let parts: Vec<&str> = rest.splitn(2, ".s3").collect();
        anyhow::ensure!(
            parts.len() == 2 && !parts[0].is_empty(),
            "cannot find the bucket in {url:?}"
        );
        let region = parts[1].trim_start_matches(['.', '-']);
        return Ok(BucketAddress {
            endpoint: None,
            bucket: parts[0].to_string(),
            region: if region.is_empty() {
                "us-east-1".into()
            } else {
                region.into()
            },
            path_style: false,
        });
    }
    let bucket = u.path().trim_matches('/').to_string();
    anyhow::ensure!(
        !bucket.is_empty() && !bucket.contains('/'),
        "S3 bucket URL {url:?} must name one bucket: http://host:port/bucket"
    );
    let mut endpoint = format!("{}://{host}", u.scheme());
    if let Some(port) = u.port() {
        endpoint.push_str(&format!(":{port}"));
    }
    Ok(BucketAddress {
        endpoint: Some(endpoint),
        bucket,
        region: std::env::var("AWS_REGION").unwrap_or_else(|_| "us-east-1".into()),
        path_style: true,
    })
}

pub struct S3Store {
    client: Client,
    addr: BucketAddress,
}

impl S3Store {
    /// A client for the bucket; keys from the volume, else the usual AWS
    /// environment variables, profile and instance credentials.
    pub async fn new(url: &str, keys: Option<(String, String)>) -> anyhow::Result<S3Store> {
        let addr = parse_bucket_url(url)?;
        let shared = aws_config::defaults(BehaviorVersion::latest())
            .region(Region::new(addr.region.clone()))
            .load()
            .await;
        let mut b = aws_sdk_s3::config::Builder::from(&shared)
            .force_path_style(addr.path_style)
            .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
            .response_checksum_validation(ResponseChecksumValidation::WhenRequired)
            // one attempt per request: `with_retries` retries, for the
            // mount's --object-retry, with its own backoff and timeout
            .retry_config(RetryConfig::disabled());
        if let Some(endpoint) = &addr.endpoint {
            b = b.endpoint_url(endpoint);
        }
        if let Some((ak, sk)) = keys {
            b = b.credentials_provider(Credentials::new(ak, sk, None, None, "jfs-volume"));
        }
        Ok(S3Store {
            client: Client::from_conf(b.build()),
            addr,
        })
    }

    /// Creates the bucket unless it exists (for `jfs format`).
    pub async fn ensure_bucket(&self) -> io::Result<()> {
        if self
            .client
            .head_bucket()
            .bucket(&self.addr.bucket)
            .send()
            .await
            .is_ok()
        {
            return Ok(());
        }
        match self
            .client
            .create_bucket()
            .bucket(&self.addr.bucket)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e) => {
                let text = format!("{}", aws_sdk_s3::error::DisplayErrorContext(&e));
                if text.contains("BucketAlreadyOwnedByYou") || text.contains("BucketAlreadyExists")
                {
                    Ok(())
                } else {
                    Err(to_io("create bucket", e))
                }
            }
        }
    }
}

/// SDK errors as io errors: network trouble and 5xx are transient (retried),
/// 404 is NotFound, the rest carry the server's message.
fn to_io<E>(what: &str, e: SdkError<E, HttpResponse>) -> io::Error
where
    E: std::error::Error + Send + Sync + 'static,
{
    let text = format!("{what}: {}", aws_sdk_s3::error::DisplayErrorContext(&e));
    let status = e.raw_response().map(|r| r.status().as_u16()).unwrap_or(0);
    let kind = match &e {
        SdkError::TimeoutError(_) => io::ErrorKind::TimedOut,
        SdkError::DispatchFailure(_) => io::ErrorKind::ConnectionRefused,
        SdkError::ResponseError(_) => io::ErrorKind::ConnectionReset,
        SdkError::ServiceError(_) if text.contains("NoSuchKey") || text.contains("NotFound") => {
            io::ErrorKind::NotFound
        }
        // a server error or too many requests, whatever its body says
        SdkError::ServiceError(_) if status >= 500 || status == 429 => io::ErrorKind::TimedOut,
        SdkError::ServiceError(_)
            if text.contains("InternalError")
                || text.contains("SlowDown")
                || text.contains("ServiceUnavailable") =>
        {
            io::ErrorKind::TimedOut
        }
        _ => io::ErrorKind::Other,
    };
    io::Error::new(kind, text)
}

#[async_trait]
impl ObjectStore for S3Store {
    async fn put(&self, key: &str, data: Bytes, class: &str) -> io::Result<()> {
        self.client
            .put_object()
            .bucket(&self.addr.bucket)
            .key(key)
            .set_storage_class((!class.is_empty()).then(|| StorageClass::from(class)))
            .body(ByteStream::from(data))
            .send()
            .await
            .map_err(|e| to_io(&format!("put {key}"), e))?;
        Ok(())
    }

    async fn get(&self, key: &str, off: u64, len: usize) -> io::Result<Bytes> {
        if len == 0 {
            return Ok(Bytes::new());
        }
        let out = self
            .client
            .get_object()
            .bucket(&self.addr.bucket)
            .key(key)
            .range(format!("bytes={}-{}", off, off + len as u64 - 1))
            .send()
            .await
            .map_err(|e| to_io(&format!("get {key}"), e))?;
        let body = out.body.collect().await.map_err(|e| {
            io::Error::new(io::ErrorKind::ConnectionReset, format!("get {key}: {e}"))
        })?;
        Ok(body.into_bytes())
    }

    async fn delete(&self, key: &str) -> io::Result<()> {
        match self
            .client
            .delete_object()
            .bucket(&self.addr.bucket)
            .key(key)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e) => {
                let e = to_io(&format!("delete {key}"), e);
                if e.kind() == io::ErrorKind::NotFound {
                    Ok(())
                } else {
                    Err(e)
                }
            }
        }
    }

    async fn list(&self, prefix: &str) -> io::Result<Vec<ObjectInfo>> {
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let page = self
                .client
                .list_objects_v2()
                .bucket(&self.addr.bucket)
                .prefix(prefix)
                .set_continuation_token(token.take())
                .send()
                .await
                .map_err(|e| to_io(&format!("list {prefix}"), e))?;
            for o in page.contents() {
                let Some(key) = o.key() else { continue };
                let modified = o
                    .last_modified()
                    .and_then(|t| std::time::SystemTime::try_from(*t).ok())
                    .unwrap_or(std::time::UNIX_EPOCH);
                out.push(ObjectInfo {
                    key: key.to_string(),
                    size: o.size().unwrap_or(0).max(0) as u64,
                    modified,
                });
            }
            match page.next_continuation_token() {
                Some(t) if page.is_truncated() == Some(true) => token = Some(t.to_string()),
                _ => return Ok(out),
            }
        }
    }

    async fn set_class(&self, key: &str, class: &str) -> io::Result<()> {
        let class = if class.is_empty() { "STANDARD" } else { class };
        self.client
            .copy_object()
            .bucket(&self.addr.bucket)
            .key(key)
            .copy_source(format!("{}/{key}", self.addr.bucket))
            .storage_class(StorageClass::from(class))
            .metadata_directive(MetadataDirective::Copy)
            .send()
            .await
            .map_err(|e| to_io(&format!("copy {key} into {class}"), e))?;
        Ok(())
    }

    async fn head(&self, key: &str) -> io::Result<ObjectState> {
        let out = self
            .client
            .head_object()
            .bucket(&self.addr.bucket)
            .key(key)
            .send()
            .await
            .map_err(|e| to_io(&format!("head {key}"), e))?;
        let class = out
            .storage_class()
            .map(|c| c.as_str().to_string())
            .unwrap_or_default();
        // x-amz-restore: ongoing-request="false", expiry-date="..." once restored
        let restore = out.restore().unwrap_or("");
        let restored = restore.contains("ongoing-request=\"false\"");
        Ok(ObjectState {
            archived: is_archive_class(&class) && !restored,
            restoring: restore.contains("ongoing-request=\"true\""),
            class,
        })
    }

    async fn restore(&self, key: &str) -> io::Result<bool> {
        let state = self.head(key).await?;
        if !state.archived {
            return Ok(true);
        }
        if state.restoring {
            return Ok(false);
        }
        self.client
            .restore_object()
            .bucket(&self.addr.bucket)
            .key(key)
            .restore_request(RestoreRequest::builder().days(1).build())
            .send()
            .await
            .map_err(|e| to_io(&format!("restore {key}"), e))?;
        Ok(false)
    }

    fn describe(&self) -> String {
        match &self.addr.endpoint {
            Some(ep) => format!("s3 {ep}/{}", self.addr.bucket),
            None => format!("s3://{} ({})", self.addr.bucket, self.addr.region),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_urls() {
        assert_eq!(
            parse_bucket_url("http://127.0.0.1:9000/jfs").unwrap(),
            BucketAddress {
                endpoint: Some("http://127.0.0.1:9000".into()),
                bucket: "jfs".into(),
                region: std::env::var("AWS_REGION").unwrap_or_else(|_| "us-east-1".into()),
                path_style: true,
            }
        );
        let aws = parse_bucket_url("https://mybucket.s3.eu-west-1.amazonaws.com").unwrap();
        assert_eq!(
            (aws.bucket.as_str(), aws.region.as_str(), aws.path_style),
            ("mybucket", "eu-west-1", false)
        );
        assert!(aws.endpoint.is_none());
        assert!(parse_bucket_url("ftp://x/y").is_err());
        assert!(parse_bucket_url("http://host:9000/").is_err());
        assert!(parse_bucket_url("http://host:9000/a/b").is_err());
        assert!(parse_bucket_url("not a url").is_err());
    }
}
