//! TLS to PostgreSQL: a cluster that takes TLS connections only (pg_hba
//! `hostssl`, certificates made here with openssl); a mount with
//! `sslmode=verify-full` works over it, and a wrong host name, an untrusted
//! CA or `sslmode=disable` are refused with a message that says why.
use std::fs;
use std::path::Path;
use std::process::Command;

use jfs_e2e::{jfs, mount_at, ok, PrivateVolume, PRIVATE_CLIENT};

/// Runs openssl in `dir`.
fn openssl(dir: &Path, args: &[&str]) {
    ok(Command::new("openssl").current_dir(dir).args(args));
}

/// A CA (`NAME.crt`, `NAME.key`) in `dir`.
fn make_ca(dir: &Path, name: &str) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "2",
            "-subj",
            &format!("/CN={name}"),
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.crt"),
        ],
    );
}

/// server.crt (for DNS name localhost only, signed by CA `ca`) and
/// server.key, readable by the postgres user only.
fn make_server_cert(dir: &Path) {
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-subj",
            "/CN=localhost",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
        ],
    );
    fs::write(dir.join("san.ext"), "subjectAltName=DNS:localhost\n").unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "san.ext",
            "-out",
            "server.crt",
        ],
    );
    ok(Command::new("chown")
        .arg("postgres")
        .arg(dir.join("server.key")));
    ok(Command::new("chmod").arg("600").arg(dir.join("server.key")));
}

/// `jfs status META_URL`: its exit status and what it said.
fn status(url: &str) -> (bool, String) {
    let out = jfs().args(["status", url]).output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() {
        eprintln!("refused: {}", said.trim());
    }
    (
        out.status.success(),
        said + &String::from_utf8_lossy(&out.stdout),
    )
}

#[test]
fn mounts_speak_tls_to_postgres_and_check_whom_they_speak_to() {
    let certs = tempfile::tempdir().unwrap();
    let dir = certs.path();
    ok(Command::new("chmod").arg("755").arg(dir));
    make_ca(dir, "ca");
    make_ca(dir, "other");
    make_server_cert(dir);
    let file = |name: &str| dir.join(name).to_str().unwrap().to_string();
    let s = PrivateVolume::new(
        "tls",
        &[
            "ssl = on",
            &format!("ssl_cert_file = '{}'", file("server.crt")),
            &format!("ssl_key_file = '{}'", file("server.key")),
            "listen_addresses = '127.0.0.1'",
        ],
    );
    // TCP takes TLS only; the unix socket stays for the test's own psql
    let hba = s.pg.dir.join("data/pg_hba.conf");
    fs::write(
        &hba,
        "local all all trust\nhostssl all all 127.0.0.1/32 trust\nhost all all 127.0.0.1/32 reject\n",
    )
    .unwrap();
    ok(Command::new("chown").arg("postgres").arg(&hba));
    s.pg.pg_ctl("reload");
    let url = |host: &str, options: &str| {
        format!(
            "postgres://{PRIVATE_CLIENT}@{host}:{}/vol?{options}",
            s.pg.port
        )
    };

    let verified = url(
        "localhost",
        &format!("sslmode=verify-full&sslrootcert={}", file("ca.crt")),
    );
    let m = mount_at(
        &verified,
        &s.base.join("mnt"),
        &s.base.join("mount.log"),
        &[],
    );
    fs::write(m.p("f"), b"over tls").unwrap();
    assert_eq!(fs::read(m.p("f")).unwrap(), b"over tls");
    assert_eq!(
        s.pg.sql(
            "vol",
            &format!(
                "SELECT bool_and(t.ssl) AND count(*) > 0 FROM pg_stat_ssl t \
                 JOIN pg_stat_activity a USING (pid) WHERE a.usename = '{PRIVATE_CLIENT}'"
            )
        ),
        "t",
        "every connection of the mount is TLS"
    );
    let (fine, said) = status(&verified);
    assert!(fine, "{said}");

    // a certificate for another name, a CA not trusted, no TLS at all
    let (fine, said) = status(&url(
        "127.0.0.1",
        &format!("sslmode=verify-full&sslrootcert={}", file("ca.crt")),
    ));
    assert!(
        !fine && said.contains("not valid for name"),
        "wrong host name: {said}"
    );
    let (fine, said) = status(&url(
        "localhost",
        &format!("sslmode=verify-full&sslrootcert={}", file("other.crt")),
    ));
    assert!(
        !fine && said.contains("UnknownIssuer"),
        "untrusted CA: {said}"
    );
    let (fine, said) = status(&url("localhost", "sslmode=disable"));
    assert!(
        !fine && said.contains("pg_hba.conf rejects"),
        "no TLS: {said}"
    );
    // verify-ca trusts the CA whatever the name; require encrypts only
    let (fine, said) = status(&url(
        "127.0.0.1",
        &format!("sslmode=verify-ca&sslrootcert={}", file("ca.crt")),
    ));
    assert!(fine, "verify-ca: {said}");
    let (fine, said) = status(&url("127.0.0.1", "sslmode=require"));
    assert!(fine, "require: {said}");
    let (fine, said) = status(&url("localhost", "sslmode=verify-full"));
    assert!(
        !fine && said.contains("sslrootcert"),
        "verify-full without a CA: {said}"
    );
}
