//! TLS to PostgreSQL: a cluster that takes TLS connections only (pg_hba
//! `hostssl`, certificates made here with openssl); a mount with
//! `sslmode=verify-full` works over it, and every certificate case (v1 and
//! v3 certificates, names in the CN or the alternative names, host names
//! and addresses, missing or untrusted CAs, client keys) is accepted or
//! refused by jfs exactly as psql accepts or refuses it.
use std::fs;
use std::path::Path;
use std::process::Command;

use jfs_e2e::{eventually, jfs, mount_at, ok, Cluster, PrivateVolume, PRIVATE_CLIENT};

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

/// A server certificate `NAME.crt` for CN=localhost signed by CA `ca`,
/// with `NAME.key` readable by the postgres user only. `extensions` are
/// its X.509 v3 extensions; without them it is an X.509 v1 certificate,
/// as the PostgreSQL manual's recipe makes it.
fn make_server_cert(dir: &Path, name: &str, extensions: Option<&str>) {
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
            &format!("{name}.key"),
            "-out",
            &format!("{name}.csr"),
        ],
    );
    let mut args: Vec<String> = [
        "x509",
        "-req",
        "-in",
        &format!("{name}.csr"),
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "2",
        "-out",
        &format!("{name}.crt"),
    ]
    .map(String::from)
    .to_vec();
    if let Some(extensions) = extensions {
        fs::write(dir.join(format!("{name}.ext")), format!("{extensions}\n")).unwrap();
        args.extend(["-extfile".to_string(), format!("{name}.ext")]);
    }
    openssl(dir, &args.iter().map(String::as_str).collect::<Vec<_>>());
    let key = dir.join(format!("{name}.key"));
    ok(Command::new("chown").arg("postgres").arg(&key));
    ok(Command::new("chmod").arg("600").arg(&key));
}

/// A client certificate (`client.crt`, `client.key`) signed by CA `ca`.
fn make_client_cert(dir: &Path) {
    make_server_cert(dir, "client", Some("basicConstraints=CA:FALSE"));
    ok(Command::new("chown")
        .arg("root")
        .arg(dir.join("client.key")));
}

/// The file under HOME that psql and jfs are told holds the system's CAs
/// (OpenSSL's SSL_CERT_FILE).
const SYSTEM_CAS: &str = "system-cas.pem";

/// `jfs status META_URL` with HOME at `home`: its exit status and what
/// it said.
fn status(url: &str, home: &Path) -> (bool, String) {
    let out = jfs()
        .args(["status", url])
        .env("HOME", home)
        .env("SSL_CERT_FILE", home.join(SYSTEM_CAS))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() {
        eprintln!("refused: {}", said.trim());
    }
    (
        out.status.success(),
        said + &String::from_utf8_lossy(&out.stdout),
    )
}

/// `psql URL` with HOME at `home`: whether it connected, and what it said.
fn psql(url: &str, home: &Path) -> (bool, String) {
    let out = Command::new("psql")
        .args(["-XAtq", url, "-c", "SELECT 1"])
        .env("HOME", home)
        .env("SSL_CERT_FILE", home.join(SYSTEM_CAS))
        .env("PGCONNECT_TIMEOUT", "5")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).trim().to_string(),
    )
}

/// Serves the certificate `NAME.crt` from now on.
fn serve_certificate(pg: &Cluster, dir: &Path, name: &str) {
    let file = |ext: &str| {
        dir.join(format!("{name}.{ext}"))
            .to_str()
            .unwrap()
            .to_string()
    };
    pg.sql(
        "postgres",
        &format!("ALTER SYSTEM SET ssl_cert_file = '{}'", file("crt")),
    );
    pg.sql(
        "postgres",
        &format!("ALTER SYSTEM SET ssl_key_file = '{}'", file("key")),
    );
    pg.sql("postgres", "SELECT pg_reload_conf()");
    // a new backend sees the setting once the postmaster has reloaded,
    // and it reloads its TLS context in the same step
    assert!(
        eventually(10, || pg.sql("postgres", "SHOW ssl_cert_file")
            == file("crt")),
        "the server took up {name}.crt"
    );
}

/// A directory (readable by the postgres user) with two CAs: `ca`, which
/// signs the certificates made in it, and `other`.
fn certificates() -> tempfile::TempDir {
    let certs = tempfile::tempdir().unwrap();
    ok(Command::new("chmod").arg("755").arg(certs.path()));
    make_ca(certs.path(), "ca");
    make_ca(certs.path(), "other");
    certs
}

/// A volume on a private cluster serving certificate `cert` (of `dir`)
/// whose TCP connections must be TLS (the unix socket stays for the
/// test's own psql).
fn tls_only_volume(name: &str, dir: &Path, cert: &str) -> PrivateVolume {
    let file = |ext: &str| {
        dir.join(format!("{cert}.{ext}"))
            .to_str()
            .unwrap()
            .to_string()
    };
    let s = PrivateVolume::new(
        name,
        &[
            "ssl = on",
            &format!("ssl_cert_file = '{}'", file("crt")),
            &format!("ssl_key_file = '{}'", file("key")),
            "listen_addresses = '127.0.0.1'",
        ],
    );
    let hba = s.pg.dir.join("data/pg_hba.conf");
    fs::write(
        &hba,
        "local all all trust\nhostssl all all 127.0.0.1/32 trust\nhost all all 127.0.0.1/32 reject\n",
    )
    .unwrap();
    ok(Command::new("chown").arg("postgres").arg(&hba));
    s.pg.pg_ctl("reload");
    s
}

#[test]
fn mounts_speak_tls_to_postgres_and_check_whom_they_speak_to() {
    let certs = certificates();
    let dir = certs.path();
    make_server_cert(dir, "server", Some("subjectAltName=DNS:localhost"));
    let file = |name: &str| dir.join(name).to_str().unwrap().to_string();
    let s = tls_only_volume("tls", dir, "server");
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
    let home = tempfile::tempdir().unwrap();
    let (fine, said) = status(&verified, home.path());
    assert!(fine, "{said}");
}

/// Every certificate case as psql sees it and as jfs sees it: accepted by
/// both or refused by both, for the same reason in the host name cases.
#[test]
fn tls_options_mean_what_they_mean_in_libpq() {
    let certs = certificates();
    let dir = certs.path();
    make_server_cert(dir, "san", Some("subjectAltName=DNS:localhost"));
    make_server_cert(dir, "v1", None);
    make_server_cert(dir, "cn", Some("basicConstraints=CA:FALSE"));
    make_server_cert(dir, "ip", Some("subjectAltName=IP:127.0.0.1"));
    make_client_cert(dir);
    let file = |name: &str| dir.join(name).to_str().unwrap().to_string();
    let s = tls_only_volume("tls-cases", dir, "san");
    // no ~/.postgresql: each case says what it trusts; the system's CAs
    // include the one that signed the server's certificates, which a
    // verify mode given another CA file must not trust (libpq does not)
    let home = tempfile::tempdir().unwrap();
    fs::copy(dir.join("ca.crt"), home.path().join(SYSTEM_CAS)).unwrap();
    let ca = format!("sslrootcert={}", file("ca.crt"));
    let other = format!("sslrootcert={}", file("other.crt"));
    let client = format!(
        "sslcert={}&sslkey={}",
        file("client.crt"),
        file("client.key")
    );
    // (certificate served, host, options, accepted)
    let cases: Vec<(&str, &str, String, bool)> = vec![
        (
            "san",
            "localhost",
            format!("sslmode=verify-full&{ca}"),
            true,
        ),
        (
            "san",
            "127.0.0.1",
            format!("sslmode=verify-full&{ca}"),
            false,
        ),
        (
            "san",
            "localhost",
            format!("sslmode=verify-full&{other}"),
            false,
        ),
        ("san", "127.0.0.1", format!("sslmode=verify-ca&{ca}"), true),
        ("san", "127.0.0.1", "sslmode=require".into(), true),
        // a CA file makes require check the chain; a missing one is ignored
        (
            "san",
            "127.0.0.1",
            format!("sslmode=require&{other}"),
            false,
        ),
        (
            "san",
            "127.0.0.1",
            "sslmode=require&sslrootcert=/nonexistent".into(),
            true,
        ),
        ("san", "localhost", "sslmode=verify-full".into(), false),
        (
            "san",
            "localhost",
            "sslmode=verify-full&sslrootcert=/nonexistent".into(),
            false,
        ),
        ("san", "localhost", "sslmode=disable".into(), false),
        ("san", "localhost", "sslmode=verify-all".into(), false),
        // the manual's recipe: X.509 v1, named by its CN
        ("v1", "localhost", format!("sslmode=verify-full&{ca}"), true),
        (
            "v1",
            "127.0.0.1",
            format!("sslmode=verify-full&{ca}"),
            false,
        ),
        ("v1", "127.0.0.1", format!("sslmode=verify-ca&{ca}"), true),
        (
            "v1",
            "localhost",
            format!("sslmode=verify-full&{other}"),
            false,
        ),
        ("cn", "localhost", format!("sslmode=verify-full&{ca}"), true),
        (
            "cn",
            "127.0.0.1",
            format!("sslmode=verify-full&{ca}"),
            false,
        ),
        // an IP address name; the CN still counts for a DNS name
        ("ip", "127.0.0.1", format!("sslmode=verify-full&{ca}"), true),
        ("ip", "localhost", format!("sslmode=verify-full&{ca}"), true),
        // a client certificate, and its key's permissions
        (
            "san",
            "localhost",
            format!("sslmode=verify-full&{ca}&{client}"),
            true,
        ),
        (
            "san",
            "localhost",
            format!("sslmode=verify-full&{ca}&sslcert={}", file("client.crt")),
            false,
        ),
    ];
    let mut served = "";
    let mut disagreements = Vec::new();
    for (certificate, host, options, accepted) in &cases {
        if served != *certificate {
            serve_certificate(&s.pg, dir, certificate);
            served = certificate;
        }
        let url = format!(
            "postgres://{PRIVATE_CLIENT}@{host}:{}/vol?{options}",
            s.pg.port
        );
        let (psql_fine, psql_said) = psql(&url, home.path());
        let (jfs_fine, jfs_said) = status(&url, home.path());
        eprintln!("{certificate} {host} {options}: psql {psql_fine} ({psql_said}), jfs {jfs_fine}");
        // a host name refusal is refused for the same reason, in the same words
        let reason = psql_said
            .find("server certificate for")
            .map(|at| psql_said[at..].lines().next().unwrap_or_default());
        let same_reason = reason.is_none_or(|reason| jfs_said.contains(reason));
        if psql_fine != *accepted || jfs_fine != *accepted || !same_reason {
            disagreements.push(format!(
                "{certificate} cert, host {host}, {options}: expected {accepted}, psql {psql_fine} \
                 ({psql_said}), jfs {jfs_fine} ({})",
                jfs_said.trim()
            ));
        }
    }
    // a key others can read is refused, as libpq refuses it
    ok(Command::new("chmod").arg("644").arg(dir.join("client.key")));
    let url = format!(
        "postgres://{PRIVATE_CLIENT}@localhost:{}/vol?sslmode=verify-full&{ca}&{client}",
        s.pg.port
    );
    let (psql_fine, psql_said) = psql(&url, home.path());
    let (jfs_fine, jfs_said) = status(&url, home.path());
    if psql_fine || jfs_fine || !jfs_said.contains("group or world access") {
        disagreements.push(format!(
            "client key 0644: psql {psql_fine} ({psql_said}), jfs {jfs_fine} ({})",
            jfs_said.trim()
        ));
    }
    assert!(disagreements.is_empty(), "{}", disagreements.join("\n"));
}
