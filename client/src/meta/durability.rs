//! Which server incarnation commits were made on: a sync vouches only for the asynchronous commits of the server it ran on.
//!
//! In 'fsync' durability mode procedures commit without waiting for the WAL
//! flush, and `jfs.sync()` makes everything committed before it durable. A
//! PostgreSQL crash (or a failover) between a commit and the sync erases the
//! commit, and the sync, retried on the restarted server, finds nothing to
//! flush. So every sync also says which server incarnation it ran on (its
//! address and postmaster start time), commits are stamped with the epoch
//! (the count of incarnations seen) current when they were sent, and a sync
//! that vouches for a commit of an earlier epoch fails instead of succeeding.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

/// The number of server incarnations a client has seen, minus one.
pub type Epoch = u64;

/// The server's incarnation: its address and port (empty over a unix
/// socket) and the time its postmaster started, which a restart, a crash
/// and a promoted standby all change; its timeline; and whether it started
/// from a clean shutdown: its last checkpoint is a shutdown checkpoint (redo
/// at the checkpoint itself) taken before it started. Crash recovery always
/// ends in a checkpoint taken after the start, and a promotion changes the
/// timeline, so a clean start means the last incarnation flushed all its WAL.
/// (Checkpoint times have whole seconds: a stop and start within one second
/// counts as unclean, which only costs an EIO.)
macro_rules! incarnation_select {
    () => {
        "SELECT pg_catalog.concat_ws(':', pg_catalog.inet_server_addr(), \
                pg_catalog.inet_server_port(), pg_catalog.pg_postmaster_start_time()), \
                c.timeline_id::text, \
                (c.redo_lsn = c.checkpoint_lsn AND c.checkpoint_time < \
                 pg_catalog.date_trunc('second', pg_catalog.pg_postmaster_start_time()))::text \
           FROM pg_catalog.pg_control_checkpoint() c"
    };
}

/// The incarnation of the server a new connection reached (simple query).
pub const INCARNATION_SQL: &str = incarnation_select!();

/// `jfs.sync()`, and the incarnation of the server it ran on.
pub const SYNC_SQL: &str = concat!(
    "SELECT jfs.sync()::text, i.* FROM (",
    incarnation_select!(),
    ") i"
);

/// A server incarnation as [`INCARNATION_SQL`] describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Incarnation {
    pub id: String,
    pub timeline: String,
    pub clean_start: bool,
}

/// What a client knows of the server incarnations its commits went to.
#[derive(Debug)]
pub struct Incarnations {
    epoch: AtomicU64,
    /// The incarnation last seen.
    seen: Mutex<Option<Incarnation>>,
    /// The epoch of this client's oldest commit not yet covered by a sync.
    unsynced: Mutex<Option<Epoch>>,
    /// How many times unsynced commits were found sent to a server that is gone.
    losses: AtomicU64,
    /// Whether commits are asynchronous (the volume's 'fsync' mode): in
    /// 'always' mode each commit is durable and none needs a sync.
    async_commits: AtomicBool,
}

impl Default for Incarnations {
    fn default() -> Incarnations {
        Incarnations {
            epoch: AtomicU64::new(0),
            seen: Mutex::new(None),
            unsynced: Mutex::new(None),
            losses: AtomicU64::new(0),
            async_commits: AtomicBool::new(true),
        }
    }
}

impl Incarnations {
    /// The current epoch: read it before sending a commit.
    pub fn epoch(&self) -> Epoch {
        self.epoch.load(Ordering::SeqCst)
    }

    /// Notes the incarnation a connection reached or a statement ran on.
    /// Another one than the last seen starts a new epoch, unless it is the
    /// same server restarted cleanly (on the same timeline), which flushed
    /// every commit before it stopped.
    pub fn observe(&self, now: Incarnation) {
        let mut seen = self.seen.lock().unwrap();
        match seen.as_ref() {
            Some(old) if old.id != now.id => {
                if now.clean_start && now.timeline == old.timeline {
                    tracing::info!(
                        "the metadata server restarted after a clean shutdown ({} -> {}): \
                         nothing committed was lost",
                        old.id,
                        now.id
                    );
                } else {
                    let epoch = self.epoch.fetch_add(1, Ordering::SeqCst) + 1;
                    tracing::warn!(
                        "the metadata server changed ({} timeline {} -> {} timeline {}: a crash, \
                         a failover): commits not yet synced before may be lost, and an fsync \
                         that vouched for them reports EIO (epoch {epoch})",
                        old.id,
                        old.timeline,
                        now.id,
                        now.timeline
                    );
                }
                *seen = Some(now);
            }
            Some(_) => {}
            None => *seen = Some(now),
        }
    }

    /// Unsynced commits were found sent to a server that is gone.
    pub fn lost(&self) {
        self.losses.fetch_add(1, Ordering::SeqCst);
    }

    pub fn losses(&self) -> u64 {
        self.losses.load(Ordering::SeqCst)
    }

    pub fn set_async_commits(&self, on: bool) {
        self.async_commits.store(on, Ordering::SeqCst);
    }

    pub fn async_commits(&self) -> bool {
        self.async_commits.load(Ordering::SeqCst)
    }

    /// A commit sent in epoch `sent_in` succeeded.
    pub fn committed(&self, sent_in: Epoch) {
        if self.async_commits() {
            let mut unsynced = self.unsynced.lock().unwrap();
            *unsynced = Some(unsynced.map_or(sent_in, |e| e.min(sent_in)));
        }
    }

    /// Takes the epoch of the oldest unsynced commit (a sync is starting).
    pub fn take_unsynced(&self) -> Option<Epoch> {
        self.unsynced.lock().unwrap().take()
    }

    /// Puts back what [`Incarnations::take_unsynced`] took, when the sync
    /// that took it did not vouch for it.
    pub fn restore_unsynced(&self, epoch: Option<Epoch>) {
        if let Some(e) = epoch {
            self.committed(e);
        }
    }

    /// Whether a sync that ran in the current epoch covers commits sent in
    /// `since` (None: there were none).
    pub fn covers(&self, since: Option<Epoch>) -> bool {
        !self.async_commits() || since.is_none_or(|e| e == self.epoch())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sync_covers_only_commits_of_the_incarnation_it_ran_on() {
        let at = |id: &str, timeline: &str, clean_start: bool| Incarnation {
            id: id.into(),
            timeline: timeline.into(),
            clean_start,
        };
        let inc = Incarnations::default();
        inc.observe(at("a", "1", false));
        let sent = inc.epoch();
        inc.committed(sent);
        inc.observe(at("a", "1", false));
        assert!(inc.covers(Some(sent)), "same server");
        inc.observe(at("b", "1", true));
        assert!(inc.covers(Some(sent)), "restarted after a clean shutdown");
        inc.observe(at("c", "2", true));
        assert!(!inc.covers(Some(sent)), "promoted standby");
        let sent = inc.epoch();
        inc.observe(at("d", "2", false));
        assert!(!inc.covers(Some(sent)), "crashed and recovered in between");
        assert!(inc.covers(None), "nothing to vouch for");
        assert!(inc.covers(Some(inc.epoch())));
        inc.set_async_commits(false);
        assert!(
            inc.covers(Some(sent)),
            "'always' mode: every commit durable"
        );
    }

    #[test]
    fn the_oldest_unsynced_commit_is_kept_until_a_sync_takes_it() {
        let inc = Incarnations::default();
        inc.committed(3);
        inc.committed(1);
        inc.committed(2);
        assert_eq!(inc.take_unsynced(), Some(1));
        assert_eq!(inc.take_unsynced(), None);
        inc.restore_unsynced(Some(4));
        inc.committed(5);
        assert_eq!(inc.take_unsynced(), Some(4));
    }
}
