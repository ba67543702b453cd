//! A store whose blocks are compressed and whose objects are sealed (JuiceFS's `--compress` and `--encrypt-rsa-key`): what goes in is encoded, what comes out decoded.
//!
//! As JuiceFS does: blocks (keys that end with their length) are
//! compressed, and every object, the volume's `juicefs_uuid` and its
//! metadata backups too, is sealed when the volume is encrypted. An encoded
//! object is read whole (a range of it means nothing), and what it decodes
//! to is cut to the range asked for. An object that fails to open (another
//! key, a changed byte, a block that does not decompress to its length) is
//! an error naming its key, never data.
use std::io;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;

use super::codec::{Compression, Sealer};
use super::{ObjectInfo, ObjectState, ObjectStore};

/// The length a key names when it is a block's (None: not a block).
pub type BlockLen = Box<dyn Fn(&str) -> Option<u32> + Send + Sync>;

/// Objects that are not blocks are read whole up to this size.
const OTHER_OBJECT_MAX: usize = 1 << 30;

pub struct Encoded {
    inner: Arc<dyn ObjectStore>,
    codec: Arc<Codec>,
}

/// What encodes and decodes (shared with the blocking threads that do it:
/// a 4 MiB block takes milliseconds, too long for the runtime's threads).
struct Codec {
    compression: Compression,
    sealer: Option<Sealer>,
    block_len: BlockLen,
}

impl Encoded {
    /// `inner` with blocks compressed by `compression` and objects sealed by
    /// `sealer`; `inner` itself when neither applies.
    pub fn wrap(
        inner: Arc<dyn ObjectStore>,
        compression: Compression,
        sealer: Option<Sealer>,
        block_len: BlockLen,
    ) -> Arc<dyn ObjectStore> {
        if compression == Compression::None && sealer.is_none() {
            return inner;
        }
        let codec = Arc::new(Codec {
            compression,
            sealer,
            block_len,
        });
        Arc::new(Encoded { inner, codec })
    }
}

impl Codec {
    fn encode(&self, key: &str, data: &[u8]) -> io::Result<Vec<u8>> {
        let compressed;
        let data = match (self.block_len)(key) {
            Some(_) if self.compression != Compression::None => {
                compressed = self.compression.compress(data)?;
                &compressed[..]
            }
            _ => data,
        };
        match &self.sealer {
            Some(sealer) => sealer.seal(data),
            None => Ok(data.to_vec()),
        }
    }

    fn decode(&self, key: &str, stored: &[u8]) -> io::Result<Vec<u8>> {
        let failed = |e: io::Error| io::Error::new(e.kind(), format!("object {key}: {e}"));
        let opened;
        let data = match &self.sealer {
            Some(sealer) => {
                opened = sealer.open(stored).map_err(failed)?;
                &opened[..]
            }
            None => stored,
        };
        match (self.block_len)(key) {
            Some(len) => self
                .compression
                .decompress(data, len as usize)
                .map_err(failed),
            None => Ok(data.to_vec()),
        }
    }

    /// The most an object of `key` can take as stored.
    fn stored_max(&self, key: &str) -> usize {
        let sealing = self.sealer.as_ref().map_or(0, |s| s.overhead());
        match (self.block_len)(key) {
            Some(len) => self.compression.bound(len as usize) + sealing,
            None => OTHER_OBJECT_MAX,
        }
    }
}

impl Encoded {
    /// `data` as it is stored under `key` (compressed, sealed).
    async fn encoded(&self, key: &str, data: Bytes) -> io::Result<Bytes> {
        let (codec, owned_key) = (self.codec.clone(), key.to_string());
        let stored = tokio::task::spawn_blocking(move || codec.encode(&owned_key, &data))
            .await
            .map_err(io::Error::other)??;
        Ok(Bytes::from(stored))
    }
}

#[async_trait]
impl ObjectStore for Encoded {
    async fn put(&self, key: &str, data: Bytes, class: &str) -> io::Result<()> {
        let stored = self.encoded(key, data).await?;
        self.inner.put(key, stored, class).await
    }

    async fn put_block(&self, key: &str, data: Bytes, class: &str) -> io::Result<()> {
        let stored = self.encoded(key, data).await?;
        self.inner.put_block(key, stored, class).await
    }

    async fn get(&self, key: &str, off: u64, len: usize) -> io::Result<Bytes> {
        let stored = self.inner.get(key, 0, self.codec.stored_max(key)).await?;
        let (codec, owned_key) = (self.codec.clone(), key.to_string());
        let decoded = tokio::task::spawn_blocking(move || codec.decode(&owned_key, &stored))
            .await
            .map_err(io::Error::other)?
            .map_err(|e| io::Error::new(e.kind(), format!("{e} (in {})", self.inner.describe())))?;
        let data = Bytes::from(decoded);
        let start = (off as usize).min(data.len());
        let end = start.saturating_add(len).min(data.len());
        Ok(data.slice(start..end))
    }

    async fn delete(&self, key: &str) -> io::Result<()> {
        self.inner.delete(key).await
    }

    async fn list(&self, prefix: &str) -> io::Result<Vec<ObjectInfo>> {
        self.inner.list(prefix).await
    }

    async fn set_class(&self, key: &str, class: &str) -> io::Result<()> {
        self.inner.set_class(key, class).await
    }

    async fn head(&self, key: &str) -> io::Result<ObjectState> {
        self.inner.head(key).await
    }

    async fn restore(&self, key: &str) -> io::Result<bool> {
        self.inner.restore(key).await
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn disk_space(&self) -> Option<(u64, u64)> {
        self.inner.disk_space()
    }

    fn whole_objects(&self) -> bool {
        true
    }

    fn encode_block(&self, key: &str, data: Bytes) -> io::Result<Bytes> {
        Ok(Bytes::from(self.codec.encode(key, &data)?))
    }

    fn decode_block(&self, key: &str, stored: Bytes) -> io::Result<Bytes> {
        Ok(Bytes::from(self.codec.decode(key, &stored)?))
    }
}
