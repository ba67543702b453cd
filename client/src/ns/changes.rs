//! Other mounts' changes, read from the change log: what they changed is
//! forgotten here and in the kernel, so the kernel may keep names and
//! attributes for long (`--attr-cache`, `--entry-cache`) and still shows
//! another mount's change within a poll interval (`--changes-poll`).
//!
//! The log is read by snapshot (`jfs.mount_changes`): each poll gets the
//! changes of the transactions the previous poll's snapshot did not see,
//! each once, so a change that commits late (ids are not commit order) is
//! never missed, and a long transaction elsewhere costs nothing. Forgetting
//! is idempotent. Each change is applied twice, at once and again a moment
//! later: a reply read from the database just before the change committed
//! may reach the kernel (or this mount's directory cache) after the first
//! forget, and the second one takes it away.
//!
//! Names other mounts made are added to this mount's directory listings
//! (`listings`) by the poller itself, before it reports the poll done, so
//! a listing never answers "missing" for a name made more than a poll ago.
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Forget, Namespace};
use crate::meta::LoggedChange;

/// When a change is applied the second time.
const REAPPLY_AFTER: Duration = Duration::from_secs(1);

/// How long [`Namespace::catch_up_with_log`] waits for a poll at most.
const CATCH_UP_LIMIT: Duration = Duration::from_secs(2);

/// The polls of the change log, counted, for those who wait until every
/// change committed before a moment is applied ([`Namespace::catch_up_with_log`]).
#[derive(Default)]
pub struct LogPolls {
    /// Polls started.
    started: AtomicU64,
    /// The last poll whose changes were applied, the kernel's caches included.
    applied: AtomicU64,
    /// Starts a poll now.
    wake: tokio::sync::Notify,
}

/// A batch of changes read from one part's log: the part, the poll, the changes.
type Batch = (usize, u64, Vec<LoggedChange>);

/// Starts reading other sessions' changes every `interval`, from each
/// database of the mount (one follower per shard); the kernel is told
/// from a thread of its own (a notification may wait for the kernel's
/// locks of a directory). Returns once every first horizon is read, so
/// that nothing cached after this call misses a change.
pub async fn spawn(ns: Arc<Namespace>, interval: Duration) -> crate::meta::Result<()> {
    let mut firsts = Vec::new();
    for (index, part) in ns.parts.all().iter().enumerate() {
        if !part.meta.is_open() {
            // (a shard not reached yet: its follower reads its first
            // horizon once it is, and nothing of it is cached until then)
            ns.log_unread(index);
            firsts.push(None);
            continue;
        }
        firsts.push(Some(part.meta.mount_changes(part.sid(), None).await?.0));
    }
    let (tx, rx) = mpsc::channel::<Batch>();
    let v = ns.clone();
    std::thread::Builder::new()
        .name("jfs-changes".into())
        .spawn(move || apply_loop(&v, rx))
        .expect("spawning the change thread");
    for (index, first_horizon) in firsts.into_iter().enumerate() {
        tokio::spawn(follow(
            ns.clone(),
            index,
            first_horizon,
            interval,
            tx.clone(),
        ));
    }
    Ok(())
}

/// Reads part `index`'s change log every `interval` from `horizon` on,
/// and sends what it read to the apply thread.
async fn follow(
    ns: Arc<Namespace>,
    index: usize,
    horizon: Option<String>,
    interval: Duration,
    tx: mpsc::Sender<Batch>,
) {
    let part = &ns.parts.all()[index];
    let mut horizon = match horizon {
        Some(horizon) => horizon,
        None => loop {
            part.meta.opened().await;
            match part.meta.mount_changes(part.sid(), None).await {
                Ok((first, _)) => {
                    ns.log_read(index);
                    break first;
                }
                Err(_) => tokio::time::sleep(interval).await,
            }
        },
    };
    // the server incarnation the horizon belongs to
    let mut horizon_epoch = part.meta.epoch();
    // (one warning per outage, not one per poll)
    let mut failing = false;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = part.polls.wake.notified() => {}
        }
        let poll = part.polls.started.fetch_add(1, Ordering::SeqCst) + 1;
        let epoch = part.meta.epoch();
        if epoch != horizon_epoch {
            // the server crashed or failed over: it may have lost
            // changes this mount applied, and hands their transaction
            // ids out again (a later change could pass for one seen)
            match part.meta.mount_changes(part.sid(), None).await {
                Ok((fresh, _)) => {
                    horizon = fresh;
                    horizon_epoch = epoch;
                    let forgotten = ns.server_changed().await;
                    if tx.send((index, poll, forgotten)).is_err() {
                        return;
                    }
                }
                Err(_) => ns.log_unread(index),
            }
            continue;
        }
        match part.meta.mount_changes(part.sid(), Some(&horizon)).await {
            Ok((next, fresh)) => {
                horizon = next;
                for c in &fresh {
                    ns.learn_names(c);
                    ns.forget_cached(c);
                }
                ns.log_read(index);
                if fresh.iter().any(removes_names) {
                    ns.hold_open_files(part).await;
                }
                if failing {
                    tracing::info!("reading the change log of shard {} again", part.number);
                    failing = false;
                }
                if tx.send((index, poll, fresh)).is_err() {
                    return;
                }
            }
            Err(e) if !failing => {
                ns.log_unread(index);
                tracing::warn!("reading the change log of shard {}: {e} (other mounts' changes show when the kernel's caches expire until it works again)", part.number);
                failing = true;
            }
            Err(_) => ns.log_unread(index),
        }
    }
}

/// Applies batches as they come and each change again after [`REAPPLY_AFTER`].
fn apply_loop(ns: &Namespace, rx: mpsc::Receiver<Batch>) {
    let mut again: VecDeque<(Instant, Vec<LoggedChange>)> = VecDeque::new();
    loop {
        let wait = again
            .front()
            .map(|(at, _)| at.saturating_duration_since(Instant::now()))
            .unwrap_or(Duration::from_secs(3600));
        match rx.recv_timeout(wait) {
            Ok((index, poll, batch)) => {
                for c in &batch {
                    ns.forget_change(c);
                }
                ns.parts.all()[index]
                    .polls
                    .applied
                    .store(poll, Ordering::SeqCst);
                if !batch.is_empty() {
                    again.push_back((Instant::now() + REAPPLY_AFTER, batch));
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return,
        }
        while again.front().is_some_and(|(at, _)| *at <= Instant::now()) {
            if let Some((_, batch)) = again.pop_front() {
                for c in &batch {
                    ns.forget_change(c);
                }
            }
        }
    }
}

/// Whether change `c` removed names (a file open here may have lost its last).
fn removes_names(c: &LoggedChange) -> bool {
    match c.op.as_str() {
        "unlink" | "rmr" => true,
        "rename" => c.inode2.is_some(),
        _ => false,
    }
}

impl Namespace {
    /// Waits until every change committed before this call is applied
    /// here and in the kernel (a poll started after it is done): what a
    /// lock's new holder must see of what the previous holder did. Gives
    /// up after `CATCH_UP_LIMIT` (the log cannot be read), and returns at
    /// once when the log is not followed.
    pub async fn catch_up_with_log(&self) {
        if !self.follow_changes {
            return;
        }
        let targets: Vec<u64> = (self.parts.all().iter())
            .map(|p| {
                let target = p.polls.started.load(Ordering::SeqCst) + 1;
                p.polls.wake.notify_one();
                target
            })
            .collect();
        let deadline = Instant::now() + CATCH_UP_LIMIT;
        for (part, target) in self.parts.all().iter().zip(targets) {
            while part.polls.applied.load(Ordering::SeqCst) < target {
                if Instant::now() > deadline {
                    tracing::warn!("the change log of shard {} was not read within {CATCH_UP_LIMIT:?}: a lock's holder may see other mounts' last changes late", part.number);
                    return;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
    }

    /// Another mount removed names: of the files open here, those that lost
    /// their last name are held by this session (they stay readable and
    /// writable until closed here, as on a local file system; the
    /// database keeps such a file a moment for this: jfs.sustain).
    pub async fn hold_open_files(&self, part: &super::parts::Part) {
        let mut open = self.open_inodes();
        open.retain(|&inode| self.parts.of(inode as u64).number == part.number);
        if open.is_empty() || !self.has_session() {
            // (a mount of a hot standby holds nothing: see docs/deploy.md)
            return;
        }
        match part.meta.sustain(part.sid(), &open).await {
            Ok(held) => {
                for inode in held {
                    self.unlinked_while_open(inode as u64).await;
                }
            }
            Err(e) => tracing::warn!("holding files open here that another mount removed: {e}"),
        }
    }

    /// Adds the names change `c` made to this mount's listings (a removal
    /// is not followed: a listing may hold names that are gone).
    fn learn_names(&self, c: &LoggedChange) {
        let made = match c.op.as_str() {
            "unlink" | "rmdir" | "rmr" => [None, None],
            "rename" => [None, Some((c.parent2, &c.name2))],
            _ => [Some((c.parent, &c.name)), Some((c.parent2, &c.name2))],
        };
        for (parent, name) in made.into_iter().flatten() {
            if let (Some(dir), Some(name)) = (parent.filter(|&p| p > 0), name) {
                self.listings.added(dir as u64, name);
            }
        }
    }

    /// The change log was read (and what it held applied): the caches may
    /// answer by it; after a long gap in reading, they are emptied first.
    fn log_read(&self, part: usize) {
        if self.log.read(part) {
            self.listings.forget_all();
            self.attrs.forget_all();
        }
    }

    /// After a crash or failover of the metadata server: it may have lost
    /// commits whose changes this mount (and its kernel) applied, so
    /// everything cached is forgotten, here and, through the returned
    /// changes (one per inode and entry that was cached), in the kernel.
    async fn server_changed(&self) -> Vec<LoggedChange> {
        let (mut inodes, names) = self.attrs.forget_all_known();
        self.listings.forget_all();
        if let Some(mount) = self.mount() {
            inodes.extend(mount.forget_open_files().await);
        }
        tracing::warn!(
            "the metadata server crashed or failed over: what this mount and its kernel cached \
             ({} inodes, {} names) is read again",
            inodes.len(),
            names.len()
        );
        let node = |inode: u64| LoggedChange {
            // (a "write": the kernel drops the file's pages too)
            op: "write".into(),
            inode: Some(inode as i64),
            parent: None,
            name: None,
            parent2: None,
            name2: None,
            inode2: None,
        };
        let entry = |(parent, name): (u64, Vec<u8>)| LoggedChange {
            op: "crash".into(),
            parent: Some(parent as i64),
            name: Some(name),
            ..node(0)
        };
        let mut forgotten: Vec<_> = inodes.into_iter().map(node).collect();
        forgotten.extend(names.into_iter().map(entry));
        forgotten
    }

    /// Reading the change log failed: nothing cached here answers past
    /// its TTL until it works again.
    fn log_unread(&self, part: usize) {
        self.listings.forget_all();
        self.attrs.forget_all();
        self.log.failed(part);
    }

    /// Forgets here what change `c` made stale: the entries it made,
    /// removed or moved, the attributes of their directories and of the
    /// nodes it touched (done by the poller before the poll counts as
    /// done; a read that raced with it is not kept: see `attrs`).
    fn forget_cached(&self, c: &LoggedChange) {
        for (dir, name) in changed_entries(c) {
            self.attrs.forget_entry(dir, name);
        }
        if matches!(c.op.as_str(), "rmr" | "tier_tree") {
            // names and nodes below the tree's root went or changed too
            self.attrs.forget_all();
        }
        for node in changed_nodes(c) {
            self.attrs.forget(node);
        }
    }

    /// Makes the kernel forget what change `c` made stale: the entries it
    /// made, removed or moved, the attributes of their directories and of
    /// the nodes it touched, a file's cached pages when its data changed.
    fn forget_change(&self, c: &LoggedChange) {
        let Some(mount) = self.mount() else {
            return;
        };
        for (dir, name) in changed_entries(c) {
            mount.forget_in_kernel(Forget::EntryNow { parent: dir, name });
            mount.forget_in_kernel(Forget::Attributes { inode: dir });
        }
        let data_changed = matches!(c.op.as_str(), "write" | "truncate");
        for inode in changed_nodes(c) {
            mount.forget_in_kernel(if data_changed {
                Forget::Data { inode }
            } else {
                Forget::Attributes { inode }
            });
        }
    }
}

/// The entries (directory, name) change `c` made, removed or moved (an
/// xattr change names the attribute, with no directory).
fn changed_entries(c: &LoggedChange) -> impl Iterator<Item = (u64, &[u8])> {
    [(c.parent, &c.name), (c.parent2, &c.name2)]
        .into_iter()
        .filter_map(|(parent, name)| Some((positive(parent)?, name.as_deref()?)))
}

/// The nodes change `c` touched.
fn changed_nodes(c: &LoggedChange) -> impl Iterator<Item = u64> {
    [c.inode, c.inode2].into_iter().filter_map(positive)
}

fn positive(id: Option<i64>) -> Option<u64> {
    id.filter(|&i| i > 0).map(|i| i as u64)
}
