//! `jfs dump META_URL [FILE|-] [--subdir PATH] [--gzip]`: the volume's metadata as a JuiceFS-compatible JSON dump, from one snapshot, streamed.
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use clap::Args;

use crate::dump::write::dump;
use crate::meta::Meta;
use crate::volume::shards::ShardSet;

#[derive(Args, Debug)]
pub struct DumpArgs {
    /// PostgreSQL URL of the metadata database
    meta_url: String,
    /// Where to write the dump ("-" or none: standard output); a name
    /// ending in .gz is compressed
    file: Option<PathBuf>,
    /// Dump only the tree at this path of the volume (it loads as a whole volume)
    #[arg(long, value_name = "PATH")]
    subdir: Option<String>,
    /// Compress with gzip
    #[arg(long)]
    gzip: bool,
    /// Write an encrypted volume's RSA private key into the dump (left out
    /// by default: its EncryptKey then says "removed", as JuiceFS's does)
    #[arg(long)]
    keep_secret_key: bool,
}

/// Reports progress on standard error at most once a second.
pub struct Progress {
    what: &'static str,
    started: Instant,
    shown: Instant,
}

impl Progress {
    pub fn new(what: &'static str) -> Progress {
        let now = Instant::now();
        Progress {
            what,
            started: now,
            shown: now,
        }
    }

    pub fn update(&mut self, entries: u64) {
        if self.shown.elapsed().as_secs() >= 1 {
            self.shown = Instant::now();
            eprintln!(
                "{} {entries} entries ({:.0}/s)",
                self.what,
                self.rate(entries)
            );
        }
    }

    pub fn rate(&self, entries: u64) -> f64 {
        entries as f64 / self.started.elapsed().as_secs_f64().max(1e-6)
    }

    pub fn seconds(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }
}

pub async fn run(a: DumpArgs) -> anyhow::Result<()> {
    let set = ShardSet::open(
        Arc::new(Meta::connect(&a.meta_url, 1).await?),
        &a.meta_url,
        1,
    )
    .await?;
    // a sharded volume's shards, whose trees go in place of their shard roots
    let mut shards = Vec::new();
    for number in set.numbers().into_iter().filter(|n| *n != 0) {
        shards.push((number, set.meta(number).await?));
    }
    let meta = set.root();
    let to_file = a.file.as_ref().filter(|f| f.as_os_str() != "-");
    let gzip = a.gzip || to_file.is_some_and(|f| f.extension().is_some_and(|e| e == "gz"));
    // a file is written under a temporary name and renamed when complete
    let partial = to_file.map(|f| {
        let mut name = f.as_os_str().to_owned();
        name.push(".partial");
        PathBuf::from(name)
    });
    if let Some(p) = &partial {
        // (made anew: one left by an earlier run keeps its own mode)
        match std::fs::remove_file(p) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(e).with_context(|| format!("cannot remove {}", p.display()))
            }
            _ => {}
        }
    }
    let sink: Box<dyn Write + Send> = match &partial {
        // (readable by its owner only: a dump holds every name and owner,
        // and with --keep-secret-key the volume's key)
        Some(p) => Box::new(
            std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(p)
                .with_context(|| format!("cannot create {}", p.display()))?,
        ),
        None => Box::new(std::io::stdout()),
    };
    // small files kept in the database are written as objects: the store
    // is opened when there are any
    let mut store = None;
    let mut parts = vec![meta.clone()];
    parts.extend(shards.iter().map(|(_, m)| m.clone()));
    for part in &parts {
        if part.inline_usage().await?.is_some_and(|u| u.slices > 0) {
            let volume = crate::volume::read_volume(meta, &a.meta_url).await?;
            store = Some(crate::volume::volume_store(meta, &volume).await?.0);
            break;
        }
    }
    let objects = store.as_deref();
    let mut buffered = std::io::BufWriter::with_capacity(1 << 20, sink);
    let mut progress = Progress::new("dumped");
    // written, then finished (a gzip trailer, the buffer) with its errors seen
    let dumped = if gzip {
        let mut gz = flate2::write::GzEncoder::new(&mut buffered, flate2::Compression::fast());
        let dumped = dump(
            meta,
            &shards,
            &mut gz,
            a.subdir.as_deref(),
            a.keep_secret_key,
            objects,
            |n| progress.update(n),
        )
        .await;
        dumped.and_then(|d| Ok(gz.finish().map(|_| d)?))
    } else {
        dump(
            meta,
            &shards,
            &mut buffered,
            a.subdir.as_deref(),
            a.keep_secret_key,
            objects,
            |n| progress.update(n),
        )
        .await
    };
    let dumped = dumped.and_then(|d| Ok(buffered.flush().map(|_| d)?));
    let dumped = match dumped {
        Ok(d) => d,
        Err(e) => {
            if let Some(p) = &partial {
                let _ = std::fs::remove_file(p);
            }
            return Err(e);
        }
    };
    drop(buffered);
    if let (Some(p), Some(f)) = (&partial, to_file) {
        std::fs::File::open(p)
            .and_then(|file| file.sync_all())
            .with_context(|| format!("cannot sync {}", p.display()))?;
        std::fs::rename(p, f)
            .with_context(|| format!("cannot rename {} to {}", p.display(), f.display()))?;
        let dir = match f.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => std::path::Path::new("."),
        };
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .with_context(|| format!("cannot sync {}", dir.display()))?;
    }
    if dumped.key_left_out {
        eprintln!(
            "the volume's RSA private key was left out (EncryptKey \"removed\"): \
             a load needs a dump made with --keep-secret-key"
        );
    }
    eprintln!(
        "dumped {} entries in {:.2} s ({:.0} entries/s){}",
        dumped.entries,
        progress.seconds(),
        progress.rate(dumped.entries),
        to_file
            .map(|f| format!(" to {}", f.display()))
            .unwrap_or_default()
    );
    Ok(())
}
