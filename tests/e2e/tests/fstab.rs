//! `mount -t jfs` and fstab: mount(8) runs /sbin/mount.jfs (the jfs binary
//! under that name, installed by scripts/test.sh and scripts/run.sh), which
//! turns the options into `jfs mount` flags; `umount` unmounts.
use std::fs;
use std::path::Path;
use std::process::Command;

use jfs_e2e::{env, eventually, is_mounted, ok, pattern, Volume};

fn helper_is_this_build() {
    let helper = fs::canonicalize("/sbin/mount.jfs")
        .expect("/sbin/mount.jfs is missing: run the tests through scripts/test.sh");
    assert_eq!(
        helper,
        fs::canonicalize(env("JFS_BIN")).unwrap(),
        "/sbin/mount.jfs is another build: run the tests through scripts/test.sh"
    );
}

fn umount(dir: &Path) {
    ok(Command::new("umount").arg(dir));
    assert!(!is_mounted(dir));
}

#[test]
fn an_fstab_line_mounts_and_umount_unmounts() {
    helper_is_this_build();
    let v = Volume::new("fstab");
    let dir = v.dir.path().join("mnt-fstab");
    fs::create_dir_all(&dir).unwrap();
    let log = v.dir.path().join("fstab.log");
    let fstab = v.dir.path().join("fstab");
    fs::write(
        &fstab,
        format!(
            "# a jfs volume\n{} {} jfs _netdev,allow_other,attr-cache=0,entry-cache=0,log={},x-systemd.automount 0 0\n",
            v.url,
            dir.display(),
            log.display()
        ),
    )
    .unwrap();
    ok(Command::new("mount").arg("--fstab").arg(&fstab).arg(&dir));
    assert!(is_mounted(&dir));
    let mounts = fs::read_to_string("/proc/self/mounts").unwrap();
    let line = mounts
        .lines()
        .find(|l| l.contains(dir.to_str().unwrap()))
        .unwrap();
    assert!(
        line.contains("fuse") && line.contains("allow_other"),
        "{line}"
    );
    fs::write(dir.join("f"), pattern(1, 100_000)).unwrap();
    let other = v.mount("b", &[]);
    assert_eq!(fs::read(other.p("f")).unwrap(), pattern(1, 100_000));
    // the log= option reached the mount
    let started = |t: &str| t.contains("mounting volume fstab");
    assert!(
        eventually(10, || fs::read_to_string(&log).is_ok_and(|t| started(&t))),
        "{}",
        fs::read_to_string(&log).unwrap_or_default()
    );
    umount(&dir);

    // mount -t jfs with -o: ro is a read-only mount
    ok(Command::new("mount")
        .args(["-t", "jfs", &v.url])
        .arg(&dir)
        .args(["-o", "ro,attr-cache=0"]));
    assert_eq!(fs::read(dir.join("f")).unwrap(), pattern(1, 100_000));
    let e = fs::write(dir.join("g"), b"no").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EROFS), "{e}");
    umount(&dir);

    // a bad option is refused with its cause, and nothing is mounted
    let out = Command::new("mount")
        .args(["-t", "jfs", &v.url])
        .arg(&dir)
        .args(["-o", "no-such-option=1"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no-such-option"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!is_mounted(&dir));
}
