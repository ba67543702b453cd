//! `jfs gc META_URL [--delete]`: finds objects no slice references (blocks
//! stored by a client that died before committing them) and freed slices
//! still waiting for deletion; with --delete removes both.
use std::time::Duration;

use clap::Args;

use crate::volume::gc::{drain_delslices, take_census};
use crate::volume::{open_volume, BucketCheck, OpenVolume};

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

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
}

pub async fn run(a: GcArgs) -> anyhow::Result<()> {
    let OpenVolume {
        meta,
        volume,
        store,
        ..
    } = open_volume(&a.meta_url, 2, BucketCheck::Required).await?;
    let census = take_census(
        &meta,
        store.as_ref(),
        &volume,
        Duration::from_secs(a.min_age),
    )
    .await?;
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
    if census.other_shards.0 > 0 {
        println!(
            "other shards    {:>9} objects  {}  (the volume's other shards' blocks: run gc on each)",
            census.other_shards.0,
            mib(census.other_shards.1)
        );
    }
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
