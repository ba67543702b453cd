//! POSIX ACL xattrs (`system.posix_acl_access`, `system.posix_acl_default`)
//! in the kernel's binary format, parsed into entries and written back.
//!
//! On a volume with ACLs on (`jfs format --enable-acl`) they are stored as
//! rows (sql/acl.sql) and the kernel enforces them. Without, an access ACL
//! equivalent to a mode sets the mode and anything more is refused with
//! EOPNOTSUPP, never stored as a plain xattr: `cp -a`, `cp -p` and
//! `rsync -A` set permissions by writing the access ACL (libacl's
//! `acl_set_fd`), and storing it as an ordinary xattr made them believe the
//! mode was set while it stayed 0600/0700.
use crate::meta::{
    AclEntry, AclKind, TAG_GROUP, TAG_GROUP_OBJ, TAG_MASK, TAG_OTHER, TAG_USER, TAG_USER_OBJ,
};

/// The xattr of a node's access ACL.
pub const ACCESS: &[u8] = b"system.posix_acl_access";
/// The xattr of a directory's default ACL.
pub const DEFAULT: &[u8] = b"system.posix_acl_default";

/// The version in the header of the kernel's ACL xattr format.
const XATTR_VERSION: u32 = 2;
/// The id of the entries that name no user or group.
const UNDEFINED_ID: u32 = u32::MAX;

/// Whether `name` is one of the POSIX ACL xattrs.
pub fn is_acl(name: &[u8]) -> bool {
    name == ACCESS || name == DEFAULT
}

/// The ACL an xattr name stands for.
pub fn kind_of(name: &[u8]) -> AclKind {
    if name == DEFAULT {
        AclKind::Default
    } else {
        AclKind::Access
    }
}

/// The entries of an ACL xattr value; None when it is not one (the
/// procedure checks the rules an ACL must follow).
pub fn parse(value: &[u8]) -> Option<Vec<AclEntry>> {
    let (header, entries) = value.split_first_chunk::<4>()?;
    if u32::from_le_bytes(*header) != XATTR_VERSION || entries.len() % 8 != 0 {
        return None;
    }
    entries
        .chunks_exact(8)
        .map(|e| {
            let tag = u16::from_le_bytes([e[0], e[1]]);
            let perm = u16::from_le_bytes([e[2], e[3]]);
            let id = u32::from_le_bytes([e[4], e[5], e[6], e[7]]);
            let named = matches!(tag, TAG_USER | TAG_GROUP);
            let known = named || matches!(tag, TAG_USER_OBJ | TAG_GROUP_OBJ | TAG_MASK | TAG_OTHER);
            (known && perm <= 7).then_some(AclEntry {
                tag,
                id: named.then_some(id),
                perm,
            })
        })
        .collect()
}

/// The xattr value of an ACL (entries sorted by tag and id, as stored).
pub fn to_xattr(entries: &[AclEntry]) -> Vec<u8> {
    let mut v = Vec::with_capacity(4 + 8 * entries.len());
    v.extend_from_slice(&XATTR_VERSION.to_le_bytes());
    for e in entries {
        v.extend_from_slice(&e.tag.to_le_bytes());
        v.extend_from_slice(&e.perm.to_le_bytes());
        v.extend_from_slice(&e.id.unwrap_or(UNDEFINED_ID).to_le_bytes());
    }
    v
}

/// The permission bits (0o777) an access ACL stands for, if it holds only
/// the owner, group and other entries (a "minimal" ACL, POSIX 1003.1e);
/// None for a malformed ACL or one with named users, groups or a mask.
pub fn minimal_acl_mode(value: &[u8]) -> Option<u32> {
    let (header, entries) = value.split_first_chunk::<4>()?;
    if u32::from_le_bytes(*header) != XATTR_VERSION || entries.len() % 8 != 0 {
        return None;
    }
    let (mut user, mut group, mut other) = (None, None, None);
    for entry in entries.chunks_exact(8) {
        let tag = u16::from_le_bytes([entry[0], entry[1]]);
        let perm = u16::from_le_bytes([entry[2], entry[3]]) as u32;
        if perm > 7 {
            return None;
        }
        let slot = match tag {
            TAG_USER_OBJ => &mut user,
            TAG_GROUP_OBJ => &mut group,
            TAG_OTHER => &mut other,
            _ => return None,
        };
        if slot.replace(perm).is_some() {
            return None;
        }
    }
    Some(user? << 6 | group? << 3 | other?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(entries: &[(u16, u16, u32)]) -> Vec<u8> {
        let mut v = XATTR_VERSION.to_le_bytes().to_vec();
        for (tag, perm, id) in entries {
            v.extend_from_slice(&tag.to_le_bytes());
            v.extend_from_slice(&perm.to_le_bytes());
            v.extend_from_slice(&id.to_le_bytes());
        }
        v
    }

    #[test]
    fn a_minimal_acl_is_a_mode() {
        let minimal = acl(&[
            (0x01, 6, u32::MAX),
            (0x04, 4, u32::MAX),
            (0x20, 4, u32::MAX),
        ]);
        assert_eq!(minimal_acl_mode(&minimal), Some(0o644));
        let dir = acl(&[
            (0x01, 7, u32::MAX),
            (0x04, 5, u32::MAX),
            (0x20, 0, u32::MAX),
        ]);
        assert_eq!(minimal_acl_mode(&dir), Some(0o750));
    }

    #[test]
    fn an_acl_parses_and_writes_back_the_same_bytes() {
        let value = acl(&[
            (0x01, 6, u32::MAX),
            (0x02, 6, 1000),
            (0x04, 4, u32::MAX),
            (0x08, 5, 100),
            (0x10, 7, u32::MAX),
            (0x20, 0, u32::MAX),
        ]);
        let entries = parse(&value).unwrap();
        assert_eq!(
            entries[1],
            AclEntry {
                tag: 2,
                id: Some(1000),
                perm: 6
            }
        );
        assert_eq!(entries[0].id, None);
        assert_eq!(to_xattr(&entries), value);
        assert_eq!(parse(&acl(&[(0x40, 6, 0)])), None);
        assert_eq!(parse(&acl(&[(0x01, 8, u32::MAX)])), None);
        assert_eq!(parse(b"nope"), None);
        assert_eq!(kind_of(DEFAULT), AclKind::Default);
        assert_eq!(kind_of(ACCESS), AclKind::Access);
    }

    #[test]
    fn named_entries_a_mask_or_garbage_are_not() {
        let named = acl(&[
            (0x01, 6, u32::MAX),
            (0x02, 6, 1000),
            (0x04, 4, u32::MAX),
            (0x10, 6, u32::MAX),
            (0x20, 4, u32::MAX),
        ]);
        assert_eq!(minimal_acl_mode(&named), None);
        assert_eq!(minimal_acl_mode(&acl(&[(0x01, 6, 0), (0x04, 4, 0)])), None);
        assert_eq!(minimal_acl_mode(b"junk"), None);
        assert_eq!(minimal_acl_mode(&[]), None);
    }
}
