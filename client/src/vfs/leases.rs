//! Directory leases: a run of unlinks in one directory is answered by this
//! mount and committed in batches, while no other mount may read or change
//! the directory (`jfs.take_lease`, `jfs.lease_unlink`: sql/lease.sql).
//!
//! After [`UNLINKS_BEFORE_LEASE`] unlinks in a row in one directory, each
//! through PostgreSQL and with no other operation on its entries between,
//! the mount takes the directory's lease, which gives it every entry. An unlink of a name the lease found, not a directory, with
//! one link and not open here, is then answered at once and kept pending;
//! the committer ([`Vfs::commit_leases`]) sends the pending ones every
//! [`LEASE_WINDOW`], and gives the lease up after a window without unlinks
//! or when another mount asked for it. Any other operation on the
//! directory's entries here (a create, a rename, an rmdir, a listing, an
//! fsyncdir) first commits them and gives the lease up ([`Vfs::settle_dir`]);
//! a lookup of a pending name is answered "missing". A crash of this mount
//! loses what was pending (at most one window), never half of a batch.
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::meta::{LeasedEntry, NodeType};
use crate::vfs::{errno, Vfs, VfsResult};

/// How long unlinks answered under a lease wait, at most, for their commit.
pub const LEASE_WINDOW: Duration = Duration::from_millis(50);

/// Unlinks in a row in one directory, each a round trip, after which the
/// mount takes the directory's lease.
const UNLINKS_BEFORE_LEASE: u32 = 2;

/// Directories with more entries are not leased (the lease sends them all).
const LEASE_MAX_ENTRIES: i32 = 10_000;

/// How long a directory whose lease could not be had is not asked for again.
const LEASE_REFUSED_FOR: Duration = Duration::from_secs(1);

/// A directory this mount holds the lease of.
struct Held {
    /// Its entries: those the lease found, less those removed since.
    entries: HashMap<Vec<u8>, LeasedEntry>,
    /// Unlinks answered and not yet committed (name, inode), in order.
    pending: Vec<(Vec<u8>, i64)>,
    /// Their names, for lookups (answered "missing").
    pending_names: HashSet<Vec<u8>>,
    /// A commit is in flight: unlinks go to PostgreSQL meanwhile (the lease
    /// may end with it).
    committing: bool,
    /// Unlinks were answered since the last commit.
    busy: bool,
    /// The last commit failed: unlinks go to PostgreSQL until one succeeds.
    failing: bool,
    /// Taken one at a time: a commit, or a settle waiting for one.
    gate: Arc<tokio::sync::Mutex<()>>,
}

/// The leases this mount holds, and the runs of unlinks that may earn one.
#[derive(Default)]
pub struct Leases {
    /// Whether leases are taken (a committer runs: `Vfs::commit_leases`).
    enabled: AtomicBool,
    held: Mutex<HashMap<u64, Held>>,
    /// The directory of the last unlinks, and how many in a row.
    run: Mutex<(u64, u32)>,
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

    /// An operation other than an unlink on `dir`'s entries: a run of
    /// unlinks there starts again (creates and unlinks taking turns, as a
    /// database's journal does, earn no lease: each create would give it up).
    fn run_broken(&self, dir: u64) {
        let mut run = self.run.lock().unwrap();
        if run.0 == dir {
            *run = (0, 0);
        }
    }

    /// `dir`'s lease may not be taken again for a while (refused, or given
    /// up because another mount asked).
    fn refuse(&self, dir: u64) {
        let mut refused = self.refused.lock().unwrap();
        refused.retain(|_, at| at.elapsed() < LEASE_REFUSED_FOR);
        refused.insert(dir, Instant::now());
        *self.run.lock().unwrap() = (0, 0);
    }

    /// Counts an unlink in `dir` sent to PostgreSQL; true when the run
    /// earns the directory's lease.
    fn counted(&self, dir: u64) -> bool {
        let mut run = self.run.lock().unwrap();
        if run.0 == dir {
            run.1 += 1;
        } else {
            *run = (dir, 1);
        }
        run.1 >= UNLINKS_BEFORE_LEASE
            && self
                .refused
                .lock()
                .unwrap()
                .get(&dir)
                .is_none_or(|at| at.elapsed() >= LEASE_REFUSED_FOR)
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
    /// a directory, one link, not open here. None: send it to PostgreSQL.
    pub(super) fn unlink_leased(&self, dir: u64, name: &[u8]) -> Option<LeasedUnlink> {
        let mut held = self.leases.held.lock().unwrap();
        let lease = held.get_mut(&dir).filter(|l| !l.committing && !l.failing)?;
        let entry = lease.entries.get(name)?;
        if entry.kind == NodeType::Dir || entry.nlink != 1 || self.is_open(entry.inode) {
            return None;
        }
        let inode = entry.inode;
        lease.entries.remove(name);
        lease.pending.push((name.to_vec(), inode as i64));
        lease.pending_names.insert(name.to_vec());
        lease.busy = true;
        Some(LeasedUnlink { inode })
    }

    /// Whether this mount holds `dir`'s lease.
    pub(super) fn holds_lease(&self, dir: u64) -> bool {
        self.leases.holds(dir)
    }

    /// Whether `name` of `dir` was unlinked here and the unlink is not
    /// committed yet (a lookup then answers "missing").
    pub(super) fn unlink_pending(&self, dir: u64, name: &[u8]) -> bool {
        self.leases
            .held
            .lock()
            .unwrap()
            .get(&dir)
            .is_some_and(|l| l.pending_names.contains(name))
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
            && self.leases.counted(dir)
            && self.leases.may_take(dir)
        {
            self.take_lease(dir).await;
        }
    }

    /// Takes `dir`'s lease (marked as being taken by `Leases::may_take`).
    async fn take_lease(&self, dir: u64) {
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
            Ok(entries) => {
                let lease = Held {
                    entries: entries.into_iter().collect(),
                    pending: Vec::new(),
                    pending_names: HashSet::new(),
                    committing: false,
                    busy: true,
                    failing: false,
                    gate: Arc::new(tokio::sync::Mutex::new(())),
                };
                self.leases.held.lock().unwrap().entry(dir).or_insert(lease);
                self.leases.taken.notify_one();
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
            if let Err(e) = self.commit_lease(dir, true).await {
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
            self.commit_lease(dir, false).await?;
        }
        Ok(op)
    }

    /// [`Vfs::settle_dir`] for every lease (rmdir, whose directory may be
    /// one; unmount).
    pub async fn settle_all(&self) -> VfsResult<()> {
        let dirs: Vec<u64> = self.leases.held.lock().unwrap().keys().copied().collect();
        for dir in dirs {
            self.commit_lease(dir, false).await?;
        }
        Ok(())
    }

    /// Sends `dir`'s pending unlinks; the lease is kept only if `keep`,
    /// unlinks came since the last commit, and nobody asked for it. On an
    /// error the unlinks stay pending and the lease held.
    async fn commit_lease(&self, dir: u64, keep: bool) -> VfsResult<()> {
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
        let _one_at_a_time = gate.lock().await;
        // (the lease committed and given up by another caller meanwhile, and
        // maybe taken again: that one's own)
        let same = |lease: &Held| Arc::ptr_eq(&lease.gate, &gate);
        let (names, inodes, keep) = {
            let mut held = self.leases.held.lock().unwrap();
            let Some(lease) = held.get_mut(&dir).filter(|l| same(l)) else {
                return Ok(());
            };
            lease.committing = true;
            let keep = keep && lease.busy;
            lease.busy = false;
            let (names, inodes): (Vec<_>, Vec<_>) = lease.pending.iter().cloned().unzip();
            (names, inodes, keep)
        };
        let sent = self
            .meta
            .lease_unlink(self.sid(), dir, &names, &inodes, &self.open_inodes(), keep)
            .await;
        let errnos = match self.committed(dir, &gate, names.len(), sent, keep) {
            Some(Ok(errnos)) => errnos,
            Some(Err(e)) => return Err(e),
            None => return Ok(()),
        };
        // the directory's times are the commit's now, not those answered;
        // nothing read meanwhile keeps a removed name
        self.attrs.forget(dir);
        self.forget_attributes(dir);
        for name in &names {
            self.attrs.forget_entry(dir, name);
        }
        for &inode in &inodes {
            // (opened meanwhile through a name elsewhere: kept until closed)
            self.mark_unlinked(inode as u64).await;
        }
        for (name, e) in names.iter().zip(&errnos) {
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
        Ok(())
    }

    /// Takes the answer of a commit of `dir`'s first `sent` pending
    /// unlinks into the lease (None: not the lease that sent them).
    fn committed(
        &self,
        dir: u64,
        gate: &Arc<tokio::sync::Mutex<()>>,
        sent: usize,
        answer: crate::meta::Result<(Vec<i32>, bool)>,
        keep: bool,
    ) -> Option<VfsResult<Vec<i32>>> {
        let mut held = self.leases.held.lock().unwrap();
        let lease = held.get_mut(&dir).filter(|l| Arc::ptr_eq(&l.gate, gate))?;
        lease.committing = false;
        let (errnos, kept) = match answer {
            Ok(answer) => answer,
            Err(e) => {
                lease.busy = true;
                lease.failing = true;
                return Some(Err(errno(e)));
            }
        };
        lease.failing = false;
        for (name, _) in lease.pending.drain(..sent) {
            lease.pending_names.remove(&name);
        }
        if !kept {
            held.remove(&dir);
            if keep {
                // asked for by another mount (or lost): not taken again at once
                self.leases.refuse(dir);
            }
        }
        Some(Ok(errnos))
    }

    fn is_open(&self, inode: u64) -> bool {
        self.files.lock().unwrap().contains_key(&inode)
    }
}
