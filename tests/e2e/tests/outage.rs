//! A PostgreSQL outage longer than the session timeout, under SQLite
//! writers on two mounts of one volume (POSIX locks shared through the
//! database): when the database is back, every mount answers again, the
//! writers go on (or see an error where a lock was lost, never a hang), no
//! lock of a dead session stays behind, and the database file is whole.
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use jfs_e2e::{eventually, ok, Mount, PrivateVolume};

/// A running scripts/sqlite_writer.py (killed if the test fails first).
struct Writer {
    child: Option<Child>,
    progress: PathBuf,
}

impl Drop for Writer {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
        }
    }
}

impl Writer {
    fn start(db: &Path, id: u32, dir: &Path) -> Writer {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/sqlite_writer.py");
        let progress = dir.join(format!("progress-{id}"));
        let child = Command::new("python3")
            .arg(script)
            .arg(db)
            .arg(id.to_string())
            .arg(&progress)
            .arg(dir.join("stop"))
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        Writer {
            child: Some(child),
            progress,
        }
    }

    fn commits(&self) -> u64 {
        fs::read_to_string(&self.progress)
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(0)
    }
}

/// `stat PATH` answers within `secs` (a hung mount does not).
fn stat_answers(path: &Path, secs: u64) -> bool {
    let out = Command::new("timeout")
        .arg(secs.to_string())
        .arg("stat")
        .arg(path)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    out.success()
}

#[test]
fn an_outage_longer_than_the_session_timeout_ends_in_working_mounts() {
    let v = PrivateVolume::new("outage", &[]);
    // sessions die after 6 s without a heartbeat; calls wait 120 s for the database
    let opts = [
        "--session-timeout",
        "6",
        "--heartbeat",
        "1",
        "--meta-retry",
        "120",
    ];
    let a = v.mount("a", &opts);
    let b = v.mount("b", &opts);
    let db = a.p("app.db");
    ok(Command::new("python3").args([
        "-c",
        &format!(
            "import sqlite3; c = sqlite3.connect('{}'); c.execute('CREATE TABLE t (writer, n)'); c.commit()",
            db.display()
        ),
    ]));
    let work = v.base.join("work");
    fs::create_dir_all(&work).unwrap();
    let mounts: [&Mount; 2] = [&a, &b];
    let writers: Vec<Writer> = (0..4)
        .map(|i| Writer::start(&mounts[i % 2].p("app.db"), i as u32, &work))
        .collect();
    // (SQLite's busy handler is not fair: a writer may wait long for its turn,
    // so progress is counted per mount)
    let per_mount = |writers: &[Writer]| -> [u64; 2] {
        let mut sums = [0; 2];
        for (i, w) in writers.iter().enumerate() {
            sums[i % 2] += w.commits();
        }
        sums
    };
    assert!(
        eventually(60, || per_mount(&writers).iter().all(|&n| n > 5)),
        "the writers got going: {:?}",
        per_mount(&writers)
    );

    // the outage: longer than the session timeout, shorter than --meta-retry
    v.pg.pg_ctl("-m fast stop");
    std::thread::sleep(Duration::from_secs(15));
    v.pg.pg_ctl("start");
    let back = Instant::now();

    // both mounts answer, and every writer goes on
    for m in mounts {
        assert!(
            stat_answers(&m.path, 30),
            "stat on {} hangs",
            m.path.display()
        );
    }
    let before = per_mount(&writers);
    let moved = eventually(90, || {
        let now = per_mount(&writers);
        now[0] > before[0] + 5 && now[1] > before[1] + 5
    });
    let after = per_mount(&writers);
    assert!(
        moved,
        "writers stopped after the outage: commits per mount {before:?} then {after:?} ({:?} after it ended)",
        back.elapsed()
    );

    fs::write(work.join("stop"), b"").unwrap();
    let (mut commits, mut errors) = (0u64, 0u64);
    let field = |summary: &str, key: &str| -> u64 {
        summary
            .split(&format!("\"{key}\": "))
            .nth(1)
            .and_then(|r| r.split([',', '}']).next())
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {key} in a writer's summary: {summary}"))
    };
    for mut w in writers {
        let out = w.child.take().unwrap().wait_with_output().unwrap();
        let summary = String::from_utf8_lossy(&out.stdout).to_string();
        println!("writer: {summary}");
        commits += field(&summary, "commits");
        errors += field(&summary, "errors");
    }
    for m in mounts {
        for line in m
            .log_text()
            .lines()
            .filter(|l| l.contains("WARN") || l.contains("ERROR"))
        {
            println!("{}: {line}", m.path.display());
        }
    }
    // the file is whole, and holds every commit a writer saw (and at most
    // those whose COMMIT reported an error besides)
    let check = ok(Command::new("python3").args([
        "-c",
        &format!(
            "import sqlite3; c = sqlite3.connect('{}'); \
             print(c.execute('PRAGMA integrity_check').fetchone()[0], c.execute('SELECT count(*) FROM t').fetchone()[0])",
            b.p("app.db").display()
        ),
    ]));
    let check = String::from_utf8_lossy(&check.stdout).trim().to_string();
    let (integrity, rows) = check.split_once(' ').unwrap();
    assert_eq!(integrity, "ok");
    let rows: u64 = rows.parse().unwrap();
    assert!(
        commits <= rows && rows <= commits + errors,
        "{rows} rows for {commits} commits seen ({errors} errors)"
    );
    // no lock or wait is left behind, and both sessions are the live ones
    assert_eq!(v.pg.sql("vol", "SELECT count(*) FROM jfs.plock"), "0");
    assert_eq!(v.pg.sql("vol", "SELECT count(*) FROM jfs.lock_wait"), "0");
    assert_eq!(v.pg.sql("vol", "SELECT count(*) FROM jfs.session"), "2");
    assert_eq!(v.pg.sql("vol", "SELECT count(*) FROM jfs.fsck()"), "0");
}

/// The holder of a lock on a mount that was cut off from the database for
/// longer than the session timeout (here: the mount stopped with SIGSTOP)
/// while the other mount went on: the other mount ends the silent session,
/// and the lock is free for others. When the cut-off mount comes back it
/// registers a new session and its handles that relied on the lost lock get
/// EIO (as NFS gives when a lease is lost), instead of writing on as if they
/// still held it.
#[test]
fn a_mount_cut_off_past_the_session_timeout_tells_the_handles_that_lost_their_locks() {
    let v = PrivateVolume::new("lostlocks", &[]);
    let opts = ["--session-timeout", "4", "--heartbeat", "1"];
    let a = v.mount("a", &opts);
    let b = v.mount("b", &opts);
    let go = v.base.join("go");
    // on a: lock f, write, then (once told) write and fsync again
    let holder = Command::new("python3")
        .args([
            "-c",
            r#"
import fcntl, os, sys, time
path, go = sys.argv[1], sys.argv[2]
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
os.pwrite(fd, b"locked", 0)
os.fsync(fd)
print("holding", flush=True)
while not os.path.exists(go):
    time.sleep(0.05)
for what, call in [("write", lambda: os.pwrite(fd, b"again", 0)), ("fsync", lambda: os.fsync(fd))]:
    try:
        call()
        print(what, "ok", flush=True)
    except OSError as e:
        print(what, e.errno, flush=True)
"#,
        ])
        .arg(a.p("f"))
        .arg(&go)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut holder = KillOnDrop(holder);
    let mut line = String::new();
    let mut out = std::io::BufReader::new(holder.0.stdout.take().unwrap());
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    assert_eq!(line.trim(), "holding");
    let try_lock = |m: &Mount| -> bool {
        Command::new("python3")
            .args([
                "-c",
                "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR); fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)",
            ])
            .arg(m.p("f"))
            .stderr(Stdio::null())
            .status()
            .unwrap()
            .success()
    };
    assert!(!try_lock(&b), "b cannot take the lock a holds");

    // a is cut off for three session timeouts: b ends its session
    ok(Command::new("kill").args(["-STOP", &a.pid.to_string()]));
    let freed = eventually(20, || try_lock(&b));
    ok(Command::new("kill").args(["-CONT", &a.pid.to_string()]));
    assert!(freed, "b ended a's silent session and its lock");

    // a comes back with a new session; the handle that held the lock is told
    assert!(
        eventually(20, || a.log_text().contains("registering again")),
        "a registered again"
    );
    assert!(
        eventually(10, || a
            .log_text()
            .contains("its locks went with the session")),
        "a told its locked files"
    );
    fs::write(&go, b"").unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    let eio = libc::EIO.to_string();
    assert_eq!(
        rest.split_whitespace().collect::<Vec<_>>(),
        ["write", eio.as_str(), "fsync", eio.as_str()],
        "the handle that lost its lock gets EIO"
    );
    // a new open on a works again
    fs::write(a.p("g"), b"fine").unwrap();
    assert_eq!(fs::read(b.p("g")).unwrap(), b"fine");
    // and a's connections name its new session, which the database takes
    // for the caller's (the change log, leases): none names the old one
    let stale = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
                 AND application_name ~ '^jfs:[0-9]+$' \
                 AND substring(application_name FROM 5)::bigint NOT IN (SELECT sid FROM jfs.session)";
    fs::write(a.p("h"), b"after").unwrap();
    fs::create_dir(a.p("d")).unwrap();
    assert_eq!(
        v.pg.sql("vol", stale),
        "0",
        "connections naming an ended session"
    );
    assert_eq!(
        v.pg.sql(
            "vol",
            "SELECT count(*) FROM jfs.change WHERE session IS NULL AND op = 'mkdir'"
        ),
        "0",
        "a's mkdir was logged as no session's"
    );
}

/// A child process killed when the test ends early.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
