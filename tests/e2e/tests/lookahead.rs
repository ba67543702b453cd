//! Lookups that read ahead: statting the names of a big directory one by
//! one (as find, du, ls -l do after a listing the kernel no longer holds)
//! costs a round trip per thousand names, and what was read ahead stays
//! exact: another mount's change is seen, a missing name is missing.
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::time::Duration;

use jfs_e2e::{changes_elsewhere_are_seen, free_metrics_addr, procedure_calls, Volume};

const FILES: usize = 3000;

#[test]
fn statting_a_big_directory_reads_ahead_and_stays_exact() {
    let v = Volume::new("lookahead");
    // the files, made behind the mount's back: it has seen none of them
    v.files_in_sql("big", FILES);
    let addr = free_metrics_addr();
    let m = v.mount(
        "a",
        &[
            "--attr-cache",
            "1",
            "--entry-cache",
            "1",
            "--metrics",
            &addr,
        ],
    );
    let other = v.mount("b", &[]);
    let lookups = procedure_calls(&addr, "lookup");
    // by name, in order (the kernel knows none of them)
    for i in 1..=FILES {
        let meta = fs::metadata(m.p(&format!("big/f{i}"))).unwrap();
        assert_eq!(meta.len(), i as u64, "f{i}");
    }
    let single = procedure_calls(&addr, "lookup") - lookups;
    let ahead = procedure_calls(&addr, "lookup_ahead");
    assert!(
        single < 50.0 && ahead >= 2.0,
        "{FILES} stats cost {single} lookups and {ahead} read-aheads"
    );
    // in another order (ls sorts by name: f1, f10, f100, ...) too
    let mut names: Vec<String> = (1..=FILES).map(|i| format!("f{i}")).collect();
    names.sort();
    std::thread::sleep(Duration::from_millis(1500)); // the kernel's copies expire
    let before = procedure_calls(&addr, "lookup") + procedure_calls(&addr, "lookup_ahead");
    for name in &names {
        assert!(fs::metadata(m.p(&format!("big/{name}"))).is_ok());
    }
    let asked = procedure_calls(&addr, "lookup") + procedure_calls(&addr, "lookup_ahead") - before;
    assert!(
        asked < 50.0,
        "{FILES} stats by name cost {asked} round trips"
    );

    // what was read ahead follows other mounts' changes
    changes_elsewhere_are_seen(&m, &other, "big");
    assert!(fs::metadata(m.p("big/f99999")).is_err());
    assert_eq!(fs::metadata(m.p("big/f2700")).unwrap().nlink(), 1);
}
