//! pjdfstest (the Rust rewrite of the POSIX conformance suite, installed by
//! scripts/setup.sh) run as root on a mount with --allow-other; the cases jfs
//! is known to fail are in tests/pjdfstest/pjdfstest.toml, each with a reason,
//! and one of them passing fails the run as well.
use std::path::PathBuf;
use std::process::Command;

use jfs_e2e::Volume;

fn pjdfstest_bin() -> PathBuf {
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    PathBuf::from(home).join(".cargo/bin/pjdfstest")
}

#[test]
fn pjdfstest_passes_on_a_mount() {
    let v = Volume::new("pjdfstest");
    let m = v.mount("a", &["--allow-other"]);
    // the suite switches to other users: they need to reach its directory
    let work = m.p("pjdfstest");
    std::fs::create_dir(&work).unwrap();
    Command::new("chmod")
        .args(["0777"])
        .arg(&work)
        .status()
        .unwrap();
    // a directory on another file system, for the EXDEV cases
    let secondary = v.dir.path().join("secondary");
    std::fs::create_dir(&secondary).unwrap();
    Command::new("chmod")
        .args(["0777"])
        .arg(&secondary)
        .status()
        .unwrap();
    let config = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../pjdfstest/pjdfstest.toml");
    let out = Command::new(pjdfstest_bin())
        .arg("-c")
        .arg(&config)
        .arg("-p")
        .arg(&work)
        .arg("-s")
        .arg(&secondary)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "{}: {e} (scripts/setup.sh installs pjdfstest)",
                pjdfstest_bin().display()
            )
        });
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let summary = text
        .lines()
        .find(|l| l.contains("Summary"))
        .unwrap_or("no summary line");
    println!("pjdfstest: {summary}");
    let trouble: Vec<&str> = text
        .lines()
        .filter(|l| {
            l.contains("FAILED") || l.contains("PASSED UNEXPECTEDLY") || l.contains("panicked")
        })
        .collect();
    assert!(
        out.status.success(),
        "pjdfstest failed ({}): {summary}\n{}\n--- full output ---\n{text}\nmount log: {}",
        out.status,
        trouble.join("\n"),
        m.log_tail(20)
    );
    drop(m);
    assert_eq!(
        v.sql("SELECT count(*) FROM jfs.fsck()"),
        "0",
        "fsck after pjdfstest"
    );
}
