//! `jfs mount`: serve a volume through FUSE, in the foreground or as a daemon (-d).
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;

use crate::attach::background::BackgroundConfig;
use crate::attach::{self, session_timeout};
use crate::fuse::{mountpoint, session};
use crate::meta::{redact_url, Squash};
use crate::metrics;
use crate::object;
use crate::vfs::{AtimeMode, Vfs, VfsConfig};
use crate::volume::{open_volume, BucketCheck, OpenVolume};

/// META_URL given as this value is read from JFS_META_URL (keeps it out of the process list).
const URL_FROM_ENV: &str = "-";

#[derive(Args, Debug, Clone)]
pub struct MountArgs {
    /// PostgreSQL URL of the metadata database ("-" = from JFS_META_URL)
    meta_url: String,
    /// An existing empty directory to mount on
    mountpoint: PathBuf,
    /// Run in the background once mounted
    #[arg(short = 'd', long)]
    background: bool,
    /// Log file of a background mount [default: /var/log/jfs.log, or ~/.jfs/jfs.log]
    #[arg(long)]
    log: Option<PathBuf>,
    /// Mount this directory of the volume (e.g. /projects/a) instead of its root;
    /// df then shows the nearest directory quota's limit and usage
    #[arg(long)]
    subdir: Option<String>,
    /// Seconds the kernel (and, for directories, the mount) caches attributes; 0 turns caching off
    #[arg(long, default_value_t = 30.0)]
    attr_cache: f64,
    /// Seconds the kernel caches names of files (and that a name is missing)
    #[arg(long, default_value_t = 30.0)]
    entry_cache: f64,
    /// Seconds the kernel caches names of directories
    #[arg(long, default_value_t = 30.0)]
    dir_entry_cache: f64,
    /// Seconds between reads of the change log, which make this mount (and
    /// its kernel) forget what other mounts changed; 0: never (then keep
    /// --attr-cache and --entry-cache short: they bound what is stale)
    #[arg(long, default_value_t = attach::DEFAULT_CHANGES_POLL_SECS)]
    changes_poll: f64,
    /// MiB of memory for uploads in flight and recently read blocks
    #[arg(long, default_value_t = attach::DEFAULT_BUFFER_MIB)]
    buffer_size: usize,
    /// Directory of the local block cache (off when not given)
    #[arg(long)]
    cache_dir: Option<PathBuf>,
    /// Keep the blocks of an encrypted volume sealed in the disk cache too
    /// (AES-256-GCM under a key derived from the volume's RSA key): plain
    /// text then exists only in memory
    #[arg(long, requires = "cache_dir")]
    cache_sealed: bool,
    /// MiB the local block cache may hold
    #[arg(long, default_value_t = 10240)]
    cache_size: u64,
    /// Nothing more is cached while less than this share of the cache
    /// directory's file system is free
    #[arg(long, default_value_t = 0.1)]
    free_space_ratio: f64,
    /// Refuse every change (a role granted read-only is mounted so anyway)
    #[arg(long)]
    read_only: bool,
    /// Requests of root act as UID:GID: the nodes they make are that
    /// identity's, and the mount checks them for it (a role granted a squash
    /// gets its own)
    #[arg(long, value_name = "UID:GID", value_parser = |t: &str| Squash::parse(t, false))]
    root_squash: Option<Squash>,
    /// Every request acts as UID:GID (as --root-squash, for all users)
    #[arg(long, value_name = "UID:GID", value_parser = |t: &str| Squash::parse(t, true),
          conflicts_with = "root_squash")]
    all_squash: Option<Squash>,
    /// Let other users access the mount (root, or user_allow_other in /etc/fuse.conf)
    #[arg(long)]
    allow_other: bool,
    /// When reads move atimes: noatime (never: reads commit nothing),
    /// relatime (when the atime is not after the mtime or ctime, or is a
    /// day old, as Linux's default) or strictatime (every read, at most
    /// once a second a file)
    #[arg(long, default_value = "noatime", value_parser = |t: &str| t.parse::<AtimeMode>())]
    atime_mode: AtimeMode,
    /// Honour device files on the mount (mount's "dev"; by default a mount
    /// is nodev: a device node made there opens nothing; root only)
    #[arg(long)]
    dev: bool,
    /// Honour set-user-ID and set-group-ID bits of programs run from the
    /// mount (mount's "suid"; by default nosuid; root only)
    #[arg(long)]
    suid: bool,
    /// Connections to PostgreSQL
    #[arg(long, default_value_t = attach::DEFAULT_MAX_CONNECTIONS)]
    max_connections: usize,
    /// A hot standby of the metadata database that answers lookups,
    /// getattrs and directory listings once it has replayed every change
    /// this mount made or learned of (the primary answers otherwise, and
    /// everything else); several hosts with ?target_session_attrs=read-only
    /// follow a failover ("-" = from JFS_META_REPLICA)
    #[arg(long, value_name = "URL")]
    meta_replica: Option<String>,
    /// Seconds a metadata call is retried while PostgreSQL is unreachable,
    /// restarting or failing over, before the operation fails with EIO
    #[arg(long, default_value_t = crate::meta::DEFAULT_META_RETRY.as_secs())]
    meta_retry: u64,
    /// Seconds an object store request is retried while it fails with
    /// errors that may pass (timeouts, resets, 5xx, SlowDown)
    #[arg(long, default_value_t = crate::object::DEFAULT_OBJECT_RETRY.as_secs())]
    object_retry: u64,
    /// Seconds one object store request may take before it is tried again
    #[arg(long, default_value_t = crate::object::DEFAULT_OBJECT_TIMEOUT.as_secs())]
    object_timeout: u64,
    /// Seconds between session heartbeats
    #[arg(long, default_value_t = attach::DEFAULT_HEARTBEAT_SECS)]
    heartbeat: u64,
    /// Seconds without a heartbeat after which other mounts end this mount's
    /// session (it declares them when it registers, 2 to 3600; heartbeats
    /// come at least three times as often)
    #[arg(long, default_value_t = attach::DEFAULT_SESSION_TIMEOUT_SECS)]
    session_timeout: u64,
    /// Seconds between runs that delete the objects of deleted data
    #[arg(long, default_value_t = attach::DEFAULT_GC_INTERVAL_SECS)]
    gc_interval: u64,
    /// Seconds after which writes to a file left open without fsync are
    /// committed (other mounts then see them; a crash of this mount loses
    /// at most that long), with the chmod, chown and utimens of the file
    /// made meanwhile; 0: only at fsync and close, and those are made at
    /// once
    #[arg(long, default_value_t = attach::DEFAULT_COMMIT_AFTER_SECS)]
    commit_after: f64,
    /// Seconds the objects of deleted data are kept before deletion (it
    /// also waits until the commit that freed them is durable): other
    /// mounts may still read through slice lists they read before, and a
    /// failover to a standby that lags brings references back; 0: at once
    #[arg(long, default_value_t = attach::DEFAULT_GC_DELAY_SECS)]
    gc_delay: u64,
    /// Slices in a chunk from which this mount compacts it in the background (0: never)
    #[arg(long, default_value_t = crate::vfs::COMPACT_AT)]
    compact_at: usize,
    /// Entries a lookup in a directory whose names are being statted one by
    /// one (find, du, ls -l) fetches ahead, in listing and in name order
    /// (0: none)
    #[arg(long, default_value_t = crate::vfs::LOOKUP_AHEAD, value_name = "N")]
    lookup_ahead: u32,
    /// Serve no extended attributes: every xattr call fails with "operation
    /// not supported", answered by the kernel, which then sends none of
    /// them (`ls -l` asks two per file, and every write one); not for a
    /// volume with ACLs on, which are xattrs
    #[arg(long)]
    no_xattrs: bool,
    /// How often a metadata backup (a compressed dump) goes into the object
    /// store under NAME/meta/, written by one of the volume's mounts
    /// (3600, 90s, 30m, 1h, 1d; 0: never)
    #[arg(long, default_value = "0", value_parser = parse_duration, value_name = "INTERVAL")]
    backup_meta: Duration,
    /// Metadata backups kept in the object store (older ones are deleted)
    #[arg(long, default_value_t = 24)]
    backup_keep: usize,
    /// Where to serve Prometheus metrics (http://ADDR/metrics) [default:
    /// 127.0.0.1:9567, or the next free port when another mount has it]
    #[arg(long, value_name = "ADDR")]
    metrics: Option<String>,
    /// Serve no metrics endpoint (`jfs stats` works all the same)
    #[arg(long, conflicts_with = "metrics")]
    no_metrics: bool,
}

/// A duration in seconds, or with a unit: s, m, h or d.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => text.split_at(i),
        None => (text, "s"),
    };
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration: use seconds or 90s, 30m, 1h, 1d"))?;
    let unit_secs = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86400,
        _ => return Err(format!("{text:?}: the unit is s, m, h or d")),
    };
    Ok(Duration::from_secs(n.saturating_mul(unit_secs)))
}

/// Where `--meta-replica -` is read from.
const REPLICA_URL_ENV: &str = "JFS_META_REPLICA";

/// The URL `--meta-replica` gives (from the environment for "-").
fn replica_url(given: &str) -> anyhow::Result<String> {
    match given == URL_FROM_ENV {
        true => std::env::var(REPLICA_URL_ENV).with_context(|| {
            format!("--meta-replica \"-\" needs {REPLICA_URL_ENV} in the environment")
        }),
        false => Ok(given.to_string()),
    }
}

fn default_log() -> PathBuf {
    match std::env::var("HOME") {
        Ok(home) if !home.is_empty() && home != "/root" => PathBuf::from(home).join(".jfs/jfs.log"),
        _ => PathBuf::from("/var/log/jfs.log"),
    }
}

pub fn run(a: MountArgs) -> anyhow::Result<()> {
    let meta_url = if a.meta_url == URL_FROM_ENV {
        std::env::var("JFS_META_URL")
            .context("META_URL \"-\" needs JFS_META_URL in the environment")?
    } else {
        a.meta_url.clone()
    };
    let meta_md = std::fs::metadata(&a.mountpoint).with_context(|| {
        format!(
            "mount point {} does not exist: create the directory first",
            a.mountpoint.display()
        )
    })?;
    anyhow::ensure!(
        meta_md.is_dir(),
        "mount point {} is not a directory",
        a.mountpoint.display()
    );
    anyhow::ensure!(
        !mountpoint::is_mounted(&a.mountpoint),
        "{} is already a jfs mount",
        a.mountpoint.display()
    );
    if a.background {
        return daemonize(&a, &meta_url);
    }
    serve(a, &meta_url)
}

/// Starts this program again as the mount, detached, and waits until the mount is up.
fn daemonize(a: &MountArgs, meta_url: &str) -> anyhow::Result<()> {
    let log = a.log.clone().unwrap_or_else(default_log);
    if let Some(dir) = log.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    // (a symbolic link planted where the log goes is not followed: the
    // mount often runs as root)
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&log)
        .with_context(|| {
            format!(
                "cannot open the log file {} (a symbolic link is not followed)",
                log.display()
            )
        })?;
    let start_len = out.metadata().map(|m| m.len()).unwrap_or(0);
    let exe = std::env::current_exe()?;
    let mut args: Vec<String> = vec!["mount".into(), URL_FROM_ENV.into()];
    args.push(a.mountpoint.to_string_lossy().into());
    // (the mount names its log in its session, for `jfs debug`)
    args.push("--log".into());
    args.push(log.to_string_lossy().into());
    for (flag, value) in [
        ("--attr-cache", a.attr_cache.to_string()),
        ("--entry-cache", a.entry_cache.to_string()),
        ("--dir-entry-cache", a.dir_entry_cache.to_string()),
        ("--changes-poll", a.changes_poll.to_string()),
        ("--buffer-size", a.buffer_size.to_string()),
        ("--max-connections", a.max_connections.to_string()),
        ("--meta-retry", a.meta_retry.to_string()),
        ("--object-retry", a.object_retry.to_string()),
        ("--object-timeout", a.object_timeout.to_string()),
        ("--heartbeat", a.heartbeat.to_string()),
        ("--session-timeout", a.session_timeout.to_string()),
        ("--gc-interval", a.gc_interval.to_string()),
        ("--gc-delay", a.gc_delay.to_string()),
        ("--commit-after", a.commit_after.to_string()),
        ("--compact-at", a.compact_at.to_string()),
        ("--lookup-ahead", a.lookup_ahead.to_string()),
        ("--backup-meta", a.backup_meta.as_secs().to_string()),
        ("--backup-keep", a.backup_keep.to_string()),
        ("--atime-mode", a.atime_mode.name().to_string()),
    ] {
        args.push(flag.into());
        args.push(value);
    }
    if a.read_only {
        args.push("--read-only".into());
    }
    if a.meta_replica.is_some() {
        // (from the environment: a password in it stays out of the process list)
        args.push("--meta-replica".into());
        args.push(URL_FROM_ENV.into());
    }
    for (flag, squash) in [
        ("--root-squash", a.root_squash),
        ("--all-squash", a.all_squash),
    ] {
        if let Some(s) = squash {
            args.push(flag.into());
            args.push(format!("{}:{}", s.uid, s.gid));
        }
    }
    if let Some(subdir) = &a.subdir {
        args.push("--subdir".into());
        args.push(subdir.clone());
    }
    if let Some(dir) = &a.cache_dir {
        args.push("--cache-dir".into());
        args.push(dir.to_string_lossy().into());
        args.push("--cache-size".into());
        args.push(a.cache_size.to_string());
        args.push("--free-space-ratio".into());
        args.push(a.free_space_ratio.to_string());
        if a.cache_sealed {
            args.push("--cache-sealed".into());
        }
    }
    for (flag, on) in [
        ("--allow-other", a.allow_other),
        ("--dev", a.dev),
        ("--suid", a.suid),
    ] {
        if on {
            args.push(flag.into());
        }
    }
    if a.no_xattrs {
        args.push("--no-xattrs".into());
    }
    if let Some(addr) = &a.metrics {
        args.push("--metrics".into());
        args.push(addr.clone());
    }
    if a.no_metrics {
        args.push("--no-metrics".into());
    }
    let mut child = Command::new(exe);
    if let Some(url) = &a.meta_replica {
        child.env(REPLICA_URL_ENV, replica_url(url)?);
    }
    let mut child = child
        .args(&args)
        .env("JFS_META_URL", meta_url)
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .process_group(0)
        .spawn()
        .context("cannot start the background mount")?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if mountpoint::is_mounted(&a.mountpoint) {
            println!(
                "jfs mounted at {} (pid {}, log {})",
                a.mountpoint.display(),
                child.id(),
                log.display()
            );
            return Ok(());
        }
        if let Some(status) = child.try_wait()? {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let tail: String = text.chars().skip(start_len as usize).collect();
            anyhow::bail!("the mount exited ({status}):\n{}", tail.trim_end());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    anyhow::bail!(
        "the mount did not come up within 30 s; see {}",
        log.display()
    )
}

/// Mounts in this process and serves until unmounted.
fn serve(a: MountArgs, meta_url: &str) -> anyhow::Result<()> {
    anyhow::ensure!(
        a.commit_after.is_finite() && a.commit_after >= 0.0,
        "--commit-after {}: give seconds, 0 or more",
        a.commit_after
    );
    let rt = super::runtime()?;
    let mountpoint = a.mountpoint.canonicalize()?;
    let (vfs, info, read_only) = rt.block_on(async {
        let OpenVolume {
            mut meta,
            volume,
            store,
            cache_key,
        } = open_volume(meta_url, a.max_connections, BucketCheck::WhenReachable).await?;
        anyhow::ensure!(
            !a.cache_sealed || cache_key.is_some(),
            "--cache-sealed: volume {} is not encrypted (jfs format --encrypt-rsa-key), so \
             there is no key to seal its disk cache with",
            volume.name
        );
        meta.set_retry_for(Duration::from_secs(a.meta_retry));
        object::set_retries(
            Duration::from_secs(a.object_retry),
            Duration::from_secs(a.object_timeout),
        );
        anyhow::ensure!(
            !a.no_xattrs || !volume.enable_acl,
            "--no-xattrs: volume {} has POSIX ACLs on, and the kernel reads them as xattrs \
             (without them it would grant what they deny); mount without --no-xattrs",
            volume.name
        );
        meta.require_client_grants().await?;
        let (read_only, squash) =
            attach::limits_applied(&meta, a.read_only, a.root_squash.or(a.all_squash)).await?;
        // a hot standby is mounted read-only and leaves no trace in the
        // database: no session, no heartbeat, no background writes
        let standby = meta.in_recovery().await?;
        anyhow::ensure!(
            !standby || read_only,
            "{} is a hot standby, which takes no writes: mount it with --read-only (a mirror \
             of the primary), or reach the primary (META_URL may list every server, with \
             ?target_session_attrs=read-write)",
            redact_url(meta_url)
        );
        if let Some(url) = &a.meta_replica {
            anyhow::ensure!(
                !standby,
                "--meta-replica is for mounts of the primary: this mount reads a standby already"
            );
            meta.read_from_replica(&replica_url(url)?, a.max_connections)
                .await?;
        }
        let root = match &a.subdir {
            Some(path) => attach::subdir_inode(&meta, meta_url, &volume.name, path).await?,
            None => 1,
        };
        let metrics_listener = match a.no_metrics {
            true => None,
            false => Some(metrics::bind(a.metrics.as_deref())?),
        };
        let metrics_addr = match &metrics_listener {
            Some(l) => l.local_addr()?.to_string(),
            None => String::new(),
        };
        metrics::install(&volume.name, &mountpoint.display().to_string());
        if standby || a.meta_replica.is_some() {
            metrics::install_replica_lag(&volume.name, &mountpoint.display().to_string());
        }
        if let Some(listener) = metrics_listener {
            metrics::serve(listener)?;
            tracing::info!("metrics at http://{metrics_addr}/metrics");
        }
        // what `jfs status` shows of this mount
        let info = serde_json::json!({
            "mountpoint": mountpoint.display().to_string(),
            "version": env!("CARGO_PKG_VERSION"),
            "metrics": metrics_addr,
            "meta_replica": a.meta_replica.as_deref().map(replica_url).transpose()?
                .map(|u| redact_url(&u)),
            "log": a.log.as_ref().map(|l| l.display().to_string()),
        })
        .to_string();
        let disk_cache = match &a.cache_dir {
            Some(dir) => {
                let cache = object::DiskCache::open(dir, a.cache_size << 20, a.free_space_ratio)?;
                Some(Arc::new(match cache_key.filter(|_| a.cache_sealed) {
                    Some(key) => cache.sealed_with(key),
                    None => cache,
                }))
            }
            None => None,
        };
        let (meta, sid) =
            attach::register(meta, standby, &info, session_timeout(a.session_timeout)).await?;
        let parts = attach::register_shards(
            meta,
            meta_url,
            sid,
            &info,
            session_timeout(a.session_timeout),
            (Duration::from_secs(a.meta_retry), a.max_connections),
        )
        .await?;
        let config = VfsConfig {
            root,
            attr_ttl: Duration::from_secs_f64(a.attr_cache),
            entry_ttl: Duration::from_secs_f64(a.entry_cache),
            dir_entry_ttl: Duration::from_secs_f64(a.dir_entry_cache),
            follow_changes: a.changes_poll > 0.0,
            buffer_size: a.buffer_size << 20,
            read_only,
            squash,
            disk_cache,
            compact_at: a.compact_at,
            lookup_ahead: a.lookup_ahead,
            defer_attrs: a.commit_after > 0.0,
            atime: a.atime_mode,
            reserve_gateway_dir: true,
        };
        let who = match standby {
            true => "read-only, on a hot standby".to_string(),
            false => format!("as session {sid}"),
        };
        tracing::info!(
            "mounting volume {} ({}, blocks in {}) at {} {who}",
            volume.name,
            redact_url(meta_url),
            store.describe(),
            mountpoint.display()
        );
        let vfs = Vfs::new(parts, store, volume, config);
        attach::start(&vfs, Duration::from_secs_f64(a.changes_poll)).await?;
        Ok::<_, anyhow::Error>((vfs, info, read_only))
    })?;
    {
        let _guard = rt.enter();
        attach::spawn_background(
            vfs.clone(),
            BackgroundConfig {
                heartbeat: Duration::from_secs(a.heartbeat),
                session_timeout: session_timeout(a.session_timeout),
                gc_interval: Duration::from_secs(a.gc_interval),
                gc_delay: Duration::from_secs(a.gc_delay),
                backup_meta: a.backup_meta,
                backup_keep: a.backup_keep,
                commit_after: Duration::from_secs_f64(a.commit_after),
            },
            info,
        );
        let mp = mountpoint.clone();
        rt.spawn(async move {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                    .expect("SIGTERM handler");
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            tracing::info!("signal received: unmounting {}", mp.display());
            let _ = mountpoint::unmount(&mp, false);
        });
    }
    let served = session::serve(
        vfs.clone(),
        rt.handle().clone(),
        &mountpoint,
        &session::ServeOptions {
            read_only,
            allow_other: a.allow_other,
            xattrs: !a.no_xattrs,
            dev: a.dev,
            suid: a.suid,
            atime: a.atime_mode,
        },
    )
    .with_context(|| format!("mounting on {}", mountpoint.display()));
    rt.block_on(async {
        vfs.flush_all().await;
        if let Err(e) = vfs.close_session().await {
            tracing::warn!("closing session {}: {e}", vfs.sid());
        }
    });
    tracing::info!("unmounted {}", mountpoint.display());
    served
}
