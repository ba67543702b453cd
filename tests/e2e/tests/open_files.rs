//! Files open on one mount while another removes their last name (unlink,
//! rename over, jfs rmr): they stay readable and writable there until
//! closed, as on a local file system. The database keeps such a file a
//! moment (jfs.unlinked, 10 s) while other mounts are live, the mount that
//! has it open holds it once it reads the removal from the change log
//! (jfs.sustain), and its last close frees it.
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::time::Duration;

use jfs_e2e::{eventually, jfs, ok, pattern, Volume};

const CACHED: [&str; 4] = ["--attr-cache", "30", "--entry-cache", "30"];

fn read_all(f: &mut File) -> Vec<u8> {
    let mut data = Vec::new();
    f.seek(SeekFrom::Start(0)).unwrap();
    f.read_to_end(&mut data).unwrap();
    data
}

#[test]
fn files_open_on_one_mount_outlive_their_removal_on_the_other() {
    let v = Volume::new("open-across");
    let a = v.mount("a", &CACHED);
    let b = v.mount("b", &CACHED);
    fs::write(a.p("unlinked"), pattern(1, 5 << 20)).unwrap();
    fs::write(a.p("replaced"), pattern(2, 3 << 20)).unwrap();
    fs::write(a.p("newer"), b"newer").unwrap();
    fs::create_dir_all(a.p("tree/sub")).unwrap();
    fs::write(a.p("tree/sub/deep"), pattern(3, 2 << 20)).unwrap();
    assert!(eventually(5, || b.p("tree/sub/deep").exists()));

    // B opens them without reading: its reads come after the removals
    let mut unlinked = File::open(b.p("unlinked")).unwrap();
    let mut replaced = OpenOptions::new()
        .read(true)
        .write(true)
        .open(b.p("replaced"))
        .unwrap();
    let mut deep = File::open(b.p("tree/sub/deep")).unwrap();

    fs::remove_file(a.p("unlinked")).unwrap();
    fs::rename(a.p("newer"), a.p("replaced")).unwrap();
    ok(jfs().arg("rmr").arg(a.p("tree")));
    assert_eq!(
        v.sql("SELECT count(*) FROM jfs.unlinked"),
        "3",
        "kept for B"
    );
    // past the grace, with both mounts freeing what nobody holds each second
    std::thread::sleep(Duration::from_secs(12));
    assert_eq!(v.sql("SELECT jfs.free_unlinked(10000, '1 second')"), "0");
    assert_eq!(
        v.sql("SELECT count(*) FROM jfs.sustained"),
        "3",
        "held by B"
    );

    assert_eq!(read_all(&mut unlinked), pattern(1, 5 << 20));
    assert_eq!(read_all(&mut deep), pattern(3, 2 << 20));
    assert_eq!(read_all(&mut replaced), pattern(2, 3 << 20));
    replaced.seek(SeekFrom::Start(0)).unwrap();
    replaced.write_all(b"still mine").unwrap();
    replaced.sync_all().unwrap();
    assert_eq!(&read_all(&mut replaced)[..10], b"still mine");
    assert_eq!(fs::read(a.p("replaced")).unwrap(), b"newer");
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");

    // B's last close frees them, data and all
    drop((unlinked, replaced, deep));
    assert!(
        eventually(10, || v
            .sql("SELECT count(*) FROM jfs.node WHERE nlink = 0")
            == "0"),
        "freed after B closed them"
    );
    assert_eq!(v.sql("SELECT count(*) FROM jfs.sustained"), "0");
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
}

#[test]
fn a_removed_file_nobody_holds_is_freed_after_the_grace_and_at_once_when_alone() {
    let v = Volume::new("open-grace");
    let a = v.mount("a", &[]);
    fs::write(a.p("alone"), pattern(4, 1 << 20)).unwrap();
    fs::remove_file(a.p("alone")).unwrap();
    assert_eq!(
        v.sql("SELECT count(*) FROM jfs.node WHERE nlink = 0"),
        "0",
        "one mount: freed at once"
    );

    let b = v.mount("b", &[]);
    fs::write(a.p("shared"), pattern(5, 1 << 20)).unwrap();
    fs::remove_file(a.p("shared")).unwrap();
    assert_eq!(
        v.sql("SELECT count(*) FROM jfs.unlinked"),
        "1",
        "another mount is live"
    );
    assert!(
        eventually(20, || v
            .sql("SELECT count(*) FROM jfs.node WHERE nlink = 0")
            == "0"),
        "freed by the mounts' background after the grace"
    );
    assert_eq!(v.sql("SELECT count(*) FROM jfs.unlinked"), "0");
    assert!(
        eventually(20, || v.objects().is_empty()),
        "{:?}",
        v.objects()
    );
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
    drop(b);
}

/// fstat of a directory open on a mount once it is gone, removed (rmdir)
/// or replaced by a rename, here or on another mount: its attributes with
/// no link, as Linux answers (xfstests generic/035 got ENOENT).
#[test]
fn an_open_directory_removed_or_replaced_still_answers_fstat_with_no_link() {
    use std::os::unix::fs::MetadataExt;
    let v = Volume::new("open-dirs");
    let a = v.mount("a", &[]);
    let b = v.mount("b", &[]);
    fs::create_dir(a.p("removed")).unwrap();
    fs::create_dir(a.p("replaced")).unwrap();
    fs::create_dir(a.p("newer")).unwrap();
    fs::create_dir(a.p("gone-elsewhere")).unwrap();
    let removed = File::open(a.p("removed")).unwrap();
    let replaced = File::open(a.p("replaced")).unwrap();
    let elsewhere = File::open(a.p("gone-elsewhere")).unwrap();
    let ino = removed.metadata().unwrap().ino();
    fs::remove_dir(a.p("removed")).unwrap();
    fs::rename(a.p("newer"), a.p("replaced")).unwrap();
    fs::remove_dir(b.p("gone-elsewhere")).unwrap();
    for (what, f) in [("removed", &removed), ("replaced", &replaced)] {
        let st = f
            .metadata()
            .unwrap_or_else(|e| panic!("fstat of {what}: {e}"));
        assert!(st.is_dir(), "{what}");
        assert_eq!(st.nlink(), 0, "{what}");
    }
    assert_eq!(removed.metadata().unwrap().ino(), ino);
    assert!(
        eventually(10, || elsewhere.metadata().is_ok_and(|st| st.nlink() == 0)),
        "fstat of a directory removed on another mount: {:?}",
        elsewhere.metadata()
    );
    assert!(fs::metadata(a.p("removed")).is_err());
}
