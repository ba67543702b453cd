//! Upgrades: a volume formatted on every released extension version serves the
//! same files after `ALTER EXTENSION jfs UPDATE`, and a client refuses an
//! extension version it does not support with what to do about it.
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;

use jfs_e2e::{
    env, fresh_database, jfs, login_role, meta_url_as, ok, pattern, procedure_calls, psql, Volume,
    CLIENT_ROLE,
};

/// The version this build installs (the workspace version).
const CURRENT: &str = env!("CARGO_PKG_VERSION");

/// Released versions older than the current one (migrations/RELEASES; their
/// install scripts are rebuilt from git history and installed by
/// scripts/install-extension.sh).
fn releases() -> Vec<String> {
    let index = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../migrations/RELEASES");
    let text = fs::read_to_string(&index).unwrap_or_else(|e| panic!("{}: {e}", index.display()));
    let mut out: Vec<String> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|version| *version != CURRENT)
        .map(str::to_string)
        .collect();
    out.sort();
    out
}

/// Runs python3 with `code` (sys.argv[1:] = args): the tests use it for
/// xattrs, which std has no calls for.
fn python(code: &str, args: &[&str]) -> String {
    let out = ok(Command::new("python3").arg("-c").arg(code).args(args));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn get_xattr(path: &Path, name: &str) -> String {
    python(
        "import os, sys; print(os.getxattr(sys.argv[1], sys.argv[2]).decode())",
        &[path.to_str().unwrap(), name],
    )
}

/// Block size of a volume formatted with `jfs.format`'s defaults.
const BLOCK_SIZE: usize = 4 << 20;

/// Stores `data` as slice `id` in the volume's bucket, named as the file
/// store names blocks (`{volume}/chunks/{id/10^6}/{id/10^3}/{id}_{index}_{size}`).
fn put_slice(v: &Volume, volume: &str, id: u64, data: &[u8]) {
    for (index, block) in data.chunks(BLOCK_SIZE).enumerate() {
        let dir = v
            .bucket()
            .join(format!("{volume}/chunks/{}/{}", id / 1_000_000, id / 1_000));
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join(format!("{id}_{index}_{}", block.len())), block).unwrap();
    }
}

/// Runs a call of the release's procedures that returns an errno; it must be 0.
fn call(v: &Volume, sql: &str) {
    assert_eq!(v.sql(sql), "0", "{sql}");
}

/// Makes a tree with the release's own procedures (their signatures are
/// frozen with it, so this keeps working whatever clients come later):
/// dir/sub/big, small (0640, two names, an xattr), a symlink, a sparse file.
fn make_tree_with_sql(v: &Volume, volume: &str, release: &str, big: &[u8], small: &[u8]) {
    let ino: u64 = v.sql("SELECT jfs.alloc_ids('inode', 10)").parse().unwrap();
    let sid: u64 = v.sql("SELECT jfs.alloc_ids('slice', 10)").parse().unwrap();
    let name = |n: &str| format!("convert_to('{n}', 'UTF8')");
    let mknod = |parent: u64, n: &str, kind: i32, mode: i32, target: &str, inode: u64| {
        call(
            v,
            &format!(
                "SELECT errno FROM jfs.mknod({parent}, {}, {kind}, {mode}, 0, 0, 0, {target}, {inode})",
                name(n)
            ),
        )
    };
    let (dir, sub, big_ino, small_ino, link, sparse) =
        (ino, ino + 1, ino + 2, ino + 3, ino + 4, ino + 5);
    mknod(1, "dir", 2, 0o755, "NULL", dir);
    mknod(dir, "sub", 2, 0o755, "NULL", sub);
    mknod(sub, "big", 1, 0o644, "NULL", big_ino);
    put_slice(v, volume, sid, big);
    call(
        v,
        &format!(
            "SELECT errno FROM jfs.write_slice({big_ino}, 0, 0, {sid}, {n}, 0, {n})",
            n = big.len()
        ),
    );
    mknod(1, "small", 1, 0o640, "NULL", small_ino);
    put_slice(v, volume, sid + 1, small);
    call(
        v,
        &format!(
            "SELECT errno FROM jfs.write_slice({small_ino}, 0, 0, {}, {n}, 0, {n})",
            sid + 1,
            n = small.len()
        ),
    );
    call(
        v,
        &format!(
            "SELECT errno FROM jfs.link({small_ino}, {dir}, {})",
            name("hard")
        ),
    );
    call(
        v,
        &format!(
            "SELECT jfs.setxattr({small_ino}, {}, {})",
            name("user.release"),
            name(release)
        ),
    );
    mknod(1, "link", 3, 0o777, &name("dir/sub/big"), link);
    mknod(1, "sparse", 1, 0o644, "NULL", sparse);
    call(
        v,
        &format!(
            "SELECT errno FROM jfs.setattr({sparse}, 8, p_length => {})",
            200u64 << 20
        ),
    );
}

#[test]
fn a_volume_made_on_every_release_survives_the_update() {
    let releases = releases();
    assert!(
        !releases.is_empty(),
        "no release older than {CURRENT} in migrations/RELEASES"
    );
    for release in releases {
        let volume = format!("release-{}", release.replace('.', "-"));
        let v = Volume::on_release(&volume, &release);
        assert_eq!(
            v.sql("SELECT extversion FROM pg_extension WHERE extname = 'jfs'"),
            release
        );
        let big = pattern(41, (5 << 20) + 12345);
        let small = b"written on the old release".to_vec();
        make_tree_with_sql(&v, &volume, &release, &big, &small);
        assert_eq!(
            v.sql("SELECT count(*) FROM jfs.fsck()"),
            "0",
            "fsck on {release}"
        );

        v.sql("SET client_min_messages = warning; ALTER EXTENSION jfs UPDATE");
        assert_eq!(
            v.sql("SELECT extversion FROM pg_extension WHERE extname = 'jfs'"),
            CURRENT,
            "ALTER EXTENSION jfs UPDATE from {release}"
        );
        assert_eq!(
            v.sql("SELECT count(*) FROM jfs.fsck()"),
            "0",
            "fsck right after the update from {release} (the counters it filled in)"
        );
        let m = v.mount("new", &[]);
        assert!(
            fs::read(m.p("dir/sub/big")).unwrap() == big,
            "big file after the update from {release}"
        );
        assert_eq!(fs::read(m.p("dir/hard")).unwrap(), small);
        let meta = fs::metadata(m.p("small")).unwrap();
        assert_eq!(meta.mode() & 0o7777, 0o640);
        assert_eq!(meta.nlink(), 2);
        assert_eq!(
            fs::read_link(m.p("link")).unwrap().to_str(),
            Some("dir/sub/big")
        );
        assert_eq!(get_xattr(&m.p("small"), "user.release"), release);
        assert_eq!(fs::metadata(m.p("sparse")).unwrap().len(), 200 << 20);
        // and it keeps working: write, read, remove
        fs::write(m.p("dir/after"), pattern(42, 70_000)).unwrap();
        assert!(fs::read(m.p("dir/after")).unwrap() == pattern(42, 70_000));
        fs::remove_file(m.p("dir/hard")).unwrap();
        assert_eq!(fs::metadata(m.p("small")).unwrap().nlink(), 1);
        // the update's procedures keep every counter in step (jfs rmr is
        // one of them; fsck recounts dir_stats)
        ok(jfs().arg("rmr").arg(m.p("dir")));
        assert!(!m.p("dir").exists());
        m.unmount();
        assert_eq!(
            v.sql("SELECT count(*) FROM jfs.fsck()"),
            "0",
            "fsck after the update from {release}"
        );
    }
}

/// Runs `jfs status` on the volume and returns (success, stderr).
fn status(v: &Volume) -> (bool, String) {
    let out = jfs().args(["status", &v.url]).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The oldest extension version this client works with, from `jfs --version`
/// ("jfs X (works with the jfs extension MIN up to ...)").
fn client_min() -> String {
    let out = ok(jfs().arg("--version"));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.split("extension ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no extension range in {text:?}"))
        .to_string()
}

#[test]
fn a_client_refuses_an_extension_version_it_does_not_support() {
    let min = client_min();
    // a database on a release older than the client supports
    let oldest = releases()
        .into_iter()
        .next()
        .expect("a release in migrations/");
    assert!(
        oldest < min,
        "this client still supports the oldest release {oldest}"
    );
    let v = Volume::on_release("version-old", &oldest);
    let (ok_status, err) = status(&v);
    assert!(!ok_status);
    assert!(
        err.contains(&format!(
            "database has jfs {oldest}; this client needs >= {min}: run ALTER EXTENSION jfs UPDATE"
        )),
        "{err}"
    );
    let mnt = v.dir.path().join("mnt");
    fs::create_dir_all(&mnt).unwrap();
    let out = jfs()
        .args(["mount", &v.url])
        .arg(&mnt)
        .arg("-d")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "mount against jfs {oldest} succeeded"
    );
    assert!(err.contains(&format!("database has jfs {oldest}")), "{err}");
    assert_eq!(
        v.sql("SELECT count(*) FROM jfs.session"),
        "0",
        "a refused mount left a session"
    );
    v.sql("SET client_min_messages = warning; ALTER EXTENSION jfs UPDATE");
    assert!(status(&v).0, "status after ALTER EXTENSION jfs UPDATE");

    // a database on a newer version than this client knows (the catalog says so)
    let v = Volume::new("version-new");
    assert!(status(&v).0, "status against the current extension");
    v.sql("UPDATE pg_catalog.pg_extension SET extversion = '99.1.0' WHERE extname = 'jfs'");
    let (ok_status, err) = status(&v);
    assert!(!ok_status);
    assert!(err.contains("database has jfs 99.1.0"), "{err}");
    assert!(
        err.contains("upgrade this client to jfs 99.1 or newer"),
        "{err}"
    );
    let out = jfs()
        .args([
            "format",
            &v.url,
            "version-new",
            "--storage",
            "file",
            "--bucket",
        ])
        .arg(v.bucket())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("database has jfs 99.1.0"));
    v.sql(&format!(
        "UPDATE pg_catalog.pg_extension SET extversion = '{CURRENT}' WHERE extname = 'jfs'"
    ));
    assert!(status(&v).0, "status after the version is right again");
}

#[test]
fn a_mount_whose_role_misses_a_procedure_says_what_to_grant() {
    let v = Volume::new("grants");
    psql(
        "postgres",
        "DO $$BEGIN CREATE ROLE jfs_e2e_client LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END$$",
    );
    v.sql("SELECT jfs.grant_client('jfs_e2e_client')");
    // as after an upgrade that added a procedure
    v.sql(
        "REVOKE EXECUTE ON FUNCTION \
         jfs.compact_chunk(bigint, integer, integer, bigint, bigint, integer, integer) FROM jfs_e2e_client",
    );
    let url = v
        .url
        .replacen(&format!("//{}@", env("PGUSER")), "//jfs_e2e_client@", 1);
    let mnt = v.dir.path().join("mnt");
    fs::create_dir_all(&mnt).unwrap();
    let out = jfs()
        .args(["mount", &url])
        .arg(&mnt)
        .arg("-d")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the mount went ahead");
    assert!(
        err.contains("role jfs_e2e_client may not call 1 jfs procedure(s)"),
        "{err}"
    );
    assert!(err.contains("jfs.compact_chunk("), "{err}");
    assert!(
        err.contains("SELECT jfs.grant_client('jfs_e2e_client')"),
        "{err}"
    );
    assert_eq!(v.sql("SELECT count(*) FROM jfs.session"), "0");

    // granted again, the client role mounts and works (it reads no table)
    v.sql("SELECT jfs.grant_client('jfs_e2e_client')");
    let out = jfs()
        .args(["mount", &url])
        .arg(&mnt)
        .args(["-d", "--log"])
        .arg(v.dir.path().join("client.log"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "mount as the client role: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    fs::create_dir(mnt.join("d")).unwrap();
    fs::write(mnt.join("d/f"), pattern(9, 300_000)).unwrap();
    fs::rename(mnt.join("d/f"), mnt.join("g")).unwrap();
    assert!(fs::read(mnt.join("g")).unwrap() == pattern(9, 300_000));
    fs::remove_file(mnt.join("g")).unwrap();
    ok(jfs().arg("umount").arg(&mnt));
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
}

#[test]
fn a_role_granted_before_the_update_keeps_what_it_could_call() {
    // every release since 0.2.9 (some updates make a procedure again);
    // updates from older ones make volume() and volume_secrets() again and
    // need jfs.grant_client run again, as docs/operations.md says
    let version = |v: &str| -> Vec<u32> { v.split('.').map(|n| n.parse().unwrap()).collect() };
    for previous in releases()
        .into_iter()
        .filter(|r| version(r) >= version("0.2.9"))
    {
        a_role_granted_on_the_release_keeps_what_it_could_call(&previous);
    }
}

fn a_role_granted_on_the_release_keeps_what_it_could_call(previous: &str) {
    let v = Volume::on_release(
        &format!("keep-grants-{}", previous.replace('.', "-")),
        previous,
    );
    psql(
        "postgres",
        "DO $$BEGIN CREATE ROLE jfs_e2e_client LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END$$",
    );
    v.sql("SELECT jfs.grant_client('jfs_e2e_client')");
    // every procedure (by name) the role may call, as a query's answer
    let callable = "SELECT string_agg(DISTINCT p.proname, ' ' ORDER BY p.proname) \
                    FROM pg_proc p WHERE p.pronamespace = 'jfs'::regnamespace \
                    AND has_function_privilege('jfs_e2e_client', p.oid, 'EXECUTE')";
    let before = v.sql(callable);
    assert!(before.contains("getattr"), "{previous}: {before}");
    v.sql("SET client_min_messages = warning; ALTER EXTENSION jfs UPDATE");
    // a procedure the update made again (a new signature) is callable too,
    // without running jfs.grant_client again; but what became
    // administration (fsck and check_quota in 0.2.24) is not
    let lost = v.sql(&format!(
        "SELECT count(*) FROM pg_proc p WHERE p.pronamespace = 'jfs'::regnamespace \
         AND p.proname = ANY (string_to_array('{before}', ' ')) \
         AND p.proname <> ALL (jfs.admin_procedures()) \
         AND NOT has_function_privilege('jfs_e2e_client', p.oid, 'EXECUTE')"
    ));
    let admin_kept = v.sql(
        "SELECT count(*) FROM pg_proc p WHERE p.pronamespace = 'jfs'::regnamespace \
         AND p.proname = ANY (jfs.admin_procedures()) \
         AND has_function_privilege('jfs_e2e_client', p.oid, 'EXECUTE')",
    );
    assert_eq!(
        admin_kept, "0",
        "{previous}: a client role kept procedures of administration"
    );
    assert_eq!(
        lost, "0",
        "procedures of {previous} the role may no longer call"
    );
    // and a role that could not call it still cannot
    psql(
        "postgres",
        "DO $$BEGIN CREATE ROLE jfs_e2e_outsider; EXCEPTION WHEN duplicate_object THEN NULL; END$$",
    );
    assert_eq!(
        v.sql(
            "SELECT count(*) FROM pg_proc p WHERE p.pronamespace = 'jfs'::regnamespace \
             AND p.proname = 'write_slices' \
             AND has_function_privilege('jfs_e2e_outsider', p.oid, 'EXECUTE')"
        ),
        "0",
        "write_slices is not anybody's after the update"
    );
}

/// Every procedure (by signature) `role` may call in the volume's database.
fn callable_by(v: &Volume, role: &str) -> String {
    v.sql(&format!(
        "SELECT string_agg(p.oid::regprocedure::text, ' ' ORDER BY p.oid::regprocedure::text) \
         FROM pg_proc p WHERE p.pronamespace = 'jfs'::regnamespace \
         AND has_function_privilege('{role}', p.oid, 'EXECUTE')"
    ))
}

#[test]
fn a_dump_of_an_updated_volume_restores_what_its_roles_may_call() {
    login_role(CLIENT_ROLE);
    for release in releases() {
        let name = format!("dump-grants-{}", release.replace('.', "-"));
        let v = Volume::on_release(&name, &release);
        v.sql(&format!("SELECT jfs.grant_client('{CLIENT_ROLE}')"));
        v.sql("SET client_min_messages = warning; ALTER EXTENSION jfs UPDATE");
        // README's "Upgrading": the grants are run again after the update
        v.sql(&format!("SELECT jfs.grant_client('{CLIENT_ROLE}')"));
        let callable = callable_by(&v, CLIENT_ROLE);
        assert!(callable.contains("write_slices"), "{release}: {callable}");

        // pg_dump and pg_restore into another database, as a backup is restored
        let dump = v.dir.path().join("volume.dump");
        ok(Command::new("pg_dump")
            .args(["-Fc", "-d", &v.db, "-f"])
            .arg(&dump));
        let restored = Volume {
            db: fresh_database(&format!("{name}-restored")),
            url: String::new(),
            admin_url: String::new(),
            dir: tempfile::Builder::new()
                .prefix("jfs-e2e-")
                .tempdir()
                .unwrap(),
        };
        ok(Command::new("pg_restore")
            .args(["--exit-on-error", "-d", &restored.db])
            .arg(&dump));
        let after = callable_by(&restored, CLIENT_ROLE);
        let lost: Vec<&str> = callable
            .split(' ')
            .filter(|p| !after.split(' ').any(|a| a == *p))
            .collect();
        assert!(
            lost.is_empty() && after.len() == callable.len(),
            "{CLIENT_ROLE} lost {lost:?} in a dump of a volume updated from {release}, restored"
        );
        // and a mount as that role works on the restored volume
        let restored = Volume {
            url: meta_url_as(&restored.db, CLIENT_ROLE),
            ..restored
        };
        let m = restored.mount("restored", &[]);
        fs::write(m.p("after-restore"), pattern(43, 70_000)).unwrap();
        assert!(fs::read(m.p("after-restore")).unwrap() == pattern(43, 70_000));
        m.unmount();
    }
}

/// A mount with `--atime-mode relatime` on a release without
/// `jfs.touch_atime` (before 0.2.24) knows at mount that it keeps no
/// atimes, says so once, and never asks the database to move one: reads
/// work as on any volume.
#[test]
fn a_mount_on_a_release_without_touch_atime_keeps_no_atimes_and_never_asks() {
    let v = Volume::on_release("atime-old", "0.2.23");
    let (m, addr) = v.mount_with_caches("m", "1", &["--atime-mode", "relatime"]);
    fs::write(m.p("f"), b"read me").unwrap();
    // (a second old: relatime would move the atime now)
    std::thread::sleep(std::time::Duration::from_millis(1100));
    for _ in 0..3 {
        assert_eq!(fs::read(m.p("f")).unwrap(), b"read me");
    }
    assert_eq!(
        procedure_calls(&addr, "touch_atime"),
        0.0,
        "touch_atime was asked of jfs 0.2.23"
    );
    let log = m.log_text();
    assert_eq!(
        log.matches("atimes are not kept").count(),
        1,
        "the mount's log: {log}"
    );
    m.unmount();
}
