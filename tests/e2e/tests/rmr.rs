//! `jfs rmr` removes a whole tree inside PostgreSQL, and the mount shows it at once.
use std::fs;
use std::process::Command;

use jfs_e2e::{eventually, jfs, ok, pattern, Volume};

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
