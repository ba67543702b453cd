//! A walk of a big directory (find, du, ls -l: a listing, then a stat of
//! each name) is answered by the kernel from what the listing gave: every
//! listing is a readdirplus, whose names and attributes the kernel keeps
//! for the cache times, and they stay exact when another mount changes one.
use std::fs;

use jfs_e2e::{changes_elsewhere_are_seen, free_metrics_addr, metric_sum, Volume};

const FILES: usize = 3000;

/// FUSE requests of kind `op` the mount at `addr` was sent so far.
fn requests(addr: &str, op: &str) -> f64 {
    metric_sum(
        addr,
        "jfs_fuse_op_duration_seconds_count",
        &format!("op=\"{op}\""),
    )
    .unwrap_or(0.0)
}

#[test]
fn the_stats_of_a_walk_are_answered_from_its_listing() {
    let v = Volume::new("walk");
    // the files, made behind the mount's back: its kernel knows none
    v.files_in_sql("big", FILES);
    let addr = free_metrics_addr();
    // (the cache times real mounts have; the tests' default is none)
    let m = v.mount(
        "a",
        &[
            "--metrics",
            &addr,
            "--attr-cache",
            "30",
            "--entry-cache",
            "30",
        ],
    );
    let other = v.mount("b", &[]);
    // find's order: the whole listing first, then a stat of each name
    let names: Vec<_> = fs::read_dir(m.p("big"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), FILES);
    let asked = || requests(&addr, "lookup") + requests(&addr, "getattr");
    let before = asked();
    for name in &names {
        let meta = fs::symlink_metadata(m.p("big").join(name)).unwrap();
        let i: u64 = name.to_str().unwrap()[1..].parse().unwrap();
        assert_eq!(meta.len(), i, "{name:?}");
    }
    let sent = asked() - before;
    assert!(
        sent < (FILES / 100) as f64,
        "{FILES} stats after the listing sent {sent} lookups and getattrs to the mount \
         (the listing: {} readdirplus, {} readdir requests)",
        requests(&addr, "readdirplus"),
        requests(&addr, "readdir")
    );

    // what the kernel keeps from the listing follows other mounts' changes
    changes_elsewhere_are_seen(&m, &other, "big");
}
