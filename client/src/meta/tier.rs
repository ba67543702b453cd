//! Tier procedures: the id -> storage class mapping, a tree's tier, and the
//! files (with their slices) that `jfs tier` walks.
use super::{Meta, Result};

/// One slice of a file below a path (`jfs.tier_files`).
#[derive(Debug, Clone)]
pub struct TierSlice {
    pub inode: u64,
    pub tier: u8,
    /// The class the file's tier maps to ("" = the volume default).
    pub class: String,
    pub slice_id: u64,
    pub slice_size: u32,
}

impl Meta {
    /// The storage class of tier ids 0..3 ("" = the bucket's default).
    pub async fn tier_classes(&self) -> Result<[String; 4]> {
        let rows = self
            .call("SELECT id, storage_class FROM jfs.tier_classes()", &[])
            .await?;
        let mut classes: [String; 4] = Default::default();
        for r in rows {
            let id: i16 = r.try_get("id")?;
            if let Some(slot) = classes.get_mut(id as usize) {
                *slot = r.try_get("storage_class")?;
            }
        }
        Ok(classes)
    }

    /// Maps tier `id` to storage class `class` (`jfs.set_tier_class`).
    pub async fn set_tier_class(&self, id: i32, class: &str) -> Result<()> {
        self.call("SELECT 1 FROM jfs.set_tier_class($1, $2)", &[&id, &class])
            .await?;
        Ok(())
    }

    /// Sets the tier of the node at `path` (and below, with `recursive`);
    /// returns the nodes that changed (`jfs.set_tier`).
    pub async fn set_tier(&self, path: &str, id: i32, recursive: bool) -> Result<u64> {
        let row = self
            .call_one(
                "SELECT jfs.set_tier($1, $2, $3) AS changed",
                &[&path, &id, &recursive],
            )
            .await?;
        Ok(row.try_get::<_, i64>("changed")? as u64)
    }

    /// The files at or below `path` with their tier, class and slices.
    pub async fn tier_files(&self, path: &str, recursive: bool) -> Result<Vec<TierSlice>> {
        let rows = self
            .call("SELECT * FROM jfs.tier_files($1, $2)", &[&path, &recursive])
            .await?;
        rows.iter()
            .map(|r| {
                Ok(TierSlice {
                    inode: r.try_get::<_, i64>("inode")? as u64,
                    tier: r.try_get::<_, i16>("tier")? as u8,
                    class: r.try_get("storage_class")?,
                    slice_id: r.try_get::<_, i64>("slice_id")? as u64,
                    slice_size: r.try_get::<_, i32>("slice_size")? as u32,
                })
            })
            .collect()
    }

    /// The path of an inode, for messages (`jfs.path`).
    pub async fn path_of(&self, inode: u64) -> Result<Option<String>> {
        let row = self
            .call_one("SELECT jfs.path($1) AS path", &[&(inode as i64)])
            .await?;
        Ok(row.try_get("path")?)
    }
}
