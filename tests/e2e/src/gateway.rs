//! `jfs gateway` of a volume on a loopback port of its own, as the client
//! role, and requests to it signed as S3 clients sign them (curl's SigV4).
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use crate::{jfs, Volume};

/// The keys the test gateways take.
pub const GATEWAY_KEYS: (&str, &str) = ("jfs-test-access", "jfs-test-secret-key");

/// A running gateway; stopped (SIGTERM, which ends its session) on drop.
pub struct Gateway {
    child: std::process::Child,
    pub endpoint: String,
    /// Its standard error (the log), when started with [`Gateway::start_logged`].
    pub log: Option<PathBuf>,
}

impl Gateway {
    pub fn start(v: &Volume) -> Gateway {
        Gateway::spawn(&v.url, &[], &[], None).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Starts it with `args` added to its command line.
    pub fn start_with(v: &Volume, args: &[&str]) -> Gateway {
        Gateway::spawn(&v.url, &[], args, None).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Starts it on META_URL `url` with `args` added to its command line.
    pub fn start_on(url: &str, args: &[&str]) -> Gateway {
        Gateway::spawn(url, &[], args, None).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Starts it run by `launcher` (e.g. `prlimit --nofile=256:256`), its
    /// log into `log`; Err with the log when it does not start.
    pub fn start_logged(v: &Volume, launcher: &[&str], log: PathBuf) -> Result<Gateway, String> {
        Gateway::spawn(&v.url, launcher, &[], Some(log))
    }

    fn spawn(
        url: &str,
        launcher: &[&str],
        args: &[&str],
        log: Option<PathBuf>,
    ) -> Result<Gateway, String> {
        let jfs_bin = jfs().get_program().to_owned();
        let mut cmd = match launcher.split_first() {
            Some((program, args)) => {
                let mut c = Command::new(program);
                c.args(args).arg(&jfs_bin);
                c
            }
            None => Command::new(&jfs_bin),
        };
        cmd.args([
            "gateway",
            url,
            "127.0.0.1:0",
            "--access-key",
            GATEWAY_KEYS.0,
        ])
        .args(args)
        .env("JFS_GATEWAY_SECRET_KEY", GATEWAY_KEYS.1)
        .stdout(Stdio::piped());
        match &log {
            Some(path) => cmd.stderr(std::fs::File::create(path).unwrap()),
            None => cmd.stderr(Stdio::inherit()),
        };
        let mut child = cmd.spawn().expect("starting jfs gateway");
        // (read on a thread: a gateway that never says where it listens
        // fails the test instead of hanging it)
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .unwrap_or_default();
        match line.trim().strip_prefix("S3 endpoint: ") {
            Some(endpoint) => Ok(Gateway {
                child,
                endpoint: endpoint.to_string(),
                log,
            }),
            None => {
                let _ = child.kill();
                let _ = child.wait();
                let said = log
                    .as_ref()
                    .map(|p| std::fs::read_to_string(p).unwrap_or_default())
                    .unwrap_or_default();
                Err(format!("jfs gateway did not start: {line:?} {said}"))
            }
        }
    }

    /// The host:port it listens on.
    pub fn address(&self) -> &str {
        let e = &self.endpoint;
        e.strip_prefix("https://")
            .or_else(|| e.strip_prefix("http://"))
            .unwrap_or(e)
    }

    /// A request signed with the gateway's keys (curl --aws-sigv4), given
    /// at most `seconds`: `args` are curl's (method, data), `path` the URL's
    /// path. The output has the HTTP status as its last line.
    pub fn signed(&self, seconds: u32, args: &[&str], path: &str) -> Output {
        Command::new("curl")
            .args(["-sS", "--max-time", &seconds.to_string()])
            .args(["--aws-sigv4", "aws:amz:us-east-1:s3"])
            .args(["--user", &format!("{}:{}", GATEWAY_KEYS.0, GATEWAY_KEYS.1)])
            .args(["-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD"])
            .args(["-w", "\n%{http_code}"])
            .args(args)
            .arg(format!("{}{path}", self.endpoint))
            .output()
            .unwrap()
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
    }
}

/// The HTTP status of an answer from [`Gateway::signed`] (its last line).
pub fn status(out: &Output) -> String {
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines().last().unwrap_or_default().to_string()
}

/// The body of an answer from [`Gateway::signed`] (all but its last line).
pub fn body(out: &Output) -> String {
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    match text.rfind('\n') {
        Some(i) => text[..i].to_string(),
        None => String::new(),
    }
}
