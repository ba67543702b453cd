//! `jfs shard sql`: the SQL that shows a sharded volume whole in its root database (postgres_fdw foreign tables of each shard, and views over all).
//!
//! Each shard's tables become foreign tables in schema `jfs_shard_N` of
//! the root database, and schema `jfs_volume` gets views over the root's
//! own tables and every shard's: `usage` (each database's share of the
//! volume's space and inodes), `nodes` (every node, with its shard),
//! `entries` (every name) and `quotas` (every database's quotas with
//! their usage, a directory's with its path from the volume's root). The script is printed, not run: it needs a
//! superuser (for postgres_fdw) and says where the foreign servers are,
//! which a DBA may want to change; run it again after `jfs shard add`.
use crate::meta::{redact_url, ShardEntry};

/// The tables of each shard that the views read.
const TABLES: &str = "node, edge, quota, quota_usage";

/// `text` as an SQL string literal.
fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// The postgres_fdw options (host, port, dbname, sslmode) of a shard's URL.
fn server_options(url: &str) -> anyhow::Result<String> {
    let config: tokio_postgres::Config = url
        .split('?')
        .next()
        .unwrap_or(url)
        .parse()
        .map_err(|e| anyhow::anyhow!("shard URL {}: {e}", redact_url(url)))?;
    let mut options = Vec::new();
    let hosts: Vec<String> = (config.get_hosts().iter())
        .map(|h| match h {
            tokio_postgres::config::Host::Tcp(name) => name.clone(),
            tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
        })
        .collect();
    if !hosts.is_empty() {
        options.push(format!("host {}", literal(&hosts.join(","))));
    }
    if !config.get_ports().is_empty() {
        let ports: Vec<String> = config.get_ports().iter().map(u16::to_string).collect();
        options.push(format!("port {}", literal(&ports.join(","))));
    }
    if let Some(db) = config.get_dbname() {
        options.push(format!("dbname {}", literal(db)));
    }
    let query = url.split_once('?').map_or("", |(_, q)| q);
    if let Some(mode) = query.split('&').find_map(|p| p.strip_prefix("sslmode=")) {
        options.push(format!("sslmode {}", literal(mode)));
    }
    Ok(options.join(", "))
}

/// The script for the shards of `map`, the views granted to `readers`.
pub fn script(map: &[ShardEntry], readers: &[String]) -> anyhow::Result<String> {
    let mut sql = String::from(
        "-- jfs shard sql: the volume's shards as foreign tables of its root database, and\n\
         -- views over all (schema jfs_volume). Run as a superuser in the root database,\n\
         -- again after each `jfs shard add` (the views are made anew: the roles given\n\
         -- with --grant are granted them again). The views read as their owner (the\n\
         -- one running this, through its user mappings: add OPTIONS (user, password)\n\
         -- where the shards want a password).\n\
         BEGIN;\n\
         CREATE EXTENSION IF NOT EXISTS postgres_fdw;\n\
         CREATE SCHEMA IF NOT EXISTS jfs_volume;\n",
    );
    let mut usage = vec![
        "SELECT 0 AS shard, u.space, u.inodes FROM jfs.quota_usage u \
                          WHERE u.kind = 'fs'"
            .to_string(),
    ];
    let mut nodes = vec!["SELECT 0 AS shard, n.* FROM jfs.node n".to_string()];
    let mut entries = vec!["SELECT 0 AS shard, e.* FROM jfs.edge e".to_string()];
    let quota = |n: u16, schema: &str| {
        format!(
            "SELECT {n}{} q.kind, q.key, q.max_space, q.max_inodes, \
             (SELECT sum(u.space) FROM {schema}.quota_usage u WHERE u.kind = q.kind AND u.key = q.key) AS space, \
             (SELECT sum(u.inodes) FROM {schema}.quota_usage u WHERE u.kind = q.kind AND u.key = q.key) AS inodes \
             FROM {schema}.quota q",
            if n == 0 { " AS shard," } else { "," }
        )
    };
    let mut quotas = vec![quota(0, "jfs")];
    for shard in map {
        let n = shard.number;
        sql += &format!(
            "\n-- shard {n}: {}\n\
             CREATE SERVER IF NOT EXISTS jfs_shard_{n} FOREIGN DATA WRAPPER postgres_fdw OPTIONS ({});\n\
             CREATE USER MAPPING IF NOT EXISTS FOR CURRENT_USER SERVER jfs_shard_{n};\n\
             DROP SCHEMA IF EXISTS jfs_shard_{n} CASCADE;\n\
             CREATE SCHEMA jfs_shard_{n};\n\
             IMPORT FOREIGN SCHEMA jfs LIMIT TO ({TABLES}) FROM SERVER jfs_shard_{n} INTO jfs_shard_{n};\n",
            redact_url(&shard.url),
            server_options(&shard.url)?
        );
        usage.push(format!(
            "SELECT {n}, u.space, u.inodes FROM jfs_shard_{n}.quota_usage u WHERE u.kind = 'fs'"
        ));
        nodes.push(format!("SELECT {n}, n.* FROM jfs_shard_{n}.node n"));
        entries.push(format!("SELECT {n}, e.* FROM jfs_shard_{n}.edge e"));
        quotas.push(quota(n, &format!("jfs_shard_{n}")));
    }
    let union = |parts: &[String]| parts.join("\n    UNION ALL ");
    sql += &format!(
        "\n-- each database's share of the volume's space and inodes (sum them for the volume)\n\
         CREATE OR REPLACE VIEW jfs_volume.usage AS\n    {};\n\
         -- every node of the volume, with the shard that holds it\n\
         CREATE OR REPLACE VIEW jfs_volume.nodes AS\n    {};\n\
         -- every name of the volume (a shard root's is in its parent's shard)\n\
         CREATE OR REPLACE VIEW jfs_volume.entries AS\n    {};\n\
         -- every quota of the volume, in the database that keeps it, with its usage there;\n\
         -- a directory's with its path, followed up its names across shards (bytes that\n\
         -- are not UTF-8 escaped)\n\
         CREATE OR REPLACE VIEW jfs_volume.quotas AS\n\
         SELECT q.shard, q.kind, q.key,\n\
                CASE q.kind WHEN 'fs' THEN '/' WHEN 'dir' THEN (\n\
                    WITH RECURSIVE up(parent, path, depth) AS (\n\
                        SELECT e.parent, '/' || encode(e.name, 'escape'), 0\n\
                          FROM jfs_volume.entries e WHERE e.inode = q.key\n\
                        UNION ALL\n\
                        SELECT e.parent, '/' || encode(e.name, 'escape') || up.path, up.depth + 1\n\
                          FROM up JOIN jfs_volume.entries e ON e.inode = up.parent\n\
                         WHERE up.parent <> 1 AND up.depth < 1000)\n\
                    SELECT up.path FROM up WHERE up.parent = 1 LIMIT 1) END AS path,\n\
                q.max_space, q.space AS used_space, q.max_inodes, q.inodes AS used_inodes\n\
           FROM ({}) q;\n",
        union(&usage),
        union(&nodes),
        union(&entries),
        union(&quotas)
    );
    for role in readers {
        let role = format!("\"{}\"", role.replace('"', "\"\""));
        sql += &format!(
            "GRANT USAGE ON SCHEMA jfs_volume TO {role};\n\
             GRANT SELECT ON ALL TABLES IN SCHEMA jfs_volume TO {role};\n"
        );
    }
    sql += "COMMIT;\n";
    Ok(sql)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shards_url_becomes_the_options_of_its_foreign_server() {
        assert_eq!(
            server_options("postgres://db1:5433/vol?sslmode=require").unwrap(),
            "host 'db1', port '5433', dbname 'vol', sslmode 'require'"
        );
        assert_eq!(
            server_options("postgres://%2Ftmp%2Fpg%20it's:5499/v").unwrap(),
            "host '/tmp/pg it''s', port '5499', dbname 'v'"
        );
    }
}
