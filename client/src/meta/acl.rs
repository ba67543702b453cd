//! POSIX ACL procedures (sql/acl.sql): get_acl, set_acl, enable_acl.
use super::{check_errno, Meta, Result};

/// Which of a node's ACLs: the access ACL or a directory's default ACL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AclKind {
    Access,
    Default,
}

impl AclKind {
    /// The kind as sql/acl.sql names it.
    fn code(self) -> i8 {
        match self {
            AclKind::Access => b'a' as i8,
            AclKind::Default => b'd' as i8,
        }
    }
}

/// ACL entry tags, as in the kernel's xattr format and table `jfs.acl`.
pub const TAG_USER_OBJ: u16 = 0x01;
pub const TAG_USER: u16 = 0x02;
pub const TAG_GROUP_OBJ: u16 = 0x04;
pub const TAG_GROUP: u16 = 0x08;
pub const TAG_MASK: u16 = 0x10;
pub const TAG_OTHER: u16 = 0x20;

/// One ACL entry: tag as in the kernel's xattr format, the uid or gid of a
/// named entry (None for the others), permission bits rwx.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AclEntry {
    pub tag: u16,
    pub id: Option<u32>,
    pub perm: u16,
}

impl Meta {
    /// The node's ACL of `kind`, sorted by tag and id; ENODATA when it has
    /// none beyond its mode, EOPNOTSUPP when the volume has ACLs off.
    pub async fn get_acl(&self, inode: u64, kind: AclKind) -> Result<Vec<AclEntry>> {
        let row = self
            .call_one(
                "SELECT * FROM jfs.get_acl($1, $2)",
                &[&(inode as i64), &kind.code()],
            )
            .await?;
        check_errno(&row)?;
        let tags: Vec<i16> = row.try_get("tags")?;
        let ids: Vec<i64> = row.try_get("ids")?;
        let perms: Vec<i16> = row.try_get("perms")?;
        Ok(tags
            .iter()
            .zip(ids)
            .zip(perms)
            .map(|((&tag, id), perm)| AclEntry {
                tag: tag as u16,
                id: u32::try_from(id).ok(),
                perm: perm as u16,
            })
            .collect())
    }

    /// Sets the node's ACL of `kind` (None removes it); an access ACL sets
    /// the mode's permission bits.
    pub async fn set_acl(&self, inode: u64, kind: AclKind, acl: Option<&[AclEntry]>) -> Result<()> {
        let (tags, ids, perms): (Option<Vec<i16>>, Vec<i64>, Vec<i16>) = match acl {
            Some(entries) => (
                Some(entries.iter().map(|e| e.tag as i16).collect()),
                entries.iter().map(|e| e.id.map_or(-1, i64::from)).collect(),
                entries.iter().map(|e| e.perm as i16).collect(),
            ),
            None => (None, Vec::new(), Vec::new()),
        };
        let row = self
            .call_one(
                "SELECT jfs.set_acl($1, $2, $3, $4, $5) AS errno",
                &[&(inode as i64), &kind.code(), &tags, &ids, &perms],
            )
            .await?;
        check_errno(&row)
    }

    /// Turns POSIX ACLs on for the volume; whether they were off.
    pub async fn enable_acl(&self) -> Result<bool> {
        let row = self
            .call_one("SELECT jfs.enable_acl() AS changed", &[])
            .await?;
        Ok(row.try_get("changed")?)
    }
}
