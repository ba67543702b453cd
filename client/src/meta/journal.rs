//! What this client committed that no sync covers yet, kept to tell a server that lost it again.
//!
//! In 'fsync' durability mode procedures commit without waiting for the WAL
//! flush; a PostgreSQL crash (or a failover to a standby that had not
//! received them) erases the last of those commits. A crash loses a suffix
//! of the WAL, so what a client loses is the end of its own commit order.
//! Every commit no sync has covered yet is kept here, in commit order, with
//! the epoch (server incarnation) it went to. When a connection reaches a
//! new incarnation, the client tells it again what the old one may have
//! lost before anything else is sent: what can be told again (a node made,
//! slices committed) is checked and, where missing, committed again; if
//! anything else was among the unsynced commits, the loss is reported
//! instead (the fsyncs that vouch for it fail), as rule 0 of durability asks.

use std::collections::VecDeque;

use super::{
    DeferredAttrs, Failure, Meta, MetaError, NewNode, NodeType, Result, SliceRow, MAX_ANSWERS_LOST,
};

/// The number of server incarnations a client has seen, minus one.
pub type Epoch = u64;

/// A commit that can be sent again to a server that lost it.
#[derive(Debug, Clone)]
pub enum Redo {
    /// `jfs.mknod` made `inode` as `name` in `parent`.
    Mknod {
        parent: u64,
        name: Vec<u8>,
        kind: NodeType,
        mode: u32,
        umask: u32,
        uid: u32,
        gid: u32,
        rdev: u32,
        target: Option<Vec<u8>>,
        inode: u64,
    },
    /// `jfs.write_slice(s)` committed these slices (with their chunks) to
    /// `inode`, in this order, and then the attribute change `attrs`.
    Slices {
        inode: u64,
        slices: Vec<(u32, SliceRow)>,
        attrs: Option<DeferredAttrs>,
    },
}

/// What kind of commit a journal entry stands for.
#[derive(Debug)]
pub enum Entry {
    /// One that can be sent again.
    Redo(Redo),
    /// Locks and files held open: no fsync vouches for them, but the mount
    /// relies on them; their loss is told to the mount (its handles that
    /// held locks get EIO, its open files are held again).
    State,
    /// Any other change: its loss cannot be undone and is reported.
    Opaque,
}

/// One journal entry (consecutive State or Opaque commits share one).
#[derive(Debug)]
struct Journaled {
    /// The sequence number of the (last) commit it stands for.
    seq: u64,
    /// The epoch of the (oldest) commit it stands for.
    epoch: Epoch,
    entry: Entry,
}

/// At most this many commits are kept to be sent again; later ones count
/// as opaque until a sync trims the journal (each close syncs in 'fsync'
/// mode, so only a mount that never closes or syncs gets here).
const MAX_REDOS: usize = 65_536;

/// The commits of a client that no sync has covered yet, in commit order.
#[derive(Debug, Default)]
pub struct Journal {
    next_seq: u64,
    entries: VecDeque<Journaled>,
    redos: usize,
}

/// What a server that lost commits must be told again: the redo entries
/// sent to an earlier epoch (with their sequence numbers), and whether
/// other kinds were among them.
#[derive(Debug, Default)]
pub struct Replay {
    /// The journal's mark when this was read: later commits are not in it.
    pub mark: u64,
    pub redos: Vec<(u64, Redo)>,
    pub opaque: usize,
    pub state: usize,
}

impl Journal {
    /// Notes a commit sent in `epoch`.
    pub fn record(&mut self, epoch: Epoch, entry: Entry) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let entry = match entry {
            Entry::Redo(_) if self.redos >= MAX_REDOS => Entry::Opaque,
            e => e,
        };
        if let Some(last) = self.entries.back_mut() {
            let same = matches!(
                (&last.entry, &entry),
                (Entry::State, Entry::State) | (Entry::Opaque, Entry::Opaque)
            );
            if same {
                last.seq = seq;
                last.epoch = last.epoch.min(epoch);
                return;
            }
        }
        if matches!(entry, Entry::Redo(_)) {
            self.redos += 1;
        }
        self.entries.push_back(Journaled { seq, epoch, entry });
    }

    /// The sequence number the next commit gets: a sync that succeeds
    /// covers the commits before it.
    pub fn mark(&self) -> u64 {
        self.next_seq
    }

    /// The oldest epoch of a kept commit (None: none kept).
    pub fn oldest(&self) -> Option<Epoch> {
        self.entries.iter().map(|j| j.epoch).min()
    }

    /// A sync made in `epoch` succeeded after `mark` was taken: the commits
    /// before the mark that went to that epoch are durable.
    pub fn synced(&mut self, mark: u64, epoch: Epoch) {
        let redos = &mut self.redos;
        self.entries.retain(|j| {
            let covered = j.seq < mark && j.epoch == epoch;
            if covered && matches!(j.entry, Entry::Redo(_)) {
                *redos -= 1;
            }
            !covered
        });
    }

    /// What must be told again to epoch `now`: the commits sent to earlier ones.
    pub fn replay(&self, now: Epoch) -> Replay {
        let mut replay = Replay {
            mark: self.next_seq,
            ..Replay::default()
        };
        for j in self.entries.iter().filter(|j| j.epoch < now) {
            match &j.entry {
                Entry::Redo(redo) => replay.redos.push((j.seq, redo.clone())),
                Entry::Opaque => replay.opaque += 1,
                Entry::State => replay.state += 1,
            }
        }
        replay
    }

    /// The redo entry `seq` is now known to be on the server of `epoch`
    /// (it was found there, or committed again).
    pub fn replayed(&mut self, seq: u64, epoch: Epoch) {
        if let Some(j) = self.entries.iter_mut().find(|j| j.seq == seq) {
            j.epoch = j.epoch.max(epoch);
        }
    }

    /// Forgets the commits before `mark` sent to epochs before `now`: they
    /// are lost (or cannot be known not to be).
    pub fn forget_before(&mut self, mark: u64, now: Epoch) {
        let redos = &mut self.redos;
        self.entries.retain(|j| {
            let old = j.seq < mark && j.epoch < now;
            if old && matches!(j.entry, Entry::Redo(_)) {
                *redos -= 1;
            }
            !old
        });
    }
}

impl Meta {
    /// Tells the current server incarnation what this client committed to
    /// earlier ones and no sync covered: every call waits for this first.
    /// Fails only when the database stays unavailable (`--meta-retry`).
    pub(super) async fn replay(&self) -> Result<()> {
        let _alone = self.replaying.lock().await;
        let replayer = self.replayer();
        let mut answers_lost = 0;
        loop {
            if !self.incarnations.replay_due() {
                return Ok(());
            }
            let (plan, now) = self.incarnations.replay();
            if plan.opaque > 0 {
                tracing::error!(
                    "the metadata server may have lost {} change(s) of this mount that cannot \
                     be told again (renames, removals, attributes...): they may be gone, and \
                     fsyncs that vouched for them report EIO",
                    plan.opaque
                );
                self.incarnations
                    .replay_ended(&plan, now, true, plan.state > 0);
                return Ok(());
            }
            let mut interrupted = false;
            let mut made_again = 0;
            for (seq, redo) in &plan.redos {
                match replayer.redo(redo).await {
                    Ok((found_in, again)) => {
                        self.incarnations.replayed(*seq, found_in);
                        made_again += usize::from(again);
                    }
                    Err(e) if e.kind() == Failure::Unavailable => return Err(e),
                    // the server went away again mid-replay: look again
                    Err(e)
                        if e.kind() == Failure::AnswerLost && answers_lost < MAX_ANSWERS_LOST =>
                    {
                        answers_lost += 1;
                        interrupted = true;
                        break;
                    }
                    Err(e) => {
                        tracing::error!(
                            "the metadata server lost {redo}, and it could not be made again: \
                             {e}; fsyncs that vouched for it report EIO"
                        );
                        self.incarnations
                            .replay_ended(&plan, now, true, plan.state > 0);
                        return Ok(());
                    }
                }
            }
            if interrupted || self.incarnations.epoch() != now {
                continue; // the server changed again meanwhile
            }
            if plan.state > 0 {
                tracing::warn!(
                    "the metadata server may have lost locks or files held open by this mount: \
                     handles of locked files report EIO until closed, open files are held again"
                );
            }
            tracing::warn!(
                "of {} change(s) this mount committed since its last sync, the new metadata \
                 server had lost {made_again}: made again",
                plan.redos.len()
            );
            self.incarnations
                .replay_ended(&plan, now, false, plan.state > 0);
            return Ok(());
        }
    }

    /// Finds `redo` on the current server, or commits it again there;
    /// returns the epoch that says so, and whether it was committed again.
    async fn redo(&self, redo: &Redo) -> Result<(Epoch, bool)> {
        match redo {
            Redo::Mknod {
                parent,
                name,
                inode,
                ..
            } => {
                let asked_in = self.incarnations.epoch();
                match self.lookup(*parent, name).await {
                    Ok(attr) if attr.inode == *inode => return Ok((asked_in, false)),
                    Ok(_) => return Err(MetaError::Errno(libc::EEXIST)),
                    Err(MetaError::Errno(libc::ENOENT)) => {}
                    Err(e) => return Err(e),
                }
                let node = redo.node().expect("a mknod");
                Ok((self.mknod_once(*parent, name, &node, *inode).await?.1, true))
            }
            Redo::Slices {
                inode,
                slices,
                attrs,
            } => {
                let attrs = attrs.as_ref();
                let (found, asked_in) = self.settle_slices(*inode, slices, attrs, None).await?;
                if found == slices.len() {
                    return Ok((asked_in, false));
                }
                let done = self
                    .write_slices(*inode, &slices[found..], attrs, false)
                    .await?;
                done.attr.map_err(MetaError::Errno)?;
                match found + done.committed == slices.len() {
                    true => Ok((done.sent_in, true)),
                    false => Err(MetaError::Errno(libc::EIO)),
                }
            }
        }
    }
}

impl Redo {
    /// The node a mknod made.
    fn node(&self) -> Option<NewNode<'_>> {
        match self {
            Redo::Mknod {
                kind,
                mode,
                umask,
                uid,
                gid,
                rdev,
                target,
                ..
            } => Some(NewNode {
                kind: *kind,
                mode: *mode,
                umask: *umask,
                uid: *uid,
                gid: *gid,
                rdev: *rdev,
                target: target.as_deref(),
            }),
            Redo::Slices { .. } => None,
        }
    }

    /// The commit to send again for a node made by `jfs.mknod`.
    pub fn mknod(parent: u64, name: &[u8], node: &NewNode<'_>, inode: u64) -> Redo {
        Redo::Mknod {
            parent,
            name: name.to_vec(),
            kind: node.kind,
            mode: node.mode,
            umask: node.umask,
            uid: node.uid,
            gid: node.gid,
            rdev: node.rdev,
            target: node.target.map(<[u8]>::to_vec),
            inode,
        }
    }
}

impl std::fmt::Display for Redo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Redo::Mknod {
                parent,
                name,
                inode,
                ..
            } => write!(
                f,
                "the creation of inode {inode} as {:?} in directory {parent}",
                String::from_utf8_lossy(name)
            ),
            Redo::Slices { inode, slices, .. } => {
                write!(f, "{} slice(s) written to inode {inode}", slices.len())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slices(inode: u64) -> Entry {
        Entry::Redo(Redo::Slices {
            inode,
            slices: Vec::new(),
            attrs: None,
        })
    }

    #[test]
    fn a_sync_trims_what_it_covers_and_a_new_epoch_replays_the_rest() {
        let mut j = Journal::default();
        j.record(0, slices(1));
        j.record(0, Entry::State);
        j.record(0, Entry::State);
        let mark = j.mark();
        j.record(0, slices(2));
        assert_eq!(j.entries.len(), 3, "the two State commits share an entry");
        j.synced(mark, 0);
        assert_eq!(j.entries.len(), 1);
        assert_eq!(j.oldest(), Some(0));
        j.record(1, Entry::Opaque);
        let r = j.replay(1);
        assert_eq!((r.redos.len(), r.opaque, r.state), (1, 0, 0));
        j.replayed(r.redos[0].0, 1);
        assert_eq!(j.oldest(), Some(1));
        assert_eq!(j.replay(1).redos.len(), 0);
        j.record(1, Entry::Opaque);
        j.record(2, Entry::Opaque);
        assert_eq!(j.replay(2).opaque, 1, "one entry of three commits");
        j.forget_before(j.mark(), 2);
        assert_eq!(j.oldest(), None);
        assert_eq!(j.redos, 0);
    }

    #[test]
    fn a_sync_keeps_commits_of_another_epoch() {
        let mut j = Journal::default();
        j.record(0, slices(1));
        j.record(1, slices(2));
        j.synced(j.mark(), 1);
        assert_eq!(
            j.oldest(),
            Some(0),
            "sent to the old server: to be replayed"
        );
    }

    #[test]
    fn past_the_limit_commits_count_as_opaque() {
        let mut j = Journal::default();
        for _ in 0..MAX_REDOS + 3 {
            j.record(0, slices(1));
        }
        let r = j.replay(1);
        assert_eq!((r.redos.len(), r.opaque), (MAX_REDOS, 1));
    }
}
