//! cp -a's sequence for a file (create, write, futimens, chmod through its
//! access ACL, close) commits once (in a directory the mount holds the
//! lease of, the create too): a mode, owner or time set while the
//! file's writes are pending is answered by the mount and made in the
//! transaction of their commit. Every mount sees after close (or fsync)
//! what separate calls would have made; the writing mount sees the change
//! at once; a write after futimens moves the mtime on. The kernel's
//! question for a new file's capabilities before its first write is
//! answered by the mount that made it.
use std::fs::{self, File, FileTimes, Permissions};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

use jfs_e2e::{
    assert_same_tree, create_with_mode, eventually, free_metrics_addr, ok, procedure_calls, Volume,
};

const FILES: usize = 60;

/// 2001-01-01 plus `i` seconds and some nanoseconds.
fn old_time(i: u64) -> std::time::SystemTime {
    UNIX_EPOCH + Duration::from_nanos(978_307_200_000_000_000 + i * 1_000_000_007)
}

fn mtime_ns(path: &Path) -> i64 {
    let m = fs::metadata(path).unwrap();
    m.mtime() * 1_000_000_000 + m.mtime_nsec()
}

#[test]
fn cp_a_commits_each_file_once_with_its_attributes() {
    let _one = jfs_e2e::one_at_a_time();
    let v = Volume::new("copy-round-trips");
    // (as mounts are by default: kernel and mount caches on)
    let (a, addr) = v.mount_with_caches("a", "1", &[]);
    let b = v.mount("b", &[]);

    let src = tempfile::tempdir().unwrap();
    let modes = [0o640, 0o755, 0o600, 0o444, 0o700, 0o4755];
    for i in 0..FILES {
        let path = src.path().join(format!("f{i}"));
        let mut f = File::create(&path).unwrap();
        f.write_all(&jfs_e2e::pattern(i as u64, 1 + i * 997))
            .unwrap();
        f.set_times(FileTimes::new().set_modified(old_time(i as u64)))
            .unwrap();
        f.set_permissions(Permissions::from_mode(modes[i % modes.len()]))
            .unwrap();
    }
    let procedures = [
        "setattr",
        "getattr",
        "getxattr",
        "write_slice",
        "write_slices",
        "sync",
        "mknod",
        "mknod_with_slices",
    ];
    let before: Vec<f64> = procedures
        .iter()
        .map(|p| procedure_calls(&addr, p))
        .collect();
    ok(std::process::Command::new("cp")
        .arg("-a")
        .arg(src.path())
        .arg(a.p("copy")));
    let delta: Vec<f64> = procedures
        .iter()
        .zip(&before)
        .map(|(p, b)| procedure_calls(&addr, p) - b)
        .collect();
    eprintln!("calls during cp -a of {FILES} files: {procedures:?} {delta:?}");
    // each file: one commit of its data with its times and mode; the
    // directory's own stat, times and mode are a few calls more (before,
    // each file cost a setattr for its times, a getattr and a setattr for
    // its mode, and the kernel's getxattr of security.capability before
    // its first write)
    assert!(
        delta[0] + delta[1] + delta[2] <= 8.0,
        "cp -a's futimens and chmod of each file, and the kernel's question \
         for its capabilities, cost no call of their own: {delta:?}"
    );
    assert_eq!(
        delta[3] + delta[4] + delta[7],
        FILES as f64,
        "one commit per file: {delta:?}"
    );
    // the directory's lease is taken after its first two files: each of
    // the others is made with its data's commit, or with a batch the
    // mount's committer sent first (the two, and the directory itself,
    // through mknod)
    assert!(
        delta[6] <= 3.0 && delta[7] >= FILES as f64 / 2.0,
        "a file made under the directory's lease costs no call of its own: {delta:?}"
    );
    // the close's commit is durable itself ('fsync' mode): no sync follows
    // (the few left make reserved inode and slice ids durable)
    assert!(
        delta[5] <= 4.0,
        "a sync after each close's commit: {delta:?}"
    );
    assert_same_tree("cp -a (this mount)", src.path(), &a.p("copy"));
    assert_same_tree("cp -a (another mount)", src.path(), &b.p("copy"));
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
}

#[test]
fn a_change_shows_at_once_here_and_after_close_or_fsync_everywhere() {
    let _one = jfs_e2e::one_at_a_time();
    let v = Volume::new("copy-attrs-seen");
    // (the tests' mounts: no kernel or mount attribute cache, so a change
    // is shown over what the mount last read or committed of the file)
    let addr = free_metrics_addr();
    let a = v.mount("a", &["--metrics", &addr]);
    let b = v.mount("b", &[]);
    let mode_of = |p: &Path| fs::metadata(p).unwrap().mode() & 0o7777;
    let setattrs = || procedure_calls(&addr, "setattr");
    let before = setattrs();

    // the writing mount sees a chmod and futimens at once (a mode that
    // gives, not takes)
    let mut f = create_with_mode(&a.p("g"), 0o600);
    f.write_all(&[7u8; 1000]).unwrap();
    f.set_permissions(Permissions::from_mode(0o755)).unwrap();
    f.set_times(FileTimes::new().set_modified(old_time(1)))
        .unwrap();
    assert_eq!(f.metadata().unwrap().mode() & 0o7777, 0o755);
    assert_eq!(mode_of(&a.p("g")), 0o755, "a path stat on this mount");
    assert_eq!(mtime_ns(&a.p("g")), 978_307_201_000_000_007);
    assert_eq!(f.metadata().unwrap().len(), 1000);
    // a write after futimens: the mtime moves on from it
    f.write_all(&[8u8; 1000]).unwrap();
    drop(f);
    assert_eq!(
        setattrs() - before,
        0.0,
        "the chmod and futimens went with commits"
    );
    assert!(eventually(10, || mode_of(&b.p("g")) == 0o755));
    let later = mtime_ns(&b.p("g"));
    assert!(
        later > 978_307_201_000_000_007,
        "the write after futimens moved the mtime on: {later}"
    );
    assert_eq!(fs::read(b.p("g")).unwrap().len(), 2000);

    // fsync makes the change with the data, before close
    let mut h = create_with_mode(&a.p("h"), 0o600);
    h.write_all(b"synced").unwrap();
    h.set_times(FileTimes::new().set_modified(old_time(2)))
        .unwrap();
    h.set_permissions(Permissions::from_mode(0o664)).unwrap();
    h.sync_all().unwrap();
    // (b, with no cache, reads the database; a psql spawned from here would
    // close a copy of the descriptor, which commits)
    assert_eq!(
        (mode_of(&b.p("h")), mtime_ns(&b.p("h"))),
        (0o664, 978_307_202_000_000_014),
        "in the database at fsync"
    );
    drop(h);

    // a mode that takes a right from others is made at once
    let mut r = File::create(a.p("r")).unwrap();
    r.write_all(b"secret").unwrap();
    r.set_permissions(Permissions::from_mode(0o600)).unwrap();
    assert_eq!(mode_of(&b.p("r")), 0o600, "in the database before close");
    drop(r);

    // an owner that changes is not deferred: made at once (it may be refused)
    let mut o = File::create(a.p("o")).unwrap();
    o.write_all(b"owned").unwrap();
    std::os::unix::fs::fchown(&o, Some(1234), Some(5678)).unwrap();
    let owner = fs::metadata(b.p("o")).unwrap();
    assert_eq!(
        (owner.uid(), owner.gid()),
        (1234, 5678),
        "a chown is made when it is asked"
    );
    drop(o);

    // a file with nothing written: a plain setattr, as before
    let e = File::create(a.p("e")).unwrap();
    e.set_permissions(Permissions::from_mode(0o700)).unwrap();
    drop(e);
    assert!(eventually(10, || mode_of(&b.p("e")) == 0o700));
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
}

#[test]
fn a_deferred_change_survives_an_unlink_and_a_commit_at_a_chunk_boundary() {
    let _one = jfs_e2e::one_at_a_time();
    let v = Volume::new("copy-attrs-edges");
    // (caches on, as by default: a cached copy must not hide the change)
    let a = v.mount("a", &["--attr-cache", "1", "--entry-cache", "1"]);
    let b = v.mount("b", &[]);

    // unlinked while open: the change shows over what the unlink left
    let mut f = create_with_mode(&a.p("gone"), 0o600);
    f.write_all(b"data").unwrap();
    fs::remove_file(a.p("gone")).unwrap();
    f.set_permissions(Permissions::from_mode(0o700)).unwrap();
    let meta = f.metadata().unwrap();
    assert_eq!((meta.mode() & 0o7777, meta.nlink()), (0o700, 0));
    drop(f);

    // a sequential writer commits at each 64 MiB; a chmod made before that
    // still shows after it, and reaches the database at close
    let mut g = create_with_mode(&a.p("big"), 0o600);
    g.write_all(&[1u8; 1 << 20]).unwrap();
    g.set_permissions(Permissions::from_mode(0o750)).unwrap();
    let chunk = vec![2u8; 1 << 20];
    for _ in 0..65 {
        g.write_all(&chunk).unwrap();
    }
    // (b, with no cache, reads the database)
    assert!(
        fs::metadata(b.p("big")).unwrap().len() >= 64 << 20,
        "the first chunk was committed while writing"
    );
    assert_eq!(
        fs::metadata(b.p("big")).unwrap().mode() & 0o7777,
        0o600,
        "the chmod waits for the close"
    );
    // (past the kernel's copy of the chmod's answer: the mount answers)
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(g.metadata().unwrap().mode() & 0o7777, 0o750);
    assert_eq!(fs::metadata(a.p("big")).unwrap().mode() & 0o7777, 0o750);
    drop(g);
    assert_eq!(
        v.sql("SELECT mode FROM jfs.node WHERE inode = jfs.resolve('/big')"),
        0o750.to_string()
    );
    assert_eq!(fs::metadata(b.p("big")).unwrap().len(), 66 << 20);
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
}

#[test]
fn capabilities_another_mount_gives_a_new_file_are_seen() {
    let _one = jfs_e2e::one_at_a_time();
    let v = Volume::new("copy-caps");
    let a = v.mount("a", &[]);
    let b = v.mount("b", &[]);
    let caps = |p: &Path| jfs_e2e::xattr_of(p, "security.capability");
    let mut f = File::create(a.p("tool")).unwrap();
    f.write_all(b"#!/bin/true\n").unwrap();
    assert!(caps(&a.p("tool")).is_err(), "a new file has none");
    // version 2 file capabilities: cap_net_bind_service permitted
    let given: [u8; 20] = [0, 0, 0, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    rustix::fs::setxattr(
        b.p("tool"),
        "security.capability",
        &given,
        rustix::fs::XattrFlags::empty(),
    )
    .unwrap();
    assert!(
        eventually(10, || caps(&a.p("tool")).is_ok_and(|c| c == given)),
        "the mount that made the file asks again once another mount changed it"
    );
    drop(f);
}

#[test]
fn a_later_change_by_another_mount_is_not_undone_by_the_commit() {
    let _one = jfs_e2e::one_at_a_time();
    let v = Volume::new("copy-attrs-later");
    let a = v.mount("a", &[]);
    let b = v.mount("b", &[]);
    let node = |what: &str| {
        v.sql(&format!(
            "SELECT {what} FROM jfs.node WHERE inode = jfs.resolve('/f')"
        ))
    };
    let mut f = create_with_mode(&a.p("f"), 0o600);
    f.write_all(b"pending").unwrap();
    // a's chmod and its no-op chown wait for the commit ...
    f.set_permissions(Permissions::from_mode(0o644)).unwrap();
    let me = f.metadata().unwrap();
    std::os::unix::fs::fchown(&f, Some(me.uid()), Some(me.gid())).unwrap();
    // (b, with no cache, reads the database; a psql spawned from here
    // would close a copy of the descriptor, which commits)
    assert_eq!(
        fs::metadata(b.p("f")).unwrap().mode() & 0o7777,
        0o600,
        "a's chmod waits"
    );
    // ... while b changes mode and owner, later
    fs::set_permissions(b.p("f"), Permissions::from_mode(0o640)).unwrap();
    std::os::unix::fs::chown(b.p("f"), Some(4321), Some(8765)).unwrap();
    drop(f);
    assert_eq!(
        node("mode || ' ' || uid || ':' || gid"),
        format!("{} 4321:8765", 0o640),
        "b's later chmod and chown stand after a's commit"
    );
    assert_eq!(node("length"), "7");
}

#[test]
fn a_chmod_left_alone_by_refused_writes_keeps_another_mounts_later_chmod() {
    let _one = jfs_e2e::one_at_a_time();
    let v = Volume::new("copy-attrs-refused");
    // (the writes wait for the fsync)
    let a = v.mount("a", &["--commit-after", "3600"]);
    let b = v.mount("b", &[]);
    let mode_of = |p: &Path| fs::metadata(p).unwrap().mode() & 0o7777;
    fs::create_dir(a.p("q")).unwrap();
    v.sql("SELECT count(*) FROM jfs.set_quota('/q', 10485760)");
    let mut f = create_with_mode(&a.p("q/f"), 0o600);
    f.write_all(&[7u8; 1 << 20]).unwrap();
    f.set_permissions(Permissions::from_mode(0o644)).unwrap();
    assert_eq!(
        mode_of(&b.p("q/f")),
        0o600,
        "a's chmod waits for the commit"
    );
    // b takes what is left of the quota, and then sets the mode
    fs::write(b.p("q/g"), vec![1u8; (9 << 20) + (512 << 10)]).unwrap();
    fs::set_permissions(b.p("q/f"), Permissions::from_mode(0o640)).unwrap();
    // a's writes are refused at their commit; its chmod, made alone then,
    // finds the mode it was answered over changed: b's later one stands
    let synced = f.sync_all();
    assert_eq!(
        synced.as_ref().map_err(|e| e.raw_os_error()),
        Err(Some(libc::EDQUOT)),
        "{synced:?}"
    );
    drop(f);
    assert_eq!(mode_of(&b.p("q/f")), 0o640, "b's later chmod stands");
}

#[test]
fn nothing_waits_while_the_change_log_is_unread() {
    let _one = jfs_e2e::one_at_a_time();
    let v = Volume::new("copy-attrs-stale-log");
    // the change log read once a minute: what this mount shows of a file
    // may be that old, too old to judge a chmod against
    let a = v.mount("a", &["--changes-poll", "60"]);
    let b = v.mount("b", &[]);
    std::thread::sleep(Duration::from_secs(6));
    let mut f = create_with_mode(&a.p("f"), 0o600);
    f.write_all(b"pending").unwrap();
    f.set_permissions(Permissions::from_mode(0o644)).unwrap();
    assert_eq!(
        fs::metadata(b.p("f")).unwrap().mode() & 0o7777,
        0o644,
        "the chmod was made when asked"
    );
    drop(f);
}
