//! `jfs debug MOUNTPOINT`: one archive with what a bug report needs: the
//! mount's own report (version, volume, options, sessions, a `jfs.fsck()`
//! summary), its metrics, its command line and the last lines of its log
//! (URLs redacted), and the machine's kernel and FUSE versions.
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;
use clap::Args;

use super::info::ControlFile;
use crate::meta::redact_url;

#[derive(Args, Debug)]
pub struct DebugArgs {
    /// A jfs mount point (or any path inside one)
    mountpoint: PathBuf,
    /// Where the archive goes
    #[arg(long, default_value = ".")]
    out_dir: PathBuf,
    /// Lines of the mount's log to include
    #[arg(long, default_value_t = 500)]
    log_lines: usize,
}

pub fn run(a: DebugArgs) -> anyhow::Result<()> {
    let mut control = ControlFile::open(&a.mountpoint)?;
    let report = control.ask("debug\n")?;
    let metrics = control.ask("stats\n")?;
    let field = |name: &str| {
        report
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().to_string())
    };
    let pid = field("pid").context("the mount's report names no pid")?;
    let host = crate::attach::hostname();
    let stamp = chrono_free_stamp();
    let name = format!("jfs-debug-{host}-{stamp}");
    let work = tempfile_dir(&a.out_dir, &name)?;
    let write = |file: &str, text: &str| -> anyhow::Result<()> {
        std::fs::write(work.join(file), text).with_context(|| format!("writing {file}"))
    };
    write("mount.txt", &report)?;
    write("metrics.txt", &metrics)?;
    write("cmdline.txt", &redacted(&command_line(&pid)))?;
    let log = own_session_field(&report, &pid, "log");
    let log_text = match &log {
        Some(path) => tail(Path::new(path), a.log_lines)
            .unwrap_or_else(|e| format!("{path}: cannot be read: {e}\n")),
        None => "the mount runs in the foreground: its log went to its terminal\n".to_string(),
    };
    write("log.txt", &redacted(&log_text))?;
    write("system.txt", &system(&a.mountpoint))?;
    let archive = a.out_dir.join(format!("{name}.tar.gz"));
    let packed = Command::new("tar")
        .arg("-czf")
        .arg(&archive)
        .arg("-C")
        .arg(&a.out_dir)
        .arg(&name)
        .status()
        .context("running tar")?;
    let _ = std::fs::remove_dir_all(&work);
    anyhow::ensure!(
        packed.success(),
        "tar could not write {}",
        archive.display()
    );
    println!("{}", archive.display());
    Ok(())
}

/// A UTC timestamp for the archive's name (YYYYmmddTHHMMSS).
fn chrono_free_stamp() -> String {
    let out = Command::new("date").args(["-u", "+%Y%m%dT%H%M%S"]).output();
    out.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|_| "now".to_string())
}

/// A new private directory `name` in `dir`.
fn tempfile_dir(dir: &Path, name: &str) -> anyhow::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let path = dir.join(name);
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&path)
        .with_context(|| format!("making {}", path.display()))?;
    Ok(path)
}

/// The mount's command line, one argument per line.
fn command_line(pid: &str) -> String {
    match std::fs::read(format!("/proc/{pid}/cmdline")) {
        Ok(raw) => raw
            .split(|&b| b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned() + "\n")
            .collect(),
        Err(e) => format!("process {pid}: {e}\n"),
    }
}

/// `text` with every URL's password taken out.
fn redacted(text: &str) -> String {
    text.lines()
        .map(|line| {
            line.split(' ')
                .map(|word| match word.contains("://") {
                    true => redact_url(word),
                    false => word.to_string(),
                })
                .collect::<Vec<_>>()
                .join(" ")
                + "\n"
        })
        .collect()
}

/// Field `name` of this mount's session info, from its report's session line.
fn own_session_field(report: &str, pid: &str, name: &str) -> Option<String> {
    let line = report
        .lines()
        .find(|l| l.ends_with("(this mount)") && l.contains(&format!(":{pid} ")))?;
    let json = &line[line.find('{')?..=line.rfind('}')?];
    let info: serde_json::Value = serde_json::from_str(json).ok()?;
    info.get(name)?.as_str().map(str::to_string)
}

/// The last `n` lines of `path`.
fn tail(path: &Path, n: usize) -> std::io::Result<String> {
    let text = std::fs::read_to_string(path)?;
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(n);
    Ok(lines[start..].iter().map(|l| format!("{l}\n")).collect())
}

/// Versions of this client, the kernel and FUSE, and the mount's entry.
fn system(mountpoint: &Path) -> String {
    let run = |cmd: &str, args: &[&str]| {
        Command::new(cmd)
            .args(args)
            .output()
            .map(|o| {
                String::from_utf8_lossy(&o.stdout).into_owned()
                    + &String::from_utf8_lossy(&o.stderr)
            })
            .unwrap_or_else(|e| format!("{cmd}: {e}\n"))
    };
    let mount_root = mountpoint
        .canonicalize()
        .unwrap_or(mountpoint.to_path_buf());
    let entries: String = std::fs::read_to_string("/proc/mounts")
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(&format!(" {} ", mount_root.display())))
        .map(|l| format!("{l}\n"))
        .collect();
    format!(
        "jfs client {}\n{}{}{}/proc/mounts:\n{entries}",
        env!("CARGO_PKG_VERSION"),
        std::fs::read_to_string("/proc/version").unwrap_or_default(),
        run("fusermount3", &["-V"]),
        std::fs::read_to_string("/sys/module/fuse/version")
            .map(|v| format!("fuse module {v}"))
            .unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_lose_their_passwords_and_the_own_session_is_found() {
        let text = redacted("mount postgres://u:s3cret@db/x /mnt\nplain line\n");
        assert!(!text.contains("s3cret"), "{text}");
        assert!(text.contains("/mnt") && text.contains("plain line"));
        let report = "== sessions of the volume\n\
                      3 host:77 started a heartbeat b open-unlinked 0 {\"log\": \"/var/log/jfs.log\"}  (this mount)\n";
        assert_eq!(
            own_session_field(report, "77", "log").as_deref(),
            Some("/var/log/jfs.log")
        );
        assert_eq!(own_session_field(report, "78", "log"), None);
    }
}
