//! PostgreSQL crashing and restarting under a workload: what fsync
//! acknowledged survives a crash (`pg_ctl stop -m immediate`, what a power
//! loss or an OOM kill of the postmaster does), and a restart (`-m fast`, a
//! minor upgrade) shorter than `--meta-retry` reaches no application.
//! (Private clusters, stopped and started by the tests; the mounts run as a
//! client role.)
use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use jfs_e2e::{
    assert_no_errors, content, jfs, missing_or_wrong, ok, xattr_of, PrivateVolume as Setup, Rng,
    Workload, PRIVATE_CLIENT as CLIENT,
};
use rustix::fs::{fremovexattr, fsetxattr, XattrFlags};
use rustix::io::Errno;

#[test]
fn fsync_acknowledged_files_survive_postgres_crashes() {
    survive_postgres_crashes("crash", &[]);
}

/// The same with the writers' 4 KiB files kept in the database
/// (`--inline-max 16`): their bytes are in the commits a crash erases, and
/// the mount sends them again with the slices.
#[test]
fn fsync_acknowledged_small_files_kept_in_the_database_survive_postgres_crashes() {
    let s = survive_postgres_crashes("crash-inline", &["--inline-max", "16"]);
    let kept: u64 =
        s.pg.sql("vol", "SELECT count(*) FROM jfs.inline_data")
            .parse()
            .unwrap();
    assert!(kept >= 40, "only {kept} files were kept in the database");
}

/// The writers of tests/e2e/scripts/workload.py (4 KiB files, each fsync'd)
/// on a volume formatted with `format_args` while PostgreSQL crashes 20
/// times: every file fsync acknowledged is there after.
fn survive_postgres_crashes(name: &str, format_args: &[&str]) -> Setup {
    // the WAL writer flushes asynchronous commits only every 10 s: a crash
    // then erases every commit no sync covered, which the mount tells the
    // restarted server again (or, if it cannot, no sync may vouch for)
    let s = Setup::with_format(name, &["wal_writer_delay = '10s'"], format_args);
    let m = s.mount("a", &["--meta-retry", "30"]);
    let work = Workload::start(&m.p("work"), &s.base.join("work.out"), 2, 2);
    let mut rng = Rng::new(2026);
    const CRASHES: usize = 20;
    for run in 0..CRASHES {
        std::thread::sleep(Duration::from_millis(200 + rng.below(800)));
        let before = work.recorded();
        s.pg.pg_ctl("-m immediate stop");
        s.pg.pg_ctl("start");
        eprintln!("crash {run}: {before} files recorded before it");
    }
    std::thread::sleep(Duration::from_secs(1));
    let outcome = work.finish();
    eprintln!(
        "{} files recorded across {CRASHES} crashes; operation latency p50 p99 max (s): {}",
        outcome.recorded.len(),
        outcome.latency
    );
    assert!(
        outcome.recorded.len() >= 2 * CRASHES,
        "the writers recorded only {} files\n{}",
        outcome.recorded.len(),
        m.log_tail(40)
    );
    // what the crashes erased of the creates and writes was made again
    assert_no_errors(&outcome, &m, "across the crashes");
    let made_again: usize = m
        .log_text()
        .lines()
        .filter_map(|l| {
            l.split_once("server had lost ")?
                .1
                .split_once(':')?
                .0
                .parse::<usize>()
                .ok()
        })
        .sum();
    eprintln!("commits erased by the crashes and made again by the mount: {made_again}");
    assert!(
        made_again > 0,
        "no crash erased a commit: the test shows nothing\n{}",
        m.log_tail(40)
    );
    let fresh = s.mount("fresh", &[]);
    let bad = missing_or_wrong(&outcome.recorded, &fresh.p("work"));
    assert!(
        bad.is_empty(),
        "{} of {} files acknowledged by fsync are missing or wrong after {CRASHES} crashes: {:?}\n{}",
        bad.len(),
        outcome.recorded.len(),
        &bad[..bad.len().min(20)],
        m.log_tail(40)
    );
    assert_eq!(s.pg.sql("vol", "SELECT count(*) FROM jfs.fsck()"), "0");
    drop(fresh);
    drop(m);
    s
}

#[test]
fn postgres_restarts_shorter_than_the_retry_time_reach_no_application() {
    // (asynchronous commits flushed only every 10 s: a crash erases the
    // last ones, which the mount must make again for no error to reach
    // the applications)
    let s = Setup::new("restart", &["wal_writer_delay = '10s'"]);
    let m = s.mount("a", &[]);
    let work = Workload::start(&m.p("work"), &s.base.join("work.out"), 2, 2);
    // a clean shutdown (a minor upgrade) and a crash (power loss, OOM kill)
    const STOPS: [&str; 4] = ["fast", "immediate", "fast", "immediate"];
    const OUTAGE: Duration = Duration::from_secs(4);
    for (run, mode) in STOPS.iter().enumerate() {
        std::thread::sleep(Duration::from_secs(2));
        s.pg.pg_ctl(&format!("-m {mode} stop"));
        std::thread::sleep(OUTAGE);
        s.pg.pg_ctl("start");
        eprintln!(
            "outage {run} (-m {mode}): {} files recorded so far",
            work.recorded()
        );
    }
    std::thread::sleep(Duration::from_secs(2));
    let outcome = work.finish();
    eprintln!(
        "{} files recorded across {} outages of {OUTAGE:?}; operation latency \
         p50 p99 max (s): {}",
        outcome.recorded.len(),
        STOPS.len(),
        outcome.latency
    );
    assert_no_errors(&outcome, &m, "during the outages");
    assert!(
        outcome.recorded.len() >= 20,
        "only {} files",
        outcome.recorded.len()
    );
    let fresh = s.mount("fresh", &[]);
    let bad = missing_or_wrong(&outcome.recorded, &fresh.p("work"));
    assert!(bad.is_empty(), "missing or wrong: {bad:?}");
    assert_eq!(s.pg.sql("vol", "SELECT count(*) FROM jfs.fsck()"), "0");
}

/// Block files in a bucket.
fn blocks(bucket: &Path) -> usize {
    let out = ok(Command::new("find")
        .arg(bucket)
        .args(["-type", "f", "-path", "*/chunks/*"]));
    String::from_utf8_lossy(&out.stdout).lines().count()
}

#[test]
fn objects_are_deleted_only_once_the_commit_that_freed_them_is_durable() {
    // unlinks stay in the WAL buffers for up to 10 s, while the mount's
    // background deletion runs every second (no --gc-delay)
    let s = Setup::new("freed", &["wal_writer_delay = '10s'"]);
    let m = s.mount("a", &[]);
    let names: Vec<String> = (0..20).map(|i| format!("f{i}")).collect();
    for name in &names {
        fs::write(m.p(name), content(name)).unwrap();
        fs::File::open(m.p(name)).unwrap().sync_all().unwrap();
    }
    fs::File::open(&m.path).unwrap().sync_all().unwrap();
    let stored = blocks(&s.base.join("bucket"));
    assert!(stored >= names.len(), "{stored} blocks");
    for name in &names {
        fs::remove_file(m.p(name)).unwrap();
    }
    // the mount deletes the freed blocks (and, before that, makes the
    // unlinks durable: a crash then cannot bring the files back)
    assert!(
        jfs_e2e::eventually(20, || blocks(&s.base.join("bucket")) < stored),
        "no freed block deleted\n{}",
        m.log_tail(20)
    );
    s.pg.pg_ctl("-m immediate stop");
    s.pg.pg_ctl("start");
    let fresh = s.mount("fresh", &[]);
    let mut bad = Vec::new();
    for name in &names {
        match fs::read(fresh.p(name)) {
            Ok(bytes) if bytes == content(name) => {}
            Ok(bytes) => bad.push(format!("{name}: {} wrong bytes", bytes.len())),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
            Err(e) => bad.push(format!("{name}: {e}")),
        }
    }
    assert!(
        bad.is_empty(),
        "files whose blocks were deleted came back with the crash: {bad:?}"
    );
    // (fsck is administration: the cluster's superuser runs it)
    ok(jfs().args(["fsck", &s.pg.url("postgres", "vol"), "--check-objects"]));
}

#[test]
fn fsync_acknowledged_files_survive_a_killed_mount() {
    // JuiceFS's crash-consistency check (#7400): the mount killed under a
    // writer that records each file once it and its directory are fsynced
    let s = Setup::new("killed", &[]);
    let m = s.mount("a", &[]);
    let work = Workload::start(&m.p("work"), &s.base.join("work.out"), 2, 0);
    std::thread::sleep(Duration::from_secs(3));
    m.crash();
    let outcome = work.finish();
    assert!(
        outcome.recorded.len() >= 10,
        "only {} files recorded: {:?}",
        outcome.recorded.len(),
        outcome.errors
    );
    let cache = s.base.join("empty-cache");
    let fresh = s.mount("fresh", &["--cache-dir", cache.to_str().unwrap()]);
    let bad = missing_or_wrong(&outcome.recorded, &fresh.p("work"));
    assert!(
        bad.is_empty(),
        "{} of {} recorded files missing or wrong after kill -9 of the mount: {:?}",
        bad.len(),
        outcome.recorded.len(),
        &bad[..bad.len().min(20)]
    );
    assert_eq!(s.pg.sql("vol", "SELECT count(*) FROM jfs.fsck()"), "0");
}

/// Sets the mode of `inode` as another client would, in one asynchronous
/// commit.
fn chmod_elsewhere(s: &Setup, inode: u64, mode: u32) {
    s.pg.sql(
        "vol",
        &format!("SELECT errno FROM jfs.setattr({inode}, 1, {mode})"),
    );
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::MetadataExt;
    fs::metadata(path).unwrap().mode() & 0o7777
}

#[test]
fn changes_made_after_a_crash_reach_every_mount() {
    // A crash erases the last asynchronous commits of other clients, which
    // a mount and its kernel may have applied (the change log cannot say
    // a change was undone), and hands their transaction ids out again: a
    // later change with such an id must not pass for one the mount has seen.
    use std::os::unix::fs::MetadataExt;
    let s = Setup::new("xid-reuse", &["wal_writer_delay = '10s'"]);
    let m = s.mount("a", &["--attr-cache", "60", "--entry-cache", "60"]);
    fs::write(m.p("f"), "f").unwrap();
    fs::File::open(m.p("f")).unwrap().sync_all().unwrap();
    fs::File::open(m.p("")).unwrap().sync_all().unwrap();
    let f = fs::metadata(m.p("f")).unwrap().ino();
    assert_eq!(mode(&m.p("f")), 0o644);
    let xids = || {
        s.pg.sql(
            "vol",
            "SELECT string_agg(xid::text, ',' ORDER BY id) FROM jfs.change",
        )
    };
    // (several transactions: the mount's own next commit takes one id)
    for mode in [0o604, 0o602, 0o601, 0o600] {
        chmod_elsewhere(&s, f, mode);
    }
    assert!(
        jfs_e2e::eventually(10, || mode(&m.p("f")) == 0o600),
        "the mount saw the change"
    );
    // (past the mount's second application of a change)
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(mode(&m.p("f")), 0o600);
    s.pg.pg_ctl("-m immediate stop");
    s.pg.pg_ctl("start");
    // the crash erased the changes whose WAL was not flushed: all four
    // unless something flushed some (the background writer writing a page
    // flushes the WAL up to it first), so the mount must show what the
    // database kept
    let kept = s.pg.sql(
        "vol",
        &format!("SELECT mode & 4095 FROM jfs.node WHERE inode = {f}"),
    );
    let kept: u32 = kept.parse().unwrap();
    eprintln!("mode {kept:o} survived the crash");
    assert!(
        jfs_e2e::eventually(10, || mode(&m.p("f")) == kept),
        "the crash left mode {kept:o}, but the mount still shows mode {:o}",
        mode(&m.p("f"))
    );
    let erased = xids();
    chmod_elsewhere(&s, f, 0o640);
    let reused = xids();
    eprintln!("transaction ids of changes: {erased} after the crash, {reused} after a change");
    assert!(
        jfs_e2e::eventually(10, || mode(&m.p("f")) == 0o640),
        "a change made after the crash is not seen by the mount: mode {:o}\n{}",
        mode(&m.p("f")),
        m.log_tail(20)
    );
}

#[test]
fn fsync_makes_the_files_other_changes_durable_or_fails() {
    // fsync of a file promises its metadata too (a length set by ftruncate,
    // a mode), not only what was written to it
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let s = Setup::new("fsync-meta", &["wal_writer_delay = '10s'"]);
    let m = s.mount("a", &["--meta-retry", "30"]);
    let path = m.p("f");
    fs::write(&path, b"0123456789").unwrap();
    let cue = s.pg.crash_on_cue();
    let f = fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(4).unwrap();
    f.set_permissions(fs::Permissions::from_mode(0o640))
        .unwrap();
    f.sync_all().unwrap();
    cue.crash();
    drop(f);
    let fresh = s.mount("fresh", &[]);
    let after = fs::metadata(fresh.p("f")).unwrap();
    assert_eq!(
        (after.len(), after.mode() & 0o7777),
        (4, 0o640),
        "what fsync acknowledged (length 4, mode 640) was lost in the crash\n{}",
        m.log_tail(20)
    );
    drop(fresh);
    // a change the crash erased before the fsync: the fsync says so
    an_ftruncate_erased_before_its_fsync_is_reported(&s, &m, &path, "fresh2");
}

#[test]
fn an_xattr_change_a_crash_erased_is_reported_by_the_files_fsync() {
    // fsync of a file promises its extended attributes too: a setxattr or
    // removexattr on the open file that a crash erased before the fsync
    // cannot be made again, so the fsync fails with EIO, or else the
    // change survived
    let s = Setup::new("fsync-xattr", &["wal_writer_delay = '10s'"]);
    let m = s.mount("a", &["--meta-retry", "30"]);
    let path = m.p("f");
    fs::write(&path, b"0123456789").unwrap();
    let change_then_crash =
        |change: &dyn Fn(&fs::File), want: Result<Vec<u8>, Errno>, fresh: &str| {
            let f = fs::OpenOptions::new().write(true).open(&path).unwrap();
            // nothing of the file's left to sync
            f.sync_all().unwrap();
            let cue = s.pg.crash_on_cue();
            change(&f);
            cue.crash();
            let synced = f.sync_all();
            drop(f);
            let fresh = s.mount(fresh, &[]);
            let found = xattr_of(&fresh.p("f"), "user.k");
            eprintln!("fsync after the crash: {synced:?}; user.k {found:?}");
            match synced.as_ref().map_err(|e| e.raw_os_error()) {
                Err(Some(libc::EIO)) => {}
                Ok(()) => assert_eq!(
                    found,
                    want,
                    "fsync acknowledged an xattr change the crash erased\n{}",
                    m.log_tail(20)
                ),
                Err(e) => panic!("fsync: {e:?}"),
            }
        };
    change_then_crash(
        &|f| fsetxattr(f, "user.k", b"v", XattrFlags::empty()).unwrap(),
        Ok(b"v".to_vec()),
        "fresh",
    );
    // (set for good first)
    let f = fs::File::open(&path).unwrap();
    fsetxattr(&f, "user.k", b"v", XattrFlags::empty()).unwrap();
    f.sync_all().unwrap();
    drop(f);
    change_then_crash(
        &|f| fremovexattr(f, "user.k").unwrap(),
        Err(Errno::NODATA),
        "fresh2",
    );
}

/// Truncates file `path` of mount `m` to 2 bytes, crashes the cluster,
/// then fsyncs: the crash erased the ftruncate (unless something flushed
/// the WAL first), which cannot be made again, so the fsync must say so
/// with EIO, or else the length 2 must have survived (seen by a fresh
/// mount, `fresh`).
fn an_ftruncate_erased_before_its_fsync_is_reported(
    s: &Setup,
    m: &jfs_e2e::Mount,
    path: &Path,
    fresh: &str,
) {
    let cue = s.pg.crash_on_cue();
    let f = fs::OpenOptions::new().write(true).open(path).unwrap();
    f.set_len(2).unwrap();
    cue.crash();
    let synced = f.sync_all();
    drop(f);
    let fresh = s.mount(fresh, &[]);
    let length = fs::metadata(fresh.p("f")).unwrap().len();
    eprintln!("fsync after the crash: {synced:?}; length {length}");
    match synced.as_ref().map_err(|e| e.raw_os_error()) {
        Err(Some(libc::EIO)) => {}
        Ok(()) => assert_eq!(
            length,
            2,
            "fsync acknowledged an ftruncate the crash erased\n{}",
            m.log_tail(20)
        ),
        Err(e) => panic!("fsync: {e:?}"),
    }
}

#[test]
fn an_fsync_through_pgbouncer_reports_what_a_crash_erased() {
    // PgBouncer keeps the mount's connections across a crash of the
    // server behind it: the fsync's sync can be the first statement to
    // reach the restarted server, and must not vouch for what the crash
    // erased before that is told again (or found lost)
    let s = Setup::new("pgbouncer-crash", &["wal_writer_delay = '10s'"]);
    let server = (s.pg.dir.display().to_string(), s.pg.port.to_string());
    let bouncer = jfs_e2e::PgBouncer::start_for("transaction", server, &[CLIENT]);
    let m = jfs_e2e::mount_at(
        &bouncer.meta_url_as("vol", CLIENT),
        &s.base.join("mnt-a"),
        &s.base.join("mount-a.log"),
        &["--meta-retry", "30"],
    );
    let path = m.p("f");
    fs::write(&path, b"0123456789").unwrap();
    an_ftruncate_erased_before_its_fsync_is_reported(&s, &m, &path, "fresh");
}
