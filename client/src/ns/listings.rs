//! Complete directory listings: the names of directories this mount knows
//! whole (made here, or read to the end), so that a lookup of a missing
//! name is answered here and a create costs one round trip, not two.
//!
//! A listing only ever answers "absent", and only while it is exact: it
//! holds every name of its directory, and may hold more (a name removed by
//! another mount stays until this mount removes it itself: an extra name
//! costs a round trip, a missing one would hide a file). Names added by
//! this mount are added as it adds them; names other mounts add come from
//! the change log (`changes`), applied by the poller before it reports a
//! successful poll. Listings answer only while the log is being read (the
//! last poll succeeded within [`TRUSTED_FOR`]); after a gap in reading
//! longer than [`GAP_FORGETS`] every listing is dropped.
//!
//! A listing read from the database in pages may miss a name added while
//! it was read: each addition bumps its directory's generation, and a
//! listing whose directory changed since its reading started is not kept.
//!
//! The trash (`/.trash` and its hours) is filled by procedures on behalf of
//! this mount without a change this mount reads, so it is never listed, and
//! `/.trash` itself is never answered absent.
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Names kept over all listings at most; past it, every listing is dropped.
const MAX_NAMES: usize = 500_000;

/// A directory with more entries than this is not listed.
pub const MAX_LISTED: usize = 100_000;

/// Directories whose last change is remembered (for listings being read);
/// past it, the memory is dropped and listings started before are refused.
const MAX_TOUCHED: usize = 65_536;

/// How long after the last successful read of the change log a listing
/// still answers.
const TRUSTED_FOR: Duration = Duration::from_secs(1);

/// A pause in reading the change log this long drops every listing (the
/// log may have been pruned past what this mount read).
const GAP_FORGETS: Duration = Duration::from_secs(10);

/// The trash's inode (sql/trash.sql `_trash_inode`) and its name in the root.
pub const TRASH_INODE: u64 = 9_223_372_032_828_243_968;
const TRASH_NAME: &[u8] = b".trash";

/// Whether entry `name` of `dir` is the trash, which procedures make on
/// this mount's behalf without telling it: never known to be missing.
pub fn is_trash_entry(dir: u64, name: &[u8]) -> bool {
    dir == 1 && name == TRASH_NAME
}

/// When the change logs were last read (one per database of the mount:
/// a shard each): what listings and the attribute cache answer by while
/// they are followed. Their freshness is the oldest one's.
pub struct LogFreshness(Mutex<Vec<Option<Instant>>>);

impl Default for LogFreshness {
    /// One log (a volume without shards).
    fn default() -> Self {
        LogFreshness::of_logs(1)
    }
}

impl LogFreshness {
    /// The freshness of `logs` change logs, none read yet.
    pub fn of_logs(logs: usize) -> Self {
        LogFreshness(Mutex::new(vec![None; logs.max(1)]))
    }

    /// Whether every log was read within [`TRUSTED_FOR`].
    pub fn fresh(&self) -> bool {
        self.read_within(TRUSTED_FOR)
    }

    /// Whether every log was read within `age`.
    pub fn read_within(&self, age: Duration) -> bool {
        (self.0.lock().unwrap().iter()).all(|t| t.is_some_and(|t| t.elapsed() < age))
    }

    /// Log `log` was read; returns whether a gap of [`GAP_FORGETS`] or
    /// more came before (the log may have been pruned past what was read:
    /// what was kept by it must go).
    pub fn read(&self, log: usize) -> bool {
        let mut last = self.0.lock().unwrap();
        let gap = last[log].is_some_and(|t| t.elapsed() >= GAP_FORGETS);
        last[log] = Some(Instant::now());
        gap
    }

    /// Reading log `log` failed: nothing is fresh until it works again.
    pub fn failed(&self, log: usize) {
        self.0.lock().unwrap()[log] = None;
    }
}

/// Where a listing's reading started (see [`Listings::start`]).
#[derive(Clone, Copy, Debug)]
pub struct Started(u64);

#[derive(Default)]
struct Inner {
    dirs: HashMap<u64, HashSet<Vec<u8>>>,
    names: usize,
    /// Bumped by every addition of a name anywhere.
    generation: u64,
    /// Directory -> generation of the last name added to it.
    touched: HashMap<u64, u64>,
    /// Listings started before this generation are refused (`touched` was cleared).
    floor: u64,
}

pub struct Listings {
    /// Off when the change log is not read (`--changes-poll 0`) or names are not cached.
    enabled: bool,
    inner: Mutex<Inner>,
    /// When the change log was last read (shared with the attribute cache).
    log: Arc<LogFreshness>,
}

impl Listings {
    pub fn new(enabled: bool, log: Arc<LogFreshness>) -> Listings {
        Listings {
            enabled,
            inner: Mutex::new(Inner::default()),
            log,
        }
    }

    /// Marks the start of reading a listing (or of making a directory).
    pub fn start(&self) -> Started {
        Started(self.inner.lock().unwrap().generation)
    }

    /// Keeps `names` as the whole of directory `dir` (whose parent is
    /// `parent`), unless a name was added to it since `started`. Returns
    /// whether it was kept.
    pub fn install<I>(&self, dir: u64, parent: u64, started: Started, names: I) -> bool
    where
        I: IntoIterator<Item = Vec<u8>>,
    {
        if !self.enabled || dir == TRASH_INODE || parent == TRASH_INODE {
            return false;
        }
        let mut inner = self.inner.lock().unwrap();
        let changed =
            started.0 < inner.floor || inner.touched.get(&dir).is_some_and(|&g| g > started.0);
        if changed {
            return false;
        }
        let names: HashSet<Vec<u8>> = names.into_iter().collect();
        if inner.names + names.len() > MAX_NAMES {
            inner.dirs.clear();
            inner.names = 0;
        }
        inner.names += names.len();
        if let Some(old) = inner.dirs.insert(dir, names) {
            inner.names -= old.len();
        }
        true
    }

    /// Whether `name` is known not to exist in `dir`.
    pub fn absent(&self, dir: u64, name: &[u8]) -> bool {
        if !self.enabled || is_trash_entry(dir, name) {
            return false;
        }
        let inner = self.inner.lock().unwrap();
        self.log.fresh()
            && inner
                .dirs
                .get(&dir)
                .is_some_and(|names| !names.contains(name))
    }

    /// `name` now exists in `dir` (made here, or by another mount).
    pub fn added(&self, dir: u64, name: &[u8]) {
        if !self.enabled {
            return;
        }
        let mut inner = self.inner.lock().unwrap();
        inner.generation += 1;
        let generation = inner.generation;
        if inner.touched.len() >= MAX_TOUCHED {
            inner.touched.clear();
            inner.floor = generation;
        }
        inner.touched.insert(dir, generation);
        let grew = inner
            .dirs
            .get_mut(&dir)
            .is_some_and(|names| names.insert(name.to_vec()));
        if grew {
            inner.names += 1;
        }
    }

    /// This mount removed `name` from `dir`.
    pub fn removed(&self, dir: u64, name: &[u8]) {
        if !self.enabled {
            return;
        }
        let mut inner = self.inner.lock().unwrap();
        let shrunk = inner
            .dirs
            .get_mut(&dir)
            .is_some_and(|names| names.remove(name));
        if shrunk {
            inner.names -= 1;
        }
    }

    /// Drops every listing (their directories changed in ways not followed).
    pub fn forget_all(&self) {
        let mut inner = self.inner.lock().unwrap();
        inner.dirs.clear();
        inner.names = 0;
        inner.generation += 1;
        inner.floor = inner.generation;
        inner.touched.clear();
    }

    /// Names kept, over all listings.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.inner.lock().unwrap().names
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<Vec<u8>> {
        list.iter().map(|n| n.as_bytes().to_vec()).collect()
    }

    fn listed(dir: u64, list: &[&str]) -> Listings {
        let l = Listings::new(true, Default::default());
        l.log.read(0);
        assert!(l.install(dir, 1, l.start(), names(list)));
        l
    }

    #[test]
    fn answers_only_for_missing_names_of_listed_directories() {
        let l = listed(5, &["a", "b"]);
        assert!(l.absent(5, b"c"));
        assert!(!l.absent(5, b"a"));
        assert!(!l.absent(6, b"c"), "directory 6 is not listed");
    }

    #[test]
    fn additions_and_removals_keep_the_listing_whole() {
        let l = listed(5, &["a"]);
        l.added(5, b"c");
        assert!(!l.absent(5, b"c"));
        l.removed(5, b"a");
        assert!(l.absent(5, b"a"));
        assert_eq!(l.len(), 1);
    }

    #[test]
    fn a_listing_read_while_its_directory_grew_is_not_kept() {
        let l = Listings::new(true, Default::default());
        l.log.read(0);
        let started = l.start();
        l.added(5, b"late");
        assert!(!l.install(5, 1, started, names(&["a"])));
        assert!(!l.absent(5, b"late"));
        // another directory's addition does not matter
        let started = l.start();
        l.added(6, b"x");
        assert!(l.install(5, 1, started, names(&["a", "late"])));
        assert!(l.absent(5, b"other"));
    }

    #[test]
    fn nothing_is_answered_unless_the_log_is_read() {
        let l = Listings::new(true, Default::default());
        assert!(l.install(5, 1, l.start(), names(&["a"])));
        assert!(!l.absent(5, b"b"), "never polled");
        l.log.read(0);
        assert!(l.absent(5, b"b"));
        l.forget_all();
        l.log.failed(0);
        assert!(!l.absent(5, b"b"));
        l.log.read(0);
        assert!(!l.absent(5, b"b"), "a failed poll dropped the listing");
    }

    #[test]
    fn over_shards_the_caches_answer_only_while_every_log_is_read() {
        let log = LogFreshness::of_logs(2);
        assert!(!log.fresh(), "neither read");
        log.read(0);
        assert!(!log.fresh(), "shard 1's log never read");
        log.read(1);
        assert!(log.fresh());
        log.failed(1);
        assert!(!log.fresh(), "shard 1's log failed");
        assert!(!log.read_within(Duration::from_secs(3600)));
        log.read(1);
        assert!(log.read_within(Duration::from_secs(3600)));
    }

    #[test]
    fn the_trash_is_never_listed_or_answered() {
        let l = listed(1, &["a"]);
        assert!(!l.absent(1, TRASH_NAME));
        assert!(!l.install(TRASH_INODE, 1, l.start(), names(&[])));
        assert!(!l.install(7, TRASH_INODE, l.start(), names(&[])));
    }

    #[test]
    fn disabled_keeps_nothing() {
        let l = Listings::new(false, Default::default());
        l.log.read(0);
        assert!(!l.install(5, 1, l.start(), names(&["a"])));
        assert!(!l.absent(5, b"b"));
    }

    #[test]
    fn forgetting_all_refuses_listings_started_before() {
        let l = Listings::new(true, Default::default());
        l.log.read(0);
        let started = l.start();
        l.forget_all();
        assert!(!l.install(5, 1, started, names(&[])));
    }
}
