//! `jfs umount`: unmount a jfs mount.
use std::path::PathBuf;

use clap::Args;

use crate::fuse::mountpoint::{is_mounted, unmount};

#[derive(Args, Debug)]
pub struct UmountArgs {
    /// The mount point
    mountpoint: PathBuf,
    /// Lazy unmount: detach now even if files are open
    #[arg(short, long)]
    force: bool,
}

pub fn run(a: UmountArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        is_mounted(&a.mountpoint),
        "{} is not a jfs mount",
        a.mountpoint.display()
    );
    unmount(&a.mountpoint, a.force)?;
    // the mount process ends once the kernel lets go
    for _ in 0..100 {
        if !is_mounted(&a.mountpoint) {
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    Ok(())
}
