//! Carrying a plan out: directories made in order, files and symlinks
//! copied by parallel workers (each file streamed piece by piece), then
//! deletions, the cleaning of old temporaries and directories' attributes;
//! progress reported once a second.
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use sha2::Digest;

use super::endpoint::{Endpoint, Entry, Kind};
use super::plan::{Copy, Plan};

/// What a run did.
#[derive(Debug, Default)]
pub struct Tally {
    pub copied: AtomicU64,
    pub copied_bytes: AtomicU64,
    /// Bytes moved so far, of finished and unfinished files.
    pub moved_bytes: AtomicU64,
    pub dirs_made: AtomicU64,
    /// Files that `--checksum` found equal.
    pub same_content: AtomicU64,
    pub deleted: AtomicU64,
    pub failures: Mutex<Vec<(String, String)>>,
}

impl Tally {
    fn fail(&self, path: &str, e: &anyhow::Error) {
        self.failures
            .lock()
            .unwrap()
            .push((path.to_string(), format!("{e:#}")));
    }

    pub fn failed(&self) -> u64 {
        self.failures.lock().unwrap().len() as u64
    }
}

/// Carries out `plan` with `threads` files in flight.
pub async fn execute(
    src: &dyn Endpoint,
    dst: &dyn Endpoint,
    plan: &Plan,
    threads: usize,
    tally: &Arc<Tally>,
) {
    for (path, why) in &plan.conflicts {
        tally.fail(path, &anyhow::anyhow!("{why}"));
    }
    for d in &plan.mkdirs {
        match dst.mkdir(&d.path, d.mode).await {
            Ok(()) => {
                tally.dirs_made.fetch_add(1, Relaxed);
            }
            Err(e) => tally.fail(&d.path, &e),
        }
    }
    let progress = Progress::start(plan, tally.clone());
    let work = plan
        .copies
        .iter()
        .map(Work::Copy)
        .chain(plan.symlinks.iter().map(Work::Symlink));
    futures_util::stream::iter(work)
        .for_each_concurrent(threads.max(1), |w| async move {
            let (path, done) = match w {
                Work::Copy(c) => (&c.entry.path, copy(src, dst, c, tally).await),
                Work::Symlink(l) => {
                    let target = l.target.as_deref().unwrap_or_default();
                    (&l.path, dst.symlink(&l.path, target).await.map(|()| true))
                }
            };
            match done {
                Ok(true) => {
                    tally.copied.fetch_add(1, Relaxed);
                }
                Ok(false) => {
                    tally.same_content.fetch_add(1, Relaxed);
                }
                Err(e) => tally.fail(path, &e),
            }
        })
        .await;
    // (before the deletions: a directory to delete may hold one)
    for t in &plan.temps {
        if let Err(e) = dst.remove(t).await {
            tracing::warn!("cannot remove an old temporary: {e:#}");
        }
    }
    let (files, dirs): (Vec<&Entry>, Vec<&Entry>) =
        plan.deletes.iter().partition(|e| e.kind != Kind::Dir);
    futures_util::stream::iter(files)
        .for_each_concurrent(threads.max(1), |e| async move {
            remove(dst, e, tally).await;
        })
        .await;
    for e in dirs {
        remove(dst, e, tally).await;
    }
    for d in &plan.dir_attrs {
        if let Err(e) = dst.set_dir_attrs(&d.path, d.mode, d.mtime).await {
            tally.fail(&d.path, &e);
        }
    }
    progress.stop().await;
}

enum Work<'a> {
    Copy(&'a Copy),
    Symlink(&'a Entry),
}

async fn remove(dst: &dyn Endpoint, e: &Entry, tally: &Tally) {
    match dst.remove(e).await {
        Ok(()) => {
            tally.deleted.fetch_add(1, Relaxed);
        }
        Err(err) => tally.fail(&e.path, &err),
    }
}

/// Copies one file (after comparing contents, if asked): whether it copied.
async fn copy(
    src: &dyn Endpoint,
    dst: &dyn Endpoint,
    c: &Copy,
    tally: &Tally,
) -> anyhow::Result<bool> {
    let e = &c.entry;
    if c.compare_first && digest(src, &e.path).await? == digest(dst, &e.path).await? {
        return Ok(false);
    }
    let mut reader = src.open(&e.path).await?;
    let mut writer = dst.create(&e.path, e).await?;
    let mut written = 0;
    let streamed: anyhow::Result<()> = async {
        while let Some(piece) = reader.next_piece().await? {
            let n = piece.len() as u64;
            writer.write(piece).await?;
            written += n;
            tally.moved_bytes.fetch_add(n, Relaxed);
        }
        Ok(())
    }
    .await;
    if let Err(e) = streamed {
        writer.abort().await;
        return Err(e);
    }
    writer.finish().await?;
    tally.copied_bytes.fetch_add(written, Relaxed);
    Ok(true)
}

/// The SHA-256 of file `path` of `side`, read piece by piece.
async fn digest(side: &dyn Endpoint, path: &str) -> anyhow::Result<Vec<u8>> {
    let mut reader = side.open(path).await?;
    let mut hash = sha2::Sha256::new();
    while let Some(piece) = reader.next_piece().await? {
        hash.update(&piece);
    }
    Ok(hash.finalize().to_vec())
}

/// A line on stderr once a second: files and bytes done of the total, and
/// the rate.
struct Progress {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Progress {
    fn start(plan: &Plan, tally: Arc<Tally>) -> Progress {
        let files = (plan.copies.len() + plan.symlinks.len()) as u64;
        let bytes = plan.bytes();
        let (stop, mut stopped) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(async move {
            let started = Instant::now();
            let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            tick.tick().await;
            loop {
                let last = tokio::select! {
                    _ = tick.tick() => false,
                    _ = &mut stopped => true,
                };
                if files > 0 {
                    let done = tally.copied.load(Relaxed)
                        + tally.same_content.load(Relaxed)
                        + tally.failed();
                    let moved = tally.moved_bytes.load(Relaxed);
                    let secs = started.elapsed().as_secs_f64().max(1e-3);
                    let line = format!(
                        "{done}/{files} files, {}/{} MiB, {:.1} MiB/s, {:.0} files/s",
                        mib(moved),
                        mib(bytes),
                        moved as f64 / secs / 1048576.0,
                        done as f64 / secs
                    );
                    match (tty, last) {
                        (true, false) => eprint!("\r{line}   "),
                        (true, true) => eprintln!("\r{line}   "),
                        (false, _) => eprintln!("{line}"),
                    }
                }
                if last {
                    return;
                }
            }
        });
        Progress { stop, task }
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }
}

fn mib(bytes: u64) -> String {
    format!("{:.1}", bytes as f64 / 1048576.0)
}
