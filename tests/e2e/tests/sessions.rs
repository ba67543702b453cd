//! A crashed mount's session is cleaned up by another mount: the files it
//! held open after their last unlink are released and their objects deleted.
use std::fs::{self, File};
use std::io::Read;

use jfs_e2e::{eventually, pattern, Volume};

#[test]
fn a_dead_session_is_cleaned_by_another_mount() {
    let v = Volume::new("deadsession");
    let a = v.mount("a", &["--heartbeat", "1"]);
    fs::write(a.p("held"), pattern(8, 5 << 20)).unwrap();
    fs::write(a.p("kept"), b"kept").unwrap();
    let objects_with_held = v.objects().len();
    assert_eq!(objects_with_held, 3);
    // open, unlink: readable while open, its session keeps it
    let mut f = File::open(a.p("held")).unwrap();
    fs::remove_file(a.p("held")).unwrap();
    let mut data = Vec::new();
    f.read_to_end(&mut data).unwrap();
    assert!(data == pattern(8, 5 << 20));
    assert_eq!(v.sql("SELECT count(*) FROM jfs.sustained"), "1");
    // the mount dies without closing anything
    a.crash();
    drop(f);
    assert_eq!(v.sql("SELECT count(*) FROM jfs.sustained"), "1");
    // another mount notices the silence and cleans up
    let b = v.mount("b", &["--heartbeat", "1", "--session-timeout", "3"]);
    assert!(
        eventually(30, || v.sql("SELECT count(*) FROM jfs.session") == "1"),
        "the dead session is still there"
    );
    assert_eq!(v.sql("SELECT count(*) FROM jfs.sustained"), "0");
    assert!(
        eventually(20, || v.objects().len() == 1),
        "objects left: {:?}",
        v.objects()
    );
    assert_eq!(fs::read(b.p("kept")).unwrap(), b"kept");
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
}
