//! `jfs quota set|get|list|delete|check META_URL`: the volume's, a
//! directory's, a user's or a group's limits on space and inodes (shaped
//! like `juicefs quota`). Usage is exact at every commit: it is kept by the
//! metadata procedures themselves.
use clap::{Args, Subcommand};

use crate::meta::{Meta, QuotaCheck, QuotaRow, QuotaTarget};
use crate::volume::shards::ShardSet;

#[derive(Args, Debug)]
pub struct QuotaArgs {
    #[command(subcommand)]
    action: Action,
}

#[derive(Subcommand, Debug)]
enum Action {
    /// Set (or change) limits; a new quota counts the current usage once
    Set(SetArgs),
    /// Show one quota
    Get(TargetArgs),
    /// Show every quota
    List(UrlArg),
    /// Remove a quota (the volume's: remove its limits)
    Delete(TargetArgs),
    /// Recount usage from the namespace and compare; --repair fixes drift
    Check(CheckArgs),
}

#[derive(Args, Debug)]
struct UrlArg {
    /// PostgreSQL URL of the metadata database
    meta_url: String,
}

#[derive(Args, Debug)]
struct Target {
    /// A directory of the volume, as a path from its root ("/projects/a")
    #[arg(long, group = "target")]
    path: Option<String>,
    /// A user id
    #[arg(long, group = "target")]
    uid: Option<u32>,
    /// A group id
    #[arg(long, group = "target")]
    gid: Option<u32>,
}

impl Target {
    /// The quota named; the volume's when none is.
    fn target(&self) -> QuotaTarget {
        match (&self.path, self.uid, self.gid) {
            (Some(p), _, _) => QuotaTarget::Dir(p.clone()),
            (_, Some(u), _) => QuotaTarget::User(u),
            (_, _, Some(g)) => QuotaTarget::Group(g),
            _ => QuotaTarget::Volume,
        }
    }
}

#[derive(Args, Debug)]
struct TargetArgs {
    /// PostgreSQL URL of the metadata database
    meta_url: String,
    #[command(flatten)]
    target: Target,
}

#[derive(Args, Debug)]
struct SetArgs {
    /// PostgreSQL URL of the metadata database
    meta_url: String,
    #[command(flatten)]
    target: Target,
    /// Space limit in GiB (0: none; kept as it is when not given)
    #[arg(long)]
    capacity: Option<u64>,
    /// Inode limit (0: none; kept as it is when not given)
    #[arg(long)]
    inodes: Option<u64>,
}

#[derive(Args, Debug)]
struct CheckArgs {
    /// PostgreSQL URL of the metadata database
    meta_url: String,
    #[command(flatten)]
    target: Target,
    /// Write the recount where the counters drifted (administration: an admin role's META_URL)
    #[arg(long)]
    repair: bool,
}

const GIB: u64 = 1 << 30;

fn show_limit(limit: i64, used: i64, unit: impl Fn(i64) -> String) -> String {
    if limit > 0 {
        format!(
            "{} of {} ({:.1}%)",
            unit(used),
            unit(limit),
            100.0 * used as f64 / limit as f64
        )
    } else {
        format!("{} (no limit)", unit(used))
    }
}

fn gib(bytes: i64) -> String {
    format!("{:.2} GiB", bytes as f64 / GIB as f64)
}

fn name(row: &QuotaRow) -> String {
    match row.kind.as_str() {
        "fs" => "volume".to_string(),
        "dir" => format!("dir {}", row.path.as_deref().unwrap_or("?")),
        "user" => format!("uid {}", row.uid.unwrap_or(-1)),
        _ => format!("gid {}", row.gid.unwrap_or(-1)),
    }
}

fn print_row(row: &QuotaRow) {
    println!(
        "{:<24} space {:<36} inodes {}",
        name(row),
        show_limit(row.max_space, row.used_space, gib),
        show_limit(row.max_inodes, row.used_inodes, |n| n.to_string())
    );
}

fn print_check(c: &QuotaCheck) {
    let what = match c.kind.as_str() {
        "fs" => "volume".to_string(),
        "dir" => format!("dir {}", c.path.as_deref().unwrap_or("?")),
        "user" => format!("uid {}", c.key),
        _ => format!("gid {}", c.key),
    };
    let state = if c.ok {
        "ok"
    } else if c.repaired {
        "REPAIRED"
    } else {
        "DRIFTED"
    };
    println!(
        "{what:<24} {state:<9} counted {} inodes / {} bytes, recorded {} / {}",
        c.counted_inodes, c.counted_space, c.recorded_inodes, c.recorded_space
    );
}

pub async fn run(a: QuotaArgs) -> anyhow::Result<()> {
    match a.action {
        Action::Set(s) => {
            let meta = Meta::connect(&s.meta_url, 1).await?;
            let target = s.target.target();
            if s.capacity.is_none() && s.inodes.is_none() {
                anyhow::bail!("give --capacity GiB and/or --inodes N");
            }
            if let QuotaTarget::Dir(path) = &target {
                on_root_database(&meta, &s.meta_url, path).await?;
            }
            let current = meta.quotas().await?.into_iter().find(|r| r.is(&target));
            let space = match (s.capacity, &current) {
                (Some(c), _) => c
                    .checked_mul(GIB)
                    .ok_or_else(|| anyhow::anyhow!("--capacity {c} GiB is too large"))?,
                (None, Some(r)) => r.max_space as u64,
                (None, None) => 0,
            };
            let inodes = match (s.inodes, &current) {
                (Some(n), _) => n,
                (None, Some(r)) => r.max_inodes as u64,
                (None, None) => 0,
            };
            meta.set_quota(&target, space, inodes).await?;
            if let Some(row) = meta.quotas().await?.iter().find(|r| r.is(&target)) {
                print_row(row);
            }
        }
        Action::Get(t) => {
            let meta = Meta::connect(&t.meta_url, 1).await?;
            let target = t.target.target();
            match meta.quotas().await?.iter().find(|r| r.is(&target)) {
                Some(row) => print_row(row),
                None => anyhow::bail!("no quota set for {target:?}"),
            }
        }
        Action::List(u) => {
            let meta = Meta::connect(&u.meta_url, 1).await?;
            for row in meta.quotas().await? {
                print_row(&row);
            }
        }
        Action::Delete(t) => {
            let meta = Meta::connect(&t.meta_url, 1).await?;
            let target = t.target.target();
            if !meta.delete_quota(&target).await? {
                anyhow::bail!("no quota set for {target:?}");
            }
            println!("quota removed");
        }
        Action::Check(c) => {
            let meta = Meta::connect(&c.meta_url, 1).await?;
            let target = match (&c.target.path, c.target.uid, c.target.gid) {
                (None, None, None) => None,
                _ => Some(c.target.target()),
            };
            let rows = meta.check_quota(target.as_ref(), c.repair).await?;
            let drifted = rows.iter().filter(|r| !r.ok && !r.repaired).count();
            for r in &rows {
                print_check(r);
            }
            if drifted > 0 {
                anyhow::bail!("{drifted} quota(s) drifted; run again with --repair to fix them");
            }
        }
    }
    Ok(())
}

/// Refuses a directory quota on `path` when its node is on another shard
/// than the root database's: a directory quota counts the nodes of one
/// database (it stops at a shard boundary), and this release keeps them
/// in the root database only.
async fn on_root_database(meta: &Meta, meta_url: &str, path: &str) -> anyhow::Result<()> {
    if meta.shards().await?.is_empty() {
        return Ok(());
    }
    let shards = ShardSet::open(std::sync::Arc::new(meta.clone()), meta_url, 1).await?;
    let node = shards.resolve(path).await?;
    match crate::meta::shard_of(node.inode) {
        Some(0) | None => Ok(()),
        Some(shard) => anyhow::bail!(
            "{path} is on shard {shard} of the volume (at or below a shard root): a directory \
             quota counts the nodes of one database and stops at a shard boundary, and this \
             release sets them on the root database's directories only"
        ),
    }
}
