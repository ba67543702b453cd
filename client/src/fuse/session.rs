//! The FUSE session of a mount: mount options, the threads reading the
//! kernel's requests, and the notifier through which the VFS makes the
//! kernel forget entries and attributes.
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use super::JfsFuse;
use crate::vfs::{Forget, Vfs};

/// Threads reading requests from the kernel (each with its own runtime and
/// database connection: see `JfsFuse::run_here`).
const FUSE_THREADS: usize = 4;

/// How a mount is offered to the kernel.
pub struct ServeOptions {
    pub read_only: bool,
    /// Other users may use the mount (root, or user_allow_other).
    pub allow_other: bool,
    /// Extended attributes are served (not `--no-xattrs`).
    pub xattrs: bool,
    /// Device files open their devices (`--dev`; else nodev).
    pub dev: bool,
    /// Set-user-ID and set-group-ID bits take effect (`--suid`; else nosuid).
    pub suid: bool,
    /// When reads move atimes (`--atime-mode`): the mount is noatime when
    /// they never do (the Vfs moves them: the kernel keeps none of a FUSE
    /// file system's).
    pub atime: crate::vfs::AtimeMode,
}

/// Mounts `vfs` on `mountpoint` and serves it until it is unmounted.
pub fn serve(
    vfs: Arc<Vfs>,
    rt: tokio::runtime::Handle,
    mountpoint: &Path,
    options: &ServeOptions,
) -> anyhow::Result<()> {
    let mut mount_options = vec![
        fuser::MountOption::FSName(format!("jfs:{}", vfs.volume.name)),
        fuser::MountOption::Subtype("jfs".into()),
        fuser::MountOption::DefaultPermissions,
        match options.atime {
            crate::vfs::AtimeMode::Noatime => fuser::MountOption::NoAtime,
            _ => fuser::MountOption::Atime,
        },
    ];
    if options.read_only {
        mount_options.push(fuser::MountOption::RO);
    }
    mount_options.push(match options.dev {
        true => fuser::MountOption::Dev,
        false => fuser::MountOption::NoDev,
    });
    mount_options.push(match options.suid {
        true => fuser::MountOption::Suid,
        false => fuser::MountOption::NoSuid,
    });
    let mut config = fuser::Config::default();
    config.mount_options = mount_options;
    config.acl = if options.allow_other {
        fuser::SessionACL::All
    } else {
        fuser::SessionACL::Owner
    };
    config.n_threads = Some(FUSE_THREADS);
    config.clone_fd = true;
    let fs = JfsFuse::new(vfs.clone(), rt, options.xattrs);
    fuser::Session::new(fs, mountpoint, &config)
        .and_then(|session| {
            let notifier = session.notifier();
            // entries are forgotten from a thread of their own, waited for a
            // moment: the caller (rmr, clone through the control file)
            // answers once the kernel forgot, yet never deadlocks on the
            // kernel's locks of the directory if that takes long
            vfs.set_kernel_forgetter(Box::new(move |what| match what {
                Forget::Entry { parent, name } => {
                    let (notifier, name) = (notifier.clone(), name.to_vec());
                    let (done, wait) = std::sync::mpsc::channel();
                    std::thread::spawn(move || {
                        let name = std::ffi::OsStr::from_bytes(&name);
                        if let Err(e) = notifier.inval_entry(fuser::INodeNo(parent), name) {
                            tracing::debug!("forgetting entry {name:?} of {parent}: {e}");
                        }
                        let _ = done.send(());
                    });
                    let _ = wait.recv_timeout(Duration::from_secs(1));
                }
                Forget::EntryNow { parent, name } => {
                    let name = std::ffi::OsStr::from_bytes(name);
                    if let Err(e) = notifier.inval_entry(fuser::INodeNo(parent), name) {
                        tracing::debug!("forgetting entry {name:?} of {parent}: {e}");
                    }
                }
                // attributes only: the kernel takes no lock of the inode
                Forget::Attributes { inode } => {
                    if let Err(e) = notifier.inval_inode(fuser::INodeNo(inode), -1, 0) {
                        tracing::debug!("forgetting the attributes of {inode}: {e}");
                    }
                }
                Forget::Data { inode } => {
                    if let Err(e) = notifier.inval_inode(fuser::INodeNo(inode), 0, 0) {
                        tracing::debug!("forgetting the pages of {inode}: {e}");
                    }
                }
            }));
            session.run()
        })
        .with_context(|| format!("mounting on {}", mountpoint.display()))
}

/// What the mount asks of the kernel when it starts (`Filesystem::init`):
/// readdirplus, big and parallel requests, locks, and, when the volume has
/// ACLs on, POSIX ACLs checked by the kernel.
///
/// Every listing is a readdirplus (not READDIRPLUS_AUTO, where the kernel
/// asks for attributes only on a listing's first page, or after a lookup
/// in the directory since its last one): find, du and ls -l list a whole
/// directory and then stat each name, and the names and attributes a
/// listing gave then answer those stats in the kernel, for the entry and
/// attribute cache times. A walk of 300,000 names with `find -size 0` ran
/// at 94,000/s instead of 19,000/s; a listing alone (`ls -f`) at 116,000/s
/// instead of 194,000/s (bench/walk).
pub(super) fn offer(vfs: &Vfs, config: &mut fuser::KernelConfig) {
    use fuser::InitFlags;
    for flag in [
        InitFlags::FUSE_DO_READDIRPLUS,
        InitFlags::FUSE_BIG_WRITES,
        InitFlags::FUSE_ASYNC_READ,
        InitFlags::FUSE_PARALLEL_DIROPS,
        InitFlags::FUSE_MAX_PAGES,
    ] {
        let _ = config.add_capabilities(flag);
    }
    if vfs.config.root == crate::vfs::VOLUME_ROOT {
        // file handles (open_by_handle_at, an NFS export of the mount)
        // name nodes by their inode numbers, which stay: the kernel asks
        // for "." of a node it no longer holds (Vfs::lookup_by_handle).
        // Not for a mount of a subdirectory, whose handles could name
        // nodes outside it.
        let _ = config.add_capabilities(InitFlags::FUSE_EXPORT_SUPPORT);
    }
    if vfs.has_session() {
        // fcntl and flock locks come here, to be shared by every mount (a
        // mount of a hot standby, which can record none, leaves them to
        // the kernel: they hold on this machine only)
        for flag in [InitFlags::FUSE_POSIX_LOCKS, InitFlags::FUSE_FLOCK_LOCKS] {
            let _ = config.add_capabilities(flag);
        }
    }
    if vfs.volume.enable_acl {
        // the kernel checks permissions with the ACLs it reads through
        // getxattr, and leaves the umask to mknod (a directory's
        // default ACL replaces it)
        for flag in [InitFlags::FUSE_POSIX_ACL, InitFlags::FUSE_DONT_MASK] {
            if config.add_capabilities(flag).is_err() {
                tracing::warn!("the kernel does not offer {flag:?}: POSIX ACLs are not enforced");
            }
        }
    }
    let _ = config.set_max_write(1 << 20);
    let _ = config.set_max_readahead(1 << 20);
    let _ = config.set_max_background(64);
}
