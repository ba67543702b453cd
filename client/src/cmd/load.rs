//! `jfs load META_URL FILE|- [--force]`: loads a jfs or JuiceFS JSON dump into an empty volume, set by set in one transaction.
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use super::dump::Progress;
use crate::dump::read::{parse_into, Parsed};
use crate::meta::{redact_url, LoadRequest, Loaded, Loader, Meta, Staged};
use crate::{object, volume};

#[derive(Args, Debug)]
pub struct LoadArgs {
    /// PostgreSQL URL of the metadata database (empty, or formatted and empty)
    meta_url: String,
    /// The dump ("-": standard input); gzip-compressed dumps are recognised
    file: PathBuf,
    /// Replace what the volume holds (its objects are left for `jfs gc`)
    #[arg(long)]
    force: bool,
    /// Load a sharded volume's dump into shards: shard N's nodes into the
    /// database at URL (an administrator's, empty), made shard N of the
    /// volume whose root META_URL is; give every shard of the dump
    #[arg(long = "shard", value_name = "N=URL")]
    shards: Vec<String>,
}

/// Batches in flight between the parser and the database.
const BATCHES_IN_FLIGHT: usize = 4;

/// The dump's bytes, unpacked when gzip-compressed.
pub fn open_input(file: &PathBuf) -> anyhow::Result<Box<dyn Read + Send>> {
    let raw: Box<dyn Read + Send> = if file.as_os_str() == "-" {
        Box::new(std::io::stdin())
    } else {
        Box::new(
            std::fs::File::open(file).with_context(|| format!("cannot open {}", file.display()))?,
        )
    };
    let mut input = BufReader::with_capacity(1 << 20, raw);
    let head = input.fill_buf().context("cannot read the dump")?;
    if head.starts_with(&[0x1f, 0x8b]) {
        return Ok(Box::new(flate2::read::MultiGzDecoder::new(input)));
    }
    if head.starts_with(&[0, 0, 0, 1]) {
        anyhow::bail!(
            "{} is a binary JuiceFS dump (juicefs dump --binary): jfs loads JSON dumps; \
             dump the volume again without --binary",
            file.display()
        );
    }
    Ok(Box::new(input))
}

pub async fn run(a: LoadArgs) -> anyhow::Result<()> {
    let input = open_input(&a.file)?;
    if !a.shards.is_empty() {
        return super::load_shards::run(&a.meta_url, &a.shards, &a.file, a.force, input).await;
    }
    let meta = Meta::connect_for_format(&a.meta_url).await?;
    let loader = begin(&meta, &a.meta_url).await?;
    let (mut rx, parser) = spawn_parser(input, false);
    let mut progress = Progress::new("loading");
    let mut staged_rows = 0u64;
    while let Some(mut batch) = rx.recv().await {
        staged_rows += batch.len() as u64;
        loader.stage(&mut batch).await?;
    }
    let parsed = parser.await.context("the dump parser failed")??;
    let request = request_of(&parsed, &a.file, a.force)?;
    eprintln!(
        "read {} entries ({staged_rows} rows) in {:.2} s; moving them into the volume",
        parsed.entries,
        progress.seconds()
    );
    let loaded = finish(loader, &request).await?;
    progress.update(parsed.entries);
    eprintln!(
        "loaded {} nodes, {} entries, {} slices in {:.2} s ({:.0} entries/s)",
        loaded.nodes,
        loaded.entries,
        loaded.slices,
        progress.seconds(),
        progress.rate(parsed.entries)
    );
    report_left_out(&parsed);
    Ok(())
}

/// A load begun in the database `meta` at `url` (`jfs.load_begin`), or why not.
pub async fn begin(meta: &Meta, url: &str) -> anyhow::Result<Loader> {
    meta.load_begin().await.map_err(|e| {
        anyhow::anyhow!(
            "cannot start the load in {}: {e} (loading needs jfs.grant_admin)",
            redact_url(url)
        )
    })
}

/// The dump in `input` read in a thread of its own, its rows coming in
/// batches on the receiver (a few in flight); the handle answers what
/// else the dump holds. `keep_shard_ids`: see [`parse_into`].
pub fn spawn_parser(
    input: Box<dyn Read + Send>,
    keep_shard_ids: bool,
) -> (
    tokio::sync::mpsc::Receiver<Staged>,
    tokio::task::JoinHandle<anyhow::Result<Parsed>>,
) {
    let (tx, rx) = tokio::sync::mpsc::channel::<Staged>(BATCHES_IN_FLIGHT);
    let parser = tokio::task::spawn_blocking(move || {
        let mut progress = Progress::new("read");
        parse_into(
            input,
            keep_shard_ids,
            |batch| {
                tx.blocking_send(batch)
                    .map_err(|_| "the load stopped".to_string())
            },
            |n| progress.update(n),
        )
    });
    (rx, parser)
}

/// What `jfs.load_staged` is asked for the dump `parsed` (read from
/// `file`), checked first: its format is one jfs keeps, its blocks open
/// with its key (and JFS_RSA_PASSPHRASE).
pub fn request_of(
    parsed: &Parsed,
    file: &std::path::Path,
    force: bool,
) -> anyhow::Result<LoadRequest> {
    let setting = parsed.setting.clone().unwrap_or_default();
    if let Some(why) = setting.unsupported() {
        anyhow::bail!("{} holds {why}", file.display());
    }
    let encryption = setting.encryption()?;
    object::Compression::parse(&setting.compression)?;
    if let Some((pem, algo)) = &encryption {
        volume::sealer(algo, pem).with_context(|| format!("volume {:?}", setting.name))?;
    }
    let counters = parsed.counters.clone().unwrap_or_default();
    Ok(LoadRequest {
        force,
        name: setting.name.clone(),
        uuid: Some(setting.uuid.clone()).filter(|u| !u.is_empty()),
        storage: setting.storage.clone(),
        bucket: setting.bucket.clone(),
        block_size: i32::try_from(setting.block_size.saturating_mul(1024)).unwrap_or(0),
        trash_days: i32::try_from(setting.trash_days).unwrap_or(0),
        capacity: setting.capacity,
        inodes: setting.inodes,
        next_inode: counters.next_inode,
        next_slice: counters.next_chunk,
        enable_acl: setting.enable_acl,
        compression: match setting.compression.as_str() {
            "" => "none".to_string(),
            c => c.to_string(),
        },
        encryption,
    })
}

/// Moves what `loader` staged into its volume (one statement, saying every
/// 5 s that it goes on) and commits.
pub async fn finish(loader: Loader, request: &LoadRequest) -> anyhow::Result<Loaded> {
    let finish = loader.finish(request);
    tokio::pin!(finish);
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(5));
    tick.tick().await;
    let moving = std::time::Instant::now();
    let loaded = loop {
        tokio::select! {
            done = &mut finish => break done,
            _ = tick.tick() => eprintln!(
                "moving them into the volume and rebuilding counts: {:.0} s",
                moving.elapsed().as_secs_f64()
            ),
        }
    };
    loaded.map_err(|e| {
        if matches!(request.storage.as_str(), "file" | "s3") {
            e
        } else {
            e.context(format!(
                "the dump's storage is {:?}, which jfs reaches as s3 (S3-compatible) or file: \
                 run `jfs format` on the database first with --storage and --bucket for the \
                 same bucket, then load into it",
                request.storage
            ))
        }
    })
}

/// Says what a load left out: deleted files, the store's keys.
pub fn report_left_out(parsed: &Parsed) {
    if parsed.deleted_files > 0 {
        eprintln!(
            "the dump lists {} deleted files whose data was not yet removed: not loaded; \
             `jfs gc --delete` removes their objects",
            parsed.deleted_files
        );
    }
    if parsed.setting.as_ref().is_some_and(|s| s.storage == "s3") {
        eprintln!("dumps hold no object store keys: set them with `jfs format --force ... --access-key K --secret-key S`");
    }
}
