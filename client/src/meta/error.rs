//! What a metadata call can fail with, and the words for it: errno answers, lost answers, retries, the database out of reach.
use super::redact_url;

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
    /// The mount has not reached this database yet (a shard down when it
    /// started: see `late`).
    #[error("this mount has not reached the shard's database yet (it was out of reach when the mount started)")]
    NotReached,
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

    /// Whether the procedure called does not exist (an older extension) or
    /// may not be called by this role.
    pub fn is_undefined_or_denied(&self) -> bool {
        use tokio_postgres::error::SqlState;
        matches!(self, MetaError::Db(e) if e.code() == Some(&SqlState::UNDEFINED_FUNCTION)
            || e.code() == Some(&SqlState::INSUFFICIENT_PRIVILEGE))
    }

    /// What a failed call means for retrying it.
    pub(super) fn kind(&self) -> Failure {
        match self {
            MetaError::Errno(_) | MetaError::Parameter(_) | MetaError::NotDurable => Failure::Final,
            MetaError::NotSent | MetaError::ReplayDue | MetaError::NotReached => {
                Failure::Unavailable
            }
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
                Some(LEASED) => match e.as_db_error().and_then(|d| d.detail()?.parse().ok()) {
                    Some(dir) => Failure::Leased(dir),
                    None => Failure::Final,
                },
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
pub(super) enum Failure {
    /// Serialization failure or deadlock: rolled back, retried a few times.
    Conflict,
    /// The database could not be reached, was shutting down or starting,
    /// or is a standby: nothing committed, retried until `--meta-retry`.
    Unavailable,
    /// The connection broke after the statement was sent: it may have
    /// committed, so only read-only procedures are retried.
    AnswerLost,
    /// Another session holds the lease of directory `.0` (sql/lease.sql):
    /// rolled back; asked for and retried once it is given up.
    Leased(u64),
    /// An answer: no retry.
    Final,
}

/// The SQLSTATE of a call refused for a directory another session holds
/// the lease of (its inode in the error's DETAIL).
const LEASED: &str = "JL000";

pub type Result<T> = std::result::Result<T, MetaError>;

/// Why a client could not start using a metadata database: each names the
/// database (its URL without a password) and says what to do.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("bad META_URL {url}: {reason}; expected postgres://user:password@host:port/database")]
    BadUrl { url: String, reason: String },
    /// META_URL's TLS options cannot be used (a certificate file, a mode).
    #[error("META_URL {url}: {reason}")]
    Tls { url: String, reason: String },
    /// No connection could be made (down, refused, a password or a
    /// certificate not accepted).
    #[error("cannot connect to the metadata database {url}: {cause}{}", tls_hint(.cause))]
    Unreachable {
        url: String,
        cause: String,
        /// The server answered and refused this client (its role, password
        /// or database): no retry makes it come.
        refused: bool,
    },
    #[error(
        "database {url} has no jfs extension: run `jfs format` (or CREATE EXTENSION jfs as a superuser)"
    )]
    NoExtension { url: String },
    #[error(
        "cannot create the jfs extension in {url}: {cause}; a superuser must run CREATE EXTENSION jfs there (after scripts/install-extension.sh)"
    )]
    CannotCreateExtension { url: String, cause: String },
    /// The extension's version is one this client does not work with.
    #[error("{why} ({url})")]
    Version { url: String, why: String },
    /// `--meta-replica` names a server that is not in recovery.
    #[error(
        "--meta-replica {url} is not a hot standby (pg_is_in_recovery() is false): name a \
         standby of the metadata database (?target_session_attrs=read-only picks one of several)"
    )]
    NotAStandby { url: String },
    /// `--meta-replica` names a standby of another database (or one with
    /// another extension version).
    #[error("--meta-replica {url}: {why}")]
    OtherDatabase { url: String, why: String },
    /// A query made while connecting failed.
    #[error(transparent)]
    Query(#[from] MetaError),
    #[error("connection pool: {0}")]
    Pool(String),
}

impl ConnectError {
    pub(super) fn unreachable(meta_url: &str, e: deadpool_postgres::PoolError) -> ConnectError {
        let refused = matches!(&e, deadpool_postgres::PoolError::Backend(b)
            if b.code().is_some_and(|c| c.code().starts_with("28") || c.code() == "3D000"));
        ConnectError::Unreachable {
            url: redact_url(meta_url),
            cause: with_causes(&e),
            refused,
        }
    }
}

/// Whether `e` says a database is out of reach now (down, not accepting
/// connections), not that it refuses this client or is not what it should be.
pub fn out_of_reach(e: &anyhow::Error) -> bool {
    matches!(
        e.downcast_ref::<ConnectError>(),
        Some(ConnectError::Unreachable { refused: false, .. })
    )
}

/// What to check when the server's certificate was refused.
fn tls_hint(cause: &str) -> &'static str {
    if cause.contains("certificate verify failed") {
        " (the server's TLS certificate was refused: sslrootcert in META_URL names the CA \
         that signed it)"
    } else if cause.contains("does not match host name") {
        " (with sslmode=verify-full the host in META_URL must be one the server's \
         certificate is for; sslmode=verify-ca checks only who signed it)"
    } else {
        ""
    }
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
pub(super) fn db_error_text(e: &tokio_postgres::Error) -> String {
    let text = with_causes(e);
    if e.code() == Some(&tokio_postgres::error::SqlState::INSUFFICIENT_PRIVILEGE) {
        format!(
            "{text} (a superuser grants a mount's role SELECT jfs.grant_client('ROLE'), \
             an administrator's role, for format, quotas, tiers and fsck, SELECT jfs.grant_admin('ROLE'))"
        )
    } else {
        text
    }
}
