//! Quotas through real mounts: a writer stops at a directory quota with
//! EDQUOT, usage is exact the moment the write fails, parallel writers on
//! two mounts leave counters equal to a recount, and df shows the capacity
//! (of the volume, or of the directory quota of a `--subdir` mount).
use std::fs;
use std::io::Write;
use std::process::Command;

use jfs_e2e::{jfs, ok, Volume};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

#[test]
fn a_writer_stops_at_the_directory_quota_and_usage_is_exact_at_once() {
    let v = Volume::with_options("quotadd", &["--capacity", "50"]);
    let m = v.mount("a", &[]);
    fs::create_dir(m.p("q")).unwrap();
    ok(jfs().args([
        "quota",
        "set",
        &v.admin_url,
        "--path",
        "/q",
        "--capacity",
        "1",
    ]));

    // df shows the volume's capacity
    assert_eq!(df(&m.path)[0], 50 * GIB);

    let out = Command::new("dd")
        .args(["if=/dev/zero", "bs=1M", "count=2048"])
        .arg(format!("of={}", m.p("q/big").display()))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "dd wrote 2 GiB under a 1 GiB quota");
    assert!(said.contains("Disk quota exceeded"), "{said}");
    // exact now, not after some flush interval
    let used: u64 = v
        .reader_sql("SELECT used_space FROM jfs.quotas WHERE path = '/q'")
        .parse()
        .unwrap();
    assert!(used <= GIB && used > GIB - 65 * MIB, "used {used}");
    let length = fs::metadata(m.p("q/big")).unwrap().len();
    assert!(length <= GIB && length > GIB - 65 * MIB, "length {length}");
    assert_eq!(used, length.div_ceil(4096) * 4096);
    let out = ok(jfs().args(["quota", "get", &v.url, "--path", "/q"]));
    assert!(String::from_utf8_lossy(&out.stdout).contains("of 1.00 GiB"));

    // the quota is full: even a new empty file is refused; removing the big one frees it
    let err = fs::write(m.p("q/more"), vec![7u8; 8 << 20]).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EDQUOT), "{err}");
    assert!(!m.p("q/more").exists());
    fs::remove_file(m.p("q/big")).unwrap();
    fs::write(m.p("q/more"), vec![7u8; 8 << 20]).unwrap();
    assert_eq!(
        v.reader_sql("SELECT used_space FROM jfs.quotas WHERE path = '/q'"),
        (8 * MIB).to_string()
    );
    ok(jfs().args(["quota", "check", &v.admin_url]));
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
}

#[test]
fn the_write_that_crosses_a_quota_fails_and_what_came_before_stays() {
    let v = Volume::new("quotawrite");
    let m = v.mount("a", &[]);
    fs::create_dir(m.p("q")).unwrap();
    v.sql("SELECT count(*) FROM jfs.set_quota('/q', 10485760)");
    // dd of 1 MiB blocks: the first ten fit (the file's space is its length
    // in 4 KiB units), the eleventh is refused at once
    let out = Command::new("dd")
        .args(["if=/dev/urandom", "bs=1M", "count=30", "iflag=fullblock"])
        .arg(format!("of={}", m.p("q/f").display()))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "dd wrote 30 MiB under 10 MiB: {said}"
    );
    assert!(said.contains("Disk quota exceeded"), "{said}");
    assert!(said.contains("10+0 records out"), "{said}");
    assert_eq!(fs::metadata(m.p("q/f")).unwrap().len(), 10 * MIB);
    assert_eq!(
        v.reader_sql("SELECT used_space FROM jfs.quotas WHERE path = '/q'"),
        (10 * MIB).to_string()
    );
    // the bytes are there, on another mount too
    let b = v.mount("b", &[]);
    assert_eq!(fs::read(b.p("q/f")).unwrap().len() as u64, 10 * MIB);
    // a write within the file is not growth: it goes through
    let f = fs::OpenOptions::new().write(true).open(m.p("q/f")).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, &[1u8; 4096], 4096).unwrap();
    // a write across the limit is cut there (a short write, as ext4 does)
    assert_eq!(
        std::os::unix::fs::FileExt::write_at(&f, &[3u8; 8192], 10 * MIB - 4096).unwrap(),
        4096
    );
    // one byte more is refused at write(), not at close
    let err = std::os::unix::fs::FileExt::write_all_at(&f, &[1u8], 10 * MIB).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EDQUOT), "{err}");
    f.sync_all().unwrap();
    drop(f);
    // the volume's capacity answers ENOSPC the same way
    v.sql("SELECT count(*) FROM jfs.set_volume_quota(20971520)");
    let out = Command::new("dd")
        .args(["if=/dev/zero", "bs=1M", "count=30"])
        .arg(format!("of={}", m.p("g").display()))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("No space left on device"), "{said}");
    let g = fs::metadata(m.p("g")).unwrap().len();
    assert!((9 * MIB..10 * MIB).contains(&g), "g holds {g}");
    ok(jfs().args(["quota", "check", &v.admin_url]));
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
}

#[test]
fn parallel_writers_on_two_mounts_leave_exact_usage() {
    let v = Volume::new("quotapar");
    let a = v.mount("a", &[]);
    let b = v.mount("b", &[]);
    fs::create_dir(a.p("p")).unwrap();
    ok(jfs().args([
        "quota",
        "set",
        &v.admin_url,
        "--path",
        "/p",
        "--inodes",
        "150",
    ]));
    ok(jfs().args([
        "quota",
        "set",
        &v.admin_url,
        "--uid",
        "0",
        "--capacity",
        "1",
    ]));
    let dirs: Vec<_> = (0..4)
        .map(|i| {
            let m = if i % 2 == 0 { &a } else { &b };
            let d = m.p(&format!("p/w{i}"));
            fs::create_dir(&d).unwrap();
            d
        })
        .collect();
    // 4 writers, 60 files of 64 KiB each: 240 + 4 entries want in, 150 fit
    let refused: usize = std::thread::scope(|s| {
        let handles: Vec<_> = dirs
            .iter()
            .map(|d| {
                s.spawn(move || {
                    let mut refused = 0;
                    for n in 0..60 {
                        let r = fs::File::create(d.join(format!("f{n}")))
                            .and_then(|mut f| f.write_all(&vec![n as u8; 64 << 10]));
                        match r {
                            Ok(()) => {}
                            Err(e) if e.raw_os_error() == Some(libc::EDQUOT) => refused += 1,
                            Err(e) => panic!("{}: {e}", d.display()),
                        }
                    }
                    refused
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert!(refused >= 90, "only {refused} creates refused");
    assert_eq!(
        v.reader_sql("SELECT used_inodes FROM jfs.quotas WHERE path = '/p'"),
        "150"
    );
    let out = ok(jfs().args(["quota", "check", &v.admin_url]));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        !text.contains("DRIFTED") && text.contains("dir /p"),
        "{text}"
    );
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
}

/// `df -B1 --output=size,used,itotal,iused` of a path.
fn df(path: &std::path::Path) -> Vec<u64> {
    let out = ok(Command::new("df")
        .args(["-B1", "--output=size,used,itotal,iused"])
        .arg(path));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .nth(1)
        .map(|l| {
            l.split_whitespace()
                .filter_map(|w| w.parse().ok())
                .collect()
        })
        .expect("df figures")
}

#[test]
fn a_subdirectory_mount_shows_its_quota_in_df() {
    let v = Volume::with_options("quotasub", &["--capacity", "50"]);
    let m = v.mount("a", &[]);
    fs::create_dir_all(m.p("proj/a")).unwrap();
    ok(jfs().args([
        "quota",
        "set",
        &v.admin_url,
        "--path",
        "/proj",
        "--capacity",
        "2",
        "--inodes",
        "100",
    ]));

    let sub = v.mount("sub", &["--subdir", "/proj/a"]);
    fs::write(sub.p("f"), vec![1u8; 3 << 20]).unwrap();
    fs::create_dir(sub.p("d")).unwrap();
    // the same files, seen from the root mount
    assert_eq!(fs::read(m.p("proj/a/f")).unwrap().len(), 3 << 20);
    assert!(m.p("proj/a/d").is_dir());
    // ... and the subdirectory mount's df is the quota's: 2 GiB, 100 inodes,
    // used = a, a/f, a/d
    let figures = df(&sub.path);
    assert_eq!(
        figures,
        vec![2 * GIB, 3 * MIB + 2 * 4096, 100, 3],
        "df {figures:?}"
    );
    // the root mount's df is still the volume's
    assert_eq!(df(&m.path)[0], 50 * GIB);
    // the control file answers on the subdirectory mount, for its inodes
    let out = ok(jfs().arg("info").arg(sub.p("f")));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("chunks"),
        "{out:?}"
    );

    // a missing or non-directory --subdir is refused with its name
    for bad in ["/proj/nope", "/proj/a/f"] {
        let mp = v.dir.path().join(format!("bad{}", bad.len()));
        fs::create_dir_all(&mp).unwrap();
        let out = jfs()
            .args(["mount", &v.url])
            .arg(&mp)
            .args(["--subdir", bad])
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && said.contains("--subdir"),
            "{bad}: {said}"
        );
    }
}
