//! Commits of what a mount answered under its directory leases
//! (`jfs.lease_commit`, `jfs.lease_unlink`, or `jfs.mknod` for one create
//! alone): the batch the lease's state machine gives, sent, and its answer
//! taken back into the lease and the caches.

use super::lease::{Commit, Committed, Keep};
use super::leases::Gate;
use super::{errno, Forget, Namespace, NsResult};
use crate::meta::{Attr, LeaseCommitted, LeasedCreate};

impl Namespace {
    /// Commits the pending unlinks of every lease; a lease with none since
    /// the last commit, or that another mount asked for, is given up.
    pub async fn commit_leases(&self) {
        for dir in self.leases.dirs() {
            if let Err(e) = self.commit_lease(dir, Keep::IfBusy).await {
                tracing::warn!(
                    "directory {dir}: committing unlinks: errno {e} (kept to try again)"
                );
            }
        }
    }

    /// Sends `dir`'s pending unlinks and creates; the lease is kept as
    /// `keep` says, if nobody asked for it. On an error they stay pending
    /// and the lease held.
    pub async fn commit_lease(&self, dir: u64, keep: Keep) -> NsResult<()> {
        let Some(gate) = self.leases.gate_of(dir) else {
            return Ok(());
        };
        let one_at_a_time = gate.lock().await;
        self.commit_gated(dir, &gate, keep, one_at_a_time).await
    }

    /// [`Namespace::commit_lease`] with the lease's gate taken
    /// (`one_at_a_time`). Files the commits unlinked that are open here
    /// (opened meanwhile through a name elsewhere) are marked once the gate
    /// is released: a file's lock is never waited for under a gate (the
    /// order is a file's lock, then a gate, then the table of leases).
    pub async fn commit_gated(
        &self,
        dir: u64,
        gate: &Gate,
        keep: Keep,
        one_at_a_time: tokio::sync::MutexGuard<'_, ()>,
    ) -> NsResult<()> {
        let mut keep = keep;
        let mut unlinked = Vec::new();
        let mut result = Ok(());
        // (a commit that held the lease found it asked for, or one that
        // lost it left what was answered while it was in flight: that is
        // committed now, and the lease given up)
        loop {
            match self.commit_once(dir, gate, keep, &mut unlinked).await {
                Ok(true) => keep = Keep::No,
                Ok(false) => break,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        drop(one_at_a_time);
        for inode in unlinked {
            self.unlinked_while_open(inode).await;
        }
        result
    }

    /// One commit of [`Namespace::commit_gated`]; true when another must
    /// follow. The inodes it unlinked go to `unlinked`.
    async fn commit_once(
        &self,
        dir: u64,
        gate: &Gate,
        keep: Keep,
        unlinked: &mut Vec<u64>,
    ) -> NsResult<bool> {
        // (the lease committed and given up by another caller meanwhile, and
        // maybe taken again: that one's own)
        let Some(commit) = self.leases.with_own(dir, gate, |l| l.begin_commit(keep)) else {
            return Ok(false);
        };
        let batch = &commit.batch;
        let (names, inodes, creates) = (&batch.unlink_names, &batch.unlink_inodes, &batch.creates);
        let ticket = self.attrs.ticket();
        // (a file's creation alone, settled for a call about it: its data's
        // commit, mostly, as in cp -a and tar; mknod leaves the lease as
        // it is)
        let (sent, made_by_mknod) =
            if keep == Keep::Settle && names.is_empty() && creates.len() == 1 {
                self.mknod_one(dir, &creates[0], commit.may_create).await
            } else {
                let sent = self.send_lease_commit(dir, &commit).await;
                (sent, None)
            };
        let Some(answered) = self.committed(dir, gate, sent, commit.keep) else {
            return Ok(false);
        };
        let (answer, done) = answered?;
        if let Some(attr) = made_by_mknod {
            if let Some((_, answered)) = done.made.first() {
                super::keeper::prediction_holds(answered, &attr);
            }
            // as a create through PostgreSQL: the node and the directory's
            // times as the procedure left them
            self.attrs.child_made(dir, &creates[0].name, &attr, ticket);
            return Ok(done.again);
        }
        match answer.dir_times {
            // nothing sent (the lease renewed, or given up): nothing moved
            _ if names.is_empty() && creates.is_empty() => {}
            // files made, none removed: the nodes are as answered (while
            // nothing that would change them applies: `creates`), the
            // directory's times as the commit tells them
            Some(times) if names.is_empty() && answer.creates => {
                let made: Vec<(&[u8], &Attr)> =
                    done.made.iter().map(|(n, a)| (n.as_slice(), a)).collect();
                self.attrs.children_committed(dir, &made, times, ticket);
            }
            _ => {
                // the directory's times are the commit's now, not those
                // answered; nothing read meanwhile keeps a removed name
                self.attrs.forget(dir);
                self.forget_in_kernel(Forget::Attributes { inode: dir });
                for name in names {
                    self.attrs.forget_entry(dir, name);
                }
                for (name, attr) in &done.made {
                    self.attrs.forget(attr.inode);
                    self.attrs.forget_entry(dir, name);
                }
            }
        }
        // (opened meanwhile through a name elsewhere: kept until closed)
        unlinked.extend(inodes.iter().map(|&inode| inode as u64));
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
        for (create, e) in &done.refused {
            self.keep_refused_create(dir, create, *e).await;
        }
        Ok(done.again)
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
            .meta_of(dir)
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
    /// pending (holding the lease if the commit says so); else
    /// `jfs.lease_unlink`, which costs the server less (what PostgreSQL
    /// said of creates then stands).
    async fn send_lease_commit(
        &self,
        dir: u64,
        commit: &Commit,
    ) -> crate::meta::Result<LeaseCommitted> {
        let open = self.open_inodes();
        let batch = &commit.batch;
        if !batch.creates.is_empty() {
            return self
                .meta_of(dir)
                .lease_commit(
                    self.sid_of(dir).await,
                    dir,
                    batch,
                    &open,
                    commit.keep,
                    commit.hold,
                )
                .await;
        }
        let (unlink_errnos, kept) = self
            .meta_of(dir)
            .lease_unlink(
                self.sid_of(dir).await,
                dir,
                &batch.unlink_names,
                &batch.unlink_inodes,
                &open,
                commit.keep,
            )
            .await?;
        Ok(LeaseCommitted {
            unlink_errnos,
            create_errnos: Vec::new(),
            kept,
            creates: commit.may_create && kept,
            dir_times: None,
            wanted: false,
        })
    }

    /// Takes the answer of the commit in flight of `dir` into its lease
    /// (None: not the lease `gate` guards, which sent it): the answer, and
    /// what the lease says to do.
    fn committed(
        &self,
        dir: u64,
        gate: &Gate,
        answer: crate::meta::Result<LeaseCommitted>,
        keep: bool,
    ) -> Option<NsResult<(LeaseCommitted, Committed)>> {
        let done = self
            .leases
            .commit_over(dir, gate, answer.as_ref().map_err(|_| ()), keep)?;
        let answer = match (answer, done) {
            (Ok(answer), Ok(done)) => (answer, done),
            (Err(e), _) => return Some(Err(errno(e))),
            (Ok(_), Err(())) => unreachable!("a commit answered taken as failed"),
        };
        if answer.1.again {
            tracing::debug!(
                "directory {dir}: {} (another commit now)",
                match answer.0.wanted {
                    true => "asked for while a commit holding it was in flight",
                    false => "lost with more answered while its commit was in flight",
                }
            );
        }
        Some(Ok(answer))
    }
}
