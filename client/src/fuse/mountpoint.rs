//! Mount points: whether a path is a jfs mount, and asking the kernel to
//! let one go.
use std::path::Path;
use std::process::Command;

use anyhow::Context;

/// Whether `path` is a jfs FUSE mount (per /proc/self/mountinfo).
pub fn is_mounted(path: &Path) -> bool {
    let Ok(path) = path.canonicalize() else {
        return false;
    };
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    info.lines().any(|line| {
        let fields: Vec<&str> = line.split(' ').collect();
        let sep = fields.iter().position(|f| *f == "-");
        // fields: ... mount point (5th) ... "-" fstype source options
        let at = fields
            .get(4)
            .map(|p| Path::new(&p.replace("\\040", " ")) == path);
        let fuse = sep
            .and_then(|i| fields.get(i + 1))
            .map(|t| t.starts_with("fuse"));
        let ours = sep
            .and_then(|i| fields.get(i + 2))
            .map(|s| s.starts_with("jfs:"));
        at == Some(true) && fuse == Some(true) && ours == Some(true)
    })
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
