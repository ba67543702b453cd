//! The virtual file system over the namespace layer (`ns`, the only road
//! to the metadata procedures) and `object`: the `Vfs` a mount serves, its operations by family in `ops/` (namespace, files,
//! directories, xattrs), open files and handles in `handles`, write buffers
//! in `writer`, the read path in `reader`. Nothing here knows about FUSE;
//! errors are errno values. The layer above (fuse) names the metadata
//! types it needs through this module's re-exports.
mod access;
mod acl;
mod atime;
mod block_buf;
mod compact;
mod control;
mod control_auth;
mod debug;
mod handles;
pub use crate::ns::LEASE_WINDOW;

mod ops;
mod reader;
mod space;
mod summary;
mod warmup;

mod writer;

pub use crate::meta::{
    ns_to_time, time_to_ns, Attr, LockRange, NewNode, NodeType, SetAttr, Statfs, TimeSet,
};
pub use crate::ns::lookahead::LOOKUP_AHEAD;
pub use crate::ns::{Forget, NO_SESSION};
pub use access::{Caller, Need, Squash, Who};
pub use compact::{Compacted, COMPACT_AT};
pub use control::{control_attr, CONTROL_INODE};
pub use ops::ListedEntry;

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::meta::VolumeInfo;
use crate::ns::parts::Parts;
use crate::ns::Namespace;
use crate::object::ObjectStore;
pub use atime::AtimeMode;
use compact::CompactionQueue;
use futures_util::future::BoxFuture;
use handles::{Handle, OpenFile};
use reader::BlockCache;
use writer::WriteTarget;

pub use crate::ns::VOLUME_ROOT;

/// Mount options that shape the VFS.
#[derive(Clone)]
pub struct VfsConfig {
    /// The directory mounted (`--subdir`; [`VOLUME_ROOT`] = the whole volume): the
    /// kernel's inode 1 stands for it.
    pub root: u64,
    pub attr_ttl: Duration,
    /// How long the kernel keeps names of files, and that a name is missing.
    pub entry_ttl: Duration,
    /// How long the kernel keeps names of directories.
    pub dir_entry_ttl: Duration,
    /// Whether the mount reads the change log (`--changes-poll` > 0): what
    /// is cached here is then kept exact, and missing names are cached.
    pub follow_changes: bool,
    /// Memory for write uploads in flight and the read block cache, in
    /// bytes; also the bound of all pending writes' buffers (back-pressure).
    pub buffer_size: usize,
    pub read_only: bool,
    /// The squash of requests' ids (`--root-squash`, `--all-squash`, or
    /// the role's own from `jfs.grant_client`).
    pub squash: Option<Squash>,
    /// A local disk cache of blocks (whole blocks are fetched when it is on).
    pub disk_cache: Option<Arc<crate::object::DiskCache>>,
    /// Slices in a chunk from which it is compacted in the background (0: never).
    pub compact_at: usize,
    /// Entries a lookup in a directory being walked reads ahead, in each
    /// order (`--lookup-ahead`; 0: none).
    pub lookup_ahead: u32,
    /// A chmod, chown or utimens of a file with writes pending waits for
    /// their commit (only where a background commit bounds the wait:
    /// `--commit-after` above 0).
    pub defer_attrs: bool,
    /// When reads move atimes (`--atime-mode`).
    pub atime: AtimeMode,
    /// Whether entry [`GATEWAY_DIR_NAME`] of the volume's root is kept from
    /// this client's callers (a mount's local users may neither make,
    /// move nor remove it: the S3 gateway's files live there).
    pub reserve_gateway_dir: bool,
}

impl VfsConfig {
    /// How long the kernel keeps the name of a node of type `kind`.
    pub fn entry_ttl_of(&self, kind: NodeType) -> Duration {
        if kind == NodeType::Dir {
            self.dir_entry_ttl
        } else {
            self.entry_ttl
        }
    }
}

pub struct Vfs {
    /// The namespace: the only road to the metadata procedures.
    pub ns: Arc<Namespace>,
    store: Arc<dyn ObjectStore>,
    pub volume: VolumeInfo,
    pub config: VfsConfig,
    files: Mutex<HashMap<u64, Arc<OpenFile>>>,
    handles: Mutex<HashMap<u64, Arc<Handle>>>,
    next_fh: AtomicU64,
    cache: BlockCache,
    /// Storage class of each tier id (jfs.tier), refreshed in the background.
    tier_classes: std::sync::RwLock<[String; 4]>,
    /// Set by the FUSE layer: makes the kernel forget what it cached.
    kernel_forget: std::sync::OnceLock<KernelForgetter>,
    /// When reads move atimes, and whether the database lets them.
    atime: atime::AtimeKeeper,
    /// Wakes the background committer to commit every file's pending
    /// writes now (the write buffers are full).
    commit_now: tokio::sync::Notify,
    /// The mount's shared runtime: background work (uploads, readahead)
    /// runs there, whichever thread started it.
    runtime: tokio::runtime::Handle,
    compactions: CompactionQueue,
    /// Whether each shard of the volume has space limits, as last asked, and when.
    space_limited: Mutex<HashMap<u16, (std::time::Instant, bool)>>,
}

/// Makes the kernel drop what it cached (kernel inode numbers).
pub type KernelForgetter = Box<dyn Fn(Forget<'_>) + Send + Sync>;

pub type VfsResult<T> = Result<T, i32>;

use crate::ns::errno;

/// The longest name of a directory entry, in bytes (NAME_MAX; the database
/// refuses longer ones too).
pub const NAME_MAX: usize = 255;

/// The S3 gateway's directory in the volume's root (`jfs gateway`, which
/// makes it as its own, mode 0700).
pub const GATEWAY_DIR_NAME: &[u8] = b".jfs-gateway";

impl Vfs {
    /// Refuses names no caller may make, move or remove: the control file's
    /// in the mount's root (EEXIST) and, where reserved, the gateway's
    /// directory in the volume's root (EPERM: a local user who moved it
    /// aside and made one of their own would receive what the gateway
    /// stores).
    fn reserved_name(&self, parent: u64, name: &[u8]) -> VfsResult<()> {
        if parent == self.config.root && name == control::CONTROL_NAME {
            return Err(libc::EEXIST);
        }
        if self.config.reserve_gateway_dir && parent == VOLUME_ROOT && name == GATEWAY_DIR_NAME {
            return Err(libc::EPERM);
        }
        Ok(())
    }
}

impl Vfs {
    /// Called on the mount's shared runtime, where background work will run.
    /// `parts`: the volume's databases, each with this mount's session
    /// there (see `attach::register`).
    pub fn new(
        parts: Parts,
        store: Arc<dyn ObjectStore>,
        volume: VolumeInfo,
        config: VfsConfig,
    ) -> Arc<Vfs> {
        for part in parts.all() {
            part.meta
                .set_async_commits(volume.meta_durability == "fsync");
        }
        let may_touch_atime = parts.root().meta.may_call("touch_atime");
        let settings = crate::ns::Settings {
            attr_ttl: config.attr_ttl,
            keep_names: !config.entry_ttl.is_zero(),
            follow_changes: config.follow_changes,
            skip_dir_mtime_ns: volume.skip_dir_mtime_ns,
            lookup_ahead: config.lookup_ahead,
        };
        Arc::new_cyclic(|mount: &std::sync::Weak<Vfs>| Vfs {
            ns: Arc::new(Namespace::new(parts, settings, mount.clone())),
            cache: BlockCache::new(config.buffer_size / 2),
            atime: atime::AtimeKeeper::new(config.atime, config.read_only, may_touch_atime),
            commit_now: tokio::sync::Notify::new(),
            space_limited: Mutex::new(HashMap::new()),
            runtime: tokio::runtime::Handle::current(),
            store,
            volume,
            config,
            files: Mutex::new(HashMap::new()),
            handles: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
            kernel_forget: std::sync::OnceLock::new(),
            tier_classes: std::sync::RwLock::new(Default::default()),
            compactions: CompactionQueue::new(),
        })
    }

    /// How long the kernel may keep that entry `name` of `parent` is
    /// missing: only while the change log is followed (another mount's
    /// create is then forgotten), and never for the trash.
    pub fn missing_name_ttl(&self, parent: u64, name: &[u8]) -> Option<Duration> {
        let cache = self.config.follow_changes
            && !self.config.entry_ttl.is_zero()
            && !crate::ns::listings::is_trash_entry(parent, name);
        cache.then_some(self.config.entry_ttl)
    }

    /// The inode a kernel inode number stands for (the kernel's root, 1, is
    /// the mounted directory).
    pub fn inode_of(&self, kernel_ino: u64) -> u64 {
        if kernel_ino == 1 {
            self.config.root
        } else {
            kernel_ino
        }
    }

    /// The kernel's number for an inode.
    pub fn kernel_ino(&self, inode: u64) -> u64 {
        if inode == self.config.root {
            1
        } else {
            inode
        }
    }

    /// Installs how the kernel is told to forget what it cached (by the FUSE layer).
    pub fn set_kernel_forgetter(&self, f: KernelForgetter) {
        let _ = self.kernel_forget.set(f);
    }

    fn forget_entry(&self, parent: u64, name: &[u8]) {
        self.tell_kernel(Forget::Entry { parent, name });
    }

    fn forget_attributes(&self, inode: u64) {
        self.tell_kernel(Forget::Attributes { inode });
    }

    /// Makes the kernel forget `what`, named by volume inode numbers
    /// (nothing before the FUSE session is up: the kernel has cached
    /// nothing yet).
    fn tell_kernel(&self, what: Forget<'_>) {
        let Some(f) = self.kernel_forget.get() else {
            return;
        };
        let ino = |inode| self.kernel_ino(inode);
        f(match what {
            Forget::Entry { parent, name } => Forget::Entry {
                parent: ino(parent),
                name,
            },
            Forget::EntryNow { parent, name } => Forget::EntryNow {
                parent: ino(parent),
                name,
            },
            Forget::Attributes { inode } => Forget::Attributes { inode: ino(inode) },
            Forget::Data { inode } => Forget::Data { inode: ino(inode) },
        });
    }

    pub fn sid(&self) -> i64 {
        self.ns.sid()
    }

    /// Whether this mount has a session (a mount of a hot standby has
    /// none: it writes nothing to the database).
    pub fn has_session(&self) -> bool {
        self.ns.has_session()
    }

    fn writable(&self) -> VfsResult<()> {
        if self.config.read_only {
            Err(libc::EROFS)
        } else {
            Ok(())
        }
    }

    /// The object store the volume's blocks are in.
    pub fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    /// Where file `inode`, of storage tier `tier`, writes.
    fn target(&self, inode: u64, tier: u8) -> WriteTarget<'_> {
        WriteTarget {
            meta: self.ns.meta_of(inode),
            store: &self.store,
            volume: &self.volume.name,
            block_size: self.volume.block_size,
            max_inflight: (self.config.buffer_size / 2 / self.volume.block_size as usize).max(2),
            class: self.tier_class(tier),
            runtime: &self.runtime,
            inline_max: self.volume.inline_max,
        }
    }

    /// The storage class tier `tier` maps to ("" = the bucket's default;
    /// tier 0 is the volume default).
    pub fn tier_class(&self, tier: u8) -> String {
        let classes = self.tier_classes.read().unwrap();
        let class = classes.get(tier as usize).cloned().unwrap_or_default();
        if class.is_empty() && tier != 0 {
            classes[0].clone()
        } else {
            class
        }
    }

    /// Takes the tier -> class mapping anew from the database.
    pub async fn reload_tier_classes(&self) -> crate::meta::Result<()> {
        let classes = self.ns.meta_of_mount().tier_classes().await?;
        *self.tier_classes.write().unwrap() = classes;
        Ok(())
    }

    /// The shards of the volume this mount reaches (0 alone: none).
    pub fn shard_numbers(&self) -> Vec<u16> {
        self.ns.parts().all().iter().map(|p| p.number).collect()
    }

    /// Ends this mount's sessions (unmount): its open files are released.
    pub async fn close_session(&self) -> crate::meta::Result<()> {
        if !self.has_session() {
            return Ok(());
        }
        let mut closed = Ok(());
        // (a shard never reached has no session of this mount)
        for part in self.ns.parts().all().iter().filter(|p| p.meta.is_open()) {
            if let Err(e) = part.meta.session_close(part.sid()).await {
                tracing::warn!("closing the session on shard {}: {e}", part.number);
                closed = closed.and(Err(e));
            }
        }
        closed
    }

    /// Gives the calling thread its own connection to each database (FUSE
    /// threads: see `Meta::use_thread_connection`).
    pub fn use_thread_connection(&self) -> anyhow::Result<()> {
        for part in self.ns.parts().all() {
            part.meta.use_thread_connection()?;
        }
        Ok(())
    }
}

/// What the namespace asks of the mount: its open files and its kernel.
impl crate::ns::Mount for Vfs {
    fn is_open(&self, inode: u64) -> bool {
        self.files.lock().unwrap().contains_key(&inode)
    }

    fn open_inodes(&self) -> Vec<i64> {
        Vfs::open_inodes(self)
    }

    fn unlinked_while_open(&self, inode: u64) -> BoxFuture<'_, ()> {
        Box::pin(self.mark_unlinked(inode))
    }

    fn forget_in_kernel(&self, what: Forget<'_>) {
        self.tell_kernel(what)
    }

    fn forget_open_files(&self) -> BoxFuture<'_, Vec<u64>> {
        Box::pin(async move {
            let files: Vec<_> = self.files.lock().unwrap().values().cloned().collect();
            let mut inodes = Vec::with_capacity(files.len());
            for file in files {
                file.state.lock().await.chunks.clear();
                inodes.push(file.inode);
            }
            inodes
        })
    }

    fn create_lost(&self, inode: u64) {
        if let Some(file) = self.open_file(inode) {
            file.create_lost
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }
}
