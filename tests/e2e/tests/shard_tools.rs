//! `jfs` tools on a volume over private clusters (the root and shards): `jfs clone` across shards copies through the mount (and clones within one), `jfs destroy` of the root destroys every shard.
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use jfs_e2e::*;

/// The shard an inode number names.
fn shard_of(path: &Path) -> u64 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .ino()
        >> 48
}

/// Writes `data` to `path` and fsyncs it.
fn write_synced(path: &Path, data: &[u8]) {
    let mut f = std::fs::File::create(path).unwrap();
    f.write_all(data).unwrap();
    f.sync_all().unwrap();
}

/// What a `jfs clone` printed on stderr (it succeeded).
fn clone(src: &Path, dst: &Path) -> String {
    let out = ok(jfs().arg("clone").arg(src).arg(dst));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `jfs clone` across shards copies through the mount: a tree from the
/// root into a shard root, and a tree holding a shard root within one
/// database (which one transaction cannot clone); modes, times, xattrs,
/// symlinks and hard links come along, the copy's nodes on its
/// destination's shard. Within one shard it is still one clone.
#[test]
fn jfs_clone_across_shards_copies_the_tree() {
    let v = ShardedVolume::new("shcl", 1, &[("/s", 1)]);
    let m = v.mount("m", &[]);
    std::fs::create_dir_all(m.p("t/sub")).unwrap();
    write_synced(&m.p("t/f"), &pattern(1, 300_000));
    write_synced(&m.p("t/sub/g"), &pattern(2, 5_000));
    std::fs::set_permissions(m.p("t/f"), std::fs::Permissions::from_mode(0o640)).unwrap();
    std::fs::hard_link(m.p("t/f"), m.p("t/h")).unwrap();
    std::os::unix::fs::symlink("f", m.p("t/l")).unwrap();
    rustix::fs::setxattr(m.p("t/f"), "user.k", b"v1", rustix::fs::XattrFlags::empty()).unwrap();
    let at = rustix::fs::Timespec {
        tv_sec: 1_500_000_000,
        tv_nsec: 123_456_789,
    };
    for path in ["t/f", "t/sub"] {
        rustix::fs::utimensat(
            rustix::fs::CWD,
            m.p(path),
            &rustix::fs::Timestamps {
                last_access: at,
                last_modification: at,
            },
            rustix::fs::AtFlags::empty(),
        )
        .unwrap();
    }

    // root -> shard 1: copied
    let said = clone(&m.p("t"), &m.p("s/t2"));
    assert!(said.contains("span shards"), "{said}");
    let check = |copy: &str, shard: u64| {
        let p = |name: &str| m.p(&format!("{copy}/{name}"));
        assert_eq!(
            std::fs::read(p("f")).unwrap(),
            pattern(1, 300_000),
            "{copy}/f"
        );
        assert_eq!(
            std::fs::read(p("sub/g")).unwrap(),
            pattern(2, 5_000),
            "{copy}/sub/g"
        );
        let f = std::fs::metadata(p("f")).unwrap();
        assert_eq!(f.mode() & 0o7777, 0o640, "{copy}/f's mode");
        assert_eq!(
            (f.mtime(), f.mtime_nsec()),
            (1_500_000_000, 123_456_789),
            "{copy}/f's mtime"
        );
        let sub = std::fs::metadata(p("sub")).unwrap();
        assert_eq!(
            sub.mtime(),
            1_500_000_000,
            "{copy}/sub's mtime (set after its files)"
        );
        assert_eq!(
            std::fs::metadata(p("h")).unwrap().ino(),
            f.ino(),
            "{copy}/h a link of f"
        );
        assert_eq!(f.nlink(), 2, "{copy}/f's links");
        assert_eq!(
            std::fs::read_link(p("l")).unwrap(),
            Path::new("f"),
            "{copy}/l"
        );
        assert_eq!(
            rustix::fs::getxattr(p("f"), "user.k", &mut [0u8; 16][..]).unwrap(),
            2,
            "{copy}/f's xattr"
        );
        for name in ["f", "sub", "sub/g", "h"] {
            assert_eq!(shard_of(&p(name)), shard, "{copy}/{name}'s shard");
        }
    };
    check("s/t2", 1);

    // a tree holding a shard root, within the root database: copied (the
    // shard root's copy is an ordinary directory of the destination's)
    std::fs::create_dir(m.p("w")).unwrap();
    ok(jfs().args(["shard", "mkdir", &v.admin_url, "/w/x", "1", "--mode", "777"]));
    write_synced(&m.p("w/x/deep"), &pattern(3, 70_000));
    write_synced(&m.p("w/top"), &pattern(4, 10));
    let said = clone(&m.p("w"), &m.p("w2"));
    assert!(said.contains("span shards"), "{said}");
    assert_eq!(std::fs::read(m.p("w2/x/deep")).unwrap(), pattern(3, 70_000));
    assert_eq!(std::fs::read(m.p("w2/top")).unwrap(), pattern(4, 10));
    assert_eq!(shard_of(&m.p("w2/x")), 0, "the shard root's copy");
    // (copied into its own tree, it would copy what it makes without end)
    fails_with(
        jfs().arg("clone").arg(m.p("w")).arg(m.p("w/x/again")),
        "into itself",
    );
    assert!(!m.p("w/x/again").exists());
    assert_eq!(shard_of(&m.p("w2/x/deep")), 0);

    // within one shard: one clone, as ever
    let said = clone(&m.p("s/t2"), &m.p("s/t3"));
    assert!(
        !said.contains("span shards") && said.contains("nodes cloned"),
        "{said}"
    );
    check("s/t3", 1);
    // and jfs.clone in SQL names the reason a tree holding a shard root is
    // not cloned
    let out = std::process::Command::new("psql")
        .args([
            "-XAtq",
            "-d",
            &v.admin_url,
            "-c",
            "SELECT jfs.clone('/w', '/w3')",
        ])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && said.contains("cross-device link"),
        "jfs.clone of a tree holding a shard root: {said}"
    );
    drop(m);
    v.assert_whole();
}

/// Files below `dir`, counted (none when it is gone).
fn files_below(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .flatten()
            .map(|e| match e.file_type() {
                Ok(t) if t.is_dir() => files_below(&e.path()),
                _ => 1,
            })
            .sum()
    })
}

/// `jfs destroy` of a volume over shards goes through its root database
/// (a shard's own URL is refused), reaches every shard before it changes
/// anything (a shard that is down stops it, nothing changed), then
/// deletes every object, the shards' among them, and empties every
/// database.
#[test]
fn destroying_a_volume_over_shards_empties_every_shard_and_the_bucket() {
    let v = ShardedVolume::new("shdes", 2, &[("/a", 1), ("/b", 2)]);
    let m = v.mount("m", &[]);
    for (path, seed) in [("top", 1), ("a/f", 2), ("b/f", 3), ("b/g", 4)] {
        write_synced(&m.p(path), &pattern(seed, 300_000));
    }
    drop(m);
    let uuid = v.clusters[0].sql("vol", "SELECT uuid FROM jfs.setting");
    let objects = v.path().join("bucket/shdes");
    let stored = files_below(&objects);
    assert!(stored >= 5, "{stored} objects stored");
    let counts = "SELECT (SELECT count(*) FROM jfs.node) + (SELECT count(*) FROM jfs.setting) \
                  + (SELECT count(*) FROM jfs.slice)";
    let before = v.sql_each(counts);

    fails_with(
        jfs().args([
            "destroy",
            &v.clusters[1].url("postgres", "vol"),
            &uuid,
            "--yes",
        ]),
        "destroy the volume from its root database",
    );
    v.clusters[2].pg_ctl("stop");
    fails_with(
        jfs().args(["destroy", &v.admin_url, &uuid, "--yes"]),
        "shard 2",
    );
    v.clusters[2].pg_ctl("start");
    assert_eq!(v.sql_each(counts), before, "nothing changed");
    assert_eq!(files_below(&objects), stored, "no object deleted");

    let out = ok(jfs().args(["destroy", &v.admin_url, &uuid, "--yes"]));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("and 2 shard(s)"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(
        v.sql_each(counts),
        ["0", "0", "0"],
        "every database emptied"
    );
    assert_eq!(files_below(&objects), 0, "objects left in the bucket");
    fails_with(
        jfs().args(["destroy", &v.admin_url, &uuid, "--yes"]),
        "holds no volume",
    );
}

/// `jfs config` on a volume over shards sets every database (a shard
/// that kept the old setting would, say, not enforce ACLs, or delete freed
/// objects inside the point-in-time-recovery window); a shard added later
/// starts with the root's settings; a shard's own URL is refused.
#[test]
fn jfs_config_sets_every_shard_and_a_new_shard_takes_the_roots_settings() {
    let v = ShardedVolume::new("shcf", 1, &[("/s", 1)]);
    let settings = "SELECT enable_acl || ' ' || changelog_max_age || ' ' || changelog_max_rows \
                    || ' ' || retain_deleted || ' ' || delete_queue_cap || ' ' \
                    || (SELECT string_agg(id || '=' || storage_class, ',' ORDER BY id) \
                          FROM jfs.tier WHERE storage_class <> '') FROM jfs.setting";
    fails_with(
        jfs().args([
            "config",
            &v.clusters[1].url("postgres", "vol"),
            "--enable-acl",
        ]),
        "run jfs config on its root database",
    );
    let out = ok(jfs().args([
        "config",
        &v.admin_url,
        "--enable-acl",
        "--changelog-max-age",
        "3 hours",
        "--changelog-max-rows",
        "5000",
        "--retain-deleted",
        "9 days",
        "--delete-queue-cap",
        "2",
        "--tier-id",
        "2",
        "--tier-sc",
        "GLACIER_IR",
    ]));
    assert!(String::from_utf8_lossy(&out.stdout).contains("its 1 shard(s)"));
    let want = "true 03:00:00 5000 9 days 2147483648 2=GLACIER_IR";
    assert_eq!(v.sql_each(settings), [want, want], "root, shard 1");

    let late = Cluster::start(&v.path().join("pg-late"));
    late.make_shard_database(SHARD_CLIENT);
    ok(jfs().args(["shard", "add", &v.admin_url, &late.url("postgres", "vol")]));
    assert_eq!(late.sql("vol", settings), want, "a shard added later");
}

/// A dump of a volume over shards loads into shards (`jfs load --shard
/// N=URL`): each node into its shard's database, each database made that
/// shard and mapped, the shard roots linked in their parents' databases;
/// a mount of the copy reads every file where it was; a shard of the
/// dump left out is refused, naming it, before anything changes.
#[test]
fn a_dump_of_a_volume_over_shards_loads_into_shards() {
    let v = ShardedVolume::new("shld", 2, &[("/a", 1), ("/a/b", 2), ("/c", 2)]);
    let m = v.mount("m", &[]);
    std::fs::create_dir(m.p("a/b/sub")).unwrap();
    let files: [(&str, u64, usize); 5] = [
        ("top", 1, 1000),
        ("a/f1", 2, 70_000),
        ("a/b/f2", 3, 5 << 20),
        ("c/f3", 4, 10),
        ("a/b/sub/f4", 5, 5000),
    ];
    for (path, seed, len) in files {
        write_synced(&m.p(path), &pattern(seed, len));
    }
    std::os::unix::fs::symlink("../top", m.p("c/l")).unwrap();
    rustix::fs::setxattr(m.p("a/f1"), "user.k", b"v", rustix::fs::XattrFlags::empty()).unwrap();
    drop(m);
    let dump = v.path().join("shld.json");
    ok(jfs().args(["dump", &v.admin_url]).arg(&dump));

    for c in &v.clusters {
        c.sql("postgres", "CREATE DATABASE copy");
        c.sql(
            "copy",
            "SET client_min_messages = warning; CREATE EXTENSION jfs",
        );
    }
    let url = |n: usize| v.clusters[n].url("postgres", "copy");
    let shard = |n: usize| format!("{n}={}", url(n));
    fails_with(
        jfs()
            .args(["load", &url(0)])
            .arg(&dump)
            .args(["--shard", &shard(1)]),
        "give --shard 2=URL",
    );
    for c in &v.clusters {
        assert_eq!(
            c.sql("copy", "SELECT count(*) FROM jfs.setting"),
            "0",
            "nothing changed"
        );
    }
    let out = ok(jfs().args(["load", &url(0)]).arg(&dump).args([
        "--shard",
        &shard(1),
        "--shard",
        &shard(2),
    ]));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("3 shard root(s) linked"), "{said}");

    // each database holds its own shard's nodes, as many as the dumped one
    let nodes = "SELECT count(*) FROM jfs.node WHERE inode >> 48 <> 32767";
    for (n, c) in v.clusters.iter().enumerate() {
        assert_eq!(
            c.sql("copy", nodes),
            c.sql("vol", nodes),
            "nodes of database {n}"
        );
        assert_eq!(
            c.sql("copy", "SELECT count(*) FROM jfs.fsck()"),
            "0",
            "database {n}"
        );
    }
    let out = ok(jfs().args(["shard", "fsck", &url(0)]));
    assert!(String::from_utf8_lossy(&out.stdout).contains("are whole"));

    let copy = mount_at(
        &url(0),
        &v.path().join("copy"),
        &v.path().join("copy.log"),
        &[],
    );
    for (path, seed, len) in files {
        assert!(
            std::fs::read(copy.p(path)).unwrap() == pattern(seed, len),
            "{path}"
        );
    }
    for (path, on) in [
        ("top", 0),
        ("a", 1),
        ("a/f1", 1),
        ("a/b", 2),
        ("a/b/sub/f4", 2),
        ("c/f3", 2),
    ] {
        assert_eq!(shard_of(&copy.p(path)), on, "{path}'s shard");
    }
    assert_eq!(
        std::fs::read_link(copy.p("c/l")).unwrap(),
        Path::new("../top")
    );
    assert_eq!(
        rustix::fs::getxattr(copy.p("a/f1"), "user.k", &mut [0u8; 8][..]).unwrap(),
        1
    );
    let names: Vec<String> = std::fs::read_dir(copy.p("a"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names.len(), 2, "a holds f1 and b: {names:?}");
}

/// `jfs summary` of a tree holding shard roots sums their subtrees from
/// their shards: the same tree made once in the root's database and once
/// across three (a on shard 1, a/b on shard 2 below it) gives the same
/// rows, at every depth.
#[test]
fn jfs_summary_sums_the_subtrees_on_other_shards() {
    let v = ShardedVolume::new("shsu", 2, &[("/t", 1), ("/t/b", 2)]);
    let m = v.mount("m", &[]);
    std::fs::create_dir(m.p("r")).unwrap();
    std::fs::create_dir(m.p("r/b")).unwrap();
    for top in ["r", "t"] {
        std::fs::create_dir_all(m.p(&format!("{top}/b/d"))).unwrap();
        std::fs::create_dir_all(m.p(&format!("{top}/x"))).unwrap();
        for (path, len) in [
            ("f1", 2000),
            ("b/f2", 3000),
            ("b/d/f3", 4000),
            ("x/f4", 500),
        ] {
            write_synced(&m.p(&format!("{top}/{path}")), &pattern(1, len));
        }
        std::os::unix::fs::symlink("f1", m.p(&format!("{top}/b/l"))).unwrap();
    }
    let summary = |top: &str| -> Vec<serde_json::Value> {
        let out = ok(jfs()
            .args(["summary", "--json", "--depth", "3"])
            .arg(m.p(top)));
        let mut rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
        for r in &mut rows {
            let path = r["path"].as_str().unwrap().to_string();
            let rel = path.strip_prefix(m.p(top).to_str().unwrap()).unwrap();
            r["path"] = rel.into();
        }
        rows.sort_by_key(|r| r["path"].as_str().unwrap().to_string());
        rows
    };
    let (one, across) = (summary("r"), summary("t"));
    assert_eq!(one.len(), 4, "{one:?}");
    assert_eq!(across, one, "summary across shards vs in one database");
    // a subtree on a shard, with a shard root below it
    let (one, across) = (summary("r/b"), summary("t/b"));
    assert_eq!(across, one);
    let (one, across) = (summary("r/x"), summary("t/x"));
    assert_eq!(across, one);

    // jfs tier works on the root database's files: one on a shard is
    // refused, saying why (not "no such file")
    drop(m);
    for action in [
        &["set", &v.admin_url, "/t/f1", "--id", "1"][..],
        &["status", &v.admin_url, "/t/b"],
    ] {
        fails_with(jfs().arg("tier").args(action), "is on shard");
    }
}

/// Roles over shards: a read-only role (granted so on every database)
/// reads every shard through its mount and changes nothing; a role
/// granted on the root database but not on a shard cannot mount, the
/// error naming the shard; neither can call a shard's procedures that
/// change it.
#[test]
fn roles_over_shards_get_what_each_database_grants_them() {
    let v = ShardedVolume::new("shro", 1, &[("/s", 1)]);
    let m = v.mount("m", &[]);
    write_synced(&m.p("top"), &pattern(1, 3000));
    write_synced(&m.p("s/f"), &pattern(2, 70_000));
    drop(m);
    // (jfs status says which database it shows)
    let status =
        |url: &str| String::from_utf8_lossy(&ok(jfs().args(["status", url])).stdout).into_owned();
    assert!(status(&v.admin_url).contains("shards      1 besides this root database"));
    assert!(status(&v.clusters[1].url("postgres", "vol")).contains("shard       1 of the volume"));
    for c in &v.clusters {
        c.sql(
            "vol",
            "CREATE ROLE jfs_shard_ro LOGIN; SELECT jfs.grant_client('jfs_shard_ro', p_read_only => true)",
        );
        c.sql("vol", "CREATE ROLE jfs_shard_half LOGIN");
    }
    v.clusters[0].sql("vol", "SELECT jfs.grant_client('jfs_shard_half')");

    let ro = mount_at(
        &v.clusters[0].url("jfs_shard_ro", "vol"),
        &v.path().join("ro"),
        &v.path().join("ro.log"),
        &[],
    );
    assert!(std::fs::read(ro.p("top")).unwrap() == pattern(1, 3000));
    assert!(std::fs::read(ro.p("s/f")).unwrap() == pattern(2, 70_000));
    for path in ["new", "s/new"] {
        let e = std::fs::write(ro.p(path), b"x").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EROFS), "{path}");
    }
    assert!(std::fs::remove_file(ro.p("s/f")).is_err());
    drop(ro);
    assert_eq!(
        v.sql_each("SELECT count(*) FROM jfs.edge"),
        ["2", "1"],
        "nothing changed"
    );

    let dir = v.path().join("half");
    std::fs::create_dir_all(&dir).unwrap();
    fails_with(
        jfs()
            .args(["mount", &v.clusters[0].url("jfs_shard_half", "vol")])
            .arg(&dir)
            .args(["-d", "--log"])
            .arg(v.path().join("half.log")),
        "shard 1",
    );
    assert_eq!(
        v.sql_each("SELECT count(*) FROM jfs.session"),
        ["0", "0"],
        "no session left by the mount that failed"
    );
    // straight to a shard's procedures: refused
    for (role, call) in [
        ("jfs_shard_ro", "SELECT jfs.rmr(1, 'x', 1, 0, '{}')"),
        ("jfs_shard_half", "SELECT jfs.volume()"),
    ] {
        let out = std::process::Command::new("psql")
            .args(["-XAtq", "-d", &v.clusters[1].url(role, "vol"), "-c", call])
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && said.contains("permission denied"),
            "{role}: {call}: {said}"
        );
    }
}
