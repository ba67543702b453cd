//! Small files in the database (`jfs format --inline-max`): a file no
//! longer than the threshold keeps its bytes in `jfs.inline_data`, written
//! with its metadata in one commit, and no object; files that grow past it
//! go on in objects; reads, links, copies, holes, encryption, fsck, status
//! and a dump (read by `jfs load`, as JuiceFS would read it) all see the
//! same bytes.
use std::fs;
use std::os::unix::fs::FileExt;

use jfs_e2e::{jfs, ok, pattern, psql_as, Volume, CLIENT_ROLE};

/// The slices the volume keeps in its database.
fn kept(v: &Volume) -> String {
    v.sql("SELECT count(*) FROM jfs.inline_data")
}

/// The block objects in the volume's bucket.
fn blocks(v: &Volume) -> usize {
    v.objects()
        .iter()
        .filter(|p| p.to_str().unwrap().contains("/chunks/"))
        .count()
}

#[test]
fn small_files_live_in_the_database_and_read_back_everywhere() {
    let v = Volume::with_options("inline-a", &["--inline-max", "16", "--trash-days", "0"]);
    let addr = jfs_e2e::free_metrics_addr();
    let m = v.mount("a", &["--metrics", &addr]);
    let files: Vec<(&str, Vec<u8>)> = vec![
        ("one", pattern(1, 1)),
        ("four", pattern(2, 4096)),
        ("limit", pattern(3, 16384)),
        ("past", pattern(4, 16385)),
    ];
    for (name, data) in &files {
        fs::write(m.p(name), data).unwrap();
    }
    fs::write(m.p("empty"), b"").unwrap();
    // three files kept in the database, one (past the limit) in an object
    assert_eq!(kept(&v), "3");
    assert_eq!(blocks(&v), 1, "{:?}", v.objects());
    // the mount counts what it kept (metrics), the bytes as stored
    let metric = |name| jfs_e2e::metric_sum(&addr, name, "").unwrap_or(0.0);
    assert_eq!(metric("jfs_inline_slices_total"), 3.0);
    let bytes = metric("jfs_inline_bytes_total");
    assert!(
        (1.0 + 4096.0 + 16384.0..30_000.0).contains(&bytes),
        "{bytes}"
    );
    let said = String::from_utf8_lossy(&ok(jfs().args(["status", &v.url])).stdout).to_string();
    assert!(
        said.contains("inline      3 files, 3 slices") && said.contains("at most 16384 bytes"),
        "{said}"
    );

    // another mount reads them (nothing cached there)
    let n = v.mount("b", &[]);
    for (name, data) in &files {
        assert!(fs::read(n.p(name)).unwrap() == *data, "{name} from mount b");
    }
    assert_eq!(fs::read(n.p("empty")).unwrap(), b"");

    // an overwrite in the middle, a hole, a hard link, a copy
    let f = fs::OpenOptions::new()
        .write(true)
        .open(m.p("four"))
        .unwrap();
    f.write_all_at(b"MIDDLE", 1000).unwrap();
    drop(f);
    let mut four = files[1].1.clone();
    four[1000..1006].copy_from_slice(b"MIDDLE");
    let f = fs::File::create(m.p("sparse")).unwrap();
    f.write_all_at(b"end", 10_000).unwrap();
    drop(f);
    fs::hard_link(m.p("four"), m.p("four-link")).unwrap();
    ok(std::process::Command::new("cp")
        .arg("--reflink=never")
        .arg(m.p("limit"))
        .arg(m.p("limit-copy")));
    let n = v.mount("c", &[]);
    assert!(fs::read(n.p("four")).unwrap() == four);
    assert!(fs::read(n.p("four-link")).unwrap() == four);
    assert!(fs::read(n.p("limit-copy")).unwrap() == files[2].1);
    let sparse = fs::read(n.p("sparse")).unwrap();
    assert_eq!(sparse.len(), 10_003);
    assert!(sparse[..10_000].iter().all(|b| *b == 0) && &sparse[10_000..] == b"end");
    assert_eq!(
        blocks(&v),
        1,
        "small files made no object: {:?}",
        v.objects()
    );

    // growing past the limit: the rest goes to an object, the file reads whole
    let mut grown = files[0].1.clone();
    let more = pattern(5, 40_000);
    let f = fs::OpenOptions::new()
        .append(true)
        .open(m.p("one"))
        .unwrap();
    f.write_all_at(&more, 1).unwrap();
    f.sync_all().unwrap();
    drop(f);
    grown.extend_from_slice(&more);
    assert!(
        fs::read(n.p("one")).unwrap() == grown,
        "grown file from mount c"
    );
    // truncated back below it and written again: in the database again
    let f = fs::OpenOptions::new().write(true).open(m.p("one")).unwrap();
    f.set_len(100).unwrap();
    f.write_all_at(b"tail", 100).unwrap();
    f.sync_all().unwrap();
    drop(f);
    grown.truncate(100);
    grown.extend_from_slice(b"tail");
    assert!(
        fs::read(n.p("one")).unwrap() == grown,
        "shrunk file from mount c"
    );

    // fsck finds every object and every kept slice
    let fsck = ok(jfs().args(["fsck", &v.admin_url, "--check-objects"]));
    let said = String::from_utf8_lossy(&fsck.stderr);
    assert!(said.contains(": 0 missing"), "{said}");
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");

    // a dump writes kept slices as objects: a load elsewhere (as JuiceFS
    // loads a dump) reads every file from the store alone
    let dump = v.dir.path().join("inline.json");
    ok(jfs().args(["dump", &v.url]).arg(&dump));
    let w = Volume::unformatted("inline-a-loaded");
    ok(jfs().args(["load", &w.admin_url]).arg(&dump));
    assert_eq!(kept(&w), "0", "a loaded dump keeps nothing in the database");
    let l = w.mount("d", &[]);
    assert!(fs::read(l.p("four")).unwrap() == four);
    assert!(fs::read(l.p("limit")).unwrap() == files[2].1);
    assert!(fs::read(l.p("sparse")).unwrap() == sparse);
    assert!(fs::read(l.p("one")).unwrap() == grown);
    drop(l);

    // removed files take their bytes out of the database (the copy shares
    // its source's slice; an unlinked file goes a moment after)
    let slice = v.sql("SELECT slice_id FROM jfs.slice WHERE inode = jfs.resolve('/limit')");
    let still = format!("SELECT count(*) FROM jfs.inline_data WHERE slice_id = {slice}");
    assert_eq!(v.sql(&still), "1");
    fs::remove_file(m.p("limit")).unwrap();
    fs::remove_file(m.p("limit-copy")).unwrap();
    drop(n);
    drop(m);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while v.sql(&still) != "0" {
        assert!(
            std::time::Instant::now() < deadline,
            "the removed files' slice is still kept"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

#[test]
fn kept_bytes_are_compressed_and_sealed_as_blocks_are() {
    let pem = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../client/src/object/testdata/rsa2048.pem");
    let v = Volume::with_options(
        "inline-sealed",
        &[
            "--inline-max",
            "16",
            "--compress",
            "zstd",
            "--encrypt-rsa-key",
            pem.to_str().unwrap(),
            "--encrypt-algo",
            "aes256gcm-rsa",
        ],
    );
    let m = v.mount("a", &[]);
    let text: Vec<u8> = (0..400)
        .flat_map(|i| format!("secret line {i} of the file\n").into_bytes())
        .take(12_000)
        .collect();
    fs::write(m.p("secret"), &text).unwrap();
    assert_eq!(kept(&v), "1");
    assert_eq!(blocks(&v), 0);
    // the database holds no plain text of it
    let plain = v.sql(
        "SELECT count(*) FROM jfs.inline_data \
          WHERE position(convert_to('secret line', 'UTF8') IN data) > 0",
    );
    assert_eq!(plain, "0", "the database holds the file's plain text");
    let n = v.mount("b", &[]);
    assert!(fs::read(n.p("secret")).unwrap() == text);
    // a dump writes the object sealed as a block: a load reads it
    let dump = v.dir.path().join("sealed.json");
    ok(jfs().args(["dump", &v.url, "--keep-secret-key"]).arg(&dump));
    assert_eq!(blocks(&v), 1, "the dump wrote the kept slice as an object");
    let stored = v
        .objects()
        .into_iter()
        .find(|p| p.to_str().unwrap().contains("/chunks/"))
        .unwrap();
    let raw = fs::read(stored).unwrap();
    assert!(
        !raw.windows(11).any(|w| w == b"secret line"),
        "the object written by the dump holds plain text"
    );
}

#[test]
fn the_database_refuses_what_it_should_not_keep() {
    let v = Volume::with_options("inline-refused", &["--inline-max", "4"]);
    let m = v.mount("a", &[]);
    fs::write(m.p("big"), pattern(6, 100_000)).unwrap();
    fs::write(m.p("small"), pattern(7, 10)).unwrap();
    drop(m);
    // as a client role: a slice kept for a file longer than the limit, one
    // past the limit, one not at the start of its slice: errno 7 (E2BIG),
    // nothing changed
    let ids = psql_as(CLIENT_ROLE, "", &v.db, "SELECT jfs.alloc_ids('slice', 10)").unwrap();
    let id: i64 = ids.parse().unwrap();
    for (file, pos, len, off, size, bytes) in [
        ("big", 0, 10, 0, 10, 10),
        ("small", 0, 5000, 0, 5000, 5000),
        ("small", 0, 10, 5, 20, 10),
        ("small", 0, 10, 0, 10, 9000),
    ] {
        let said = psql_as(
            CLIENT_ROLE,
            "",
            &v.db,
            &format!(
            "SELECT committed, (a).errno FROM jfs.write_slices(jfs.resolve('/{file}'), '{{0}}', \
             '{{{pos}}}', ARRAY[{id}]::bigint[], '{{{size}}}', '{{{off}}}', '{{{len}}}', \
             p_inline => ARRAY[decode(repeat('00', {bytes}), 'hex')])"
        ),
        )
        .unwrap();
        assert_eq!(said, "0|7", "{file} pos {pos} len {len}: {said}");
    }
    assert_eq!(kept(&v), "1");
    // turned off: nothing new is kept (mounts started after)
    ok(jfs().args(["config", &v.admin_url, "--inline-max", "0"]));
    let m = v.mount("b", &[]);
    fs::write(m.p("later"), pattern(8, 10)).unwrap();
    assert_eq!(kept(&v), "1");
    assert!(fs::read(m.p("small")).unwrap() == pattern(7, 10));
    let refused = jfs()
        .args(["config", &v.admin_url, "--inline-max", "129"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("at most 128"));
}

/// A file of many kept slices (each overwrite fsync'd) is compacted like
/// any other: `jfs compact` reads the kept bytes and writes one object.
#[test]
fn compaction_rewrites_kept_slices_as_one_object() {
    let v = Volume::with_options("inline-compact", &["--inline-max", "16"]);
    let m = v.mount("a", &["--compact-at", "0"]);
    let mut data = pattern(11, 12_000);
    fs::write(m.p("f"), &data).unwrap();
    let f = fs::OpenOptions::new().write(true).open(m.p("f")).unwrap();
    for i in 0..8u8 {
        let at = i as usize * 1000 + 17;
        let piece = vec![b'a' + i; 300];
        f.write_all_at(&piece, at as u64).unwrap();
        f.sync_all().unwrap();
        data[at..at + 300].copy_from_slice(&piece);
    }
    drop(f);
    let slices = "SELECT count(*) FROM jfs.slice WHERE inode = jfs.resolve('/f')";
    assert_eq!(v.sql(slices), "9");
    assert_eq!(kept(&v), "9");
    ok(jfs().arg("compact").arg(m.p("f")));
    assert_eq!(v.sql(slices), "1", "{}", m.log_tail(20));
    assert_eq!(blocks(&v), 1, "compaction wrote one object");
    let n = v.mount("b", &[]);
    assert!(fs::read(n.p("f")).unwrap() == data);
    // (the kept slices went with their last reference)
    assert_eq!(kept(&v), "0");
}
