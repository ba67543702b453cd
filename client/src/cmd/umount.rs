//! `jfs umount`: unmount a jfs mount.
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;
use clap::Args;

#[derive(Args, Debug)]
pub struct UmountArgs {
    /// The mount point
    mountpoint: PathBuf,
    /// Lazy unmount: detach now even if files are open
    #[arg(short, long)]
    force: bool,
}

/// Asks the kernel to unmount `path` (fusermount3, or umount as root).
pub fn unmount(path: &Path, lazy: bool) -> anyhow::Result<()> {
    let mut fm = Command::new("fusermount3");
    fm.arg("-u");
    if lazy {
        fm.arg("-z");
    }
    let fm = fm.arg(path).output();
    if let Ok(out) = &fm {
        if out.status.success() {
            return Ok(());
        }
    }
    let mut um = Command::new("umount");
    if lazy {
        um.arg("-l");
    }
    let out = um.arg(path).output().context("running umount")?;
    if out.status.success() {
        return Ok(());
    }
    let why = match fm {
        Ok(o) => String::from_utf8_lossy(&o.stderr).trim().to_string(),
        Err(e) => e.to_string(),
    };
    anyhow::bail!(
        "cannot unmount {}: {}; {}",
        path.display(),
        why,
        String::from_utf8_lossy(&out.stderr).trim()
    )
}

pub fn run(a: UmountArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        super::mount::is_mounted(&a.mountpoint),
        "{} is not a jfs mount",
        a.mountpoint.display()
    );
    unmount(&a.mountpoint, a.force)?;
    // the mount process ends once the kernel lets go
    for _ in 0..100 {
        if !super::mount::is_mounted(&a.mountpoint) {
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    Ok(())
}
