//! `jfs info` asks the mount that serves a path, through its control file.
use std::fs;
use std::os::unix::fs::MetadataExt;

use jfs_e2e::{jfs, ok, pattern, Volume};

#[test]
fn info_shows_inode_chunks_slices_and_objects() {
    let v = Volume::new("info");
    let m = v.mount("a", &[]);
    fs::write(m.p("f"), pattern(1, 5 << 20)).unwrap();
    let out = ok(jfs().arg("info").arg(m.p("f")));
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let ino = fs::metadata(m.p("f")).unwrap().ino();
    assert!(text.contains(&format!("inode: {ino}\n")), "{text}");
    assert!(text.contains("length: 5242880\n"), "{text}");
    assert!(text.contains("chunks: 1\n"), "{text}");
    assert!(text.contains("objects: 2\n"), "{text}");
    let keys: Vec<&str> = text
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("object "))
        .collect();
    assert_eq!(keys.len(), 2);
    for key in keys {
        assert!(key.starts_with("info/chunks/"), "{key}");
        assert!(v.bucket().join(key).exists(), "{key} is not in the bucket");
    }
    let out = ok(jfs().arg("info").arg(&m.path));
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        text.contains("inode: 1\n") && text.contains("type: Dir"),
        "{text}"
    );
    // the control file is not listed, and paths outside jfs are refused
    assert!(fs::read_dir(&m.path)
        .unwrap()
        .all(|e| e.unwrap().file_name() != ".jfs.control"));
    let taken = fs::write(m.p(".jfs.control.x"), b"fine").is_ok()
        && fs::create_dir(m.p(".jfs.control")).is_err();
    assert!(taken, "the control file's name must stay reserved");
    let out = jfs().args(["info", "/tmp"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not inside a jfs mount"));
}
