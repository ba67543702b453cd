//! Reaching a shard late: a shard that was out of reach when the mount
//! started (its part pending, see `Meta::pending`) is tried again until it
//! answers; then it is checked as at start (the shard its map says, the
//! role's grants), the mount's session is registered there, the part's
//! connections name it, and the calls waiting for the shard go through.
use std::time::Duration;

use crate::meta::{redact_url, MetaError};
use crate::ns::parts::Part;

/// The longest pause between two tries.
const PAUSE_MAX: Duration = Duration::from_secs(10);

/// Registers this mount's session on `part` once it can be reached, if it
/// is a shard not reached yet; returns when the part is open.
pub async fn reach(part: &Part, host: &str, info: &str, session_timeout: Duration) {
    let Some(url) = &part.late_url else {
        return;
    };
    let mut pause = Duration::from_millis(500);
    let mut said = String::new();
    loop {
        match register(part, url, host, info, session_timeout).await {
            Ok(sid) => {
                tracing::info!(
                    "reached shard {} at {}: session {sid}; its subtrees work now",
                    part.number,
                    redact_url(url)
                );
                return;
            }
            Err(e) => {
                let text = format!("{e:#}");
                if text != said {
                    tracing::warn!(
                        "shard {} at {} is not reached yet: {text} (trying again)",
                        part.number,
                        redact_url(url)
                    );
                    said = text;
                }
            }
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(PAUSE_MAX);
    }
}

/// One try: checks the shard, registers the session, opens the part.
async fn register(
    part: &Part,
    url: &str,
    host: &str,
    info: &str,
    session_timeout: Duration,
) -> anyhow::Result<i64> {
    let meta = part.meta.ungated();
    // (checked as at start: its version, then its grants)
    meta.check_reached(url).await?;
    meta.require_client_grants().await?;
    let says = meta.shard_number().await?;
    anyhow::ensure!(
        says == part.number,
        "it is shard {says}, not shard {} as the root's map says",
        part.number
    );
    let sid = meta
        .session_register(host, std::process::id() as i32, info, session_timeout)
        .await
        .map_err(|e: MetaError| anyhow::anyhow!("registering the session: {e}"))?;
    part.set_sid(sid);
    part.meta.open();
    Ok(sid)
}
