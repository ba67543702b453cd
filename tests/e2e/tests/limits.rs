//! A client role's limits and a mount's squash, as an attacker meets them:
//! a read-only role cannot write through its mount or through SQL; root on
//! a root-squashed mount acts as nobody (cannot read or remove what nobody
//! could, makes nothing root's); a role granted a squash is squashed
//! whatever its mount's options say.
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;

use jfs_e2e::{login_role, meta_url_as, psql_as, Volume};

const ALICE: u32 = 1001;
const NOBODY: u32 = 65534;

fn errno(r: std::io::Result<impl Sized>) -> i32 {
    match r {
        Ok(_) => 0,
        Err(e) => e.raw_os_error().unwrap_or(-1),
    }
}

/// Makes directory `path` with `mode`, owned by uid:gid.
fn dir(path: &Path, mode: u32, uid: u32, gid: u32) {
    fs::create_dir(path).unwrap();
    std::os::unix::fs::chown(path, Some(uid), Some(gid)).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

/// Reads `path` as `uid` (its own gid, no other group); the bytes, or
/// what the reader printed of its error.
fn read_as(uid: u32, path: &Path) -> Result<Vec<u8>, String> {
    let out = Command::new("setpriv")
        .args(["--reuid", &uid.to_string(), "--regid", &uid.to_string()])
        .args(["--clear-groups", "cat"])
        .arg(path)
        .current_dir("/")
        .output()
        .unwrap();
    match out.status.success() {
        true => Ok(out.stdout),
        false => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
    }
}

#[test]
fn a_read_only_role_reads_and_cannot_write_through_its_mount_or_sql() {
    const READ_ONLY: &str = "jfs_e2e_read_only";
    let v = Volume::new("limits-ro");
    login_role(READ_ONLY);
    v.sql(&format!(
        "SELECT jfs.grant_client('{READ_ONLY}', p_read_only => true)"
    ));
    let rw = v.mount("rw", &[]);
    fs::create_dir(rw.p("d")).unwrap();
    fs::write(rw.p("d/f"), b"written by the client role").unwrap();

    // mounted without --read-only: the role's limit applies
    let ro = v.mount_url("ro", &meta_url_as(&v.db, READ_ONLY), &[]);
    assert_eq!(
        fs::read(ro.p("d/f")).unwrap(),
        b"written by the client role"
    );
    assert_eq!(errno(fs::write(ro.p("d/new"), b"x")), libc::EROFS);
    assert_eq!(errno(fs::create_dir(ro.p("d/sub"))), libc::EROFS);
    assert_eq!(errno(fs::remove_file(ro.p("d/f"))), libc::EROFS);
    assert_eq!(
        errno(fs::OpenOptions::new().append(true).open(ro.p("d/f"))),
        libc::EROFS
    );
    assert!(
        ro.log_text().contains("granted read-only"),
        "{}",
        ro.log_tail(20)
    );

    // a client that ignores the limit is refused by the server
    let dir_inode = fs::metadata(rw.p("d")).unwrap().ino();
    for call in [
        format!("SELECT jfs.mknod({dir_inode}, 'x', 1, 420, 0, 0)"),
        format!("SELECT jfs.unlink({dir_inode}, 'f')"),
        format!("SELECT jfs.rmr({dir_inode}, 'f')"),
        format!("SELECT jfs.setattr({dir_inode}, 1, 511)"),
        "SELECT jfs.rmr('/d')".to_string(),
    ] {
        let refused = psql_as(READ_ONLY, "", &v.db, &call).unwrap_err();
        assert!(
            refused.contains("permission denied for function"),
            "{call}: {refused}"
        );
    }
    assert_eq!(
        fs::read(rw.p("d/f")).unwrap(),
        b"written by the client role"
    );
    assert_eq!(
        fs::read_dir(rw.p("d")).unwrap().count(),
        1,
        "the read-only role changed the directory"
    );
}

#[test]
fn root_on_a_root_squashed_mount_acts_as_nobody() {
    let v = Volume::new("limits-root-squash");
    let m = v.mount("plain", &[]);
    dir(&m.p("alice"), 0o700, ALICE, ALICE);
    fs::write(m.p("alice/secret"), b"alice's").unwrap();
    std::os::unix::fs::chown(m.p("alice/secret"), Some(ALICE), Some(ALICE)).unwrap();
    dir(&m.p("shared"), 0o777, 0, 0);
    fs::write(m.p("shared/roots"), b"root's").unwrap();
    dir(&m.p("sticky"), 0o1777, 0, 0);
    fs::write(m.p("sticky/alices"), b"alice's").unwrap();
    std::os::unix::fs::chown(m.p("sticky/alices"), Some(ALICE), Some(ALICE)).unwrap();

    let sq = v.mount(
        "squashed",
        &["--root-squash", "65534:65534", "--allow-other"],
    );
    // what nobody may not do, root on this mount may not either
    assert_eq!(errno(fs::read(sq.p("alice/secret"))), libc::EACCES);
    assert_eq!(errno(fs::read_dir(sq.p("alice"))), libc::EACCES);
    assert_eq!(errno(fs::remove_file(sq.p("sticky/alices"))), libc::EPERM);
    assert_eq!(errno(fs::write(sq.p("shared/roots"), b"x")), libc::EACCES);
    assert_eq!(
        errno(fs::set_permissions(
            sq.p("shared/roots"),
            fs::Permissions::from_mode(0o666)
        )),
        libc::EPERM
    );
    // what it makes is nobody's, and it gives nothing to root
    fs::write(sq.p("shared/made"), b"by squashed root").unwrap();
    fs::create_dir(sq.p("shared/dir")).unwrap();
    for made in ["shared/made", "shared/dir"] {
        let md = fs::metadata(m.p(made)).unwrap();
        assert_eq!((md.uid(), md.gid()), (NOBODY, NOBODY), "{made}");
    }
    assert_eq!(
        errno(std::os::unix::fs::chown(
            sq.p("shared/made"),
            Some(0),
            Some(0)
        )),
        libc::EPERM
    );
    // trusted.* xattrs are CAP_SYS_ADMIN's: to a squashed root they do not
    // exist, and it may not set one (a readable file's user.* it reads)
    use rustix::fs::{getxattr, setxattr, XattrFlags};
    let roots = m.p("shared/roots");
    setxattr(
        &roots,
        "trusted.jfs-test",
        b"admins only",
        XattrFlags::empty(),
    )
    .unwrap();
    setxattr(&roots, "user.jfs-test", b"anyone", XattrFlags::empty()).unwrap();
    let mut buf = [0u8; 64];
    let squashed = sq.p("shared/roots");
    assert_eq!(
        getxattr(&squashed, "trusted.jfs-test", &mut buf[..]),
        Err(rustix::io::Errno::NODATA)
    );
    assert_eq!(
        setxattr(&squashed, "trusted.jfs-other", b"x", XattrFlags::empty()),
        Err(rustix::io::Errno::PERM)
    );
    assert_eq!(getxattr(&squashed, "user.jfs-test", &mut buf[..]), Ok(6));
    assert_eq!(getxattr(&roots, "trusted.jfs-test", &mut buf[..]), Ok(11));
    // others are not squashed: alice reads her own file through it
    assert_eq!(read_as(ALICE, &sq.p("alice/secret")).unwrap(), b"alice's");
    assert_eq!(fs::read(m.p("alice/secret")).unwrap(), b"alice's");
    assert!(m.p("sticky/alices").exists());
}

#[test]
fn a_role_granted_a_squash_is_squashed_whatever_its_mount_says() {
    const SQUASHED: &str = "jfs_e2e_squashed";
    let v = Volume::new("limits-all-squash");
    login_role(SQUASHED);
    v.sql(&format!(
        "SELECT jfs.grant_client('{SQUASHED}', p_all_squash => '2000:2001')"
    ));
    let m = v.mount("plain", &[]);
    dir(&m.p("open"), 0o777, 0, 0);
    dir(&m.p("closed"), 0o700, 0, 0);

    // no squash asked of the mount: the role's applies, to root too
    let sq = v.mount_url("role", &meta_url_as(&v.db, SQUASHED), &[]);
    assert!(
        sq.log_text().contains("all squash to 2000:2001"),
        "{}",
        sq.log_tail(20)
    );
    fs::write(sq.p("open/f"), b"x").unwrap();
    let md = fs::metadata(m.p("open/f")).unwrap();
    assert_eq!((md.uid(), md.gid()), (2000, 2001));
    assert_eq!(errno(fs::write(sq.p("closed/f"), b"x")), libc::EACCES);

    // a client that skips the squash: the server squashes what it sends
    let open = fs::metadata(m.p("open")).unwrap().ino();
    let made = psql_as(
        SQUASHED,
        "",
        &v.db,
        &format!("SELECT uid || ':' || gid FROM jfs.mknod({open}, 'rogue', 1, 2541, 0, 0)"),
    )
    .unwrap();
    assert_eq!(made, "2000:2001");
    let given = psql_as(
        SQUASHED,
        "",
        &v.db,
        &format!(
            "SELECT errno FROM jfs.setattr({}, 2, p_uid => 0)",
            fs::metadata(m.p("open/f")).unwrap().ino()
        ),
    )
    .unwrap();
    assert_eq!(given, libc::EPERM.to_string());
    let md = fs::metadata(m.p("open/rogue")).unwrap();
    assert_eq!((md.uid(), md.gid()), (2000, 2001));
    assert_eq!(
        fs::read_dir(m.p("open"))
            .unwrap()
            .filter(|e| e.as_ref().unwrap().metadata().unwrap().uid() == 0)
            .count(),
        0
    );
}
