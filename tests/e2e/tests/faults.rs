//! Bad input and faults: clear errors, nothing lost.
use std::fs;
use std::process::Command;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use jfs_e2e::{env, jfs, meta_url, Volume};

fn fails_with(cmd: &mut Command, needle: &str) {
    let out = cmd.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "{cmd:?} should fail:\n{text}");
    assert!(
        text.contains(needle),
        "{cmd:?}: expected {needle:?} in:\n{text}"
    );
}

/// The tests of this file run one at a time: one of them stops and starts the
/// shared test cluster, which any other test running then would see as a
/// connection refused or "the database system is shutting down".
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn alone() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Stops or starts the test cluster (its output to its log, not to ours:
/// a server holding our stdout would keep the test runner's pipe open).
fn pg_ctl(action: &str) {
    let data = env("JFS_TEST_PGDATA");
    let log = format!("{data}/../postgres.log");
    let status = Command::new("runuser")
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
        .unwrap();
    assert!(status.success(), "pg_ctl {action}");
}

#[test]
fn bad_input_gets_clear_errors_and_postgres_outages_are_survived() {
    let _alone = alone();
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

    // PostgreSQL stops under a mount: calls fail (EIO) in bounded time, then work again
    let m = v.mount("a", &[]);
    fs::write(m.p("before"), b"before").unwrap();
    pg_ctl("stop");
    let started = Instant::now();
    let err = fs::write(m.p("during"), b"x").unwrap_err();
    let took = started.elapsed();
    pg_ctl("start");
    assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err}");
    assert!(took < Duration::from_secs(60), "took {took:?}");
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
    let _alone = alone();
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
        m.unmount();
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
