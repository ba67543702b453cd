//! `jfs warmup PATH...`: fetch the blocks of files inside a mount into its
//! disk cache (or drop them, or count those there), asked of the mount
//! through its control file, one file per request on `--threads` handles,
//! with progress.
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;

use super::info::{node_token, ControlFile};

#[derive(Args, Debug)]
pub struct WarmupArgs {
    /// Files or directories inside a mount (directories: every file below)
    paths: Vec<PathBuf>,
    /// A file listing more paths, one per line
    #[arg(short = 'f', long = "file", value_name = "LIST")]
    list: Option<PathBuf>,
    /// Files warmed at once
    #[arg(short = 'p', long, default_value_t = 4)]
    threads: usize,
    /// Drop the files' blocks from the disk cache instead
    #[arg(long)]
    evict: bool,
    /// Only report how much of the files the disk cache holds
    #[arg(long, conflicts_with = "evict")]
    check: bool,
}

/// What a run did so far.
#[derive(Default)]
struct Tally {
    files: AtomicU64,
    blocks: AtomicU64,
    cached_blocks: AtomicU64,
    bytes: AtomicU64,
    cached_bytes: AtomicU64,
    failed: AtomicU64,
}

pub fn run(a: WarmupArgs) -> anyhow::Result<()> {
    let mut roots = a.paths.clone();
    if let Some(list) = &a.list {
        let text = std::fs::read_to_string(list)
            .with_context(|| format!("reading the list {}", list.display()))?;
        roots.extend(
            text.lines()
                .filter(|l| !l.trim().is_empty())
                .map(PathBuf::from),
        );
    }
    anyhow::ensure!(
        !roots.is_empty(),
        "give files or directories to warm up (or -f LIST)"
    );
    let mut files = Vec::new();
    for root in &roots {
        collect_files(root, &mut files)?;
    }
    let what = match (a.evict, a.check) {
        (true, _) => "evict",
        (_, true) => "check",
        _ => "fetch",
    };
    let total = files.len() as u64;
    let queue = Mutex::new(files);
    let tally = Tally::default();
    let started = Instant::now();
    let threads = a.threads.clamp(1, 64);
    std::thread::scope(|s| -> anyhow::Result<()> {
        let mut workers = Vec::new();
        for _ in 0..threads {
            workers.push(s.spawn(|| work(&queue, &tally, what)));
        }
        let mut shown = Instant::now();
        while workers.iter().any(|w| !w.is_finished()) {
            std::thread::sleep(Duration::from_millis(50));
            if shown.elapsed() >= Duration::from_millis(500) {
                shown = Instant::now();
                eprint!("\r{}", progress(&tally, total, started));
            }
        }
        for w in workers {
            w.join()
                .map_err(|_| anyhow::anyhow!("a warmup thread panicked"))??;
        }
        Ok(())
    })?;
    eprintln!("\r{}", progress(&tally, total, started));
    let (bytes, cached) = (
        tally.bytes.load(Ordering::Relaxed),
        tally.cached_bytes.load(Ordering::Relaxed),
    );
    let share = if bytes == 0 {
        100.0
    } else {
        100.0 * cached as f64 / bytes as f64
    };
    match what {
        "evict" => println!("{total} files: their blocks dropped from the disk cache"),
        _ => println!(
            "{total} files, {} blocks, {} bytes: {} blocks and {cached} bytes ({share:.1}%) in the \
             disk cache",
            tally.blocks.load(Ordering::Relaxed),
            bytes,
            tally.cached_blocks.load(Ordering::Relaxed),
        ),
    }
    if what == "fetch" && cached < bytes {
        eprintln!(
            "warmup: the disk cache kept {share:.1}% of the bytes: it is full (--cache-size), \
             or its file system has less free space than --free-space-ratio; see the mount's log"
        );
    }
    let failed = tally.failed.load(Ordering::Relaxed);
    anyhow::ensure!(
        failed == 0,
        "{failed} of {total} files could not be warmed (see above)"
    );
    Ok(())
}

/// Takes files from `queue` until it is empty, one request each.
fn work(queue: &Mutex<Vec<PathBuf>>, tally: &Tally, what: &str) -> anyhow::Result<()> {
    let mut control: Option<ControlFile> = None;
    loop {
        let Some(path) = queue.lock().unwrap().pop() else {
            return Ok(());
        };
        let answer = (|| {
            let control = match &mut control {
                Some(c) => c,
                None => control.insert(ControlFile::open(&path)?),
            };
            control.ask(&format!("warmup {} {what} 4\n", node_token(&path)?))
        })();
        tally.files.fetch_add(1, Ordering::Relaxed);
        match answer.as_deref().map(parse_answer) {
            Ok(Some([blocks, cached_blocks, bytes, cached_bytes])) => {
                tally.blocks.fetch_add(blocks, Ordering::Relaxed);
                tally
                    .cached_blocks
                    .fetch_add(cached_blocks, Ordering::Relaxed);
                tally.bytes.fetch_add(bytes, Ordering::Relaxed);
                tally
                    .cached_bytes
                    .fetch_add(cached_bytes, Ordering::Relaxed);
            }
            Ok(None) => {
                tally.failed.fetch_add(1, Ordering::Relaxed);
                eprintln!("\r{}: the mount answered {answer:?}", path.display());
            }
            Err(e) => {
                tally.failed.fetch_add(1, Ordering::Relaxed);
                eprintln!("\r{}: {e:#}", path.display());
            }
        }
    }
}

/// "blocks TOTAL CACHED bytes TOTAL CACHED" as numbers.
fn parse_answer(answer: &str) -> Option<[u64; 4]> {
    let w: Vec<&str> = answer.split_whitespace().collect();
    match w.as_slice() {
        ["blocks", b, cb, "bytes", n, cn] => Some([
            b.parse().ok()?,
            cb.parse().ok()?,
            n.parse().ok()?,
            cn.parse().ok()?,
        ]),
        _ => None,
    }
}

fn progress(t: &Tally, total: u64, started: Instant) -> String {
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    format!(
        "warmup: {}/{total} files, {:.1} of {:.1} MiB cached, {:.1} s",
        t.files.load(Ordering::Relaxed),
        mib(t.cached_bytes.load(Ordering::Relaxed)),
        mib(t.bytes.load(Ordering::Relaxed)),
        started.elapsed().as_secs_f64()
    )
}

/// The regular files at or below `path` (symlinks are not followed).
fn collect_files(path: &Path, files: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    let meta = std::fs::symlink_metadata(path)
        .with_context(|| format!("{} does not exist", path.display()))?;
    if meta.is_file() {
        files.push(path.to_path_buf());
    } else if meta.is_dir() {
        let entries =
            std::fs::read_dir(path).with_context(|| format!("listing {}", path.display()))?;
        for entry in entries {
            collect_files(&entry?.path(), files)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_parse_into_their_four_counts() {
        assert_eq!(
            parse_answer("blocks 3 2 bytes 12582912 8388608\n"),
            Some([3, 2, 12582912, 8388608])
        );
        assert_eq!(parse_answer("error: nope"), None);
    }
}
