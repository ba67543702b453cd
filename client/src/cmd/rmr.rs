//! `jfs rmr PATH...`: remove whole trees inside a mount, inside PostgreSQL, in bounded
//! transactions, asked of the mount that serves them (no per-file round trip).
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use clap::Args;

use super::info::{ask_mount, entry_of, hex_name};

#[derive(Args, Debug)]
pub struct RmrArgs {
    /// Files or directories inside a mounted jfs
    #[arg(required = true)]
    paths: Vec<PathBuf>,
}

pub fn run(a: RmrArgs) -> anyhow::Result<()> {
    for path in &a.paths {
        // the mount answers ENOENT for the entry; name it, not its directory
        std::fs::symlink_metadata(path)
            .with_context(|| format!("{} does not exist", path.display()))?;
        let (parent, name) = entry_of(path)?;
        let parent_ino = std::fs::metadata(&parent)
            .with_context(|| format!("{} does not exist", parent.display()))?
            .ino();
        let hex = hex_name(name);
        let started = Instant::now();
        let mut total = 0u64;
        loop {
            let answer = ask_mount(&parent, &format!("rmr {parent_ino} {hex}\n"))?;
            let mut words = answer.split_whitespace().skip(1);
            let removed: u64 = words.next().and_then(|n| n.parse().ok()).unwrap_or(0);
            total += removed;
            let done = words.next() == Some("done");
            if !done {
                eprint!("\r{}: {total} entries removed", path.display());
                continue;
            }
            eprintln!(
                "\r{}: {total} entries removed in {:.2} s",
                path.display(),
                started.elapsed().as_secs_f64()
            );
            break;
        }
    }
    Ok(())
}
