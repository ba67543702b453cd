//! Garbage in the object store: the census of a volume's objects (what `jfs gc` reports and deletes) and the deletion of freed slices' objects (mounts in the background, and `jfs gc`).
use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use super::layout::{blocks_prefix, parse_block_key, slice_blocks};
use crate::meta::{shard_of, Meta, VolumeInfo};
use crate::metrics::METRICS;
use crate::object::{temporary_of, ObjectInfo, ObjectStore};

/// Slice ids asked about per call of `jfs.slice_states`.
const SLICE_STATES_BATCH: usize = 10_000;

/// The volume's objects by what the database says of them: (count,
/// bytes) of those slices reference and of those queued for deletion, the
/// unreferenced ones (leaked by a client that died before committing, or
/// half-written), those too young to judge, and keys that are no block.
#[derive(Default)]
pub struct Census {
    pub referenced: (u64, u64),
    pub pending: (u64, u64),
    pub unreferenced: Vec<ObjectInfo>,
    pub young: (u64, u64),
    pub foreign: Vec<ObjectInfo>,
    /// Blocks of slices another shard of the volume made (its own census
    /// judges them: this database knows nothing of them).
    pub other_shards: (u64, u64),
}

fn add(counter: &mut (u64, u64), o: &ObjectInfo) {
    counter.0 += 1;
    counter.1 += o.size;
}

/// Lists every block object of `volume` and asks the database about each
/// slice; objects younger than `min_age` that no row knows are left alone
/// (a client may be about to commit them: blocks are stored before their
/// slice is committed).
pub async fn take_census(
    meta: &Meta,
    store: &dyn ObjectStore,
    volume: &VolumeInfo,
    min_age: Duration,
) -> anyhow::Result<Census> {
    let prefix = blocks_prefix(&volume.name);
    eprint!("listing {}/{prefix} ...", store.describe());
    let objects = store
        .list(&prefix)
        .await
        .map_err(|e| anyhow::anyhow!("listing {}: {e}", store.describe()))?;
    eprintln!(
        "\rlisted {} objects under {}/{prefix}",
        objects.len(),
        store.describe()
    );

    let shard = meta.shard_number().await?;
    let now = SystemTime::now();
    let mut census = Census::default();
    let mut by_slice: HashMap<u64, Vec<ObjectInfo>> = HashMap::new();
    // only objects no row knows need the age check
    let young = |o: &ObjectInfo| now.duration_since(o.modified).unwrap_or_default() < min_age;
    for o in objects {
        match parse_block_key(&volume.name, &o.key) {
            Some((id, _, _)) if shard_of(id).is_some_and(|s| s != shard) => {
                add(&mut census.other_shards, &o)
            }
            Some((id, _, _)) => by_slice.entry(id).or_default().push(o),
            None if young(&o) => add(&mut census.young, &o),
            // a block file left half-written by a failed write or a killed mount
            None if temporary_of(&o.key)
                .is_some_and(|k| parse_block_key(&volume.name, k).is_some()) =>
            {
                census.unreferenced.push(o)
            }
            None => census.foreign.push(o),
        }
    }
    let ids: Vec<i64> = by_slice.keys().map(|&id| id as i64).collect();
    for (n, batch) in ids.chunks(SLICE_STATES_BATCH).enumerate() {
        for (id, state) in meta.slice_states(batch).await? {
            for o in by_slice.remove(&id).unwrap_or_default() {
                match state.as_str() {
                    "referenced" => add(&mut census.referenced, &o),
                    "pending" => add(&mut census.pending, &o),
                    _ if young(&o) => add(&mut census.young, &o),
                    _ => census.unreferenced.push(o),
                }
            }
        }
        eprint!(
            "\rchecked {} of {} slices",
            (n * 10_000 + batch.len()),
            ids.len()
        );
    }
    if !ids.is_empty() {
        eprintln!();
    }
    Ok(census)
}

/// Freed slices taken from the queue per round trip.
const DELSLICE_PAGE: i32 = 1000;

/// Deletes the objects of slices whose last reference went away at least
/// `delay` ago (the delslice queue), then forgets them; returns how many
/// slices were done. Used by mounts in the background and by `jfs gc`.
pub async fn drain_delslices(
    meta: &Meta,
    store: &dyn ObjectStore,
    volume: &VolumeInfo,
    delay: Duration,
) -> anyhow::Result<usize> {
    let mut total = 0;
    loop {
        let read_in = meta.epoch();
        let pending = meta
            .pending_delslices(delay.as_secs(), DELSLICE_PAGE)
            .await?;
        if pending.is_empty() {
            return Ok(total);
        }
        // the commits that freed these slices are durable before their
        // objects go: a crash that erased one would bring its references back
        if !meta.durable_since(read_in).await? {
            tracing::warn!(
                "the metadata server changed while freed slices were listed: \
                 none deleted this round"
            );
            return Ok(total);
        }
        let mut done = Vec::with_capacity(pending.len());
        for (id, size) in pending {
            let bs = volume.block_size;
            let mut ok = true;
            for (_, _, key) in slice_blocks(&volume.name, id, size, bs) {
                match store.delete(&key).await {
                    Ok(()) => METRICS.objects_deleted.inc(),
                    Err(e) => {
                        tracing::warn!("deleting {key}: {e}");
                        ok = false;
                    }
                }
            }
            if ok {
                done.push(id as i64);
            }
        }
        if done.is_empty() {
            anyhow::bail!("no freed slice could be deleted from {}", store.describe());
        }
        total += done.len();
        meta.forget_delslices(&done).await?;
        METRICS.slices_deleted.inc_by(done.len() as u64);
    }
}
