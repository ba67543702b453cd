//! Session procedures: register, heartbeat, close, cleanup, release, ending transactions that stall others, and the list for `jfs status`.
use std::time::Duration;

use super::{Meta, MetaError, Result};

/// How long a connection for `jfs.end_stalling` may take to open.
const END_STALLING_CONNECT: Duration = Duration::from_secs(5);

/// A mounted client as `jfs.sessions()` lists it.
#[derive(Debug, Clone)]
pub struct SessionRow {
    pub sid: i64,
    pub host: String,
    pub pid: i32,
    pub info: String,
    pub started: String,
    pub heartbeat: String,
    pub sustained: i64,
}

/// The application_name of a mount's connections: `jfs:SID`. The change
/// log's `session` column reads the id back from it (sql/schema.sql, table
/// change), so a change is attributed to its mount with no extra statement
/// and through PgBouncer, which passes application_name on.
pub fn session_application_name(sid: i64) -> String {
    format!("jfs:{sid}")
}

impl Meta {
    /// A new session of this client's role (`jfs.session_open`), which
    /// other mounts end only after `timeout` without a heartbeat.
    pub async fn session_register(
        &self,
        host: &str,
        pid: i32,
        info: &str,
        timeout: std::time::Duration,
    ) -> Result<i64> {
        let timeout = format!("{} milliseconds", timeout.as_millis());
        let row = self
            .call_one(
                "SELECT jfs.session_open($1, $2, $3::text::jsonb, $4::text::interval) AS sid",
                &[&host, &pid, &info, &timeout],
            )
            .await?;
        Ok(row.try_get("sid")?)
    }

    /// false when the session is gone (cleaned up as dead): register again.
    pub async fn session_heartbeat(&self, sid: i64) -> Result<bool> {
        let row = self
            .call_one("SELECT jfs.session_heartbeat($1) AS errno", &[&sid])
            .await?;
        Ok(row.try_get::<_, i32>("errno")? == 0)
    }

    pub async fn session_close(&self, sid: i64) -> Result<()> {
        self.call("SELECT jfs.session_close($1)", &[&sid]).await?;
        Ok(())
    }

    /// Ends sessions silent for longer than `timeout_secs`; returns how many.
    pub async fn session_cleanup(&self, timeout_secs: u64) -> Result<i32> {
        let timeout = format!("{timeout_secs} seconds");
        let row = self
            .call_one(
                "SELECT jfs.session_cleanup($1::text::interval) AS n",
                &[&timeout],
            )
            .await?;
        Ok(row.try_get("n")?)
    }

    /// This session holds those of `inodes` (files it has open) that lost
    /// their last name elsewhere; returns the ones it holds.
    pub async fn sustain(&self, sid: i64, inodes: &[i64]) -> Result<Vec<i64>> {
        let row = self
            .call_one("SELECT jfs.sustain($1, $2) AS held", &[&sid, &inodes])
            .await?;
        Ok(row.try_get("held")?)
    }

    /// Frees up to `limit` files kept after their last name went (for other
    /// mounts' handles) whose grace is over and that nobody holds.
    pub async fn free_unlinked(&self, limit: i32) -> Result<i32> {
        let row = self
            .call_one("SELECT jfs.free_unlinked($1) AS freed", &[&limit])
            .await?;
        Ok(row.try_get("freed")?)
    }

    /// Last close of an inode this session kept open after its last unlink.
    pub async fn release(&self, sid: i64, inode: u64) -> Result<()> {
        self.call("SELECT jfs.release($1, $2)", &[&sid, &(inode as i64)])
            .await?;
        Ok(())
    }

    pub async fn sessions(&self) -> Result<Vec<SessionRow>> {
        let rows = self
            .call(
                "SELECT sid, host, pid, info::text AS info, started::text AS started, \
                 heartbeat::text AS heartbeat, sustained FROM jfs.sessions()",
                &[],
            )
            .await?;
        rows.iter()
            .map(|r| {
                Ok(SessionRow {
                    sid: r.try_get("sid")?,
                    host: r.try_get("host")?,
                    pid: r.try_get("pid")?,
                    info: r.try_get("info")?,
                    started: r.try_get("started")?,
                    heartbeat: r.try_get("heartbeat")?,
                    sustained: r.try_get("sustained")?,
                })
            })
            .collect()
    }

    /// Ends the transactions of other clients that have kept this
    /// database's backends waiting for their locks (`jfs.end_stalling`), on
    /// a connection of its own: the pool's may all be waiting. Returns how
    /// many were ended.
    pub(super) async fn end_stalling(&self) -> Result<i32> {
        let connecting = self.config.connect(self.tls.clone());
        let (client, connection) = tokio::time::timeout(END_STALLING_CONNECT, connecting)
            .await
            .map_err(|_| MetaError::NotSent)??;
        let driver = tokio::spawn(connection);
        let messages = client.simple_query("SELECT jfs.end_stalling()").await;
        drop(client);
        let _ = driver.await;
        let ended = messages?.iter().find_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).and_then(|v| v.parse().ok()),
            _ => None,
        });
        Ok(ended.unwrap_or(0))
    }
}
