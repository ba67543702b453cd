//! PgBouncer in front of the test cluster, for mounts through a connection pooler.
use std::process::Command;

use crate::db::{ADMIN_ROLE, CLIENT_ROLE, READER_ROLE};
use crate::{env, eventually, ok};

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
        let server = (env("PGHOST"), env("PGPORT"));
        PgBouncer::start_for(pool_mode, server, &[CLIENT_ROLE, ADMIN_ROLE, READER_ROLE])
    }

    /// Starts one in `pool_mode` in front of the server at `server` (host
    /// or socket directory, port), trusting `roles`.
    pub fn start_for(pool_mode: &str, server: (String, String), roles: &[&str]) -> PgBouncer {
        let dir = tempfile::Builder::new()
            .prefix("jfs-e2e-pgbouncer-")
            .tempdir()
            .unwrap();
        // a port chosen here may be taken before pgbouncer binds it: then it
        // exits, and it is tried again on another
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let mut child = spawn(&dir, pool_mode, port, &server, roles);
            let log = dir.path().join("pgbouncer.log");
            let listening = format!("listening on 127.0.0.1:{port}");
            let settled = eventually(10, || {
                std::fs::read_to_string(&log).is_ok_and(|l| l.contains(&listening))
                    || child.try_wait().ok().flatten().is_some()
            });
            assert!(settled, "pgbouncer neither listened on {port} nor exited");
            if child.try_wait().unwrap().is_none() {
                return PgBouncer { port, dir, child };
            }
        }
        panic!(
            "pgbouncer could not listen on a free port: {}",
            std::fs::read_to_string(dir.path().join("pgbouncer.log")).unwrap_or_default()
        );
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

/// Writes DIR/pgbouncer.ini for `port` (in front of `server`, trusting
/// `roles`) and starts pgbouncer on it.
fn spawn(
    dir: &tempfile::TempDir,
    pool_mode: &str,
    port: u16,
    server: &(String, String),
    roles: &[&str],
) -> std::process::Child {
    let users: String = roles.iter().map(|r| format!("\"{r}\" \"\"\n")).collect();
    std::fs::write(dir.path().join("users.txt"), users).unwrap();
    let d = dir.path().display();
    let ini = format!(
        "[databases]\n* = host={} port={}\n\n[pgbouncer]\nlisten_addr = 127.0.0.1\n\
         listen_port = {port}\nunix_socket_dir =\nauth_type = trust\n\
         auth_file = {d}/users.txt\npool_mode = {pool_mode}\ndefault_pool_size = 3\n\
         max_client_conn = 500\nlogfile = {d}/pgbouncer.log\n",
        server.0, server.1
    );
    std::fs::write(dir.path().join("pgbouncer.ini"), ini).unwrap();
    // it will not run as root: as postgres, which must read its files
    ok(Command::new("chown")
        .arg("-R")
        .arg("postgres")
        .arg(dir.path()));
    Command::new("/usr/sbin/pgbouncer")
        .args(["-u", "postgres"])
        .arg(dir.path().join("pgbouncer.ini"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("starting pgbouncer (installed by scripts/setup.sh)")
}
