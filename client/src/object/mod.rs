//! Object storage: the `ObjectStore` trait, block keys (JuiceFS's layout), backends, and blocks compressed and sealed as JuiceFS stores them (`codec`, `encoded`).
mod codec;
mod disk_cache;
mod encoded;
mod file;
mod measured;
mod s3;

use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;

pub use codec::{Compression, Sealer};
pub use disk_cache::DiskCache;
pub use encoded::Encoded;
pub use file::{temporary_of, FileStore};
use measured::Measured;
pub use s3::S3Store;

/// Where a volume's blocks live. Keys are relative to the bucket.
#[async_trait]
pub trait ObjectStore: Send + Sync {
    /// Stores a whole object (replacing any object of that key) in storage
    /// class `class` ("" = the bucket's default).
    async fn put(&self, key: &str, data: Bytes, class: &str) -> io::Result<()>;
    /// [`ObjectStore::put`] of a new block of a slice: its key names it
    /// once and nothing reads it before its slice is committed, so a
    /// store may write it where it ends up instead of beside it (a tried
    /// again put of it replaces it whole all the same).
    async fn put_block(&self, key: &str, data: Bytes, class: &str) -> io::Result<()> {
        self.put(key, data, class).await
    }
    /// Reads `len` bytes at `off` of an object; fewer only at its end.
    async fn get(&self, key: &str, off: u64, len: usize) -> io::Result<Bytes>;
    /// Deletes an object; a missing object is not an error.
    async fn delete(&self, key: &str) -> io::Result<()>;
    /// Every object whose key starts with `prefix`, in no particular order.
    async fn list(&self, prefix: &str) -> io::Result<Vec<ObjectInfo>>;
    /// Moves an object into storage class `class` without downloading it
    /// (a server-side copy onto itself).
    async fn set_class(&self, key: &str, class: &str) -> io::Result<()>;
    /// An object's storage class and whether it can be read now.
    async fn head(&self, key: &str) -> io::Result<ObjectState>;
    /// Asks for an archived object to be made readable again (for a day);
    /// true when it is readable already.
    async fn restore(&self, key: &str) -> io::Result<bool>;
    /// Where this store is, for messages (no secrets).
    fn describe(&self) -> String;
    /// Bytes free and in all on the disk under the store, where it is a
    /// local directory (None for a service, whose room is its own).
    fn disk_space(&self) -> Option<(u64, u64)> {
        None
    }
    /// Objects are read whole whatever range is asked for (they are
    /// compressed or sealed): readers should keep what they fetched.
    fn whole_objects(&self) -> bool {
        false
    }
    /// What the object of block `key` holding `data` would hold (compressed
    /// and sealed as the volume's blocks are), without storing it: a small
    /// file's block kept in the database instead (the bytes as they are
    /// for a store that does not encode).
    fn encode_block(&self, key: &str, data: Bytes) -> io::Result<Bytes> {
        let _ = key;
        Ok(data)
    }
    /// The block that `stored`, encoded by [`ObjectStore::encode_block`]
    /// for `key`, holds; an error naming the key when it does not open.
    fn decode_block(&self, key: &str, stored: Bytes) -> io::Result<Bytes> {
        let _ = key;
        Ok(stored)
    }
}

/// Storage classes whose objects cannot be read until restored.
pub fn is_archive_class(class: &str) -> bool {
    matches!(class, "GLACIER" | "DEEP_ARCHIVE")
}

/// What `head` tells of an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectState {
    /// "" or "STANDARD" for the default class.
    pub class: String,
    /// In an archive class and not (yet) restored: reads fail.
    pub archived: bool,
    /// A restore was asked for and is still running.
    pub restoring: bool,
}

/// One listed object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectInfo {
    pub key: String,
    pub size: u64,
    pub modified: std::time::SystemTime,
}

/// The object naming the volume a bucket's `{volume}/` prefix belongs to
/// (its uuid, as JuiceFS keeps `juicefs_uuid`): two volumes of one name in
/// one bucket, their slice ids both counting from 1, would overwrite each
/// other's blocks, and one's gc would delete the other's.
pub fn owner_key(volume: &str) -> String {
    format!("{volume}/juicefs_uuid")
}

/// The uuid of the volume the bucket's `{volume}/` belongs to (None if it
/// says none).
pub async fn bucket_owner(store: &dyn ObjectStore, volume: &str) -> anyhow::Result<Option<String>> {
    match store.get(&owner_key(volume), 0, 64).await {
        Ok(bytes) => Ok(Some(String::from_utf8_lossy(&bytes).trim().to_string())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) if e.kind() == io::ErrorKind::InvalidData => {
            let why = e.to_string();
            Err(anyhow::Error::new(e).context(format!(
                "cannot read the volume's mark {} ({why}): the RSA key (or JFS_RSA_PASSPHRASE) \
                 given is not the one its objects were sealed with, or it is not sealed as the \
                 volume says",
                owner_key(volume)
            )))
        }
        Err(e) => Err(anyhow::anyhow!(
            "reading {} in {}: {e}",
            owner_key(volume),
            store.describe()
        )),
    }
}

/// Whether `e` says an object did not decode (sealed by another key,
/// changed, not compressed as the volume says).
pub fn is_undecodable(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|e| e.kind() == io::ErrorKind::InvalidData)
    })
}

/// Makes sure the bucket belongs to volume `volume` of uuid `uuid`: marks
/// it when it is not marked yet (volumes formatted before the mark), stops
/// when it is another volume's.
pub async fn claim_bucket(store: &dyn ObjectStore, volume: &str, uuid: &str) -> anyhow::Result<()> {
    match bucket_owner(store, volume).await? {
        Some(owner) if owner == uuid => Ok(()),
        Some(owner) => anyhow::bail!(
            "{}/{volume}/ belongs to another volume (uuid {owner}; this database's volume is {uuid}): \
             two volumes in one place would overwrite each other's blocks; \
             format this one with another --bucket or name",
            store.describe()
        ),
        None => mark_bucket(store, volume, uuid).await,
    }
}

/// Marks the bucket's `{volume}/` as volume `uuid`'s (whatever marked it).
pub async fn mark_bucket(store: &dyn ObjectStore, volume: &str, uuid: &str) -> anyhow::Result<()> {
    store
        .put(&owner_key(volume), Bytes::from(uuid.to_string()), "")
        .await
        .map_err(|e| anyhow::anyhow!("marking {} as volume {uuid}'s: {e}", store.describe()))
}

/// Opens the store a volume was formatted with (its requests measured). `keys` are the object
/// store's access and secret key, when the volume has them.
pub async fn open(
    storage: &str,
    bucket: &str,
    keys: Option<(String, String)>,
) -> anyhow::Result<Arc<dyn ObjectStore>> {
    match storage {
        "file" => Ok(Arc::new(Measured::new(FileStore::new(bucket)?))),
        "s3" => Ok(Arc::new(Measured::new(S3Store::new(bucket, keys).await?))),
        other => anyhow::bail!("unknown storage {other:?}: use file or s3"),
    }
}

/// Reads up to `len` bytes at `off` of a local file (fewer only at its end).
pub(crate) fn read_range(path: &std::path::Path, off: u64, len: usize) -> io::Result<Bytes> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::open(path)?;
    // (a whole object is asked for with a generous length)
    let len = len.min(file.metadata()?.len().saturating_sub(off) as usize);
    let mut buf = vec![0u8; len];
    let mut done = 0;
    while done < len {
        let n = file.read_at(&mut buf[done..], off + done as u64)?;
        if n == 0 {
            break;
        }
        done += n;
    }
    buf.truncate(done);
    Ok(Bytes::from(buf))
}

/// How long an object operation is retried while it fails with errors that
/// may pass, unless the mount says otherwise (`--object-retry`).
pub const DEFAULT_OBJECT_RETRY: Duration = Duration::from_secs(60);

/// How long one attempt of an object operation may take, unless the mount
/// says otherwise (`--object-timeout`): a server that stalls mid-answer is
/// then a retried timeout, never a read that hangs.
pub const DEFAULT_OBJECT_TIMEOUT: Duration = Duration::from_secs(60);

/// The retry time and the attempt timeout in force, in milliseconds (one
/// each per process: a mount).
static RETRY_FOR_MS: AtomicU64 = AtomicU64::new(DEFAULT_OBJECT_RETRY.as_millis() as u64);
static ATTEMPT_TIMEOUT_MS: AtomicU64 = AtomicU64::new(DEFAULT_OBJECT_TIMEOUT.as_millis() as u64);

/// Sets how long object operations are retried, and how long one attempt
/// may take.
pub fn set_retries(retry_for: Duration, attempt_timeout: Duration) {
    RETRY_FOR_MS.store(retry_for.as_millis() as u64, Ordering::Relaxed);
    ATTEMPT_TIMEOUT_MS.store(attempt_timeout.as_millis().max(1) as u64, Ordering::Relaxed);
}

/// The first and the longest pause between attempts.
const RETRY_PAUSE_MIN: Duration = Duration::from_millis(50);
const RETRY_PAUSE_MAX: Duration = Duration::from_secs(2);

/// Runs an object operation, again with exponential backoff while it fails
/// with errors that may pass (timeouts, refused or reset connections, a
/// body cut short, 5xx and SlowDown answers, an attempt that took too
/// long), for the retry time ([`set_retries`]); then returns the last error.
pub async fn with_retries<T, F, Fut>(what: &str, mut op: F) -> io::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = io::Result<T>>,
{
    let retry_for = Duration::from_millis(RETRY_FOR_MS.load(Ordering::Relaxed));
    let attempt_timeout = Duration::from_millis(ATTEMPT_TIMEOUT_MS.load(Ordering::Relaxed));
    let started = std::time::Instant::now();
    let mut pause = RETRY_PAUSE_MIN;
    let mut attempts = 1;
    loop {
        let attempt = tokio::time::timeout(attempt_timeout, op()).await;
        let result = attempt.unwrap_or_else(|_| {
            Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no answer within {} s", attempt_timeout.as_secs_f64()),
            ))
        });
        match result {
            Ok(v) => {
                if attempts > 1 {
                    tracing::info!("{what}: done at attempt {attempts}");
                }
                return Ok(v);
            }
            Err(e) if transient(&e) && started.elapsed() + pause <= retry_for => {
                if attempts == 1 || pause == RETRY_PAUSE_MAX {
                    tracing::warn!("{what}: {e}; retrying for up to {} s", retry_for.as_secs());
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(RETRY_PAUSE_MAX);
                attempts += 1;
            }
            Err(e) => {
                if attempts > 1 {
                    tracing::error!("{what}: giving up after {attempts} attempts: {e}");
                }
                return Err(e);
            }
        }
    }
}

fn transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::TimedOut
            | io::ErrorKind::Interrupted
            | io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::UnexpectedEof
            | io::ErrorKind::WouldBlock
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn retries_transient_errors_only() {
        let mut calls = 0;
        let r: io::Result<u8> = with_retries("t", || {
            calls += 1;
            let c = calls;
            async move {
                if c < 3 {
                    Err(io::Error::from(io::ErrorKind::TimedOut))
                } else {
                    Ok(7)
                }
            }
        })
        .await;
        assert_eq!(r.unwrap(), 7);
        assert_eq!(calls, 3);
        let mut calls = 0;
        let r: io::Result<u8> = with_retries("t", || {
            calls += 1;
            async { Err(io::Error::from(io::ErrorKind::PermissionDenied)) }
        })
        .await;
        assert!(r.is_err());
        assert_eq!(calls, 1);
    }
}
