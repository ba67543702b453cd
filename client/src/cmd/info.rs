//! `jfs info PATH...`: inode, chunks, slices and objects of files inside a mount,
//! asked of the mount that serves them (through its `.jfs.control` file).
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;

#[derive(Args, Debug)]
pub struct InfoArgs {
    /// Files or directories inside a mounted jfs
    #[arg(required = true)]
    paths: Vec<PathBuf>,
}

/// The root of the mount that holds `path`: its highest ancestor on the same device.
fn mount_root(path: &Path) -> anyhow::Result<PathBuf> {
    let path = path
        .canonicalize()
        .with_context(|| format!("{} does not exist", path.display()))?;
    let dev = std::fs::metadata(&path)?.dev();
    let mut root = path.clone();
    for dir in path.ancestors().skip(1) {
        match std::fs::metadata(dir) {
            Ok(m) if m.dev() == dev => root = dir.to_path_buf(),
            _ => break,
        }
    }
    Ok(root)
}

/// Sends one request to the mount that serves `path` and returns its answer.
pub fn ask_mount(path: &Path, request: &str) -> anyhow::Result<String> {
    let root = mount_root(path)?;
    let control = root.join(".jfs.control");
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&control)
        .map_err(|_| anyhow::anyhow!("{} is not inside a jfs mount", path.display()))?;
    f.write_all(request.as_bytes())?;
    f.seek(SeekFrom::Start(0))?;
    let mut answer = String::new();
    f.read_to_string(&mut answer)?;
    if let Some(e) = answer.strip_prefix("error: ") {
        anyhow::bail!("{}: {}", path.display(), e.trim());
    }
    Ok(answer)
}

pub fn run(a: InfoArgs) -> anyhow::Result<()> {
    for path in &a.paths {
        let ino = std::fs::symlink_metadata(path)
            .with_context(|| format!("{} does not exist", path.display()))?
            .ino();
        let answer = ask_mount(path, &format!("info {ino}\n"))?;
        println!("{}:", path.display());
        print!("{answer}");
    }
    Ok(())
}
