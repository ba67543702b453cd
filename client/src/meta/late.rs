//! A database a mount reaches late: a shard of its volume that was down
//! when the mount started. Its client is made without a connection and
//! answers no call until the mount has registered its session there
//! (`open`); until then every call waits, as during an outage, up to
//! `--meta-retry`, so only that shard's subtrees stall.
use std::sync::Arc;
use std::time::Duration;

use super::error::ConnectError;
use super::{Meta, MetaError, Result};

/// How long one call waits for the session before it counts as one failed
/// attempt (the call's own retries, up to --meta-retry, go on from there).
const ONE_WAIT: Duration = Duration::from_secs(1);

impl Meta {
    /// A client of `meta_url` that sends nothing before [`Meta::open`]: no
    /// connection is made now.
    pub fn pending(
        meta_url: &str,
        max_connections: usize,
    ) -> std::result::Result<Meta, ConnectError> {
        let mut meta = Meta::pool(meta_url, max_connections)?;
        meta.gate = Some(Arc::new(tokio::sync::watch::channel(false).0));
        Ok(meta)
    }

    /// Whether calls go through (always, but for a pending client not
    /// opened yet).
    pub fn is_open(&self) -> bool {
        self.gate.as_ref().is_none_or(|g| *g.borrow())
    }

    /// The same client, its calls sent even before it is opened: to check
    /// the database and register the session there.
    pub fn ungated(&self) -> Meta {
        Meta {
            gate: None,
            ..self.clone()
        }
    }

    /// Checks a client reached late as [`Meta::connect`] checks one at
    /// start: the jfs extension there is a version this client works with,
    /// and what its role may call is learnt.
    pub async fn check_reached(&self, meta_url: &str) -> std::result::Result<(), ConnectError> {
        match self.extension_version(meta_url).await? {
            Some(version) => self.require_version(meta_url, &version)?,
            None => {
                return Err(ConnectError::NoExtension {
                    url: super::redact_url(meta_url),
                })
            }
        }
        self.load_procedures().await?;
        Ok(())
    }

    /// Lets the calls of this client (and of every clone) through.
    pub fn open(&self) {
        if let Some(gate) = &self.gate {
            gate.send_replace(true);
        }
    }

    /// Waits until calls go through, at most as long as a call retries
    /// (--meta-retry); whether they do.
    pub async fn open_within_retry(&self) -> bool {
        if self.is_open() {
            return true; // (no timer for every call of an open client)
        }
        let waited = tokio::time::timeout(self.retry_for, self.opened()).await;
        waited.is_ok()
    }

    /// Waits until calls go through, however long.
    pub async fn opened(&self) {
        if let Some(gate) = &self.gate {
            let _ = gate.subscribe().wait_for(|open| *open).await;
        }
    }

    /// Before a call is sent: waits a while for the client to be opened;
    /// NotReached (an unavailable database, retried) if it is not.
    pub(super) async fn wait_open(&self) -> Result<()> {
        let Some(gate) = &self.gate else {
            return Ok(());
        };
        let mut open = gate.subscribe();
        let waited = tokio::time::timeout(ONE_WAIT, open.wait_for(|open| *open))
            .await
            .map(drop);
        waited.map_err(|_| MetaError::NotReached)
    }
}
