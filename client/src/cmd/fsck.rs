//! `jfs fsck META_URL [--check-objects] [--repair]`: the volume's invariants checked (`jfs.fsck()`), with --check-objects every block of every live slice looked up in the object store.
use std::collections::BTreeMap;
use std::io;

use clap::Args;
use futures_util::stream::{self, StreamExt};

use super::dump::Progress;
use crate::meta::Meta;
use crate::volume::layout::slice_blocks;
use crate::volume::{open_volume, BucketCheck};

/// Live slices read per `jfs.live_slices` call.
const SLICES_PAGE: i32 = 10_000;
/// Objects looked up at once.
const PARALLEL_HEADS: usize = 32;
/// Missing objects named in the output (all are counted).
const MISSING_SHOWN: usize = 20;

#[derive(Args, Debug)]
pub struct FsckArgs {
    /// PostgreSQL URL of the metadata database
    meta_url: String,
    /// Also look up every block of every live slice in the object store
    #[arg(long)]
    check_objects: bool,
    /// Rebuild what follows from the namespace (link counts, used bytes,
    /// slice references, quota usage, dir_stats), then check again; needs
    /// jfs.grant_admin
    #[arg(long)]
    repair: bool,
}

pub async fn run(a: FsckArgs) -> anyhow::Result<()> {
    let meta = Meta::connect(&a.meta_url, 2).await?;
    if a.repair {
        for (what, changed) in meta.fsck_repair().await? {
            if changed > 0 {
                println!("repaired {what}: {changed} rows");
            }
        }
    }
    let problems = meta.fsck().await?;
    let mut by_kind: BTreeMap<&str, usize> = BTreeMap::new();
    for p in &problems {
        *by_kind.entry(p.problem.as_str()).or_default() += 1;
        println!(
            "{:<14} inode {:<20} {}",
            p.problem,
            p.inode.map(|i| i.to_string()).unwrap_or_default(),
            p.detail
        );
    }
    let missing = if a.check_objects {
        check_objects(&a.meta_url).await?
    } else {
        0
    };
    if problems.is_empty() && missing == 0 {
        println!(
            "fsck: no problems{}",
            if a.check_objects {
                " (every block of every live slice is in the object store)"
            } else {
                ""
            }
        );
        return Ok(());
    }
    let kinds: Vec<String> = by_kind.iter().map(|(k, n)| format!("{n} {k}")).collect();
    if missing > 0 {
        anyhow::bail!(
            "fsck: {} metadata problem(s){}{} and {missing} missing object(s): \
             the files using them read as errors",
            problems.len(),
            if kinds.is_empty() { "" } else { ": " },
            kinds.join(", ")
        );
    }
    anyhow::bail!(
        "fsck: {} problem(s): {}; `jfs fsck --repair` rebuilds the counts and references",
        problems.len(),
        kinds.join(", ")
    )
}

/// Looks up every block of every live slice; prints the missing ones and
/// returns how many there are.
async fn check_objects(meta_url: &str) -> anyhow::Result<u64> {
    let v = open_volume(meta_url, 2, BucketCheck::Required).await?;
    let (mut checked, mut missing, mut after) = (0u64, 0u64, 0i64);
    let mut progress = Progress::new("checked");
    loop {
        let page = v.meta.live_slices(after, SLICES_PAGE).await?;
        let Some(&(last, _)) = page.last() else {
            break;
        };
        after = last;
        let keys: Vec<String> = page
            .iter()
            .flat_map(|&(id, size)| {
                slice_blocks(
                    &v.volume.name,
                    id as u64,
                    size as u32,
                    v.volume.block_size as u32,
                )
                .map(|(_, _, key)| key)
            })
            .collect();
        let store = v.store.clone();
        let mut heads = stream::iter(keys)
            .map(|key| {
                let store = store.clone();
                async move {
                    let state = store.head(&key).await;
                    (key, state)
                }
            })
            .buffer_unordered(PARALLEL_HEADS);
        while let Some((key, state)) = heads.next().await {
            checked += 1;
            match state {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    missing += 1;
                    if missing as usize <= MISSING_SHOWN {
                        println!("missing object {key}");
                    }
                }
                Err(e) => anyhow::bail!("looking up {key} in {}: {e}", v.store.describe()),
            }
            progress.update(checked);
        }
    }
    if missing as usize > MISSING_SHOWN {
        println!(
            "... and {} more missing objects",
            missing as usize - MISSING_SHOWN
        );
    }
    eprintln!(
        "looked up {checked} objects in {} ({:.0}/s): {missing} missing",
        v.store.describe(),
        progress.rate(checked)
    );
    Ok(missing)
}
