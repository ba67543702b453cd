//! The s3 backend against a real S3-compatible server on loopback (moto).
use std::fs::{self, File};
use std::io::{Read, Write};

use jfs_e2e::{eventually, pattern, S3Server, Volume};

#[test]
fn files_round_trip_through_s3_and_deletes_free_objects() {
    let s3 = S3Server::start();
    let v = Volume::s3("s3files", &s3, "jfs-e2e");
    let m = v.mount("a", &[]);
    let piece = 8 << 20;
    let mut f = File::create(m.p("big")).unwrap();
    for i in 0..32u64 {
        f.write_all(&pattern(200 + i, piece)).unwrap();
    }
    drop(f);
    fs::write(m.p("small"), b"small").unwrap();
    // the bucket holds exactly the blocks of the committed slices: 256 MiB
    // in 4 MiB blocks plus the small file, unless a write was split in more slices
    let keys = s3.keys("jfs-e2e");
    let blocks: usize = v
        .sql("SELECT sum((size + 4194303) / 4194304) FROM jfs.slice_ref")
        .parse()
        .unwrap();
    assert_eq!(
        keys.len(),
        blocks,
        "{keys:#?}\n{}",
        v.sql("SELECT * FROM jfs.slice")
    );
    assert!(keys.len() >= 65, "{keys:#?}");
    if keys.len() > 65 {
        eprintln!(
            "a write was split into more slices:\n{}",
            v.sql("SELECT * FROM jfs.slice")
        );
    }
    assert!(s3
        .keys("jfs-e2e")
        .iter()
        .all(|k| k.starts_with("s3files/chunks/")));
    let m2 = v.mount("b", &[]);
    let mut f = File::open(m2.p("big")).unwrap();
    let mut buf = vec![0u8; piece];
    for i in 0..32u64 {
        f.read_exact(&mut buf).unwrap();
        assert!(buf == pattern(200 + i, piece), "piece {i} differs");
    }
    // closed on B first (an open file there would keep its blocks); with B
    // live the file is kept 10 s for other mounts' handles, then freed
    drop(f);
    fs::remove_file(m.p("big")).unwrap();
    assert!(
        eventually(30, || s3.keys("jfs-e2e").len() == 1),
        "left: {}",
        s3.keys("jfs-e2e").len()
    );
    assert_eq!(fs::read(m2.p("small")).unwrap(), b"small");
}

#[test]
fn a_write_that_cannot_reach_s3_fails_and_promises_nothing() {
    let mut s3 = S3Server::start();
    let v = Volume::s3("s3down", &s3, "jfs-e2e-down");
    // (object requests retried for 2 s, not the default minute)
    let m = v.mount("a", &["--object-retry", "2"]);
    fs::write(m.p("safe"), b"safe").unwrap();
    s3.stop();
    let mut f = File::create(m.p("lost")).unwrap();
    let wrote = f.write_all(&pattern(1, 6 << 20));
    let closed = f.sync_all();
    drop(f);
    assert!(
        wrote.is_err() || closed.is_err(),
        "a write to a dead S3 reported success"
    );
    let err = closed.err().or(wrote.err()).unwrap();
    assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err}");
    // nothing of it was committed: the file exists but holds no data
    assert_eq!(
        v.sql("SELECT length FROM jfs.node n JOIN jfs.edge e USING (inode) WHERE e.name = 'lost'"),
        "0"
    );
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
}

#[test]
fn the_disk_cache_serves_reads_while_s3_is_away() {
    let mut s3 = S3Server::start();
    let v = Volume::s3("s3cache", &s3, "jfs-e2e-cache");
    let cache = v.dir.path().join("cache");
    let cache_arg = cache.to_str().unwrap().to_string();
    let blocks_in_cache = || {
        fn count(p: &std::path::Path) -> usize {
            fs::read_dir(p).map_or(0, |rd| {
                rd.flatten()
                    .map(|e| {
                        if e.path().is_dir() {
                            count(&e.path())
                        } else {
                            1
                        }
                    })
                    .sum()
            })
        }
        count(&cache)
    };
    {
        let m = v.mount("a", &["--cache-dir", &cache_arg, "--cache-size", "64"]);
        fs::write(m.p("f"), pattern(4, 9 << 20)).unwrap();
        assert!(fs::read(m.p("f")).unwrap() == pattern(4, 9 << 20));
        assert!(
            eventually(10, || blocks_in_cache() == 3),
            "cached: {}",
            blocks_in_cache()
        );
    }
    s3.stop();
    // a new process (empty memory) finds every block on the local disk
    let m = v.mount("b", &["--cache-dir", &cache_arg, "--cache-size", "64"]);
    assert!(fs::read(m.p("f")).unwrap() == pattern(4, 9 << 20));
}

/// tests/e2e/scripts/s3faults.py in front of an S3 server: failing the share
/// of requests written in its control file.
struct FaultProxy {
    endpoint: String,
    share_file: std::path::PathBuf,
    child: std::process::Child,
}

impl FaultProxy {
    fn start(upstream: u16, share_file: &std::path::Path) -> FaultProxy {
        fs::write(share_file, "0").unwrap();
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/s3faults.py");
        // port 0: the proxy binds a free port itself and says which
        let mut child = std::process::Command::new("python3")
            .arg(script)
            .args(["0".to_string(), upstream.to_string()])
            .arg(share_file)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut ready = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut ready,
        )
        .unwrap();
        let port = ready
            .trim()
            .strip_prefix("ready ")
            .and_then(|p| p.parse::<u16>().ok())
            .unwrap_or_else(|| panic!("s3faults.py said {ready:?}, not \"ready PORT\""));
        FaultProxy {
            endpoint: format!("http://127.0.0.1:{port}"),
            share_file: share_file.to_path_buf(),
            child,
        }
    }

    fn fail_share(&self, share: f64) {
        fs::write(&self.share_file, share.to_string()).unwrap();
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn reads_and_writes_ride_through_a_faulty_s3() {
    let s3 = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let proxy = FaultProxy::start(s3.port, &dir.path().join("share"));
    let v = Volume::s3_at("s3faults", &proxy.endpoint, "jfs-e2e-faults");
    // (an attempt that stalls is tried again after 2 s, not a minute)
    let faulty = ["--object-timeout", "2"];
    let a = v.mount("a", &faulty);
    // from now on one request in six gets 503 SlowDown, 500, a reset
    // connection or (GETs) a body cut short
    proxy.fail_share(0.17);
    let sizes = [1usize, 4096, 100_000, 3 << 20, 5 << 20];
    for (i, size) in sizes.iter().enumerate() {
        let mut f = File::create(a.p(&format!("f{i}"))).unwrap();
        f.write_all(&pattern(i as u64, *size)).unwrap();
        f.sync_all().unwrap();
    }
    // read back by a mount that has nothing cached
    let b = v.mount("b", &faulty);
    for (i, size) in sizes.iter().enumerate() {
        let got = fs::read(b.p(&format!("f{i}"))).unwrap();
        assert!(got == pattern(i as u64, *size), "f{i}: wrong bytes");
    }
    proxy.fail_share(0.0);
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
}
