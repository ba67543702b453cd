//! Harness for the end-to-end tests: a fresh database per volume, `jfs format`,
//! `jfs mount -d` on a temporary directory, and unmount on drop.
//!
//! scripts/test.sh provides a private PostgreSQL (PGHOST = its socket
//! directory, PGPORT, PGUSER, JFS_TEST_PGDATA) and the built binary (JFS_BIN).
//! One module per helper: `db` (roles, psql, META_URLs), `volume` (volumes
//! and mounts), `cluster` (clusters of a test's own), `s3` (moto),
//! `pgbouncer`, `locker` (a process holding a file), `metrics` (a mount's, scraped), `tree` (trees to copy and compare), `random`; all of them
//! are re-exported here.
use std::process::{Command, Output};
use std::time::{Duration, Instant};

mod cluster;
mod db;
mod formation;
mod gateway;
mod locker;
mod metrics;
mod pgbouncer;
mod random;
mod s3;
mod shards;
mod tree;
mod volume;
mod workload;

pub use cluster::*;
pub use db::*;
pub use formation::*;
pub use gateway::*;
pub use locker::*;
pub use metrics::*;
pub use pgbouncer::*;
pub use random::*;
pub use s3::*;
pub use shards::*;
pub use tree::*;
pub use volume::*;
pub use workload::*;

pub fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: run the end-to-end tests through scripts/test.sh")
    })
}

/// Held by tests that must not run beside the others of their file: a
/// process another test thread starts closes its copies of this test's
/// open files, and on a mount each close flushes (commits) the file.
pub fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// Creates a file (it must not exist) of mode `mode` less the umask, in
/// the create itself (no chmod after it), open for writing: 0600 is 0600
/// under any usual umask.
pub fn create_with_mode(path: &std::path::Path, mode: u32) -> std::fs::File {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .unwrap_or_else(|e| panic!("creating {}: {e}", path.display()))
}

/// The jfs binary under test.
pub fn jfs() -> Command {
    Command::new(env("JFS_BIN"))
}

/// Runs a command; panics with its output when it fails.
pub fn ok(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The value of extended attribute `name` of `path` (not followed if a
/// symbolic link), or the errno getxattr gave.
pub fn xattr_of(path: &std::path::Path, name: &str) -> Result<Vec<u8>, rustix::io::Errno> {
    let mut value = vec![0u8; 256];
    rustix::fs::lgetxattr(path, name, &mut value).map(|n| value[..n].to_vec())
}

/// Runs `cmd`, which must fail with `needle` in what it printed.
pub fn fails_with(cmd: &mut Command, needle: &str) {
    let out = cmd.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "{cmd:?} should fail:\n{text}");
    assert!(
        text.contains(needle),
        "{cmd:?}: expected {needle:?} in:\n{text}"
    );
}

/// Polls `f` until it returns true or `secs` pass.
pub fn eventually(secs: u64, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    f()
}
