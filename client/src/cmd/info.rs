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

/// The control file of the mount that serves a path, open for requests.
pub struct ControlFile {
    file: std::fs::File,
    path: PathBuf,
}

impl ControlFile {
    /// Opens the control file of the mount serving `path`.
    pub fn open(path: &Path) -> anyhow::Result<ControlFile> {
        let root = mount_root(path)?;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(root.join(".jfs.control"))
            .map_err(|_| anyhow::anyhow!("{} is not inside a jfs mount", path.display()))?;
        Ok(ControlFile {
            file,
            path: path.to_path_buf(),
        })
    }

    /// Sends one request line and returns the answer.
    pub fn ask(&mut self, request: &str) -> anyhow::Result<String> {
        self.file.seek(SeekFrom::Start(0))?;
        self.file.write_all(request.as_bytes())?;
        self.file.seek(SeekFrom::Start(0))?;
        let mut answer = String::new();
        self.file.read_to_string(&mut answer)?;
        if let Some(e) = answer.strip_prefix("error: ") {
            anyhow::bail!("{}: {}", self.path.display(), e.trim());
        }
        Ok(answer)
    }
}

/// A name in hex, as control requests carry names (any byte but "/" and NUL).
pub fn hex_name(name: &std::ffi::OsStr) -> String {
    use std::os::unix::ffi::OsStrExt;
    name.as_bytes().iter().map(|b| format!("{b:02x}")).collect()
}

/// The directory that holds `path`'s entry ("." for a bare name), and the
/// entry's name.
pub fn entry_of(path: &Path) -> anyhow::Result<(PathBuf, &std::ffi::OsStr)> {
    let name = path
        .file_name()
        .with_context(|| format!("{} names no entry of a directory", path.display()))?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Ok((parent, name))
}

/// How a control request names the node at `path` (not followed if a
/// symlink): a directory by its inode, anything else as an entry of its
/// directory ("PARENT_INODE:NAME_IN_HEX"), so the mount can check the way
/// to it for the caller.
pub fn node_token(path: &Path) -> anyhow::Result<String> {
    let meta = std::fs::symlink_metadata(path)
        .with_context(|| format!("{} does not exist", path.display()))?;
    if meta.is_dir() {
        return Ok(meta.ino().to_string());
    }
    let (parent, name) = entry_of(path)?;
    let parent_ino = std::fs::metadata(&parent)
        .with_context(|| format!("{} does not exist", parent.display()))?
        .ino();
    Ok(format!("{parent_ino}:{}", hex_name(name)))
}

/// Sends one request to the mount that serves `path` and returns its answer.
pub fn ask_mount(path: &Path, request: &str) -> anyhow::Result<String> {
    ControlFile::open(path)?.ask(request)
}

pub fn run(a: InfoArgs) -> anyhow::Result<()> {
    for path in &a.paths {
        let answer = ask_mount(path, &format!("info {}\n", node_token(path)?))?;
        println!("{}:", path.display());
        print!("{answer}");
    }
    Ok(())
}
