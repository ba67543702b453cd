//! A client role's transaction left open around a procedure does not stall
//! the mounts: `BEGIN; SELECT jfs.rename(...)` without COMMIT (idle in its
//! transaction), or the rename beside `pg_sleep`, held the lock of
//! directory moves until its holder ended; a mount's `mv` of another
//! directory waited as long. Now a mount that waited 5 seconds has the
//! database end such a holder (`jfs.end_stalling`), and its call goes
//! through; an administrator's transaction is waited for.
use std::fs;
use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use jfs_e2e::{eventually, Volume, ADMIN_ROLE, CLIENT_ROLE};

/// A psql session as `role` that sends `sql` and keeps its connection
/// (stdin open) until dropped.
struct Holder {
    child: Child,
}

impl Holder {
    fn start(v: &Volume, role: &str, app: &str, sql: &str) -> Holder {
        let mut child = Command::new("psql")
            .args(["-XAtq", "-U", role, "-d", &v.db])
            .env("PGAPPNAME", app)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.as_mut().unwrap();
        writeln!(stdin, "{sql}").unwrap();
        stdin.flush().unwrap();
        Holder { child }
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `mv FROM TO`; its exit status and how long it took, or None when
/// it did not finish within `secs` (then it is killed).
fn mv_within(from: &std::path::Path, to: &std::path::Path, secs: u64) -> Option<(bool, Duration)> {
    let started = Instant::now();
    let mut mv = Command::new("mv").arg(from).arg(to).spawn().unwrap();
    while started.elapsed() < Duration::from_secs(secs) {
        if let Some(status) = mv.try_wait().unwrap() {
            return Some((status.success(), started.elapsed()));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = mv.kill();
    let _ = mv.wait();
    None
}

/// Whether backend `pid` has ended within `secs`.
fn ended_within(v: &Volume, pid: &str, secs: u64) -> bool {
    let query = format!("SELECT count(*) FROM pg_stat_activity WHERE pid = {pid}");
    eventually(secs, || v.sql(&query) == "0")
}

/// Waits until the holder's backend holds its transaction open (its state
/// is `state`), and returns its pid.
fn holding(v: &Volume, app: &str, state: &str) -> String {
    let query = format!(
        "SELECT pid FROM pg_stat_activity WHERE application_name = '{app}' AND state = '{state}' \
         AND xact_start IS NOT NULL"
    );
    assert!(
        eventually(20, || !v.sql(&query).is_empty()),
        "the holder {app} never reached state {state}"
    );
    v.sql(&query)
}

/// Directories made through SQL (no mount holds their leases): p/x and p/y
/// to move, q to move them into. Returns the inodes of p and q.
fn tree(v: &Volume) -> (String, String) {
    let p = v.sql("SELECT inode FROM jfs.mknod(1, 'p', 2, 511, 0, 0)");
    let q = v.sql("SELECT inode FROM jfs.mknod(1, 'q', 2, 511, 0, 0)");
    for name in ["x", "y", "z"] {
        v.sql(&format!(
            "SELECT errno FROM jfs.mknod({p}, '{name}', 2, 511, 0, 0)"
        ));
    }
    (p, q)
}

#[test]
fn a_client_transaction_left_open_on_the_move_lock_is_ended_for_a_waiting_mount() {
    let v = Volume::new("stall-idle");
    let (p, q) = tree(&v);
    let m = v.mount("a", &[]);
    let _holder = Holder::start(
        &v,
        CLIENT_ROLE,
        "stall-idle-holder",
        &format!("BEGIN; SELECT errno FROM jfs.rename({p}, 'x', {q}, 'x');"),
    );
    let pid = holding(&v, "stall-idle-holder", "idle in transaction");
    let moved = mv_within(&m.p("p/y"), &m.p("q/y"), 60);
    let (ok, took) = moved.expect("mv waited 60 s behind a client's open transaction");
    assert!(ok, "mv failed");
    assert!(m.p("q/y").is_dir() && !m.p("p/y").exists());
    assert!(
        took >= Duration::from_secs(4),
        "mv did not wait at all: {took:?}"
    );
    assert!(
        ended_within(&v, &pid, 10),
        "the holder's backend was not ended"
    );
    // its rename, never committed, did not happen
    assert!(m.p("p/x").is_dir() && !m.p("q/x").exists());
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
}

#[test]
fn a_client_procedure_called_beside_a_sleep_is_ended_for_a_waiting_mount() {
    let v = Volume::new("stall-sleep");
    let (p, q) = tree(&v);
    let m = v.mount("a", &[]);
    let _holder = Holder::start(
        &v,
        CLIENT_ROLE,
        "stall-sleep-holder",
        &format!("SELECT errno, pg_sleep(1000) FROM jfs.rename({p}, 'x', {q}, 'x');"),
    );
    let pid = holding(&v, "stall-sleep-holder", "active");
    let moved = mv_within(&m.p("p/y"), &m.p("q/y"), 60);
    let (ok, _) = moved.expect("mv waited 60 s behind a client's sleeping call");
    assert!(ok && m.p("q/y").is_dir());
    assert!(
        ended_within(&v, &pid, 10),
        "the holder's backend was not ended"
    );
    assert!(m.p("p/x").is_dir() && !m.p("q/x").exists());
}

#[test]
fn an_administrators_transaction_is_waited_for() {
    let v = Volume::new("stall-admin");
    let (p, q) = tree(&v);
    let m = v.mount("a", &[]);
    let _holder = Holder::start(
        &v,
        ADMIN_ROLE,
        "stall-admin-holder",
        &format!(
            "BEGIN; SELECT errno FROM jfs.rename({p}, 'x', {q}, 'x'); SELECT pg_sleep(9); COMMIT;"
        ),
    );
    let pid = holding(&v, "stall-admin-holder", "active");
    let moved = mv_within(&m.p("p/y"), &m.p("q/y"), 60);
    let (ok, took) = moved.expect("mv never went through after the administrator committed");
    assert!(ok, "mv failed");
    assert!(
        took >= Duration::from_secs(6),
        "mv did not wait for the administrator: {took:?}"
    );
    // the administrator's backend is still there, its move committed
    assert!(
        !ended_within(&v, &pid, 1),
        "the administrator's backend was ended"
    );
    assert!(fs::metadata(m.p("q/x")).unwrap().is_dir());
    assert!(fs::metadata(m.p("q/y")).unwrap().is_dir());
}
