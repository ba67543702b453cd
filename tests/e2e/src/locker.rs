//! A process that holds one file open and does with it what a test tells
//! it, one command a line (tests/e2e/scripts/locker.py): takes and drops
//! locks, writes, fsyncs, closes. A test that stops a mount uses one to
//! hold its files: a process the test process starts while it holds a
//! file of a stopped mount would block at its exec, whose close of its
//! copy of the descriptor waits for the mount (a FUSE flush).
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// A process holding one file, doing with it as it is told.
pub struct Locker {
    child: Child,
    stdin: ChildStdin,
    answers: mpsc::Receiver<String>,
}

impl Locker {
    pub fn open(file: &Path) -> Locker {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/locker.py");
        let mut child = Command::new("python3")
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("starting python3 scripts/locker.py");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, answers) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                if tx.send(line.unwrap()).is_err() {
                    return;
                }
            }
        });
        let mut l = Locker {
            child,
            stdin,
            answers,
        };
        assert_eq!(l.ask(&format!("open {}", file.display())), "ok");
        l
    }

    pub fn send(&mut self, cmd: &str) {
        writeln!(self.stdin, "{cmd}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// The answer to the last command, if it comes within `secs`.
    pub fn answer_within(&self, secs: f64) -> Option<String> {
        self.answers
            .recv_timeout(Duration::from_secs_f64(secs))
            .ok()
    }

    pub fn ask(&mut self, cmd: &str) -> String {
        self.send(cmd);
        self.answer_within(30.0)
            .unwrap_or_else(|| panic!("no answer to {cmd:?} within 30 s"))
    }

    pub fn pid(&mut self) -> String {
        self.ask("pid")
    }
}

impl Drop for Locker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
