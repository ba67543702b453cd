//! `jfs dump` / `jfs load`: a volume dumped (JuiceFS's JSON layout) and loaded
//! into a new database serves the same tree over the same bucket, and a
//! dump JuiceFS wrote loads and serves its files byte for byte.
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use jfs_e2e::{assert_same_tree, jfs, make_varied_tree, ok, pattern, Volume};

/// Every quota with its limits and usage, one line each.
const QUOTAS: &str =
    "SELECT kind, coalesce(path, ''), coalesce(uid, -1), coalesce(gid, -1), max_space, \
                      used_space, max_inodes, used_inodes FROM jfs.quotas ORDER BY 1, 2, 3, 4";

fn fsck_problems(v: &Volume) -> String {
    v.sql("SELECT count(*) || ' ' || coalesce(string_agg(problem || ' ' || inode || ' ' || detail, '; '), '') FROM jfs.fsck()")
}

#[test]
fn a_dumped_volume_loads_into_a_new_database_and_serves_the_same_tree() {
    let v = Volume::with_options("dump-src", &["--enable-acl", "--trash-days", "1"]);
    let m = v.mount("a", &[]);
    make_varied_tree(&m.p("tree"));
    // a sparse file across chunks, an overwritten file (two slices), a file in the trash
    let sparse = fs::File::create(m.p("sparse")).unwrap();
    sparse.set_len(70 << 20).unwrap();
    drop(sparse);
    ok(Command::new("dd")
        .args([
            "if=/dev/urandom",
            "bs=64k",
            "count=3",
            "seek=1100",
            "conv=notrunc,fsync",
        ])
        .arg(format!("of={}", m.p("sparse").display()))
        .stderr(Stdio::null()));
    fs::write(m.p("overwritten"), pattern(7, 300_000)).unwrap();
    ok(Command::new("dd")
        .args([
            "if=/dev/zero",
            "bs=1000",
            "count=10",
            "seek=50",
            "conv=notrunc",
        ])
        .arg(format!("of={}", m.p("overwritten").display()))
        .stderr(Stdio::null()));
    // names a dump must escape, a device, a time before 1970
    fs::create_dir(m.p("odd")).unwrap();
    for name in [
        &b"not utf-8 \xff\xfe"[..],
        b"100% \"quoted\" back\\slash",
        b"new\nline",
        b"caf\xc3\xa9",
    ] {
        fs::write(m.p("odd").join(std::ffi::OsStr::from_bytes(name)), name).unwrap();
    }
    ok(Command::new("mknod")
        .arg(m.p("odd/null"))
        .args(["c", "1", "3"]));
    ok(Command::new("touch")
        .args(["-h", "-d", "1960-02-03 04:05:06.789 UTC"])
        .arg(m.p("odd/caf\u{e9}")));
    fs::write(m.p("tree/gone"), b"kept by the trash").unwrap();
    fs::remove_file(m.p("tree/gone")).unwrap();
    for (target, args) in [
        (
            "--path",
            ["/tree/team", "--capacity", "1", "--inodes", "50"],
        ),
        ("--uid", ["1000", "--capacity", "2", "--inodes", "0"]),
    ] {
        let mut cmd = jfs();
        cmd.args(["quota", "set", &v.admin_url, target]).args(args);
        ok(&mut cmd);
    }

    // a mount's role may dump; the dump goes to a file, compressed
    let dump = v.dir.path().join("vol.json.gz");
    let out = ok(jfs().args(["dump", &v.url]).arg(&dump));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("dumped"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let head = fs::read(&dump).unwrap();
    assert_eq!(&head[..2], &[0x1f, 0x8b], "a .gz dump is gzip");

    // loading is administration: into a database with no volume
    let w = Volume::unformatted("dump-dst");
    ok(jfs().args(["load", &w.admin_url]).arg(&dump));
    assert_eq!(fsck_problems(&w), "0", "fsck of the loaded volume");
    // dumped again, the loaded volume gives the same dump (entries may come in another order)
    let again = ok(jfs().args(["dump", &w.url, "-"])).stdout;
    let first = ok(Command::new("gzip").arg("-dc").arg(&dump)).stdout;
    assert_eq!(dump_lines(&again), dump_lines(&first), "dump, load, dump");
    assert_eq!(w.sql(QUOTAS), v.sql(QUOTAS), "quotas and their usage");
    assert_eq!(
        w.sql("SELECT name, uuid, bucket, block_size, trash_days, enable_acl FROM jfs.setting"),
        v.sql("SELECT name, uuid, bucket, block_size, trash_days, enable_acl FROM jfs.setting")
    );
    // the slices and their references, and what each file shows
    let slices = "SELECT string_agg(slice_id || ':' || size || ':' || refs, ',' ORDER BY slice_id) FROM jfs.slice_ref";
    assert_eq!(w.sql(slices), v.sql(slices));
    let used = "SELECT string_agg(inode || ':' || used, ',' ORDER BY inode) FROM jfs.node";
    assert_eq!(w.sql(used), v.sql(used));

    // over the same bucket, the new database serves the same files, trash included
    let n = w.mount("b", &[]);
    assert_same_tree("dump/load", &m.path, &n.path);
    let null = fs::symlink_metadata(n.p("odd/null")).unwrap();
    assert!(
        null.file_type().is_char_device()
            && null.rdev() == fs::metadata("/dev/null").unwrap().rdev()
    );
    let old = fs::symlink_metadata(n.p("odd/caf\u{e9}")).unwrap();
    assert_eq!((old.mtime(), old.mtime_nsec()), (-312_753_294, 789_000_000));
    assert_eq!(
        fs::read(n.p("sparse")).unwrap(),
        fs::read(m.p("sparse")).unwrap()
    );
    assert_eq!(
        fs::metadata(n.p("tree/readme")).unwrap().ino(),
        fs::metadata(m.p("tree/readme")).unwrap().ino(),
        "inode numbers are kept"
    );
    // and new files get new inodes and slice ids
    fs::write(n.p("new"), pattern(9, 5000)).unwrap();
    assert_eq!(fs::read(n.p("new")).unwrap(), pattern(9, 5000));
    assert_eq!(fsck_problems(&w), "0");
    drop(n);

    // a volume that holds files is not replaced unless told
    let refused = jfs()
        .args(["load", &w.admin_url])
        .arg(&dump)
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains("not empty") && said.contains("--force"),
        "{said}"
    );
    assert_eq!(
        w.sql("SELECT count(*) FROM jfs.edge WHERE name = 'new'"),
        "1",
        "nothing lost"
    );

    // standard output into standard input, replacing it
    let mut dumper = jfs()
        .args(["dump", &v.url, "-"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let loader = jfs()
        .args(["load", &w.admin_url, "-", "--force"])
        .stdin(dumper.stdout.take().unwrap())
        .output()
        .unwrap();
    assert!(dumper.wait().unwrap().success());
    assert!(
        loader.status.success(),
        "{}",
        String::from_utf8_lossy(&loader.stderr)
    );
    assert_eq!(
        w.sql("SELECT count(*) FROM jfs.edge WHERE name = 'new'"),
        "0"
    );
    assert_eq!(fsck_problems(&w), "0");
    let n = w.mount("c", &[]);
    assert_same_tree("dump - | load -", &m.path, &n.path);
}

/// A dump's lines, sorted, without the commas that depend on the order of entries.
fn dump_lines(dump: &[u8]) -> Vec<String> {
    let mut lines: Vec<String> = String::from_utf8_lossy(dump)
        .lines()
        .map(|l| l.trim_end_matches(',').to_string())
        .collect();
    lines.sort();
    lines
}

#[test]
fn a_subdirectory_dump_loads_as_a_whole_volume() {
    let v = Volume::new("dump-subdir");
    let m = v.mount("a", &[]);
    fs::create_dir_all(m.p("a/b/c")).unwrap();
    fs::write(m.p("a/b/c/f"), pattern(3, 70_000)).unwrap();
    fs::write(m.p("outside"), b"not dumped").unwrap();
    let dump = v.dir.path().join("sub.json");
    ok(jfs()
        .args(["dump", &v.url])
        .arg(&dump)
        .args(["--subdir", "/a/b"]));
    let w = Volume::unformatted("dump-subdir-dst");
    ok(jfs().args(["load", &w.admin_url]).arg(&dump));
    assert_eq!(fsck_problems(&w), "0");
    let n = w.mount("b", &[]);
    assert_eq!(fs::read(n.p("c/f")).unwrap(), pattern(3, 70_000));
    assert!(!n.p("outside").exists() && !n.p("a").exists());
}

/// The fixture's files: tests/juicefs-dump (see its make.py).
fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../juicefs-dump")
}

fn copy_dir(from: &Path, to: &Path) {
    ok(Command::new("cp").arg("-a").arg(from).arg(to));
}

fn sha256(path: &Path) -> String {
    let out = ok(Command::new("sha256sum").arg(path));
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

fn hex_bytes(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

/// Checks every file of the fixture (expected.txt) on `m`; returns how many.
fn files_as_expected(m: &jfs_e2e::Mount) -> usize {
    let expected = fs::read_to_string(fixture().join("expected.txt")).unwrap();
    let mut files = 0;
    for line in expected.lines() {
        let mut parts = line.split(' ');
        let (size, sum, hex) = (
            parts.next().unwrap(),
            parts.next().unwrap(),
            parts.next().unwrap(),
        );
        let rel = hex_bytes(hex);
        let path = m.path.join(std::ffi::OsStr::from_bytes(&rel[1..]));
        assert_eq!(
            fs::metadata(&path).unwrap().len().to_string(),
            size,
            "{}",
            path.display()
        );
        assert_eq!(sha256(&path), sum, "bytes of {}", path.display());
        files += 1;
    }
    files
}

#[test]
fn juicefs_volumes_with_compressed_and_encrypted_blocks_load_and_serve_byte_for_byte() {
    let pass = [("JFS_RSA_PASSPHRASE", "jfs-test-passphrase")];
    for (variant, settings) in [("lz4", "lz4|"), ("sealed", "zstd|chacha20-rsa")] {
        let w = Volume::unformatted(&format!("dump-juicefs-{variant}"));
        let bucket = w.dir.path().join("bucket");
        copy_dir(&fixture().join(variant).join("bucket"), &bucket);
        let text = fs::read_to_string(fixture().join(variant).join("dump.json"))
            .unwrap()
            .replace("@BUCKET@", bucket.to_str().unwrap());
        let dump = w.dir.path().join("juicefs.json");
        fs::write(&dump, &text).unwrap();
        if variant == "sealed" {
            // a volume formatted alike but with another key refuses it
            let other = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../client/src/object/testdata/other2048.pem");
            let formatted = Volume::with_options(
                "dump-juicefs-other-key",
                &[
                    "--compress",
                    "zstd",
                    "--encrypt-rsa-key",
                    other.to_str().unwrap(),
                    "--encrypt-algo",
                    "chacha20-rsa",
                ],
            );
            let refused = jfs()
                .envs(pass)
                .args(["load", &formatted.admin_url])
                .arg(&dump)
                .output()
                .unwrap();
            assert!(!refused.status.success(), "loaded under another key");
            let said = String::from_utf8_lossy(&refused.stderr);
            assert!(said.contains("another RSA key"), "{said}");
            // the key's passphrase is asked for before anything is loaded
            let refused = jfs()
                .args(["load", &w.admin_url])
                .arg(&dump)
                .output()
                .unwrap();
            assert!(!refused.status.success(), "loaded without the passphrase");
            let said = String::from_utf8_lossy(&refused.stderr);
            assert!(said.contains("JFS_RSA_PASSPHRASE"), "{said}");
            assert_eq!(w.sql("SELECT count(*) FROM jfs.setting"), "0");
        }
        ok(jfs().envs(pass).args(["load", &w.admin_url]).arg(&dump));
        assert_eq!(
            w.sql("SELECT compression, encrypt_algo FROM jfs.setting"),
            settings,
            "{variant}"
        );
        assert_eq!(fsck_problems(&w), "0", "{variant}");
        let m = w.mount_with_env("a", &[], &pass);
        assert_eq!(files_as_expected(&m), 8, "{variant}");
        // and it goes on as such a volume: a new file reads back
        fs::write(m.p("new"), pattern(7, 300_000)).unwrap();
        m.unmount();
        let m = w.mount_with_env("b", &[], &pass);
        assert!(
            fs::read(m.p("new")).unwrap() == pattern(7, 300_000),
            "{variant}"
        );
        // a dump of it says how its blocks are stored, for a load elsewhere
        let again = ok(jfs().args(["dump", &w.url]));
        let said = String::from_utf8_lossy(&again.stderr);
        let again = String::from_utf8_lossy(&again.stdout);
        assert!(again.contains("\"Compression\": \""), "{variant}");
        assert_eq!(
            again.contains("\"EncryptAlgo\": \"chacha20-rsa\""),
            variant == "sealed"
        );
        if variant == "sealed" {
            // the RSA private key only when asked for, as JuiceFS does, and
            // in a file only its owner reads
            assert!(again.contains("\"EncryptKey\": \"removed\""), "{again}");
            assert!(!again.contains("PRIVATE KEY"));
            assert!(said.contains("RSA private key was left out"), "{said}");
            let kept = w.dir.path().join("kept.json");
            ok(jfs().args(["dump", &w.url, "--keep-secret-key"]).arg(&kept));
            let text = fs::read_to_string(&kept).unwrap();
            assert!(!text.contains("\"EncryptKey\": \"removed\""));
            assert!(text.contains("PRIVATE KEY"), "the key kept");
            let mode = fs::metadata(&kept).unwrap().mode() & 0o777;
            assert_eq!(mode, 0o600, "a dump's mode");
            // a dump without the key says what a load of it needs
            let x = Volume::unformatted("dump-juicefs-no-key");
            fs::write(x.dir.path().join("no-key.json"), again.as_bytes()).unwrap();
            let refused = jfs()
                .envs(pass)
                .args(["load", &x.admin_url])
                .arg(x.dir.path().join("no-key.json"))
                .output()
                .unwrap();
            assert!(!refused.status.success(), "loaded without its key");
            let said = String::from_utf8_lossy(&refused.stderr);
            assert!(said.contains("--keep-secret-key"), "{said}");
        }
    }
}

#[test]
fn a_juicefs_dump_and_its_bucket_serve_every_file_byte_for_byte() {
    let w = Volume::unformatted("dump-juicefs");
    let bucket = w.dir.path().join("bucket");
    copy_dir(&fixture().join("bucket"), &bucket);
    let text = fs::read_to_string(fixture().join("dump.json"))
        .unwrap()
        .replace("@BUCKET@", bucket.to_str().unwrap());
    let dump = w.dir.path().join("juicefs.json");
    fs::write(&dump, &text).unwrap();
    // blocks jfs could not find (hash-prefixed keys) are refused, and nothing changes
    let prefixed = w.dir.path().join("prefixed.json");
    fs::write(
        &prefixed,
        text.replace("\"Compression\": \"none\"", "\"HashPrefix\": true"),
    )
    .unwrap();
    let refused = jfs()
        .args(["load", &w.admin_url])
        .arg(&prefixed)
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("hash-prefixed object keys"), "{said}");
    assert_eq!(w.sql("SELECT count(*) FROM jfs.setting"), "0");

    let out = ok(jfs().args(["load", &w.admin_url]).arg(&dump));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("1 deleted files"), "{said}");
    assert_eq!(fsck_problems(&w), "0");
    assert_eq!(
        w.sql("SELECT name, uuid, storage, block_size, trash_days, enable_acl FROM jfs.setting"),
        "legacyfs|6a1f0c2e-9b3d-4c57-8e21-5d4f3a2b1c0d|file|65536|1|t"
    );
    assert_eq!(
        w.sql(
            "SELECT kind, coalesce(path, uid::text), max_space, max_inodes, used_inodes FROM jfs.quotas \
             WHERE kind <> 'fs' ORDER BY kind"
        ),
        "dir|/docs|10485760|100|3\nuser|1000|1073741824|0|5"
    );
    // new ids start past the dump's counters and the trash's inodes
    assert_eq!(
        w.sql("SELECT name, next FROM jfs.counter ORDER BY name"),
        "inode|13\nslice|19"
    );

    let m = w.mount("a", &[]);
    assert_eq!(files_as_expected(&m), 8);

    let meta = |rel: &str| fs::symlink_metadata(m.p(rel)).unwrap();
    let report = meta("docs/report.txt");
    assert_eq!(
        (report.mode() & 0o7777, report.uid(), report.gid()),
        (0o664, 1000, 1000)
    );
    assert_eq!(
        (report.mtime(), report.mtime_nsec()),
        (1_700_000_301, 123_456_790)
    );
    assert_eq!(meta("docs").mode() & 0o7777, 0o2750);
    assert_eq!(meta("docs/tool").mode() & 0o7777, 0o4755);
    assert_eq!(meta("hard-b").ino(), meta("docs/hard-a").ino());
    assert_eq!(
        meta("hard-b").nlink(),
        2,
        "counted from the names, not the stale dumped count"
    );
    let null = meta("null");
    assert!(null.file_type().is_char_device());
    assert_eq!(null.rdev(), fs::metadata("/dev/null").unwrap().rdev());
    let old = meta("100% done");
    assert_eq!((old.mtime(), old.mtime_nsec()), (-99_999_999, 6));
    assert_eq!(
        fs::read_link(m.p("link")).unwrap(),
        Path::new("docs/report.txt")
    );
    assert!(meta("pipe").file_type().is_fifo());
    let xattr = |rel: &str, name: &str| {
        let mut value = vec![0u8; 64];
        let len = rustix::fs::lgetxattr(m.p(rel), name, &mut value).unwrap();
        value.truncate(len);
        value
    };
    assert_eq!(xattr("docs/tool", "user.sum"), b"\x00\x01bin\xff%");
    assert_eq!(xattr("docs", "user.team"), b"storage");
    // (numeric ids: uid 1001 may have a name on this machine)
    let acl = ok(Command::new("getfacl")
        .arg("-cpn")
        .arg(m.p("docs/report.txt")));
    let acl = String::from_utf8_lossy(&acl.stdout);
    assert!(
        acl.contains("user:1001:rw-") && acl.contains("mask::rw-"),
        "{acl}"
    );
    let acl = ok(Command::new("getfacl").arg("-cpdn").arg(m.p("docs")));
    let acl = String::from_utf8_lossy(&acl.stdout);
    assert!(
        acl.contains("user::rwx") && acl.contains("user:1002:r-x") && acl.contains("group::r-x"),
        "{acl}"
    );
    // the trash came along: its entry can be restored by name
    assert!(m.p(".trash/2026-11-20-10/2-11-old.txt").exists());
    assert_eq!(
        w.sql(
            "SELECT string_agg(slice_id || ':' || refs, ',' ORDER BY slice_id) FROM jfs.slice_ref"
        ),
        "11:1,12:1,13:1,14:1,15:1,16:1,17:1,18:1"
    );

    // and it is a working volume: write, read back on a second mount
    fs::write(m.p("docs/new"), pattern(5, 200_000)).unwrap();
    let b = w.mount("b", &[]);
    assert_eq!(fs::read(b.p("docs/new")).unwrap(), pattern(5, 200_000));
    assert_eq!(fsck_problems(&w), "0");
}

#[test]
fn fsck_finds_a_missing_block_and_repairs_counts() {
    let v = Volume::new("fsck-cli");
    // (no background commit: one slice, two blocks, however slowly the
    // 5 MiB arrive; a CI run once found three slices, cut at 1 and 2 MiB,
    // which only commits between the writes make)
    let m = v.mount("a", &["--commit-after", "0"]);
    fs::write(m.p("f"), pattern(1, 5 << 20)).unwrap();
    // fsck scans the whole volume: administration, refused to a mount's role
    let refused = jfs().args(["fsck", &v.url]).output().unwrap();
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success()
            && said.contains("permission denied")
            && said.contains("grant_admin"),
        "{said}"
    );
    let out = ok(jfs().args(["fsck", &v.admin_url, "--check-objects"]));
    assert!(String::from_utf8_lossy(&out.stdout).contains("no problems"));

    // a block lost from the store is named, and the exit status says so
    let blocks = v.objects();
    assert_eq!(blocks.len(), 2, "{blocks:?}");
    fs::remove_file(&blocks[1]).unwrap();
    let out = jfs()
        .args(["fsck", &v.admin_url, "--check-objects"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let key = blocks[1]
        .strip_prefix(v.bucket())
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains(&format!("missing object {key}")), "{said}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("1 missing object(s)"));

    // a broken count is reported; --repair (administration) rebuilds it
    v.sql("UPDATE jfs.node SET nlink = 5, used = 1 WHERE inode = (SELECT inode FROM jfs.edge WHERE name = 'f')");
    let out = jfs().args(["fsck", &v.admin_url]).output().unwrap();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("nlink") && said.contains("used"), "{said}");
    let refused = jfs().args(["fsck", &v.url, "--repair"]).output().unwrap();
    assert!(!refused.status.success(), "a mount's role may not repair");
    let out = ok(jfs().args(["fsck", &v.admin_url, "--repair"]));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("repaired nlink: 1 rows") && said.contains("repaired used: 1 rows"),
        "{said}"
    );
    assert_eq!(fsck_problems(&v), "0");
}

/// Seconds of a backup's UTC stamp (YYYY-MM-DD-HHMMSS), within a month.
fn stamp_seconds(key: &str) -> u64 {
    let stamp = key
        .rsplit("dump-")
        .next()
        .unwrap()
        .trim_end_matches(".json.gz");
    let n = |r: std::ops::Range<usize>| stamp[r].parse::<u64>().unwrap();
    n(8..10) * 86400 + n(11..13) * 3600 + n(13..15) * 60 + n(15..17)
}

#[test]
fn mounts_take_turns_writing_metadata_backups_that_load() {
    let v = Volume::new("backup-meta");
    let flags = ["--backup-meta", "3", "--backup-keep", "2"];
    let a = v.mount("a", &flags);
    let b = v.mount("b", &flags);
    fs::write(a.p("kept"), pattern(2, 10_000)).unwrap();
    std::thread::sleep(std::time::Duration::from_secs(11));
    let made: Vec<String> = [&a, &b]
        .iter()
        .flat_map(|m| {
            m.log_text()
                .lines()
                .filter_map(|l| l.split("metadata backup ").nth(1))
                .map(|rest| rest.split(':').next().unwrap().to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    let mut seconds: Vec<u64> = made.iter().map(|k| stamp_seconds(k)).collect();
    seconds.sort();
    assert!(
        (2..=4).contains(&made.len()),
        "one backup per 3 s among both mounts: {made:?}"
    );
    for pair in seconds.windows(2) {
        assert!(
            pair[1] - pair[0] >= 2,
            "two backups in one interval: {made:?}"
        );
    }
    // the newest --backup-keep are kept
    // (not one still being written: a .tmp renamed when whole)
    let mut kept: Vec<PathBuf> = fs::read_dir(v.bucket().join("backup-meta/meta"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !p.to_string_lossy().contains(".tmp"))
        .collect();
    kept.sort();
    assert_eq!(kept.len(), 2, "{kept:?}");
    drop(b);
    drop(a);

    // a backup is a dump: it loads and the file is there
    let w = Volume::unformatted("backup-meta-restore");
    ok(jfs().args(["load", &w.admin_url]).arg(kept.last().unwrap()));
    assert_eq!(fsck_problems(&w), "0");
    let n = w.mount("c", &[]);
    assert_eq!(fs::read(n.p("kept")).unwrap(), pattern(2, 10_000));
}
