//! `jfs rmr` removes a whole tree inside PostgreSQL, and the mount shows it
//! at once; `rm -rf` through a mount costs one call per entry.
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;

use jfs_e2e::{eventually, jfs, ok, pattern, procedure_calls, Volume};

#[test]
fn rm_rf_costs_one_call_per_entry_and_the_directory_shows_its_times() {
    let v = Volume::new("rmrf");
    // (as mounts are by default: kernel and mount caches on)
    let (m, addr) = v.mount_with_caches("a", "1", &[]);
    for d in ["keep", "tree/sub"] {
        fs::create_dir_all(m.p(d)).unwrap();
        for i in 0..60 {
            fs::write(m.p(&format!("{d}/f{i}")), b"x").unwrap();
        }
    }
    fs::write(m.p("outside"), b"o").unwrap();
    fs::hard_link(m.p("outside"), m.p("keep/link")).unwrap();
    let calls = |name: &str| procedure_calls(&addr, name);
    let (unlinks, getattrs) = (calls("unlink"), calls("getattr"));
    // a directory emptied: after each unlink the kernel asks for the
    // directory's attributes again, which the mount knows
    ok(Command::new("sh")
        .arg("-c")
        .arg("rm -f keep/*")
        .current_dir(m.p("")));
    let (unlinks, getattrs) = (calls("unlink") - unlinks, calls("getattr") - getattrs);
    assert_eq!(unlinks, 61.0);
    assert!(
        getattrs <= 2.0,
        "the directory's attributes after an unlink cost no call: {getattrs} getattr"
    );
    // ...and they are what the database holds (times in ns)
    let shown = fs::metadata(m.p("keep")).unwrap();
    let held = v.sql(&format!(
        "SELECT mtime || ' ' || ctime || ' ' || nlink FROM jfs.node WHERE inode = {}",
        shown.ino()
    ));
    let ns = |s: i64, n: i64| s * 1_000_000_000 + n;
    assert_eq!(
        format!(
            "{} {} {}",
            ns(shown.mtime(), shown.mtime_nsec()),
            ns(shown.ctime(), shown.ctime_nsec()),
            shown.nlink()
        ),
        held.trim()
    );
    // the hard-linked node lost a name, not its data
    assert_eq!(fs::read(m.p("outside")).unwrap(), b"o");
    assert_eq!(fs::metadata(m.p("outside")).unwrap().nlink(), 1);
    let (unlinks, getattrs) = (calls("unlink"), calls("getattr"));
    ok(Command::new("rm").arg("-rf").arg(m.p("tree")));
    let (unlinks, getattrs) = (calls("unlink") - unlinks, calls("getattr") - getattrs);
    assert_eq!(unlinks, 60.0);
    assert!(getattrs <= 4.0, "rm -rf: {getattrs} getattr for 62 entries");
    assert!(!m.p("tree").exists());
    assert!(!Path::new(&v.mount("b", &[]).p("tree")).exists());
}

#[test]
fn rmr_removes_a_tree_server_side_and_the_kernel_forgets_it() {
    let v = Volume::new("rmrtree");
    // long kernel caches: the entry must be invalidated, not time out
    let m = v.mount("a", &["--entry-cache", "60", "--attr-cache", "60"]);
    for d in 0..5 {
        fs::create_dir_all(m.p(&format!("tree/d{d}/deeper"))).unwrap();
        for i in 0..500 {
            fs::write(m.p(&format!("tree/d{d}/f{i}")), b"").unwrap();
        }
    }
    fs::write(m.p("tree/d0/deeper/data"), pattern(2, 5 << 20)).unwrap();
    fs::write(m.p("outside"), b"outside").unwrap();
    fs::hard_link(m.p("outside"), m.p("tree/d1/link")).unwrap();
    assert!(m.p("tree/d4/f499").exists());
    let blocks_with_data = v.objects().len();
    assert_eq!(blocks_with_data, 3);

    let out = ok(jfs().arg("rmr").arg(m.p("tree")));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("2513 entries removed"), "{said}");
    assert!(
        !m.p("tree").exists(),
        "the kernel still shows the removed tree"
    );
    assert_eq!(fs::read(m.p("outside")).unwrap(), b"outside");
    assert_eq!(v.sql("SELECT count(*) FROM jfs.node"), "2");
    assert!(
        eventually(20, || v.objects().len() == 1),
        "{:?}",
        v.objects()
    );
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");

    // a missing path, and rm -rf through the mount still works
    let out = jfs().arg("rmr").arg(m.p("tree")).output().unwrap();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains(&format!("{} does not exist", m.p("tree").display())),
        "the message names the missing path: {said}"
    );
    fs::create_dir_all(m.p("again/x")).unwrap();
    fs::write(m.p("again/x/f"), b"f").unwrap();
    ok(Command::new("rm").arg("-rf").arg(m.p("again")));
    assert!(!m.p("again").exists());
}
