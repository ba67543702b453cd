//! The private clusters of scripts/pg.sh (the quick start's, the tests'),
//! tried by another local user: its socket does not take them, TCP wants a
//! password (never trust), and a directory planted where a cluster or the
//! quick start's home goes (a symbolic link, another user's directory) is
//! refused instead of followed.
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use jfs_e2e::pg_sh;

/// An unprivileged local user.
const OTHER: &str = "1002";

/// psql as OTHER; its error, if it failed.
fn psql_as_other(args: &[&str]) -> Result<String, String> {
    let out = Command::new("setpriv")
        .args([
            "--reuid",
            OTHER,
            "--regid",
            OTHER,
            "--clear-groups",
            "psql",
            "-XAt",
        ])
        .args(args)
        .args([
            "-U",
            "postgres",
            "-d",
            "postgres",
            "-c",
            "SELECT current_user",
        ])
        .current_dir("/")
        .output()
        .unwrap();
    match out.status.success() {
        true => Ok(String::from_utf8_lossy(&out.stdout).trim().to_string()),
        false => Err(String::from_utf8_lossy(&out.stderr).trim().to_string()),
    }
}

/// `private_dir DIR` of scripts/pg.sh: its error, if it refused.
fn private_dir(dir: &Path) -> Result<(), String> {
    let out = Command::new("bash")
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
        .args([
            "-c",
            &format!(". scripts/pg.sh; private_dir '{}'", dir.display()),
        ])
        .output()
        .unwrap();
    match out.status.success() {
        true => Ok(()),
        false => Err(String::from_utf8_lossy(&out.stderr).trim().to_string()),
    }
}

#[test]
fn another_local_user_gets_nothing_of_a_private_cluster() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path();
    std::fs::set_permissions(base, std::fs::Permissions::from_mode(0o755)).unwrap();
    let dir = base.join("pg");
    let port = pg_sh("free_port");
    pg_sh(&format!("cluster_start {} {port} 127.0.0.1", dir.display()));
    let stop = || pg_sh(&format!("cluster_stop {}", dir.display()));
    let socket = psql_as_other(&["-h", dir.to_str().unwrap(), "-p", &port]);
    let tcp = psql_as_other(&["-h", "127.0.0.1", "-p", &port, "-w"]);
    stop();
    let refused = socket.expect_err("another user reached the superuser through the socket");
    assert!(refused.contains("Permission denied"), "{refused}");
    let refused = tcp.expect_err("another user reached the superuser over TCP");
    assert!(refused.contains("password"), "{refused}");

    // what is planted where a private directory goes is not used
    let link = base.join("link");
    std::os::unix::fs::symlink("/tmp", &link).unwrap();
    let e = private_dir(&link).expect_err("a symbolic link was followed");
    assert!(e.contains("symbolic link"), "{e}");
    let theirs = base.join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    std::os::unix::fs::chown(&theirs, Some(OTHER.parse().unwrap()), None).unwrap();
    let e = private_dir(&theirs).expect_err("another user's directory was used");
    assert!(e.contains("belongs to uid 1002"), "{e}");
    let mine = base.join("mine");
    private_dir(&mine).unwrap();
    assert_eq!(
        std::fs::metadata(&mine).unwrap().permissions().mode() & 0o7777,
        0o700
    );
}
