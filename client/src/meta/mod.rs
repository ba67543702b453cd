//! Metadata client: a pool of PostgreSQL connections and one typed function per jfs procedure.
//!
//! Every file-system operation is one call of one `jfs.*` procedure (one
//! transaction, one round trip). Expected failures come back from SQL as an
//! errno, which this module turns into [`MetaError::Errno`]; serialization
//! failures and deadlocks are retried a bounded number of times.

mod acl;
mod changelog;
mod data;
mod dump;
mod durability;
mod fsck;
mod journal;
mod limits;
mod lock;
mod namespace;
mod quota;
mod range;
mod session;
mod tier;
mod tls;
mod trash;
mod version;
mod volume;
mod xattr;

use std::collections::HashSet;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use deadpool_postgres::Hook;
use deadpool_postgres::{HookError, Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::Row;
use tokio_postgres_rustls::MakeRustlsConnect;

pub use acl::{
    AclEntry, AclKind, TAG_GROUP, TAG_GROUP_OBJ, TAG_MASK, TAG_OTHER, TAG_USER, TAG_USER_OBJ,
};
pub use changelog::{Change, LoggedChange};
pub use data::SliceRow;
pub use dump::{AclRow, DumpNode, LoadRequest, NodeRow, Snapshot, Staged, StagedSlice};
pub use durability::Epoch;
use durability::{Incarnation, Incarnations, INCARNATION_SQL};
use journal::{Entry, Redo};
pub use limits::Squash;
pub use lock::{LockRange, Locker};
pub use namespace::{DirEntry, NewNode, SetAttr, TimeSet};
pub use quota::{QuotaCheck, QuotaRow, QuotaTarget, SpaceLimit};
pub use session::session_application_name;
pub use tier::TierSlice;
use tls::TlsOptions;
pub use version::{check_extension_version, VERSION_TEXT};
pub use volume::{FormatRequest, Statfs, VolumeInfo};

/// A failed metadata call.
#[derive(Debug, thiserror::Error)]
pub enum MetaError {
    /// The procedure answered with this errno (ENOENT, EEXIST, ...).
    #[error("{}", std::io::Error::from_raw_os_error(*.0))]
    Errno(i32),
    /// A statement failed (its causes are in the text, so not a `source`).
    #[error("metadata database: {}", db_error_text(.0))]
    Db(tokio_postgres::Error),
    #[error("metadata database unreachable: {}", with_causes(.0))]
    Pool(#[from] deadpool_postgres::PoolError),
    /// A parameter this client cannot send without a prepared statement.
    #[error("{0}")]
    Parameter(String),
    /// The connection was found closed before the statement was sent.
    #[error("metadata database connection closed (not sent)")]
    NotSent,
    /// A sync ran on another server incarnation than earlier asynchronous
    /// commits it was to make durable (a restart or failover in between):
    /// they may be lost.
    #[error(
        "the metadata server restarted or failed over before commits of this mount were \
         made durable: they may be lost"
    )]
    NotDurable,
    /// Commits are to be told again to a new server incarnation before
    /// this statement is sent (never returned from a call).
    #[error("commits are to be told again to the metadata server first")]
    ReplayDue,
}

impl From<tokio_postgres::Error> for MetaError {
    fn from(e: tokio_postgres::Error) -> MetaError {
        MetaError::Db(e)
    }
}

impl MetaError {
    /// The errno to give the kernel: the procedure's, or EIO for anything else.
    pub fn errno(&self) -> i32 {
        match self {
            MetaError::Errno(e) => *e,
            _ => libc::EIO,
        }
    }

    /// Whether the call may have committed although it failed: the
    /// connection broke once the statement was sent (the answer was lost),
    /// or the answer came and could not be read. An errno answer, an error
    /// the server reported (its transaction rolled back), or no connection
    /// at all prove that it did not. What such a call may have committed
    /// (a slice's blocks) must not be deleted.
    pub fn may_have_committed(&self) -> bool {
        matches!(self, MetaError::Db(e) if e.code().is_none())
    }

    /// What a failed call means for retrying it.
    fn kind(&self) -> Failure {
        match self {
            MetaError::Errno(_) | MetaError::Parameter(_) | MetaError::NotDurable => Failure::Final,
            MetaError::NotSent | MetaError::ReplayDue => Failure::Unavailable,
            MetaError::Pool(deadpool_postgres::PoolError::Backend(e)) => match e.code() {
                // a role or database that is refused stays refused
                Some(c) if c.code().starts_with("28") || c.code() == "3D000" => Failure::Final,
                _ => Failure::Unavailable,
            },
            MetaError::Pool(deadpool_postgres::PoolError::Closed)
            | MetaError::Pool(deadpool_postgres::PoolError::NoRuntimeSpecified) => Failure::Final,
            MetaError::Pool(_) => Failure::Unavailable,
            MetaError::Db(e) => match e.code().map(|c| c.code()) {
                Some("40001" | "40P01") => Failure::Conflict,
                // the server went away or is not a primary (yet): the
                // transaction did not commit
                Some(c)
                    if c.starts_with("08")
                        || matches!(c, "57P01" | "57P02" | "57P03" | "25006" | "53300") =>
                {
                    Failure::Unavailable
                }
                Some(_) => Failure::Final,
                None => Failure::AnswerLost,
            },
        }
    }
}

/// How a call failed, for [`Meta::call`]'s retries.
#[derive(Debug, PartialEq, Eq)]
enum Failure {
    /// Serialization failure or deadlock: rolled back, retried a few times.
    Conflict,
    /// The database could not be reached, was shutting down or starting,
    /// or is a standby: nothing committed, retried until `--meta-retry`.
    Unavailable,
    /// The connection broke after the statement was sent: it may have
    /// committed, so only read-only procedures are retried.
    AnswerLost,
    /// An answer: no retry.
    Final,
}

pub type Result<T> = std::result::Result<T, MetaError>;

/// Node types, numbered as in `sql/schema.sql` (JuiceFS's numbering).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeType {
    File = 1,
    Dir = 2,
    Symlink = 3,
    Fifo = 4,
    BlockDev = 5,
    CharDev = 6,
    Socket = 7,
}

impl NodeType {
    pub fn from_code(code: i16) -> NodeType {
        match code {
            2 => NodeType::Dir,
            3 => NodeType::Symlink,
            4 => NodeType::Fifo,
            5 => NodeType::BlockDev,
            6 => NodeType::CharDev,
            7 => NodeType::Socket,
            _ => NodeType::File,
        }
    }
}

/// A node's attributes as the procedures return them (`jfs.attr`).
#[derive(Debug, Clone)]
pub struct Attr {
    pub inode: u64,
    pub kind: NodeType,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    /// Nanoseconds since the Unix epoch.
    pub atime: i64,
    pub mtime: i64,
    pub ctime: i64,
    pub nlink: u32,
    pub length: u64,
    pub rdev: u32,
    pub parent: u64,
    /// Storage tier (0 = the volume default, 1..3 = jfs.tier).
    pub tier: u8,
    /// A file's bytes that show data (its slices, holes left out).
    pub used: u64,
}

/// Nanoseconds since the epoch as a `SystemTime` (negative = before 1970).
pub fn ns_to_time(ns: i64) -> SystemTime {
    if ns >= 0 {
        UNIX_EPOCH + Duration::from_nanos(ns as u64)
    } else {
        UNIX_EPOCH - Duration::from_nanos(ns.unsigned_abs())
    }
}

/// A `SystemTime` as nanoseconds since the epoch.
pub fn time_to_ns(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_nanos() as i64,
        Err(e) => -(e.duration().as_nanos() as i64),
    }
}

/// Turns an errno column into an error.
fn check_errno(row: &Row) -> Result<()> {
    let errno: i32 = row.try_get("errno")?;
    if errno != 0 {
        return Err(MetaError::Errno(errno));
    }
    Ok(())
}

/// Reads a `jfs.attr`-shaped row (errno checked first).
fn attr_from_row(row: &Row) -> Result<Attr> {
    check_errno(row)?;
    Ok(Attr {
        inode: row.try_get::<_, i64>("inode")? as u64,
        kind: NodeType::from_code(row.try_get("type")?),
        mode: row.try_get::<_, i32>("mode")? as u32,
        uid: row.try_get::<_, i64>("uid")? as u32,
        gid: row.try_get::<_, i64>("gid")? as u32,
        atime: row.try_get("atime")?,
        mtime: row.try_get("mtime")?,
        ctime: row.try_get("ctime")?,
        nlink: row.try_get::<_, i32>("nlink")? as u32,
        length: row.try_get::<_, i64>("length")? as u64,
        rdev: row.try_get::<_, i64>("rdev")? as u32,
        parent: row.try_get::<_, i64>("parent")? as u64,
        tier: row.try_get::<_, Option<i16>>("tier")?.unwrap_or(0) as u8,
        used: row.try_get::<_, Option<i64>>("used")?.unwrap_or(0).max(0) as u64,
    })
}

/// The META_URL with its password replaced, for messages and logs.
pub fn redact_url(meta_url: &str) -> String {
    match url::Url::parse(meta_url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("****"));
            u.to_string()
        }
        Ok(u) => u.to_string(),
        Err(_) => "<unparsable META_URL>".to_string(),
    }
}

/// Connection to one volume's metadata database.
#[derive(Clone)]
pub struct Meta {
    pool: Pool,
    config: tokio_postgres::Config,
    /// TLS as META_URL asks for it (see `tls`).
    tls: MakeRustlsConnect,
    /// No named prepared statements (META_URL's `pgbouncer=true`): each
    /// call is one unnamed statement with its parameters' types, which
    /// PgBouncer in transaction mode can send to any server connection.
    unnamed_statements: bool,
    /// The server incarnations this client's commits went to (shared by
    /// every pool made from this one).
    incarnations: Arc<Incarnations>,
    /// The jfs procedures that only read (not VOLATILE): retried even when
    /// the answer was lost.
    read_only: Arc<OnceLock<HashSet<String>>>,
    /// How long calls are retried while the database is unavailable.
    retry_for: Duration,
    /// Since when this client has reached the database without a break, in
    /// milliseconds since the Unix epoch (0: it cannot now; shared by every
    /// pool made from this one).
    reached_since_ms: Arc<AtomicU64>,
    /// Held while commits are told again to a new server incarnation.
    replaying: Arc<tokio::sync::Mutex<()>>,
    /// This is the client that tells them: its calls neither wait for a
    /// replay nor are journaled.
    in_replay: bool,
}

/// How long calls are retried while the database is unavailable, unless
/// told otherwise (a failover of a replicated PostgreSQL takes 5-30 s).
pub const DEFAULT_META_RETRY: Duration = Duration::from_secs(60);

/// Procedures whose commits no fsync vouches for: losing them to a crash
/// loses nothing a file system promised (a sync itself, heartbeats, the
/// bookkeeping of background jobs, which redo what a crash erased; a lost
/// compaction leaves the slices it replaced; ids are synced before use).
const NOT_VOUCHED: [&str; 13] = [
    "sync",
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

/// Milliseconds since the Unix epoch, now (at least 1).
fn unix_ms() -> u64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    (since.as_millis() as u64).max(1)
}

/// Procedures not retried while the database is unavailable: a session
/// cleanup sent again when the database is back would find every session
/// silent for as long as the outage lasted, and end the live ones.
const NOT_RETRIED: [&str; 1] = ["session_cleanup"];

/// Procedures that change something but give the same result when run
/// twice (attributes or an ACL set again to the values given, a lock set
/// again to what it is, a heartbeat, a range of ids that is then not used):
/// retried like reads when their answer was lost. (A truncate sent again
/// after another mount wrote past the new length would cut that write too:
/// a race of two writers that the first truncate alone could lose as well.)
const IDEMPOTENT: [&str; 11] = [
    "setattr",
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

/// The META_URL option that turns named prepared statements off.
const POOLER_OPTION: &str = "pgbouncer";

/// `meta_url` without the `pgbouncer=true|false` option (which
/// tokio-postgres does not know), and whether it asked for true.
fn split_pooler_option(meta_url: &str) -> (String, bool) {
    let Some((base, query)) = meta_url.split_once('?') else {
        return (meta_url.to_string(), false);
    };
    let mut pooler = false;
    let kept: Vec<&str> = query
        .split('&')
        .filter(|kv| match kv.split_once('=') {
            Some((k, v)) if k == POOLER_OPTION => {
                pooler = matches!(v, "true" | "1" | "yes" | "on");
                false
            }
            _ => true,
        })
        .collect();
    let url = if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    (url, pooler)
}

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

thread_local! {
    /// A connection of this thread's own (see [`Meta::use_thread_connection`]).
    static THREAD_POOL: std::cell::RefCell<Option<Pool>> = const { std::cell::RefCell::new(None) };
    /// When this thread last took its connection.
    static THREAD_LAST_USE: std::cell::Cell<Option<Instant>> = const { std::cell::Cell::new(None) };
}

/// The first and the longest pause between retries of a call while the
/// database is unavailable.
const RETRY_PAUSE_MIN: Duration = Duration::from_millis(50);
const RETRY_PAUSE_MAX: Duration = Duration::from_secs(1);

/// A thread's connection idle for longer is checked before it is used.
const IDLE_CHECK: Duration = Duration::from_secs(1);

impl Meta {
    /// Connects to `meta_url` (`postgres://user:pass@host:port/db`; a unix
    /// socket host works as `postgres://user@%2Frun%2Fpostgresql/db` or
    /// `?host=/run/postgresql`). The password may also come from
    /// `META_PASSWORD`, which keeps it out of the process list.
    pub async fn connect(meta_url: &str, max_connections: usize) -> anyhow::Result<Meta> {
        let meta = Meta::pool(meta_url, max_connections)?;
        match meta.extension_version(meta_url).await? {
            Some(version) => meta.require_version(meta_url, &version)?,
            None => anyhow::bail!(
                "database {} has no jfs extension: run `jfs format` (or CREATE EXTENSION jfs as a superuser)",
                redact_url(meta_url)
            ),
        }
        meta.load_read_only_procedures().await?;
        Ok(meta)
    }

    /// Learns which jfs procedures only read (declared STABLE or IMMUTABLE).
    async fn load_read_only_procedures(&self) -> Result<()> {
        let client = self.pool.get().await?;
        let rows = client
            .query_typed(
                "SELECT proname::text FROM pg_catalog.pg_proc \
                  WHERE pronamespace = 'jfs'::regnamespace AND provolatile <> 'v'",
                &[],
            )
            .await?;
        let _ = self
            .read_only
            .set(rows.iter().map(|r| r.get::<_, String>(0)).collect());
        Ok(())
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

    /// Connects for `jfs format`: installs the extension when it is missing
    /// and the role may create it.
    pub async fn connect_for_format(meta_url: &str) -> anyhow::Result<Meta> {
        let meta = Meta::pool(meta_url, 2)?;
        if let Some(version) = meta.extension_version(meta_url).await? {
            meta.require_version(meta_url, &version)?;
            return Ok(meta);
        }
        let client = meta.pool.get().await?;
        client
            .batch_execute("SET client_min_messages = warning; CREATE EXTENSION IF NOT EXISTS jfs")
            .await
            .map_err(|e| {
                anyhow::anyhow!(
                    "cannot create the jfs extension in {}: {e}; \
                     a superuser must run CREATE EXTENSION jfs there (after scripts/install-extension.sh)",
                    redact_url(meta_url)
                )
            })?;
        drop(client);
        match meta.extension_version(meta_url).await? {
            Some(version) => meta.require_version(meta_url, &version)?,
            None => anyhow::bail!(
                "CREATE EXTENSION jfs in {} left no extension",
                redact_url(meta_url)
            ),
        }
        Ok(meta)
    }

    /// Connects (a first connection tells whether the database is reachable)
    /// and returns the installed jfs extension's version, if any.
    async fn extension_version(&self, meta_url: &str) -> anyhow::Result<Option<String>> {
        // a first connection, to say so when the database is unreachable
        drop(
            self.pool
                .get()
                .await
                .map_err(|e| unreachable(meta_url, e))?,
        );
        Ok(self.installed_version().await?)
    }

    /// The installed jfs extension's version, if any.
    pub async fn installed_version(&self) -> Result<Option<String>> {
        let client = self.pool.get().await?;
        // (unnamed statements here and below: see `unnamed_statements`)
        let rows = client
            .query_typed(
                "SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'jfs'",
                &[],
            )
            .await?;
        Ok(rows.first().map(|r| r.get(0)))
    }

    /// Stops a mount whose role cannot call every procedure a mount may
    /// call (granted before an upgrade added some?), saying what to run
    /// (those that write are not asked of a read-only role).
    pub async fn require_client_grants(&self) -> anyhow::Result<()> {
        let client = self.pool.get().await?;
        let rows = client
            .query_typed(
                "SELECT current_user::text, count(*), \
                        string_agg(p.oid::regprocedure::text, ', ' ORDER BY p.oid) \
                   FROM pg_catalog.pg_proc p \
                  WHERE p.pronamespace = 'jfs'::regnamespace AND p.prosecdef \
                    AND p.proname <> ALL (jfs.admin_procedures()) \
                    AND (p.proname <> ALL (jfs.write_procedures()) \
                         OR NOT (SELECT l.read_only FROM jfs.client_limits() l)) \
                    AND NOT pg_catalog.has_function_privilege(p.oid, 'EXECUTE')",
                &[],
            )
            .await?;
        let row = rows.first().ok_or_else(|| anyhow::anyhow!("no row"))?;
        let (role, missing): (String, i64) = (row.get(0), row.get(1));
        if missing > 0 {
            let names: Option<String> = row.get(2);
            anyhow::bail!(
                "role {role} may not call {missing} jfs procedure(s) a mount uses ({}): \
                 a superuser runs SELECT jfs.grant_client('{role}') (again after every \
                 ALTER EXTENSION jfs UPDATE)",
                names.unwrap_or_default()
            );
        }
        Ok(())
    }

    /// Stops with what to do when this client does not work with `version`.
    fn require_version(&self, meta_url: &str, version: &str) -> anyhow::Result<()> {
        check_extension_version(version)
            .map_err(|why| anyhow::anyhow!("{} ({})", why, redact_url(meta_url)))
    }

    fn pool(meta_url: &str, max_connections: usize) -> anyhow::Result<Meta> {
        let (meta_url, unnamed_statements) = split_pooler_option(meta_url);
        let (meta_url, tls) = TlsOptions::split(&meta_url);
        let (ssl_mode, tls) = tls
            .connector()
            .map_err(|e| anyhow::anyhow!("META_URL {}: {e}", redact_url(&meta_url)))?;
        let mut config = tokio_postgres::Config::from_str(&meta_url).map_err(|e| {
            anyhow::anyhow!(
                "bad META_URL {}: {e}; expected postgres://user:password@host:port/database",
                redact_url(&meta_url)
            )
        })?;
        if config.get_password().is_none() {
            if let Ok(password) = std::env::var("META_PASSWORD") {
                config.password(password);
            }
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_secs(5));
        }
        config.keepalives_idle(Duration::from_secs(30));
        config.application_name("jfs");
        config.ssl_mode(ssl_mode);
        let incarnations = Arc::<Incarnations>::default();
        let pool = build_pool(&config, &tls, max_connections, &incarnations)?;
        Ok(Meta {
            pool,
            config,
            tls,
            unnamed_statements,
            incarnations,
            read_only: Arc::default(),
            retry_for: DEFAULT_META_RETRY,
            reached_since_ms: Arc::new(AtomicU64::new(unix_ms())),
            replaying: Arc::default(),
            in_replay: false,
        })
    }

    /// The same database with connections that name session `sid` (their
    /// application_name, see [`session_application_name`]): the change log
    /// records what they change as that session's, and pg_stat_activity
    /// shows which mount a backend serves. The old pool's connections close.
    pub fn for_session(&self, sid: i64) -> anyhow::Result<Meta> {
        let mut config = self.config.clone();
        config.application_name(session_application_name(sid));
        let pool = build_pool(
            &config,
            &self.tls,
            self.pool.status().max_size,
            &self.incarnations,
        )?;
        Ok(Meta {
            pool,
            config,
            ..self.clone()
        })
    }

    /// This client as the one that tells commits again (same pool).
    fn replayer(&self) -> Meta {
        Meta {
            in_replay: true,
            ..self.clone()
        }
    }

    /// Gives the calling thread a connection of its own, used by every call
    /// made on this thread from now on. For threads that run requests to
    /// completion on a current-thread runtime of their own (the FUSE
    /// threads): the connection's task lives on that runtime, so a call
    /// wakes no other thread but PostgreSQL's. Each such thread holds one
    /// connection besides the shared pool.
    pub fn use_thread_connection(&self) -> anyhow::Result<()> {
        let pool = build_pool(&self.config, &self.tls, 1, &self.incarnations)?;
        THREAD_POOL.with(|p| *p.borrow_mut() = Some(pool));
        Ok(())
    }

    /// A connection: this thread's own if it has one, else one from the pool.
    async fn client(&self) -> Result<deadpool_postgres::Object> {
        let own = THREAD_POOL.with(|p| p.borrow().clone());
        let Some(pool) = own else {
            return Ok(self.pool.get().await?);
        };
        // A thread's connection is driven only while its thread runs a
        // request, so it learns that the server closed it (a restart) only
        // when it is used. One that sat idle is asked first (an empty
        // query, harmless to repeat) and replaced if it is gone: a
        // statement is then never sent on a dead connection.
        let idle = THREAD_LAST_USE.with(|t| t.replace(Some(Instant::now())));
        let client = pool.get().await?;
        if idle.is_none_or(|t| t.elapsed() < IDLE_CHECK) || client.simple_query("").await.is_ok() {
            return Ok(client);
        }
        tracing::info!(
            "a database connection of this mount was closed by the server: reconnecting"
        );
        drop(deadpool_postgres::Object::take(client));
        Ok(pool.get().await?)
    }

    /// Runs one statement with bounded retries of serialization failures
    /// and deadlocks; returns its rows. Counted in the metrics by the
    /// procedure it calls.
    async fn call(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>> {
        Ok(self.call_stamped(sql, params).await?.0)
    }

    /// [`Meta::call`], also returning the epoch the statement was sent in
    /// (see `durability`).
    async fn call_stamped(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<(Vec<Row>, Epoch)> {
        self.call_journaled(sql, params, Journaling::ByProcedure)
            .await
    }

    /// [`Meta::call_stamped`] for a commit the caller keeps in the journal
    /// itself ([`Meta::journal_redo`]), once it knows the outcome.
    async fn call_journaled_by_caller(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<(Vec<Row>, Epoch)> {
        self.call_journaled(sql, params, Journaling::ByCaller).await
    }

    /// Keeps a commit sent in `sent_in` in the journal with what it takes
    /// to commit it again.
    fn journal_redo(&self, sent_in: Epoch, redo: Redo) {
        if !self.in_replay {
            self.incarnations.record(sent_in, Entry::Redo(redo));
        }
    }

    async fn call_journaled(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        journaling: Journaling,
    ) -> Result<(Vec<Row>, Epoch)> {
        let procedure = crate::metrics::procedure_of(sql);
        let started = Instant::now();
        let result = self
            .call_with_retries(sql, params, procedure, journaling)
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
    ) -> Result<(Vec<Row>, Epoch)> {
        let read_only = self
            .read_only
            .get()
            .is_some_and(|names| names.contains(procedure));
        let mut conflicts = 0;
        let mut outage: Option<Instant> = None;
        let mut pause = RETRY_PAUSE_MIN;
        loop {
            if !self.in_replay && self.incarnations.replay_due() {
                // (boxed: the replay calls this function)
                Box::pin(self.replay()).await?;
            }
            let e = match self.run(sql, params).await {
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
                Err(e) => e,
            };
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
    /// has noted the server it reached).
    async fn run(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<(Vec<Row>, Epoch)> {
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
        if self.unnamed_statements {
            let typed = params
                .iter()
                .map(|&p| Ok((p, param_type(p)?)))
                .collect::<Result<Vec<_>>>()?;
            return Ok((client.query_typed(sql, &typed).await?, sent_in));
        }
        let stmt = client.prepare_cached(sql).await?;
        Ok((client.query(&stmt, params).await?, sent_in))
    }

    async fn call_one(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Row> {
        let mut rows = self.call(sql, params).await?;
        match rows.pop() {
            Some(row) => Ok(row),
            None => Err(MetaError::Errno(libc::EIO)),
        }
    }
}

/// A pool whose every new connection first notes the server incarnation it
/// reached, so that a commit sent on it is stamped with the right epoch.
fn build_pool(
    config: &tokio_postgres::Config,
    tls: &MakeRustlsConnect,
    max_connections: usize,
    incarnations: &Arc<Incarnations>,
) -> anyhow::Result<Pool> {
    let observer = incarnations.clone();
    let manager = Manager::from_config(
        config.clone(),
        tls.clone(),
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Pool::builder(manager)
        .max_size(max_connections)
        .wait_timeout(Some(Duration::from_secs(30)))
        .create_timeout(Some(Duration::from_secs(5)))
        .recycle_timeout(Some(Duration::from_secs(5)))
        .runtime(Runtime::Tokio1)
        .post_create(Hook::async_fn(move |client, _| {
            let observer = observer.clone();
            Box::pin(async move {
                let messages = client
                    .simple_query(INCARNATION_SQL)
                    .await
                    .map_err(HookError::Backend)?;
                let row = messages.iter().find_map(|m| match m {
                    tokio_postgres::SimpleQueryMessage::Row(r) => Some(r),
                    _ => None,
                });
                let text = |i: usize| row.and_then(|r| r.get(i)).unwrap_or_default().to_string();
                observer.observe(Incarnation {
                    id: text(0),
                    timeline: text(1),
                    clean_start: text(2) == "true",
                });
                Ok(())
            })
        }))
        .build()
        .map_err(|e| anyhow::anyhow!("connection pool: {e}"))
}

fn unreachable(meta_url: &str, e: deadpool_postgres::PoolError) -> anyhow::Error {
    let cause = with_causes(&e);
    let hint = match cause.contains("invalid peer certificate") {
        true => {
            " (the server's TLS certificate was refused: sslrootcert in META_URL names the \
                  CA that signed it, and with sslmode=verify-full the host in META_URL must be \
                  one the certificate is for)"
        }
        false => "",
    };
    anyhow::anyhow!(
        "cannot connect to the metadata database {}: {cause}{hint}",
        redact_url(meta_url)
    )
}

/// An error with the errors that caused it: "db error" alone hides what
/// the server said (`password authentication failed for user ...`).
pub fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        cause = c.source();
    }
    text
}

/// A database error with its causes and, when the role lacks a privilege,
/// the grant that gives it.
fn db_error_text(e: &tokio_postgres::Error) -> String {
    let text = with_causes(e);
    if e.code() == Some(&tokio_postgres::error::SqlState::INSUFFICIENT_PRIVILEGE) {
        format!(
            "{text} (a superuser grants a mount's role SELECT jfs.grant_client('ROLE'), \
             an administrator's role, for format, quotas and tiers, SELECT jfs.grant_admin('ROLE'))"
        )
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pooler_option_is_taken_out_of_the_url() {
        let (url, on) = split_pooler_option("postgres://u@h:6432/db?pgbouncer=true");
        assert_eq!((url.as_str(), on), ("postgres://u@h:6432/db", true));
        let (url, on) =
            split_pooler_option("postgres://u@h/db?host=/run/pg&pgbouncer=false&sslmode=disable");
        assert_eq!(
            (url.as_str(), on),
            ("postgres://u@h/db?host=/run/pg&sslmode=disable", false)
        );
        let (url, on) = split_pooler_option("postgres://u@h/db");
        assert_eq!((url.as_str(), on), ("postgres://u@h/db", false));
    }

    #[test]
    fn parameters_are_sent_as_the_types_the_procedures_take() {
        let cases: [(&(dyn ToSql + Sync), Type); 8] = [
            (&1i64, Type::INT8),
            (&1i32, Type::INT4),
            (&1i16, Type::INT2),
            (&true, Type::BOOL),
            (&b"x".as_slice(), Type::BYTEA),
            (&"x", Type::TEXT),
            (&vec![1i64], Type::INT8_ARRAY),
            (&None::<i64>, Type::INT8),
        ];
        for (value, want) in cases {
            assert_eq!(param_type(value).unwrap(), want, "{value:?}");
        }
    }
}
