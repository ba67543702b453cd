//! `jfs clone` copies a tree inside PostgreSQL (data shared, copy-on-write),
//! `jfs rmr` removes a big tree, `jfs gc` finds and removes unreferenced objects.
use std::fs;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;
use std::time::{Duration, SystemTime};

use jfs_e2e::{eventually, jfs, ok, pattern, Volume};

fn tree_files(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            let meta = fs::symlink_metadata(&p).unwrap();
            if meta.is_dir() {
                dirs.push(p);
                out.push((rel, b"<dir>".to_vec()));
            } else if meta.file_type().is_symlink() {
                out.push((
                    rel,
                    fs::read_link(&p)
                        .unwrap()
                        .into_os_string()
                        .into_encoded_bytes(),
                ));
            } else {
                out.push((rel, fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn clone_shares_data_and_writes_to_the_clone_leave_the_source_alone() {
    let v = Volume::new("clonetree");
    let a = v.mount("a", &["--entry-cache", "60", "--attr-cache", "60"]);
    let b = v.mount("b", &[]);
    fs::create_dir_all(a.p("src/sub/deep")).unwrap();
    fs::write(a.p("src/big"), pattern(1, 9 << 20)).unwrap();
    fs::write(a.p("src/sub/small"), b"small file").unwrap();
    fs::write(a.p("src/sub/deep/mid"), pattern(2, 300_000)).unwrap();
    let sparse = fs::File::create(a.p("src/sparse")).unwrap();
    sparse.write_all_at(b"tail", 70 << 20).unwrap();
    drop(sparse);
    fs::hard_link(a.p("src/big"), a.p("src/sub/big-link")).unwrap();
    std::os::unix::fs::symlink("sub/small", a.p("src/link")).unwrap();
    let before = tree_files(&a.p("src"));
    let objects = v.objects().len();
    // the kernel caches that "copy" does not exist; the clone must undo that
    assert!(!a.p("copy").exists());

    let out = ok(jfs().arg("clone").arg(a.p("src")).arg(a.p("copy")));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("8 nodes cloned"), "{said}");
    assert!(
        a.p("copy").exists(),
        "the kernel still says copy is missing"
    );
    assert_eq!(tree_files(&a.p("copy")), before);
    assert_eq!(
        tree_files(&b.p("copy")),
        before,
        "the other mount sees the same clone"
    );
    assert_eq!(v.objects().len(), objects, "a clone stores no new objects");
    let big = fs::metadata(a.p("copy/big")).unwrap();
    assert_eq!(
        big.nlink(),
        2,
        "the hard link inside the tree stays a hard link"
    );
    assert_eq!(
        big.ino(),
        fs::metadata(a.p("copy/sub/big-link")).unwrap().ino()
    );
    assert_ne!(big.ino(), fs::metadata(a.p("src/big")).unwrap().ino());

    // write to the clone in the middle, append, truncate, remove: the source stays
    let f = fs::OpenOptions::new()
        .write(true)
        .open(b.p("copy/big"))
        .unwrap();
    f.write_all_at(b"CHANGED", 4 << 20).unwrap();
    drop(f);
    fs::OpenOptions::new()
        .append(true)
        .open(b.p("copy/sub/small"))
        .and_then(|mut f| std::io::Write::write_all(&mut f, b" and more"))
        .unwrap();
    fs::OpenOptions::new()
        .write(true)
        .open(b.p("copy/sub/deep/mid"))
        .unwrap()
        .set_len(1000)
        .unwrap();
    fs::remove_file(b.p("copy/sparse")).unwrap();
    assert_eq!(tree_files(&a.p("src")), before, "the source changed");
    assert_eq!(tree_files(&b.p("src")), before, "the source changed");
    let mut expect = pattern(1, 9 << 20);
    expect[4 << 20..(4 << 20) + 7].copy_from_slice(b"CHANGED");
    assert_eq!(fs::read(a.p("copy/sub/big-link")).unwrap(), expect);
    assert_eq!(
        fs::read(a.p("copy/sub/small")).unwrap(),
        b"small file and more"
    );

    // the source removed: the clone keeps the shared data, and the reverse
    ok(jfs().arg("rmr").arg(a.p("src")));
    assert_eq!(
        fs::read(b.p("copy/sub/deep/mid")).unwrap(),
        pattern(2, 1000)
    );
    assert_eq!(fs::read(b.p("copy/sub/big-link")).unwrap(), expect);
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
    ok(jfs().arg("rmr").arg(a.p("copy")));
    assert!(
        eventually(20, || v.objects().is_empty()),
        "{:?}",
        v.objects()
    );
    assert_eq!(v.sql("SELECT count(*) FROM jfs.slice_ref"), "0");

    // errors: an existing destination, a missing source, another file system
    fs::write(a.p("x"), b"x").unwrap();
    fs::write(a.p("y"), b"y").unwrap();
    let out = jfs()
        .arg("clone")
        .arg(a.p("x"))
        .arg(a.p("y"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("File exists"));
    let out = jfs()
        .arg("clone")
        .arg(a.p("nope"))
        .arg(a.p("z"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let out = jfs()
        .arg("clone")
        .arg(a.p("x"))
        .arg("/tmp/jfs-clone-elsewhere")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("same jfs mount"));
    assert_eq!(fs::read(a.p("y")).unwrap(), b"y");
}

#[test]
fn rmr_removes_a_20000_file_tree() {
    let v = Volume::new("rmrbig");
    let m = v.mount("a", &["--entry-cache", "60", "--attr-cache", "60"]);
    fs::create_dir(m.p("big")).unwrap();
    fs::write(m.p("big/data"), pattern(3, 100_000)).unwrap();
    // 20 directories of 1,000 files each, made by the procedures (the mount
    // sees them once it has read the change log: it listed "big" whole
    // when it made it)
    v.sql(
        "DO $$ DECLARE big bigint := jfs.resolve('/big'); d bigint; BEGIN \
           FOR i IN 1..20 LOOP \
             SELECT inode INTO d FROM jfs.mknod(big, convert_to('d' || i, 'UTF8'), 2, 493, 0, 0); \
             PERFORM jfs.mknod(d, convert_to('f' || j, 'UTF8'), 1, 420, 0, 0) FROM generate_series(1, 1000) j; \
           END LOOP; END $$",
    );
    assert!(
        eventually(5, || m.p("big/d20").exists()),
        "the procedures' directories never showed"
    );
    assert_eq!(fs::read_dir(m.p("big/d7")).unwrap().count(), 1000);
    assert_eq!(fs::read(m.p("big/data")).unwrap(), pattern(3, 100_000));

    let out = ok(jfs().arg("rmr").arg(m.p("big")));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("20022 entries removed"), "{said}");
    assert!(!m.p("big").exists());
    assert_eq!(v.sql("SELECT count(*) FROM jfs.node"), "1");
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
    assert!(
        eventually(20, || v.objects().is_empty()),
        "{:?}",
        v.objects()
    );
}

/// Puts a file into the bucket as a block object whose slice nobody knows,
/// last modified `age` ago.
fn plant_object(v: &Volume, name: &str, id: u64, age: Duration) -> std::path::PathBuf {
    let path = v.bucket().join(format!(
        "{name}/chunks/{}/{}/{id}_0_4096",
        id / 1_000_000,
        id / 1_000
    ));
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(&path, pattern(id, 4096)).unwrap();
    let f = fs::File::options().write(true).open(&path).unwrap();
    f.set_modified(SystemTime::now() - age).unwrap();
    path
}

/// The number after `label` at the start of a line of gc's report.
fn count(report: &str, label: &str) -> u64 {
    report
        .lines()
        .find_map(|l| l.strip_prefix(label))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no {label:?} line in {report}"))
}

#[test]
fn gc_lists_and_deletes_unreferenced_and_freed_objects() {
    let v = Volume::new("gcvol");
    let m = v.mount("a", &[]);
    fs::write(m.p("keep"), pattern(4, 5 << 20)).unwrap();
    fs::write(m.p("gone"), pattern(5, 1 << 20)).unwrap();
    m.unmount();
    let all = v.objects();
    assert_eq!(all.len(), 3, "5 MiB in 4 MiB blocks and 1 MiB: {all:?}");
    // freed without a mount to drain the queue: its objects are pending
    assert_eq!(v.sql("SELECT jfs.rmr('/gone')"), "1");
    let old = plant_object(&v, "gcvol", 900_001, Duration::from_secs(7200));
    let young = plant_object(&v, "gcvol", 900_002, Duration::ZERO);
    // what a mount killed while writing a block leaves behind
    let planted = plant_object(&v, "gcvol", 900_003, Duration::from_secs(7200));
    let leftover = planted.with_extension("tmp.4242.7");
    fs::rename(&planted, &leftover).unwrap();
    fs::File::options()
        .write(true)
        .open(&leftover)
        .unwrap()
        .set_modified(SystemTime::now() - Duration::from_secs(7200))
        .unwrap();

    let out = ok(jfs().args(["gc", &v.url]));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(count(&text, "referenced"), 2, "{text}");
    assert_eq!(count(&text, "unreferenced"), 2, "{text}");
    assert_eq!(count(&text, "pending delete"), 1, "{text}");
    assert_eq!(count(&text, "too young"), 1, "{text}");
    assert!(
        text.contains(&format!(
            "unreferenced {}",
            old.strip_prefix(v.bucket()).unwrap().display()
        )),
        "{text}"
    );
    assert_eq!(
        v.objects().len(),
        3 + 3,
        "gc without --delete deleted something"
    );

    let out = ok(jfs().args(["gc", &v.url, "--delete"]));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("deleted 2 unreferenced objects"), "{text}");
    assert!(!old.exists());
    assert!(!leftover.exists());
    assert!(
        young.exists(),
        "a young object may be about to be committed"
    );
    assert_eq!(v.sql("SELECT count(*) FROM jfs.delslice"), "0");
    ok(jfs().args(["gc", &v.url, "--delete", "--min-age", "0"]));
    let left = v.objects();
    assert_eq!(left.len(), 2, "only the referenced blocks remain: {left:?}");
    assert!(left.iter().all(|o| all.contains(o)));

    let m = v.mount("b", &[]);
    assert_eq!(fs::read(m.p("keep")).unwrap(), pattern(4, 5 << 20));
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
}
