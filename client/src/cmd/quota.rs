//! `jfs quota set|get|list|delete|check META_URL`: the volume's, a
//! directory's, a user's or a group's limits on space and inodes (shaped
//! like `juicefs quota`). Usage is exact at every commit: it is kept by the
//! metadata procedures themselves.
use std::sync::Arc;

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
        "fs" if c.shard != 0 => format!("shard {}", c.shard),
        "fs" => "volume".to_string(),
        "user" | "group" if c.shard != 0 => {
            format!(
                "shard {} {} {}",
                c.shard,
                if c.kind == "user" { "uid" } else { "gid" },
                c.key
            )
        }
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
            if s.capacity.is_none() && s.inodes.is_none() {
                anyhow::bail!("give --capacity GiB and/or --inodes N");
            }
            let placed = Placed::of(&s.meta_url, s.target.target()).await?;
            let current = placed.current().await?;
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
            placed.set(space, inodes).await?;
            if let Some(row) = placed.current().await? {
                print_row(&row);
            }
        }
        Action::Get(t) => {
            let placed = Placed::of(&t.meta_url, t.target.target()).await?;
            match placed.current().await? {
                Some(row) => print_row(&row),
                None => anyhow::bail!("no quota set for {:?}", placed.target()),
            }
        }
        Action::List(u) => {
            let meta = Meta::connect(&u.meta_url, 1).await?;
            let rows = meta.quotas().await?;
            for row in &rows {
                print_row(row);
            }
            // a shard's directory quotas, with their paths across shards
            if !meta.shards().await?.is_empty() {
                let set = ShardSet::open(Arc::new(meta), &u.meta_url, 1).await?;
                for number in set.numbers().into_iter().filter(|n| *n != 0) {
                    for q in set.meta(number).await?.dir_quotas().await? {
                        let path = set.path_of(q.key).await?;
                        print_row(&shard_row(&q, path));
                    }
                }
            }
        }
        Action::Delete(t) => {
            let placed = Placed::of(&t.meta_url, t.target.target()).await?;
            if !placed.delete().await? {
                anyhow::bail!("no quota set for {:?}", placed.target());
            }
            println!("quota removed");
        }
        Action::Check(c) => {
            let rows = match (&c.target.path, c.target.uid, c.target.gid) {
                (None, None, None) => check_every_database(&c.meta_url, c.repair).await?,
                _ => match Placed::of(&c.meta_url, c.target.target()).await? {
                    Placed::Root(meta, target) => meta.check_quota(Some(&target), c.repair).await?,
                    Placed::Shard { meta, inode, path } => {
                        let mut rows = meta.check_dir_quota(inode, c.repair).await?;
                        for r in &mut rows {
                            r.path = Some(path.clone());
                        }
                        rows
                    }
                },
            };
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

/// Where a quota is kept: in the root database by its name (the volume,
/// a user, a group, a directory of the root's), or, for a directory on a
/// shard, in that shard's database by inode (a directory quota counts the
/// nodes of its own database and stops at a shard boundary).
enum Placed {
    Root(Arc<Meta>, QuotaTarget),
    Shard {
        meta: Arc<Meta>,
        inode: u64,
        path: String,
    },
}

impl Placed {
    /// Where the quota `target` of the volume whose root is at `meta_url` is.
    async fn of(meta_url: &str, target: QuotaTarget) -> anyhow::Result<Placed> {
        let meta = Arc::new(Meta::connect(meta_url, 1).await?);
        let QuotaTarget::Dir(path) = &target else {
            return Ok(Placed::Root(meta, target));
        };
        if meta.shards().await?.is_empty() {
            return Ok(Placed::Root(meta, target));
        }
        let set = ShardSet::open(meta.clone(), meta_url, 1).await?;
        let node = set.resolve(path).await?;
        anyhow::ensure!(
            node.kind == crate::meta::NodeType::Dir,
            "{path} is not a directory"
        );
        Ok(match crate::meta::shard_of(node.inode) {
            Some(0) | None => Placed::Root(meta, target),
            Some(number) => Placed::Shard {
                meta: set.meta(number).await?,
                inode: node.inode,
                path: crate::meta::normalize_path(path),
            },
        })
    }

    /// What the quota is for, as errors name it.
    fn target(&self) -> QuotaTarget {
        match self {
            Placed::Root(_, target) => target.clone(),
            Placed::Shard { path, .. } => QuotaTarget::Dir(path.clone()),
        }
    }

    /// The quota as it is now, if set.
    async fn current(&self) -> anyhow::Result<Option<QuotaRow>> {
        Ok(match self {
            Placed::Root(meta, target) => meta.quotas().await?.into_iter().find(|r| r.is(target)),
            Placed::Shard { meta, inode, path } => (meta.dir_quotas().await?.iter())
                .find(|q| q.key == *inode)
                .map(|q| shard_row(q, path.clone())),
        })
    }

    async fn set(&self, space: u64, inodes: u64) -> anyhow::Result<()> {
        match self {
            Placed::Root(meta, target) => meta.set_quota(target, space, inodes).await?,
            Placed::Shard { meta, inode, .. } => meta.set_dir_quota(*inode, space, inodes).await?,
        }
        Ok(())
    }

    async fn delete(&self) -> anyhow::Result<bool> {
        Ok(match self {
            Placed::Root(meta, target) => meta.delete_quota(target).await?,
            Placed::Shard { meta, inode, .. } => meta.delete_dir_quota(*inode).await?,
        })
    }
}

/// Every quota of the volume at `meta_url` checked, the root database's
/// first, then each shard's (its own usage, users, groups and directories;
/// a directory's path followed across shards, the rest labelled with the
/// shard).
async fn check_every_database(meta_url: &str, repair: bool) -> anyhow::Result<Vec<QuotaCheck>> {
    let meta = Meta::connect(meta_url, 1).await?;
    let mut rows = meta.check_quota(None, repair).await?;
    if meta.shards().await?.is_empty() {
        return Ok(rows);
    }
    let set = ShardSet::open(Arc::new(meta), meta_url, 1).await?;
    for number in set.numbers().into_iter().filter(|n| *n != 0) {
        for mut r in set.meta(number).await?.check_quota(None, repair).await? {
            r.path = match r.kind.as_str() {
                "dir" => Some(set.path_of(r.key as u64).await?),
                _ => None,
            };
            r.shard = number;
            rows.push(r);
        }
    }
    Ok(rows)
}

/// A shard's directory quota `q` as a row of `path`.
fn shard_row(q: &crate::meta::DirQuota, path: String) -> QuotaRow {
    QuotaRow {
        kind: "dir".to_string(),
        path: Some(path),
        uid: None,
        gid: None,
        max_space: q.max_space,
        used_space: q.used_space,
        max_inodes: q.max_inodes,
        used_inodes: q.used_inodes,
    }
}
