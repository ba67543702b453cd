//! `jfs bench PATH`: a quick performance check of any directory (a jfs mount or not), like `juicefs bench`: big files written and read, small files written, read and stat'ed, in threads, with a summary table.
use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// A directory to test (a scratch directory is made in it and removed)
    path: PathBuf,
    /// Size of each I/O, in MiB
    #[arg(long, default_value_t = 1)]
    block_size: usize,
    /// Size of each big file, in MiB
    #[arg(long, default_value_t = 1024)]
    big_file_size: usize,
    /// Size of each small file, in KiB
    #[arg(long, default_value_t = 128)]
    small_file_size: usize,
    /// Small files per thread
    #[arg(long, default_value_t = 100)]
    small_file_count: usize,
    /// Threads, each with its own big file and small files
    #[arg(short = 'p', long, default_value_t = 1)]
    threads: usize,
}

/// One line of the summary: what, how much was done, how long it took.
struct Measured {
    item: &'static str,
    /// MiB moved (0 for stat).
    mib: f64,
    /// Files (or stats) done.
    files: usize,
    elapsed: Duration,
}

impl Measured {
    fn value(&self) -> String {
        let secs = self.elapsed.as_secs_f64().max(1e-9);
        if self.item.contains("big") {
            format!("{:.2} MiB/s", self.mib / secs)
        } else {
            format!("{:.1} files/s", self.files as f64 / secs)
        }
    }

    /// Time per file of one thread (threads run side by side).
    fn cost(&self, threads: usize) -> String {
        let per = self.elapsed.as_secs_f64() * threads as f64 / self.files.max(1) as f64;
        if per >= 1.0 {
            format!("{per:.2} s/file")
        } else {
            format!("{:.2} ms/file", per * 1000.0)
        }
    }
}

/// Runs `work(thread)` in `threads` threads at once; returns the wall time.
fn in_threads(
    threads: usize,
    work: impl Fn(usize) -> anyhow::Result<()> + Sync,
) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let work = &work;
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads).map(|t| s.spawn(move || work(t))).collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a bench thread panicked")))
            })
            .collect::<anyhow::Result<Vec<()>>>()
    })?;
    Ok(started.elapsed())
}

/// Asks the kernel to drop clean caches (root only), so reads come from the file system.
fn drop_caches() -> bool {
    let _ = std::process::Command::new("sync").status();
    fs::write("/proc/sys/vm/drop_caches", "3").is_ok()
}

/// Deterministic bytes for thread `t`, so a read can be checked.
fn block_of(t: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i.wrapping_mul(31) ^ t.wrapping_mul(7)) as u8)
        .collect()
}

fn write_file(path: &Path, block: &[u8], size: usize) -> anyhow::Result<()> {
    let mut f = fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut left = size;
    while left > 0 {
        let n = left.min(block.len());
        f.write_all(&block[..n])
            .with_context(|| format!("writing {}", path.display()))?;
        left -= n;
    }
    f.sync_all()
        .with_context(|| format!("fsync of {}", path.display()))
}

fn read_file(path: &Path, block: &[u8], size: usize) -> anyhow::Result<()> {
    let mut f = fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut buf = vec![0u8; block.len()];
    let mut left = size;
    while left > 0 {
        let n = left.min(buf.len());
        f.read_exact(&mut buf[..n])
            .with_context(|| format!("reading {}", path.display()))?;
        anyhow::ensure!(
            buf[..n] == block[..n],
            "{} reads back other bytes than were written",
            path.display()
        );
        left -= n;
    }
    Ok(())
}

pub fn run(a: BenchArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        a.threads >= 1 && a.block_size >= 1,
        "--threads and --block-size must be at least 1"
    );
    let dir = a.path.join(format!("__jfs_bench_{}", std::process::id()));
    fs::create_dir_all(&dir).with_context(|| format!("cannot make {}", dir.display()))?;
    let result = bench(&a, &dir);
    let removed = fs::remove_dir_all(&dir);
    let lines = result?;
    removed.with_context(|| format!("removing {}", dir.display()))?;
    println!(
        "jfs bench of {}: {} thread(s), big files {} MiB, small files {} KiB x {}, I/O {} MiB",
        a.path.display(),
        a.threads,
        a.big_file_size,
        a.small_file_size,
        a.small_file_count,
        a.block_size
    );
    let rule = format!("+{}+{}+{}+", "-".repeat(20), "-".repeat(18), "-".repeat(17));
    println!("{rule}");
    println!("| {:<18} | {:>16} | {:>15} |", "ITEM", "VALUE", "COST");
    println!("{rule}");
    for m in &lines {
        println!(
            "| {:<18} | {:>16} | {:>15} |",
            m.item,
            m.value(),
            m.cost(a.threads)
        );
    }
    println!("{rule}");
    Ok(())
}

fn bench(a: &BenchArgs, dir: &Path) -> anyhow::Result<Vec<Measured>> {
    let block_len = a.block_size << 20;
    let big = a.big_file_size << 20;
    let small = a.small_file_size << 10;
    let blocks: Vec<Vec<u8>> = (0..a.threads).map(|t| block_of(t, block_len)).collect();
    let big_path = |t: usize| dir.join(format!("big.{t}"));
    let small_path = |t: usize, i: usize| dir.join(format!("small.{t}.{i}"));
    let mut out = Vec::new();
    let big_mib = (a.big_file_size * a.threads) as f64;
    let small_mib = (small * a.small_file_count * a.threads) as f64 / (1 << 20) as f64;
    let small_files = a.small_file_count * a.threads;

    eprintln!("writing {} big file(s)...", a.threads);
    let elapsed = in_threads(a.threads, |t| write_file(&big_path(t), &blocks[t], big))?;
    out.push(Measured {
        item: "Write big file",
        mib: big_mib,
        files: a.threads,
        elapsed,
    });
    let dropped = drop_caches();
    eprintln!(
        "reading them{}...",
        if dropped { " (page cache dropped)" } else { "" }
    );
    let elapsed = in_threads(a.threads, |t| read_file(&big_path(t), &blocks[t], big))?;
    out.push(Measured {
        item: "Read big file",
        mib: big_mib,
        files: a.threads,
        elapsed,
    });

    eprintln!("writing {small_files} small files...");
    let elapsed = in_threads(a.threads, |t| {
        (0..a.small_file_count).try_for_each(|i| write_file(&small_path(t, i), &blocks[t], small))
    })?;
    out.push(Measured {
        item: "Write small file",
        mib: small_mib,
        files: small_files,
        elapsed,
    });
    drop_caches();
    eprintln!("reading them...");
    let elapsed = in_threads(a.threads, |t| {
        (0..a.small_file_count).try_for_each(|i| read_file(&small_path(t, i), &blocks[t], small))
    })?;
    out.push(Measured {
        item: "Read small file",
        mib: small_mib,
        files: small_files,
        elapsed,
    });
    eprintln!("stat of them...");
    let elapsed = in_threads(a.threads, |t| {
        (0..a.small_file_count).try_for_each(|i| {
            let p = small_path(t, i);
            let m = fs::metadata(&p).with_context(|| format!("stat of {}", p.display()))?;
            anyhow::ensure!(
                m.len() == small as u64,
                "{} has {} bytes, not {small}",
                p.display(),
                m.len()
            );
            Ok(())
        })
    })?;
    out.push(Measured {
        item: "Stat file",
        mib: 0.0,
        files: small_files,
        elapsed,
    });
    Ok(out)
}
