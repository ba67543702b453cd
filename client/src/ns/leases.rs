//! The mount's directory leases: each one's state ([`LeaseState`]) with
//! the gate its commits take, and what decides when a lease is taken (runs
//! of unlinks or creates in one directory, refusals, operations in flight),
//! all under one lock, so that there is no order of locks to get wrong.
//! The keeper that talks to PostgreSQL is `ns/keeper.rs`.
//!
//! The locks a lease path takes, in the only order any path takes them
//! (each one is never waited for while a later one is held):
//! 1. an open file's state (`vfs::handles::FileState`: a flush, a setattr);
//! 2. a lease's gate ([`Gate`], async: a commit, a create going with its
//!    data, a mkdir kept under the lease), one at a time (no path holds
//!    two gates; the commit marks the files it unlinked after releasing it);
//! 3. the id ranges (`ns::ids`, async, briefly: a new inode);
//! 4. the table (this module, a plain mutex never held across an await),
//!    and under it only the mount's map of open files (`Mount::is_open`).
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::lease::{Committed, LeaseState};
use crate::meta::{Attr, LeaseCommitted, LeasedEntry, NodeType};

/// How long unlinks answered under a lease wait, at most, for their commit.
pub const LEASE_WINDOW: Duration = Duration::from_millis(50);

/// Unlinks or creates in a row in one directory, each a round trip, after
/// which the mount takes the directory's lease.
const OPS_BEFORE_LEASE: u32 = 2;

/// How long a directory whose lease could not be had is not asked for again.
const LEASE_REFUSED_FOR: Duration = Duration::from_secs(1);

/// A lease's gate: taken by its commits, one at a time, and by operations
/// that hold the lease still ([`MakeInDir`], a create going with its data).
pub type Gate = Arc<tokio::sync::Mutex<()>>;

/// A directory this mount holds the lease of.
struct Held {
    state: LeaseState,
    gate: Gate,
}

/// The run of unlinks or creates that may earn a lease: the directory, how
/// many in a row, and whether they were creates.
#[derive(Default, Clone, Copy)]
struct Run {
    dir: u64,
    count: u32,
    creates: bool,
}

#[derive(Default)]
struct Table {
    held: HashMap<u64, Held>,
    /// Creates and unlinks taking turns, as a database's rollback journal
    /// does, earn no lease: another mount using the directory would wait
    /// for a hand-over at every turn.
    run: Run,
    /// Directories whose lease could not be had, or was asked for, and when.
    refused: HashMap<u64, Instant>,
    /// Leases being taken, and whether an operation on the directory began
    /// meanwhile (the entries the lease returns may then miss its change).
    taking: HashMap<u64, bool>,
    /// Operations on each directory's entries in flight here (a lease is
    /// not taken meanwhile).
    in_flight: HashMap<u64, u32>,
}

impl Table {
    fn refuse(&mut self, dir: u64) {
        self.refused
            .retain(|_, at| at.elapsed() < LEASE_REFUSED_FOR);
        self.refused.insert(dir, Instant::now());
        self.run = Run::default();
    }
}

/// The leases this mount holds, and the runs of unlinks that may earn one.
#[derive(Default)]
pub struct Leases {
    /// Whether leases are taken (a committer runs: `Namespace::commit_leases`,
    /// and the role may call the lease procedures).
    pub enabled: AtomicBool,
    table: Mutex<Table>,
    /// Wakes [`Leases::any_held`] when a lease is taken.
    taken: tokio::sync::Notify,
}

impl Leases {
    fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap()
    }

    /// Waits until a lease is held (at once if one is).
    pub async fn any_held(&self) {
        loop {
            let notified = self.taken.notified();
            if !self.table().held.is_empty() {
                return;
            }
            notified.await;
        }
    }

    /// Whether this mount holds `dir`'s lease.
    pub fn holds(&self, dir: u64) -> bool {
        self.table().held.contains_key(&dir)
    }

    /// Whether unlinks or creates answered in `dir` under its lease wait
    /// for a commit.
    pub fn pending_in(&self, dir: u64) -> bool {
        self.table()
            .held
            .get(&dir)
            .is_some_and(|l| l.state.has_pending())
    }

    /// The gate of `dir`'s lease, if held.
    pub fn gate_of(&self, dir: u64) -> Option<Gate> {
        self.table().held.get(&dir).map(|l| l.gate.clone())
    }

    /// The directories whose leases are held.
    pub fn dirs(&self) -> Vec<u64> {
        self.table().held.keys().copied().collect()
    }

    /// `f` applied to `dir`'s lease if it is still the one `gate` guards
    /// (not given up meanwhile; taken again, it is another's).
    pub fn with_own<R>(
        &self,
        dir: u64,
        gate: &Gate,
        f: impl FnOnce(&mut LeaseState) -> R,
    ) -> Option<R> {
        let mut table = self.table();
        table
            .held
            .get_mut(&dir)
            .filter(|l| Arc::ptr_eq(&l.gate, gate))
            .map(|l| f(&mut l.state))
    }

    /// `f` applied to `dir`'s lease, if held.
    pub fn with<R>(&self, dir: u64, f: impl FnOnce(&mut LeaseState) -> R) -> Option<R> {
        self.table().held.get_mut(&dir).map(|l| f(&mut l.state))
    }

    /// [`Leases::with`], and the lease's gate (to wait for what is in
    /// flight when `f` says so).
    pub fn with_gate<R>(
        &self,
        dir: u64,
        f: impl FnOnce(&mut LeaseState) -> R,
    ) -> Option<(R, Gate)> {
        let mut table = self.table();
        let lease = table.held.get_mut(&dir)?;
        Some((f(&mut lease.state), lease.gate.clone()))
    }

    /// The node of `inode`, made under a lease and not committed.
    pub fn created_attr(&self, inode: u64) -> Option<Attr> {
        let table = self.table();
        table
            .held
            .values()
            .find_map(|l| l.state.created_attr(inode).cloned())
    }

    /// The directory whose lease made `inode` here and has not committed it
    /// yet, and that lease's gate.
    pub fn maker_of(&self, inode: u64) -> Option<(u64, Gate)> {
        let table = self.table();
        table
            .held
            .iter()
            .find(|(_, l)| l.state.made_here(inode))
            .map(|(dir, l)| (*dir, l.gate.clone()))
    }

    /// A lease of `dir` was taken: held from now on (unless one is already).
    pub fn taken(&self, dir: u64, state: LeaseState) {
        let gate = Arc::new(tokio::sync::Mutex::new(()));
        let lease = Held { state, gate };
        self.table().held.entry(dir).or_insert(lease);
        self.taken.notify_one();
    }

    /// The taking of `dir`'s lease is over; true if an operation on the
    /// directory began meanwhile (the lease must then be given up).
    pub fn taking_spoiled(&self, dir: u64) -> bool {
        self.table().taking.remove(&dir) == Some(true)
    }

    /// Takes the answer of the commit in flight of `dir` into its lease,
    /// if it is still the one `gate` guards (None otherwise): Err if the
    /// commit failed, else what to do now. A lease given up is forgotten,
    /// one asked for not taken again for a while.
    pub fn commit_over(
        &self,
        dir: u64,
        gate: &Gate,
        answer: Result<&LeaseCommitted, ()>,
        keep: bool,
    ) -> Option<Result<Committed, ()>> {
        let mut table = self.table();
        let lease = table
            .held
            .get_mut(&dir)
            .filter(|l| Arc::ptr_eq(&l.gate, gate))?;
        let Ok(answer) = answer else {
            lease.state.commit_failed();
            return Some(Err(()));
        };
        let done = lease.state.commit_answered(answer, keep);
        if done.released {
            table.held.remove(&dir);
        }
        if done.refuse {
            table.refuse(dir);
        }
        Some(Ok(done))
    }

    /// An operation on `dir`'s entries begins (see [`DirOp`]).
    pub fn begin(&self, dir: u64) -> DirOp<'_> {
        let mut table = self.table();
        *table.in_flight.entry(dir).or_insert(0) += 1;
        if let Some(spoiled) = table.taking.get_mut(&dir) {
            *spoiled = true;
        }
        DirOp { leases: self, dir }
    }

    /// An operation other than an unlink or a create of a regular file on
    /// `dir`'s entries: a run of them there starts again.
    pub fn run_broken(&self, dir: u64) {
        let mut table = self.table();
        if table.run.dir == dir {
            table.run = Run::default();
        }
    }

    /// `dir`'s lease may not be taken again for a while (refused, or given
    /// up because another mount asked).
    pub fn refuse(&self, dir: u64) {
        self.table().refuse(dir);
    }

    /// Counts an unlink (or a create: `create`) in `dir` sent to
    /// PostgreSQL; true when the run earns the directory's lease and it may
    /// be taken now (none held or being taken, and no operation on the
    /// directory in flight here): it is then marked as being taken.
    pub fn earned(&self, dir: u64, create: bool) -> bool {
        let mut table = self.table();
        let run = &mut table.run;
        if run.dir == dir && run.creates == create {
            run.count += 1;
        } else {
            *run = Run {
                dir,
                count: 1,
                creates: create,
            };
        }
        let earned = run.count >= OPS_BEFORE_LEASE
            && table
                .refused
                .get(&dir)
                .is_none_or(|at| at.elapsed() >= LEASE_REFUSED_FOR);
        if !earned || table.held.contains_key(&dir) || table.in_flight.contains_key(&dir) {
            return false;
        }
        match table.taking.entry(dir) {
            Entry::Occupied(_) => false,
            Entry::Vacant(v) => {
                v.insert(false);
                true
            }
        }
    }
}

/// An operation making an entry through PostgreSQL in a directory: under
/// the directory's lease, held with its gate (the entry joins the lease's:
/// [`MakeInDir::made`]), or with none (then an operation on the directory:
/// no lease is taken meanwhile).
pub struct MakeInDir<'a> {
    leases: &'a Leases,
    dir: u64,
    lease: Option<(Gate, tokio::sync::OwnedMutexGuard<()>)>,
    _op: Option<DirOp<'a>>,
}

impl<'a> MakeInDir<'a> {
    /// Under `dir`'s lease, whose gate is taken (`one_at_a_time`) and whose
    /// state is [`crate::ns::lease::Phase::Gated`].
    pub fn gated(
        leases: &'a Leases,
        dir: u64,
        gate: Gate,
        one_at_a_time: tokio::sync::OwnedMutexGuard<()>,
    ) -> Self {
        let lease = Some((gate, one_at_a_time));
        MakeInDir {
            leases,
            dir,
            lease,
            _op: None,
        }
    }

    /// With no lease: as operation `op` on the directory.
    pub fn unleased(leases: &'a Leases, dir: u64, op: DirOp<'a>) -> Self {
        MakeInDir {
            leases,
            dir,
            lease: None,
            _op: Some(op),
        }
    }

    /// `name` was made for node `attr`: the lease's entries gain it.
    pub fn made(&self, name: &[u8], attr: &Attr) {
        let Some((gate, _)) = &self.lease else {
            return;
        };
        self.leases.with_own(self.dir, gate, |lease| {
            lease.entry_made(name, leased_entry(attr.inode, attr.kind, attr.nlink))
        });
    }
}

impl Drop for MakeInDir<'_> {
    fn drop(&mut self) {
        let Some((gate, _)) = &self.lease else {
            return;
        };
        self.leases
            .with_own(self.dir, gate, |lease| lease.end_gate());
    }
}

/// The entry a lease keeps for node `inode`.
pub fn leased_entry(inode: u64, kind: NodeType, nlink: u32) -> LeasedEntry {
    LeasedEntry { inode, kind, nlink }
}

/// An operation on a directory's entries in flight: while one is, the
/// mount takes no lease of the directory (the lease's entries could miss
/// what the operation changes).
pub struct DirOp<'a> {
    leases: &'a Leases,
    dir: u64,
}

/// The guard of an operation on directory [`InDir::dir`]'s entries, which
/// the procedures that change or list them take ([`DirOp`], [`MakeInDir`]).
pub trait InDir: Sync {
    fn dir(&self) -> u64;
}

impl InDir for DirOp<'_> {
    fn dir(&self) -> u64 {
        self.dir
    }
}

impl InDir for MakeInDir<'_> {
    fn dir(&self) -> u64 {
        self.dir
    }
}

impl Drop for DirOp<'_> {
    fn drop(&mut self) {
        let mut table = self.leases.table();
        if let Some(n) = table.in_flight.get_mut(&self.dir) {
            *n -= 1;
            if *n == 0 {
                table.in_flight.remove(&self.dir);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_in_one_directory_earns_its_lease_once() {
        let leases = Leases::default();
        assert!(!leases.earned(7, false), "one unlink");
        assert!(leases.earned(7, false), "two in a row");
        assert!(!leases.earned(7, false), "being taken already");
        assert!(!leases.taking_spoiled(7));
        leases.taken(7, LeaseState::new([], false));
        assert!(!leases.earned(7, false), "held");
    }

    #[test]
    fn unlinks_and_creates_taking_turns_earn_nothing() {
        let leases = Leases::default();
        for _ in 0..10 {
            assert!(!leases.earned(7, false));
            assert!(!leases.earned(7, true));
        }
    }

    #[test]
    fn other_operations_break_a_run_and_block_a_lease_while_in_flight() {
        let leases = Leases::default();
        leases.earned(7, true);
        leases.run_broken(7);
        assert!(!leases.earned(7, true), "the run starts again");
        let op = leases.begin(7);
        assert!(!leases.earned(7, true), "an operation in flight");
        drop(op);
        assert!(leases.earned(7, true));
    }

    #[test]
    fn an_operation_begun_while_a_lease_is_taken_spoils_it() {
        let leases = Leases::default();
        leases.earned(7, false);
        assert!(leases.earned(7, false));
        drop(leases.begin(7));
        assert!(leases.taking_spoiled(7));
    }

    #[test]
    fn a_refused_directory_is_not_asked_for_again_for_a_while() {
        let leases = Leases::default();
        leases.refuse(7);
        assert!(!leases.earned(7, false));
        assert!(
            !leases.earned(7, false),
            "refused for {LEASE_REFUSED_FOR:?}"
        );
        // another directory is not
        leases.earned(8, false);
        assert!(leases.earned(8, false));
    }

    #[test]
    fn a_lease_asked_for_at_its_commit_is_refused_and_a_released_one_forgotten() {
        let leases = Leases::default();
        leases.taken(7, LeaseState::new([], true));
        let gate = leases.gate_of(7).unwrap();
        let commit = leases
            .with_own(7, &gate, |l| l.begin_commit(crate::ns::lease::Keep::Settle))
            .unwrap();
        let answer = LeaseCommitted {
            unlink_errnos: Vec::new(),
            create_errnos: Vec::new(),
            kept: false,
            creates: true,
            dir_times: None,
            wanted: false,
        };
        let done = leases
            .commit_over(7, &gate, Ok(&answer), commit.keep)
            .unwrap()
            .unwrap();
        assert!(done.released && done.refuse);
        assert!(!leases.holds(7));
        leases.earned(7, false);
        assert!(!leases.earned(7, false), "refused after it was lost");
        // an answer for a lease given up meanwhile is not taken
        assert!(leases.commit_over(7, &gate, Ok(&answer), false).is_none());
    }
}
