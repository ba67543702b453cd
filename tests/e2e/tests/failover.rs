//! Losing the database server: a primary with a synchronous standby, and
//! mounts whose META_URL names both (`target_session_attrs=read-write`).
//! What fsync acknowledged is on the standby before fsync returns, and when
//! the primary is killed and the standby promoted the mounts carry on
//! without remounting and without losing what was acknowledged.
//! (Private clusters; the mounts run as a client role.)
use std::fs::{self, File};
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use jfs_e2e::{
    assert_no_errors, eventually, free_metrics_addr, jfs, make_volume, metric_sum, metrics_text,
    missing_or_wrong, mount_at, ok, Cluster, Formation, Mount, Workload, PRIVATE_CLIENT as CLIENT,
};

/// A volume on a primary (`pg-a`) with a synchronous hot standby (`pg-b`).
struct Pair {
    primary: Cluster,
    standby: Cluster,
    base: PathBuf,
    /// (last: the clusters stop before their directory goes)
    _tmp: tempfile::TempDir,
}

impl Pair {
    fn new(name: &str) -> Pair {
        let tmp = tempfile::Builder::new()
            .prefix(&format!("jfs-{name}-"))
            .tempdir()
            .unwrap();
        let base = tmp.path().to_path_buf();
        ok(std::process::Command::new("chmod").arg("755").arg(&base));
        let primary = Cluster::start(&base.join("pg-a"));
        primary.make_volume(name, CLIENT, &base.join("bucket"), &[]);
        let standby = primary.standby(&base.join("pg-b"));
        // every commit that asks for it waits for the standby's flush
        primary.sql(
            "postgres",
            "ALTER SYSTEM SET synchronous_standby_names = '*'",
        );
        primary.sql("postgres", "SELECT pg_reload_conf()");
        let sync = "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'";
        assert!(
            eventually(30, || primary.sql("postgres", sync) == "1"),
            "the standby never became synchronous"
        );
        Pair {
            _tmp: tmp,
            base,
            primary,
            standby,
        }
    }

    /// META_URL naming the standby first: only a server that takes writes
    /// will do, whichever that is now.
    fn url(&self) -> String {
        format!(
            "postgres://{CLIENT}@{},{}/vol?target_session_attrs=read-write",
            self.standby.host(),
            self.primary.host()
        )
    }

    fn mount(&self, label: &str, extra: &[&str]) -> Mount {
        mount_at(
            &self.url(),
            &self.base.join(format!("mnt-{label}")),
            &self.base.join(format!("mount-{label}.log")),
            extra,
        )
    }

    /// The primary lost as a machine is lost, then the standby promoted
    /// (what a failover manager does once it sees the primary gone).
    fn fail_over(&self) {
        self.primary.kill9();
        self.standby.pg_ctl("promote");
    }
}

#[test]
fn an_fsync_returns_only_once_the_synchronous_standby_has_the_change() {
    let pair = Pair::new("syncstandby");
    let m = pair.mount("a", &["--meta-retry", "120"]);
    fs::create_dir(m.p("d")).unwrap();
    fs::write(m.p("d/draft"), b"vouched for").unwrap();
    File::open(m.p("d")).unwrap().sync_all().unwrap();

    // the standby away: a change made now (a rename: its commit is
    // asynchronous, flushed locally by the WAL writer within a second) is
    // on the primary alone
    pair.standby.pg_ctl("-m fast stop");
    fs::rename(m.p("d/draft"), m.p("d/vouched")).unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let (tx, rx) = mpsc::channel();
    let dir = m.p("d");
    std::thread::spawn(move || {
        let synced = File::open(&dir).and_then(|d| d.sync_all());
        tx.send(synced.map_err(|e| e.to_string())).unwrap();
    });
    assert!(
        rx.recv_timeout(Duration::from_secs(5)).is_err(),
        "fsync returned while the synchronous standby was away"
    );
    pair.standby.pg_ctl("start");
    let synced = rx.recv_timeout(Duration::from_secs(60));
    assert!(
        matches!(synced, Ok(Ok(()))),
        "fsync once the standby was back: {synced:?}"
    );

    // what it vouched for survives the primary's loss
    pair.fail_over();
    let fresh = pair.mount("b", &["--meta-retry", "120"]);
    assert_eq!(fs::read(fresh.p("d/vouched")).unwrap(), b"vouched for");
    assert_eq!(
        pair.standby.sql("vol", "SELECT count(*) FROM jfs.fsck()"),
        "0"
    );
}

#[test]
fn mounts_carry_on_across_a_failover_and_lose_nothing_acknowledged() {
    let pair = Pair::new("failover");
    let m = pair.mount("a", &["--meta-retry", "120"]);
    let work = Workload::start(&m.p("work"), &pair.base.join("work.out"), 2, 2);
    assert!(
        eventually(60, || work.recorded() >= 100),
        "the workload recorded {} files",
        work.recorded()
    );
    let before = work.recorded();
    let failed_at = Instant::now();
    pair.fail_over();
    assert!(
        eventually(120, || work.recorded() >= before + 200),
        "the workload recorded {} files after the failover (before: {before})\n{}",
        work.recorded() - before,
        m.log_warnings(100)
    );
    let carried_on_after = failed_at.elapsed();
    let outcome = work.finish();
    assert_no_errors(&outcome, &m, "across the failover");
    // a new mount, with nothing cached, reads every acknowledged file
    let fresh = pair.mount("b", &[]);
    let bad = missing_or_wrong(&outcome.recorded, &fresh.p("work"));
    assert!(
        bad.is_empty(),
        "{} of {} recorded files missing or wrong after the failover: {:?}",
        bad.len(),
        outcome.recorded.len(),
        &bad[..bad.len().min(20)]
    );
    assert_eq!(
        pair.standby.sql("vol", "SELECT count(*) FROM jfs.fsck()"),
        "0"
    );
    println!(
        "failover: {} files acknowledged, all read back; 200 more recorded within {:.1} s of the \
         kill; op latency p50/p99/max {}",
        outcome.recorded.len(),
        carried_on_after.as_secs_f64(),
        outcome.latency
    );
}

/// `count` more files recorded by `work` within `secs`, or the test fails
/// saying what the mount logged.
fn records_more(work: &Workload, count: usize, secs: u64, m: &Mount, what: &str) {
    let from = work.recorded();
    assert!(
        eventually(secs, || work.recorded() >= from + count),
        "{what}: the workload recorded {} of {count} files in {secs} s\n{}",
        work.recorded() - from,
        m.log_warnings(100)
    );
}

#[test]
fn a_failover_manager_moves_the_primary_and_the_mounts_never_notice() {
    // pg_auto_failover: a monitor and two nodes, the second a synchronous
    // standby of the first; the volume made on the primary
    let f = Formation::start("paf");
    make_volume(
        |db, sql| f.sql("a", db, sql),
        &f.url("postgres", "vol"),
        "paf",
        CLIENT,
        &f.base.join("bucket"),
        &[],
    );
    let url = f.url(CLIENT, "vol");
    let mount = |label: &str, extra: &[&str]| {
        mount_at(
            &url,
            &f.base.join(format!("mnt-{label}")),
            &f.base.join(format!("mount-{label}.log")),
            extra,
        )
    };
    let m = mount("a", &["--meta-retry", "180"]);
    let work = Workload::start(&m.p("work"), &f.base.join("work.out"), 2, 2);
    records_more(&work, 100, 60, &m, "before the failover");

    // node a lost: the monitor promotes b
    let lost_at = Instant::now();
    f.lose("a");
    records_more(&work, 100, 180, &m, "across the failover");
    let failover_secs = lost_at.elapsed().as_secs_f64();
    assert_eq!(f.primary(), Some("b"), "{}", f.states());

    // a comes back as b's standby, then a switchover makes it primary again
    f.keeper("a", false);
    assert!(
        eventually(120, || f.states().contains("a:secondary:secondary")),
        "node a did not rejoin: {}",
        f.states()
    );
    let switched_at = Instant::now();
    f.switchover();
    records_more(&work, 100, 120, &m, "across the switchover");
    let switchover_secs = switched_at.elapsed().as_secs_f64();
    assert_eq!(f.primary(), Some("a"), "{}", f.states());

    let outcome = work.finish();
    assert_no_errors(&outcome, &m, "across the failover and the switchover");
    let fresh = mount("b", &[]);
    let bad = missing_or_wrong(&outcome.recorded, &fresh.p("work"));
    assert!(
        bad.is_empty(),
        "{} of {} recorded files missing or wrong: {:?}",
        bad.len(),
        outcome.recorded.len(),
        &bad[..bad.len().min(20)]
    );
    assert_eq!(f.sql("a", "vol", "SELECT count(*) FROM jfs.fsck()"), "0");
    println!(
        "pg_auto_failover: {} files acknowledged, all read back; 100 more recorded within \
         {failover_secs:.1} s of losing the primary and {switchover_secs:.1} s of the \
         switchover; op latency p50/p99/max {}",
        outcome.recorded.len(),
        outcome.latency
    );
}

#[test]
fn a_read_only_mount_of_the_standby_follows_the_primary_and_writes_nothing() {
    let pair = Pair::new("mirror");
    let rw = pair.mount("rw", &[]);
    let standby = format!("postgres://{CLIENT}@{}/vol", pair.standby.host());

    // a standby is mounted read-only or not at all
    let refused = pair.base.join("mnt-refused");
    fs::create_dir_all(&refused).unwrap();
    let out = jfs()
        .args(["mount", &standby])
        .arg(&refused)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a standby mounted read-write");
    assert!(
        err.contains("hot standby") && err.contains("--read-only"),
        "{err}"
    );

    let metrics_addr = free_metrics_addr();
    // (the kernel keeps names and attributes a minute: the change log,
    // replicated, is what keeps them exact)
    let ro = mount_at(
        &standby,
        &pair.base.join("mnt-ro"),
        &pair.base.join("mount-ro.log"),
        &[
            "--read-only",
            "--attr-cache",
            "60",
            "--entry-cache",
            "60",
            "--metrics",
            &metrics_addr,
        ],
    );
    let sync = |p: &std::path::Path| File::open(p).unwrap().sync_all().unwrap();
    fs::write(rw.p("f"), b"one").unwrap();
    sync(&rw.p("f"));
    assert!(
        eventually(10, || fs::read(ro.p("f")).ok().as_deref()
            == Some(b"one".as_slice())),
        "the standby's mount never showed the primary's new file"
    );
    fs::write(rw.p("f"), b"two, longer").unwrap();
    sync(&rw.p("f"));
    assert!(
        eventually(10, || fs::read(ro.p("f")).ok().as_deref()
            == Some(b"two, longer".as_slice())),
        "the standby's mount kept the old bytes: {:?}",
        fs::read(ro.p("f"))
    );
    fs::rename(rw.p("f"), rw.p("g")).unwrap();
    sync(&rw.path);
    assert!(
        eventually(10, || !ro.p("f").exists() && ro.p("g").exists()),
        "the standby's mount kept the old name"
    );

    // it writes nothing: no file, and no session, heartbeat or anything
    // else in the database (the only session is the primary's mount's)
    let write = fs::write(ro.p("x"), b"x").unwrap_err();
    assert_eq!(write.raw_os_error(), Some(libc::EROFS), "{write}");
    assert_eq!(
        pair.primary.sql("vol", "SELECT count(*) FROM jfs.session"),
        "1"
    );
    // locks hold on this machine (the kernel's)
    ok(std::process::Command::new("flock")
        .args(["--shared", "--nonblock"])
        .arg(ro.p("g"))
        .arg("true"));

    // how far behind it reads: in its metrics and in jfs status
    let text = metrics_text(&metrics_addr).unwrap();
    assert!(text.contains("jfs_replica_lag_seconds{"), "{text}");
    let status = ok(jfs().args(["status", &standby]));
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(status.contains("a hot standby"), "{status}");
    // and nothing it did was refused by the standby along the way
    std::thread::sleep(Duration::from_secs(3));
    let warnings = ro.log_warnings(20);
    assert!(
        warnings.is_empty(),
        "the standby's mount logged:\n{warnings}"
    );
}

#[test]
fn a_mount_reads_metadata_from_the_standby_once_it_has_replayed_what_the_mount_saw() {
    let pair = Pair::new("replicareads");
    let standby = format!("postgres://{CLIENT}@{}/vol", pair.standby.host());

    // the primary is refused as a replica, with the reason
    let refused = pair.base.join("mnt-refused");
    fs::create_dir_all(&refused).unwrap();
    let primary = format!("postgres://{CLIENT}@{}/vol", pair.primary.host());
    let out = jfs()
        .args(["mount", &pair.url(), "--meta-replica", &primary])
        .arg(&refused)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a primary was taken as a replica");
    assert!(err.contains("not a hot standby"), "{err}");

    // `a` keeps no copies (every lookup, getattr and listing asks the
    // database); `c` follows the change log; `b` reads the primary only
    let a_metrics = free_metrics_addr();
    let a = pair.mount(
        "a",
        &[
            "--meta-replica",
            &standby,
            "--changes-poll",
            "0",
            "--metrics",
            &a_metrics,
        ],
    );
    let c_metrics = free_metrics_addr();
    // (and commits nothing of its own meanwhile: no gc, no heartbeat)
    let quiet = ["--gc-interval", "3600", "--heartbeat", "60"];
    let c = pair.mount(
        "c",
        &[
            &["--meta-replica", &standby, "--metrics", &c_metrics][..],
            &quiet,
        ]
        .concat(),
    );
    let b = pair.mount("b", &[]);
    let reads = |addr: &str, outcome: &str| {
        metric_sum(
            addr,
            "jfs_replica_reads_total",
            &format!("outcome=\"{outcome}\""),
        )
        .unwrap_or(0.0)
    };

    // caught up, the standby answers
    fs::create_dir(a.p("d")).unwrap();
    for i in 0..20 {
        fs::write(a.p(&format!("d/f{i}")), b"x").unwrap();
    }
    assert!(
        eventually(10, || {
            let listed = fs::read_dir(a.p("d")).unwrap().count();
            assert_eq!(listed, 20);
            reads(&a_metrics, "served") >= 20.0
        }),
        "the standby served {} reads",
        reads(&a_metrics, "served")
    );

    // with its replay paused, every answer comes from the primary: this
    // mount sees each of its own changes at once ...
    pair.standby.sql("postgres", "SELECT pg_wal_replay_pause()");
    let behind = reads(&a_metrics, "behind");
    for i in 0..20 {
        let name = format!("d/g{i}");
        fs::write(a.p(&name), b"yy").unwrap();
        assert_eq!(fs::metadata(a.p(&name)).unwrap().len(), 2, "{name}");
        fs::rename(a.p(&name), a.p(&format!("d/h{i}"))).unwrap();
        assert!(!a.p(&name).exists(), "{name} still there after its rename");
        fs::remove_file(a.p(&format!("d/f{i}"))).unwrap();
    }
    let mut names: Vec<String> = fs::read_dir(a.p("d"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    let mut want: Vec<String> = (0..20).map(|i| format!("h{i}")).collect();
    want.sort();
    assert_eq!(names, want);
    assert!(
        reads(&a_metrics, "behind") > behind,
        "no read found the standby behind"
    );
    // ... and another mount's changes once the change log shows them
    fs::write(b.p("d/from-b"), b"made on b").unwrap();
    assert!(
        eventually(10, || fs::read(c.p("d/from-b")).ok().as_deref()
            == Some(b"made on b".as_slice())),
        "a mount reading from a standby that lags missed another mount's change"
    );

    // replay resumed, the standby answers again
    pair.standby
        .sql("postgres", "SELECT pg_wal_replay_resume()");
    let served = reads(&a_metrics, "served");
    assert!(
        eventually(10, || {
            let _ = fs::metadata(a.p("d/h0")).unwrap();
            reads(&a_metrics, "served") > served
        }),
        "the standby never answered again after catching up"
    );

    // the standby lost: the primary answers, and nothing fails
    pair.primary.sql(
        "postgres",
        "ALTER SYSTEM SET synchronous_standby_names = ''",
    );
    pair.primary.sql("postgres", "SELECT pg_reload_conf()");
    pair.standby.kill9();
    let failed = reads(&a_metrics, "failed");
    for i in 0..20 {
        let name = format!("d/h{i}");
        assert_eq!(fs::read(a.p(&name)).unwrap(), b"yy", "{name}");
        assert_eq!(fs::read_dir(c.p("d")).unwrap().count(), 21);
    }
    assert!(
        reads(&a_metrics, "failed") > failed,
        "no read went to the lost standby"
    );
    assert!(
        fs::read_to_string(&a.log)
            .unwrap()
            .contains("does not answer"),
        "the mount did not say the standby is lost"
    );
}

#[test]
fn a_standby_left_on_the_old_timeline_by_a_failover_serves_no_read() {
    // pg-c, a second standby, serves the mount's reads; pg-b, cut off
    // before the primary's last changes, is promoted when the primary is
    // lost: pg-c then holds WAL past the fork point, further than the new
    // primary has written, rows that never committed there
    let pair = Pair::new("oldtimeline");
    let stale = pair.primary.standby(&pair.base.join("pg-c"));
    let stale_url = format!("postgres://{CLIENT}@{}/vol", stale.host());
    let metrics = free_metrics_addr();
    let a = pair.mount(
        "a",
        &[
            "--meta-replica",
            &stale_url,
            "--changes-poll",
            "0",
            "--metrics",
            &metrics,
            "--meta-retry",
            "120",
        ],
    );
    let reads = |outcome: &str| {
        metric_sum(
            &metrics,
            "jfs_replica_reads_total",
            &format!("outcome=\"{outcome}\""),
        )
        .unwrap_or(0.0)
    };
    fs::create_dir(a.p("d")).unwrap();
    File::open(a.p("d")).unwrap().sync_all().unwrap();
    assert!(
        eventually(10, || {
            let _ = fs::read_dir(a.p("d")).unwrap().count();
            reads("served") >= 1.0
        }),
        "the standby never served a read"
    );

    // (pg-b has d: it replayed all the primary wrote so far)
    let made = pair
        .primary
        .sql("postgres", "SELECT pg_current_wal_insert_lsn()");
    let has_d = format!("SELECT pg_last_wal_replay_lsn() >= '{made}'");
    assert!(
        eventually(30, || pair.standby.sql("postgres", &has_d) == "t"),
        "pg-b never replayed the mount's directory"
    );
    pair.primary.sql(
        "postgres",
        "ALTER SYSTEM SET synchronous_standby_names = ''",
    );
    pair.primary.sql("postgres", "SELECT pg_reload_conf()");
    pair.standby.pg_ctl("-m fast stop");
    let d = pair
        .primary
        .sql("vol", "SELECT inode FROM jfs.lookup(1, 'd')");
    pair.primary.sql(
        "vol",
        &format!(
            "SELECT count(*) FROM generate_series(1, 2000) i \
             CROSS JOIN LATERAL jfs.mknod({d}, convert_to('ghost' || i, 'UTF8'), 1, 420, 0, 0)"
        ),
    );
    let end = pair
        .primary
        .sql("postgres", "SELECT pg_current_wal_insert_lsn()");
    let replayed = format!("SELECT pg_last_wal_replay_lsn() >= '{end}'");
    assert!(
        eventually(30, || stale.sql("postgres", &replayed) == "t"),
        "pg-c never replayed the primary's last changes"
    );
    pair.primary.kill9();
    pair.standby.pg_ctl("start");
    pair.standby.pg_ctl("promote");

    // the mount carries on on the new primary, and commits there
    fs::write(a.p("d/after"), b"after").unwrap();
    File::open(a.p("d")).unwrap().sync_all().unwrap();
    let names: Vec<String> = fs::read_dir(a.p("d"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    let ghosts = names.iter().filter(|n| n.starts_with("ghost")).count();
    assert_eq!(
        (ghosts, names.contains(&"after".to_string())),
        (0, true),
        "the listing came from the standby left on the old timeline: {} names",
        names.len()
    );
    assert!(!a.p("d/ghost1").exists(), "a lookup found a ghost");
    assert!(
        fs::read_to_string(&a.log)
            .unwrap()
            .contains("may hold changes the primary never committed"),
        "the mount did not say why it left the standby"
    );
}
