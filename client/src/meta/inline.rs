//! Small files kept in the database: the volume's threshold, and what is kept.
use super::{Meta, Result};

/// What the database keeps of files' bytes (`jfs.inline_usage`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InlineUsage {
    pub slices: u64,
    /// Their bytes as stored (compressed, sealed).
    pub bytes: u64,
    pub files: u64,
    /// The volume's inline_max (bytes; 0: nothing new is kept).
    pub inline_max: u32,
}

impl Meta {
    /// Sets how long a file may be and keep its bytes in the database
    /// (`jfs.set_inline_max`, administration; 0: none); returns it.
    pub async fn set_inline_max(&self, bytes: u32) -> Result<u32> {
        let row = self
            .call_one("SELECT jfs.set_inline_max($1) AS max", &[&(bytes as i32)])
            .await?;
        Ok(row.try_get::<_, i32>("max")? as u32)
    }

    /// What the database keeps of files' bytes (`jfs.inline_usage`): slices,
    /// stored bytes and files; None before 0.2.32.
    pub async fn inline_usage(&self) -> Result<Option<InlineUsage>> {
        if !self.may_call("inline_usage") {
            return Ok(None);
        }
        let row = self
            .call_one("SELECT * FROM jfs.inline_usage()", &[])
            .await?;
        Ok(Some(InlineUsage {
            slices: row.try_get::<_, i64>("slices")? as u64,
            bytes: row.try_get::<_, i64>("bytes")? as u64,
            files: row.try_get::<_, i64>("files")? as u64,
            inline_max: row.try_get::<_, i32>("inline_max")? as u32,
        }))
    }
}
