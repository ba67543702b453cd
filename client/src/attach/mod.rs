//! Attaching a client to a volume: the limits its role is granted, a
//! session registered, a `Vfs` started (tier classes read, the change log
//! followed) and its background work. A FUSE mount and a process that uses
//! the volume without one (`crate::direct`) attach alike.
use std::sync::Arc;
use std::time::Duration;

use crate::meta::{redact_url, Meta, MetaError, Squash};
use crate::ns::changes;
use crate::ns::parts::{Part, Parts};
pub mod background;
mod backup;
mod late;

use crate::vfs::{Vfs, NO_SESSION};
use background::BackgroundConfig;

/// Seconds between session heartbeats.
pub const DEFAULT_HEARTBEAT_SECS: u64 = 12;
/// Seconds without a heartbeat after which other clients end a session.
pub const DEFAULT_SESSION_TIMEOUT_SECS: u64 = 300;
/// Seconds between reads of the change log.
pub const DEFAULT_CHANGES_POLL_SECS: f64 = 0.05;
/// Seconds between runs that delete the objects of deleted data.
pub const DEFAULT_GC_INTERVAL_SECS: u64 = 10;
/// Seconds the objects of deleted data are kept before deletion.
pub const DEFAULT_GC_DELAY_SECS: u64 = 3600;
/// Seconds after which writes left open without fsync are committed.
pub const DEFAULT_COMMIT_AFTER_SECS: f64 = 5.0;
/// MiB of memory for uploads in flight and recently read blocks.
pub const DEFAULT_BUFFER_MIB: usize = 300;
/// Connections to PostgreSQL.
pub const DEFAULT_MAX_CONNECTIONS: usize = 16;

/// The longest session timeout PostgreSQL keeps (`jfs.session_open`
/// clamps what a session declares to it).
pub const MAX_SESSION_TIMEOUT_SECS: u64 = 3600;

/// The session timeout of `secs` seconds (at least 2 s, at most an hour).
pub fn session_timeout(secs: u64) -> Duration {
    Duration::from_secs(secs.clamp(2, MAX_SESSION_TIMEOUT_SECS))
}

/// This machine's host name, as sessions record it.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

/// The inode of directory `path` of the volume (`--subdir`), whose root
/// database `meta` is (at `meta_url`): followed across shards.
pub async fn subdir_inode(
    meta: &Meta,
    meta_url: &str,
    volume: &str,
    path: &str,
) -> anyhow::Result<u64> {
    let shards = crate::volume::shards::ShardSet::open(Arc::new(meta.clone()), meta_url, 2).await?;
    let mut inode = 1;
    for part in path.split('/').filter(|p| !p.is_empty() && *p != ".") {
        let attr = match shards.lookup(inode, part.as_bytes()).await {
            Ok(attr) => attr,
            Err(e) => match e.downcast_ref::<MetaError>() {
                Some(MetaError::Errno(errno)) => anyhow::bail!(
                    "--subdir {path}: {part:?} in volume {volume}: {}",
                    std::io::Error::from_raw_os_error(*errno)
                ),
                _ => return Err(e),
            },
        };
        if attr.kind != crate::meta::NodeType::Dir {
            anyhow::bail!("--subdir {path}: {part:?} in volume {volume} is not a directory");
        }
        inode = attr.inode;
    }
    Ok(inode)
}

/// What a client applies of its own options and of its role's limits
/// (`jfs.grant_client`, which the database enforces anyway): read-only if
/// either says so; the role's squash over the client's own (`asked`).
pub async fn limits_applied(
    meta: &Meta,
    read_only: bool,
    asked: Option<Squash>,
) -> anyhow::Result<(bool, Option<Squash>)> {
    let role = meta.client_limits().await?;
    if role.read_only && !read_only {
        tracing::info!("this role is granted read-only (jfs.grant_client): attaching read-only");
    }
    let squash = match (role.squash, asked) {
        (Some(theirs), Some(mine)) if theirs != mine => {
            tracing::warn!("this role is granted {theirs} (jfs.grant_client): applied, not {mine}");
            Some(theirs)
        }
        (theirs, mine) => theirs.or(mine),
    };
    if let Some(s) = squash {
        tracing::info!("requests are squashed: {s}");
    }
    Ok((read_only || role.read_only, squash))
}

/// Registers the session of a client described by `info` (a JSON object,
/// what `jfs status` shows), unless it reads a hot standby (`standby`),
/// which keeps no trace of its clients: the session's `Meta` and id. The
/// last step that can fail comes before the session exists, or takes it
/// away again: a failed attach leaves no session row.
pub async fn register(
    meta: Meta,
    standby: bool,
    info: &str,
    timeout: Duration,
) -> anyhow::Result<(Meta, i64)> {
    if standby {
        return Ok((meta, NO_SESSION));
    }
    let sid = meta
        .session_register(&hostname(), std::process::id() as i32, info, timeout)
        .await?;
    match meta.for_session(sid) {
        Ok(m) => Ok((m, sid)),
        Err(e) => {
            let _ = meta.session_close(sid).await;
            Err(e.into())
        }
    }
}

/// The databases of the volume whose root database `root` is (reached at
/// `root_url`, with the mount's session `sid` on it): the root's and one
/// per shard of its map, each connected with the root URL's credentials
/// and given a session of this client (none when it reads a hot standby),
/// all as `root` is set up (`retry`, `max_connections`). A volume without
/// shards has its root only. On failure the sessions made are closed.
pub async fn register_shards(
    root: Meta,
    root_url: &str,
    sid: i64,
    info: &str,
    timeout: Duration,
    (retry, max_connections): (Duration, usize),
) -> anyhow::Result<Parts> {
    let shards = async {
        let number = root.shard_number().await?;
        anyhow::ensure!(
            number == 0,
            "{} is shard {number} of its volume: give the volume's root database (jfs shard \
             list there names it)",
            redact_url(root_url)
        );
        Ok(root.shards().await?)
    };
    let shards = match shards.await {
        Ok(shards) => shards,
        Err(e) => {
            if sid != NO_SESSION {
                let _ = root.session_close(sid).await;
            }
            return Err(e);
        }
    };
    let mut parts = vec![Part::new(0, root, sid)];
    for (index, shard) in shards.iter().enumerate() {
        let url = crate::volume::shards::with_credentials(&shard.url, root_url);
        match connect_shard(
            &url,
            shard.number,
            sid,
            info,
            timeout,
            retry,
            max_connections,
        )
        .await
        {
            Ok((meta, shard_sid)) => parts.push(Part::new(
                shard.number,
                meta.as_database_of_mount(index + 1),
                shard_sid,
            )),
            // (a shard down now stalls its subtrees until it is reached,
            // as one that goes down later does)
            Err(e) if sid != NO_SESSION && crate::meta::out_of_reach(&e) => {
                tracing::warn!(
                    "shard {} of the volume at {} is out of reach ({e:#}): mounting without it; \
                     its subtrees wait for it (up to --meta-retry per call) and it is reached \
                     in the background",
                    shard.number,
                    redact_url(&url)
                );
                let meta = Meta::pending(&url, max_connections)?;
                let mut meta = meta.as_database_of_mount(index + 1);
                meta.set_retry_for(retry);
                parts.push(Part::late(shard.number, meta, url));
            }
            Err(e) => {
                for part in parts.iter().filter(|p| p.sid() != NO_SESSION) {
                    let _ = part.meta.session_close(part.sid()).await;
                }
                return Err(e.context(format!(
                    "shard {} of the volume at {}",
                    shard.number,
                    redact_url(&url)
                )));
            }
        }
    }
    Ok(Parts::new(parts))
}

/// Shard `number` at `url`, checked to be that shard, with a session of
/// this client (unless the root's is none: a hot standby's mount).
async fn connect_shard(
    url: &str,
    number: u16,
    root_sid: i64,
    info: &str,
    timeout: Duration,
    retry: Duration,
    max_connections: usize,
) -> anyhow::Result<(Meta, i64)> {
    let mut meta = Meta::connect(url, max_connections).await?;
    meta.set_retry_for(retry);
    meta.require_client_grants().await?;
    let says = meta.shard_number().await?;
    anyhow::ensure!(
        says == number,
        "it is shard {says}, not shard {number} as the root's map says"
    );
    register(meta, root_sid == NO_SESSION, info, timeout).await
}

/// Starts `vfs`: reads the tier classes and, with a `changes_poll` interval
/// (zero: never), follows the change log. On failure the session is closed.
pub async fn start(vfs: &Arc<Vfs>, changes_poll: Duration) -> anyhow::Result<()> {
    let mut started = vfs.reload_tier_classes().await;
    if started.is_ok() && !changes_poll.is_zero() {
        started = changes::spawn(vfs.ns.clone(), changes_poll).await;
    }
    if let Err(e) = started {
        let _ = vfs.close_session().await;
        return Err(e.into());
    }
    Ok(())
}

/// Starts `vfs`'s background work (in the current runtime) as `cfg` says,
/// with heartbeats at least three times within the session's timeout
/// (other clients end it after that much silence).
pub fn spawn_background(vfs: Arc<Vfs>, mut cfg: BackgroundConfig, info: String) {
    cfg.heartbeat = cfg
        .heartbeat
        .max(Duration::from_secs(1))
        .min(cfg.session_timeout / 3);
    cfg.gc_interval = cfg.gc_interval.max(Duration::from_secs(1));
    background::spawn(vfs, cfg, hostname(), info);
}
