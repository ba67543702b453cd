//! POSIX file operations through a real FUSE mount of a real volume.
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jfs_e2e::{eventually, ok, pattern, Volume};

fn py(code: &str) -> String {
    let out = ok(Command::new("python3").args(["-c", code]));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn files_directories_links_and_attributes() {
    let v = Volume::new("fileops");
    let m = v.mount("a", &[]);

    // create, read, append, overwrite in the middle
    fs::write(m.p("f"), b"hello world").unwrap();
    assert_eq!(fs::read(m.p("f")).unwrap(), b"hello world");
    OpenOptions::new()
        .append(true)
        .open(m.p("f"))
        .unwrap()
        .write_all(b"!!")
        .unwrap();
    assert_eq!(fs::read(m.p("f")).unwrap(), b"hello world!!");
    let f = OpenOptions::new().write(true).open(m.p("f")).unwrap();
    f.write_all_at(b"WORLD", 6).unwrap();
    drop(f);
    assert_eq!(fs::read(m.p("f")).unwrap(), b"hello WORLD!!");

    // truncate down and up: the regrown part reads as zeros
    let f = OpenOptions::new().write(true).open(m.p("f")).unwrap();
    f.set_len(5).unwrap();
    f.set_len(8).unwrap();
    drop(f);
    assert_eq!(fs::read(m.p("f")).unwrap(), b"hello\0\0\0");

    // sparse: a hole in the middle and past a chunk boundary
    let mut s = File::create(m.p("sparse")).unwrap();
    s.write_all(b"start").unwrap();
    s.seek(SeekFrom::Start((64 << 20) + 10)).unwrap();
    s.write_all(b"end").unwrap();
    drop(s);
    assert_eq!(fs::metadata(m.p("sparse")).unwrap().len(), (64 << 20) + 13);
    let mut s = File::open(m.p("sparse")).unwrap();
    let mut buf = vec![0u8; 100];
    s.seek(SeekFrom::Start(1 << 20)).unwrap();
    s.read_exact(&mut buf).unwrap();
    assert!(buf.iter().all(|&b| b == 0));
    s.seek(SeekFrom::Start((64 << 20) + 8)).unwrap();
    let mut tail = Vec::new();
    s.read_to_end(&mut tail).unwrap();
    assert_eq!(tail, b"\0\0end");

    // hard link, symlink
    fs::hard_link(m.p("f"), m.p("f-link")).unwrap();
    assert_eq!(fs::metadata(m.p("f")).unwrap().nlink(), 2);
    assert_eq!(
        fs::metadata(m.p("f")).unwrap().ino(),
        fs::metadata(m.p("f-link")).unwrap().ino()
    );
    std::os::unix::fs::symlink("f", m.p("sym")).unwrap();
    assert_eq!(fs::read_link(m.p("sym")).unwrap().to_str(), Some("f"));
    assert_eq!(fs::read(m.p("sym")).unwrap(), b"hello\0\0\0");
    assert!(fs::symlink_metadata(m.p("sym"))
        .unwrap()
        .file_type()
        .is_symlink());

    // rename over an existing file replaces it
    fs::write(m.p("other"), b"other").unwrap();
    fs::rename(m.p("other"), m.p("f-link")).unwrap();
    assert_eq!(fs::read(m.p("f-link")).unwrap(), b"other");
    assert_eq!(fs::metadata(m.p("f")).unwrap().nlink(), 1);
    assert!(!m.p("other").exists());

    // xattrs
    let path = m.p("f");
    let path = path.to_str().unwrap();
    assert_eq!(
        py(&format!(
            "import os; os.setxattr({path:?}, 'user.color', b'blue'); \
             print(os.getxattr({path:?}, 'user.color').decode(), sorted(os.listxattr({path:?})))"
        )),
        "blue ['user.color']"
    );
    assert_eq!(
        py(&format!(
            "import os\ntry:\n  os.setxattr({path:?}, 'user.color', b'x', os.XATTR_CREATE)\nexcept FileExistsError:\n  print('exists')"
        )),
        "exists"
    );
    py(&format!(
        "import os; os.removexattr({path:?}, 'user.color')"
    ));
    assert_eq!(
        py(&format!("import os; print(os.listxattr({path:?}))")),
        "[]"
    );

    // chmod, chown, utimens (nanoseconds kept)
    fs::set_permissions(m.p("f"), fs::Permissions::from_mode(0o640)).unwrap();
    assert_eq!(fs::metadata(m.p("f")).unwrap().mode() & 0o7777, 0o640);
    std::os::unix::fs::chown(m.p("f"), Some(1234), Some(5678)).unwrap();
    let md = fs::metadata(m.p("f")).unwrap();
    assert_eq!((md.uid(), md.gid()), (1234, 5678));
    let when = UNIX_EPOCH + Duration::new(1_600_000_000, 123_456_789);
    File::options()
        .write(true)
        .open(m.p("f"))
        .unwrap()
        .set_times(fs::FileTimes::new().set_modified(when).set_accessed(when))
        .unwrap();
    let md = fs::metadata(m.p("f")).unwrap();
    assert_eq!((md.mtime(), md.mtime_nsec()), (1_600_000_000, 123_456_789));
    assert_eq!(md.modified().unwrap(), when);
    assert!(
        md.ctime()
            >= SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_secs() as i64
                - 60
    );

    // mkdir -p, nlink of directories, readdir, rm -r
    fs::create_dir_all(m.p("a/b/c/d")).unwrap();
    for i in 0..300 {
        fs::write(m.p(&format!("a/b/file-{i:03}")), format!("{i}")).unwrap();
    }
    assert_eq!(fs::metadata(m.p("a/b")).unwrap().nlink(), 3);
    let mut names: Vec<String> = fs::read_dir(m.p("a/b"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names.len(), 301);
    assert_eq!(names[0], "c");
    assert_eq!(names[300], "file-299");
    assert_eq!(fs::read_to_string(m.p("a/b/file-123")).unwrap(), "123");
    assert_eq!(
        fs::remove_dir(m.p("a")).unwrap_err().raw_os_error(),
        Some(libc::ENOTEMPTY)
    );
    ok(Command::new("rm").arg("-r").arg(m.p("a")));
    assert!(!m.p("a").exists());

    // errors come back as errno
    assert_eq!(
        fs::read(m.p("missing")).unwrap_err().raw_os_error(),
        Some(libc::ENOENT)
    );
    assert_eq!(
        fs::create_dir(m.p("f")).unwrap_err().raw_os_error(),
        Some(libc::EEXIST)
    );
    assert_eq!(
        fs::write(m.p(&"n".repeat(256)), b"x")
            .unwrap_err()
            .raw_os_error(),
        Some(libc::ENAMETOOLONG)
    );
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
}

#[test]
fn two_handles_write_different_ranges_of_one_file() {
    let v = Volume::new("twohandles");
    let m = v.mount("a", &[]);
    let a = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(m.p("f"))
        .unwrap();
    let b = OpenOptions::new().write(true).open(m.p("f")).unwrap();
    let first = pattern(1, 3 << 20);
    let second = pattern(2, 5 << 20);
    a.write_all_at(&first, 0).unwrap();
    b.write_all_at(&second, 3 << 20).unwrap();
    a.write_all_at(b"XY", 1000).unwrap();
    drop(a);
    drop(b);
    let got = fs::read(m.p("f")).unwrap();
    assert_eq!(got.len(), 8 << 20);
    let mut want = first.clone();
    want[1000..1002].copy_from_slice(b"XY");
    want.extend_from_slice(&second);
    assert!(got == want, "content differs");
}

#[test]
fn a_256_mib_file_round_trips() {
    let v = Volume::new("bigfile");
    let m = v.mount("a", &[]);
    let mut f = File::create(m.p("big")).unwrap();
    let piece = 8 << 20;
    for i in 0..32u64 {
        f.write_all(&pattern(100 + i, piece)).unwrap();
    }
    f.sync_all().unwrap();
    drop(f);
    assert_eq!(fs::metadata(m.p("big")).unwrap().len(), 256 << 20);
    // read back through a second mount: nothing comes from the writer's memory
    let m2 = v.mount("b", &[]);
    let mut f = File::open(m2.p("big")).unwrap();
    let mut buf = vec![0u8; piece];
    for i in 0..32u64 {
        f.read_exact(&mut buf).unwrap();
        assert!(buf == pattern(100 + i, piece), "piece {i} differs");
    }
    assert_eq!(f.read(&mut buf).unwrap(), 0);
}

#[test]
fn unlink_frees_objects_and_open_files_stay_readable() {
    let v = Volume::new("unlink");
    let m = v.mount("a", &[]);
    fs::write(m.p("gone"), pattern(5, 9 << 20)).unwrap();
    fs::write(m.p("kept"), b"kept").unwrap();
    let before = v.objects().len();
    assert!(
        before >= 4,
        "expected the blocks of both files, got {before}"
    );

    // open, unlink, still readable; its blocks stay until the last close
    let mut held = File::open(m.p("gone")).unwrap();
    fs::remove_file(m.p("gone")).unwrap();
    assert!(!m.p("gone").exists());
    let mut data = Vec::new();
    held.read_to_end(&mut data).unwrap();
    assert!(data == pattern(5, 9 << 20));
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(v.objects().len(), before);
    drop(held);
    assert!(
        eventually(15, || v.objects().len() == 1),
        "objects left after the drain: {:?}",
        v.objects()
    );
    assert_eq!(fs::read(m.p("kept")).unwrap(), b"kept");
    assert_eq!(v.sql("SELECT count(*) FROM jfs.delslice"), "0");
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
}

/// A name longer than 255 bytes is ENAMETOOLONG for every call that looks it
/// up, also when the directory's listing is cached here (that answered
/// ENOENT: the listing knew the name was not there before anyone asked
/// whether it could be).
#[test]
fn a_name_too_long_is_enametoolong_with_a_cached_listing() {
    let v = Volume::new("longname");
    let m = v.mount("a", &["--attr-cache", "30", "--entry-cache", "30"]);
    fs::create_dir(m.p("d")).unwrap();
    fs::write(m.p("d/f"), b"x").unwrap();
    let long = "n".repeat(256);
    let long_path = m.p(&format!("d/{long}"));
    // the listing, read after the change log was (it is trusted only then),
    // is complete and cached
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(fs::read_dir(m.p("d")).unwrap().count(), 1);
    assert_eq!(
        fs::metadata(m.p("d/absent")).unwrap_err().raw_os_error(),
        Some(libc::ENOENT)
    );
    let calls: Vec<(&str, std::io::Result<()>)> = vec![
        ("stat", fs::metadata(&long_path).map(|_| ())),
        (
            "chmod",
            fs::set_permissions(&long_path, fs::Permissions::from_mode(0o644)),
        ),
        (
            "truncate",
            OpenOptions::new().write(true).open(&long_path).map(|_| ()),
        ),
        ("link", fs::hard_link(m.p("d/f"), &long_path)),
        ("rename", fs::rename(&long_path, m.p("d/g"))),
        ("rmdir", fs::remove_dir(&long_path)),
        ("unlink", fs::remove_file(&long_path)),
    ];
    for (call, result) in calls {
        let err = result.expect_err(call);
        assert_eq!(
            err.raw_os_error(),
            Some(libc::ENAMETOOLONG),
            "{call} of a 256-byte name: {err}"
        );
    }
    // a 255-byte name is a name
    let max = m.p(&format!("d/{}", "m".repeat(255)));
    fs::write(&max, b"ok").unwrap();
    assert_eq!(fs::read(&max).unwrap(), b"ok");
}

/// The mount's own options of `path` (the fourth field of /proc/self/mounts).
fn mount_options(path: &std::path::Path) -> String {
    let path = path.canonicalize().unwrap();
    let mounts = fs::read_to_string("/proc/self/mounts").unwrap();
    mounts
        .lines()
        .map(|l| l.split(' ').collect::<Vec<_>>())
        .find(|f| f.len() > 3 && std::path::Path::new(f[1]) == path)
        .map(|f| f[3].to_string())
        .unwrap_or_else(|| panic!("{} is not mounted", path.display()))
}

/// A mount is nodev and nosuid unless asked (`--dev`, `--suid`, or `-o
/// dev,suid` through mount.jfs), as other file systems offer: a device
/// node made on a nodev mount opens nothing, on a dev mount its device
/// (xfstests generic/184 and others need it).
#[test]
fn device_files_open_only_on_a_mount_with_dev() {
    let v = Volume::new("fileops-dev");
    let plain = v.mount("plain", &[]);
    let dev = v.mount("dev", &["--dev", "--suid"]);
    let options = mount_options(&plain.path);
    assert!(
        options.contains("nodev") && options.contains("nosuid"),
        "{options}"
    );
    let options = mount_options(&dev.path);
    assert!(
        !options.contains("nodev") && !options.contains("nosuid"),
        "{options}"
    );
    // a character device node: /dev/null's numbers (1, 3)
    ok(Command::new("mknod")
        .arg(plain.p("null"))
        .args(["c", "1", "3"]));
    let refused = File::open(plain.p("null")).map(drop);
    assert_eq!(
        refused.map_err(|e| e.raw_os_error()),
        Err(Some(libc::EACCES)),
        "a device on a nodev mount"
    );
    let mut bytes = Vec::new();
    File::open(dev.p("null"))
        .expect("a device on a dev mount")
        .read_to_end(&mut bytes)
        .unwrap();
    assert!(bytes.is_empty(), "/dev/null reads nothing");
    OpenOptions::new()
        .write(true)
        .open(dev.p("null"))
        .unwrap()
        .write_all(b"gone")
        .unwrap();
}

#[test]
fn a_listing_ends_while_its_entries_are_renamed_under_it() {
    // xfstests generic/736: each entry a listing returns is renamed to a
    // new name in the same directory, which gives it a new cookie after
    // every one listed so far; the listing went on for ever (15,001
    // entries reported for 15,000, and growing). Past its first page it
    // now shows no entry newer than the listing (jfs.listing_ceiling).
    let v = Volume::new("renamelisting");
    let m = v.mount("a", &[]);
    let dir = m.p("d");
    fs::create_dir(&dir).unwrap();
    for i in 0..1500 {
        File::create(dir.join(format!("f{i}"))).unwrap();
    }
    let seen = py(&format!(
        "import os\n\
         d = {dir:?}\n\
         seen = 0\n\
         with os.scandir(d) as it:\n\
         \x20   for e in it:\n\
         \x20       seen += 1\n\
         \x20       if seen > 20000:\n\
         \x20           break\n\
         \x20       os.rename(os.path.join(d, e.name), os.path.join(d, 'n%d' % seen))\n\
         print(seen)",
        dir = dir.to_str().unwrap()
    ));
    let seen: usize = seen.parse().unwrap();
    assert!(
        (1500..3000).contains(&seen),
        "the listing returned {seen} entries for 1500"
    );
    // nothing lost or doubled by the renames
    assert_eq!(fs::read_dir(&dir).unwrap().count(), 1500);
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
}

#[test]
fn files_and_directories_open_by_handle_after_the_kernel_forgot_them() {
    // xfstests generic/426, 467, 477: open_by_handle_at answered ESTALE
    // once the kernel no longer held the node; NFS re-export needs the
    // same. Inode numbers stay, so a handle names its node for good.
    let v = Volume::new("byhandle");
    let m = v.mount("a", &[]);
    fs::create_dir_all(m.p("d/e")).unwrap();
    fs::write(m.p("d/e/f"), b"kept by handle").unwrap();
    fs::write(m.p("gone"), b"x").unwrap();
    let script = format!(
        r#"
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
class Handle(ctypes.Structure):
    _fields_ = [("bytes", ctypes.c_uint), ("type", ctypes.c_int), ("data", ctypes.c_ubyte * 128)]
def handle(path):
    h = Handle(); h.bytes = 128; mount_id = ctypes.c_int()
    if libc.name_to_handle_at(-100, path.encode(), ctypes.byref(h), ctypes.byref(mount_id), 0) != 0:
        raise OSError(ctypes.get_errno(), "name_to_handle_at " + path)
    return h
def by_handle(h, flags):
    fd = libc.open_by_handle_at(root, ctypes.byref(h), flags)
    if fd < 0:
        return "errno %d" % ctypes.get_errno()
    return fd
def forget():
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("2")
m = {mnt:?}
root = os.open(m, os.O_RDONLY | os.O_DIRECTORY)
f, e, gone = handle(m + "/d/e/f"), handle(m + "/d/e"), handle(m + "/gone")
os.unlink(m + "/gone")
forget()
fd = by_handle(f, os.O_RDONLY)
print(os.read(fd, 100).decode() if isinstance(fd, int) else fd)
forget()
fd = by_handle(e, os.O_RDONLY | os.O_DIRECTORY)
print(sorted(os.listdir(fd)) if isinstance(fd, int) else fd)
if isinstance(fd, int):
    print(os.fstat(fd).st_ino == os.stat(m + "/d/e").st_ino)
forget()
print(by_handle(gone, os.O_RDONLY))
"#,
        mnt = m.p("").to_str().unwrap().trim_end_matches('/')
    );
    let out = py(&script);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        [
            "kept by handle",
            "['f']",
            "True",
            &format!("errno {}", libc::ESTALE)
        ],
        "{out}"
    );
}

#[test]
fn reads_move_atimes_as_the_atime_mode_says() {
    // xfstests generic/003: jfs kept no atime (mounts were always noatime);
    // --atime-mode relatime and strictatime (mount -o relatime,
    // strictatime) move it as Linux does, noatime stays the default
    let v = Volume::new("atimes");
    let rel = v.mount("rel", &["--atime-mode", "relatime"]);
    let strict = v.mount("strict", &["--atime-mode", "strictatime"]);
    let no = v.mount("no", &[]);
    fs::write(rel.p("f"), b"data").unwrap();
    fs::create_dir(rel.p("d")).unwrap();
    for name in ["f", "d"] {
        ok(Command::new("touch")
            .args(["-a", "-m", "-d", "2 days ago"])
            .arg(rel.p(name)));
    }
    let atime = |p: std::path::PathBuf| {
        let m = fs::metadata(p).unwrap();
        m.atime() as f64 + m.atime_nsec() as f64 / 1e9
    };
    let now = || {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs_f64()
    };
    let old = atime(rel.p("f"));
    assert!(now() - old > 86_400.0);
    let ctime = fs::metadata(rel.p("f")).unwrap().ctime_nsec();

    // noatime: a read moves nothing
    assert_eq!(fs::read(no.p("f")).unwrap(), b"data");
    assert_eq!(atime(no.p("f")), old);
    // relatime: a day-old atime moves to now, the ctime stays
    assert_eq!(fs::read(rel.p("f")).unwrap(), b"data");
    let moved = atime(rel.p("f"));
    assert!(
        (now() - moved).abs() < 60.0,
        "relatime left the atime {old} at {moved}"
    );
    assert_eq!(fs::metadata(rel.p("f")).unwrap().ctime_nsec(), ctime);
    // ... and stays at the next read: nothing changed since
    std::thread::sleep(Duration::from_millis(1100));
    fs::read(rel.p("f")).unwrap();
    assert_eq!(atime(rel.p("f")), moved);
    // strictatime: every read moves it (a second apart)
    fs::read(strict.p("f")).unwrap();
    assert!(atime(strict.p("f")) > moved, "strictatime left the atime");
    // a listing moves a directory's atime as a read moves a file's
    let dir_old = atime(rel.p("d"));
    assert_eq!(fs::read_dir(rel.p("d")).unwrap().count(), 0);
    assert!(
        atime(rel.p("d")) > dir_old + 86_000.0,
        "a listing left the directory's atime"
    );
    assert_eq!(atime(no.p("d")), atime(rel.p("d")));
    // what mount(8) shows
    let mounts = fs::read_to_string("/proc/mounts").unwrap();
    let options = |m: &jfs_e2e::Mount| {
        let path = m.path.to_str().unwrap().to_string();
        mounts
            .lines()
            .find(|l| l.split(' ').nth(1) == Some(path.as_str()))
            .unwrap()
            .split(' ')
            .nth(3)
            .unwrap()
            .to_string()
    };
    assert!(options(&no).contains("noatime"), "{}", options(&no));
    assert!(!options(&rel).contains("noatime"), "{}", options(&rel));
}
