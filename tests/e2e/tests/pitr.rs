//! Point-in-time restore of the whole file system: blocks are never
//! overwritten and, with `jfs config --retain-deleted` beyond the WAL
//! archive's window, freed ones are kept, so PostgreSQL restored to a moment
//! T (base backup + archived WAL, recovery_target_time) serves the files as
//! they were at T over the same bucket, while the live volume goes on; small
//! files kept in the database (`--inline-max`) come back with it.
//! (Administration: a private cluster with archive_mode, superuser SQL; the
//! mounts run as a client role.)
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use jfs_e2e::{eventually, jfs, mount_at, ok, pattern, pg_sh, Cluster};

/// The role the mounts use (jfs.grant_client).
const CLIENT: &str = "jfs_pitr_client";

/// Every block file in the bucket.
fn blocks(bucket: &Path) -> Vec<PathBuf> {
    let out = ok(Command::new("find")
        .arg(bucket)
        .args(["-type", "f", "-path", "*/chunks/*"]));
    let mut v: Vec<PathBuf> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(PathBuf::from)
        .collect();
    v.sort();
    v
}

#[test]
fn the_database_restored_to_a_moment_serves_the_files_of_that_moment() {
    let tmp = tempfile::Builder::new()
        .prefix("jfs-pitr-")
        .tempdir()
        .unwrap();
    let base = tmp.path();
    ok(Command::new("chmod").arg("755").arg(base));
    let archive = base.join("archive");
    fs::create_dir_all(&archive).unwrap();
    ok(Command::new("chown").arg("postgres:postgres").arg(&archive));

    // the live cluster, archiving its WAL
    let live = Cluster::start(&base.join("pg1"));
    live.sql("postgres", "ALTER SYSTEM SET archive_mode = on");
    live.sql(
        "postgres",
        &format!(
            "ALTER SYSTEM SET archive_command = 'test ! -f {a}/%f && cp %p {a}/%f'",
            a = archive.display()
        ),
    );
    live.pg_ctl("restart");
    let bucket = base.join("bucket");
    // (files of at most 16 KiB keep their bytes in the database: the WAL
    // carries them)
    live.make_volume(
        "pitr",
        CLIENT,
        &bucket,
        &["--storage", "file", "--inline-max", "16"],
    );
    let said = ok(jfs().args([
        "config",
        &live.url("postgres", "vol"),
        "--retain-deleted",
        "7 days",
    ]));
    assert!(String::from_utf8_lossy(&said.stdout).contains("7 days"));

    // a base backup, then the files (their metadata reaches the archive only as WAL)
    fs::create_dir_all(base.join("base")).unwrap();
    ok(Command::new("chown")
        .arg("postgres:postgres")
        .arg(base.join("base")));
    pg_sh(&format!(
        "as_postgres \"$PGBIN/pg_basebackup\" -h {} -p {} -U postgres -D {}/base -X stream -c fast",
        live.dir.display(),
        live.port,
        base.display()
    ));
    let m = mount_at(
        &live.url(CLIENT, "vol"),
        &base.join("mnt-live"),
        &base.join("live.log"),
        &[],
    );
    fs::create_dir_all(m.p("d")).unwrap();
    fs::write(m.p("keep"), pattern(1, 100_000)).unwrap();
    fs::write(m.p("gone"), pattern(2, 5 << 20)).unwrap();
    fs::write(m.p("changed"), pattern(3, 300_000)).unwrap();
    fs::write(m.p("d/inner"), pattern(4, 70_000)).unwrap();
    fs::write(m.p("small"), pattern(7, 3000)).unwrap();
    fs::write(m.p("small-gone"), pattern(8, 2000)).unwrap();
    fs::write(m.p("small-changed"), pattern(9, 16384)).unwrap();
    assert_eq!(live.sql("vol", "SELECT count(*) FROM jfs.inline_data"), "3");
    let before = blocks(&bucket);
    std::thread::sleep(Duration::from_millis(1100));
    let moment = live.sql("vol", "SELECT now()");
    std::thread::sleep(Duration::from_millis(1100));

    // then removed and overwritten: their slices are freed, their objects kept
    fs::remove_file(m.p("gone")).unwrap();
    fs::write(m.p("changed"), pattern(5, 1000)).unwrap();
    fs::remove_file(m.p("d/inner")).unwrap();
    fs::remove_dir(m.p("d")).unwrap();
    fs::remove_file(m.p("small-gone")).unwrap();
    fs::write(m.p("small-changed"), pattern(10, 100)).unwrap();
    assert_eq!(
        live.sql("vol", "SELECT count(*) > 0 FROM jfs.delslice"),
        "t"
    );
    std::thread::sleep(Duration::from_secs(3)); // several of the mount's gc rounds
    ok(jfs().args([
        "gc",
        &live.url("postgres", "vol"),
        "--delete",
        "--min-age",
        "0",
    ]));
    let after = blocks(&bucket);
    for b in &before {
        assert!(
            after.contains(b),
            "{} was deleted within --retain-deleted",
            b.display()
        );
    }

    // archive the WAL up to here
    let segment = live.sql("vol", "SELECT pg_walfile_name(pg_switch_wal())");
    assert!(
        eventually(60, || archive.join(&segment).exists()),
        "WAL segment {segment} was not archived"
    );

    // restore the base backup to the moment, in a new data directory
    let restored = Cluster {
        dir: base.join("pg2"),
        port: pg_sh("free_port").parse().unwrap(),
    };
    fs::create_dir_all(&restored.dir).unwrap();
    ok(Command::new("cp")
        .arg("-a")
        .arg(base.join("base"))
        .arg(restored.dir.join("data")));
    fs::write(restored.dir.join("data/recovery.signal"), "").unwrap();
    let mut conf = fs::read_to_string(restored.dir.join("data/postgresql.auto.conf")).unwrap();
    conf.push_str(&format!(
        "port = {}\nunix_socket_directories = '{}'\narchive_mode = off\n\
         restore_command = 'cp {}/%f %p'\nrecovery_target_time = '{moment}'\n\
         recovery_target_action = 'promote'\n",
        restored.port,
        restored.dir.display(),
        archive.display()
    ));
    fs::write(restored.dir.join("data/postgresql.auto.conf"), conf).unwrap();
    ok(Command::new("chown")
        .args(["-R", "postgres:postgres"])
        .arg(&restored.dir));
    ok(Command::new("chmod")
        .arg("700")
        .arg(restored.dir.join("data")));
    restored.pg_ctl("start");
    assert!(
        eventually(60, || restored
            .sql("postgres", "SELECT pg_is_in_recovery()")
            == "f"),
        "the restored cluster did not reach its target"
    );
    assert_eq!(restored.sql("vol", "SELECT count(*) FROM jfs.fsck()"), "0");

    // a read-only mount of the restored database over the same bucket: the
    // files as they were, byte for byte
    let r = mount_at(
        &restored.url(CLIENT, "vol"),
        &base.join("mnt-restored"),
        &base.join("restored.log"),
        &["--read-only"],
    );
    assert_eq!(fs::read(r.p("keep")).unwrap(), pattern(1, 100_000));
    assert_eq!(fs::read(r.p("gone")).unwrap(), pattern(2, 5 << 20));
    assert_eq!(fs::read(r.p("changed")).unwrap(), pattern(3, 300_000));
    assert_eq!(fs::read(r.p("d/inner")).unwrap(), pattern(4, 70_000));
    assert_eq!(fs::read(r.p("small")).unwrap(), pattern(7, 3000));
    assert_eq!(fs::read(r.p("small-gone")).unwrap(), pattern(8, 2000));
    assert_eq!(fs::read(r.p("small-changed")).unwrap(), pattern(9, 16384));
    assert_eq!(fs::read(m.p("small-changed")).unwrap(), pattern(10, 100));

    // while the live volume goes on
    assert!(!m.p("gone").exists() && !m.p("d").exists());
    assert_eq!(fs::read(m.p("changed")).unwrap(), pattern(5, 1000));
    fs::write(m.p("later"), pattern(6, 50_000)).unwrap();
    assert_eq!(fs::read(m.p("later")).unwrap(), pattern(6, 50_000));
    assert!(!r.p("later").exists());
    assert_eq!(fs::read(r.p("gone")).unwrap(), pattern(2, 5 << 20));
}
