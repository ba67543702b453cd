//! Volume procedures: format, volume, statfs, alloc_ids, sync.
use super::durability::{Incarnation, SYNC_SQL};
use std::sync::atomic::{AtomicU64, Ordering};

use super::{check_errno, Epoch, Meta, MetaError, Result};

/// How many times a sync is made again while each finds the server changed
/// (then what it was to vouch for counts as not durable).
const MAX_SYNC_TRIES: usize = 5;

/// The volume's format (`jfs.volume()`).
#[derive(Debug, Clone)]
pub struct VolumeInfo {
    pub name: String,
    pub uuid: String,
    pub storage: String,
    pub bucket: String,
    pub block_size: u32,
    pub trash_days: i32,
    pub capacity: u64,
    pub inodes: u64,
    pub meta_durability: String,
    /// A directory's mtime/ctime older than this is updated by a change in it.
    pub skip_dir_mtime_ns: i64,
    /// POSIX ACLs are stored and enforced (`jfs format --enable-acl`).
    pub enable_acl: bool,
    /// How blocks are compressed (none, lz4, zstd; as typed at format).
    pub compression: String,
    /// How objects are sealed ("": not at all).
    pub encrypt_algo: String,
    /// Files no longer than this keep their bytes in the database (0: none).
    pub inline_max: u32,
}

/// What a mount needs that only granted roles may read.
#[derive(Debug, Clone, Default)]
pub struct VolumeSecrets {
    /// The object store's access and secret key, if the volume keeps them.
    pub keys: Option<(String, String)>,
    /// The RSA private key (PEM) that wraps objects' keys ("": none).
    pub encrypt_key: String,
}

/// Space and inodes as statfs(2) reports them.
#[derive(Debug, Clone, Copy)]
pub struct Statfs {
    pub total_space: u64,
    pub avail_space: u64,
    pub used_inodes: u64,
    pub avail_inodes: u64,
}

/// What `jfs format` asks for.
#[derive(Debug, Clone)]
pub struct FormatRequest {
    pub name: String,
    pub storage: String,
    pub bucket: String,
    pub block_size: u32,
    pub trash_days: i32,
    pub capacity: u64,
    pub inodes: u64,
    pub meta_durability: String,
    /// The uuid to give a new volume (a shard takes its root's); None: a
    /// new one.
    pub uuid: Option<String>,
    pub force: bool,
    /// The object store's access and secret key, kept in the volume.
    pub keys: Option<(String, String)>,
    /// none, lz4 or zstd; None keeps the volume's.
    pub compression: Option<String>,
    /// The RSA key (PEM) and algorithm that seal objects; None keeps the
    /// volume's.
    pub encryption: Option<(String, String)>,
}

impl Meta {
    /// Formats the volume; returns (errno, message) as `jfs.format` says them.
    pub async fn format(&self, req: &FormatRequest) -> Result<(i32, String)> {
        let row = self
            .call_one(
                "SELECT errno, message \
                   FROM jfs.format($1, $2, $3, $4, $5, $6, $7, $8, $15::text::uuid, $9, $10, $11, $12, \
                                  $13, $14)",
                &[
                    &req.name,
                    &req.storage,
                    &req.bucket,
                    &(req.block_size as i32),
                    &req.trash_days,
                    &(req.capacity as i64),
                    &(req.inodes as i64),
                    &req.meta_durability,
                    &req.force,
                    &req.keys.as_ref().map(|k| k.0.as_str()),
                    &req.keys.as_ref().map(|k| k.1.as_str()),
                    &req.compression,
                    &req.encryption.as_ref().map(|e| e.1.as_str()),
                    &req.encryption.as_ref().map(|e| e.0.as_str()),
                    &req.uuid,
                ],
            )
            .await?;
        Ok((row.try_get("errno")?, row.try_get("message")?))
    }

    /// `jfs destroy`'s first step (`jfs.destroy_begin`): marks the volume
    /// of `uuid` as being destroyed, so no session opens; with `force`,
    /// live sessions are ended instead of refusing. Errno and message.
    pub async fn destroy_begin(&self, uuid: &str, force: bool) -> Result<(i32, String)> {
        let row = self
            .call_one(
                "SELECT errno, coalesce(message, '') AS message FROM jfs.destroy_begin($1::text::uuid, $2)",
                &[&uuid, &force],
            )
            .await?;
        Ok((row.try_get("errno")?, row.try_get("message")?))
    }

    /// The next slice id the volume would hand out: every slice id so far
    /// is below it (`jfs.dump_volume`).
    pub async fn next_slice_id(&self) -> Result<u64> {
        let row = self
            .call_one("SELECT next_slice FROM jfs.dump_volume()", &[])
            .await?;
        Ok(row
            .try_get::<_, Option<i64>>("next_slice")?
            .unwrap_or(0)
            .max(0) as u64)
    }

    /// `jfs destroy`'s last step (`jfs.destroy_finish`), once the objects
    /// are gone: empties the volume's tables. Errno and message.
    pub async fn destroy_finish(&self, uuid: &str) -> Result<(i32, String)> {
        let row = self
            .call_one(
                "SELECT errno, coalesce(message, '') AS message FROM jfs.destroy_finish($1::text::uuid)",
                &[&uuid],
            )
            .await?;
        Ok((row.try_get("errno")?, row.try_get("message")?))
    }

    /// The volume's settings; ENOENT when it is not formatted.
    pub async fn volume(&self) -> Result<VolumeInfo> {
        let rows = self
            .call(
                "SELECT name, uuid::text AS uuid, storage, bucket, block_size, trash_days, capacity, \
                        inodes, meta_durability, skip_dir_mtime_ns, enable_acl, compression, \
                        encrypt_algo, (to_jsonb(v) ->> 'inline_max')::integer AS inline_max \
                   FROM jfs.volume() v",
                &[],
            )
            .await?;
        let row = rows.first().ok_or(MetaError::Errno(libc::ENOENT))?;
        let name: Option<String> = row.try_get("name")?;
        let Some(name) = name else {
            return Err(MetaError::Errno(libc::ENOENT));
        };
        Ok(VolumeInfo {
            name,
            uuid: row.try_get("uuid")?,
            storage: row.try_get("storage")?,
            bucket: row.try_get("bucket")?,
            block_size: row.try_get::<_, i32>("block_size")? as u32,
            trash_days: row.try_get("trash_days")?,
            capacity: row.try_get::<_, i64>("capacity")? as u64,
            inodes: row.try_get::<_, i64>("inodes")? as u64,
            meta_durability: row.try_get("meta_durability")?,
            skip_dir_mtime_ns: row.try_get("skip_dir_mtime_ns")?,
            enable_acl: row.try_get("enable_acl")?,
            compression: row.try_get("compression")?,
            encrypt_algo: row.try_get("encrypt_algo")?,
            // (no such column before 0.2.32: nothing kept in the database)
            inline_max: row.try_get::<_, Option<i32>>("inline_max")?.unwrap_or(0) as u32,
        })
    }

    /// The object store's keys and the objects' RSA key kept in the volume.
    pub async fn volume_secrets(&self) -> Result<VolumeSecrets> {
        let rows = self
            .call(
                "SELECT access_key, secret_key, encrypt_key FROM jfs.volume_secrets()",
                &[],
            )
            .await?;
        let Some(r) = rows.first() else {
            return Ok(VolumeSecrets::default());
        };
        let ak: Option<String> = r.try_get("access_key")?;
        let sk: Option<String> = r.try_get("secret_key")?;
        Ok(VolumeSecrets {
            keys: match (ak, sk) {
                (Some(ak), Some(sk)) if !ak.is_empty() => Some((ak, sk)),
                _ => None,
            },
            encrypt_key: r
                .try_get::<_, Option<String>>("encrypt_key")?
                .unwrap_or_default(),
        })
    }

    /// Keeps the object store's keys given to read-only roles
    /// (administration; "" for both: none).
    pub async fn set_reader_keys(&self, access_key: &str, secret_key: &str) -> Result<()> {
        self.call(
            "SELECT jfs.set_reader_keys($1, $2)",
            &[&access_key, &secret_key],
        )
        .await?;
        Ok(())
    }

    /// Of the volume (`dir` 1) or, for a mounted subdirectory, of its
    /// nearest directory quota with a limit.
    pub async fn statfs(&self, dir: u64) -> Result<Statfs> {
        let row = self
            .call_one("SELECT * FROM jfs.statfs($1)", &[&(dir as i64)])
            .await?;
        check_errno(&row)?;
        Ok(Statfs {
            total_space: row.try_get::<_, i64>("total_space")? as u64,
            avail_space: row.try_get::<_, i64>("avail_space")? as u64,
            used_inodes: row.try_get::<_, i64>("used_inodes")? as u64,
            avail_inodes: row.try_get::<_, i64>("avail_inodes")? as u64,
        })
    }

    /// Reserves `count` ids of `kind` ("inode" or "slice"); returns the
    /// first. The reservation is durable before the ids are used: a crash
    /// that erased it would hand them out again, and two slices with one
    /// id overwrite each other's blocks.
    pub async fn alloc_ids(&self, kind: &str, count: i32) -> Result<u64> {
        loop {
            let sent_in = self.epoch();
            let row = self
                .call_one("SELECT jfs.alloc_ids($1, $2) AS first", &[&kind, &count])
                .await?;
            let first = row.try_get::<_, i64>("first")? as u64;
            if self.durable_since(sent_in).await? {
                return Ok(first);
            }
            tracing::warn!(
                "{count} {kind} ids reserved from {first} may be lost with the server that \
                 reserved them: reserving others"
            );
        }
    }

    /// Runs `jfs.sync()`: what this client committed before it is durable
    /// on the server it ran on, whose incarnation it notes. Returns the
    /// epoch it ran in.
    async fn sync_here(&self) -> Result<Epoch> {
        let mark = self.incarnations.mark();
        let (mut rows, sent_in) = self.call_stamped(SYNC_SQL, &[]).await?;
        let row = rows.pop().ok_or(MetaError::Errno(libc::EIO))?;
        self.incarnations.observe(Incarnation {
            id: row.try_get(1)?,
            timeline: row.try_get(2)?,
            clean_start: row.try_get::<_, String>(3)? == "true",
        });
        self.incarnations.synced(mark, sent_in);
        Ok(sent_in)
    }

    /// A sync that ran in the epoch current after it. Through a pooler
    /// (PgBouncer keeps the mount's connections across a crash of the
    /// server behind it) a sync can be the first statement to reach a new
    /// server: it notes the new epoch, and is made again once what the old
    /// server may have lost was told again or found lost, which the
    /// journal's replay before the next statement does.
    async fn sync_in_current_epoch(&self) -> Result<()> {
        for _ in 0..MAX_SYNC_TRIES {
            if self.sync_here().await? == self.epoch() {
                return Ok(());
            }
        }
        Err(MetaError::NotDurable)
    }

    /// fsync of a file: waits until the file's commits since `since` (the
    /// epoch its oldest unsynced commit was sent in) are durable. Fails with
    /// [`MetaError::NotDurable`] when the server changed after such a commit
    /// and it could not be told again (see `journal`).
    pub async fn sync_file(&self, since: Option<Epoch>) -> Result<()> {
        self.sync_in_current_epoch().await?;
        match self.incarnations.covers(since) {
            true => Ok(()),
            false => Err(MetaError::NotDurable),
        }
    }

    /// fsync of a file whose last commit, sent in `sent_in`, was durable
    /// ([`Meta::write_slices`] with `durable`): as [`Meta::sync_file`] for
    /// its commits since `since`, without a sync of its own. None when the
    /// server changed since that commit (a sync is needed).
    pub fn committed_durably(&self, sent_in: Epoch, since: Option<Epoch>) -> Option<Result<()>> {
        if sent_in != self.epoch() {
            return None;
        }
        Some(match self.incarnations.covers(since) {
            true => Ok(()),
            false => Err(MetaError::NotDurable),
        })
    }

    /// fsync of a directory: waits until every commit of this client is
    /// durable. Fails with [`MetaError::NotDurable`], once for each
    /// directory handle (`losses_seen`, from [`Meta::losses`] at its open),
    /// after commits not yet synced were lost with a server that is gone,
    /// as Linux reports a writeback error once to each descriptor.
    pub async fn sync_dir(&self, losses_seen: &AtomicU64) -> Result<()> {
        self.sync_in_current_epoch().await?;
        let losses = self.losses();
        match losses_seen.swap(losses, Ordering::SeqCst) < losses {
            true => Err(MetaError::NotDurable),
            false => Ok(()),
        }
    }

    /// How many times commits of this client were found lost so far.
    pub fn losses(&self) -> u64 {
        self.incarnations.losses()
    }

    /// A change this client answered as done was refused at its commit
    /// (the next fsync of a directory reports it).
    pub fn lost_an_answer(&self) {
        self.incarnations.lost_an_answer();
    }

    /// How many times locks or files held open by this client may have
    /// been lost with a server that is gone.
    pub fn state_losses(&self) -> u64 {
        self.incarnations.state_losses()
    }

    /// Makes what was committed, or read, since `sent_in` durable on the
    /// server it came from: false when that server is gone (ids it handed
    /// out may be handed out again; a freed slice it listed may be
    /// referenced again).
    pub async fn durable_since(&self, sent_in: Epoch) -> Result<bool> {
        if !self.incarnations.async_commits() {
            return Ok(true);
        }
        self.sync_here().await?;
        Ok(self.incarnations.unchanged_since(sent_in))
    }
}
