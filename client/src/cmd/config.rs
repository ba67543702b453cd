//! `jfs config META_URL ...`: the volume's settings changed after format (POSIX ACLs, tier classes, the change log's retention, how long freed objects are kept, the delete queue's cap, read-only roles' store keys); on a volume over shards, on every database, the root's first.
use std::sync::Arc;

use anyhow::Context;
use clap::Args;

use crate::meta::{redact_url, Meta};
use crate::volume::shards::ShardSet;

#[derive(Args, Debug)]
pub struct ConfigArgs {
    /// PostgreSQL URL of the metadata database
    meta_url: String,
    /// Tier id (0..3) whose storage class --tier-sc sets
    #[arg(long, requires = "tier_sc")]
    tier_id: Option<i32>,
    /// Storage class (STANDARD_IA, INTELLIGENT_TIERING, GLACIER_IR, GLACIER, DEEP_ARCHIVE...; "" = default)
    #[arg(long, requires = "tier_id")]
    tier_sc: Option<String>,
    /// Turn POSIX ACLs on (they cannot be turned off; mounts made before
    /// enforce them once mounted again)
    #[arg(long)]
    enable_acl: bool,
    /// Files no longer than this many KiB keep the bytes written to them
    /// from now on in the database, by mounts started after (0 = never; at
    /// most 128)
    #[arg(long, value_name = "KiB")]
    inline_max: Option<u32>,
    /// How long the change log keeps a change (a PostgreSQL interval:
    /// '2 days', '12 hours'; at least a minute; default 1 day)
    #[arg(long, value_name = "AGE")]
    changelog_max_age: Option<String>,
    /// How many changes the change log keeps at most (default 10,000,000)
    #[arg(long, value_name = "N")]
    changelog_max_rows: Option<i64>,
    /// Keep freed objects at least this long before any mount or `jfs gc
    /// --delete` deletes them (a PostgreSQL interval: '14 days'; 0 = only
    /// the mounts' --gc-delay): set it beyond the database's
    /// point-in-time-recovery window
    #[arg(long, value_name = "DURATION")]
    retain_deleted: Option<String>,
    /// Past this many GiB waiting for deletion, freed objects are deleted
    /// as soon as the commit that freed them is durable, whatever the
    /// mounts' --gc-delay (never before --retain-deleted); 0 = no cap
    #[arg(long, value_name = "GiB")]
    delete_queue_cap: Option<f64>,
    /// The object store's access key read-only roles get instead of the
    /// volume's (a store user that may only read the bucket; "" with an
    /// empty --reader-secret-key: they get none)
    #[arg(long, value_name = "KEY", requires = "reader_secret_key")]
    reader_access_key: Option<String>,
    /// Its secret key
    #[arg(long, value_name = "KEY", requires = "reader_access_key")]
    reader_secret_key: Option<String>,
}

/// Every database of the volume at `meta_url` (its root's, then each
/// shard's), reached before anything changes.
async fn databases(meta_url: &str) -> anyhow::Result<Vec<(u16, Arc<Meta>)>> {
    let root = Meta::connect(meta_url, 1).await?;
    let number = root.shard_number().await?;
    anyhow::ensure!(
        number == 0,
        "{} is shard {number} of a volume: run jfs config on its root database, which sets \
         every shard (nothing was changed)",
        redact_url(meta_url)
    );
    let set = ShardSet::open(Arc::new(root), meta_url, 1).await?;
    let mut databases = Vec::new();
    for n in set.numbers() {
        let meta = set
            .meta(n)
            .await
            .with_context(|| format!("shard {n}: not reached, nothing was changed"))?;
        databases.push((n, meta));
    }
    Ok(databases)
}

/// `change` made on every database, the root's first: the root's answer.
/// A database that fails stops it, saying which (those before it have the
/// change: running the command again makes it on the rest).
async fn on_each<T, F, Fut>(databases: &[(u16, Arc<Meta>)], change: F) -> anyhow::Result<T>
where
    F: Fn(Arc<Meta>) -> Fut,
    Fut: std::future::Future<Output = crate::meta::Result<T>>,
{
    let mut root_answer = None;
    for (n, meta) in databases {
        let answer = change(meta.clone()).await.map_err(|e| {
            let e = anyhow::Error::from(e);
            match n {
                0 => e,
                n => e.context(format!(
                    "shard {n} (the root and the shards before it have the change: run jfs \
                     config again)"
                )),
            }
        })?;
        root_answer.get_or_insert(answer);
    }
    root_answer.context("the volume has no database")
}

pub async fn run(a: ConfigArgs) -> anyhow::Result<()> {
    let dbs = databases(&a.meta_url).await?;
    let mut changed = false;
    if a.enable_acl {
        if on_each(&dbs, |m| async move { m.enable_acl().await }).await? {
            println!("POSIX ACLs on (mount again to enforce them)");
        } else {
            println!("POSIX ACLs were on already");
        }
        changed = true;
    }
    if let (Some(id), Some(class)) = (a.tier_id, &a.tier_sc) {
        on_each(&dbs, |m| async move { m.set_tier_class(id, class).await }).await?;
        println!(
            "tier {id} -> {}",
            if class.is_empty() {
                "(default class)"
            } else {
                class
            }
        );
        changed = true;
    }
    if a.changelog_max_age.is_some() || a.changelog_max_rows.is_some() {
        let (age, rows) = (a.changelog_max_age.as_deref(), a.changelog_max_rows);
        let kept = on_each(&dbs, |m| async move {
            m.set_changelog_retention(age, rows).await
        })
        .await?;
        println!(
            "the change log keeps {} and at most {} rows",
            kept.max_age, kept.max_rows
        );
        changed = true;
    }
    if let Some(kib) = a.inline_max {
        let bytes = super::format::inline_max_bytes(kib)?;
        on_each(&dbs, |m| async move { m.set_inline_max(bytes).await }).await?;
        match bytes {
            0 => println!("no file keeps new bytes in the database"),
            _ => println!(
                "files of at most {bytes} bytes keep their bytes in the database \
                 (mounts started from now on)"
            ),
        }
        changed = true;
    }
    if let Some(duration) = &a.retain_deleted {
        let kept = on_each(
            &dbs,
            |m| async move { m.set_retain_deleted(duration).await },
        )
        .await?;
        println!("freed objects are kept at least {kept} before they are deleted");
        changed = true;
    }
    if let Some(gib) = a.delete_queue_cap {
        if !(0.0..=(1u64 << 33) as f64).contains(&gib) {
            anyhow::bail!("--delete-queue-cap is 0 (no cap) or a size in GiB, not {gib}");
        }
        let bytes = (gib * (1u64 << 30) as f64) as u64;
        let cap = on_each(&dbs, |m| async move { m.set_delete_queue_cap(bytes).await }).await?;
        match cap {
            0 => println!("freed objects wait for the mounts' --gc-delay, however many"),
            cap => println!(
                "past {cap} bytes waiting for deletion, freed objects go once the commit that \
                 freed them is durable"
            ),
        }
        changed = true;
    }
    if let (Some(ak), Some(sk)) = (&a.reader_access_key, &a.reader_secret_key) {
        on_each(&dbs, |m| async move { m.set_reader_keys(ak, sk).await }).await?;
        match ak.is_empty() {
            true => println!("read-only roles get no object store keys"),
            false => println!("read-only roles get object store access key {ak}"),
        }
        changed = true;
    }
    if !changed {
        anyhow::bail!(
            "nothing to change: give --tier-id N --tier-sc CLASS, --enable-acl, \
             --changelog-max-age AGE, --changelog-max-rows N, --retain-deleted DURATION, \
             --inline-max KiB \
             or --reader-access-key KEY --reader-secret-key KEY"
        );
    }
    if dbs.len() > 1 {
        println!(
            "(set on the root database and its {} shard(s))",
            dbs.len() - 1
        );
    }
    Ok(())
}
