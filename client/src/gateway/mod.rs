//! `jfs gateway`: the volume as an S3 endpoint, on the s3s crate (its
//! protocol, SigV4 checks, XML) over `crate::direct`. Buckets are the
//! volume's top-level directories and keys the paths below them, as
//! `juicefs gateway` maps them. An object is written to a file of the
//! gateway's own (`/.jfs-gateway/tmp`; on a volume over shards, its
//! directory on the shard of the key: `staging`) and renamed onto its key, so readers
//! see the old object or the new one, never half of one; the response comes
//! once the directory is synced. Multipart parts are files of the upload's
//! directory, joined by copy_file_range (shared slices, no bytes moved);
//! CopyObject is a copy_file_range too. ETags are kept in an xattr.
pub mod list;
mod listing;
mod multipart;
mod object_io;
mod objects;
pub mod serve;
mod staging;

use std::sync::Arc;

use s3s::dto::{ETag, Timestamp};
use s3s::{S3Error, S3ErrorCode};

use crate::direct::Direct;
use crate::meta::{ns_to_time, Attr, NodeType};

/// The gateway's own directory (not a bucket: no bucket name starts with ".").
const SYSTEM_DIR: &str = "/.jfs-gateway";
/// Objects being written, before they are renamed onto their keys.
const TMP_DIR: &str = "/.jfs-gateway/tmp";
/// Multipart uploads: a directory each, holding its parts.
const UPLOADS_DIR: &str = "/.jfs-gateway/uploads";
/// The xattr that keeps an object's ETag.
const ETAG_XATTR: &[u8] = b"user.s3.etag";
/// The xattr of an upload's directory that names its bucket and key.
const UPLOAD_KEY_XATTR: &[u8] = b"user.s3.upload";
/// Bytes gathered from a request body before they are written.
const WRITE_PIECE: usize = 4 << 20;
/// Bytes read per piece of a response body.
const READ_PIECE: usize = 1 << 20;
/// Keys a listing page holds at most (S3's own limit).
const MAX_KEYS: usize = 1000;

/// The S3 service over a volume attached to by this process.
pub struct Gateway {
    d: Arc<Direct>,
    /// The volume's shards (0 alone: none).
    shards: Vec<u16>,
    /// The shards whose directories of the gateway's own are made and
    /// checked (see `staging`).
    ready: std::sync::Mutex<std::collections::HashSet<u16>>,
}

impl Gateway {
    /// The gateway of `d`, its own directories made if missing and checked
    /// to be its own (a directory, owned by the gateway's user, mode 0700),
    /// the first pinned by its inode: what the gateway writes aside stays
    /// where nobody else can reach it, even if the name is moved (mounts
    /// refuse that to their users: `VfsConfig::reserve_gateway_dir`).
    pub async fn new(d: Arc<Direct>) -> anyhow::Result<Gateway> {
        for dir in [SYSTEM_DIR, TMP_DIR, UPLOADS_DIR] {
            match d.mkdir(dir.as_bytes(), 0o700).await {
                Ok(_) | Err(libc::EEXIST) => {}
                // (a read-only gateway writes nothing aside)
                Err(libc::EROFS) => return Ok(Gateway::over(d)),
                Err(e) => anyhow::bail!(
                    "making the gateway's directory {dir} in the volume: {}",
                    std::io::Error::from_raw_os_error(e)
                ),
            }
            let attr = d.stat(dir.as_bytes(), false).await.map_err(|e| {
                anyhow::anyhow!(
                    "the gateway's directory {dir}: {}",
                    std::io::Error::from_raw_os_error(e)
                )
            })?;
            if let Some(wrong) = not_own_dir(&attr, d.uid()) {
                anyhow::bail!(
                    "the gateway's directory {dir} in the volume {wrong}, not a directory of uid \
                     {} (the gateway's user) with mode 0700: someone else may have made it to \
                     receive what the gateway stores. Look at what it holds, remove it (as \
                     root, through a mount), and start the gateway again",
                    d.uid()
                );
            }
            if dir == SYSTEM_DIR {
                d.pin(crate::vfs::GATEWAY_DIR_NAME, attr.inode);
            }
        }
        Ok(Gateway::over(d))
    }

    fn over(d: Arc<Direct>) -> Gateway {
        Gateway {
            shards: d.shards(),
            d,
            ready: Default::default(),
        }
    }
}

impl Gateway {
    /// Removes, in the background, multipart uploads and files written
    /// aside older than `expiry` (see `expire`), checking every quarter of
    /// it (at most hourly); a zero `expiry` keeps them.
    pub fn spawn_expiry(&self, expiry: std::time::Duration) {
        if expiry.is_zero() {
            return;
        }
        let every = (expiry / 4).clamp(
            std::time::Duration::from_secs(1),
            std::time::Duration::from_secs(3600),
        );
        let g = Gateway::over(self.d.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let (uploads, files) = g.expire(expiry).await;
                if uploads + files > 0 {
                    tracing::info!(
                        "removed {uploads} multipart upload(s) and {files} file(s) written aside, \
                         older than {} s",
                        expiry.as_secs()
                    );
                }
            }
        });
    }
}

/// What is wrong with `attr` as a directory of the gateway's own, whose
/// user is `uid`: None if nothing.
fn not_own_dir(attr: &Attr, uid: u32) -> Option<String> {
    if attr.kind != NodeType::Dir {
        return Some(format!("is a {:?}", attr.kind).to_lowercase());
    }
    if attr.uid != uid || attr.mode & 0o777 != 0o700 {
        return Some(format!(
            "is owned by uid {} with mode {:04o}",
            attr.uid,
            attr.mode & 0o7777
        ));
    }
    None
}

/// The S3 error of errno `e` from an operation on `what` (a key or bucket).
fn s3_error(e: i32, what: &str) -> S3Error {
    let (code, message) = match e {
        libc::ENOENT => (S3ErrorCode::NoSuchKey, format!("{what}: no such key")),
        libc::EACCES | libc::EPERM => (S3ErrorCode::AccessDenied, format!("{what}: access denied")),
        libc::EROFS => (
            S3ErrorCode::AccessDenied,
            format!("{what}: the gateway is read-only"),
        ),
        libc::EDQUOT | libc::ENOSPC => (
            S3ErrorCode::Custom("QuotaExceeded".into()),
            format!("{what}: a quota of the volume or directory is reached"),
        ),
        libc::ENOTDIR | libc::EISDIR | libc::EEXIST | libc::ENOTEMPTY => (
            S3ErrorCode::InvalidRequest,
            format!(
                "{what}: a key and a prefix of another key name one path in the file system ({})",
                std::io::Error::from_raw_os_error(e)
            ),
        ),
        libc::EFBIG => (
            S3ErrorCode::EntityTooLarge,
            format!("{what}: an object ends at 2^57 bytes, the largest file of a volume"),
        ),
        libc::ENAMETOOLONG => (
            S3ErrorCode::KeyTooLongError,
            format!("{what}: a part of the key is longer than 255 bytes"),
        ),
        _ => (
            S3ErrorCode::InternalError,
            format!("{what}: {}", std::io::Error::from_raw_os_error(e)),
        ),
    };
    let mut err = S3Error::with_message(code, message);
    if e == libc::EDQUOT || e == libc::ENOSPC {
        err.set_status_code(http_status_forbidden());
    }
    err
}

fn http_status_forbidden() -> hyper::StatusCode {
    hyper::StatusCode::FORBIDDEN
}

/// The path of `key` of `bucket`; keys that are no path (empty names, "."
/// or "..", NUL) are refused.
fn object_path(bucket: &str, key: &str) -> Result<String, S3Error> {
    let body = key.strip_suffix('/').unwrap_or(key);
    let bad = key.is_empty()
        || key.contains('\0')
        || body
            .split('/')
            .any(|part| part.is_empty() || part == "." || part == "..");
    if bad {
        return Err(S3Error::with_message(
            S3ErrorCode::InvalidArgument,
            format!("{key:?}: keys are paths here: no empty, \".\" or \"..\" parts"),
        ));
    }
    Ok(format!("/{bucket}/{body}"))
}

/// An ETag of a file written without the gateway (none kept): its inode,
/// length and modification time, so it changes when the file does.
fn derived_etag(attr: &Attr) -> ETag {
    use md5::{Digest, Md5};
    let mut h = Md5::new();
    h.update(attr.inode.to_le_bytes());
    h.update(attr.length.to_le_bytes());
    h.update(attr.mtime.to_le_bytes());
    ETag::Strong(hex(&h.finalize()))
}

/// The ETag kept in the xattr (`MD5 LENGTH MTIME`, as the file was when
/// the gateway wrote it), if the file is still as it was.
fn kept_etag(kept: &[u8], attr: &Attr) -> Option<String> {
    let kept = std::str::from_utf8(kept).ok()?;
    let mut words = kept.split(' ');
    let (e_tag, length, mtime) = (words.next()?, words.next()?, words.next()?);
    let unchanged = length.parse() == Ok(attr.length) && mtime.parse() == Ok(attr.mtime);
    unchanged.then(|| e_tag.to_string())
}

/// The continuation token that stands for listing after `key` (opaque to
/// clients: the key's bytes in hex, which any answer can carry).
fn token_of_key(key: &str) -> String {
    hex(key.as_bytes())
}

/// The key a continuation token stands for; InvalidArgument for one this
/// gateway did not give.
fn key_of_token(token: &str) -> Result<String, S3Error> {
    let bytes: Option<Vec<u8>> = token
        .len()
        .is_multiple_of(2)
        .then(|| {
            (0..token.len())
                .step_by(2)
                .map(|i| {
                    token
                        .get(i..i + 2)
                        .and_then(|h| u8::from_str_radix(h, 16).ok())
                })
                .collect()
        })
        .flatten();
    bytes
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or_else(|| {
            S3Error::with_message(
                S3ErrorCode::InvalidArgument,
                format!("the continuation token {token:?} is not one this gateway gave"),
            )
        })
}

/// Whether XML 1.0 can carry `c` (an answer that echoes a string holding
/// another could not be written).
fn xml_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn modified(attr: &Attr) -> Timestamp {
    Timestamp::from(ns_to_time(attr.mtime))
}

fn is_file(attr: &Attr) -> bool {
    attr.kind == NodeType::File
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gateway_keeps_to_its_own_directory() {
        assert_eq!(
            SYSTEM_DIR.as_bytes(),
            [b"/", crate::vfs::GATEWAY_DIR_NAME].concat(),
            "the directory mounts reserve"
        );
        assert!(TMP_DIR.starts_with(SYSTEM_DIR) && UPLOADS_DIR.starts_with(SYSTEM_DIR));
        let mut attr = Attr {
            inode: 2,
            kind: NodeType::Dir,
            mode: 0o40700,
            uid: 7,
            gid: 7,
            ..crate::vfs::control_attr()
        };
        assert_eq!(not_own_dir(&attr, 7), None);
        attr.mode = 0o42700;
        assert_eq!(
            not_own_dir(&attr, 7),
            None,
            "a set-group-id root passes its bit on"
        );
        assert!(not_own_dir(&attr, 0).unwrap().contains("uid 7"));
        attr.mode = 0o40755;
        assert!(not_own_dir(&attr, 7).unwrap().contains("mode 0755"));
        attr.kind = NodeType::Symlink;
        assert_eq!(not_own_dir(&attr, 7).unwrap(), "is a symlink");
    }

    #[test]
    fn continuation_tokens_are_opaque_and_checked() {
        for key in ["a/b", "", "ключ/\u{1}", "x y"] {
            assert_eq!(key_of_token(&token_of_key(key)).unwrap(), key);
        }
        assert!(token_of_key("a\u{1}").chars().all(xml_char));
        for bad in ["\u{1}abc", "abc", "zz", "ff", "é0"] {
            let e = key_of_token(bad).unwrap_err();
            assert_eq!(e.code(), &S3ErrorCode::InvalidArgument, "{bad:?}");
            assert!(e.message().unwrap().chars().all(xml_char), "{bad:?}");
        }
        assert!(!xml_char('\u{1}') && !xml_char('\u{FFFE}') && xml_char('\t'));
    }

    #[test]
    fn limits_answer_as_s3_names_them() {
        // (no S3 request reaches 2^57 bytes: 10,000 parts of 5 GiB end far
        // below; a copy of a file written through a mount could)
        let too_large = s3_error(libc::EFBIG, "b/k");
        assert_eq!(too_large.code(), &S3ErrorCode::EntityTooLarge);
        assert!(too_large.message().unwrap_or_default().contains("2^57"));
        let too_long = s3_error(libc::ENAMETOOLONG, "b/k");
        assert_eq!(too_long.code(), &S3ErrorCode::KeyTooLongError);
        let quota = s3_error(libc::EDQUOT, "b/k");
        assert_eq!(quota.status_code(), Some(hyper::StatusCode::FORBIDDEN));
    }
}
