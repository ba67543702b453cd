//! The JuiceFS JSON dump format (`juicefs dump` / `juicefs load`, 1.x): its parts, the escaping of names, and the conversions between it and jfs's rows.
//!
//! A dump is one JSON object: `Setting` (the volume's format), `Counters`,
//! `Sustained`, `DelFiles`, `Quotas` (directory inode → limits; newer
//! JuiceFS also `UserQuotas` and `GroupQuotas`), then `FSTree` (the root's
//! entry, every directory's `entries` nested in it) and `Trash`. An entry
//! holds `attr` first (JuiceFS's loader needs it first), then `symlink`,
//! `xattrs`, `posix_acl_access`, `posix_acl_default`, `chunks` and, for a
//! directory, `entries`. A file with several names is written in full at
//! each. [`write`] streams a volume out in this form, [`read`] streams one in.
pub mod read;
pub mod write;

use serde::{Deserialize, Serialize};

use crate::meta::{
    AclRow, NodeRow, NodeType, TAG_GROUP, TAG_GROUP_OBJ, TAG_MASK, TAG_OTHER, TAG_USER,
    TAG_USER_OBJ,
};

/// The trash directory's inode (JuiceFS's TrashInode; jfs uses the same).
pub const TRASH_INODE: i64 = 0x7FFF_FFFF_1000_0000;

/// What a dump written without its secrets holds for an encrypted volume's
/// RSA key (`EncryptKey`), as JuiceFS writes it.
pub const REMOVED_KEY: &str = "removed";

/// The size of a chunk (`volume::layout::CHUNK_SIZE`), as the dump's offsets count.
const CHUNK_SIZE: i64 = crate::volume::layout::CHUNK_SIZE as i64;

/// The `Setting` object: JuiceFS's format, the fields jfs has (others are kept out).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct Setting {
    pub name: String,
    #[serde(rename = "UUID")]
    pub uuid: String,
    pub storage: String,
    pub bucket: String,
    /// KiB.
    pub block_size: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub capacity: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub inodes: i64,
    pub trash_days: i64,
    pub meta_version: i64,
    #[serde(rename = "EnableACL")]
    pub enable_acl: bool,
    /// How blocks are compressed (none, lz4, zstd; as typed).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub compression: String,
    /// The RSA key (PEM) that wraps objects' keys; with `key_encrypted`,
    /// JuiceFS's obfuscation of it (see [`Setting::encryption`]).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub encrypt_key: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub encrypt_algo: String,
    #[serde(skip_serializing_if = "is_false")]
    pub key_encrypted: bool,
    /// JuiceFS options jfs does not have: read to refuse a volume that uses them.
    #[serde(skip_serializing_if = "is_false")]
    pub hash_prefix: bool,
    #[serde(skip_serializing_if = "is_zero")]
    pub shards: i64,
}

impl Setting {
    /// Why jfs could not read this volume's blocks, if it could not.
    pub fn unsupported(&self) -> Option<String> {
        let what = if self.hash_prefix {
            "hash-prefixed object keys".to_string()
        } else if self.shards > 1 {
            format!("blocks sharded over {} buckets", self.shards)
        } else {
            return None;
        };
        Some(format!(
            "volume {:?} stores {what}, which jfs cannot read: its files would not read back; \
             copy the data instead (e.g. rsync from a JuiceFS mount to a jfs mount)",
            self.name
        ))
    }

    /// The RSA key (PEM, as given at format: possibly protected by a
    /// passphrase) and the algorithm that seal the volume's objects, if
    /// they are sealed. JuiceFS keeps the key obfuscated in its format
    /// (`KeyEncrypted`): AES-128-GCM under the MD5 of the volume's uuid,
    /// base64 of the nonce and the sealed text.
    pub fn encryption(&self) -> anyhow::Result<Option<(String, String)>> {
        if self.encrypt_key.is_empty() {
            return Ok(None);
        }
        anyhow::ensure!(
            self.encrypt_key != REMOVED_KEY,
            "volume {:?} is encrypted but its dump holds no key (dumped without its secrets): \
             dump it again with `jfs dump --keep-secret-key` (or JuiceFS's --keep-secret-key)",
            self.name
        );
        let algo = match self.encrypt_algo.as_str() {
            "" => "aes256gcm-rsa".to_string(),
            algo => algo.to_string(),
        };
        if !self.key_encrypted {
            return Ok(Some((self.encrypt_key.clone(), algo)));
        }
        use aes_gcm::aead::{Aead, KeyInit};
        use base64::Engine;
        use md5::Digest;
        let sealed = base64::engine::general_purpose::STANDARD
            .decode(self.encrypt_key.trim())
            .map_err(|e| anyhow::anyhow!("the dump's EncryptKey is not base64: {e}"))?;
        anyhow::ensure!(sealed.len() > 12, "the dump's EncryptKey is too short");
        let key = md5::Md5::digest(self.uuid.as_bytes());
        let cipher = aes_gcm::Aes128Gcm::new_from_slice(&key).expect("a 16-byte key");
        let pem = cipher
            .decrypt(sealed[..12].into(), &sealed[12..])
            .map_err(|_| {
                anyhow::anyhow!(
                    "the dump's EncryptKey does not open with its volume's uuid {} (KeyEncrypted)",
                    self.uuid
                )
            })?;
        let pem = String::from_utf8(pem)
            .map_err(|_| anyhow::anyhow!("the dump's EncryptKey is not a PEM text"))?;
        Ok(Some((pem, algo)))
    }
}

fn is_false(v: &bool) -> bool {
    !*v
}

/// The `Counters` object.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Counters {
    pub used_space: i64,
    pub used_inodes: i64,
    /// (JuiceFS spells it in the plural.)
    #[serde(rename = "nextInodes")]
    pub next_inode: i64,
    pub next_chunk: i64,
    pub next_session: i64,
    pub next_trash: i64,
}

/// A quota's limits (`Quotas`, `UserQuotas`, `GroupQuotas` values).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Quota {
    pub max_space: i64,
    pub max_inodes: i64,
}

/// An entry's `attr`: times in seconds plus nanoseconds.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Attr {
    pub inode: i64,
    #[serde(rename = "type")]
    pub kind: String,
    pub mode: i32,
    pub uid: i64,
    pub gid: i64,
    pub atime: i64,
    pub mtime: i64,
    pub ctime: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub atimensec: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub mtimensec: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub ctimensec: i64,
    pub nlink: i64,
    pub length: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub rdev: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub tier: i64,
}

impl Attr {
    /// The dump's form of a node's row (a directory's length is 0 in dumps).
    pub fn of_row(row: &NodeRow) -> Attr {
        let (atime, atimensec) = split_ns(row.atime);
        let (mtime, mtimensec) = split_ns(row.mtime);
        let (ctime, ctimensec) = split_ns(row.ctime);
        Attr {
            inode: row.inode,
            kind: type_name(row.kind).to_string(),
            mode: row.mode,
            uid: row.uid,
            gid: row.gid,
            atime,
            mtime,
            ctime,
            atimensec,
            mtimensec,
            ctimensec,
            nlink: i64::from(row.nlink),
            length: if row.kind == NodeType::Dir as i16 {
                0
            } else {
                row.length
            },
            rdev: row.rdev,
            tier: i64::from(row.tier),
        }
    }

    /// The node's row, as inode `inode` of type `kind` (the caller
    /// numbers inodes and reads the type name); values out of range are
    /// brought into it.
    pub fn to_row(&self, inode: i64, kind: i16) -> NodeRow {
        let ns = |s: i64, n: i64| s.saturating_mul(1_000_000_000).saturating_add(n);
        NodeRow {
            inode,
            kind,
            mode: self.mode & 0o7777,
            uid: self.uid,
            gid: self.gid,
            atime: ns(self.atime, self.atimensec),
            mtime: ns(self.mtime, self.mtimensec),
            ctime: ns(self.ctime, self.ctimensec),
            nlink: self.nlink.clamp(0, i64::from(i32::MAX)) as i32,
            length: self.length,
            rdev: self.rdev,
            tier: self.tier.clamp(0, 3) as i16,
        }
    }
}

/// A slice of a chunk (`id` 0 is a hole; `chunkid` is the name dumps before JuiceFS 1.1 used).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Slice {
    pub chunkid: i64,
    pub id: i64,
    pub pos: i64,
    pub size: i64,
    pub off: i64,
    pub len: i64,
}

/// A chunk and its slices, in write order.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Chunk {
    pub index: i64,
    pub slices: Vec<Slice>,
}

/// An extended attribute (the value %-escaped, the name not).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Xattr {
    pub name: String,
    pub value: String,
}

/// A named user's or group's permissions in an ACL.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct AclNamed {
    pub id: i64,
    pub perm: i16,
}

/// A POSIX ACL (`posix_acl_access` / `posix_acl_default`); a mask above 7 is none.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Acl {
    pub owner: i16,
    pub group: i16,
    pub other: i16,
    pub mask: i32,
    pub users: Option<Vec<AclNamed>>,
    pub groups: Option<Vec<AclNamed>>,
}

/// JuiceFS's masks means "no mask" with all bits set.
const NO_MASK: i32 = 0xFFFF;

/// An ACL tag (`crate::meta::TAG_*`) as `jfs.acl` stores it.
fn tag(t: u16) -> i16 {
    t as i16
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}

/// The dump's name of a node type.
pub fn type_name(kind: i16) -> &'static str {
    match NodeType::from_code(kind) {
        NodeType::File => "regular",
        NodeType::Dir => "directory",
        NodeType::Symlink => "symlink",
        NodeType::Fifo => "fifo",
        NodeType::BlockDev => "blockdev",
        NodeType::CharDev => "chardev",
        NodeType::Socket => "socket",
    }
}

/// The node type a dump's type name stands for.
pub fn type_code(name: &str) -> Option<i16> {
    Some(match name {
        "regular" => NodeType::File as i16,
        "directory" => NodeType::Dir as i16,
        "symlink" => NodeType::Symlink as i16,
        "fifo" => NodeType::Fifo as i16,
        "blockdev" => NodeType::BlockDev as i16,
        "chardev" => NodeType::CharDev as i16,
        "socket" => NodeType::Socket as i16,
        _ => return None,
    })
}

/// Bytes as a dump writes names, symlink targets and xattr values: valid
/// UTF-8 as is, but every byte of an invalid sequence, every control
/// character and `%`, `"` and `\` as `%XX` (upper-case hex), so the text
/// needs no JSON escapes and loads back to the same bytes.
pub fn escape(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    let mut rest = bytes;
    while !rest.is_empty() {
        let (valid, bad) = match std::str::from_utf8(rest) {
            Ok(s) => (s, &[][..]),
            Err(e) => {
                let (good, after) = rest.split_at(e.valid_up_to());
                let bad_len = e.error_len().unwrap_or(after.len());
                (
                    std::str::from_utf8(good).unwrap_or_default(),
                    &after[..bad_len],
                )
            }
        };
        for c in valid.chars() {
            if (c as u32) < 0x20 || c == '%' || c == '"' || c == '\\' {
                out.push_str(&format!("%{:02X}", c as u32));
            } else {
                out.push(c);
            }
        }
        for b in bad {
            out.push_str(&format!("%{b:02X}"));
        }
        rest = &rest[valid.len() + bad.len()..];
    }
    out
}

/// The bytes of an escaped name: `%XX` (upper-case hex) is that byte; any
/// other `%` stays.
pub fn unescape(text: &str) -> Vec<u8> {
    let b = text.as_bytes();
    if !b.contains(&b'%') {
        return b.to_vec();
    }
    let hex = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    };
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push(h << 4 | l);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

/// Nanoseconds since the epoch as (seconds, nanoseconds).
pub fn split_ns(ns: i64) -> (i64, i64) {
    (ns.div_euclid(1_000_000_000), ns.rem_euclid(1_000_000_000))
}

/// An ACL of a node (kind 'a' access, 'd' default) from its rows, or None
/// when it has no rows of that kind. An access ACL takes the owner, mask
/// and other entries from the mode (jfs keeps them there).
pub fn acl_of(rows: &[AclRow], kind: char, mode: i32) -> Option<Acl> {
    let rows: Vec<&AclRow> = rows.iter().filter(|r| r.kind == kind).collect();
    if rows.is_empty() {
        return None;
    }
    let perm_of = |tag: i16| rows.iter().find(|r| r.tag == tag).map(|r| r.perm);
    let named = |tag: i16| {
        let v: Vec<AclNamed> = rows
            .iter()
            .filter(|r| r.tag == tag)
            .map(|r| AclNamed {
                id: r.qualifier,
                perm: r.perm,
            })
            .collect();
        (!v.is_empty()).then_some(v)
    };
    let bits = |shift: i32| ((mode >> shift) & 7) as i16;
    Some(if kind == 'a' {
        Acl {
            owner: bits(6),
            group: perm_of(tag(TAG_GROUP_OBJ)).unwrap_or(bits(3)),
            other: bits(0),
            mask: i32::from(bits(3)),
            users: named(tag(TAG_USER)),
            groups: named(tag(TAG_GROUP)),
        }
    } else {
        Acl {
            owner: perm_of(tag(TAG_USER_OBJ)).unwrap_or(0),
            group: perm_of(tag(TAG_GROUP_OBJ)).unwrap_or(0),
            other: perm_of(tag(TAG_OTHER)).unwrap_or(0),
            mask: perm_of(tag(TAG_MASK)).map_or(NO_MASK, i32::from),
            users: named(tag(TAG_USER)),
            groups: named(tag(TAG_GROUP)),
        }
    })
}

/// The rows jfs keeps of a dumped ACL: of an access ACL what the mode cannot
/// hold (the owning group and the named entries), of a default one all.
pub fn acl_rows(acl: &Acl, kind: char) -> Vec<AclRow> {
    let row = |tag: i16, qualifier: i64, perm: i16| AclRow {
        kind,
        tag,
        qualifier,
        perm,
    };
    let mut rows = vec![row(tag(TAG_GROUP_OBJ), -1, acl.group)];
    if kind == 'd' {
        rows.push(row(tag(TAG_USER_OBJ), -1, acl.owner));
        rows.push(row(tag(TAG_OTHER), -1, acl.other));
        if (0..=7).contains(&acl.mask) {
            rows.push(row(tag(TAG_MASK), -1, acl.mask as i16));
        }
    }
    for u in acl.users.iter().flatten() {
        rows.push(row(tag(TAG_USER), u.id, u.perm));
    }
    for g in acl.groups.iter().flatten() {
        rows.push(row(tag(TAG_GROUP), g.id, g.perm));
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_encrypted_volume_key_is_read_as_juicefs_keeps_it() {
        let pem = include_str!("../object/testdata/rsa2048.pem");
        // obfuscated apart from jfs (object/testdata/make.sh)
        let obfuscated = include_str!("../object/testdata/rsa2048.pem.juicefs-obfuscated");
        let mut setting = Setting {
            name: "v".into(),
            uuid: "d4f6a5c2-3b1e-4c8f-9a7d-2e5b8c1f0a93".into(),
            compression: "lz4".into(),
            encrypt_key: obfuscated.trim().into(),
            key_encrypted: true,
            ..Setting::default()
        };
        let (key, algo) = setting.encryption().unwrap().unwrap();
        assert_eq!((key.as_str(), algo.as_str()), (pem, "aes256gcm-rsa"));
        assert!(setting.unsupported().is_none());
        setting.uuid = "00000000-0000-0000-0000-000000000000".into();
        assert!(setting.encryption().is_err(), "opened with another uuid");
        setting.encrypt_key = REMOVED_KEY.into();
        let e = setting.encryption().unwrap_err().to_string();
        assert!(e.contains("holds no key"), "{e}");
        let plain = Setting {
            encrypt_key: pem.into(),
            encrypt_algo: "chacha20-rsa".into(),
            ..Setting::default()
        };
        let (key, algo) = plain.encryption().unwrap().unwrap();
        assert_eq!((key.as_str(), algo.as_str()), (pem, "chacha20-rsa"));
        assert!(Setting::default().encryption().unwrap().is_none());
    }

    #[test]
    fn escape_round_trips_any_bytes() {
        assert_eq!(escape(b"plain name.txt"), "plain name.txt");
        assert_eq!(escape("caf\u{e9}".as_bytes()), "caf\u{e9}");
        assert_eq!(escape(b"a%b\"c\\d\ne"), "a%25b%22c%5Cd%0Ae");
        assert_eq!(escape(b"bad\xff\xfe!"), "bad%FF%FE!");
        for bytes in [
            &b"x%zz"[..],
            b"%",
            b"%4",
            b"\xe6\x9e",
            b"\xe6\x9e\x9c",
            b"100%",
            b"%41",
        ] {
            assert_eq!(unescape(&escape(bytes)), bytes, "{bytes:?}");
        }
        // lower-case hex and a lone % are not escapes
        assert_eq!(unescape("%e6%"), b"%e6%");
        assert_eq!(unescape("UTF8%E6%9E%9C"), "UTF8\u{679c}".as_bytes());
    }

    #[test]
    fn times_split_below_the_epoch() {
        assert_eq!(split_ns(1_500_000_001), (1, 500_000_001));
        assert_eq!(split_ns(-1), (-1, 999_999_999));
    }

    #[test]
    fn access_acl_rows_round_trip() {
        let rows = vec![
            AclRow {
                kind: 'a',
                tag: tag(TAG_GROUP_OBJ),
                qualifier: -1,
                perm: 5,
            },
            AclRow {
                kind: 'a',
                tag: tag(TAG_USER),
                qualifier: 1001,
                perm: 6,
            },
        ];
        let acl = acl_of(&rows, 'a', 0o764).unwrap();
        assert_eq!((acl.owner, acl.group, acl.mask, acl.other), (7, 5, 6, 4));
        assert_eq!(acl_rows(&acl, 'a'), rows);
        assert!(acl_of(&rows, 'd', 0o764).is_none());
    }
}
