//! Shards (`jfs shard`, sql/shard.sql): a volume over three private clusters, the root and two shards, each an ordinary PostgreSQL with the extension.
//!
//! What this release does with them: shards are added and listed, shard
//! roots made (nested too) and removed, ids carry their shard, each
//! database checks clean and `jfs shard fsck` checks what crosses them
//! (and mends what a crash between two steps leaves), what would cross a
//! shard answers EXDEV, and the tools that work on one database at a time
//! (gc) leave the other shards' objects alone.
//! A dump of the root writes the whole volume (each shard's tree in place
//! of its shard root), which loads into one database. Mounts, the Python
//! package and the gateway span them (shard_mount.rs, python.rs,
//! gateway_shards.rs).
use std::path::Path;
use std::process::Command;

use jfs_e2e::*;

/// The role mounts and the SQL checks use (jfs.grant_client on each).
const CLIENT: &str = "jfs_shard_client";

/// psql on database `vol` of `pg` as the client role, running `sql`.
fn psql_as_client(pg: &Cluster, sql: &str) -> Command {
    let mut psql = Command::new("psql");
    psql.args(["-XAtq", "-v", "ON_ERROR_STOP=1", "-U", CLIENT, "-p"])
        .arg(pg.port.to_string())
        .arg("-h")
        .arg(&pg.dir)
        .args(["-d", "vol", "-c", sql]);
    psql
}

/// What `sql` gives as the client role.
fn as_client(pg: &Cluster, sql: &str) -> String {
    let out = ok(&mut psql_as_client(pg, sql));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Whether `sql` runs as the client role.
fn client_runs(pg: &Cluster, sql: &str) -> bool {
    psql_as_client(pg, sql).output().unwrap().status.success()
}

/// Runs SQL script `script` in database `vol` of `pg` as postgres.
fn run_script(pg: &Cluster, script: &str) {
    use std::io::Write;
    let mut psql = Command::new("psql")
        .args(["-XAtq", "-v", "ON_ERROR_STOP=1", "-U", "postgres", "-p"])
        .arg(pg.port.to_string())
        .arg("-h")
        .arg(&pg.dir)
        .args(["-d", "vol", "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    psql.stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    let out = psql.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the script failed: {}\n{script}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn stdout(out: std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// An object of the bucket named as a block of slice `id`, two hours old.
fn old_block(bucket: &Path, volume: &str, id: u64) -> std::path::PathBuf {
    let path = bucket.join(format!(
        "{volume}/chunks/{}/{}/{id}_0_4096",
        id / 1_000_000,
        id / 1_000
    ));
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, vec![7u8; 4096]).unwrap();
    ok(Command::new("touch").args(["-d", "2 hours ago"]).arg(&path));
    path
}

#[test]
fn a_volume_spans_three_clusters_with_shard_roots_and_ids_of_their_own() {
    let tmp = tempfile::Builder::new()
        .prefix("jfs-shard-")
        .tempdir()
        .unwrap();
    let base = tmp.path();
    ok(Command::new("chmod").arg("755").arg(base));
    let root = Cluster::start(&base.join("pg0"));
    let one = Cluster::start(&base.join("pg1"));
    let five = Cluster::start(&base.join("pg5"));
    let bucket = base.join("bucket");
    root.make_volume("shv", CLIENT, &bucket, &["--trash-days", "1"]);
    one.make_shard_database(CLIENT);
    five.make_shard_database(CLIENT);
    let root_admin = root.url("postgres", "vol");

    // the root is no shard of itself (it once became one, and lost its root)
    fails_with(
        jfs().args(["shard", "add", &root_admin, &root_admin]),
        "is the volume's root database itself",
    );
    assert_eq!(root.sql("vol", "SELECT count(*) || ':' || shard FROM jfs.node, jfs.setting WHERE inode = 1 GROUP BY shard"), "1:0");

    // shards join: the next number, or the one asked for
    let added = stdout(ok(jfs().args([
        "shard",
        "add",
        &root_admin,
        &one.url("postgres", "vol"),
    ])));
    assert!(added.contains("shard 1 of volume shv added"), "{added}");
    ok(jfs().args([
        "shard",
        "add",
        &root_admin,
        &five.url("postgres", "vol"),
        "--number",
        "5",
    ]));
    // a database is one shard: added again, it is refused with why
    fails_with(
        jfs().args(["shard", "add", &root_admin, &one.url("postgres", "vol")]),
        "shard 1 of volume 'shv' already",
    );
    // only an administrator adds shards and makes shard roots (and the
    // procedures themselves refuse a client role)
    fails_with(
        jfs().args([
            "shard",
            "add",
            &root.url(CLIENT, "vol"),
            &five.url("postgres", "vol"),
        ]),
        "needs an administrator",
    );
    fails_with(
        jfs().args(["shard", "mkdir", &root.url(CLIENT, "vol"), "/mine", "1"]),
        "needs an administrator",
    );
    for sql in [
        "SELECT jfs.shard_add(9, 'postgres://elsewhere/vol')",
        "SELECT jfs.shard_root_link(1, 'mine', (1::bigint << 48) + 99)",
    ] {
        assert!(!client_runs(&root, sql), "{sql} ran as a client role");
    }
    // the map keeps no credentials: every mount brings its own
    let urls = root.sql(
        "vol",
        "SELECT string_agg(url, ' ' ORDER BY number) FROM jfs.shard_map",
    );
    assert!(
        !urls.contains('@') && urls.contains("pg1") && urls.contains("pg5"),
        "{urls}"
    );
    // a shard has the root's uuid and settings, and keeps no trash
    let uuid = root.sql("vol", "SELECT uuid FROM jfs.setting");
    for shard in [&one, &five] {
        assert_eq!(shard.sql("vol", "SELECT uuid FROM jfs.setting"), uuid);
        assert_eq!(shard.sql("vol", "SELECT trash_days FROM jfs.setting"), "0");
    }

    // shard roots, nested across shards: the node first, then the entry
    let made = stdout(ok(jfs().args(["shard", "mkdir", &root_admin, "/big", "1"])));
    assert!(made.contains("/big: on shard 1"), "{made}");
    ok(jfs().args([
        "shard",
        "mkdir",
        &root_admin,
        "/big/deeper",
        "5",
        "--mode",
        "700",
    ]));
    ok(jfs().args([
        "shard",
        "mkdir",
        &root_admin,
        "/small",
        "5",
        "--uid",
        "1000",
    ]));
    fails_with(
        jfs().args(["shard", "mkdir", &root_admin, "/big", "5"]),
        "/big exists",
    );
    fails_with(
        jfs().args(["shard", "mkdir", &root_admin, "/none/x", "5"]),
        "no none",
    );
    fails_with(
        jfs().args(["shard", "mkdir", &root_admin, "/x", "9"]),
        "shard 9 is not in the volume's shard map",
    );

    // each node is on its shard, named by its parent's database
    assert_eq!(
        one.sql("vol", "SELECT inode >> 48, parent FROM jfs.node"),
        "1|1"
    );
    let big = one.sql("vol", "SELECT inode FROM jfs.node");
    assert_eq!(
        five.sql("vol", "SELECT string_agg(concat(inode >> 48, ':', parent, ':', mode, ':', uid), ' ' ORDER BY inode) FROM jfs.node"),
        format!("5:{big}:448:0 5:1:493:1000")
    );
    assert_eq!(
        root.sql(
            "vol",
            "SELECT errno || ':' || (inode >> 48) FROM jfs.lookup(1, 'big')"
        ),
        "18:1"
    );
    assert_eq!(
        one.sql(
            "vol",
            &format!("SELECT errno || ':' || (inode >> 48) FROM jfs.lookup({big}, 'deeper')")
        ),
        "18:5"
    );
    // the ids a client reserves on a shard carry its number
    assert_eq!(
        as_client(
            &one,
            "SELECT jfs.alloc_ids('inode', 10) >> 48, jfs.alloc_ids('slice', 10) >> 48"
        ),
        "1|1"
    );
    // what would cross shards is refused as across file systems
    assert_eq!(
        as_client(&root, "SELECT errno FROM jfs.rename(1, 'big', 1, 'moved')"),
        "18"
    );
    assert_eq!(
        as_client(&root, "SELECT errno FROM jfs.rmdir(1, 'small')"),
        "18"
    );
    assert_eq!(
        as_client(&root, "SELECT errno FROM jfs.rmr(1, 'big')"),
        "18"
    );
    assert_eq!(
        as_client(
            &root,
            "SELECT errno FROM jfs.mknod(1, 'small', 1, 420, 0, 0)"
        ),
        "17"
    );
    // and every database checks clean, and is one the tools work on
    for (shard, pg) in [(0, &root), (1, &one), (5, &five)] {
        assert_eq!(
            pg.sql("vol", "SELECT count(*) FROM jfs.fsck()"),
            "0",
            "shard {shard}"
        );
        ok(jfs().args(["fsck", &pg.url("postgres", "vol")]));
        let status = stdout(ok(jfs().args(["status", &pg.url(CLIENT, "vol")])));
        assert!(status.contains(&uuid), "shard {shard}: {status}");
    }

    // the map with each shard's usage (the root's root, big; deeper, small)
    let listed = stdout(ok(jfs().args(["shard", "list", &root.url(CLIENT, "vol")])));
    let inodes: Vec<(String, String)> = listed
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f[0].to_string(), f[2].to_string())
        })
        .collect();
    let expected: Vec<(String, String)> = [("0", "1"), ("1", "1"), ("5", "2"), ("all", "4")]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(inodes, expected, "{listed}");

    // the whole volume in plain SQL from its root: the script of `jfs
    // shard sql` (postgres_fdw), run by a superuser, then queried by a role
    // granted the views alone
    // (quotas of directories on shards: the views show them too)
    for (path, limit) in [("/big/deeper", "--inodes"), ("/small", "--capacity")] {
        ok(jfs().args(["quota", "set", &root_admin, "--path", path, limit, "7"]));
    }
    root.sql("vol", "CREATE ROLE jfs_shard_people LOGIN");
    let script = stdout(ok(jfs().args([
        "shard",
        "sql",
        &root_admin,
        "--grant",
        "jfs_shard_people",
    ])));
    run_script(&root, &script);
    let people = |sql: &str| {
        let out = ok(Command::new("psql")
            .args([
                "-XAtq",
                "-v",
                "ON_ERROR_STOP=1",
                "-U",
                "jfs_shard_people",
                "-p",
            ])
            .arg(root.port.to_string())
            .arg("-h")
            .arg(&root.dir)
            .args(["-d", "vol", "-c", sql]));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(people("SELECT sum(inodes) FROM jfs_volume.usage"), "4");
    assert_eq!(
        people("SELECT string_agg(shard || ':' || k, ' ' ORDER BY shard) FROM (SELECT shard, count(*) AS k FROM jfs_volume.nodes GROUP BY shard) c"),
        "0:1 1:1 5:2"
    );
    assert_eq!(
        people("SELECT string_agg(convert_from(name, 'UTF8'), ' ' ORDER BY name) FROM jfs_volume.entries"),
        "big deeper small"
    );
    assert_eq!(
        people(
            "SELECT string_agg(e.shard || ':' || convert_from(e.name, 'UTF8') || ':' || n.shard, ' ' \
             ORDER BY e.name) FROM jfs_volume.entries e JOIN jfs_volume.nodes n ON n.inode = e.inode \
             WHERE n.shard <> e.shard"
        ),
        "0:big:1 1:deeper:5 0:small:5"
    );
    assert_eq!(
        people(
            "SELECT string_agg(uid || ':' || dirs, ' ' ORDER BY uid) FROM (SELECT uid, count(*) AS dirs \
             FROM jfs_volume.nodes WHERE type = 2 GROUP BY uid) o"
        ),
        "0:3 1000:1"
    );
    assert_eq!(
        people(
            "SELECT string_agg(shard || ':' || path || ':' || max_space || ':' || max_inodes, ' ' \
             ORDER BY path) FROM jfs_volume.quotas WHERE kind = 'dir'"
        ),
        format!("5:/big/deeper:0:7 5:/small:{}:0", 7u64 << 30)
    );
    // (run again after a change of the map, it makes the same)
    run_script(&root, &script);
    assert_eq!(people("SELECT sum(inodes) FROM jfs_volume.usage"), "4");

    // gc of one database leaves the other shards' blocks alone
    let shard_block = old_block(&bucket, "shv", (1 << 48) + 3);
    let leaked = old_block(&bucket, "shv", 3);
    let gc = stdout(ok(jfs().args(["gc", &root_admin, "--delete"])));
    assert!(gc.contains("other shards") && shard_block.exists(), "{gc}");
    assert!(!leaked.exists(), "the root's own leaked block stays:\n{gc}");

    // the whole volume in one dump (each shard's tree in place of its
    // shard root), loaded into one database: the same tree, whole, its
    // other shards' nodes renumbered into this one's
    let small = root.sql("vol", "SELECT inode FROM jfs.lookup(1, 'small')");
    as_client(
        &five,
        &format!("SELECT errno FROM jfs.mknod({small}, 'f', 1, 416, 1000, 1000)"),
    );
    let dump = base.join("whole.json");
    ok(jfs().args(["dump", &root_admin]).arg(&dump));
    let text = std::fs::read_to_string(&dump).unwrap();
    for name in ["\"big\"", "\"deeper\"", "\"small\"", "\"f\""] {
        assert!(text.contains(name), "{name} not in the dump:\n{text}");
    }
    root.sql("postgres", "CREATE DATABASE whole");
    root.sql(
        "whole",
        "SET client_min_messages = warning; CREATE EXTENSION jfs",
    );
    ok(jfs()
        .args(["load", &root.url("postgres", "whole")])
        .arg(&dump));
    let tree = "SELECT string_agg(concat(p.name, '/', convert_from(e.name, 'UTF8'), ':', n.type, ':', n.mode, ':', n.uid), ' ' \
                ORDER BY e.name) FROM jfs.edge e JOIN jfs.node n ON n.inode = e.inode \
                LEFT JOIN LATERAL (SELECT convert_from(x.name, 'UTF8') AS name FROM jfs.edge x WHERE x.inode = e.parent) p ON true";
    assert_eq!(
        root.sql("whole", tree),
        "/big:2:493:0 big/deeper:2:448:0 small/f:1:416:1000 /small:2:493:1000"
    );
    assert_eq!(root.sql("whole", "SELECT count(*) FROM jfs.fsck()"), "0");
    assert_eq!(
        root.sql("whole", "SELECT max(inode) >> 48, (SELECT next >> 48 FROM jfs.counter WHERE name = 'inode') FROM jfs.node WHERE inode < 9000000000000000000"),
        "0|0"
    );
    // a loaded directory is this database's own: removed as any other
    assert_eq!(
        root.sql(
            "whole",
            "SELECT errno FROM jfs.unlink((SELECT inode FROM jfs.lookup(1, 'small')), 'f')"
        ),
        "0"
    );
    assert_eq!(
        root.sql("whole", "SELECT errno FROM jfs.rmdir(1, 'small')"),
        "0"
    );
    as_client(
        &five,
        &format!("SELECT errno FROM jfs.unlink({small}, 'f')"),
    );

    // what a crash between the two steps of `shard mkdir` leaves (the
    // node on its shard, no name), and a name whose directory is gone (a
    // shard restored from an older backup): found from both sides, mended
    let unnamed = five.sql("vol", "SELECT inode FROM jfs.shard_root_make(1, 493, 0, 0)");
    root.sql(
        "vol",
        &format!(
            "SELECT jfs.shard_root_link(1, 'ghost', {})",
            (1u64 << 48) + 999
        ),
    );
    fails_with(jfs().args(["shard", "fsck", &root_admin]), "2 problem(s)");
    let found = String::from_utf8_lossy(
        &jfs()
            .args(["shard", "fsck", &root_admin])
            .output()
            .unwrap()
            .stdout,
    )
    .to_string();
    assert!(
        found.contains(&format!("directory {unnamed} (empty) has no name"))
            && found.contains("\"ghost\" of directory 1 names directory")
            && found.contains("which is not there"),
        "{found}"
    );
    fails_with(
        jfs().args(["shard", "fsck", &root.url(CLIENT, "vol")]),
        "needs an administrator",
    );
    let mended = stdout(ok(jfs().args(["shard", "fsck", &root_admin, "--repair"])));
    assert!(mended.contains("2 problem(s) repaired"), "{mended}");
    let whole = stdout(ok(jfs().args(["shard", "fsck", &root_admin])));
    assert!(
        whole.contains("3 name(s)") && whole.contains("are whole"),
        "{whole}"
    );

    // shard roots removed: the name first, then the empty directory
    fails_with(
        jfs().args(["shard", "rmdir", &root_admin, "/big"]),
        "/big is not empty",
    );
    ok(jfs().args(["shard", "rmdir", &root_admin, "/big/deeper"]));
    ok(jfs().args(["shard", "rmdir", &root_admin, "/big"]));
    assert_eq!(
        root.sql("vol", "SELECT errno FROM jfs.lookup(1, 'big')"),
        "2"
    );
    assert_eq!(one.sql("vol", "SELECT count(*) FROM jfs.node"), "0");
    assert_eq!(five.sql("vol", "SELECT count(*) FROM jfs.node"), "1");
    for pg in [&root, &one, &five] {
        assert_eq!(pg.sql("vol", "SELECT count(*) FROM jfs.fsck()"), "0");
    }
    let whole = stdout(ok(jfs().args(["shard", "fsck", &root_admin])));
    assert!(
        whole.contains("1 name(s)") && whole.contains("are whole"),
        "{whole}"
    );

    // a mount is of the volume's root database, never of a shard alone
    let mnt = base.join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    fails_with(
        jfs().args(["mount", &one.url(CLIENT, "vol")]).arg(&mnt),
        "is shard 1 of its volume: give the volume's root database",
    );
    // (a shard's database alone is not the volume)
    fails_with(
        jfs()
            .args(["dump", &one.url("postgres", "vol")])
            .arg(base.join("dump.json")),
        "is shard 1 of its volume",
    );
}
