//! File operations: open and create (close-to-open consistency), read,
//! write, flush and fsync (commit, and sync in 'fsync' mode), release; the
//! commit of a file's pending writes.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::meta::{Attr, MetaError, NewNode, NodeType};
use crate::metrics::METRICS;
use crate::ns::attrs::Ticket;
use crate::vfs::handles::{FileState, Handle, OpenFile};
use crate::vfs::{control, errno, Caller, Vfs, VfsResult};
use crate::volume::layout::CHUNK_SIZE;

/// How often a write held back by full write buffers looks again.
const BUFFER_WAIT_STEP: std::time::Duration = std::time::Duration::from_millis(5);

/// How long a write waits for memory before the log says so.
const BUFFER_WAIT_TOLD: std::time::Duration = std::time::Duration::from_secs(10);

/// How long a write waits for memory at most (longer than the stores'
/// default retry times): then it fails with EIO.
const BUFFER_WAIT_LIMIT: std::time::Duration = std::time::Duration::from_secs(180);

impl Vfs {
    /// Attributes with what this mount knows better of a file open here:
    /// its length, grown by writes that may not be committed yet (or were
    /// committed while `attr` was on its way).
    pub(in crate::vfs) async fn overlay(&self, mut attr: Attr) -> Attr {
        if attr.kind == NodeType::File {
            if let Some(file) = self.open_file(attr.inode) {
                attr = file.state.lock().await.view(attr, &self.ns.attrs);
            }
        }
        attr
    }

    /// Commits a file's pending writes (caller holds its state).
    pub(in crate::vfs) async fn flush_locked(
        &self,
        inode: u64,
        state: &mut FileState,
    ) -> VfsResult<()> {
        self.commit_pending(inode, state, false).await
    }

    /// [`Vfs::flush_locked`]; with `durable` the last commit waits for the
    /// WAL flush (`Writer::take_durable_in` then says so).
    async fn commit_pending(
        &self,
        inode: u64,
        state: &mut FileState,
        durable: bool,
    ) -> VfsResult<()> {
        if state.writer.is_empty() {
            // (a commit at a chunk boundary may have emptied it)
            if let Some(sent_in) = state.writer.take_committed_in() {
                state.committed_in(sent_in);
            }
            return Ok(());
        }
        let mut target = self.target(inode, state.tier);
        if state.length > target.inline_max as u64 {
            target.inline_max = 0; // (kept in the database only while small)
        }
        // (a file made here under a lease: PostgreSQL must know it first,
        // or make it with the first commit)
        let has_data = state.writer.has_slices();
        let store = state.writer.store(&target);
        let mut in_flight = self.ns.create_with_data(inode, has_data, store).await?;
        let mut create = in_flight.as_mut().and_then(|f| f.made.take());
        let pending = state.writer.slices_per_chunk();
        let before = self.ns.attrs.ticket();
        let result = state
            .writer
            .flush(&target, inode, durable, &mut create)
            .await;
        // (a change of the file read from the log meanwhile: the commit's
        // answer may be older than it)
        let raced = self.ns.attrs.forgot_since(inode, before);
        // (the file's creation, sent with its data, refused: its name
        // taken after the lease was lost, or a limit set meanwhile)
        let create_refused = create.is_some() && result.is_err();
        if let Some(mut flight) = in_flight {
            flight.made = create;
            self.ns
                .created_with_data(flight, result.as_ref().ok().and_then(Option::as_ref));
        }
        let result = match result {
            Err(e) if create_refused => {
                // the directory's batch commits it, or keeps it in
                // /lost+found (ns::lost_found); its data follows it
                tracing::debug!("inode {inode}: its creation with its data refused (errno {e})");
                self.ns.settle_created(inode).await?;
                state.writer.flush(&target, inode, durable, &mut None).await
            }
            other => other,
        };
        // its length and times moved (or may have, on an error)
        self.ns.attrs.forget(inode);
        let ticket = self.ns.attrs.ticket();
        state.changed();
        if result.is_ok() {
            for (chunk, n) in pending {
                let commits = state.commits.entry(chunk).or_default();
                *commits += n;
                if self.config.compact_at > 0 && *commits >= self.config.compact_at {
                    *commits = 0;
                    self.queue_compaction(inode, chunk);
                }
            }
        }
        // (some slices may have been committed before an error)
        if let Some(sent_in) = state.writer.take_committed_in() {
            state.committed_in(sent_in);
        }
        match result {
            Ok(Some(attr)) => {
                state.length = state.length.max(attr.length);
                if !raced {
                    // the commit's answer is the file now (a stat after
                    // cp -a or tar asks no more)
                    self.ns.attrs.replace(&attr, ticket);
                    state.saw(attr, self.ns.attrs.ticket(), &self.ns.attrs);
                }
                Ok(())
            }
            Ok(None) => Ok(()),
            Err(e) => {
                if !state.writer.has_slices() {
                    // writes were given up: the length they made is not
                    // the file's (nothing reads as silent zeros)
                    if let Ok(attr) = self.ns.getattr_now(inode).await {
                        state.length = attr.length;
                    }
                }
                Err(e)
            }
        }
    }

    /// Commits a file's pending writes and, in 'fsync' durability mode, waits
    /// until the metadata is durable: what close() and fsync() promise.
    pub(in crate::vfs) async fn flush_file(&self, file: &OpenFile, sync: bool) -> VfsResult<()> {
        if sync {
            // (its creation, if made here under a lease, is promised too)
            self.ns.settle_created(file.inode).await?;
        }
        let mut state = file.state.lock().await;
        state.usable()?;
        let durable = sync || self.volume.meta_durability == "fsync";
        // (the commit is durable itself: no sync of its own follows)
        let flushed = self.commit_pending(file.inode, &mut state, durable).await;
        let durable_in = state.writer.take_durable_in();
        // (one error for the call: a refused change after refused writes
        // is not told again)
        let refused = state.writer.take_attrs_refused();
        flushed?;
        if file.create_lost.load(Ordering::SeqCst) {
            // (its writes were kept in /lost+found: see ns::lost_found)
            return Err(libc::EIO);
        }
        if let Some(errno) = refused {
            // a chmod, chown or utimens answered while the writes were
            // pending, refused at their commit
            return Err(errno);
        }
        // (an fsync syncs even when no commit of the file is known: it
        // also promises the file's creation, its extended attributes...)
        if durable && (sync || state.unsynced.is_some()) {
            let by_commit = durable_in.and_then(|e| {
                self.ns
                    .meta_of(file.inode)
                    .committed_durably(e, state.unsynced)
            });
            let result = match by_commit {
                Some(result) => result,
                None => self.ns.meta_of(file.inode).sync_file(state.unsynced).await,
            };
            if let Err(MetaError::NotDurable) = &result {
                tracing::error!(
                    "inode {}: its changes since its last fsync may be lost",
                    file.inode
                );
            }
            match &result {
                Ok(()) => state.unsynced = None,
                // a loss is told to every close until an fsync was told
                // it: a close may be another process's copy of the
                // descriptor (a fork's, at its exec), which nobody checks
                Err(MetaError::NotDurable) if sync => state.unsynced = None,
                Err(_) => {}
            }
            result.map_err(errno)?;
        }
        Ok(())
    }

    /// Opens a file: registers the handle and refreshes what this mount
    /// knows of the file (close-to-open consistency).
    pub async fn open(&self, inode: u64, write: bool) -> VfsResult<(u64, Attr)> {
        if inode == control::CONTROL_INODE {
            let fh = self.add_handle(Handle::Control {
                answer: tokio::sync::Mutex::new(Vec::new()),
            });
            return Ok((fh, control::control_attr()));
        }
        if write {
            self.writable()?;
        }
        let seen = self.file_generation(inode).await;
        let ticket = self.ns.attrs.ticket();
        let attr = self.ns.getattr_now(inode).await.map_err(errno)?;
        self.open_with(attr, seen, ticket).await
    }

    /// The generation of a file open here (None if it is not open).
    async fn file_generation(&self, inode: u64) -> Option<u64> {
        let file = self.open_file(inode)?;
        let generation = file.state.lock().await.generation;
        Some(generation)
    }

    /// Opens a file whose attributes the caller got when its generation
    /// here was `seen` (None: it was not open here), with the attribute
    /// cache at `ticket`.
    async fn open_with(
        &self,
        attr: Attr,
        seen: Option<u64>,
        ticket: Ticket,
    ) -> VfsResult<(u64, Attr)> {
        let inode = attr.inode;
        if attr.kind == NodeType::Dir {
            return Err(libc::EISDIR);
        }
        let file = self.open_file_state(inode, attr.length, attr.tier);
        let result = self.refresh_on_open(&file, attr, seen, ticket).await;
        let attr = match result {
            Ok(attr) => attr,
            Err(e) => {
                self.close_file(&file);
                return Err(e);
            }
        };
        let fh = self.add_handle(Handle::File {
            file,
            last_read_end: AtomicU64::new(u64::MAX),
        });
        Ok((fh, attr))
    }

    /// Close-to-open: what other mounts committed before this open shows
    /// from now on, unless this mount has writes of the file pending. `attr`
    /// was read when the file's generation here was `seen`; if the file
    /// changed here since, it is read again under the lock. `ticket`: the
    /// attribute cache's when `attr` was read.
    async fn refresh_on_open(
        &self,
        file: &OpenFile,
        attr: Attr,
        seen: Option<u64>,
        ticket: Ticket,
    ) -> VfsResult<Attr> {
        let mut state = file.state.lock().await;
        if !state.writer.is_empty() {
            state.saw(attr.clone(), ticket, &self.ns.attrs);
            return Ok(state.view(attr, &self.ns.attrs));
        }
        // generation 0: not changed here since it was opened
        let unchanged = match seen {
            None => state.generation == 0,
            Some(g) => g != 0 && g == state.generation,
        };
        let (attr, ticket) = if unchanged {
            (attr, ticket)
        } else {
            let ticket = self.ns.attrs.ticket();
            (
                self.ns.getattr_now(file.inode).await.map_err(errno)?,
                ticket,
            )
        };
        state.length = attr.length;
        state.saw(attr.clone(), ticket, &self.ns.attrs);
        state.changed();
        Ok(attr)
    }

    /// create(2): `node` (a regular file) made and opened.
    pub async fn create(
        &self,
        parent: u64,
        name: &[u8],
        node: &NewNode<'_>,
    ) -> VfsResult<(u64, Attr)> {
        let attr = self.mknod(parent, name, node).await?;
        // (after the create's own forget of the new inode, which nobody
        // else can have changed yet)
        let ticket = self.ns.attrs.ticket();
        let (fh, attr) = self.open_with(attr, None, ticket).await?;
        if let Some(file) = self.open_file(attr.inode) {
            file.state.lock().await.xattr_free = Some(ticket);
        }
        Ok((fh, attr))
    }

    pub async fn read(&self, fh: u64, offset: u64, size: u32) -> VfsResult<bytes::Bytes> {
        let handle = self.file_handle(fh)?;
        if let Handle::Control { answer } = &*handle {
            let answer = answer.lock().await;
            let start = (offset as usize).min(answer.len());
            let end = (start + size as usize).min(answer.len());
            return Ok(bytes::Bytes::copy_from_slice(&answer[start..end]));
        }
        let Handle::File {
            file,
            last_read_end,
        } = &*handle
        else {
            return Err(libc::EISDIR);
        };
        self.ns.settle_created(file.inode).await?;
        let sequential = last_read_end.load(Ordering::Relaxed) == offset;
        let data = match self.read_file(file, offset, size, sequential).await {
            Err(libc::EIO) => {
                // the slice lists this mount kept may name slices that were
                // compacted (or truncated) elsewhere and whose objects are
                // gone: read them again once
                tracing::info!("inode {}: reading again with fresh slice lists", file.inode);
                file.state.lock().await.changed();
                self.read_file(file, offset, size, sequential).await?
            }
            other => other?,
        };
        last_read_end.store(offset + data.len() as u64, Ordering::Relaxed);
        self.accessed(file.inode).await;
        Ok(data)
    }

    /// write(2); `caller` is who wrote (used by control requests only).
    pub async fn write(&self, fh: u64, offset: u64, data: &[u8], caller: Caller) -> VfsResult<u32> {
        let handle = self.file_handle(fh)?;
        if let Handle::Control { answer } = &*handle {
            let request = String::from_utf8_lossy(data).to_string();
            *answer.lock().await = self.control(&request, caller).await.into_bytes();
            return Ok(data.len() as u32);
        }
        self.writable()?;
        let Handle::File { file, .. } = &*handle else {
            return Err(libc::EISDIR);
        };
        let mut state = file.state.lock().await;
        state.usable()?;
        self.wait_for_buffer(file.inode, &mut state).await?;
        if state
            .writer
            .deferred_attrs()
            .is_some_and(|c| c.mtime.is_some())
        {
            // an mtime set before this write is the commit's to make
            // first: the write's commit then moves it on
            self.flush_locked(file.inode, &mut state).await?;
        }
        let allowed = self
            .writable_len(file.inode, &mut state, offset, data.len())
            .await?;
        let data = &data[..allowed];
        if offset + data.len() as u64 > CHUNK_SIZE {
            // (a file made here under a lease, not yet committed: writing
            // on into the next chunk commits its data, which PostgreSQL
            // takes only for a file it knows)
            self.ns.settle_created(file.inode).await?;
        }
        let target = self.target(file.inode, state.tier);
        state
            .writer
            .write(&target, file.inode, offset, data, || {
                self.ns.new_slice(file.inode)
            })
            .await?;
        state.length = state.length.max(offset + data.len() as u64);
        state.changed();
        Ok(data.len() as u32)
    }

    /// Back-pressure of `--buffer-size`: while the write buffers of all files
    /// hold that much, a write first commits its own file's pending writes
    /// (their error is the write's), then waits for the other files' to be
    /// committed by the background committer, which this wakes; EIO if
    /// they cannot be for [`BUFFER_WAIT_LIMIT`] (the store is down).
    async fn wait_for_buffer(&self, inode: u64, state: &mut FileState) -> VfsResult<()> {
        let full = || METRICS.write_buffer_bytes.get() as usize >= self.config.buffer_size;
        if !full() {
            return Ok(());
        }
        self.flush_locked(inode, state).await?;
        let started = std::time::Instant::now();
        let mut told = false;
        while full() {
            self.commit_now.notify_one();
            tokio::time::sleep(BUFFER_WAIT_STEP).await;
            if !told && started.elapsed() >= BUFFER_WAIT_TOLD {
                tracing::warn!(
                    "inode {inode}: writes wait for memory: the write buffers hold {} bytes \
                     (--buffer-size {}) that cannot be stored yet",
                    METRICS.write_buffer_bytes.get(),
                    self.config.buffer_size
                );
                told = true;
            }
            if started.elapsed() >= BUFFER_WAIT_LIMIT {
                tracing::error!(
                    "inode {inode}: a write waited {BUFFER_WAIT_LIMIT:?} for the write buffers \
                     (--buffer-size) to be stored; it fails with EIO"
                );
                return Err(libc::EIO);
            }
        }
        Ok(())
    }

    /// close(2) of one descriptor: pending writes are committed (and synced
    /// in 'fsync' mode) so that the error reaches the application.
    pub async fn flush(&self, fh: u64) -> VfsResult<()> {
        let handle = self.file_handle(fh)?;
        match &*handle {
            Handle::File { file, .. } => self.flush_file(file, false).await,
            Handle::Dir { .. } | Handle::Control { .. } => Ok(()),
        }
    }

    pub async fn fsync(&self, fh: u64) -> VfsResult<()> {
        let handle = self.file_handle(fh)?;
        match &*handle {
            Handle::File { file, .. } => self.flush_file(file, true).await,
            Handle::Dir {
                inode, losses_seen, ..
            } => {
                drop(self.ns.settle_dir(*inode).await?);
                self.ns
                    .meta_of(*inode)
                    .sync_dir(losses_seen)
                    .await
                    .map_err(errno)
            }
            Handle::Control { .. } => Ok(()),
        }
    }

    /// The last close of a handle.
    pub async fn release(&self, fh: u64) -> VfsResult<()> {
        let Some(handle) = self.handles.lock().unwrap().remove(&fh) else {
            return Ok(());
        };
        let Handle::File { file, .. } = &*handle else {
            return Ok(());
        };
        let mut state = file.state.lock().await;
        let flushed = self.flush_locked(file.inode, &mut state).await;
        let unlocked = self.release_handle_locks(file.inode, fh, &mut state).await;
        let last = self.close_file(file);
        if last && flushed.is_err() && !state.writer.is_empty() {
            // the last descriptor is gone: nobody is left to tell but the log
            tracing::error!(
                "inode {}: closed with writes that could not be stored; bytes [{}] and \
                 the attribute change {:?} are lost",
                file.inode,
                state.writer.pending_ranges(),
                state.writer.deferred_attrs()
            );
        }
        if last && state.unlinked {
            self.ns
                .meta_of(file.inode)
                .release(self.ns.sid_of(file.inode).await, file.inode)
                .await
                .map_err(errno)?;
        }
        flushed.and(unlocked)
    }

    /// The locks of the owners whose last lock of `inode` went through
    /// handle `fh`, now released: its open file description's (OFD locks,
    /// for which the kernel sends no unlock at the last close).
    async fn release_handle_locks(
        &self,
        inode: u64,
        fh: u64,
        state: &mut FileState,
    ) -> VfsResult<()> {
        let owners: Vec<u64> = state
            .lock_handles
            .iter()
            .filter(|(_, through)| **through == fh)
            .map(|(owner, _)| *owner)
            .collect();
        let mut result = Ok(());
        for owner in owners {
            state.lock_handles.remove(&owner);
            if state.locks_lost {
                continue;
            }
            let unlocked = self.ns.unlock_owner(inode, self.locker(owner)).await;
            if let Err(e) = unlocked {
                result = Err(errno(e));
            }
        }
        result
    }

    /// Waits until the write buffers are full or `every` passed (never, for
    /// None); true when they are full (commit every file now).
    pub async fn commit_due(&self, every: Option<std::time::Duration>) -> bool {
        match every {
            Some(every) => tokio::select! {
                _ = tokio::time::sleep(every) => false,
                _ = self.commit_now.notified() => true,
            },
            None => {
                self.commit_now.notified().await;
                true
            }
        }
    }

    /// Commits the pending writes of open files that waited `age` or more
    /// without a flush (files being flushed are left alone), and tries
    /// again those a failed commit kept: other mounts then see the writes
    /// and a crash of this mount loses at most that window.
    pub async fn commit_waiting_writes(&self, age: std::time::Duration) {
        let files: Vec<Arc<OpenFile>> = self.files.lock().unwrap().values().cloned().collect();
        for file in files {
            let Ok(mut state) = file.state.try_lock() else {
                continue;
            };
            if state
                .writer
                .pending_for()
                .is_some_and(|waited| waited >= age)
            {
                if let Err(e) = self.flush_locked(file.inode, &mut state).await {
                    tracing::warn!(
                        "inode {}: committing writes in the background: errno {e} (kept to try again)",
                        file.inode
                    );
                }
            }
        }
    }

    /// Commits every open file's pending writes and the unlinks answered
    /// under leases (unmount, shutdown).
    pub async fn flush_all(&self) {
        if let Err(e) = self.ns.settle_all().await {
            tracing::error!("unlinks and creates answered here lost at unmount: errno {e}");
        }
        let files: Vec<Arc<OpenFile>> = self.files.lock().unwrap().values().cloned().collect();
        for file in files {
            if let Err(e) = self.flush_file(&file, true).await {
                tracing::error!(
                    "inode {}: pending writes lost at unmount: errno {e}",
                    file.inode
                );
            }
        }
    }
}
