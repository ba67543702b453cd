//! The S3 gateway on a volume over shards (issue 57): objects whose keys
//! are on a shard are written aside in the gateway's own directory on that
//! shard (`/.jfs-gateway/shard-N`), so puts, copies and multipart uploads
//! land whole on any shard; the directories it makes there are refused to
//! everybody else, and the procedures that make them to any other use.
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Output};

use jfs_e2e::*;

/// The shard an inode number names.
fn shard_of(path: &Path) -> u64 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .ino()
        >> 48
}

/// A PUT of `data` to `path` answered 200.
fn put(g: &Gateway, path: &str, data: &str) {
    let put = g.signed(30, &["-X", "PUT", "--data-binary", data], path);
    assert_eq!(status(&put), "200", "PUT {path}: {put:?}");
}

/// The value of header `name` in an answer asked with `-D -`.
fn header(out: &Output, name: &str) -> String {
    let answer = String::from_utf8_lossy(&out.stdout).to_string();
    answer
        .lines()
        .find_map(|l| {
            let (n, value) = l.split_once(':')?;
            n.eq_ignore_ascii_case(name)
                .then(|| value.trim().to_string())
        })
        .unwrap_or_else(|| panic!("no {name} in {answer}"))
}

/// A multipart upload of `parts` to `path`: its upload id.
fn multipart(g: &Gateway, path: &str, parts: &[&str]) -> String {
    let made = g.signed(10, &["-X", "POST"], &format!("{path}?uploads="));
    assert_eq!(status(&made), "200", "{made:?}");
    let text = body(&made);
    let id = text
        .split("<UploadId>")
        .nth(1)
        .and_then(|t| t.split("</UploadId>").next())
        .unwrap_or_else(|| panic!("no UploadId in {text}"))
        .to_string();
    let mut complete = String::from("<CompleteMultipartUpload>");
    for (i, data) in parts.iter().enumerate() {
        let part = g.signed(
            30,
            &["-D", "-", "-X", "PUT", "--data-binary", data],
            &format!("{path}?partNumber={}&uploadId={id}", i + 1),
        );
        assert_eq!(status(&part), "200", "{part:?}");
        complete.push_str(&format!(
            "<Part><PartNumber>{}</PartNumber><ETag>{}</ETag></Part>",
            i + 1,
            header(&part, "etag")
        ));
    }
    complete.push_str("</CompleteMultipartUpload>");
    let done = g.signed(
        30,
        &["-X", "POST", "--data-binary", &complete],
        &format!("{path}?uploadId={id}"),
    );
    assert_eq!(status(&done), "200", "{done:?}");
    id
}

/// PUT, GET, CopyObject across shards, multipart uploads and listings on
/// a volume whose bucket bkt has a shard root below it (bkt/s on shard 1) and
/// whose bucket cee is a shard root (shard 2): every object is whole and on
/// the shard its key is; the gateway's directory on each shard is its
/// own, and the volume stays whole.
#[test]
fn the_gateway_stores_objects_on_every_shard() {
    let v = ShardedVolume::new("shgw", 2, &[("/cee", 2)]);
    let m = v.mount("m", &[]);
    std::fs::create_dir(m.p("bkt")).unwrap();
    ok(jfs().args([
        "shard",
        "mkdir",
        &v.admin_url,
        "/bkt/s",
        "1",
        "--mode",
        "777",
    ]));
    let g = Gateway::start_on(&v.url, &[]);
    let big =
        String::from_utf8(pattern(9, 100_000).iter().map(|b| b'a' + b % 26).collect()).unwrap();
    for (key, data, shard) in [
        ("/bkt/top", "on the root", 0),
        ("/bkt/s/one", "on shard one", 1),
        ("/bkt/s/new/deeper/two", big.as_str(), 1),
        ("/cee/three", "on shard two", 2),
    ] {
        put(&g, key, data);
        let get = g.signed(30, &[], key);
        assert_eq!(status(&get), "200", "GET {key}");
        assert_eq!(body(&get), data, "GET {key}");
        assert_eq!(shard_of(&m.p(&key[1..])), shard, "{key}'s file");
    }
    // a copy from shard 1 to shard 2, and one within shard 1
    for (from, to, shard) in [
        ("/bkt/s/one", "/cee/copied", 2),
        ("/bkt/s/new/deeper/two", "/bkt/s/again", 1),
    ] {
        let copy = g.signed(
            30,
            &["-X", "PUT", "-H", &format!("x-amz-copy-source: {from}")],
            to,
        );
        assert_eq!(status(&copy), "200", "copy {from} to {to}: {copy:?}");
        assert_eq!(body(&g.signed(30, &[], to)), body(&g.signed(30, &[], from)));
        assert_eq!(shard_of(&m.p(&to[1..])), shard, "{to}'s file");
    }
    // a multipart upload whose key is on shard 2: its id names the shard,
    // its parts wait there, and the object shares their slices
    let slices = || v.sql_each("SELECT count(*) FROM jfs.slice");
    let before = slices();
    let id = multipart(&g, "/cee/multi/part", &[&big, "and the end"]);
    assert_eq!(id.len(), 36, "an upload on shard 2 names it: {id}");
    assert!(id.ends_with("0002"), "{id}");
    assert_eq!(
        body(&g.signed(30, &[], "/cee/multi/part")),
        format!("{big}and the end")
    );
    assert_eq!(shard_of(&m.p("cee/multi/part")), 2);
    let after = slices();
    assert_eq!(after[0], before[0], "no part was written on the root");
    assert!(
        after[2].parse::<u64>().unwrap() >= before[2].parse::<u64>().unwrap() + 2,
        "the parts' slices are on shard 2: {before:?} -> {after:?}"
    );
    let listed = body(&g.signed(30, &[], "/bkt?list-type=2&prefix=s%2F"));
    for key in ["s/one", "s/new/deeper/two", "s/again"] {
        assert!(listed.contains(&format!("<Key>{key}</Key>")), "{listed}");
    }
    // what the gateway keeps on each shard: its own, 0700, empty
    for shard in [1u64, 2] {
        let dir = m.p(&format!(".jfs-gateway/shard-{shard}"));
        let meta = std::fs::metadata(&dir).unwrap();
        assert_eq!(meta.ino() >> 48, shard, "{}", dir.display());
        assert_eq!(meta.permissions().mode() & 0o7777, 0o700);
        assert_eq!(meta.uid(), 0, "the gateway's user's");
        for sub in ["tmp", "uploads"] {
            assert_eq!(
                std::fs::read_dir(dir.join(sub)).unwrap().count(),
                0,
                "{sub}"
            );
        }
    }
    drop(g);
    // a second gateway finds them and goes on
    let g = Gateway::start_on(&v.url, &[]);
    put(&g, "/cee/later", "after a restart");
    assert_eq!(body(&g.signed(30, &[], "/cee/later")), "after a restart");
    drop(g);
    drop(m);
    v.assert_whole();
}

/// An object whose key's directory is placed on another shard while its
/// body is still arriving (written aside on the root) is copied to that
/// shard and placed there: the PUT succeeds, and the object is whole.
#[test]
fn a_key_placed_on_another_shard_mid_put_still_lands() {
    let v = ShardedVolume::new("shgwmid", 1, &[]);
    let m = v.mount("m", &[]);
    std::fs::create_dir(m.p("bkt")).unwrap();
    let g = Gateway::start_on(&v.url, &[]);
    let data = v.path().join("slow");
    std::fs::write(&data, pattern(3, 600_000)).unwrap();
    // (1.5 s or more at 300 KiB/s: the shard root is made meanwhile)
    let slow = {
        let (endpoint, data) = (g.endpoint.clone(), data.clone());
        std::thread::spawn(move || {
            Command::new("curl")
                .args(["-sS", "--max-time", "60", "--limit-rate", "300k"])
                .args(["--aws-sigv4", "aws:amz:us-east-1:s3"])
                .args(["--user", &format!("{}:{}", GATEWAY_KEYS.0, GATEWAY_KEYS.1)])
                .args(["-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD"])
                .args(["-w", "\n%{http_code}", "-X", "PUT"])
                .arg("--data-binary")
                .arg(format!("@{}", data.display()))
                .arg(format!("{endpoint}/bkt/later/obj"))
                .output()
                .unwrap()
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(500));
    ok(jfs().args([
        "shard",
        "mkdir",
        &v.admin_url,
        "/bkt/later",
        "1",
        "--mode",
        "777",
    ]));
    let put = slow.join().unwrap();
    assert_eq!(status(&put), "200", "{put:?}");
    assert_eq!(
        std::fs::read(m.p("bkt/later/obj")).unwrap(),
        pattern(3, 600_000)
    );
    assert_eq!(shard_of(&m.p("bkt/later/obj")), 1);
    let get = g.signed(30, &["-D", "-"], "/bkt/later/obj");
    assert_eq!(
        header(&get, "etag").trim_matches('"'),
        format!("{:x}", md5_of(&pattern(3, 600_000))),
        "its ETag came along"
    );
    assert_eq!(
        std::fs::read_dir(m.p(".jfs-gateway/tmp")).unwrap().count(),
        0
    );
    drop(g);
    drop(m);
    v.assert_whole();
}

/// The MD5 of `data`, by md5sum.
fn md5_of(data: &[u8]) -> u128 {
    use std::io::Write;
    let mut child = Command::new("md5sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(data).unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    u128::from_str_radix(text.split_whitespace().next().unwrap(), 16).unwrap()
}

/// The procedures that make the gateway's directories on shards, as
/// attackers try them: a client role can link a shard's directory only as
/// /.jfs-gateway/shard-N (not elsewhere, under another name, or one linked
/// already), can make one only below the root's shard, and a read-only
/// role can do neither; a local user of a mount cannot look inside.
#[test]
fn only_the_gateway_makes_its_directories_on_shards() {
    let v = ShardedVolume::new("shgwatk", 1, &[("/sss", 1)]);
    let m = v.mount("m", &["--allow-other"]);
    std::fs::create_dir(m.p("bucket")).unwrap();
    std::fs::set_permissions(m.p("bucket"), std::fs::Permissions::from_mode(0o777)).unwrap();
    let g = Gateway::start_on(&v.url, &[]);
    put(&g, "/sss/key", "on shard one");
    drop(g);
    let listed = Command::new("setpriv")
        .args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
        .arg("ls")
        .arg(m.p(".jfs-gateway/shard-1"))
        .output()
        .unwrap();
    assert!(!listed.status.success(), "nobody listed it: {listed:?}");

    let call = |shard: usize, role: &str, sql: &str| -> Result<String, String> {
        let out = Command::new("psql")
            .args(["-XAtq", "-v", "ON_ERROR_STOP=1", "-d"])
            .arg(v.clusters[shard].url(role, "vol"))
            .args(["-c", sql])
            .output()
            .unwrap();
        match out.status.success() {
            true => Ok(String::from_utf8_lossy(&out.stdout).trim().to_string()),
            false => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
        }
    };
    let client = |shard: usize, sql: &str| {
        call(shard, SHARD_CLIENT, sql).unwrap_or_else(|e| panic!("{sql}: {e}"))
    };
    let gateway_dir = client(0, "SELECT inode FROM jfs.lookup(1, '.jfs-gateway')");
    let bucket = client(0, "SELECT inode FROM jfs.lookup(1, 'bucket')");
    let shard_dir = v.clusters[1].sql("vol", "SELECT max(inode) FROM jfs.node WHERE type = 2");
    // below a shard's directory: refused on the shard
    assert_eq!(
        client(
            1,
            &format!("SELECT errno FROM jfs.gateway_dir_make({shard_dir}, 0, 0)")
        ),
        "22"
    );
    // a new one, to be linked
    let made = client(
        1,
        &format!("SELECT inode FROM jfs.gateway_dir_make({gateway_dir}, 65534, 65534)"),
    );
    for (parent, name, inode, why) in [
        (
            &bucket,
            "shard-1",
            &made,
            "a directory not named .jfs-gateway",
        ),
        (&gateway_dir, "shard-2", &made, "a name of another shard"),
        (&gateway_dir, "elsewhere", &made, "another name"),
        (
            &gateway_dir,
            "shard-0",
            &bucket,
            "a node of the root's shard",
        ),
        (&gateway_dir, "shard-1", &made, "a second shard-1"),
    ] {
        let errno = client(
            0,
            &format!("SELECT errno FROM jfs.gateway_dir_link({parent}, '{name}', {inode})"),
        );
        assert_ne!(errno, "0", "{why}");
    }
    // (the refused node is the shard's orphan: fsck repairs it)
    assert_eq!(
        client(
            1,
            &format!("SELECT errno FROM jfs.shard_root_remove({made})")
        ),
        "0"
    );
    // a read-only role may call neither
    for c in &v.clusters {
        c.sql(
            "vol",
            "CREATE ROLE jfs_gw_ro LOGIN; SELECT jfs.grant_client('jfs_gw_ro', p_read_only => true)",
        );
    }
    for (shard, sql) in [
        (
            1,
            format!("SELECT jfs.gateway_dir_make({gateway_dir}, 0, 0)"),
        ),
        (
            0,
            format!("SELECT jfs.gateway_dir_link({gateway_dir}, 'shard-1', {made})"),
        ),
    ] {
        let refused = call(shard, "jfs_gw_ro", &sql).unwrap_err();
        assert!(refused.contains("permission denied"), "{sql}: {refused}");
    }
    // a shard's own database serves no gateway (given a minute: one that
    // started would serve until stopped)
    fails_with(
        Command::new("timeout")
            .arg("60")
            .arg(jfs().get_program())
            .args([
                "gateway",
                &v.clusters[1].url(SHARD_CLIENT, "vol"),
                "127.0.0.1:0",
            ])
            .args(["--access-key", GATEWAY_KEYS.0])
            .env("JFS_GATEWAY_SECRET_KEY", GATEWAY_KEYS.1),
        "is shard 1 of its volume",
    );
    drop(m);
    v.assert_whole();
}
