//! What an operator watches: a mount's Prometheus endpoint (counters move
//! with file operations), `jfs stats` (a line of figures per interval),
//! `jfs status` (extension and client versions, each mount's metrics
//! address) and the volume's figures in SQL (view `jfs.metrics`).
use std::fs;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};

use jfs_e2e::{jfs, ok, pattern, Mount, Volume};

/// `GET path` on `addr`: (status line, body).
fn http_get(addr: &str, path: &str) -> (String, String) {
    let mut stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").expect("an HTTP answer");
    (head.lines().next().unwrap().to_string(), body.to_string())
}

/// The sum of the series of `name` whose labels include `label` (e.g.
/// `op="write"`; "" for all).
fn value(text: &str, name: &str, label: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit_once(' '))
        .filter(|(key, _)| {
            let series = key.split('{').next().unwrap();
            series == name && key.contains(label)
        })
        .map(|(_, v)| v.parse::<f64>().unwrap())
        .sum()
}

/// The metrics address `jfs status` shows for the mount at `mount`.
fn status_metrics_addr(v: &Volume, mount: &Mount) -> String {
    let out = ok(jfs().args(["status", &v.url]));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let path = mount.path.canonicalize().unwrap();
    let line = text
        .lines()
        .find(|l| l.contains(&format!(" {} ", path.display())))
        .unwrap_or_else(|| panic!("no session of {} in:\n{text}", path.display()));
    assert!(
        line.contains(&format!("client {}", env!("CARGO_PKG_VERSION"))),
        "{line}"
    );
    let installed = v.sql("SELECT extversion FROM pg_extension WHERE extname = 'jfs'");
    assert!(
        text.contains(&format!("extension {installed}, this client")),
        "{text}"
    );
    line.split("metrics ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no metrics address in {line}"))
        .to_string()
}

#[test]
fn a_mount_serves_metrics_that_move_with_its_work() {
    let v = Volume::new("metrics-endpoint");
    let m = v.mount("a", &[]);
    let addr = status_metrics_addr(&v, &m);
    assert!(addr.starts_with("127.0.0.1:"), "{addr}");

    let (status, before) = http_get(&addr, "/metrics");
    assert!(status.contains("200"), "{status}");
    assert!(
        before.contains("volume=\"metrics-endpoint\""),
        "labelled by volume"
    );

    let data = pattern(7, 3 << 20);
    fs::write(m.p("f"), &data).unwrap();
    assert_eq!(fs::read(m.p("f")).unwrap(), data);
    fs::create_dir(m.p("d")).unwrap();
    assert!(fs::metadata(m.p("missing")).is_err());

    let (_, after) = http_get(&addr, "/metrics");
    let moved = |name: &str, label: &str| value(&after, name, label) - value(&before, name, label);
    assert!(
        moved("jfs_fuse_written_bytes_total", "") >= data.len() as f64,
        "written bytes"
    );
    assert!(
        moved("jfs_fuse_read_bytes_total", "") >= data.len() as f64,
        "read bytes"
    );
    for op in ["create", "write", "flush", "mkdir", "lookup"] {
        let label = format!("op=\"{op}\"");
        assert!(
            moved("jfs_fuse_op_duration_seconds_count", &label) >= 1.0,
            "FUSE {op} counted"
        );
    }
    assert!(
        moved("jfs_fuse_errors_total", "op=\"lookup\"") >= 1.0,
        "the missing name's ENOENT"
    );
    assert!(
        moved(
            "jfs_meta_call_duration_seconds_count",
            "procedure=\"mknod\""
        ) >= 1.0
    );
    assert!(moved("jfs_object_bytes_total", "op=\"put\"") >= data.len() as f64);
    assert!(moved("jfs_object_request_duration_seconds_count", "op=\"put\"") >= 1.0);
    assert!(value(&after, "jfs_process_resident_bytes", "") > 0.0);
    assert_eq!(
        value(&after, "jfs_write_buffer_bytes", ""),
        0.0,
        "every buffer given back once the file is closed"
    );

    let (status, _) = http_get(&addr, "/nothing");
    assert!(status.contains("404"), "{status}");

    // `jfs stats --count 2`: the header, then two lines of figures
    let writer = {
        let path = m.p("g");
        std::thread::spawn(move || {
            for i in 0..10 {
                fs::write(&path, pattern(i, 1 << 20)).unwrap();
                std::thread::sleep(std::time::Duration::from_millis(150));
            }
        })
    };
    let out = ok(jfs()
        .args(["stats", "--count", "2", "--interval", "0.5"])
        .arg(&m.path));
    writer.join().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let titles = text
        .lines()
        .find(|l| l.trim_start().starts_with("cpu%"))
        .unwrap_or_else(|| panic!("no titles in:\n{text}"));
    let figures = figure_lines(&text);
    assert_eq!(figures.len(), 2, "{text}");
    for l in &figures {
        assert_eq!(l.len(), titles.len(), "aligned with the titles:\n{text}");
        for word in l.split_whitespace().filter(|w| *w != "|" && *w != "-") {
            word.parse::<f64>()
                .unwrap_or_else(|_| panic!("{word:?} is not a number in {l}"));
        }
    }
    // the writer's MiB/s (FUSE write, then object out); jfs stats's own
    // requests to the control file are not counted as the mount's work
    let column = |title: &str| titles.split_whitespace().position(|w| w == title).unwrap();
    let sum = |i: usize| -> f64 {
        figures
            .iter()
            .map(|l| l.split_whitespace().nth(i).unwrap().parse::<f64>().unwrap())
            .sum()
    };
    assert!(sum(column("write")) > 0.0, "the writes show:\n{text}");
    assert!(sum(column("out")) > 0.0, "the uploads show:\n{text}");
    let quiet = ok(jfs()
        .args(["stats", "--count", "2", "--interval", "0.3"])
        .arg(&m.path));
    let quiet = String::from_utf8_lossy(&quiet.stdout).into_owned();
    let titles = quiet
        .lines()
        .find(|l| l.trim_start().starts_with("cpu%"))
        .unwrap();
    let read_column = titles.split_whitespace().position(|w| w == "read").unwrap();
    for l in figure_lines(&quiet) {
        let read: f64 = l
            .split_whitespace()
            .nth(read_column)
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(
            read, 0.0,
            "reading the metrics is not reading files:\n{quiet}"
        );
    }
}

/// The lines of `jfs stats` output that hold figures.
fn figure_lines(text: &str) -> Vec<&str> {
    text.lines()
        .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
        .collect()
}

#[test]
fn the_address_is_chosen_or_refused_and_can_be_off() {
    let v = Volume::new("metrics-addr");
    // an address asked for is used
    let free = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = free.local_addr().unwrap().to_string();
    drop(free);
    let a = v.mount("a", &["--metrics", &addr]);
    assert_eq!(status_metrics_addr(&v, &a), addr);
    let (status, _) = http_get(&addr, "/metrics");
    assert!(status.contains("200"), "{status}");

    // taken: the mount stops and says why, before anything is mounted
    let dir = v.dir.path().join("mnt-b");
    fs::create_dir_all(&dir).unwrap();
    let out = jfs()
        .args(["mount", &v.url])
        .arg(&dir)
        .args(["--metrics", &addr])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains(&format!("--metrics {addr}")), "{err}");
    assert!(err.contains("in use"), "{err}");

    // two mounts left to the default: each its own port, both served
    let d = v.mount("d", &[]);
    let e = v.mount("e", &[]);
    let (at_d, at_e) = (status_metrics_addr(&v, &d), status_metrics_addr(&v, &e));
    assert_ne!(at_d, at_e);
    for at in [&at_d, &at_e] {
        let (status, body) = http_get(at, "/metrics");
        assert!(status.contains("200"), "{status}");
        assert!(body.contains("jfs_build_info"), "{body}");
    }

    // off: no address, yet `jfs stats` reads the mount through its control file
    let c = v.mount("c", &["--no-metrics"]);
    assert_eq!(status_metrics_addr(&v, &c), "-");
    let out = ok(jfs()
        .args(["stats", "--count", "1", "--interval", "0.2"])
        .arg(&c.path));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(figure_lines(&text).len(), 1, "{text}");
}

#[test]
fn the_volume_figures_are_one_sql_view_for_a_reader() {
    let v = Volume::new("metrics-view");
    let m = v.mount("a", &[]);
    fs::create_dir(m.p("team")).unwrap();
    fs::write(m.p("team/f"), pattern(1, 10_000)).unwrap();
    ok(jfs().args([
        "quota",
        "set",
        &v.admin_url,
        "--path",
        "/team",
        "--inodes",
        "100",
    ]));
    let rows =
        v.reader_sql("SELECT metric || ' ' || key || ' ' || value FROM jfs.metrics ORDER BY 1");
    let get = |metric: &str, key: &str| -> f64 {
        let prefix = format!("{metric} {key} ");
        rows.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("no {metric} {key:?} in:\n{rows}"))
            .parse()
            .unwrap()
    };
    assert_eq!(get("used_inodes", ""), 3.0, "root, team, team/f");
    assert_eq!(get("sessions", ""), 1.0);
    assert_eq!(get("quota_max_inodes", "dir:/team"), 100.0);
    assert_eq!(get("quota_used_inodes", "dir:/team"), 1.0);
    assert!(get("used_bytes", "") >= 10_000.0);
    assert_eq!(get("tier_files", "0"), 1.0, "one file, in the default tier");
    assert_eq!(get("tier_bytes", "0"), 10_000.0);
    assert_eq!(get("tier_files", "1"), 0.0);
    drop(m);
}

#[test]
fn a_listing_fills_each_reply_to_the_kernel() {
    // (the requests counted in the metrics: an `ls -l` of 1000 entries is a
    // few dozen pages, not a request per entry)
    let v = Volume::new("metrics-listing");
    let m = v.mount("a", &[]);
    let addr = status_metrics_addr(&v, &m);
    fs::create_dir(m.p("d")).unwrap();
    for i in 0..1000 {
        fs::File::create(m.p(&format!("d/entry-with-a-longish-name-{i:04}"))).unwrap();
    }
    let listings = || {
        let (_, text) = http_get(&addr, "/metrics");
        let count = "jfs_fuse_op_duration_seconds_count";
        value(&text, count, "op=\"readdir\"") + value(&text, count, "op=\"readdirplus\"")
    };
    let before = listings();
    let mut listed = 0;
    for e in fs::read_dir(m.p("d")).unwrap() {
        e.unwrap().metadata().unwrap();
        listed += 1;
    }
    assert_eq!(listed, 1000);
    let requests = listings() - before;
    assert!(
        (1.0..=200.0).contains(&requests),
        "{requests} listing requests for 1000 entries"
    );
}
