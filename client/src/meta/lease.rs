//! Directory leases (sql/lease.sql): take_lease, lease_unlink, want_lease.
use super::{check_errno, Meta, NodeType, Result};

/// An entry of a leased directory, as the lease found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeasedEntry {
    pub inode: u64,
    pub kind: NodeType,
    pub nlink: u32,
}

impl Meta {
    /// Takes directory `dir`'s lease for session `sid`: its entries (name
    /// order), or the errno saying why not (EAGAIN: another session holds
    /// it and was asked for it; EFBIG: more than `limit` entries).
    pub async fn take_lease(
        &self,
        sid: i64,
        dir: u64,
        limit: i32,
    ) -> Result<Vec<(Vec<u8>, LeasedEntry)>> {
        let row = self
            .call_one(
                "SELECT * FROM jfs.take_lease($1, $2, $3)",
                &[&sid, &(dir as i64), &limit],
            )
            .await?;
        check_errno(&row)?;
        let names: Vec<Vec<u8>> = row.try_get("names")?;
        let inodes: Vec<i64> = row.try_get("inodes")?;
        let types: Vec<i16> = row.try_get("types")?;
        let nlinks: Vec<i32> = row.try_get("nlinks")?;
        Ok(names
            .into_iter()
            .zip(inodes)
            .zip(types.into_iter().zip(nlinks))
            .map(|((name, inode), (kind, nlink))| {
                let entry = LeasedEntry {
                    inode: inode as u64,
                    kind: NodeType::from_code(kind),
                    nlink: nlink.max(0) as u32,
                };
                (name, entry)
            })
            .collect())
    }

    /// Commits unlinks answered under directory `dir`'s lease: each name is
    /// removed while it names its inode (`open`: the inodes this session
    /// has open). The lease is kept if `keep` and nobody asked for it.
    /// Returns an errno per name (0, or ENOENT: it named another node or
    /// none by then) and whether the lease is still held.
    pub async fn lease_unlink(
        &self,
        sid: i64,
        dir: u64,
        names: &[Vec<u8>],
        inodes: &[i64],
        open: &[i64],
        keep: bool,
    ) -> Result<(Vec<i32>, bool)> {
        let row = self
            .call_one(
                "SELECT * FROM jfs.lease_unlink($1, $2, $3, $4, $5, $6)",
                &[&sid, &(dir as i64), &names, &inodes, &open, &keep],
            )
            .await?;
        Ok((row.try_get("errnos")?, row.try_get("kept")?))
    }

    /// Asks for directory `dir`'s lease after a call was refused for it;
    /// true when it is free now.
    pub(super) async fn want_lease(&self, dir: u64) -> Result<bool> {
        let row = self
            .call_one("SELECT jfs.want_lease($1)", &[&(dir as i64)])
            .await?;
        Ok(row.try_get(0)?)
    }
}
