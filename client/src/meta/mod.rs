//! Metadata client: a pool of PostgreSQL connections and one typed function per jfs procedure.
//!
//! Every file-system operation is one call of one `jfs.*` procedure (one
//! transaction, one round trip). Expected failures come back from SQL as an
//! errno, which this module turns into [`MetaError::Errno`]; serialization
//! failures and deadlocks are retried a bounded number of times.
//!
//! By job: `pool` connects (META_URL, TLS, PgBouncer, a connection per FUSE
//! thread), `call` runs one procedure (retries, the journal of unsynced
//! commits), `error` says what failed (a call: [`MetaError`]; connecting:
//! [`ConnectError`]), `attr` reads nodes, `version` and
//! `limits` check what this client and its role may do; the other modules
//! are one per family of procedures, one function per procedure.

mod acl;
mod attr;
mod call;
mod changelog;
mod data;
mod dump;
mod durability;
mod error;
mod fsck;
mod inline;
mod journal;
mod late;
mod lease;
mod limits;
mod load;
mod lock;
mod namespace;
mod pool;
mod quota;
mod range;
mod replica;
mod session;
mod shard;
mod tier;
mod tls;
pub mod tls_fork;
mod trash;
mod version;
mod volume;
mod xattr;

use std::collections::HashSet;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use deadpool_postgres::Pool;
use tls::Connector;

pub use acl::{
    AclEntry, AclKind, TAG_GROUP, TAG_GROUP_OBJ, TAG_MASK, TAG_OTHER, TAG_USER, TAG_USER_OBJ,
};
use attr::{attr_from_row, check_errno};
pub use attr::{ns_to_time, time_to_ns, Attr, NodeType};
pub use changelog::{Change, LoggedChange};
pub use data::{CommittedSlices, DeferredAttrs, DeleteQueue, SliceRow};
pub use dump::{AclRow, DumpNode, NodeRow, Snapshot};
use durability::Incarnations;
use error::Failure;
pub use error::{out_of_reach, MetaError, Result};
pub use inline::InlineUsage;
pub use journal::Epoch;
pub use lease::{CreateWithData, LeaseBatch, LeaseCommitted, LeasedCreate, LeasedEntry};
pub use limits::Squash;
pub use load::{LoadRequest, Loaded, Loader, Staged, StagedSlice};
pub use lock::{LockRange, Locker};
pub use namespace::{DirEntry, NewNode, RenameResult, SetAttr, TimeSet};
pub use pool::redact_url;
pub use quota::{
    normalize_path, DirQuota, QuotaCheck, QuotaRow, QuotaTarget, SpaceLimit, SummaryRow,
};
pub use range::Copied;
pub use session::session_application_name;
pub use shard::{remove_shard_root, shard_of, ShardEntry, ShardLink, ShardRoot, SHARD_SHIFT};
pub use tier::TierSlice;
pub use version::VERSION_TEXT;
pub use volume::{FormatRequest, Statfs, VolumeInfo};

/// Connection to one volume's metadata database.
#[derive(Clone)]
pub struct Meta {
    pool: Pool,
    config: tokio_postgres::Config,
    /// TLS as META_URL asks for it (see `tls`).
    tls: Connector,
    /// No named prepared statements (META_URL's `pgbouncer=true`): each
    /// call is one unnamed statement with its parameters' types, which
    /// PgBouncer in transaction mode can send to any server connection.
    unnamed_statements: bool,
    /// The server incarnations this client's commits went to (shared by
    /// every pool made from this one).
    incarnations: Arc<Incarnations>,
    /// The session its connections name, when it changed (shared by every
    /// pool made from this one).
    named: Arc<pool::SessionName>,
    /// Closed while the mount has no session on this database yet (see
    /// `late`); None: always open.
    gate: Option<Arc<tokio::sync::watch::Sender<bool>>>,
    /// The jfs procedures this role may call, and those that only read.
    procedures: Arc<OnceLock<Procedures>>,
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
    /// The hot standby that serves reads this mount may answer from copies
    /// (`--meta-replica`, see `replica`).
    replica: Option<Arc<replica::Replica>>,
    /// Which of a thread's own connections this client's calls take.
    thread_slot: pool::ThreadSlot,
}

/// What a client learns of the jfs procedures when it connects.
#[derive(Debug, Default)]
pub struct Procedures {
    /// Those the role may execute (granted: `jfs.grant_client`).
    callable: HashSet<String>,
    /// Those that only read (not VOLATILE): retried even when the answer
    /// was lost.
    read_only: HashSet<String>,
}

/// How many times in a row the answer to a change may be lost (the server
/// went away with the call in flight, again and again) and what happened be
/// settled by asking: a replay starting over, a create or removal sent again,
/// a flush's commits. Past it, the call fails (EIO).
pub const MAX_ANSWERS_LOST: u32 = 3;

/// How long calls are retried while the database is unavailable, unless
/// told otherwise (a failover of a replicated PostgreSQL takes 5-30 s).
pub const DEFAULT_META_RETRY: Duration = Duration::from_secs(60);

/// Milliseconds since the Unix epoch, now (at least 1).
fn unix_ms() -> u64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    (since.as_millis() as u64).max(1)
}
