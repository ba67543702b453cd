//! Inode and slice ids, reserved from the database in ranges
//! (`jfs.alloc_ids`), so that a create or a write takes one without a
//! round trip.
use crate::meta::Meta;

/// Ids of one kind reserved in ranges from the database.
pub struct IdRange {
    kind: &'static str,
    batch: i32,
    next_end: tokio::sync::Mutex<(u64, u64)>,
}

impl IdRange {
    pub(crate) fn new(kind: &'static str, batch: i32) -> IdRange {
        IdRange {
            kind,
            batch,
            next_end: tokio::sync::Mutex::new((0, 0)),
        }
    }

    pub(crate) async fn next(&self, meta: &Meta) -> Result<u64, i32> {
        let mut r = self.next_end.lock().await;
        if r.0 >= r.1 {
            let first = meta
                .alloc_ids(self.kind, self.batch)
                .await
                .map_err(|e| e.errno())?;
            *r = (first, first + self.batch as u64);
        }
        r.0 += 1;
        Ok(r.0 - 1)
    }
}
