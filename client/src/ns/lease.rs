//! A directory lease's state as a pure state machine: the entries the lease
//! gives this mount, what it answered under the lease and has not committed,
//! and what it may answer now. No I/O and no locks: its keeper
//! (`ns/keeper.rs`) feeds it events (an unlink or a create to answer, a
//! commit to send, its answer or its failure, an operation through
//! PostgreSQL that makes an entry or goes with a file's data) and does what
//! it is told (send this batch, wait, ask PostgreSQL, give the lease up,
//! report a create refused).
//!
//! Its invariants, checked by [`LeaseState::check`] (`debug_assert!`) after
//! every transition:
//! - the nodes made here and not committed (`created`) are exactly those of
//!   the creates pending: one place says which inodes PostgreSQL does not
//!   know yet ([`LeaseState::made_here`]), so that it is never asked about
//!   one before its batch commits;
//! - no two creates pending make the same inode;
//! - a commit in flight sent the first unlinks and creates pending, no more
//!   than there are;
//! - nothing is answered while a commit that may end the lease, or an
//!   operation holding the lease's gate, is in flight ([`Phase`]).
use std::collections::HashMap;

use crate::meta::{Attr, LeaseBatch, LeaseCommitted, LeasedCreate, LeasedEntry, NodeType};

/// What a lease is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Nothing in flight: unlinks and creates are answered here.
    Open,
    /// A commit is in flight that may end the lease: answers wait for it.
    Committing(Sent),
    /// A commit is in flight that keeps the lease even if another mount asks
    /// for it: answers go on, after what it sent.
    Holding(Sent),
    /// An operation through PostgreSQL makes an entry in the directory, or a
    /// file's creation goes with its data's commit: answers and commits wait.
    Gated,
}

/// How much of what is pending a commit in flight sent (the first ones).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    pub unlinks: usize,
    pub creates: usize,
}

/// Whether a commit keeps the lease (unless another mount asked for it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    No,
    /// Yes, for a file PostgreSQL is about to be asked about: a batch of
    /// its create alone goes through `jfs.mknod`, which costs the server a
    /// third of a lease commit.
    Settle,
    /// If unlinks or creates were answered since the last such commit (the
    /// committer's, every window).
    IfBusy,
}

/// The answer to an unlink asked of the lease.
#[derive(Debug, PartialEq, Eq)]
pub enum Unlink {
    /// Answered here: node `inode` removed (committed later, or forgotten
    /// with its create if that was not sent yet).
    Answered { inode: u64 },
    /// A commit or a gated operation is in flight: ask again after it.
    Wait,
    /// Not for the lease (unknown, a directory, linked elsewhere, open,
    /// or commits failing): PostgreSQL answers it.
    ToDatabase,
}

/// The answer to a create asked of the lease.
#[derive(Debug, PartialEq, Eq)]
pub enum Create {
    /// Answered here; `meanwhile`: while a commit holding the lease was in
    /// flight.
    Answered {
        meanwhile: bool,
    },
    /// The name is taken.
    Exists,
    Wait,
    ToDatabase,
}

/// A lookup asked of the lease.
#[derive(Debug, PartialEq)]
pub enum Lookup {
    /// No such name: the lease has every entry.
    Missing,
    /// A file made here and not committed: its node.
    Made(Attr),
    /// An entry PostgreSQL knows: ask as usual.
    Known,
}

/// A commit to send, as [`LeaseState::begin_commit`] decided it.
#[derive(Debug)]
pub struct Commit {
    pub batch: LeaseBatch,
    /// Whether the lease is kept after it (unless another mount asked).
    pub keep: bool,
    /// Whether it holds the lease while in flight (answers go on).
    pub hold: bool,
    /// Whether PostgreSQL said creates may be answered (what a commit that
    /// cannot tell leaves standing).
    pub may_create: bool,
}

/// What the keeper does after a commit's answer.
#[derive(Debug, Default)]
pub struct Committed {
    /// The files it made: name, and the node as answered here.
    pub made: Vec<(Vec<u8>, Attr)>,
    /// Creates it refused (the keeper reports them and keeps their data).
    pub refused: Vec<(LeasedCreate, i32)>,
    /// Another commit must follow now, giving the lease up (asked for
    /// while held, or lost with more answered meanwhile).
    pub again: bool,
    /// The lease is over: forget it.
    pub released: bool,
    /// Another mount asked for it, or it was lost: do not take it again at
    /// once.
    pub refuse: bool,
}

/// A directory lease this mount holds.
#[derive(Debug)]
pub struct LeaseState {
    /// Its entries: those the lease found, with the changes made since.
    entries: HashMap<Vec<u8>, LeasedEntry>,
    /// Unlinks answered and not yet committed (name, inode), in order.
    unlinks: Vec<(Vec<u8>, i64)>,
    /// Creates answered and not yet committed, in order.
    creates: Vec<LeasedCreate>,
    /// Their nodes, by inode, as this mount answered them.
    created: HashMap<u64, Attr>,
    /// PostgreSQL's word at the last commit: creates may be answered here
    /// (no quota limit, squash or default ACL applies).
    may_create: bool,
    phase: Phase,
    /// Unlinks or creates were answered since the last commit that kept the
    /// lease because of them.
    busy: bool,
    /// The last commit failed: nothing is answered until one succeeds.
    failing: bool,
}

impl LeaseState {
    /// A lease just taken, with the directory's `entries`; `may_create` as
    /// PostgreSQL told it (false until asked).
    pub fn new(
        entries: impl IntoIterator<Item = (Vec<u8>, LeasedEntry)>,
        may_create: bool,
    ) -> Self {
        LeaseState {
            entries: entries.into_iter().collect(),
            unlinks: Vec::new(),
            creates: Vec::new(),
            created: HashMap::new(),
            may_create,
            phase: Phase::Open,
            busy: true,
            failing: false,
        }
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// Whether creates may be answered here now.
    pub fn may_create(&self) -> bool {
        self.may_create && !self.failing
    }

    /// Whether answers must wait for what is in flight.
    fn waits(&self) -> bool {
        matches!(self.phase, Phase::Committing(_) | Phase::Gated)
    }

    /// How many of the pending creates the commit in flight sent.
    fn creates_sent(&self) -> usize {
        match self.phase {
            Phase::Committing(sent) | Phase::Holding(sent) => sent.creates,
            Phase::Open | Phase::Gated => 0,
        }
    }

    /// An unlink of `name`: answered here if the lease knows it, it is not a
    /// directory, it has one link, and `is_open` says it is not open here.
    pub fn unlink(&mut self, name: &[u8], is_open: impl Fn(u64) -> bool) -> Unlink {
        if self.failing {
            return Unlink::ToDatabase;
        }
        if self.waits() {
            return Unlink::Wait;
        }
        let Some(entry) = self.entries.get(name) else {
            return Unlink::ToDatabase;
        };
        if entry.kind == NodeType::Dir || entry.nlink != 1 || is_open(entry.inode) {
            return Unlink::ToDatabase;
        }
        let inode = entry.inode;
        self.entries.remove(name);
        self.busy = true;
        // (a create not sent yet is forgotten; one the commit in flight
        // makes is then removed as any other name)
        let sent = self.creates_sent();
        let unsent = self.creates.iter().position(|c| c.inode == inode);
        match unsent.filter(|&at| at >= sent) {
            Some(at) => {
                self.creates.remove(at);
                self.created.remove(&inode);
            }
            None => self.unlinks.push((name.to_vec(), inode as i64)),
        }
        self.check();
        Unlink::Answered { inode }
    }

    /// The create of regular file `create` (its node as answered: `attr`).
    pub fn create(&mut self, attr: Attr, create: LeasedCreate) -> Create {
        if !self.may_create() {
            return Create::ToDatabase;
        }
        if self.waits() {
            return Create::Wait;
        }
        if self.entries.contains_key(&create.name) {
            return Create::Exists;
        }
        debug_assert_eq!(attr.inode, create.inode);
        let entry = LeasedEntry {
            inode: create.inode,
            kind: NodeType::File,
            nlink: 1,
        };
        self.entries.insert(create.name.clone(), entry);
        self.created.insert(create.inode, attr);
        self.creates.push(create);
        self.busy = true;
        self.check();
        Create::Answered {
            meanwhile: matches!(self.phase, Phase::Holding(_)),
        }
    }

    /// A lookup of `name`.
    pub fn lookup(&self, name: &[u8]) -> Lookup {
        match self.entries.get(name) {
            None => Lookup::Missing,
            Some(entry) => match self.created.get(&entry.inode) {
                Some(attr) => Lookup::Made(attr.clone()),
                None => Lookup::Known,
            },
        }
    }

    /// Whether this mount made `inode` here and has not committed it: then
    /// PostgreSQL may not be asked about it before the batch commits.
    pub fn made_here(&self, inode: u64) -> bool {
        self.created.contains_key(&inode)
    }

    /// The node of `inode`, made here and not committed.
    pub fn created_attr(&self, inode: u64) -> Option<&Attr> {
        self.created.get(&inode)
    }

    /// The inode `name` names, if made here and not committed.
    pub fn created_as(&self, name: &[u8]) -> Option<u64> {
        let inode = self.entries.get(name)?.inode;
        self.made_here(inode).then_some(inode)
    }

    /// Entry `name` was made through PostgreSQL by this mount.
    pub fn entry_made(&mut self, name: &[u8], entry: LeasedEntry) {
        self.entries.insert(name.to_vec(), entry);
    }

    /// Entry `name` was removed through PostgreSQL by this mount.
    pub fn entry_gone(&mut self, name: &[u8]) {
        self.entries.remove(name);
    }

    /// A commit begins (the keeper holds the lease's gate: nothing else is
    /// in flight): what to send, and how.
    pub fn begin_commit(&mut self, keep: Keep) -> Commit {
        debug_assert_eq!(
            self.phase,
            Phase::Open,
            "a commit begins with another in flight"
        );
        let keep_now = match keep {
            Keep::No => false,
            Keep::Settle => true,
            Keep::IfBusy => std::mem::take(&mut self.busy),
        };
        let creates = self.creates.clone();
        // (a batch of creates, committed by jfs.lease_commit, holds a lease
        // it keeps: creates are answered meanwhile)
        let hold = keep_now && !creates.is_empty() && keep != Keep::Settle;
        let sent = Sent {
            unlinks: self.unlinks.len(),
            creates: creates.len(),
        };
        self.phase = match hold {
            true => Phase::Holding(sent),
            false => Phase::Committing(sent),
        };
        let (unlink_names, unlink_inodes) = self.unlinks.iter().cloned().unzip();
        self.check();
        Commit {
            batch: LeaseBatch {
                unlink_names,
                unlink_inodes,
                creates,
            },
            keep: keep_now,
            hold,
            may_create: self.may_create,
        }
    }

    /// The commit in flight failed: what it sent stays pending, and nothing
    /// is answered until a commit succeeds. A create it sent whose unlink
    /// was answered while it held the lease is dropped, its unlink kept:
    /// the database takes a batch's unlinks before its creates, so the two
    /// in one batch would leave the file made; the unlink alone removes it
    /// if the failed commit made it after all (its answer lost), and finds
    /// nothing otherwise.
    pub fn commit_failed(&mut self) {
        debug_assert!(matches!(
            self.phase,
            Phase::Committing(_) | Phase::Holding(_)
        ));
        if let Phase::Holding(_) = self.phase {
            let unlinked: std::collections::HashSet<u64> = self
                .unlinks
                .iter()
                .map(|&(_, inode)| inode as u64)
                .collect();
            self.creates.retain(|c| !unlinked.contains(&c.inode));
            self.created.retain(|inode, _| !unlinked.contains(inode));
        }
        self.phase = Phase::Open;
        self.busy = true;
        self.failing = true;
        self.check();
    }

    /// The commit in flight was answered (`keep`: as it was sent).
    pub fn commit_answered(&mut self, answer: &LeaseCommitted, keep: bool) -> Committed {
        let sent = match self.phase {
            Phase::Committing(sent) | Phase::Holding(sent) => sent,
            phase => panic!("a commit answered in phase {phase:?}"),
        };
        self.phase = Phase::Open;
        self.failing = false;
        self.may_create = answer.creates;
        self.unlinks.drain(..sent.unlinks);
        let mut done = Committed::default();
        let errnos = answer
            .create_errnos
            .iter()
            .chain(std::iter::repeat(&libc::EIO));
        for (create, &e) in self.creates.drain(..sent.creates).zip(errnos) {
            let attr = self.created.remove(&create.inode);
            if e != 0 {
                if self
                    .entries
                    .get(&create.name)
                    .is_some_and(|x| x.inode == create.inode)
                {
                    self.entries.remove(&create.name);
                }
                done.refused.push((create, e));
            } else if let Some(attr) = attr {
                done.made.push((create.name, attr));
            }
        }
        // answered while the commit was in flight, holding the lease
        let left = !self.unlinks.is_empty() || !self.creates.is_empty();
        done.again = answer.wanted || (!answer.kept && left);
        if done.again {
            // no create answered here until the next commit gives it up
            self.may_create = false;
        } else {
            done.released = !answer.kept;
        }
        done.refuse = keep && (answer.wanted || !answer.kept);
        self.check();
        done
    }

    /// An operation that makes `name` through PostgreSQL begins, the
    /// keeper holding the lease's gate: EEXIST for a name the lease knows;
    /// false if the lease must be committed and given up first (the unlink
    /// of `name` is pending); true: the lease is kept and waits
    /// ([`Phase::Gated`]) until [`LeaseState::end_gate`].
    pub fn begin_make(&mut self, name: &[u8]) -> Result<bool, i32> {
        debug_assert_eq!(self.phase, Phase::Open);
        if self.entries.contains_key(name) {
            return Err(libc::EEXIST);
        }
        let kept = !self.unlinks.iter().any(|(n, _)| n == name);
        if kept {
            self.phase = Phase::Gated;
        }
        Ok(kept)
    }

    /// The gated operation is over.
    pub fn end_gate(&mut self) {
        debug_assert_eq!(self.phase, Phase::Gated);
        self.phase = Phase::Open;
    }

    /// The first commit of file `inode`'s data begins, the keeper holding
    /// the lease's gate: if its create is the only change pending, it goes
    /// with that commit (returned; the lease waits until
    /// [`LeaseState::created_with_data`]).
    pub fn begin_create_with_data(&mut self, inode: u64) -> Option<LeasedCreate> {
        debug_assert_eq!(self.phase, Phase::Open);
        let alone =
            self.unlinks.is_empty() && self.creates.len() == 1 && self.creates[0].inode == inode;
        if !alone {
            return None;
        }
        self.phase = Phase::Gated;
        Some(self.creates[0].clone())
    }

    /// The commit a create went with is over: `made` if it made the file
    /// (then no longer pending: returned), else it stays pending for the
    /// next batch.
    pub fn created_with_data(&mut self, inode: u64, made: bool) -> Option<LeasedCreate> {
        self.end_gate();
        let at = self.creates.iter().position(|c| c.inode == inode);
        let create = at.filter(|_| made).map(|at| {
            self.created.remove(&inode);
            self.creates.remove(at)
        });
        self.check();
        create
    }

    /// Whether anything answered here waits for a commit.
    pub fn has_pending(&self) -> bool {
        !self.unlinks.is_empty() || !self.creates.is_empty()
    }

    /// Checks the invariants (debug builds).
    fn check(&self) {
        debug_assert_eq!(
            self.created.len(),
            self.creates.len(),
            "created and creates: {self:?}"
        );
        debug_assert!(
            self.creates
                .iter()
                .all(|c| self.created.contains_key(&c.inode)),
            "a create pending without its node: {self:?}"
        );
        if let Phase::Committing(sent) | Phase::Holding(sent) = self.phase {
            debug_assert!(
                sent.unlinks <= self.unlinks.len() && sent.creates <= self.creates.len(),
                "a commit sent more than is pending: {self:?}"
            );
        }
    }
}

#[cfg(test)]
mod tests;
