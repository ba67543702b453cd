//! A mount's databases, one part per shard of its volume: each part has
//! its pool, its session, its id ranges and its change-log polls, and a
//! node's part is the one its inode's high bits name (`meta::shard_of`),
//! so routing costs no lookup. A volume without shards has one part.
use std::sync::atomic::{AtomicI64, Ordering};

use super::changes::LogPolls;
use super::ids::IdRange;
use super::ID_BATCH;
use crate::meta::{shard_of, Meta};

/// One database of the mount: a shard of its volume (the root's is 0).
pub struct Part {
    /// The shard number.
    pub number: u16,
    /// Its pool, with this mount's session on it.
    pub meta: Meta,
    sid: AtomicI64,
    inode_ids: IdRange,
    slice_ids: IdRange,
    /// Polls of its change log, for lock barriers.
    pub(super) polls: LogPolls,
    /// Where to reach it, while this mount has not (it was out of reach
    /// when the mount started: `meta` is pending, see `Meta::pending`).
    pub late_url: Option<String>,
}

impl Part {
    /// Shard `number` at `meta`, with this mount's session `sid` there (or
    /// `NO_SESSION`).
    pub fn new(number: u16, meta: Meta, sid: i64) -> Part {
        Part {
            number,
            meta,
            sid: AtomicI64::new(sid),
            inode_ids: IdRange::new("inode", ID_BATCH),
            slice_ids: IdRange::new("slice", ID_BATCH),
            polls: LogPolls::default(),
            late_url: None,
        }
    }

    /// Shard `number` at `url`, out of reach now: its client `meta` is
    /// pending, its session is registered once it is reached.
    pub fn late(number: u16, meta: Meta, url: String) -> Part {
        Part {
            late_url: Some(url),
            ..Part::new(number, meta, crate::ns::NO_SESSION)
        }
    }

    /// This mount's session on the shard.
    pub fn sid(&self) -> i64 {
        self.sid.load(Ordering::Relaxed)
    }

    /// The session was registered again (the old one was ended): the
    /// part's connections name it from now on.
    pub fn set_sid(&self, sid: i64) {
        self.meta.rename_session(sid);
        self.sid.store(sid, Ordering::Relaxed);
    }

    /// A new inode number of this mount's range on the shard.
    pub async fn new_inode(&self) -> Result<u64, i32> {
        self.inode_ids.next(&self.meta).await
    }

    /// A new slice id of this mount's range on the shard.
    pub async fn new_slice(&self) -> Result<u64, i32> {
        self.slice_ids.next(&self.meta).await
    }
}

/// The parts of a mount, the root's first.
pub struct Parts(Vec<Part>);

impl Parts {
    /// The parts `parts`, whose first is the root database (shard 0, or a
    /// volume without shards).
    pub fn new(parts: Vec<Part>) -> Parts {
        assert!(!parts.is_empty(), "a mount has at least its root database");
        Parts(parts)
    }

    /// The one part of a volume without shards.
    pub fn single(meta: Meta, sid: i64) -> Parts {
        Parts(vec![Part::new(0, meta, sid)])
    }

    /// The root database's part.
    pub fn root(&self) -> &Part {
        &self.0[0]
    }

    /// Every part, the root's first.
    pub fn all(&self) -> &[Part] {
        &self.0
    }

    /// The part that holds node or slice `id`. The trash's inode names no
    /// shard (the root's trash is the volume's), and a shard this mount
    /// did not know when it started (added since) goes to the root, which
    /// answers that it has no such node.
    pub fn of(&self, id: u64) -> &Part {
        self.index_of(id).map_or(&self.0[0], |i| &self.0[i])
    }

    /// The index of the part that holds `id`, if this mount has it.
    pub fn index_of(&self, id: u64) -> Option<usize> {
        position_of(self.0.iter().map(|p| p.number), id)
    }

    /// Whether `a` and `b` are held by one database.
    pub fn same(&self, a: u64, b: u64) -> bool {
        shard_of(a).unwrap_or(0) == shard_of(b).unwrap_or(0)
    }
}

/// Where, among shards `numbers`, the one that holds `id` is.
fn position_of(mut numbers: impl Iterator<Item = u16>, id: u64) -> Option<usize> {
    let number = shard_of(id).unwrap_or(0);
    numbers.position(|n| n == number)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::SHARD_SHIFT;

    #[test]
    fn an_id_is_routed_by_its_high_bits_and_the_trash_to_the_root() {
        let on = |shard: u64, n: u64| (shard << SHARD_SHIFT) + n;
        let numbers = [0u16, 2, 5];
        let at = |id| position_of(numbers.iter().copied(), id);
        assert_eq!(at(1), Some(0));
        assert_eq!(at(on(0, 1 << 40)), Some(0));
        assert_eq!(at(on(2, 7)), Some(1));
        assert_eq!(at(on(5, 1)), Some(2));
        // a shard added after the mount started: not one of its parts
        assert_eq!(at(on(3, 1)), None);
        // the trash (every shard has one; the root's is the volume's)
        assert_eq!(at(0x7FFF_FFFF_1000_0000), Some(0));
    }
}
