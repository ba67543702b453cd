//! Harness for the end-to-end tests: a fresh database per volume, `jfs format`,
//! `jfs mount -d` on a temporary directory, and unmount on drop.
//!
//! scripts/test.sh provides a private PostgreSQL (PGHOST = its socket
//! directory, PGPORT, PGUSER, JFS_TEST_PGDATA) and the built binary (JFS_BIN).
use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

pub fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: run the end-to-end tests through scripts/test.sh")
    })
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

/// Runs SQL in a database of the test cluster (as the superuser) and returns
/// psql's unaligned, tuples-only output.
pub fn psql(db: &str, sql: &str) -> String {
    let out =
        ok(Command::new("psql").args(["-XAtq", "-v", "ON_ERROR_STOP=1", "-d", db, "-c", sql]));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// META_URL of a database of the test cluster (unix socket), as the
/// superuser: for tests about administration.
pub fn meta_url(db: &str) -> String {
    meta_url_as(db, &env("PGUSER"))
}

/// META_URL of a database of the test cluster as `role`.
pub fn meta_url_as(db: &str, role: &str) -> String {
    let host = env("PGHOST").replace('/', "%2F");
    format!("postgres://{role}@{host}:{}/{db}", env("PGPORT"))
}

/// The role the tests mount and run the CLI as: `jfs.grant_client` only.
pub const CLIENT_ROLE: &str = "jfs_e2e_client";
/// The role of administration (format, quotas, tiers): `jfs.grant_admin`.
pub const ADMIN_ROLE: &str = "jfs_e2e_admin";
/// The role people query the volume with: `jfs.grant_reader`.
pub const READER_ROLE: &str = "jfs_e2e_reader";

/// Creates the test roles (login, no other attribute) unless they exist.
fn create_test_roles() {
    for role in [CLIENT_ROLE, ADMIN_ROLE, READER_ROLE] {
        login_role(role);
    }
}

/// Creates login role `role` (no other attribute) unless it exists.
pub fn login_role(role: &str) {
    psql(
        "postgres",
        &format!(
            "DO $$ BEGIN CREATE ROLE {role} LOGIN; \
             EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$"
        ),
    );
}

/// Runs SQL as `role` over the test cluster's socket, with `app_name` as
/// the connection's application_name; psql's output, or its error.
pub fn psql_as(role: &str, app_name: &str, db: &str, sql: &str) -> Result<String, String> {
    let out = Command::new("psql")
        .args([
            "-XAtq",
            "-v",
            "ON_ERROR_STOP=1",
            "-U",
            role,
            "-d",
            db,
            "-c",
            sql,
        ])
        .env("PGAPPNAME", app_name)
        .output()
        .unwrap();
    match out.status.success() {
        true => Ok(String::from_utf8_lossy(&out.stdout).trim().to_string()),
        false => Err(String::from_utf8_lossy(&out.stderr).trim().to_string()),
    }
}

/// The database of volume `name`.
fn database_name(name: &str) -> String {
    format!("jfs_e2e_{}", name.replace(['-', '.'], "_"))
}

/// Drops and makes again the (empty) database of volume `name`.
fn fresh_database(name: &str) -> String {
    let db = database_name(name);
    psql(
        "postgres",
        &format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"),
    );
    psql("postgres", &format!("CREATE DATABASE {db}"));
    db
}

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
/// with gc every second (objects of freed data deleted at once) and no
/// kernel caching unless `extra` asks for it.
pub fn mount_at(url: &str, path: &Path, log: &Path, extra: &[&str]) -> Mount {
    std::fs::create_dir_all(path).unwrap();
    let mut cmd = jfs();
    cmd.args(["mount", url])
        .arg(path)
        .args(["-d", "--gc-interval", "1", "--log"])
        .arg(log)
        .args(extra);
    for flag in ["--attr-cache", "--entry-cache", "--gc-delay"] {
        if !extra.contains(&flag) {
            cmd.args([flag, "0"]);
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
}

impl Drop for Mount {
    fn drop(&mut self) {
        self.unmount();
    }
}

/// Deterministic bytes (xorshift) so big files need no copy to compare with.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
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

/// An S3-compatible server (moto, from the venv scripts/setup.sh makes) on a
/// free loopback port; killed when dropped.
pub struct S3Server {
    pub endpoint: String,
    pub port: u16,
    child: Option<std::process::Child>,
}

fn venv() -> String {
    std::env::var("JFS_VENV").unwrap_or_else(|_| "/opt/jfs-test-venv".into())
}

impl S3Server {
    pub fn start() -> S3Server {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut s = S3Server {
            endpoint: format!("http://127.0.0.1:{port}"),
            port,
            child: None,
        };
        s.restart();
        s
    }

    /// Starts the server again on the same port (it forgets every object).
    pub fn restart(&mut self) {
        self.stop();
        let child = Command::new(format!("{}/bin/moto_server", venv()))
            .args(["-H", "127.0.0.1", "-p", &self.port.to_string()])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("moto_server: run scripts/setup.sh");
        self.child = Some(child);
        let up = eventually(20, || {
            std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok()
        });
        assert!(up, "moto_server did not start on port {}", self.port);
    }

    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Keys in a bucket (through boto3 from the same venv) but volumes'
    /// markers (`NAME/juicefs_uuid`): the blocks.
    pub fn keys(&self, bucket: &str) -> Vec<String> {
        let code = format!(
            "import boto3\n\
             s3 = boto3.client('s3', endpoint_url='{}', aws_access_key_id='testing', \
             aws_secret_access_key='testing', region_name='us-east-1')\n\
             for page in s3.get_paginator('list_objects_v2').paginate(Bucket='{bucket}'):\n    \
             [print(o['Key']) for o in page.get('Contents', [])]\n",
            self.endpoint
        );
        let out = ok(Command::new(format!("{}/bin/python", venv())).args(["-c", &code]));
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|k| !k.ends_with("/juicefs_uuid"))
            .map(str::to_string)
            .collect()
    }
}

impl S3Server {
    /// Each object's storage class as HeadObject reports it ("STANDARD" when
    /// the server says none), by key.
    pub fn classes(&self, bucket: &str) -> Vec<(String, String)> {
        let code = format!(
            "import boto3\n\
             s3 = boto3.client('s3', endpoint_url='{}', aws_access_key_id='testing', \
             aws_secret_access_key='testing', region_name='us-east-1')\n\
             for page in s3.get_paginator('list_objects_v2').paginate(Bucket='{bucket}'):\n    \
             for o in page.get('Contents', []):\n        \
             h = s3.head_object(Bucket='{bucket}', Key=o['Key'])\n        \
             print(o['Key'], h.get('StorageClass', 'STANDARD'))\n",
            self.endpoint
        );
        let out = ok(Command::new(format!("{}/bin/python", venv())).args(["-c", &code]));
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(k, c)| (k.to_string(), c.to_string()))
            .collect()
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A PgBouncer (Debian's package) in front of the test cluster, on a
/// loopback port, trusting the test roles; stopped when dropped.
pub struct PgBouncer {
    pub port: u16,
    dir: tempfile::TempDir,
    child: std::process::Child,
}

impl PgBouncer {
    /// Starts one in `pool_mode` (session, transaction, statement).
    pub fn start(pool_mode: &str) -> PgBouncer {
        let dir = tempfile::Builder::new()
            .prefix("jfs-e2e-pgbouncer-")
            .tempdir()
            .unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let users: String = [CLIENT_ROLE, ADMIN_ROLE, READER_ROLE]
            .iter()
            .map(|r| format!("\"{r}\" \"\"\n"))
            .collect();
        std::fs::write(dir.path().join("users.txt"), users).unwrap();
        let d = dir.path().display();
        let ini = format!(
            "[databases]\n* = host={} port={}\n\n[pgbouncer]\nlisten_addr = 127.0.0.1\n\
             listen_port = {port}\nunix_socket_dir =\nauth_type = trust\n\
             auth_file = {d}/users.txt\npool_mode = {pool_mode}\ndefault_pool_size = 3\n\
             max_client_conn = 500\nlogfile = {d}/pgbouncer.log\n",
            env("PGHOST"),
            env("PGPORT")
        );
        std::fs::write(dir.path().join("pgbouncer.ini"), ini).unwrap();
        // it will not run as root: as postgres, which must read its files
        ok(Command::new("chown")
            .arg("-R")
            .arg("postgres")
            .arg(dir.path()));
        let child = Command::new("/usr/sbin/pgbouncer")
            .args(["-u", "postgres"])
            .arg(dir.path().join("pgbouncer.ini"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("starting pgbouncer (installed by scripts/setup.sh)");
        let up = eventually(10, || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        assert!(up, "pgbouncer did not listen on {port}");
        PgBouncer { port, dir, child }
    }

    /// META_URL of database `db` through this pooler as `role`, with
    /// `pgbouncer=true` (no named prepared statements).
    pub fn meta_url_as(&self, db: &str, role: &str) -> String {
        format!(
            "postgres://{role}@127.0.0.1:{}/{db}?pgbouncer=true",
            self.port
        )
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("pgbouncer.log")).unwrap_or_default()
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// xorshift64*, for the random-op tests: small, fast and the same
/// everywhere, so a seed reruns a run.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [0, n).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// An index into something of `len` elements (0 when empty).
    pub fn index(&mut self, len: usize) -> usize {
        self.below(len as u64) as usize
    }
}

/// Everything of one entry a faithful copy keeps: type and mode, owner,
/// size, mtime to the nanosecond, the bytes or the link target, the other
/// names of its inode (hard links), and every xattr (ACLs included) by value.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub mode: String,
    pub owner: (u32, u32),
    pub size: u64,
    pub rdev: u64,
    pub mtime: (i64, i64),
    pub content: Vec<u8>,
    pub links: Vec<String>,
    pub xattrs: Vec<(String, Vec<u8>)>,
}

pub fn xattrs(path: &Path) -> Vec<(String, Vec<u8>)> {
    let mut names = vec![0u8; 65536];
    let n = rustix::fs::llistxattr(path, &mut names).unwrap();
    let mut out: Vec<(String, Vec<u8>)> = names[..n]
        .split(|b| *b == 0)
        .filter(|name| !name.is_empty())
        .map(|name| {
            let name = String::from_utf8_lossy(name).to_string();
            let mut value = vec![0u8; 65536];
            let len = rustix::fs::lgetxattr(path, name.as_str(), &mut value).unwrap();
            value.truncate(len);
            (name, value)
        })
        .collect();
    out.sort();
    out
}

/// Every entry under `root` by its path relative to it (bytes that are not
/// printable ASCII escaped, as `\xff`, `\n`).
pub fn snapshot(root: &Path) -> BTreeMap<String, Entry> {
    // (the relative path, its name for people: bytes that are not UTF-8 escaped)
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(PathBuf, String, fs::Metadata)>) {
        for e in fs::read_dir(dir).unwrap() {
            let path = e.unwrap().path();
            let meta = fs::symlink_metadata(&path).unwrap();
            let rel = path.strip_prefix(root).unwrap().to_path_buf();
            let key = rel.as_os_str().as_bytes().escape_ascii().to_string();
            out.push((rel, key, meta.clone()));
            if meta.is_dir() {
                walk(root, &path, out);
            }
        }
    }
    let mut all = Vec::new();
    walk(root, root, &mut all);
    let mut by_inode: HashMap<u64, Vec<String>> = HashMap::new();
    for (_, key, meta) in &all {
        if !meta.is_dir() {
            by_inode.entry(meta.ino()).or_default().push(key.clone());
        }
    }
    all.iter()
        .map(|(rel, key, meta)| {
            let path = root.join(rel);
            let content = if meta.is_file() {
                fs::read(&path).unwrap()
            } else if meta.file_type().is_symlink() {
                fs::read_link(&path).unwrap().into_os_string().into_vec()
            } else {
                Vec::new()
            };
            let mut links = by_inode.get(&meta.ino()).cloned().unwrap_or_default();
            links.sort();
            let entry = Entry {
                mode: format!("{:o}", meta.mode()),
                owner: (meta.uid(), meta.gid()),
                size: if meta.is_dir() { 0 } else { meta.len() },
                rdev: meta.rdev(),
                mtime: (meta.mtime(), meta.mtime_nsec()),
                content,
                links,
                xattrs: xattrs(&path),
            };
            (key.clone(), entry)
        })
        .collect()
}

/// Asserts `copy` holds exactly what `source` does, naming what differs.
pub fn assert_same_tree(tool: &str, source: &Path, copy: &Path) {
    let want = snapshot(source);
    let got = snapshot(copy);
    let names = |t: &BTreeMap<String, Entry>| t.keys().cloned().collect::<Vec<_>>();
    assert_eq!(names(&want), names(&got), "{tool}: the names differ");
    for (rel, w) in &want {
        let g = &got[rel];
        assert!(
            w == g,
            "{tool}: {rel} differs:\n  source {:?}\n  copy   {:?}",
            Entry {
                content: Vec::new(),
                ..w.clone()
            },
            Entry {
                content: Vec::new(),
                ..g.clone()
            },
        );
        assert_eq!(w.content, g.content, "{tool}: content of {rel}");
    }
}

/// A tree with what copies tend to lose: special mode bits, other owners,
/// nanosecond times on files, directories and symlinks, hard links,
/// symlinks (one dangling), a fifo, user xattrs, access and default ACLs.
pub fn make_varied_tree(src: &Path) {
    for d in ["bin", "shared", "team", "team/inner", "private", "empty"] {
        fs::create_dir_all(src.join(d)).unwrap();
    }
    let files: [(&str, &str, &str, usize); 9] = [
        ("readme", "0644", "0:0", 5_000),
        ("private/key", "0600", "1000:1000", 64),
        ("bin/tool", "0755", "0:0", 70_000),
        ("bin/setuid", "4755", "0:0", 10),
        ("bin/setgid", "2751", "0:50", 10),
        ("shared/big", "0664", "1234:5678", 3 * 1024 * 1024 + 17),
        ("shared/empty", "0444", "0:0", 0),
        ("team/notes", "0660", "1000:100", 300),
        ("team/inner/deep", "0640", "4294967294:1", 1),
    ];
    for (i, (rel, mode, owner, len)) in files.iter().enumerate() {
        let path = src.join(rel);
        fs::write(&path, pattern(i as u64 + 1, *len)).unwrap();
        ok(Command::new("chown").arg(owner).arg(&path));
        ok(Command::new("chmod").arg(mode).arg(&path));
    }
    fs::hard_link(src.join("readme"), src.join("bin/readme-hard")).unwrap();
    fs::hard_link(src.join("readme"), src.join("team/readme-too")).unwrap();
    std::os::unix::fs::symlink("../bin/tool", src.join("shared/tool-link")).unwrap();
    std::os::unix::fs::symlink("nowhere/at/all", src.join("dangling")).unwrap();
    ok(Command::new("chown")
        .args(["-h", "1000:1000"])
        .arg(src.join("dangling")));
    ok(Command::new("mkfifo").arg(src.join("team/pipe")));
    for (rel, name, value) in [
        ("readme", "user.color", &b"blue"[..]),
        ("readme", "user.empty", b""),
        ("shared/big", "user.checksum", b"\x00\x01binary\xff"),
        ("team", "user.owner", b"team"),
    ] {
        rustix::fs::lsetxattr(src.join(rel), name, value, rustix::fs::XattrFlags::empty()).unwrap();
    }
    ok(Command::new("setfacl")
        .args(["-m", "u:1000:rw,g:2000:r"])
        .arg(src.join("team/notes")));
    ok(Command::new("setfacl")
        .args(["-m", "u:1000:rwx,d:u:1000:rwx,d:g::r-x,d:o::---"])
        .arg(src.join("team")));
    ok(Command::new("chmod").arg("1777").arg(src.join("shared")));
    ok(Command::new("chmod")
        .arg("2770")
        .arg(src.join("team/inner")));
    ok(Command::new("chmod").arg("0700").arg(src.join("private")));
    // times last, deepest first, so no later change moves them
    let mut all: Vec<PathBuf> = Vec::new();
    ok(Command::new("find").arg(src).arg("-depth").arg("-print0"))
        .stdout
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .for_each(|p| all.push(PathBuf::from(std::ffi::OsStr::from_bytes(p))));
    for (i, path) in all.iter().enumerate() {
        ok(Command::new("touch")
            .arg("-h")
            .args([
                "-d",
                &format!(
                    "2011-0{}-0{} 10:10:10.{:09}",
                    i % 9 + 1,
                    i % 7 + 1,
                    123_456_789 + i
                ),
            ])
            .arg(path));
    }
}

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

    pub fn pg_ctl(&self, action: &str) {
        pg_sh(&format!(
            "as_postgres \"$PGBIN/pg_ctl\" -D {dir}/data -l {dir}/postgres.log -w -t 120 {action} >/dev/null",
            dir = self.dir.display()
        ));
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

/// The role mounts of a [`PrivateVolume`] use (jfs.grant_client).
pub const PRIVATE_CLIENT: &str = "jfs_crash_client";

/// A private cluster (one the test may stop and start) with a formatted
/// volume in database `vol`, its bucket in DIR/bucket.
pub struct PrivateVolume {
    _tmp: tempfile::TempDir,
    pub base: PathBuf,
    pub pg: Cluster,
}

impl PrivateVolume {
    /// `settings`: lines for ALTER SYSTEM SET, applied before the volume is made.
    pub fn new(name: &str, settings: &[&str]) -> PrivateVolume {
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
        pg.sql("postgres", "CREATE DATABASE vol");
        pg.sql(
            "vol",
            &format!(
                "SET client_min_messages = warning; CREATE EXTENSION jfs; \
                 CREATE ROLE {PRIVATE_CLIENT} LOGIN; SELECT jfs.grant_client('{PRIVATE_CLIENT}')"
            ),
        );
        ok(jfs()
            .args(["format", &pg.url("postgres", "vol"), name, "--bucket"])
            .arg(base.join("bucket")));
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
