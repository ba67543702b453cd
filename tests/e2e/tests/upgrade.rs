//! Upgrades: a volume formatted on every released extension version serves the
//! same files after `ALTER EXTENSION jfs UPDATE`, and a client refuses an
//! extension version it does not support with what to do about it.
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use jfs_e2e::{jfs, ok, pattern, Volume};

/// The version this build installs (the workspace version).
const CURRENT: &str = env!("CARGO_PKG_VERSION");

/// Released versions older than the current one: the frozen full install
/// scripts `migrations/jfs--X.sql`.
fn releases() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../migrations");
    let mut out: Vec<String> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let version = name.strip_prefix("jfs--")?.strip_suffix(".sql")?;
            (!version.contains("--") && version != CURRENT).then(|| version.to_string())
        })
        .collect();
    out.sort();
    out
}

/// Runs python3 with `code` (sys.argv[1:] = args): the tests use it for
/// xattrs, which std has no calls for.
fn python(code: &str, args: &[&str]) -> String {
    let out = ok(std::process::Command::new("python3")
        .arg("-c")
        .arg(code)
        .args(args));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn set_xattr(path: &Path, name: &str, value: &str) {
    python(
        "import os, sys; os.setxattr(sys.argv[1], sys.argv[2], sys.argv[3].encode())",
        &[path.to_str().unwrap(), name, value],
    );
}

fn get_xattr(path: &Path, name: &str) -> String {
    python(
        "import os, sys; print(os.getxattr(sys.argv[1], sys.argv[2]).decode())",
        &[path.to_str().unwrap(), name],
    )
}

#[test]
fn a_volume_formatted_on_every_release_survives_the_update() {
    let releases = releases();
    assert!(
        !releases.is_empty(),
        "no release older than {CURRENT} in migrations/"
    );
    for release in releases {
        let name = format!("release-{}", release.replace('.', "-"));
        let v = Volume::on_release(&name, &release);
        assert_eq!(
            v.sql("SELECT extversion FROM pg_extension WHERE extname = 'jfs'"),
            release
        );
        let big = pattern(41, (5 << 20) + 12345);
        {
            let m = v.mount("old", &[]);
            fs::create_dir_all(m.p("dir/sub")).unwrap();
            fs::write(m.p("dir/sub/big"), &big).unwrap();
            fs::write(m.p("small"), b"written on the old release").unwrap();
            fs::set_permissions(m.p("small"), fs::Permissions::from_mode(0o640)).unwrap();
            std::os::unix::fs::symlink("dir/sub/big", m.p("link")).unwrap();
            fs::hard_link(m.p("small"), m.p("dir/hard")).unwrap();
            set_xattr(&m.p("small"), "user.release", &release);
            let f = fs::File::create(m.p("sparse")).unwrap();
            f.set_len(200 << 20).unwrap();
            drop(f);
            m.unmount();
        }
        v.sql("SET client_min_messages = warning; ALTER EXTENSION jfs UPDATE");
        assert_eq!(
            v.sql("SELECT extversion FROM pg_extension WHERE extname = 'jfs'"),
            CURRENT,
            "ALTER EXTENSION jfs UPDATE from {release}"
        );
        let m = v.mount("new", &[]);
        assert!(
            fs::read(m.p("dir/sub/big")).unwrap() == big,
            "big file after the update from {release}"
        );
        assert_eq!(
            fs::read(m.p("dir/hard")).unwrap(),
            b"written on the old release"
        );
        let meta = fs::metadata(m.p("small")).unwrap();
        assert_eq!(meta.mode() & 0o7777, 0o640);
        assert_eq!(meta.nlink(), 2);
        assert_eq!(
            fs::read_link(m.p("link")).unwrap().to_str(),
            Some("dir/sub/big")
        );
        assert_eq!(get_xattr(&m.p("small"), "user.release"), release);
        assert_eq!(fs::metadata(m.p("sparse")).unwrap().len(), 200 << 20);
        // and it keeps working: write, overwrite, remove
        fs::write(m.p("dir/after"), pattern(42, 70_000)).unwrap();
        assert!(fs::read(m.p("dir/after")).unwrap() == pattern(42, 70_000));
        fs::remove_file(m.p("dir/hard")).unwrap();
        assert_eq!(fs::metadata(m.p("small")).unwrap().nlink(), 1);
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

#[test]
fn a_client_refuses_an_extension_version_it_does_not_support() {
    let v = Volume::new("version-check");
    assert!(status(&v).0, "status against the current extension");
    let min = "0.1.0";

    // an extension older than any this client supports (the catalog says so)
    v.sql("UPDATE pg_catalog.pg_extension SET extversion = '0.0.9' WHERE extname = 'jfs'");
    let (ok, err) = status(&v);
    assert!(!ok);
    assert!(
        err.contains(&format!(
            "database has jfs 0.0.9; this client needs >= {min}: run ALTER EXTENSION jfs UPDATE"
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
    assert!(!out.status.success(), "mount against jfs 0.0.9 succeeded");
    assert!(err.contains("database has jfs 0.0.9"), "{err}");
    assert_eq!(
        v.sql("SELECT count(*) FROM jfs.session"),
        "0",
        "a refused mount left a session"
    );

    // a newer one than this client knows
    v.sql("UPDATE pg_catalog.pg_extension SET extversion = '99.1.0' WHERE extname = 'jfs'");
    let (ok, err) = status(&v);
    assert!(!ok);
    assert!(err.contains("database has jfs 99.1.0"), "{err}");
    assert!(
        err.contains("upgrade this client to jfs 99.1 or newer"),
        "{err}"
    );
    let out = jfs()
        .args([
            "format",
            &v.url,
            "version-check",
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
