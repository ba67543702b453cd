//! Mounts of a volume over three private clusters (the root and two shards): each call goes to the shard of the inode it names, what crosses shards answers EXDEV (and `mv`, `cp` copy), two mounts see each other's changes on every shard, fsx runs on a shard, and a shard stopped for 30 s stalls only its own subtrees.
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use jfs_e2e::*;

/// The shard an inode number names.
fn shard_of(path: &Path) -> u64 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .ino()
        >> 48
}

/// Writes `data` to `path` and fsyncs it.
fn write_synced(path: &Path, data: &[u8]) -> std::io::Result<()> {
    let mut f = std::fs::File::create(path)?;
    f.write_all(data)?;
    f.sync_all()
}

/// Bytes that tell `seed`'s file apart, `len` long.
fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn errno_of(r: std::io::Result<()>) -> Option<i32> {
    r.err().and_then(|e| e.raw_os_error())
}

#[test]
fn mounts_span_the_shards_of_a_volume() {
    // /a on shard 1, /a/b below it on shard 2, /c on shard 2
    let v = ShardedVolume::new("shm", 2, &[("/a", 1), ("/a/b", 2), ("/c", 2)]);
    let two = &v.clusters[2];
    // two mounts of the root database as a client role: each reaches the
    // shards through the map, with its own credentials
    let m1 = v.mount("m1", &[]);
    let m2 = v.mount("m2", &[]);
    assert_eq!(
        v.sql_each("SELECT count(*) FROM jfs.session"),
        ["2", "2", "2"],
        "each mount has a session on each shard"
    );

    // files land on their directory's shard, in one piece across chunks
    let files: [(&str, u8, usize); 5] = [
        ("top", 1, 1000),
        ("a/f1", 2, 70_000),
        ("a/b/f2", 3, 9 << 20),
        ("c/f3", 4, 10),
        ("a/b/sub/f4", 5, 5000),
    ];
    std::fs::create_dir(m1.p("a/b/sub")).unwrap();
    for (rel, seed, len) in files {
        write_synced(&m1.p(rel), &pattern(seed, len)).unwrap();
    }
    for (rel, seed, len) in files {
        assert!(
            std::fs::read(m2.p(rel)).unwrap() == pattern(seed, len),
            "{rel} read back through the other mount"
        );
    }
    for (rel, shard) in [
        ("top", 0),
        ("a", 1),
        ("a/f1", 1),
        ("a/b", 2),
        ("a/b/f2", 2),
        ("a/b/sub/f4", 2),
        ("c/f3", 2),
    ] {
        assert_eq!(shard_of(&m1.p(rel)), shard, "{rel}");
    }
    assert_eq!(
        v.sql_each(
            "SELECT string_agg(convert_from(name, 'UTF8'), ' ' ORDER BY name) FROM jfs.edge"
        ),
        ["a c top", "b f1", "f2 f3 f4 sub"]
    );
    // listings show shard roots with their own shard's attributes
    assert_eq!(m2.names("a"), ["b", "f1"].map(String::from).into());
    let listed = stdout_of(Command::new("ls").arg("-ln").arg(m2.p("")));
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with("drwxrwxrwx") && l.ends_with(" a")),
        "{listed}"
    );
    assert!(std::fs::metadata(m2.p("c")).unwrap().is_dir());

    // across shards: EXDEV, as across file systems; mv and cp copy
    assert_eq!(
        errno_of(std::fs::rename(m1.p("a/f1"), m1.p("c/f1"))),
        Some(libc::EXDEV)
    );
    assert_eq!(
        errno_of(std::fs::hard_link(m1.p("a/f1"), m1.p("top-link"))),
        Some(libc::EXDEV)
    );
    assert_eq!(
        errno_of(std::fs::rename(m1.p("a"), m1.p("a-moved"))),
        Some(libc::EXDEV),
        "a shard root stays where it is"
    );
    ok(Command::new("mv").arg(m1.p("a/f1")).arg(m1.p("c/moved")));
    assert!(std::fs::read(m2.p("c/moved")).unwrap() == pattern(2, 70_000));
    assert!(!m2.p("a/f1").exists());
    assert_eq!(shard_of(&m1.p("c/moved")), 2);
    // within a shard, rename and link work as ever
    std::fs::hard_link(m1.p("a/b/f2"), m1.p("a/b/sub/f2-link")).unwrap();
    std::fs::rename(m1.p("c/moved"), m1.p("a/b/moved")).unwrap();
    assert!(std::fs::read(m2.p("a/b/moved")).unwrap() == pattern(2, 70_000));
    ok(Command::new("cp")
        .arg("-a")
        .arg(m1.p("a"))
        .arg(m1.p("copy")));
    ok(Command::new("diff")
        .arg("-r")
        .arg(m2.p("a"))
        .arg(m2.p("copy")));
    assert_eq!(shard_of(&m1.p("copy/b/f2")), 0);

    // df counts every shard's inodes
    let inodes_used = || {
        let df = stdout_of(Command::new("df").args(["--output=iused"]).arg(m1.p("")));
        df.lines().last().unwrap().trim().parse::<u64>().unwrap()
    };
    let before = inodes_used();
    for n in 0..3 {
        write_synced(&m1.p(&format!("c/count{n}")), b"x").unwrap();
    }
    std::fs::create_dir(m1.p("a/counted")).unwrap();
    assert_eq!(
        inodes_used(),
        before + 4,
        "df -i after 4 nodes made on shards 1 and 2"
    );

    // fsx on a shard's file
    run_fsx(&m1.p("a/b/fsx-file"), &v.path().join("fsx"));

    // shard 2 stopped for 30 s: writers elsewhere go on, one on shard 2
    // waits and then completes, and nothing is lost
    let stop = Arc::new(AtomicBool::new(false));
    let done_elsewhere = Arc::new(AtomicUsize::new(0));
    let writers: Vec<_> = ["top-w", "a/w"]
        .into_iter()
        .map(|prefix| {
            let (stop, done) = (stop.clone(), done_elsewhere.clone());
            let dir = m1.p("");
            std::thread::spawn(move || {
                let mut n = 0u8;
                while !stop.load(Ordering::SeqCst) {
                    let path = dir.join(format!("{prefix}{n}"));
                    write_synced(&path, &pattern(n, 4096))
                        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                    done.fetch_add(1, Ordering::SeqCst);
                    n = n.wrapping_add(1) % 50;
                    std::thread::sleep(Duration::from_millis(50));
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    two.pg_ctl("stop");
    let stopped_at = Instant::now();
    let on_stopped = {
        let path = m1.p("c/during");
        std::thread::spawn(move || write_synced(&path, &pattern(9, 100_000)))
    };
    let before = done_elsewhere.load(Ordering::SeqCst);
    std::thread::sleep(Duration::from_secs(30));
    let during = done_elsewhere.load(Ordering::SeqCst) - before;
    assert!(
        during >= 20,
        "only {during} fsync'd files written on the other shards while shard 2 was stopped"
    );
    assert!(
        !on_stopped.is_finished(),
        "a write to the stopped shard returned while it was stopped"
    );
    two.pg_ctl("start");
    on_stopped
        .join()
        .unwrap()
        .unwrap_or_else(|e| panic!("the write on shard 2 failed across its outage: {e}"));
    eprintln!(
        "shard 2 was down {:?}; {during} files written elsewhere meanwhile",
        stopped_at.elapsed()
    );
    stop.store(true, Ordering::SeqCst);
    for w in writers {
        w.join().unwrap();
    }
    assert!(std::fs::read(m2.p("c/during")).unwrap() == pattern(9, 100_000));
    assert!(std::fs::read(m2.p("a/w3")).unwrap() == pattern(3, 4096));

    // a directory quota stops at a shard boundary: it counts its own
    // database's nodes; a shard's directory has its own, kept (by inode)
    // in the shard's database, listed with its path from the root
    std::fs::create_dir(m1.p("q")).unwrap();
    ok(jfs().args(["shard", "mkdir", &v.admin_url, "/q/s", "1", "--mode", "777"]));
    let quota = |args: &[&str]| {
        let out = ok(jfs().args(["quota"]).args(args));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    quota(&["set", &v.admin_url, "--path", "/q", "--inodes", "3"]);
    let said = quota(&["set", &v.admin_url, "--path", "/q/s/", "--inodes", "4"]);
    assert!(said.contains("dir /q/s "), "{said}");
    let made = (0..6)
        .map(|n| write_synced(&m1.p(&format!("q/s/f{n}")), b"on shard 1"))
        .take_while(|r| r.is_ok())
        .count();
    assert_eq!(made, 4, "files made under /q/s's quota of 4 inodes");
    assert_eq!(
        errno_of(write_synced(&m1.p("q/s/f9"), b"x")),
        Some(libc::EDQUOT),
        "the quota of /q/s holds on shard 1"
    );
    let refused = (0..6)
        .map(|n| write_synced(&m1.p(&format!("q/l{n}")), b"here"))
        .find_map(|r| r.err());
    assert_eq!(
        refused.and_then(|e| e.raw_os_error()),
        Some(libc::EDQUOT),
        "the quota of /q holds in its own database"
    );
    let listed = quota(&["list", &v.admin_url]);
    assert!(
        listed.contains("dir /q ") && listed.contains("dir /q/s "),
        "{listed}"
    );
    assert!(quota(&["get", &v.admin_url, "--path", "/q/s"]).contains("dir /q/s "));
    // checked where it is kept: with every database's, and alone
    let checked = quota(&["check", &v.admin_url]);
    assert!(
        checked.contains("dir /q/s ")
            && checked.contains("shard 2 ")
            && !checked.contains("DRIFTED"),
        "{checked}"
    );
    let checked = quota(&["check", &v.admin_url, "--path", "/q/s"]);
    assert!(
        checked.starts_with("dir /q/s ") && checked.contains(" ok "),
        "{checked}"
    );
    quota(&["delete", &v.admin_url, "--path", "/q/s"]);
    write_synced(&m1.p("q/s/f9"), b"x").unwrap();
    fails_with(
        jfs().args(["quota", "get", &v.admin_url, "--path", "/q/s"]),
        "no quota set",
    );
    // (a shard root below another's: its path is found across both)
    quota(&["set", &v.admin_url, "--path", "/a/b/sub", "--inodes", "100"]);
    let listed = quota(&["list", &v.admin_url]);
    assert!(listed.contains("dir /a/b/sub "), "{listed}");
    quota(&["delete", &v.admin_url, "--path", "/a/b/sub"]);
    // (a tree of the root's database holding a shard root, removed whole)
    ok(jfs().arg("rmr").arg(m1.p("q")));
    assert!(!m2.p("q").exists());

    // shard roots go as other directories do: rmdir when empty (the node
    // on its shard, then its name), rm -rf and jfs rmr across them
    assert_eq!(
        errno_of(std::fs::remove_dir(m1.p("c"))),
        Some(libc::ENOTEMPTY)
    );
    ok(Command::new("rm").arg("-rf").arg(m1.p("c")));
    assert!(!m2.p("c").exists());
    assert_eq!(
        v.sql_each("SELECT count(*) FROM jfs.edge WHERE parent = 1 AND name = 'c'")[0],
        "0"
    );
    ok(jfs().arg("rmr").arg(m1.p("a")));
    assert!(!m2.p("a").exists());
    assert_eq!(
        v.sql_each("SELECT count(*) FROM jfs.edge")[1..],
        ["0", "0"],
        "shards 1 and 2 name nothing once their trees are removed"
    );
    assert_eq!(
        v.sql_each(
            "SELECT count(*) FROM jfs.node WHERE nlink > 0 AND inode < (32767::bigint << 48)"
        )[1..],
        ["0", "0"],
        "shards 1 and 2 hold no linked node once their trees are removed"
    );
    // an empty shard root, made by an administrator, removed by a client
    ok(jfs().args(["shard", "mkdir", &v.admin_url, "/e", "1", "--mode", "777"]));
    std::fs::remove_dir(m1.p("e")).unwrap();
    assert!(!m2.p("e").exists());
    // a crash between the two steps leaves a name of nothing: mounts
    // answer ENOENT (and list no entry), jfs shard rmdir removes it
    ok(jfs().args(["shard", "mkdir", &v.admin_url, "/half", "2"]));
    let half = v.clusters[2].sql("vol", "SELECT inode FROM jfs.shard_roots()");
    v.clusters[2].sql("vol", &format!("SELECT jfs.shard_root_remove({half})"));
    assert!(!m1.p("half").exists());
    assert!(!m1.names("").contains("half"));
    ok(jfs().args(["shard", "rmdir", &v.admin_url, "/half"]));
    assert_eq!(
        v.sql_each("SELECT count(*) FROM jfs.edge WHERE name = 'half'")[0],
        "0"
    );

    drop(m1);
    drop(m2);
    assert_eq!(
        v.sql_each("SELECT count(*) FROM jfs.session"),
        ["0", "0", "0"]
    );
    v.assert_whole();
}

fn stdout_of(cmd: &mut Command) -> String {
    String::from_utf8_lossy(&ok(cmd).stdout).to_string()
}

/// fsx (installed by scripts/setup.sh) on `file`, its artifacts in `dir`.
fn run_fsx(file: &Path, dir: &Path) {
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fsx/nommap.toml");
    std::fs::create_dir_all(dir).unwrap();
    let out = Command::new(Path::new(&home).join(".cargo/bin/fsx"))
        .args(["-N", "3000", "-S", "57", "-f"])
        .arg(config)
        .arg("-P")
        .arg(dir)
        .arg(file)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && text.contains("All operations completed A-OK"),
        "fsx on a shard failed: {}",
        text.lines().rev().take(40).collect::<Vec<_>>().join("\n")
    );
}

/// A mount's metadata backups (`--backup-meta`) of a volume over shards
/// hold every shard's tree: one loads into a single database whose mount
/// reads the files of every shard.
#[test]
fn metadata_backups_of_a_mount_hold_every_shard() {
    let v = ShardedVolume::new("shbak", 1, &[("/a", 1)]);
    let m = v.mount("m", &["--backup-meta", "2", "--backup-keep", "2"]);
    std::fs::create_dir(m.p("a/deeper")).unwrap();
    write_synced(&m.p("a/deeper/on-shard"), &pattern(7, 70_000)).unwrap();
    write_synced(&m.p("at-root"), &pattern(8, 1000)).unwrap();
    let written = std::time::SystemTime::now();
    let backups = v.path().join("bucket/shbak/meta");
    let deadline = Instant::now() + Duration::from_secs(30);
    let newest = loop {
        let fresh = std::fs::read_dir(&backups).ok().and_then(|dir| {
            dir.filter_map(|e| e.ok())
                // (not one still being written: a .tmp renamed when whole)
                .filter(|e| !e.file_name().to_string_lossy().contains(".tmp"))
                .filter(|e| {
                    e.metadata()
                        .and_then(|m| m.modified())
                        .is_ok_and(|t| t > written)
                })
                .map(|e| e.path())
                .max()
        });
        if let Some(path) = fresh {
            break path;
        }
        assert!(
            Instant::now() < deadline,
            "no backup within 30 s: {}",
            m.log_tail(20)
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    drop(m);
    let pg = &v.clusters[0];
    pg.sql("postgres", "CREATE DATABASE restored");
    pg.sql(
        "restored",
        "SET client_min_messages = warning; CREATE EXTENSION jfs",
    );
    let url = pg.url("postgres", "restored");
    ok(jfs().args(["load", &url]).arg(&newest));
    assert_eq!(pg.sql("restored", "SELECT count(*) FROM jfs.fsck()"), "0");
    let r = mount_at(&url, &v.path().join("r"), &v.path().join("r.log"), &[]);
    assert!(std::fs::read(r.p("a/deeper/on-shard")).unwrap() == pattern(7, 70_000));
    assert!(std::fs::read(r.p("at-root")).unwrap() == pattern(8, 1000));
}

/// A mount started while shard 2's PostgreSQL is stopped: it mounts
/// (saying so), the root and shard 1 work at once, a write below shard 2's
/// root waits; once shard 2 is started the mount registers its session
/// there (its connections name it, as the change log and leases need), the
/// write completes, and another mount's changes on shard 2 reach it.
#[test]
fn a_mount_starts_while_a_shard_is_down() {
    let v = ShardedVolume::new("shlate", 2, &[("/a", 1), ("/c", 2)]);
    {
        let first = v.mount("first", &[]);
        write_synced(&first.p("c/before"), &pattern(1, 5000)).unwrap();
    }
    let two = &v.clusters[2];
    two.pg_ctl("stop");
    let m = v.mount("m", &[]);
    write_synced(&m.p("top"), b"on the root").unwrap();
    write_synced(&m.p("a/one"), b"on shard one").unwrap();
    assert_eq!(std::fs::read(m.p("a/one")).unwrap(), b"on shard one");
    assert!(
        m.log_text().contains("mounting without it"),
        "{}",
        m.log_text()
    );
    let waiting = {
        let path = m.p("c/late");
        std::thread::spawn(move || write_synced(&path, &pattern(2, 70_000)))
    };
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        !waiting.is_finished(),
        "a write below shard 2's root returned while shard 2 was down"
    );
    two.pg_ctl("start");
    waiting
        .join()
        .unwrap()
        .unwrap_or_else(|e| panic!("the write on shard 2 failed once it came: {e}"));
    assert!(std::fs::read(m.p("c/before")).unwrap() == pattern(1, 5000));
    assert!(m.log_text().contains("reached shard 2"), "{}", m.log_text());
    assert_eq!(two.sql("vol", "SELECT count(*) FROM jfs.session"), "1");
    let named = |ended: bool| {
        two.sql(
            "vol",
            &format!(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
                 AND application_name ~ '^jfs:[0-9]+$' AND (substring(application_name FROM 5)::bigint \
                 IN (SELECT sid FROM jfs.session)) = {}",
                !ended
            ),
        )
    };
    std::fs::create_dir(m.p("c/made")).unwrap();
    assert_eq!(
        named(true),
        "0",
        "connections to shard 2 naming no session of it"
    );
    assert_ne!(
        named(false),
        "0",
        "connections to shard 2 naming the mount's session"
    );
    assert_eq!(
        two.sql(
            "vol",
            "SELECT count(*) FROM jfs.change WHERE session IS NULL AND name = 'made'::bytea"
        ),
        "0",
        "the mkdir on shard 2 was logged as no session's"
    );
    // another mount's change on shard 2 reaches this one
    let other = v.mount("other", &[]);
    write_synced(&other.p("c/from-other"), b"hello").unwrap();
    assert!(
        eventually(15, || std::fs::read(m.p("c/from-other"))
            .is_ok_and(|d| d == b"hello")),
        "the other mount's file on shard 2"
    );
    assert!(std::fs::read(other.p("c/late")).unwrap() == pattern(2, 70_000));
    drop(other);
    drop(m);
    v.assert_whole();
}

/// A shard reached late is checked as one reached at start: a jfs
/// extension there that this client does not work with keeps it closed
/// (its subtrees wait, the log says why), and once it is one the client
/// works with, the mount reaches it.
#[test]
fn a_shard_reached_late_is_checked_as_at_start() {
    let v = ShardedVolume::new("shlatever", 2, &[("/c", 2)]);
    let two = &v.clusters[2];
    let version = env!("CARGO_PKG_VERSION");
    let says = |version: &str| {
        format!("UPDATE pg_catalog.pg_extension SET extversion = '{version}' WHERE extname = 'jfs'")
    };
    // (an older release, as far as the version check can tell)
    two.sql("vol", &says("0.1.0"));
    two.pg_ctl("stop");
    let m = v.mount("m", &[]);
    two.pg_ctl("start");
    assert!(
        eventually(30, || m.log_text().contains("0.1.0")),
        "the mount did not say why shard 2 is not reached\n{}",
        m.log_text()
    );
    let waiting = {
        let path = m.p("c/late");
        std::thread::spawn(move || write_synced(&path, b"late"))
    };
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        !waiting.is_finished(),
        "a write on shard 2 went through while its extension was one this client does not work with"
    );
    assert!(
        !m.log_text().contains("reached shard 2"),
        "{}",
        m.log_text()
    );
    assert_eq!(two.sql("vol", "SELECT count(*) FROM jfs.session"), "0");
    two.sql("vol", &says(version));
    waiting
        .join()
        .unwrap()
        .unwrap_or_else(|e| panic!("the write on shard 2 failed once it was reached: {e}"));
    assert!(m.log_text().contains("reached shard 2"), "{}", m.log_text());
    drop(m);
    v.assert_whole();
}
