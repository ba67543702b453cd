//! `jfs warmup`: files' blocks fetched into a mount's disk cache serve
//! reads with the object store gone; `--check` counts them, `--evict`
//! drops them.
use std::fs;

use jfs_e2e::{jfs, ok, pattern, Volume};

/// The "N bytes (P%)" summary line of a warmup run, as the percentage.
fn cached_share(out: &std::process::Output) -> String {
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    text.split('(')
        .nth(1)
        .and_then(|t| t.split(')').next())
        .unwrap_or_else(|| panic!("no share in {text:?}"))
        .to_string()
}

#[test]
fn warmed_files_read_with_the_object_store_gone() {
    let v = Volume::new("warmup");
    let cache = v.dir.path().join("cache");
    let cache = cache.to_str().unwrap().to_string();
    let files: Vec<(String, Vec<u8>)> = (0..6)
        .map(|i| {
            (
                format!("d{}/f{i}", i % 2),
                pattern(i, ((i as usize + 1) * 3) << 20),
            )
        })
        .collect();
    {
        let m = v.mount("writer", &[]);
        for (name, data) in &files {
            fs::create_dir_all(m.p(name).parent().unwrap()).unwrap();
            fs::write(m.p(name), data).unwrap();
        }
    }
    let m = v.mount("warm", &["--cache-dir", &cache]);
    let list = v.dir.path().join("list");
    fs::write(&list, format!("{}\n", m.p("d1").display())).unwrap();
    let check = ok(jfs().args(["warmup", "--check"]).arg(m.p("")));
    assert_eq!(cached_share(&check), "0.0%");
    // a list file and a path: the list names d1, the path d0
    let warm = ok(jfs()
        .args(["warmup", "--threads", "3", "-f"])
        .arg(&list)
        .arg(m.p("d0")));
    assert_eq!(cached_share(&warm), "100.0%", "{warm:?}");
    let check = ok(jfs()
        .args(["warmup", "--check"])
        .arg(m.p("d0"))
        .arg(m.p("d1")));
    assert_eq!(cached_share(&check), "100.0%");
    drop(m);
    // the object store is gone; the cache serves every byte
    let bucket = v.bucket();
    let away = v.dir.path().join("bucket-away");
    fs::rename(&bucket, &away).unwrap();
    let m = v.mount("offline", &["--cache-dir", &cache]);
    for (name, data) in &files {
        assert!(fs::read(m.p(name)).unwrap() == *data, "{name} differs");
    }
    // evicted, nothing is left to serve them
    let evict = ok(jfs().args(["warmup", "--evict"]).arg(m.p("d0")));
    assert!(String::from_utf8_lossy(&evict.stdout).contains("dropped"));
    drop(m);
    let quick = [
        "--cache-dir",
        &cache,
        "--object-retry",
        "1",
        "--object-timeout",
        "1",
    ];
    let m = v.mount("evicted", &quick);
    assert!(
        fs::read(m.p("d0/f0")).is_err(),
        "read with no store and no cache"
    );
    assert!(fs::read(m.p("d1/f1")).unwrap() == files[1].1);
    drop(m);
    // (a mount may have made the store's directory again, empty)
    let _ = fs::remove_dir_all(&bucket);
    fs::rename(&away, &bucket).unwrap();
    // a mount without a disk cache says so
    let m = v.mount("nocache", &[]);
    let out = jfs().args(["warmup"]).arg(m.p("d0")).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--cache-dir"));
}
