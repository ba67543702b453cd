//! Write buffers: the memory of pending writes is bounded by `--buffer-size`
//! (writes wait, they do not fail), a small write holds about its own size,
//! and writes that land again on pending ones share their slice.
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use jfs_e2e::{free_metrics_addr, metric_sum, ok, Mount, Volume};

const MIB: u64 = 1 << 20;

/// The mount's `jfs_write_buffer_bytes` now.
fn write_buffer_bytes(addr: &str) -> Option<u64> {
    metric_sum(addr, "jfs_write_buffer_bytes", "").map(|v| v as u64)
}

/// scripts/random_writes.py on `m` (file `name`, model in `model`):
/// (seconds writing, seconds in fsync + close).
fn random_writes(m: &Mount, name: &str, model: &Path, args: [u64; 5]) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/random_writes.py");
    let out = ok(Command::new("python3")
        .arg(script)
        .arg(m.p(name))
        .arg(model)
        .args(args.map(|a| a.to_string())));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Whether the file `name` of `m` has the model's bytes (`cmp`: sparse
/// files compare fast enough).
fn same_bytes(m: &Mount, name: &str, model: &Path) -> bool {
    Command::new("cmp")
        .arg(m.p(name))
        .arg(model)
        .status()
        .unwrap()
        .success()
}

/// 20,000 writes of 4 KiB at random places of a 64 MiB file before one
/// fsync, with `--buffer-size 16`: the write buffers never hold much more
/// than 16 MiB (each write used to reserve a whole 4 MiB block: the
/// gauge, which counts allocations, read gigabytes), and every byte is
/// there afterwards, read by another mount.
#[test]
fn random_small_writes_stay_within_the_buffer_size() {
    let v = Volume::new("buffers-bound");
    let addr = free_metrics_addr();
    let a = v.mount("a", &["--buffer-size", "16", "--metrics", &addr]);
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("model");
    let writing = Arc::new(AtomicBool::new(true));
    let sampler = {
        let writing = writing.clone();
        let addr = addr.clone();
        std::thread::spawn(move || {
            let (mut most, mut samples) = (0u64, 0u32);
            while writing.load(Ordering::SeqCst) {
                if let Some(bytes) = write_buffer_bytes(&addr) {
                    most = most.max(bytes);
                    samples += 1;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            (most, samples)
        })
    };
    let times = random_writes(&a, "f", &model, [20_000, 64 * MIB, 4096, 7, 0]);
    writing.store(false, Ordering::SeqCst);
    let (most, samples) = sampler.join().unwrap();
    println!("20,000 random 4 KiB writes: {times}; write buffers at most {most} bytes");
    assert!(
        samples > 10,
        "the metrics endpoint answered {samples} times"
    );
    // the bound, one block being assembled past it and one write's slack
    assert!(
        most <= 16 * MIB + 4 * MIB + MIB,
        "the write buffers held {most} bytes with --buffer-size 16"
    );
    let b = v.mount("b", &[]);
    assert!(
        same_bytes(&b, "f", &model),
        "the file differs from its model"
    );
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
}

/// 10,000 writes that go again and again to 50 places of a file (pages a
/// database rewrites), then fsync: each place is one slice, not one per
/// write (a write into the buffered part of a pending slice goes into it).
#[test]
fn rewrites_of_a_few_places_share_their_slices() {
    let v = Volume::new("buffers-merge");
    // (no background commit: one would start new slices for later writes)
    let a = v.mount("a", &["--compact-at", "0", "--commit-after", "0"]);
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("model");
    let times = random_writes(&a, "db", &model, [10_000, 64 * MIB, 4096, 11, 50]);
    println!("10,000 writes over 50 pages: {times}");
    let slices: u64 = v
        .sql("SELECT count(*) FROM jfs.slice WHERE inode = (SELECT jfs.resolve('/db'))")
        .parse()
        .unwrap();
    assert!(
        slices <= 50,
        "{slices} slices for 50 places written 10,000 times"
    );
    assert!(
        same_bytes(&a, "db", &model),
        "the file differs from its model"
    );
    let b = v.mount("b", &[]);
    assert!(
        same_bytes(&b, "db", &model),
        "another mount reads other bytes"
    );
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
}
