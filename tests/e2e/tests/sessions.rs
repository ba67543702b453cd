//! Two mounts of one volume: a crashed mount's session is cleaned up by the
//! other (the files it held open after their last unlink are released and
//! their objects deleted), and cached directory attributes follow both.
use std::fs::{self, File};
use std::io::Read;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::time::Duration;

use jfs_e2e::{eventually, pattern, Volume};

#[test]
fn a_dead_session_is_cleaned_by_another_mount() {
    let v = Volume::new("deadsession");
    let a = v.mount("a", &["--heartbeat", "1"]);
    fs::write(a.p("held"), pattern(8, 5 << 20)).unwrap();
    fs::write(a.p("kept"), b"kept").unwrap();
    let objects_with_held = v.objects().len();
    assert_eq!(objects_with_held, 3);
    // open, unlink: readable while open, its session keeps it
    let mut f = File::open(a.p("held")).unwrap();
    fs::remove_file(a.p("held")).unwrap();
    let mut data = Vec::new();
    f.read_to_end(&mut data).unwrap();
    assert!(data == pattern(8, 5 << 20));
    assert_eq!(v.sql("SELECT count(*) FROM jfs.sustained"), "1");
    // the mount dies without closing anything
    a.crash();
    drop(f);
    assert_eq!(v.sql("SELECT count(*) FROM jfs.sustained"), "1");
    // another mount notices the silence and cleans up
    let b = v.mount("b", &["--heartbeat", "1", "--session-timeout", "3"]);
    assert!(
        eventually(30, || v.sql("SELECT count(*) FROM jfs.session") == "1"),
        "the dead session is still there"
    );
    assert_eq!(v.sql("SELECT count(*) FROM jfs.sustained"), "0");
    assert!(
        eventually(20, || v.objects().len() == 1),
        "objects left: {:?}",
        v.objects()
    );
    assert_eq!(fs::read(b.p("kept")).unwrap(), b"kept");
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
}

/// Directory attributes a mount caches (for GETATTR after each create) stay
/// exact for its own changes and follow another mount's within --attr-cache.
#[test]
fn directory_attributes_follow_changes_here_and_elsewhere() {
    let v = Volume::new("dirattrs");
    let a = v.mount("a", &[]);
    let b = v.mount("b", &[]);
    fs::create_dir(a.p("d")).unwrap();
    let before = fs::metadata(a.p("d")).unwrap();
    std::thread::sleep(Duration::from_millis(300));

    // a file created here moves the directory's mtime (past the 100 ms skip)
    fs::write(a.p("d/f"), b"x").unwrap();
    let after = fs::metadata(a.p("d")).unwrap();
    assert!(
        after.mtime_nsec() as i128 + after.mtime() as i128 * 1_000_000_000
            > before.mtime_nsec() as i128 + before.mtime() as i128 * 1_000_000_000,
        "mtime of d did not move after a create in it"
    );
    // and the database agrees with what the mount shows
    let db_mtime: i64 = v
        .sql("SELECT mtime FROM jfs.node n JOIN jfs.edge e USING (inode) WHERE e.parent = 1 AND e.name = 'd'")
        .parse()
        .unwrap();
    assert_eq!(
        db_mtime,
        after.mtime() * 1_000_000_000 + after.mtime_nsec(),
        "cached mtime differs from the database's"
    );

    // mkdir here: nlink at once
    fs::create_dir(a.p("d/sub")).unwrap();
    assert_eq!(fs::metadata(a.p("d")).unwrap().nlink(), 3);

    // a chmod on the other mount shows here within the attribute TTL (1 s)
    fs::metadata(b.p("d")).unwrap();
    fs::set_permissions(b.p("d"), fs::Permissions::from_mode(0o700)).unwrap();
    assert!(
        eventually(3, || fs::metadata(a.p("d")).unwrap().permissions().mode()
            & 0o777
            == 0o700),
        "mode change on mount b never reached mount a"
    );
}
