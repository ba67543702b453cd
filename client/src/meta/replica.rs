//! Hot standbys: whether the server reached is one, how far behind it replays, and metadata reads a read-write mount sends to one (`--meta-replica`) once it has replayed what this mount has seen.
//!
//! Read-your-writes by WAL position: after each of its commits and each read
//! of the change log, the mount notes the primary's WAL insert position
//! (asked in the same round trip, after the statement). A standby whose
//! replay position has reached it holds every change this mount made or
//! forgot a copy of, so its answer is as exact as the mount's caches. A read
//! sent to the standby asks for its replay position first, in the same round
//! trip: a snapshot taken after it sees at least that much. A standby behind
//! the mark, out of reach or cancelling the read (a recovery conflict)
//! leaves the read to the primary.
//!
//! Positions compare only on one timeline of one cluster: a standby is read
//! only while its connection's server is a standby of the primary's cluster
//! (system identifier and database) and has replayed up to the primary's
//! timeline, as the primary named it after this mount's last commit. A
//! standby left on the old timeline by a failover may have received WAL
//! past the fork point: rows the new primary never committed.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_postgres::types::{PgLsn, ToSql};
use tokio_postgres::Row;

use super::error::ConnectError;
use super::{Failure, Meta, Result};
use crate::metrics::METRICS;

/// Whether the primary's WAL position after a call is noted for the
/// standby that serves reads (this module).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Position {
    /// When the procedure commits or reads the change log.
    ByProcedure,
    /// Always: a read the primary answered instead of the standby, which
    /// may have shown this mount newer state than the mark covers.
    Always,
}

/// The primary's WAL position now (asked after a commit or a log read),
/// and the name of its WAL file, which begins with its timeline.
pub(super) const PRIMARY_POSITION_SQL: &str = "SELECT pg_catalog.pg_current_wal_insert_lsn(), \
     pg_catalog.pg_walfile_name(pg_catalog.pg_current_wal_insert_lsn())";

/// The standby's cluster and database (as `ID/NAME`), and the newest
/// timeline it has replayed into: of its last restartpoint, or of the
/// WAL it must replay before it is consistent (which moves as it flushes
/// pages replayed from a newer timeline).
const STANDBY_IDENTITY_SQL: &str =
    "SELECT s.system_identifier::text || '/' || pg_catalog.current_database(), \
     greatest(c.timeline_id, r.min_recovery_end_timeline)::int8 \
     FROM pg_catalog.pg_control_system() s, pg_catalog.pg_control_checkpoint() c, \
          pg_catalog.pg_control_recovery() r";

/// The timeline a WAL file's name begins with (8 hex digits).
pub(super) fn timeline_of_wal_file(name: &str) -> Option<u64> {
    u64::from_str_radix(name.get(..8)?, 16).ok()
}

/// The procedure that tells a mount other mounts' changes.
const CHANGE_FEED: &str = "mount_changes";

/// How far a standby has replayed (NULL on a server not in recovery).
const REPLAYED_SQL: &str = "SELECT pg_catalog.pg_last_wal_replay_lsn()";

/// After a standby was found behind, reads go straight to the primary for
/// this long (rather than asking it again at each one).
const BEHIND_RECHECK: Duration = Duration::from_millis(2);

/// After a standby could not be reached, reads go to the primary for this long.
const UNREACHABLE_RETRY: Duration = Duration::from_secs(5);

/// A read the standby has not answered in this long goes to the primary
/// (and the standby is left alone for [`UNREACHABLE_RETRY`]): a standby
/// behind a broken network must not hold reads up for a TCP timeout.
const REPLICA_TIMEOUT: Duration = Duration::from_secs(1);

/// A standby that serves this mount's metadata reads.
pub(super) struct Replica {
    /// Connections to it (a client of its own: no retries, no journal).
    meta: Meta,
    /// The URL, its password hidden, for messages.
    url: String,
    /// The primary's WAL position after this mount's last commit or change-log read.
    must_reach: AtomicU64,
    /// The primary's timeline then (0: none seen yet).
    primary_timeline: AtomicU64,
    /// The cluster and database of the primary (`ID/NAME`), which the
    /// standby must be of.
    cluster: String,
    /// The standby was found of that cluster and on that timeline with
    /// this many connections made: (connections, timeline).
    verified: std::sync::Mutex<(u64, u64)>,
    /// Commits that may have happened without a position noted after them
    /// (their answer was lost, or the question after them failed), counted:
    /// while not 0, every read goes to the primary; a position noted by a
    /// call sent after the last of them settles it.
    unsettled: AtomicU64,
    /// The replay position the standby last reported.
    replayed: AtomicU64,
    /// What is known of the standby's replay position while no connection
    /// is made: (connections made, a position it reported since). Its
    /// replay only moves forward, so reads need no check while it is past
    /// the mark; a new connection may reach another server (or the same one
    /// restarted, replaying from an earlier point), and forgets it. (With
    /// several hosts in the URL every read checks.)
    known: std::sync::Mutex<(u64, u64)>,
    /// The URL names one host.
    one_host: bool,
    /// Microseconds since `epoch` until which reads skip the standby (it was
    /// behind, or out of reach).
    skip_until_us: AtomicU64,
    /// Whether the standby is out of reach (one warning per outage).
    unreachable: std::sync::atomic::AtomicBool,
    epoch: Instant,
}

/// Where a replica read went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReplicaOutcome {
    /// The standby answered.
    Served,
    /// It had not replayed what this mount has seen: the primary answered.
    Behind,
    /// It could not answer (out of reach, a recovery conflict): the primary did.
    Failed,
}

impl ReplicaOutcome {
    fn label(self) -> &'static str {
        match self {
            ReplicaOutcome::Served => "served",
            ReplicaOutcome::Behind => "behind",
            ReplicaOutcome::Failed => "failed",
        }
    }
}

impl Replica {
    pub(super) fn meta(&self) -> &Meta {
        &self.meta
    }

    fn now_us(&self) -> u64 {
        self.epoch.elapsed().as_micros() as u64
    }

    fn skip_for(&self, pause: Duration) {
        let until = self.now_us() + pause.as_micros() as u64;
        self.skip_until_us.store(until, Ordering::Relaxed);
    }

    /// The standby failed to answer for `why`: reads go to the primary for
    /// a while (said once per outage).
    fn lost(&self, why: &str) {
        self.skip_for(UNREACHABLE_RETRY);
        if !self.unreachable.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                "the standby {} does not answer ({why}): metadata reads go to the primary",
                self.url
            );
        }
    }

    /// Whether a read should try the standby: it is known to have caught
    /// up, or it is time to ask again.
    fn worth_asking(&self, mark: u64) -> bool {
        self.replayed.load(Ordering::Relaxed) >= mark
            || self.now_us() >= self.skip_until_us.load(Ordering::Relaxed)
    }

    /// Asks the standby for its replay position and then runs the read, in
    /// one round trip; the rows only if it had reached `mark`.
    async fn read(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        mark: u64,
    ) -> Result<Option<Vec<Row>>> {
        let client = self.meta.client().await?;
        let statement = self.meta.statement(&client, sql).await?;
        let connections = self.meta.incarnations.connections_made();
        let timeline = self.primary_timeline.load(Ordering::SeqCst);
        let verified = *self.verified.lock().unwrap() == (connections, timeline);
        if !verified || !self.one_host {
            let identity = client.query_typed(STANDBY_IDENTITY_SQL, &[]).await?;
            let (cluster, replayed_timeline) = identity
                .first()
                .map(|r| (r.get::<_, String>(0), r.get::<_, i64>(1) as u64))
                .unwrap_or_default();
            if cluster != self.cluster || replayed_timeline != timeline {
                self.lost(&format!(
                    "it is {cluster} on timeline {replayed_timeline}, the primary {} on timeline \
                     {timeline}: it may hold changes the primary never committed",
                    self.cluster
                ));
                return Ok(None);
            }
            *self.verified.lock().unwrap() = (connections, timeline);
        }
        let known = *self.known.lock().unwrap();
        if self.one_host && known.0 == connections && known.1 >= mark {
            let rows = self.meta.execute(&client, sql, statement.as_ref(), params);
            return Ok(Some(rows.await?));
        }
        // (the replay position is asked first: the read's snapshot is taken after)
        let replayed = client.query_typed(REPLAYED_SQL, &[]);
        let rows = self.meta.execute(&client, sql, statement.as_ref(), params);
        let (replayed, rows) = tokio::join!(replayed, rows);
        let replayed = replayed?
            .first()
            .and_then(|r| r.get::<_, Option<PgLsn>>(0))
            .map_or(0, u64::from);
        self.replayed.fetch_max(replayed, Ordering::Relaxed);
        {
            let mut known = self.known.lock().unwrap();
            if known.0 != connections || known.1 < replayed {
                *known = (connections, replayed);
            }
        }
        if replayed < mark {
            self.skip_for(BEHIND_RECHECK);
            return Ok(None);
        }
        Ok(Some(rows?))
    }
}

impl Meta {
    /// Whether the server is a hot standby (in recovery: it takes no writes).
    pub async fn in_recovery(&self) -> Result<bool> {
        let client = self.client().await?;
        let rows = client
            .query_typed("SELECT pg_catalog.pg_is_in_recovery()", &[])
            .await?;
        Ok(rows.first().is_some_and(|r| r.get::<_, bool>(0)))
    }

    /// How far a standby's replay is behind, in seconds: 0 when it has
    /// replayed all the WAL it received, else the age of the last
    /// transaction it replayed; None on a primary.
    pub async fn replay_lag(&self) -> Result<Option<f64>> {
        let client = self.client().await?;
        let rows = client
            .query_typed(
                "SELECT CASE WHEN NOT pg_catalog.pg_is_in_recovery() THEN NULL \
                        WHEN pg_catalog.pg_last_wal_receive_lsn() = pg_catalog.pg_last_wal_replay_lsn() \
                        THEN 0::float8 \
                        ELSE extract(epoch FROM pg_catalog.now() \
                             - pg_catalog.pg_last_xact_replay_timestamp())::float8 END",
                &[],
            )
            .await?;
        Ok(rows.first().and_then(|r| r.get::<_, Option<f64>>(0)))
    }

    /// Sends lookups, getattrs and directory pages this mount may answer
    /// from copies to the hot standby at `replica_url` when it has replayed
    /// what this mount has seen. It must be a standby of this database with
    /// the same extension version.
    pub async fn read_from_replica(
        &mut self,
        replica_url: &str,
        max_connections: usize,
    ) -> std::result::Result<(), ConnectError> {
        let mut meta = Meta::connect(replica_url, max_connections).await?;
        meta.thread_slot = self.thread_slot.replica();
        meta.incarnations.set_reads_only();
        let one_host = meta.config.get_hosts().len() <= 1;
        let url = super::redact_url(replica_url);
        if !meta.in_recovery().await? {
            return Err(ConnectError::NotAStandby { url });
        }
        let ours = self.cluster_database().await?;
        let theirs = meta.cluster_database().await?;
        if ours != theirs {
            return Err(ConnectError::OtherDatabase {
                url,
                why: format!(
                    "it is database {theirs} (cluster system id/database) and the primary \
                     {ours}: not a standby of the metadata database"
                ),
            });
        }
        self.replica = Some(Arc::new(Replica {
            meta,
            url,
            must_reach: AtomicU64::new(0),
            primary_timeline: AtomicU64::new(self.current_timeline().await?),
            cluster: ours,
            verified: std::sync::Mutex::new((0, 0)),
            unsettled: AtomicU64::new(0),
            replayed: AtomicU64::new(0),
            known: Default::default(),
            one_host,
            skip_until_us: AtomicU64::new(0),
            unreachable: Default::default(),
            epoch: Instant::now(),
        }));
        Ok(())
    }

    /// The server's cluster (its system identifier, which its standbys
    /// share) and the database, as `ID/NAME`.
    async fn cluster_database(&self) -> Result<String> {
        let client = self.client().await?;
        let rows = client
            .query_typed(
                "SELECT system_identifier::text || '/' || pg_catalog.current_database() \
                   FROM pg_catalog.pg_control_system()",
                &[],
            )
            .await?;
        Ok(rows.first().map(|r| r.get(0)).unwrap_or_default())
    }

    /// The timeline the primary writes WAL on now (0 if it cannot say).
    async fn current_timeline(&self) -> Result<u64> {
        let client = self.client().await?;
        let rows = client.query_typed(PRIMARY_POSITION_SQL, &[]).await?;
        let name = rows.first().and_then(|r| r.get::<_, Option<String>>(1));
        Ok(name.and_then(|n| timeline_of_wal_file(&n)).unwrap_or(0))
    }

    /// The standby this mount reads from, if any.
    pub fn replica(&self) -> Option<Meta> {
        self.replica.as_ref().map(|r| r.meta.clone())
    }

    /// Notes the primary's WAL position after statement `sql` (which gave
    /// `rows`; sent while [`Meta::position_unsettled_count`] was
    /// `unsettled`): reads go to the standby once it has replayed it. A
    /// read of the change log that found no change moves nothing: no copy
    /// was forgotten, so the standby is as exact as the copies still.
    pub(super) fn reached_position(
        &self,
        sql: &str,
        rows: &[Row],
        position: u64,
        timeline: u64,
        unsettled: u64,
    ) {
        let Some(r) = &self.replica else { return };
        // (a new primary's timeline is newer: an answer from an old one,
        // sent before, must not move it back)
        r.primary_timeline.fetch_max(timeline, Ordering::SeqCst);
        // (mount_changes' first row carries only the horizon)
        if crate::metrics::procedure_of(sql) == CHANGE_FEED && rows.len() < 2 {
            return;
        }
        r.must_reach.fetch_max(position, Ordering::SeqCst);
        if unsettled != 0 {
            // (a commit of uncertain fate after this call was sent stays unsettled)
            let _ = r
                .unsettled
                .compare_exchange(unsettled, 0, Ordering::SeqCst, Ordering::SeqCst);
        }
    }

    /// A commit may have happened whose position is not noted: reads go to
    /// the primary until one noted after it settles it.
    pub(super) fn position_unsettled(&self) {
        if let Some(r) = &self.replica {
            r.unsettled.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// How many commits of uncertain position there are now (0: none).
    pub(super) fn position_unsettled_count(&self) -> u64 {
        self.replica
            .as_ref()
            .map_or(0, |r| r.unsettled.load(Ordering::SeqCst))
    }

    /// Whether a call's WAL position is to be noted (a replica is read and
    /// the call commits, or reads the change log).
    pub(super) fn notes_position(
        &self,
        procedure: &str,
        read_only: bool,
        position: Position,
    ) -> bool {
        self.replica.is_some()
            && (!read_only || procedure == CHANGE_FEED || position == Position::Always)
    }

    /// A read whose answer may come from the standby (see the module's
    /// text); from the primary when there is none or it cannot answer.
    pub(super) async fn call_replicable(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>> {
        let Some(r) = &self.replica else {
            return self.call(sql, params).await;
        };
        let mark = r.must_reach.load(Ordering::SeqCst);
        let unsettled = r.unsettled.load(Ordering::SeqCst) != 0;
        let outcome = match !unsettled && r.worth_asking(mark) {
            false => ReplicaOutcome::Behind,
            true => {
                let started = Instant::now();
                let procedure = crate::metrics::procedure_of(sql);
                let read = tokio::time::timeout(REPLICA_TIMEOUT, r.read(sql, params, mark));
                match read.await {
                    Ok(Ok(Some(rows))) => {
                        if r.unreachable.swap(false, Ordering::Relaxed) {
                            tracing::info!("reading metadata from the standby {} again", r.url);
                        }
                        METRICS
                            .meta_calls
                            .with_label_values(&[procedure])
                            .observe(started.elapsed().as_secs_f64());
                        count(ReplicaOutcome::Served);
                        return Ok(rows);
                    }
                    Ok(Ok(None)) => ReplicaOutcome::Behind,
                    Ok(Err(e)) => {
                        match e.kind() {
                            Failure::Unavailable | Failure::AnswerLost => r.lost(&e.to_string()),
                            // (a recovery conflict cancelled it, say)
                            _ => tracing::debug!("{procedure} on the standby {}: {e}", r.url),
                        }
                        ReplicaOutcome::Failed
                    }
                    Err(_) => {
                        let secs = REPLICA_TIMEOUT.as_secs_f64();
                        r.lost(&format!("no answer in {secs} s"));
                        ReplicaOutcome::Failed
                    }
                }
            }
        };
        count(outcome);
        // (what the primary answers may be newer than the mark: it moves
        // past it, so that no later read goes back in time on the standby)
        self.call_noted(sql, params).await
    }
}

fn count(outcome: ReplicaOutcome) {
    METRICS
        .replica_reads
        .with_label_values(&[outcome.label()])
        .inc();
}

#[cfg(test)]
mod tests {
    use super::timeline_of_wal_file;

    #[test]
    fn a_wal_file_name_begins_with_its_timeline() {
        assert_eq!(timeline_of_wal_file("000000010000000000000003"), Some(1));
        assert_eq!(timeline_of_wal_file("0000001A0000000000000003"), Some(26));
        assert_eq!(timeline_of_wal_file("0000"), None);
        assert_eq!(timeline_of_wal_file("zzzzzzzz0000000000000003"), None);
    }
}
