//! Commits of a file's pending writes: its slices stored and committed in
//! write order (with deferred attribute changes and, for a file made
//! under a lease, its creation), failures kept to be tried again.
use super::*;

impl Writer {
    /// Uploads what is left (blocks that failed before again), waits for
    /// every upload, then commits the slices in the order they were written
    /// (those stored, up to [`COMMIT_BATCH`] in one call), the last of them
    /// with the deferred attribute change (alone if no slice is left to
    /// carry it). Returns the file's attributes after the last commit (None
    /// if nothing was pending); a refused attribute change is dropped and
    /// its errno returned once the slices are committed. A failed upload, or a commit that failed for want of
    /// the database, stops there and keeps that slice and the later ones
    /// pending, to be tried again; an answer that they cannot be committed
    /// (the file is gone, no space) drops them all. The errno is returned
    /// ([`store_errno`] for the store's errors). With `durable` the last
    /// commit waits for the WAL flush (a close or fsync in 'fsync' mode:
    /// no sync of its own follows; see [`Writer::take_durable_in`]).
    ///
    /// `create`: the file's creation, made here under its directory's lease
    /// and not yet committed, which goes with the first commit; taken
    /// (None) once made.
    pub async fn flush(
        &mut self,
        t: &WriteTarget<'_>,
        inode: u64,
        durable: bool,
        create: &mut Option<CreateWithData>,
    ) -> Result<Option<Attr>, i32> {
        self.durable_in = None;
        self.flush_slices(t, inode, true, durable, create).await
    }

    /// Uploads what is pending, as a flush does before its first commit,
    /// and waits for it (a flush that follows commits at once).
    pub async fn store(&mut self, t: &WriteTarget<'_>) {
        self.stored_ahead(t).await;
    }

    /// Uploads the rest of the next slices (a window ahead of the commits)
    /// and waits for the first ones' blocks: how many slices from the first
    /// are stored whole (at most a commit's batch).
    async fn stored_ahead(&mut self, t: &WriteTarget<'_>) -> usize {
        // the rest of the next slices goes to the store together
        for s in self.slices.iter_mut().take(FLUSH_WINDOW) {
            if !s.sealed || !s.failed.is_empty() {
                s.upload_rest(t);
            }
        }
        let mut ready = 0;
        while ready < self.slices.len().min(COMMIT_BATCH) {
            let slice = &mut self.slices[ready];
            if !slice.sealed {
                break; // (past the upload window)
            }
            for handle in std::mem::take(&mut slice.uploads) {
                slice.note(join(handle).await);
            }
            if !slice.failed.is_empty() || slice.broken {
                break;
            }
            ready += 1;
        }
        ready
    }

    /// [`Writer::flush`]; the attribute change goes along only when
    /// `with_attrs`, the last commit is durable only when `durable`.
    pub(super) async fn flush_slices(
        &mut self,
        t: &WriteTarget<'_>,
        inode: u64,
        with_attrs: bool,
        durable: bool,
        create: &mut Option<CreateWithData>,
    ) -> Result<Option<Attr>, i32> {
        let mut attr = None;
        let mut answers_lost = 0;
        while !self.slices.is_empty() {
            let ready = self.stored_ahead(t).await;
            if ready == 0 {
                return Err(self.unstored(t, inode).await);
            }
            let batch: Vec<(u32, SliceRow)> = self.slices[..ready]
                .iter()
                .map(|s| (s.chunk, s.row()))
                .collect();
            // the attribute change goes with the last slices
            let last = ready == self.slices.len();
            let attrs = self.deferred().filter(|_| with_attrs && last);
            let durable = durable && last;
            let committed_slices = |w: CommittedSlices| {
                let sent_in = Some(w.sent_in);
                (w.committed, w.attr, w.attrs_errno, sent_in, w.durable)
            };
            let inline = batch.iter().any(|(_, s)| s.inline.is_some());
            let result = match (ready, attrs, durable, create.as_ref()) {
                (1, None, false, None) if !inline => {
                    match t.meta.write_slice(inode, batch[0].0, &batch[0].1).await {
                        Ok((a, sent_in)) => Ok((1, Ok(a), None, Some(sent_in), false)),
                        Err(MetaError::Errno(errno)) => Ok((0, Err(errno), None, None, false)),
                        Err(e) => Err(e),
                    }
                }
                (_, _, _, None) => t
                    .meta
                    .write_slices(inode, &batch, attrs.as_ref(), durable)
                    .await
                    .map(committed_slices),
                (_, _, _, Some(made)) => t
                    .meta
                    .mknod_with_slices(made, &batch, attrs.as_ref(), durable)
                    .await
                    .map(committed_slices),
            };
            match result {
                Ok((committed, outcome, attrs_errno, sent_in, made_durable)) => {
                    // (the file was made, in the same transaction)
                    *create = None;
                    if committed > 0 {
                        count_kept(&batch[..committed.min(batch.len())]);
                        if let Some(sent_in) = sent_in {
                            self.committed_in.get_or_insert(sent_in);
                            if made_durable {
                                self.durable_in = Some(sent_in);
                            }
                        }
                        self.slices.drain(..committed);
                    }
                    if let Some(errno) = attrs_errno {
                        self.clear_attrs();
                        if errno != 0 {
                            self.attrs_refused = Some(errno);
                            tracing::error!(
                                "inode {inode}: the attribute change {:?} made while its writes \
                                 were pending was refused at their commit: {}",
                                attrs.map(|d| d.change).unwrap_or_default(),
                                MetaError::Errno(errno)
                            );
                        }
                    }
                    match outcome {
                        Ok(a) => attr = Some(a),
                        Err(libc::E2BIG)
                            if self.slices.first().is_some_and(|s| s.inline.is_some()) =>
                        {
                            // the file is longer than the database keeps
                            // now: its slices go to the store after all
                            tracing::debug!("inode {inode}: kept as objects, not in the database");
                            for slice in &mut self.slices {
                                slice.store_instead(t);
                            }
                        }
                        Err(errno) => {
                            self.refused(t, inode, errno).await;
                            if with_attrs {
                                // the change needs no slice: made alone
                                let _ = self.commit_attrs_alone(t, inode).await;
                            }
                            return Err(errno);
                        }
                    }
                }
                Err(e) if e.may_have_committed() => {
                    // ask the database what happened (the answer waits out an outage)
                    answers_lost += 1;
                    let settled = match answers_lost <= MAX_ANSWERS_LOST {
                        true => t
                            .meta
                            .settle_slices(inode, &batch, attrs.as_ref(), create.as_ref())
                            .await
                            .ok(),
                        false => None,
                    };
                    if let Some((committed, seen_in)) = settled {
                        tracing::warn!(
                            "inode {inode}: the answer to a commit of {ready} slice(s) was lost ({e}); \
                             the database has {committed} of them, the others are sent again"
                        );
                        if committed > 0 {
                            count_kept(&batch[..committed.min(batch.len())]);
                            self.committed_in.get_or_insert(seen_in);
                            self.slices.drain(..committed);
                            *create = None;
                        }
                        if committed == ready && attrs.is_some() {
                            // made with the last slice, in its transaction
                            self.clear_attrs();
                        }
                        continue;
                    }
                    for slice in self.slices.drain(..ready).collect::<Vec<_>>() {
                        tracing::error!(
                            "inode {inode}: the answer to the commit of slice {} (bytes {}) was lost: {e}",
                            slice.id,
                            slice.range()
                        );
                        forget_blocks(t, slice.id, slice.len, &e).await;
                    }
                    return Err(e.errno());
                }
                Err(e) => {
                    tracing::error!(
                        "inode {inode}: committing slice {} failed: {e}; it and {} later \
                         slice(s) are kept to try again",
                        self.slices[0].id,
                        self.slices.len() - 1
                    );
                    return Err(e.errno());
                }
            }
        }
        if !with_attrs {
            return Ok(attr);
        }
        match self.commit_attrs_alone(t, inode).await? {
            Some(a) => {
                self.durable_in = None; // (a commit after the durable one)
                Ok(Some(a))
            }
            None => Ok(attr),
        }
    }

    /// The deferred attribute change with no slice left to carry it (those
    /// it waited for were refused): made alone. A refusal drops it (its
    /// errno is kept for the next close or fsync); a failure for want of
    /// the database keeps it to try again.
    async fn commit_attrs_alone(
        &mut self,
        t: &WriteTarget<'_>,
        inode: u64,
    ) -> Result<Option<Attr>, i32> {
        let Some(mut change) = self.attrs else {
            return Ok(None);
        };
        if let (Some(_), Some(base)) = (change.mode, self.base_mode) {
            // as write_slices does: a mode someone else set meanwhile stands
            match t.meta.getattr(inode).await {
                Ok(now) if now.mode != base & 0o7777 => change.mode = None,
                Ok(_) => {}
                Err(MetaError::Errno(errno)) => {
                    self.clear_attrs();
                    self.attrs_refused = Some(errno);
                    return Ok(None);
                }
                Err(e) => return Err(e.errno()),
            }
        }
        if change.mask() == 0 {
            self.clear_attrs();
            return Ok(None);
        }
        // (a commit of the file, which the next sync of it must cover)
        self.committed_in.get_or_insert(t.meta.epoch());
        match t.meta.setattr(inode, &change).await {
            Ok(a) => {
                self.clear_attrs();
                Ok(Some(a))
            }
            Err(e) => {
                tracing::error!(
                    "inode {inode}: the attribute change {change:?} made while its writes \
                     were pending: {e}"
                );
                if let MetaError::Errno(errno) = e {
                    self.clear_attrs();
                    self.attrs_refused = Some(errno);
                    return Ok(None);
                }
                Err(e.errno())
            }
        }
    }

    /// The first pending slice could not be stored: its errno, with the
    /// cause in the log (a failed upload is kept to try again; a slice that
    /// lost a block is given up).
    async fn unstored(&mut self, t: &WriteTarget<'_>, inode: u64) -> i32 {
        let slice = &self.slices[0];
        if let Some(f) = slice.failed.first() {
            tracing::error!(
                "inode {inode}: storing slice {} in {} failed: {}; {} block(s) kept to try again",
                slice.id,
                t.store.describe(),
                f.error,
                slice.failed.len()
            );
            return store_errno(&f.error);
        }
        tracing::error!(
            "inode {inode}: slice {} lost a block; bytes {} lost",
            slice.id,
            slice.range()
        );
        let slice = self.slices.remove(0);
        delete_blocks(t, slice.id, slice.len).await;
        libc::EIO
    }

    /// The database refused the first pending slice (`errno`: the file is
    /// gone, no space or quota left): it and every later one are given up,
    /// with their byte ranges in the log, and their blocks deleted.
    async fn refused(&mut self, t: &WriteTarget<'_>, inode: u64, errno: i32) {
        let e = MetaError::Errno(errno);
        let level_warn = errno == libc::EDQUOT || errno == libc::ENOSPC;
        for slice in std::mem::take(&mut self.slices) {
            if level_warn {
                tracing::warn!(
                    "inode {inode}: slice {} not committed ({e}): bytes {} not written",
                    slice.id,
                    slice.range()
                );
            } else {
                tracing::error!(
                    "inode {inode}: committing slice {} failed ({e}): bytes {} lost",
                    slice.id,
                    slice.range()
                );
            }
            slice.discard(t).await;
        }
    }
}

/// Counts the slices of a commit that kept their bytes in the database
/// (metrics `jfs_inline_slices_total`, `jfs_inline_bytes_total`).
fn count_kept(committed: &[(u32, SliceRow)]) {
    for bytes in committed.iter().filter_map(|(_, s)| s.inline.as_ref()) {
        crate::metrics::METRICS.inline_slices.inc();
        crate::metrics::METRICS
            .inline_bytes
            .inc_by(bytes.len() as u64);
    }
}
