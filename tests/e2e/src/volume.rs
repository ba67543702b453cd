//! A formatted volume in its own database and block directory, and its mounts (`jfs mount -d`, unmounted on drop).
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::db::{
    create_test_roles, fresh_database, meta_url, meta_url_as, psql, ADMIN_ROLE, CLIENT_ROLE,
    READER_ROLE,
};
use crate::s3::S3Server;
use crate::{jfs, ok};

/// A formatted volume in its own database, with its own block directory.
pub struct Volume {
    pub db: String,
    /// META_URL as [`CLIENT_ROLE`]: what mounts and the CLI use.
    pub url: String,
    /// META_URL as [`ADMIN_ROLE`]: format, quotas, tiers.
    pub admin_url: String,
    pub dir: tempfile::TempDir,
}

impl Volume {
    /// A new volume "name" (the database is dropped and made again).
    pub fn new(name: &str) -> Volume {
        Volume::with_options(name, &[])
    }

    pub fn with_options(name: &str, format_args: &[&str]) -> Volume {
        let dir = tempfile::Builder::new()
            .prefix("jfs-e2e-")
            .tempdir()
            .unwrap();
        let bucket = dir.path().join("bucket");
        let bucket = bucket.to_str().unwrap().to_string();
        let mut args = vec!["--storage", "file", "--bucket", bucket.as_str()];
        args.extend_from_slice(format_args);
        Volume::format(name, dir, &args)
    }

    /// A volume whose blocks live in `server`'s bucket `bucket`.
    pub fn s3(name: &str, server: &S3Server, bucket: &str) -> Volume {
        Volume::s3_at(name, &server.endpoint, bucket)
    }

    /// A volume whose blocks live in bucket `bucket` of the S3 endpoint
    /// `endpoint` (`http://host:port`).
    pub fn s3_at(name: &str, endpoint: &str, bucket: &str) -> Volume {
        let dir = tempfile::Builder::new()
            .prefix("jfs-e2e-")
            .tempdir()
            .unwrap();
        let url = format!("{endpoint}/{bucket}");
        let args = [
            "--storage",
            "s3",
            "--bucket",
            &url,
            "--access-key",
            "testing",
            "--secret-key",
            "testing",
        ];
        Volume::format(name, dir, &args)
    }

    /// A volume (blocks in a directory) made on extension version `version`,
    /// a release frozen in migrations/, with that release's own SQL
    /// (`jfs.format`), not with this client (which may not support it).
    pub fn on_release(name: &str, version: &str) -> Volume {
        let dir = tempfile::Builder::new()
            .prefix("jfs-e2e-")
            .tempdir()
            .unwrap();
        let db = fresh_database(name);
        let bucket = dir.path().join("bucket");
        std::fs::create_dir_all(&bucket).unwrap();
        let errno = psql(
            &db,
            &format!(
                "SET client_min_messages = warning; CREATE EXTENSION jfs VERSION '{version}'; \
                 SELECT errno FROM jfs.format('{name}', 'file', '{}')",
                bucket.display()
            ),
        );
        assert_eq!(errno, "0", "jfs.format of {version}");
        // an upgrade is administration: its tests grant roles themselves
        let url = meta_url(&db);
        let admin_url = url.clone();
        Volume {
            db,
            url,
            admin_url,
            dir,
        }
    }

    /// A database granted as by [`Volume::granted`], then `jfs format` as the
    /// admin role.
    fn format(name: &str, dir: tempfile::TempDir, format_args: &[&str]) -> Volume {
        let v = Volume::granted(name, dir);
        let mut cmd = jfs();
        cmd.args(["format", &v.admin_url, name]).args(format_args);
        ok(&mut cmd);
        v
    }

    /// A database with the extension and the test roles' grants but no
    /// volume yet (for `jfs load`).
    pub fn unformatted(name: &str) -> Volume {
        let dir = tempfile::Builder::new()
            .prefix("jfs-e2e-")
            .tempdir()
            .unwrap();
        Volume::granted(name, dir)
    }

    /// The database made again, the extension created and the test roles
    /// granted by the superuser, as a DBA would.
    fn granted(name: &str, dir: tempfile::TempDir) -> Volume {
        let db = fresh_database(name);
        create_test_roles();
        psql(
            &db,
            &format!(
                "SET client_min_messages = warning; CREATE EXTENSION jfs; \
                 SELECT jfs.grant_client('{CLIENT_ROLE}'), jfs.grant_admin('{ADMIN_ROLE}'), \
                        jfs.grant_reader('{READER_ROLE}')"
            ),
        );
        Volume {
            url: meta_url_as(&db, CLIENT_ROLE),
            admin_url: meta_url_as(&db, ADMIN_ROLE),
            db,
            dir,
        }
    }

    pub fn bucket(&self) -> PathBuf {
        self.dir.path().join("bucket")
    }

    /// Every object file in the bucket but the volume's marker
    /// (`NAME/juicefs_uuid`): the blocks.
    pub fn objects(&self) -> Vec<PathBuf> {
        fn walk(p: &Path, out: &mut Vec<PathBuf>) {
            if let Ok(rd) = std::fs::read_dir(p) {
                for e in rd.flatten() {
                    let path = e.path();
                    if path.is_dir() {
                        walk(&path, out);
                    } else if path.file_name().is_some_and(|n| n != "juicefs_uuid") {
                        out.push(path);
                    }
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.bucket(), &mut out);
        out.sort();
        out
    }

    /// Mounts the volume on a new directory.
    pub fn mount(&self, label: &str, extra: &[&str]) -> Mount {
        self.mount_url(label, &self.url, extra)
    }

    /// A mount in DIR/mnt-LABEL with kernel and mount cache times of
    /// `secs` seconds, as real mounts have (the tests' default is none),
    /// and `extra` options; and the address of its metrics.
    pub fn mount_with_caches(&self, label: &str, secs: &str, extra: &[&str]) -> (Mount, String) {
        let addr = crate::free_metrics_addr();
        let mut options = vec![
            "--metrics",
            &addr,
            "--attr-cache",
            secs,
            "--entry-cache",
            secs,
        ];
        options.extend_from_slice(extra);
        (self.mount(label, &options), addr)
    }

    /// Mounts the volume with variables set in the mount's environment.
    pub fn mount_with_env(&self, label: &str, extra: &[&str], env: &[(&str, &str)]) -> Mount {
        let path = self.dir.path().join(format!("mnt-{label}"));
        let log = self.dir.path().join(format!("mount-{label}.log"));
        mount_at_with_env(&self.url, &path, &log, extra, env)
    }

    /// Mounts through another META_URL (e.g. a connection pooler's).
    pub fn mount_url(&self, label: &str, url: &str, extra: &[&str]) -> Mount {
        let path = self.dir.path().join(format!("mnt-{label}"));
        let log = self.dir.path().join(format!("mount-{label}.log"));
        mount_at(url, &path, &log, extra)
    }

    /// Runs SQL in this volume's database as the superuser (what tests
    /// check and set up behind the file system's back).
    pub fn sql(&self, sql: &str) -> String {
        psql(&self.db, sql)
    }

    /// How many slices were ever kept in the database (`jfs.inline_data`'s
    /// inserts, as PostgreSQL counts them): waits up to 10 s for at least
    /// `at_least` (the mounts' backends report as they end).
    pub fn slices_ever_kept(&self, at_least: u64) -> u64 {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let kept: u64 = self
                .sql("SELECT n_tup_ins FROM pg_stat_user_tables WHERE relid = 'jfs.inline_data'::regclass")
                .parse()
                .unwrap();
            if kept >= at_least || std::time::Instant::now() > deadline {
                return kept;
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }

    /// Makes directory /`dir` with `count` files f1, f2, ... (fI is I bytes
    /// long, of holes) in SQL, behind the mounts' backs: none has seen them.
    pub fn files_in_sql(&self, dir: &str, count: usize) {
        self.sql(&format!(
            "SELECT count(*) FROM jfs.mknod(1, '{dir}', 2, 493, 0, 0); \
             SELECT count(*) FROM generate_series(1, {count}) i, \
                    LATERAL jfs.mknod(jfs.resolve('/{dir}'), convert_to('f' || i, 'UTF8'), 1, 420, 0, 0) f, \
                    LATERAL jfs.setattr(f.inode, 8, p_length => i)"
        ));
    }

    /// Runs SQL in this volume's database as [`READER_ROLE`]: the people's
    /// queries (usage, quotas, tiers) with the reader's grant only.
    pub fn reader_sql(&self, sql: &str) -> String {
        let out = ok(Command::new("psql").args([
            "-XAtq",
            "-v",
            "ON_ERROR_STOP=1",
            "-U",
            READER_ROLE,
            "-d",
            &self.db,
            "-c",
            sql,
        ]));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

/// `jfs mount -d` of `url` on `path` (made if missing), logging to `log`,
/// with gc every second (objects of freed data deleted at once), no
/// kernel caching and a disk cache (if any) without a free-space floor,
/// unless `extra` says otherwise.
pub fn mount_at(url: &str, path: &Path, log: &Path, extra: &[&str]) -> Mount {
    mount_at_with_env(url, path, log, extra, &[])
}

/// [`mount_at`] with variables set in the mount's environment.
pub fn mount_at_with_env(
    url: &str,
    path: &Path,
    log: &Path,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Mount {
    std::fs::create_dir_all(path).unwrap();
    let mut cmd = jfs();
    cmd.envs(env.iter().copied());
    cmd.args(["mount", url])
        .arg(path)
        .args(["-d", "--log"])
        .arg(log)
        .args(extra);
    // a disk cache caches whatever room the machine's disk has left: a
    // test's cache must not depend on how full the build left the disk
    let free_space = extra
        .contains(&"--cache-dir")
        .then_some(("--free-space-ratio", "0"));
    for (flag, value) in [
        ("--attr-cache", "0"),
        ("--entry-cache", "0"),
        ("--gc-delay", "0"),
        ("--gc-interval", "1"),
    ]
    .into_iter()
    .chain(free_space)
    {
        if !extra.contains(&flag) {
            cmd.args([flag, value]);
        }
    }
    let out = ok(&mut cmd);
    // "jfs mounted at PATH (pid N, log FILE)"
    let text = String::from_utf8_lossy(&out.stdout);
    let pid = text
        .split("(pid ")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    Mount {
        path: path.to_path_buf(),
        log: log.to_path_buf(),
        pid,
    }
}

/// Whether `path` is a mount point now.
pub fn is_mounted(path: &Path) -> bool {
    let Ok(path) = path.canonicalize() else {
        return false;
    };
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    let path = path.to_string_lossy().replace(' ', "\\040");
    info.lines()
        .any(|l| l.split(' ').nth(4) == Some(path.as_str()))
}

/// A mounted volume; unmounted when dropped.
pub struct Mount {
    pub path: PathBuf,
    pub log: PathBuf,
    /// The background mount process.
    pub pid: u32,
}

impl Mount {
    pub fn p(&self, rel: &str) -> PathBuf {
        self.path.join(rel)
    }

    /// The names directory `rel` lists on this mount.
    pub fn names(&self, rel: &str) -> std::collections::BTreeSet<String> {
        std::fs::read_dir(self.p(rel))
            .unwrap_or_else(|e| panic!("readdir {rel} on {}: {e}", self.path.display()))
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect()
    }

    /// Kills the mount process as a crash would (no unmount, no session close).
    pub fn crash(&self) {
        assert!(self.pid > 0, "unknown mount pid");
        ok(Command::new("kill").args(["-9", &self.pid.to_string()]));
        let _ = Command::new("fusermount3")
            .arg("-uz")
            .arg(&self.path)
            .status();
    }

    /// Unmounts and waits until the mount process has let go.
    pub fn unmount(&self) {
        if !is_mounted(&self.path) {
            return;
        }
        let out = jfs().arg("umount").arg(&self.path).output().unwrap();
        if !out.status.success() {
            let _ = Command::new("fusermount3")
                .arg("-uz")
                .arg(&self.path)
                .status();
        }
        // wait until the mount process has closed its session
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            if log.matches("unmounted").count() >= log.matches("mounting volume").count() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The last `n` lines of the mount's log, for a failure message.
    pub fn log_tail(&self, n: usize) -> String {
        let text = self.log_text();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    /// The last `n` warnings and errors of the mount's log (what a failed
    /// fault test prints: the moment that failed may be long before the end).
    pub fn log_warnings(&self, n: usize) -> String {
        let text = self.log_text();
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| l.contains(" WARN ") || l.contains(" ERROR "))
            .collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        self.unmount();
    }
}
