//! `jfs tier set|restore|status META_URL PATH` and `jfs config META_URL
//! --tier-id N --tier-sc CLASS`: storage tiers. A tier id (1..3) names an
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

#[derive(Args, Debug)]
pub struct ConfigArgs {
    /// PostgreSQL URL of the metadata database
    meta_url: String,
    /// Tier id (0..3) whose storage class --tier-sc sets
    #[arg(long, requires = "tier_sc")]
    tier_id: Option<i32>,
    /// Storage class (STANDARD_IA, INTELLIGENT_TIERING, GLACIER_IR, GLACIER, DEEP_ARCHIVE...; "" = default)
    #[arg(long, requires = "tier_id")]
    tier_sc: Option<String>,
    /// Turn POSIX ACLs on (they cannot be turned off; mounts made before
    /// enforce them once mounted again)
    #[arg(long)]
    enable_acl: bool,
    /// How long the change log keeps a change (a PostgreSQL interval:
    /// '2 days', '12 hours'; at least a minute; default 1 day)
    #[arg(long, value_name = "AGE")]
    changelog_max_age: Option<String>,
    /// How many changes the change log keeps at most (default 10,000,000)
    #[arg(long, value_name = "N")]
    changelog_max_rows: Option<i64>,
    /// Keep freed objects at least this long before any mount or `jfs gc
    /// --delete` deletes them (a PostgreSQL interval: '14 days'; 0 = only
    /// the mounts' --gc-delay): set it beyond the database's
    /// point-in-time-recovery window
    #[arg(long, value_name = "DURATION")]
    retain_deleted: Option<String>,
    /// Past this many GiB waiting for deletion, freed objects are deleted
    /// as soon as the commit that freed them is durable, whatever the
    /// mounts' --gc-delay (never before --retain-deleted); 0 = no cap
    #[arg(long, value_name = "GiB")]
    delete_queue_cap: Option<f64>,
    /// The object store's access key read-only roles get instead of the
    /// volume's (a store user that may only read the bucket; "" with an
    /// empty --reader-secret-key: they get none)
    #[arg(long, value_name = "KEY", requires = "reader_secret_key")]
    reader_access_key: Option<String>,
    /// Its secret key
    #[arg(long, value_name = "KEY", requires = "reader_access_key")]
    reader_secret_key: Option<String>,
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

pub async fn config(a: ConfigArgs) -> anyhow::Result<()> {
    let meta = crate::meta::Meta::connect(&a.meta_url, 1).await?;
    let mut changed = false;
    if a.enable_acl {
        if meta.enable_acl().await? {
            println!("POSIX ACLs on (mount again to enforce them)");
        } else {
            println!("POSIX ACLs were on already");
        }
        changed = true;
    }
    if let (Some(id), Some(class)) = (a.tier_id, &a.tier_sc) {
        meta.set_tier_class(id, class).await?;
        println!(
            "tier {id} -> {}",
            if class.is_empty() {
                "(default class)"
            } else {
                class
            }
        );
        changed = true;
    }
    if a.changelog_max_age.is_some() || a.changelog_max_rows.is_some() {
        let kept = meta
            .set_changelog_retention(a.changelog_max_age.as_deref(), a.changelog_max_rows)
            .await?;
        println!(
            "the change log keeps {} and at most {} rows",
            kept.max_age, kept.max_rows
        );
        changed = true;
    }
    if let Some(duration) = &a.retain_deleted {
        let kept = meta.set_retain_deleted(duration).await?;
        println!("freed objects are kept at least {kept} before they are deleted");
        changed = true;
    }
    if let Some(gib) = a.delete_queue_cap {
        if !(0.0..=(1u64 << 33) as f64).contains(&gib) {
            anyhow::bail!("--delete-queue-cap is 0 (no cap) or a size in GiB, not {gib}");
        }
        let cap = meta
            .set_delete_queue_cap((gib * (1u64 << 30) as f64) as u64)
            .await?;
        match cap {
            0 => println!("freed objects wait for the mounts' --gc-delay, however many"),
            cap => println!(
                "past {cap} bytes waiting for deletion, freed objects go once the commit that \
                 freed them is durable"
            ),
        }
        changed = true;
    }
    if let (Some(ak), Some(sk)) = (&a.reader_access_key, &a.reader_secret_key) {
        meta.set_reader_keys(ak, sk).await?;
        match ak.is_empty() {
            true => println!("read-only roles get no object store keys"),
            false => println!("read-only roles get object store access key {ak}"),
        }
        changed = true;
    }
    if !changed {
        anyhow::bail!(
            "nothing to change: give --tier-id N --tier-sc CLASS, --enable-acl, \
             --changelog-max-age AGE, --changelog-max-rows N, --retain-deleted DURATION \
             or --reader-access-key KEY --reader-secret-key KEY"
        );
    }
    Ok(())
}
