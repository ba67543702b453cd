//! Byte ranges of a file (sql/range.sql): zero_range, seek_data, copy_range.
use super::{attr_from_row, check_errno, Attr, Meta, Result};

/// What `jfs.copy_range` did: bytes copied and the destination's length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Copied {
    pub bytes: u64,
    pub length: u64,
}

impl Meta {
    /// Makes `length` bytes of `inode` from `offset` read as zeros (punch a
    /// hole, zero a range); without `keep_size` the file may grow.
    pub async fn zero_range(
        &self,
        inode: u64,
        offset: u64,
        length: u64,
        keep_size: bool,
    ) -> Result<Attr> {
        let row = self
            .call_one(
                "SELECT * FROM jfs.zero_range($1, $2, $3, $4)",
                &[
                    &(inode as i64),
                    &(offset as i64),
                    &(length as i64),
                    &keep_size,
                ],
            )
            .await?;
        attr_from_row(&row)
    }

    /// SEEK_DATA (`hole` false) or SEEK_HOLE from `offset`: where the next
    /// data (or hole) starts; `Errno(ENXIO)` when there is none.
    pub async fn seek_data(&self, inode: u64, offset: u64, hole: bool) -> Result<u64> {
        let row = self
            .call_one(
                "SELECT * FROM jfs.seek_data($1, $2, $3)",
                &[&(inode as i64), &(offset as i64), &hole],
            )
            .await?;
        check_errno(&row)?;
        Ok(row.try_get::<_, i64>("found_at")? as u64)
    }

    /// copy_file_range as metadata: `length` bytes of `src` from
    /// `src_offset` (cut at its end) appear at `dst_offset` of `dst`,
    /// sharing the source's slices.
    pub async fn copy_range(
        &self,
        src: u64,
        src_offset: u64,
        dst: u64,
        dst_offset: u64,
        length: u64,
    ) -> Result<Copied> {
        let row = self
            .call_one(
                "SELECT * FROM jfs.copy_range($1, $2, $3, $4, $5)",
                &[
                    &(src as i64),
                    &(src_offset as i64),
                    &(dst as i64),
                    &(dst_offset as i64),
                    &(length as i64),
                ],
            )
            .await?;
        check_errno(&row)?;
        Ok(Copied {
            bytes: row.try_get::<_, i64>("copied")? as u64,
            length: row.try_get::<_, i64>("length")? as u64,
        })
    }
}
