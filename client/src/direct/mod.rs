//! A volume used without FUSE, by path: what the Python package calls. It
//! attaches as a mount does (a session, the change log followed, heartbeats,
//! commits and gc in the background) and serves one identity, whose every
//! request the `Vfs` checks by the permission bits (no kernel checks them
//! here). Paths are relative to the volume's root (or `subdir`); symlinks
//! are followed inside the volume, absolute ones from its root.
mod attrs;
mod files;
mod names;
mod paths;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::attach::background::BackgroundConfig;
use crate::attach::{self, session_timeout};
use crate::object;
use crate::vfs::{Caller, Vfs, VfsConfig, Who};
use crate::volume::{open_volume, BucketCheck, OpenVolume};

/// The result of a request: a value, or the errno it failed with.
pub type DirectResult<T> = Result<T, i32>;

/// How a direct client attaches; the defaults are a mount's.
#[derive(Debug, Clone)]
pub struct DirectOptions {
    pub read_only: bool,
    /// The directory of the volume that is this client's root.
    pub subdir: Option<String>,
    pub max_connections: usize,
    /// MiB of memory for uploads in flight and recently read blocks.
    pub buffer_mib: usize,
    /// A local disk cache of blocks, and the MiB it may hold.
    pub cache_dir: Option<PathBuf>,
    pub cache_mib: u64,
    /// How often the change log is read (zero: never).
    pub changes_poll: Duration,
    pub commit_after: Duration,
    pub heartbeat: Duration,
    pub session_timeout: Duration,
    pub meta_retry: Duration,
    /// The identity requests act as, and the umask of what they make.
    pub uid: u32,
    pub gid: u32,
    /// Its supplementary groups; None: the process's own when `uid` and
    /// `gid` are the process's, else none.
    pub groups: Option<Vec<u32>>,
    pub umask: u32,
    /// What `jfs status` shows of this client (merged into its session's info).
    pub describe: String,
}

impl Default for DirectOptions {
    fn default() -> DirectOptions {
        DirectOptions {
            read_only: false,
            subdir: None,
            max_connections: attach::DEFAULT_MAX_CONNECTIONS,
            buffer_mib: attach::DEFAULT_BUFFER_MIB,
            cache_dir: None,
            cache_mib: 10240,
            changes_poll: Duration::from_secs_f64(attach::DEFAULT_CHANGES_POLL_SECS),
            commit_after: Duration::from_secs_f64(attach::DEFAULT_COMMIT_AFTER_SECS),
            heartbeat: Duration::from_secs(attach::DEFAULT_HEARTBEAT_SECS),
            session_timeout: session_timeout(attach::DEFAULT_SESSION_TIMEOUT_SECS),
            meta_retry: crate::meta::DEFAULT_META_RETRY,
            uid: nix::unistd::geteuid().as_raw(),
            gid: nix::unistd::getegid().as_raw(),
            groups: None,
            umask: 0o022,
            describe: "direct".to_string(),
        }
    }
}

/// What `open` does (the O_* flags a Python `os.open` takes).
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenFlags {
    pub read: bool,
    pub write: bool,
    pub create: bool,
    pub exclusive: bool,
    pub truncate: bool,
}

impl OpenFlags {
    /// The flags of `os.open`-style `flags` (O_ACCMODE, O_CREAT, O_EXCL, O_TRUNC).
    pub fn of(flags: i32) -> OpenFlags {
        let access = flags & libc::O_ACCMODE;
        OpenFlags {
            read: access != libc::O_WRONLY,
            write: access != libc::O_RDONLY,
            create: flags & libc::O_CREAT != 0,
            exclusive: flags & libc::O_EXCL != 0,
            truncate: flags & libc::O_TRUNC != 0,
        }
    }
}

/// A volume attached to by this process.
pub struct Direct {
    vfs: Arc<Vfs>,
    who: Who,
    umask: u32,
    /// What each handle this client opened is of and may do.
    handles: std::sync::Mutex<std::collections::HashMap<u64, Opened>>,
    /// An entry of the root that paths reach by the inode this client
    /// checked, not by its name (see [`Direct::pin`]).
    pinned: std::sync::OnceLock<(Vec<u8>, u64)>,
}

/// An open handle: its file and how it was opened.
#[derive(Debug, Clone, Copy)]
struct Opened {
    inode: u64,
    read: bool,
    write: bool,
}

impl Direct {
    /// Attaches to the volume of `meta_url`: call it inside the runtime
    /// that is to run the client's background work.
    pub async fn attach(meta_url: &str, o: &DirectOptions) -> anyhow::Result<Direct> {
        let OpenVolume {
            mut meta,
            volume,
            store,
            ..
        } = open_volume(meta_url, o.max_connections, BucketCheck::WhenReachable).await?;
        meta.set_retry_for(o.meta_retry);
        object::set_retries(object::DEFAULT_OBJECT_RETRY, object::DEFAULT_OBJECT_TIMEOUT);
        meta.require_client_grants().await?;
        let (read_only, squash) = attach::limits_applied(&meta, o.read_only, None).await?;
        let standby = meta.in_recovery().await?;
        anyhow::ensure!(
            !standby || read_only,
            "{} is a hot standby, which takes no writes: open it read-only",
            crate::meta::redact_url(meta_url)
        );
        let root = match &o.subdir {
            Some(path) => attach::subdir_inode(&meta, meta_url, &volume.name, path).await?,
            None => 1,
        };
        let disk_cache = match &o.cache_dir {
            Some(dir) => Some(Arc::new(object::DiskCache::open(
                dir,
                o.cache_mib << 20,
                0.1,
            )?)),
            None => None,
        };
        let info = serde_json::json!({
            "client": o.describe,
            "version": env!("CARGO_PKG_VERSION"),
        })
        .to_string();
        let (meta, sid) = attach::register(meta, standby, &info, o.session_timeout).await?;
        let parts = attach::register_shards(
            meta,
            meta_url,
            sid,
            &info,
            o.session_timeout,
            (o.meta_retry, o.max_connections),
        )
        .await?;
        let config = VfsConfig {
            root,
            attr_ttl: Duration::from_secs(30),
            entry_ttl: Duration::from_secs(30),
            dir_entry_ttl: Duration::from_secs(30),
            follow_changes: !o.changes_poll.is_zero(),
            buffer_size: o.buffer_mib << 20,
            read_only,
            squash,
            disk_cache,
            compact_at: crate::vfs::COMPACT_AT,
            lookup_ahead: crate::vfs::LOOKUP_AHEAD,
            defer_attrs: !o.commit_after.is_zero(),
            atime: crate::vfs::AtimeMode::Noatime,
            // (the gateway is a direct client: it makes it)
            reserve_gateway_dir: false,
        };
        let vfs = Vfs::new(parts, store, volume, config);
        attach::start(&vfs, o.changes_poll).await?;
        attach::spawn_background(
            vfs.clone(),
            BackgroundConfig {
                heartbeat: o.heartbeat,
                session_timeout: o.session_timeout,
                gc_interval: Duration::from_secs(attach::DEFAULT_GC_INTERVAL_SECS),
                gc_delay: Duration::from_secs(attach::DEFAULT_GC_DELAY_SECS),
                backup_meta: Duration::ZERO,
                backup_keep: 0,
                commit_after: o.commit_after,
            },
            info,
        );
        // no kernel checks the permission bits here: the Vfs does, always
        // (with the ACLs, and the groups the kernel would use)
        let base = Who::of(squash, o.uid, o.gid);
        let groups = match &o.groups {
            _ if base.squashed => None,
            Some(given) => Some(given.clone()),
            None => process_groups(o.uid, o.gid),
        };
        let who = Who {
            squashed: true,
            groups: groups.map(Into::into),
            ..base
        };
        Ok(Direct {
            vfs,
            who,
            umask: o.umask & 0o777,
            handles: Default::default(),
            pinned: Default::default(),
        })
    }

    /// Commits what is pending and closes the session.
    pub async fn close(&self) {
        self.vfs.flush_all().await;
        if let Err(e) = self.vfs.close_session().await {
            tracing::warn!("closing session {}: {e}", self.vfs.sid());
        }
    }

    /// The user requests act as (what they make is theirs).
    pub fn uid(&self) -> u32 {
        self.who.uid
    }

    /// Makes paths through entry `name` of the root reach directory
    /// `inode`, whatever that name holds later (once; the gateway pins its
    /// own directory, which a local user could otherwise move aside and
    /// replace with one of theirs). A pinned node that is gone is ENOENT.
    pub fn pin(&self, name: &[u8], inode: u64) {
        let _ = self.pinned.set((name.to_vec(), inode));
    }

    /// The shards of the volume (0 alone: none).
    pub fn shards(&self) -> Vec<u16> {
        self.vfs.shard_numbers()
    }

    /// The session this client registered.
    pub fn session(&self) -> i64 {
        self.vfs.sid()
    }

    fn caller(&self) -> Caller {
        Caller {
            uid: self.who.uid,
            gid: self.who.gid,
            pid: std::process::id(),
        }
    }
}

/// The process's supplementary groups if `uid` and `gid` are its own
/// effective ids (a process acting as another user has none of them).
fn process_groups(uid: u32, gid: u32) -> Option<Vec<u32>> {
    use nix::unistd::{getegid, geteuid, getgroups};
    if (uid, gid) != (geteuid().as_raw(), getegid().as_raw()) {
        return None;
    }
    getgroups()
        .ok()
        .map(|groups| groups.into_iter().map(|g| g.as_raw()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_flags_follow_the_access_mode() {
        let f = OpenFlags::of(libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC);
        assert!(!f.read && f.write && f.create && f.truncate && !f.exclusive);
        let f = OpenFlags::of(libc::O_RDONLY);
        assert!(f.read && !f.write && !f.create);
        let f = OpenFlags::of(libc::O_RDWR | libc::O_CREAT | libc::O_EXCL);
        assert!(f.read && f.write && f.exclusive);
    }
}
