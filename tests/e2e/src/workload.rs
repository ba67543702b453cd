//! scripts/workload.py on a mount (writers that record a file only once fsync vouched for it, and readers), and what it left: for the fault tests.
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::ok;

/// The bytes of the workload's file `name` (scripts/workload.py's content()).
pub fn content(name: &str) -> Vec<u8> {
    let unit = format!("{name}:");
    unit.repeat(4096 / unit.len() + 1).as_bytes()[..4096].to_vec()
}

/// scripts/workload.py on a mount: writers that record each file only after
/// fsync of the file and of its directory returned 0, and readers.
pub struct Workload {
    child: Option<std::process::Child>,
    out: PathBuf,
}

/// What a workload did.
pub struct Outcome {
    /// Files recorded, relative to the workload's directory.
    pub recorded: Vec<String>,
    pub errors: Vec<String>,
    /// Operation latency: p50, p99, max (seconds).
    pub latency: String,
}

impl Workload {
    pub fn start(dir: &Path, out: &Path, writers: usize, readers: usize) -> Workload {
        fs::create_dir_all(dir).unwrap();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/workload.py");
        let child = Command::new("python3")
            .arg(script)
            .arg(dir)
            .args([writers.to_string(), readers.to_string()])
            .current_dir("/")
            .stdout(fs::File::create(out).unwrap())
            .spawn()
            .unwrap();
        Workload {
            child: Some(child),
            out: out.to_path_buf(),
        }
    }

    pub fn recorded(&self) -> usize {
        fs::read_to_string(&self.out)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with("ok "))
            .count()
    }

    pub fn finish(mut self) -> Outcome {
        let mut child = self.child.take().unwrap();
        ok(Command::new("kill").args(["-TERM", &child.id().to_string()]));
        let status = child.wait().unwrap();
        assert!(status.success(), "the workload failed: {status}");
        let text = fs::read_to_string(&self.out).unwrap();
        let mut outcome = Outcome {
            recorded: Vec::new(),
            errors: Vec::new(),
            latency: String::new(),
        };
        for line in text.lines() {
            match line.split_once(' ') {
                Some(("ok", name)) => outcome.recorded.push(name.to_string()),
                Some(("err", what)) => outcome.errors.push(what.to_string()),
                Some(("latency", figures)) => outcome.latency = figures.to_string(),
                _ => panic!("workload said {line:?}"),
            }
        }
        outcome
    }
}

/// Every recorded file under `dir` of `fresh` (a mount with an empty cache):
/// those missing or wrong.
pub fn missing_or_wrong(recorded: &[String], dir: &Path) -> Vec<String> {
    let mut bad = Vec::new();
    for name in recorded {
        match fs::read(dir.join(name)) {
            Ok(bytes) if bytes == content(name) => {}
            Ok(bytes) => bad.push(format!("{name}: {} wrong bytes", bytes.len())),
            Err(e) => bad.push(format!("{name}: {e}")),
        }
    }
    bad
}

/// The errors that reached the workload's applications, with the mount's
/// log when there were any.
pub fn assert_no_errors(outcome: &Outcome, m: &crate::Mount, what: &str) {
    assert!(
        outcome.errors.is_empty(),
        "{} errors reached the applications {what}: {:?}\n{}",
        outcome.errors.len(),
        &outcome.errors[..outcome.errors.len().min(20)],
        m.log_warnings(300)
    );
}

impl Drop for Workload {
    /// (A test that failed before `finish`: its workload stops too.)
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
