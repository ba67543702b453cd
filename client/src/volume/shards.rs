//! A volume's databases: its root and the shards its map names, connected with the caller's credentials, and the one of them that holds a given inode.
//!
//! The root database's shard map keeps each shard's URL without
//! credentials ([`with_credentials`] adds the caller's); each shard is
//! connected at its first use. An inode names its shard in its high bits
//! (`meta::shard_of`), so routing costs no lookup. A name whose node is on
//! another shard (a shard root) is answered by its parent's database with
//! EXDEV and the node's inode: [`ShardSet::lookup`] then asks that shard.
use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::Context;
use tokio::sync::OnceCell;

use crate::meta::{redact_url, shard_of, Attr, Meta};

/// The root database and the shards of its map.
pub struct ShardSet {
    root: Arc<Meta>,
    root_url: String,
    max_connections: usize,
    shards: BTreeMap<u16, Shard>,
}

/// One shard of the map: where it is and, once used, its pool.
struct Shard {
    url: String,
    meta: OnceCell<Arc<Meta>>,
}

impl ShardSet {
    /// The shard set of the volume whose root database `root` is (at
    /// `root_url`, whose credentials reach the shards too).
    pub async fn open(
        root: Arc<Meta>,
        root_url: &str,
        max_connections: usize,
    ) -> anyhow::Result<Self> {
        let number = root.shard_number().await?;
        anyhow::ensure!(
            number == 0,
            "{} is shard {number} of its volume: give the volume's root database",
            redact_url(root_url)
        );
        let shards = (root.shards().await?.into_iter())
            .map(|e| {
                let url = with_credentials(&e.url, root_url);
                (
                    e.number,
                    Shard {
                        url,
                        meta: OnceCell::new(),
                    },
                )
            })
            .collect();
        Ok(ShardSet {
            root,
            root_url: root_url.to_string(),
            max_connections,
            shards,
        })
    }

    /// The root database.
    pub fn root(&self) -> &Arc<Meta> {
        &self.root
    }

    /// The shard numbers of the map, the root's (0) first.
    pub fn numbers(&self) -> Vec<u16> {
        std::iter::once(0)
            .chain(self.shards.keys().copied())
            .collect()
    }

    /// Where shard `number` is, with the caller's credentials.
    pub fn url(&self, number: u16) -> Option<&str> {
        match number {
            0 => Some(&self.root_url),
            n => self.shards.get(&n).map(|s| s.url.as_str()),
        }
    }

    /// Shard `number`'s database, connected at its first use.
    pub async fn meta(&self, number: u16) -> anyhow::Result<Arc<Meta>> {
        if number == 0 {
            return Ok(self.root.clone());
        }
        let shard = self.shards.get(&number).with_context(|| {
            format!("shard {number} is not in the volume's shard map (jfs shard list)")
        })?;
        let meta = shard
            .meta
            .get_or_try_init(|| async {
                let meta = Meta::connect(&shard.url, self.max_connections).await?;
                let says = meta.shard_number().await?;
                anyhow::ensure!(
                    says == number,
                    "{} is shard {says}, not shard {number} as the map says",
                    redact_url(&shard.url)
                );
                anyhow::Ok(Arc::new(meta))
            })
            .await?;
        Ok(meta.clone())
    }

    /// The database that holds inode `inode`.
    pub async fn meta_of(&self, inode: u64) -> anyhow::Result<Arc<Meta>> {
        self.meta(shard_of(inode).unwrap_or(0)).await
    }

    /// Entry `name` of directory `parent`, its attributes from whichever
    /// shard holds its node.
    pub async fn lookup(&self, parent: u64, name: &[u8]) -> anyhow::Result<Attr> {
        match self
            .meta_of(parent)
            .await?
            .lookup_placed(parent, name)
            .await?
        {
            Ok(attr) => Ok(attr),
            Err(inode) => Ok(self.meta_of(inode).await?.getattr(inode).await?),
        }
    }

    /// The node at absolute path `path` ("/a/b"), followed across shards.
    pub async fn resolve(&self, path: &str) -> anyhow::Result<Attr> {
        let mut attr = self.root.getattr(1).await?;
        for name in path.split('/').filter(|n| !n.is_empty()) {
            attr = self
                .lookup(attr.inode, name.as_bytes())
                .await
                .with_context(|| format!("{path}: no {name}"))?;
        }
        Ok(attr)
    }
}

impl ShardSet {
    /// The path from the volume's root of directory `inode`, followed up
    /// across shards (each database names it up to its shard root, whose
    /// own entry is in its parent's database).
    pub async fn path_of(&self, inode: u64) -> anyhow::Result<String> {
        let mut path = String::new();
        let (mut at, mut db) = (inode, self.meta_of(inode).await?);
        // (a shard root's chain is at most one link per shard deep)
        for _ in 0..=self.shards.len() + 1 {
            let (top, below) = db.place(at).await?;
            path = below + &path;
            if top == 1 {
                return Ok(if path.is_empty() {
                    "/".to_string()
                } else {
                    path
                });
            }
            let parent = self.meta_of(top).await?.getattr(top).await?.parent;
            anyhow::ensure!(
                shard_of(top) != Some(0) && parent != 0 && shard_of(parent) != shard_of(top),
                "directory {inode} has no path from the volume's root (stopped at {top})"
            );
            (at, db) = (top, self.meta_of(parent).await?);
        }
        anyhow::bail!("directory {inode}: its path crosses more shard roots than there are shards")
    }
}

/// `url` (a shard map's URL, without credentials) with the user and
/// password of `from` (the caller's URL to the root database), unless it
/// names a user of its own.
pub fn with_credentials(url: &str, from: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority = rest.split(['/', '?']).next().unwrap_or("");
    if authority.contains('@') {
        return url.to_string();
    }
    match userinfo(from) {
        Some(user) => format!("{scheme}://{user}@{rest}"),
        None => url.to_string(),
    }
}

/// The `user[:password]` part of a postgres:// URL, if any.
fn userinfo(url: &str) -> Option<&str> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?']).next()?;
    authority.rsplit_once('@').map(|(user, _)| user)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shards_url_takes_the_callers_credentials_unless_it_names_its_own() {
        let root = "postgres://alice:s%40cret@db0:5432/vol?sslmode=require";
        assert_eq!(
            with_credentials("postgres://db1:5433/vol1", root),
            "postgres://alice:s%40cret@db1:5433/vol1"
        );
        assert_eq!(
            with_credentials("postgres://bob@db1/vol1", root),
            "postgres://bob@db1/vol1"
        );
        assert_eq!(
            with_credentials(
                "postgres://%2Ftmp%2Fpg:5499/s1",
                "postgres://carol@%2Ftmp%2Fpg:5499/s0"
            ),
            "postgres://carol@%2Ftmp%2Fpg:5499/s1"
        );
        assert_eq!(
            with_credentials("postgres://db1/vol1", "postgres://db0/vol"),
            "postgres://db1/vol1"
        );
    }
}
