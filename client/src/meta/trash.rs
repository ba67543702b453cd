//! Trash procedures: purge expired hours, restore entries (for mounts and `jfs restore`).
use super::{Meta, Result};

/// One entry `jfs.restore` tried to put back.
#[derive(Debug, Clone)]
pub struct Restored {
    pub hour: String,
    pub path: String,
    /// 0 restored, else why not (ENOENT: its directory is gone, EEXIST: the name is taken).
    pub errno: i32,
}

impl Meta {
    /// Removes trash hours older than the volume's trash days, at most
    /// `limit` entries; returns how many went.
    pub async fn trash_purge(&self, limit: i32) -> Result<u64> {
        let row = self
            .call_one("SELECT jfs.trash_purge($1) AS removed", &[&limit])
            .await?;
        Ok(row.try_get::<_, i64>("removed")? as u64)
    }

    /// Puts trash entries back (all, or those of one hour "YYYY-MM-DD-HH").
    pub async fn restore(&self, hour: Option<&str>) -> Result<Vec<Restored>> {
        let rows = self
            .call("SELECT hour, path, errno FROM jfs.restore($1)", &[&hour])
            .await?;
        rows.iter()
            .map(|r| {
                Ok(Restored {
                    hour: r.try_get("hour")?,
                    path: r.try_get("path")?,
                    errno: r.try_get("errno")?,
                })
            })
            .collect()
    }
}
