//! Which server incarnation commits were made on: a sync vouches only for the asynchronous commits of the server it ran on.
//!
//! In 'fsync' durability mode procedures commit without waiting for the WAL
//! flush, and `jfs.sync()` makes everything committed before it durable. A
//! PostgreSQL crash (or a failover) between a commit and the sync erases the
//! commit, and the sync, retried on the restarted server, finds nothing to
//! flush. So every connection and every sync says which server incarnation
//! it reached (its address and postmaster start time), commits are stamped
//! with the epoch (the count of incarnations seen) current when they were
//! sent and kept in the journal until a sync covers them, and a new epoch
//! first gets what the old one may have lost told again (`journal`). What
//! cannot be told again is lost: an fsync that vouched for it fails.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use super::journal::{Entry, Epoch, Journal, Replay};

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
    /// This client's commits not yet covered by a sync.
    journal: Mutex<Journal>,
    /// The oldest epoch in the journal (u64::MAX: none): one sent to an
    /// earlier epoch than the current one is to be replayed.
    oldest_kept: AtomicU64,
    /// Commits sent in an earlier epoch than this were lost (or could not
    /// be told again): no sync vouches for them.
    floor: AtomicU64,
    /// How many times commits of this client were found lost.
    losses: AtomicU64,
    /// How many times commits of locks or of files held open were lost.
    state_losses: AtomicU64,
    /// Whether commits are asynchronous (the volume's 'fsync' mode): in
    /// 'always' mode each commit is durable and none needs a sync.
    async_commits: AtomicBool,
    /// Connections made (by every pool that shares this).
    connections: AtomicU64,
    /// The client only reads (a standby that serves reads): a change of
    /// server loses nothing of it, and is not reported.
    reads_only: AtomicBool,
}

impl Default for Incarnations {
    fn default() -> Incarnations {
        Incarnations {
            epoch: AtomicU64::new(0),
            seen: Mutex::new(None),
            journal: Mutex::default(),
            oldest_kept: AtomicU64::new(u64::MAX),
            floor: AtomicU64::new(0),
            losses: AtomicU64::new(0),
            state_losses: AtomicU64::new(0),
            async_commits: AtomicBool::new(true),
            connections: AtomicU64::new(0),
            reads_only: AtomicBool::new(false),
        }
    }
}

impl Incarnations {
    /// Counts a connection made.
    pub fn connection_made(&self) {
        self.connections.fetch_add(1, Ordering::SeqCst);
    }

    /// How many connections were made so far.
    pub fn connections_made(&self) -> u64 {
        self.connections.load(Ordering::SeqCst)
    }

    /// For a client that only reads: server changes are not observed.
    pub fn set_reads_only(&self) {
        self.reads_only.store(true, Ordering::Relaxed);
    }

    /// The current epoch: read it before sending a commit.
    pub fn epoch(&self) -> Epoch {
        self.epoch.load(Ordering::SeqCst)
    }

    /// Notes the incarnation a connection reached or a statement ran on.
    /// Another one than the last seen starts a new epoch, unless it is the
    /// same server restarted cleanly (on the same timeline), which flushed
    /// every commit before it stopped.
    pub fn observe(&self, now: Incarnation) {
        if self.reads_only.load(Ordering::Relaxed) {
            return;
        }
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
                         a failover): what this mount committed since its last sync may be \
                         lost, and is told again before anything else (epoch {epoch})",
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

    pub fn set_async_commits(&self, on: bool) {
        self.async_commits.store(on, Ordering::SeqCst);
    }

    pub fn async_commits(&self) -> bool {
        self.async_commits.load(Ordering::SeqCst)
    }

    /// Runs `f` on the journal and notes its oldest epoch after (a count
    /// of the entries: for syncs and replays, not for each commit).
    fn with_journal<T>(&self, f: impl FnOnce(&mut Journal) -> T) -> T {
        let mut journal = self.journal.lock().unwrap();
        let result = f(&mut journal);
        self.oldest_kept
            .store(journal.oldest().unwrap_or(u64::MAX), Ordering::SeqCst);
        result
    }

    /// A commit sent in epoch `sent_in` succeeded.
    pub fn record(&self, sent_in: Epoch, entry: Entry) {
        if self.async_commits() {
            let mut journal = self.journal.lock().unwrap();
            journal.record(sent_in, entry);
            // (under the lock: a recount by `with_journal` comes after)
            self.oldest_kept.fetch_min(sent_in, Ordering::SeqCst);
        }
    }

    /// Whether commits sent to an earlier server incarnation are to be
    /// told to the current one before anything else is sent.
    pub fn replay_due(&self) -> bool {
        self.oldest_kept.load(Ordering::SeqCst) < self.epoch()
    }

    /// What is to be told again to the current epoch, and that epoch.
    pub fn replay(&self) -> (Replay, Epoch) {
        let now = self.epoch();
        (self.journal.lock().unwrap().replay(now), now)
    }

    /// Redo entry `seq` was found on, or committed again to, epoch `epoch`.
    pub fn replayed(&self, seq: u64, epoch: Epoch) {
        self.with_journal(|j| j.replayed(seq, epoch));
    }

    /// The replay into epoch `now` is over: what `replay` read that was
    /// sent to earlier epochs and is still kept is forgotten; `vouched` says whether it included
    /// commits an fsync vouches for (they are lost: such fsyncs fail),
    /// `state` whether locks or held files were among them.
    pub fn replay_ended(&self, replay: &Replay, now: Epoch, vouched: bool, state: bool) {
        self.with_journal(|j| j.forget_before(replay.mark, now));
        if vouched {
            self.floor.fetch_max(now, Ordering::SeqCst);
            self.losses.fetch_add(1, Ordering::SeqCst);
        }
        if state {
            self.state_losses.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// The journal's mark before a sync (see [`Journal::mark`]).
    pub fn mark(&self) -> u64 {
        self.journal.lock().unwrap().mark()
    }

    /// A sync sent in `epoch` succeeded after `mark` was taken.
    pub fn synced(&self, mark: u64, epoch: Epoch) {
        if epoch == self.epoch() {
            self.with_journal(|j| j.synced(mark, epoch));
        }
    }

    pub fn losses(&self) -> u64 {
        self.losses.load(Ordering::SeqCst)
    }

    /// A change answered as done was refused when it was committed (a
    /// create answered under a lease): the next fsync of a directory says so.
    pub fn lost_an_answer(&self) {
        self.losses.fetch_add(1, Ordering::SeqCst);
    }

    pub fn state_losses(&self) -> u64 {
        self.state_losses.load(Ordering::SeqCst)
    }

    /// Whether a sync that ran in the current epoch covers commits sent in
    /// `since` (None: there were none): they were not lost, or were told
    /// again to the current server.
    pub fn covers(&self, since: Option<Epoch>) -> bool {
        !self.async_commits() || since.is_none_or(|e| e >= self.floor.load(Ordering::SeqCst))
    }

    /// Whether what was committed, or read, in epoch `sent_in` is on the
    /// current server as it was (nothing told again: ids it handed out, a
    /// list of freed slices).
    pub fn unchanged_since(&self, sent_in: Epoch) -> bool {
        !self.async_commits() || sent_in == self.epoch()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(id: &str, timeline: &str, clean_start: bool) -> Incarnation {
        Incarnation {
            id: id.into(),
            timeline: timeline.into(),
            clean_start,
        }
    }

    #[test]
    fn only_a_crash_or_a_failover_starts_an_epoch() {
        let inc = Incarnations::default();
        inc.observe(at("a", "1", false));
        inc.observe(at("a", "1", false));
        assert_eq!(inc.epoch(), 0, "same server");
        inc.observe(at("b", "1", true));
        assert_eq!(inc.epoch(), 0, "restarted after a clean shutdown");
        inc.observe(at("c", "2", true));
        assert_eq!(inc.epoch(), 1, "promoted standby");
        inc.observe(at("d", "2", false));
        assert_eq!(inc.epoch(), 2, "crashed and recovered");
    }

    #[test]
    fn commits_of_an_earlier_epoch_are_replayed_or_reported_lost() {
        let inc = Incarnations::default();
        inc.observe(at("a", "1", false));
        let sent = inc.epoch();
        inc.record(sent, Entry::State);
        assert!(!inc.replay_due());
        inc.observe(at("b", "1", false));
        assert!(inc.replay_due(), "a crash after an unsynced commit");
        let (replay, now) = inc.replay();
        assert_eq!((replay.redos.len(), replay.state), (0, 1));
        inc.replay_ended(&replay, now, false, true);
        assert!(!inc.replay_due());
        assert_eq!((inc.losses(), inc.state_losses()), (0, 1));
        assert!(inc.covers(Some(sent)), "no vouched commit was lost");
        inc.record(now, Entry::Opaque);
        inc.observe(at("c", "1", false));
        let (replay, now) = inc.replay();
        inc.replay_ended(&replay, now, true, false);
        assert_eq!(inc.losses(), 1);
        assert!(!inc.covers(Some(sent)), "a lost commit: fsync fails");
        assert!(inc.covers(Some(now)) && inc.covers(None));
        assert!(!inc.unchanged_since(sent) && inc.unchanged_since(now));
        inc.set_async_commits(false);
        assert!(
            inc.covers(Some(sent)),
            "'always' mode: every commit durable"
        );
    }

    #[test]
    fn a_sync_on_another_epoch_than_it_was_sent_in_trims_nothing() {
        let inc = Incarnations::default();
        inc.observe(at("a", "1", false));
        inc.record(0, Entry::Opaque);
        let mark = inc.mark();
        inc.observe(at("b", "1", false));
        inc.synced(mark, 0);
        assert!(inc.replay_due());
        inc.synced(mark, 1);
        assert!(
            inc.replay_due(),
            "a sync on the new server covers no commit of the old one"
        );
    }
}
