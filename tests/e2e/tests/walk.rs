//! A walk of a big directory (find, du, ls -l: a listing, then a stat of
//! each name) is answered by the kernel from what the listing gave: every
//! listing is a readdirplus, whose names and attributes the kernel keeps
//! for the cache times, and they stay exact when another mount changes one.
use std::fs;

use std::process::Command;

use jfs_e2e::{
    changes_elsewhere_are_seen, eventually, fails_with, fuse_requests, jfs, ok, procedure_calls,
    xattr_of, Volume,
};

const FILES: usize = 3000;

/// The value of xattr `name` of `path` (not followed if a symlink).
#[test]
fn the_stats_of_a_walk_are_answered_from_its_listing() {
    let v = Volume::new("walk");
    // the files, made behind the mount's back: its kernel knows none
    v.files_in_sql("big", FILES);
    let (m, addr) = v.mount_with_caches("a", "30", &[]);
    let other = v.mount("b", &[]);
    // find's order: the whole listing first, then a stat of each name
    let names: Vec<_> = fs::read_dir(m.p("big"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), FILES);
    let asked = || fuse_requests(&addr, "lookup") + fuse_requests(&addr, "getattr");
    let before = asked();
    for name in &names {
        let meta = fs::symlink_metadata(m.p("big").join(name)).unwrap();
        let i: u64 = name.to_str().unwrap()[1..].parse().unwrap();
        assert_eq!(meta.len(), i, "{name:?}");
    }
    let sent = asked() - before;
    assert!(
        sent < (FILES / 100) as f64,
        "{FILES} stats after the listing sent {sent} lookups and getattrs to the mount \
         (the listing: {} readdirplus, {} readdir requests)",
        fuse_requests(&addr, "readdirplus"),
        fuse_requests(&addr, "readdir")
    );

    // what the kernel keeps from the listing follows other mounts' changes
    changes_elsewhere_are_seen(&m, &other, "big");
}

#[test]
fn a_listing_does_not_give_back_what_changed_while_it_was_read() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let v = Volume::new("walk-changed");
    v.files_in_sql("big", FILES);
    let m = v.mount("a", &["--attr-cache", "30", "--entry-cache", "30"]);
    // one getdents: the mount keeps the rest of the page it read
    let mut listing = fs::read_dir(m.p("big")).unwrap();
    assert!(listing.next().is_some());
    // changed through this mount while the listing is half read
    fs::remove_file(m.p("big/f400")).unwrap();
    fs::set_permissions(m.p("big/f300"), fs::Permissions::from_mode(0o600)).unwrap();
    let rest = listing.count();
    assert!(rest >= FILES - 2, "the listing went on ({rest} more)");
    assert!(
        fs::symlink_metadata(m.p("big/f400")).is_err(),
        "the kernel was given back a name removed meanwhile"
    );
    assert_eq!(
        fs::symlink_metadata(m.p("big/f300")).unwrap().mode() & 0o7777,
        0o600,
        "the kernel was given back a mode changed meanwhile"
    );
}

#[test]
fn a_listing_gives_attributes_for_the_attribute_cache_time_only() {
    // (no change log followed: only the cache times bound what is stale)
    let v = Volume::new("walk-attr-time");
    let m = v.mount(
        "a",
        &[
            "--changes-poll",
            "0",
            "--attr-cache",
            "0",
            "--entry-cache",
            "30",
        ],
    );
    let other = v.mount("b", &[]);
    fs::create_dir(other.p("d")).unwrap();
    fs::write(other.p("d/f"), b"short").unwrap();
    assert_eq!(fs::read_dir(m.p("d")).unwrap().count(), 1);
    fs::write(other.p("d/f"), b"longer now").unwrap();
    assert_eq!(
        fs::metadata(m.p("d/f")).unwrap().len(),
        10,
        "--attr-cache 0: the length the listing gave was kept"
    );
}

/// `ls -l` asks each file for its `security.selinux` xattr: a listing says
/// which nodes have xattrs, and the mount answers the others without a
/// round trip, while another mount's setxattr is still seen.
#[test]
fn ls_l_asks_the_database_only_of_the_files_with_xattrs() {
    use rustix::io::Errno;
    let v = Volume::new("walk-xattrs");
    v.files_in_sql("big", FILES);
    let tagged = (100..=FILES).step_by(100).count();
    assert_eq!(
        v.sql(&format!(
            "SELECT count(*) FROM generate_series(100, {FILES}, 100) i, \
             LATERAL jfs.setxattr(jfs.resolve('/big/f' || i), 'user.tag', convert_to('t' || i, 'UTF8')) r \
             WHERE r = 0"
        )),
        tagged.to_string()
    );
    let (m, addr) = v.mount_with_caches("a", "30", &[]);
    let other = v.mount("b", &[]);
    let out = ok(Command::new("ls").arg("-l").arg(m.p("big")));
    let listed = String::from_utf8_lossy(&out.stdout).lines().count();
    assert_eq!(listed, FILES + 1, "ls -l printed {listed} lines");
    let asked = procedure_calls(&addr, "getxattr");
    assert!(
        asked >= tagged as f64 && asked <= (tagged + FILES / 100) as f64,
        "ls -l of {FILES} files ({tagged} with xattrs) sent {asked} getxattr calls to the database"
    );

    assert_eq!(xattr_of(&m.p("big/f100"), "user.tag"), Ok(b"t100".to_vec()));
    assert_eq!(xattr_of(&m.p("big/f150"), "user.tag"), Err(Errno::NODATA));
    // set here: seen here at once
    rustix::fs::lsetxattr(
        m.p("big/f151"),
        "user.here",
        b"1",
        rustix::fs::XattrFlags::empty(),
    )
    .unwrap();
    assert_eq!(xattr_of(&m.p("big/f151"), "user.here"), Ok(b"1".to_vec()));
    // set by another mount: seen once its change is read
    rustix::fs::lsetxattr(
        other.p("big/f150"),
        "user.tag",
        b"late",
        rustix::fs::XattrFlags::empty(),
    )
    .unwrap();
    assert!(
        eventually(5, || xattr_of(&m.p("big/f150"), "user.tag")
            == Ok(b"late".to_vec())),
        "another mount's setxattr is not seen"
    );
}

/// `--no-xattrs`: every xattr call fails with EOPNOTSUPP, which the kernel
/// answers itself after the first of each kind, so `ls -l` and writes send
/// none to the mount; a volume with ACLs on refuses it.
#[test]
fn with_no_xattrs_the_kernel_sends_no_xattr_requests() {
    use rustix::fs::{lremovexattr, lsetxattr, XattrFlags};
    use rustix::io::Errno;
    let v = Volume::new("walk-no-xattrs");
    v.files_in_sql("big", FILES);
    let (m, addr) = v.mount_with_caches("a", "30", &["--no-xattrs"]);
    let out = ok(Command::new("ls").arg("-l").arg(m.p("big")));
    let listed = String::from_utf8_lossy(&out.stdout).lines().count();
    assert_eq!(listed, FILES + 1, "ls -l printed {listed} lines");
    let getxattrs = || fuse_requests(&addr, "getxattr");
    assert!(
        getxattrs() <= 1.0,
        "ls -l of {FILES} files sent {} getxattr requests to the mount",
        getxattrs()
    );
    // the kernel's check of security.capability before each write
    let mut file = fs::OpenOptions::new()
        .append(true)
        .open(m.p("big/f1"))
        .unwrap();
    for _ in 0..20 {
        std::io::Write::write_all(&mut file, b"x").unwrap();
    }
    drop(file);
    assert!(getxattrs() <= 1.0, "20 writes sent getxattr requests");
    assert_eq!(fs::read(m.p("big/f1")).unwrap().len(), 1 + 20);

    let file = m.p("big/f2");
    assert_eq!(xattr_of(&file, "user.a"), Err(Errno::NOTSUP));
    assert_eq!(
        lsetxattr(&file, "user.a", b"1", XattrFlags::empty()),
        Err(Errno::NOTSUP)
    );
    assert_eq!(lremovexattr(&file, "user.a"), Err(Errno::NOTSUP));
    assert_eq!(
        rustix::fs::llistxattr(&file, &mut [0u8; 64]),
        Err(Errno::NOTSUP)
    );
    // again: the kernel answers, the mount was asked once of each kind
    assert_eq!(
        lsetxattr(&file, "user.b", b"1", XattrFlags::empty()),
        Err(Errno::NOTSUP)
    );
    for op in ["getxattr", "setxattr", "listxattr", "removexattr"] {
        let sent = fuse_requests(&addr, op);
        assert!(sent <= 1.0, "{sent} {op} requests reached the mount");
    }
    assert_eq!(v.sql("SELECT count(*) FROM jfs.xattr"), "0");

    // ACLs are xattrs the kernel reads to check permissions
    let acl = Volume::with_options("walk-no-xattrs-acl", &["--enable-acl"]);
    let mnt = acl.dir.path().join("mnt");
    fs::create_dir_all(&mnt).unwrap();
    fails_with(
        jfs()
            .args(["mount", &acl.url])
            .arg(&mnt)
            .args(["-d", "--no-xattrs"]),
        "has POSIX ACLs on",
    );
}

/// The kernel asks for a file's capabilities before a write, to strip them:
/// a mount that does not follow the change log asks the database for
/// them, whatever a listing said, so that a write never keeps another
/// mount's setcap.
#[test]
fn capabilities_are_asked_for_when_the_change_log_is_not_followed() {
    let v = Volume::new("walk-caps");
    v.files_in_sql("big", 10);
    let a = v.mount(
        "a",
        &[
            "--changes-poll",
            "0",
            "--attr-cache",
            "30",
            "--entry-cache",
            "30",
        ],
    );
    let b = v.mount("b", &[]);
    let listed = fs::read_dir(a.p("big")).unwrap().count();
    assert_eq!(listed, 10);
    assert_eq!(
        xattr_of(&a.p("big/f1"), "security.capability"),
        Err(rustix::io::Errno::NODATA)
    );
    // version 2 file capabilities: cap_net_bind_service permitted
    let given: [u8; 20] = [0, 0, 0, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    rustix::fs::lsetxattr(
        b.p("big/f1"),
        "security.capability",
        &given,
        rustix::fs::XattrFlags::empty(),
    )
    .unwrap();
    assert_eq!(
        xattr_of(&a.p("big/f1"), "security.capability"),
        Ok(given.to_vec()),
        "a mount that does not read the change log answered from its listing"
    );
}

/// rewinddir after the first entries of a listing (more than one kernel
/// request, fewer than one page of the mount's) lists every entry again.
#[test]
fn a_rewound_listing_gives_every_entry_again() {
    let v = Volume::new("walk-rewind");
    v.files_in_sql("big", 300);
    let m = v.mount("a", &[]);
    let fd = rustix::fs::open(
        m.p("big"),
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY,
        rustix::fs::Mode::empty(),
    )
    .unwrap();
    let mut dir = rustix::fs::Dir::new(fd).unwrap();
    let read_names = |dir: &mut rustix::fs::Dir, count: usize| -> Vec<String> {
        let mut names = Vec::new();
        while names.len() < count {
            match dir.read() {
                Some(entry) => {
                    names.push(entry.unwrap().file_name().to_string_lossy().into_owned())
                }
                None => break,
            }
        }
        names
    };
    // more than one getdents (a kernel request of a page holds fewer)
    let first = read_names(&mut dir, 120);
    assert_eq!(first.len(), 120);
    dir.rewind();
    let mut again = read_names(&mut dir, usize::MAX);
    again.sort();
    again.dedup();
    assert_eq!(
        again.len(),
        302,
        "after rewinddir the listing gave {} distinct entries of 302",
        again.len()
    );
}

/// seekdir back to a position telldir gave, inside what the last kernel
/// request brought or right after "." and "..", lists every entry after it
/// once.
#[test]
fn a_listing_sought_back_to_a_told_position_misses_nothing() {
    let v = Volume::new("walk-seek");
    v.files_in_sql("big", 300);
    let m = v.mount("a", &[]);
    let open = || {
        let fd = rustix::fs::open(
            m.p("big"),
            rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY,
            rustix::fs::Mode::empty(),
        )
        .unwrap();
        rustix::fs::Dir::new(fd).unwrap()
    };
    // (name, the position after it) of the next `count` entries
    let read = |dir: &mut rustix::fs::Dir, count: usize| -> Vec<(String, i64)> {
        let mut entries = Vec::new();
        while entries.len() < count {
            match dir.read() {
                Some(entry) => {
                    let entry = entry.unwrap();
                    let name = entry.file_name().to_string_lossy().into_owned();
                    entries.push((name, entry.offset()));
                }
                None => break,
            }
        }
        entries
    };
    for told in [2, 28, 100, 120, 125, 129] {
        let mut dir = open();
        let first = read(&mut dir, 130);
        assert_eq!(first.len(), 130);
        dir.seek(first[told - 1].1).unwrap();
        let rest = read(&mut dir, usize::MAX);
        let mut names: Vec<&str> = first[..told]
            .iter()
            .chain(rest.iter())
            .map(|(name, _)| name.as_str())
            .collect();
        let listed = names.len();
        names.sort();
        names.dedup();
        assert!(
            listed == 302 && names.len() == 302,
            "seeking back to after entry {told}: {listed} entries listed, {} distinct, of 302",
            names.len()
        );
    }
}
