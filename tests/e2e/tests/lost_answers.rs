//! A commit whose answer never arrives: the connection breaks after
//! PostgreSQL committed and before the mount heard so. The mount cannot
//! tell that from a commit that failed, so it must not delete what the
//! commit may reference (a written slice's blocks, a compacted chunk's new
//! slice); a second mount then reads every byte. A written slice's commit
//! is settled by asking the database whether it has the slice (a slice id
//! is committed once), so the application sees no error at all. The break is made by a
//! proxy between the mount and PostgreSQL that cuts one connection right
//! after the server's answer to a chosen procedure (ReadyForQuery, sent
//! once the transaction committed).
use std::fs;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::fs::FileExt;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use jfs_e2e::{env, jfs, pattern, Volume, CLIENT_ROLE};

/// Forwards TCP connections to the test cluster's socket; when armed with
/// a procedure's SQL text, cuts the connection that next sends it, after
/// the server has answered (the answer is not passed on).
struct CuttingProxy {
    port: u16,
    armed: Arc<Mutex<Option<&'static str>>>,
    cuts: Arc<AtomicUsize>,
}

/// One test at a time: a process another test's thread spawns (psql, a
/// mount, jfs compact) starts with copies of this test's open descriptors
/// and closes them at exec, and each close is a FUSE flush, which would
/// commit before the proxy is armed.
/// ReadyForQuery in the idle state: the end of the server's answer, sent
/// after the statement's transaction committed.
const READY_IDLE: &[u8] = b"Z\0\0\0\x05I";

impl CuttingProxy {
    fn start() -> CuttingProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let armed: Arc<Mutex<Option<&'static str>>> = Arc::default();
        let cuts = Arc::new(AtomicUsize::new(0));
        let socket = format!("{}/.s.PGSQL.{}", env("PGHOST"), env("PGPORT"));
        let (a, c) = (armed.clone(), cuts.clone());
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let server = UnixStream::connect(&socket).unwrap_or_else(|e| {
                    panic!("{socket} (PGHOST: the cluster's socket directory): {e}")
                });
                pipe(client, server, a.clone(), c.clone());
            }
        });
        CuttingProxy { port, armed, cuts }
    }

    /// The next connection to send `sql` is cut after its answer.
    fn arm(&self, sql: &'static str) {
        *self.armed.lock().unwrap() = Some(sql);
    }

    fn url(&self, db: &str) -> String {
        // unnamed statements: every call carries its SQL text
        format!(
            "postgres://{CLIENT_ROLE}@127.0.0.1:{}/{db}?pgbouncer=true",
            self.port
        )
    }
}

fn pipe(
    client: TcpStream,
    server: UnixStream,
    armed: Arc<Mutex<Option<&'static str>>>,
    cuts: Arc<AtomicUsize>,
) {
    let doomed = Arc::new(AtomicBool::new(false));
    let (mut from_client, mut to_server) =
        (client.try_clone().unwrap(), server.try_clone().unwrap());
    let d = doomed.clone();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = match from_client.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            {
                let mut armed = armed.lock().unwrap();
                if let Some(sql) = *armed {
                    let text = String::from_utf8_lossy(&buf[..n]);
                    if text.contains(sql) {
                        d.store(true, Ordering::SeqCst);
                        *armed = None;
                    }
                }
            }
            if to_server.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = to_server.shutdown(Shutdown::Both);
    });
    let (mut from_server, mut to_client) = (server, client);
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 16];
        let mut held = Vec::new();
        loop {
            let n = match from_server.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if doomed.load(Ordering::SeqCst) {
                // the answer to the chosen call: held back until it is
                // complete (committed), then the connection is cut
                held.extend_from_slice(&buf[..n]);
                if held.windows(READY_IDLE.len()).any(|w| w == READY_IDLE) {
                    cuts.fetch_add(1, Ordering::SeqCst);
                    break;
                }
                continue;
            }
            if to_client.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = to_client.shutdown(Shutdown::Both);
        let _ = from_server.shutdown(Shutdown::Both);
    });
}

#[test]
fn a_write_whose_commit_answer_is_lost_keeps_its_bytes() {
    let _one = jfs_e2e::one_at_a_time();
    let proxy = CuttingProxy::start();
    let v = Volume::new("lost-write-answer");
    let a = v.mount_url("a", &proxy.url(&v.db), &[]);
    let b = v.mount("b", &[]);

    let data = pattern(11, (3 << 20) + 1234);
    proxy.arm("jfs.write_slice"); // (the fsync's commit is write_slices)
    let mut f = fs::File::create(a.p("f")).unwrap();
    f.write_all(&data).unwrap();
    let synced = f.sync_all();
    drop(f);
    assert_eq!(
        proxy.cuts.load(Ordering::SeqCst),
        1,
        "the commit's answer was cut"
    );
    assert!(
        synced.is_ok(),
        "the mount asked the database, which has the slice: fsync says so ({synced:?})"
    );
    assert!(
        a.log_text().contains("the database has 1 of them"),
        "the lost answer was settled, not ignored"
    );

    // the commit happened: the file has its bytes, on another mount too
    assert_eq!(
        v.sql("SELECT length FROM jfs.node WHERE inode = jfs.resolve('/f')"),
        data.len().to_string()
    );
    assert_eq!(
        fs::read(b.p("f")).unwrap(),
        data,
        "every block of the committed slice is there"
    );
    // and the mount whose answer was lost goes on working
    fs::write(a.p("g"), b"after").unwrap();
    assert_eq!(fs::read(b.p("g")).unwrap(), b"after");
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
}

#[test]
fn a_commit_with_attributes_whose_answer_is_lost_makes_both() {
    let _one = jfs_e2e::one_at_a_time();
    let proxy = CuttingProxy::start();
    let v = Volume::new("lost-attrs-answer");
    // (the background commit an hour away: the writes wait for the fsync)
    let addr = jfs_e2e::free_metrics_addr();
    let a = v.mount_url(
        "a",
        &proxy.url(&v.db),
        &["--commit-after", "3600", "--metrics", &addr],
    );
    let b = v.mount("b", &[]);

    // written, then its mode and mtime set: both go in one commit, whose
    // answer is cut
    let data = pattern(12, 300_000);
    // (made 0600: the chmod below gives rights, which may wait)
    let mut f = jfs_e2e::create_with_mode(&a.p("f"), 0o600);
    f.write_all(&data).unwrap();
    f.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o741))
        .unwrap();
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_nanos(1_000_000_000_123_456_789);
    f.set_times(fs::FileTimes::new().set_modified(at)).unwrap();
    proxy.arm("jfs.write_slices(");
    let synced = f.sync_all();
    drop(f);
    assert_eq!(
        proxy.cuts.load(Ordering::SeqCst),
        1,
        "the commit's answer was cut"
    );
    assert!(synced.is_ok(), "settled by asking the database: {synced:?}");
    let setattrs = jfs_e2e::metric_sum(
        &addr,
        "jfs_meta_call_duration_seconds_count",
        "procedure=\"setattr\"",
    );
    assert_eq!(
        setattrs.unwrap_or(0.0),
        0.0,
        "the change was made in the commit, not sent again alone"
    );
    assert!(
        a.log_text().contains("the database has 1 of them"),
        "the lost answer was settled, not ignored"
    );
    assert_eq!(
        v.sql("SELECT length || ' ' || mode || ' ' || mtime FROM jfs.node WHERE inode = jfs.resolve('/f')"),
        format!("{} {} 1000000000123456789", data.len(), 0o741)
    );
    assert_eq!(fs::read(b.p("f")).unwrap(), data);
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
}

#[test]
fn a_file_made_with_its_data_whose_answer_is_lost_is_made_once() {
    let _one = jfs_e2e::one_at_a_time();
    let proxy = CuttingProxy::start();
    let v = Volume::new("lost-create-data-answer");
    let addr = jfs_e2e::free_metrics_addr();
    let a = v.mount_url("a", &proxy.url(&v.db), &["--metrics", &addr]);
    let b = v.mount("b", &[]);
    fs::create_dir(a.p("d")).unwrap();
    // two creates in a row: the mount takes d's lease, and answers the
    // third itself; its close makes it with its data, in one commit whose
    // answer is cut
    fs::write(a.p("d/one"), b"1").unwrap();
    fs::write(a.p("d/two"), b"2").unwrap();
    let data = pattern(13, 100_000);
    let mut f = fs::File::create(a.p("d/three")).unwrap();
    f.write_all(&data).unwrap();
    proxy.arm("jfs.mknod_with_slices(");
    drop(f);
    assert_eq!(
        proxy.cuts.load(Ordering::SeqCst),
        1,
        "the commit's answer was cut"
    );
    assert!(
        a.log_text().contains("the database has 1 of them"),
        "the lost answer was settled, not ignored"
    );
    assert_eq!(
        jfs_e2e::procedure_calls(&addr, "mknod_with_slices"),
        1.0,
        "settled by asking: not sent again"
    );
    assert_eq!(fs::read(b.p("d/three")).unwrap(), data);
    let names: Vec<String> = ["one", "three", "two"].map(String::from).to_vec();
    assert_eq!(b.names("d").into_iter().collect::<Vec<_>>(), names);
    // the mount goes on making files in d
    fs::write(a.p("d/four"), b"after").unwrap();
    assert_eq!(fs::read(b.p("d/four")).unwrap(), b"after");
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
}

#[test]
fn a_compaction_whose_commit_answer_is_lost_keeps_the_chunk() {
    let _one = jfs_e2e::one_at_a_time();
    let proxy = CuttingProxy::start();
    let v = Volume::new("lost-compact-answer");
    // (no background commit: the slices are exactly the writes below)
    let a = v.mount_url(
        "a",
        &proxy.url(&v.db),
        &["--compact-at", "0", "--commit-after", "0"],
    );
    let b = v.mount("b", &[]);

    // a chunk of many slices: written in pieces, each committed
    let mut expected = pattern(21, 1 << 20);
    {
        let mut f = fs::File::create(a.p("g")).unwrap();
        f.write_all(&expected).unwrap();
        f.sync_all().unwrap();
    }
    for i in 0..6u64 {
        let piece = pattern(100 + i, 50_000);
        let at = (i * 150_000) as usize;
        expected[at..at + piece.len()].copy_from_slice(&piece);
        let f = fs::OpenOptions::new().write(true).open(a.p("g")).unwrap();
        f.write_all_at(&piece, at as u64).unwrap();
        f.sync_all().unwrap();
    }
    // seven commits, seven slices at least: under load the kernel's
    // writeback may hand a write over in two passes with a time update
    // (setattr, which commits what came before) between them; that only
    // adds slices to compact
    let slices: u64 = v
        .sql("SELECT count(*) FROM jfs.slice WHERE inode = jfs.resolve('/g')")
        .parse()
        .unwrap();
    assert!(slices >= 7, "each committed write left its slice: {slices}");

    proxy.arm("jfs.compact_chunk(");
    let _ = jfs().arg("compact").arg(a.p("g")).output().unwrap();
    assert_eq!(
        proxy.cuts.load(Ordering::SeqCst),
        1,
        "the compaction's answer was cut"
    );
    assert_eq!(
        v.sql("SELECT count(*) FROM jfs.slice WHERE inode = jfs.resolve('/g')"),
        "1",
        "the compaction committed"
    );
    assert_eq!(
        fs::read(b.p("g")).unwrap(),
        expected,
        "the new slice's blocks are there"
    );
    assert_eq!(fs::read(a.p("g")).unwrap(), expected);
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
}

/// A create and a lock whose answers are lost: the create is settled by
/// looking at its name (the inode id is this mount's alone), the lock is
/// simply set again (setting a lock twice is setting it once); neither
/// reaches the application as an error.
#[test]
fn a_create_and_a_lock_whose_answers_are_lost_succeed() {
    let _one = jfs_e2e::one_at_a_time();
    let proxy = CuttingProxy::start();
    let v = Volume::new("lost-create-answer");
    let a = v.mount_url("a", &proxy.url(&v.db), &[]);
    let b = v.mount("b", &[]);

    proxy.arm("jfs.mknod(");
    let made = fs::File::create(a.p("new"));
    assert_eq!(
        proxy.cuts.load(Ordering::SeqCst),
        1,
        "the create's answer was cut"
    );
    let mut f = made.expect("the create succeeds: the mount looked and found it made");
    assert!(
        a.log_text().contains("the answer was lost"),
        "settled, not ignored"
    );
    f.write_all(b"made once").unwrap();
    f.sync_all().unwrap();
    assert_eq!(fs::read(b.p("new")).unwrap(), b"made once");

    proxy.arm("jfs.setlk(");
    let locked = std::process::Command::new("python3")
        .args([
            "-c",
            "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR); \
             fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB); print('locked')",
        ])
        .arg(a.p("new"))
        .output()
        .unwrap();
    assert_eq!(
        proxy.cuts.load(Ordering::SeqCst),
        2,
        "the lock's answer was cut"
    );
    assert!(
        locked.status.success(),
        "the lock succeeds: {}",
        String::from_utf8_lossy(&locked.stderr)
    );
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
}

/// Runs a Python statement with `path` as `p`; its error, if any.
fn python(code: &str, path: &std::path::Path) -> Result<(), String> {
    let out = std::process::Command::new("python3")
        .args(["-c", &format!("import os, sys; p = sys.argv[1]; {code}")])
        .arg(path)
        .output()
        .unwrap();
    match out.status.success() {
        true => Ok(()),
        false => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
    }
}

#[test]
fn namespace_changes_whose_answers_are_lost_succeed() {
    let _one = jfs_e2e::one_at_a_time();
    let proxy = CuttingProxy::start();
    let v = Volume::new("lost-namespace-answers");
    let a = v.mount_url("a", &proxy.url(&v.db), &[]);
    let b = v.mount("b", &[]);
    fs::create_dir(a.p("d")).unwrap();
    fs::create_dir(a.p("gone")).unwrap();
    fs::create_dir_all(a.p("tree/sub")).unwrap();
    fs::write(a.p("tree/sub/file"), "in the tree").unwrap();
    for name in ["f", "g", "x"] {
        fs::write(a.p(name), name).unwrap();
    }
    let mut cuts = 0;
    let mut cut = |sql: &'static str, what: &str, op: &dyn Fn() -> Result<(), String>| {
        proxy.arm(sql);
        let result = op();
        cuts += 1;
        assert_eq!(
            proxy.cuts.load(Ordering::SeqCst),
            cuts,
            "{what}: its answer was cut"
        );
        result.unwrap_or_else(|e| panic!("{what} failed after its answer was lost: {e}"));
    };
    let io = |r: std::io::Result<()>| r.map_err(|e| e.to_string());
    cut("jfs.link(", "link", &|| {
        io(fs::hard_link(a.p("f"), a.p("d/f2")))
    });
    cut("jfs.rename(", "rename", &|| {
        io(fs::rename(a.p("g"), a.p("d/g")))
    });
    cut("jfs.unlink(", "unlink", &|| io(fs::remove_file(a.p("f"))));
    cut("jfs.rmdir(", "rmdir", &|| io(fs::remove_dir(a.p("gone"))));
    cut("jfs.setattr(", "chmod", &|| {
        use std::os::unix::fs::PermissionsExt;
        io(fs::set_permissions(
            a.p("x"),
            fs::Permissions::from_mode(0o600),
        ))
    });
    cut("jfs.setxattr(", "setxattr (XATTR_CREATE)", &|| {
        python("os.setxattr(p, 'user.k', b'v', os.XATTR_CREATE)", &a.p("x"))
    });
    cut("jfs.removexattr(", "removexattr", &|| {
        python("os.removexattr(p, 'user.k')", &a.p("x"))
    });
    cut("jfs.rmr(", "jfs rmr", &|| {
        let out = jfs().arg("rmr").arg(a.p("tree")).output().unwrap();
        match out.status.success() {
            true => Ok(()),
            false => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
        }
    });
    assert!(
        a.log_text().matches("the answer was lost").count() >= 8,
        "settled by asking again:\n{}",
        a.log_tail(30)
    );
    // each happened once, as another mount sees
    let mut names: Vec<_> = fs::read_dir(b.p(""))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["d", "x"]);
    assert_eq!(fs::read(b.p("d/f2")).unwrap(), b"f");
    assert_eq!(fs::read(b.p("d/g")).unwrap(), b"g");
    use std::os::unix::fs::MetadataExt;
    let x = fs::metadata(b.p("x")).unwrap();
    assert_eq!((x.mode() & 0o7777, x.nlink()), (0o600, 1));
    assert_eq!(fs::metadata(b.p("d/f2")).unwrap().nlink(), 1);
    assert!(python("os.getxattr(p, 'user.k')", &b.p("x")).is_err());
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
}

#[test]
fn a_setxattr_whose_answer_is_lost_is_not_taken_as_undone() {
    let _one = jfs_e2e::one_at_a_time();
    let proxy = CuttingProxy::start();
    let v = Volume::new("lost-setxattr-answer");
    // (the change log read twice a second: the setxattr it will show is
    // not what makes the mount ask)
    let a = v.mount_url("a", &proxy.url(&v.db), &["--changes-poll", "0.5"]);
    let caps = |p: &std::path::Path| jfs_e2e::xattr_of(p, "security.capability");
    // a file this mount made and has open: it answers the kernel's
    // question for its capabilities itself, while it knows of no change
    let mut f = fs::File::create(a.p("tool")).unwrap();
    f.write_all(b"#!/bin/true\n").unwrap();
    assert!(caps(&a.p("tool")).is_err(), "a new file has none");
    // version 2 file capabilities: cap_net_bind_service permitted
    let given: [u8; 20] = [0, 0, 0, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    proxy.arm("jfs.setxattr(");
    let set = rustix::fs::setxattr(
        a.p("tool"),
        "security.capability",
        &given,
        rustix::fs::XattrFlags::empty(),
    );
    assert_eq!(
        proxy.cuts.load(Ordering::SeqCst),
        1,
        "the setxattr's answer was cut ({set:?})"
    );
    // it happened: the mount must ask, not answer "none"
    assert_eq!(
        caps(&a.p("tool")).ok().as_deref(),
        Some(&given[..]),
        "the capabilities the cut setxattr set"
    );
    drop(f);
}
