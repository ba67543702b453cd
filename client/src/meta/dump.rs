//! Dump procedures: the volume read in one snapshot (`jfs dump`), the rows a dump and a load share, and the automatic metadata backup's turn.
use futures_util::{Stream, TryStreamExt};
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

use super::{Meta, MetaError, Result};

/// A pooled connection inside a transaction this module began: ended by
/// [`InTransaction::end`], else (an error on the way) closed rather than
/// handed back to the pool in the middle of a transaction.
pub(super) struct InTransaction(Option<deadpool_postgres::Object>);

impl InTransaction {
    pub(super) async fn begin(meta: &Meta, sql: &str) -> Result<InTransaction> {
        let tx = InTransaction(Some(meta.pool.get().await?));
        tx.client().batch_execute(sql).await?;
        Ok(tx)
    }

    pub(super) fn client(&self) -> &deadpool_postgres::Object {
        self.0
            .as_ref()
            .expect("a transaction is used only until it ends")
    }

    /// Ends the transaction with `sql` (COMMIT or ROLLBACK).
    pub(super) async fn end(mut self, sql: &str) -> Result<()> {
        let client = self.0.take().expect("a transaction ends once");
        match client.batch_execute(sql).await {
            Ok(()) => Ok(()),
            Err(e) => {
                drop(deadpool_postgres::Object::take(client));
                Err(e.into())
            }
        }
    }
}

impl Drop for InTransaction {
    fn drop(&mut self) {
        if let Some(client) = self.0.take() {
            drop(deadpool_postgres::Object::take(client));
        }
    }
}

/// A read-only REPEATABLE READ transaction on one connection: everything a
/// dump reads comes from the same moment.
pub struct Snapshot {
    tx: InTransaction,
}

/// The volume's settings and counters, as a dump writes them.
#[derive(Debug, Clone)]
pub struct DumpVolume {
    pub name: String,
    pub uuid: String,
    pub storage: String,
    pub bucket: String,
    pub block_size: i32,
    pub trash_days: i32,
    pub capacity: i64,
    pub inodes: i64,
    pub enable_acl: bool,
    pub next_inode: i64,
    pub next_slice: i64,
    pub used_space: i64,
    pub used_inodes: i64,
    pub has_trash: bool,
}

/// A quota other than the volume's (`jfs.dump_quotas`).
#[derive(Debug, Clone)]
pub struct DumpQuota {
    pub kind: String,
    pub key: i64,
    pub max_space: i64,
    pub max_inodes: i64,
}

/// One ACL row: kind 'a' (access) or 'd' (default), tag, qualifier, perm.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclRow {
    pub kind: char,
    pub tag: i16,
    pub qualifier: i64,
    pub perm: i16,
}

/// One node of the tree at one of its names (`jfs.dump_tree`), depth first.
#[derive(Debug, Clone)]
pub struct DumpNode {
    /// 0 for the tree's top, whose name is None.
    pub depth: i32,
    pub name: Option<Vec<u8>>,
    pub attr: NodeRow,
    pub target: Option<Vec<u8>>,
    pub xattrs: Vec<(Vec<u8>, Vec<u8>)>,
    /// The chunks and their slices, already in the dump's JSON form.
    pub chunks_json: Option<String>,
    pub acl: Vec<AclRow>,
    /// A shard root: a directory of another shard, named here (its attr
    /// holds the inode and type alone; its shard's tree gives the rest).
    pub elsewhere: bool,
}

fn dump_node(row: Row) -> Result<DumpNode> {
    if row.try_get::<_, Option<i32>>("mode")?.is_none() {
        return Ok(DumpNode {
            depth: row.try_get("depth")?,
            name: row.try_get("name")?,
            attr: NodeRow {
                inode: row.try_get("inode")?,
                kind: row.try_get("type")?,
                ..NodeRow::default()
            },
            target: None,
            xattrs: Vec::new(),
            chunks_json: None,
            acl: Vec::new(),
            elsewhere: true,
        });
    }
    let names: Option<Vec<Vec<u8>>> = row.try_get("xattr_names")?;
    let values: Option<Vec<Vec<u8>>> = row.try_get("xattr_values")?;
    let kinds: Option<Vec<String>> = row.try_get("acl_kinds")?;
    let tags: Option<Vec<i16>> = row.try_get("acl_tags")?;
    let qualifiers: Option<Vec<i64>> = row.try_get("acl_qualifiers")?;
    let perms: Option<Vec<i16>> = row.try_get("acl_perms")?;
    let acl = kinds
        .unwrap_or_default()
        .into_iter()
        .zip(tags.unwrap_or_default())
        .zip(qualifiers.unwrap_or_default())
        .zip(perms.unwrap_or_default())
        .map(|(((kind, tag), qualifier), perm)| AclRow {
            kind: kind.chars().next().unwrap_or('a'),
            tag,
            qualifier,
            perm,
        })
        .collect();
    Ok(DumpNode {
        depth: row.try_get("depth")?,
        name: row.try_get("name")?,
        attr: NodeRow {
            inode: row.try_get("inode")?,
            kind: row.try_get("type")?,
            mode: row.try_get("mode")?,
            uid: row.try_get("uid")?,
            gid: row.try_get("gid")?,
            atime: row.try_get("atime")?,
            mtime: row.try_get("mtime")?,
            ctime: row.try_get("ctime")?,
            nlink: row.try_get("nlink")?,
            length: row.try_get("length")?,
            rdev: row.try_get("rdev")?,
            tier: row.try_get("tier")?,
        },
        target: row.try_get("target")?,
        xattrs: names
            .unwrap_or_default()
            .into_iter()
            .zip(values.unwrap_or_default())
            .collect(),
        chunks_json: row.try_get("chunks")?,
        acl,
        elsewhere: false,
    })
}

impl Meta {
    /// Starts a dump's snapshot.
    pub async fn dump_snapshot(&self) -> Result<Snapshot> {
        let tx =
            InTransaction::begin(self, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY").await?;
        Ok(Snapshot { tx })
    }
}

impl Snapshot {
    /// The slices kept in the database (`jfs.inline_blocks`), in id order
    /// after `after`, at most `limit`: (slice id, size, block as stored); none
    /// before 0.2.32 (nothing is kept there) or for a role not granted it.
    pub async fn inline_blocks(
        &self,
        after: u64,
        limit: i32,
    ) -> Result<Vec<(u64, u32, bytes::Bytes)>> {
        // (asked first: an error would end the snapshot's transaction)
        let callable: bool = self
            .tx
            .client()
            .query_one(
                "SELECT coalesce(pg_catalog.has_function_privilege(\
                     pg_catalog.to_regprocedure('jfs.inline_blocks(bigint, integer)'), 'EXECUTE'), false)",
                &[],
            )
            .await?
            .try_get(0)?;
        if !callable {
            return Ok(Vec::new());
        }
        let rows = self
            .tx
            .client()
            .query(
                "SELECT slice_id, size, data FROM jfs.inline_blocks($1, $2)",
                &[&(after as i64), &limit],
            )
            .await?;
        rows.iter()
            .map(|r| {
                Ok((
                    r.try_get::<_, i64>("slice_id")? as u64,
                    r.try_get::<_, i32>("size")? as u32,
                    bytes::Bytes::from(r.try_get::<_, Vec<u8>>("data")?),
                ))
            })
            .collect()
    }

    /// The settings, counters and usage (`jfs.dump_volume`); ENOENT when unformatted.
    pub async fn volume(&self) -> Result<DumpVolume> {
        let rows = self
            .tx
            .client()
            .query(
                "SELECT name, uuid::text AS uuid, storage, bucket, block_size, trash_days, \
                        coalesce(capacity, 0) AS capacity, coalesce(inodes, 0) AS inodes, enable_acl, \
                        next_inode, next_slice, used_space, used_inodes, has_trash FROM jfs.dump_volume()",
                &[],
            )
            .await?;
        let row = rows.first().ok_or(MetaError::Errno(libc::ENOENT))?;
        Ok(DumpVolume {
            name: row.try_get("name")?,
            uuid: row.try_get("uuid")?,
            storage: row.try_get("storage")?,
            bucket: row.try_get("bucket")?,
            block_size: row.try_get("block_size")?,
            trash_days: row.try_get("trash_days")?,
            capacity: row.try_get("capacity")?,
            inodes: row.try_get("inodes")?,
            enable_acl: row.try_get("enable_acl")?,
            next_inode: row.try_get("next_inode")?,
            next_slice: row.try_get("next_slice")?,
            used_space: row.try_get("used_space")?,
            used_inodes: row.try_get("used_inodes")?,
            has_trash: row.try_get("has_trash")?,
        })
    }

    /// The quotas of directories, users and groups (`jfs.dump_quotas`).
    pub async fn quotas(&self) -> Result<Vec<DumpQuota>> {
        let rows = self
            .tx
            .client()
            .query(
                "SELECT kind, key, max_space, max_inodes FROM jfs.dump_quotas()",
                &[],
            )
            .await?;
        rows.iter()
            .map(|r| {
                Ok(DumpQuota {
                    kind: r.try_get("kind")?,
                    key: r.try_get("key")?,
                    max_space: r.try_get("max_space")?,
                    max_inodes: r.try_get("max_inodes")?,
                })
            })
            .collect()
    }

    /// The inode at `path` in the volume (`jfs.resolve`).
    pub async fn resolve(&self, path: &str) -> Result<i64> {
        let row = self
            .tx
            .client()
            .query_one("SELECT jfs.resolve($1) AS inode", &[&path])
            .await?;
        Ok(row.try_get("inode")?)
    }

    /// The tree under `root`, depth first, as the rows arrive (`jfs.dump_tree`).
    pub async fn tree(&self, root: i64) -> Result<impl Stream<Item = Result<DumpNode>> + '_> {
        let rows = self
            .tx
            .client()
            .query_raw(
                "SELECT * FROM jfs.dump_tree($1)",
                [&root as &(dyn ToSql + Sync)],
            )
            .await?;
        Ok(rows
            .map_err(MetaError::from)
            .and_then(|r| async move { dump_node(r) }))
    }

    /// Ends the snapshot.
    pub async fn end(self) -> Result<()> {
        self.tx.end("COMMIT").await
    }
}

/// A node's row as a dump reads it and a load stages it (times in
/// nanoseconds since the epoch; kind numbered as `NodeType`).
#[derive(Debug, Clone, Default)]
pub struct NodeRow {
    pub inode: i64,
    pub kind: i16,
    pub mode: i32,
    pub uid: i64,
    pub gid: i64,
    pub atime: i64,
    pub mtime: i64,
    pub ctime: i64,
    pub nlink: i32,
    pub length: i64,
    pub rdev: i64,
    pub tier: i16,
}
impl Meta {
    /// Whether this mount writes the metadata backup now (`jfs.backup_claim`):
    /// the backup's UTC time stamp if so.
    pub async fn backup_claim(&self, interval: std::time::Duration) -> Result<Option<String>> {
        let secs = interval.as_secs_f64();
        let row = self
            .call_one(
                "SELECT jfs.backup_claim(make_interval(secs => $1)) AS stamp",
                &[&secs],
            )
            .await?;
        Ok(row.try_get("stamp")?)
    }

    /// Gives back a claim whose backup failed (`jfs.backup_release`).
    pub async fn backup_release(&self, stamp: &str) -> Result<()> {
        self.call("SELECT jfs.backup_release($1)", &[&stamp])
            .await?;
        Ok(())
    }
}
