//! The trash through a mount: rm moves a file to /.trash (the volume still
//! counts it, its directory quota does not), `jfs restore` brings it back
//! byte for byte, and a mount purges expired hours in the background.
use std::fs;

use jfs_e2e::{eventually, jfs, ok, pattern, Volume};

#[test]
fn deleted_files_go_to_the_trash_and_come_back_byte_for_byte() {
    let v = Volume::with_options("trashvol", &["--trash-days", "1"]);
    let m = v.mount("a", &[]);
    fs::create_dir(m.p("docs")).unwrap();
    let data = pattern(9, 6 << 20);
    fs::write(m.p("docs/report"), &data).unwrap();
    ok(jfs().args([
        "quota",
        "set",
        &v.admin_url,
        "--path",
        "/docs",
        "--inodes",
        "100",
    ]));
    let used: u64 = v
        .reader_sql("SELECT used_space FROM jfs.usage")
        .parse()
        .unwrap();

    fs::remove_file(m.p("docs/report")).unwrap();
    assert!(!m.p("docs/report").exists());
    assert_eq!(v.reader_sql("SELECT name FROM jfs.trash"), "report");
    // the file stays charged to the volume; /.trash and its hour add a unit each
    assert_eq!(
        v.reader_sql("SELECT used_space FROM jfs.usage"),
        (used + 2 * 4096).to_string(),
        "the trash stays charged to the volume"
    );
    assert_eq!(
        v.reader_sql("SELECT used_inodes FROM jfs.quotas WHERE path = '/docs'"),
        "0"
    );
    // the trash is a directory people can look into
    let hours: Vec<_> = fs::read_dir(m.p(".trash")).unwrap().collect();
    assert_eq!(hours.len(), 1);
    // the objects are kept (nothing was freed)
    std::thread::sleep(std::time::Duration::from_secs(2));
    assert_eq!(v.objects().len(), 2);

    let out = ok(jfs().args(["restore", &v.url]));
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 restored"));
    assert_eq!(fs::read(m.p("docs/report")).unwrap(), data);
    assert_eq!(v.reader_sql("SELECT count(*) FROM jfs.trash"), "0");

    // an expired hour is purged by the mount, and its objects deleted
    fs::remove_file(m.p("docs/report")).unwrap();
    v.sql("UPDATE jfs.edge SET name = '2000-01-01-00' WHERE parent = 9223372032828243968");
    assert!(
        eventually(20, || v.reader_sql("SELECT count(*) FROM jfs.trash") == "0"
            && v.objects().is_empty()),
        "trash {} objects {:?}",
        v.reader_sql("SELECT count(*) FROM jfs.trash"),
        v.objects()
    );
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
}
