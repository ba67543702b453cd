//! `jfs shard add|list|mkdir`: a volume over several PostgreSQL databases, its namespace split by subtree (sql/shard.sql).
//!
//! `add` formats a database as the next shard of the volume whose root
//! database is given (the root's uuid and settings, its keys) and notes it
//! in the root's shard map; `list` shows the map and each shard's usage;
//! `mkdir` makes a directory whose contents live on a given shard: its
//! node on that shard first, then its entry in the parent's database.
use anyhow::Context;
use clap::{Args, Subcommand};

use crate::meta::{redact_url, FormatRequest, Meta, MetaError};
use crate::volume::shards::ShardSet;

#[derive(Args, Debug)]
pub struct ShardArgs {
    #[command(subcommand)]
    action: Action,
}

#[derive(Subcommand, Debug)]
enum Action {
    /// Format a database as a new shard of a volume and add it to the shard map
    Add(AddArgs),
    /// Show the shard map and each shard's usage
    List(ListArgs),
    /// Make a directory whose contents live on a given shard
    Mkdir(MkdirArgs),
    /// Remove an empty shard root (a directory whose node is on another shard than its name)
    Rmdir(RmdirArgs),
    /// Check the entries that cross shards; with --repair remove the broken ones
    Fsck(FsckArgs),
    /// Print the SQL that shows the whole volume in its root database (postgres_fdw views)
    Sql(SqlArgs),
}

#[derive(Args, Debug)]
struct AddArgs {
    /// PostgreSQL URL of the volume's root database (an administrator's)
    meta_url: String,
    /// PostgreSQL URL of the new shard's database (an administrator's; the
    /// map keeps it without user and password: every mount adds its own)
    shard_url: String,
    /// The shard's number (default: the next free one)
    #[arg(long)]
    number: Option<u16>,
}

#[derive(Args, Debug)]
struct ListArgs {
    /// PostgreSQL URL of the volume's root database
    meta_url: String,
}

#[derive(Args, Debug)]
struct SqlArgs {
    /// PostgreSQL URL of the volume's root database
    meta_url: String,
    /// A role to grant the views to (repeat for more)
    #[arg(long, value_name = "ROLE")]
    grant: Vec<String>,
}

#[derive(Args, Debug)]
struct MkdirArgs {
    /// PostgreSQL URL of the volume's root database (an administrator's)
    meta_url: String,
    /// Path of the new directory in the volume ("/projects/big")
    path: String,
    /// The shard that holds the directory and everything made below it
    shard: u16,
    /// Permission bits (octal)
    #[arg(long, default_value = "755")]
    mode: String,
    /// Owner uid
    #[arg(long, default_value_t = 0)]
    uid: u32,
    /// Owner gid
    #[arg(long, default_value_t = 0)]
    gid: u32,
}

#[derive(Args, Debug)]
struct RmdirArgs {
    /// PostgreSQL URL of the volume's root database (an administrator's)
    meta_url: String,
    /// Path of the shard root in the volume
    path: String,
}

#[derive(Args, Debug)]
struct FsckArgs {
    /// PostgreSQL URL of the volume's root database (an administrator's)
    meta_url: String,
    /// Remove entries naming no directory, and empty shard roots no entry names
    #[arg(long)]
    repair: bool,
}

pub async fn run(a: ShardArgs) -> anyhow::Result<()> {
    match a.action {
        Action::Add(a) => add(a).await,
        Action::List(a) => list(a).await,
        Action::Mkdir(a) => mkdir(a).await,
        Action::Rmdir(a) => rmdir(a).await,
        Action::Fsck(a) => super::shard_fsck::run(&a.meta_url, a.repair).await,
        Action::Sql(a) => {
            let root = Meta::connect(&a.meta_url, 1).await?;
            print!(
                "{}",
                super::shard_sql::script(&root.shards().await?, &a.grant)?
            );
            Ok(())
        }
    }
}

/// The volume of root database `meta_url`, opened by an administrator
/// (who may call `procedure`).
pub(super) async fn open_admin(
    meta_url: &str,
    procedure: &str,
    what: &str,
) -> anyhow::Result<ShardSet> {
    let set = open(meta_url).await?;
    anyhow::ensure!(
        set.root().may_call(procedure),
        "{}: {what} needs an administrator of the volume (jfs.grant_admin)",
        redact_url(meta_url)
    );
    Ok(set)
}

/// `path` ("/a/b") as its parent's path and its name.
fn split_path(path: &str) -> anyhow::Result<(&str, &str)> {
    path.trim_end_matches('/')
        .rsplit_once('/')
        .filter(|(_, name)| !name.is_empty())
        .ok_or_else(|| anyhow::anyhow!("{path}: give an absolute path below the root"))
}

async fn open(meta_url: &str) -> anyhow::Result<ShardSet> {
    let root = Meta::connect(meta_url, 2).await?;
    ShardSet::open(std::sync::Arc::new(root), meta_url, 2).await
}

async fn add(a: AddArgs) -> anyhow::Result<()> {
    let set = open_admin(&a.meta_url, "shard_add", "adding a shard").await?;
    let root = set.root();
    let volume = crate::volume::read_volume(root, &a.meta_url).await?;
    let secrets = root.volume_secrets().await?;
    let taken = root.shards().await?;
    let number = match a.number {
        Some(n) => n,
        None => taken.iter().map(|s| s.number).max().unwrap_or(0) + 1,
    };
    anyhow::ensure!(
        (1..=32766).contains(&number),
        "shard number {number}: use 1 to 32766"
    );
    anyhow::ensure!(
        !taken.iter().any(|s| s.number == number),
        "shard {number} is in the map already (jfs shard list)"
    );
    let shard = Meta::connect_for_format(&a.shard_url).await?;
    anyhow::ensure!(
        shard.database_identity().await? != root.database_identity().await?,
        "{} is the volume's root database itself: a shard is another database",
        redact_url(&a.shard_url)
    );
    let req = FormatRequest {
        name: volume.name.clone(),
        storage: volume.storage.clone(),
        bucket: volume.bucket.clone(),
        block_size: volume.block_size,
        trash_days: 0,
        capacity: 0,
        inodes: 0,
        meta_durability: volume.meta_durability.clone(),
        uuid: Some(volume.uuid.clone()),
        force: false,
        keys: secrets.keys.clone(),
        compression: Some(volume.compression.clone()),
        encryption: match volume.encrypt_algo.as_str() {
            "" => None,
            algo => Some((secrets.encrypt_key.clone(), algo.to_string())),
        },
    };
    let (errno, message) = shard.format(&req).await?;
    // (formatted by an earlier run that stopped before the map: go on)
    let again = errno == libc::EEXIST && shard.volume().await?.uuid == volume.uuid;
    anyhow::ensure!(
        errno == 0 || again,
        "cannot format {} as a shard: {message}",
        redact_url(&a.shard_url)
    );
    let (errno, message) = shard.shard_init(&volume.uuid, number).await?;
    anyhow::ensure!(errno == 0, "{}: {message}", redact_url(&a.shard_url));
    if volume.enable_acl {
        shard.enable_acl().await?;
    }
    mirror_settings(root, &shard)
        .await
        .with_context(|| format!("giving {} the root's settings", redact_url(&a.shard_url)))?;
    let (errno, message) = root
        .shard_add(number, &without_credentials(&a.shard_url))
        .await?;
    anyhow::ensure!(errno == 0, "{}: {message}", redact_url(&a.meta_url));
    println!(
        "shard {number} of volume {} added: {}",
        volume.name,
        redact_url(&a.shard_url)
    );
    Ok(())
}

/// Gives a new shard the settings its root was given after format (`jfs
/// config`, which sets every shard from then on): tier classes, the change
/// log's retention, how long freed objects are kept and the delete queue's
/// cap.
async fn mirror_settings(root: &Meta, shard: &Meta) -> anyhow::Result<()> {
    for (id, class) in (0..).zip(root.tier_classes().await?) {
        if !class.is_empty() {
            shard.set_tier_class(id, &class).await?;
        }
    }
    let kept = root.set_changelog_retention(None, None).await?;
    shard
        .set_changelog_retention(Some(&kept.max_age), Some(kept.max_rows))
        .await?;
    if let Some(queue) = root.delete_queue().await? {
        shard.set_retain_deleted(&queue.retain).await?;
        shard.set_delete_queue_cap(queue.cap).await?;
    }
    Ok(())
}

/// `url` without its user and password: the map is read by every mount,
/// which connects with its own credentials.
pub(super) fn without_credentials(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_len = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_len);
    match authority.rsplit_once('@') {
        Some((_, host)) => format!("{scheme}://{host}{path}"),
        None => url.to_string(),
    }
}

async fn list(a: ListArgs) -> anyhow::Result<()> {
    let set = open(&a.meta_url).await?;
    println!(
        "{:>5}  {:>14}  {:>10}  URL",
        "SHARD", "USED BYTES", "INODES"
    );
    let (mut space, mut inodes) = (0u64, 0u64);
    for number in set.numbers() {
        let url = set.url(number).unwrap_or_default();
        let s = set.meta(number).await?.statfs(1).await;
        // (a shard has no root directory: its usage is the volume's figure)
        let s = match s {
            Ok(s) => s,
            Err(e) => anyhow::bail!("shard {number} ({}): {e}", redact_url(url)),
        };
        let used = s.total_space - s.avail_space;
        space += used;
        inodes += s.used_inodes;
        println!(
            "{number:>5}  {used:>14}  {:>10}  {}",
            s.used_inodes,
            redact_url(url)
        );
    }
    println!("{:>5}  {space:>14}  {inodes:>10}", "all");
    Ok(())
}

async fn mkdir(a: MkdirArgs) -> anyhow::Result<()> {
    let mode = u32::from_str_radix(&a.mode, 8)
        .ok()
        .filter(|m| *m <= 0o7777)
        .ok_or_else(|| anyhow::anyhow!("--mode {}: give permission bits in octal (755)", a.mode))?;
    let set = open_admin(&a.meta_url, "shard_root_link", "making a shard root").await?;
    let path = a.path.trim_end_matches('/');
    let (parent_path, name) = split_path(path)?;
    let parent = set.resolve(parent_path).await?;
    anyhow::ensure!(
        crate::meta::shard_of(parent.inode) != Some(a.shard),
        "{parent_path} is on shard {} already: make {name} with mkdir",
        a.shard
    );
    match set.lookup(parent.inode, name.as_bytes()).await {
        Err(e) if is_enoent(&e) => {}
        Ok(_) => anyhow::bail!("{path} exists"),
        Err(e) => return Err(e),
    }
    let target = set.meta(a.shard).await?;
    let inode = target
        .shard_root_make(parent.inode, mode, a.uid, a.gid)
        .await
        .map_err(|e| anyhow::anyhow!("cannot make {path} on shard {}: {e}", a.shard))?;
    set.meta_of(parent.inode)
        .await?
        .shard_root_link(parent.inode, name.as_bytes(), inode)
        .await
        .map_err(|e| {
            anyhow::anyhow!(
                "made {path}'s directory on shard {} (inode {inode}) but could not name it: {e}; \
                 that directory is left without a name",
                a.shard
            )
        })?;
    println!("{path}: on shard {} (inode {inode})", a.shard);
    Ok(())
}

async fn rmdir(a: RmdirArgs) -> anyhow::Result<()> {
    let set = open_admin(&a.meta_url, "shard_root_unlink", "removing a shard root").await?;
    let path = a.path.trim_end_matches('/');
    let (parent_path, name) = split_path(path)?;
    let parent = set.resolve(parent_path).await?;
    let here = set.meta_of(parent.inode).await?;
    let inode = match here.lookup_placed(parent.inode, name.as_bytes()).await? {
        Err(inode) => inode,
        Ok(_) => anyhow::bail!(
            "{path} is no shard root (its node is in its parent's database): use rmdir"
        ),
    };
    let shard = crate::meta::shard_of(inode).unwrap_or(0);
    let target = set.meta(shard).await?;
    match target
        .shard_roots()
        .await?
        .into_iter()
        .find(|r| r.inode == inode)
    {
        Some(root) if !root.empty => {
            anyhow::bail!("{path} is not empty (its entries are on shard {shard})")
        }
        // (None: a name of nothing, left by a crash: removed below)
        _ => {}
    }
    // the directory first (only if still empty), then its name: a crash
    // between leaves a name of nothing, which this command (or `jfs shard
    // fsck --repair`) removes when run again
    crate::meta::remove_shard_root(&here, parent.inode, name.as_bytes(), &target, inode)
        .await
        .map_err(|e| anyhow::anyhow!("{path} (on shard {shard}, inode {inode}): {e}"))?;
    println!("{path}: removed from shard {shard}");
    Ok(())
}

fn is_enoent(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        matches!(
            c.downcast_ref::<MetaError>(),
            Some(MetaError::Errno(libc::ENOENT))
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_map_keeps_a_url_without_its_credentials() {
        assert_eq!(
            without_credentials("postgres://u:p%40ss@db1:5432/v?sslmode=require"),
            "postgres://db1:5432/v?sslmode=require"
        );
        assert_eq!(without_credentials("postgres://db1/v"), "postgres://db1/v");
        assert_eq!(
            without_credentials("postgres://u@%2Ftmp:5/v"),
            "postgres://%2Ftmp:5/v"
        );
    }
}
