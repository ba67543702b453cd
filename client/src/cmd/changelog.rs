//! `jfs changelog META_URL [--from ID] [--follow] [--json]`: the volume's
//! changes from the change log, oldest first, each once (`jfs.changes_since`).
use std::io::Write;
use std::time::Duration;

use clap::Args;

use crate::meta::{Change, Meta};

#[derive(Args, Debug)]
pub struct ChangelogArgs {
    /// PostgreSQL URL of the metadata database
    meta_url: String,
    /// Start after this change id (a bookmark: the last id printed before);
    /// default: from the oldest change kept
    #[arg(long, value_name = "ID", default_value_t = 0)]
    from: i64,
    /// Keep waiting for new changes and print them as they commit
    #[arg(short, long)]
    follow: bool,
    /// One JSON object per line (id, at, op, path, path2, xattr, inode,
    /// inode2, uid, gid, session)
    #[arg(long)]
    json: bool,
    /// With --follow: how often to ask for new changes, in seconds
    #[arg(long, default_value_t = 0.2)]
    interval: f64,
}

/// Changes fetched per round trip.
const PAGE: i32 = 1000;

pub async fn run(a: ChangelogArgs) -> anyhow::Result<()> {
    let meta = Meta::connect(&a.meta_url, 1).await?;
    let interval = Duration::from_secs_f64(a.interval.max(0.01));
    let mut after = a.from;
    let mut out = std::io::stdout().lock();
    loop {
        let changes = meta.changes_since(after, PAGE).await?;
        for c in &changes {
            if a.json {
                writeln!(out, "{}", c.json)?;
            } else {
                writeln!(out, "{}", line(c))?;
            }
            after = c.id;
        }
        out.flush()?;
        if changes.len() < PAGE as usize {
            if !a.follow {
                return Ok(());
            }
            tokio::time::sleep(interval).await;
        }
    }
}

/// `ID AT OP PATH [-> PATH2] [xattr NAME] inode=.. uid=.. gid=.. session=..`
fn line(c: &Change) -> String {
    let mut text = format!(
        "{:>8} {} {:<11} {}",
        c.id,
        c.at,
        c.op,
        c.path.as_deref().unwrap_or("?")
    );
    if let Some(p2) = &c.path2 {
        text.push_str(" -> ");
        text.push_str(p2);
    }
    if let Some(x) = &c.xattr {
        text.push_str(&format!(" xattr {x}"));
    }
    for (label, value) in [
        ("inode", c.inode),
        ("inode2", c.inode2),
        ("uid", c.uid),
        ("gid", c.gid),
        ("session", c.session),
    ] {
        if let Some(v) = value {
            text.push_str(&format!(" {label}={v}"));
        }
    }
    text
}
