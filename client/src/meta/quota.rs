//! Quota and usage procedures: set, delete, check and list quotas (for
//! `jfs quota`), and a tree's summary (for `jfs summary`).
use super::{check_errno, Meta, Result};

/// What a quota limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuotaTarget {
    /// The whole volume (format's --capacity / --inodes).
    Volume,
    /// A directory's subtree, by its path in the volume ("/a/b").
    Dir(String),
    User(u32),
    Group(u32),
}

/// One row of `jfs.quotas`.
#[derive(Debug, Clone)]
pub struct QuotaRow {
    pub kind: String,
    pub path: Option<String>,
    pub uid: Option<i64>,
    pub gid: Option<i64>,
    pub max_space: i64,
    pub used_space: i64,
    pub max_inodes: i64,
    pub used_inodes: i64,
}

impl QuotaRow {
    /// Whether this row is the quota `target` names.
    pub fn is(&self, target: &QuotaTarget) -> bool {
        match target {
            QuotaTarget::Volume => self.kind == "fs",
            QuotaTarget::Dir(p) => {
                self.kind == "dir" && self.path.as_deref() == Some(normalize_path(p).as_str())
            }
            QuotaTarget::User(u) => self.kind == "user" && self.uid == Some(i64::from(*u)),
            QuotaTarget::Group(g) => self.kind == "group" && self.gid == Some(i64::from(*g)),
        }
    }
}

/// One row of `jfs.check_quota`.
#[derive(Debug, Clone)]
pub struct QuotaCheck {
    pub kind: String,
    pub key: i64,
    pub path: Option<String>,
    pub counted_inodes: i64,
    pub counted_space: i64,
    pub recorded_inodes: i64,
    pub recorded_space: i64,
    pub ok: bool,
    pub repaired: bool,
    /// The shard whose database kept it (0: the root; set by callers
    /// that check every shard).
    pub shard: u16,
}

/// One row of `jfs.summary_of`: a directory (or the file asked about) and
/// everything below it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryRow {
    pub inode: u64,
    /// Its path in the volume.
    pub path: String,
    /// Levels below the node asked about.
    pub depth: i32,
    /// Directories, itself included.
    pub dirs: i64,
    /// Every other entry.
    pub files: i64,
    /// The apparent size, as `du --apparent-size` counts it.
    pub length: i64,
    /// Space as quotas count it (4 KiB units).
    pub space: i64,
}

/// "/a/b/" -> "/a/b"; "" -> "/".
pub fn normalize_path(path: &str) -> String {
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() {
        "/".to_string()
    } else {
        trimmed.to_string()
    }
}

impl Meta {
    /// Sets a quota's limits (bytes, inodes; 0 = none); a new one counts its usage.
    pub async fn set_quota(&self, target: &QuotaTarget, space: u64, inodes: u64) -> Result<()> {
        let (space, inodes) = (space as i64, inodes as i64);
        match target {
            QuotaTarget::Volume => {
                self.call(
                    "SELECT 1 FROM jfs.set_volume_quota($1, $2)",
                    &[&space, &inodes],
                )
                .await?
            }
            QuotaTarget::Dir(path) => {
                self.call(
                    "SELECT 1 FROM jfs.set_quota($1, $2, $3)",
                    &[path, &space, &inodes],
                )
                .await?
            }
            QuotaTarget::User(uid) => {
                self.call(
                    "SELECT 1 FROM jfs.set_user_quota($1, $2, $3)",
                    &[&i64::from(*uid), &space, &inodes],
                )
                .await?
            }
            QuotaTarget::Group(gid) => {
                self.call(
                    "SELECT 1 FROM jfs.set_group_quota($1, $2, $3)",
                    &[&i64::from(*gid), &space, &inodes],
                )
                .await?
            }
        };
        Ok(())
    }

    /// Removes a quota; false when there was none.
    pub async fn delete_quota(&self, target: &QuotaTarget) -> Result<bool> {
        let row = match target {
            QuotaTarget::Volume => {
                self.call_one("SELECT jfs.set_volume_quota(0, 0) IS NOT NULL AS done", &[])
                    .await?
            }
            QuotaTarget::Dir(path) => {
                self.call_one("SELECT jfs.delete_quota($1) AS done", &[path])
                    .await?
            }
            QuotaTarget::User(uid) => {
                self.call_one(
                    "SELECT jfs.delete_user_quota($1) AS done",
                    &[&i64::from(*uid)],
                )
                .await?
            }
            QuotaTarget::Group(gid) => {
                self.call_one(
                    "SELECT jfs.delete_group_quota($1) AS done",
                    &[&i64::from(*gid)],
                )
                .await?
            }
        };
        Ok(row.try_get("done")?)
    }

    /// Sizes and counts of the tree at `inode`, and of each directory down
    /// to `depth` levels below it (`jfs.summary_of`, from the database's
    /// per-directory figures: no walk of the files); empty when it is gone.
    pub async fn summary_of(&self, inode: u64, depth: i32) -> Result<Vec<SummaryRow>> {
        let rows = self
            .call(
                "SELECT inode, path, depth, dirs, files, length, space FROM jfs.summary_of($1, $2)",
                &[&(inode as i64), &depth],
            )
            .await?;
        rows.iter()
            .map(|r| {
                Ok(SummaryRow {
                    inode: r.try_get::<_, i64>("inode")? as u64,
                    path: r.try_get::<_, Option<String>>("path")?.unwrap_or_default(),
                    depth: r.try_get("depth")?,
                    dirs: r.try_get("dirs")?,
                    files: r.try_get("files")?,
                    length: r.try_get("length")?,
                    space: r.try_get("space")?,
                })
            })
            .collect()
    }

    /// Every quota with its usage (`jfs.list_quotas()`, the rows of view
    /// `jfs.quotas`).
    pub async fn quotas(&self) -> Result<Vec<QuotaRow>> {
        let rows = self
            .call(
                "SELECT kind, path, uid, gid, max_space, used_space, max_inodes, used_inodes \
                 FROM jfs.list_quotas() ORDER BY kind, path, uid, gid",
                &[],
            )
            .await?;
        rows.iter()
            .map(|r| {
                Ok(QuotaRow {
                    kind: r.try_get("kind")?,
                    path: r.try_get("path")?,
                    uid: r.try_get("uid")?,
                    gid: r.try_get("gid")?,
                    max_space: r.try_get("max_space")?,
                    used_space: r.try_get("used_space")?,
                    max_inodes: r.try_get("max_inodes")?,
                    used_inodes: r.try_get("used_inodes")?,
                })
            })
            .collect()
    }

    /// Recounts quotas (all, or the one `target` names) and, with `repair`,
    /// fixes the counters that drifted (`jfs.check_quota`).
    pub async fn check_quota(
        &self,
        target: Option<&QuotaTarget>,
        repair: bool,
    ) -> Result<Vec<QuotaCheck>> {
        let sql = "SELECT * FROM jfs.check_quota($1, \
                   CASE WHEN $1 = 'dir' THEN jfs.resolve($2) ELSE $3 END, $4)";
        let (kind, path, key): (Option<&str>, String, Option<i64>) = match target {
            None => (None, String::new(), None),
            Some(QuotaTarget::Volume) => (Some("fs"), String::new(), Some(0)),
            Some(QuotaTarget::Dir(p)) => (Some("dir"), p.clone(), None),
            Some(QuotaTarget::User(u)) => (Some("user"), String::new(), Some(i64::from(*u))),
            Some(QuotaTarget::Group(g)) => (Some("group"), String::new(), Some(i64::from(*g))),
        };
        let rows = self.call(sql, &[&kind, &path, &key, &repair]).await?;
        rows.iter().map(quota_check_of).collect()
    }

    /// [`Meta::check_quota`] of the quota of the directory of inode
    /// `inode` in this database (a shard's directory: see
    /// [`Meta::set_dir_quota`]).
    pub async fn check_dir_quota(&self, inode: u64, repair: bool) -> Result<Vec<QuotaCheck>> {
        let rows = self
            .call(
                "SELECT * FROM jfs.check_quota('dir', $1, $2)",
                &[&(inode as i64), &repair],
            )
            .await?;
        rows.iter().map(quota_check_of).collect()
    }
}

/// A row of `jfs.check_quota`.
fn quota_check_of(r: &tokio_postgres::Row) -> Result<QuotaCheck> {
    Ok(QuotaCheck {
        kind: r.try_get("kind")?,
        key: r.try_get("key")?,
        path: r.try_get("path")?,
        counted_inodes: r.try_get("counted_inodes")?,
        counted_space: r.try_get("counted_space")?,
        recorded_inodes: r.try_get("recorded_inodes")?,
        recorded_space: r.try_get("recorded_space")?,
        ok: r.try_get("ok")?,
        repaired: r.try_get("repaired")?,
        shard: 0,
    })
}

/// How long a file may grow now before a space limit refuses it
/// (`jfs.space_limit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpaceLimit {
    /// The longest the file may be; None: no limit applies.
    pub max_length: Option<u64>,
    /// What the binding limit answers past it: ENOSPC or EDQUOT.
    pub errno: i32,
}

impl Meta {
    /// Whether any space limit is set and enforced on the volume.
    pub async fn space_limited(&self) -> Result<bool> {
        let row = self
            .call_one("SELECT jfs.space_limited() AS limited", &[])
            .await?;
        Ok(row.try_get::<_, Option<bool>>("limited")?.unwrap_or(false))
    }

    /// The longest `inode` may be now under the space limits over it.
    pub async fn space_limit(&self, inode: u64) -> Result<SpaceLimit> {
        let row = self
            .call_one("SELECT * FROM jfs.space_limit($1)", &[&(inode as i64)])
            .await?;
        check_errno(&row)?;
        Ok(SpaceLimit {
            max_length: row
                .try_get::<_, Option<i64>>("max_length")?
                .map(|l| l.max(0) as u64),
            errno: row
                .try_get::<_, Option<i32>>("over_errno")?
                .unwrap_or(libc::EDQUOT),
        })
    }
}

/// One directory quota of a database by inode (`jfs.dir_quotas`), with
/// where its directory is there (see [`Meta::place`]).
#[derive(Debug, Clone)]
pub struct DirQuota {
    pub key: u64,
    /// The topmost directory above it in that database (1: the root).
    pub top: u64,
    /// Its path below `top` ("" for `top` itself).
    pub below: String,
    pub max_space: i64,
    pub used_space: i64,
    pub max_inodes: i64,
    pub used_inodes: i64,
}

impl Meta {
    /// Sets the quota of the directory of inode `inode` in this database
    /// (`jfs.set_dir_quota`, administration: a shard's directories).
    pub async fn set_dir_quota(&self, inode: u64, space: u64, inodes: u64) -> Result<()> {
        self.call(
            "SELECT 1 FROM jfs.set_dir_quota($1, $2, $3)",
            &[&(inode as i64), &(space as i64), &(inodes as i64)],
        )
        .await?;
        Ok(())
    }

    /// Removes the quota of the directory of inode `inode`
    /// (`jfs.delete_dir_quota`): whether there was one.
    pub async fn delete_dir_quota(&self, inode: u64) -> Result<bool> {
        let row = self
            .call_one(
                "SELECT jfs.delete_dir_quota($1) AS done",
                &[&(inode as i64)],
            )
            .await?;
        Ok(row.try_get("done")?)
    }

    /// This database's directory quotas by inode (`jfs.dir_quotas`).
    pub async fn dir_quotas(&self) -> Result<Vec<DirQuota>> {
        let rows = self
            .call(
                "SELECT key, top, below, max_space, used_space, max_inodes, used_inodes \
                 FROM jfs.dir_quotas()",
                &[],
            )
            .await?;
        rows.iter()
            .map(|r| {
                Ok(DirQuota {
                    key: r.try_get::<_, i64>("key")? as u64,
                    top: r.try_get::<_, Option<i64>>("top")?.unwrap_or(0) as u64,
                    below: r.try_get::<_, Option<String>>("below")?.unwrap_or_default(),
                    max_space: r.try_get("max_space")?,
                    used_space: r.try_get("used_space")?,
                    max_inodes: r.try_get("max_inodes")?,
                    used_inodes: r.try_get("used_inodes")?,
                })
            })
            .collect()
    }
}
