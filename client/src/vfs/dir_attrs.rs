//! Attributes of directories this mount saw lately, answered to GETATTR for up to the attribute TTL.
//!
//! The kernel drops its cached attributes of a directory each time an entry
//! is created in it, and with `default_permissions` asks for them again at
//! the next path walk: without this cache, every create would cost a second
//! round trip to PostgreSQL. The copy kept here is never older than
//! `--attr-cache`, the staleness the kernel's own cache already allows, and
//! this mount's own changes keep it exact: a child created here moves the
//! directory's times exactly as the procedure did (`_dir_times_stale`),
//! and anything else that changes a directory (mkdir/rmdir under it,
//! rename, setattr, control requests) drops the copy.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::meta::{Attr, NodeType};

/// Entries kept at most; past it, expired ones are dropped (all, if none is).
const MAX_ENTRIES: usize = 65_536;

pub struct DirAttrs {
    ttl: Duration,
    /// `setting.skip_dir_mtime_ns`: how stale a directory's times may be
    /// before a new child updates them.
    skip_ns: i64,
    map: Mutex<HashMap<u64, (Attr, Instant)>>,
}

impl DirAttrs {
    pub fn new(ttl: Duration, skip_ns: i64) -> DirAttrs {
        DirAttrs {
            ttl,
            skip_ns,
            map: Mutex::new(HashMap::new()),
        }
    }

    /// The directory's attributes, if seen within the TTL.
    pub fn get(&self, inode: u64) -> Option<Attr> {
        let map = self.map.lock().unwrap();
        let (attr, seen) = map.get(&inode)?;
        (seen.elapsed() < self.ttl).then(|| attr.clone())
    }

    /// Remembers attributes just read from or returned by the database
    /// (directories only; nothing when the TTL is zero).
    pub fn put(&self, attr: &Attr) {
        if attr.kind != NodeType::Dir || self.ttl.is_zero() {
            return;
        }
        let mut map = self.map.lock().unwrap();
        if map.len() >= MAX_ENTRIES {
            let ttl = self.ttl;
            map.retain(|_, (_, seen)| seen.elapsed() < ttl);
            if map.len() >= MAX_ENTRIES {
                map.clear();
            }
        }
        map.insert(attr.inode, (attr.clone(), Instant::now()));
    }

    /// A child created in `dir` at `now` (its ctime, the time the procedure
    /// used): the directory's times move as the procedure moved them.
    pub fn child_created(&self, dir: u64, now: i64) {
        let mut map = self.map.lock().unwrap();
        if let Some((attr, _)) = map.get_mut(&dir) {
            if times_stale(attr.mtime, attr.ctime, now, self.skip_ns) {
                attr.mtime = now;
                attr.ctime = now;
            }
        }
    }

    pub fn forget(&self, inode: u64) {
        self.map.lock().unwrap().remove(&inode);
    }

    pub fn forget_all(&self) {
        self.map.lock().unwrap().clear();
    }
}

/// Whether a directory's times are updated by a change at `now`: they are
/// unless both are within `skip_ns` before it (sql/internal.sql `_dir_times_stale`).
fn times_stale(mtime: i64, ctime: i64, now: i64, skip_ns: i64) -> bool {
    let recent = |t: i64| t >= now - skip_ns && t <= now;
    !(recent(mtime) && recent(ctime))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(inode: u64, mtime: i64) -> Attr {
        Attr {
            inode,
            kind: NodeType::Dir,
            mode: 0o755,
            uid: 0,
            gid: 0,
            atime: mtime,
            mtime,
            ctime: mtime,
            nlink: 2,
            length: 4096,
            rdev: 0,
            parent: 1,
            tier: 0,
        }
    }

    #[test]
    fn keeps_directories_only_and_for_the_ttl() {
        let cache = DirAttrs::new(Duration::from_millis(50), 100);
        cache.put(&dir(5, 1));
        let mut file = dir(6, 1);
        file.kind = NodeType::File;
        cache.put(&file);
        assert_eq!(cache.get(5).map(|a| a.inode), Some(5));
        assert!(cache.get(6).is_none());
        std::thread::sleep(Duration::from_millis(60));
        assert!(cache.get(5).is_none());
    }

    #[test]
    fn zero_ttl_keeps_nothing() {
        let cache = DirAttrs::new(Duration::ZERO, 100);
        cache.put(&dir(5, 1));
        assert!(cache.get(5).is_none());
    }

    #[test]
    fn a_new_child_moves_stale_times_like_the_procedure() {
        let cache = DirAttrs::new(Duration::from_secs(60), 100);
        cache.put(&dir(5, 1_000));
        // within the skip window: unchanged
        cache.child_created(5, 1_050);
        assert_eq!(cache.get(5).unwrap().mtime, 1_000);
        // past it: both times move to the child's
        cache.child_created(5, 1_200);
        let a = cache.get(5).unwrap();
        assert_eq!((a.mtime, a.ctime), (1_200, 1_200));
        // a time in the future of the change is stale too
        cache.put(&dir(7, 5_000));
        cache.child_created(7, 4_000);
        assert_eq!(cache.get(7).unwrap().mtime, 4_000);
    }

    #[test]
    fn forget_drops_entries() {
        let cache = DirAttrs::new(Duration::from_secs(60), 100);
        cache.put(&dir(5, 1));
        cache.put(&dir(6, 1));
        cache.forget(5);
        assert!(cache.get(5).is_none() && cache.get(6).is_some());
        cache.forget_all();
        assert!(cache.get(6).is_none());
    }
}
