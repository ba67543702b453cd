//! `jfs summary`: a tree's sizes and counts from the database's
//! per-directory figures are the numbers `du -s --apparent-size` and
//! `find | wc -l` give on the mount, after every kind of change and from
//! another mount too.
use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::Command;

use jfs_e2e::{jfs, ok, pattern, Volume};

/// `du -s --apparent-size -b`, and the entries `find` lists by type.
fn walked(path: &Path) -> (i64, i64, i64) {
    let du = ok(Command::new("du")
        .args(["-s", "--apparent-size", "-b"])
        .arg(path));
    let length = String::from_utf8_lossy(&du.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let count = |args: &[&str]| {
        let out = ok(Command::new("find").arg(path).args(args));
        String::from_utf8_lossy(&out.stdout).lines().count() as i64
    };
    (
        length,
        count(&["-type", "d"]),
        count(&["-not", "-type", "d"]),
    )
}

/// `jfs summary --json` of `path`: its rows as (path, length, dirs, files).
fn summary(path: &Path, depth: u32) -> Vec<(String, i64, i64, i64)> {
    let out = ok(jfs()
        .args(["summary", "--json", "--depth", &depth.to_string()])
        .arg(path));
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    rows.as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["path"].as_str().unwrap().to_string(),
                r["length"].as_i64().unwrap(),
                r["dirs"].as_i64().unwrap(),
                r["files"].as_i64().unwrap(),
            )
        })
        .collect()
}

/// Every row of a summary of `path` down to `depth` agrees with du and find.
fn agrees(path: &Path, depth: u32, what: &str) {
    let rows = summary(path, depth);
    assert!(!rows.is_empty());
    for (row, length, dirs, files) in rows {
        let (du, find_dirs, find_files) = walked(Path::new(&row));
        assert_eq!(
            (length, dirs, files),
            (du, find_dirs, find_files),
            "{what}: summary of {row} (length, dirs, files) against du and find"
        );
    }
}

#[test]
fn summaries_are_what_du_and_find_count() {
    let v = Volume::new("summary");
    let m = v.mount("a", &[]);
    let other = v.mount("b", &[]);
    let t = m.p("t");
    for d in ["a/b/c", "a/e", "x/y", "empty"] {
        fs::create_dir_all(t.join(d)).unwrap();
    }
    for (i, name) in ["a/f1", "a/b/f2", "a/b/c/f3", "x/f4", "x/y/f5", "top"]
        .iter()
        .enumerate()
    {
        fs::write(t.join(name), pattern(i as u64, 1000 + i * 70_001)).unwrap();
    }
    fs::write(t.join("a/e/empty-file"), b"").unwrap();
    symlink("../top", t.join("a/link")).unwrap();
    // a sparse file: its length, not its data
    fs::File::create(t.join("x/sparse"))
        .unwrap()
        .set_len(300 << 20)
        .unwrap();
    agrees(&t, 3, "a new tree");
    let rows = summary(&t, 1);
    assert_eq!(
        rows[0].0,
        t.display().to_string(),
        "the path asked about comes first"
    );
    assert_eq!(rows.len(), 4, "t and its three directories: {rows:?}");

    // growth within a block, appends, truncation, a rename across
    // directories, a rename over a file, a removed tree, a copy
    let mut f = fs::OpenOptions::new()
        .append(true)
        .open(t.join("a/f1"))
        .unwrap();
    std::io::Write::write_all(&mut f, b"more").unwrap();
    drop(f);
    fs::File::options()
        .write(true)
        .open(t.join("a/b/f2"))
        .unwrap()
        .set_len(7)
        .unwrap();
    fs::rename(t.join("a/b/c"), t.join("x/c")).unwrap();
    fs::rename(t.join("top"), t.join("x/f4")).unwrap();
    fs::remove_dir_all(t.join("x/y")).unwrap();
    ok(Command::new("cp")
        .arg("-a")
        .arg(t.join("a"))
        .arg(t.join("a2")));
    agrees(&t, 2, "after changes");

    // another mount's view is the database's: the same numbers at once
    fs::write(other.p("t/a2/from-b"), pattern(9, 12_345)).unwrap();
    fs::remove_file(other.p("t/x/sparse")).unwrap();
    agrees(&t, 2, "after another mount's changes");
    let volume = summary(&m.p(""), 0);
    let (du, dirs, files) = walked(&m.p(""));
    assert_eq!(
        (volume[0].1, volume[0].2, volume[0].3),
        (du, dirs, files),
        "the whole volume"
    );

    // a file; the table; a path outside any mount
    let rows = summary(&t.join("a2/from-b"), 0);
    assert_eq!((rows[0].1, rows[0].2, rows[0].3), (12_345, 0, 1));
    let table = ok(jfs().args(["summary", "-d", "1"]).arg(&t));
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.starts_with("PATH"), "{text}");
    assert_eq!(text.lines().count(), 1 + 5, "a header and 5 rows: {text}");
    let out = jfs().args(["summary", "/tmp"]).output().unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("jfs"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
