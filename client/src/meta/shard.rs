//! Shard procedures (sql/shard.sql): which shard a database is, the root's shard map, making a shard and a shard root.
use super::attr::{attr_from_row, check_errno};
use super::NodeType;
use super::{Attr, Meta, MetaError, Result};

/// Bits of an inode or slice id below its shard number.
pub const SHARD_SHIFT: u32 = 48;

/// The trash's inode names no shard (every shard's trash has it).
const NO_SHARD: u64 = 0x7FFF;

/// The shard an inode or slice id was made on (the trash's: None).
pub fn shard_of(id: u64) -> Option<u16> {
    match id >> SHARD_SHIFT {
        NO_SHARD => None,
        shard => Some(shard as u16),
    }
}

/// One row of the root's shard map (`jfs.shards()`).
#[derive(Debug, Clone)]
pub struct ShardEntry {
    pub number: u16,
    /// Where the shard is: a URL without credentials.
    pub url: String,
    pub added_at: std::time::SystemTime,
}

impl Meta {
    /// The shard of its volume this database is (0: the root, and any
    /// database of a release before shards).
    pub async fn shard_number(&self) -> Result<u16> {
        if !self.may_call("shard_number") {
            return Ok(0);
        }
        let row = self
            .call_one("SELECT jfs.shard_number() AS number", &[])
            .await?;
        Ok(row.try_get::<_, i32>("number")? as u16)
    }

    /// The volume's other shards, from its root database's map (none for
    /// a database of a release before shards).
    pub async fn shards(&self) -> Result<Vec<ShardEntry>> {
        if !self.may_call("shards") {
            return Ok(Vec::new());
        }
        let rows = self
            .call("SELECT number, url, added_at FROM jfs.shards()", &[])
            .await?;
        rows.iter()
            .map(|r| {
                Ok(ShardEntry {
                    number: r.try_get::<_, i32>("number")? as u16,
                    url: r.try_get("url")?,
                    added_at: r.try_get("added_at")?,
                })
            })
            .collect()
    }

    /// What tells this database apart from every other: its server's start
    /// time, its oid and its name (two URLs may name one database).
    pub async fn database_identity(&self) -> Result<String> {
        let row = self
            .call_one(
                "SELECT pg_catalog.pg_postmaster_start_time()::text || '/' || d.oid || '/' || d.datname AS id \
                   FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database()",
                &[],
            )
            .await?;
        Ok(row.try_get("id")?)
    }

    /// Makes this freshly formatted database shard `number` of volume
    /// `uuid` (`jfs.shard_init`): errno and message.
    pub async fn shard_init(&self, uuid: &str, number: u16) -> Result<(i32, String)> {
        let row = self
            .call_one(
                "SELECT errno, message FROM jfs.shard_init($1::text::uuid, $2)",
                &[&uuid, &(number as i32)],
            )
            .await?;
        Ok((row.try_get("errno")?, row.try_get("message")?))
    }

    /// Notes shard `number` at `url` in the root's map (`jfs.shard_add`):
    /// errno and message.
    pub async fn shard_add(&self, number: u16, url: &str) -> Result<(i32, String)> {
        let row = self
            .call_one(
                "SELECT errno, message FROM jfs.shard_add($1, $2)",
                &[&(number as i32), &url],
            )
            .await?;
        Ok((row.try_get("errno")?, row.try_get("message")?))
    }

    /// Step 1 of a shard root, on its shard (`jfs.shard_root_make`): a
    /// directory whose parent is `parent` of another shard; its inode.
    pub async fn shard_root_make(&self, parent: u64, mode: u32, uid: u32, gid: u32) -> Result<u64> {
        let row = self
            .call_one(
                "SELECT errno, inode FROM jfs.shard_root_make($1, $2, $3, $4)",
                &[
                    &(parent as i64),
                    &(mode as i32),
                    &(uid as i64),
                    &(gid as i64),
                ],
            )
            .await?;
        check_errno(&row)?;
        Ok(row.try_get::<_, i64>("inode")? as u64)
    }

    /// Entry `name` of `parent` (`jfs.lookup`): its attributes, or, for a
    /// shard root (its node on another shard), Err with the node's inode.
    pub async fn lookup_placed(
        &self,
        parent: u64,
        name: &[u8],
    ) -> Result<std::result::Result<Attr, u64>> {
        let row = self
            .call_one(
                "SELECT * FROM jfs.lookup($1, $2)",
                &[&(parent as i64), &name],
            )
            .await?;
        placed_from_row(&row)
    }

    /// Where node `inode` is from this database's entries (`jfs.place`):
    /// the topmost directory above it here (1: the volume's root; on a
    /// shard, the shard root its entries lead to) and its path below that.
    pub async fn place(&self, inode: u64) -> Result<(u64, String)> {
        let row = self
            .call_one("SELECT top, below FROM jfs.place($1)", &[&(inode as i64)])
            .await?;
        Ok((
            row.try_get::<_, Option<i64>>("top")?.unwrap_or(0) as u64,
            row.try_get::<_, Option<String>>("below")?
                .unwrap_or_default(),
        ))
    }

    /// Step 2 of a shard root, in its parent's database
    /// (`jfs.shard_root_link`): entry `name` of `parent` for `inode`.
    pub async fn shard_root_link(&self, parent: u64, name: &[u8], inode: u64) -> Result<()> {
        let row = self
            .call_one(
                "SELECT errno FROM jfs.shard_root_link($1, $2, $3)",
                &[&(parent as i64), &name, &(inode as i64)],
            )
            .await?;
        check_errno(&row)
    }
}

impl Meta {
    /// Step 1 of a directory of the gateway's own on this shard
    /// (`jfs.gateway_dir_make`): mode 0700, owned by `uid`:`gid`, below
    /// `parent` of the root's shard; its inode.
    pub async fn gateway_dir_make(&self, parent: u64, uid: u32, gid: u32) -> Result<u64> {
        let row = self
            .call_one(
                "SELECT errno, inode FROM jfs.gateway_dir_make($1, $2, $3)",
                &[&(parent as i64), &(uid as i64), &(gid as i64)],
            )
            .await?;
        check_errno(&row)?;
        Ok(row.try_get::<_, i64>("inode")? as u64)
    }

    /// Step 2, in the root's database (`jfs.gateway_dir_link`): entry
    /// `name` ("shard-N") of `parent` (a directory named .jfs-gateway) for
    /// `inode` of shard N.
    pub async fn gateway_dir_link(&self, parent: u64, name: &[u8], inode: u64) -> Result<()> {
        let row = self
            .call_one(
                "SELECT errno FROM jfs.gateway_dir_link($1, $2, $3)",
                &[&(parent as i64), &name, &(inode as i64)],
            )
            .await?;
        check_errno(&row)
    }
}

/// A `jfs.lookup` row: the entry's attributes, or, for a shard root (errno
/// 18 with the node's inode), Err with that inode.
pub(super) fn placed_from_row(row: &tokio_postgres::Row) -> Result<std::result::Result<Attr, u64>> {
    match row.try_get::<_, i32>("errno")? {
        libc::EXDEV => match row.try_get::<_, Option<i64>>("inode")? {
            Some(inode) => Ok(Err(inode as u64)),
            None => Err(MetaError::Errno(libc::EXDEV)),
        },
        _ => Ok(Ok(attr_from_row(row)?)),
    }
}

/// What a listing's row of a shard root says of it: its inode and type
/// (the rest is its shard's to give).
pub(super) fn placed_elsewhere(row: &tokio_postgres::Row) -> Result<Attr> {
    Ok(Attr {
        inode: row.try_get::<_, i64>("inode")? as u64,
        kind: NodeType::from_code(row.try_get("type")?),
        mode: 0,
        uid: 0,
        gid: 0,
        atime: 0,
        mtime: 0,
        ctime: 0,
        nlink: 1,
        length: 0,
        rdev: 0,
        parent: 0,
        tier: 0,
        used: 0,
    })
}

/// Removes shard root `inode` (on `shard`'s database), named `name` in
/// directory `parent` (in `here`, another database): the directory first,
/// only if empty (a create in it commits before, ENOTEMPTY, or finds it
/// gone), then its name. A crash between the two leaves a name of
/// nothing (mounts answer ENOENT for it), which this removes when called
/// again (`jfs shard rmdir`, `jfs shard fsck --repair`), never a directory
/// with files and no name.
pub async fn remove_shard_root(
    here: &Meta,
    parent: u64,
    name: &[u8],
    shard: &Meta,
    inode: u64,
) -> Result<()> {
    match shard.shard_root_remove(inode).await {
        Ok(()) | Err(MetaError::Errno(libc::ENOENT)) => {}
        Err(e) => return Err(e),
    }
    match here.shard_root_unlink(parent, name).await {
        // (an answer lost, and the name gone with the call sent again)
        Ok(()) | Err(MetaError::Errno(libc::ENOENT)) => Ok(()),
        Err(e) => Err(e),
    }
}

/// An entry of one database naming a directory of another shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardLink {
    pub parent: u64,
    pub name: Vec<u8>,
    pub inode: u64,
}

/// A directory of one database whose parent is on another shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardRoot {
    pub inode: u64,
    pub parent: u64,
    pub empty: bool,
}

impl Meta {
    /// This database's entries that name directories of other shards
    /// (`jfs.shard_links`).
    pub async fn shard_links(&self) -> Result<Vec<ShardLink>> {
        let rows = self
            .call("SELECT parent, name, inode FROM jfs.shard_links()", &[])
            .await?;
        rows.iter()
            .map(|r| {
                Ok(ShardLink {
                    parent: r.try_get::<_, i64>("parent")? as u64,
                    name: r.try_get("name")?,
                    inode: r.try_get::<_, i64>("inode")? as u64,
                })
            })
            .collect()
    }

    /// This database's directories whose parent is on another shard
    /// (`jfs.shard_roots`).
    pub async fn shard_roots(&self) -> Result<Vec<ShardRoot>> {
        let rows = self
            .call("SELECT inode, parent, empty FROM jfs.shard_roots()", &[])
            .await?;
        rows.iter()
            .map(|r| {
                Ok(ShardRoot {
                    inode: r.try_get::<_, i64>("inode")? as u64,
                    parent: r.try_get::<_, i64>("parent")? as u64,
                    empty: r.try_get("empty")?,
                })
            })
            .collect()
    }

    /// Removes entry `name` of `parent`, which names a directory of another
    /// shard (`jfs.shard_root_unlink`): the last step of
    /// [`remove_shard_root`].
    pub async fn shard_root_unlink(&self, parent: u64, name: &[u8]) -> Result<()> {
        let row = self
            .call_one(
                "SELECT errno FROM jfs.shard_root_unlink($1, $2)",
                &[&(parent as i64), &name],
            )
            .await?;
        check_errno(&row)
    }

    /// Removes the empty shard root `inode` of this shard
    /// (`jfs.shard_root_remove`): the first step of [`remove_shard_root`].
    pub async fn shard_root_remove(&self, inode: u64) -> Result<()> {
        let row = self
            .call_one(
                "SELECT errno FROM jfs.shard_root_remove($1)",
                &[&(inode as i64)],
            )
            .await?;
        check_errno(&row)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_names_its_shard_and_the_trash_names_none() {
        assert_eq!(shard_of(1), Some(0));
        assert_eq!(shard_of((1 << 48) - 1), Some(0));
        assert_eq!(shard_of((3 << 48) + 17), Some(3));
        assert_eq!(shard_of((32766 << 48) + 1), Some(32766));
        assert_eq!(shard_of(0x7FFF_FFFF_1000_0000), None);
    }
}
