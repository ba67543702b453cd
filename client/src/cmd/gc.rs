//! `jfs gc META_URL [--delete]`: finds objects no slice references (blocks
//! stored by a client that died before committing them) and freed slices
//! still waiting for deletion; with --delete removes both.
use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use clap::Args;

use crate::object::{temporary_of, ObjectInfo};
use crate::vfs::background::drain_delslices;
use crate::vfs::layout::parse_block_key;
use crate::vfs::volume::{open_volume, BucketCheck, OpenVolume};

/// Slice ids asked about per `jfs.slice_states` call.
const SLICE_STATES_BATCH: usize = 10_000;

#[derive(Args, Debug)]
pub struct GcArgs {
    /// PostgreSQL URL of the metadata database
    meta_url: String,
    /// Delete the unreferenced objects and the freed slices' objects
    #[arg(long)]
    delete: bool,
    /// Leave alone objects younger than this many seconds: a mount may be
    /// about to commit them (blocks are stored before their slice is committed)
    #[arg(long, default_value_t = 3600, value_name = "SECS")]
    min_age: u64,
}

/// What gc found, by object.
#[derive(Default)]
struct Census {
    referenced: (u64, u64),
    pending: (u64, u64),
    unreferenced: Vec<ObjectInfo>,
    young: (u64, u64),
    foreign: Vec<ObjectInfo>,
}

fn add(counter: &mut (u64, u64), o: &ObjectInfo) {
    counter.0 += 1;
    counter.1 += o.size;
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
}

pub async fn run(a: GcArgs) -> anyhow::Result<()> {
    let OpenVolume {
        meta,
        volume,
        store,
    } = open_volume(&a.meta_url, 2, BucketCheck::Required).await?;
    let prefix = crate::vfs::layout::blocks_prefix(&volume.name);
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

    let now = SystemTime::now();
    let min_age = Duration::from_secs(a.min_age);
    let mut census = Census::default();
    let mut by_slice: HashMap<u64, Vec<ObjectInfo>> = HashMap::new();
    // only objects no row knows need the age check
    let young = |o: &ObjectInfo| now.duration_since(o.modified).unwrap_or_default() < min_age;
    for o in objects {
        match parse_block_key(&volume.name, &o.key) {
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
    let queued = meta.pending_delslice_count().await?;

    let leaked: u64 = census.unreferenced.iter().map(|o| o.size).sum();
    println!(
        "referenced      {:>9} objects  {}",
        census.referenced.0,
        mib(census.referenced.1)
    );
    println!(
        "pending delete  {:>9} objects  {}  ({queued} freed slices queued)",
        census.pending.0,
        mib(census.pending.1)
    );
    println!(
        "unreferenced    {:>9} objects  {}",
        census.unreferenced.len(),
        mib(leaked)
    );
    println!(
        "too young       {:>9} objects  {}  (younger than {} s, left alone)",
        census.young.0,
        mib(census.young.1),
        a.min_age
    );
    if !census.foreign.is_empty() {
        println!(
            "not block keys  {:>9} objects  (left alone)",
            census.foreign.len()
        );
    }
    for o in census.unreferenced.iter().take(20) {
        println!("  unreferenced {} ({} bytes)", o.key, o.size);
    }
    if census.unreferenced.len() > 20 {
        println!("  ... and {} more", census.unreferenced.len() - 20);
    }
    if !a.delete {
        if !census.unreferenced.is_empty() || queued > 0 {
            println!("run again with --delete to remove them");
        }
        return Ok(());
    }

    let total = census.unreferenced.len();
    let mut failed = 0;
    for (i, o) in census.unreferenced.iter().enumerate() {
        if let Err(e) = store.delete(&o.key).await {
            eprintln!("deleting {}: {e}", o.key);
            failed += 1;
        }
        if (i + 1) % 1000 == 0 || i + 1 == total {
            eprint!(
                "\rdeleted {} of {total} unreferenced objects",
                i + 1 - failed
            );
        }
    }
    if total > 0 {
        eprintln!();
    }
    let drained = drain_delslices(&meta, store.as_ref(), &volume, Duration::ZERO).await?;
    println!(
        "deleted {} unreferenced objects ({}) and the objects of {drained} freed slices",
        total - failed,
        mib(leaked)
    );
    if failed > 0 {
        anyhow::bail!("{failed} objects could not be deleted (see above); run gc again");
    }
    Ok(())
}
