//! Hot standbys: whether the server reached is one, and how far behind the primary it replays.
use super::{Meta, Result};

impl Meta {
    /// Whether the server is a hot standby (in recovery: it takes no writes).
    pub async fn in_recovery(&self) -> Result<bool> {
        let client = self.client().await?;
        let rows = client
            .query_typed("SELECT pg_catalog.pg_is_in_recovery()", &[])
            .await?;
        Ok(rows.first().is_some_and(|r| r.get::<_, bool>(0)))
    }

    /// How far a standby's replay is behind, in seconds: 0 when it has
    /// replayed all the WAL it received, else the age of the last
    /// transaction it replayed; None on a primary.
    pub async fn replay_lag(&self) -> Result<Option<f64>> {
        let client = self.client().await?;
        let rows = client
            .query_typed(
                "SELECT CASE WHEN NOT pg_catalog.pg_is_in_recovery() THEN NULL \
                        WHEN pg_catalog.pg_last_wal_receive_lsn() = pg_catalog.pg_last_wal_replay_lsn() \
                        THEN 0::float8 \
                        ELSE extract(epoch FROM pg_catalog.now() \
                             - pg_catalog.pg_last_xact_replay_timestamp())::float8 END",
                &[],
            )
            .await?;
        Ok(rows.first().and_then(|r| r.get::<_, Option<f64>>(0)))
    }
}
