//! Background work of a mount: session heartbeats, cleanup of dead sessions,
//! purging expired trash, deleting the objects of freed slices (the delslice
//! queue), compacting fragmented chunks, and metadata backups; the
//! sessions' and the upkeep's on each shard of the volume.
use std::sync::Arc;
use std::time::Duration;

use super::backup::backup_if_due;
use crate::metrics::METRICS;
use crate::ns::parts::Part;
use crate::vfs::{Compacted, Vfs};

/// How often and how patiently the background jobs run.
#[derive(Debug, Clone)]
pub struct BackgroundConfig {
    pub heartbeat: Duration,
    /// A session silent for this long is dead; any mount cleans it up.
    pub session_timeout: Duration,
    /// How often the delslice queue is drained.
    pub gc_interval: Duration,
    /// Objects of freed slices are kept at least this long.
    pub gc_delay: Duration,
    /// How often some mount writes a metadata backup (zero: never).
    pub backup_meta: Duration,
    /// Metadata backups kept in the object store.
    pub backup_keep: usize,
    /// Writes left open without fsync are committed after this long (zero:
    /// only at fsync and close).
    pub commit_after: Duration,
}

/// How often a mount of (or reading from) a hot standby reads its replication lag.
const REPLICA_LAG_POLL: Duration = Duration::from_secs(2);

/// The longest a mount waits between asking whether a backup is due.
const BACKUP_POLL: Duration = Duration::from_secs(60);

/// Starts the jobs; they run until the runtime shuts down.
pub fn spawn(vfs: Arc<Vfs>, cfg: BackgroundConfig, host: String, info: String) {
    // the committer: files whose writes waited --commit-after, and every
    // file when the write buffers are full
    let v = vfs.clone();
    let every =
        (!cfg.commit_after.is_zero()).then(|| (cfg.commit_after / 2).min(Duration::from_secs(1)));
    let age = cfg.commit_after;
    tokio::spawn(async move {
        loop {
            let all = v.commit_due(every).await;
            v.commit_waiting_writes(if all { Duration::ZERO } else { age })
                .await;
        }
    });
    // a mount of a hot standby, or one that reads from one, reports how
    // far behind it reads
    let standby = match vfs.has_session() {
        false => Some(vfs.ns.meta_of_mount().clone()),
        true => vfs.ns.meta_of_mount().replica(),
    };
    if let Some(standby) = standby {
        tokio::spawn(async move {
            loop {
                match standby.replay_lag().await {
                    Ok(lag) => METRICS.replica_lag_seconds.set(lag.unwrap_or(0.0)),
                    Err(e) => tracing::warn!("reading the standby's replication lag: {e}"),
                }
                tokio::time::sleep(REPLICA_LAG_POLL).await;
            }
        });
    }
    // the unlinks answered under directory leases, every window
    let ns = vfs.ns.clone();
    vfs.ns.enable_leases();
    tokio::spawn(async move {
        loop {
            ns.lease_held().await;
            tokio::time::sleep(crate::vfs::LEASE_WINDOW).await;
            ns.commit_leases().await;
        }
    });
    if vfs.has_session() {
        for index in 0..vfs.ns.parts().all().len() {
            tokio::spawn(heartbeats(
                vfs.clone(),
                index,
                cfg.clone(),
                host.clone(),
                info.clone(),
            ));
        }
    }
    if let Some(mut queue) = vfs.take_compaction_queue() {
        let v = vfs.clone();
        tokio::spawn(async move {
            while let Some((inode, chunk)) = queue.recv().await {
                match v.compact(inode, chunk).await {
                    Ok(Compacted::Done { slices }) => tracing::debug!(
                        "inode {inode} chunk {chunk}: {slices} slices compacted into one"
                    ),
                    Ok(_) => {}
                    Err(e) => tracing::warn!(
                        "inode {inode} chunk {chunk}: compaction failed: {}",
                        std::io::Error::from_raw_os_error(e)
                    ),
                }
            }
        });
    }
    if !cfg.backup_meta.is_zero() && !vfs.config.read_only {
        let v = vfs.clone();
        let (interval, keep) = (cfg.backup_meta, cfg.backup_keep);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(interval.min(BACKUP_POLL)).await;
                match backup_if_due(&v, interval, keep).await {
                    Ok(_) => {}
                    Err(e) => tracing::warn!("metadata backup: {e:#}"),
                }
            }
        });
    }
    // (a read-only mount, of a restored copy say, changes nothing: no
    // sessions ended, no objects deleted)
    for index in 0..vfs.ns.parts().all().len() {
        tokio::spawn(session_cleanup(vfs.clone(), index, cfg.clone()));
    }
    tokio::spawn(async move {
        let mut low_disk_warned: Option<std::time::Instant> = None;
        loop {
            tokio::time::sleep(cfg.gc_interval).await;
            if let Err(e) = vfs.reload_tier_classes().await {
                tracing::warn!("reading the tier classes: {e}");
            }
            if vfs.volume.trash_days > 0 && !vfs.config.read_only {
                match vfs.ns.meta_of_mount().trash_purge(10_000).await {
                    Ok(0) => {}
                    Ok(n) => {
                        METRICS.trash_purged.inc_by(n);
                        tracing::info!("purged {n} expired trash entries")
                    }
                    Err(e) => tracing::warn!("purging the trash: {e}"),
                }
            }
            for part in vfs.ns.parts().all() {
                if !vfs.config.read_only {
                    maintain(&vfs, part, cfg.gc_delay).await;
                }
            }
            if !vfs.config.read_only {
                warn_if_store_disk_low(&vfs, &mut low_disk_warned).await;
            }
        }
    });
}

/// Heartbeats of the mount's session on part `index` of its databases
/// (one task per shard: a shard out of reach delays only its own); a
/// session ended meanwhile is registered again.
async fn heartbeats(v: Arc<Vfs>, index: usize, c: BackgroundConfig, host: String, info: String) {
    let part = &v.ns.parts().all()[index];
    // (a shard out of reach when the mount started: reached first)
    super::late::reach(part, &host, &info, c.session_timeout).await;
    let mut state_losses = part.meta.state_losses();
    loop {
        tokio::time::sleep(c.heartbeat).await;
        if part.meta.state_losses() != state_losses {
            state_losses = part.meta.state_losses();
            v.session_lost(
                part,
                "may have been erased by a crash of the metadata server",
            )
            .await;
        }
        match part.meta.session_heartbeat(part.sid()).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(
                    "session {} on shard {} was cleaned up as dead (no heartbeat for {:?}); \
                     registering again",
                    part.sid(),
                    part.number,
                    c.session_timeout
                );
                let registered = part
                    .meta
                    .session_register(&host, std::process::id() as i32, &info, c.session_timeout)
                    .await;
                match registered {
                    Ok(sid) => {
                        part.set_sid(sid);
                        v.session_lost(part, "went with the session that was ended")
                            .await;
                    }
                    Err(e) => tracing::error!("registering the session again: {e}"),
                }
            }
            Err(e) => tracing::warn!("heartbeat to shard {}: {e}", part.number),
        }
    }
}

/// Ends other clients' dead sessions on part `index` of the mount's
/// databases, every half session timeout.
async fn session_cleanup(v: Arc<Vfs>, index: usize, c: BackgroundConfig) {
    let part = &v.ns.parts().all()[index];
    // (a shard not reached yet: once it is)
    part.meta.opened().await;
    loop {
        tokio::time::sleep(c.session_timeout / 2).await;
        // a read-only mount (of a restored copy, say) changes nothing
        if v.config.read_only {
            continue;
        }
        // after an outage every session looks dead until the live ones
        // heartbeat again: only a mount that has reached the database
        // for a whole timeout judges the others
        if part
            .meta
            .reached_for()
            .is_none_or(|d| d < c.session_timeout)
        {
            tracing::debug!("session cleanup waits: the database was out of reach lately");
            continue;
        }
        match part.meta.session_cleanup(c.session_timeout.as_secs()).await {
            Ok(0) => {}
            Ok(n) => {
                METRICS.sessions_cleaned.inc_by(n as u64);
                tracing::info!("cleaned up {n} dead session(s) on shard {}", part.number)
            }
            Err(e) => tracing::warn!("session cleanup on shard {}: {e}", part.number),
        }
    }
}

/// One round of a shard's upkeep: files removed while other mounts were
/// live freed, the change log pruned, the objects of freed data deleted.
async fn maintain(vfs: &Vfs, part: &Part, gc_delay: Duration) {
    match part.meta.free_unlinked(UNLINKED_FREE_STEP).await {
        Ok(0) => {}
        Ok(n) => {
            METRICS.unlinked_freed.inc_by(n as u64);
            tracing::debug!("freed {n} files removed while other mounts were live")
        }
        Err(e) => tracing::warn!("freeing removed files on shard {}: {e}", part.number),
    }
    match part.meta.changelog_prune(CHANGELOG_PRUNE_STEP).await {
        Ok(0) => {}
        Ok(n) => tracing::debug!("pruned {n} change-log rows"),
        Err(e) => tracing::warn!("pruning the change log of shard {}: {e}", part.number),
    }
    let store = vfs.store().as_ref();
    let drained = crate::volume::gc::drain_delslices(&part.meta, store, &vfs.volume, gc_delay);
    if let Err(e) = drained.await {
        tracing::warn!("deleting freed slices of shard {}: {e}", part.number);
    }
}

/// The disk under a file store is low when less than this is free, or
/// less than [`LOW_DISK_SHARE`] of it.
const LOW_DISK_BYTES: u64 = 1 << 30;
const LOW_DISK_SHARE: u64 = 20;
/// A low disk is said again at most this often.
const LOW_DISK_WARN_EVERY: Duration = Duration::from_secs(600);

/// Says in the log, before writes fail for want of room, that the disk
/// under a file store is nearly full, and how much of it freed data
/// waiting for deletion holds (at most every [`LOW_DISK_WARN_EVERY`]).
async fn warn_if_store_disk_low(vfs: &Vfs, warned: &mut Option<std::time::Instant>) {
    let Some((free, total)) = vfs.store().disk_space() else {
        return;
    };
    if free >= LOW_DISK_BYTES.max(total / LOW_DISK_SHARE)
        || warned.is_some_and(|t| t.elapsed() < LOW_DISK_WARN_EVERY)
    {
        return;
    }
    *warned = Some(std::time::Instant::now());
    let waiting = match vfs.ns.meta_of_mount().delete_queue().await {
        Ok(Some(q)) => format!(
            "; {} MiB of it is freed data waiting for deletion (jfs config --delete-queue-cap \
             deletes it sooner)",
            q.bytes >> 20
        ),
        _ => String::new(),
    };
    tracing::warn!(
        "the disk under the object store {} has {} MiB free of {} MiB: writes fail with ENOSPC \
         when it is full{waiting}",
        vfs.store().describe(),
        free >> 20,
        total >> 20
    );
}

/// Removed files kept for other mounts freed per round (each mount, every gc interval).
const UNLINKED_FREE_STEP: i32 = 10_000;

/// Change-log rows pruned per round (each mount, every gc interval).
const CHANGELOG_PRUNE_STEP: i32 = 100_000;
