//! What people put in comes back out: attributes set the way everyday tools
//! set them (tar, cp -p) survive, whatever the order of writes and setattr.
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;

use jfs_e2e::{assert_same_tree, make_varied_tree, ok, Volume};

/// 2006-01-02 15:04:05.123456789 UTC in nanoseconds.
const T2006: i64 = 1_136_214_245_123_456_789;

#[test]
fn times_set_before_close_are_kept() {
    let v = Volume::new("fidelity-times");
    let m = v.mount("a", &[]);
    let path = m.p("written-then-stamped");
    // what tar x and cp -p do: write, futimens on the open descriptor, close
    let code = format!(
        "import os\n\
         fd = os.open({path:?}, os.O_CREAT | os.O_WRONLY, 0o644)\n\
         os.write(fd, b'x' * 100)\n\
         os.utime(fd, ns=({T2006}, {T2006}))\n\
         os.close(fd)\n",
        path = path.to_str().unwrap()
    );
    ok(Command::new("python3").args(["-c", &code]));
    let meta = fs::metadata(&path).unwrap();
    assert_eq!(meta.len(), 100);
    assert_eq!(
        (meta.mtime(), meta.mtime_nsec()),
        (T2006 / 1_000_000_000, T2006 % 1_000_000_000),
        "mtime after close"
    );
    assert_eq!(
        (meta.atime(), meta.atime_nsec()),
        (T2006 / 1_000_000_000, T2006 % 1_000_000_000),
        "atime after close"
    );
    // and as another mount sees it
    let b = v.mount("b", &[]);
    let other = fs::metadata(b.p("written-then-stamped")).unwrap();
    assert_eq!(other.mtime(), T2006 / 1_000_000_000);
    assert_eq!(
        fs::read(b.p("written-then-stamped")).unwrap(),
        vec![b'x'; 100]
    );
}

#[test]
fn tar_extracts_with_the_archived_times_and_modes() {
    let v = Volume::new("fidelity-tar");
    let m = v.mount("a", &[]);
    let src = v.dir.path().join("src");
    fs::create_dir_all(src.join("d")).unwrap();
    fs::write(src.join("d/f1"), vec![7u8; 70_000]).unwrap();
    fs::write(src.join("f2"), b"two").unwrap();
    ok(Command::new("chmod").args(["0751"]).arg(src.join("d")));
    ok(Command::new("chmod").args(["0640"]).arg(src.join("d/f1")));
    ok(Command::new("touch")
        .args(["-d", "2006-01-02 15:04:05"])
        .arg(src.join("d/f1")));
    ok(Command::new("touch")
        .args(["-d", "2007-03-04 05:06:07"])
        .arg(src.join("f2")));
    ok(Command::new("touch")
        .args(["-d", "2008-01-01 00:00:00"])
        .arg(src.join("d")));
    let archive = v.dir.path().join("a.tar");
    ok(Command::new("tar")
        .arg("-cf")
        .arg(&archive)
        .arg("-C")
        .arg(&src)
        .arg("."));
    let dst = m.p("x");
    fs::create_dir(&dst).unwrap();
    ok(Command::new("tar")
        .arg("-xpf")
        .arg(&archive)
        .arg("-C")
        .arg(&dst));
    // tar -d compares sizes, modes and mtimes of what it extracted
    let out = Command::new("tar")
        .arg("-df")
        .arg(&archive)
        .arg("-C")
        .arg(&dst)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "tar -d found differences:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    for rel in ["d", "d/f1", "f2"] {
        let a = fs::metadata(src.join(rel)).unwrap();
        let b = fs::metadata(dst.join(rel)).unwrap();
        assert_eq!(a.mode(), b.mode(), "mode of {rel}");
        assert_eq!(a.mtime(), b.mtime(), "mtime of {rel}");
        if a.is_file() {
            assert_eq!(a.len(), b.len(), "size of {rel}");
        }
    }
}

#[test]
fn cp_a_keeps_modes_and_times() {
    let v = Volume::new("fidelity-cp");
    let m = v.mount("a", &[]);
    let src = v.dir.path().join("src");
    fs::create_dir_all(src.join("bin")).unwrap();
    fs::create_dir_all(src.join("shared")).unwrap();
    let files = [
        ("readme", "0644"),
        ("secret", "0600"),
        ("bin/tool", "0755"),
        ("bin/setuid", "4755"),
        ("bin/setgid", "2751"),
    ];
    for (rel, mode) in files {
        fs::write(src.join(rel), rel.as_bytes()).unwrap();
        ok(Command::new("chmod").arg(mode).arg(src.join(rel)));
        ok(Command::new("touch")
            .args(["-d", "2010-10-10 10:10:10.123456789"])
            .arg(src.join(rel)));
    }
    ok(Command::new("chmod").arg("1777").arg(src.join("shared")));
    ok(Command::new("chmod").arg("0750").arg(src.join("bin")));
    std::os::unix::fs::symlink("bin/tool", src.join("link")).unwrap();
    let dst = m.p("copy");
    ok(Command::new("cp").arg("-a").arg(&src).arg(&dst));
    for rel in [
        "readme",
        "secret",
        "bin",
        "bin/tool",
        "bin/setuid",
        "bin/setgid",
        "shared",
        "link",
    ] {
        let a = fs::symlink_metadata(src.join(rel)).unwrap();
        let b = fs::symlink_metadata(dst.join(rel)).unwrap();
        assert_eq!(
            format!("{:o}", a.mode()),
            format!("{:o}", b.mode()),
            "mode of {rel}"
        );
        if !a.is_dir() {
            assert_eq!(
                (a.mtime(), a.mtime_nsec()),
                (b.mtime(), b.mtime_nsec()),
                "mtime of {rel}"
            );
        }
    }
    assert_eq!(
        fs::read_link(dst.join("link")).unwrap().to_str(),
        Some("bin/tool")
    );
}

#[test]
fn acls_beyond_the_mode_are_refused_not_kept() {
    let v = Volume::new("fidelity-acl");
    let m = v.mount("a", &[]);
    let path = m.p("f");
    fs::write(&path, b"x").unwrap();
    // version 2; user::rw-, user:1000:rw-, group::r--, mask::rw-, other::r--
    let code = format!(
        "import errno, os, struct\n\
         p = {path:?}\n\
         def acl(*entries):\n\
         \x20   return struct.pack('<I', 2) + b''.join(struct.pack('<HHI', *e) for e in entries)\n\
         named = acl((1, 6, 0xffffffff), (2, 6, 1000), (4, 4, 0xffffffff), (0x10, 6, 0xffffffff), (0x20, 4, 0xffffffff))\n\
         try:\n\
         \x20   os.setxattr(p, 'system.posix_acl_access', named)\n\
         \x20   print('stored')\n\
         except OSError as e:\n\
         \x20   print('EOPNOTSUPP' if e.errno == errno.EOPNOTSUPP else errno.errorcode[e.errno])\n\
         os.setxattr(p, 'system.posix_acl_access', acl((1, 7, 0xffffffff), (4, 5, 0xffffffff), (0x20, 1, 0xffffffff)))\n\
         print(oct(os.stat(p).st_mode & 0o7777))\n\
         try:\n\
         \x20   os.getxattr(p, 'system.posix_acl_access')\n\
         \x20   print('kept')\n\
         except OSError as e:\n\
         \x20   print(errno.errorcode[e.errno])\n\
         print(sorted(os.listxattr(p)))\n",
        path = path.to_str().unwrap()
    );
    let out = ok(Command::new("python3").args(["-c", &code]));
    let said: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(said, ["EOPNOTSUPP", "0o751", "ENODATA", "[]"], "{said:?}");
}

#[test]
fn cp_tar_and_rsync_copy_a_tree_onto_the_mount_and_back_exactly() {
    let v = Volume::with_options("fidelity-tools", &["--enable-acl"]);
    let m = v.mount("a", &[]);
    let src = v.dir.path().join("src");
    make_varied_tree(&src);

    // cp -a onto the mount, and back off it
    ok(Command::new("cp").arg("-a").arg(&src).arg(m.p("cp")));
    assert_same_tree("cp -a onto the mount", &src, &m.p("cp"));
    let back = v.dir.path().join("cp-back");
    ok(Command::new("cp").arg("-a").arg(m.p("cp")).arg(&back));
    assert_same_tree("cp -a off the mount", &src, &back);

    // tar c | tar x, with xattrs and ACLs, in both directions
    let tar_opts = [
        "--format=posix",
        "--xattrs",
        "--xattrs-include=*",
        "--acls",
        "--numeric-owner",
    ];
    let archive = v.dir.path().join("tree.tar");
    ok(Command::new("tar")
        .args(tar_opts)
        .arg("-cf")
        .arg(&archive)
        .arg("-C")
        .arg(&src)
        .arg("."));
    fs::create_dir(m.p("tar")).unwrap();
    ok(Command::new("tar")
        .args(tar_opts)
        .arg("-xpf")
        .arg(&archive)
        .arg("-C")
        .arg(m.p("tar")));
    assert_same_tree("tar x onto the mount", &src, &m.p("tar"));
    let archive2 = v.dir.path().join("from-mount.tar");
    ok(Command::new("tar")
        .args(tar_opts)
        .arg("-cf")
        .arg(&archive2)
        .arg("-C")
        .arg(m.p("tar"))
        .arg("."));
    let back = v.dir.path().join("tar-back");
    fs::create_dir(&back).unwrap();
    ok(Command::new("tar")
        .args(tar_opts)
        .arg("-xpf")
        .arg(&archive2)
        .arg("-C")
        .arg(&back));
    assert_same_tree("tar c off the mount", &src, &back);

    // rsync -aHAX onto the mount, then a checksum dry run finds nothing to do
    let rsync = |from: &Path, to: &Path, extra: &[&str]| {
        let out = ok(Command::new("rsync")
            .args(["-aHAX", "--numeric-ids", "-i"])
            .args(extra)
            .arg(format!("{}/", from.display()))
            .arg(to));
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    rsync(&src, &m.p("rsync"), &[]);
    assert_same_tree("rsync -aHAX onto the mount", &src, &m.p("rsync"));
    let again = rsync(&src, &m.p("rsync"), &["-n", "-c"]);
    assert_eq!(again, "", "rsync -n -c -aHAX still sees differences");
    let back = v.dir.path().join("rsync-back");
    rsync(&m.p("rsync"), &back, &[]);
    assert_same_tree("rsync -aHAX off the mount", &src, &back);

    // as another mount sees it, and with the metadata consistent
    let b = v.mount("b", &[]);
    assert_same_tree("another mount", &src, &b.p("rsync"));
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
}

#[test]
fn times_before_1970_keep_their_fraction() {
    let v = Volume::new("fidelity-1960");
    let m = v.mount("a", &[]);
    let path = m.p("old");
    fs::write(&path, b"x").unwrap();
    ok(Command::new("touch")
        .args(["-d", "1960-02-03 04:05:06.789 UTC"])
        .arg(&path));
    // -312753294 s + 0.789 s, as the kernel keeps it on a local file system
    let b = v.mount("b", &[]);
    for p in [path, b.p("old")] {
        let meta = fs::metadata(&p).unwrap();
        assert_eq!(
            (meta.mtime(), meta.mtime_nsec()),
            (-312_753_294, 789_000_000)
        );
        assert_eq!(
            (meta.atime(), meta.atime_nsec()),
            (-312_753_294, 789_000_000)
        );
    }
}
