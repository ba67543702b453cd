//! `jfs debug MOUNTPOINT`: one archive with the mount's report, metrics,
//! command line, log tail and the system's versions, and no password.
use std::fs;
use std::process::Command;

use jfs_e2e::{jfs, ok, Volume};

#[test]
fn the_archive_holds_what_a_bug_report_needs_and_no_password() {
    let v = Volume::new("debug");
    // (the test cluster trusts the socket: the password is only carried)
    let password = "not-for-the-archive-42";
    let url = v
        .url
        .replacen("jfs_e2e_client@", &format!("jfs_e2e_client:{password}@"), 1);
    assert!(url.contains(password));
    let m = v.mount_url("m", &url, &[]);
    fs::write(m.p("f"), b"x").unwrap();
    let out_dir = v.dir.path().join("reports");
    fs::create_dir(&out_dir).unwrap();
    let out = ok(jfs()
        .arg("debug")
        .arg(m.p(""))
        .arg("--out-dir")
        .arg(&out_dir));
    let archive = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(archive.ends_with(".tar.gz"), "{archive}");
    let unpacked = v.dir.path().join("unpacked");
    fs::create_dir(&unpacked).unwrap();
    ok(Command::new("tar")
        .args(["-xzf", &archive, "-C"])
        .arg(&unpacked));
    let dir = fs::read_dir(&unpacked)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let read = |name: &str| fs::read_to_string(dir.join(name)).unwrap();
    let mount = read("mount.txt");
    for want in [
        "== mount",
        "volume    debug",
        "== sessions of the volume",
        "(this mount)",
        "== jfs.fsck()",
    ] {
        assert!(mount.contains(want), "mount.txt lacks {want:?}:\n{mount}");
    }
    assert!(read("metrics.txt").contains("jfs_"));
    assert!(read("cmdline.txt").contains("mount"));
    let log = read("log.txt");
    assert!(log.contains("mounting volume debug"), "{log}");
    let system = read("system.txt");
    assert!(
        system.contains("Linux version") && system.contains("/proc/mounts"),
        "{system}"
    );
    for entry in fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = fs::read_to_string(&path).unwrap();
        assert!(
            !text.contains(password),
            "{} holds the password",
            path.display()
        );
    }
}
