//! `jfs destroy META_URL UUID`: removes a volume, as `juicefs destroy`
//! does. The uuid names what goes (a wrong one stops before anything
//! changes); live sessions refuse it unless `--force`. The database marks
//! the volume first, so no mount attaches while its objects go; then every
//! object under the volume's prefix is deleted, the bucket's marker last,
//! and the volume's tables are emptied. A destroy that stopped half way is
//! finished by running it again.
use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use futures_util::stream::{self, StreamExt};

use crate::meta::redact_url;
use crate::object::{owner_key, with_retries, ObjectInfo, ObjectStore};
use crate::volume::{open_volume, BucketCheck, OpenVolume};

/// Objects deleted at once.
const PARALLEL_DELETES: usize = 32;

/// Times the prefix is listed again for objects that appeared meanwhile
/// (a mount ended by `--force` may have stored some on its way out).
const SWEEPS: usize = 3;

#[derive(Args, Debug)]
pub struct DestroyArgs {
    /// PostgreSQL URL of the metadata database (an administrator's)
    meta_url: String,
    /// The volume's uuid (`jfs status` shows it): what is destroyed
    uuid: String,
    /// End live sessions instead of refusing (their mounts fail from then on)
    #[arg(long)]
    force: bool,
    /// Do not ask for confirmation
    #[arg(short, long)]
    yes: bool,
}

pub async fn run(a: DestroyArgs) -> anyhow::Result<()> {
    let OpenVolume {
        meta,
        volume,
        store,
        ..
    } = open_volume(&a.meta_url, 4, BucketCheck::Required).await?;
    anyhow::ensure!(
        volume.uuid.eq_ignore_ascii_case(a.uuid.trim()),
        "{} holds volume {} of uuid {}, not {}: nothing was changed (jfs status shows the uuid)",
        redact_url(&a.meta_url),
        volume.name,
        volume.uuid,
        a.uuid
    );
    let sessions = meta.sessions().await?;
    println!(
        "volume {} (uuid {}): objects in {}, metadata in {}; {} session(s) recorded",
        volume.name,
        volume.uuid,
        store.describe(),
        redact_url(&a.meta_url),
        sessions.len()
    );
    if !a.yes {
        confirm(&volume.name)?;
    }
    let (errno, message) = meta.destroy_begin(&volume.uuid, a.force).await?;
    anyhow::ensure!(
        errno == 0,
        "cannot destroy volume {}: {message}",
        volume.name
    );

    let prefix = format!("{}/", volume.name);
    let marker = owner_key(&volume.name);
    let mut deleted = (0u64, 0u64);
    for sweep in 0..SWEEPS {
        let objects: Vec<ObjectInfo> = store
            .list(&prefix)
            .await
            .with_context(|| format!("listing {prefix} in {}", store.describe()))?
            .into_iter()
            .filter(|o| o.key != marker)
            .collect();
        if objects.is_empty() {
            break;
        }
        anyhow::ensure!(
            sweep + 1 < SWEEPS,
            "objects keep appearing under {prefix} in {}: is a mount still writing? \
             Stop it, then run jfs destroy again",
            store.describe()
        );
        let (n, bytes) = delete_all(store.as_ref(), objects).await?;
        deleted.0 += n;
        deleted.1 += bytes;
    }
    with_retries("deleting the bucket's marker", || store.delete(&marker))
        .await
        .with_context(|| format!("deleting {marker} in {}", store.describe()))?;
    if volume.storage == "file" {
        remove_empty_dirs(&Path::new(&volume.bucket).join(&volume.name));
    }
    let (errno, message) = meta.destroy_finish(&volume.uuid).await?;
    anyhow::ensure!(
        errno == 0,
        "the objects are gone, but emptying the metadata failed: {message}"
    );
    println!(
        "destroyed volume {}: {} objects ({:.1} MiB) deleted, its metadata removed",
        volume.name,
        deleted.0,
        deleted.1 as f64 / (1u64 << 20) as f64
    );
    Ok(())
}

/// Asks on the terminal; refuses without one (pass --yes).
fn confirm(name: &str) -> anyhow::Result<()> {
    anyhow::ensure!(
        std::io::stdin().is_terminal(),
        "not asking without a terminal: pass --yes to destroy volume {name}"
    );
    print!("Destroy volume {name} and every object of it? This cannot be undone. Type the volume's name: ");
    std::io::stdout().flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    anyhow::ensure!(line.trim() == name, "not confirmed: nothing was changed");
    Ok(())
}

/// Deletes `objects`, [`PARALLEL_DELETES`] at once, with progress on
/// stderr; how many and their bytes. Stops with the first that fails
/// after its retries (the rest are left for the next run).
async fn delete_all(
    store: &dyn ObjectStore,
    objects: Vec<ObjectInfo>,
) -> anyhow::Result<(u64, u64)> {
    let total = objects.len();
    let done = AtomicU64::new(0);
    let bytes = AtomicU64::new(0);
    let started = Instant::now();
    let mut shown = Instant::now();
    let mut results = stream::iter(objects)
        .map(|o| {
            let (done, bytes) = (&done, &bytes);
            async move {
                with_retries("deleting an object", || store.delete(&o.key))
                    .await
                    .with_context(|| format!("deleting {} in {}", o.key, store.describe()))?;
                done.fetch_add(1, Ordering::Relaxed);
                bytes.fetch_add(o.size, Ordering::Relaxed);
                anyhow::Ok(())
            }
        })
        .buffer_unordered(PARALLEL_DELETES);
    while let Some(result) = results.next().await {
        result.context("run jfs destroy again to delete the rest")?;
        if shown.elapsed() >= Duration::from_secs(1) {
            shown = Instant::now();
            eprintln!(
                "deleted {}/{total} objects ({:.0}/s)",
                done.load(Ordering::Relaxed),
                done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64()
            );
        }
    }
    drop(results);
    Ok((done.into_inner(), bytes.into_inner()))
}

/// Removes the directories left empty under `dir` (a file store keeps a
/// directory per key prefix), and `dir` itself when empty.
fn remove_empty_dirs(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_empty_dirs(&e.path());
            }
        }
    }
    let _ = std::fs::remove_dir(dir);
}
