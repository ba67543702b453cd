//! Attributes by inode and names by (directory, name) that this mount saw,
//! answered to LOOKUP and GETATTR without PostgreSQL.
//!
//! The kernel keeps names and attributes itself for `--entry-cache` and
//! `--attr-cache`, but drops them often: a directory's attributes at each
//! create in it (and with `default_permissions` it asks for them again at
//! the next path walk), everything under memory pressure or `drop_caches`.
//! This cache answers those questions again. A copy answers for up to
//! `--attr-cache`, the staleness the kernel's own cache already allows; while
//! the change log is followed it answers as long as it is exact (the log
//! was read in the last second), up to [`FOLLOWED_FOR`]: other
//! mounts' changes are forgotten by the poller (`changes`), and this
//! mount's own changes keep it exact (a child made here moves its
//! directory's times exactly as the procedure did, `_dir_times_stale`;
//! anything else forgets what it changed or puts its result).
//!
//! A copy read from the database may be older than a change forgotten
//! while it was read: every forget is numbered, a read takes a [`Ticket`]
//! before it asks, and a copy is not kept when its inode or name was
//! forgotten after its ticket.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::listings::LogFreshness;
use crate::meta::Attr;
use crate::metrics;

/// Attributes kept at most, and names; past it, all are dropped.
const MAX_ENTRIES: usize = 131_072;

/// Nodes kept as known to have no xattrs (about 32 bytes each); past it,
/// all are dropped. More than attributes: `ls -l` of a directory of a
/// million entries lists them all before it asks each one.
const MAX_XATTR_FREE: usize = 1 << 20;

/// Forgets remembered (for reads in flight); past it, the memory is dropped
/// and reads started before are not kept.
const MAX_FORGOTTEN: usize = 65_536;

/// The longest a copy answers while the change log is followed (a bound on
/// what a change made behind the log, by hand in SQL, can leave stale).
const FOLLOWED_FOR: Duration = Duration::from_secs(300);

/// Where a read from the database started (see [`AttrCache::ticket`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ticket(u64);

#[derive(Default)]
struct Inner {
    attrs: HashMap<u64, (Attr, Instant)>,
    /// Names seen, to their inodes (only while the change log is followed).
    names: HashMap<(u64, Vec<u8>), u64>,
    /// Nodes a listing showed to have no xattrs, and when.
    xattr_free: HashMap<u64, Instant>,
    /// Bumped by every forget.
    seq: u64,
    /// Inode -> `seq` of its last forget.
    attr_forgot: HashMap<u64, u64>,
    /// (directory, name) -> `seq` of its last forget.
    name_forgot: HashMap<(u64, Vec<u8>), u64>,
    /// Reads with tickets before this are not kept (the forget memory was cleared).
    floor: u64,
}

impl Inner {
    fn bump(&mut self) -> u64 {
        self.seq += 1;
        if self.attr_forgot.len() + self.name_forgot.len() >= MAX_FORGOTTEN {
            self.attr_forgot.clear();
            self.name_forgot.clear();
            self.floor = self.seq;
        }
        self.seq
    }

    fn attr_forgot_since(&self, inode: u64, t: Ticket) -> bool {
        t.0 < self.floor || self.attr_forgot.get(&inode).is_some_and(|&s| s > t.0)
    }

    fn name_forgot_since(&self, dir: u64, name: &[u8], t: Ticket) -> bool {
        t.0 < self.floor
            || self
                .name_forgot
                .get(&(dir, name.to_vec()))
                .is_some_and(|&s| s > t.0)
    }

    fn forget(&mut self, inode: u64) {
        let seq = self.bump();
        self.attr_forgot.insert(inode, seq);
        self.attrs.remove(&inode);
        self.xattr_free.remove(&inode);
    }

    fn insert(&mut self, attr: &Attr) {
        if self.attrs.len() >= MAX_ENTRIES {
            self.attrs.clear();
        }
        self.attrs
            .insert(attr.inode, (attr.clone(), Instant::now()));
    }

    fn insert_name(&mut self, dir: u64, name: &[u8], inode: u64) {
        if self.names.len() >= MAX_ENTRIES {
            self.names.clear();
        }
        self.names.insert((dir, name.to_vec()), inode);
    }
}

pub struct AttrCache {
    ttl: Duration,
    /// Whether the change log is followed: copies answer past the TTL.
    follow: bool,
    /// Whether names are kept (the log is followed and names are cached).
    names: bool,
    /// `setting.skip_dir_mtime_ns`: how stale a directory's times may be
    /// before a new child updates them.
    skip_ns: i64,
    inner: Mutex<Inner>,
    /// When the change log was last read (shared with the listings).
    log: Arc<LogFreshness>,
}

impl AttrCache {
    /// `follow`: the change log is read (and attributes are cached);
    /// `names`: names may be kept too (it is read and names are cached).
    pub fn new(
        ttl: Duration,
        follow: bool,
        names: bool,
        skip_ns: i64,
        log: Arc<LogFreshness>,
    ) -> AttrCache {
        AttrCache {
            ttl,
            follow,
            names: follow && names,
            skip_ns,
            inner: Mutex::new(Inner::default()),
            log,
        }
    }

    pub fn keeps(&self) -> bool {
        self.follow || !self.ttl.is_zero()
    }

    /// Marks the start of a read from the database.
    pub fn ticket(&self) -> Ticket {
        Ticket(self.inner.lock().unwrap().seq)
    }

    fn answers(&self, seen: Instant) -> bool {
        let age = seen.elapsed();
        age < self.ttl || (self.follow && self.log.fresh() && age < FOLLOWED_FOR)
    }

    /// Whether the change log was read within `age` (what this mount knows
    /// of other mounts' changes is at most that old, where it follows the
    /// log).
    pub fn log_read_within(&self, age: Duration) -> bool {
        self.log.read_within(age)
    }

    /// Whether the inode's attributes were forgotten since `t` (a change
    /// made or learnt of since).
    pub fn forgot_since(&self, inode: u64, t: Ticket) -> bool {
        self.inner.lock().unwrap().attr_forgot_since(inode, t)
    }

    /// Whether entry `name` of `dir` was forgotten since `t` (made, removed
    /// or renamed since).
    pub fn entry_forgot_since(&self, dir: u64, name: &[u8], t: Ticket) -> bool {
        self.inner.lock().unwrap().name_forgot_since(dir, name, t)
    }

    /// The inode's attributes, if known.
    pub fn get(&self, inode: u64) -> Option<Attr> {
        let found = {
            let inner = self.inner.lock().unwrap();
            inner
                .attrs
                .get(&inode)
                .and_then(|(attr, seen)| self.answers(*seen).then(|| attr.clone()))
        };
        metrics::cache_read(metrics::ATTR_CACHE, found.is_some());
        found
    }

    /// Whether the node is known to have no xattrs (a listing read with
    /// attributes that still answer showed none, and nothing forgot it
    /// since: every change of a node's xattrs, here or elsewhere, forgets
    /// it).
    pub fn xattr_free(&self, inode: u64) -> bool {
        let found = {
            let inner = self.inner.lock().unwrap();
            inner
                .xattr_free
                .get(&inode)
                .is_some_and(|seen| self.answers(*seen))
        };
        metrics::cache_read(metrics::XATTR_CACHE, found);
        found
    }

    /// Keeps whether the node had xattrs when read with ticket `t` (known
    /// only when it had none).
    pub fn put_xattrs(&self, inode: u64, has: bool, t: Ticket) {
        let mut inner = self.inner.lock().unwrap();
        if has || !self.keeps() {
            inner.xattr_free.remove(&inode);
            return;
        }
        if inner.attr_forgot_since(inode, t) {
            return;
        }
        if inner.xattr_free.len() >= MAX_XATTR_FREE {
            inner.xattr_free = HashMap::new();
        }
        inner.xattr_free.insert(inode, Instant::now());
    }

    /// The attributes of entry `name` of `dir`, if known (only while the
    /// change log is followed).
    pub fn lookup(&self, dir: u64, name: &[u8]) -> Option<Attr> {
        let found = self
            .log
            .fresh()
            .then(|| self.lookup_kept(dir, name))
            .flatten();
        metrics::cache_read(metrics::ENTRY_CACHE, found.is_some());
        found
    }

    fn lookup_kept(&self, dir: u64, name: &[u8]) -> Option<Attr> {
        let inner = self.inner.lock().unwrap();
        let inode = inner.names.get(&(dir, name.to_vec()))?;
        let (attr, seen) = inner.attrs.get(inode)?;
        self.answers(*seen).then(|| attr.clone())
    }

    /// Keeps attributes read from the database with ticket `t`.
    pub fn put(&self, attr: &Attr, t: Ticket) {
        if !self.keeps() {
            return;
        }
        let mut inner = self.inner.lock().unwrap();
        if !inner.attr_forgot_since(attr.inode, t) {
            inner.insert(attr);
        }
    }

    /// Keeps entry `name` of `dir` and its attributes, read with ticket `t`.
    pub fn put_entry(&self, dir: u64, name: &[u8], attr: &Attr, t: Ticket) {
        if !self.keeps() {
            return;
        }
        let mut inner = self.inner.lock().unwrap();
        if inner.attr_forgot_since(attr.inode, t) {
            return;
        }
        inner.insert(attr);
        if self.names && !inner.name_forgot_since(dir, name, t) {
            inner.insert_name(dir, name, attr.inode);
        }
    }

    /// This mount changed a node and the procedure returned its attributes
    /// (ticket `t` taken before the call): they replace what was kept, or,
    /// when something else forgot the node meanwhile, nothing is kept.
    pub fn replace(&self, attr: &Attr, t: Ticket) {
        let mut inner = self.inner.lock().unwrap();
        let raced = inner.attr_forgot_since(attr.inode, t);
        inner.forget(attr.inode);
        if !raced && self.keeps() {
            inner.insert(attr);
        }
    }

    /// This mount made entry `name` of `dir` for node `attr` at `attr.ctime`
    /// (ticket `t` taken before the call): the name and node are kept, and
    /// the directory's times move as the procedure moved them (or its copy
    /// is dropped when something else forgot it meanwhile). Not for a new
    /// directory (its parent's nlink grew: forget the parent).
    pub fn child_made(&self, dir: u64, name: &[u8], attr: &Attr, t: Ticket) {
        let mut inner = self.inner.lock().unwrap();
        self.dir_times_moved(&mut inner, dir, attr.ctime, t);
        let node_raced = inner.attr_forgot_since(attr.inode, t);
        inner.forget(attr.inode);
        if node_raced || !self.keeps() {
            return;
        }
        inner.insert(attr);
        if self.names && !inner.name_forgot_since(dir, name, t) {
            inner.insert_name(dir, name, attr.inode);
        }
    }

    /// Files this mount answered as made in `dir` (name, node) were
    /// committed (ticket `t` taken before the call), which left the
    /// directory's times at `dir_times`: the names and nodes are kept, and
    /// the directory's copy takes those times (or goes when something else
    /// forgot it meanwhile).
    pub fn children_committed(
        &self,
        dir: u64,
        made: &[(&[u8], &Attr)],
        dir_times: (i64, i64),
        t: Ticket,
    ) {
        let mut inner = self.inner.lock().unwrap();
        let dir_raced = inner.attr_forgot_since(dir, t);
        let seq = inner.bump();
        inner.attr_forgot.insert(dir, seq);
        match inner.attrs.get_mut(&dir) {
            Some((d, _)) if !dir_raced => (d.mtime, d.ctime) = dir_times,
            _ => {
                inner.attrs.remove(&dir);
            }
        }
        for (name, attr) in made {
            let raced = inner.attr_forgot_since(attr.inode, t);
            inner.forget(attr.inode);
            if raced || !self.keeps() {
                continue;
            }
            inner.insert(attr);
            if self.names && !inner.name_forgot_since(dir, name, t) {
                inner.insert_name(dir, name, attr.inode);
            }
        }
    }

    /// This mount removed entry `name` of `dir`, a node that is not a
    /// directory, which the procedure answered with the node's attributes
    /// as it left them (ticket `t` taken before the call): the name and the
    /// node's attributes go, and the directory's times move as the
    /// procedure moved them, to the node's new ctime.
    pub fn child_removed(&self, dir: u64, name: &[u8], attr: &Attr, t: Ticket) {
        self.child_removed_at(dir, name, attr.inode, attr.ctime, t);
    }

    /// [`AttrCache::child_removed`] of node `inode` at `now` (ns).
    pub fn child_removed_at(&self, dir: u64, name: &[u8], inode: u64, now: i64, t: Ticket) {
        let mut inner = self.inner.lock().unwrap();
        let seq = inner.bump();
        inner.name_forgot.insert((dir, name.to_vec()), seq);
        inner.names.remove(&(dir, name.to_vec()));
        inner.forget(inode);
        self.dir_times_moved(&mut inner, dir, now, t);
    }

    /// An entry of `dir` was made or removed at `now` by a procedure that
    /// moved the directory's mtime and ctime to it unless they were fresh
    /// (`_dir_times_stale`): the copy kept follows, or goes when something
    /// forgot the directory since ticket `t` (another change it does not
    /// know came between).
    fn dir_times_moved(&self, inner: &mut Inner, dir: u64, now: i64, t: Ticket) {
        let dir_raced = inner.attr_forgot_since(dir, t);
        let seq = inner.bump();
        inner.attr_forgot.insert(dir, seq);
        match inner.attrs.get_mut(&dir) {
            Some((d, _)) if !dir_raced => {
                if times_stale(d.mtime, d.ctime, now, self.skip_ns) {
                    d.mtime = now;
                    d.ctime = now;
                }
            }
            _ => {
                inner.attrs.remove(&dir);
            }
        }
    }

    pub fn forget(&self, inode: u64) {
        self.inner.lock().unwrap().forget(inode);
    }

    /// Entry `name` of `dir` changed (made, removed, replaced): the name
    /// and the directory's attributes are forgotten.
    pub fn forget_entry(&self, dir: u64, name: &[u8]) {
        let mut inner = self.inner.lock().unwrap();
        let seq = inner.bump();
        inner.name_forgot.insert((dir, name.to_vec()), seq);
        inner.names.remove(&(dir, name.to_vec()));
        inner.forget(dir);
    }

    /// [`AttrCache::forget_all`], returning what was cached: the inodes
    /// and the entries (directory, name).
    pub fn forget_all_known(&self) -> (Vec<u64>, Vec<(u64, Vec<u8>)>) {
        let known = {
            let inner = self.inner.lock().unwrap();
            let inodes = inner.attrs.keys().copied().collect();
            (inodes, inner.names.keys().cloned().collect())
        };
        self.forget_all();
        known
    }

    pub fn forget_all(&self) {
        let mut inner = self.inner.lock().unwrap();
        inner.attrs.clear();
        inner.names.clear();
        inner.xattr_free = HashMap::new();
        inner.attr_forgot.clear();
        inner.name_forgot.clear();
        inner.seq += 1;
        inner.floor = inner.seq;
    }
}

/// Whether a directory's times are updated by a change at `now`: they are
/// unless both are within `skip_ns` before it (sql/internal.sql `_dir_times_stale`).
fn times_stale(mtime: i64, ctime: i64, now: i64, skip_ns: i64) -> bool {
    let recent = |t: i64| t >= now - skip_ns && t <= now;
    !(recent(mtime) && recent(ctime))
}

#[cfg(test)]
mod tests;
