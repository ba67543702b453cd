//! Opening a volume: its metadata database, its settings, and its object
//! store, checked to belong to it (the bucket's `juicefs_uuid` marker).
pub mod gc;
pub mod layout;

use std::sync::Arc;

use crate::meta::{redact_url, Meta, MetaError, VolumeInfo};
use crate::object::{self, ObjectStore};

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
}

/// Connects to `meta_url` (`connections` pooled), reads the volume and
/// opens its object store.
pub async fn open_volume(
    meta_url: &str,
    connections: usize,
    check: BucketCheck,
) -> anyhow::Result<OpenVolume> {
    let meta = Meta::connect(meta_url, connections).await?;
    let volume = match meta.volume().await {
        Ok(v) => v,
        Err(MetaError::Errno(libc::ENOENT)) => anyhow::bail!(
            "{} holds no volume: run `jfs format` first",
            redact_url(meta_url)
        ),
        Err(e) => return Err(e.into()),
    };
    let keys = meta.volume_secrets().await?;
    let store = object::open(&volume.storage, &volume.bucket, keys).await?;
    match check {
        BucketCheck::Required => {
            object::claim_bucket(store.as_ref(), &volume.name, &volume.uuid).await?
        }
        BucketCheck::WhenReachable => {
            match object::bucket_owner(store.as_ref(), &volume.name).await {
                Ok(_) => object::claim_bucket(store.as_ref(), &volume.name, &volume.uuid).await?,
                Err(e) => tracing::warn!("cannot check which volume the bucket belongs to: {e:#}"),
            }
        }
    }
    Ok(OpenVolume {
        meta,
        volume,
        store,
    })
}
