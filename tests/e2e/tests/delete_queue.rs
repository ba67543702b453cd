//! Data freed but kept (a mount's --gc-delay, the volume's retain_deleted)
//! still fills the object store: `jfs status` and `df` show it, and past
//! the volume's cap (`jfs config --delete-queue-cap`) the mounts delete it
//! as soon as the commit that freed it is durable. xfstests left 58 GB of
//! freed slices waiting their hour while the live files held 1.5 GB, and the
//! disk under the store and PostgreSQL filled.
use std::fs;
use std::process::Command;

use jfs_e2e::{eventually, jfs, ok, pattern, Volume};

/// `df -B1`'s used bytes of a mount.
fn df_used(path: &std::path::Path) -> u64 {
    let out = ok(Command::new("df").args(["-B1", "--output=used"]).arg(path));
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    text.lines().nth(1).unwrap().trim().parse().unwrap()
}

#[test]
fn freed_data_is_shown_and_deleted_early_past_the_volumes_cap() {
    let v = Volume::new("deletequeue");
    let m = v.mount("a", &["--gc-delay", "3600", "--gc-interval", "1"]);
    fs::write(m.p("f"), pattern(3, 8 << 20)).unwrap();
    let blocks = v.objects().len();
    assert_eq!(blocks, 2);
    let used_live = df_used(&m.p(""));
    fs::remove_file(m.p("f")).unwrap();

    // kept for the hour: the store holds it, status and df say so
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert_eq!(v.objects().len(), blocks, "deleted before its delay");
    let status = String::from_utf8_lossy(&ok(jfs().args(["status", &v.url])).stdout).to_string();
    assert!(
        status.contains("deleting    0.01 GiB in 1 freed slices") && status.contains("no cap"),
        "{status}"
    );
    assert_eq!(
        df_used(&m.p("")),
        used_live,
        "df stopped counting the freed data"
    );

    // a cap (administration) below what waits: deleted at once
    let refused = jfs()
        .args(["config", &v.url, "--delete-queue-cap", "0.001"])
        .output()
        .unwrap();
    assert!(!refused.status.success(), "a mount's role set the cap");
    ok(jfs().args(["config", &v.admin_url, "--delete-queue-cap", "0.001"]));
    assert!(
        eventually(30, || v.objects().is_empty()),
        "objects left past the cap: {:?}",
        v.objects()
    );
    let status = String::from_utf8_lossy(&ok(jfs().args(["status", &v.url])).stdout).to_string();
    assert!(
        status.contains("deleting    0.00 GiB in 0 freed slices"),
        "{status}"
    );
    assert!(df_used(&m.p("")) < used_live);
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
}
