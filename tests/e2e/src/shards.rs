//! A volume over private clusters of a test's own: the root database and its shards (`jfs shard add`), with shard roots made (`jfs shard mkdir`), mounted as a client role.
use std::path::Path;
use std::process::Command;

use crate::cluster::Cluster;
use crate::volume::{mount_at, Mount};
use crate::{jfs, ok};

/// The role mounts of a [`ShardedVolume`] use (jfs.grant_client on each database).
pub const SHARD_CLIENT: &str = "jfs_shard_mounter";

/// A volume over `clusters`: the first holds the root database, each
/// other one shard (numbered 1, 2...), each in database `vol`.
pub struct ShardedVolume {
    pub clusters: Vec<Cluster>,
    /// META_URL of the root database as postgres (`jfs shard`).
    pub admin_url: String,
    /// META_URL of the root database as [`SHARD_CLIENT`]: what mounts use.
    pub url: String,
    /// Holds the clusters, the bucket and the mounts' logs.
    pub dir: tempfile::TempDir,
}

impl ShardedVolume {
    /// Volume `name` over `shards + 1` new clusters, with shard roots
    /// `roots` (path, shard number) made, mode 0777.
    pub fn new(name: &str, shards: usize, roots: &[(&str, u16)]) -> ShardedVolume {
        let dir = tempfile::Builder::new()
            .prefix("jfs-shards-")
            .tempdir()
            .unwrap();
        ok(Command::new("chmod").arg("755").arg(dir.path()));
        let clusters: Vec<Cluster> = (0..=shards)
            .map(|n| Cluster::start(&dir.path().join(format!("pg{n}"))))
            .collect();
        clusters[0].make_volume(name, SHARD_CLIENT, &dir.path().join("bucket"), &[]);
        let admin_url = clusters[0].url("postgres", "vol");
        for shard in &clusters[1..] {
            shard.make_shard_database(SHARD_CLIENT);
            ok(jfs().args(["shard", "add", &admin_url, &shard.url("postgres", "vol")]));
        }
        for (path, shard) in roots {
            ok(jfs().args([
                "shard",
                "mkdir",
                &admin_url,
                path,
                &shard.to_string(),
                "--mode",
                "777",
            ]));
        }
        ShardedVolume {
            url: clusters[0].url(SHARD_CLIENT, "vol"),
            admin_url,
            clusters,
            dir,
        }
    }

    /// A mount of the volume in DIR/`label` (log DIR/`label`.log), with
    /// `extra` flags (see [`mount_at`]).
    pub fn mount(&self, label: &str, extra: &[&str]) -> Mount {
        let at = self.dir.path();
        mount_at(
            &self.url,
            &at.join(label),
            &at.join(format!("{label}.log")),
            extra,
        )
    }

    /// `sql` on every database, root first: what each answers.
    pub fn sql_each(&self, sql: &str) -> Vec<String> {
        self.clusters.iter().map(|c| c.sql("vol", sql)).collect()
    }

    /// Checks every database (`jfs.fsck`) and the shard roots across them
    /// (`jfs shard fsck`).
    pub fn assert_whole(&self) {
        for (n, problems) in self
            .sql_each("SELECT count(*) FROM jfs.fsck()")
            .iter()
            .enumerate()
        {
            assert_eq!(problems, "0", "jfs.fsck() on database {n} of the volume");
        }
        let out = ok(jfs().args(["shard", "fsck", &self.admin_url]));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("are whole"), "jfs shard fsck: {text}");
    }

    /// The directory that holds the clusters, the bucket and the logs.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}
