//! The attribute and entry caches: what they keep, answer and forget.
use super::*;
use crate::meta::NodeType;

fn node(inode: u64, kind: NodeType, time: i64) -> Attr {
    Attr {
        inode,
        kind,
        mode: 0o755,
        uid: 0,
        gid: 0,
        atime: time,
        mtime: time,
        ctime: time,
        nlink: 2,
        length: 4096,
        rdev: 0,
        parent: 1,
        tier: 0,
        used: 0,
    }
}

fn dir(inode: u64, time: i64) -> Attr {
    node(inode, NodeType::Dir, time)
}

fn file(inode: u64, time: i64) -> Attr {
    node(inode, NodeType::File, time)
}

/// A cache that follows the log, just polled.
fn followed(ttl: Duration) -> AttrCache {
    let c = AttrCache::new(ttl, true, true, 100, Default::default());
    c.log.read(0);
    c
}

#[test]
fn without_the_log_copies_answer_for_the_ttl() {
    let cache = AttrCache::new(
        Duration::from_millis(50),
        false,
        false,
        100,
        Default::default(),
    );
    cache.put(&dir(5, 1), cache.ticket());
    cache.put_entry(5, b"f", &file(6, 1), cache.ticket());
    assert_eq!(cache.get(5).map(|a| a.inode), Some(5));
    assert_eq!(cache.get(6).map(|a| a.inode), Some(6));
    assert!(
        cache.lookup(5, b"f").is_none(),
        "names only while following"
    );
    std::thread::sleep(Duration::from_millis(60));
    assert!(cache.get(5).is_none());
}

#[test]
fn zero_ttl_without_the_log_keeps_nothing() {
    let cache = AttrCache::new(Duration::ZERO, false, false, 100, Default::default());
    cache.put(&dir(5, 1), cache.ticket());
    assert!(cache.get(5).is_none());
}

#[test]
fn while_the_log_is_read_copies_answer_past_the_ttl() {
    let cache = followed(Duration::from_millis(10));
    cache.put_entry(1, b"f", &file(6, 1), cache.ticket());
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(cache.lookup(1, b"f").map(|a| a.inode), Some(6));
    assert_eq!(cache.get(6).map(|a| a.inode), Some(6));
    cache.forget_all();
    cache.log.failed(0);
    assert!(cache.lookup(1, b"f").is_none() && cache.get(6).is_none());
}

#[test]
fn nothing_past_the_ttl_answers_unless_the_log_was_read_lately() {
    let cache = AttrCache::new(Duration::ZERO, true, true, 100, Default::default());
    cache.put_entry(1, b"f", &file(6, 1), cache.ticket());
    assert!(cache.lookup(1, b"f").is_none(), "never polled");
    cache.log.read(0);
    assert!(cache.lookup(1, b"f").is_some());
}

#[test]
fn a_read_older_than_a_forget_is_not_kept() {
    let cache = followed(Duration::from_secs(60));
    let t = cache.ticket();
    cache.forget(6);
    cache.put(&file(6, 1), t);
    assert!(cache.get(6).is_none());
    let t = cache.ticket();
    cache.forget_entry(1, b"f");
    cache.put_entry(1, b"f", &file(7, 1), t);
    assert!(cache.lookup(1, b"f").is_none());
    // a forget of something else does not matter
    let t = cache.ticket();
    cache.forget(99);
    cache.forget_entry(1, b"other");
    cache.put_entry(1, b"g", &file(8, 1), t);
    assert!(cache.lookup(1, b"g").is_some());
    // forgetting everything refuses every read started before
    let t = cache.ticket();
    cache.forget_all();
    cache.put(&file(9, 1), t);
    assert!(cache.get(9).is_none());
}

#[test]
fn forgetting_an_entry_forgets_the_name_and_its_directory() {
    let cache = followed(Duration::from_secs(60));
    cache.put(&dir(5, 1), cache.ticket());
    cache.put_entry(5, b"f", &file(6, 1), cache.ticket());
    cache.forget_entry(5, b"f");
    assert!(cache.lookup(5, b"f").is_none());
    assert!(cache.get(5).is_none());
    assert!(cache.get(6).is_some(), "the node is another matter");
}

#[test]
fn an_own_result_replaces_unless_something_else_forgot_the_node() {
    let cache = followed(Duration::from_secs(60));
    cache.put(&file(6, 1), cache.ticket());
    let t = cache.ticket();
    cache.replace(&file(6, 2), t);
    assert_eq!(cache.get(6).unwrap().mtime, 2);
    // an older read finishing later is not kept
    cache.put(&file(6, 1), t);
    assert_eq!(cache.get(6).unwrap().mtime, 2);
    let t = cache.ticket();
    cache.forget(6);
    cache.replace(&file(6, 3), t);
    assert!(cache.get(6).is_none());
}

#[test]
fn a_new_child_moves_stale_times_like_the_procedure() {
    let cache = followed(Duration::from_secs(60));
    cache.put(&dir(5, 1_000), cache.ticket());
    // within the skip window: unchanged
    cache.child_made(5, b"a", &file(10, 1_050), cache.ticket());
    assert_eq!(cache.get(5).unwrap().mtime, 1_000);
    assert_eq!(cache.lookup(5, b"a").map(|a| a.inode), Some(10));
    // past it: both times move to the child's
    cache.child_made(5, b"b", &file(11, 1_200), cache.ticket());
    let a = cache.get(5).unwrap();
    assert_eq!((a.mtime, a.ctime), (1_200, 1_200));
    // a time in the future of the change is stale too
    cache.put(&dir(7, 5_000), cache.ticket());
    cache.child_made(7, b"c", &file(12, 4_000), cache.ticket());
    assert_eq!(cache.get(7).unwrap().mtime, 4_000);
    // a directory forgotten while the child was made is dropped
    let t = cache.ticket();
    cache.forget(5);
    cache.put(&dir(5, 1_200), cache.ticket());
    cache.child_made(5, b"d", &file(13, 9_000), t);
    assert!(cache.get(5).is_none());
    assert!(cache.lookup(5, b"d").is_some());
}

#[test]
fn a_removed_child_moves_stale_times_and_goes() {
    let cache = followed(Duration::from_secs(60));
    cache.put(&dir(5, 1_000), cache.ticket());
    cache.put_entry(5, b"a", &file(10, 900), cache.ticket());
    cache.put_entry(5, b"b", &file(11, 900), cache.ticket());
    // within the skip window: the times stay, the name and node go
    cache.child_removed(5, b"a", &file(10, 1_050), cache.ticket());
    assert_eq!(cache.get(5).unwrap().mtime, 1_000);
    assert!(cache.lookup(5, b"a").is_none() && cache.get(10).is_none());
    // past it: both times move to the node's new ctime
    cache.child_removed(5, b"b", &file(11, 1_200), cache.ticket());
    let a = cache.get(5).unwrap();
    assert_eq!((a.mtime, a.ctime), (1_200, 1_200));
    assert!(cache.lookup(5, b"b").is_none() && cache.get(11).is_none());
    // a directory forgotten while the child was removed is dropped
    let t = cache.ticket();
    cache.forget(5);
    cache.put(&dir(5, 1_200), cache.ticket());
    cache.child_removed(5, b"c", &file(12, 9_000), t);
    assert!(cache.get(5).is_none());
}

#[test]
fn forget_all_drops_everything() {
    let cache = followed(Duration::from_secs(60));
    cache.put(&dir(5, 1), cache.ticket());
    cache.put_entry(5, b"f", &file(6, 1), cache.ticket());
    cache.forget_all();
    assert!(cache.get(5).is_none() && cache.lookup(5, b"f").is_none());
}
