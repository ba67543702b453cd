//! PostgreSQL clusters of a test's own (crash, failover, settings), and volumes on them.
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::volume::{mount_at, Mount};
use crate::{jfs, ok};

/// Runs a bash script with scripts/pg.sh's functions, from the repository.
pub fn pg_sh(script: &str) -> String {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = ok(Command::new("bash").current_dir(repo).args([
        "-c",
        &format!("set -euo pipefail; . scripts/pg.sh; {script}"),
    ]));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A private cluster in DIR/pg (socket there), stopped when dropped.
pub struct Cluster {
    pub dir: PathBuf,
    pub port: u16,
}

impl Cluster {
    /// Creates and starts a cluster in `dir` on a free port.
    pub fn start(dir: &Path) -> Cluster {
        let c = Cluster {
            dir: dir.to_path_buf(),
            port: pg_sh("free_port").parse().unwrap(),
        };
        pg_sh(&format!("cluster_start {} {}", c.dir.display(), c.port));
        c
    }

    /// A streaming hot standby of this cluster in `dir` (on its own socket
    /// and port), replicating as application_name `dir`'s base name.
    pub fn standby(&self, dir: &Path) -> Cluster {
        let c = Cluster {
            dir: dir.to_path_buf(),
            port: pg_sh("free_port").parse().unwrap(),
        };
        pg_sh(&format!(
            "cluster_standby {} {} {} {}",
            self.dir.display(),
            self.port,
            c.dir.display(),
            c.port
        ));
        c
    }

    /// The postmaster killed with SIGKILL, as a lost machine stops: its
    /// backends go with it (they notice the postmaster gone) and nothing is
    /// flushed or told to the standbys.
    pub fn kill9(&self) {
        let pid = std::fs::read_to_string(self.dir.join("data/postmaster.pid")).unwrap();
        let pid = pid.lines().next().unwrap().trim().to_string();
        ok(Command::new("kill").args(["-9", &pid]));
        let gone = crate::eventually(30, || !self.sql_ok("postgres", "SELECT 1"));
        assert!(gone, "the killed postmaster still answers");
    }

    /// A crash and restart (`-m immediate`, then start) made by a helper
    /// process started now, when [`CrashCue::crash`] says so. A process the
    /// test starts later would first close its copies of the test's open
    /// files, and on a mount each close flushes (in 'fsync' mode: syncs)
    /// the file: started before the files are opened, the helper has none.
    pub fn crash_on_cue(&self) -> CrashCue {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let ctl = format!(
            "as_postgres \"$PGBIN/pg_ctl\" -D {dir}/data -l {dir}/postgres.log -w -t 120",
            dir = self.dir.display()
        );
        let helper = Command::new("bash")
            .current_dir(repo)
            .args([
                "-c",
                &format!(
                    "set -euo pipefail; . scripts/pg.sh; read -r _; \
                     {ctl} -m immediate stop >/dev/null; {ctl} start >/dev/null; echo restarted"
                ),
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        CrashCue { helper }
    }

    /// Whether `sql` runs here (false when the server is down).
    pub fn sql_ok(&self, db: &str, sql: &str) -> bool {
        Command::new("psql")
            .args(["-XAtq", "-U", "postgres", "-p"])
            .arg(self.port.to_string())
            .arg("-h")
            .arg(&self.dir)
            .args(["-d", db, "-c", sql])
            .output()
            .is_ok_and(|o| o.status.success())
    }

    /// The host part of a META_URL for this cluster's socket: `%2F...:PORT`.
    pub fn host(&self) -> String {
        format!(
            "{}:{}",
            self.dir.to_str().unwrap().replace('/', "%2F"),
            self.port
        )
    }

    pub fn sql(&self, db: &str, sql: &str) -> String {
        let out = ok(Command::new("psql")
            .args(["-XAtq", "-v", "ON_ERROR_STOP=1", "-U", "postgres", "-p"])
            .arg(self.port.to_string())
            .arg("-h")
            .arg(&self.dir)
            .args(["-d", db, "-c", sql]));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    pub fn url(&self, role: &str, db: &str) -> String {
        let host = self.dir.to_str().unwrap().replace('/', "%2F");
        format!("postgres://{role}@{host}:{}/{db}", self.port)
    }

    /// Database `vol` for a shard of a volume (`jfs shard add`): the
    /// extension and login role `client` granted `jfs.grant_client`.
    pub fn make_shard_database(&self, client: &str) {
        make_database(|db, sql| self.sql(db, sql), client);
    }

    /// [`make_volume`] on this cluster.
    pub fn make_volume(&self, name: &str, client: &str, bucket: &Path, format_args: &[&str]) {
        make_volume(
            |db, sql| self.sql(db, sql),
            &self.url("postgres", "vol"),
            name,
            client,
            bucket,
            format_args,
        );
    }

    pub fn pg_ctl(&self, action: &str) {
        pg_sh(&format!(
            "as_postgres \"$PGBIN/pg_ctl\" -D {dir}/data -l {dir}/postgres.log -w -t 120 {action} >/dev/null",
            dir = self.dir.display()
        ));
    }
}

/// A crash of a cluster waiting for its cue ([`Cluster::crash_on_cue`]).
pub struct CrashCue {
    helper: std::process::Child,
}

impl CrashCue {
    /// Crashes the cluster and starts it again; returns once it is up.
    pub fn crash(mut self) {
        use std::io::{BufRead, Write};
        let mut stdin = self.helper.stdin.take().unwrap();
        writeln!(stdin, "crash").unwrap();
        drop(stdin);
        let mut line = String::new();
        let stdout = self.helper.stdout.take().unwrap();
        std::io::BufReader::new(stdout)
            .read_line(&mut line)
            .unwrap();
        let status = self.helper.wait().unwrap();
        assert!(
            status.success() && line.trim() == "restarted",
            "the crash helper failed ({status}): {line}"
        );
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
            .args([
                "-c",
                &format!(". scripts/pg.sh; cluster_stop {}", self.dir.display()),
            ])
            .status();
    }
}

/// Makes database `vol` of a server a test started (a [`Cluster`], a
/// [`crate::Formation`]'s primary) a volume named `name`: the extension,
/// login role `client` with `jfs.grant_client`, and `jfs format` as
/// `admin_url` (the server's URL as postgres, database `vol`) with its
/// bucket in `bucket` and `format_args`. `sql(DB, SQL)` runs a statement
/// on the server.
pub fn make_volume(
    sql: impl Fn(&str, &str) -> String,
    admin_url: &str,
    name: &str,
    client: &str,
    bucket: &Path,
    format_args: &[&str],
) {
    make_database(&sql, client);
    ok(jfs()
        .args(["format", admin_url, name, "--bucket"])
        .arg(bucket)
        .args(format_args));
}

/// Database `vol` with the extension and login role `client` granted
/// `jfs.grant_client` (a volume's, before `jfs format`; a shard's, before
/// `jfs shard add`).
fn make_database(sql: impl Fn(&str, &str) -> String, client: &str) {
    sql("postgres", "CREATE DATABASE vol");
    sql(
        "vol",
        &format!(
            "SET client_min_messages = warning; CREATE EXTENSION jfs; \
             CREATE ROLE {client} LOGIN; SELECT jfs.grant_client('{client}')"
        ),
    );
}

/// The role mounts of a [`PrivateVolume`] use (jfs.grant_client).
pub const PRIVATE_CLIENT: &str = "jfs_crash_client";

/// A private cluster (one the test may stop and start) with a formatted
/// volume in database `vol`, its bucket in DIR/bucket.
pub struct PrivateVolume {
    pub pg: Cluster,
    pub base: PathBuf,
    /// (last: the cluster stops before its directory goes)
    _tmp: tempfile::TempDir,
}

impl PrivateVolume {
    /// `settings`: lines for ALTER SYSTEM SET, applied before the volume is made.
    pub fn new(name: &str, settings: &[&str]) -> PrivateVolume {
        PrivateVolume::with_format(name, settings, &[])
    }

    /// [`PrivateVolume::new`], the volume formatted with `format_args` too.
    pub fn with_format(name: &str, settings: &[&str], format_args: &[&str]) -> PrivateVolume {
        let tmp = tempfile::Builder::new()
            .prefix(&format!("jfs-{name}-"))
            .tempdir()
            .unwrap();
        let base = tmp.path().to_path_buf();
        ok(Command::new("chmod").arg("755").arg(&base));
        let pg = Cluster::start(&base.join("pg"));
        for setting in settings {
            pg.sql("postgres", &format!("ALTER SYSTEM SET {setting}"));
        }
        pg.pg_ctl("restart");
        pg.make_volume(name, PRIVATE_CLIENT, &base.join("bucket"), format_args);
        PrivateVolume {
            _tmp: tmp,
            base,
            pg,
        }
    }

    /// A mount of the volume as the client role, in DIR/mnt-LABEL.
    pub fn mount(&self, label: &str, extra: &[&str]) -> Mount {
        mount_at(
            &self.pg.url(PRIVATE_CLIENT, "vol"),
            &self.base.join(format!("mnt-{label}")),
            &self.base.join(format!("mount-{label}.log")),
            extra,
        )
    }
}
