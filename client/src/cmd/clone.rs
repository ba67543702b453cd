//! `jfs clone SRC DST`: copy a file or a whole tree inside a mount as one
//! transaction in PostgreSQL (a snapshot of SRC; data shared, copy-on-write).
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use clap::Args;

use super::info::{ask_mount, entry_of, hex_name, node_token};

#[derive(Args, Debug)]
pub struct CloneArgs {
    /// A file or directory inside a mounted jfs
    src: PathBuf,
    /// The new path (must not exist), in the same mount
    dst: PathBuf,
    /// Keep the source's owners (root only; others always own their clone)
    #[arg(short, long)]
    preserve: bool,
}

pub fn run(a: CloneArgs) -> anyhow::Result<()> {
    let src = std::fs::symlink_metadata(&a.src)
        .with_context(|| format!("{} does not exist", a.src.display()))?;
    let (parent, name) = entry_of(&a.dst)?;
    let dir = std::fs::metadata(&parent)
        .with_context(|| format!("{} does not exist", parent.display()))?;
    if !dir.is_dir() {
        anyhow::bail!("{} is not a directory", parent.display());
    }
    if dir.dev() != src.dev() {
        anyhow::bail!(
            "{} and {} are not in the same jfs mount",
            a.src.display(),
            parent.display()
        );
    }
    let hex = hex_name(name);
    let started = Instant::now();
    if src.is_dir() {
        eprint!("cloning {} ...", a.src.display());
    }
    let request = format!(
        "clone {} {} {hex}{}\n",
        node_token(&a.src)?,
        dir.ino(),
        if a.preserve { " preserve" } else { "" }
    );
    let nodes = match ask_mount(Path::new(&parent), &request) {
        Ok(answer) => answer
            .split_whitespace()
            .nth(2)
            .and_then(|n| n.parse::<u64>().ok())
            .with_context(|| format!("unexpected answer from the mount: {answer:?}"))?,
        // another shard, or a shard root below the source: copied instead
        Err(e) if e.to_string().contains("(os error 18)") => {
            eprint!(
                "\r{} and {} span shards of the volume: copying through the mount (not one \
                 snapshot; a copy that stops half way leaves what it made) ...",
                a.src.display(),
                a.dst.display()
            );
            // (a copy into its own tree would copy what it makes, without end)
            let (from, into) = (
                std::fs::canonicalize(&a.src)?,
                std::fs::canonicalize(&parent)?,
            );
            anyhow::ensure!(
                !src.is_dir() || !into.starts_with(&from),
                "cannot copy {} into itself ({} is inside it)",
                a.src.display(),
                a.dst.display()
            );
            let mut copy = super::clone_copy::Copy::default();
            copy.tree(&a.src, &a.dst, a.preserve)
                .with_context(|| format!("copying {} to {}", a.src.display(), a.dst.display()))?;
            eprintln!();
            copy.nodes
        }
        Err(e) => {
            return Err(e.context(format!("clone {} to {}", a.src.display(), a.dst.display())))
        }
    };
    eprintln!(
        "\r{} -> {}: {nodes} nodes cloned in {:.2} s",
        a.src.display(),
        a.dst.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
