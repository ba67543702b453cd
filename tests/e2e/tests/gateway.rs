//! The S3 gateway as an attacker tries it (issue 54): a local user of a
//! mount moving the gateway's directory aside and planting one of their
//! own; a client role doing the same through SQL; an unauthenticated client
//! holding hundreds of half-open connections.
use std::io::Write;
use std::net::TcpStream;
use std::process::{Command, Output};
use std::time::Duration;

use jfs_e2e::*;

/// Runs `sh -c script` as uid/gid 65534 (nobody), no supplementary groups.
fn as_nobody(script: &str) -> Output {
    Command::new("setpriv")
        .args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
        .args(["sh", "-c", script])
        .output()
        .unwrap()
}

/// A PUT of `data` to `path` answered 200, and a GET that gives it back.
fn put_and_get(g: &Gateway, path: &str, data: &str) {
    let put = g.signed(30, &["-X", "PUT", "--data-binary", data], path);
    assert_eq!(status(&put), "200", "PUT {path}: {put:?}");
    let get = g.signed(30, &[], path);
    assert_eq!(status(&get), "200", "GET {path}: {get:?}");
    assert_eq!(body(&get), data, "GET {path} gives what was PUT");
}

#[test]
fn nobody_else_can_move_or_replace_the_gateways_directory() {
    let v = Volume::new("gw-own-dir");
    let m = v.mount("m", &["--allow-other"]);
    std::fs::create_dir(m.p("bucket")).unwrap();
    let g = Gateway::start(&v);
    put_and_get(&g, "/bucket/first", "the gateway's own bytes");

    // a local user of the mount: the root is 0777 without the sticky bit,
    // yet the gateway's directory may be neither moved nor replaced
    let root_mode = std::fs::metadata(m.p("")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(root_mode.permissions().mode() & 0o1777, 0o777);
    let moved = as_nobody(&format!(
        "mv {d}/.jfs-gateway {d}/aside",
        d = m.p("").display()
    ));
    assert!(
        !moved.status.success(),
        "nobody moved the gateway's directory aside"
    );
    assert!(
        String::from_utf8_lossy(&moved.stderr).contains("Operation not permitted"),
        "{moved:?}"
    );
    for script in [
        "rmdir {d}/.jfs-gateway",
        "mkdir {d}/elsewhere && mv {d}/elsewhere {d}/.jfs-gateway",
        "ln -s /tmp {d}/.jfs-gateway",
    ] {
        let tried = as_nobody(&script.replace("{d}", &m.p("").display().to_string()));
        assert!(!tried.status.success(), "{script}: {tried:?}");
    }
    // not even root through a mount
    assert_eq!(
        std::fs::rename(m.p(".jfs-gateway"), m.p("aside"))
            .unwrap_err()
            .raw_os_error(),
        Some(libc::EPERM)
    );
    // nor can anyone but the gateway's user look inside
    let listed = as_nobody(&format!("ls {}", m.p(".jfs-gateway/tmp").display()));
    assert!(!listed.status.success(), "{listed:?}");

    // a client role moves it through SQL and plants its own, open to all:
    // the running gateway keeps to the directory it made
    let plant = |sql: &str| {
        psql_as(CLIENT_ROLE, "attacker", &v.db, sql).unwrap_or_else(|e| panic!("{sql}: {e}"))
    };
    assert_eq!(
        plant("SELECT errno FROM jfs.rename(1, '.jfs-gateway', 1, 'aside')"),
        "0"
    );
    let planted = plant("SELECT inode FROM jfs.mknod(1, '.jfs-gateway', 2, 511, 65534, 65534)");
    assert_eq!(
        plant(&format!(
            "SELECT errno FROM jfs.mknod({planted}, 'tmp', 2, 511, 65534, 65534)"
        )),
        "0"
    );
    // a PUT of 64 MiB, the planted directory watched meanwhile: what an
    // attacker could swap would show there
    let big = v.dir.path().join("big");
    std::fs::write(&big, vec![b'g'; 64 << 20]).unwrap();
    let planted_tmp = m.p(".jfs-gateway/tmp");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut seen = 0;
            while !stop.load(std::sync::atomic::Ordering::Acquire) {
                seen = seen.max(std::fs::read_dir(&planted_tmp).unwrap().count());
                std::thread::sleep(Duration::from_millis(5));
            }
            seen
        })
    };
    let put = g.signed(
        120,
        &["-X", "PUT", "--data-binary", &format!("@{}", big.display())],
        "/bucket/big",
    );
    stop.store(true, std::sync::atomic::Ordering::Release);
    assert_eq!(status(&put), "200", "{put:?}");
    assert_eq!(
        watcher.join().unwrap(),
        0,
        "the PUT wrote into the planted directory"
    );
    assert_eq!(
        std::fs::read(m.p("bucket/big")).unwrap(),
        std::fs::read(&big).unwrap()
    );
    put_and_get(&g, "/bucket/second", "still the gateway's own bytes");
    drop(g);

    // a gateway started now finds a directory not its own and says so
    let log = v.dir.path().join("gateway.log");
    let refused = Gateway::start_logged(&v, &[], log)
        .err()
        .expect("a gateway started");
    assert!(
        refused.contains("is owned by uid 65534 with mode 0777"),
        "{refused}"
    );
    assert!(refused.contains("remove it"), "{refused}");
}

/// Opens `n` connections to `address` that send part of a request's
/// headers and then nothing (as many as the gateway lets open).
fn half_open(address: &str, n: usize) -> Vec<TcpStream> {
    let mut held = Vec::new();
    for _ in 0..n {
        match TcpStream::connect_timeout(&address.parse().unwrap(), Duration::from_secs(2)) {
            Ok(mut s) => {
                let _ = s.write_all(b"GET /bucket/key HTTP/1.1\r\nHost: x\r\n");
                held.push(s);
            }
            Err(_) => break,
        }
    }
    held
}

/// The end of a log, for a failure's message.
fn log_tail(log: &std::path::Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let start = text.len().saturating_sub(4000);
    text[text.ceil_char_boundary(start)..].to_string()
}

#[test]
fn half_open_connections_do_not_take_the_gateway_down() {
    let v = Volume::new("gw-half-open");
    let m = v.mount("m", &[]);
    std::fs::create_dir(m.p("bucket")).unwrap();
    let log = v.dir.path().join("gateway.log");
    // 256 descriptors: 300 connections would exhaust them
    let g = Gateway::start_logged(&v, &["prlimit", "--nofile=256:256"], log.clone())
        .unwrap_or_else(|e| panic!("{e}"));
    put_and_get(&g, "/bucket/key", "served under siege");

    let held = half_open(g.address(), 300);
    assert_eq!(held.len(), 300, "the connections were made");
    // a signed request is still answered, within a few seconds
    for round in 0..3 {
        let get = g.signed(5, &[], "/bucket/key");
        assert_eq!(
            status(&get),
            "200",
            "round {round} under 300 half-open connections: {get:?}\n{}",
            log_tail(&log)
        );
        assert_eq!(body(&get), "served under siege");
    }
    // more of them, while the first still hang
    let more = half_open(g.address(), 300);
    let get = g.signed(5, &[], "/bucket/key");
    assert_eq!(status(&get), "200", "under 600: {get:?}");
    let logged = std::fs::metadata(&log).unwrap().len();
    assert!(logged < 256 << 10, "the log grew to {logged} bytes");
    drop(held);
    drop(more);
    put_and_get(&g, "/bucket/after", "and after");
}

/// A gateway run as nobody, in supplementary group 5000, on a volume with
/// ACLs on: it serves what the kernel lets nobody read through a mount and
/// refuses what it refuses (it once went by the permission bits alone and
/// ignored supplementary groups).
#[test]
fn a_gateway_run_as_a_user_answers_as_its_acls_and_groups_allow() {
    let v = Volume::with_options("gw-acl", &["--enable-acl"]);
    let m = v.mount("m", &["--allow-other"]);
    let bucket = m.p("bucket");
    std::fs::create_dir(&bucket).unwrap();
    let file = |name: &str, mode: &str, acl: &str| {
        let f = bucket.join(name);
        std::fs::write(&f, name).unwrap();
        ok(Command::new("chmod").arg(mode).arg(&f));
        ok(Command::new("setfacl").args(["-m", acl]).arg(&f));
    };
    file("denied", "0644", "u:65534:---");
    file("team", "0600", "g:5000:r");
    file("others", "0600", "g:6000:r");
    // what the kernel answers nobody in group 5000 through the mount
    let cat = |name: &str| {
        Command::new("setpriv")
            .args([
                "--reuid", "65534", "--regid", "65534", "--groups", "5000", "cat",
            ])
            .arg(bucket.join(name))
            .output()
            .unwrap()
            .status
            .success()
    };
    assert_eq!(
        (cat("denied"), cat("team"), cat("others")),
        (false, true, false)
    );

    // (CAP_DAC_OVERRIDE kept only to reach the test cluster's private
    // socket: jfs decides by the process's uid and groups alone)
    let launcher = [
        "setpriv",
        "--reuid",
        "65534",
        "--regid",
        "65534",
        "--groups",
        "5000",
        "--inh-caps",
        "+dac_override",
        "--ambient-caps",
        "+dac_override",
    ];
    let log = v.dir.path().join("gateway.log");
    let g = Gateway::start_logged(&v, &launcher, log).unwrap_or_else(|e| panic!("{e}"));
    let get = |name: &str| status(&g.signed(10, &[], &format!("/bucket/{name}")));
    assert_eq!(
        get("denied"),
        "403",
        "user:nobody:--- refuses what other's r-- would grant"
    );
    assert_eq!(
        get("team"),
        "200",
        "group:5000:r-- grants a member by a supplementary group"
    );
    assert_eq!(get("others"), "403");
    assert_eq!(body(&g.signed(10, &[], "/bucket/team")), "team");
}

/// Multipart uploads are listed (ListMultipartUploads), and one abandoned,
/// with a file a crashed gateway left written aside, is removed after
/// --upload-expiry; a completed upload is kept whole.
#[test]
fn abandoned_uploads_and_files_written_aside_expire() {
    let v = Volume::new("gw-expiry");
    let m = v.mount("m", &[]);
    std::fs::create_dir(m.p("bucket")).unwrap();
    let g = Gateway::start_with(&v, &["--upload-expiry", "4"]);
    let begin = |key: &str| {
        let made = g.signed(10, &["-X", "POST"], &format!("/bucket/{key}?uploads="));
        assert_eq!(status(&made), "200", "{made:?}");
        let text = body(&made);
        let id = text
            .split("<UploadId>")
            .nth(1)
            .and_then(|t| t.split("</UploadId>").next());
        id.unwrap_or_else(|| panic!("no UploadId in {text}"))
            .to_string()
    };
    let abandoned = begin("left/behind");
    let other = begin("another");
    let listed = body(&g.signed(10, &[], "/bucket?uploads="));
    assert!(
        listed.contains(&format!(
            "<Key>left/behind</Key><UploadId>{abandoned}</UploadId>"
        )) && listed.contains(&other),
        "{listed}"
    );
    let with_prefix = body(&g.signed(10, &[], "/bucket?prefix=left&uploads="));
    assert!(
        with_prefix.contains(&abandoned) && !with_prefix.contains(&other),
        "{with_prefix}"
    );
    // a file a gateway that crashed mid-PUT left aside
    std::fs::write(
        m.p(".jfs-gateway/tmp/0123456789abcdef0123456789abcdef"),
        b"half",
    )
    .unwrap();
    // the other upload completes (a part, then complete) before it expires
    let part = g.signed(
        10,
        &["-D", "-", "-X", "PUT", "--data-binary", "whole"],
        &format!("/bucket/another?partNumber=1&uploadId={other}"),
    );
    assert_eq!(status(&part), "200", "{part:?}");
    let answer = String::from_utf8_lossy(&part.stdout).to_string();
    let part_etag = answer
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("etag")
                .then(|| value.trim().to_string())
        })
        .unwrap_or_else(|| panic!("no ETag in {answer}"));
    let complete = format!(
        "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>{part_etag}</ETag></Part></CompleteMultipartUpload>"
    );
    let done = g.signed(
        10,
        &["-X", "POST", "--data-binary", &complete],
        &format!("/bucket/another?uploadId={other}"),
    );
    assert_eq!(status(&done), "200", "{done:?}");

    assert!(
        eventually(30, || !body(&g.signed(10, &[], "/bucket?uploads="))
            .contains(&abandoned)),
        "the abandoned upload is still listed"
    );
    assert!(eventually(30, || std::fs::read_dir(
        m.p(".jfs-gateway/tmp")
    )
    .unwrap()
    .count()
        == 0));
    assert_eq!(
        std::fs::read_dir(m.p(".jfs-gateway/uploads"))
            .unwrap()
            .count(),
        0
    );
    assert_eq!(body(&g.signed(10, &[], "/bucket/another")), "whole");
}

/// With --tls-cert and --tls-key the gateway speaks HTTPS: a client that
/// trusts the certificate is served, one that does not refuses it, and
/// plain HTTP gets nothing.
#[test]
fn the_gateway_serves_https_with_a_certificate() {
    let v = Volume::new("gw-tls");
    let m = v.mount("m", &[]);
    std::fs::create_dir(m.p("bucket")).unwrap();
    let dir = v.dir.path();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    ok(Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args([
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert));
    let (c, k) = (cert.display().to_string(), key.display().to_string());
    let g = Gateway::start_with(&v, &["--tls-cert", &c, "--tls-key", &k]);
    assert!(g.endpoint.starts_with("https://"), "{}", g.endpoint);
    let trusting = ["--cacert", c.as_str()];
    let put = g.signed(
        10,
        &[&trusting[..], &["-X", "PUT", "--data-binary", "sealed"]].concat(),
        "/bucket/k",
    );
    assert_eq!(status(&put), "200", "{put:?}");
    let get = g.signed(10, &trusting, "/bucket/k");
    assert_eq!(
        (status(&get).as_str(), body(&get).as_str()),
        ("200", "sealed")
    );
    let untrusting = g.signed(10, &[], "/bucket/k");
    assert_eq!(
        status(&untrusting),
        "000",
        "a client without the CA refuses it: {untrusting:?}"
    );
    let plain = Command::new("curl")
        .args([
            "-sS",
            "--max-time",
            "5",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
        ])
        .arg(format!("http://{}/bucket/k", g.address()))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&plain.stdout), "000", "{plain:?}");
    assert_eq!(std::fs::read(m.p("bucket/k")).unwrap(), b"sealed");
    // a key that is not the certificate's, or no certificate, says so
    let other = dir.join("other.pem");
    ok(Command::new("openssl")
        .args(["genrsa", "-out"])
        .arg(&other)
        .arg("2048"));
    let log = dir.join("refused.log");
    let o = other.display().to_string();
    let refused = Command::new(jfs().get_program())
        .args([
            "gateway",
            &v.url,
            "127.0.0.1:0",
            "--access-key",
            GATEWAY_KEYS.0,
        ])
        .args(["--tls-cert", &c, "--tls-key", &o])
        .env("JFS_GATEWAY_SECRET_KEY", GATEWAY_KEYS.1)
        .stderr(std::fs::File::create(&log).unwrap())
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(
        said.contains("the certificate and the private key"),
        "{said}"
    );
}
