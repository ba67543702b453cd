//! fsx (the classic file-system exerciser, Rust port from crates.io, installed
//! by scripts/setup.sh) on a mount: random reads, writes, truncates,
//! fallocate, copy_file_range, sendfile, fsync and close/reopen, every read
//! checked; with and without mmap. `JFS_FSX_OPS=N` sets the length of a run.
use std::path::PathBuf;
use std::process::Command;

use jfs_e2e::Volume;

fn fsx_bin() -> PathBuf {
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    PathBuf::from(home).join(".cargo/bin/fsx")
}

fn config(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../fsx/{name}.toml"))
}

fn ops() -> String {
    std::env::var("JFS_FSX_OPS").unwrap_or_else(|_| "100000".into())
}

/// Runs fsx with `config_name` and `seed` on a new file of a new volume
/// formatted with `format_args`.
fn run_fsx(volume: &str, format_args: &[&str], config_name: &str, seed: u32) -> Volume {
    let v = Volume::with_options(volume, format_args);
    let m = v.mount("a", &[]);
    let artifacts = v.dir.path().join("fsx-artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    let out = Command::new(fsx_bin())
        .args(["-N", &ops(), "-S", &seed.to_string(), "-f"])
        .arg(config(config_name))
        .arg("-P")
        .arg(&artifacts)
        .arg(m.p("fsx-file"))
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "{}: {e} (scripts/setup.sh installs fsx)",
                fsx_bin().display()
            )
        });
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let tail: Vec<&str> = text.lines().rev().take(60).collect();
    assert!(
        out.status.success() && text.contains("All operations completed A-OK"),
        "fsx -S {seed} with {config_name}.toml failed ({}):\n{}\nmount log: {}",
        out.status,
        tail.into_iter().rev().collect::<Vec<_>>().join("\n"),
        m.log_tail(20)
    );
    drop(m);
    assert_eq!(
        v.sql("SELECT count(*) FROM jfs.fsck()"),
        "0",
        "fsck after fsx"
    );
    v
}

#[test]
fn fsx_without_mmap() {
    let _ = run_fsx("fsx-nommap", &[], "nommap", 1);
}

#[test]
fn fsx_with_mmap() {
    let _ = run_fsx("fsx-mmap", &[], "mmap", 2);
}

/// A file that keeps its bytes in the database while it is at most 64 KiB
/// (`--inline-max 64`) and in objects past that: fsx's file (up to 256
/// KiB, truncated, punched, copied) crosses the threshold all the time,
/// and its chunk holds slices of both kinds.
#[test]
fn fsx_across_the_inline_threshold() {
    let v = run_fsx("fsx-inline", &["--inline-max", "64"], "inline", 3);
    // (how many were ever kept: the file ends wherever fsx leaves it)
    let kept = v.slices_ever_kept(10);
    assert!(
        kept >= 10,
        "only {kept} slices of fsx's file were kept in the database"
    );
}
