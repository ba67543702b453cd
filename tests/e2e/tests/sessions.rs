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
    // (a session is ended only after the timeout its own mount declared)
    let a = v.mount("a", &["--heartbeat", "1", "--session-timeout", "3"]);
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

#[test]
fn another_client_role_cannot_act_as_a_mount() {
    const INTRUDER: &str = "jfs_e2e_intruder";
    let v = Volume::new("intruder");
    jfs_e2e::login_role(INTRUDER);
    v.sql(&format!("SELECT jfs.grant_client('{INTRUDER}')"));
    let m = v.mount("a", &["--attr-cache", "60", "--entry-cache", "60"]);
    fs::write(m.p("f"), b"f").unwrap();
    let inode = fs::metadata(m.p("f")).unwrap().ino();
    assert_eq!(fs::metadata(m.p("f")).unwrap().mode() & 0o777, 0o644);
    let sid = v.sql("SELECT sid FROM jfs.session");
    let mount_name = format!("jfs:{sid}");
    let intruder = |sql: &str| jfs_e2e::psql_as(INTRUDER, &mount_name, &v.db, sql);

    // a change made under the mount's name is still the intruder's: the
    // mount applies it (it would skip its own, and show 644 for a minute)
    intruder(&format!("SELECT errno FROM jfs.setattr({inode}, 1, 384)")).unwrap();
    assert!(
        eventually(5, || fs::metadata(m.p("f")).unwrap().mode() & 0o777
            == 0o600),
        "the mount took the intruder's change for its own"
    );
    // it cannot end, close or speak for the live mount's session
    assert_eq!(intruder("SELECT jfs.session_cleanup('0')").unwrap(), "0");
    for call in [
        format!("SELECT jfs.session_close({sid})"),
        format!("SELECT jfs.session_heartbeat({sid})"),
        format!("SELECT jfs.setlk({inode}, {sid}, 1, 1, 0, 9, 1)"),
        format!("SELECT jfs.unlock_owner({inode}, {sid}, 1)"),
        format!("SELECT jfs.sustain({sid}, ARRAY[{inode}]::bigint[])"),
        format!("SELECT jfs.release({sid}, {inode})"),
        "SELECT count(*) FROM jfs.check_quota(NULL, NULL, true)".to_string(),
    ] {
        let refused = intruder(&call).expect_err(&call);
        // (check_quota is administration: not granted to client roles)
        assert!(
            refused.contains("another role")
                || refused.contains("permission denied for function check_quota"),
            "{call}: {refused}"
        );
    }
    assert_eq!(v.sql("SELECT count(*) FROM jfs.session"), "1");
    // and the mount goes on
    fs::write(m.p("g"), b"g").unwrap();
    assert_eq!(fs::read(m.p("g")).unwrap(), b"g");
    v.sql(&format!("DROP OWNED BY {INTRUDER}"));
}
