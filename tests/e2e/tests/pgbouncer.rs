//! A mount through PgBouncer in transaction mode (Debian's package): every
//! statement may run on another server connection, so the client sends no
//! named prepared statements (`?pgbouncer=true` in META_URL), and the
//! change log is polled (no LISTEN). A second mount connects directly; each
//! sees the other's changes with 30 s kernel caches.
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};

use jfs_e2e::{eventually, jfs, ok, pattern, PgBouncer, Volume, CLIENT_ROLE};

const CACHED: [&str; 4] = ["--attr-cache", "30", "--entry-cache", "30"];

#[test]
fn a_mount_works_through_pgbouncer_in_transaction_mode() {
    let v = Volume::new("pgbouncer");
    let bouncer = PgBouncer::start("transaction");
    let url = bouncer.meta_url_as(&v.db, CLIENT_ROLE);
    let a = v.mount_url("a", &url, &CACHED);
    let b = v.mount("b", &CACHED);

    // namespace and data through the pooler, several FUSE threads at once
    fs::create_dir(a.p("d")).unwrap();
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let a = &a;
            s.spawn(move || {
                for i in 0..50u64 {
                    let p = a.p(&format!("d/t{t}-{i}"));
                    fs::write(&p, pattern(t * 100 + i, 10_000 + i as usize)).unwrap();
                }
            });
        }
    });
    fs::write(a.p("big"), pattern(7, 9 << 20)).unwrap();
    fs::rename(a.p("d/t0-0"), a.p("d/renamed")).unwrap();
    fs::remove_file(a.p("d/t0-1")).unwrap();
    fs::set_permissions(a.p("d/t1-1"), fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(fs::read_dir(a.p("d")).unwrap().count(), 199);
    assert_eq!(fs::read(a.p("big")).unwrap(), pattern(7, 9 << 20));

    // the direct mount sees it all
    assert!(eventually(5, || b.p("d/renamed").exists()));
    assert!(!b.p("d/t0-1").exists());
    assert_eq!(fs::read(b.p("d/t3-49")).unwrap(), pattern(349, 10_049));
    assert_eq!(fs::read(b.p("big")).unwrap(), pattern(7, 9 << 20));
    assert_eq!(fs::metadata(b.p("d/t1-1")).unwrap().mode() & 0o777, 0o600);

    // and the pooled mount reads the change log through the pooler
    assert!(!a.p("d/from-b").exists(), "A caches that it is missing");
    fs::write(b.p("d/from-b"), b"b").unwrap();
    assert!(
        eventually(5, || fs::read(a.p("d/from-b")).ok().as_deref()
            == Some(b"b")),
        "B's file on A"
    );

    // the pooled mount's changes carry its session (application_name
    // passes through PgBouncer)
    let sessions = v.sql(
        "SELECT count(DISTINCT session) FROM jfs.change WHERE op = 'create' AND session IS NOT NULL",
    );
    assert_eq!(sessions, "2", "both mounts named in the change log");
    // the CLI too
    let out = ok(jfs().args(["status", &url]));
    assert!(!out.stdout.is_empty());
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
    let log = bouncer.log_text();
    assert!(!log.contains("prepared statement"), "{log}");
}
