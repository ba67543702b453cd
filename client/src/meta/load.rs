//! Load procedures: a dump staged by binary COPY into `jfs.load_begin`'s tables and moved in set by set, in one transaction (`jfs load`).
use tokio_postgres::binary_copy::BinaryCopyInWriter;
use tokio_postgres::types::{ToSql, Type};

use super::dump::{AclRow, InTransaction, NodeRow};
use super::{check_errno, Meta, MetaError, Result};

impl Meta {
    /// Starts a load: a transaction with the staging tables (`jfs.load_begin`).
    pub async fn load_begin(&self) -> Result<Loader> {
        let tx = InTransaction::begin(self, "BEGIN; SELECT jfs.load_begin()").await?;
        Ok(Loader { tx })
    }
}

/// A slice row: `ord` is its place in its chunk's list.
#[derive(Debug, Clone, Default)]
pub struct StagedSlice {
    pub inode: i64,
    pub chunk_index: i32,
    pub ord: i32,
    pub id: i64,
    pub size: i32,
    pub off: i32,
    pub len: i32,
    pub pos: i32,
}

/// Rows waiting to be copied into the staging tables.
#[derive(Debug, Default)]
pub struct Staged {
    pub nodes: Vec<NodeRow>,
    /// (parent, name, inode)
    pub edges: Vec<(i64, Vec<u8>, i64)>,
    pub slices: Vec<StagedSlice>,
    pub symlinks: Vec<(i64, Vec<u8>)>,
    /// (inode, name, value)
    pub xattrs: Vec<(i64, Vec<u8>, Vec<u8>)>,
    pub acls: Vec<(i64, AclRow)>,
    /// (kind, key, max space, max inodes)
    pub quotas: Vec<(String, i64, i64, i64)>,
}

impl Staged {
    /// Rows held.
    pub fn len(&self) -> usize {
        self.nodes.len()
            + self.edges.len()
            + self.slices.len()
            + self.symlinks.len()
            + self.xattrs.len()
            + self.acls.len()
            + self.quotas.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What a load asks `jfs.load_staged` to do besides moving the rows.
#[derive(Debug, Clone)]
pub struct LoadRequest {
    pub force: bool,
    pub name: String,
    pub uuid: Option<String>,
    pub storage: String,
    pub bucket: String,
    pub block_size: i32,
    pub trash_days: i32,
    pub capacity: i64,
    pub inodes: i64,
    pub next_inode: i64,
    pub next_slice: i64,
    pub enable_acl: bool,
    /// How the volume's blocks are compressed (none, lz4, zstd).
    pub compression: String,
    /// The RSA key (PEM) and algorithm that seal its objects, if they are.
    pub encryption: Option<(String, String)>,
}

/// What `jfs.load_staged` moved.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub nodes: i64,
    pub entries: i64,
    pub slices: i64,
}

/// A load's transaction and its staging tables.
pub struct Loader {
    tx: InTransaction,
}

impl Loader {
    /// Copies `rows` into one staging table (binary COPY).
    async fn copy<R>(
        &self,
        table: &str,
        types: &[Type],
        rows: &[R],
        write: impl Fn(&R) -> Vec<Box<dyn ToSql + Sync + Send + '_>>,
    ) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let sink = self
            .tx
            .client()
            .copy_in(&format!("COPY pg_temp.{table} FROM STDIN (FORMAT binary)"))
            .await?;
        let writer = BinaryCopyInWriter::new(sink, types);
        futures_util::pin_mut!(writer);
        for r in rows {
            let values = write(r);
            let refs: Vec<&(dyn ToSql + Sync)> = values
                .iter()
                .map(|v| v.as_ref() as &(dyn ToSql + Sync))
                .collect();
            writer.as_mut().write(&refs).await?;
        }
        writer.finish().await?;
        Ok(())
    }

    /// Copies what `staged` holds into the staging tables and empties it.
    pub async fn stage(&self, staged: &mut Staged) -> Result<()> {
        use Type as T;
        self.copy(
            "load_node",
            &[
                T::INT8,
                T::INT2,
                T::INT4,
                T::INT8,
                T::INT8,
                T::INT8,
                T::INT8,
                T::INT8,
                T::INT4,
                T::INT8,
                T::INT8,
                T::INT2,
            ],
            &staged.nodes,
            |n| {
                vec![
                    Box::new(n.inode),
                    Box::new(n.kind),
                    Box::new(n.mode),
                    Box::new(n.uid),
                    Box::new(n.gid),
                    Box::new(n.atime),
                    Box::new(n.mtime),
                    Box::new(n.ctime),
                    Box::new(n.nlink),
                    Box::new(n.length),
                    Box::new(n.rdev),
                    Box::new(n.tier),
                ]
            },
        )
        .await?;
        self.copy(
            "load_edge",
            &[T::INT8, T::BYTEA, T::INT8],
            &staged.edges,
            |e| vec![Box::new(e.0), Box::new(&e.1[..]), Box::new(e.2)],
        )
        .await?;
        self.copy(
            "load_slice",
            &[
                T::INT8,
                T::INT4,
                T::INT4,
                T::INT8,
                T::INT4,
                T::INT4,
                T::INT4,
                T::INT4,
            ],
            &staged.slices,
            |s| {
                vec![
                    Box::new(s.inode),
                    Box::new(s.chunk_index),
                    Box::new(s.ord),
                    Box::new(s.id),
                    Box::new(s.size),
                    Box::new(s.off),
                    Box::new(s.len),
                    Box::new(s.pos),
                ]
            },
        )
        .await?;
        self.copy(
            "load_symlink",
            &[T::INT8, T::BYTEA],
            &staged.symlinks,
            |s| vec![Box::new(s.0), Box::new(&s.1[..])],
        )
        .await?;
        self.copy(
            "load_xattr",
            &[T::INT8, T::BYTEA, T::BYTEA],
            &staged.xattrs,
            |x| vec![Box::new(x.0), Box::new(&x.1[..]), Box::new(&x.2[..])],
        )
        .await?;
        self.copy(
            "load_acl",
            &[T::INT8, T::TEXT, T::INT2, T::INT8, T::INT2],
            &staged.acls,
            |(inode, a)| {
                vec![
                    Box::new(*inode),
                    Box::new(a.kind.to_string()),
                    Box::new(a.tag),
                    Box::new(a.qualifier),
                    Box::new(a.perm),
                ]
            },
        )
        .await?;
        self.copy(
            "load_quota",
            &[T::TEXT, T::INT8, T::INT8, T::INT8],
            &staged.quotas,
            |q| {
                vec![
                    Box::new(&q.0[..]),
                    Box::new(q.1),
                    Box::new(q.2),
                    Box::new(q.3),
                ]
            },
        )
        .await?;
        *staged = Staged::default();
        Ok(())
    }

    /// Moves the staged rows into the volume (`jfs.load_staged`) and commits;
    /// rolls back when the procedure refuses (its errno and message).
    pub async fn finish(self, r: &LoadRequest) -> anyhow::Result<Loaded> {
        let uuid = r.uuid.clone().unwrap_or_default();
        let row = self
            .tx
            .client()
            .query_one(
                "SELECT errno, message, nodes, entries, slices FROM jfs.load_staged($1, $2, \
                 nullif($3, '')::uuid, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)",
                &[
                    &r.force,
                    &r.name,
                    &uuid,
                    &r.storage,
                    &r.bucket,
                    &r.block_size,
                    &r.trash_days,
                    &r.capacity,
                    &r.inodes,
                    &r.next_inode,
                    &r.next_slice,
                    &r.enable_acl,
                    &r.compression,
                    &r.encryption.as_ref().map(|e| e.1.as_str()),
                    &r.encryption.as_ref().map(|e| e.0.as_str()),
                ],
            )
            .await
            .map_err(MetaError::from)?;
        if check_errno(&row).is_err() {
            let message: Option<String> = row.try_get("message").map_err(MetaError::from)?;
            self.tx
                .client()
                .batch_execute("ROLLBACK")
                .await
                .map_err(MetaError::from)?;
            anyhow::bail!(
                "{}",
                message.unwrap_or_else(|| "the load was refused".into())
            );
        }
        let loaded = Loaded {
            nodes: row.try_get("nodes").map_err(MetaError::from)?,
            entries: row.try_get("entries").map_err(MetaError::from)?,
            slices: row.try_get("slices").map_err(MetaError::from)?,
        };
        self.tx
            .client()
            .batch_execute("COMMIT")
            .await
            .map_err(MetaError::from)?;
        Ok(loaded)
    }
}
