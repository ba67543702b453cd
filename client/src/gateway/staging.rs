//! Where the gateway writes aside on a volume over shards: a rename never
//! crosses shards, so an object whose key is on shard N is written in the
//! gateway's own directory on shard N (`/.jfs-gateway/shard-N`, a
//! directory of that shard, mode 0700, made when first needed, through
//! `jfs.gateway_dir_make` and `jfs.gateway_dir_link`) and a multipart
//! upload for such a key keeps its parts there too, so that joining them
//! shares their slices. The root's shard keeps `/.jfs-gateway/tmp` and
//! `/.jfs-gateway/uploads`.
use s3s::S3Result;

use super::object_io::new_name;
use super::{not_own_dir, s3_error, Gateway, SYSTEM_DIR, TMP_DIR, UPLOADS_DIR};
use crate::meta::{shard_of, NodeType};

/// The gateway's own directory on shard `shard` (0: the root's).
fn shard_dir(shard: u16) -> String {
    match shard {
        0 => SYSTEM_DIR.to_string(),
        n => format!("{SYSTEM_DIR}/shard-{n}"),
    }
}

/// Where objects for keys of shard `shard` are written aside.
pub(super) fn tmp_dir(shard: u16) -> String {
    match shard {
        0 => TMP_DIR.to_string(),
        n => format!("{}/tmp", shard_dir(n)),
    }
}

/// Where multipart uploads for keys of shard `shard` keep their parts.
fn uploads_dir(shard: u16) -> String {
    match shard {
        0 => UPLOADS_DIR.to_string(),
        n => format!("{}/uploads", shard_dir(n)),
    }
}

/// A new upload id for a key of shard `shard`: 32 hex digits, and for a
/// shard other than the root's 4 more naming it.
pub(super) fn new_upload_id(shard: u16) -> String {
    match shard {
        0 => new_name(),
        n => format!("{}{n:04x}", new_name()),
    }
}

/// The directory of upload `id` (None: no id this gateway gives).
pub(super) fn upload_dir(id: &str) -> Option<String> {
    if !id.bytes().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let shard = match id.len() {
        32 => 0,
        36 => u16::from_str_radix(&id[32..], 16)
            .ok()
            .filter(|&n| n != 0)?,
        _ => return None,
    };
    Some(format!("{}/{id}", uploads_dir(shard)))
}

impl Gateway {
    /// The shard a file written as `key` of `bucket` lands on: that of the
    /// deepest of its directories that exists (a directory made below
    /// another is on its shard).
    async fn shard_of_key(&self, bucket: &str, key: &str) -> u16 {
        if self.shards.len() <= 1 {
            return 0;
        }
        let mut dir = format!("/{bucket}/{key}");
        while let Some(slash) = dir.rfind('/') {
            dir.truncate(slash.max(1));
            match self.d.stat(dir.as_bytes(), true).await {
                Ok(attr) => return shard_of(attr.inode).unwrap_or(0),
                Err(libc::ENOENT) if slash > 0 => continue,
                Err(_) => return 0,
            }
        }
        0
    }

    /// A new path to write an object for `key` of `bucket` at, aside, on
    /// the shard the key lands on.
    pub(super) async fn aside_for(&self, bucket: &str, key: &str) -> S3Result<String> {
        let shard = self.shard_of_key(bucket, key).await;
        self.ready(shard).await?;
        Ok(format!("{}/{}", tmp_dir(shard), new_name()))
    }

    /// A new upload's id and directory for `key` of `bucket`, on the shard
    /// the key lands on (the directory not made yet).
    pub(super) async fn upload_for(&self, bucket: &str, key: &str) -> S3Result<(String, String)> {
        let shard = self.shard_of_key(bucket, key).await;
        self.ready(shard).await?;
        let id = new_upload_id(shard);
        let dir = format!("{}/{id}", uploads_dir(shard));
        Ok((id, dir))
    }

    /// The directories holding uploads: the root's, and those of the
    /// shards where the gateway has one.
    pub(super) fn upload_dirs(&self) -> Vec<String> {
        self.shards.iter().map(|&n| uploads_dir(n)).collect()
    }

    /// The directories holding files written aside, as `upload_dirs`.
    pub(super) fn aside_dirs(&self) -> Vec<String> {
        self.shards.iter().map(|&n| tmp_dir(n)).collect()
    }

    /// Makes the gateway's own directories on shard `shard` if missing,
    /// and checks they are its own (as `Gateway::new` does the root's).
    async fn ready(&self, shard: u16) -> S3Result<()> {
        if shard == 0 || self.ready.lock().unwrap().contains(&shard) {
            return Ok(());
        }
        let top = shard_dir(shard);
        let what = format!("the gateway's directory {top}");
        match self.d.mkdir_on_shard(top.as_bytes(), shard).await {
            Ok(_) | Err(libc::EEXIST) => {}
            Err(libc::ENOSYS) => {
                tracing::error!(
                    "making {top}: the root database or shard {shard} lacks \
                     jfs.gateway_dir_make or jfs.gateway_dir_link (jfs 0.2.31): run ALTER \
                     EXTENSION jfs UPDATE on every database of the volume, and grant_client again"
                );
                return Err(s3_error(libc::ENOSYS, &what));
            }
            Err(e) => return Err(s3_error(e, &what)),
        }
        for dir in [top.clone(), tmp_dir(shard), uploads_dir(shard)] {
            if dir != top {
                match self.d.mkdir(dir.as_bytes(), 0o700).await {
                    Ok(_) | Err(libc::EEXIST) => {}
                    Err(e) => return Err(s3_error(e, &what)),
                }
            }
            let attr = self
                .d
                .stat(dir.as_bytes(), false)
                .await
                .map_err(|e| s3_error(e, &what))?;
            let wrong = match not_own_dir(&attr, self.d.uid()) {
                None if attr.kind == NodeType::Dir && shard_of(attr.inode) != Some(shard) => {
                    Some(format!("is on shard {:?}", shard_of(attr.inode)))
                }
                wrong => wrong,
            };
            if let Some(wrong) = wrong {
                tracing::error!(
                    "the gateway's directory {dir} in the volume {wrong}, not a directory of \
                     shard {shard} of uid {} with mode 0700: look at what it holds and remove it \
                     (as root, through a mount); objects for keys on shard {shard} are refused \
                     until then",
                    self.d.uid()
                );
                return Err(s3_error(libc::EPERM, &what));
            }
        }
        self.ready.lock().unwrap().insert(shard);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upload_ids_name_their_shard_and_nothing_else() {
        let root = new_upload_id(0);
        assert_eq!(upload_dir(&root), Some(format!("{UPLOADS_DIR}/{root}")));
        let on_3 = new_upload_id(3);
        assert_eq!(on_3.len(), 36);
        assert_eq!(
            upload_dir(&on_3),
            Some(format!("{SYSTEM_DIR}/shard-3/uploads/{on_3}"))
        );
        let zero = format!("{}0000", new_name());
        for bad in [
            "",
            "../x",
            &zero,
            &root[..31],
            "g0000000000000000000000000000000",
            "0123456789abcdef0123456789abcdef/../..",
        ] {
            assert_eq!(upload_dir(bad), None, "{bad:?}");
        }
        assert_eq!(tmp_dir(0), TMP_DIR);
        assert_eq!(tmp_dir(2), format!("{SYSTEM_DIR}/shard-2/tmp"));
    }
}
