//! `jfs bench PATH` on a mount: its table's five lines, each with a figure,
//! and nothing left behind.
use std::fs;

use jfs_e2e::{jfs, ok, Volume};

#[test]
fn jfs_bench_prints_its_table_and_leaves_nothing() {
    let v = Volume::new("bench-cli");
    let m = v.mount("a", &[]);
    let out = ok(jfs().arg("bench").arg(&m.path).args([
        "--big-file-size",
        "8",
        "--small-file-size",
        "16",
        "--small-file-count",
        "20",
        "-p",
        "2",
    ]));
    let text = String::from_utf8_lossy(&out.stdout);
    for (item, unit) in [
        ("Write big file", "MiB/s"),
        ("Read big file", "MiB/s"),
        ("Write small file", "files/s"),
        ("Read small file", "files/s"),
        ("Stat file", "files/s"),
    ] {
        let line = text
            .lines()
            .find(|l| l.contains(item))
            .unwrap_or_else(|| panic!("no {item} line in:\n{text}"));
        let value = line.split('|').nth(2).unwrap().trim();
        let (number, got_unit) = value.split_once(' ').unwrap();
        assert_eq!(got_unit, unit, "{line}");
        assert!(number.parse::<f64>().unwrap() > 0.0, "{line}");
        assert!(line.contains("/file"), "{line}");
    }
    assert_eq!(
        fs::read_dir(&m.path).unwrap().count(),
        0,
        "the scratch directory is removed"
    );
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
}

#[test]
fn jfs_objbench_measures_the_store_and_leaves_nothing() {
    let v = Volume::new("objbench-cli");
    let out = ok(jfs().args([
        "objbench",
        &v.url,
        "--block-size",
        "256",
        "--blocks",
        "8",
        "--small-objects",
        "10",
        "-p",
        "2",
    ]));
    let text = String::from_utf8_lossy(&out.stdout);
    for item in [
        "Put block",
        "Get block",
        "Put small object",
        "Get small object",
        "Head object",
        "List objects",
        "Delete object",
    ] {
        let line = text
            .lines()
            .find(|l| l.contains(item))
            .unwrap_or_else(|| panic!("no {item} line in:\n{text}"));
        let value = line.split('|').nth(2).unwrap().trim();
        let number: f64 = value.split(' ').next().unwrap().parse().unwrap();
        assert!(number > 0.0 && line.contains("ms/op"), "{line}");
    }
    assert!(v.objects().is_empty(), "{:?}", v.objects());
}
