//! `jfs rmr` removes a whole tree inside PostgreSQL, and the mount shows it
//! at once; `rm -rf` through a mount answers a directory's unlinks under
//! its lease and commits them in batches.
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;

use jfs_e2e::{eventually, jfs, ok, pattern, procedure_calls, Volume};

/// Unlinks in a row in one directory: after two, the mount takes the
/// directory's lease and answers the rest itself, committing them in
/// batches; a file with another link goes through PostgreSQL.
#[test]
fn rm_rf_commits_unlinks_in_batches_and_the_directory_shows_its_times() {
    let v = Volume::new("rmrf");
    // (as mounts are by default: kernel and mount caches on)
    let (m, addr) = v.mount_with_caches("a", "1", &[]);
    for d in ["keep", "tree/sub"] {
        fs::create_dir_all(m.p(d)).unwrap();
        for i in 0..60 {
            fs::write(m.p(&format!("{d}/f{i}")), b"x").unwrap();
        }
    }
    fs::write(m.p("outside"), b"o").unwrap();
    fs::hard_link(m.p("outside"), m.p("keep/link")).unwrap();
    // (the leases the creates took end after a quiet window)
    assert!(eventually(5, || v
        .sql("SELECT count(*) FROM jfs.dir_lease")
        == "0"));
    let calls = |name: &str| procedure_calls(&addr, name);
    let counts = || (calls("unlink"), calls("lease_unlink"), calls("getattr"));
    let (unlinks, batches, getattrs) = counts();
    // a directory emptied: after each unlink the kernel asks for the
    // directory's attributes again, which the mount knows
    ok(Command::new("sh")
        .arg("-c")
        .arg("rm -f keep/*")
        .current_dir(m.p("")));
    // (fsyncdir: what was answered is committed)
    fs::File::open(m.p("keep")).unwrap().sync_all().unwrap();
    let (unlinks, batches, getattrs) = {
        let now = counts();
        (now.0 - unlinks, now.1 - batches, now.2 - getattrs)
    };
    assert_eq!(
        unlinks, 3.0,
        "61 unlinks: two before the lease, and the hard link's"
    );
    assert!(
        (1.0..=4.0).contains(&batches),
        "58 unlinks under the lease in {batches} batches"
    );
    // (each commit makes the directory's times the database's: read again)
    assert!(
        getattrs <= 4.0,
        "the directory's attributes after an unlink cost no call: {getattrs} getattr"
    );
    // (fsyncdir gave keep's lease up; tree/sub's, taken by the creates
    // that filled it, may last a window more)
    let shown = fs::metadata(m.p("keep")).unwrap();
    assert_eq!(
        v.sql(&format!(
            "SELECT count(*) FROM jfs.dir_lease WHERE dir = {}",
            shown.ino()
        )),
        "0"
    );
    // ...and they are what the database holds (times in ns)
    let held = v.sql(&format!(
        "SELECT mtime || ' ' || ctime || ' ' || nlink FROM jfs.node WHERE inode = {}",
        shown.ino()
    ));
    let ns = |s: i64, n: i64| s * 1_000_000_000 + n;
    assert_eq!(
        format!(
            "{} {} {}",
            ns(shown.mtime(), shown.mtime_nsec()),
            ns(shown.ctime(), shown.ctime_nsec()),
            shown.nlink()
        ),
        held.trim()
    );
    // the hard-linked node lost a name, not its data
    assert_eq!(fs::read(m.p("outside")).unwrap(), b"o");
    assert_eq!(fs::metadata(m.p("outside")).unwrap().nlink(), 1);
    let (unlinks, batches, getattrs) = counts();
    ok(Command::new("rm").arg("-rf").arg(m.p("tree")));
    let (unlinks, batches, getattrs) = {
        let now = counts();
        (now.0 - unlinks, now.1 - batches, now.2 - getattrs)
    };
    assert_eq!(unlinks, 2.0, "rm -rf: 60 unlinks, two before the lease");
    // (the rmdir of sub commits the rest first)
    assert!(batches >= 1.0, "rm -rf: {batches} batches");
    assert!(getattrs <= 4.0, "rm -rf: {getattrs} getattr for 62 entries");
    assert!(!m.p("tree").exists());
    assert!(!Path::new(&v.mount("b", &[]).p("tree")).exists());
}

#[test]
fn rmr_removes_a_tree_server_side_and_the_kernel_forgets_it() {
    let v = Volume::new("rmrtree");
    // long kernel caches: the entry must be invalidated, not time out
    let m = v.mount("a", &["--entry-cache", "60", "--attr-cache", "60"]);
    for d in 0..5 {
        fs::create_dir_all(m.p(&format!("tree/d{d}/deeper"))).unwrap();
        for i in 0..500 {
            fs::write(m.p(&format!("tree/d{d}/f{i}")), b"").unwrap();
        }
    }
    fs::write(m.p("tree/d0/deeper/data"), pattern(2, 5 << 20)).unwrap();
    fs::write(m.p("outside"), b"outside").unwrap();
    fs::hard_link(m.p("outside"), m.p("tree/d1/link")).unwrap();
    assert!(m.p("tree/d4/f499").exists());
    let blocks_with_data = v.objects().len();
    assert_eq!(blocks_with_data, 3);

    let out = ok(jfs().arg("rmr").arg(m.p("tree")));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("2513 entries removed"), "{said}");
    assert!(
        !m.p("tree").exists(),
        "the kernel still shows the removed tree"
    );
    assert_eq!(fs::read(m.p("outside")).unwrap(), b"outside");
    assert_eq!(v.sql("SELECT count(*) FROM jfs.node"), "2");
    assert!(
        eventually(20, || v.objects().len() == 1),
        "{:?}",
        v.objects()
    );
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");

    // a missing path, and rm -rf through the mount still works
    let out = jfs().arg("rmr").arg(m.p("tree")).output().unwrap();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains(&format!("{} does not exist", m.p("tree").display())),
        "the message names the missing path: {said}"
    );
    fs::create_dir_all(m.p("again/x")).unwrap();
    fs::write(m.p("again/x/f"), b"f").unwrap();
    ok(Command::new("rm").arg("-rf").arg(m.p("again")));
    assert!(!m.p("again").exists());
}

/// The names of directory `rel` on mount `m`.
/// Another mount that lists or changes a directory this mount holds the
/// lease of waits for it: the holder commits the unlinks it answered and
/// gives the lease up, so the listing shows every one of them.
#[test]
fn a_leased_directory_is_handed_over_to_another_mount() {
    let v = Volume::new("lease-handover");
    let a = v.mount("a", &[]);
    let b = v.mount("b", &[]);
    fs::create_dir(a.p("d")).unwrap();
    for i in 0..20 {
        fs::write(a.p(&format!("d/f{i}")), b"x").unwrap();
    }
    for round in 0..3 {
        // after two unlinks, a answers the others under d's lease
        for i in 0..5 {
            fs::remove_file(a.p(&format!("d/f{}", round * 5 + i))).unwrap();
        }
        let asked = std::time::Instant::now();
        let listed = b.names("d");
        let took = asked.elapsed();
        let want: std::collections::BTreeSet<String> = ((round + 1) * 5..20)
            .map(|i| format!("f{i}"))
            .chain((0..round).map(|r| format!("b{r}")))
            .collect();
        assert_eq!(listed, want, "round {round}: d listed on the other mount");
        eprintln!("round {round}: the other mount listed d after {took:?}");
        // and changes it: a's lease, if taken again, is asked for
        fs::write(b.p(&format!("d/b{round}")), b"b").unwrap();
    }
    assert!(
        eventually(5, || a.names("d").len() == 5 + 3),
        "the other mount's creates are seen: {:?}",
        a.names("d")
    );
    assert!(
        batches_committed(&v) > 0.0,
        "no unlink was committed under a lease"
    );
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
}

/// Batches of unlinks committed on this volume, from the change log:
/// each lease_unlink logs its removals as one transaction's.
fn batches_committed(v: &Volume) -> f64 {
    v.sql(
        "SELECT count(*) FROM (SELECT xid FROM jfs.change WHERE op = 'unlink' \
         GROUP BY xid HAVING count(*) > 1) batches",
    )
    .parse()
    .unwrap()
}

/// A crash of the holder loses only the unlinks it had not committed,
/// never half of a batch; the other mount gets the directory once the dead
/// holder's lease ends (5 s after its last commit).
#[test]
fn a_crash_of_the_lease_holder_loses_only_what_it_had_not_committed() {
    let v = Volume::new("lease-crash");
    let a = v.mount("a", &[]);
    let b = v.mount("b", &[]);
    fs::create_dir(a.p("d")).unwrap();
    for i in 0..50 {
        fs::write(a.p(&format!("d/f{i}")), format!("data {i}")).unwrap();
    }
    for i in 0..50 {
        fs::remove_file(a.p(&format!("d/f{i}"))).unwrap();
    }
    a.crash();
    let asked = std::time::Instant::now();
    let left = b.names("d");
    eprintln!(
        "{} of 50 unlinks lost with the holder; the other mount listed d after {:?}",
        left.len(),
        asked.elapsed()
    );
    for name in &left {
        let i: usize = name[1..].parse().unwrap();
        assert_eq!(
            fs::read_to_string(b.p(&format!("d/{name}"))).unwrap(),
            format!("data {i}")
        );
    }
    assert_eq!(v.sql("SELECT count(*) FROM jfs.dir_lease"), "0");
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
}

/// Creates and unlinks taking turns in one directory (a database's
/// rollback journal, made and removed at every transaction) take no lease:
/// each create would give it up again, and another mount using the
/// directory would wait for every one.
#[test]
fn creates_and_unlinks_taking_turns_take_no_lease() {
    let v = Volume::new("lease-turns");
    let (a, addr) = v.mount_with_caches("a", "1", &[]);
    let b = v.mount("b", &[]);
    for i in 0..20 {
        fs::write(a.p("app.db-journal"), format!("txn {i}")).unwrap();
        fs::remove_file(a.p("app.db-journal")).unwrap();
        fs::write(b.p(&format!("b{i}")), b"b").unwrap();
    }
    assert_eq!(
        procedure_calls(&addr, "take_lease"),
        0.0,
        "20 create-unlink turns took leases"
    );
    // while unlinks in a row do
    for i in 0..3 {
        fs::remove_file(a.p(&format!("b{i}"))).unwrap();
    }
    assert_eq!(procedure_calls(&addr, "take_lease"), 1.0);
}

/// rm -rf under directory leases while PostgreSQL crashes (`-m immediate`)
/// and restarts (`-m fast`), one after the other, again and again. With
/// the volume's durability 'always' no commit is erased, so nothing may
/// show: rm -rf sees no error, the batches a fault cut are committed once
/// it is back, and another mount finds the tree gone, fsck nothing wrong,
/// and no lease left.
#[test]
fn rm_rf_under_leases_sees_no_error_across_postgres_crashes_and_restarts() {
    use std::time::Duration;
    let s = jfs_e2e::PrivateVolume::new("lease-pg-faults", &[]);
    s.pg.sql("vol", "UPDATE jfs.setting SET meta_durability = 'always'");
    let addr = jfs_e2e::free_metrics_addr();
    let m = s.mount("a", &["--meta-retry", "30", "--metrics", &addr]);
    const DIRS: usize = 6;
    const FILES: usize = 800;
    for d in 0..DIRS {
        fs::create_dir_all(m.p(&format!("tree/d{d}"))).unwrap();
        for i in 0..FILES {
            fs::write(m.p(&format!("tree/d{d}/f{i}")), b"").unwrap();
        }
    }
    let said = s.base.join("rm.err");
    let mut rm = Command::new("rm")
        .arg("-rf")
        .arg(m.p("tree"))
        .stderr(fs::File::create(&said).unwrap())
        .spawn()
        .unwrap();
    let mut rng = jfs_e2e::Rng::new(36);
    let (mut faults, mut mid_rm) = (0, 0);
    while faults < 12 && rm.try_wait().unwrap().is_none() {
        std::thread::sleep(Duration::from_millis(30 + rng.below(170)));
        let how = if faults % 2 == 0 { "immediate" } else { "fast" };
        s.pg.pg_ctl(&format!("-m {how} stop"));
        // (rm still running with the server down: the fault cut it)
        mid_rm += usize::from(rm.try_wait().unwrap().is_none());
        s.pg.pg_ctl("start");
        faults += 1;
    }
    let status = rm.wait().unwrap();
    let said = fs::read_to_string(&said).unwrap();
    eprintln!(
        "{faults} faults, {mid_rm} of them while rm -rf ran; {} unlink and {} lease_unlink calls",
        procedure_calls(&addr, "unlink"),
        procedure_calls(&addr, "lease_unlink")
    );
    eprintln!("{}", m.log_warnings(20));
    assert!(
        status.success() && said.is_empty(),
        "rm -rf across the faults: {status}: {said}\n{}",
        m.log_tail(30)
    );
    assert!(mid_rm >= 1, "no fault came while rm -rf ran");
    assert!(
        procedure_calls(&addr, "lease_unlink") >= 1.0,
        "rm -rf took no lease"
    );
    let other = s.mount("b", &[]);
    assert!(!other.p("tree").exists(), "the other mount sees the tree");
    let sql = |q: &str| s.pg.sql("vol", q);
    assert_eq!(
        sql("SELECT count(*) FROM jfs.node"),
        "1",
        "only the root is left"
    );
    assert_eq!(sql("SELECT count(*) FROM jfs.fsck()"), "0");
    assert!(
        jfs_e2e::eventually(10, || sql("SELECT count(*) FROM jfs.dir_lease") == "0"),
        "a lease outlived rm -rf"
    );
}
