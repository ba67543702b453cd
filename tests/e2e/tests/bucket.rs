//! A bucket belongs to one volume: format, mount and gc refuse a place in a
//! bucket that another volume's marker (`{name}/juicefs_uuid`) claims.
use std::fs;

use jfs_e2e::{fails_with, jfs, meta_url, ok, pattern, psql, Volume};

#[test]
fn a_bucket_holds_one_volume() {
    let a = Volume::new("owned");
    {
        let m = a.mount("a", &[]);
        fs::write(m.p("data"), pattern(3, 1 << 20)).unwrap();
    }
    let uuid = a.sql("SELECT uuid FROM jfs.volume()");
    let marker = a.bucket().join("owned/juicefs_uuid");
    assert_eq!(fs::read_to_string(&marker).unwrap().trim(), uuid);

    // another database formatting a volume of the same name in the same bucket
    psql(
        "postgres",
        "DROP DATABASE IF EXISTS jfs_e2e_owned_other WITH (FORCE)",
    );
    psql("postgres", "CREATE DATABASE jfs_e2e_owned_other");
    let other = meta_url("jfs_e2e_owned_other");
    fails_with(
        jfs()
            .args(["format", &other, "owned", "--storage", "file", "--bucket"])
            .arg(a.bucket()),
        "holds volume",
    );
    assert_eq!(
        fs::read_to_string(&marker).unwrap().trim(),
        uuid,
        "the marker was replaced"
    );

    // a volume whose settings point at the first one's place (a copied database)
    let b = Volume::new("owned-copy");
    b.sql(&format!(
        "UPDATE jfs.setting SET name = 'owned', bucket = '{}'",
        a.bucket().display()
    ));
    let mnt = b.dir.path().join("mnt");
    fs::create_dir_all(&mnt).unwrap();
    fails_with(
        jfs().args(["mount", &b.url]).arg(&mnt).arg("-d"),
        "belongs to another volume",
    );
    fails_with(
        jfs().args(["gc", &b.url, "--delete"]),
        "belongs to another volume",
    );
    // the first volume lost nothing
    let out = ok(jfs().args(["gc", &a.url]));
    assert!(String::from_utf8_lossy(&out.stdout).contains("unreferenced            0"));
    let m = a.mount("again", &[]);
    assert!(fs::read(m.p("data")).unwrap() == pattern(3, 1 << 20));
}
