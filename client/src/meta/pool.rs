//! Connecting: META_URL (its password kept out of messages, PgBouncer's and TLS's options), the pool, and a connection of each FUSE thread's own.
use std::str::FromStr;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::tls::Connector;
use deadpool_postgres::Hook;
use deadpool_postgres::{HookError, Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};

use super::durability::Incarnations;
use super::durability::{Incarnation, INCARNATION_SQL};
use super::error::ConnectError;
use super::session_application_name;
use super::tls::TlsOptions;
use super::unix_ms;
use super::{Meta, Result, DEFAULT_META_RETRY};

/// The META_URL with its password replaced (in the user information and in
/// a `password` parameter), for messages and logs. As text, not through the
/// `url` crate: a URL with several hosts (`h1:5432,h2:5432`, as libpq takes
/// them) is no URL to it.
pub fn redact_url(meta_url: &str) -> String {
    let Some((scheme, rest)) = meta_url.split_once("://") else {
        return "<unparsable META_URL>".to_string();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    let authority = match authority.rsplit_once('@') {
        Some((user_info, hosts)) => match user_info.split_once(':') {
            Some((user, _password)) => format!("{user}:****@{hosts}"),
            None => authority.to_string(),
        },
        None => authority.to_string(),
    };
    let path = match path.split_once('?') {
        Some((path, query)) => {
            let query: Vec<String> = query
                .split('&')
                .map(|kv| match kv.split_once('=') {
                    Some(("password", _)) => "password=****".to_string(),
                    _ => kv.to_string(),
                })
                .collect();
            format!("{path}?{}", query.join("&"))
        }
        None => path.to_string(),
    };
    format!("{scheme}://{authority}{path}")
}

/// The META_URL option that turns named prepared statements off.
const POOLER_OPTION: &str = "pgbouncer";

/// `meta_url` without the `pgbouncer=true|false` option (which
/// tokio-postgres does not know), and whether it asked for true.
pub(super) fn split_pooler_option(meta_url: &str) -> (String, bool) {
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

/// Which of a thread's own connections a client takes (see
/// [`Meta::use_thread_connection`]).
/// Two per database of a mount (one per shard of its volume, the root's
/// first): its primary's, then its standby's that serves reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ThreadSlot(usize);

impl ThreadSlot {
    /// To the root database (the primary).
    pub(super) const PRIMARY: ThreadSlot = ThreadSlot(0);

    /// To the primary of the mount's `index`th database (0: the root).
    fn of_database(index: usize) -> ThreadSlot {
        ThreadSlot(2 * index)
    }

    /// To the standby that serves reads of this slot's database
    /// (`--meta-replica`).
    pub(super) fn replica(self) -> ThreadSlot {
        ThreadSlot(self.0 | 1)
    }
}

thread_local! {
    /// Connections of this thread's own, by [`ThreadSlot`].
    static THREAD_POOLS: std::cell::RefCell<Vec<Option<Pool>>> =
        const { std::cell::RefCell::new(Vec::new()) };
    /// When this thread last took each.
    static THREAD_LAST_USE: std::cell::RefCell<Vec<Option<Instant>>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// A thread's connection idle for longer is checked before it is used.
const IDLE_CHECK: Duration = Duration::from_secs(1);

/// A pool whose every new connection first notes the server incarnation it
/// reached, so that a commit sent on it is stamped with the right epoch.
/// The session a pool's connections name in their application_name
/// (jfs:SID), which changes when a mount registers again (its session was
/// ended as dead) or late (a shard out of reach when it started): the
/// connections made before are not used again, as the database takes the
/// name for the caller's session (the change log, leases).
#[derive(Default)]
pub(super) struct SessionName {
    /// The session named since `renamed_at` (0: the pool's own name).
    sid: std::sync::atomic::AtomicI64,
    /// When, in nanoseconds after [`RENAMES_SINCE`] (0: never; read on
    /// every connection taken from the pool, so no lock).
    renamed_at: AtomicU64,
}

/// What [`SessionName::renamed_at`] counts from.
static RENAMES_SINCE: std::sync::LazyLock<Instant> = std::sync::LazyLock::new(Instant::now);

/// `t` in nanoseconds after [`RENAMES_SINCE`], at least 1.
fn renames_clock(t: Instant) -> u64 {
    (t.saturating_duration_since(*RENAMES_SINCE).as_nanos() as u64).max(1)
}

impl SessionName {
    /// What a new connection is told to name, if anything.
    fn statement(&self) -> Option<String> {
        match self.sid.load(std::sync::atomic::Ordering::Acquire) {
            0 => None,
            sid => Some(format!(
                "SET application_name = '{}'",
                session_application_name(sid)
            )),
        }
    }

    /// Whether a connection made at `created` names an older session.
    fn outdated(&self, created: Instant) -> bool {
        match self.renamed_at.load(std::sync::atomic::Ordering::Acquire) {
            0 => false,
            at => renames_clock(created) < at,
        }
    }
}

pub(super) fn build_pool(
    config: &tokio_postgres::Config,
    tls: &Connector,
    max_connections: usize,
    (incarnations, named): (&Arc<Incarnations>, &Arc<SessionName>),
) -> std::result::Result<Pool, ConnectError> {
    // (its connections are made after the clock's start)
    std::sync::LazyLock::force(&RENAMES_SINCE);
    let observer = incarnations.clone();
    let naming = named.clone();
    let outdated = named.clone();
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
        .pre_recycle(Hook::sync_fn(move |_, metrics| {
            match outdated.outdated(metrics.created) {
                true => Err(HookError::Message("it names an older session".into())),
                false => Ok(()),
            }
        }))
        .post_create(Hook::async_fn(move |client, _| {
            let observer = observer.clone();
            let naming = naming.statement();
            Box::pin(async move {
                if let Some(naming) = naming {
                    client
                        .simple_query(&naming)
                        .await
                        .map_err(HookError::Backend)?;
                }
                let messages = client
                    .simple_query(INCARNATION_SQL)
                    .await
                    .map_err(HookError::Backend)?;
                let row = messages.iter().find_map(|m| match m {
                    tokio_postgres::SimpleQueryMessage::Row(r) => Some(r),
                    _ => None,
                });
                let text = |i: usize| row.and_then(|r| r.get(i)).unwrap_or_default().to_string();
                observer.connection_made();
                observer.observe(Incarnation {
                    id: text(0),
                    timeline: text(1),
                    clean_start: text(2) == "true",
                });
                Ok(())
            })
        }))
        .build()
        .map_err(|e| ConnectError::Pool(e.to_string()))
}

impl Meta {
    /// Connects to `meta_url` (`postgres://user:pass@host:port/db`; a unix
    /// socket host works as `postgres://user@%2Frun%2Fpostgresql/db` or
    /// `?host=/run/postgresql`). The password may also come from
    /// `META_PASSWORD`, which keeps it out of the process list.
    pub async fn connect(
        meta_url: &str,
        max_connections: usize,
    ) -> std::result::Result<Meta, ConnectError> {
        let meta = Meta::pool(meta_url, max_connections)?;
        match meta.extension_version(meta_url).await? {
            Some(version) => meta.require_version(meta_url, &version)?,
            None => {
                return Err(ConnectError::NoExtension {
                    url: redact_url(meta_url),
                })
            }
        }
        meta.load_procedures().await?;
        Ok(meta)
    }

    /// Connects for `jfs format`: installs the extension when it is missing
    /// and the role may create it.
    pub async fn connect_for_format(meta_url: &str) -> std::result::Result<Meta, ConnectError> {
        let meta = Meta::pool(meta_url, 2)?;
        if let Some(version) = meta.extension_version(meta_url).await? {
            meta.require_version(meta_url, &version)?;
            return Ok(meta);
        }
        let client = meta
            .pool
            .get()
            .await
            .map_err(|e| ConnectError::unreachable(meta_url, e))?;
        let cannot_create = |cause: String| ConnectError::CannotCreateExtension {
            url: redact_url(meta_url),
            cause,
        };
        client
            .batch_execute("SET client_min_messages = warning; CREATE EXTENSION IF NOT EXISTS jfs")
            .await
            .map_err(|e| cannot_create(e.to_string()))?;
        drop(client);
        match meta.extension_version(meta_url).await? {
            Some(version) => meta.require_version(meta_url, &version)?,
            None => return Err(cannot_create("it left no extension".into())),
        }
        Ok(meta)
    }

    pub(super) fn pool(
        meta_url: &str,
        max_connections: usize,
    ) -> std::result::Result<Meta, ConnectError> {
        let (meta_url, unnamed_statements) = split_pooler_option(meta_url);
        let (meta_url, tls) = TlsOptions::split(&meta_url);
        let mut config =
            tokio_postgres::Config::from_str(&meta_url).map_err(|e| ConnectError::BadUrl {
                url: redact_url(&meta_url),
                reason: e.to_string(),
            })?;
        let sockets_only = config.get_hostaddrs().is_empty()
            && (config.get_hosts().iter())
                .all(|h| matches!(h, tokio_postgres::config::Host::Unix(_)));
        let (ssl_mode, tls) = tls.connector(sockets_only).map_err(|e| ConnectError::Tls {
            url: redact_url(&meta_url),
            reason: e.to_string(),
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
        let named = Arc::<SessionName>::default();
        let pool = build_pool(&config, &tls, max_connections, (&incarnations, &named))?;
        Ok(Meta {
            pool,
            config,
            tls,
            unnamed_statements,
            incarnations,
            named,
            gate: None,
            procedures: Arc::default(),
            retry_for: DEFAULT_META_RETRY,
            reached_since_ms: Arc::new(AtomicU64::new(unix_ms())),
            replaying: Arc::default(),
            in_replay: false,
            replica: None,
            thread_slot: ThreadSlot::PRIMARY,
        })
    }

    /// The same database with connections that name session `sid` (their
    /// application_name, see [`session_application_name`]): the change log
    /// records what they change as that session's, and pg_stat_activity
    /// shows which mount a backend serves. The old pool's connections close.
    pub fn for_session(&self, sid: i64) -> std::result::Result<Meta, ConnectError> {
        let mut config = self.config.clone();
        config.application_name(session_application_name(sid));
        let pool = build_pool(
            &config,
            &self.tls,
            self.pool.status().max_size,
            (&self.incarnations, &self.named),
        )?;
        Ok(Meta {
            pool,
            config,
            ..self.clone()
        })
    }

    /// This client as the one that tells commits again (same pool).
    pub(super) fn replayer(&self) -> Meta {
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
    /// connection besides the shared pool (and one to the standby that
    /// serves reads, if any).
    pub fn use_thread_connection(&self) -> std::result::Result<(), ConnectError> {
        let pool = build_pool(
            &self.config,
            &self.tls,
            1,
            (&self.incarnations, &self.named),
        )?;
        THREAD_POOLS.with(|p| {
            let mut pools = p.borrow_mut();
            let slot = self.thread_slot.0;
            if pools.len() <= slot {
                pools.resize(slot + 1, None);
            }
            pools[slot] = Some(pool);
        });
        match &self.replica {
            Some(r) => r.meta().use_thread_connection(),
            None => Ok(()),
        }
    }

    /// Makes the connections of this client (and of every clone, and the
    /// threads' own) name session `sid` from now on: those made before are
    /// closed instead of used again. For a session registered anew.
    pub fn rename_session(&self, sid: i64) {
        self.named
            .sid
            .store(sid, std::sync::atomic::Ordering::Release);
        self.named.renamed_at.store(
            renames_clock(Instant::now()),
            std::sync::atomic::Ordering::Release,
        );
        self.pool.retain(|_, _| false);
    }

    /// This client as the mount's `index`th database (one per shard of
    /// its volume, the root's 0): its calls take that database's own
    /// connection of each FUSE thread, not another database's.
    pub fn as_database_of_mount(mut self, index: usize) -> Meta {
        self.thread_slot = ThreadSlot::of_database(index);
        self
    }

    /// A connection: this thread's own if it has one, else one from the pool.
    pub(super) async fn client(&self) -> Result<deadpool_postgres::Object> {
        let slot = self.thread_slot.0;
        let own = THREAD_POOLS.with(|p| p.borrow().get(slot).cloned().flatten());
        let Some(pool) = own else {
            return Ok(self.pool.get().await?);
        };
        // A thread's connection is driven only while its thread runs a
        // request, so it learns that the server closed it (a restart) only
        // when it is used. One that sat idle is asked first (an empty
        // query, harmless to repeat) and replaced if it is gone: a
        // statement is then never sent on a dead connection.
        let idle = THREAD_LAST_USE.with(|t| {
            let mut last = t.borrow_mut();
            if last.len() <= slot {
                last.resize(slot + 1, None);
            }
            last[slot].replace(Instant::now())
        });
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
    fn a_url_with_several_hosts_is_redacted_too() {
        assert_eq!(
            redact_url("postgres://jfs:s3cret@h1:5432,h2:5433/vol?target_session_attrs=read-write"),
            "postgres://jfs:****@h1:5432,h2:5433/vol?target_session_attrs=read-write"
        );
        assert_eq!(
            redact_url("postgres://jfs@h1,h2/vol?password=s3cret&sslmode=require"),
            "postgres://jfs@h1,h2/vol?password=****&sslmode=require"
        );
        assert_eq!(redact_url("h1,h2"), "<unparsable META_URL>");
    }

    #[tokio::test]
    async fn connecting_says_why_it_could_not_by_kind() {
        let bad = Meta::connect("postgres://u:secret@h:notaport/db", 1).await;
        match bad {
            Err(ConnectError::BadUrl { url, .. }) => assert!(!url.contains("secret"), "{url}"),
            other => panic!("a bad URL gave {:?}", other.err()),
        }
        // a port nobody listens on (bound here, then closed)
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("postgres://u:secret@127.0.0.1:{port}/db");
        match Meta::connect(&url, 1).await {
            Err(e @ ConnectError::Unreachable { .. }) => {
                let text = e.to_string();
                assert!(
                    text.starts_with("cannot connect to the metadata database"),
                    "{text}"
                );
                assert!(!text.contains("secret"), "{text}");
            }
            other => panic!("a closed port gave {:?}", other.err()),
        }
    }
}
