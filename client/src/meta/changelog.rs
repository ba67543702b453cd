//! Change-log procedures: the feed after a bookmark (`jfs changelog`), pruning, retention.
use super::{Meta, Result};

/// One change as `jfs.changes_since` gives it.
#[derive(Debug, Clone)]
pub struct Change {
    pub id: i64,
    /// When its transaction started, UTC, ISO 8601.
    pub at: String,
    pub op: String,
    /// The entry made, removed or renamed, or the node's path (as far as it
    /// resolves now).
    pub path: Option<String>,
    /// Where a rename or clone put it.
    pub path2: Option<String>,
    pub xattr: Option<String>,
    pub inode: Option<i64>,
    pub inode2: Option<i64>,
    pub uid: Option<i64>,
    pub gid: Option<i64>,
    pub session: Option<i64>,
    /// The whole row as a JSON object.
    pub json: String,
}

/// A change as a mount applies it: what to forget.
#[derive(Debug, Clone)]
pub struct LoggedChange {
    pub op: String,
    pub inode: Option<i64>,
    pub parent: Option<i64>,
    pub name: Option<Vec<u8>>,
    pub parent2: Option<i64>,
    pub name2: Option<Vec<u8>>,
    pub inode2: Option<i64>,
}

/// How long and how many rows the change log keeps.
#[derive(Debug, Clone)]
pub struct ChangelogRetention {
    pub max_age: String,
    pub max_rows: i64,
}

impl Meta {
    /// The changes after change `after` (0: from the oldest kept), at most
    /// `limit`, each given once and in a final order.
    pub async fn changes_since(&self, after: i64, limit: i32) -> Result<Vec<Change>> {
        let rows = self
            .call(
                "SELECT c.id, to_char(c.at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') AS at, \
                        c.op, c.path, c.path2, c.xattr, c.inode, c.inode2, c.uid, c.gid, c.session, \
                        row_to_json(c)::text AS json \
                   FROM jfs.changes_since($1, $2) c",
                &[&after, &limit],
            )
            .await?;
        rows.iter()
            .map(|r| {
                Ok(Change {
                    id: r.try_get("id")?,
                    at: r.try_get("at")?,
                    op: r.try_get("op")?,
                    path: r.try_get("path")?,
                    path2: r.try_get("path2")?,
                    xattr: r.try_get("xattr")?,
                    inode: r.try_get("inode")?,
                    inode2: r.try_get("inode2")?,
                    uid: r.try_get("uid")?,
                    gid: r.try_get("gid")?,
                    session: r.try_get("session")?,
                    json: r.try_get("json")?,
                })
            })
            .collect()
    }

    /// The changes a mount (session `sid`) must apply: those of the
    /// transactions the snapshot `horizon` did not see (`None`: none yet),
    /// each once, with the new horizon (`jfs.mount_changes`; a snapshot in
    /// its text form, `xmin:xmax:xip,...`).
    pub async fn mount_changes(
        &self,
        sid: i64,
        horizon: Option<&str>,
    ) -> Result<(String, Vec<LoggedChange>)> {
        let rows = self
            .call(
                "SELECT horizon::text AS horizon, id, op, inode, parent, name, parent2, name2, inode2 \
                   FROM jfs.mount_changes($1, $2::text::pg_snapshot)",
                &[&sid, &horizon],
            )
            .await?;
        let mut new_horizon = horizon.unwrap_or_default().to_string();
        let mut changes = Vec::with_capacity(rows.len());
        for r in &rows {
            new_horizon = r.try_get("horizon")?;
            if r.try_get::<_, Option<i64>>("id")?.is_none() {
                continue; // the row that carries only the horizon
            }
            changes.push(LoggedChange {
                op: r.try_get("op")?,
                inode: r.try_get("inode")?,
                parent: r.try_get("parent")?,
                name: r.try_get("name")?,
                parent2: r.try_get("parent2")?,
                name2: r.try_get("name2")?,
                inode2: r.try_get("inode2")?,
            });
        }
        Ok((new_horizon, changes))
    }

    /// Deletes change-log rows past the volume's retention, at most `limit`;
    /// returns how many went.
    pub async fn changelog_prune(&self, limit: i32) -> Result<u64> {
        let row = self
            .call_one("SELECT jfs.changelog_prune($1) AS pruned", &[&limit])
            .await?;
        Ok(row.try_get::<_, i64>("pruned")? as u64)
    }

    /// Sets the change log's retention (`None`: unchanged; the age is a
    /// PostgreSQL interval such as '2 days'); returns what holds now.
    pub async fn set_changelog_retention(
        &self,
        max_age: Option<&str>,
        max_rows: Option<i64>,
    ) -> Result<ChangelogRetention> {
        let row = self
            .call_one(
                "SELECT max_age::text, max_rows \
                   FROM jfs.set_changelog_retention($1::text::interval, $2)",
                &[&max_age, &max_rows],
            )
            .await?;
        Ok(ChangelogRetention {
            max_age: row.try_get("max_age")?,
            max_rows: row.try_get("max_rows")?,
        })
    }
}
