//! `jfs destroy META_URL UUID`: removes a volume, as `juicefs destroy`
//! does. The uuid names what goes (a wrong one stops before anything
//! changes); live sessions refuse it unless `--force`. The database marks
//! the volume first, so no mount attaches while its objects go; then every
//! object under the volume's prefix is deleted, the bucket's marker last,
//! and the volume's tables are emptied. A destroy that stopped half way is
//! finished by running it again.
use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use futures_util::stream::{self, StreamExt};

use crate::meta::{redact_url, Meta};
use crate::object::{self, bucket_owner, owner_key, with_retries, ObjectInfo, ObjectStore};
use crate::volume::layout::blocks_prefix;
use crate::volume::{encoded_store, read_volume, sealer};

/// Objects deleted at once.
const PARALLEL_DELETES: usize = 32;

/// Slices whose blocks one listing finds (they share a key prefix).
const SLICES_PER_LISTING: u64 = 1_000;

/// Times the prefix is listed again for objects that appeared meanwhile
/// (a mount ended by `--force` may have stored some on its way out).
const SWEEPS: usize = 3;

#[derive(Args, Debug)]
pub struct DestroyArgs {
    /// PostgreSQL URL of the metadata database (an administrator's)
    meta_url: String,
    /// The volume's uuid (`jfs status` shows it): what is destroyed
    uuid: String,
    /// End live sessions instead of refusing (their mounts' changes fail from then on)
    #[arg(long)]
    force: bool,
    /// Do not ask for confirmation
    #[arg(short, long)]
    yes: bool,
}

pub async fn run(a: DestroyArgs) -> anyhow::Result<()> {
    // nothing is touched before the uuid is checked
    let meta = Meta::connect(&a.meta_url, 4).await?;
    crate::volume::shards::refuse_shards(&meta, &a.meta_url, "destroy").await?;
    let volume = read_volume(&meta, &a.meta_url).await?;
    anyhow::ensure!(
        volume.uuid.eq_ignore_ascii_case(a.uuid.trim()),
        "{} holds volume {} of uuid {}, not {}: nothing was changed (jfs status shows the uuid)",
        redact_url(&a.meta_url),
        volume.name,
        volume.uuid,
        a.uuid
    );
    let secrets = meta.volume_secrets().await?;
    let sealer = sealer(&volume.encrypt_algo, &secrets.encrypt_key)
        .with_context(|| format!("volume {} (its bucket's marker is sealed)", volume.name))?;
    let raw = object::open(&volume.storage, &volume.bucket, secrets.keys).await?;
    let store = encoded_store(raw, &volume.name, &volume.compression, sealer)?;
    // the prefix must be this volume's (or no volume's): never another's
    match bucket_owner(store.as_ref(), &volume.name).await? {
        Some(owner) if !owner.eq_ignore_ascii_case(&volume.uuid) => anyhow::bail!(
            "{}/{}/ belongs to another volume (uuid {owner}), not to this database's {}: \
             nothing was changed",
            store.describe(),
            volume.name,
            volume.uuid
        ),
        _ => {}
    }
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

    // the blocks, a thousand slices' worth at a time (a listing of a
    // volume's every object would not fit in memory), then what is left
    let marker = owner_key(&volume.name);
    let groups = meta.next_slice_id().await? / SLICES_PER_LISTING + 1;
    let mut deleted = Deleted::default();
    for group in 0..groups {
        let first = group * SLICES_PER_LISTING;
        let prefix = format!(
            "{}{}/{}/",
            blocks_prefix(&volume.name),
            first / 1_000_000,
            first / 1_000
        );
        deleted.add(delete_listed(store.as_ref(), &prefix, &marker).await?);
        deleted.show(group + 1, groups);
    }
    let prefix = format!("{}/", volume.name);
    for sweep in 0.. {
        let n = delete_listed(store.as_ref(), &prefix, &marker).await?;
        if n.0 == 0 {
            break;
        }
        deleted.add(n);
        anyhow::ensure!(
            sweep + 1 < SWEEPS,
            "objects keep appearing under {prefix} in {}: is a mount still writing? \
             Stop it, then run jfs destroy again",
            store.describe()
        );
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
        "the objects are gone, but emptying the metadata failed: {message} (run jfs destroy again)"
    );
    println!(
        "destroyed volume {}: {} objects ({:.1} MiB) deleted, its metadata removed",
        volume.name,
        deleted.objects,
        deleted.bytes as f64 / (1u64 << 20) as f64
    );
    Ok(())
}

/// What a destroy deleted so far, and when it last said so.
struct Deleted {
    objects: u64,
    bytes: u64,
    started: Instant,
    shown: Instant,
}

impl Default for Deleted {
    fn default() -> Deleted {
        Deleted {
            objects: 0,
            bytes: 0,
            started: Instant::now(),
            shown: Instant::now(),
        }
    }
}

impl Deleted {
    fn add(&mut self, (objects, bytes): (u64, u64)) {
        self.objects += objects;
        self.bytes += bytes;
    }

    /// Progress on stderr, once a second.
    fn show(&mut self, groups_done: u64, groups: u64) {
        if self.shown.elapsed() >= Duration::from_secs(1) {
            self.shown = Instant::now();
            eprintln!(
                "deleted {} objects ({:.0}/s), {groups_done} of {groups} groups of slices",
                self.objects,
                self.objects as f64 / self.started.elapsed().as_secs_f64()
            );
        }
    }
}

/// Deletes every object under `prefix` but `marker`: how many and their
/// bytes.
async fn delete_listed(
    store: &dyn ObjectStore,
    prefix: &str,
    marker: &str,
) -> anyhow::Result<(u64, u64)> {
    let objects: Vec<ObjectInfo> = with_retries("listing objects", || store.list(prefix))
        .await
        .with_context(|| format!("listing {prefix} in {}", store.describe()))?
        .into_iter()
        .filter(|o| o.key != marker)
        .collect();
    delete_all(store, objects).await
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

/// Deletes `objects`, [`PARALLEL_DELETES`] at once: how many and their
/// bytes. Stops with the first that fails after its retries (the rest are
/// left for the next run).
async fn delete_all(
    store: &dyn ObjectStore,
    objects: Vec<ObjectInfo>,
) -> anyhow::Result<(u64, u64)> {
    let mut done = (0, 0);
    let mut results = stream::iter(objects)
        .map(|o| async move {
            with_retries("deleting an object", || store.delete(&o.key))
                .await
                .with_context(|| format!("deleting {} in {}", o.key, store.describe()))?;
            anyhow::Ok(o.size)
        })
        .buffer_unordered(PARALLEL_DELETES);
    while let Some(result) = results.next().await {
        let size = result.context("run jfs destroy again to delete the rest")?;
        done.0 += 1;
        done.1 += size;
    }
    Ok(done)
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
