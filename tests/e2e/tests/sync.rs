//! `jfs sync`: a 10,000-file tree from a local directory into a volume (no
//! mount), from the volume to S3 (moto) and back to a local directory,
//! byte for byte; an interrupted run resumed; --delete-dst, --dry-run,
//! --update and --checksum; bad endpoints refused with a clear error.
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jfs_e2e::{env, eventually, jfs, ok, pattern, venv_python, S3Server, Volume, CLIENT_ROLE};

/// One file of a test tree: its bytes, mode and mtime (ns since the epoch).
#[derive(Debug, Clone)]
struct File {
    data: Vec<u8>,
    mode: u32,
    mtime: i64,
}

/// The volume's directory `dir` as a sync endpoint, the META_URL naming the
/// socket directory with `?host=` (as the brief's users would).
fn jfs_url(v: &Volume, dir: &str) -> String {
    format!(
        "jfs+postgres://{CLIENT_ROLE}@/{}?host={}&port={}#{dir}",
        v.db,
        env("PGHOST"),
        env("PGPORT")
    )
}

fn sync(args: &[&str]) -> Command {
    let mut c = jfs();
    c.arg("sync").args(args);
    c
}

/// `jfs sync` with S3 keys and the endpoint of `s3`.
fn sync_s3(s3: &S3Server, args: &[&str]) -> Command {
    let mut c = sync(args);
    c.args(["--s3-endpoint", &s3.endpoint])
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_REGION", "us-east-1");
    c
}

/// Puts empty objects `keys` into `bucket` (boto3 from the test venv).
fn put_objects(s3: &S3Server, bucket: &str, keys: &[&str]) {
    let code = format!(
        "import boto3\n\
         s3 = boto3.client('s3', endpoint_url='{}', aws_access_key_id='testing', \
         aws_secret_access_key='testing', region_name='us-east-1')\n\
         for k in {keys:?}:\n    s3.put_object(Bucket='{bucket}', Key=k, Body=b'')\n",
        s3.endpoint
    );
    ok(Command::new(venv_python()).args(["-c", &code]));
}

/// The "copied N" of a run's summary line.
fn copied(out: &Output) -> u64 {
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("scanned "))
        .unwrap_or_else(|| panic!("no summary in {text:?}"));
    line.split("copied ")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no copied count in {line:?}"))
}

fn set_mtime(path: &Path, ns: i64) {
    let t = UNIX_EPOCH + Duration::from_nanos(ns as u64);
    fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_times(fs::FileTimes::new().set_modified(t))
        .unwrap();
}

fn mtime_of(m: &fs::Metadata) -> i64 {
    m.mtime() * 1_000_000_000 + m.mtime_nsec()
}

/// Writes `files` under `root` (directories made as needed).
fn write_tree(root: &Path, files: &BTreeMap<String, File>) {
    for (path, f) in files {
        let at = root.join(path);
        fs::create_dir_all(at.parent().unwrap()).unwrap();
        fs::write(&at, &f.data).unwrap();
        fs::set_permissions(&at, fs::Permissions::from_mode(f.mode)).unwrap();
        set_mtime(&at, f.mtime);
    }
}

/// `count` files in 200 nested directories: mostly small, a few empty,
/// three of several MiB (one past the multipart size), modes and
/// nanosecond mtimes of their own.
fn big_tree(count: usize, small_max: usize) -> BTreeMap<String, File> {
    let mut files = BTreeMap::new();
    for i in 0..count - 3 {
        let size = if i % 1000 == 7 {
            0
        } else {
            (i * 7919) % small_max
        };
        let mode = match i % 13 {
            0 => 0o600,
            1 => 0o755,
            _ => 0o644,
        };
        files.insert(
            format!("d{:02}/s{}/f{i}", i % 50, i % 4),
            File {
                data: pattern(i as u64, size),
                mode,
                mtime: 1_600_000_000_000_000_000 + i as i64 * 1_000_003_007,
            },
        );
    }
    for (i, mib) in [(1u64, 3usize), (2, 9), (3, 5)] {
        files.insert(
            format!("big/b{i}"),
            File {
                data: pattern(100_000 + i, (mib << 20) + 12345),
                mode: 0o640,
                mtime: 1_700_000_000_123_456_789,
            },
        );
    }
    files
}

/// Every path under `root` (directories with a trailing slash), and
/// whether it is a regular file (from the listing: no stat per entry).
fn list_tree(root: &Path) -> BTreeMap<String, bool> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, bool>) {
        for e in fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let path = e.path();
            let rel = path.strip_prefix(root).unwrap().to_str().unwrap();
            let kind = e.file_type().unwrap();
            if kind.is_dir() {
                out.insert(format!("{rel}/"), false);
                walk(root, &path, out);
            } else {
                out.insert(rel.to_string(), kind.is_file());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

/// Asserts the files under `root` are `files` exactly, and no temporary is
/// left: the names, and the size and bytes (with `attrs`, the mode and
/// mtime too) of one file in `every` and of every file over 1 MiB.
fn assert_files(root: &Path, files: &BTreeMap<String, File>, attrs: bool, every: usize) {
    let got = list_tree(root);
    let temps: Vec<&String> = got.keys().filter(|p| p.contains(".jfs-sync-")).collect();
    assert!(temps.is_empty(), "temporaries left: {temps:?}");
    let got_files: Vec<&String> = got.iter().filter(|(_, f)| **f).map(|(p, _)| p).collect();
    let want: Vec<&String> = files.keys().collect();
    assert_eq!(got_files, want, "the files under {}", root.display());
    for (i, (path, f)) in files.iter().enumerate() {
        if i % every != 0 && f.data.len() <= 1 << 20 {
            continue;
        }
        let at = root.join(path);
        let m = fs::metadata(&at).unwrap();
        assert_eq!(m.len(), f.data.len() as u64, "size of {path}");
        let same = fs::read(&at).unwrap() == f.data;
        assert!(same, "{path} differs under {}", root.display());
        if attrs {
            assert_eq!(m.mode() & 0o7777, f.mode, "mode of {path}");
            assert_eq!(mtime_of(&m), f.mtime, "mtime of {path}");
        }
    }
}

#[test]
fn a_tree_goes_local_to_jfs_to_s3_and_back() {
    let v = Volume::new("sync-tree");
    let s3 = S3Server::start();
    let work = v.dir.path();
    let src = work.join("src");
    let files = big_tree(10_000, 3000);
    write_tree(&src, &files);
    fs::create_dir_all(src.join("empty/inner")).unwrap();
    fs::set_permissions(src.join("d03"), fs::Permissions::from_mode(0o750)).unwrap();
    std::os::unix::fs::symlink("d00/s0/f0", src.join("link")).unwrap();
    let d03_mtime = mtime_of(&fs::metadata(src.join("d03")).unwrap());
    let src_arg = src.to_str().unwrap();
    let vol = jfs_url(&v, "/tree");

    // local -> jfs (no mount)
    let first = ok(&mut sync(&[src_arg, &vol]));
    assert_eq!(copied(&first), 10_001, "{first:?}");
    let again = ok(&mut sync(&[src_arg, &vol]));
    assert_eq!(
        copied(&again),
        0,
        "an unchanged tree is copied again: {again:?}"
    );

    // what a mount sees: every name; the bytes, modes and mtimes of one
    // file in ten and of the large ones (every byte is compared below,
    // after the trip through S3); the empty directory, the symlink, a
    // directory's mode and mtime
    {
        let m = v.mount("check", &[]);
        let tree = m.p("tree");
        assert_files(&tree, &files, true, 10);
        assert!(tree.join("empty/inner").is_dir());
        assert_eq!(
            fs::read_link(tree.join("link")).unwrap(),
            Path::new("d00/s0/f0")
        );
        let d03 = fs::metadata(tree.join("d03")).unwrap();
        assert_eq!(d03.mode() & 0o7777, 0o750);
        assert_eq!(mtime_of(&d03), d03_mtime);
    }

    // jfs -> S3 (the bucket made by the sync), symlinks left out
    let bucket = "s3://synced/some/prefix/";
    let up = ok(&mut sync_s3(&s3, &[&vol, bucket]));
    assert_eq!(copied(&up), 10_000, "{up:?}");
    assert!(String::from_utf8_lossy(&up.stderr).contains("left out link"));
    let keys = s3.keys("synced");
    assert_eq!(keys.len(), 10_000);
    assert!(keys.iter().all(|k| k.starts_with("some/prefix/")));

    // S3 -> local: every file's bytes; a "dir/" marker made a directory,
    // a key with ".." in it left out (it would land outside the root)
    put_objects(
        &s3,
        "synced",
        &["some/prefix/marked/", "some/prefix/x/../../../evil"],
    );
    let back = work.join("back");
    let down = ok(&mut sync_s3(&s3, &[bucket, back.to_str().unwrap()]));
    assert_eq!(copied(&down), 10_000, "{down:?}");
    assert_files(&back, &files, false, 1);
    assert!(back.join("marked").is_dir());
    assert!(!work.join("evil").exists() && !back.join("evil").exists());
    // sizes match, S3 keeps no mtimes: nothing to copy again
    let again = ok(&mut sync_s3(&s3, &[bucket, back.to_str().unwrap()]));
    assert_eq!(copied(&again), 0, "{again:?}");
}

#[test]
fn an_interrupted_sync_resumes_where_it_stopped() {
    let v = Volume::new("sync-resume");
    let src = v.dir.path().join("src");
    let files = big_tree(1200, 32 << 10);
    write_tree(&src, &files);
    let vol = jfs_url(&v, "/r");
    let mut child = sync(&[src.to_str().unwrap(), &vol, "--threads", "2"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = eventually(60, || {
        v.sql("SELECT count(*) FROM jfs.edge")
            .parse::<u64>()
            .unwrap()
            > 250
    });
    assert!(started, "the sync made no files");
    assert!(
        child.try_wait().unwrap().is_none(),
        "the sync ended before it could be interrupted"
    );
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    // whatever has its real name is whole
    {
        let m = v.mount("killed", &[]);
        let got = list_tree(&m.p("r"));
        let whole = files
            .iter()
            .filter(|(p, _)| got.contains_key(*p))
            .inspect(|(p, f)| {
                assert!(
                    fs::read(m.p("r").join(p)).unwrap() == f.data,
                    "{p} is partial"
                )
            })
            .count();
        assert!(whole > 0 && whole < files.len(), "{whole} files made");
    }
    let resumed = ok(&mut sync(&[src.to_str().unwrap(), &vol]));
    let n = copied(&resumed);
    assert!(
        n > 0 && n < files.len() as u64,
        "copied {n} again: {resumed:?}"
    );
    let m = v.mount("resumed", &[]);
    assert_files(&m.p("r"), &files, true, 1);
}

#[test]
fn delete_dst_dry_run_update_and_checksum() {
    let v = Volume::new("sync-options");
    let work = v.dir.path();
    let (src, dst) = (work.join("src"), work.join("dst"));
    let base = 1_650_000_000_000_000_000;
    let files: BTreeMap<String, File> = [("one", "one"), ("two", "two"), ("sub/three", "three")]
        .into_iter()
        .map(|(p, d)| {
            (
                p.to_string(),
                File {
                    data: d.as_bytes().to_vec(),
                    mode: 0o644,
                    mtime: base,
                },
            )
        })
        .collect();
    write_tree(&src, &files);
    let (s, d) = (src.to_str().unwrap(), dst.to_str().unwrap());
    ok(&mut sync(&[s, d]));
    assert_files(&dst, &files, true, 1);

    // an extra file stays without --delete-dst; a dry run changes nothing
    fs::write(dst.join("extra"), "x").unwrap();
    fs::write(src.join("one"), "ONE, longer").unwrap();
    let out = ok(&mut sync(&[s, d, "--dry-run", "--delete-dst"]));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("would delete extra"), "{said}");
    assert!(said.contains("would copy one"), "{said}");
    assert_eq!(fs::read(dst.join("one")).unwrap(), b"one");
    assert!(dst.join("extra").exists());
    fs::write(src.join("one"), "one").unwrap();
    set_mtime(&src.join("one"), base);
    ok(&mut sync(&[s, d]));
    assert!(dst.join("extra").exists(), "deleted without --delete-dst");
    ok(&mut sync(&[s, d, "--delete-dst"]));
    assert!(!dst.join("extra").exists(), "--delete-dst kept it");
    assert_files(&dst, &files, true, 1);

    // --update leaves a newer destination file alone
    let newer = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64;
    fs::write(dst.join("two"), "TWO, newer").unwrap();
    set_mtime(&dst.join("two"), newer);
    let out = ok(&mut sync(&[s, d, "--update"]));
    assert_eq!(copied(&out), 0);
    assert_eq!(fs::read(dst.join("two")).unwrap(), b"TWO, newer");
    ok(&mut sync(&[s, d]));
    assert_eq!(fs::read(dst.join("two")).unwrap(), b"two");

    // same size, same mtime, other bytes: only --checksum sees it
    fs::write(dst.join("sub/three"), "THREE").unwrap();
    set_mtime(&dst.join("sub/three"), base);
    let out = ok(&mut sync(&[s, d]));
    assert_eq!(copied(&out), 0);
    assert_eq!(fs::read(dst.join("sub/three")).unwrap(), b"THREE");
    let out = ok(&mut sync(&[s, d, "--checksum"]));
    assert_eq!(copied(&out), 1);
    assert_files(&dst, &files, true, 1);

    // the same through a volume: extras there deleted with --delete-dst,
    // and the volume read back as a source
    let vol = jfs_url(&v, "/opts");
    fs::write(dst.join("extra"), "x").unwrap();
    ok(&mut sync(&[d, &vol]));
    ok(&mut sync(&[s, &vol, "--delete-dst"]));
    let back = work.join("back");
    ok(&mut sync(&[&vol, back.to_str().unwrap()]));
    assert_files(&back, &files, true, 1);
}

#[test]
fn bad_endpoints_are_refused_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("dst");
    let d = d.to_str().unwrap();
    let cases: [(&[&str], &str); 4] = [
        (&["ftp://host/x", d], "unknown endpoint scheme"),
        (&["/nonexistent/jfs-sync-source", d], "does not exist"),
        (&["postgres://u@h/db", d], "jfs+postgres://"),
        (
            &["s3://bucket/p", d, "--s3-endpoint", "http://127.0.0.1:9"],
            "cannot reach bucket",
        ),
    ];
    for (args, says) in cases {
        let out = sync(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    assert!(!Path::new(d).exists(), "a failed run made its destination");
}

/// The temporary name `jfs sync` writes `path` under (sha256 of the path).
fn temp_name_of(path: &str) -> String {
    let out = ok(Command::new("sh").args(["-c", &format!("printf %s '{path}' | sha256sum")]));
    format!(
        ".jfs-sync-{}.tmp",
        &String::from_utf8_lossy(&out.stdout)[..16]
    )
}

#[test]
fn the_destination_is_never_written_outside_its_tree() {
    let dir = tempfile::tempdir().unwrap();
    let (src, dst, out) = (
        dir.path().join("src"),
        dir.path().join("dst"),
        dir.path().join("out"),
    );
    for d in [&src, &dst, &out] {
        fs::create_dir(d).unwrap();
    }
    fs::write(out.join("passwd"), b"orig").unwrap();
    fs::write(out.join("victim"), b"orig").unwrap();
    fs::set_permissions(&out, fs::Permissions::from_mode(0o700)).unwrap();
    // the source has a directory where the destination has a symlink out
    fs::create_dir(src.join("a")).unwrap();
    fs::write(src.join("a/passwd"), b"evil").unwrap();
    std::os::unix::fs::symlink(&out, dst.join("a")).unwrap();
    // a symlink where the temporary of "y" will be made
    fs::write(src.join("y"), b"fresh").unwrap();
    std::os::unix::fs::symlink(out.join("victim"), dst.join(temp_name_of("y"))).unwrap();
    // a set-user-ID file
    fs::write(src.join("x"), b"data").unwrap();
    fs::set_permissions(src.join("x"), fs::Permissions::from_mode(0o4755)).unwrap();

    let run = sync(&[src.to_str().unwrap(), dst.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success(), "a conflict is a failure");
    assert!(err.contains("a: the source has a directory"), "{err}");
    assert_eq!(fs::read(out.join("passwd")).unwrap(), b"orig");
    assert_eq!(fs::read(out.join("victim")).unwrap(), b"orig");
    assert_eq!(fs::metadata(&out).unwrap().mode() & 0o7777, 0o700);
    assert_eq!(fs::read(dst.join("y")).unwrap(), b"fresh");
    assert!(fs::symlink_metadata(dst.join("y")).unwrap().is_file());
    assert_eq!(fs::metadata(dst.join("x")).unwrap().mode() & 0o7777, 0o755);

    // trees that hold one another, and an empty source with --delete-dst
    fs::create_dir(src.join("sub")).unwrap();
    for (a, b) in [
        (src.clone(), src.join("sub")),
        (src.join("sub"), src.clone()),
    ] {
        let run = sync(&[a.to_str().unwrap(), b.to_str().unwrap(), "--delete-dst"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&run.stderr);
        assert!(
            !run.status.success() && err.contains("hold one another"),
            "{err}"
        );
    }
    let empty = dir.path().join("empty");
    fs::create_dir(&empty).unwrap();
    let run = sync(&[
        empty.to_str().unwrap(),
        dst.to_str().unwrap(),
        "--delete-dst",
    ])
    .output()
    .unwrap();
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(
        !run.status.success() && err.contains("lists nothing"),
        "{err}"
    );
    assert!(dst.join("y").exists());

    // a password in a bad endpoint is not echoed
    for bad in [
        "ftp://u:s3cr3t@h/x",
        "jfs+postgres://u:s3#cr3t@h/db",
        "jfs+postgres://u:s3cr3t@",
    ] {
        let run = sync(&[bad, dst.to_str().unwrap()]).output().unwrap();
        let err = String::from_utf8_lossy(&run.stderr);
        assert!(!run.status.success(), "{bad}");
        assert!(
            !err.contains("s3cr3t") && !err.contains("cr3t"),
            "{bad}: {err}"
        );
    }
}
