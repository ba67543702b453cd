//! `jfs tier set|restore|status META_URL PATH` (and `jfs config META_URL
//! --tier-id N --tier-sc CLASS`, cmd/config.rs): storage tiers. A tier id (1..3) names an
//! object storage class; files take their directory's tier when created and
//! their new blocks are stored in its class. `tier set` changes a tree's tier
//! and moves its existing objects into the class by server-side copy (no
//! download); it skips objects already there, so an interrupted run is simply
//! run again. `tier restore` asks the store to make archived objects readable.
use std::io::Write as _;

use clap::{Args, Subcommand};

use crate::meta::TierSlice;
use crate::object::ObjectState;
use crate::volume::layout::slice_blocks;
use crate::volume::{open_volume, BucketCheck, OpenVolume};

#[derive(Args, Debug)]
pub struct TierArgs {
    #[command(subcommand)]
    action: Action,
}

#[derive(Subcommand, Debug)]
enum Action {
    /// Set the tier of a file or tree and move its objects into the tier's class
    Set(SetArgs),
    /// Ask the object store to restore archived objects of a file or tree
    Restore(PathArgs),
    /// Show each file's tier, class and the state of its objects
    Status(PathArgs),
}

#[derive(Args, Debug)]
struct SetArgs {
    /// PostgreSQL URL of the metadata database
    meta_url: String,
    /// Path in the volume ("/archive/2025")
    path: String,
    /// Tier id: 0 (volume default) to 3
    #[arg(long)]
    id: i32,
    /// Everything below PATH too
    #[arg(short, long)]
    recursive: bool,
    /// Copy every object again, even those that already report the class
    #[arg(long)]
    force: bool,
}

#[derive(Args, Debug)]
struct PathArgs {
    /// PostgreSQL URL of the metadata database
    meta_url: String,
    /// Path in the volume
    path: String,
    /// Everything below PATH too
    #[arg(short, long)]
    recursive: bool,
}

/// The object keys of a slice.
fn keys(volume: &str, block_size: u32, s: &TierSlice) -> Vec<String> {
    slice_blocks(volume, s.slice_id, s.slice_size, block_size)
        .map(|(_, _, key)| key)
        .collect()
}

/// "" and "STANDARD" are the same class.
fn same_class(state: &ObjectState, class: &str) -> bool {
    let norm = |c: &str| {
        if c.is_empty() {
            "STANDARD".to_string()
        } else {
            c.to_string()
        }
    };
    norm(&state.class) == norm(class)
}

fn progress(label: &str, done: usize, total: usize) {
    if done.is_multiple_of(100) || done == total {
        eprint!("\r{label}: {done}/{total} objects");
        let _ = std::io::stderr().flush();
    }
}

pub async fn run(a: TierArgs) -> anyhow::Result<()> {
    match a.action {
        Action::Set(s) => {
            let OpenVolume {
                meta,
                volume,
                store,
                ..
            } = open_volume(&s.meta_url, 2, BucketCheck::Required).await?;
            on_root_database(&meta, &s.meta_url, &s.path).await?;
            let changed = meta.set_tier(&s.path, s.id, s.recursive).await?;
            let slices = meta.tier_files(&s.path, s.recursive).await?;
            let fallback = meta.tier_classes().await?[0].clone();
            let work: Vec<(String, String)> = slices
                .iter()
                .flat_map(|sl| {
                    let class = if sl.class.is_empty() {
                        fallback.clone()
                    } else {
                        sl.class.clone()
                    };
                    keys(&volume.name, volume.block_size, sl)
                        .into_iter()
                        .map(move |k| (k, class.clone()))
                })
                .collect();
            let (mut moved, mut kept) = (0, 0);
            for (i, (key, class)) in work.iter().enumerate() {
                let state = store
                    .head(key)
                    .await
                    .map_err(|e| anyhow::anyhow!("{key}: {e}"))?;
                if s.force || !same_class(&state, class) {
                    store
                        .set_class(key, class)
                        .await
                        .map_err(|e| anyhow::anyhow!("moving {key} into {class:?}: {e}"))?;
                    moved += 1;
                } else {
                    kept += 1;
                }
                progress("tier set", i + 1, work.len());
            }
            if !work.is_empty() {
                eprintln!();
            }
            println!(
                "{}: tier {} on {changed} nodes; {moved} objects moved, {kept} already in their class",
                s.path, s.id
            );
        }
        Action::Restore(p) => {
            let OpenVolume {
                meta,
                volume,
                store,
                ..
            } = open_volume(&p.meta_url, 2, BucketCheck::Required).await?;
            on_root_database(&meta, &p.meta_url, &p.path).await?;
            let slices = meta.tier_files(&p.path, p.recursive).await?;
            let keys: Vec<String> = slices
                .iter()
                .flat_map(|sl| keys(&volume.name, volume.block_size, sl))
                .collect();
            let (mut ready, mut pending) = (0, 0);
            for (i, key) in keys.iter().enumerate() {
                if store
                    .restore(key)
                    .await
                    .map_err(|e| anyhow::anyhow!("restoring {key}: {e}"))?
                {
                    ready += 1;
                } else {
                    pending += 1;
                }
                progress("tier restore", i + 1, keys.len());
            }
            if !keys.is_empty() {
                eprintln!();
            }
            println!(
                "{}: {ready} objects readable, {pending} being restored",
                p.path
            );
        }
        Action::Status(p) => {
            let OpenVolume {
                meta,
                volume,
                store,
                ..
            } = open_volume(&p.meta_url, 2, BucketCheck::Required).await?;
            on_root_database(&meta, &p.meta_url, &p.path).await?;
            let slices = meta.tier_files(&p.path, p.recursive).await?;
            let mut files: Vec<(u64, u8, String, Vec<String>)> = Vec::new();
            for sl in &slices {
                if files.last().map(|f| f.0) != Some(sl.inode) {
                    files.push((sl.inode, sl.tier, sl.class.clone(), Vec::new()));
                }
                if let Some(f) = files.last_mut() {
                    f.3.extend(keys(&volume.name, volume.block_size, sl));
                }
            }
            for (inode, tier, class, keys) in files {
                let (mut archived, mut restoring, mut readable) = (0, 0, 0);
                for key in &keys {
                    let st = store
                        .head(key)
                        .await
                        .map_err(|e| anyhow::anyhow!("{key}: {e}"))?;
                    match (st.archived, st.restoring) {
                        (true, true) => restoring += 1,
                        (true, false) => archived += 1,
                        _ => readable += 1,
                    }
                }
                let path = meta
                    .path_of(inode)
                    .await?
                    .unwrap_or_else(|| format!("inode {inode}"));
                let class = if class.is_empty() {
                    "default"
                } else {
                    class.as_str()
                };
                println!(
                    "{path}  tier {tier} ({class})  objects: {readable} readable, {archived} archived, {restoring} restoring"
                );
            }
        }
    }
    Ok(())
}

/// Refuses `path` when it is on another shard than the root database's
/// (at or below a shard root): tiers are set and read with the root
/// database's paths, and a shard's files keep the tiers they were made
/// with (their directories'), as a recursive `tier set` stops at a shard
/// root.
async fn on_root_database(
    meta: &crate::meta::Meta,
    meta_url: &str,
    path: &str,
) -> anyhow::Result<()> {
    if meta.shards().await?.is_empty() {
        return Ok(());
    }
    let set = crate::volume::shards::ShardSet::open(std::sync::Arc::new(meta.clone()), meta_url, 1)
        .await?;
    match crate::meta::shard_of(set.resolve(path).await?.inode) {
        Some(0) | None => Ok(()),
        Some(shard) => anyhow::bail!(
            "{path} is on shard {shard} of the volume (at or below a shard root): jfs tier \
             works on the root database's files in this release; a shard's files take their \
             directory's tier when made"
        ),
    }
}
