//! The namespace layer: the mount's view of names and nodes, between the
//! operations (`vfs/`, and through them the control file, `direct/` and
//! the gateway) and PostgreSQL. [`Namespace`] is the one road from the
//! operations to the metadata procedures: it owns the connection pool
//! (`Meta`), the caches of attributes and entries (`attrs`) and of whole
//! listings (`listings`), the change-log follower (`changes`), lookups
//! that read ahead (`lookahead`), the id ranges (`ids`) and the directory
//! leases: one lease's pure state machine (`lease`), the mount's table of
//! them (`leases`) and their keeper, which answers and commits what a
//! lease lets this mount answer (`keeper`, `lease_commit`).
//!
//! The contract with the operations, on one page:
//! - **Nodes** ([`nodes`]): every procedure that names a node is a method
//!   here (getattr, setattr, xattrs, ACLs, locks, ranges, readlink, atime,
//!   limits), and each one first settles that node: a file this mount made
//!   under a lease and has not committed yet is committed before
//!   PostgreSQL is asked about it (the rule no operation has to remember).
//!   [`Namespace::attr_of`] and [`Namespace::lookup`] answer from the
//!   leases and the caches first.
//! - **Directories** ([`entries`]): an operation on a directory's entries
//!   begins by saying so ([`keeper`]): `create_leased`/`unlink_leased`
//!   (answered here under a lease, or None: go to PostgreSQL), then
//!   `create_begins`, `unlink_begins`, `make_begins` (a mkdir, symlink or
//!   device node, the lease kept) or `settle_dir` (anything else: the lease
//!   committed and given up). Each returns a guard ([`InDir`]) that the
//!   procedures changing or listing the directory's entries take as an
//!   argument (mknod, link, unlink, rmdir, rename, readdirplus, rmr, clone):
//!   the types keep the rule. `created_directly`/`unlinked_directly` report
//!   what went through PostgreSQL (runs of them earn a lease).
//! - **Data** (the write path, `vfs::writer`): the first commit of a file
//!   made under a lease goes with its creation
//!   ([`Namespace::create_with_data`]); a read, an fsync, a write past the
//!   first chunk and the retry of a refused creation settle the file
//!   themselves (`settle_created`), because a commit that carries the
//!   creation must not wait for its own lease's gate.
//! - **Caches**: [`Namespace::attrs`] and [`Namespace::listings`] are read
//!   by the operations and filled with tickets (a reply older than a change
//!   is not kept); the change-log follower ([`changes`]) keeps them exact.
//! - **What it asks of the mount above** is the [`Mount`] trait: whether a
//!   file is open, what the kernel is to forget, a file unlinked while open
//!   here, a create lost.
//!
//! - **Shards** ([`parts`]): a volume over several databases gives the
//!   mount one part per shard (pool, session, id ranges, change log); a
//!   call that names a node goes to the part its inode names
//!   ([`Namespace::meta_of`]), a new node's inode comes from its parent's
//!   part, and what crosses parts (rename, link, clone, copy) is EXDEV.
//!
//! Procedures that name no node of the namespace (the session, statfs, the
//! journal, maintenance) go through [`Namespace::meta_of_mount`] (the root
//! database) or each of [`Namespace::parts`].
pub mod attrs;
pub mod changes;
pub mod entries;
pub mod ids;
pub mod keeper;
pub mod lease;
mod lease_commit;
pub mod leases;
pub mod listings;
pub mod lookahead;
mod lost_found;
pub mod nodes;
pub mod parts;

use std::sync::{Arc, Weak};
use std::time::Duration;

use futures_util::future::BoxFuture;

use crate::meta::Meta;
use attrs::AttrCache;
use leases::Leases;
use listings::{Listings, LogFreshness};
use parts::{Part, Parts};

pub use keeper::{CreateInFlight, LeasedUnlink};
pub use leases::{DirOp, InDir, MakeInDir, LEASE_WINDOW};

/// A result whose error is an errno value.
pub type NsResult<T> = Result<T, i32>;

/// The errno of a failed procedure call (logged unless it is one the
/// procedure answered).
pub fn errno(e: crate::meta::MetaError) -> i32 {
    if !matches!(e, crate::meta::MetaError::Errno(_)) {
        tracing::error!("{e}");
    }
    e.errno()
}

/// The volume's root directory's inode.
pub const VOLUME_ROOT: u64 = 1;

/// Inode and slice ids reserved from the database in one call.
const ID_BATCH: i32 = 1000;

/// The session id of a mount that has none (a mount of a hot standby).
pub const NO_SESSION: i64 = 0;

/// What the kernel is to forget (volume inode numbers: the mount maps
/// them to the kernel's).
pub enum Forget<'a> {
    /// The entry `name` of directory `parent`, asked while answering a
    /// request: waited for a moment only (the kernel may hold the
    /// directory's lock until that request is answered).
    Entry { parent: u64, name: &'a [u8] },
    /// The same from a thread that answers no request: waited for.
    EntryNow { parent: u64, name: &'a [u8] },
    /// The attributes of an inode.
    Attributes { inode: u64 },
    /// The attributes and the cached pages of a file.
    Data { inode: u64 },
}

/// What the namespace layer asks of the mount above it (`Vfs`).
pub trait Mount: Send + Sync {
    /// Whether `inode` is open here.
    fn is_open(&self, inode: u64) -> bool;
    /// The inodes open here (a commit's unlinks and removals by other
    /// mounts keep them alive).
    fn open_inodes(&self) -> Vec<i64>;
    /// `inode`, open here, lost its last name: kept until closed.
    fn unlinked_while_open(&self, inode: u64) -> BoxFuture<'_, ()>;
    /// Makes the kernel forget `what`.
    fn forget_in_kernel(&self, what: Forget<'_>);
    /// The metadata server crashed or failed over: what the open files
    /// keep of their slices is forgotten; their inodes.
    fn forget_open_files(&self) -> BoxFuture<'_, Vec<u64>>;
    /// The create of `inode`, answered under a lease, was refused at its
    /// commit (its node is kept in `/lost+found`): if it is open here,
    /// every later fsync and close of it answers EIO.
    fn create_lost(&self, inode: u64);
}

/// How the namespace caches and reads ahead (from the mount's options).
pub struct Settings {
    /// How long attributes are kept (`--attr-cache`).
    pub attr_ttl: Duration,
    /// Whether names are cached (`--entry-cache` above 0).
    pub keep_names: bool,
    /// Whether the change log is followed (`--changes-poll` above 0).
    pub follow_changes: bool,
    /// `setting.skip_dir_mtime_ns` of the volume.
    pub skip_dir_mtime_ns: i64,
    /// Entries a lookup in a directory being walked reads ahead.
    pub lookup_ahead: u32,
}

/// The mount's namespace: see the module's documentation.
pub struct Namespace {
    /// The databases: one per shard of the volume, the root's first.
    parts: Parts,
    mount: Weak<dyn Mount>,
    pub attrs: AttrCache,
    pub listings: Listings,
    /// Directories whose unlinks and creates this mount answers and
    /// commits in batches.
    leases: Leases,
    /// Which directories callers are walking name by name.
    walks: lookahead::Walks,
    lookup_ahead: u32,
    follow_changes: bool,
    /// When the change logs were last read: what both caches answer by.
    log: Arc<LogFreshness>,
}

impl Namespace {
    /// The namespace of a mount of the databases `parts` (each with the
    /// mount's session there, or [`NO_SESSION`]), which `mount` is (a weak
    /// reference: the mount owns this).
    pub fn new(parts: Parts, settings: Settings, mount: Weak<dyn Mount>) -> Namespace {
        let log = Arc::new(LogFreshness::of_logs(parts.all().len()));
        let keep_attrs = settings.follow_changes && !settings.attr_ttl.is_zero();
        Namespace {
            attrs: AttrCache::new(
                settings.attr_ttl,
                keep_attrs,
                settings.keep_names,
                settings.skip_dir_mtime_ns,
                log.clone(),
            ),
            listings: Listings::new(settings.follow_changes && settings.keep_names, log.clone()),
            log,
            parts,
            mount,
            leases: Leases::default(),
            walks: lookahead::Walks::default(),
            lookup_ahead: settings.lookup_ahead,
            follow_changes: settings.follow_changes,
        }
    }

    /// The metadata procedures that name no node of the namespace (the
    /// session, the journal, maintenance): the root database's.
    pub fn meta_of_mount(&self) -> &Meta {
        &self.parts.root().meta
    }

    /// The database that holds node (or slice) `id`: for procedures of a
    /// file the caller settled (its slices, its commits' durability).
    pub fn meta_of(&self, id: u64) -> &Meta {
        &self.parts.of(id).meta
    }

    /// The part that holds node `inode`.
    fn part_of(&self, inode: u64) -> &Part {
        self.parts.of(inode)
    }

    /// The mount's databases, one per shard.
    pub fn parts(&self) -> &Parts {
        &self.parts
    }

    /// `a` and `b` are on one database, or the call that would join them
    /// answers EXDEV (as across file systems: `mv` and `cp` then copy).
    fn same_shard(&self, a: u64, b: u64) -> Result<(), crate::meta::MetaError> {
        match self.parts.same(a, b) {
            true => Ok(()),
            false => Err(crate::meta::MetaError::Errno(libc::EXDEV)),
        }
    }

    /// The mount above (None once it is gone).
    fn mount(&self) -> Option<Arc<dyn Mount>> {
        self.mount.upgrade()
    }

    /// The mount's session on the root database.
    pub fn sid(&self) -> i64 {
        self.parts.root().sid()
    }

    /// The mount's session on the database that holds `inode`.
    pub async fn sid_of(&self, inode: u64) -> i64 {
        let part = self.part_of(inode);
        // (a shard not reached yet has none until it is: a call with none
        // would fail there as the shard's calls do meanwhile)
        part.meta.open_within_retry().await;
        part.sid()
    }

    /// Whether this mount has a session (a mount of a hot standby has
    /// none: it writes nothing to the database).
    pub fn has_session(&self) -> bool {
        self.sid() != NO_SESSION
    }

    /// A new inode number for a node made in directory `parent` (of the
    /// parent's shard).
    pub async fn new_inode(&self, parent: u64) -> Result<u64, i32> {
        self.part_of(parent).new_inode().await
    }

    /// A new slice id for file `inode` (of the file's shard).
    pub async fn new_slice(&self, inode: u64) -> Result<u64, i32> {
        self.part_of(inode).new_slice().await
    }

    /// Whether `inode` is open in the mount.
    fn is_open(&self, inode: u64) -> bool {
        self.mount().is_some_and(|m| m.is_open(inode))
    }

    /// The inodes open in the mount.
    fn open_inodes(&self) -> Vec<i64> {
        self.mount().map(|m| m.open_inodes()).unwrap_or_default()
    }

    /// `inode` lost its last name: if open in the mount, kept until closed.
    async fn unlinked_while_open(&self, inode: u64) {
        if let Some(mount) = self.mount() {
            mount.unlinked_while_open(inode).await;
        }
    }

    /// Makes the kernel forget `what`.
    fn forget_in_kernel(&self, what: Forget<'_>) {
        if let Some(mount) = self.mount() {
            mount.forget_in_kernel(what);
        }
    }

    /// Whether the change log is followed.
    pub fn follows_changes(&self) -> bool {
        self.follow_changes
    }
}
