//! Checking procedures: the invariant checker, its repair, and the live slices (for `jfs fsck`).
use super::{Meta, Result};

/// A broken invariant `jfs.fsck()` found.
#[derive(Debug, Clone)]
pub struct Problem {
    pub problem: String,
    pub inode: Option<i64>,
    pub detail: String,
}

impl Meta {
    /// Every broken invariant (`jfs.fsck()`).
    pub async fn fsck(&self) -> Result<Vec<Problem>> {
        let rows = self
            .call("SELECT problem, inode, detail FROM jfs.fsck()", &[])
            .await?;
        rows.iter()
            .map(|r| {
                Ok(Problem {
                    problem: r.try_get("problem")?,
                    inode: r.try_get("inode")?,
                    detail: r
                        .try_get::<_, Option<String>>("detail")?
                        .unwrap_or_default(),
                })
            })
            .collect()
    }

    /// Rebuilds what follows from the namespace (`jfs.fsck_repair()`): what
    /// it repaired and how many rows it changed.
    pub async fn fsck_repair(&self) -> Result<Vec<(String, i64)>> {
        let rows = self
            .call("SELECT repaired, changed FROM jfs.fsck_repair()", &[])
            .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("repaired")?, r.try_get("changed")?)))
            .collect()
    }

    /// Up to `limit` slices some file uses, after id `after` (`jfs.live_slices`): (id, size).
    pub async fn live_slices(&self, after: i64, limit: i32) -> Result<Vec<(i64, i32)>> {
        let rows = self
            .call(
                "SELECT slice_id, size FROM jfs.live_slices($1, $2)",
                &[&after, &limit],
            )
            .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("slice_id")?, r.try_get("size")?)))
            .collect()
    }
}
