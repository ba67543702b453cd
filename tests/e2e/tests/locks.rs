//! Locks shared by two mounts of one volume, taken by real processes
//! (tests/e2e/scripts/locker.py): flock and fcntl record locks contend
//! across mounts, ranges split, F_GETLK names the holder, a blocked lock
//! waits until the holder lets go, is interrupted by a signal and reports
//! a deadlock; a crashed mount's locks go with its session; SQLite used
//! from both mounts at once keeps its database whole and every update.
use std::process::{Child, Command};

use jfs_e2e::{Locker, Volume};

#[test]
fn flock_is_shared_by_two_mounts() {
    let v = Volume::new("locks-flock");
    let a = v.mount("a", &[]);
    let b = v.mount("b", &[]);
    std::fs::write(a.p("f"), b"x").unwrap();
    let mut la = Locker::open(&a.p("f"));
    let mut lb = Locker::open(&b.p("f"));
    assert_eq!(la.ask("flock ex"), "ok");
    assert_eq!(lb.ask("flock ex nb"), "busy");
    assert_eq!(lb.ask("flock sh nb"), "busy");
    // a blocking flock waits until the holder lets go
    lb.send("flock ex");
    assert_eq!(lb.answer_within(1.0), None, "B got the lock A holds");
    assert_eq!(la.ask("flock un"), "ok");
    assert_eq!(lb.answer_within(10.0).as_deref(), Some("ok"));
    assert_eq!(la.ask("flock sh nb"), "busy");
    // the last close of B's open file drops its flock (the kernel sends
    // that release after close returns)
    assert_eq!(lb.ask("close"), "ok");
    assert!(
        jfs_e2e::eventually(10, || la.ask("flock sh nb") == "ok"),
        "B's flock outlived its close"
    );
    // shared locks share, across mounts
    assert_eq!(lb.ask(&format!("open {}", b.p("f").display())), "ok");
    assert_eq!(lb.ask("flock sh nb"), "ok");
    assert_eq!(la.ask("flock ex nb"), "busy");
    assert_eq!(
        v.sql("SELECT count(*) FROM jfs.locks WHERE path = '/f'"),
        "2"
    );
}

#[test]
fn record_locks_are_shared_by_two_mounts() {
    let v = Volume::new("locks-posix");
    let a = v.mount("a", &[]);
    let b = v.mount("b", &[]);
    std::fs::write(a.p("f"), vec![0u8; 4096]).unwrap();
    let mut la = Locker::open(&a.p("f"));
    let mut lb = Locker::open(&b.p("f"));
    let (pa, pb) = (la.pid(), lb.pid());
    assert_eq!(la.ask("lock wr 0 100"), "ok");
    assert_eq!(lb.ask("lock wr 50 10 nb"), "busy");
    assert_eq!(lb.ask("lock rd 99 1 nb"), "busy");
    assert_eq!(lb.ask("lock rd 100 100 nb"), "ok");
    // F_GETLK names the holder on the other mount
    assert_eq!(lb.ask("getlk wr 0 10"), format!("wr 0 100 {pa}"));
    assert_eq!(la.ask("getlk wr 150 1"), format!("rd 100 100 {pb}"));
    assert_eq!(la.ask("getlk rd 150 1"), "unlocked");
    // unlocking the middle splits A's lock
    assert_eq!(la.ask("lock un 40 20"), "ok");
    assert_eq!(lb.ask("lock wr 45 5 nb"), "ok");
    assert_eq!(lb.ask("lock wr 30 5 nb"), "busy");
    assert_eq!(lb.ask("lock wr 60 5 nb"), "busy");
    // a blocked lock waits until A closes the file (a close drops a
    // process's record locks)
    lb.send("lock wr 0 10");
    assert_eq!(lb.answer_within(1.0), None, "B got a range A holds");
    assert_eq!(la.ask("close"), "ok");
    assert_eq!(lb.answer_within(10.0).as_deref(), Some("ok"));
    assert_eq!(
        v.sql("SELECT count(*) FROM jfs.plock"),
        "3",
        "B's three ranges: {}",
        v.sql("SELECT string_agg(lstart || '-' || lend, ' ') FROM jfs.plock")
    );
    assert_eq!(v.sql("SELECT count(*) FROM jfs.lock_wait"), "0");
}

#[test]
fn a_blocked_lock_is_interrupted_by_a_signal_and_a_deadlock_is_reported() {
    let v = Volume::new("locks-wait");
    let a = v.mount("a", &[]);
    let b = v.mount("b", &[]);
    std::fs::write(a.p("f"), b"xy").unwrap();
    let mut la = Locker::open(&a.p("f"));
    let mut lb = Locker::open(&b.p("f"));
    assert_eq!(la.ask("lock wr 0 1"), "ok");
    assert_eq!(lb.ask("lock wr 1 1"), "ok");
    // SIGALRM while B waits for A's byte: the wait ends with EINTR
    assert_eq!(lb.ask("alarm 1"), "ok");
    lb.send("lock wr 0 1");
    assert_eq!(lb.answer_within(10.0).as_deref(), Some("interrupted"));
    assert_eq!(v.sql("SELECT count(*) FROM jfs.lock_wait"), "0");
    // A waits for B's byte; B asking for A's would wait forever: EDEADLK
    la.send("lock wr 1 1");
    assert_eq!(la.answer_within(0.5), None, "A got the byte B holds");
    assert_eq!(lb.ask("lock wr 0 1"), "deadlock");
    // B lets go: A's wait ends
    assert_eq!(lb.ask("lock un 1 1"), "ok");
    assert_eq!(la.answer_within(10.0).as_deref(), Some("ok"));
}

#[test]
fn the_locks_of_a_crashed_mount_go_with_its_session() {
    let v = Volume::new("locks-crash");
    // (a session is ended only after the timeout its own mount declared)
    let a = v.mount("a", &["--heartbeat", "1", "--session-timeout", "3"]);
    std::fs::write(a.p("f"), b"x").unwrap();
    std::fs::write(a.p("g"), b"x").unwrap();
    let mut la = Locker::open(&a.p("f"));
    assert_eq!(la.ask("lock wr 0 0"), "ok");
    let mut la2 = Locker::open(&a.p("g"));
    assert_eq!(la2.ask("flock ex"), "ok");
    let b = v.mount("b", &["--heartbeat", "1", "--session-timeout", "3"]);
    let mut lb = Locker::open(&b.p("f"));
    let mut lb2 = Locker::open(&b.p("g"));
    assert_eq!(lb.ask("lock rd 0 1 nb"), "busy");
    assert_eq!(lb2.ask("flock sh nb"), "busy");
    a.crash();
    drop((la, la2));
    // B's background ends A's silent session, and its locks with it
    lb.send("lock wr 0 0");
    assert_eq!(lb.answer_within(60.0).as_deref(), Some("ok"));
    assert_eq!(lb2.ask("flock ex nb"), "ok");
}

/// Each of two processes, one per mount, adds 1 to a counter and a row per
/// transaction; SQLite's default rollback journal and POSIX locking.
const SQLITE_WRITER: &str = r#"
import sqlite3, sys
path, tag, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
db = sqlite3.connect(path, timeout=120, isolation_level=None)
for i in range(n):
    db.execute("BEGIN IMMEDIATE")
    db.execute("UPDATE counter SET n = n + 1")
    db.execute("INSERT INTO rows (tag, i) VALUES (?, ?)", (tag, i))
    db.execute("COMMIT")
db.close()
"#;

#[test]
fn sqlite_from_two_mounts_keeps_its_database_whole() {
    let v = Volume::new("locks-sqlite");
    let a = v.mount("a", &[]);
    let b = v.mount("b", &[]);
    let setup = Command::new("sqlite3")
        .arg(a.p("db.sqlite"))
        .arg("CREATE TABLE counter (n integer); INSERT INTO counter VALUES (0); CREATE TABLE rows (tag text, i integer);")
        .status()
        .expect("running sqlite3");
    assert!(setup.success());
    const N: usize = 150;
    let writers: Vec<Child> = [(&a, "a"), (&b, "b")]
        .iter()
        .map(|(m, tag)| {
            Command::new("python3")
                .args(["-c", SQLITE_WRITER])
                .arg(m.p("db.sqlite"))
                .arg(tag)
                .arg(N.to_string())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut w in writers {
        assert!(w.wait().unwrap().success(), "a writer failed");
    }
    for m in [&a, &b] {
        let out = Command::new("sqlite3")
            .arg(m.p("db.sqlite"))
            .arg("PRAGMA integrity_check; SELECT n FROM counter; SELECT count(*), count(DISTINCT tag || i) FROM rows;")
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!("ok\n{}\n{}|{}\n", 2 * N, 2 * N, 2 * N),
            "on {}: {}",
            m.path.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
}

/// An open file description's own record locks (F_OFD_SETLK) go with its
/// last close, on the mount and for every other (xfstests generic/478: the
/// kernel sends no unlock for them, and one outlived its holder, blocking
/// the next F_OFD_SETLKW until the mount ended); a process's POSIX lock on
/// the same file is left alone.
#[test]
fn ofd_locks_go_with_the_last_close_of_their_open_file() {
    let v = Volume::new("locks-ofd");
    let a = v.mount("a", &[]);
    let b = v.mount("b", &[]);
    std::fs::write(a.p("f"), b"x").unwrap();
    let mut la = Locker::open(&a.p("f"));
    let mut lb = Locker::open(&b.p("f"));
    let mut posix = Locker::open(&a.p("f"));
    assert_eq!(la.ask("ofd wr 0 10 nb"), "ok");
    assert_eq!(posix.ask("lock rd 100 10 nb"), "ok");
    assert_eq!(lb.ask("ofd wr 0 10 nb"), "busy");
    // its only descriptor closed: the lock goes
    assert_eq!(la.ask("close"), "ok");
    assert!(
        jfs_e2e::eventually(10, || lb.ask("ofd wr 0 10 nb") == "ok"),
        "an OFD lock outlived the last close of its open file"
    );
    assert_eq!(la.ask(&format!("open {}", a.p("f").display())), "ok");
    assert_eq!(la.ask("ofd rd 0 10 nb"), "busy", "b's OFD lock holds");
    // a holder that exits (its descriptors closed by the kernel)
    drop(lb);
    assert!(
        jfs_e2e::eventually(10, || la.ask("ofd wr 0 10 nb") == "ok"),
        "an OFD lock outlived its process"
    );
    // the other process's POSIX lock is still there
    assert_eq!(la.ask("ofd wr 100 10 nb"), "busy");
    assert_eq!(
        v.sql("SELECT count(*) FROM jfs.plock"),
        "2",
        "a's OFD lock and the POSIX read lock"
    );
    assert_eq!(la.ask("close"), "ok");
    drop(posix);
    assert!(
        jfs_e2e::eventually(10, || v.sql("SELECT count(*) FROM jfs.plock") == "0"),
        "locks left: {}",
        v.sql("SELECT count(*) FROM jfs.plock")
    );
}
