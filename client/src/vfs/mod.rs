//! The virtual file system: open files and handles, write buffers and the read path over
//! `meta` and `object`. Nothing here knows about FUSE; errors are errno values.
mod acl;
pub mod background;
mod compact;
mod control;
mod dir_attrs;
pub use compact::{Compacted, COMPACT_AT};
pub use control::{Caller, CONTROL_INODE};
pub mod layout;
mod reader;
mod writer;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::meta::{Attr, DirEntry, Meta, NodeType, Statfs, VolumeInfo};
use crate::object::ObjectStore;
use reader::BlockCache;
use writer::{WriteTarget, Writer};

/// Mount options that shape the VFS.
#[derive(Clone)]
pub struct VfsConfig {
    /// The directory mounted (`--subdir`; 1 = the whole volume): the
    /// kernel's inode 1 stands for it.
    pub root: u64,
    pub attr_ttl: Duration,
    pub entry_ttl: Duration,
    /// Memory for write uploads in flight and the read block cache, in bytes.
    pub buffer_size: usize,
    pub read_only: bool,
    /// A local disk cache of blocks (whole blocks are fetched when it is on).
    pub disk_cache: Option<Arc<crate::object::DiskCache>>,
    /// Slices in a chunk from which it is compacted in the background (0: never).
    pub compact_at: usize,
}

/// Ids of one kind reserved in ranges from the database.
struct IdRange {
    kind: &'static str,
    batch: i32,
    next_end: tokio::sync::Mutex<(u64, u64)>,
}

impl IdRange {
    fn new(kind: &'static str, batch: i32) -> IdRange {
        IdRange {
            kind,
            batch,
            next_end: tokio::sync::Mutex::new((0, 0)),
        }
    }

    async fn next(&self, meta: &Meta) -> Result<u64, i32> {
        let mut r = self.next_end.lock().await;
        if r.0 >= r.1 {
            let first = meta
                .alloc_ids(self.kind, self.batch)
                .await
                .map_err(|e| e.errno())?;
            *r = (first, first + self.batch as u64);
        }
        r.0 += 1;
        Ok(r.0 - 1)
    }
}

/// State of a file that is open in this mount, shared by its handles.
///
/// The ordering rule of the data path: this mount's view of an open file
/// (its pending writes, its length, the slice lists it has read) changes only
/// under this state's lock, and every change bumps `generation`. A change of
/// the file's attributes (truncate, fallocate, chmod, times) commits the
/// pending writes first and makes its metadata call while holding the lock,
/// so no write is committed after a size change it preceded, none is cut by
/// one that came after it, and times set before close stay. A read commits
/// pending writes before it reads. What a call made without the
/// lock brings back from the database (a chunk's slices, attributes) is kept
/// or trusted only if `generation` did not move meanwhile: a slice list read
/// before a commit must not be cached after it.
struct FileState {
    /// Length as this mount knows it: from open, grown by our writes.
    length: u64,
    /// Slices of chunks read since open (open-to-close consistency).
    chunks: HashMap<u32, Arc<Vec<crate::meta::SliceRow>>>,
    /// 0 when opened, then a new number from one mount-wide counter at
    /// every change of the file made through this mount: equal non-zero
    /// generations mean "no change", even across a release and a new open.
    generation: u64,
    writer: Writer,
    /// Pending writes were committed but not yet synced (fsync durability mode).
    needs_sync: bool,
    /// Its last name went away while open: release it at last close.
    unlinked: bool,
    /// Its storage tier: new blocks go to that tier's class.
    tier: u8,
    /// Slices committed per chunk since it was last considered for compaction.
    commits: HashMap<u32, usize>,
}

/// The counter of [`FileState::generation`]s.
static FILE_GENERATIONS: AtomicU64 = AtomicU64::new(1);

fn next_generation() -> u64 {
    FILE_GENERATIONS.fetch_add(1, Ordering::Relaxed)
}

impl FileState {
    /// Notes a change of the file's data or length: cached slice lists go.
    fn changed(&mut self) {
        self.generation = next_generation();
        self.chunks.clear();
    }
}

pub struct OpenFile {
    inode: u64,
    /// Handles open on it; changed only under `Vfs::files`' lock, so that
    /// the last release and a new open agree on whether it is still there.
    opens: AtomicU32,
    state: tokio::sync::Mutex<FileState>,
}

enum Handle {
    /// An open `.jfs.control`: the answer to the last request written.
    Control { answer: tokio::sync::Mutex<Vec<u8>> },
    File {
        file: Arc<OpenFile>,
        last_read_end: AtomicU64,
    },
    Dir {
        inode: u64,
        page: tokio::sync::Mutex<DirPage>,
    },
}

/// Entries of a directory handle fetched (after cookie `after`) but not yet
/// given to the kernel.
#[derive(Default)]
struct DirPage {
    after: u64,
    entries: Vec<DirEntry>,
}

pub struct Vfs {
    pub meta: Meta,
    store: Arc<dyn ObjectStore>,
    pub volume: VolumeInfo,
    pub config: VfsConfig,
    sid: AtomicI64,
    inode_ids: IdRange,
    slice_ids: IdRange,
    files: Mutex<HashMap<u64, Arc<OpenFile>>>,
    handles: Mutex<HashMap<u64, Arc<Handle>>>,
    next_fh: AtomicU64,
    cache: BlockCache,
    /// Storage class of each tier id (jfs.tier), refreshed in the background.
    tier_classes: std::sync::RwLock<[String; 4]>,
    /// Set by the FUSE layer: makes the kernel forget what it cached.
    kernel_forget: std::sync::OnceLock<KernelForgetter>,
    dir_attrs: dir_attrs::DirAttrs,
    /// The mount's shared runtime: background work (uploads, readahead)
    /// runs there, whichever thread started it.
    runtime: tokio::runtime::Handle,
    compactions: CompactionQueue,
}

/// Chunks waiting for a background compaction (each queued once), taken
/// one at a time by the job `background::spawn` starts.
struct CompactionQueue {
    tx: tokio::sync::mpsc::UnboundedSender<(u64, u32)>,
    rx: Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<(u64, u32)>>>,
    queued: Mutex<HashSet<(u64, u32)>>,
}

impl CompactionQueue {
    fn new() -> CompactionQueue {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        CompactionQueue {
            tx,
            rx: Mutex::new(Some(rx)),
            queued: Mutex::new(HashSet::new()),
        }
    }
}

/// What the kernel is to forget (kernel inode numbers).
pub enum Forget<'a> {
    /// The entry `name` of directory `parent`.
    Entry { parent: u64, name: &'a [u8] },
    /// The attributes of an inode.
    Attributes { inode: u64 },
}

/// Makes the kernel drop what it cached.
pub type KernelForgetter = Box<dyn Fn(Forget<'_>) + Send + Sync>;

pub type VfsResult<T> = Result<T, i32>;

fn errno(e: crate::meta::MetaError) -> i32 {
    if !matches!(e, crate::meta::MetaError::Errno(_)) {
        tracing::error!("{e}");
    }
    e.errno()
}

/// The control file's name in the mount's root is taken.
fn reserved_name(root: u64, parent: u64, name: &[u8]) -> VfsResult<()> {
    if parent == root && name == control::CONTROL_NAME {
        return Err(libc::EEXIST);
    }
    Ok(())
}

/// A directory entry as readdir gives it to the kernel: FUSE offset, name, attributes.
pub struct ListedEntry {
    pub offset: u64,
    pub name: Vec<u8>,
    pub attr: Attr,
}

impl Vfs {
    /// Called on the mount's shared runtime, where background work will run.
    pub fn new(
        meta: Meta,
        store: Arc<dyn ObjectStore>,
        volume: VolumeInfo,
        config: VfsConfig,
        sid: i64,
    ) -> Vfs {
        Vfs {
            cache: BlockCache::new(config.buffer_size / 2),
            dir_attrs: dir_attrs::DirAttrs::new(config.attr_ttl, volume.skip_dir_mtime_ns),
            runtime: tokio::runtime::Handle::current(),
            meta,
            store,
            volume,
            config,
            sid: AtomicI64::new(sid),
            inode_ids: IdRange::new("inode", 1000),
            slice_ids: IdRange::new("slice", 1000),
            files: Mutex::new(HashMap::new()),
            handles: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
            kernel_forget: std::sync::OnceLock::new(),
            tier_classes: std::sync::RwLock::new(Default::default()),
            compactions: CompactionQueue::new(),
        }
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
        if let Some(f) = self.kernel_forget.get() {
            f(Forget::Entry {
                parent: self.kernel_ino(parent),
                name,
            });
        }
    }

    fn forget_attributes(&self, inode: u64) {
        if let Some(f) = self.kernel_forget.get() {
            f(Forget::Attributes {
                inode: self.kernel_ino(inode),
            });
        }
    }

    pub fn sid(&self) -> i64 {
        self.sid.load(Ordering::Relaxed)
    }

    pub fn set_sid(&self, sid: i64) {
        self.sid.store(sid, Ordering::Relaxed);
    }

    fn writable(&self) -> VfsResult<()> {
        if self.config.read_only {
            Err(libc::EROFS)
        } else {
            Ok(())
        }
    }

    /// Where a file of storage tier `tier` writes.
    fn target(&self, tier: u8) -> WriteTarget<'_> {
        WriteTarget {
            meta: &self.meta,
            store: &self.store,
            volume: &self.volume.name,
            block_size: self.volume.block_size,
            max_inflight: (self.config.buffer_size / 2 / self.volume.block_size as usize).max(2),
            class: self.tier_class(tier),
            runtime: &self.runtime,
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
        let classes = self.meta.tier_classes().await?;
        *self.tier_classes.write().unwrap() = classes;
        Ok(())
    }

    fn open_file(&self, inode: u64) -> Option<Arc<OpenFile>> {
        self.files.lock().unwrap().get(&inode).cloned()
    }

    /// Inodes open in this mount (for unlink/rename to keep them alive).
    fn open_inodes(&self) -> Vec<i64> {
        self.files
            .lock()
            .unwrap()
            .keys()
            .map(|&i| i as i64)
            .collect()
    }

    /// Attributes with what this mount knows better of a file open here:
    /// its length, grown by writes that may not be committed yet (or were
    /// committed while `attr` was on its way).
    async fn overlay(&self, mut attr: Attr) -> Attr {
        if attr.kind == NodeType::File {
            if let Some(file) = self.open_file(attr.inode) {
                let state = file.state.lock().await;
                attr.length = attr.length.max(state.length);
            }
        }
        attr
    }

    /// Commits a file's pending writes (caller holds its state).
    async fn flush_locked(&self, inode: u64, state: &mut FileState) -> VfsResult<()> {
        if state.writer.is_empty() {
            return Ok(());
        }
        let pending = state.writer.slices_per_chunk();
        let result = state.writer.flush(&self.target(state.tier), inode).await;
        state.changed();
        if result.is_ok() {
            for (chunk, n) in pending {
                let commits = state.commits.entry(chunk).or_default();
                *commits += n;
                if self.config.compact_at > 0 && *commits >= self.config.compact_at {
                    *commits = 0;
                    self.queue_compaction(inode, chunk);
                }
            }
        }
        match result {
            Ok(Some(attr)) => {
                state.length = state.length.max(attr.length);
                state.needs_sync = true;
                Ok(())
            }
            Ok(None) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Commits a file's pending writes and, in 'fsync' durability mode, waits
    /// until the metadata is durable: what close() and fsync() promise.
    async fn flush_file(&self, file: &OpenFile, sync: bool) -> VfsResult<()> {
        let mut state = file.state.lock().await;
        self.flush_locked(file.inode, &mut state).await?;
        if state.needs_sync && (sync || self.volume.meta_durability == "fsync") {
            self.meta.sync().await.map_err(errno)?;
            state.needs_sync = false;
        }
        Ok(())
    }

    // ----- namespace -----

    pub async fn lookup(&self, parent: u64, name: &[u8]) -> VfsResult<Attr> {
        if parent == self.config.root && name == control::CONTROL_NAME {
            return Ok(control::control_attr());
        }
        let attr = self.meta.lookup(parent, name).await.map_err(errno)?;
        self.dir_attrs.put(&attr);
        Ok(self.overlay(attr).await)
    }

    pub async fn getattr(&self, inode: u64) -> VfsResult<Attr> {
        if inode == control::CONTROL_INODE {
            return Ok(control::control_attr());
        }
        if let Some(attr) = self.dir_attrs.get(inode) {
            return Ok(attr);
        }
        let attr = self.meta.getattr(inode).await.map_err(errno)?;
        self.dir_attrs.put(&attr);
        Ok(self.overlay(attr).await)
    }

    #[allow(clippy::too_many_arguments)]
    pub async fn mknod(
        &self,
        parent: u64,
        name: &[u8],
        kind: NodeType,
        mode: u32,
        umask: u32,
        uid: u32,
        gid: u32,
        rdev: u32,
        target: Option<&[u8]>,
    ) -> VfsResult<Attr> {
        self.writable()?;
        reserved_name(self.config.root, parent, name)?;
        let inode = self.inode_ids.next(&self.meta).await?;
        let attr = self
            .meta
            .mknod(
                parent,
                name,
                kind as i32,
                mode,
                umask,
                uid,
                gid,
                rdev,
                target,
                inode,
            )
            .await
            .map_err(errno)?;
        if kind == NodeType::Dir {
            // its nlink grew
            self.dir_attrs.forget(parent);
            self.dir_attrs.put(&attr);
        } else {
            self.dir_attrs.child_created(parent, attr.ctime);
        }
        Ok(attr)
    }

    pub async fn readlink(&self, inode: u64) -> VfsResult<Vec<u8>> {
        self.meta.readlink(inode).await.map_err(errno)
    }

    pub async fn link(&self, inode: u64, parent: u64, name: &[u8]) -> VfsResult<Attr> {
        self.writable()?;
        reserved_name(self.config.root, parent, name)?;
        let attr = self.meta.link(inode, parent, name).await.map_err(errno)?;
        self.dir_attrs.child_created(parent, attr.ctime);
        Ok(self.overlay(attr).await)
    }

    /// Marks an inode that lost its last name while open here.
    async fn mark_unlinked(&self, inode: u64) {
        if let Some(file) = self.open_file(inode) {
            file.state.lock().await.unlinked = true;
        }
    }

    pub async fn unlink(&self, parent: u64, name: &[u8]) -> VfsResult<()> {
        self.writable()?;
        let attr = self
            .meta
            .unlink(parent, name, self.sid(), &self.open_inodes())
            .await
            .map_err(errno)?;
        self.dir_attrs.forget(parent);
        if attr.nlink == 0 {
            self.mark_unlinked(attr.inode).await;
        }
        Ok(())
    }

    pub async fn rmdir(&self, parent: u64, name: &[u8]) -> VfsResult<()> {
        self.writable()?;
        self.meta.rmdir(parent, name).await.map_err(errno)?;
        // the parent's nlink, and the directory itself is gone
        self.dir_attrs.forget_all();
        Ok(())
    }

    pub async fn rename(
        &self,
        parent: u64,
        name: &[u8],
        new_parent: u64,
        new_name: &[u8],
        flags: u32,
    ) -> VfsResult<()> {
        self.writable()?;
        reserved_name(self.config.root, parent, name)?;
        reserved_name(self.config.root, new_parent, new_name)?;
        let r = self
            .meta
            .rename(
                parent,
                name,
                new_parent,
                new_name,
                flags,
                self.sid(),
                &self.open_inodes(),
            )
            .await
            .map_err(errno)?;
        // both parents, a moved directory (its ctime, "..") and a replaced one
        self.dir_attrs.forget_all();
        if r.replaced != 0 && r.replaced_nlink == 0 {
            self.mark_unlinked(r.replaced).await;
        }
        Ok(())
    }

    /// setattr; of a file open here, after its pending writes are committed.
    #[allow(clippy::too_many_arguments)]
    pub async fn setattr(
        &self,
        inode: u64,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<Option<i64>>,
        mtime: Option<Option<i64>>,
    ) -> VfsResult<Attr> {
        if inode == control::CONTROL_INODE {
            return Ok(control::control_attr());
        }
        self.writable()?;
        let mut set = 0;
        if mode.is_some() {
            set |= 1;
        }
        if uid.is_some() {
            set |= 2;
        }
        if gid.is_some() {
            set |= 4;
        }
        if size.is_some() {
            set |= 8;
        }
        match atime {
            Some(Some(_)) => set |= 16,
            Some(None) => set |= 128,
            None => {}
        }
        match mtime {
            Some(Some(_)) => set |= 32,
            Some(None) => set |= 256,
            None => {}
        }
        // any change of a file open here is ordered after its pending
        // writes: a size change must not be undone or cut by them, and times
        // set before close (futimens, as tar and cp -p do) must not be
        // overwritten by the mtime of their commit
        let file = self.open_file(inode);
        let mut state = match &file {
            Some(f) => Some(f.state.lock().await),
            None => None,
        };
        if let Some(state) = state.as_mut() {
            self.flush_locked(inode, state).await?;
        }
        let attr = self
            .meta
            .setattr(
                inode,
                set,
                mode,
                uid,
                gid,
                atime.flatten(),
                mtime.flatten(),
                size,
            )
            .await
            .map_err(errno)?;
        if let (Some(state), Some(_)) = (state.as_mut(), size) {
            state.length = attr.length;
            state.changed();
        }
        drop(state);
        self.dir_attrs.put(&attr);
        Ok(self.overlay(attr).await)
    }

    // ----- files -----

    /// Opens a file: registers the handle and refreshes what this mount
    /// knows of the file (close-to-open consistency).
    pub async fn open(&self, inode: u64, write: bool) -> VfsResult<(u64, Attr)> {
        if inode == control::CONTROL_INODE {
            let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
            let handle = Handle::Control {
                answer: tokio::sync::Mutex::new(Vec::new()),
            };
            self.handles.lock().unwrap().insert(fh, Arc::new(handle));
            return Ok((fh, control::control_attr()));
        }
        if write {
            self.writable()?;
        }
        let seen = self.file_generation(inode).await;
        let attr = self.meta.getattr(inode).await.map_err(errno)?;
        self.open_with(attr, seen).await
    }

    /// The generation of a file open here (None if it is not open).
    async fn file_generation(&self, inode: u64) -> Option<u64> {
        let file = self.open_file(inode)?;
        let generation = file.state.lock().await.generation;
        Some(generation)
    }

    /// Opens a file whose attributes the caller got when its generation
    /// here was `seen` (None: it was not open here).
    async fn open_with(&self, attr: Attr, seen: Option<u64>) -> VfsResult<(u64, Attr)> {
        let inode = attr.inode;
        if attr.kind == NodeType::Dir {
            return Err(libc::EISDIR);
        }
        let file = {
            let mut files = self.files.lock().unwrap();
            let file = files
                .entry(inode)
                .or_insert_with(|| {
                    Arc::new(OpenFile {
                        inode,
                        opens: AtomicU32::new(0),
                        state: tokio::sync::Mutex::new(FileState {
                            length: attr.length,
                            chunks: HashMap::new(),
                            generation: 0,
                            writer: Writer::default(),
                            needs_sync: false,
                            unlinked: false,
                            tier: attr.tier,
                            commits: HashMap::new(),
                        }),
                    })
                })
                .clone();
            file.opens.fetch_add(1, Ordering::Relaxed);
            file
        };
        let result = self.refresh_on_open(&file, attr, seen).await;
        let attr = match result {
            Ok(attr) => attr,
            Err(e) => {
                self.close_file(&file);
                return Err(e);
            }
        };
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        self.handles.lock().unwrap().insert(
            fh,
            Arc::new(Handle::File {
                file,
                last_read_end: AtomicU64::new(u64::MAX),
            }),
        );
        Ok((fh, attr))
    }

    /// Close-to-open: what other mounts committed before this open shows
    /// from now on, unless this mount has writes of the file pending. `attr`
    /// was read when the file's generation here was `seen`; if the file
    /// changed here since, it is read again under the lock.
    async fn refresh_on_open(
        &self,
        file: &OpenFile,
        attr: Attr,
        seen: Option<u64>,
    ) -> VfsResult<Attr> {
        let mut state = file.state.lock().await;
        if !state.writer.is_empty() {
            let mut attr = attr;
            attr.length = attr.length.max(state.length);
            return Ok(attr);
        }
        // generation 0: not changed here since it was opened
        let unchanged = match seen {
            None => state.generation == 0,
            Some(g) => g != 0 && g == state.generation,
        };
        let attr = if unchanged {
            attr
        } else {
            self.meta.getattr(file.inode).await.map_err(errno)?
        };
        state.length = attr.length;
        state.changed();
        Ok(attr)
    }

    /// Drops one open of `file`: the last one forgets it (caller holds no
    /// lock of it). Returns whether it was the last.
    fn close_file(&self, file: &Arc<OpenFile>) -> bool {
        let mut files = self.files.lock().unwrap();
        let last = file.opens.fetch_sub(1, Ordering::Relaxed) == 1;
        if last && files.get(&file.inode).is_some_and(|f| Arc::ptr_eq(f, file)) {
            files.remove(&file.inode);
        }
        last
    }

    /// create(2): a new regular file, opened.
    pub async fn create(
        &self,
        parent: u64,
        name: &[u8],
        mode: u32,
        umask: u32,
        uid: u32,
        gid: u32,
    ) -> VfsResult<(u64, Attr)> {
        let attr = self
            .mknod(parent, name, NodeType::File, mode, umask, uid, gid, 0, None)
            .await?;
        self.open_with(attr, None).await
    }

    fn file_handle(&self, fh: u64) -> VfsResult<Arc<Handle>> {
        self.handles
            .lock()
            .unwrap()
            .get(&fh)
            .cloned()
            .ok_or(libc::EBADF)
    }

    pub async fn read(&self, fh: u64, offset: u64, size: u32) -> VfsResult<bytes::Bytes> {
        let handle = self.file_handle(fh)?;
        if let Handle::Control { answer } = &*handle {
            let answer = answer.lock().await;
            let start = (offset as usize).min(answer.len());
            let end = (start + size as usize).min(answer.len());
            return Ok(bytes::Bytes::copy_from_slice(&answer[start..end]));
        }
        let Handle::File {
            file,
            last_read_end,
        } = &*handle
        else {
            return Err(libc::EISDIR);
        };
        let sequential = last_read_end.load(Ordering::Relaxed) == offset;
        let data = match self.read_file(file, offset, size, sequential).await {
            Err(libc::EIO) => {
                // the slice lists this mount kept may name slices that were
                // compacted (or truncated) elsewhere and whose objects are
                // gone: read them again once
                tracing::info!("inode {}: reading again with fresh slice lists", file.inode);
                file.state.lock().await.changed();
                self.read_file(file, offset, size, sequential).await?
            }
            other => other?,
        };
        last_read_end.store(offset + data.len() as u64, Ordering::Relaxed);
        Ok(data)
    }

    /// write(2); `caller` is who wrote (used by control requests only).
    pub async fn write(&self, fh: u64, offset: u64, data: &[u8], caller: Caller) -> VfsResult<u32> {
        let handle = self.file_handle(fh)?;
        if let Handle::Control { answer } = &*handle {
            let request = String::from_utf8_lossy(data).to_string();
            *answer.lock().await = self.control(&request, caller).await.into_bytes();
            return Ok(data.len() as u32);
        }
        self.writable()?;
        let Handle::File { file, .. } = &*handle else {
            return Err(libc::EISDIR);
        };
        let mut state = file.state.lock().await;
        let target = self.target(state.tier);
        state
            .writer
            .write(&target, file.inode, offset, data, || {
                self.slice_ids.next(&self.meta)
            })
            .await?;
        state.length = state.length.max(offset + data.len() as u64);
        state.changed();
        Ok(data.len() as u32)
    }

    /// close(2) of one descriptor: pending writes are committed (and synced
    /// in 'fsync' mode) so that the error reaches the application.
    pub async fn flush(&self, fh: u64) -> VfsResult<()> {
        let handle = self.file_handle(fh)?;
        match &*handle {
            Handle::File { file, .. } => self.flush_file(file, false).await,
            Handle::Dir { .. } | Handle::Control { .. } => Ok(()),
        }
    }

    pub async fn fsync(&self, fh: u64) -> VfsResult<()> {
        let handle = self.file_handle(fh)?;
        match &*handle {
            Handle::File { file, .. } => self.flush_file(file, true).await,
            Handle::Dir { .. } => self.meta.sync().await.map_err(errno),
            Handle::Control { .. } => Ok(()),
        }
    }

    /// The last close of a handle.
    pub async fn release(&self, fh: u64) -> VfsResult<()> {
        let Some(handle) = self.handles.lock().unwrap().remove(&fh) else {
            return Ok(());
        };
        let Handle::File { file, .. } = &*handle else {
            return Ok(());
        };
        let mut state = file.state.lock().await;
        let flushed = self.flush_locked(file.inode, &mut state).await;
        if self.close_file(file) && state.unlinked {
            self.meta
                .release(self.sid(), file.inode)
                .await
                .map_err(errno)?;
        }
        flushed
    }

    /// fallocate(2): mode 0 grows the file (the new range reads as zeros),
    /// FALLOC_FL_KEEP_SIZE needs nothing stored; other modes are refused.
    pub async fn fallocate(&self, fh: u64, offset: u64, length: u64, mode: i32) -> VfsResult<()> {
        self.writable()?;
        let handle = self.file_handle(fh)?;
        let Handle::File { file, .. } = &*handle else {
            return Err(libc::EISDIR);
        };
        if mode & !libc::FALLOC_FL_KEEP_SIZE != 0 {
            return Err(libc::EOPNOTSUPP);
        }
        if mode & libc::FALLOC_FL_KEEP_SIZE != 0 {
            return Ok(());
        }
        // grow only: the length is compared and set under the file's lock,
        // after its pending writes (which may already reach past `end`)
        let end = offset + length;
        let mut state = file.state.lock().await;
        if end <= state.length {
            return Ok(());
        }
        self.flush_locked(file.inode, &mut state).await?;
        if end <= state.length {
            return Ok(());
        }
        let attr = self
            .meta
            .setattr(file.inode, 8, None, None, None, None, None, Some(end))
            .await
            .map_err(errno)?;
        state.length = attr.length;
        state.changed();
        Ok(())
    }

    // ----- directories -----

    pub async fn opendir(&self, inode: u64) -> VfsResult<u64> {
        let attr = self.meta.getattr(inode).await.map_err(errno)?;
        if attr.kind != NodeType::Dir {
            return Err(libc::ENOTDIR);
        }
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        self.handles.lock().unwrap().insert(
            fh,
            Arc::new(Handle::Dir {
                inode,
                page: tokio::sync::Mutex::new(DirPage::default()),
            }),
        );
        Ok(fh)
    }

    /// Entries after FUSE `offset` (0 = start, which adds "." and "..");
    /// `fill` takes entries until it returns false (the kernel's buffer is full).
    pub async fn readdir<F>(&self, fh: u64, offset: u64, mut fill: F) -> VfsResult<()>
    where
        F: FnMut(&ListedEntry) -> bool,
    {
        let handle = self.file_handle(fh)?;
        let Handle::Dir { inode, page } = &*handle else {
            return Err(libc::ENOTDIR);
        };
        let inode = *inode;
        if offset < 2 {
            let dir = self.meta.getattr(inode).await.map_err(errno)?;
            if offset == 0 {
                let dot = ListedEntry {
                    offset: 1,
                    name: b".".to_vec(),
                    attr: dir.clone(),
                };
                if !fill(&dot) {
                    return Ok(());
                }
            }
            let parent = self
                .meta
                .getattr(if dir.parent == 0 { inode } else { dir.parent })
                .await
                .unwrap_or_else(|_| dir.clone());
            let dotdot = ListedEntry {
                offset: 2,
                name: b"..".to_vec(),
                attr: parent,
            };
            if !fill(&dotdot) {
                return Ok(());
            }
        }
        let mut cookie = if offset <= 2 { 0 } else { offset };
        let mut page = page.lock().await;
        loop {
            if cookie < page.after {
                // a seek backwards (rewinddir): the cached page does not cover it
                page.entries.clear();
            }
            page.entries.retain(|e| e.cookie > cookie);
            if page.entries.is_empty() {
                let entries = self
                    .meta
                    .readdirplus(inode, cookie, 500)
                    .await
                    .map_err(errno)?;
                if entries.is_empty() {
                    return Ok(());
                }
                page.after = cookie;
                page.entries = entries;
            }
            let entries = std::mem::take(&mut page.entries);
            for (i, e) in entries.iter().enumerate() {
                let listed = ListedEntry {
                    offset: e.cookie,
                    name: e.name.clone(),
                    attr: self.overlay(e.attr.clone()).await,
                };
                if !fill(&listed) {
                    // the kernel's buffer is full; keep the rest for the next call
                    page.entries = entries[i..].to_vec();
                    return Ok(());
                }
                cookie = e.cookie;
            }
        }
    }

    pub fn releasedir(&self, fh: u64) {
        self.handles.lock().unwrap().remove(&fh);
    }

    // ----- volume, xattrs -----

    pub async fn statfs(&self) -> VfsResult<Statfs> {
        self.meta.statfs(self.config.root).await.map_err(errno)
    }

    pub async fn getxattr(&self, inode: u64, name: &[u8]) -> VfsResult<Vec<u8>> {
        if acl::is_acl(name) {
            if !self.volume.enable_acl {
                // no ACL beyond the mode is kept (see acl.rs)
                return Err(libc::ENODATA);
            }
            let entries = self
                .meta
                .get_acl(inode, acl::kind_of(name))
                .await
                .map_err(errno)?;
            return Ok(acl::to_xattr(&entries));
        }
        self.meta.getxattr(inode, name).await.map_err(errno)
    }

    pub async fn setxattr(
        &self,
        inode: u64,
        name: &[u8],
        value: &[u8],
        flags: i32,
    ) -> VfsResult<()> {
        self.writable()?;
        if acl::is_acl(name) {
            return self.set_acl(inode, name, value).await;
        }
        self.meta
            .setxattr(inode, name, value, flags)
            .await
            .map_err(errno)
    }

    /// An ACL written as an xattr (the kernel checked that the caller owns
    /// the node): stored when the volume has ACLs on; else a minimal access
    /// ACL sets the mode's permission bits and anything more is not
    /// supported.
    async fn set_acl(&self, inode: u64, name: &[u8], value: &[u8]) -> VfsResult<()> {
        if self.volume.enable_acl {
            let entries = acl::parse(value).ok_or(libc::EINVAL)?;
            self.meta
                .set_acl(inode, acl::kind_of(name), Some(&entries))
                .await
                .map_err(errno)?;
            self.forget_attributes(inode);
            return Ok(());
        }
        let Some(perm) = acl::minimal_acl_mode(value).filter(|_| name == acl::ACCESS) else {
            return Err(libc::EOPNOTSUPP);
        };
        let attr = self.meta.getattr(inode).await.map_err(errno)?;
        let mode = (attr.mode & !0o777) | perm;
        self.setattr(inode, Some(mode), None, None, None, None, None)
            .await?;
        // the kernel keeps the old mode otherwise: it does not know an
        // xattr changed it
        self.forget_attributes(inode);
        Ok(())
    }

    pub async fn listxattr(&self, inode: u64) -> VfsResult<Vec<Vec<u8>>> {
        // with ACLs on, the procedure lists the ACLs a node has
        self.meta.listxattr(inode).await.map_err(errno)
    }

    pub async fn removexattr(&self, inode: u64, name: &[u8]) -> VfsResult<()> {
        self.writable()?;
        if acl::is_acl(name) {
            if !self.volume.enable_acl {
                // there is none beyond the mode to remove
                return Ok(());
            }
            return self
                .meta
                .set_acl(inode, acl::kind_of(name), None)
                .await
                .map_err(errno);
        }
        self.meta.removexattr(inode, name).await.map_err(errno)
    }

    // ----- compaction -----

    /// Queues chunk `chunk` of `inode` for a background compaction (once).
    fn queue_compaction(&self, inode: u64, chunk: u32) {
        if self.config.read_only || self.config.compact_at == 0 {
            return;
        }
        if self
            .compactions
            .queued
            .lock()
            .unwrap()
            .insert((inode, chunk))
        {
            let _ = self.compactions.tx.send((inode, chunk));
        }
    }

    /// The queue of background compactions, for the job that runs them.
    pub fn take_compaction_queue(
        &self,
    ) -> Option<tokio::sync::mpsc::UnboundedReceiver<(u64, u32)>> {
        self.compactions.rx.lock().unwrap().take()
    }

    /// Compacts one chunk of a file now (a queued one: it leaves the queue).
    pub async fn compact(&self, inode: u64, chunk: u32) -> VfsResult<Compacted> {
        self.writable()?;
        let result = self.compact_now(inode, chunk).await;
        self.compactions
            .queued
            .lock()
            .unwrap()
            .remove(&(inode, chunk));
        result
    }

    async fn compact_now(&self, inode: u64, chunk: u32) -> VfsResult<Compacted> {
        let file = self.open_file(inode);
        let tier = match &file {
            Some(f) => f.state.lock().await.tier,
            None => self.meta.getattr(inode).await.map_err(errno)?.tier,
        };
        let target = self.target(tier);
        let done =
            compact::compact_chunk(&target, inode, chunk, || self.slice_ids.next(&self.meta))
                .await?;
        if let (Compacted::Done { .. }, Some(f)) = (done, file) {
            // the slice lists kept here name the old slices
            f.state.lock().await.changed();
        }
        Ok(done)
    }

    /// Commits every open file's pending writes (unmount, shutdown).
    pub async fn flush_all(&self) {
        let files: Vec<Arc<OpenFile>> = self.files.lock().unwrap().values().cloned().collect();
        for file in files {
            if let Err(e) = self.flush_file(&file, true).await {
                tracing::error!(
                    "inode {}: pending writes lost at unmount: errno {e}",
                    file.inode
                );
            }
        }
    }
}
