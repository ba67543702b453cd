//! Opening a volume: its metadata database, its settings, and its object
//! store, checked to belong to it (the bucket's `juicefs_uuid` marker).
pub mod gc;
pub mod layout;
pub mod shards;

use std::sync::Arc;

use anyhow::Context;

use crate::meta::{redact_url, Meta, MetaError, VolumeInfo};
use crate::object::{self, Compression, Encoded, ObjectStore, Sealer};

/// Where the passphrase of a volume's RSA key comes from (never argv).
pub const PASSPHRASE_ENV: &str = "JFS_RSA_PASSPHRASE";

/// The sealer of a volume whose objects are sealed by `pem` with `algo`
/// (its passphrase from [`PASSPHRASE_ENV`]); None when `algo` is "".
pub fn sealer(algo: &str, pem: &str) -> anyhow::Result<Option<Sealer>> {
    if algo.is_empty() {
        return Ok(None);
    }
    anyhow::ensure!(
        !pem.is_empty(),
        "the volume's objects are encrypted ({algo}) but it keeps no RSA key"
    );
    let passphrase = std::env::var(PASSPHRASE_ENV).ok();
    Ok(Some(Sealer::new(pem, passphrase.as_deref(), algo)?))
}

/// `store` as volume `name` stores blocks: compressed by `compression`,
/// sealed by `sealer` (itself when neither applies).
pub fn encoded_store(
    store: Arc<dyn ObjectStore>,
    name: &str,
    compression: &str,
    sealer: Option<Sealer>,
) -> anyhow::Result<Arc<dyn ObjectStore>> {
    let compression = Compression::parse(compression)?;
    let name = name.to_string();
    let block_len = Box::new(move |key: &str| layout::parse_block_key(&name, key).map(|b| b.2));
    Ok(Encoded::wrap(store, compression, sealer, block_len))
}

/// How sure a command must be that the bucket is this volume's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BucketCheck {
    /// The marker is read (and written if missing) or the command stops:
    /// gc and tier change objects.
    Required,
    /// A mount may serve its disk cache while the store is away: a store it
    /// cannot reach is checked at the next mount (a marker naming another
    /// volume still stops it).
    WhenReachable,
}

/// A volume's database, settings and object store.
pub struct OpenVolume {
    pub meta: Meta,
    pub volume: VolumeInfo,
    pub store: Arc<dyn ObjectStore>,
    /// The key a disk cache of an encrypted volume is sealed with
    /// (`--cache-sealed`); None when the volume is not encrypted.
    pub cache_key: Option<[u8; 32]>,
}

/// The volume `meta` holds, or an error saying there is none (`meta_url`
/// names the database in it).
pub async fn read_volume(meta: &Meta, meta_url: &str) -> anyhow::Result<VolumeInfo> {
    match meta.volume().await {
        Ok(v) => Ok(v),
        Err(MetaError::Errno(libc::ENOENT)) => anyhow::bail!(
            "{} holds no volume: run `jfs format` first",
            redact_url(meta_url)
        ),
        Err(e) => Err(e.into()),
    }
}

/// The object store of `volume` (whose database `meta` is), its blocks
/// encoded as the volume says, not checked to be the volume's; and the key
/// a disk cache of it is sealed with, when it is encrypted.
pub async fn volume_store(
    meta: &Meta,
    volume: &VolumeInfo,
) -> anyhow::Result<(Arc<dyn ObjectStore>, Option<[u8; 32]>)> {
    let secrets = meta.volume_secrets().await?;
    let sealer = sealer(&volume.encrypt_algo, &secrets.encrypt_key)
        .with_context(|| format!("volume {}", volume.name))?;
    let cache_key = sealer.as_ref().map(Sealer::cache_key);
    let store = object::open(&volume.storage, &volume.bucket, secrets.keys).await?;
    let store = encoded_store(store, &volume.name, &volume.compression, sealer)?;
    Ok((store, cache_key))
}

/// Connects to `meta_url` (`connections` pooled), reads the volume and
/// opens its object store.
pub async fn open_volume(
    meta_url: &str,
    connections: usize,
    check: BucketCheck,
) -> anyhow::Result<OpenVolume> {
    let meta = Meta::connect(meta_url, connections).await?;
    let volume = read_volume(&meta, meta_url).await?;
    let (store, cache_key) = volume_store(&meta, &volume).await?;
    match check {
        BucketCheck::Required => {
            object::claim_bucket(store.as_ref(), &volume.name, &volume.uuid).await?
        }
        BucketCheck::WhenReachable => {
            match object::bucket_owner(store.as_ref(), &volume.name).await {
                Ok(_) => object::claim_bucket(store.as_ref(), &volume.name, &volume.uuid).await?,
                // the volume's mark does not open with its key: nothing of
                // it would
                Err(e) if object::is_undecodable(&e) => return Err(e),
                Err(e) => tracing::warn!("cannot check which volume the bucket belongs to: {e:#}"),
            }
        }
    }
    Ok(OpenVolume {
        meta,
        volume,
        store,
        cache_key,
    })
}
