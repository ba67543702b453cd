//! A walk of a big directory (find, du, ls -l: a listing, then a stat of
//! each name) is answered by the kernel from what the listing gave: every
//! listing is a readdirplus, whose names and attributes the kernel keeps
//! for the cache times, and they stay exact when another mount changes one.
use std::fs;

use jfs_e2e::{changes_elsewhere_are_seen, free_metrics_addr, fuse_requests, Volume};

const FILES: usize = 3000;

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
    let asked = || fuse_requests(&addr, "lookup") + fuse_requests(&addr, "getattr");
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
        fuse_requests(&addr, "readdirplus"),
        fuse_requests(&addr, "readdir")
    );

    // what the kernel keeps from the listing follows other mounts' changes
    changes_elsewhere_are_seen(&m, &other, "big");
}

#[test]
fn a_listing_does_not_give_back_what_changed_while_it_was_read() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let v = Volume::new("walk-changed");
    v.files_in_sql("big", FILES);
    let m = v.mount("a", &["--attr-cache", "30", "--entry-cache", "30"]);
    // one getdents: the mount keeps the rest of the page it read
    let mut listing = fs::read_dir(m.p("big")).unwrap();
    assert!(listing.next().is_some());
    // changed through this mount while the listing is half read
    fs::remove_file(m.p("big/f400")).unwrap();
    fs::set_permissions(m.p("big/f300"), fs::Permissions::from_mode(0o600)).unwrap();
    let rest = listing.count();
    assert!(rest >= FILES - 2, "the listing went on ({rest} more)");
    assert!(
        fs::symlink_metadata(m.p("big/f400")).is_err(),
        "the kernel was given back a name removed meanwhile"
    );
    assert_eq!(
        fs::symlink_metadata(m.p("big/f300")).unwrap().mode() & 0o7777,
        0o600,
        "the kernel was given back a mode changed meanwhile"
    );
}

#[test]
fn a_listing_gives_attributes_for_the_attribute_cache_time_only() {
    // (no change log followed: only the cache times bound what is stale)
    let v = Volume::new("walk-attr-time");
    let m = v.mount(
        "a",
        &[
            "--changes-poll",
            "0",
            "--attr-cache",
            "0",
            "--entry-cache",
            "30",
        ],
    );
    let other = v.mount("b", &[]);
    fs::create_dir(other.p("d")).unwrap();
    fs::write(other.p("d/f"), b"short").unwrap();
    assert_eq!(fs::read_dir(m.p("d")).unwrap().count(), 1);
    fs::write(other.p("d/f"), b"longer now").unwrap();
    assert_eq!(
        fs::metadata(m.p("d/f")).unwrap().len(),
        10,
        "--attr-cache 0: the length the listing gave was kept"
    );
}
