//! What one mount writes, a remount and a second mount (another process) read back.
use std::fs;

use jfs_e2e::{pattern, Volume};

#[test]
fn everything_is_still_there_after_remount() {
    let v = Volume::new("remount");
    {
        let m = v.mount("a", &[]);
        fs::create_dir_all(m.p("x/y")).unwrap();
        fs::write(m.p("x/y/data"), pattern(9, 5 << 20)).unwrap();
        fs::write(m.p("small"), b"small").unwrap();
        std::os::unix::fs::symlink("x/y/data", m.p("link")).unwrap();
        m.unmount();
    }
    let m = v.mount("b", &[]);
    assert!(fs::read(m.p("x/y/data")).unwrap() == pattern(9, 5 << 20));
    assert_eq!(fs::read(m.p("small")).unwrap(), b"small");
    assert_eq!(
        fs::read_link(m.p("link")).unwrap().to_str(),
        Some("x/y/data")
    );
}

#[test]
fn a_file_closed_on_one_mount_reads_correctly_on_another() {
    let v = Volume::new("twomounts");
    let a = v.mount("a", &[]);
    let b = v.mount("b", &[]);
    fs::write(a.p("shared"), pattern(3, 3 << 20)).unwrap();
    assert!(fs::read(b.p("shared")).unwrap() == pattern(3, 3 << 20));
    // and the other way, overwriting part of it
    let f = fs::OpenOptions::new()
        .write(true)
        .open(b.p("shared"))
        .unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, b"from b", 100).unwrap();
    drop(f);
    let got = fs::read(a.p("shared")).unwrap();
    assert_eq!(&got[100..106], b"from b");
    assert_eq!(got.len(), 3 << 20);
    assert_eq!(v.sql("SELECT count(*) FROM jfs.session"), "2");
}
