//! Calling a procedure: one statement, retried while the database is out of reach or the transaction must be run again, and journaled until a sync covers it.
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio_postgres::types::{PgLsn, ToSql, Type};
use tokio_postgres::Row;

use super::journal::{Entry, Epoch, Redo};
use super::replica::Position;
use super::unix_ms;
use super::{Failure, Meta, MetaError, Result};

/// Procedures whose commits no fsync vouches for: losing them to a crash
/// loses nothing a file system promised (a sync itself, heartbeats, the
/// bookkeeping of background jobs, which redo what a crash erased; a lost
/// compaction leaves the slices it replaced; ids are synced before use; an
/// atime moved by a read).
const NOT_VOUCHED: [&str; 16] = [
    "sync",
    "touch_atime",
    "take_lease",
    "want_lease",
    "session_heartbeat",
    "session_register",
    "session_close",
    "session_cleanup",
    "changelog_prune",
    "backup_claim",
    "backup_release",
    "forget_delslices",
    "alloc_ids",
    "compact_chunk",
    "free_unlinked",
    "trash_purge",
];

/// Procedures whose commits the mount relies on but no fsync vouches for
/// (locks, files held open): when a crash may have erased them, the mount
/// is told (`Meta::state_losses`).
const MOUNT_STATE: [&str; 5] = [
    "setlk",
    "unlock_owner",
    "cancel_lock_wait",
    "sustain",
    "release",
];

/// How a call's commit is kept in the journal (see `journal`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Journaling {
    /// By the procedure it calls.
    ByProcedure,
    /// By the caller, once it knows the outcome (with what it takes to
    /// commit it again).
    ByCaller,
}

/// Procedures not retried while the database is unavailable: a session
/// cleanup sent again when the database is back would find every session
/// silent for as long as the outage lasted, and end the live ones.
const NOT_RETRIED: [&str; 1] = ["session_cleanup"];

/// Procedures that change something but give the same result when run
/// twice (attributes or an ACL set again to the values given, a lock set
/// again to what it is, a heartbeat, a range of ids that is then not used,
/// a lease taken or asked for again, unlinks committed under a lease again:
/// each removes its name only while it names its node; creates committed
/// under a lease again: each is found made):
/// retried like reads when their answer was lost. (A truncate sent again
/// after another mount wrote past the new length would cut that write too:
/// a race of two writers that the first truncate alone could lose as well.)
const IDEMPOTENT: [&str; 16] = [
    "setattr",
    "touch_atime",
    "take_lease",
    "lease_unlink",
    "lease_commit",
    "want_lease",
    "set_acl",
    "setlk",
    "unlock_owner",
    "cancel_lock_wait",
    "session_heartbeat",
    "session_close",
    "sustain",
    "release",
    "sync",
    "alloc_ids",
];

/// The PostgreSQL type a parameter value is sent as when statements are
/// not prepared: the first of the types jfs's procedures take that the
/// value's Rust type encodes (what a prepared statement would have asked).
fn param_type(value: &(dyn ToSql + Sync)) -> Result<Type> {
    const CANDIDATES: [Type; 15] = [
        Type::INT8,
        Type::INT4,
        Type::INT2,
        Type::BOOL,
        Type::FLOAT8,
        Type::BYTEA,
        Type::TEXT,
        Type::CHAR,
        Type::INT8_ARRAY,
        Type::INT4_ARRAY,
        Type::INT2_ARRAY,
        Type::BYTEA_ARRAY,
        Type::TEXT_ARRAY,
        Type::BOOL_ARRAY,
        Type::TIMESTAMPTZ,
    ];
    let mut scratch = bytes::BytesMut::new();
    for ty in CANDIDATES {
        scratch.clear();
        match value.to_sql_checked(&ty, &mut scratch) {
            Err(e) if e.is::<tokio_postgres::types::WrongType>() => continue,
            _ => return Ok(ty),
        }
    }
    Err(MetaError::Parameter(format!(
        "no PostgreSQL type for parameter {value:?} (unnamed statements, pgbouncer=true)"
    )))
}

/// The first and the longest pause between retries of a call while the
/// database is unavailable.
const RETRY_PAUSE_MIN: Duration = Duration::from_millis(50);

const RETRY_PAUSE_MAX: Duration = Duration::from_secs(1);

/// How long a call waits before this client asks the database to end the
/// transactions that keep it waiting (see [`Meta::unstalled`]); the
/// procedure ends only those open and waited for at least as long.
const STALL_AFTER: Duration = Duration::from_secs(5);

/// Pauses between calls refused for a directory another mount holds the
/// lease of, doubling: its holder gives it up within its batch window.
const LEASE_PAUSE_MIN: Duration = Duration::from_millis(2);
const LEASE_PAUSE_MAX: Duration = Duration::from_millis(20);

impl Meta {
    /// Learns, once at connect, which jfs procedures this role may call
    /// (the extension has them and the role is granted them) and which only
    /// read (declared STABLE or IMMUTABLE): what the client does not
    /// learn from errors.
    pub(super) async fn load_procedures(&self) -> Result<()> {
        let client = self.pool.get().await?;
        let rows = client
            .query_typed(
                "SELECT proname::text, provolatile <> 'v', \
                        pg_catalog.has_function_privilege(oid, 'EXECUTE') \
                   FROM pg_catalog.pg_proc WHERE pronamespace = 'jfs'::regnamespace",
                &[],
            )
            .await?;
        let mut procedures = super::Procedures::default();
        for row in &rows {
            let name: String = row.get(0);
            if row.get::<_, bool>(1) {
                procedures.read_only.insert(name.clone());
            }
            if row.get::<_, bool>(2) {
                procedures.callable.insert(name);
            }
        }
        let _ = self.procedures.set(procedures);
        Ok(())
    }

    /// Whether this role may call jfs procedure `procedure` (as learnt at
    /// connect; true when nothing was learnt, as for `jfs format`).
    pub fn may_call(&self, procedure: &str) -> bool {
        self.procedures
            .get()
            .is_none_or(|p| p.callable.contains(procedure))
    }

    /// Calls are retried for this long while the database is unavailable
    /// (a restart, a failover, a broken connection).
    /// How long this client has reached the database without a break (None
    /// while it cannot).
    pub fn reached_for(&self) -> Option<Duration> {
        match self.reached_since_ms.load(Ordering::Relaxed) {
            0 => None,
            since => Some(Duration::from_millis(unix_ms().saturating_sub(since))),
        }
    }

    pub fn set_retry_for(&mut self, retry_for: Duration) {
        self.retry_for = retry_for;
    }

    /// Whether the volume's commits are asynchronous ('fsync' durability
    /// mode), so that syncs check the server they ran on.
    pub fn set_async_commits(&self, on: bool) {
        self.incarnations.set_async_commits(on);
    }

    /// The current epoch (see `durability`): read before a commit whose
    /// durability a later [`Meta::sync`] is to prove.
    pub fn epoch(&self) -> Epoch {
        self.incarnations.epoch()
    }

    /// Runs one statement with bounded retries of serialization failures
    /// and deadlocks; returns its rows. Counted in the metrics by the
    /// procedure it calls.
    pub(super) async fn call(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>> {
        Ok(self.call_stamped(sql, params).await?.0)
    }

    /// [`Meta::call`], also returning the epoch the statement was sent in
    /// (see `durability`).
    pub(super) async fn call_stamped(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<(Vec<Row>, Epoch)> {
        self.call_journaled(sql, params, Journaling::ByProcedure, Position::ByProcedure)
            .await
    }

    /// [`Meta::call`] noting the primary's WAL position after it, whatever
    /// the procedure (see [`Position::Always`]).
    pub(super) async fn call_noted(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>> {
        let called = self.call_journaled(sql, params, Journaling::ByProcedure, Position::Always);
        Ok(called.await?.0)
    }

    /// [`Meta::call_stamped`] for a commit the caller keeps in the journal
    /// itself ([`Meta::journal_redo`]), once it knows the outcome.
    pub(super) async fn call_journaled_by_caller(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<(Vec<Row>, Epoch)> {
        self.call_journaled(sql, params, Journaling::ByCaller, Position::ByProcedure)
            .await
    }

    /// Keeps a commit sent in `sent_in` in the journal with what it takes
    /// to commit it again.
    pub(super) fn journal_redo(&self, sent_in: Epoch, redo: Redo) {
        if !self.in_replay {
            self.incarnations.record(sent_in, Entry::Redo(redo));
        }
    }

    async fn call_journaled(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        journaling: Journaling,
        position: Position,
    ) -> Result<(Vec<Row>, Epoch)> {
        let procedure = crate::metrics::procedure_of(sql);
        let started = Instant::now();
        let result = self
            .call_with_retries(sql, params, procedure, journaling, position)
            .await;
        let m = &crate::metrics::METRICS;
        m.meta_calls
            .with_label_values(&[procedure])
            .observe(started.elapsed().as_secs_f64());
        if result.is_err() {
            m.meta_errors.with_label_values(&[procedure]).inc();
        }
        result
    }

    /// [`Meta::call`] without the metrics. A call that failed because the
    /// database was unavailable (nothing committed), or that only reads and
    /// lost its answer, is retried with backoff for `retry_for`; one that
    /// may have committed is not (it could apply twice).
    async fn call_with_retries(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        procedure: &str,
        journaling: Journaling,
        position: Position,
    ) -> Result<(Vec<Row>, Epoch)> {
        let read_only = self
            .procedures
            .get()
            .is_some_and(|p| p.read_only.contains(procedure));
        let note_position = self.notes_position(procedure, read_only, position);
        let mut conflicts = 0;
        let mut outage: Option<Instant> = None;
        let mut pause = RETRY_PAUSE_MIN;
        let mut lease_pause = LEASE_PAUSE_MIN;
        let mut leased_since: Option<Instant> = None;
        loop {
            if !self.in_replay && self.incarnations.replay_due() {
                // (boxed: the replay calls this function)
                Box::pin(self.replay()).await?;
            }
            let e = match self.run(sql, params, note_position).await {
                Ok((rows, sent_in)) => {
                    // (one atomic read per call; a write only when it was cut off)
                    if self.reached_since_ms.load(Ordering::Relaxed) == 0 {
                        let _ = self.reached_since_ms.compare_exchange(
                            0,
                            unix_ms(),
                            Ordering::Relaxed,
                            Ordering::Relaxed,
                        );
                    }
                    if let Some(since) = outage {
                        tracing::info!(
                            "metadata database available again: {procedure} went through after {:.1} s",
                            since.elapsed().as_secs_f64()
                        );
                    }
                    if !read_only && !self.in_replay && journaling == Journaling::ByProcedure {
                        if MOUNT_STATE.contains(&procedure) {
                            self.incarnations.record(sent_in, Entry::State);
                        } else if !NOT_VOUCHED.contains(&procedure) {
                            self.incarnations.record(sent_in, Entry::Opaque);
                        }
                    }
                    return Ok((rows, sent_in));
                }
                Err(MetaError::ReplayDue) => continue,
                Err(e) => {
                    if note_position && e.may_have_committed() {
                        // a commit the mark does not cover may be there
                        self.position_unsettled();
                    }
                    e
                }
            };
            if let Failure::Leased(dir) = e.kind() {
                // asked for, the lease is given up at its holder's next
                // commit, or at once when the holder is gone or stuck
                let since = *leased_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= self.retry_for {
                    tracing::error!(
                        "{procedure}: directory {dir} stayed leased to another mount for {:.0} s \
                         (--meta-retry): giving up: {e}",
                        since.elapsed().as_secs_f64()
                    );
                    return Err(e);
                }
                // (boxed: asking is a call too)
                if !Box::pin(self.want_lease(dir)).await.unwrap_or(false) {
                    tokio::time::sleep(lease_pause).await;
                    lease_pause = (lease_pause * 2).min(LEASE_PAUSE_MAX);
                }
                crate::metrics::METRICS
                    .meta_retries
                    .with_label_values(&[procedure])
                    .inc();
                continue;
            }
            let wait = match e.kind() {
                Failure::Conflict if conflicts < 4 => {
                    conflicts += 1;
                    tracing::debug!("retrying {sql}: {e}");
                    Duration::from_millis(5 << conflicts)
                }
                Failure::Unavailable => {
                    self.reached_since_ms.store(0, Ordering::Relaxed);
                    if NOT_RETRIED.contains(&procedure) {
                        return Err(e);
                    }
                    pause
                }
                Failure::AnswerLost if read_only => pause,
                Failure::AnswerLost if IDEMPOTENT.contains(&procedure) => {
                    tracing::warn!(
                        "{procedure}: the answer was lost ({e}); sent again (twice is as once)"
                    );
                    pause
                }
                Failure::AnswerLost => {
                    tracing::warn!(
                        "{procedure}: the connection broke with the call in flight ({e}): it may \
                         have happened, so it is not sent again"
                    );
                    return Err(e);
                }
                _ => return Err(e),
            };
            let since = *outage.get_or_insert_with(Instant::now);
            if wait == pause {
                if since.elapsed() >= self.retry_for {
                    tracing::error!(
                        "{procedure}: the metadata database is still unavailable after {:.0} s \
                         (--meta-retry): giving up: {e}",
                        since.elapsed().as_secs_f64()
                    );
                    return Err(e);
                }
                if pause == RETRY_PAUSE_MIN {
                    tracing::warn!(
                        "{procedure}: the metadata database is unavailable ({e}); retrying for up \
                         to {} s",
                        self.retry_for.as_secs()
                    );
                }
                pause = (pause * 2).min(RETRY_PAUSE_MAX);
            } else {
                outage = None;
            }
            crate::metrics::METRICS
                .meta_retries
                .with_label_values(&[procedure])
                .inc();
            tokio::time::sleep(wait).await;
        }
    }

    /// Sends one statement on one connection; returns its rows and the
    /// epoch it was sent in (read once the connection is there: a new one
    /// has noted the server it reached). With `note_position`, the primary's
    /// WAL position after it is asked in the same round trip and noted for
    /// the standby that serves reads (see `replica`).
    async fn run(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        note_position: bool,
    ) -> Result<(Vec<Row>, Epoch)> {
        self.wait_open().await?;
        let client = self.client().await?;
        if client.is_closed() {
            drop(deadpool_postgres::Object::take(client));
            return Err(MetaError::NotSent);
        }
        let sent_in = self.incarnations.epoch();
        if !self.in_replay && self.incarnations.replay_due() {
            // this connection is the first to reach a new server: what
            // the old one may have lost goes first
            return Err(MetaError::ReplayDue);
        }
        let statement = self.statement(&client, sql).await?;
        let rows = self.unstalled(sql, self.execute(&client, sql, statement.as_ref(), params));
        if !note_position {
            return Ok((rows.await?, sent_in));
        }
        // (sent after the statement on the same connection, in the same
        // round trip: it runs once the statement committed)
        let unsettled = self.position_unsettled_count();
        let position = client.query_typed(super::replica::PRIMARY_POSITION_SQL, &[]);
        let (rows, position) = tokio::join!(rows, position);
        let rows = rows?;
        // the statement's outcome stands whatever became of the question
        // after it (a failed one must not send a commit again)
        let position = position.map(|r| {
            r.first().and_then(|r| {
                let lsn = r.get::<_, Option<PgLsn>>(0)?;
                let timeline = r.get::<_, Option<String>>(1)?;
                Some((lsn, super::replica::timeline_of_wal_file(&timeline)?))
            })
        });
        match position {
            Ok(Some((lsn, timeline))) => {
                self.reached_position(sql, &rows, lsn.into(), timeline, unsettled)
            }
            _ => self.position_unsettled(),
        }
        Ok((rows, sent_in))
    }

    /// Awaits `call`; while it has not answered, every [`STALL_AFTER`]
    /// asks the database to end the transactions of other clients that keep
    /// its backends waiting for locks (`jfs.end_stalling`): a client role's
    /// transaction left open after a procedure would otherwise stall this
    /// mount for as long as that client likes.
    async fn unstalled<T>(&self, sql: &str, call: impl std::future::Future<Output = T>) -> T {
        tokio::pin!(call);
        loop {
            tokio::select! {
                out = &mut call => return out,
                _ = tokio::time::sleep(STALL_AFTER) => {}
            }
            // (on a thread of its own: connecting takes a deep stack, and
            // FUSE threads have small ones)
            let (tell, told) = tokio::sync::oneshot::channel();
            let meta = self.clone();
            let spawned = std::thread::Builder::new()
                .name("jfs-unstall".into())
                .spawn(move || {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build();
                    if let Ok(runtime) = runtime {
                        let _ = tell.send(runtime.block_on(meta.end_stalling()));
                    }
                });
            if spawned.is_err() {
                continue;
            }
            let ended = tokio::select! {
                out = &mut call => return out,
                ended = told => ended.unwrap_or(Ok(0)),
            };
            let procedure = crate::metrics::procedure_of(sql);
            match ended {
                Ok(0) => {}
                Ok(n) => tracing::warn!(
                    "{procedure}: waited {} s for locks; ended {n} transaction(s) of other clients \
                     that held them open (jfs.end_stalling)",
                    STALL_AFTER.as_secs()
                ),
                Err(e) => tracing::debug!("{procedure}: jfs.end_stalling: {e}"),
            }
        }
    }

    /// The prepared (and cached) statement for `sql`; none with
    /// `pgbouncer=true`, whose statements are unnamed.
    pub(super) async fn statement(
        &self,
        client: &deadpool_postgres::Object,
        sql: &str,
    ) -> Result<Option<tokio_postgres::Statement>> {
        match self.unnamed_statements {
            true => Ok(None),
            false => Ok(Some(client.prepare_cached(sql).await?)),
        }
    }

    /// Runs `sql` on `client`: `statement` if prepared, else unnamed with
    /// its parameters' types. Sent when first polled.
    pub(super) async fn execute(
        &self,
        client: &deadpool_postgres::Object,
        sql: &str,
        statement: Option<&tokio_postgres::Statement>,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>> {
        if let Some(stmt) = statement {
            return Ok(client.query(stmt, params).await?);
        }
        let typed = params
            .iter()
            .map(|&p| Ok((p, param_type(p)?)))
            .collect::<Result<Vec<_>>>()?;
        Ok(client.query_typed(sql, &typed).await?)
    }

    pub(super) async fn call_one(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Row> {
        let mut rows = self.call(sql, params).await?;
        match rows.pop() {
            Some(row) => Ok(row),
            None => Err(MetaError::Errno(libc::EIO)),
        }
    }
}

/// The first row of a call that answers one (EIO when it answered none).
pub(super) fn first_row(rows: &[Row]) -> Result<&Row> {
    rows.first().ok_or(MetaError::Errno(libc::EIO))
}

#[cfg(test)]
mod tests;
