//! `jfs destroy META_URL UUID`: removes a volume, as `juicefs destroy`
//! does. The uuid names what goes (a wrong one stops before anything
//! changes); live sessions refuse it unless `--force`. The database marks
//! the volume first, so no mount attaches while its objects go; then every
//! object under the volume's prefix is deleted, the bucket's marker last,
//! and the volume's tables are emptied. A volume over shards is destroyed
//! from its root database, every shard with it: each is reached and
//! checked before anything changes, and the root is emptied last (its map
//! names the shards for a run again). A destroy that stopped half way is
//! finished by running it again.
use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use futures_util::stream::{self, StreamExt};

use crate::meta::{redact_url, Meta, MetaError, SHARD_SHIFT};
use crate::object::{self, bucket_owner, owner_key, with_retries, ObjectInfo, ObjectStore};
use crate::volume::layout::blocks_prefix;
use crate::volume::shards::with_credentials;
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
    // nothing is touched before the uuid is checked, on every database
    let meta = Meta::connect(&a.meta_url, 4).await?;
    let number = meta.shard_number().await?;
    anyhow::ensure!(
        number == 0,
        "{} is shard {number} of a volume: destroy the volume from its root database, which \
         destroys every shard with it (nothing was changed)",
        redact_url(&a.meta_url)
    );
    let volume = read_volume(&meta, &a.meta_url).await?;
    anyhow::ensure!(
        volume.uuid.eq_ignore_ascii_case(a.uuid.trim()),
        "{} holds volume {} of uuid {}, not {}: nothing was changed (jfs status shows the uuid)",
        redact_url(&a.meta_url),
        volume.name,
        volume.uuid,
        a.uuid
    );
    let shards = reach_shards(&meta, &a.meta_url, &volume.uuid).await?;
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
    let mut sessions = meta.sessions().await?.len();
    for shard in shards.iter().filter(|s| s.holds_volume) {
        sessions += shard.meta.sessions().await?.len();
    }
    println!(
        "volume {} (uuid {}): objects in {}, metadata in {}{}; {sessions} session(s) recorded",
        volume.name,
        volume.uuid,
        store.describe(),
        redact_url(&a.meta_url),
        match shards.len() {
            0 => String::new(),
            n => format!(" and {n} shard(s)"),
        }
    );
    if !a.yes {
        confirm(&volume.name)?;
    }
    // the root first: no mount attaches from then on
    let (errno, message) = meta.destroy_begin(&volume.uuid, a.force).await?;
    anyhow::ensure!(
        errno == 0,
        "cannot destroy volume {}: {message}",
        volume.name
    );
    for shard in shards.iter().filter(|s| s.holds_volume) {
        let (errno, message) = shard.meta.destroy_begin(&volume.uuid, a.force).await?;
        anyhow::ensure!(
            errno == 0,
            "cannot destroy shard {} of volume {}: {message} (its root is marked: mounts no \
             longer attach; run jfs destroy again)",
            shard.number,
            volume.name
        );
    }

    // the blocks, a thousand slices' worth at a time (a listing of a
    // volume's every object would not fit in memory), then what is left
    let marker = owner_key(&volume.name);
    let mut ranges = vec![(0, meta.next_slice_id().await?)];
    for shard in shards.iter().filter(|s| s.holds_volume) {
        let first = u64::from(shard.number) << SHARD_SHIFT;
        ranges.push((first, shard.meta.next_slice_id().await?.max(first)));
    }
    let groups: u64 = ranges
        .iter()
        .map(|(first, next)| next / SLICES_PER_LISTING - first / SLICES_PER_LISTING + 1)
        .sum();
    let mut deleted = Deleted::default();
    let mut listed = 0;
    for (first, next) in ranges {
        for group in first / SLICES_PER_LISTING..=next / SLICES_PER_LISTING {
            let first = group * SLICES_PER_LISTING;
            let prefix = format!(
                "{}{}/{}/",
                blocks_prefix(&volume.name),
                first / 1_000_000,
                first / 1_000
            );
            deleted.add(delete_listed(store.as_ref(), &prefix, &marker).await?);
            listed += 1;
            deleted.show(listed, groups);
        }
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
    // the shards before the root, whose map names them for a run again
    for shard in shards.iter().filter(|s| s.holds_volume) {
        let (errno, message) = shard.meta.destroy_finish(&volume.uuid).await?;
        anyhow::ensure!(
            errno == 0,
            "the objects are gone, but emptying shard {}'s metadata failed: {message} (run jfs \
             destroy again)",
            shard.number
        );
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

/// A shard of the volume being destroyed, reached.
struct ShardToDestroy {
    number: u16,
    meta: Meta,
    /// false: a destroy that stopped half way emptied it already
    holds_volume: bool,
}

/// Every shard in the map of root database `root` (at `root_url`, whose
/// credentials reach them), each checked to be that shard of volume `uuid`
/// (or emptied by an earlier run): an error names the first that is not.
async fn reach_shards(
    root: &Meta,
    root_url: &str,
    uuid: &str,
) -> anyhow::Result<Vec<ShardToDestroy>> {
    let mut shards = Vec::new();
    for entry in root.shards().await? {
        let url = with_credentials(&entry.url, root_url);
        let place = || format!("shard {} ({})", entry.number, redact_url(&url));
        let meta = Meta::connect(&url, 4)
            .await
            .with_context(|| format!("{}: not reached, nothing was changed", place()))?;
        let holds_volume = match meta.volume().await {
            Ok(v) => {
                let number = meta.shard_number().await?;
                anyhow::ensure!(
                    v.uuid.eq_ignore_ascii_case(uuid) && number == entry.number,
                    "{} holds shard {number} of volume {} (uuid {}), not this volume's: nothing \
                     was changed (fix the map with jfs shard)",
                    place(),
                    v.name,
                    v.uuid
                );
                true
            }
            Err(MetaError::Errno(libc::ENOENT)) => false,
            Err(e) => return Err(anyhow::Error::from(e).context(place())),
        };
        shards.push(ShardToDestroy {
            number: entry.number,
            meta,
            holds_volume,
        });
    }
    Ok(shards)
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
