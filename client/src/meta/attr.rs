//! Nodes as the procedures return them: the node types and `jfs.attr` rows, and times in nanoseconds.
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio_postgres::Row;

use super::{MetaError, Result};

/// Node types, numbered as in `sql/schema.sql` (JuiceFS's numbering).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeType {
    File = 1,
    Dir = 2,
    Symlink = 3,
    Fifo = 4,
    BlockDev = 5,
    CharDev = 6,
    Socket = 7,
}

impl NodeType {
    pub fn from_code(code: i16) -> NodeType {
        match code {
            2 => NodeType::Dir,
            3 => NodeType::Symlink,
            4 => NodeType::Fifo,
            5 => NodeType::BlockDev,
            6 => NodeType::CharDev,
            7 => NodeType::Socket,
            _ => NodeType::File,
        }
    }
}

/// A node's attributes as the procedures return them (`jfs.attr`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attr {
    pub inode: u64,
    pub kind: NodeType,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    /// Nanoseconds since the Unix epoch.
    pub atime: i64,
    pub mtime: i64,
    pub ctime: i64,
    pub nlink: u32,
    pub length: u64,
    pub rdev: u32,
    pub parent: u64,
    /// Storage tier (0 = the volume default, 1..3 = jfs.tier).
    pub tier: u8,
    /// A file's bytes that show data (its slices, holes left out).
    pub used: u64,
}

/// Nanoseconds since the epoch as a `SystemTime` (negative = before 1970).
pub fn ns_to_time(ns: i64) -> SystemTime {
    if ns >= 0 {
        UNIX_EPOCH + Duration::from_nanos(ns as u64)
    } else {
        UNIX_EPOCH - Duration::from_nanos(ns.unsigned_abs())
    }
}

/// A `SystemTime` as nanoseconds since the epoch (exact where an i64
/// holds it, the nearest end of that range beyond).
pub fn time_to_ns(t: SystemTime) -> i64 {
    let ns = match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_nanos() as i128,
        Err(e) => -(e.duration().as_nanos() as i128),
    };
    ns.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

/// Turns an errno column into an error.
pub(super) fn check_errno(row: &Row) -> Result<()> {
    let errno: i32 = row.try_get("errno")?;
    if errno != 0 {
        return Err(MetaError::Errno(errno));
    }
    Ok(())
}

/// Reads a `jfs.attr`-shaped row (errno checked first).
pub(super) fn attr_from_row(row: &Row) -> Result<Attr> {
    check_errno(row)?;
    Ok(Attr {
        inode: row.try_get::<_, i64>("inode")? as u64,
        kind: NodeType::from_code(row.try_get("type")?),
        mode: row.try_get::<_, i32>("mode")? as u32,
        uid: row.try_get::<_, i64>("uid")? as u32,
        gid: row.try_get::<_, i64>("gid")? as u32,
        atime: row.try_get("atime")?,
        mtime: row.try_get("mtime")?,
        ctime: row.try_get("ctime")?,
        nlink: row.try_get::<_, i32>("nlink")? as u32,
        length: row.try_get::<_, i64>("length")? as u64,
        rdev: row.try_get::<_, i64>("rdev")? as u32,
        parent: row.try_get::<_, i64>("parent")? as u64,
        tier: row.try_get::<_, Option<i16>>("tier")?.unwrap_or(0) as u8,
        used: row.try_get::<_, Option<i64>>("used")?.unwrap_or(0).max(0) as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_round_trip_to_the_ends_of_an_i64_and_clamp_beyond() {
        for ns in [
            i64::MIN,
            i64::MIN + 1,
            -1_000_000_001,
            -1,
            0,
            1,
            i64::MAX - 1,
            i64::MAX,
        ] {
            assert_eq!(time_to_ns(ns_to_time(ns)), ns, "{ns}");
        }
        let past = ns_to_time(i64::MIN) - Duration::from_secs(1);
        assert_eq!(time_to_ns(past), i64::MIN);
        let future = ns_to_time(i64::MAX) + Duration::from_secs(1);
        assert_eq!(time_to_ns(future), i64::MAX);
    }
}
