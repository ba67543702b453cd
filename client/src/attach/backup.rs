//! Automatic metadata backups (`jfs mount --backup-meta`): one mount per interval, chosen in the database, writes a compressed dump into the object store under `{volume}/meta/` and keeps the newest ones.
use bytes::Bytes;
use std::time::Duration;

use crate::dump::write::dump;
use crate::vfs::Vfs;

/// Where backups go, under the volume's prefix: `{volume}/meta/dump-YYYY-MM-DD-HHMMSS.json.gz`.
pub fn backup_prefix(volume: &str) -> String {
    format!("{volume}/meta/dump-")
}

/// Writes a backup if this mount is the one to write it now (the last one
/// is at least `interval` old), then deletes all but the newest `keep`.
/// Returns the new backup's key.
pub async fn backup_if_due(
    vfs: &Vfs,
    interval: Duration,
    keep: usize,
) -> anyhow::Result<Option<String>> {
    let Some(stamp) = vfs.ns.meta_of_mount().backup_claim(interval).await? else {
        return Ok(None);
    };
    match write_backup(vfs, &stamp, keep).await {
        Ok(key) => {
            crate::metrics::METRICS.backups.inc();
            Ok(Some(key))
        }
        Err(e) => {
            // the next mount to ask tries again
            if let Err(r) = vfs.ns.meta_of_mount().backup_release(&stamp).await {
                tracing::warn!("giving back the metadata backup's turn: {r}");
            }
            Err(e)
        }
    }
}

/// Writes the backup named by `stamp`, then deletes all but the newest `keep`.
async fn write_backup(vfs: &Vfs, stamp: &str, keep: usize) -> anyhow::Result<String> {
    let key = format!("{}{stamp}.json.gz", backup_prefix(&vfs.volume.name));
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    // (the key kept, as before: a backup is what a lost database is
    // loaded back from)
    // (and every shard's tree in place of its shard root)
    let shards: Vec<(u16, std::sync::Arc<crate::meta::Meta>)> = (vfs.ns.parts().all()[1..].iter())
        .map(|p| (p.number, std::sync::Arc::new(p.meta.clone())))
        .collect();
    let store = Some(vfs.store().as_ref());
    let dumped = dump(
        vfs.ns.meta_of_mount(),
        &shards,
        &mut gz,
        None,
        true,
        store,
        |_| {},
    )
    .await?;
    let bytes = gz.finish()?;
    let size = bytes.len();
    vfs.store()
        .put(&key, Bytes::from(bytes), "")
        .await
        .map_err(|e| anyhow::anyhow!("storing {key} in {}: {e}", vfs.store().describe()))?;
    tracing::info!(
        "metadata backup {key}: {} entries, {size} bytes compressed",
        dumped.entries
    );
    let mut old: Vec<String> = vfs
        .store()
        .list(&backup_prefix(&vfs.volume.name))
        .await?
        .into_iter()
        .map(|o| o.key)
        .filter(|k| k.ends_with(".json.gz"))
        .collect();
    old.sort();
    let drop = old.len().saturating_sub(keep.max(1));
    for k in &old[..drop] {
        if let Err(e) = vfs.store().delete(k).await {
            tracing::warn!("deleting the old metadata backup {k}: {e}");
        }
    }
    Ok(key)
}
