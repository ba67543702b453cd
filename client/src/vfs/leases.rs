//! Directory leases: a run of unlinks or creates in one directory is
//! answered by this mount and committed in batches, while no other mount
//! may read or change the directory (`jfs.take_lease`, `jfs.lease_commit`:
//! sql/lease.sql).
//!
//! After [`OPS_BEFORE_LEASE`] unlinks, or creates of regular files, in a row
//! in one directory, each through PostgreSQL and with no other operation on
//! its entries between, the mount takes the directory's lease, which gives
//! it every entry. An unlink of a name the lease found, not a directory,
//! with one link and not open here, is then answered at once and kept
//! pending. So is the create of a regular file under a name the lease does
//! not know, while PostgreSQL says no quota limit, squash or default ACL
//! applies there (the node is then made here as mknod would make it, with
//! an inode of this mount's range); lookups of the directory are answered
//! from the lease's entries, and the new file's attributes from the lease.
//! The committer ([`Vfs::commit_leases`]) sends the pending ones every
//! [`LEASE_WINDOW`], and gives the lease up after a window without any or
//! when another mount asked for it. A mkdir, symlink or device node there
//! goes through PostgreSQL with the lease kept ([`Vfs::make_begins`]); any
//! other operation on the directory's entries here (a rename, an rmdir, a
//! listing, an fsyncdir) first commits them and gives the lease up
//! ([`Vfs::settle_dir`]). The first commit of the data of a file made here
//! and not yet committed makes it too, when it is the only change pending
//! in its directory ([`Vfs::create_with_data`]); any other operation that
//! PostgreSQL must answer about such a file (an fsync, a setattr, a link,
//! a lock...) first commits the directory's batch
//! ([`Vfs::settle_created`]). A crash of this mount loses what was pending
//! (at most one window), never half of a batch.
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::meta::{
    Attr, CreateWithData, LeaseBatch, LeaseCommitted, LeasedCreate, LeasedEntry, NewNode, NodeType,
};
use crate::vfs::attrs::Ticket;
use crate::vfs::handles::FileState;
use crate::vfs::writer::WriteTarget;
use crate::vfs::{errno, Vfs, VfsResult};

/// How long unlinks answered under a lease wait, at most, for their commit.
pub const LEASE_WINDOW: Duration = Duration::from_millis(50);

/// Unlinks or creates in a row in one directory, each a round trip, after
/// which the mount takes the directory's lease.
const OPS_BEFORE_LEASE: u32 = 2;

/// Directories with more entries are not leased (the lease sends them all).
const LEASE_MAX_ENTRIES: i32 = 10_000;

/// How long a directory whose lease could not be had is not asked for again.
const LEASE_REFUSED_FOR: Duration = Duration::from_secs(1);

/// A lease's gate: taken by its commits, one at a time.
type Gate = Arc<tokio::sync::Mutex<()>>;

/// A directory this mount holds the lease of.
struct Held {
    /// Its entries: those the lease found, less those removed since.
    entries: HashMap<Vec<u8>, LeasedEntry>,
    /// Unlinks answered and not yet committed (name, inode), in order.
    pending: Vec<(Vec<u8>, i64)>,
    /// Whether creates may be answered here (PostgreSQL's word at the last
    /// commit: no quota limit, squash or default ACL applies).
    creates: bool,
    /// Creates answered and not yet committed, in order.
    pending_creates: Vec<LeasedCreate>,
    /// Their nodes, by inode, as this mount answered them.
    created: HashMap<u64, Attr>,
    /// A commit is in flight: unlinks and creates wait for it (the lease
    /// may end with it), unless it holds the lease.
    committing: bool,
    /// The commit in flight keeps the lease even if another mount asks for
    /// it (`jfs.lease_commit`'s hold): unlinks and creates are answered
    /// meanwhile, after the `in_flight_creates` creates it sent.
    holding: bool,
    /// How many of `pending_creates` the commit in flight sent.
    in_flight_creates: usize,
    /// Unlinks or creates were answered since the last commit.
    busy: bool,
    /// The last commit failed: unlinks go to PostgreSQL until one succeeds.
    failing: bool,
    /// Taken one at a time: a commit, or a settle waiting for one.
    gate: Gate,
}

/// The leases this mount holds, and the runs of unlinks that may earn one.
#[derive(Default)]
pub struct Leases {
    /// Whether leases are taken (a committer runs: `Vfs::commit_leases`).
    enabled: AtomicBool,
    /// Whether `jfs.lease_commit` may be called (an extension before 0.2.20,
    /// or a role not granted it again since, has `jfs.lease_unlink` only:
    /// no create is then answered here).
    no_lease_commit: AtomicBool,
    /// Whether `jfs.lease_commit` takes a hold: known from its first
    /// answer (0.2.22 on); until then no commit holds a lease.
    hold_known: AtomicBool,
    /// Whether it does not (an extension before 0.2.22).
    no_hold: AtomicBool,
    held: Mutex<HashMap<u64, Held>>,
    /// The directory of the last unlinks or creates, how many in a row, and
    /// whether they were creates (creates and unlinks taking turns, as a
    /// database's rollback journal does, earn no lease: another mount using
    /// the directory would wait for a hand-over at every turn).
    run: Mutex<(u64, u32, bool)>,
    /// Directories whose lease could not be had, or was asked for, and when.
    refused: Mutex<HashMap<u64, Instant>>,
    /// Leases being taken, and whether an operation on the directory began
    /// meanwhile (the entries the lease returns may then miss its change).
    taking: Mutex<HashMap<u64, bool>>,
    /// Operations on each directory's entries in flight here (a lease is
    /// not taken meanwhile).
    in_flight: Mutex<HashMap<u64, u32>>,
    /// Wakes the committer when a lease is taken.
    taken: tokio::sync::Notify,
}

impl Leases {
    fn holds(&self, dir: u64) -> bool {
        self.held.lock().unwrap().contains_key(&dir)
    }

    /// `f` applied to `dir`'s lease if it is still the one `gate` guards
    /// (not given up meanwhile; taken again, it is another's).
    fn with_own<R>(&self, dir: u64, gate: &Gate, f: impl FnOnce(&mut Held) -> R) -> Option<R> {
        let mut held = self.held.lock().unwrap();
        held.get_mut(&dir)
            .filter(|l| Arc::ptr_eq(&l.gate, gate))
            .map(f)
    }

    /// The directory whose lease made `inode` here and has not committed
    /// it yet, and that lease's gate.
    fn maker_of(&self, inode: u64) -> Option<(u64, Gate)> {
        let held = self.held.lock().unwrap();
        held.iter()
            .find(|(_, l)| l.created.contains_key(&inode))
            .map(|(dir, l)| (*dir, l.gate.clone()))
    }

    /// An operation on `dir`'s entries begins (see [`DirOp`]).
    fn begin(&self, dir: u64) -> DirOp<'_> {
        *self.in_flight.lock().unwrap().entry(dir).or_insert(0) += 1;
        if let Some(spoiled) = self.taking.lock().unwrap().get_mut(&dir) {
            *spoiled = true;
        }
        DirOp { leases: self, dir }
    }

    /// Whether a lease of `dir` may be taken now: none held or being taken,
    /// and no operation on the directory in flight here.
    fn may_take(&self, dir: u64) -> bool {
        if self.holds(dir) || self.in_flight.lock().unwrap().contains_key(&dir) {
            return false;
        }
        match self.taking.lock().unwrap().entry(dir) {
            std::collections::hash_map::Entry::Occupied(_) => false,
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(false);
                true
            }
        }
    }

    /// An operation other than an unlink or a create of a regular file on
    /// `dir`'s entries: a run of them there starts again.
    fn run_broken(&self, dir: u64) {
        let mut run = self.run.lock().unwrap();
        if run.0 == dir {
            *run = (0, 0, false);
        }
    }

    /// `dir`'s lease may not be taken again for a while (refused, or given
    /// up because another mount asked).
    fn refuse(&self, dir: u64) {
        let mut refused = self.refused.lock().unwrap();
        refused.retain(|_, at| at.elapsed() < LEASE_REFUSED_FOR);
        refused.insert(dir, Instant::now());
        *self.run.lock().unwrap() = (0, 0, false);
    }

    /// Counts an unlink (or a create: `create`) in `dir` sent to
    /// PostgreSQL; true when the run earns the directory's lease.
    fn counted(&self, dir: u64, create: bool) -> bool {
        let mut run = self.run.lock().unwrap();
        if run.0 == dir && run.2 == create {
            run.1 += 1;
        } else {
            *run = (dir, 1, create);
        }
        run.1 >= OPS_BEFORE_LEASE
            && self
                .refused
                .lock()
                .unwrap()
                .get(&dir)
                .is_none_or(|at| at.elapsed() >= LEASE_REFUSED_FOR)
    }
}

/// A commit's answer, the files it made (name, node as answered here), and
/// whether the lease needs another commit now (asked for while held, or
/// lost with more answered meanwhile).
type Committed = (LeaseCommitted, Vec<(Vec<u8>, Attr)>, bool);

/// Whether a commit keeps the lease (unless another mount asked for it).
#[derive(Clone, Copy)]
enum Keep {
    No,
    /// Yes, for a file PostgreSQL is about to be asked about
    /// ([`Vfs::settle_created`]): a batch of its create alone goes through
    /// `jfs.mknod`, which costs the server a third of a lease commit.
    Settle,
    /// Yes, and learn whether creates may be answered (jfs.lease_commit).
    Ask,
    /// If unlinks or creates were answered since the last such commit (the
    /// committer's, every window).
    IfBusy,
}

/// A file made under a lease whose creation goes with its data's commit
/// ([`Vfs::create_with_data`]): the lease's gate is held (its commits, and
/// creates and unlinks answered in the directory, wait) until it is handed
/// back to [`Vfs::created_with_data`].
pub struct CreateInFlight {
    /// The creation, for the commit to take (None once made).
    pub made: Option<CreateWithData>,
    inode: u64,
    gate: Gate,
    /// Taken before the commit.
    ticket: Ticket,
    _one_at_a_time: tokio::sync::OwnedMutexGuard<()>,
}

/// An operation making an entry through PostgreSQL in a directory
/// ([`Vfs::make_begins`]): under the directory's lease, held with its gate
/// (the entry joins the lease's: [`MakeInDir::made`]), or with none.
pub struct MakeInDir<'a> {
    leases: &'a Leases,
    dir: u64,
    lease: Option<(Gate, tokio::sync::OwnedMutexGuard<()>)>,
    _op: Option<DirOp<'a>>,
}

impl MakeInDir<'_> {
    /// `name` was made for node `attr`: the lease's entries gain it.
    pub fn made(&self, name: &[u8], attr: &Attr) {
        let Some((gate, _)) = &self.lease else {
            return;
        };
        let entry = LeasedEntry {
            inode: attr.inode,
            kind: attr.kind,
            nlink: attr.nlink,
        };
        self.leases.with_own(self.dir, gate, |lease| {
            lease.entries.insert(name.to_vec(), entry);
        });
    }
}

impl Drop for MakeInDir<'_> {
    fn drop(&mut self) {
        let Some((gate, _)) = &self.lease else {
            return;
        };
        self.leases
            .with_own(self.dir, gate, |lease| lease.committing = false);
    }
}

/// What an unlink under a lease removed.
pub struct LeasedUnlink {
    pub inode: u64,
}

/// An operation on a directory's entries in flight: while one is, the
/// mount takes no lease of the directory (the lease's entries could miss
/// what the operation changes).
pub struct DirOp<'a> {
    leases: &'a Leases,
    dir: u64,
}

impl Drop for DirOp<'_> {
    fn drop(&mut self) {
        let mut in_flight = self.leases.in_flight.lock().unwrap();
        if let Some(n) = in_flight.get_mut(&self.dir) {
            *n -= 1;
            if *n == 0 {
                in_flight.remove(&self.dir);
            }
        }
    }
}

impl Vfs {
    /// Starts taking leases; the caller commits them every
    /// [`LEASE_WINDOW`] ([`Vfs::commit_leases`]).
    pub fn enable_leases(&self) {
        if self.has_session() {
            self.leases.enabled.store(true, Ordering::Relaxed);
        }
    }

    /// Waits until a lease is held (at once if one is).
    pub async fn lease_held(&self) {
        loop {
            let notified = self.leases.taken.notified();
            if !self.leases.held.lock().unwrap().is_empty() {
                return;
            }
            notified.await;
        }
    }

    /// Answers an unlink of `name` in `dir` under the directory's lease, if
    /// this mount holds it and the name may be: in the lease's entries, not
    /// a directory, one link, not open here. A file made here and not yet
    /// committed is forgotten (nothing to commit). A commit in flight is
    /// waited for (the lease may end with it). None: send it to PostgreSQL.
    pub(super) async fn unlink_leased(&self, dir: u64, name: &[u8]) -> Option<LeasedUnlink> {
        loop {
            let gate = {
                let mut held = self.leases.held.lock().unwrap();
                let lease = held.get_mut(&dir).filter(|l| !l.failing)?;
                if !lease.committing || lease.holding {
                    let entry = lease.entries.get(name)?;
                    if entry.kind == NodeType::Dir || entry.nlink != 1 || self.is_open(entry.inode)
                    {
                        return None;
                    }
                    let inode = entry.inode;
                    lease.entries.remove(name);
                    lease.busy = true;
                    // (a create not sent yet is forgotten; one the commit in
                    // flight makes is then removed as any other name)
                    let unsent = lease.pending_creates.iter().position(|c| c.inode == inode);
                    match unsent.filter(|&at| at >= lease.in_flight_creates) {
                        Some(at) => {
                            lease.pending_creates.remove(at);
                            lease.created.remove(&inode);
                        }
                        None => lease.pending.push((name.to_vec(), inode as i64)),
                    }
                    return Some(LeasedUnlink { inode });
                }
                lease.gate.clone()
            };
            drop(gate.lock().await);
        }
    }

    /// Answers the create of regular file `node` as `name` in `dir` under
    /// the directory's lease, if this mount holds it and may answer creates
    /// there: the node made as mknod would make it (EEXIST for a name the
    /// lease knows). None: send it to PostgreSQL.
    pub(super) async fn create_leased(
        &self,
        dir: u64,
        name: &[u8],
        node: &NewNode<'_>,
    ) -> VfsResult<Option<Attr>> {
        let may = |l: &Held| l.creates && !l.failing;
        if node.kind != NodeType::File
            || !self.leases.held.lock().unwrap().get(&dir).is_some_and(may)
        {
            return Ok(None);
        }
        let Ok(parent) = self.getattr(dir).await else {
            return Ok(None);
        };
        let inode = self.inode_ids.next(&self.meta).await?;
        let time = crate::meta::time_to_ns(std::time::SystemTime::now());
        loop {
            let gate = {
                let mut held = self.leases.held.lock().unwrap();
                let Some(lease) = held.get_mut(&dir).filter(|l| may(l)) else {
                    return Ok(None);
                };
                if !lease.committing || lease.holding {
                    if lease.entries.contains_key(name) {
                        return Err(libc::EEXIST);
                    }
                    let attr = Attr {
                        inode,
                        kind: NodeType::File,
                        mode: node.mode & 0o7777 & !node.umask,
                        uid: node.uid,
                        gid: match parent.mode & libc::S_ISGID {
                            0 => node.gid,
                            _ => parent.gid,
                        },
                        atime: time,
                        mtime: time,
                        ctime: time,
                        nlink: 1,
                        length: 0,
                        rdev: 0,
                        parent: 0,
                        tier: parent.tier,
                        used: 0,
                    };
                    let entry = LeasedEntry {
                        inode,
                        kind: NodeType::File,
                        nlink: 1,
                    };
                    lease.entries.insert(name.to_vec(), entry);
                    lease.created.insert(inode, attr.clone());
                    lease.pending_creates.push(LeasedCreate {
                        name: name.to_vec(),
                        inode,
                        mode: node.mode,
                        umask: node.umask,
                        uid: node.uid,
                        gid: node.gid,
                        time,
                    });
                    lease.busy = true;
                    if lease.committing {
                        crate::metrics::METRICS.lease_creates_in_flight.inc();
                    }
                    return Ok(Some(attr));
                }
                lease.gate.clone()
            };
            // a commit is in flight (the lease may end with it): after it
            drop(gate.lock().await);
        }
    }

    /// The node of `inode`, if this mount made it under a lease and has not
    /// committed it yet.
    pub(super) fn created_attr(&self, inode: u64) -> Option<Attr> {
        let held = self.leases.held.lock().unwrap();
        held.values().find_map(|l| l.created.get(&inode).cloned())
    }

    /// A lookup of `name` in `dir` answered by the lease this mount holds of
    /// it: a file made here and not yet committed, or "missing" for a name
    /// the lease does not know. None: ask as usual.
    pub(super) fn lookup_leased(&self, dir: u64, name: &[u8]) -> Option<VfsResult<Attr>> {
        let held = self.leases.held.lock().unwrap();
        let lease = held.get(&dir)?;
        match lease.entries.get(name) {
            None => Some(Err(libc::ENOENT)),
            Some(entry) => lease.created.get(&entry.inode).cloned().map(Ok),
        }
    }

    /// The inode `name` of `dir` names, if this mount made it under the
    /// directory's lease and has not committed it yet.
    pub(super) fn created_as(&self, dir: u64, name: &[u8]) -> Option<u64> {
        let held = self.leases.held.lock().unwrap();
        let lease = held.get(&dir)?;
        let inode = lease.entries.get(name)?.inode;
        lease.created.contains_key(&inode).then_some(inode)
    }

    /// Before PostgreSQL is asked anything about `inode`: if this mount made
    /// it under a lease and has not committed it yet, the directory's batch
    /// is committed now (the lease kept).
    pub(super) async fn settle_created(&self, inode: u64) -> VfsResult<()> {
        loop {
            let Some((dir, gate)) = self.leases.maker_of(inode) else {
                return Ok(());
            };
            let one_at_a_time = gate.lock().await;
            let still = self
                .leases
                .with_own(dir, &gate, |l| l.created.contains_key(&inode));
            if still == Some(true) {
                return self
                    .commit_gated(dir, &gate, Keep::Settle, one_at_a_time)
                    .await;
            }
        }
    }

    /// Before the first commit of the data of `inode`, written through
    /// `state`: if this mount made the file under a lease and has not
    /// committed it yet, either its creation goes with that commit
    /// ([`CreateInFlight`]: when it is the only change pending in its
    /// directory, and data is written: what is written is stored first, so
    /// the lease waits only for the commit) or the directory's batch is
    /// committed now.
    pub(in crate::vfs) async fn create_with_data(
        &self,
        inode: u64,
        state: &mut FileState,
        target: &WriteTarget<'_>,
    ) -> VfsResult<Option<CreateInFlight>> {
        let Some((dir, gate)) = self.leases.maker_of(inode) else {
            return Ok(None);
        };
        if !state.writer.has_slices() {
            // (an attribute change alone: setattr's, for a file it knows)
            self.settle_created(inode).await?;
            return Ok(None);
        }
        state.writer.store(target).await;
        let one_at_a_time = gate.clone().lock_owned().await;
        let ticket = self.attrs.ticket();
        let alone = self.leases.with_own(dir, &gate, |lease| {
            let alone = lease.pending.is_empty()
                && lease.pending_creates.len() == 1
                && lease.pending_creates[0].inode == inode;
            lease.committing |= alone;
            alone.then(|| lease.pending_creates[0].clone())
        });
        if let Some(create) = alone.flatten() {
            return Ok(Some(CreateInFlight {
                made: Some(CreateWithData { dir, create }),
                inode,
                gate,
                ticket,
                _one_at_a_time: one_at_a_time,
            }));
        }
        drop(one_at_a_time);
        self.settle_created(inode).await?;
        Ok(None)
    }

    /// The commit a [`CreateInFlight`] went with is over: `flight.made` is
    /// None if it made the file, whose node is then `attr` (the commit's
    /// answer, when there is one). A file not made stays pending, for the
    /// directory's next batch.
    pub(in crate::vfs) fn created_with_data(&self, flight: CreateInFlight, attr: Option<&Attr>) {
        let mut held = self.leases.held.lock().unwrap();
        let found = held
            .iter_mut()
            .find(|(_, l)| Arc::ptr_eq(&l.gate, &flight.gate));
        let Some((&dir, lease)) = found else {
            return;
        };
        lease.committing = false;
        let inode = flight.inode;
        let at = lease.pending_creates.iter().position(|c| c.inode == inode);
        let Some(at) = at.filter(|_| flight.made.is_none()) else {
            return;
        };
        let create = lease.pending_creates.remove(at);
        lease.created.remove(&inode);
        drop(held);
        if let Some(attr) = attr.filter(|a| a.inode == inode) {
            // as a create through PostgreSQL: the node as the commit left
            // it, the directory's times as the create moved them
            self.attrs
                .child_made(dir, &create.name, attr, flight.ticket);
        } else {
            self.attrs.forget(dir);
            self.attrs.forget_entry(dir, &create.name);
        }
    }

    /// An operation that makes `name` in `dir` through PostgreSQL begins (a
    /// mkdir, a symlink, a device node). A lease this mount holds of `dir`
    /// is kept, and its commits, creates and unlinks wait until the
    /// returned [`MakeInDir`] is dropped (EEXIST at once for a name the
    /// lease knows); with none, as [`Vfs::settle_dir`]. (A lease with the
    /// unlink of `name` pending is committed and given up first.)
    pub(super) async fn make_begins(&self, dir: u64, name: &[u8]) -> VfsResult<MakeInDir<'_>> {
        let gate = self
            .leases
            .held
            .lock()
            .unwrap()
            .get(&dir)
            .map(|l| l.gate.clone());
        if let Some(gate) = gate {
            let one_at_a_time = gate.clone().lock_owned().await;
            let kept = self.leases.with_own(dir, &gate, |lease| {
                if lease.entries.contains_key(name) {
                    return Err(libc::EEXIST);
                }
                let kept = !lease.pending.iter().any(|(n, _)| n == name);
                lease.committing |= kept;
                Ok(kept)
            });
            if kept.transpose()? == Some(true) {
                return Ok(MakeInDir {
                    leases: &self.leases,
                    dir,
                    lease: Some((gate, one_at_a_time)),
                    _op: None,
                });
            }
        }
        Ok(MakeInDir {
            leases: &self.leases,
            dir,
            lease: None,
            _op: Some(self.settle_dir(dir).await?),
        })
    }

    /// Whether this mount holds `dir`'s lease.
    pub(super) fn holds_lease(&self, dir: u64) -> bool {
        self.leases.holds(dir)
    }

    /// Entry `name` of `dir` was made through PostgreSQL by this mount
    /// outside the operations (`/lost+found`): the lease of `dir`, if held
    /// here, knows it.
    pub(super) fn leased_entry_made(&self, dir: u64, name: &[u8], attr: &Attr) {
        if let Some(lease) = self.leases.held.lock().unwrap().get_mut(&dir) {
            let entry = LeasedEntry {
                inode: attr.inode,
                kind: attr.kind,
                nlink: attr.nlink,
            };
            lease.entries.insert(name.to_vec(), entry);
        }
    }

    /// An unlink in `dir` that goes through PostgreSQL begins.
    pub(super) fn unlink_begins(&self, dir: u64) -> DirOp<'_> {
        self.leases.begin(dir)
    }

    /// An unlink of `name` in `dir` went through PostgreSQL (its [`DirOp`]
    /// dropped): the lease's entries, if held, lose it; the directory's
    /// lease is taken when the run of such unlinks earns it.
    pub(super) async fn unlinked_directly(&self, dir: u64, name: &[u8]) {
        {
            let mut held = self.leases.held.lock().unwrap();
            if let Some(lease) = held.get_mut(&dir) {
                lease.entries.remove(name);
                return;
            }
        }
        if self.leases.enabled.load(Ordering::Relaxed)
            && self.leases.counted(dir, false)
            && self.leases.may_take(dir)
        {
            self.take_lease(dir, false).await;
        }
    }

    /// A create of a regular file in `dir` begins that goes through
    /// PostgreSQL: a lease held of the directory (one whose creates this
    /// mount may not answer) is given up first, and not taken again for a
    /// while; the run of unlinks and creates goes on.
    pub(super) async fn create_begins(&self, dir: u64) -> VfsResult<DirOp<'_>> {
        let op = self.leases.begin(dir);
        if self.leases.holds(dir) {
            self.commit_lease(dir, Keep::No).await?;
            self.leases.refuse(dir);
        }
        Ok(op)
    }

    /// A create of regular file `inode` as `name` in `dir` went through
    /// PostgreSQL (its [`DirOp`] dropped): the lease's entries, if held,
    /// gain it; the directory's lease is taken when the run earns it.
    pub(super) async fn created_directly(&self, dir: u64, name: &[u8], inode: u64) {
        {
            let mut held = self.leases.held.lock().unwrap();
            if let Some(lease) = held.get_mut(&dir) {
                let entry = LeasedEntry {
                    inode,
                    kind: NodeType::File,
                    nlink: 1,
                };
                lease.entries.insert(name.to_vec(), entry);
                return;
            }
        }
        if self.leases.enabled.load(Ordering::Relaxed)
            && !self.leases.no_lease_commit.load(Ordering::Relaxed)
            && self.leases.counted(dir, true)
            && self.leases.may_take(dir)
        {
            self.take_lease(dir, true).await;
        }
    }

    /// Takes `dir`'s lease (marked as being taken by `Leases::may_take`);
    /// `for_creates`: and asks at once whether creates may be answered
    /// there (if not, the lease is given up).
    async fn take_lease(&self, dir: u64, for_creates: bool) {
        let taken = self
            .meta
            .take_lease(self.sid(), dir, LEASE_MAX_ENTRIES)
            .await;
        let spoiled = self.leases.taking.lock().unwrap().remove(&dir) == Some(true);
        match taken {
            Ok(_) if spoiled => {
                // an operation on the directory began meanwhile: given up
                let given_up = self
                    .meta
                    .lease_unlink(self.sid(), dir, &[], &[], &[], false)
                    .await;
                if let Err(e) = given_up {
                    tracing::debug!("directory {dir}: giving a lease up: {e}");
                }
            }
            Ok((entries, creates)) => {
                // (told by take_lease from 0.2.21 on; else asked below)
                let told = creates.filter(|_| !self.leases.no_lease_commit.load(Ordering::Relaxed));
                let lease = Held {
                    entries: entries.into_iter().collect(),
                    pending: Vec::new(),
                    creates: told == Some(true),
                    pending_creates: Vec::new(),
                    created: HashMap::new(),
                    committing: false,
                    holding: false,
                    in_flight_creates: 0,
                    busy: true,
                    failing: false,
                    gate: Arc::new(tokio::sync::Mutex::new(())),
                };
                self.leases.held.lock().unwrap().entry(dir).or_insert(lease);
                self.leases.taken.notify_one();
                match told {
                    _ if !for_creates => {}
                    Some(true) => {}
                    Some(false) => self.no_creates_here(dir).await,
                    None => self.ask_creates(dir).await,
                }
            }
            Err(e) if e.is_undefined_or_denied() => {
                // an extension before 0.2.17, or a role not granted it again
                // since (jfs.grant_client)
                tracing::info!("no directory leases: {e}");
                self.leases.enabled.store(false, Ordering::Relaxed);
            }
            Err(e) => {
                // another mount holds it, the directory is big, a mount of
                // an older jfs is live, or the database is away: unlinks go
                // on one by one
                tracing::debug!("directory {dir}: no lease ({e})");
                self.leases.refuse(dir);
            }
        }
    }

    /// Commits the pending unlinks of every lease; a lease with none since
    /// the last commit, or that another mount asked for, is given up.
    pub async fn commit_leases(&self) {
        let dirs: Vec<u64> = self.leases.held.lock().unwrap().keys().copied().collect();
        for dir in dirs {
            if let Err(e) = self.commit_lease(dir, Keep::IfBusy).await {
                tracing::warn!(
                    "directory {dir}: committing unlinks: errno {e} (kept to try again)"
                );
            }
        }
    }

    /// An operation on `dir`'s entries begins: the unlinks answered under
    /// its lease, if this mount holds it, are committed and the lease given
    /// up, and none is taken until the returned [`DirOp`] is dropped.
    pub(super) async fn settle_dir(&self, dir: u64) -> VfsResult<DirOp<'_>> {
        let op = self.leases.begin(dir);
        self.leases.run_broken(dir);
        if self.leases.holds(dir) {
            self.commit_lease(dir, Keep::No).await?;
        }
        Ok(op)
    }

    /// [`Vfs::settle_dir`] for every lease (rmdir, whose directory may be
    /// one; unmount).
    pub async fn settle_all(&self) -> VfsResult<()> {
        let dirs: Vec<u64> = self.leases.held.lock().unwrap().keys().copied().collect();
        for dir in dirs {
            self.commit_lease(dir, Keep::No).await?;
        }
        Ok(())
    }

    /// Asks PostgreSQL whether creates may be answered under `dir`'s lease
    /// (an empty commit); if not, the lease is given up and not taken again
    /// for a while.
    async fn ask_creates(&self, dir: u64) {
        let asked = self.commit_lease(dir, Keep::Ask).await;
        let creates = self
            .leases
            .held
            .lock()
            .unwrap()
            .get(&dir)
            .is_some_and(|l| l.creates);
        if asked.is_ok() && !creates {
            self.no_creates_here(dir).await;
        }
    }

    /// A lease taken for creates that may not be answered in `dir`: given
    /// up, and not taken again for a while.
    async fn no_creates_here(&self, dir: u64) {
        if let Err(e) = self.commit_lease(dir, Keep::No).await {
            tracing::debug!("directory {dir}: giving a lease up: errno {e}");
        }
        self.leases.refuse(dir);
    }

    /// Sends `dir`'s pending unlinks and creates; the lease is kept as
    /// `keep` says, if nobody asked for it. On an error they stay pending
    /// and the lease held.
    async fn commit_lease(&self, dir: u64, keep: Keep) -> VfsResult<()> {
        let Some(gate) = self
            .leases
            .held
            .lock()
            .unwrap()
            .get(&dir)
            .map(|l| l.gate.clone())
        else {
            return Ok(());
        };
        let one_at_a_time = gate.lock().await;
        self.commit_gated(dir, &gate, keep, one_at_a_time).await
    }

    /// [`Vfs::commit_lease`] with the lease's gate taken (`_one_at_a_time`).
    async fn commit_gated(
        &self,
        dir: u64,
        gate: &Gate,
        keep: Keep,
        _one_at_a_time: tokio::sync::MutexGuard<'_, ()>,
    ) -> VfsResult<()> {
        let mut keep = keep;
        // (a commit that held the lease found it asked for, or one that
        // lost it left what was answered while it was in flight: that is
        // committed now, and the lease given up)
        while self.commit_once(dir, gate, keep).await? {
            keep = Keep::No;
        }
        Ok(())
    }

    /// One commit of [`Vfs::commit_gated`]; true when another must follow.
    async fn commit_once(&self, dir: u64, gate: &Gate, keep: Keep) -> VfsResult<bool> {
        // (the lease committed and given up by another caller meanwhile, and
        // maybe taken again: that one's own)
        let ask = matches!(keep, Keep::Ask);
        // (a file's creation alone, settled for a call about it: its data's
        // commit, mostly, as in cp -a and tar; mknod leaves the lease as
        // it is)
        let one_create = matches!(keep, Keep::Settle);
        let hold_known = self.leases.hold_known.load(Ordering::Relaxed);
        let taken = self.leases.with_own(dir, gate, |lease| {
            lease.committing = true;
            let keep = match keep {
                Keep::No => false,
                Keep::Settle | Keep::Ask => true,
                Keep::IfBusy => std::mem::take(&mut lease.busy),
            };
            let (unlink_names, unlink_inodes) = lease.pending.iter().cloned().unzip();
            let creates = lease.pending_creates.clone();
            // (a batch of creates, committed by jfs.lease_commit, holds a
            // lease it keeps: creates are answered meanwhile)
            let hold = keep && !creates.is_empty() && !one_create;
            lease.holding = hold && hold_known;
            lease.in_flight_creates = creates.len();
            let batch = LeaseBatch {
                unlink_names,
                unlink_inodes,
                creates,
            };
            (batch, keep, hold, lease.creates)
        });
        let Some((batch, keep, hold, creates_now)) = taken else {
            return Ok(false);
        };
        let (names, inodes, creates) = (&batch.unlink_names, &batch.unlink_inodes, &batch.creates);
        let ticket = self.attrs.ticket();
        let (sent, made_by_mknod) = if one_create && names.is_empty() && creates.len() == 1 {
            self.mknod_one(dir, &creates[0], creates_now).await
        } else {
            let sent = self
                .send_lease_commit(dir, &batch, keep, hold, ask, creates_now)
                .await;
            (sent, None)
        };
        let (answer, made, again) =
            match self.committed(dir, gate, names.len(), creates, sent, keep) {
                Some(Ok(answer)) => answer,
                Some(Err(e)) => return Err(e),
                None => return Ok(false),
            };
        if let Some(attr) = made_by_mknod {
            // as a create through PostgreSQL: the node and the directory's
            // times as the procedure left them
            self.attrs.child_made(dir, &creates[0].name, &attr, ticket);
            return Ok(again);
        }
        match answer.dir_times {
            // nothing sent (the lease renewed, or given up): nothing moved
            _ if names.is_empty() && creates.is_empty() => {}
            // files made, none removed: the nodes are as answered (while
            // nothing that would change them applies: `creates`), the
            // directory's times as the commit tells them
            Some(times) if names.is_empty() && answer.creates => {
                let made: Vec<(&[u8], &Attr)> =
                    made.iter().map(|(n, a)| (n.as_slice(), a)).collect();
                self.attrs.children_committed(dir, &made, times, ticket);
            }
            _ => {
                // the directory's times are the commit's now, not those
                // answered; nothing read meanwhile keeps a removed name
                self.attrs.forget(dir);
                self.forget_attributes(dir);
                for name in names {
                    self.attrs.forget_entry(dir, name);
                }
                for (name, attr) in &made {
                    self.attrs.forget(attr.inode);
                    self.attrs.forget_entry(dir, name);
                }
            }
        }
        for &inode in inodes {
            // (opened meanwhile through a name elsewhere: kept until closed)
            self.mark_unlinked(inode as u64).await;
        }
        for (name, e) in names.iter().zip(&answer.unlink_errnos) {
            if *e != 0 {
                // the lease was lost meanwhile (this mount silent for
                // seconds) and the name went or was made again elsewhere
                tracing::warn!(
                    "directory {dir}: the unlink of {:?} answered here found it changed by \
                     another mount at its commit (errno {e})",
                    String::from_utf8_lossy(name)
                );
            }
        }
        for (create, e) in creates.iter().zip(&answer.create_errnos) {
            if *e != 0 {
                self.keep_refused_create(dir, create, *e).await;
            }
        }
        Ok(again)
    }

    /// The commit of one pending create alone, through `jfs.mknod` (the
    /// lease stays as it is, and `creates_now` with it); the node as made.
    async fn mknod_one(
        &self,
        dir: u64,
        create: &LeasedCreate,
        creates_now: bool,
    ) -> (crate::meta::Result<LeaseCommitted>, Option<Attr>) {
        let made = self
            .meta
            .mknod(dir, &create.name, &create.node(), create.inode)
            .await;
        let (errno, attr) = match made {
            Ok(attr) => (0, Some(attr)),
            Err(crate::meta::MetaError::Errno(e)) => (e, None),
            Err(e) => return (Err(e), None),
        };
        let answer = LeaseCommitted {
            unlink_errnos: Vec::new(),
            create_errnos: vec![errno],
            kept: true,
            creates: creates_now,
            dir_times: None,
            wanted: false,
        };
        (Ok(answer), attr)
    }

    /// One commit of `dir`'s batch: `jfs.lease_commit` when creates are
    /// pending or `ask`ed about (holding the lease if `hold` and the
    /// extension can); else `jfs.lease_unlink`, which costs the server less
    /// (`creates_now` then stands), as it does where the former may not be
    /// called (then no create is pending).
    async fn send_lease_commit(
        &self,
        dir: u64,
        batch: &LeaseBatch,
        keep: bool,
        hold: bool,
        ask: bool,
        creates_now: bool,
    ) -> crate::meta::Result<LeaseCommitted> {
        let open = self.open_inodes();
        let creates = &batch.creates;
        let mut hold = (!self.leases.no_hold.load(Ordering::Relaxed)).then_some(hold);
        while (ask || !creates.is_empty()) && !self.leases.no_lease_commit.load(Ordering::Relaxed) {
            let sent = self
                .meta
                .lease_commit(self.sid(), dir, batch, &open, keep, hold)
                .await;
            match sent {
                Err(e) if e.is_undefined_or_denied() && hold.is_some() => {
                    // an extension before 0.2.22 (nothing was committed)
                    tracing::info!("no commits that hold a lease: {e}");
                    self.leases.no_hold.store(true, Ordering::Relaxed);
                    hold = None;
                }
                Err(e) if e.is_undefined_or_denied() && creates.is_empty() => {
                    // an extension before 0.2.20, or a role not granted it
                    // again since (jfs.grant_client)
                    tracing::info!("no write-back creates: {e}");
                    self.leases.no_lease_commit.store(true, Ordering::Relaxed);
                }
                Ok(answer) => {
                    if hold.is_some() {
                        self.leases.hold_known.store(true, Ordering::Relaxed);
                    }
                    return Ok(answer);
                }
                sent => return sent,
            }
        }
        let (unlink_errnos, kept) = self
            .meta
            .lease_unlink(
                self.sid(),
                dir,
                &batch.unlink_names,
                &batch.unlink_inodes,
                &open,
                keep,
            )
            .await?;
        Ok(LeaseCommitted {
            unlink_errnos,
            create_errnos: Vec::new(),
            kept,
            creates: creates_now && kept && !self.leases.no_lease_commit.load(Ordering::Relaxed),
            dir_times: None,
            wanted: false,
        })
    }

    /// Takes the answer of a commit of `dir`'s first `sent` pending unlinks
    /// and `sent_creates` pending creates into the lease (None: not the
    /// lease that sent them).
    fn committed(
        &self,
        dir: u64,
        gate: &Gate,
        sent: usize,
        sent_creates: &[LeasedCreate],
        answer: crate::meta::Result<LeaseCommitted>,
        keep: bool,
    ) -> Option<VfsResult<Committed>> {
        let mut held = self.leases.held.lock().unwrap();
        let lease = held.get_mut(&dir).filter(|l| Arc::ptr_eq(&l.gate, gate))?;
        lease.committing = false;
        lease.holding = false;
        lease.in_flight_creates = 0;
        let answer = match answer {
            Ok(answer) => answer,
            Err(e) => {
                lease.busy = true;
                lease.failing = true;
                return Some(Err(errno(e)));
            }
        };
        lease.failing = false;
        lease.creates = answer.creates;
        lease.pending.drain(..sent);
        let mut made = Vec::new();
        let errnos = answer
            .create_errnos
            .iter()
            .chain(std::iter::repeat(&libc::EIO));
        for (create, e) in lease
            .pending_creates
            .drain(..sent_creates.len())
            .zip(errnos)
        {
            let attr = lease.created.remove(&create.inode);
            if *e != 0 {
                if lease
                    .entries
                    .get(&create.name)
                    .is_some_and(|x| x.inode == create.inode)
                {
                    lease.entries.remove(&create.name);
                }
            } else if let Some(attr) = attr {
                made.push((create.name, attr));
            }
        }
        // answered while the commit was in flight, holding the lease
        let left = !lease.pending.is_empty() || !lease.pending_creates.is_empty();
        let again = answer.wanted || (!answer.kept && left);
        if again {
            tracing::debug!(
                "directory {dir}: {} (another commit now)",
                match answer.wanted {
                    true => "asked for while a commit holding it was in flight",
                    false => "lost with more answered while its commit was in flight",
                }
            );
            // no create answered here until the next commit gives it up
            lease.creates = false;
        } else if !answer.kept {
            held.remove(&dir);
        }
        if keep && (answer.wanted || !answer.kept) {
            // asked for by another mount (or lost): not taken again at once
            self.leases.refuse(dir);
        }
        Some(Ok((answer, made, again)))
    }

    fn is_open(&self, inode: u64) -> bool {
        self.files.lock().unwrap().contains_key(&inode)
    }
}
