//! A pg_auto_failover formation on this machine (a monitor and two PostgreSQL nodes, each run by a pg_autoctl of its own), so failover tests meet a real failover manager.
use std::path::PathBuf;
use std::process::Command;

use crate::cluster::pg_sh;
use crate::{eventually, ok};

/// Where the nodes' sockets are (the Debian build's default).
const SOCKETS: &str = "/var/run/postgresql";

/// A monitor and nodes `a` and `b` (the first primary, the second its
/// synchronous standby), each pg_autoctl in a session of its own; all of
/// it killed when dropped. Nodes take connections on their sockets in
/// [`SOCKETS`]; pg_autoctl's own connections trust loopback (`--auth trust`).
pub struct Formation {
    pub base: PathBuf,
    monitor_port: u16,
    /// (name, port) of each node.
    pub nodes: Vec<(&'static str, u16)>,
    /// (removed after Drop has killed every process that uses it)
    _tmp: tempfile::TempDir,
}

impl Formation {
    /// Starts the monitor (its health checks every second, a node unhealthy
    /// after 3 s, an unreachable primary counted as demoted after 10 s: the
    /// defaults take 20 s and 30 s), then node `a`, then node `b`, and
    /// waits until `a` is primary and `b` its secondary.
    pub fn start(name: &str) -> Formation {
        let tmp = tempfile::Builder::new()
            .prefix(&format!("jfs-{name}-"))
            .tempdir()
            .unwrap();
        let base = tmp.path().to_path_buf();
        ok(Command::new("chown").arg("postgres").arg(&base));
        let free = || -> u16 { pg_sh("free_port").parse().unwrap() };
        let f = Formation {
            _tmp: tmp,
            base,
            monitor_port: free(),
            nodes: vec![("a", free()), ("b", free())],
        };
        f.autoctl(
            "monitor",
            &format!(
                "create monitor --pgdata {} --pgport {} --hostname localhost --auth trust --no-ssl --run",
                f.pgdata("monitor"),
                f.monitor_port
            ),
        );
        let monitor_up = eventually(60, || {
            f.monitor_sql_ok("SELECT 1 FROM pgautofailover.formation")
        });
        assert!(
            monitor_up,
            "the monitor did not start: {}",
            f.log("monitor")
        );
        for setting in [
            "health_check_period = 1000",
            "health_check_timeout = 1000",
            "health_check_max_retries = 1",
            "health_check_retry_delay = 500",
            "node_considered_unhealthy_timeout = 3000",
            "primary_demote_timeout = 10000",
        ] {
            f.monitor_sql(&format!("ALTER SYSTEM SET pgautofailover.{setting}"));
        }
        f.monitor_sql("SELECT pg_reload_conf()");
        // a alone is "single"; with b it is b's primary
        for (node, want) in [("a", "a:single:single"), ("b", "b:secondary:secondary")] {
            f.keeper(node, true);
            let ready = eventually(120, || f.states().contains(want));
            assert!(
                ready,
                "node {node} never became {want}: {}\n{}",
                f.states(),
                f.log(node)
            );
        }
        let ready = eventually(60, || f.states().contains("a:primary:primary"));
        assert!(ready, "a never became b's primary: {}", f.states());
        f
    }

    fn pgdata(&self, node: &str) -> String {
        self.base.join(node).display().to_string()
    }

    fn log(&self, node: &str) -> String {
        std::fs::read_to_string(self.base.join(format!("{node}.log"))).unwrap_or_default()
    }

    /// Runs `pg_autoctl ARGS` as postgres in a session of its own (so that
    /// losing a node kills its keeper, the keeper's helpers and its
    /// postgres together), logging to BASE/LABEL.log.
    fn autoctl(&self, label: &str, args: &str) {
        let base = self.base.display();
        pg_sh(&format!(
            "cd {base}; as_postgres {} setsid -f pg_autoctl {args} >>{base}/{label}.log 2>&1 </dev/null",
            self.env()
        ));
    }

    /// What every pg_autoctl of this formation runs with: its configuration
    /// and state under BASE, PostgreSQL 15's binaries first, and none of the
    /// test's PG* variables (they would point it at the test cluster).
    fn env(&self) -> String {
        let base = self.base.display();
        format!(
            "env -u PGHOST -u PGPORT -u PGUSER -u PGDATABASE -u PGDATA \
             XDG_CONFIG_HOME={base}/xdg-config XDG_DATA_HOME={base}/xdg-data PATH=\"$PGBIN:$PATH\""
        )
    }

    /// Starts node `name`'s keeper: creating the node the first time, else
    /// running it again (it rejoins as a standby).
    pub fn keeper(&self, name: &str, create: bool) {
        let port = self.port(name);
        let args = match create {
            true => format!(
                "create postgres --pgdata {} --pgport {port} --hostname localhost --name {name} \
                 --monitor postgres://autoctl_node@localhost:{}/pg_auto_failover?sslmode=disable \
                 --auth trust --no-ssl --run",
                self.pgdata(name),
                self.monitor_port
            ),
            false => format!("run --pgdata {}", self.pgdata(name)),
        };
        self.autoctl(name, &args);
    }

    pub fn port(&self, name: &str) -> u16 {
        self.nodes.iter().find(|(n, _)| *n == name).unwrap().1
    }

    /// Every node as `name:reported:goal`, in node order.
    pub fn states(&self) -> String {
        self.monitor_sql(
            "SELECT string_agg(nodename || ':' || reportedstate || ':' || goalstate, ' ' ORDER BY nodeid) \
             FROM pgautofailover.node",
        )
    }

    /// The node whose server takes writes now, if one does.
    pub fn primary(&self) -> Option<&'static str> {
        self.nodes
            .iter()
            .find(|(n, _)| self.sql_ok(n, "postgres", "SELECT 1 WHERE NOT pg_is_in_recovery()"))
            .map(|(n, _)| *n)
    }

    /// Node `name` lost as a machine is lost: its keeper and its postgres
    /// killed with SIGKILL, and nothing restarts them.
    pub fn lose(&self, name: &str) {
        let sessions = self.sessions(name);
        assert!(!sessions.is_empty(), "no keeper of node {name}");
        for sid in sessions {
            ok(Command::new("pkill").args(["-9", "-s", &sid]));
        }
        let gone = eventually(30, || !self.sql_ok(name, "postgres", "SELECT 1"));
        assert!(gone, "node {name} still answers");
    }

    /// The sessions of node `name`'s keepers (each its session's leader).
    fn sessions(&self, name: &str) -> Vec<String> {
        let leader = format!("pg_autoctl .*--pgdata {}( |$)", self.pgdata(name));
        let out = Command::new("pgrep")
            .args(["-f", &leader])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(str::to_string)
            .collect()
    }

    /// A planned switchover: the monitor makes the secondary primary (once
    /// the formation is stable: one primary, one secondary).
    pub fn switchover(&self) {
        let stable = eventually(60, || {
            let states = self.states();
            states.matches(":primary:primary").count() == 1
                && states.matches(":secondary:secondary").count() == 1
        });
        assert!(
            stable,
            "no stable formation to switch over: {}",
            self.states()
        );
        let base = self.base.display();
        let script = format!(
            "set -euo pipefail; . scripts/pg.sh; cd {base}; as_postgres {} pg_autoctl perform \
             switchover --pgdata {} >>{base}/switchover.log 2>&1",
            self.env(),
            self.pgdata("monitor")
        );
        let status = Command::new("bash")
            .current_dir(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
            .args(["-c", &script])
            .status()
            .unwrap();
        assert!(
            status.success(),
            "pg_autoctl perform switchover: {status}\n{}\n{}",
            self.log("switchover"),
            self.states()
        );
    }

    /// META_URL of database `db` as `role` on every node, for a read-write
    /// session: whichever is primary now.
    pub fn url(&self, role: &str, db: &str) -> String {
        let socket = SOCKETS.replace('/', "%2F");
        let hosts: Vec<String> = self
            .nodes
            .iter()
            .map(|(_, port)| format!("{socket}:{port}"))
            .collect();
        format!(
            "postgres://{role}@{}/{db}?target_session_attrs=read-write",
            hosts.join(",")
        )
    }

    pub fn sql(&self, name: &str, db: &str, sql: &str) -> String {
        let out = ok(&mut psql(self.port(name), db, sql));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    fn sql_ok(&self, name: &str, db: &str, sql: &str) -> bool {
        psql(self.port(name), db, sql)
            .output()
            .is_ok_and(|o| o.status.success() && !o.stdout.is_empty())
    }

    fn monitor_sql(&self, sql: &str) -> String {
        let out = ok(&mut psql(self.monitor_port, "pg_auto_failover", sql));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    fn monitor_sql_ok(&self, sql: &str) -> bool {
        psql(self.monitor_port, "pg_auto_failover", sql)
            .output()
            .is_ok_and(|o| o.status.success())
    }
}

fn psql(port: u16, db: &str, sql: &str) -> Command {
    let mut c = Command::new("psql");
    c.args([
        "-XAtq",
        "-v",
        "ON_ERROR_STOP=1",
        "-U",
        "postgres",
        "-h",
        SOCKETS,
        "-p",
    ])
    .arg(port.to_string())
    .args(["-d", db, "-c", sql]);
    c
}

impl Drop for Formation {
    fn drop(&mut self) {
        // every keeper's session: the keeper, its helpers and its postgres
        for name in ["monitor", "a", "b"] {
            for sid in self.sessions(name) {
                let _ = Command::new("pkill").args(["-9", "-s", &sid]).status();
            }
        }
    }
}
