//! Directory leases: a run of unlinks or creates in one directory is
//! answered by this mount and committed in batches, while no other mount
//! may read or change the directory (`jfs.take_lease`, `jfs.lease_commit`:
//! sql/lease.sql).
//!
//! After `OPS_BEFORE_LEASE` unlinks, or creates of regular files, in a row
//! in one directory, each through PostgreSQL and with no other operation on
//! its entries between, the mount takes the directory's lease, which gives
//! it every entry. An unlink of a name the lease found, not a directory,
//! with one link and not open here, is then answered at once and kept
//! pending. So is the create of a regular file under a name the lease does
//! not know, while PostgreSQL says no quota limit, squash or default ACL
//! applies there (the node is then made here as mknod would make it, with
//! an inode of this mount's range); lookups of the directory are answered
//! from the lease's entries, and the new file's attributes from the lease.
//! The committer ([`Namespace::commit_leases`]) sends the pending ones every
//! [`super::LEASE_WINDOW`], and gives the lease up after a window without any or
//! when another mount asked for it. A mkdir, symlink or device node there
//! goes through PostgreSQL with the lease kept ([`Namespace::make_begins`]); any
//! other operation on the directory's entries here (a rename, an rmdir, a
//! listing, an fsyncdir) first commits them and gives the lease up
//! ([`Namespace::settle_dir`]). The first commit of the data of a file made here
//! and not yet committed makes it too, when it is the only change pending
//! in its directory ([`Namespace::create_with_data`]); any other operation that
//! PostgreSQL must answer about such a file (an fsync, a setattr, a link,
//! a lock...) first commits the directory's batch
//! ([`Namespace::settle_created`]). A crash of this mount loses what was pending
//! (at most one window), never half of a batch.
use std::sync::atomic::Ordering;

use std::future::Future;

use super::attrs::Ticket;
use super::lease::{Create, Keep, LeaseState, Lookup, Unlink};
use super::leases::{leased_entry, DirOp, Gate, Leases, MakeInDir};
use super::{Namespace, NsResult};
use crate::meta::{Attr, CreateWithData, LeasedCreate, NewNode, NodeType};

/// Directories with more entries are not leased (the lease sends them all).
const LEASE_MAX_ENTRIES: i32 = 10_000;

/// A file made under a lease whose creation goes with its data's commit
/// ([`Namespace::create_with_data`]): the lease's gate is held (its commits, and
/// creates and unlinks answered in the directory, wait) until it is handed
/// back to [`Namespace::created_with_data`], or dropped (the create then stays
/// pending).
pub struct CreateInFlight<'a> {
    /// The creation, for the commit to take (None once made).
    pub made: Option<CreateWithData>,
    leases: &'a Leases,
    dir: u64,
    inode: u64,
    gate: Gate,
    /// Taken before the commit.
    ticket: Ticket,
    /// Handed back.
    over: bool,
    _one_at_a_time: tokio::sync::OwnedMutexGuard<()>,
}

impl Drop for CreateInFlight<'_> {
    fn drop(&mut self) {
        if !self.over {
            let inode = self.inode;
            self.leases.with_own(self.dir, &self.gate, |lease| {
                lease.created_with_data(inode, false)
            });
        }
    }
}

/// What an unlink under a lease removed.
pub struct LeasedUnlink {
    pub inode: u64,
}

impl Namespace {
    /// Starts taking leases, if the role may (as the procedures it may call
    /// say, learnt at connect); the caller commits them every
    /// [`super::LEASE_WINDOW`] ([`Namespace::commit_leases`]).
    pub fn enable_leases(&self) {
        // (a mount's role may call every procedure a mount uses, or it does
        // not start: Meta::require_client_grants)
        let calls = ["take_lease", "lease_unlink", "lease_commit"];
        if !self.has_session() {
            return;
        }
        if let Some(denied) = calls.iter().find(|p| !self.meta_of_mount().may_call(p)) {
            tracing::info!("no directory leases: this role may not call jfs.{denied}");
            return;
        }
        self.leases.enabled.store(true, Ordering::Relaxed);
    }

    /// Waits until a lease is held (at once if one is).
    pub async fn lease_held(&self) {
        self.leases.any_held().await
    }

    /// Answers an unlink of `name` in `dir` under the directory's lease, if
    /// this mount holds it and the name may be: in the lease's entries, not
    /// a directory, one link, not open here. A file made here and not yet
    /// committed is forgotten (nothing to commit). A commit in flight is
    /// waited for (the lease may end with it). None: send it to PostgreSQL.
    pub async fn unlink_leased(&self, dir: u64, name: &[u8]) -> Option<LeasedUnlink> {
        loop {
            let asked = self
                .leases
                .with_gate(dir, |l| l.unlink(name, |inode| self.is_open(inode)));
            match asked? {
                (Unlink::Answered { inode }, _) => return Some(LeasedUnlink { inode }),
                (Unlink::ToDatabase, _) => return None,
                // a commit is in flight (the lease may end with it): after it
                (Unlink::Wait, gate) => drop(gate.lock().await),
            }
        }
    }

    /// Answers the create of regular file `node` as `name` in `dir` under
    /// the directory's lease, if this mount holds it and may answer creates
    /// there: the node made as mknod would make it (EEXIST for a name the
    /// lease knows). None: send it to PostgreSQL.
    pub async fn create_leased(
        &self,
        dir: u64,
        name: &[u8],
        node: &NewNode<'_>,
    ) -> NsResult<Option<Attr>> {
        if node.kind != NodeType::File || self.leases.with(dir, |l| l.may_create()) != Some(true) {
            return Ok(None);
        }
        let Ok(parent) = self.attr_of(dir).await else {
            return Ok(None);
        };
        let inode = self.new_inode(dir).await?;
        let time = crate::meta::time_to_ns(std::time::SystemTime::now());
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
        let create = LeasedCreate {
            name: name.to_vec(),
            inode,
            mode: node.mode,
            umask: node.umask,
            uid: node.uid,
            gid: node.gid,
            time,
        };
        loop {
            let asked = self
                .leases
                .with_gate(dir, |l| l.create(attr.clone(), create.clone()));
            let Some(asked) = asked else {
                return Ok(None);
            };
            match asked {
                (Create::Answered { meanwhile }, _) => {
                    if meanwhile {
                        crate::metrics::METRICS.lease_creates_in_flight.inc();
                    }
                    return Ok(Some(attr));
                }
                (Create::Exists, _) => return Err(libc::EEXIST),
                (Create::ToDatabase, _) => return Ok(None),
                // a commit is in flight (the lease may end with it): after it
                (Create::Wait, gate) => drop(gate.lock().await),
            }
        }
    }

    /// The node of `inode`, if this mount made it under a lease and has not
    /// committed it yet.
    pub fn created_attr(&self, inode: u64) -> Option<Attr> {
        self.leases.created_attr(inode)
    }

    /// A lookup of `name` in `dir` answered by the lease this mount holds of
    /// it: a file made here and not yet committed, or "missing" for a name
    /// the lease does not know. None: ask as usual.
    pub fn lookup_leased(&self, dir: u64, name: &[u8]) -> Option<NsResult<Attr>> {
        match self.leases.with(dir, |l| l.lookup(name))? {
            Lookup::Missing => Some(Err(libc::ENOENT)),
            Lookup::Made(attr) => Some(Ok(attr)),
            Lookup::Known => None,
        }
    }

    /// The inode `name` of `dir` names, if this mount made it under the
    /// directory's lease and has not committed it yet.
    pub fn created_as(&self, dir: u64, name: &[u8]) -> Option<u64> {
        self.leases.with(dir, |l| l.created_as(name)).flatten()
    }

    /// Before PostgreSQL is asked anything about `inode`: if this mount made
    /// it under a lease and has not committed it yet, the directory's batch
    /// is committed now (the lease kept).
    pub async fn settle_created(&self, inode: u64) -> NsResult<()> {
        loop {
            let Some((dir, gate)) = self.leases.maker_of(inode) else {
                return Ok(());
            };
            let one_at_a_time = gate.lock().await;
            let still = self.leases.with_own(dir, &gate, |l| l.made_here(inode));
            if still == Some(true) {
                return self
                    .commit_gated(dir, &gate, Keep::Settle, one_at_a_time)
                    .await;
            }
        }
    }

    /// Before the first commit of the data of `inode` (`has_data`: with
    /// data written, which `store` stores): if this mount made the file
    /// under a lease and has not committed it yet, either its creation
    /// goes with that commit ([`CreateInFlight`]: when it is the only
    /// change pending in its directory, and data is written: what is
    /// written is stored first, so the lease waits only for the commit) or
    /// the directory's batch is committed now.
    pub async fn create_with_data(
        &self,
        inode: u64,
        has_data: bool,
        store: impl Future<Output = ()>,
    ) -> NsResult<Option<CreateInFlight<'_>>> {
        let Some((dir, gate)) = self.leases.maker_of(inode) else {
            return Ok(None);
        };
        if !has_data {
            // (an attribute change alone: setattr's, for a file it knows)
            self.settle_created(inode).await?;
            return Ok(None);
        }
        store.await;
        let one_at_a_time = gate.clone().lock_owned().await;
        let ticket = self.attrs.ticket();
        let alone = self
            .leases
            .with_own(dir, &gate, |l| l.begin_create_with_data(inode));
        if let Some(create) = alone.flatten() {
            return Ok(Some(CreateInFlight {
                made: Some(CreateWithData { dir, create }),
                leases: &self.leases,
                dir,
                inode,
                gate,
                ticket,
                over: false,
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
    pub fn created_with_data(&self, mut flight: CreateInFlight<'_>, attr: Option<&Attr>) {
        flight.over = true;
        let (dir, inode, made) = (flight.dir, flight.inode, flight.made.is_none());
        let create = self
            .leases
            .with_own(dir, &flight.gate, |l| l.created_with_data(inode, made));
        let Some(create) = create.flatten() else {
            return;
        };
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
    /// lease knows); with none, as [`Namespace::settle_dir`]. (A lease with the
    /// unlink of `name` pending is committed and given up first.)
    pub async fn make_begins(&self, dir: u64, name: &[u8]) -> NsResult<MakeInDir<'_>> {
        if let Some(gate) = self.leases.gate_of(dir) {
            let one_at_a_time = gate.clone().lock_owned().await;
            let kept = self.leases.with_own(dir, &gate, |l| l.begin_make(name));
            if kept.transpose()? == Some(true) {
                return Ok(MakeInDir::gated(&self.leases, dir, gate, one_at_a_time));
            }
        }
        let op = self.settle_dir(dir).await?;
        Ok(MakeInDir::unleased(&self.leases, dir, op))
    }

    /// Whether this mount holds `dir`'s lease.
    pub fn holds_lease(&self, dir: u64) -> bool {
        self.leases.holds(dir)
    }

    /// Entry `name` of `dir` was made through PostgreSQL by this mount
    /// outside the operations (`/lost+found`): the lease of `dir`, if held
    /// here, knows it.
    pub fn leased_entry_made(&self, dir: u64, name: &[u8], attr: &Attr) {
        let entry = leased_entry(attr.inode, attr.kind, attr.nlink);
        self.leases.with(dir, |l| l.entry_made(name, entry));
    }

    /// An unlink in `dir` that goes through PostgreSQL begins.
    pub fn unlink_begins(&self, dir: u64) -> DirOp<'_> {
        self.leases.begin(dir)
    }

    /// An unlink of `name` in `dir` went through PostgreSQL (its [`DirOp`]
    /// dropped): the lease's entries, if held, lose it; the directory's
    /// lease is taken when the run of such unlinks earns it.
    pub async fn unlinked_directly(&self, dir: u64, name: &[u8]) {
        if self.leases.with(dir, |l| l.entry_gone(name)).is_some() {
            return;
        }
        if self.leases.enabled.load(Ordering::Relaxed) && self.leases.earned(dir, false) {
            self.take_lease(dir, false).await;
        }
    }

    /// A create of a regular file in `dir` begins that goes through
    /// PostgreSQL: a lease held of the directory (one whose creates this
    /// mount may not answer) is given up first, and not taken again for a
    /// while; the run of unlinks and creates goes on.
    pub async fn create_begins(&self, dir: u64) -> NsResult<DirOp<'_>> {
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
    pub async fn created_directly(&self, dir: u64, name: &[u8], inode: u64) {
        let entry = leased_entry(inode, NodeType::File, 1);
        if self
            .leases
            .with(dir, |l| l.entry_made(name, entry))
            .is_some()
        {
            return;
        }
        if self.leases.enabled.load(Ordering::Relaxed) && self.leases.earned(dir, true) {
            self.take_lease(dir, true).await;
        }
    }

    /// Takes `dir`'s lease (marked as being taken by `Leases::earned`);
    /// `for_creates`: and asks at once whether creates may be answered
    /// there (if not, the lease is given up).
    async fn take_lease(&self, dir: u64, for_creates: bool) {
        let taken = self
            .meta_of(dir)
            .take_lease(self.sid_of(dir).await, dir, LEASE_MAX_ENTRIES)
            .await;
        let spoiled = self.leases.taking_spoiled(dir);
        match taken {
            Ok(_) if spoiled => {
                // an operation on the directory began meanwhile: given up
                let given_up = self
                    .meta_of(dir)
                    .lease_unlink(self.sid_of(dir).await, dir, &[], &[], &[], false)
                    .await;
                if let Err(e) = given_up {
                    tracing::debug!("directory {dir}: giving a lease up: {e}");
                }
            }
            Ok((entries, creates)) => {
                self.leases.taken(dir, LeaseState::new(entries, creates));
                if for_creates && !creates {
                    self.no_creates_here(dir).await;
                }
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

    /// An operation on `dir`'s entries begins: the unlinks answered under
    /// its lease, if this mount holds it, are committed and the lease given
    /// up, and none is taken until the returned [`DirOp`] is dropped.
    pub async fn settle_dir(&self, dir: u64) -> NsResult<DirOp<'_>> {
        let op = self.leases.begin(dir);
        self.leases.run_broken(dir);
        if self.leases.holds(dir) {
            self.commit_lease(dir, Keep::No).await?;
        }
        Ok(op)
    }

    /// [`Namespace::settle_dir`] for every lease (rmdir, whose directory may be
    /// one; unmount).
    pub async fn settle_all(&self) -> NsResult<()> {
        for dir in self.leases.dirs() {
            self.commit_lease(dir, Keep::No).await?;
        }
        Ok(())
    }

    /// [`Namespace::settle_all`] for the leases of `inode`'s shard: what a
    /// change there (a rename, rmdir, rmr, clone) or a summary of a tree
    /// there may meet (a lease of a shard that is down does not stall it).
    pub async fn settle_shard(&self, inode: u64) -> NsResult<()> {
        for dir in self.leases.dirs() {
            if self.parts.same(dir, inode) {
                self.commit_lease(dir, Keep::No).await?;
            }
        }
        Ok(())
    }

    /// A lease taken for creates that may not be answered in `dir`: given
    /// up, and not taken again for a while.
    async fn no_creates_here(&self, dir: u64) {
        if let Err(e) = self.commit_lease(dir, Keep::No).await {
            tracing::debug!("directory {dir}: giving a lease up: errno {e}");
        }
        self.leases.refuse(dir);
    }
}

/// The node PostgreSQL made for a create this mount answered under a lease
/// is the node it answered (checked in debug builds, where `jfs.mknod`
/// made it alone: `jfs.mknod_with_slices` also applies the mode, owner and
/// times set since, which the answer then shows): the lease's prediction
/// and mknod agree on its type, mode, owner, group, links and tier.
pub fn prediction_holds(answered: &Attr, made: &Attr) {
    let node = |a: &Attr| (a.kind, a.mode, a.uid, a.gid, a.nlink, a.tier);
    debug_assert_eq!(
        node(answered),
        node(made),
        "inode {}: the node PostgreSQL made is not the one answered here",
        made.inode
    );
}
