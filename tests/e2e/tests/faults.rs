//! Bad input and faults: clear errors, nothing lost.
use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use jfs_e2e::{env, fails_with, jfs, meta_url, Volume};

/// The tests of this file run one at a time: one of them stops and starts the
/// shared test cluster, which any other test running then would see as a
/// connection refused or "the database system is shutting down".
/// Stops or starts the test cluster (its output to its log, not to ours:
/// a server holding our stdout would keep the test runner's pipe open).
fn pg_ctl(action: &str) {
    assert!(pg_ctl_status(action), "pg_ctl {action}");
}

/// [`pg_ctl`], saying whether it worked.
fn pg_ctl_status(action: &str) -> bool {
    let data = env("JFS_TEST_PGDATA");
    let log = format!("{data}/../postgres.log");
    Command::new("runuser")
        .args([
            "-u",
            "postgres",
            "--",
            "/usr/lib/postgresql/15/bin/pg_ctl",
            "-D",
            &data,
            "-l",
            &log,
        ])
        .args(["-w", "-m", "fast", action])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn bad_input_gets_clear_errors_and_postgres_outages_are_survived() {
    let _alone = jfs_e2e::one_at_a_time();
    let v = Volume::new("faults");
    // format over an existing volume without --force
    fails_with(
        jfs()
            .args(["format", &v.admin_url, "faults", "--bucket"])
            .arg(v.bucket()),
        "already formatted",
    );
    // a mount's role may not administer: format, quotas, tiers need grant_admin
    let mut reformat = jfs();
    reformat
        .args(["format", &v.url, "faults", "--force", "--bucket"])
        .arg(v.dir.path().join("elsewhere"));
    fails_with(&mut reformat, "jfs.grant_admin");
    fails_with(
        jfs().args(["quota", "set", &v.url, "--path", "/", "--inodes", "5"]),
        "jfs.grant_admin",
    );
    fails_with(
        jfs().args([
            "config",
            &v.url,
            "--tier-id",
            "1",
            "--tier-sc",
            "STANDARD_IA",
        ]),
        "jfs.grant_admin",
    );
    assert_eq!(
        v.sql("SELECT count(*) FROM jfs.quota WHERE max_inodes = 5"),
        "0",
        "the refused quota was not set"
    );
    // a META_URL that is not a URL, a database that does not exist, a host that does not answer
    fails_with(jfs().args(["status", "not a url"]), "bad META_URL");
    fails_with(
        jfs().args(["status", &meta_url("jfs_e2e_no_such_db")]),
        "cannot connect to the metadata database",
    );
    // with the server's own words, not a bare "db error"
    fails_with(
        jfs().args(["status", &meta_url("jfs_e2e_no_such_db")]),
        "database \"jfs_e2e_no_such_db\" does not exist",
    );
    let no_role = meta_url("postgres").replacen(
        &format!("//{}@", env("PGUSER")),
        "//jfs_e2e_no_such_role@",
        1,
    );
    fails_with(
        jfs().args(["status", &no_role]),
        "role \"jfs_e2e_no_such_role\" does not exist",
    );
    fails_with(
        jfs().args(["status", "postgres://u:secret@127.0.0.1:1/db"]),
        "cannot connect",
    );
    let out = jfs()
        .args(["status", "postgres://u:secret@127.0.0.1:1/db"])
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("secret"),
        "password leaked"
    );
    // mount on a directory that does not exist
    fails_with(
        jfs().args(["mount", &v.url, "/nonexistent/jfs-mnt", "-d"]),
        "does not exist",
    );
    // a database without the extension
    fails_with(
        jfs()
            .args(["mount", &meta_url("postgres")])
            .arg(v.dir.path()),
        "no jfs extension",
    );

    // PostgreSQL stops under a mount: calls are retried for --meta-retry,
    // then fail (EIO), then work again
    let m = v.mount("a", &["--meta-retry", "3"]);
    fs::write(m.p("before"), b"before").unwrap();
    pg_ctl("stop");
    let started = Instant::now();
    let err = fs::write(m.p("during"), b"x").unwrap_err();
    let took = started.elapsed();
    pg_ctl("start");
    assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err}");
    assert!(
        took >= Duration::from_secs(3) && took < Duration::from_secs(60),
        "took {took:?}"
    );
    assert!(
        m.log_text().contains("giving up"),
        "the log names the cause:\n{}",
        m.log_tail(20)
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match fs::write(m.p("after"), b"after") {
            Ok(()) => break,
            Err(e) if Instant::now() < deadline => {
                eprintln!("waiting for the mount to reconnect: {e}");
                std::thread::sleep(Duration::from_millis(500));
            }
            Err(e) => panic!("the mount did not recover: {e}"),
        }
    }
    assert_eq!(fs::read(m.p("before")).unwrap(), b"before");
    assert_eq!(fs::read(m.p("after")).unwrap(), b"after");

    // PostgreSQL restarts under an idle mount: no operation after it fails
    // (every connection the mount holds is dead, none may cost an EIO)
    for i in 0..20 {
        fs::write(m.p(&format!("idle-{i}")), format!("file {i}")).unwrap();
    }
    pg_ctl("stop");
    pg_ctl("start");
    std::thread::sleep(Duration::from_secs(1));
    let mut failures = Vec::new();
    for i in 0..100 {
        let name = format!("idle-{}", i % 20);
        let result = match i % 4 {
            0 => fs::metadata(m.p(&name)).map(|_| ()),
            1 => fs::read(m.p(&name)).map(|_| ()),
            2 => fs::write(m.p(&format!("new-{i}")), b"new"),
            _ => fs::read_dir(m.path.clone()).map(|d| assert!(d.count() > 20)),
        };
        if let Err(e) = result {
            failures.push(format!("op {i} on {name}: {e}"));
        }
    }
    assert!(failures.is_empty(), "after a restart: {failures:?}");
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
}

/// A tmpfs mounted over a directory for the length of a test.
struct SmallFs(std::path::PathBuf);

impl SmallFs {
    fn mount(dir: &std::path::Path, size: &str) -> SmallFs {
        jfs_e2e::ok(
            Command::new("mount")
                .args(["-t", "tmpfs", "-o"])
                .arg(format!("size={size}"))
                .arg("tmpfs")
                .arg(dir),
        );
        SmallFs(dir.to_path_buf())
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[test]
fn a_full_bucket_file_system_is_enospc_and_failed_mounts_leave_no_session() {
    let _alone = jfs_e2e::one_at_a_time();
    let v = Volume::new("enospc");
    let _small = SmallFs::mount(&v.bucket(), "1m");
    {
        let m = v.mount("a", &[]);
        let mut f = fs::File::create(m.p("big")).unwrap();
        use std::io::Write;
        f.write_all(&vec![7u8; 8 << 20]).unwrap_or(());
        let err = f.sync_all().expect_err("8 MiB cannot fit a 1 MiB store");
        assert_eq!(err.raw_os_error(), Some(libc::ENOSPC), "fsync: {err}");
        drop(f);
        // what fits is still written and read back
        fs::write(m.p("small"), b"fits").unwrap();
        assert_eq!(fs::read(m.p("small")).unwrap(), b"fits");
        // and the log says the disk under the store is (nearly) full
        assert!(
            jfs_e2e::eventually(10, || fs::read_to_string(&m.log)
                .unwrap_or_default()
                .contains("the disk under the object store")),
            "the mount never said its store's disk is full"
        );
        m.unmount();
    }
    // a block that could not be stored leaves no file: every object left
    // is a committed slice's (a new block has a name only once whole)
    let committed =
        v.sql("SELECT coalesce(string_agg(slice_id::text, ' '), '') FROM jfs.slice_ref");
    let committed: Vec<&str> = committed.split_whitespace().collect();
    let objects = v.objects();
    assert!(!objects.is_empty(), "the small file's block is stored");
    for o in &objects {
        let name = o.file_name().unwrap().to_string_lossy().to_string();
        let id = name.split('_').next().unwrap();
        assert!(
            committed.contains(&id),
            "{} is left in the bucket, no committed slice names it (committed: {committed:?})",
            o.display()
        );
    }
    // a mount that fails once its session is registered takes it away again
    let not_a_dir = v.dir.path().join("cache-file");
    fs::write(&not_a_dir, b"x").unwrap();
    let mnt = v.dir.path().join("mnt-fails");
    fs::create_dir_all(&mnt).unwrap();
    let out = jfs()
        .args(["mount", &v.url])
        .arg(&mnt)
        .arg("--cache-dir")
        .arg(&not_a_dir)
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "a cache directory that is a file must fail the mount"
    );
    assert_eq!(v.sql("SELECT count(*) FROM jfs.session"), "0");
}

/// Starts the test cluster again when dropped, if a test stopped it and
/// failed before starting it (the other tests need it).
struct StartAgain;

impl Drop for StartAgain {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = pg_ctl_status("start");
        }
    }
}

/// The bytes a writer process of the test below writes (seed, length).
fn bytes_of(seed: u64, len: usize) -> Vec<u8> {
    (0..len as u64)
        .map(|i| ((seed * 7 + i * 13) % 251) as u8)
        .collect()
}

/// A process that writes FILE at two places (two slices), says "written",
/// and then answers each line on stdin with an fsync: "ok" or "err ERRNO".
/// (The test's own process holds no descriptor of the mount: a command it
/// starts would inherit it and flush it as it execs.)
const WRITER: &str = r#"
import os, sys
def data(seed, n): return bytes((seed * 7 + i * 13) % 251 for i in range(n))
fd = os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
os.pwrite(fd, data(1, 100000), 0)
os.pwrite(fd, data(2, 50000), 1000000)
print("written", flush=True)
for line in sys.stdin:
    try:
        os.fsync(fd)
        print("ok", flush=True)
    except OSError as e:
        print("err", e.errno, flush=True)
os.close(fd)
"#;

#[test]
fn writes_pending_through_an_outage_are_kept_until_stored() {
    use std::io::{BufRead, Write};
    let _alone = jfs_e2e::one_at_a_time();
    let v = Volume::new("keep-pending");
    let m = v.mount("a", &["--meta-retry", "2", "--commit-after", "0"]);
    let mut writer = Command::new("python3")
        .args(["-c", WRITER])
        .arg(m.p("f"))
        .current_dir("/")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = writer.stdin.take().unwrap();
    let mut answers = std::io::BufReader::new(writer.stdout.take().unwrap()).lines();
    let mut next = || answers.next().unwrap().unwrap();
    assert_eq!(next(), "written");
    let _start_again = StartAgain;
    pg_ctl("stop");
    writeln!(stdin, "fsync").unwrap();
    let first = next();
    pg_ctl("start");
    assert_eq!(first, format!("err {}", libc::EIO), "no database, no fsync");
    // the writes were kept: the next fsync stores them
    writeln!(stdin, "fsync").unwrap();
    assert_eq!(next(), "ok");
    drop(stdin);
    assert!(writer.wait().unwrap().success());
    let other = v.mount("b", &[]);
    let got = fs::read(other.p("f")).unwrap();
    assert_eq!(got.len(), 1_050_000);
    assert!(got[..100_000] == bytes_of(1, 100_000)[..], "first write");
    assert!(got[100_000..1_000_000].iter().all(|&b| b == 0), "the hole");
    assert!(got[1_000_000..] == bytes_of(2, 50_000)[..], "second write");
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
}

#[test]
fn a_log_path_planted_as_a_symbolic_link_is_not_followed() {
    let _one = jfs_e2e::one_at_a_time();
    let v = Volume::new("log-symlink");
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    fs::write(&victim, b"keep me").unwrap();
    let log = dir.path().join("jfs.log");
    std::os::unix::fs::symlink(&victim, &log).unwrap();
    let mnt = dir.path().join("mnt");
    fs::create_dir(&mnt).unwrap();
    fails_with(
        jfs()
            .args(["mount", &v.url])
            .arg(&mnt)
            .arg("-d")
            .arg("--log")
            .arg(&log),
        "a symbolic link is not followed",
    );
    assert_eq!(fs::read(&victim).unwrap(), b"keep me");
}

/// Fills `dir`'s file system: a file as large as it takes.
fn fill(dir: &std::path::Path) {
    use std::io::Write;
    let mut f = fs::File::create(dir.join("filler")).unwrap();
    while f.write_all(&[0u8; 64 << 10]).is_ok() {}
}

/// Fills the room left in the last page of `file` (a full tmpfs still
/// takes a write that fits there): its next write fails with ENOSPC.
fn pad(file: &std::path::Path) {
    use std::io::Write;
    let mut f = fs::OpenOptions::new().append(true).open(file).unwrap();
    while f.write_all(b"\n").is_ok() {}
}

/// A full local disk under the mount's log, its disk cache and its file
/// store (xfstests generic/208 filled one with freed blocks: a mount
/// stopped mid-log-line and new mounts exited with status 101 and no
/// message, a panic of the logger): the mount starts and stays up, writes
/// that cannot be stored fail with ENOSPC at fsync, what was stored reads
/// back, and once there is room again writes are stored.
#[test]
fn a_full_local_disk_under_the_log_cache_and_store_never_ends_the_mount() {
    let _alone = jfs_e2e::one_at_a_time();
    let v = Volume::new("enospc-local");
    let disk = v.dir.path().join("disk");
    fs::create_dir(&disk).unwrap();
    let _disk = SmallFs::mount(&disk, "1m");
    let _bucket = SmallFs::mount(&v.bucket(), "2m");
    let mnt = v.dir.path().join("mnt-full");
    let log = disk.join("mount.log");
    let cache = disk.join("cache");
    // what was stored before the store filled
    let m = jfs_e2e::mount_at(
        &v.url,
        &mnt,
        &log,
        &["--cache-dir", cache.to_str().unwrap()],
    );
    fs::write(m.p("before"), b"stored before the disk filled").unwrap();
    m.unmount();
    fill(&disk);
    pad(&log);
    fill(&v.bucket());
    let m = jfs_e2e::mount_at(
        &v.url,
        &mnt,
        &log,
        &["--cache-dir", cache.to_str().unwrap()],
    );
    let mut f = fs::File::create(m.p("big")).unwrap();
    use std::io::Write;
    f.write_all(&vec![7u8; 3 << 20]).unwrap_or(());
    let err = f.sync_all().expect_err("3 MiB cannot fit a full store");
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC), "fsync: {err}");
    drop(f);
    assert_eq!(
        fs::read(m.p("before")).unwrap(),
        b"stored before the disk filled"
    );
    assert!(
        jfs_e2e::is_mounted(&m.path) && Path::new(&format!("/proc/{}", m.pid)).exists(),
        "the mount ended"
    );
    // room again: writes are stored
    fs::remove_file(v.bucket().join("filler")).unwrap();
    fs::remove_file(disk.join("filler")).unwrap();
    fs::write(m.p("after"), b"stored once there was room").unwrap();
    assert_eq!(
        fs::read(m.p("after")).unwrap(),
        b"stored once there was room"
    );
    m.unmount();
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
}
