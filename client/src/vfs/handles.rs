//! Open files and handles: the state a mount keeps of each file open here
//! (its pending writes, length and slice lists, under one lock: the
//! ordering rule below), the handle table, and id ranges reserved from the
//! database.
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use super::writer::Writer;
use super::{Vfs, VfsResult};
use crate::meta::{Attr, DirEntry, Epoch};
use crate::ns::attrs::{AttrCache, Ticket};

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
pub(super) struct FileState {
    /// Length as this mount knows it: from open, grown by our writes.
    pub(super) length: u64,
    /// Slices of chunks read since open (open-to-close consistency).
    pub(super) chunks: HashMap<u32, Arc<Vec<crate::meta::SliceRow>>>,
    /// 0 when opened, then a new number from one mount-wide counter at
    /// every change of the file made through this mount: equal non-zero
    /// generations mean "no change", even across a release and a new open.
    pub(super) generation: u64,
    pub(super) writer: Writer,
    /// The epoch the oldest commit of this file not yet synced was sent in.
    pub(super) unsynced: Option<Epoch>,
    /// Its last name went away while open: release it at last close.
    pub(super) unlinked: bool,
    /// Its storage tier: new blocks go to that tier's class.
    pub(super) tier: u8,
    /// Slices committed per chunk since it was last considered for compaction.
    pub(super) commits: HashMap<u32, usize>,
    /// Locked through this mount while open: closes drop their owner's locks.
    pub(super) locked: bool,
    /// The handle each lock owner last locked the file through. An open
    /// file description's own locks (OFD locks, flock) have the handle's
    /// owner; the kernel sends no unlock for OFD locks at the last close,
    /// so the release of a handle drops the locks of the owners whose last
    /// lock went through it (a process's POSIX locks went at its close of
    /// the descriptor already: its flush drops them).
    pub(super) lock_handles: HashMap<u64, u64>,
    /// Its locks went with this mount's session (ended as dead by another
    /// mount while this one was cut off): its handles get EIO until the
    /// file is closed, as NFS does when a lease is lost, so that nobody
    /// writes on under a lock that another process may now hold.
    pub(super) locks_lost: bool,
    /// The space limits over the file as last asked, and when.
    pub(super) space_limit: Option<(std::time::Instant, crate::meta::SpaceLimit)>,
    /// Its attributes as this mount last read or committed them, and the
    /// attribute cache's ticket of then: what a deferred attribute change
    /// is shown over while the cache forgot nothing of the file since
    /// (another mount's change, this mount's link, unlink or xattr), and
    /// what a read that raced a commit is corrected with.
    pub(super) seen: Option<(Attr, Ticket)>,
    /// Made by this mount's create, with no xattr yet, at this ticket of
    /// the attribute cache: while the cache forgot nothing of the file
    /// since, it has no xattr (the kernel asks for `security.capability`
    /// before the first write of every file).
    pub(super) xattr_free: Option<Ticket>,
}

/// The counter of [`FileState::generation`]s.
static FILE_GENERATIONS: AtomicU64 = AtomicU64::new(1);

fn next_generation() -> u64 {
    FILE_GENERATIONS.fetch_add(1, Ordering::Relaxed)
}

impl FileState {
    /// `attr` (as the database or a cache has it) as this mount shows it:
    /// grown by writes not committed yet (or committed while `attr` was on
    /// its way), with the attribute change that waits for their commit.
    pub(super) fn view(&self, mut attr: Attr, cache: &AttrCache) -> Attr {
        attr.used += self.length.saturating_sub(attr.length);
        attr.length = attr.length.max(self.length);
        if let Some((seen, _)) = self.fresh_seen(cache).filter(|(a, _)| a.ctime > attr.ctime) {
            // read before a commit of this mount that made a deferred
            // change (and forgot it): the commit's answer is newer, and
            // nothing changed the file since
            attr.mode = seen.mode;
            attr.uid = seen.uid;
            attr.gid = seen.gid;
            attr.atime = seen.atime;
            attr.mtime = seen.mtime;
            attr.ctime = seen.ctime;
        }
        self.writer.show_deferred(attr)
    }

    /// What this mount saw of the file last, while the cache forgot
    /// nothing of it since (no change made or read in the change log).
    pub(super) fn fresh_seen(&self, cache: &AttrCache) -> Option<&(Attr, Ticket)> {
        self.seen
            .as_ref()
            .filter(|(a, t)| !cache.forgot_since(a.inode, *t))
    }

    /// Keeps `attr`, read or committed with the cache at `ticket` (nothing
    /// of the file forgotten between the read and the ticket), as what
    /// this mount saw of the file last, unless a fresh one is newer.
    pub(super) fn saw(&mut self, attr: Attr, ticket: Ticket, cache: &AttrCache) {
        if self
            .fresh_seen(cache)
            .is_none_or(|(a, _)| a.ctime <= attr.ctime)
        {
            self.seen = Some((attr, ticket));
        }
    }

    /// EIO once the file's locks were lost with the session (see
    /// `locks_lost`): its handles are not used on until the file is closed.
    pub(super) fn usable(&self) -> VfsResult<()> {
        match self.locks_lost {
            true => Err(libc::EIO),
            false => Ok(()),
        }
    }

    /// Notes a commit of a change of the file sent in `sent_in` (or
    /// earlier): the next fsync, and in 'fsync' durability mode the next
    /// close, makes it durable or reports it lost.
    pub(super) fn committed_in(&mut self, sent_in: Epoch) {
        self.unsynced.get_or_insert(sent_in);
    }

    /// Notes a change of the file's data or length: cached slice lists go.
    pub(super) fn changed(&mut self) {
        self.generation = next_generation();
        self.chunks.clear();
    }
}

pub(super) struct OpenFile {
    pub(super) inode: u64,
    /// Handles open on it; changed only under `Vfs::files`' lock, so that
    /// the last release and a new open agree on whether it is still there.
    pub(super) opens: AtomicU32,
    /// Made here under a lease and refused at its commit: kept in
    /// `/lost+found` (`ns::lost_found`), its writes committed there, and
    /// every fsync and close of it answers EIO. (Not in `state`: a commit
    /// that finds it out may run for a caller holding that.)
    pub(super) create_lost: AtomicBool,
    pub(super) state: tokio::sync::Mutex<FileState>,
}

pub(super) enum Handle {
    /// An open `.jfs.control`: the answer to the last request written.
    Control { answer: tokio::sync::Mutex<Vec<u8>> },
    File {
        file: Arc<OpenFile>,
        last_read_end: AtomicU64,
    },
    Dir {
        inode: u64,
        page: tokio::sync::Mutex<DirPage>,
        /// The mount's lost commits this handle has reported (see
        /// [`crate::meta::Meta::sync_dir`]).
        losses_seen: AtomicU64,
        /// The directory as it was opened: what fstat of the handle shows
        /// once the directory is gone (removed or replaced by a rename), with
        /// no link, as Linux shows it.
        opened_as: Attr,
    },
}

/// Entries of a directory handle fetched but not yet given to the kernel
/// (every entry after cookie `after` up to the last one held); the names
/// read so far while the directory is read from its start.
#[derive(Default)]
pub(super) struct DirPage {
    pub(super) after: u64,
    pub(super) entries: Vec<DirEntry>,
    /// The attribute cache's ticket when `entries` were fetched: one
    /// changed since (here, or by another mount as the change log says) is
    /// not given to the kernel, which would keep its name and attributes.
    pub(super) fetched: Option<crate::ns::attrs::Ticket>,
    pub(super) listing: Option<ListingRead>,
    /// Past its first page, a listing shows no entry with a cookie newer
    /// than this (`jfs.listing_ceiling`, asked then; None: not yet, or the
    /// database cannot say): entries renamed away and back, each time with
    /// a new cookie, cannot keep it going for ever.
    pub(super) ceiling: Option<u64>,
}

/// A directory read from its start, page after page, to be kept whole in
/// the mount's listings once its end is reached (`listings`).
pub(super) struct ListingRead {
    pub(super) started: crate::ns::listings::Started,
    pub(super) parent: u64,
    pub(super) names: Vec<Vec<u8>>,
    /// The cookie the next page must start from for the pages to join.
    pub(super) next: u64,
}

impl Vfs {
    /// Directory `inode` as a handle open on it here was opened, if one is.
    pub(super) fn open_dir_attr(&self, inode: u64) -> Option<Attr> {
        let handles = self.handles.lock().unwrap();
        handles.values().find_map(|h| match &**h {
            Handle::Dir {
                inode: at,
                opened_as,
                ..
            } if *at == inode => Some(opened_as.clone()),
            _ => None,
        })
    }

    pub(super) fn open_file(&self, inode: u64) -> Option<Arc<OpenFile>> {
        self.files.lock().unwrap().get(&inode).cloned()
    }

    /// Inodes open in this mount (for unlink/rename to keep them alive).
    pub(super) fn open_inodes(&self) -> Vec<i64> {
        self.files
            .lock()
            .unwrap()
            .keys()
            .map(|&i| i as i64)
            .collect()
    }

    pub(super) fn file_handle(&self, fh: u64) -> VfsResult<Arc<Handle>> {
        self.handles
            .lock()
            .unwrap()
            .get(&fh)
            .cloned()
            .ok_or(libc::EBADF)
    }

    /// Registers a new handle; returns its number.
    pub(super) fn add_handle(&self, handle: Handle) -> u64 {
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        self.handles.lock().unwrap().insert(fh, Arc::new(handle));
        fh
    }

    /// Adds an open of the file `inode` (length and tier as just read),
    /// making its state when it was not open here.
    pub(super) fn open_file_state(&self, inode: u64, length: u64, tier: u8) -> Arc<OpenFile> {
        let mut files = self.files.lock().unwrap();
        let file = files
            .entry(inode)
            .or_insert_with(|| {
                Arc::new(OpenFile {
                    inode,
                    opens: AtomicU32::new(0),
                    create_lost: AtomicBool::new(false),
                    state: tokio::sync::Mutex::new(FileState {
                        length,
                        chunks: HashMap::new(),
                        generation: 0,
                        writer: Writer::default(),
                        unsynced: None,
                        unlinked: false,
                        tier,
                        commits: HashMap::new(),
                        locked: false,
                        lock_handles: HashMap::new(),
                        locks_lost: false,
                        space_limit: None,
                        seen: None,
                        xattr_free: None,
                    }),
                })
            })
            .clone();
        file.opens.fetch_add(1, Ordering::Relaxed);
        file
    }

    /// Drops one open of `file`: the last one forgets it (caller holds no
    /// lock of it). Returns whether it was the last.
    pub(super) fn close_file(&self, file: &Arc<OpenFile>) -> bool {
        let mut files = self.files.lock().unwrap();
        let last = file.opens.fetch_sub(1, Ordering::Relaxed) == 1;
        if last && files.get(&file.inode).is_some_and(|f| Arc::ptr_eq(f, file)) {
            files.remove(&file.inode);
        }
        last
    }
}
