//! `jfs destroy`: a volume's objects and metadata removed, its uuid asked
//! for, live sessions and client roles refused, a destroy that stopped
//! half way finished by running it again, another volume in the same
//! bucket left alone, and a new volume formatted where it was.
use std::fs;
use std::process::Output;

use jfs_e2e::{jfs, ok, pattern, S3Server, Volume};

fn destroy(url: &str, uuid: &str, extra: &[&str]) -> Output {
    jfs()
        .args(["destroy", url, uuid])
        .args(extra)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

fn refused(out: &Output, says: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "not refused: {err}");
    assert!(err.contains(says), "refused without saying {says:?}: {err}");
}

fn uuid(v: &Volume) -> String {
    v.sql("SELECT uuid FROM jfs.setting")
}

#[test]
fn destroy_removes_the_volume_its_uuid_names() {
    let v = Volume::new("destroy");
    let id = uuid(&v);
    let m = v.mount("a", &[]);
    for i in 0..5u64 {
        fs::write(m.p(&format!("f{i}")), pattern(i, 3 << 20)).unwrap();
    }
    let before = v.objects();
    assert!(!before.is_empty());

    // refusals, each changing nothing
    refused(
        &destroy(
            &v.admin_url,
            "00000000-0000-0000-0000-000000000000",
            &["--yes"],
        ),
        "nothing was changed",
    );
    refused(&destroy(&v.url, &id, &["--yes"]), "permission denied");
    refused(
        &destroy(&v.admin_url, &id, &["--yes"]),
        "session(s) of the volume are live",
    );
    refused(&destroy(&v.admin_url, &id, &[]), "pass --yes");
    assert_eq!(v.objects(), before);
    assert_eq!(fs::read(m.p("f3")).unwrap(), pattern(3, 3 << 20));
    drop(m);

    // a destroy that stopped after marking the volume: nothing mounts it,
    // and running destroy again finishes it
    assert_eq!(
        v.sql(&format!("SELECT errno FROM jfs.destroy_begin('{id}')")),
        "0"
    );
    // (and, as if it stopped later, the marker already gone)
    fs::remove_file(v.bucket().join("destroy/juicefs_uuid")).unwrap();
    let mnt = v.dir.path().join("mnt-late");
    fs::create_dir_all(&mnt).unwrap();
    let out = jfs()
        .args(["mount", &v.url])
        .arg(&mnt)
        .args(["-d"])
        .output()
        .unwrap();
    refused(&out, "being destroyed");
    let out = ok(jfs().args(["destroy", &v.admin_url, &id, "--yes"]));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("destroyed volume destroy"), "{said}");
    let left: Vec<_> = walk(&v.bucket());
    assert!(left.is_empty(), "objects left: {left:?}");
    assert!(!v.bucket().join("destroy").exists(), "its directories stay");
    refused(&destroy(&v.admin_url, &id, &["--yes"]), "holds no volume");
    let out = jfs().args(["status", &v.url]).output().unwrap();
    refused(&out, "holds no volume");

    // a new volume where it was
    let bucket = v.bucket();
    ok(jfs()
        .args([
            "format",
            &v.admin_url,
            "again",
            "--storage",
            "file",
            "--bucket",
        ])
        .arg(&bucket));
    assert_ne!(uuid(&v), id);
    let m = v.mount("b", &[]);
    fs::write(m.p("new"), b"fresh").unwrap();
    assert_eq!(fs::read(m.p("new")).unwrap(), b"fresh");
    assert!(!m.p("f3").exists());
}

#[test]
fn destroy_forced_and_on_s3_leaves_other_volumes_alone() {
    let s3 = S3Server::start();
    let v = Volume::s3("gone", &s3, "shared");
    // a name the destroyed one is a prefix of
    let keep = Volume::s3("gone2", &s3, "shared");
    let id = uuid(&v);
    let m = v.mount("a", &[]);
    let k = keep.mount("k", &[]);
    for i in 0..3u64 {
        fs::write(m.p(&format!("f{i}")), pattern(i, 5 << 20)).unwrap();
        fs::write(k.p(&format!("f{i}")), pattern(10 + i, 2 << 20)).unwrap();
    }
    assert!(s3.keys("shared").iter().any(|key| key.starts_with("gone/")));
    // forced, the live mount's session ends and its changes fail from then on
    assert_eq!(
        v.sql(&format!(
            "SELECT errno FROM jfs.destroy_begin('{id}', true)"
        )),
        "0"
    );
    assert!(fs::write(m.p("late"), pattern(7, 1 << 20)).is_err());
    assert!(fs::remove_file(m.p("f1")).is_err());
    let out = ok(jfs().args(["destroy", &v.admin_url, &id, "--yes", "--force"]));
    assert!(String::from_utf8_lossy(&out.stdout).contains("destroyed volume gone"));
    let keys = s3.keys("shared");
    assert!(
        !keys.iter().any(|key| key.starts_with("gone/")),
        "left of the destroyed volume: {keys:?}"
    );
    assert!(keys.iter().any(|key| key.starts_with("gone2/")), "{keys:?}");
    for i in 0..3u64 {
        assert_eq!(
            fs::read(k.p(&format!("f{i}"))).unwrap(),
            pattern(10 + i, 2 << 20)
        );
    }
    drop(m);
    let keys = s3.keys("shared");
    assert!(!keys.iter().any(|key| key.starts_with("gone/")), "{keys:?}");
}

/// Every file under `dir`.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.path().is_dir() {
                out.extend(walk(&e.path()));
            } else {
                out.push(e.path());
            }
        }
    }
    out
}
