//! Storage tiers against the S3-compatible test server: new blocks are PUT
//! with their tier's class, `jfs tier set -r` moves existing objects
//! (checked with HeadObject), and an archived object is refused on read
//! until `jfs tier restore`, then reads back byte for byte.
use std::fs;

use jfs_e2e::{jfs, ok, pattern, S3Server, Volume};

fn classes_of(s3: &S3Server, bucket: &str, volume: &str, dir_objects: usize) -> Vec<String> {
    let mut c: Vec<String> = s3
        .classes(bucket)
        .into_iter()
        .filter(|(k, _)| k.starts_with(&format!("{volume}/chunks/")))
        .map(|(_, c)| c)
        .collect();
    c.sort();
    assert_eq!(c.len(), dir_objects, "{c:?}");
    c
}

#[test]
fn tiers_choose_the_storage_class_and_archives_need_a_restore() {
    let s3 = S3Server::start();
    let v = Volume::s3("tiervol", &s3, "jfs-e2e-tier");
    ok(jfs().args([
        "config",
        &v.admin_url,
        "--tier-id",
        "1",
        "--tier-sc",
        "STANDARD_IA",
    ]));
    ok(jfs().args([
        "config",
        &v.admin_url,
        "--tier-id",
        "3",
        "--tier-sc",
        "GLACIER",
    ]));
    let out = jfs()
        .args([
            "config",
            &v.admin_url,
            "--tier-id",
            "2",
            "--tier-sc",
            "COLD",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success(), "an unknown class was accepted");

    let m = v.mount("a", &[]);
    fs::create_dir(m.p("ia")).unwrap();
    ok(jfs().args(["tier", "set", &v.admin_url, "/ia", "--id", "1"]));
    // a new file under a tier-1 directory: its blocks are PUT as STANDARD_IA
    fs::write(m.p("ia/f"), pattern(1, 5 << 20)).unwrap();
    assert_eq!(
        classes_of(&s3, "jfs-e2e-tier", "tiervol", 2),
        ["STANDARD_IA", "STANDARD_IA"]
    );

    // an existing tree moves with tier set -r (server-side copies)
    fs::create_dir(m.p("data")).unwrap();
    let data = pattern(2, 3 << 20);
    fs::write(m.p("data/g"), &data).unwrap();
    ok(jfs().args(["tier", "set", &v.admin_url, "/data", "--id", "1", "-r"]));
    assert_eq!(
        classes_of(&s3, "jfs-e2e-tier", "tiervol", 3),
        ["STANDARD_IA"; 3]
    );
    // run again: nothing left to move
    let out = ok(jfs().args(["tier", "set", &v.admin_url, "/data", "--id", "1", "-r"]));
    assert!(String::from_utf8_lossy(&out.stdout).contains("0 objects moved, 1 already"));

    // into an archive class: reads are refused (EIO, with a hint in the log) until restored
    ok(jfs().args(["tier", "set", &v.admin_url, "/data", "--id", "3", "-r"]));
    let out = ok(jfs().args(["tier", "status", &v.url, "/data", "-r"]));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("/data/g  tier 3 (GLACIER)") && text.contains("1 archived"),
        "{text}"
    );
    drop(m);
    let m = v.mount("b", &[]);
    let err = fs::read(m.p("data/g")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err}");
    assert!(
        m.log_text().contains("jfs tier restore"),
        "{}",
        m.log_text()
    );
    let out = ok(jfs().args(["tier", "restore", &v.url, "/data", "-r"]));
    assert!(String::from_utf8_lossy(&out.stdout).contains("/data:"));
    let out = ok(jfs().args(["tier", "status", &v.url, "/data/g"]));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("1 readable"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(fs::read(m.p("data/g")).unwrap(), data);
    assert_eq!(fs::read(m.p("ia/f")).unwrap(), pattern(1, 5 << 20));
    assert_eq!(
        v.reader_sql("SELECT files FROM jfs.tier_usage WHERE tier = 3"),
        "1"
    );
}
