//! The change log seen from a mount: what a mount does shows in
//! `jfs changelog` in order, with paths, attributed to the mount's session;
//! `--json`, `--from` and `--follow`; the retention is administration.
use std::fs;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use jfs_e2e::{jfs, ok, Volume};

fn stdout(cmd: &mut std::process::Command) -> String {
    String::from_utf8_lossy(&ok(cmd).stdout).into_owned()
}

/// (id, op, path) of each line `jfs changelog` printed.
fn ops(text: &str) -> Vec<(i64, String, String)> {
    text.lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f[0].parse().unwrap(), f[2].to_string(), f[3].to_string())
        })
        .collect()
}

#[test]
fn a_mounts_changes_show_in_jfs_changelog() {
    let v = Volume::new("changelog");
    let m = v.mount("a", &[]);
    fs::create_dir(m.p("dir")).unwrap();
    fs::write(m.p("dir/file"), b"hello").unwrap();
    fs::rename(m.p("dir/file"), m.p("dir/renamed")).unwrap();
    std::os::unix::fs::symlink("renamed", m.p("dir/link")).unwrap();
    fs::set_permissions(m.p("dir/renamed"), fs::Permissions::from_mode(0o600)).unwrap();
    fs::remove_file(m.p("dir/link")).unwrap();
    let sid = v.sql("SELECT max(sid) FROM jfs.session");

    let text = stdout(jfs().args(["changelog", &v.url]));
    let got = ops(&text);
    // in this order (a create path is the name made; a node's path is where it is now)
    let want = [
        ("mkdir", "/dir"),
        ("create", "/dir/file"),
        ("write", "/dir/renamed"),
        ("rename", "/dir/file"),
        ("symlink", "/dir/link"),
        ("setattr", "/dir/renamed"),
        ("unlink", "/dir/link"),
    ];
    let mut at = got.iter();
    for (op, path) in want {
        assert!(
            at.any(|(_, o, p)| o == op && p == path),
            "{op} {path} missing or out of order in:\n{text}"
        );
    }
    assert!(
        text.contains("/dir/file -> /dir/renamed"),
        "the rename shows both paths:\n{text}"
    );
    for line in text.lines() {
        assert!(
            line.ends_with(&format!("session={sid}")),
            "every change is the mount's (session {sid}): {line}"
        );
    }
    let ids: Vec<i64> = got.iter().map(|(id, _, _)| *id).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids in order: {ids:?}");

    // --from: only what came after the bookmark
    let (mark, _, _) = got.iter().find(|(_, o, _)| o == "rename").unwrap();
    let after = ops(&stdout(jfs().args([
        "changelog",
        &v.url,
        "--from",
        &mark.to_string(),
    ])));
    assert_eq!(
        after.iter().map(|(_, o, _)| o.as_str()).collect::<Vec<_>>(),
        ["symlink", "setattr", "unlink"]
    );
    // --json: one object a line
    let json = stdout(jfs().args(["changelog", &v.url, "--json"]));
    let first = json.lines().next().unwrap();
    assert!(
        first.starts_with('{')
            && first.contains("\"op\":\"mkdir\"")
            && first.contains("\"path\":\"/dir\"")
            && first.contains(&format!("\"session\":{sid}")),
        "{first}"
    );
    // people read the same with the reader's grant
    assert_eq!(
        v.reader_sql("SELECT count(*) FROM jfs.changes WHERE op = 'mkdir' AND path = '/dir'"),
        "1"
    );

    // --follow prints what commits later
    let last = ids.last().unwrap().to_string();
    let mut follower = jfs()
        .args(["changelog", &v.url, "--follow", "--from", &last])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let reader = BufReader::new(follower.stdout.take().unwrap());
    std::thread::spawn(move || {
        for line in reader.lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    fs::create_dir(m.p("later")).unwrap();
    let line = rx.recv_timeout(Duration::from_secs(10));
    follower.kill().unwrap();
    let _ = follower.wait();
    let line = line.expect("--follow printed the new change within 10 s");
    assert!(line.contains("mkdir") && line.contains("/later"), "{line}");

    // the retention is administration
    let refused = jfs()
        .args(["config", &v.url, "--changelog-max-age", "2 hours"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("jfs.grant_admin"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    let set = stdout(jfs().args([
        "config",
        &v.admin_url,
        "--changelog-max-age",
        "2 hours",
        "--changelog-max-rows",
        "5000",
    ]));
    assert!(set.contains("02:00:00") && set.contains("5000"), "{set}");
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
}
